#!/usr/bin/env bash
# fleetns.sh: make fleet's test, shortened for make check: four machines in
# network namespaces of their own behind two nginx site proxies in one
# group over a regional proxy, 32 MiB in four files, with
# proxy_cache_lock, then again with a site killed mid-run
# (tests/fleet/fleet.sh says what each case judges).
export FLEET_MOUNTS=4 FLEET_FILES=4 FLEET_MIB=32 FLEET_CASES="lock kill"
T_NAME=fleetns exec bash "$(dirname "$0")/../fleet/fleet.sh"

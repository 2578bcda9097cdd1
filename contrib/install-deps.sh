#!/usr/bin/env bash
# install-deps.sh: installs the Debian 12 packages that pacefs's build, tests and demo need
# (the metrics endpoint's libmicrohttpd, Prometheus and promtool for its test, and what
# make deb builds and checks a package with); with --bench, also those the benchmark
# (make bench) compares against and plots with.
set -euo pipefail

PKGS=(
	gcc make pkg-config
	libfuse3-dev fuse3
	libcurl4-openssl-dev libssl-dev
	liblmdb-dev lmdb-utils libxxhash-dev
	libjansson-dev
	clang libclang-rt-14-dev valgrind
	nginx-light curl openssl attr ca-certificates squid varnish trafficserver
	libxml2-dev python3-botocore s3cmd
	procps psmisc iproute2 coreutils xxd python3 strace
	libmicrohttpd-dev prometheus
	debhelper dpkg-dev lintian
)

# Only make bench needs these: the competitors, the plotting and the real
# clients it runs through each mount (ffmpeg/ffprobe, Python's zipfile and
# sqlite3), fio for mountpoint-s3's read jobs, and the data clients: GDAL
# and h5py reading a COG and an HDF5 file, squashfuse mounting an image
# that mksquashfs makes; PyTorch's DataLoader over a mount, with and
# without a read plan.
BENCH_PKGS=(rclone httpdirfs gnuplot-nox procps ffmpeg python3 fio
	gdal-bin python3-gdal python3-h5py squashfs-tools squashfuse
	python3-torch)

case "${1:-}" in
"") ;;
--bench) PKGS+=("${BENCH_PKGS[@]}") ;;
*)
	echo "usage: contrib/install-deps.sh [--bench]" >&2
	exit 2
	;;
esac

missing=()
for p in "${PKGS[@]}"; do
	status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
	if [ "$status" != "installed" ]; then
		missing+=("$p")
	fi
done

if [ "${#missing[@]}" -eq 0 ]; then
	echo "install-deps: all ${#PKGS[@]} packages present"
	exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
	echo "install-deps: missing packages: ${missing[*]}; run as root (or: sudo apt-get install ${missing[*]})" >&2
	exit 1
fi

# Installing nginx would start it on port 80: forbid service starts while
# apt runs (invoke-rc.d honours policy-rc.d exit status 101), unless the
# machine already has a policy of its own.
policy=/usr/sbin/policy-rc.d
own_policy=0
if [ ! -e "$policy" ]; then
	printf '#!/bin/sh\nexit 101\n' >"$policy"
	chmod 0755 "$policy"
	own_policy=1
fi
cleanup() {
	if [ "$own_policy" -eq 1 ]; then
		rm -f "$policy"
	fi
}
trap cleanup EXIT

# The servers among them whose packages start a service: which of them
# this run brings in (a service that was there before is the owner's).
declare -A had
for pkg in nginx squid varnish trafficserver prometheus; do
	had[$pkg]=0
	if [ "$(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null || true)" = installed ]; then
		had[$pkg]=1
	fi
done

log=$(mktemp)
if ! { apt-get update -q &&
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
		--no-install-recommends "${missing[@]}"; } >"$log" 2>&1; then
	tail -n 20 "$log" >&2
	rm -f "$log"
	echo "install-deps: apt-get failed installing: ${missing[*]}" >&2
	exit 1
fi
rm -f "$log"

# Belt and braces where a machine's own policy allowed starts: an nginx or a
# Prometheus, a Squid, a Varnish or a Traffic Server that this run brought in
# must not keep serving ports 80, 9090, 3128, 6081 and 8080.
# One that was there before is the owner's and is left alone.
if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
	for unit in nginx:nginx squid:squid varnish:varnish varnish:varnishncsa \
		trafficserver:trafficserver prometheus:prometheus; do
		if [ "${had[${unit%%:*}]}" -eq 0 ]; then
			systemctl disable --now "${unit#*:}" >/dev/null 2>&1 || true
		fi
	done
fi

echo "install-deps: installed ${missing[*]}"

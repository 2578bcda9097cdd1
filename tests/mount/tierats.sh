#!/usr/bin/env bash
# tierats.sh: two machines behind Apache Traffic Server (Debian's 9.2,
# whose package has cache_range_requests but not the slice plugin: each
# range is its own cached object, which pacefs's chunk-aligned pieces make
# the same on every machine) in front of a far origin, used as pacefs's
# forward proxy with a remap rule for the origin. Two mounts with caches
# of their own read the same blob one after the other: every byte right,
# and the origin sends the blob once (2% allowed). Skipped where Traffic
# Server is not installed.
set -euo pipefail
# shellcheck source=tests/lib.sh
source "$(dirname "$0")/../lib.sh"
# shellcheck source=tests/tierlib.sh
source "$(dirname "$0")/../tierlib.sh"
t_require_mount
t_require_origin
TS=${TRAFFIC_SERVER:-/usr/bin/traffic_server}
CRR=/usr/lib/trafficserver/modules/cache_range_requests.so
if [ ! -x "$TS" ] || [ ! -f "$CRR" ]; then
	t_skip_all "Traffic Server not installed (apt-get install trafficserver)"
fi

tier_origin

# ats_start: a private Traffic Server (its own run root: configuration,
# cache, logs and sockets under $T_TMP) on a free loopback port, caching
# each range of the origin's URLs (cache_range_requests) and honouring a
# client's no-cache; sets TS_URL. Its cache's write backlog is raised:
# with the default, eight 1 MiB pieces ending together (a new reader's
# lanes on this origin) left one or two uncached in about half the runs,
# and the second machine's misses fetched them again; raised, none in 8.
ats_start() {
	local port d=$T_TMP/ats
	mkdir -p "$d/etc" "$d/data" "$d/var" "$d/run" "$d/log" "$d/cache"
	cp -r /etc/trafficserver/. "$d/etc/"
	port=$(free_port)
	cat >"$d/runroot.yaml" <<-EOF
		prefix: $d
		exec_prefix: /usr
		bindir: /usr/bin
		sbindir: /usr/sbin
		sysconfdir: $d/etc
		datadir: $d/data
		includedir: /usr/include
		libdir: /usr/lib/trafficserver
		libexecdir: /usr/lib/trafficserver/modules
		localstatedir: $d/var
		runtimedir: $d/run
		logdir: $d/log
		cachedir: $d/cache
	EOF
	cat >"$d/etc/records.config" <<-EOF
		CONFIG proxy.config.http.server_ports STRING $port:ip-in=127.0.0.1
		CONFIG proxy.config.admin.user_id STRING #-1
		CONFIG proxy.config.url_remap.remap_required INT 1
		CONFIG proxy.config.http.cache.required_headers INT 0
		CONFIG proxy.config.http.cache.ignore_client_no_cache INT 0
		CONFIG proxy.config.http.insert_response_via_str INT 0
		CONFIG proxy.config.http.cache.http INT 1
		CONFIG proxy.config.cache.agg_write_backlog INT 268435456
	EOF
	echo "$d/cache 256M" >"$d/etc/storage.config"
	echo "map $ORIG/ $ORIG/ @plugin=cache_range_requests.so" >"$d/etc/remap.config"
	: >"$d/etc/plugin.config"
	"$TS" --run-root="$d/runroot.yaml" >"$d/out" 2>&1 &
	TS_PID=$!
	t_track_pid "$TS_PID"
	for _ in $(seq 1 100); do
		if curl -s -o /dev/null -x "http://127.0.0.1:$port" "$ORIG/__ready" 2>/dev/null; then
			TS_URL=http://127.0.0.1:$port
			return 0
		fi
		kill -0 "$TS_PID" 2>/dev/null || break
		sleep 0.1
	done
	echo "ats_start: Traffic Server did not come up: $(tail -n 3 "$d/log/diags.log")" >&2
	return 1
}

if ! ats_start 2>"$T_TMP/start.err"; then
	t_fail "Traffic Server: start" "$(cat "$T_TMP/start.err")"
	t_done
fi
# Traffic Server says no X-Cache, and a hit on an object cached this
# second has Age 0: the origin's log is the count that holds.
tier_two_machines "Traffic Server" "$TS_URL" no-hits

t_done

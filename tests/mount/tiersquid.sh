#!/usr/bin/env bash
# tiersquid.sh: two machines behind Squid (docs/deploy.md's Squid
# configuration: whole objects for range requests, fetches finished when
# the client goes, collapsed forwarding) in front of a far origin. Two
# mounts with caches of their own read the same blob one after the other:
# every byte right, the origin sends the blob once (2% allowed), and the
# second mount's answers are hits. Skipped where Squid is not installed.
set -euo pipefail
# shellcheck source=tests/lib.sh
source "$(dirname "$0")/../lib.sh"
# shellcheck source=tests/tierlib.sh
source "$(dirname "$0")/../tierlib.sh"
t_require_mount
t_require_origin
SQUID=${SQUID:-/usr/sbin/squid}
if [ ! -x "$SQUID" ]; then
	t_skip_all "Squid not installed (apt-get install squid)"
fi

tier_origin

# squid_start: a private Squid as a forward proxy on a free loopback port;
# sets SQ_URL and SQ_DIR. Started as root it runs as the user proxy, which
# must reach its directory.
squid_start() {
	local port d
	SQ_DIR=$T_TMP/squid
	mkdir -p "$SQ_DIR/cache"
	# Every directory above it that this test run made (mktemp's are
	# 0700), up to /tmp.
	d=$T_TMP
	while [ "$d" != / ] && [ "$d" != "${TMPDIR:-/tmp}" ]; do
		chmod o+x "$d"
		d=$(dirname "$d")
	done
	port=$(free_port)
	cat >"$SQ_DIR/squid.conf" <<-EOF
		http_port 127.0.0.1:$port
		pid_filename $SQ_DIR/squid.pid
		cache_dir ufs $SQ_DIR/cache 512 16 256
		coredump_dir $SQ_DIR
		access_log stdio:$SQ_DIR/access.log squid
		cache_log $SQ_DIR/cache.log
		cache_store_log none
		acl localnet src 127.0.0.1/32
		http_access allow localnet
		http_access deny all
		range_offset_limit none
		quick_abort_min -1 KB
		maximum_object_size 1 GB
		collapsed_forwarding on
		shutdown_lifetime 1 seconds
		visible_hostname pacefs-test
	EOF
	chown -R proxy:proxy "$SQ_DIR"
	if ! "$SQUID" -z -N -f "$SQ_DIR/squid.conf" >"$SQ_DIR/z.out" 2>&1; then
		echo "squid_start: squid -z failed: $(tail -n 3 "$SQ_DIR/z.out")" >&2
		return 1
	fi
	"$SQUID" -N -f "$SQ_DIR/squid.conf" >"$SQ_DIR/out" 2>&1 &
	SQ_PID=$!
	t_track_pid "$SQ_PID"
	for _ in $(seq 1 100); do
		if curl -s -o /dev/null -x "http://127.0.0.1:$port" "$ORIG/__ready" 2>/dev/null; then
			SQ_URL=http://127.0.0.1:$port
			return 0
		fi
		kill -0 "$SQ_PID" 2>/dev/null || break
		sleep 0.1
	done
	echo "squid_start: Squid did not come up: $(tail -n 3 "$SQ_DIR/cache.log")" >&2
	return 1
}

if ! squid_start 2>"$T_TMP/squid.err"; then
	t_fail "Squid: start" "$(cat "$T_TMP/squid.err")"
	t_done
fi
tier_two_machines "Squid" "$SQ_URL" hits

t_done

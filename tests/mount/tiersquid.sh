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
t_require_mount
t_require_origin
SQUID=${SQUID:-/usr/sbin/squid}
if [ ! -x "$SQUID" ]; then
	t_skip_all "Squid not installed (apt-get install squid)"
fi

MIB=1048576
SIZE=$((32 * MIB))
WWW=$T_TMP/www
mkdir -p "$WWW"
gen_file "$WWW/blob.bin" "$SIZE" 2403
# A dataset's file is old: Squid's heuristic freshness (20% of its age)
# then keeps it; one written a second ago would be stale at once.
touch -d '2024-01-01 00:00:00' "$WWW/blob.bin"
o_start origin --root "$WWW" --latency 20 --rate 8M
ORIG=$O_URL
OLOG=$O_LOG

origin_bytes() {
	awk '$5 ~ /^[0-9]+$/ { s += $5 } END { print s + 0 }' "$OLOG" 2>/dev/null || echo 0
}

# squid_start: a private Squid as a forward proxy on a free loopback port;
# sets SQ_URL and SQ_DIR. Started as root it runs as the user proxy, which
# must reach its directory.
squid_start() {
	local port
	SQ_DIR=$T_TMP/squid
	mkdir -p "$SQ_DIR/cache"
	chmod o+x "$T_TMP"
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
	"$SQUID" -z -N -f "$SQ_DIR/squid.conf" >"$SQ_DIR/z.out" 2>&1 || return 1
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

read_all() {
	"$READCMP" seq "$2/blob.bin" "$WWW/blob.bin" >"$T_TMP/$1.cmp" 2>&1
}

squid_start
B0=$(origin_bytes)
for m in 1 2; do
	mkdir -p "$T_TMP/s$m" "$T_TMP/s$m.cache"
	fg_mount "$T_TMP/s$m.log" -o "cache_dir=$T_TMP/s$m.cache,chunk=1M,proxy=$SQ_URL" \
		"$ORIG/blob.bin" "$T_TMP/s$m"
	t_check "Squid: machine $m reads every byte" read_all "s$m" "$T_TMP/s$m"
	if [ "$m" -eq 2 ]; then
		st=$("$PACEFS" status --json "$T_TMP/s2")
		misses=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["proxies"][0]["misses"])' <<<"$st")
		t_eq "Squid: the second machine's answers are hits (no miss)" "$misses" 0
	fi
	umount_pacefs "$T_TMP/s$m"
done
sent=$(($(origin_bytes) - B0))
echo "tiersquid: origin sent $sent bytes for $SIZE ($(echo "scale=3; $sent / $SIZE" | bc)x)"
if [ "$sent" -le $((SIZE + SIZE / 50)) ]; then
	t_pass "Squid: the origin sends the blob once ($sent bytes for $SIZE)"
else
	t_fail "Squid: the origin sends the blob once" "origin sent $sent bytes for a $SIZE-byte blob"
fi

t_done

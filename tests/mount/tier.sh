#!/usr/bin/env bash
# tier.sh: many mounts behind a shared HTTP cache tier (docs/deploy.md).
# nginx as a forward caching proxy (proxy_cache with the slice module,
# slice = chunk = 1 MiB) in front of pacefs-origin; mounts with caches of
# their own stand for machines. Two read the same blob one after the other,
# then two more together through an empty tier: the origin sends each byte
# at most once (5% allowed), and the second mount's requests are hits.
# One proxy of a two-proxy group is killed mid-read: the reader gets the
# right bytes and never waits as long as stall_timeout. A remount's
# revalidation reaches the origin through the proxy with no-cache; ordinary
# ranges carry no Cache-Control. A proxy that serves bytes failing their
# digest is excluded, and the block is fetched again with no-cache.
set -euo pipefail
# shellcheck source=tests/lib.sh
source "$(dirname "$0")/../lib.sh"
t_require_mount
t_require_origin

MIB=1048576
SIZE=$((64 * MIB))
CHUNK=1M
WWW=$T_TMP/www
mkdir -p "$WWW"
gen_file "$WWW/blob.bin" "$SIZE" 1301
o_start origin --root "$WWW" --log-header Cache-Control
ORIG=$O_URL
OLOG=$T_TMP/origin.log

# origin_bytes: body bytes the origin has sent so far.
origin_bytes() {
	log_bytes "$OLOG"
}

# at_most_once NAME BEFORE: PASS when the origin sent at most 1.05 x SIZE
# since BEFORE bytes.
at_most_once() {
	local sent=$(($(origin_bytes) - $2))
	if [ "$sent" -le $((SIZE + SIZE / 20)) ]; then
		t_pass "$1 (origin sent $sent bytes for $SIZE)"
	else
		t_fail "$1" "origin sent $sent bytes for a $SIZE-byte blob"
	fi
}

# read_all NAME MNT: reads the blob through MNT and compares every byte;
# keeps readcmp's line in $T_TMP/NAME.cmp and the seconds it took in
# $T_TMP/NAME.secs.
read_all() {
	local t0 t1 rc=0
	t0=$(date +%s.%N)
	"$READCMP" seq "$2/blob.bin" "$WWW/blob.bin" >"$T_TMP/$1.cmp" 2>&1 || rc=$?
	t1=$(date +%s.%N)
	echo "$t1 - $t0" | bc >"$T_TMP/$1.secs"
	return "$rc"
}

# mount_via NAME PROXIES [OPTS]: mounts the blob with a cache of its own,
# in the foreground with its log in $T_TMP/NAME.log, at $T_TMP/NAME.
mount_via() {
	mkdir -p "$T_TMP/$1" "$T_TMP/$1.cache"
	fg_mount "$T_TMP/$1.log" -o "cache_dir=$T_TMP/$1.cache,chunk=$CHUNK,proxy=$2${3:+,$3}" \
		"$ORIG/blob.bin" "$T_TMP/$1"
}

# json_field MNT PROXY_URL FIELD: FIELD of the proxy in MNT's status.
json_field() {
	"$PACEFS" status --json "$1" | python3 -c '
import json, sys
doc = json.load(sys.stdin)
for p in doc["proxies"]:
    if p["proxy"] == sys.argv[1]:
        print(p[sys.argv[2]])
' "$2" "$3"
}

# --- one after the other ---------------------------------------------------
tier_proxy_start 1m
P=$TP_URL
PPREFIX=$TP_PREFIX
B0=$(origin_bytes)
mount_via a "$P"
A_PID=$FG_PID
t_check "first mount reads every byte through the tier" read_all a "$T_TMP/a"
at_most_once "first mount: each byte from the origin at most once" "$B0"
B1=$(origin_bytes)
mount_via b "$P"
t_check "second mount reads every byte through the tier" read_all b "$T_TMP/b"
t_eq "second mount: nothing more from the origin" "$(($(origin_bytes) - B1 <= SIZE / 20))" 1
hits=$(json_field "$T_TMP/b" "$P" hits)
misses=$(json_field "$T_TMP/b" "$P" misses)
if [ "$hits" -gt 0 ] && [ "$misses" -eq 0 ]; then
	t_pass "second mount: every answer of the tier a hit ($hits hits)"
else
	t_fail "second mount: every answer of the tier a hit" "$hits hits, $misses misses"
fi
status=$("$PACEFS" status "$T_TMP/b")
t_check "pacefs status shows the proxy, its requests and hit ratio" \
	grep -Eq "^proxy $P \(group 1\): ok, [0-9]+ requests, 0 failures, .*hit ratio 100%" <<<"$status"
# The same blob straight from the tier, as a reference for the speed.
t0=$(date +%s.%N)
curl -s -o /dev/null -x "$P" "$ORIG/blob.bin"
t1=$(date +%s.%N)
echo "tier: first mount $(cat "$T_TMP/a.secs") s, second $(cat "$T_TMP/b.secs") s, curl from the tier $(echo "$t1 - $t0" | bc) s"
t_check "no request of the mounts carried Cache-Control" \
	bash -c "! awk '\$7 != \"-\"' '$OLOG' | grep -q ."

# --- a revalidation reaches the origin through the tier ----------------------
umount_pacefs "$T_TMP/a"
wait "$A_PID" 2>/dev/null || true
n0=$(grep -c 'no-cache$' "$OLOG" || true)
mount_via a "$P"
n1=$(grep -c 'no-cache$' "$OLOG" || true)
t_eq "a remount's revalidation reaches the origin with no-cache" "$((n1 - n0))" 1
t_check "the remount reads from its cache" read_all a2 "$T_TMP/a"

# --- together, through an empty tier ----------------------------------------
tier_proxy_start 1m
P2=$TP_URL
B2=$(origin_bytes)
mount_via c "$P2"
mount_via d "$P2"
read_all c "$T_TMP/c" &
RC=$!
read_all d "$T_TMP/d" &
RD=$!
rc=0
wait "$RC" || rc=1
wait "$RD" || rc=1
t_eq "two mounts reading together get every byte" "$rc" 0
at_most_once "two mounts together: each byte from the origin at most once" "$B2"
echo "tier: together $(cat "$T_TMP/c.secs") s and $(cat "$T_TMP/d.secs") s"

# --- a proxy of a two-proxy group killed mid-read ----------------------------
o_start slow --root "$WWW" --rate 4M
SLOW=$O_URL
tier_proxy_start 1m
Q1=$TP_URL
Q1PID=$TP_PID
tier_proxy_start 1m
Q2=$TP_URL
mkdir -p "$T_TMP/e" "$T_TMP/e.cache"
fg_mount "$T_TMP/e.log" -o "cache_dir=$T_TMP/e.cache,chunk=$CHUNK,proxy=$Q1|$Q2,stall_timeout=10" \
	"$SLOW/blob.bin" "$T_TMP/e"
read_all e "$T_TMP/e" &
RE=$!
# Mid-read: once a quarter of the blob went through the slow origin.
for _ in $(seq 1 400); do
	sent=$(log_bytes "$T_TMP/slow.log")
	[ "$sent" -ge $((SIZE / 4)) ] && break
	sleep 0.05
done
nginx_kill "$Q1PID"
rc=0
wait "$RE" || rc=$?
t_eq "a proxy killed mid-read: the reader gets every byte" "$rc" 0
longest=$(sed -n 's/.*longest read \([0-9.]*\) s.*/\1/p' "$T_TMP/e.cmp")
echo "tier: read with a proxy killed at $sent bytes: $(cat "$T_TMP/e.secs") s, longest read ${longest:-?} s"
t_eq "a proxy killed mid-read: no read waits stall_timeout" "$(echo "${longest:-99} < 10" | bc)" 1
failures=$(json_field "$T_TMP/e" "$Q1" failures)
t_eq "the killed proxy is counted as failed" "$((${failures:-0} >= 1))" 1
t_check "the log says which proxy failed" grep -q "proxy $Q1 failed" "$T_TMP/e.log"
t_check "the survivor served bytes" test "$(json_field "$T_TMP/e" "$Q2" bytes)" -gt 0

# --- a proxy of a two-proxy group that hangs mid-read ------------------------
# It keeps its connections and sends nothing: its lanes stall
# (stall_timeout), the proxy is left out, and the rest goes through the
# other, on every lane: the origin is not held for what its proxy did.
tier_proxy_start 1m
H1=$TP_URL
H1PID=$TP_PID
tier_proxy_start 1m
H2=$TP_URL
mkdir -p "$T_TMP/h" "$T_TMP/h.cache"
fg_mount "$T_TMP/h.log" -o "cache_dir=$T_TMP/h.cache,chunk=$CHUNK,proxy=$H1|$H2,stall_timeout=2" \
	"$SLOW/blob.bin" "$T_TMP/h"
mark=$(log_bytes "$T_TMP/slow.log")
read_all h "$T_TMP/h" &
RH=$!
for _ in $(seq 1 400); do
	sent=$(log_bytes "$T_TMP/slow.log")
	[ $((sent - mark)) -ge $((SIZE / 4)) ] && break
	sleep 0.05
done
H1KIDS=$(ps -o pid= --ppid "$H1PID" | tr '\n' ' ')
# shellcheck disable=SC2086 # one pid a word
kill -STOP "$H1PID" $H1KIDS
rc=0
wait "$RH" || rc=$?
# shellcheck disable=SC2086
kill -CONT "$H1PID" $H1KIDS
t_eq "a proxy hung mid-read: the reader gets every byte" "$rc" 0
longest=$(sed -n 's/.*longest read \([0-9.]*\) s.*/\1/p' "$T_TMP/h.cmp")
echo "tier: read with a proxy hung at $((sent - mark)) bytes: $(cat "$T_TMP/h.secs") s, longest read ${longest:-?} s"
t_eq "a proxy hung mid-read: no read waits much past stall_timeout (2 s)" "$(echo "${longest:-99} < 3.5" | bc)" 1
# Hung rather than killed, the proxy costs the read one stall_timeout at
# most: the origin behind it is not held for what the proxy did.
t_eq "a proxy hung mid-read costs the read at most stall_timeout more than one killed" \
	"$(echo "$(cat "$T_TMP/h.secs") < $(cat "$T_TMP/e.secs") + 2 + 1" | bc)" 1
failures=$(json_field "$T_TMP/h" "$H1" failures)
t_eq "the hung proxy is counted as failed" "$((${failures:-0} >= 1))" 1
t_check "the log says the range goes through another proxy" \
	grep -Eq "(stalled;|through proxy $H1:) its range is retried through another proxy" "$T_TMP/h.log"

# --- a proxy whose copy fails its digest --------------------------------------
# A manifest with block digests, through a tier whose cached copy of one
# slice is damaged: the proxy is excluded, the block comes again, past any
# cache (no-cache), from the next group (DIRECT).
tier_proxy_start 1m
R=$TP_URL
curl -s -o /dev/null -x "$R" "$ORIG/blob.bin"
# The slice holding bytes 5 MiB..6 MiB: its cache file's body, damaged.
victim=$(grep -l -a "bytes=5242880-6291455" -r "$TP_PREFIX/cache" | head -n 1)
if [ -n "$victim" ]; then
	len=$(stat -c %s "$victim")
	printf 'XXXXXXXX' | dd of="$victim" bs=1 seek=$((len - 4096)) conv=notrunc 2>/dev/null
fi
t_check "the tier's copy of a slice was damaged" test -n "$victim"
blocks=$(block_digests "$WWW/blob.bin")
cat >"$T_TMP/m.json" <<-EOF
	{"version": 1, "files": [{"path": "blob.bin", "urls": ["$ORIG/blob.bin"],
	 "size": $SIZE, "block_size": 65536, "block_sha256": [$blocks]}]}
EOF
mkdir -p "$T_TMP/f" "$T_TMP/f.cache"
n0=$(grep -c 'no-cache$' "$OLOG" || true)
fg_mount "$T_TMP/f.log" -o "cache_dir=$T_TMP/f.cache,chunk=$CHUNK,proxy=$R;DIRECT" \
	"$T_TMP/m.json" "$T_TMP/f"
t_check "a damaged copy in the tier: the reader gets the right bytes" read_all f "$T_TMP/f"
t_eq "the proxy that served it is excluded" "$(json_field "$T_TMP/f" "$R" state)" excluded
t_check "the block came again with no-cache" \
	test "$(grep -c 'no-cache$' "$OLOG" || true)" -gt "$n0"
t_check "the log names the proxy" grep -q "through proxy $R" "$T_TMP/f.log"

t_done

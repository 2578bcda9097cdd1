#!/usr/bin/env bash
# storms.sh: inputs that would stall a mount or make it storm its origin.
# A Retry-After of 31 years holds the source no longer than
# retry_after_max (logged with the hold), and the file reads once it ends;
# a response header over curl's limit is a transient fault with backoff:
# the read fails with EIO in bounded time, after a bounded number of
# requests and log lines.
set -euo pipefail
# shellcheck source=tests/lib.sh
source "$(dirname "$0")/../lib.sh"
t_require_mount
t_require_origin

WWW=$T_TMP/www
SIZE=$((1048576 + 777))
gen_file "$T_TMP/src.bin" "$SIZE" 71
for d in ra big; do
	mkdir -p "$WWW/$d"
	ln "$T_TMP/src.bin" "$WWW/$d/f.bin"
done
# ra: the probe passes, the next two requests get 429 with Retry-After
# 999999999 s, later ones are served. big: the probe passes, then every
# response carries a 200 KB header (curl takes 100 KB).
o_start storms --root "$WWW" \
	--fault '/ra/*:status:429:999999999:1:2' \
	--fault '/big/*:bigheader:200K:1'
URL=$O_URL
OLOG=$T_TMP/storms.log

# requests PREFIX: how many requests for paths under PREFIX the origin
# logged.
requests() {
	grep -c " $1" "$OLOG" || true
}

# --- Retry-After: 999999999 -------------------------------------------------
MNT=$T_TMP/mnt-ra
LOG=$T_TMP/ra.log
mkdir -p "$MNT"
# One lane: each 429 then refuses all the source was asked, which holds it
# (while other lanes of it are served, a 429 only lowers its lane cap).
fg_mount "$LOG" -o "cache_dir=$T_TMP/cache-ra,read_timeout=30,retry_after_max=2,lanes=1" \
	"$URL/ra/f.bin" "$MNT"
start=$(date +%s%N)
rc=0
timeout 60 cat "$MNT/f.bin" >"$T_TMP/ra.out" 2>"$T_TMP/ra.err" || rc=$?
ms=$((($(date +%s%N) - start) / 1000000))
if [ "$rc" -eq 0 ] && cmp -s "$T_TMP/ra.out" "$T_TMP/src.bin" && [ "$ms" -lt 10000 ]; then
	t_pass "Retry-After 999999999: every byte, in $ms ms (held 2 s, not 31 years)"
else
	t_fail "Retry-After 999999999" "exit $rc after $ms ms: $(tail -n 1 "$T_TMP/ra.err")"
fi
if grep -Eq "$URL/ra/f.bin: HTTP 429: Retry-After 999999999 s; the source is held for [0-2]\.[0-9]{3} s \(capped by retry_after_max\)" "$LOG"; then
	t_pass "Retry-After 999999999: the hold is logged: $(grep -m1 'Retry-After' "$LOG" | cut -c1-200)"
else
	t_fail "Retry-After 999999999: the hold is logged" "$(tail -n 3 "$LOG")"
fi
t_eq "Retry-After 999999999: two 429s answered" "$(grep -c ' /ra/f.bin .* 429 ' "$OLOG" || true)" 2
umount_pacefs "$MNT"

# --- a header over curl's limit ----------------------------------------------
MNT=$T_TMP/mnt-big
LOG=$T_TMP/big.log
mkdir -p "$MNT"
fg_mount "$LOG" -o "cache_dir=$T_TMP/cache-big,read_timeout=5,stall_timeout=2" \
	"$URL/big/f.bin" "$MNT"
before=$(requests /big/)
start=$(date +%s%N)
rc=0
timeout 30 dd if="$MNT/f.bin" of="$T_TMP/big.out" bs=1M 2>"$T_TMP/big.err" || rc=$?
ms=$((($(date +%s%N) - start) / 1000000))
if [ "$rc" -ne 0 ] && grep -q 'Input/output error' "$T_TMP/big.err" && [ "$ms" -lt 7000 ]; then
	t_pass "200 KB header: EIO in $ms ms"
else
	t_fail "200 KB header: EIO in bounded time" "dd exit $rc after $ms ms: $(tail -n 1 "$T_TMP/big.err")"
fi
# What a storm would send meanwhile: nothing once the read has failed.
sleep 2
sent=$(($(requests /big/) - before))
lines=$(grep -c . "$LOG" || true)
if [ "$sent" -le 40 ]; then
	t_pass "200 KB header: $sent requests in all (backoff, not a storm)"
else
	t_fail "200 KB header: requests bounded" "$sent requests to the origin"
fi
if [ "$lines" -le 30 ]; then
	t_pass "200 KB header: $lines log lines"
else
	t_fail "200 KB header: log lines bounded" "$lines lines: $(sort "$LOG" | uniq -c | sort -rn | head -n 3)"
fi
if grep -Eq "warning: lane [0-9]+: $URL/big/f.bin: .*header over curl's limit" "$LOG"; then
	t_pass "200 KB header: logged as a transient fault: $(grep -m1 "header over" "$LOG" | cut -c1-160)"
else
	t_fail "200 KB header: logged" "$(head -n 3 "$LOG")"
fi
if kill -0 "$FG_PID" 2>/dev/null && ls "$MNT" >/dev/null 2>&1; then
	t_pass "200 KB header: daemon alive"
else
	t_fail "200 KB header: daemon alive" "$(tail -n 3 "$LOG")"
fi
umount_pacefs "$MNT"

t_done

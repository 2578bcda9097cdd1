#!/usr/bin/env bash
# storms.sh: inputs that would stall a mount or make it storm its origin.
# A Retry-After of 31 years holds the source no longer than
# retry_after_max (logged with the hold), and the file reads once it ends.
set -euo pipefail
# shellcheck source=tests/lib.sh
source "$(dirname "$0")/../lib.sh"
t_require_mount
t_require_origin

WWW=$T_TMP/www
SIZE=$((1048576 + 777))
gen_file "$T_TMP/src.bin" "$SIZE" 71
for d in ra; do
	mkdir -p "$WWW/$d"
	ln "$T_TMP/src.bin" "$WWW/$d/f.bin"
done
# ra: the probe passes, the next two requests get 429 with Retry-After
# 999999999 s, later ones are served.
o_start storms --root "$WWW" \
	--fault '/ra/*:status:429:999999999:1:2'
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
fg_mount "$LOG" -o "cache_dir=$T_TMP/cache-ra,read_timeout=30,retry_after_max=2" \
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

t_done

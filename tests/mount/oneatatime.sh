#!/usr/bin/env bash
# oneatatime.sh: an origin that serves one transfer at a time and answers
# any request that arrives while a body is being sent, 5 ms later, with
# 503 + Retry-After: 1 and an empty body on a connection kept open, with a
# 32 KiB send buffer that holds one loopback segment (no rate cap): a cold
# `cat` of 32 MiB through a mount of its directory comes whole within
# 2 s (the bytes take about a tenth of a second on loopback; a lane that
# waits on its own delayed ACKs takes 10 s and more), and the refusals
# lower the lane cap rather than hold the source for their Retry-After.
set -euo pipefail
# shellcheck source=tests/lib.sh
source "$(dirname "$0")/../lib.sh"
t_require_mount
t_require_origin

MiB=$((1024 * 1024))
mkdir -p "$T_TMP/www" "$T_TMP/mnt"
gen_file "$T_TMP/www/f.bin" $((32 * MiB)) 83
o_start one --root "$T_TMP/www" --autoindex --one-at-a-time 5 \
	--sndbuf 32768
LOG=$T_TMP/pacefs.log
if ! fg_mount "$LOG" -o "cache_dir=$T_TMP/cache" "$O_URL/" "$T_TMP/mnt"; then
	t_fail "mount" "$(tail -n 3 "$LOG")"
	t_done
fi
start=$(date +%s%N)
rc=0
timeout 60 cat "$T_TMP/mnt/f.bin" >"$T_TMP/out" 2>"$T_TMP/cat.err" || rc=$?
ms=$((($(date +%s%N) - start) / 1000000))
n503=$(awk '$4 == 503' "$O_LOG" | wc -l)
if [ "$rc" -ne 0 ] || ! cmp -s "$T_TMP/out" "$T_TMP/www/f.bin"; then
	t_fail "one transfer at a time: 32 MiB" "cat exited $rc after $ms ms, or the bytes differ: $(tail -n 1 "$T_TMP/cat.err")"
elif [ "$ms" -le 2000 ]; then
	t_pass "one transfer at a time, 503 + Retry-After: 1 beyond: 32 MiB correct in $ms ms ($n503 503s)"
else
	t_fail "one transfer at a time: 32 MiB in 2 s" "took $ms ms ($n503 503s)"
fi
# A refusal comes while a body is being sent, nearly always to a lane of
# this mount: it lowers the lane cap and holds nothing. One may come while
# the origin still sends the body of a lane the mount cut, with none of
# its own open, and a second such one holds the source for Retry-After.
umount_pacefs "$T_TMP/mnt"
held=$(grep -c 'the source is held' "$LOG" || true)
if [ "$held" -le 1 ]; then
	t_pass "503s lowered the lane cap, $held held the source: $(grep -m1 'HTTP 503' "$LOG" | cut -c1-160)"
else
	t_fail "503s hold the source at most once" "$held holds: $(grep -m1 'the source is held' "$LOG" | cut -c1-200)"
fi

t_done

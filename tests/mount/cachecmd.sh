#!/usr/bin/env bash
# cachecmd.sh: `pacefs prefetch` pulls a file of a mount into the cache, and
# `pacefs cache ls|stat|verify|evict|gc` report and tend that cache; gc is
# refused while a mount uses it.
set -euo pipefail
# shellcheck source=tests/lib.sh
source "$(dirname "$0")/../lib.sh"
t_require_mount

# The binary whose cache and prefetch commands are tested (pacefs itself,
# once fs_main dispatches them).
CMD=${PACEFS_CMD:-$PACEFS}
if ! "$CMD" cache --help 2>/dev/null | grep -q 'usage: pacefs cache'; then
	t_skip_all "pacefs does not dispatch 'cache' to cli_cache_command yet"
fi

MiB=1048576
WWW=$T_TMP/www
MNT=$T_TMP/mnt
CACHE=$T_TMP/cache
mkdir -p "$WWW" "$MNT"
gen_file "$WWW/data.bin" $((24 * MiB + 5)) 41
o_start cachecmd --root "$WWW" --quiet
URL=$O_URL/data.bin

if ! mount_pacefs -o "cache_dir=$CACHE" "$URL" "$MNT"; then
	t_fail "mount" "$T_MOUNT_ERR"
	t_done
fi
out=$("$CMD" prefetch "$MNT/data.bin" 2>"$T_TMP/prefetch.err") && rc=0 || rc=$?
t_eq "prefetch: exit status" "$rc" 0
case $out in
"$MNT/data.bin: 24.0 MiB in "*) t_pass "prefetch: summary line ($out)" ;;
*) t_fail "prefetch: summary line" "got '$out'" ;;
esac
t_check "prefetch: bytes read through the mount match" cmp "$MNT/data.bin" "$WWW/data.bin"
out=$("$CMD" prefetch "$MNT/missing" 2>&1) && rc=0 || rc=$?
t_eq "prefetch: a missing file fails" "$rc" 1

out=$("$CMD" cache ls --cache-dir "$CACHE")
line=$(printf '%s\n' "$out" | sed -n 2p)
case $line in
*"24.0 MiB   24.0 MiB 100.0%"*) t_pass "ls: size and held bytes" ;;
*) t_fail "ls: size and held bytes" "got '$line'" ;;
esac
t_eq "ls: one blob" "$(printf '%s\n' "$out" | wc -l)" 2

out=$("$CMD" cache stat --cache-dir "$CACHE")
t_eq "stat: blobs" "$(printf '%s\n' "$out" | awk '/^blobs:/ { print $2 }')" 1
t_eq "stat: bytes" "$(printf '%s\n' "$out" | awk -F'[()]' '/^bytes held:/ { print $2 }')" "$((24 * MiB + 5)) bytes"
t_eq "stat: format" "$(printf '%s\n' "$out" | awk '/^format version:/ { print $3 }')" 3

out=$("$CMD" cache verify --cache-dir "$CACHE" 2>&1) && rc=0 || rc=$?
t_eq "verify: exit status ($out)" "$rc" 0

out=$("$CMD" cache gc --cache-dir "$CACHE" 2>&1) && rc=0 || rc=$?
t_eq "gc: refused while mounted" "$rc" 1
case $out in
*"in use by another process"*) t_pass "gc: says why" ;;
*) t_fail "gc: says why" "got '$out'" ;;
esac
t_check "unmount" umount_pacefs "$MNT"

out=$("$CMD" cache evict --cache-dir "$CACHE" "$URL") && rc=0 || rc=$?
t_eq "evict URL" "$rc" 0
t_eq "evict: ls is empty" "$("$CMD" cache ls --cache-dir "$CACHE" | wc -l)" 1
out=$("$CMD" cache evict --cache-dir "$CACHE" "$URL" 2>&1) && rc=0 || rc=$?
t_eq "evict: an unknown blob fails" "$rc" 1
out=$("$CMD" cache gc --cache-dir "$CACHE") && rc=0 || rc=$?
t_eq "gc: compacts an idle cache ($out)" "$rc" 0
t_eq "gc: the file shrank below 1 MiB" "$(($(stat -c %s "$CACHE/data.mdb") < MiB))" 1
out=$("$CMD" cache bogus --cache-dir "$CACHE" 2>&1) && rc=0 || rc=$?
t_eq "an unknown command is a usage error" "$rc" 2

t_done

#!/usr/bin/env bash
# bigdir.sh: a directory of 50,000 entries, from an nginx autoindex page and
# from a manifest, lists in seconds, and the mount stays responsive while
# the page is merged: a stat of the mount's root, timed all along, never
# waits long. A refresh of the page drops what left it and never hides, even
# for a moment, a file that is still there. ls -l of a listed directory
# needs no lookup of its files.
set -euo pipefail
# shellcheck source=tests/lib.sh
source "$(dirname "$0")/../lib.sh"
t_require_mount

STATLAT=$(dirname "$READCMP")/statlat
if [ ! -x "$STATLAT" ]; then
	t_fail "$T_NAME" "statlat not found at $STATLAT (run make)"
	t_done
fi
N=50000
LS_MAX_MS=10000  # "a few seconds": generous, the machine is shared
STAT_MAX_US=250000 # the root's stat while 50,000 entries are merged

WWW=$T_TMP/www
mkdir -p "$WWW/big"
seq -f "$WWW/big/f%05g.bin" 0 $((N - 1)) | xargs touch
gen_file "$WWW/big/data.bin" 100000 75
origin_start "$WWW" 'autoindex on; autoindex_exact_size on;'
U=$ORIGIN_URL

ms_since() {
	echo $((($(date +%s%N) - $1) / 1000000))
}

# --- a directory index of 50,000 files ----------------------------------------
MNT=$T_TMP/mnt-idx
mkdir -p "$MNT"
mount_pacefs -o "cache_dir=$T_TMP/cache-idx,attr_timeout=0,entry_timeout=0,listing_ttl=2" "$U/" "$MNT"
rm -f "$T_TMP/stop"
"$STATLAT" "$MNT" "$T_TMP/stop" >"$T_TMP/statlat.out" 2>&1 &
SL=$!
start=$(date +%s%N)
count=$(ls "$MNT/big" | wc -l)
took=$(ms_since "$start")
touch "$T_TMP/stop"
rc=0
wait "$SL" || rc=$?
worst=$(awk '{ print $2 }' "$T_TMP/statlat.out")
t_eq "autoindex of $((N + 1)) files: every name listed" "$count" $((N + 1))
if [ "$took" -le "$LS_MAX_MS" ]; then
	t_pass "autoindex of $((N + 1)) files: ls in $took ms"
else
	t_fail "autoindex of $((N + 1)) files: ls within $LS_MAX_MS ms" "$took ms"
fi
if [ "$rc" -eq 0 ] && [ -n "$worst" ] && [ "$worst" -le "$STAT_MAX_US" ]; then
	t_pass "the root's stat during the merge: at worst $worst us ($(cat "$T_TMP/statlat.out"))"
else
	t_fail "the root's stat during the merge: within $STAT_MAX_US us" "exit $rc: $(cat "$T_TMP/statlat.out")"
fi
t_check "a listed file's bytes" cmp "$MNT/big/data.bin" "$WWW/big/data.bin"
start=$(date +%s%N)
for i in 0 12345 49999; do
	stat "$MNT/big/$(printf 'f%05d.bin' "$i")" >/dev/null
done
t_pass "three lookups among $((N + 1)) names: $(ms_since "$start") ms"

# A refresh (listing_ttl=2): a file gone from the page goes, every other
# one stays visible throughout (a stat of one, timed all along, never fails).
rm "$WWW/big/f00007.bin"
sleep 2.2
rm -f "$T_TMP/stop"
"$STATLAT" "$MNT/big/f49998.bin" "$T_TMP/stop" >"$T_TMP/statlat2.out" 2>&1 &
SL=$!
count=$(ls "$MNT/big" | wc -l)
touch "$T_TMP/stop"
rc=0
wait "$SL" || rc=$?
gone=yes
if [ -e "$MNT/big/f00007.bin" ]; then
	gone=no
fi
t_eq "refresh: the removed file is gone" "$count $gone" "$N yes"
t_eq "refresh: a file still listed never vanished ($(cat "$T_TMP/statlat2.out"))" "$rc" 0
umount_pacefs "$MNT"

# --- a manifest of 50,000 files -------------------------------------------------
awk -v n="$N" -v u="$U" 'BEGIN {
	printf "{\"version\": 1, \"files\": [\n"
	for (i = 0; i < n; i++)
		printf "{\"path\": \"d/f%05d.bin\", \"urls\": [\"%s/big/f%05d.bin\"], \"size\": 0}%s\n", i, u, i, i + 1 < n ? "," : ""
	printf "]}\n"
}' >"$T_TMP/m.json"
MNT=$T_TMP/mnt-man
mkdir -p "$MNT"
start=$(date +%s%N)
mount_pacefs -o "cache_dir=$T_TMP/cache-man" "$T_TMP/m.json" "$MNT"
count=$(ls "$MNT/d" | wc -l)
took=$(ms_since "$start")
t_eq "manifest of $N files: every name listed" "$count" "$N"
if [ "$took" -le "$LS_MAX_MS" ]; then
	t_pass "manifest of $N files: mount and ls in $took ms"
else
	t_fail "manifest of $N files: mount and ls within $LS_MAX_MS ms" "$took ms"
fi
umount_pacefs "$MNT"

# ls -l of 1,000 files whose sizes the listing gives: their attributes come
# with the listing (readdirplus), so the kernel looks none of them up (one
# lookup a file before). libfuse's -d log names every request.
mkdir -p "$WWW/small"
seq -f "$WWW/small/s%04g" 1 1000 | xargs touch
MNT=$T_TMP/mnt-plus
mkdir -p "$MNT"
fg_mount "$T_TMP/plus.log" -d -o "cache_dir=$T_TMP/cache-plus" "$U/" "$MNT"
n=$(ls -l "$MNT/small" | grep -c '^-' || true)
lookups=$(grep -c 'LOOKUP' "$T_TMP/plus.log" || true)
umount_pacefs "$MNT"
if [ "$n" -eq 1000 ] && [ "$lookups" -le 10 ]; then
	t_pass "ls -l of 1000 files listed with their sizes: $lookups lookups"
else
	t_fail "ls -l of 1000 files: at most 10 lookups" "$n files, $lookups lookups"
fi

t_done

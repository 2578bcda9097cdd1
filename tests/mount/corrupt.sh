#!/usr/bin/env bash
# corrupt.sh: a damaged cache never crashes pacefs and never serves its
# bytes: flipped bytes in a block are caught by the block's checksum, the
# block is dropped and fetched again (and `pacefs cache verify` reports
# it, as it names a malformed extent); a data.mdb cut short or with a
# garbled B-tree page is refused by the mount and by `pacefs cache` with
# one line and exit status 1.
set -euo pipefail
# shellcheck source=tests/lib.sh
source "$(dirname "$0")/../lib.sh"
t_require_mount

MiB=1048576
PAGE=4096
BLOCK=65536
WWW=$T_TMP/www
MNT=$T_TMP/mnt
mkdir -p "$WWW" "$MNT"
gen_file "$WWW/data.bin" $((16 * MiB + 7)) 51
# An ASCII marker inside blocks 5 and 9 finds their bytes in data.mdb.
for m in 5:A 9:B; do
	printf 'PACEFS-MARK-%s-%s' "${m%:*}" "${m#*:}" |
		dd of="$WWW/data.bin" bs=1 seek=$((${m%:*} * BLOCK + 4000)) conv=notrunc status=none
done
origin_start "$WWW"
URL=$ORIGIN_URL/data.bin

# fill CACHE: reads the whole file through a mount on CACHE, unmounts, and
# waits for the daemon to exit (it commits what is queued first): the
# surgery below must not race with its writes.
fill() {
	local name
	name=$(basename "$1")
	if ! fg_mount "$T_TMP/$name.log" -o "cache_dir=$1" "$URL" "$MNT"; then
		t_fail "fill $name: mount" "$(tail -n 3 "$T_TMP/$name.log")"
		return 1
	fi
	t_check "fill $name: read" timeout 120 "$READCMP" seq "$MNT/data.bin" "$WWW/data.bin"
	t_check "fill $name: unmount" umount_pacefs "$MNT"
	wait "$FG_PID" || true
}

# offset_of FILE STRING: the byte offset of STRING's first copy in FILE.
offset_of() {
	grep -obaF "$2" "$1" | head -n 1 | cut -d: -f1
}

# poke FILE OFFSET BYTES: writes BYTES (printf escapes) at OFFSET.
poke() {
	# shellcheck disable=SC2059 # BYTES holds the escapes on purpose
	printf "$3" | dd of="$1" bs=1 seek="$2" conv=notrunc status=none
}

# refused NAME CACHE WORD: the mount and `pacefs cache ls|stat|verify` on
# CACHE each fail with exit status 1 (not a signal) and one line that
# contains WORD, and nothing is mounted.
refused() {
	local name=$1 cache=$2 word=$3 out rc cmd
	t_track_mount "$MNT"
	out=$(timeout 60 "$PACEFS" -o "cache_dir=$cache" "$URL" "$MNT" </dev/null 2>&1) && rc=0 || rc=$?
	t_eq "$name: the mount exits 1 ($out)" "$rc" 1
	t_eq "$name: the mount says so in one line" "$(printf '%s\n' "$out" | wc -l)" 1
	case $out in
	*"$word"*) t_pass "$name: the line says '$word'" ;;
	*) t_fail "$name: the line says '$word'" "got '$out'" ;;
	esac
	if is_mounted "$MNT"; then
		t_fail "$name: nothing mounted" "$(mount_line "$MNT")"
		umount_pacefs "$MNT" || true
	else
		t_pass "$name: nothing mounted"
	fi
	for cmd in ls stat verify; do
		out=$(timeout 60 "$PACEFS" cache "$cmd" --cache-dir "$cache" </dev/null 2>&1) && rc=0 || rc=$?
		t_eq "$name: cache $cmd exits 1 ($out)" "$rc" 1
		t_eq "$name: cache $cmd says so in one line" "$(printf '%s\n' "$out" | wc -l)" 1
	done
}

# --- flipped bytes in a block: fetched again, never served ------------------
C=$T_TMP/cache-data
fill "$C"
off=$(offset_of "$C/data.mdb" PACEFS-MARK-5-A)
if [ -z "$off" ]; then
	t_fail "data: block 5's bytes are in data.mdb" "marker not found"
else
	poke "$C/data.mdb" "$off" 'Q'
	log=$T_TMP/data.log
	if fg_mount "$log" -o "cache_dir=$C" "$URL" "$MNT"; then
		before=$(origin_requests)
		t_check "data: the mount serves the origin's bytes" timeout 120 "$READCMP" seq "$MNT/data.bin" "$WWW/data.bin"
		t_eq "data: the bad block was fetched again" "$(($(origin_requests) > before))" 1
		t_eq "data: logged once, with the blob and block" \
			"$(grep -c 'block 5: checksum mismatch' "$log" || true)" 1
		if is_pacefs_mounted "$MNT"; then t_pass "data: the daemon is alive"; else t_fail "data: the daemon is alive" "$(tail -n 3 "$log")"; fi
		t_check "data: a second read" timeout 120 "$READCMP" random "$MNT/data.bin" "$WWW/data.bin" 200 3
		t_check "data: unmount" umount_pacefs "$MNT"
		wait "$FG_PID" || true
	else
		t_fail "data: mount" "$(tail -n 3 "$log")"
	fi
fi

# --- `pacefs cache verify` finds a bad block, drops it, says which ----------
off=$(offset_of "$C/data.mdb" PACEFS-MARK-9-B)
if [ -z "$off" ]; then
	t_fail "verify: block 9's bytes are in data.mdb" "marker not found"
else
	poke "$C/data.mdb" "$off" 'Q'
	out=$(timeout 60 "$PACEFS" cache verify --cache-dir "$C" 2>&1) && rc=0 || rc=$?
	t_eq "verify: exit status 1 on a bad block" "$rc" 1
	case $out in
	*"DAMAGED: 1 of 257 blocks"*"blocks 9"*) t_pass "verify: names the bad block" ;;
	*) t_fail "verify: names the bad block" "got '$out'" ;;
	esac
	out=$(timeout 60 "$PACEFS" cache verify --cache-dir "$C" 2>&1) && rc=0 || rc=$?
	t_eq "verify: dropped, a second verify passes ($out)" "$rc" 0
	if mount_pacefs -o "cache_dir=$C" "$URL" "$MNT"; then
		t_check "verify: the mount serves the origin's bytes" timeout 120 "$READCMP" seq "$MNT/data.bin" "$WWW/data.bin"
		t_check "verify: unmount" umount_pacefs "$MNT"
	else
		t_fail "verify: mount" "$T_MOUNT_ERR"
	fi
fi

# --- a malformed extent: `pacefs cache verify` names the blob and extent ---
TEST_CACHE=${TEST_CACHE:-$(dirname "$PACEFS")/tests/test_cache}
C=$T_TMP/cache-extent
fill "$C"
if ! "$TEST_CACHE" --damage-extent "$C" "url:$URL"; then
	t_fail "extent: damage the extent map" "$TEST_CACHE failed"
else
	out=$(timeout 60 "$PACEFS" cache verify --cache-dir "$C" 2>&1) && rc=0 || rc=$?
	t_eq "extent: verify exits 1 ($out)" "$rc" 1
	case $out in
	*"the extent at byte 0 is malformed"*"BROKEN"*) t_pass "extent: verify names the extent and the blob" ;;
	*) t_fail "extent: verify names the extent and the blob" "got '$out'" ;;
	esac
	# What the line says to do: evict the blob (named by verify's line).
	id=$(printf '%s\n' "$out" | awk -F: '/BROKEN/ { print $1 }')
	t_check "extent: evict $id" "$PACEFS" cache evict --cache-dir "$C" "$id"
	out=$(timeout 60 "$PACEFS" cache verify --cache-dir "$C" 2>&1) && rc=0 || rc=$?
	t_eq "extent: evicted, verify passes ($out)" "$rc" 0
fi

# --- data.mdb cut short: refused, never SIGBUS ------------------------------
C=$T_TMP/cache-short
fill "$C"
cp "$C/data.mdb" "$T_TMP/data.mdb.orig"
size=$(stat -c %s "$C/data.mdb")
for cut in "page:$((size - 8 * PAGE))" "half:$((size / 2 + 123))"; do
	cp "$T_TMP/data.mdb.orig" "$C/data.mdb"
	truncate -s "${cut#*:}" "$C/data.mdb"
	refused "short (${cut%%:*})" "$C" truncated
done

# --- a garbled B-tree page: refused, never a crash ---------------------------
# btree_pages FILE: "page flags first-node-offset first-node-flags" for each
# branch (flags 1) and leaf (flags 2) page of FILE, found by its header
# (LMDB's layout: page number, 2 pad bytes, flags, lower, upper, pointers).
btree_pages() {
	xxd -p -c "$PAGE" "$1" | awk '
		function h2d(h,   i, d) {
			d = 0
			for (i = 1; i <= length(h); i++)
				d = d * 16 + index("0123456789abcdef", substr(h, i, 1)) - 1
			return d
		}
		function le(h,   r, i) {
			r = ""
			for (i = length(h) - 1; i >= 1; i -= 2)
				r = r substr(h, i, 2)
			return r
		}
		{
			n = NR - 1
			if (n < 2 || h2d(le(substr($0, 1, 16))) != n)
				next
			fl = h2d(le(substr($0, 21, 4)))
			if (fl != 1 && fl != 2)
				next
			p0 = h2d(le(substr($0, 33, 4)))
			print n, fl, p0, h2d(le(substr($0, 2 * (p0 + 4) + 1, 4)))
		}'
}

C=$T_TMP/cache-btree
fill "$C"
cp "$C/data.mdb" "$T_TMP/data.mdb.orig"
pages=$(btree_pages "$C/data.mdb")
# Old versions of pages stay in the file after they were copied on write,
# so every page that looks like one of these is garbled: the live one too.
# Leaves of the blocks database (values on overflow pages, node flag 1):
# the first value's page number made huge.
leaves=$(printf '%s\n' "$pages" | awk '$2 == 2 && $4 == 1 { print $1 ":" $3 }')
# Branch pages: the first child's page number made huge.
branches=$(printf '%s\n' "$pages" | awk '$2 == 1 { print $1 ":" $3 }')
if [ -z "$leaves" ] || [ -z "$branches" ]; then
	t_fail "btree: found leaf and branch pages" "pages: $pages"
else
	for p in $leaves; do
		poke "$C/data.mdb" $((${p%:*} * PAGE + ${p#*:} + 8 + 24)) '\x00\x00\x00\x00\x00\x01\x00\x00'
	done
	refused "btree (leaves)" "$C" damaged
	cp "$T_TMP/data.mdb.orig" "$C/data.mdb"
	for p in $branches; do
		poke "$C/data.mdb" $((${p%:*} * PAGE + ${p#*:} + 4)) '\xff\xff'
	done
	refused "btree (branches)" "$C" damaged
	# What the line says to do: remove the files; the cache is rebuilt.
	rm -f "$C/data.mdb" "$C/lock.mdb"
	if mount_pacefs -o "cache_dir=$C" "$URL" "$MNT"; then
		t_check "btree: after removing the files, the origin's bytes" timeout 120 "$READCMP" seq "$MNT/data.bin" "$WWW/data.bin"
		t_check "btree: unmount" umount_pacefs "$MNT"
	else
		t_fail "btree: mount after removing the files" "$T_MOUNT_ERR"
	fi
fi

t_done

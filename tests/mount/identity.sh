#!/usr/bin/env bash
# identity.sh: a manifest cannot poison the bytes another manifest reads
# through a content identity. An entry that names the SHA-256 of file X
# with a URL serving file Y (same size, same validator) stores Y's bytes;
# a later, trusted entry naming the same SHA-256 with X's URL, over the
# same cache directory, must read X's bytes only, also before its
# whole-file check could run, with the mount's page cache in play. The
# same with per-block digests: the first entry gives those of Y's blocks.
# Content verified per block is shared by the entries naming its digests,
# whatever their URLs. A mirror's bytes are not shared with a mount of the
# first URL alone.
set -euo pipefail
# shellcheck source=tests/lib.sh
source "$(dirname "$0")/../lib.sh"
t_require_mount

WWW=$T_TMP/www
mkdir -p "$WWW"
SIZE=$((8 * 1048576 + 5000))
gen_file "$WWW/x.bin" "$SIZE" 301
gen_file "$WWW/y.bin" "$SIZE" 302
# The same size and date give nginx's two files the same ETag: the
# attacker's origin answers with the validator the victim's has.
touch -r "$WWW/x.bin" "$WWW/y.bin"
H=$(sha256sum "$WWW/x.bin" | cut -d' ' -f1)
origin_start "$WWW"
FIRST=262144 # the first blocks, read before anything else

# manifest FILE URL [BLOCK_DIGESTS]: one entry f.bin naming $H.
manifest() {
	local blocks=
	if [ -n "${3:-}" ]; then
		blocks=", \"block_size\": 65536, \"block_sha256\": [$3]"
	fi
	cat >"$1" <<-EOF
		{"version": 1, "files": [{"path": "f.bin", "urls": ["$2"],
		 "size": $SIZE, "sha256": "$H"$blocks}]}
	EOF
}

# stop_mount MNT: unmounts the foreground mount and waits for its daemon
# to end, so that its cache commits are done.
stop_mount() {
	umount_pacefs "$1"
	wait "$FG_PID" 2>/dev/null || true
}

# poison NAME CACHE MANIFEST: mounts the attacker's manifest and reads its
# first blocks (not the whole file: its whole-file check never runs, so
# nothing drops what it stored).
poison() {
	local mnt=$T_TMP/mnt-$1-a
	mkdir -p "$mnt"
	fg_mount "$T_TMP/$1-a.log" -o "cache_dir=$2" "$3" "$mnt"
	dd if="$mnt/f.bin" of="$T_TMP/$1-a.out" bs=65536 count=2 2>/dev/null || true
	stop_mount "$mnt"
	# Some of the file is held (HELD% above 0).
	if "$PACEFS" cache ls --cache-dir "$2" | tail -n +2 | grep -Eq ' ([1-9][0-9]*\.[0-9]|0\.[1-9])%'; then
		t_pass "$1: the attacker's manifest left bytes in the cache"
	else
		t_fail "$1: the attacker's manifest left bytes in the cache" \
			"$("$PACEFS" cache ls --cache-dir "$2")"
	fi
}

# victim NAME CACHE MANIFEST: mounts the trusted manifest and reads its
# first blocks, then all of it; every byte must be X's.
victim() {
	local mnt=$T_TMP/mnt-$1-b
	mkdir -p "$mnt"
	fg_mount "$T_TMP/$1-b.log" -o "cache_dir=$2" "$3" "$mnt"
	head -c "$FIRST" "$WWW/x.bin" >"$T_TMP/x.first"
	if timeout 60 dd if="$mnt/f.bin" of="$T_TMP/$1-b.first" bs=65536 \
		count=$((FIRST / 65536)) 2>/dev/null; then
		t_check "$1: the first blocks, before the whole-file check, are X's" \
			cmp "$T_TMP/$1-b.first" "$T_TMP/x.first"
	else
		t_fail "$1: the first blocks" "the read failed"
	fi
	# The whole file, through the same page cache.
	if timeout 60 cat "$mnt/f.bin" >"$T_TMP/$1-b.out" 2>/dev/null; then
		t_check "$1: every byte is X's" cmp "$T_TMP/$1-b.out" "$WWW/x.bin"
	else
		t_fail "$1: every byte is X's" "the read failed: $(tail -n 2 "$T_TMP/$1-b.log")"
	fi
	stop_mount "$mnt"
}

# --- the whole-file SHA-256 only.
manifest "$T_TMP/a.json" "$ORIGIN_URL/y.bin"
manifest "$T_TMP/b.json" "$ORIGIN_URL/x.bin"
poison sha256 "$T_TMP/cache1" "$T_TMP/a.json"
victim sha256 "$T_TMP/cache1" "$T_TMP/b.json"

# --- per-block digests too: the attacker's are those of Y's blocks, so
# every block it stores passes them.
manifest "$T_TMP/a2.json" "$ORIGIN_URL/y.bin" "$(block_digests "$WWW/y.bin")"
manifest "$T_TMP/b2.json" "$ORIGIN_URL/x.bin" "$(block_digests "$WWW/x.bin")"
poison blocks "$T_TMP/cache2" "$T_TMP/a2.json"
victim blocks "$T_TMP/cache2" "$T_TMP/b2.json"

# --- the trusted manifest without block digests after an attacker's with
# them.
poison mixed "$T_TMP/cache3" "$T_TMP/a2.json"
victim mixed "$T_TMP/cache3" "$T_TMP/b.json"

# --- a mirror's bytes: an entry listing X's URL with a "mirror" that
# serves Y stores what that mirror sent under the blob's identity; a later
# mount of X's URL alone, over the same cache, must not find them.
cat >"$T_TMP/m.json" <<-EOF
	{"version": 1, "files": [{"path": "f.bin",
	 "urls": ["$ORIGIN_URL/x.bin", "$ORIGIN_URL/y.bin"]}]}
EOF
MNT=$T_TMP/mnt-mirror
mkdir -p "$MNT"
fg_mount "$T_TMP/mirror-a.log" -o "cache_dir=$T_TMP/cache6" "$T_TMP/m.json" "$MNT"
timeout 60 cat "$MNT/f.bin" >/dev/null 2>&1 || true
stop_mount "$MNT"
if [ "$(origin_log | grep -c '^GET /y.bin 206 "bytes=[0-9]*-[0-9]*" [1-9]')" -gt 0 ]; then
	t_pass "mirror: the attacker's mirror served bytes"
else
	t_fail "mirror: the attacker's mirror served bytes" "no range of y.bin in the origin's log"
fi
fg_mount "$T_TMP/mirror-b.log" -o "cache_dir=$T_TMP/cache6" "$ORIGIN_URL/x.bin" "$MNT"
if timeout 60 cat "$MNT/x.bin" >"$T_TMP/mirror.out" 2>/dev/null; then
	t_check "mirror: X's URL alone reads X's bytes only" cmp "$T_TMP/mirror.out" "$WWW/x.bin"
else
	t_fail "mirror: X's URL alone" "the read failed: $(tail -n 2 "$T_TMP/mirror-b.log")"
fi
stop_mount "$MNT"

# --- verified content is shared: an entry naming the same digests at
# another URL (another validator) reads it from the cache, and fetches only
# what is missing, pinned to its own URL's validator.
cp "$WWW/x.bin" "$WWW/x2.bin"
touch -d '-1 hour' "$WWW/x2.bin"
BX=$(block_digests "$WWW/x.bin")
manifest "$T_TMP/c.json" "$ORIGIN_URL/x.bin" "$BX"
manifest "$T_TMP/d.json" "$ORIGIN_URL/x2.bin" "$BX"
MNT=$T_TMP/mnt-shared
mkdir -p "$MNT"
fg_mount "$T_TMP/shared-c.log" -o "cache_dir=$T_TMP/cache4" "$T_TMP/c.json" "$MNT"
t_check "shared: read at the first URL" cmp "$MNT/f.bin" "$WWW/x.bin"
stop_mount "$MNT"
fg_mount "$T_TMP/shared-d.log" -o "cache_dir=$T_TMP/cache4" "$T_TMP/d.json" "$MNT"
t_check "shared: read at another URL" cmp "$MNT/f.bin" "$WWW/x.bin"
t_eq "shared: nothing fetched again from the other URL" \
	"$(origin_log | grep -c '^GET /x2.bin 206 "bytes=' | tr -d ' ')" \
	"$(origin_log | grep -c '^GET /x2.bin 206 "bytes=0-0"' | tr -d ' ')"
stop_mount "$MNT"

# Part of it held, the other URL trusted without asking (-o revalidate):
# the rest comes from the other URL with its own validator.
fg_mount "$T_TMP/part-c.log" -o "cache_dir=$T_TMP/cache5" "$T_TMP/c.json" "$MNT"
# One block, past the kernel's read-ahead: some of the file stays missing.
dd if="$MNT/f.bin" of=/dev/null bs=65536 count=1 iflag=direct 2>/dev/null
stop_mount "$MNT"
if "$PACEFS" cache ls --cache-dir "$T_TMP/cache5" | tail -n +2 | grep -q ' 100\.0%'; then
	t_fail "shared, part held: precondition" "all of it is held"
fi
fg_mount "$T_TMP/part-d.log" -o "cache_dir=$T_TMP/cache5,revalidate=3600" "$T_TMP/d.json" "$MNT"
if timeout 60 cat "$MNT/f.bin" >"$T_TMP/part.out" 2>/dev/null; then
	t_check "shared, part held: every byte is X's" cmp "$T_TMP/part.out" "$WWW/x.bin"
else
	t_fail "shared, part held: every byte is X's" "the read failed: $(grep -m2 error "$T_TMP/part-d.log")"
fi
stop_mount "$MNT"

t_done

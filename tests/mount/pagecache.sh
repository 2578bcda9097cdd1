#!/usr/bin/env bash
# pagecache.sh: bytes the mount drops as wrong or stale leave the kernel's
# page cache too. A file whose whole-file SHA-256 check fails after some of
# its wrong bytes were read: a re-read, through a descriptor opened before
# the drop and through a new open, returns the right bytes fetched again,
# never the wrong ones the page cache kept. A file that changed on the
# origin: a re-read of bytes read before fails with EIO like every read. A
# block that fails its per-block digest after some of its bytes were read:
# a re-read never gets them.
set -euo pipefail
# shellcheck source=tests/lib.sh
source "$(dirname "$0")/../lib.sh"
t_require_mount
t_require_origin

WWW=$T_TMP/www
MNT=$T_TMP/mnt
LOG=$T_TMP/pacefs.log
mkdir -p "$WWW" "$MNT"
SIZE=$((4 * 1048576 + 777))
gen_file "$T_TMP/x.bin" "$SIZE" 401
# Y: X with another first block. The origin serves Y first, then X under
# the same validator (the same size and date): the first block read is
# wrong, and the whole-file check fails only once the rest is held.
cp "$T_TMP/x.bin" "$T_TMP/y.bin"
gen_file "$T_TMP/block0" 65536 402
dd if="$T_TMP/block0" of="$T_TMP/y.bin" conv=notrunc 2>/dev/null
touch -r "$T_TMP/x.bin" "$T_TMP/y.bin"
cp -p "$T_TMP/y.bin" "$WWW/f.bin"
cp -p "$T_TMP/x.bin" "$WWW/g.bin"
H=$(sha256sum "$T_TMP/x.bin" | cut -d' ' -f1)
origin_start "$WWW"

# wait_log REGEX: waits up to 10 s for a line of the mount's log.
wait_log() {
	for _ in $(seq 1 100); do
		grep -Eq -- "$1" "$LOG" && return 0
		sleep 0.1
	done
	return 1
}

# serve FILE SOURCE: the origin now serves SOURCE's bytes as FILE, with
# FILE's date (so its validator stays).
serve() {
	cp -p "$2" "$WWW/$1.tmp"
	touch -r "$WWW/$1" "$WWW/$1.tmp"
	mv "$WWW/$1.tmp" "$WWW/$1"
}

fg_mount "$LOG" -o "cache_dir=$T_TMP/cache,sha256=$H,log_level=debug" "$ORIGIN_URL/f.bin" "$MNT"
# A descriptor opened before anything is read or dropped.
exec 3<"$MNT/f.bin"
# The first block, wrong: a whole-file digest checks only complete files.
dd if="$MNT/f.bin" of="$T_TMP/first" bs=65536 count=1 2>/dev/null
t_check "precondition: the first read got the origin's wrong block" \
	cmp "$T_TMP/first" "$T_TMP/block0"
serve f.bin "$T_TMP/x.bin"
cat "$MNT/f.bin" >/dev/null 2>&1 || true
if wait_log 'f.bin: SHA-256 of the whole blob is [0-9a-f]{64}, not [0-9a-f]{64}: its bytes are dropped'; then
	t_pass "the whole-file check failed and dropped the bytes"
else
	t_fail "the whole-file check failed and dropped the bytes" "$(tail -n 3 "$LOG")"
fi
if wait_log "f.bin: the kernel's pages of bytes 0-$((SIZE - 1)) are dropped"; then
	t_pass "the kernel's pages of the file are dropped"
else
	t_fail "the kernel's pages of the file are dropped" "$(grep -i page "$LOG" | tail -n 2)"
fi
# Through the descriptor opened before the drop: its open kept the cache.
if timeout 60 cat <&3 >"$T_TMP/again3"; then
	t_check "a re-read through an earlier descriptor gets the right bytes" \
		cmp "$T_TMP/again3" "$T_TMP/x.bin"
else
	t_fail "a re-read through an earlier descriptor" "the read failed"
fi
exec 3<&-
if timeout 60 cat "$MNT/f.bin" >"$T_TMP/again"; then
	t_check "a re-read through a new open gets the right bytes" \
		cmp "$T_TMP/again" "$T_TMP/x.bin"
else
	t_fail "a re-read through a new open" "the read failed"
fi
if wait_log 'f.bin: SHA-256 verified'; then
	t_pass "the bytes fetched again pass the whole-file check"
else
	t_fail "the bytes fetched again pass the whole-file check" "$(tail -n 3 "$LOG")"
fi
umount_pacefs "$MNT"
wait "$FG_PID" 2>/dev/null || true

# --- the file changes on the origin: a new date, so a new validator.
LOG=$T_TMP/change.log
fg_mount "$LOG" -o "cache_dir=$T_TMP/cache2,read_timeout=20" "$ORIGIN_URL/g.bin" "$MNT"
dd if="$MNT/g.bin" of="$T_TMP/first" bs=65536 count=1 2>/dev/null
t_check "changed: the first block, before the change" \
	cmp "$T_TMP/first" <(head -c 65536 "$T_TMP/x.bin")
touch -d '+1 minute' "$T_TMP/y.bin"
cp -p "$T_TMP/y.bin" "$WWW/g.bin.tmp"
mv "$WWW/g.bin.tmp" "$WWW/g.bin"
dd if="$MNT/g.bin" of=/dev/null bs=65536 skip=48 count=1 iflag=direct 2>/dev/null || true
if wait_log 'g.bin: .*the blob changed'; then
	t_pass "changed: seen and logged"
else
	t_fail "changed: seen and logged" "$(tail -n 3 "$LOG")"
fi
# The kernel's page cache no longer answers for the blob.
rc=0
for _ in $(seq 1 50); do
	rc=0
	dd if="$MNT/g.bin" of="$T_TMP/first" bs=65536 count=1 2>"$T_TMP/dd.err" || rc=$?
	[ "$rc" -ne 0 ] && break
	sleep 0.1
done
if [ "$rc" -ne 0 ] && grep -q 'Input/output error' "$T_TMP/dd.err"; then
	t_pass "changed: a re-read of bytes read before fails with EIO"
else
	t_fail "changed: a re-read of bytes read before fails with EIO" "dd exit $rc: $(cat "$T_TMP/dd.err")"
fi
umount_pacefs "$MNT"
wait "$FG_PID" 2>/dev/null || true

# --- a block that fails its digest after part of it was read: the origin
# sends it slowly, so that the first read can be answered, and its pages
# cached, before the block is whole and checked.
SMALL=$((256 * 1024))
head -c "$SMALL" "$T_TMP/x.bin" >"$T_TMP/x.small"
head -c "$SMALL" "$T_TMP/y.bin" >"$T_TMP/y.small"
mkdir -p "$T_TMP/slow"
cp "$T_TMP/y.small" "$T_TMP/slow/h.bin"
o_start slow --root "$T_TMP/slow" --fault '/h.bin:rate:16K'
DIGESTS=$(block_digests "$T_TMP/x.small")
cat >"$T_TMP/m.json" <<EOF
{"version": 1, "files": [{"path": "h.bin", "urls": ["$O_URL/h.bin"], "size": $SMALL,
 "block_size": 65536, "block_sha256": [$DIGESTS]}]}
EOF
LOG=$T_TMP/block.log
fg_mount "$LOG" -o "cache_dir=$T_TMP/cache3,log_level=debug,read_timeout=20" "$T_TMP/m.json" "$MNT"
dd if="$MNT/h.bin" of="$T_TMP/first" bs=4096 count=1 2>/dev/null || true
if wait_log 'h.bin: block 0 \(bytes 0-65535\) from .* has SHA-256'; then
	t_pass "block digest: block 0 failed its digest"
else
	t_fail "block digest: block 0 failed its digest" "$(tail -n 3 "$LOG")"
fi
wait_log "h.bin: the kernel's pages of bytes 0-65535 are dropped" || true
# Its only source is excluded: the re-read fails, or (should the block
# come again from elsewhere) gets X's bytes; never Y's from the page cache.
rc=0
dd if="$MNT/h.bin" of="$T_TMP/again" bs=4096 count=1 2>/dev/null || rc=$?
if [ "$rc" -ne 0 ] || cmp -s "$T_TMP/again" <(head -c 4096 "$T_TMP/x.small"); then
	t_pass "block digest: a re-read never gets the block's wrong bytes (dd exit $rc)"
else
	t_fail "block digest: a re-read never gets the block's wrong bytes" \
		"first read: $(cmp -s "$T_TMP/first" <(head -c 4096 "$T_TMP/y.small") && echo "Y's bytes" || echo "not Y's"), re-read: $(cmp -s "$T_TMP/again" <(head -c 4096 "$T_TMP/y.small") && echo "Y's bytes" || echo "other bytes")"
fi
umount_pacefs "$MNT"
wait "$FG_PID" 2>/dev/null || true

t_done

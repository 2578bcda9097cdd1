#!/usr/bin/env bash
# change.sh: a blob that changes on the origin while mounted is never mixed
# with its old bytes: reads fail with EIO and a log line names the URL and
# the reason; a remount drops the old version and serves the new one.
set -euo pipefail
# shellcheck source=tests/lib.sh
source "$(dirname "$0")/../lib.sh"
t_require_mount

WWW=$T_TMP/www
MNT=$T_TMP/mnt
CACHE=$T_TMP/cache
LOG=$T_TMP/pacefs.log
mkdir -p "$WWW" "$MNT"
SIZE=$((64 * 1048576 + 99))
gen_file "$WWW/blob.bin" "$SIZE" 51
gen_file "$T_TMP/new.bin" "$SIZE" 52
cp "$WWW/blob.bin" "$T_TMP/old.bin"
origin_start "$WWW"
URL=$ORIGIN_URL/blob.bin

# In the foreground, so that the log is ours to read.
fg_mount "$LOG" -o "cache_dir=$CACHE,read_timeout=20" "$URL" "$MNT" || t_fail "mount" "$(tail -n 3 "$LOG")"
t_check "old version: first MiB" cmp -n 1048576 "$MNT/blob.bin" "$T_TMP/old.bin"

# The origin now serves other bytes of the same size (a new ETag).
sleep 1.1 # a new mtime, so a new ETag
cp "$T_TMP/new.bin" "$WWW/blob.bin.tmp"
mv "$WWW/blob.bin.tmp" "$WWW/blob.bin"

rc=0
dd if="$MNT/blob.bin" of="$T_TMP/tail.bin" bs=1M skip=48 count=2 iflag=direct 2>"$T_TMP/dd.err" || rc=$?
if [ "$rc" -ne 0 ] && grep -q 'Input/output error' "$T_TMP/dd.err"; then
	t_pass "a read of the new version's bytes fails with EIO"
else
	t_fail "a read of the new version's bytes fails with EIO" "dd exit $rc: $(cat "$T_TMP/dd.err")"
fi
if grep -q "blob.bin: .*the blob changed" "$LOG"; then
	t_pass "the log names the blob and the reason: $(grep -m1 'the blob changed' "$LOG")"
else
	t_fail "the log names the blob and the reason" "log: $(tail -n 5 "$LOG")"
fi
# Never a mix: whatever was read is the old version's, byte for byte.
if [ -s "$T_TMP/tail.bin" ]; then
	t_check "no byte of another version was served" \
		cmp "$T_TMP/tail.bin" <(dd if="$T_TMP/old.bin" bs=1M skip=48 count=2 2>/dev/null)
else
	t_pass "no byte of another version was served"
fi
umount_pacefs "$MNT"
wait "$FG_PID" 2>/dev/null || true

# A remount takes the new version; nothing of the old one remains.
mount_pacefs -o "cache_dir=$CACHE,read_timeout=20" "$URL" "$MNT"
t_check "remount: the new version, every byte" "$READCMP" seq "$MNT/blob.bin" "$T_TMP/new.bin"
umount_pacefs "$MNT"
t_done

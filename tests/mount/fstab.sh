#!/usr/bin/env bash
# fstab.sh: mount -t fuse.pacefs and an /etc/fstab-style line, through the
# mount.fuse3 helper, as the man page documents.
set -euo pipefail
# shellcheck source=tests/lib.sh
source "$(dirname "$0")/../lib.sh"
t_require_mount
if ! command -v mount.fuse3 >/dev/null 2>&1; then
	t_skip_all "mount.fuse3 is missing (package fuse3)"
fi

WWW=$T_TMP/www
mkdir -p "$WWW" "$T_TMP/mnt"
gen_file "$WWW/disk.img" 2000000 95
origin_start "$WWW"
MNT=$T_TMP/mnt
# mount(8) runs mount.fuse3 with a clean PATH, and mount.fuse3 runs the
# program named after "fuse." from it: put this build's pacefs there, as
# `make install` would, for the length of the test.
LINK=/usr/local/bin/pacefs
if [ -e "$LINK" ] && [ "$(readlink -f "$LINK")" != "$(readlink -f "$PACEFS")" ]; then
	t_skip_all "$LINK is another pacefs; not replacing it"
fi
ln -sfn "$PACEFS" "$LINK"
trap 'rm -f "$LINK"; t_cleanup' EXIT

rc=0
mount -t fuse.pacefs "$ORIGIN_URL/disk.img" "$MNT" -o "cache_dir=$T_TMP/cache,allow_other" \
	2>"$T_TMP/m.err" || rc=$?
T_MOUNTS+=("$MNT")
if [ "$rc" -eq 0 ] && is_pacefs_mounted "$MNT"; then
	t_pass "mount -t fuse.pacefs"
	t_check "mount -t: bytes" cmp "$MNT/disk.img" "$WWW/disk.img"
	if mount_line "$MNT" | grep -q allow_other; then
		t_pass "allow_other passes through"
	else
		t_fail "allow_other passes through" "$(mount_line "$MNT")"
	fi
else
	t_fail "mount -t fuse.pacefs" "exit $rc: $(cat "$T_TMP/m.err")"
fi
umount_pacefs "$MNT"

# The line a user puts in /etc/fstab; mount -T reads it from our file.
printf '%s %s fuse.pacefs cache_dir=%s,read_timeout=30,_netdev,nofail 0 0\n' \
	"$ORIGIN_URL/disk.img" "$MNT" "$T_TMP/cache" >"$T_TMP/fstab"
rc=0
mount -T "$T_TMP/fstab" "$MNT" 2>"$T_TMP/f.err" || rc=$?
if [ "$rc" -eq 0 ] && is_pacefs_mounted "$MNT"; then
	t_pass "an fstab line mounts: $(cat "$T_TMP/fstab")"
	t_check "fstab: bytes" cmp "$MNT/disk.img" "$WWW/disk.img"
else
	t_fail "an fstab line mounts" "exit $rc: $(cat "$T_TMP/f.err")"
fi
t_check "umount" umount "$MNT"
t_done

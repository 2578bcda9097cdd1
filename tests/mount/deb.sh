#!/usr/bin/env bash
# deb.sh: the Debian package as an operator meets it: make deb's build
# (contrib/deb.sh: dpkg-buildpackage, lintian clean), apt-get install of
# the .deb, a mount through mount -t fuse.pacefs and through the packaged
# fstab example with the installed /usr/bin/pacefs, its bytes compared,
# and apt-get purge, which leaves nothing behind: the same packages
# installed as before, none of the package's files.
set -euo pipefail
# shellcheck source=tests/lib.sh
source "$(dirname "$0")/../lib.sh"
t_require_mount
for tool in dpkg-buildpackage dh lintian apt-get mount.fuse3; do
	if ! command -v "$tool" >/dev/null 2>&1; then
		t_fail "$T_NAME" "$tool is missing (contrib/install-deps.sh installs it)"
		t_done
	fi
done
# The package is built without sanitizers, whatever built $PACEFS:
# make SAN=... check would build and install the same package again.
if grep -qaE '__(asan|ubsan)_' "$PACEFS"; then
	t_skip_all "a sanitizer build: the package is the same as make check's, which runs this test"
fi
if [ "$(dpkg-query -W -f='${db:Status-Status}' pacefs 2>/dev/null || true)" = installed ]; then
	t_skip_all "a pacefs package is installed on this machine: not replacing it"
fi

WWW=$T_TMP/www
MNT=$T_TMP/mnt
mkdir -p "$WWW" "$MNT" "$T_TMP/deb"
gen_file "$WWW/disk.img" 3000001 27
origin_start "$WWW"
dpkg-query -W -f='${Package} ${Version}\n' | sort >"$T_TMP/before.txt"

INSTALLED=0
purge() {
	DEBIAN_FRONTEND=noninteractive apt-get purge -y -q -o DPkg::Lock::Timeout=120 \
		pacefs >"$T_TMP/purge.log" 2>&1
}
# Whatever fails, the package does not stay on the machine.
trap 'if [ "$INSTALLED" = 1 ]; then umount_pacefs "$MNT" 2>/dev/null; purge || true; fi; t_cleanup' EXIT

start=$(date +%s)
if ! "$T_ROOT/contrib/deb.sh" "$T_TMP/deb" >"$T_TMP/deb.log" 2>&1; then
	t_fail "make deb builds a lintian-clean package" "$(tail -n 8 "$T_TMP/deb.log")"
	t_done
fi
version=$(sed -n 's/^VERSION := //p' "$T_ROOT/Makefile")
DEB=$T_TMP/deb/pacefs_${version}_$(dpkg --print-architecture).deb
if [ -f "$DEB" ]; then
	t_pass "make deb builds $(basename "$DEB") in $(($(date +%s) - start)) s, lintian clean"
else
	t_fail "make deb builds pacefs_VERSION_ARCH.deb" "$(ls "$T_TMP/deb")"
	t_done
fi
contents=$(dpkg-deb -c "$DEB" | awk '{ print $6 }')
for f in ./usr/bin/pacefs ./usr/share/man/man1/pacefs.1.gz \
	./usr/share/doc/pacefs/copyright ./usr/share/doc/pacefs/deploy.md.gz \
	./usr/share/doc/pacefs/examples/mnt-datasets.mount \
	./usr/share/doc/pacefs/examples/fstab.example; do
	if ! grep -qx -- "$f" <<<"$contents"; then
		t_fail "the package holds $f" "$(tr '\n' ' ' <<<"$contents")"
	fi
done
t_pass "the package holds the binary, the man page, the docs and the examples"

# apt reads the file as its own user: from a folder it may enter.
chmod 0755 "$T_TMP" "$T_TMP/deb"
INSTALLED=1
if DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
	-o DPkg::Lock::Timeout=120 "$DEB" >"$T_TMP/install.log" 2>&1; then
	t_pass "apt-get install ./$(basename "$DEB")"
else
	t_fail "apt-get install ./$(basename "$DEB")" "$(tail -n 5 "$T_TMP/install.log")"
	t_done
fi
t_eq "pacefs -V from /usr/bin" "$(/usr/bin/pacefs -V | cut -d' ' -f1-2)" "pacefs $version"
if command -v man >/dev/null 2>&1; then
	t_check "the man page reads" man -P cat pacefs
fi

# mount -t fuse.pacefs runs mount.fuse3, which runs pacefs from its PATH:
# the package's, as the daemon's executable says.
rc=0
mount -t fuse.pacefs "$ORIGIN_URL/disk.img" "$MNT" -o "cache_dir=$T_TMP/cache" \
	2>"$T_TMP/m.err" || rc=$?
T_MOUNTS+=("$MNT")
if [ "$rc" -eq 0 ] && is_pacefs_mounted "$MNT"; then
	t_pass "mount -t fuse.pacefs with the installed pacefs"
	t_check "mount -t: bytes" cmp "$MNT/disk.img" "$WWW/disk.img"
	exe=
	for pid in $(pgrep -x pacefs); do
		if tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | grep -qF -- " $MNT"; then
			exe=$(readlink "/proc/$pid/exe")
		fi
	done
	t_eq "the daemon is the package's binary" "$exe" /usr/bin/pacefs
else
	t_fail "mount -t fuse.pacefs with the installed pacefs" "exit $rc: $(cat "$T_TMP/m.err")"
fi
umount_pacefs "$MNT"

# The packaged fstab line, its site's manifest, mountpoint, caches and
# proxies replaced by this test's; its metrics on a free port.
MPORT=$(free_port)
grep -v '^#' /usr/share/doc/pacefs/examples/fstab.example |
	sed -e "s|^/etc/pacefs/datasets.json /mnt/datasets|$ORIGIN_URL/disk.img $MNT|" \
		-e "s|cache_dir=/var/cache/pacefs|cache_dir=$T_TMP/cache|" \
		-e "s|proxy=[^,]*,||" -e "s|metrics=127.0.0.1:9101|metrics=127.0.0.1:$MPORT|" \
		>"$T_TMP/fstab"
rc=0
mount -T "$T_TMP/fstab" "$MNT" 2>"$T_TMP/f.err" || rc=$?
if [ "$rc" -eq 0 ] && is_pacefs_mounted "$MNT"; then
	t_pass "the packaged fstab example mounts: $(cat "$T_TMP/fstab")"
	t_check "fstab: bytes" cmp "$MNT/disk.img" "$WWW/disk.img"
	t_check "fstab: its metrics answer" curl -sf -o /dev/null "http://127.0.0.1:$MPORT/metrics"
else
	t_fail "the packaged fstab example mounts" "exit $rc: $(cat "$T_TMP/f.err") :: $(cat "$T_TMP/fstab")"
fi
umount_pacefs "$MNT"
if command -v systemd-analyze >/dev/null 2>&1; then
	t_check "systemd-analyze verifies the packaged mount unit" \
		systemd-analyze verify --man=no /usr/share/doc/pacefs/examples/mnt-datasets.mount
fi

if purge; then
	INSTALLED=0
	t_pass "apt-get purge pacefs"
else
	t_fail "apt-get purge pacefs" "$(tail -n 5 "$T_TMP/purge.log")"
fi
dpkg-query -W -f='${Package} ${Version}\n' | sort >"$T_TMP/after.txt"
left=$(diff "$T_TMP/before.txt" "$T_TMP/after.txt" || true)
t_eq "the same packages as before (nothing left, nothing pulled in)" "$left" ""
left=$(ls -d /usr/bin/pacefs /usr/share/doc/pacefs /usr/share/man/man1/pacefs.1.gz \
	/var/lib/dpkg/info/pacefs.* 2>/dev/null || true)
t_eq "none of the package's files left" "$left" ""
t_done

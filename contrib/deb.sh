#!/usr/bin/env bash
# deb.sh: make deb: builds pacefs_VERSION_ARCH.deb with dpkg-buildpackage
# (debian/, debhelper compat 13) from a copy of this tree as it is (changes
# not yet committed included, build output left out), copies it into
# OUT_DIR (default build/), and has lintian check it: any error or warning
# fails, and debian/pacefs.lintian-overrides explains each one let pass.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=${1:-$ROOT/build}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/pacefs-deb.XXXXXX")
trap 'rm -rf --one-file-system "$WORK"' EXIT

version=$(dpkg-parsechangelog -l "$ROOT/debian/changelog" -S Version)
made=$(sed -n 's/^VERSION := //p' "$ROOT/Makefile")
if [ "$version" != "$made" ]; then
	echo "deb.sh: debian/changelog says $version, the Makefile $made" >&2
	exit 1
fi
src=$WORK/pacefs-$version
mkdir -p "$src"
# dpkg-buildpackage writes the package beside the tree it builds: a copy
# in a folder of its own keeps it (and debian/build) out of the checkout.
if git -C "$ROOT" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	(cd "$ROOT" && git ls-files -z --cached --others --exclude-standard |
		tar --null -T - --ignore-failed-read -cf - 2>/dev/null) |
		tar -xf - -C "$src"
else
	tar -C "$ROOT" --exclude=./build --exclude='./build-*' -cf - . |
		tar -xf - -C "$src"
fi
if ! (cd "$src" && dpkg-buildpackage -b -us -uc -j2) >"$WORK/build.log" 2>&1; then
	tail -n 30 "$WORK/build.log" >&2
	echo "deb.sh: dpkg-buildpackage failed (its log's end above)" >&2
	exit 1
fi
deb=pacefs_${version}_$(dpkg --print-architecture).deb
cp "$WORK/$deb" "$OUT/$deb"
if command -v lintian >/dev/null 2>&1; then
	# (As root it says so on every run: that line is not about the
	# package.)
	if ! lintian --fail-on error,warning --info "$OUT/$deb" \
		2> >(grep -v 'running with root privileges' >&2); then
		echo "deb.sh: lintian found problems in $OUT/$deb" >&2
		exit 1
	fi
else
	echo "deb.sh: lintian is missing (contrib/install-deps.sh installs it)" >&2
	exit 1
fi
echo "deb.sh: $OUT/$deb"

#!/usr/bin/env bash
# names.sh: the file's name is the URL's last path segment, percent-decoded,
# unless -o name= overrides it.
set -euo pipefail
# shellcheck source=tests/lib.sh
source "$(dirname "$0")/../lib.sh"
t_require_mount

WWW=$T_TMP/www
mkdir -p "$WWW/dir"
gen_file "$WWW/a b%c.bin" 100003 7
gen_file "$WWW/dir/plain.bin" 5000 8
origin_start "$WWW"

# check_name TAG URL WANT SRC [OPTIONS]: mounts URL and checks the listing
# shows WANT alone, with SRC's bytes.
check_name() {
	local tag=$1 url=$2 want=$3 src=$4 opts=${5:-}
	local mnt=$T_TMP/mnt-$tag cache=$T_TMP/cache-$tag
	mkdir -p "$mnt" "$cache"
	if ! mount_pacefs -o "cache_dir=$cache${opts:+,$opts}" "$url" "$mnt"; then
		t_fail "$tag: mount" "$T_MOUNT_ERR"
		return 0
	fi
	t_eq "$tag: ls shows '$want'" "$(ls -A "$mnt")" "$want"
	if [ -e "$mnt/$want" ]; then
		t_check "$tag: bytes" timeout 60 "$READCMP" seq "$mnt/$want" "$src"
	else
		t_fail "$tag: bytes" "$mnt/$want does not exist"
	fi
	t_check "$tag: unmount" umount_pacefs "$mnt"
}

check_name decoded "$ORIGIN_URL/a%20b%25c.bin" "a b%c.bin" "$WWW/a b%c.bin"
check_name nested "$ORIGIN_URL/dir/plain.bin" "plain.bin" "$WWW/dir/plain.bin"
check_name override "$ORIGIN_URL/a%20b%25c.bin" "other.img" "$WWW/a b%c.bin" "name=other.img"
check_name override-sep "$ORIGIN_URL/dir/plain.bin" "x y.img" "$WWW/dir/plain.bin" "name=x y.img"

t_done

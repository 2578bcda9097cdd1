#!/usr/bin/env bash
# cache.sh: held bytes are read without a request, and a remount with the same
# cache_dir serves them with the origin down; bytes not held then fail fast.
set -euo pipefail
# shellcheck source=tests/lib.sh
source "$(dirname "$0")/../lib.sh"
t_require_mount

MiB=1048576
WWW=$T_TMP/www
mkdir -p "$WWW"
gen_file "$WWW/full.bin" $((8 * MiB + 3)) 21
gen_file "$WWW/part.bin" $((64 * MiB + 5)) 22

# drop_page_cache FILE: forgets FILE's pages in the kernel so the next read
# reaches pacefs (a read served by the page cache would prove nothing).
drop_page_cache() {
	dd if="$1" iflag=nocache count=0 status=none 2>/dev/null || true
}

# mnt_at TAG CACHE URL [OPTIONS]: mounts URL at $T_TMP/mnt-TAG, sets $mnt.
mnt_at() {
	mnt=$T_TMP/mnt-$1
	mkdir -p "$mnt" "$2"
	mount_pacefs -o "cache_dir=$2${4:+,$4}" "$3" "$mnt"
}

# --- a fully read file: no new request, then served with the origin down ----
origin_start "$WWW"
url=$ORIGIN_URL/full.bin
cache=$T_TMP/cache-full
if mnt_at full1 "$cache" "$url"; then
	t_check "full: first read" timeout 120 "$READCMP" seq "$mnt/full.bin" "$WWW/full.bin"
	before=$(origin_requests)
	drop_page_cache "$mnt/full.bin"
	t_check "full: second read" timeout 120 "$READCMP" seq "$mnt/full.bin" "$WWW/full.bin"
	t_check "full: random reads of held bytes" timeout 120 "$READCMP" random "$mnt/full.bin" "$WWW/full.bin" 200 5
	t_eq "full: held bytes made no request" "$(($(origin_requests) - before))" 0
	if [ "$(origin_requests)" != "$before" ]; then
		origin_log | tail -n 5 | sed 's/^/    origin: /'
	fi
	t_check "full: unmount" umount_pacefs "$mnt"
else
	t_fail "full: mount" "$T_MOUNT_ERR"
fi
origin_stop

if mnt_at full2 "$cache" "$url" "read_timeout=5"; then
	t_pass "full: remount with the origin down"
	t_check "full: read with the origin down" timeout 120 "$READCMP" seq "$mnt/full.bin" "$WWW/full.bin"
	t_check "full: random reads with the origin down" timeout 120 "$READCMP" random "$mnt/full.bin" "$WWW/full.bin" 200 6
	t_check "full: unmount with the origin down" umount_pacefs "$mnt"
else
	t_fail "full: remount with the origin down" "$T_MOUNT_ERR"
fi

# --- a partly read file: the held part survives, the rest fails cleanly -----
origin_start "$WWW"
url=$ORIGIN_URL/part.bin
cache=$T_TMP/cache-part
head -c $MiB "$WWW/part.bin" >"$T_TMP/part-head"
if mnt_at part1 "$cache" "$url"; then
	got=$(timeout 60 head -c $MiB "$mnt/part.bin" | sha256sum | cut -d' ' -f1 || true)
	t_eq "part: first MiB" "$got" "$(sha256sum <"$T_TMP/part-head" | cut -d' ' -f1)"
	fetched=$(origin_log | awk '$1 == "GET" { b += $5 } END { print b + 0 }')
	echo "    reading the first MiB fetched $fetched bytes in $(origin_requests) requests"
	t_check "part: unmount" umount_pacefs "$mnt"
else
	t_fail "part: mount" "$T_MOUNT_ERR"
fi
origin_stop

if mnt_at part2 "$cache" "$url" "read_timeout=5,connect_timeout=5"; then
	t_pass "part: remount with the origin down"
	got=$(timeout 60 head -c $MiB "$mnt/part.bin" | sha256sum | cut -d' ' -f1 || true)
	t_eq "part: first MiB with the origin down" "$got" "$(sha256sum <"$T_TMP/part-head" | cut -d' ' -f1)"
	# 60 MiB in: far beyond any read-ahead of the first MiB.
	rc=0
	start=$SECONDS
	err=$(timeout 60 dd if="$mnt/part.bin" of=/dev/null bs=65536 skip=960 count=4 status=none 2>&1) || rc=$?
	if [ "$rc" -eq 124 ]; then
		t_fail "part: bytes not held fail" "read still hanging after 60 s"
	elif [ "$rc" -eq 0 ]; then
		t_fail "part: bytes not held fail" "read succeeded with the origin down"
	else
		t_pass "part: bytes not held fail in $((SECONDS - start)) s ($err)"
	fi
	t_check "part: unmount after a failed read" umount_pacefs "$mnt"
else
	t_fail "part: remount with the origin down" "$T_MOUNT_ERR"
fi

t_done

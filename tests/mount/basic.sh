#!/usr/bin/env bash
# basic.sh: mounts generated blobs of awkward sizes (0 bytes to over 64 MiB)
# and compares what pacefs reads with the source, byte for byte.
set -euo pipefail
# shellcheck source=tests/lib.sh
source "$(dirname "$0")/../lib.sh"
t_require_mount

BLOCK=65536
SIZES=(0 1 4095 262143 262145 1048583 $((67108864 + 12345)))
WWW=$T_TMP/www
mkdir -p "$WWW"
for size in "${SIZES[@]}"; do
	gen_file "$WWW/blob-$size.bin" "$size" "$size"
done
origin_start "$WWW"

# fresh_mount TAG NAME: mounts NAME with a cache_dir of its own at $mnt
# (not in a subshell: the cleanup must learn of the mount).
fresh_mount() {
	local cache=$T_TMP/cache-$1
	mnt=$T_TMP/mnt-$1
	mkdir -p "$mnt" "$cache"
	mount_pacefs -o "cache_dir=$cache,read_timeout=30" "$ORIGIN_URL/$2" "$mnt"
}

for size in "${SIZES[@]}"; do
	name=blob-$size.bin
	src=$WWW/$name

	# Random preads first, on a cold mount and cache, so that they are the
	# reads that fetch.
	if ! fresh_mount "$size-random" "$name"; then
		t_fail "$size: mount" "$T_MOUNT_ERR"
		continue
	fi
	t_pass "$size: mount"
	t_eq "$size: ls shows exactly the name" "$(ls -A "$mnt")" "$name"
	t_eq "$size: stat size" "$(stat -c %s "$mnt/$name" 2>&1)" "$size"
	t_check "$size: random preads" timeout 180 "$READCMP" random "$mnt/$name" "$src" 300 "$size"
	t_check "$size: unmount" umount_pacefs "$mnt"

	# Then boundary-straddling reads on another cold mount, and full reads.
	if ! fresh_mount "$size-seq" "$name"; then
		t_fail "$size: second mount" "$T_MOUNT_ERR"
		continue
	fi
	t_check "$size: straddling reads (block $BLOCK)" timeout 180 "$READCMP" straddle "$mnt/$name" "$src" "$BLOCK"
	t_check "$size: sequential read" timeout 180 "$READCMP" seq "$mnt/$name" "$src"
	t_check "$size: sequential read, 4000-byte reads" timeout 180 "$READCMP" seq "$mnt/$name" "$src" 4000
	got=$(timeout 180 sha256sum <"$mnt/$name" 2>&1 | cut -d' ' -f1 || true)
	t_eq "$size: sha256" "$got" "$(sha256sum <"$src" | cut -d' ' -f1)"

	# Read-only: opening for writing fails with EROFS or EACCES.
	err=$( (exec 3>>"$mnt/$name") 2>&1 || true)
	case $err in
	*"Read-only file system"* | *"Permission denied"*) t_pass "$size: write open refused" ;;
	*) t_fail "$size: write open refused" "got '${err:-success}', want EROFS or EACCES" ;;
	esac
	err=$( (exec 3>"$mnt/new-file") 2>&1 || true)
	case $err in
	*"Read-only file system"* | *"Permission denied"*) t_pass "$size: create refused" ;;
	*) t_fail "$size: create refused" "got '${err:-success}', want EROFS or EACCES" ;;
	esac
	t_check "$size: unmount after reads" umount_pacefs "$mnt"

	# Concurrent readers on a cold mount: four seeded random readers at once.
	if [ "$size" -ge 1048576 ]; then
		if ! fresh_mount "$size-parallel" "$name"; then
			t_fail "$size: parallel mount" "$T_MOUNT_ERR"
			continue
		fi
		pids=()
		for seed in 1 2 3 4; do
			timeout 180 "$READCMP" random "$mnt/$name" "$src" 200 "$((size + seed))" \
				>"$T_TMP/par-$seed.out" 2>&1 &
			pids+=("$!")
		done
		for seed in 1 2 3 4; do
			rc=0
			wait "${pids[$((seed - 1))]}" || rc=$?
			if [ "$rc" -eq 0 ]; then
				t_pass "$size: parallel random reader $seed"
			else
				t_fail "$size: parallel random reader $seed" "exit $rc: $(tail -n 2 "$T_TMP/par-$seed.out" | tr '\n' ' ')"
			fi
		done
		t_check "$size: unmount after parallel reads" umount_pacefs "$mnt"
	fi
done

# Every fetch was a range request (a 0-byte blob has no range to ask for).
full=$(origin_log | awk '$1 == "GET" && $3 != 206 && $2 != "/blob-0.bin"' | head -n 3)
t_eq "all fetches are range requests (206)" "$full" ""

t_done

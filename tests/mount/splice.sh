#!/usr/bin/env bash
# splice.sh: reads answered from the cache's file (fuse_reply_data over
# data.mdb, spliced by the kernel) return the origin's bytes. A cold read
# (blocks in memory, one writev); after a remount, with data.mdb's pages
# dropped, a read through the kernel's readahead whose replies the daemon
# splices (its syscalls counted), O_DIRECT reads of sizes that end in a short
# piece (read, then spliced) or that no pipe holds (libfuse copies); a
# second open served by the page cache (keep_cache, no read answered); and
# readers of held bytes while other readers, in this mount and in a second
# mount of the same cache, evict blocks under a small budget, so that blocks
# leave the cache while replies of them are being spliced.
set -euo pipefail
# shellcheck source=tests/lib.sh
source "$(dirname "$0")/../lib.sh"
t_require_mount
if ! command -v strace >/dev/null 2>&1; then
	t_fail "$T_NAME" "strace is missing (contrib/install-deps.sh installs it)"
	t_done
fi

MiB=1048576
WWW=$T_TMP/www
CACHE=$T_TMP/cache
MNT=$T_TMP/mnt
MNT2=$T_TMP/mnt2
mkdir -p "$WWW" "$MNT" "$MNT2"
gen_file "$WWW/f.bin" $((24 * MiB + 4097)) 1601
for i in 1 2 3; do
	gen_file "$WWW/g$i.bin" $((12 * MiB + 1000 * i)) $((1610 + i))
done
origin_start "$WWW" 'autoindex on; autoindex_exact_size on;'

# daemon_pid MNT: the pacefs process serving MNT.
daemon_pid() {
	pgrep -n -f "pacefs .*$1\$" || pgrep -n -f "pacefs .*$1 "
}

# direct_cmp NAME MNTFILE SRC BS: reads MNTFILE with O_DIRECT reads of BS
# bytes (each one a FUSE read of that size) and compares it with SRC.
direct_cmp() {
	local out=$T_TMP/direct.$BASHPID
	if timeout 120 dd if="$2" of="$out" bs="$4" iflag=direct status=none; then
		t_check "$1" cmp "$out" "$3"
	else
		t_fail "$1" "dd failed"
	fi
	rm -f "$out"
}

# --- cold: replies from the blocks in memory --------------------------------
if mount_pacefs -o "cache_dir=$CACHE" "$ORIGIN_URL/f.bin" "$MNT"; then
	t_check "cold read" timeout 120 "$READCMP" seq "$MNT/f.bin" "$WWW/f.bin"
	t_check "cold: unmount" umount_pacefs "$MNT"
else
	t_fail "cold: mount" "$T_MOUNT_ERR"
fi

# --- after a remount: replies spliced from data.mdb --------------------------
# data.mdb's pages leave the page cache: the splice reads them from disk.
dd if="$CACHE/data.mdb" iflag=nocache count=0 status=none 2>/dev/null || true
before=$(origin_requests)
if mount_pacefs -o "cache_dir=$CACHE" "$ORIGIN_URL/f.bin" "$MNT"; then
	pid=$(daemon_pid "$MNT")
	strace -f -qq -c -e trace=splice,vmsplice,pread64 -o "$T_TMP/strace.txt" -p "$pid" &
	spid=$!
	sleep 1 # strace attaches to every thread
	t_check "remount: read-back through the kernel's readahead" \
		timeout 120 "$READCMP" seq "$MNT/f.bin" "$WWW/f.bin"
	kill -INT "$spid" 2>/dev/null || true
	wait "$spid" 2>/dev/null || true
	splices=$(awk '$NF == "splice" { print $4 }' "$T_TMP/strace.txt")
	preads=$(awk '$NF == "pread64" { print $4 }' "$T_TMP/strace.txt")
	# 24 MiB in 128 KiB replies: about 200, each two splices (data.mdb to
	# the pipe, the pipe to /dev/fuse). A reply libfuse copied instead
	# would show as a pread of each 64 KiB block.
	if [ "${splices:-0}" -ge 200 ] && [ "${preads:-0}" -lt 20 ]; then
		t_pass "remount: replies spliced ($splices splices, ${preads:-0} preads)"
	else
		t_fail "remount: replies spliced" "${splices:-0} splices, ${preads:-0} preads: $(cat "$T_TMP/strace.txt")"
	fi
	# A second open of the unchanged file reads the kernel's page cache
	# (keep_cache): the daemon answers no read, spliced or copied. Another
	# process that drops every page cache meanwhile (verify.sh and
	# badproxy.sh do, in a make check run beside this one) makes the
	# kernel read it all again: then the check is made once more, over
	# pages that read put back.
	for try in 1 2; do
		drops=$(awk '$1 == "drop_pagecache" { print $2 }' /proc/vmstat)
		strace -f -qq -c -e trace=splice,writev,pread64 -o "$T_TMP/strace2.txt" -p "$pid" &
		spid=$!
		sleep 1
		t_check "remount: a second open, the same bytes" cmp "$MNT/f.bin" "$WWW/f.bin"
		kill -INT "$spid" 2>/dev/null || true
		wait "$spid" 2>/dev/null || true
		# A spliced reply is two splices (data.mdb to the pipe, the pipe
		# to /dev/fuse); a copied one a pread and a writev; open, flush
		# and release a writev each.
		replies=$(awk '$NF == "splice" { n += $4 / 2 } $NF == "writev" { n += $4 }
			END { printf "%d\n", n }' "$T_TMP/strace2.txt")
		[ "$replies" -lt 48 ] && break
		[ "$(awk '$1 == "drop_pagecache" { print $2 }' /proc/vmstat)" != "$drops" ] || break
		echo "remount: the page cache was dropped by another process; again"
	done
	# 24 MiB read again would be about 200 replies of 128 KiB. The kernel
	# may have reclaimed some pages since the first read (a busy CI host
	# took back 14 replies' worth): a quarter of them at most.
	if [ "$replies" -lt 48 ]; then
		t_pass "remount: a second open reads the page cache ($replies replies)"
	else
		t_fail "remount: a second open reads the page cache" "$replies replies: $(cat "$T_TMP/strace2.txt")"
	fi
	# Sizes off every block: a short last piece, pieces in 2 blocks.
	for bs in 1M 196608 69632 12288 4096; do
		direct_cmp "remount: O_DIRECT reads of $bs" "$MNT/f.bin" "$WWW/f.bin" "$bs"
	done
	t_check "remount: random reads" timeout 120 env READCMP_DONTNEED=1 \
		"$READCMP" random "$MNT/f.bin" "$WWW/f.bin" 300 16
	t_eq "remount: no request but the mount's probe" "$(($(origin_requests) - before))" 1
	t_check "remount: unmount" umount_pacefs "$MNT"
else
	t_fail "remount: mount" "$T_MOUNT_ERR"
fi

# --- eviction while replies are spliced --------------------------------------
# Two mounts of the directory, over the same cache, each with a 4 MiB
# budget: the cold readers' blocks push out f.bin's, which its readers,
# reading directly (every read a FUSE read), keep taking from data.mdb, or
# fetch again once gone; the other mount evicts them with no regard for
# this one's readers.
opts="cache_dir=$CACHE,cache_size=4M,log_level=debug"
if fg_mount "$T_TMP/evict1.log" -o "$opts" "$ORIGIN_URL/" "$MNT" &&
	fg_mount "$T_TMP/evict2.log" -o "$opts" "$ORIGIN_URL/" "$MNT2"; then
	pids=()
	names=()
	k=0
	for bs in 1M 131072 69632; do
		for m in "$MNT" "$MNT2"; do
			k=$((k + 1))
			(for r in 1 2; do
				timeout 120 dd if="$m/f.bin" of="$T_TMP/ev.$k.$r" bs="$bs" iflag=direct status=none || exit 1
			done) &
			pids+=($!)
			names+=("f.bin in $(basename "$m"), bs $bs: $T_TMP/ev.$k.1 $T_TMP/ev.$k.2")
		done
	done
	for i in 1 2 3; do
		timeout 120 "$READCMP" seq "$MNT2/g$i.bin" "$WWW/g$i.bin" >"$T_TMP/g$i.out" 2>&1 &
		pids+=($!)
		names+=("g$i.bin in mnt2, cold")
	done
	for j in "${!pids[@]}"; do
		rc=0
		wait "${pids[$j]}" || rc=$?
		what=${names[$j]%%:*}
		if [ "$rc" -ne 0 ]; then
			t_fail "evicting: $what" "exit $rc; logs: $(grep -h -i -E 'error|EIO|cannot' "$T_TMP"/evict?.log | tail -n 3)"
		elif [[ ${names[$j]} == *": "* ]]; then
			ok=1
			for out in ${names[$j]#*: }; do
				cmp -s "$out" "$WWW/f.bin" || ok=0
			done
			if [ "$ok" -eq 1 ]; then
				t_pass "evicting: $what, every byte, twice"
			else
				t_fail "evicting: $what" "bytes differ from the origin's"
			fi
		else
			t_pass "evicting: $what, every byte"
		fi
	done
	rm -f "$T_TMP"/ev.*
	t_check "evicting: unmount" umount_pacefs "$MNT2"
	t_check "evicting: unmount the other" umount_pacefs "$MNT"
	held=$("$PACEFS" cache stat --cache-dir "$CACHE" | awk '/^bytes held:/ { gsub(/[()]/, "", $5); print $5 }')
	# f.bin alone is 24 MiB: what is held is within the budget and a batch.
	if [ -n "$held" ] && [ "$held" -le $((4 * MiB + 16 * MiB)) ]; then
		t_pass "evicting: blocks were evicted ($held bytes held)"
	else
		t_fail "evicting: blocks were evicted" "held '$held'"
	fi
else
	t_fail "evicting: mount" "$T_MOUNT_ERR"
fi

t_done

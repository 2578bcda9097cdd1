#!/usr/bin/env bash
# crash.sh: kill -9 the daemon at random moments of heavy transfers, remount
# with the same cache_dir each time, and check that the cache opens and that
# every byte it claims equals the origin's (read from the cache directly, and
# at the end through a mount with the origin gone); then two pacefs processes
# sharing one cache_dir read correctly at the same time.
set -euo pipefail
# shellcheck source=tests/lib.sh
source "$(dirname "$0")/../lib.sh"
t_require_mount

TEST_CACHE=${TEST_CACHE:-$(dirname "$PACEFS")/tests/test_cache}
if [ ! -x "$TEST_CACHE" ]; then
	t_fail "$T_NAME" "test_cache not found at $TEST_CACHE (run make build/tests/test_cache)"
	t_done
fi
ITERATIONS=${CRASH_ITERATIONS:-20}
MiB=1048576
SIZE=$((64 * MiB + 12345))
WWW=$T_TMP/www
MNT=$T_TMP/mnt
CACHE=$T_TMP/cache
mkdir -p "$WWW" "$MNT"
gen_file "$WWW/big.bin" "$SIZE" 31
gen_file "$WWW/shared.bin" $((32 * MiB + 7)) 32

# 8 MiB/s per connection: with 8 lanes the 64 MiB file takes about a second,
# so that the kills land in the middle of transfers.
o_start crash --root "$WWW" --rate 8M --quiet
URL=$O_URL/big.bin

# check_cache TAG: the checker opens the cache (so it opens after the crash),
# compares every claimed byte with the origin's file, and checks that every
# extent is stored. Sets HELD (bytes) and EXTENTS (lines "extent START END").
check_cache() {
	local out rc=0
	out=$("$TEST_CACHE" --check-against "$CACHE" "url:$URL" "$WWW/big.bin" 2>&1) || rc=$?
	HELD=$(printf '%s\n' "$out" | awk 'NR == 1 { print $1 }')
	EXTENTS=$(printf '%s\n' "$out" | grep '^extent ' || true)
	if [ "$rc" -ne 0 ]; then
		t_fail "$1" "the cache claims bytes it does not hold correctly (exit $rc): $(printf '%s' "$out" | head -n 3 | tr '\n' ' ')"
		return 1
	fi
	return 0
}

start=$SECONDS
bad=0
kills=0
resets=0
total_held=0
for i in $(seq 1 "$ITERATIONS"); do
	if ! fg_mount "$T_TMP/mount-$i.log" -o "cache_dir=$CACHE,read_timeout=30" "$URL" "$MNT"; then
		t_fail "crash $i: remount" "$(tail -n 3 "$T_TMP/mount-$i.log" | tr '\n' ' ')"
		bad=1
		break
	fi
	pid=$FG_PID
	# Two readers from random block-aligned offsets, to keep lanes busy.
	readers=()
	for _ in 1 2; do
		skip=$((RANDOM % 64))
		dd if="$MNT/big.bin" of=/dev/null bs=1M skip="$skip" status=none 2>/dev/null &
		readers+=($!)
	done
	sleep "$(awk -v r="$RANDOM" 'BEGIN { printf "%.2f", 0.05 + (r % 96) / 100 }')"
	kill -KILL "$pid" 2>/dev/null && kills=$((kills + 1))
	wait "$pid" 2>/dev/null || true
	for r in "${readers[@]}"; do
		kill -KILL "$r" 2>/dev/null || true
		wait "$r" 2>/dev/null || true
	done
	if ! umount_pacefs "$MNT"; then
		t_fail "crash $i: unmount of the dead mount" "still mounted"
		bad=1
		break
	fi
	if ! check_cache "crash $i"; then
		bad=1
		break
	fi
	total_held=$((total_held + HELD))
	# A nearly complete cache makes few transfers: start it afresh (same
	# path), so that every kill lands in heavy traffic.
	if [ $((HELD * 4)) -ge $((SIZE * 3)) ]; then
		rm -rf "$CACHE"
		resets=$((resets + 1))
	fi
done
if [ "$bad" -eq 0 ]; then
	t_pass "crash: $kills kill -9 during transfers, the cache opened and every claimed byte matched each time (held on average $((total_held / ITERATIONS / MiB)) MiB, $resets fresh starts, $((SECONDS - start)) s)"
fi

# --- held bytes through a mount, with the origin gone ------------------------
# A fresh cache gets two separate ranges and a kill -9, then every held
# extent is read through a mount whose origin is down: only the cache can
# serve them.
rm -rf "$CACHE"
if [ "$bad" -eq 0 ] && fg_mount "$T_TMP/mount-last.log" -o "cache_dir=$CACHE" "$URL" "$MNT"; then
	pid=$FG_PID
	timeout 20 dd if="$MNT/big.bin" of=/dev/null bs=1M count=8 status=none 2>/dev/null &
	r1=$!
	timeout 20 dd if="$MNT/big.bin" of=/dev/null bs=1M skip=40 count=8 status=none 2>/dev/null || true
	wait "$r1" || true
	kill -KILL "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
	umount_pacefs "$MNT" || true
	o_kill_all
	if check_cache "crash: final check" && [ -n "$EXTENTS" ] &&
		fg_mount "$T_TMP/mount-offline.log" -o "cache_dir=$CACHE,read_timeout=5,connect_timeout=2" "$URL" "$MNT"; then
		mismatch=0
		n=0
		while read -r _ s e; do
			n=$((n + 1))
			if ! cmp -s <(dd if="$MNT/big.bin" iflag=skip_bytes,count_bytes skip="$s" count=$((e - s)) bs=1M status=none) \
				<(dd if="$WWW/big.bin" iflag=skip_bytes,count_bytes skip="$s" count=$((e - s)) bs=1M status=none); then
				mismatch=$((mismatch + 1))
				echo "    extent $s-$e differs through the mount"
			fi
		done <<<"$EXTENTS"
		t_eq "crash: $n held extents ($((HELD / MiB)) MiB) read through a mount with the origin down" "$mismatch" 0
		umount_pacefs "$MNT" || true
	else
		t_fail "crash: offline remount" "$(tail -n 3 "$T_TMP/mount-offline.log" 2>/dev/null | tr '\n' ' ')"
	fi
fi

# --- two mounts, one cache_dir, at the same time -----------------------------
o_start shared --root "$WWW" --rate 16M --quiet
SHARED=$T_TMP/cache-shared
mkdir -p "$T_TMP/mnt-a" "$T_TMP/mnt-b"
if fg_mount "$T_TMP/mount-a.log" -o "cache_dir=$SHARED" "$O_URL/shared.bin" "$T_TMP/mnt-a" &&
	fg_mount "$T_TMP/mount-b.log" -o "cache_dir=$SHARED" "$O_URL/shared.bin" "$T_TMP/mnt-b"; then
	rc_a=0
	rc_b=0
	rc_c=0
	timeout 120 "$READCMP" seq "$T_TMP/mnt-a/shared.bin" "$WWW/shared.bin" >"$T_TMP/a.out" 2>&1 &
	pa=$!
	timeout 120 "$READCMP" seq "$T_TMP/mnt-b/shared.bin" "$WWW/shared.bin" >"$T_TMP/b.out" 2>&1 &
	pb=$!
	timeout 120 "$READCMP" random "$T_TMP/mnt-b/shared.bin" "$WWW/shared.bin" 100 7 >"$T_TMP/c.out" 2>&1 &
	pc=$!
	wait "$pa" || rc_a=$?
	wait "$pb" || rc_b=$?
	wait "$pc" || rc_c=$?
	t_eq "shared: mount A reads correctly while B reads" "$rc_a" 0
	t_eq "shared: mount B reads correctly while A reads" "$rc_b" 0
	t_eq "shared: random reads on B meanwhile" "$rc_c" 0
	[ "$rc_a$rc_b$rc_c" = 000 ] || tail -n 3 "$T_TMP/a.out" "$T_TMP/b.out" "$T_TMP/c.out" | sed 's/^/    /'
	umount_pacefs "$T_TMP/mnt-a" || true
	umount_pacefs "$T_TMP/mnt-b" || true
	out=$("$TEST_CACHE" --check-against "$SHARED" "url:$O_URL/shared.bin" "$WWW/shared.bin" 2>&1) && rc=0 || rc=$?
	t_eq "shared: the cache holds the whole file, byte for byte" "$rc $(printf '%s' "$out" | awk 'NR == 1 { print $1 }')" "0 $((32 * MiB + 7))"
else
	t_fail "shared: two mounts of one cache_dir" "$(tail -n 2 "$T_TMP/mount-a.log" "$T_TMP/mount-b.log" 2>/dev/null | tr '\n' ' ')"
fi

t_done

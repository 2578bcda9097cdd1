#!/usr/bin/env bash
# cli.sh: foreground and debug modes, lane counts, libfuse option
# passthrough, SIGTERM unmounting with the cache flushed, and a daemon
# killed mid-read leaving a cache that a remount still reads correctly.
set -euo pipefail
# shellcheck source=tests/lib.sh
source "$(dirname "$0")/../lib.sh"
t_require_mount

MiB=1048576
WWW=$T_TMP/www
mkdir -p "$WWW"
gen_file "$WWW/eight.bin" $((8 * MiB + 1)) 41
gen_file "$WWW/big.bin" $((64 * MiB + 17)) 42
origin_start "$WWW"

# wait_exit PID SECS: waits for PID, a child of this shell, to exit; sets
# $status to its exit status, or "running".
wait_exit() {
	local i rc=0
	status=running
	for i in $(seq 1 $(($2 * 20))); do
		if ! kill -0 "$1" 2>/dev/null; then
			wait "$1" || rc=$?
			status=$rc
			return 0
		fi
		sleep 0.05
	done
}

# foreground TAG FLAG: mounts with FLAG (-f or -d) in the background of this
# shell, reads, unmounts, and expects pacefs to exit 0.
foreground() {
	local tag=$1 flag=$2 mnt=$T_TMP/mnt-$1 pid
	mkdir -p "$mnt" "$T_TMP/cache-$tag"
	T_MOUNTS+=("$mnt")
	"$PACEFS" "$flag" -o "cache_dir=$T_TMP/cache-$tag" "$ORIGIN_URL/eight.bin" "$mnt" \
		</dev/null >"$T_TMP/$tag.log" 2>&1 &
	pid=$!
	if ! mount_wait "$mnt" "$pid"; then
		t_fail "$tag: mount" "$(tail -n 3 "$T_TMP/$tag.log" | tr '\n' ' ')"
		kill "$pid" 2>/dev/null || true
		return 0
	fi
	t_pass "$tag: mount"
	t_check "$tag: read" timeout 120 "$READCMP" random "$mnt/eight.bin" "$WWW/eight.bin" 200 9
	t_check "$tag: unmount" fusermount3 -u "$mnt"
	wait_exit "$pid" 20
	t_eq "$tag: pacefs exits 0 after fusermount3 -u" "$status" 0
	if [ "$status" = running ]; then
		kill -KILL "$pid" 2>/dev/null || true
	fi
	if [ "$flag" = -d ]; then
		if [ -s "$T_TMP/$tag.log" ]; then
			t_pass "$tag: debug log written ($(wc -l <"$T_TMP/$tag.log") lines)"
		else
			t_fail "$tag: debug log written" "-d wrote nothing on stderr"
		fi
	fi
}

foreground foreground -f
foreground debug -d

# Lane counts at both ends of their range give the same bytes.
for lanes in 1 64; do
	mnt=$T_TMP/mnt-lanes$lanes
	mkdir -p "$mnt"
	if mount_pacefs -o "cache_dir=$T_TMP/cache-lanes$lanes,lanes=$lanes" "$ORIGIN_URL/big.bin" "$mnt"; then
		t_check "lanes=$lanes: random reads" timeout 180 "$READCMP" random "$mnt/big.bin" "$WWW/big.bin" 300 "$lanes"
		t_check "lanes=$lanes: sequential read" timeout 180 "$READCMP" seq "$mnt/big.bin" "$WWW/big.bin"
		t_check "lanes=$lanes: unmount" umount_pacefs "$mnt"
	else
		t_fail "lanes=$lanes: mount" "$T_MOUNT_ERR"
	fi
done

# A libfuse option passes through to the mount.
mnt=$T_TMP/mnt-allow
mkdir -p "$mnt"
if mount_pacefs -o "cache_dir=$T_TMP/cache-allow,allow_other" "$ORIGIN_URL/eight.bin" "$mnt"; then
	if mount_line "$mnt" | grep -q 'allow_other'; then
		t_pass "allow_other reaches the mount"
	else
		t_fail "allow_other reaches the mount" "$(mount_line "$mnt")"
	fi
	t_check "allow_other: unmount" umount_pacefs "$mnt"
else
	t_fail "allow_other: mount" "$T_MOUNT_ERR"
fi

# SIGTERM to the daemon: it unmounts by itself with everything read in the
# cache, so a remount with the origin stopped serves it all.
mnt=$T_TMP/mnt-term
cache=$T_TMP/cache-term
mkdir -p "$mnt"
if mount_pacefs -o "cache_dir=$cache" "$ORIGIN_URL/eight.bin" "$mnt"; then
	t_check "SIGTERM: read before" cmp "$mnt/eight.bin" "$WWW/eight.bin"
	pid=$(pgrep -f "cache_dir=$cache" | head -n 1)
	kill -TERM "$pid"
	for _ in $(seq 1 200); do
		! is_mounted "$mnt" && ! kill -0 "$pid" 2>/dev/null && break
		sleep 0.05
	done
	if ! is_mounted "$mnt" && ! kill -0 "$pid" 2>/dev/null; then
		t_pass "SIGTERM: unmounted and exited"
	else
		t_fail "SIGTERM: unmounted and exited" "$(mount_line "$mnt")"
	fi
	origin_stop
	if mount_pacefs -o "cache_dir=$cache" "$ORIGIN_URL/eight.bin" "$mnt"; then
		t_check "SIGTERM: every byte from the cache, origin stopped" cmp "$mnt/eight.bin" "$WWW/eight.bin"
		umount_pacefs "$mnt"
	else
		t_fail "SIGTERM: remount from the cache" "$T_MOUNT_ERR"
	fi
	origin_start "$WWW"
else
	t_fail "SIGTERM: mount" "$T_MOUNT_ERR"
fi

# kill -9 in the middle of a read: the cache must hold only whole, correct
# bytes, so a remount with the same cache_dir reads the blob exactly.
mnt=$T_TMP/mnt-kill
cache=$T_TMP/cache-kill
mkdir -p "$mnt" "$cache"
T_MOUNTS+=("$mnt")
"$PACEFS" -f -o "cache_dir=$cache" "$ORIGIN_URL/big.bin" "$mnt" </dev/null >"$T_TMP/kill.log" 2>&1 &
pid=$!
if mount_wait "$mnt" "$pid"; then
	base=$(origin_log | grep -c '^GET /big.bin 206' || true)
	timeout 120 "$READCMP" seq "$mnt/big.bin" "$WWW/big.bin" >/dev/null 2>&1 &
	reader=$!
	# Kill once a few range requests have gone out: mid-transfer.
	for _ in $(seq 1 200); do
		[ "$(origin_log | grep -c '^GET /big.bin 206' || true)" -lt $((base + 4)) ] || break
		sleep 0.01
	done
	kill -KILL "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
	rc=0
	wait "$reader" 2>/dev/null || rc=$?
	if [ "$rc" -eq 0 ]; then
		echo "    (the reader finished before the kill: a weaker test this time)"
	else
		echo "    killed pacefs after $(($(origin_log | grep -c '^GET /big.bin 206' || true) - base)) range requests; the reader got exit $rc"
	fi
	t_check "kill -9: stale mount removed" umount_pacefs "$mnt"
	if mount_pacefs -o "cache_dir=$cache" "$ORIGIN_URL/big.bin" "$mnt"; then
		t_pass "kill -9: remount with the same cache_dir"
		t_check "kill -9: sequential read after remount" timeout 180 "$READCMP" seq "$mnt/big.bin" "$WWW/big.bin"
		t_check "kill -9: straddling reads after remount" timeout 180 "$READCMP" straddle "$mnt/big.bin" "$WWW/big.bin" 65536
		t_check "kill -9: unmount" umount_pacefs "$mnt"
	else
		t_fail "kill -9: remount with the same cache_dir" "$T_MOUNT_ERR"
	fi
else
	t_fail "kill -9: mount" "$(tail -n 3 "$T_TMP/kill.log" | tr '\n' ' ')"
fi

t_done

#!/usr/bin/env bash
# errors.sh: bad input makes pacefs exit 1 quickly with one stderr line naming
# the cause, and leaves nothing mounted.
set -euo pipefail
# shellcheck source=tests/lib.sh
source "$(dirname "$0")/../lib.sh"
t_require_mount

WWW=$T_TMP/www
mkdir -p "$WWW/norange" "$T_TMP/mnt"
gen_file "$WWW/ok.bin" 300000 31
gen_file "$WWW/norange/ok.bin" 300000 32
origin_start "$WWW" 'location /norange/ { max_ranges 0; }'
MNT=$T_TMP/mnt
CACHE=$T_TMP/cache
mkdir -p "$CACHE"

# expect_error NAME REGEX MOUNTPOINT PACEFS_ARGS...: pacefs must exit 1
# within 30 s, print exactly one stderr line, "pacefs: CAUSE", matching REGEX
# (grep -Ei), and leave MOUNTPOINT unmounted.
expect_error() {
	local name=$1 regex=$2 mnt=$3 rc=0 start lines
	shift 3
	start=$SECONDS
	timeout 30 "$PACEFS" "$@" </dev/null >"$T_TMP/out" 2>"$T_TMP/err" || rc=$?
	lines=$(grep -c . "$T_TMP/err" || true)
	if [ "$rc" -eq 124 ]; then
		t_fail "$name" "still running after 30 s: pacefs $*"
	elif [ "$rc" -ne 1 ]; then
		t_fail "$name" "exit status $rc, want 1 (stderr: $(head -c 300 "$T_TMP/err"))"
	elif [ "$lines" -ne 1 ]; then
		t_fail "$name" "$lines stderr lines, want 1: $(head -n 5 "$T_TMP/err" | tr '\n' '|')"
	elif ! grep -q '^pacefs: ' "$T_TMP/err"; then
		t_fail "$name" "stderr '$(cat "$T_TMP/err")' does not start with 'pacefs: '"
	elif ! grep -Eiq -- "$regex" "$T_TMP/err"; then
		t_fail "$name" "stderr '$(cat "$T_TMP/err")' does not match /$regex/"
	else
		t_pass "$name in $((SECONDS - start)) s: $(cat "$T_TMP/err")"
	fi
	if is_mounted "$mnt"; then
		t_fail "$name: nothing mounted" "$mnt is mounted after the error"
		t_track_mount "$mnt"
		umount_pacefs "$mnt" || true
	fi
	if [ -e "$mnt" ] && [ -d "$mnt" ] && [ -n "$(ls -A "$mnt" 2>/dev/null)" ]; then
		t_fail "$name: mountpoint untouched" "$mnt is not empty: $(ls -A "$mnt")"
	fi
}

dead_port=$(free_port)
expect_error "unreachable host" "connect|refused|resolve|unreachable" "$MNT" \
	-o "cache_dir=$CACHE,connect_timeout=5" "http://127.0.0.1:$dead_port/x.bin" "$MNT"
expect_error "missing file (404)" "404" "$MNT" \
	-o "cache_dir=$CACHE" "$ORIGIN_URL/missing.bin" "$MNT"
# A server that ignores Range is no error: its file is read as one stream.
if mount_pacefs -o "cache_dir=$CACHE" "$ORIGIN_URL/norange/ok.bin" "$MNT"; then
	t_eq "server ignores Range: mounts and reads right" \
		"$(sha256sum <"$MNT/ok.bin")" "$(sha256sum <"$WWW/norange/ok.bin")"
	umount_pacefs "$MNT"
else
	t_fail "server ignores Range: mounts" "$T_MOUNT_ERR"
fi
expect_error "missing mountpoint" "$T_TMP/nonexistent.*no such file" "$T_TMP/nonexistent" \
	-o "cache_dir=$CACHE" "$ORIGIN_URL/ok.bin" "$T_TMP/nonexistent"
touch "$T_TMP/regular"
expect_error "mountpoint is a regular file" "$T_TMP/regular.*not a directory" "$T_TMP/regular" \
	-o "cache_dir=$CACHE" "$ORIGIN_URL/ok.bin" "$T_TMP/regular"
expect_error "cache_dir below a regular file" "cache_dir" "$MNT" \
	-o "cache_dir=$T_TMP/regular/cache" "$ORIGIN_URL/ok.bin" "$MNT"
mkdir -p "$T_TMP/rofs"
if mount -t tmpfs -o ro,size=1m pacefs-test-ro "$T_TMP/rofs"; then
	t_track_mount "$T_TMP/rofs"
	expect_error "cache_dir on a read-only filesystem" "cache_dir" "$MNT" \
		-o "cache_dir=$T_TMP/rofs/cache" "$ORIGIN_URL/ok.bin" "$MNT"
	umount "$T_TMP/rofs"
else
	t_skip "cache_dir on a read-only filesystem" "could not mount a read-only tmpfs"
fi
expect_error "unknown option" "bogus" "$MNT" \
	-o "cache_dir=$CACHE,bogus=1" "$ORIGIN_URL/ok.bin" "$MNT"
expect_error "bad lanes value" "lanes" "$MNT" \
	-o "cache_dir=$CACHE,lanes=zero" "$ORIGIN_URL/ok.bin" "$MNT"

# No URL or mountpoint: a usage error, not a crash.
rc=0
timeout 30 "$PACEFS" >/dev/null 2>"$T_TMP/err" </dev/null || rc=$?
if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && [ "$rc" -lt 128 ] && [ -s "$T_TMP/err" ]; then
	t_pass "no arguments: exit $rc with a message"
else
	t_fail "no arguments" "exit $rc, stderr '$(head -c 200 "$T_TMP/err")'"
fi

# -V and -h succeed and say something useful.
rc=0
out=$(timeout 10 "$PACEFS" -V 2>&1) || rc=$?
if [ "$rc" -eq 0 ] && grep -q pacefs <<<"$out"; then
	t_pass "-V: $(head -n 1 <<<"$out")"
else
	t_fail "-V" "exit $rc, output '$out'"
fi
rc=0
out=$(timeout 10 "$PACEFS" -h 2>&1) || rc=$?
if [ "$rc" -eq 0 ] && grep -q cache_dir <<<"$out"; then
	t_pass "-h lists the options"
else
	t_fail "-h" "exit $rc, output without 'cache_dir': $(head -c 200 <<<"$out")"
fi

t_eq "no pacefs mount left" "$(awk -v r="$T_TMP/" 'index($5, r) == 1 && $0 ~ / - fuse/' /proc/self/mountinfo | wc -l)" 0

t_done

#!/usr/bin/env bash
# scatter.sh: a scattered reader of a small file gets its neighbourhood.
# One process reads a 4 MiB file on a far origin (20 ms, 8 MB/s a
# connection) at five scattered places, 4 KiB each, with the kernel's
# readahead off (POSIX_FADV_RANDOM); then, after a pause, eight more reads
# within 192 KiB of those places, in chunks not read yet. With
# speculation on (the default), idle lanes fetched the neighbourhoods
# (here, the small file whole) while the first reads went on: the later
# reads send no request. With -o speculate=off each of them costs one;
# every byte read is compared with the origin's, and `pacefs status`
# counts the bytes asked speculatively.
set -euo pipefail
# shellcheck source=tests/lib.sh
source "$(dirname "$0")/../lib.sh"
t_require_mount
t_require_origin

MiB=$((1024 * 1024))
WWW=$T_TMP/www
mkdir -p "$WWW"
gen_file "$WWW/small.bin" $((4 * MiB)) 3131
o_start far --root "$WWW" --autoindex --latency 20 --rate 8M

# read_scattered MNT OUT: the two phases of reads; prints nothing, writes
# the origin's request counts before and after the second phase to OUT.
read_scattered() {
	python3 - "$1/small.bin" "$WWW/small.bin" "$O_LOG" "$2" <<'EOF'
import os, sys, time
path, src, log, out = sys.argv[1:5]
K = 1024
first = [600 * K, 1400 * K, 2200 * K, 3000 * K, 3500 * K]
later = [p + d for p in first[:4] for d in (128 * K, -128 * K)]
ref = open(src, "rb").read()
fd = os.open(path, os.O_RDONLY)
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
def check(off):
    b = os.pread(fd, 4 * K, off)
    if b != ref[off:off + 4 * K]:
        sys.exit("bytes differ at %d" % off)
def requests():
    with open(log) as f:
        return sum(1 for _ in f)
for off in first:
    check(off)
time.sleep(0.5)
before = requests()
for off in later:
    check(off)
after = requests()
os.close(fd)
open(out, "w").write("%d %d\n" % (before, after))
EOF
}

# run TAG OPTS...: mounts with OPTS, reads, sets LATER to the later
# reads' requests; `pacefs status` is kept in $T_TMP/TAG.status.
run() {
	local tag=$1 counts
	shift
	mkdir -p "$T_TMP/$tag"
	if ! mount_pacefs -o "cache_dir=$T_TMP/$tag.cache" "$@" "$O_URL/" "$T_TMP/$tag"; then
		t_fail "$tag: mount" "$T_MOUNT_ERR"
		return 1
	fi
	if ! read_scattered "$T_TMP/$tag" "$T_TMP/$tag.counts" 2>"$T_TMP/$tag.err"; then
		t_fail "$tag: the bytes read are the origin's" "$(tail -n 2 "$T_TMP/$tag.err")"
		umount_pacefs "$T_TMP/$tag"
		return 1
	fi
	"$PACEFS" status "$T_TMP/$tag" >"$T_TMP/$tag.status" 2>&1 || true
	umount_pacefs "$T_TMP/$tag"
	read -r b a <"$T_TMP/$tag.counts"
	LATER=$((a - b))
}

if run on; then
	on=$LATER
	if [ "$on" -eq 0 ]; then
		t_pass "speculation on: 8 reads near 4 scattered ones sent no request"
	else
		t_fail "a scattered reader of a small file gets its neighbourhood" "8 later reads nearby sent $on requests"
	fi
	if grep -q '^speculation: .* asked' "$T_TMP/on.status" &&
		! grep -q '^speculation: 0 B asked' "$T_TMP/on.status"; then
		t_pass "pacefs status: $(grep '^speculation:' "$T_TMP/on.status")"
	else
		t_fail "pacefs status counts speculative bytes" "$(tail -n 3 "$T_TMP/on.status")"
	fi
fi
if run off -o speculate=off; then
	off=$LATER
	if [ "$off" -ge 6 ]; then
		t_pass "speculate=off: the 8 later reads sent $off requests"
	else
		t_fail "speculate=off fetches nothing ahead" "8 later reads sent only $off requests"
	fi
fi

t_done

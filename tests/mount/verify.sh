#!/usr/bin/env bash
# verify.sh: digests. A whole-blob SHA-256 (-o sha256, or a manifest's) is
# checked once every byte is held; a wrong one drops the bytes, and fails
# reads after a second mismatch. Per-block digests stop a mirror that
# serves other bytes of the same size: never served, the mirror excluded
# and named in the log, the read completed from the good one; with digest
# blocks of 64 KiB (a cache block) and of 256 KiB (four, checked once all
# four are stored: one that both mirrors sent blames neither, so the bad
# mirror is also mounted alone).
set -euo pipefail
# shellcheck source=tests/lib.sh
source "$(dirname "$0")/../lib.sh"
t_require_mount

GOOD=$T_TMP/good
BAD=$T_TMP/bad
mkdir -p "$GOOD" "$BAD"
SIZE=$((6 * 1048576 + 5000))
gen_file "$GOOD/f.bin" "$SIZE" 101
gen_file "$BAD/f.bin" "$SIZE" 102 # same size, other bytes
SUM=$(sha256sum "$GOOD/f.bin" | cut -d' ' -f1)
o_start good --root "$GOOD"
GOOD_URL=$O_URL
o_start bad --root "$BAD"
BAD_URL=$O_URL

# read_all MNT FILE: reads FILE through the mount into $T_TMP/out; its exit.
read_all() {
	local rc=0
	timeout 60 dd if="$1/$2" of="$T_TMP/out" bs=1M 2>"$T_TMP/dd.err" || rc=$?
	return "$rc"
}

# wait_log LOG REGEX: waits up to 10 s for a line matching REGEX.
wait_log() {
	for _ in $(seq 1 100); do
		grep -Eq -- "$2" "$1" && return 0
		sleep 0.1
	done
	return 1
}

# --- the right whole-blob digest: verified.
MNT=$T_TMP/mnt-ok
mkdir -p "$MNT"
fg_mount "$T_TMP/ok.log" -o "cache_dir=$T_TMP/cache-ok,sha256=$SUM" "$GOOD_URL/f.bin" "$MNT"
read_all "$MNT" f.bin && t_check "sha256 right: bytes" cmp "$T_TMP/out" "$GOOD/f.bin"
if wait_log "$T_TMP/ok.log" 'f.bin: SHA-256 verified'; then
	t_pass "sha256 right: verified and logged"
else
	t_fail "sha256 right: verified and logged" "$(tail -n 3 "$T_TMP/ok.log")"
fi
umount_pacefs "$MNT"

# --- a wrong whole-blob digest: dropped, then reads fail after a second try.
WRONG=$(printf '%064d' 7)
MNT=$T_TMP/mnt-wrong
mkdir -p "$MNT"
fg_mount "$T_TMP/wrong.log" -o "cache_dir=$T_TMP/cache-wrong,sha256=$WRONG" "$GOOD_URL/f.bin" "$MNT"
read_all "$MNT" f.bin || true
if wait_log "$T_TMP/wrong.log" 'SHA-256 of the whole blob is [0-9a-f]{64}, not 0+7: its bytes are dropped'; then
	t_pass "sha256 wrong: mismatch logged, bytes dropped"
else
	t_fail "sha256 wrong: mismatch logged" "$(tail -n 3 "$T_TMP/wrong.log")"
fi
sleep 0.5
# The check runs once every byte is held, which read-ahead may reach while
# dd still reads: what dd reads after the drop (its last 1 MiB read and
# the kernel's readahead) is fetched again, nothing else.
held=$(getfattr --absolute-names --only-values -n user.pacefs.cached "$MNT/f.bin")
if [ "$held" -le $((2 * 1048576)) ]; then
	t_pass "sha256 wrong: the bytes dropped ($held held after, what dd read since)"
else
	t_fail "sha256 wrong: the bytes dropped" "$held of $SIZE still held"
fi
echo 3 >/proc/sys/vm/drop_caches
read_all "$MNT" f.bin || true
if wait_log "$T_TMP/wrong.log" 'not 0+7: again; its reads fail with EIO'; then
	t_pass "sha256 wrong twice: reads fail from then on"
else
	t_fail "sha256 wrong twice" "$(tail -n 3 "$T_TMP/wrong.log")"
fi
echo 3 >/proc/sys/vm/drop_caches
if read_all "$MNT" f.bin; then
	t_fail "sha256 wrong twice: EIO" "the read succeeded"
else
	t_pass "sha256 wrong twice: EIO ($(tail -n 1 "$T_TMP/dd.err" | cut -c1-80))"
fi
umount_pacefs "$MNT"

# --- per-block digests, a good and a bad mirror.
for BS in 65536 262144; do
	cat >"$T_TMP/m.json" <<EOF
{"version": 1, "files": [{"path": "f.bin", "urls": ["$BAD_URL/f.bin", "$GOOD_URL/f.bin"],
 "size": $SIZE, "sha256": "$SUM", "block_size": $BS, "block_sha256": [$(block_digests "$GOOD/f.bin" "$BS")]}]}
EOF
	MNT=$T_TMP/mnt-blocks-$BS
	LOG=$T_TMP/blocks-$BS.log
	mkdir -p "$MNT"
	fg_mount "$LOG" -o "cache_dir=$T_TMP/cache-blocks-$BS,lanes=4" "$T_TMP/m.json" "$MNT"
	if read_all "$MNT" f.bin; then
		t_check "block digests $BS: every byte from the good mirror" cmp "$T_TMP/out" "$GOOD/f.bin"
	else
		t_fail "block digests $BS: read" "$(tail -n 2 "$T_TMP/dd.err")"
	fi
	wait_log "$LOG" 'f.bin: SHA-256 verified' && t_pass "block digests $BS: whole blob verified too" ||
		t_fail "block digests $BS: whole blob verified" "$(tail -n 2 "$LOG")"
	# A digest block of several cache blocks may come from both mirrors:
	# its failure then blames neither. With the bad mirror alone, every
	# failure is its own.
	if [ "$BS" -gt 65536 ]; then
		umount_pacefs "$MNT"
		sed -i "s|\"$GOOD_URL/f.bin\"|\"$BAD_URL/f.bin\"|; s|\"$BAD_URL/f.bin\", \"$BAD_URL/f.bin\"|\"$BAD_URL/f.bin\"|" "$T_TMP/m.json"
		fg_mount "$LOG" -o "cache_dir=$T_TMP/cache-blocks-$BS-bad,lanes=4,read_timeout=10" "$T_TMP/m.json" "$MNT"
		if read_all "$MNT" f.bin; then
			t_fail "block digests $BS, the bad mirror alone: the read fails" "it succeeded"
		else
			t_pass "block digests $BS, the bad mirror alone: the read fails ($(tail -n 1 "$T_TMP/dd.err" | cut -c1-60))"
		fi
	fi
	if grep -q "from $BAD_URL/f.bin has SHA-256 .*: the source is excluded" "$LOG"; then
		t_pass "block digests $BS: the bad mirror is named: $(grep -m1 "from $BAD_URL.*has SHA-256" "$LOG" | cut -c1-140)"
	else
		t_fail "block digests $BS: the bad mirror is named" "$(grep -m3 -i sha "$LOG")"
	fi
	if "$PACEFS" status "$MNT" | grep -q "^source $BAD_URL/f.bin: excluded"; then
		t_pass "block digests $BS: status shows the bad mirror excluded"
	else
		t_fail "block digests $BS: status" "$("$PACEFS" status "$MNT" | grep '^source')"
	fi
	umount_pacefs "$MNT"
done

t_done

#!/usr/bin/env bash
# faults.sh: pacefs against the project's fault-injecting origin. Every
# fault ends in correct bytes or a clear error (EIO, or one line at mount),
# within its deadline, with the daemon alive and a log line that names the
# source and the reason.
set -euo pipefail
# shellcheck source=tests/lib.sh
source "$(dirname "$0")/../lib.sh"
t_require_mount
t_require_origin

WWW=$T_TMP/www
mkdir -p "$WWW"
SIZE=$((1048576 + 4321))
gen_file "$T_TMP/src.bin" "$SIZE" 61
for d in ok reset short burst burst429 throttle stall slow etag content; do
	mkdir -p "$WWW/$d"
	ln "$T_TMP/src.bin" "$WWW/$d/f.bin"
done
o_start faulty --root "$WWW" \
	--fault '/reset/*:reset:100000' \
	--fault '/short/*:short:100000' \
	--fault '/burst/*:burst:500:3' \
	--fault '/burst429/*:burst:429:2' \
	--fault '/throttle/*:status:429:1:1' \
	--fault '/stall/*:stall:100000' \
	--fault '/slow/*:slowfirst:700' \
	--fault '/etag/*:etag-change:2' \
	--fault '/content/*:content-change:2'
URL=$O_URL
N=0

# fault_read NAME PATH EXPECT [PACEFS_OPTS]: mounts PATH in the foreground,
# reads the whole file with a deadline, and checks the outcome: EXPECT is
# "bytes" (every byte equal to the source) or "eio" (the read fails with an
# I/O error). Sets LOG to the daemon's log.
fault_read() {
	local name=$1 path=$2 expect=$3 opts=${4:-} mnt rc=0 start took
	N=$((N + 1))
	mnt=$T_TMP/mnt-$N
	LOG=$T_TMP/pacefs-$N.log
	mkdir -p "$mnt"
	if ! fg_mount "$LOG" -o "cache_dir=$T_TMP/cache-$N,read_timeout=8,stall_timeout=1$opts" \
		"$URL$path" "$mnt"; then
		t_fail "$name: mount" "$(tail -n 3 "$LOG")"
		return 0
	fi
	start=$SECONDS
	timeout 40 dd if="$mnt/f.bin" of="$T_TMP/out-$N" bs=1M 2>"$T_TMP/dd-$N.err" || rc=$?
	took=$((SECONDS - start))
	if [ "$rc" -eq 124 ]; then
		t_fail "$name: no hang" "the read was still blocked after 40 s"
	elif [ "$expect" = bytes ] && [ "$rc" -eq 0 ]; then
		t_check "$name: every byte correct (${took} s)" cmp "$T_TMP/out-$N" "$T_TMP/src.bin"
	elif [ "$expect" = eio ] && [ "$rc" -ne 0 ] && grep -q 'Input/output error' "$T_TMP/dd-$N.err"; then
		t_pass "$name: EIO in ${took} s"
		# Never a wrong byte: what was read is a prefix of the source.
		t_check "$name: no wrong byte before the error" \
			cmp -n "$(stat -c %s "$T_TMP/out-$N")" "$T_TMP/out-$N" "$T_TMP/src.bin"
	else
		t_fail "$name: want $expect" "dd exit $rc after ${took} s: $(tail -n 1 "$T_TMP/dd-$N.err")"
	fi
	if kill -0 "$FG_PID" 2>/dev/null && ls "$mnt" >/dev/null 2>&1; then
		t_pass "$name: daemon alive"
	else
		t_fail "$name: daemon alive" "it died: $(tail -n 3 "$LOG")"
	fi
	umount_pacefs "$mnt"
}

# logged NAME REGEX: the last daemon log names the source and matches REGEX.
logged() {
	if grep -E -- "$URL[^ ]*: .*($2)" "$LOG" >/dev/null; then
		t_pass "$1: logged: $(grep -m1 -E -- "$2" "$LOG" | cut -c1-160)"
	else
		t_fail "$1: logged" "no line with the URL and /$2/: $(tail -n 3 "$LOG" | cut -c1-300)"
	fi
}

fault_read "no fault" /ok/f.bin bytes
fault_read "reset after 100 KB" /reset/f.bin bytes
logged "reset after 100 KB" 'Recv failure|reset by peer'
fault_read "short body" /short/f.bin bytes
logged "short body" 'short body|transfer closed|Transferred a partial'
# The probe meets these first: it tries again, so the mount comes up.
fault_read "three 500s" /burst/f.bin bytes
fault_read "two 429s" /burst429/f.bin bytes
# Transfers meet this one: the source is suspended as Retry-After asks
# again and again, and reads fail at their deadline.
fault_read "429 with Retry-After, always" /throttle/f.bin eio
logged "429 with Retry-After, always" 'HTTP 429'
fault_read "stall after 100 KB" /stall/f.bin bytes
logged "stall after 100 KB" 'stalled'
fault_read "slow first byte" /slow/f.bin bytes
fault_read "ETag changes mid-read" /etag/f.bin eio ",lanes=1"
logged "ETag changes mid-read" 'the blob changed'
fault_read "content changes mid-read" /content/f.bin eio ",lanes=1"
logged "content changes mid-read" 'the blob changed'

# Faults a mount refuses outright, with one line naming the URL and cause.
o_start refusing --root "$WWW" --fault '/norange/*:norange' \
	--fault '/badrange/*:badrange' --fault '/refuse/*:refuse'
for d in norange badrange refuse; do
	mkdir -p "$WWW/$d"
	ln "$T_TMP/src.bin" "$WWW/$d/f.bin"
done
mkdir -p "$T_TMP/mnt-x"
for case in "badrange:Content-Range" "refuse:Empty reply|Server returned nothing"; do
	d=${case%%:*}
	want=${case#*:}
	rc=0
	timeout 30 "$PACEFS" -o "cache_dir=$T_TMP/cache-x" "$O_URL/$d/f.bin" "$T_TMP/mnt-x" \
		</dev/null >/dev/null 2>"$T_TMP/x.err" || rc=$?
	if [ "$rc" -eq 1 ] && [ "$(grep -c . "$T_TMP/x.err")" -eq 1 ] &&
		grep -Eq "$O_URL/$d/f.bin.*($want)" "$T_TMP/x.err" && ! is_mounted "$T_TMP/mnt-x"; then
		t_pass "$d at mount: $(cat "$T_TMP/x.err")"
	else
		t_fail "$d at mount" "exit $rc: $(cat "$T_TMP/x.err")"
	fi
done
# One that ignores Range mounts: its file is read as one stream.
if mount_pacefs -o "cache_dir=$T_TMP/cache-nr" "$O_URL/norange/f.bin" "$T_TMP/mnt-x"; then
	t_eq "norange at mount: read as one stream" \
		"$(sha256sum <"$T_TMP/mnt-x/f.bin")" "$(sha256sum <"$T_TMP/src.bin")"
	umount_pacefs "$T_TMP/mnt-x"
else
	t_fail "norange at mount" "$T_MOUNT_ERR"
fi

t_done

#!/usr/bin/env bash
# exit.sh: how the daemon ends. SIGTERM and SIGHUP unmount and exit 0, as
# fusermount3 -u does; a read blocked on a stalled origin holds neither a
# signal's exit nor an unmount's past a few seconds (never until its
# read_timeout); whatever the origin does (never answers, or stalls after
# the head), probes, listings and credential commands under way hold
# neither past 2 s; and an error on a 2 KB URL keeps its reason in the log
# line, however long the URL.
set -euo pipefail
# shellcheck source=tests/lib.sh
source "$(dirname "$0")/../lib.sh"
t_require_mount
t_require_origin

WWW=$T_TMP/www
mkdir -p "$WWW"
SIZE=$((4 * 1048576 + 123))
gen_file "$WWW/f.bin" "$SIZE" 71
cp "$WWW/f.bin" "$WWW/stall.bin"
# stall.bin: every response sends 1 KiB of its body, then nothing.
o_start exit --root "$WWW" --fault '/stall.bin:stall:1K'
# Longer than any bound below: a read that ends is one the exit ended.
RT=60
BOUND=5

# wait_gone PID SECS: waits for PID (a child of this shell) to exit; sets
# $status to its exit status (or "running") and $took to the seconds.
wait_gone() {
	local i rc=0 t0
	t0=$(date +%s.%N)
	status=running
	for i in $(seq 1 $(($2 * 20))); do
		if ! kill -0 "$1" 2>/dev/null; then
			wait "$1" || rc=$?
			status=$rc
			break
		fi
		sleep 0.05
	done
	took=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
}

# mount_fg TAG [OPTIONS...] URL: a foreground daemon on a mountpoint of its
# own (MNT), its log in LOG; FG_PID is its pid.
mount_fg() {
	local tag=$1
	shift
	MNT=$T_TMP/mnt-$tag
	LOG=$T_TMP/$tag.log
	mkdir -p "$MNT"
	fg_mount "$LOG" -o "cache_dir=$T_TMP/cache-$tag,read_timeout=$RT" "$@" "$MNT"
}

# signal_exit SIG: the daemon, signalled, unmounts and exits 0.
signal_exit() {
	local sig=$1
	if ! mount_fg "$sig" "$O_URL/f.bin"; then
		t_fail "$sig: mount" "$(tail -n 3 "$LOG")"
		return 0
	fi
	t_check "$sig: read before" cmp "$MNT/f.bin" "$WWW/f.bin"
	kill "-$sig" "$FG_PID"
	wait_gone "$FG_PID" 20
	t_eq "$sig: pacefs -f exits 0" "$status" 0
	if is_mounted "$MNT"; then
		t_fail "$sig: the mount is gone" "$(mount_line "$MNT")"
	else
		t_pass "$sig: the mount is gone"
	fi
	if grep -q "unmounting $MNT on SIG$sig" "$LOG"; then
		t_pass "$sig: the log says why it unmounted"
	else
		t_fail "$sig: the log says why it unmounted" "$(tail -n 2 "$LOG" | tr '\n' ' ')"
	fi
}
signal_exit TERM
signal_exit HUP

# A reader blocked on the stalled file, then SIGTERM: the daemon exits
# within BOUND seconds, not at the read's deadline (RT).
if mount_fg stall-term "$O_URL/stall.bin"; then
	dd if="$MNT/stall.bin" of=/dev/null bs=1M skip=2 count=1 2>"$T_TMP/dd1.err" &
	DD=$!
	sleep 2
	if kill -0 "$DD" 2>/dev/null; then
		t_pass "stalled: the reader is blocked"
	else
		t_fail "stalled: the reader is blocked" "dd ended: $(cat "$T_TMP/dd1.err")"
	fi
	kill -TERM "$FG_PID"
	wait_gone "$FG_PID" $((RT + 10))
	if [ "$status" = 0 ] && awk -v t="$took" -v b="$BOUND" 'BEGIN { exit !(t <= b) }'; then
		t_pass "stalled: SIGTERM ends the daemon in ${took}s (bound ${BOUND}s), status 0"
	else
		t_fail "stalled: SIGTERM ends the daemon within ${BOUND}s, status 0" \
			"status $status after ${took}s (read_timeout=$RT)"
	fi
	[ "$status" = running ] && kill -KILL "$FG_PID" 2>/dev/null
	wait "$DD" 2>/dev/null || true
	if is_mounted "$MNT"; then
		t_fail "stalled: SIGTERM: the mount is gone" "$(mount_line "$MNT")"
	else
		t_pass "stalled: SIGTERM: the mount is gone"
	fi
else
	t_fail "stalled: mount" "$(tail -n 3 "$LOG")"
fi

# A reader blocked on the stalled file is killed (as ^C would), then
# fusermount3 -u: the unmount goes through and the daemon exits 0 within
# BOUND seconds.
if mount_fg stall-umount "$O_URL/stall.bin"; then
	dd if="$MNT/stall.bin" of=/dev/null bs=1M skip=3 count=1 2>/dev/null &
	DD=$!
	sleep 2
	kill -KILL "$DD" 2>/dev/null || true
	wait "$DD" 2>/dev/null || true
	t0=$(date +%s.%N)
	if timeout "$BOUND" fusermount3 -u "$MNT" 2>"$T_TMP/fu.err"; then
		t_pass "stalled: fusermount3 -u after the reader was killed"
	else
		t_fail "stalled: fusermount3 -u after the reader was killed" "$(cat "$T_TMP/fu.err")"
	fi
	wait_gone "$FG_PID" $((RT + 10))
	took=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
	if [ "$status" = 0 ] && awk -v t="$took" -v b="$BOUND" 'BEGIN { exit !(t <= b) }'; then
		t_pass "stalled: the daemon exits ${took}s after fusermount3 -u (bound ${BOUND}s), status 0"
	else
		t_fail "stalled: the daemon exits within ${BOUND}s of fusermount3 -u, status 0" \
			"status $status after ${took}s"
	fi
	[ "$status" = running ] && kill -KILL "$FG_PID" 2>/dev/null
else
	t_fail "stalled-umount: mount" "$(tail -n 3 "$LOG")"
fi

# A 2 KB URL that 404s at the mount's probe (a file, then a directory
# index): the one line on the terminal keeps its start (the URL's host)
# and its end (the reason), the middle of the URL left out.
PAD=$(head -c 2000 /dev/zero | tr '\0' 'q')
for kind in file index; do
	mkdir -p "$T_TMP/mnt-404"
	if [ "$kind" = file ]; then
		url="$O_URL/nope.bin?pad=$PAD"
	else
		url="$O_URL/$PAD/"
	fi
	if mount_pacefs -o "cache_dir=$T_TMP/cache-404" "$url" "$T_TMP/mnt-404" 2>/dev/null; then
		t_fail "2 KB URL ($kind), 404 at mount: the mount fails" "it mounted"
		umount_pacefs "$T_TMP/mnt-404"
		continue
	fi
	line=$(head -n 1 <<<"$T_MOUNT_ERR")
	if [[ $line == "pacefs: ${O_URL}/"* ]] && [[ $line == *"HTTP 404" ]]; then
		t_pass "2 KB URL ($kind), 404 at mount: the line (${#line} bytes) names the URL and ends ...${line: -40}"
	else
		t_fail "2 KB URL ($kind), 404 at mount: the line names the URL and ends with HTTP 404" \
			"${#line} bytes: ${line:0:60} ... ${line: -60}"
	fi
done

# The same URL whose file goes away after the mount: the read fails and
# the daemon's log line of it keeps the reason too.
cp "$WWW/f.bin" "$WWW/nope.bin"
LONG="$O_URL/nope.bin?pad=$PAD"
if mount_fg longurl "$LONG"; then
	rm -f "$WWW/nope.bin"
	if cat "$MNT/nope.bin" >/dev/null 2>"$T_TMP/cat.err"; then
		t_fail "2 KB URL: the read of a deleted file fails" "it read"
	else
		t_pass "2 KB URL: the read of a deleted file fails"
	fi
	line=$(grep -F "pad=qqqq" "$LOG" | grep -E 'error' | head -n 1 || true)
	if [ -z "$line" ]; then
		t_fail "2 KB URL: the failure is logged with its URL" "$(tail -n 3 "$LOG" | cut -c 1-300)"
	elif [[ $line == *"HTTP 404" ]]; then
		t_pass "2 KB URL: the daemon's line (${#line} bytes) keeps the reason: ...${line: -40}"
	else
		t_fail "2 KB URL: the daemon's line keeps the reason (HTTP 404)" "${#line} bytes, ending ...${line: -160}"
	fi
	umount_pacefs "$MNT"
else
	t_fail "2 KB URL: mount" "$(tail -n 3 "$LOG")"
fi
# --- whatever the origin does: gone within NET_BOUND seconds ----------------
# A mount's end stops every wait on a network answer: the sizes a listing
# did not give (probed in the background), a directory's listing, a
# command asked for new credentials. The origin takes each request and
# answers nothing (mute), or its head and then nothing (stall:0); every
# deadline (read_timeout) is far off, so a daemon that ends did so because
# the mount ended.
NET_BOUND=2
NET=$T_TMP/net
mkdir -p "$NET/p" "$NET/q" "$NET/l/mute" "$NET/l/stall" "$NET/c"
for i in 1 2 3 4 5 6 7 8; do
	# 40,000 bytes: "39K" in the listing, a size to probe.
	gen_file "$NET/p/f$i.bin" 40000 $((80 + i))
	cp "$NET/p/f$i.bin" "$NET/q/f$i.bin"
done
gen_file "$NET/l/mute/f.bin" 4096 90
cp "$NET/l/mute/f.bin" "$NET/l/stall/f.bin"
gen_file "$NET/c/f.bin" 40000 91
o_start net --root "$NET" --autoindex=human \
	--fault '/p/*.bin:mute' --fault '/q/*.bin:stall:0' \
	--fault '/l/mute/:mute' --fault '/l/stall/:stall:100'
NET_URL=$O_URL
NET_LOG=$O_LOG

# origin_saw PATTERN SECS: waits until the origin's log has a line
# matching PATTERN (an ERE), for at most SECS seconds.
origin_saw() {
	local i
	for i in $(seq 1 $(($2 * 20))); do
		grep -Eq "$1" "$NET_LOG" 2>/dev/null && return 0
		sleep 0.05
	done
	return 1
}

# net_end TAG HOW: ends the daemon FG_PID by HOW (umount: fusermount3 -u;
# TERM: SIGTERM) and checks that it is gone, with status 0, within
# NET_BOUND seconds of it.
net_end() {
	local tag=$1 how=$2 t0
	t0=$(date +%s.%N)
	if [ "$how" = umount ]; then
		timeout 10 fusermount3 -u "$MNT" 2>"$T_TMP/fu-$tag.err" ||
			t_fail "$tag: fusermount3 -u" "$(cat "$T_TMP/fu-$tag.err")"
	else
		kill -TERM "$FG_PID"
	fi
	wait_gone "$FG_PID" $((RT + 10))
	took=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
	if [ "$status" = 0 ] && awk -v t="$took" -v b="$NET_BOUND" 'BEGIN { exit !(t <= b) }'; then
		t_pass "$tag: the daemon is gone ${took}s after $how (bound ${NET_BOUND}s), status 0"
	else
		t_fail "$tag: the daemon is gone within ${NET_BOUND}s of $how, status 0" \
			"status $status after ${took}s (read_timeout=$RT): $(tail -n 2 "$LOG" | tr '\n' ' ')"
	fi
	[ "$status" = running ] && kill -KILL "$FG_PID" 2>/dev/null
	umount_pacefs "$MNT" || true
}

# Probes of the sizes a listing did not give, under way in the background
# when the mount ends: to an origin that never answers (an unmount), and
# to one that sends the head and then nothing (SIGTERM).
for c in p:mute:umount q:stall:TERM; do
	IFS=: read -r dir fault how <<<"$c"
	tag="probes ($fault)"
	if mount_fg "probe-$dir" "$NET_URL/$dir/"; then
		ls "$MNT" >/dev/null
		if origin_saw "GET /$dir/f[0-9].bin .* $fault" 10; then
			net_end "$tag" "$how"
		else
			t_fail "$tag: the probes reach the origin" "$(tail -n 3 "$NET_LOG")"
			umount_pacefs "$MNT" || true
		fi
	else
		t_fail "$tag: mount" "$(tail -n 3 "$LOG")"
	fi
done

# A directory's listing under way when the mount ends, its reader still
# waiting (the kernel refuses to unmount while a request is under way).
for fault in mute stall; do
	tag="listing ($fault)"
	if mount_fg "list-$fault" "$NET_URL/l/"; then
		ls "$MNT/$fault" >/dev/null 2>&1 &
		LS=$!
		if origin_saw "GET /l/$fault/ .* $fault" 10; then
			net_end "$tag" TERM
		else
			t_fail "$tag: the listing reaches the origin" "$(tail -n 3 "$NET_LOG")"
			umount_pacefs "$MNT" || true
		fi
		kill -KILL "$LS" 2>/dev/null || true
		wait "$LS" 2>/dev/null || true
	else
		t_fail "$tag: mount" "$(tail -n 3 "$LOG")"
	fi
done

# cmd_runs CMDLINE SECS: waits until CMDLINE runs, for at most SECS seconds.
cmd_runs() {
	local i
	for i in $(seq 1 $(($2 * 20))); do
		[ "$(t_cmdline_count "$1")" -eq 0 ] || return 0
		sleep 0.05
	done
	return 1
}

# cmd_gone CMDLINE SECS: waits until no process runs CMDLINE, for at most
# SECS seconds.
cmd_gone() {
	local i
	for i in $(seq 1 $(($2 * 20))); do
		[ "$(t_cmdline_count "$1")" -eq 0 ] && return 0
		sleep 0.05
	done
	return 1
}

# Credentials refused while the command that gives new ones hangs: a
# request refused waits for them (fetch's wait for a newer set) when the
# mount ends. First a listing, the reader waiting (SIGTERM); then the
# background probes of a listing's sizes (an unmount).
HANG=$T_TMP/hang
REQ=$T_TMP/require
cat >"$T_TMP/token.sh" <<-EOS
	#!/bin/sh
	if [ -e $HANG ]; then exec sleep 1786; fi
	echo "X-Token: one"
EOS
chmod 700 "$T_TMP/token.sh"
printf 'X-Token: one\n' >"$REQ"
o_start creds --root "$NET/c" --autoindex --require-header "$REQ"
tag="credentials (a listing)"
rm -f "$HANG"
if mount_fg creds-list -o "auth_command=$T_TMP/token.sh" "$O_URL/"; then
	touch "$HANG"
	printf 'X-Token: two\n' >"$REQ.new" && mv "$REQ.new" "$REQ"
	ls "$MNT" >/dev/null 2>&1 &
	LS=$!
	if cmd_runs "sleep 1786" 10; then
		net_end "$tag" TERM
		cmd_gone "sleep 1786" 1 || true
		t_eq "$tag: the command is killed" "$(t_cmdline_count "sleep 1786")" 0
	else
		t_fail "$tag: the refused listing runs the command again" "$(tail -n 3 "$LOG")"
		umount_pacefs "$MNT" || true
	fi
	kill -KILL "$LS" 2>/dev/null || true
	wait "$LS" 2>/dev/null || true
else
	t_fail "$tag: mount" "$(tail -n 3 "$LOG")"
fi
o_start creds401 --root "$NET/p" --autoindex=human --fault '/*.bin:status:401'
tag="credentials (probes)"
rm -f "$HANG"
if mount_fg creds-probe -o "auth_command=$T_TMP/token.sh" "$O_URL/"; then
	touch "$HANG"
	ls "$MNT" >/dev/null
	if cmd_runs "sleep 1786" 10; then
		net_end "$tag" umount
		cmd_gone "sleep 1786" 1 || true
		t_eq "$tag: the command is killed" "$(t_cmdline_count "sleep 1786")" 0
	else
		t_fail "$tag: the refused probes run the command again" "$(tail -n 3 "$LOG")"
		umount_pacefs "$MNT" || true
	fi
else
	t_fail "$tag: mount" "$(tail -n 3 "$LOG")"
fi
t_done

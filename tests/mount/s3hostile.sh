#!/usr/bin/env bash
# s3hostile.sh: S3 listings that misbehave on purpose (pacefs-origin --s3
# --s3-hostile) and the names an S3 mount is given: a listing that never
# ends (the same continuation token, a cycle of tokens, empty pages with a
# new token each time) fails within read_timeout with one log line and few
# requests, an unmount and SIGTERM end the daemon while a listing is under
# way, a probe that never answers fails within read_timeout; a listing or
# error document declaring a DTD is refused without expanding its entity
# (the mount's memory stays small); a region, endpoint or bucket that would
# lead requests elsewhere is refused at mount and nothing connects; a key
# "a/../x" reads that object, not "x"; a key with a NUL is left out and the
# rest listed.
set -euo pipefail
# shellcheck source=tests/lib.sh
source "$(dirname "$0")/../lib.sh"
t_require_mount
t_require_origin
if ! /usr/bin/python3 -c 'import botocore' 2>/dev/null; then
	t_fail "$T_NAME" "python3-botocore is missing (contrib/install-deps.sh installs it)"
	t_done
fi

ROOT=$T_TMP/root
mkdir -p "$ROOT/bkt/d" "$ROOT/bkt/a/..dotdot" "$ROOT/Legacy_Bucket"
gen_file "$ROOT/bkt/d/one.bin" 70000 61
gen_file "$ROOT/bkt/d/two.bin" 5000 62
gen_file "$ROOT/bkt/a/..dotdot/x" 9000 63 # the key "a/../x" (dotdot-keys)
gen_file "$ROOT/bkt/x" 9000 64            # the key "x"
gen_file "$ROOT/Legacy_Bucket/f.bin" 3000 65
SECRET=sec$RANDOM$RANDOM$RANDOM
KEYS=$T_TMP/keys
printf 'AKIDTEST %s\n' "$SECRET" >"$KEYS"
export AWS_ACCESS_KEY_ID=AKIDTEST AWS_SECRET_ACCESS_KEY=$SECRET
unset AWS_SESSION_TOKEN AWS_PROFILE AWS_REGION AWS_DEFAULT_REGION AWS_CONFIG_FILE
export HOME=$T_TMP/home
mkdir -p "$HOME"

# origin NAME HOSTILE_MODES [ARGS...]: an S3 origin; sets EP (its URL) and
# LOG (its request log).
origin() {
	local name=$1 modes=$2
	shift 2
	o_start "$name" --root "$ROOT" --s3 --s3-region eu-west-1 --s3-keys "$KEYS" \
		${modes:+--s3-hostile "$modes"} "$@"
	EP=$O_URL
	LOG=$O_LOG
}

# lists LOG: how many listing requests LOG holds.
lists() {
	grep -c 'list-type=2' "$1" || true
}

# bg NAME CMD...: runs CMD in the background, its exit status into
# $T_TMP/NAME.rc and its stderr into $T_TMP/NAME.err once it ends.
bg() {
	local name=$1
	shift
	rm -f "$T_TMP/$name.rc"
	(
		rc=0
		"$@" >/dev/null 2>"$T_TMP/$name.err" || rc=$?
		echo "$rc" >"$T_TMP/$name.rc.tmp"
		mv "$T_TMP/$name.rc.tmp" "$T_TMP/$name.rc"
	) &
}

# ended NAME SECS: waits up to SECS for bg NAME to end; prints its wait in
# ms and returns 0 when it ended.
ended() {
	local name=$1 secs=$2 t0 i
	t0=$(date +%s%N)
	for i in $(seq 1 $((secs * 20))); do
		if [ -s "$T_TMP/$name.rc" ]; then
			echo $((($(date +%s%N) - t0) / 1000000))
			return 0
		fi
		sleep 0.05
	done
	echo $((($(date +%s%N) - t0) / 1000000))
	return 1
}

# release MNT: a daemon that did not answer in time: abort its connection
# so that the blocked command and the cleanup go on.
release() {
	fuse_abort "$1"
	umount -l "$1" 2>/dev/null || true
}

# gone PID SECS: true when PID has exited within SECS.
gone() {
	local i
	for i in $(seq 1 $(($2 * 20))); do
		kill -0 "$1" 2>/dev/null || return 0
		sleep 0.05
	done
	return 1
}

# eio_within NAME SECS MNT CMD...: CMD (on MNT) fails with EIO within SECS.
eio_within() {
	local name=$1 secs=$2 mnt=$3 ms
	shift 3
	bg "$name" "$@"
	if ms=$(ended "$name" "$secs"); then
		if [ "$(cat "$T_TMP/$name.rc")" -ne 0 ] && grep -q 'Input/output error' "$T_TMP/$name.err"; then
			t_pass "$name: EIO after $ms ms ($(head -c 200 "$T_TMP/$name.err"))"
		else
			t_fail "$name" "exit $(cat "$T_TMP/$name.rc") after $ms ms: $(head -c 300 "$T_TMP/$name.err")"
		fi
	else
		t_fail "$name" "still blocked after $secs s"
		release "$mnt"
	fi
}

MNT=$T_TMP/mnt
mkdir -p "$MNT"

# --- row 1: a listing that never ends, through ls and stat.
for mode in same-token cycle-token; do
	origin "$mode" "$mode"
	: >"$T_TMP/$mode.mlog"
	if ! fg_mount "$T_TMP/$mode.mlog" -o "cache_dir=$T_TMP/cache,endpoint=$EP,region=eu-west-1,read_timeout=5" \
		s3://bkt/d/ "$MNT"; then
		t_fail "$mode: mount" "$(tail -n 3 "$T_TMP/$mode.mlog")"
		continue
	fi
	eio_within "$mode: ls" 10 "$MNT" ls "$MNT"
	n=$(lists "$LOG")
	if [ "$n" -le 4 ]; then
		t_pass "$mode: $n listing requests (the mount's, then the repeated token seen at once)"
	else
		t_fail "$mode: listing requests bounded" "$n requests"
	fi
	if ! is_pacefs_mounted "$MNT"; then
		# ls's mount was released: stat gets a mount of its own.
		kill -KILL "$FG_PID" 2>/dev/null || true
		fg_mount "$T_TMP/$mode.mlog2" -o "cache_dir=$T_TMP/cache,endpoint=$EP,region=eu-west-1,read_timeout=5" \
			s3://bkt/d/ "$MNT" || t_fail "$mode: mount for stat" "$(tail -n 3 "$T_TMP/$mode.mlog2")"
	fi
	eio_within "$mode: stat" 10 "$MNT" stat "$MNT/one.bin"
	want="page 2 sent the continuation token of page 1 again"
	[ "$mode" = cycle-token ] && want="page 3 sent the continuation token of page 1 again, a cycle"
	line=$(grep -a "cannot list" "$T_TMP/$mode.mlog" | head -n 1 || true)
	if grep -q "$want" <<<"$line" && grep -q 's3://bkt/d/' <<<"$line" && grep -q 'after [0-9]* pages' <<<"$line"; then
		t_pass "$mode: one line naming the prefix, the reason and the pages: $line"
	else
		t_fail "$mode: the log line" "'$line'"
	fi
	umount_pacefs "$MNT"
	if gone "$FG_PID" 5; then
		t_pass "$mode: unmounted, the daemon exits"
	else
		t_fail "$mode: the daemon exits after the unmount" "still running"
		kill -KILL "$FG_PID" 2>/dev/null || true
	fi
done

# Empty pages, a new token each: no token repeats, so the deadline ends it
# (a page every 300 ms, read_timeout=3).
origin new-slow new-token,slow-list:300
if fg_mount "$T_TMP/new-slow.mlog" -o "cache_dir=$T_TMP/cache,endpoint=$EP,region=eu-west-1,read_timeout=3" \
	s3://bkt/d/ "$MNT"; then
	eio_within "new-token: ls within read_timeout" 8 "$MNT" ls "$MNT"
	n=$(lists "$LOG")
	if [ "$n" -le 16 ]; then
		t_pass "new-token: $n listing requests in read_timeout"
	else
		t_fail "new-token: listing requests bounded by the deadline" "$n requests"
	fi
	line=$(grep -a "cannot list" "$T_TMP/new-slow.mlog" | head -n 1 || true)
	if grep -q 'deadline' <<<"$line" && grep -q 'after [0-9]* pages' <<<"$line"; then
		t_pass "new-token: the line says the deadline and the pages: $line"
	else
		t_fail "new-token: the log line" "'$line'"
	fi
	umount_pacefs "$MNT"
	gone "$FG_PID" 5 || kill -KILL "$FG_PID" 2>/dev/null || true
else
	t_fail "new-token: mount" "$(tail -n 3 "$T_TMP/new-slow.mlog")"
fi

# Empty pages as fast as the origin answers: the page bound ends it.
origin new-fast new-token
if fg_mount "$T_TMP/new-fast.mlog" -o "cache_dir=$T_TMP/cache,endpoint=$EP,region=eu-west-1,read_timeout=60" \
	s3://bkt/d/ "$MNT"; then
	eio_within "new-token, fast: ls ends" 60 "$MNT" ls "$MNT"
	n=$(lists "$LOG")
	line=$(grep -a "cannot list" "$T_TMP/new-fast.mlog" | head -n 1 || true)
	if [ "$n" -le 1200 ] && grep -q 'pages (at most' <<<"$line"; then
		t_pass "new-token, fast: stopped at the page bound, $n requests: $line"
	else
		t_fail "new-token, fast: the page bound" "$n requests, '$line'"
	fi
	umount_pacefs "$MNT"
	gone "$FG_PID" 5 || kill -KILL "$FG_PID" 2>/dev/null || true
else
	t_fail "new-token, fast: mount" "$(tail -n 3 "$T_TMP/new-fast.mlog")"
fi

# An unmount while a listing is under way (a page every 500 ms, forever,
# read_timeout=5): it goes through once the request's deadline passed, and
# the daemon exits.
origin umount new-token,slow-list:500
if fg_mount "$T_TMP/umount.mlog" -o "cache_dir=$T_TMP/cache,endpoint=$EP,region=eu-west-1,read_timeout=5" \
	s3://bkt/d/ "$MNT"; then
	bg umount-stat stat "$MNT/one.bin"
	sleep 1
	t0=$(date +%s%N)
	ok=0
	for _ in $(seq 1 100); do
		if fusermount3 -u "$MNT" 2>/dev/null; then
			ok=1
			break
		fi
		sleep 0.1
	done
	ms=$((($(date +%s%N) - t0) / 1000000))
	if [ "$ok" -eq 1 ]; then
		t_pass "fusermount3 -u during a listing: done after $ms ms"
	else
		t_fail "fusermount3 -u during a listing" "still busy after $ms ms"
		release "$MNT"
	fi
	if gone "$FG_PID" 5; then
		t_pass "fusermount3 -u during a listing: the daemon exits"
	else
		t_fail "fusermount3 -u during a listing: the daemon exits" "still running"
		release "$MNT"
		kill -KILL "$FG_PID" 2>/dev/null || true
	fi
else
	t_fail "umount: mount" "$(tail -n 3 "$T_TMP/umount.mlog")"
fi

# SIGTERM while a listing is under way (read_timeout=60): the daemon ends
# the listing and exits at once, not after the deadline.
origin term new-token,slow-list:500
if fg_mount "$T_TMP/term.mlog" -o "cache_dir=$T_TMP/cache,endpoint=$EP,region=eu-west-1,read_timeout=60" \
	s3://bkt/d/ "$MNT"; then
	bg term-ls ls "$MNT"
	sleep 1.5
	kill -TERM "$FG_PID" 2>/dev/null || true
	t0=$(date +%s%N)
	if gone "$FG_PID" 5; then
		t_pass "SIGTERM during a listing: the daemon exits after $((($(date +%s%N) - t0) / 1000000)) ms"
	else
		t_fail "SIGTERM during a listing: the daemon exits" "still running after 5 s"
		release "$MNT"
		kill -KILL "$FG_PID" 2>/dev/null || true
	fi
	if ms=$(ended term-ls 5) && grep -q 'Input/output error' "$T_TMP/term-ls.err"; then
		t_pass "SIGTERM during a listing: ls answered EIO ($(head -c 100 "$T_TMP/term-ls.err"))"
	elif [ -s "$T_TMP/term-ls.rc" ]; then
		t_fail "SIGTERM during a listing: ls answered EIO" "$(head -c 200 "$T_TMP/term-ls.err")"
	else
		t_fail "SIGTERM during a listing: ls answered" "still blocked"
		release "$MNT"
	fi
	umount_pacefs "$MNT" 2>/dev/null || true
else
	t_fail "term: mount" "$(tail -n 3 "$T_TMP/term.mlog")"
fi

# A probe that never answers (the head, then no byte): the open fails
# within read_timeout.
origin probe "" --fault '/bkt/d/one.bin:stall:0'
if fg_mount "$T_TMP/probe.mlog" -o "cache_dir=$T_TMP/cache-probe,endpoint=$EP,region=eu-west-1,read_timeout=3" \
	s3://bkt/d/ "$MNT"; then
	eio_within "a probe that never answers: the open" 8 "$MNT" cat "$MNT/one.bin"
	t_check "the other file still reads" cmp "$MNT/two.bin" "$ROOT/bkt/d/two.bin"
	umount_pacefs "$MNT"
else
	t_fail "probe: mount" "$(tail -n 3 "$T_TMP/probe.mlog")"
fi

# --- row 2: a DTD declaring a 100 KB entity used 3,000 times in a Key, in
# the listing and in an error document: refused unread, memory small.
for mode in entity entity-error; do
	origin "$mode" "$mode"
	rc=0
	# The parent reads the first listing before it mounts (or refuses).
	/usr/bin/time -o "$T_TMP/$mode.rss" -f %M timeout 60 "$PACEFS" \
		-o "cache_dir=$T_TMP/cache,endpoint=$EP,region=eu-west-1" s3://bkt/d/ "$MNT" \
		</dev/null >/dev/null 2>"$T_TMP/$mode.err" || rc=$?
	if is_mounted "$MNT"; then
		umount_pacefs "$MNT"
	fi
	rss=$(tail -n 1 "$T_TMP/$mode.rss")
	if [ "$rss" -lt 65536 ]; then
		t_pass "$mode: the mount's peak RSS is $((rss / 1024)) MB"
	else
		t_fail "$mode: the mount's peak RSS under 64 MB" "$((rss / 1024)) MB"
	fi
	want="declares a DTD"
	if [ "$rc" -eq 1 ] && [ "$(wc -l <"$T_TMP/$mode.err")" -eq 1 ] && grep -q "$want" "$T_TMP/$mode.err"; then
		t_pass "$mode: refused with one line: $(cat "$T_TMP/$mode.err")"
	else
		t_fail "$mode: refused with one line naming the document" "exit $rc: $(head -c 300 "$T_TMP/$mode.err")"
	fi
done

# --- row 5: a region, endpoint or bucket that would send requests (and
# credentials) elsewhere: refused at mount with one line naming the field
# and where it came from; nothing connects to the listener they name.
LPORT=$(free_port)
/usr/bin/python3 -c '
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(16)
while True:
    c, _ = s.accept()
    with open(sys.argv[2], "a") as f:
        f.write("connection\n")
    c.close()
' "$LPORT" "$T_TMP/listener.log" &
O_PIDS+=("$!")
: >"$T_TMP/listener.log"
for _ in $(seq 1 50); do
	ss -Htln | grep -q ":$LPORT " && break
	sleep 0.05
done

# refused NAME WANT ENV... -- ARGS...: the mount fails in one line matching
# WANT, and the listener got no connection.
refused() {
	local name=$1 want=$2 rc=0 envs=()
	shift 2
	while [ "$1" != -- ]; do
		envs+=("$1")
		shift
	done
	shift
	: >"$T_TMP/listener.log"
	timeout 30 env "${envs[@]}" "$PACEFS" "$@" </dev/null >/dev/null 2>"$T_TMP/r.err" || rc=$?
	is_mounted "$MNT" && umount_pacefs "$MNT"
	sleep 0.2
	t_eq "$name: nothing reached the listener" "$(wc -l <"$T_TMP/listener.log")" 0
	if [ "$rc" -eq 1 ] && [ "$(wc -l <"$T_TMP/r.err")" -eq 1 ] && grep -q -- "$want" "$T_TMP/r.err"; then
		t_pass "$name: $(cat "$T_TMP/r.err")"
	else
		t_fail "$name: one line naming the field and its source" "exit $rc: $(head -c 300 "$T_TMP/r.err")"
	fi
}
BADR="localhost:$LPORT#"
refused "region from -o region=" "option region: 'localhost:$LPORT#' is no region" -- \
	-o "cache_dir=$T_TMP/cache,region=$BADR,connect_timeout=2" s3://bkt/d/ "$MNT"
refused "region from AWS_REGION" "AWS_REGION: 'localhost:$LPORT#' is no region" AWS_REGION="$BADR" -- \
	-o "cache_dir=$T_TMP/cache,connect_timeout=2" s3://bkt/d/ "$MNT"
printf '[default]\nregion = %s\n' "$BADR" >"$HOME/.aws-config"
refused "region from the config file" "profile 'default' in $HOME/.aws-config" AWS_CONFIG_FILE="$HOME/.aws-config" -- \
	-o "cache_dir=$T_TMP/cache,connect_timeout=2" s3://bkt/d/ "$MNT"
refused "an endpoint with a query" "option endpoint: 'http://127.0.0.1:$LPORT?x'" -- \
	-o "cache_dir=$T_TMP/cache,region=eu-west-1,endpoint=http://127.0.0.1:$LPORT?x,connect_timeout=2" s3://bkt/d/ "$MNT"
refused "an endpoint with a fragment" "option endpoint: 'http://127.0.0.1:$LPORT#.example.com'" -- \
	-o "cache_dir=$T_TMP/cache,region=eu-west-1,endpoint=http://127.0.0.1:$LPORT#.example.com,connect_timeout=2" s3://bkt/d/ "$MNT"
refused "a bucket in a host name, virtual-hosted" "cannot go into a host name" -- \
	-o "cache_dir=$T_TMP/cache,region=eu-west-1,endpoint=http://127.0.0.1:$LPORT,s3_addressing=virtual,connect_timeout=2" \
	s3://Legacy_Bucket/ "$MNT"
# A legacy bucket name path-style (botocore allows it): mounts and reads.
origin legacy ""
if mount_pacefs -o "cache_dir=$T_TMP/cache,endpoint=$EP,region=eu-west-1" s3://Legacy_Bucket/ "$MNT"; then
	t_check "a legacy bucket name, path-style: reads" cmp "$MNT/f.bin" "$ROOT/Legacy_Bucket/f.bin"
	umount_pacefs "$MNT"
else
	t_fail "a legacy bucket name, path-style: mounts" "$T_MOUNT_ERR"
fi

# --- row 8: the key "a/../x" is that object: its path goes as it is.
origin dotdot dotdot-keys
if mount_pacefs -o "cache_dir=$T_TMP/cache,endpoint=$EP,region=eu-west-1" "s3://bkt/a/../" "$MNT"; then
	t_eq "a/../: the listing names x" "$(ls "$MNT" | tr '\n' ' ')" "x "
	t_check "a/../x: the bytes of the object a/../x, not x's" cmp "$MNT/x" "$ROOT/bkt/a/..dotdot/x"
	if grep -q '^GET /bkt/a/\.\./x ' "$LOG"; then
		t_pass "a/../x: the origin was asked for /bkt/a/../x"
	else
		t_fail "a/../x: the origin was asked for /bkt/a/../x" "$(grep '^GET' "$LOG" | grep -v list-type | tail -n 3 | tr '\n' ' ')"
	fi
	umount_pacefs "$MNT"
else
	t_fail "a/../: mount" "$T_MOUNT_ERR"
fi

# --- row 12: a key that decodes to a NUL is left out; the rest lists.
origin nul nul-key
if fg_mount "$T_TMP/nul.mlog" -o "cache_dir=$T_TMP/cache,endpoint=$EP,region=eu-west-1" s3://bkt/d/ "$MNT"; then
	t_eq "nul-key: the other names are listed" "$(ls "$MNT" | tr '\n' ' ')" "one.bin two.bin "
	t_check "nul-key: a listed file reads" cmp "$MNT/one.bin" "$ROOT/bkt/d/one.bin"
	line=$(grep -a "left out" "$T_TMP/nul.mlog" | head -n 1 || true)
	if grep -q 'bad%00key' <<<"$line"; then
		t_pass "nul-key: one line names the key left out: $line"
	else
		t_fail "nul-key: one line names the key left out" "'$line'"
	fi
	umount_pacefs "$MNT"
else
	t_fail "nul-key: mount" "$(tail -n 3 "$T_TMP/nul.mlog")"
fi

t_done

# lib.sh: helpers sourced by the mount tests: a private nginx origin on a free
# loopback port, pacefs mounts, generated files, PASS/FAIL accounting, and a
# cleanup trap that unmounts and stops everything a test started.
# shellcheck shell=bash disable=SC2034,SC2317
# (variables are read by the scripts that source this; trap handlers are called indirectly)

set -euo pipefail

T_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
T_NAME=${T_NAME:-$(basename "$0" .sh)}
PACEFS=${PACEFS:-$T_ROOT/build/pacefs}
case $PACEFS in /*) ;; *) PACEFS=$PWD/$PACEFS ;; esac
READCMP=${READCMP:-$(dirname "$PACEFS")/tests/readcmp}
if [ ! -x "$READCMP" ] && [ -x "$T_ROOT/build/tests/readcmp" ]; then
	READCMP=$T_ROOT/build/tests/readcmp
fi
# run.sh points T_TMPROOT at a folder of its own so that it can sweep up
# after a test that was killed before its trap ran.
T_TMP=$(mktemp -d "${T_TMPROOT:-${TMPDIR:-/tmp}}/pacefs-$T_NAME.XXXXXX")
T_PASSED=0
T_FAILED=0
T_SKIPPED=0
T_MOUNTS=()
T_NGINX_PIDS=()
T_PIDS=()
ORIGIN_BIN=${PACEFS_ORIGIN:-$(dirname "$PACEFS")/pacefs-origin}
O_PIDS=()
O_PID=
O_URL=
O_LOG=
T_FG_PIDS=()
ORIGIN_PID=
ORIGIN_PORT=
ORIGIN_URL=
ORIGIN_PREFIX=
TP_PID=
TP_PORT=
TP_URL=
TP_PREFIX=
T_MOUNT_ERR=
# T_RUN_IN: the command prefix under which nginx_start, o_start and fg_mount
# run what they start (tests/netnslib.sh's ns_enter NS: in a network
# namespace); empty: here.
T_RUN_IN=()
# T_CLEANUPS: commands the cleanup runs last, once every mount and process
# it tracks is gone (tests/netnslib.sh removes its namespaces so).
T_CLEANUPS=()

# --- accounting -------------------------------------------------------------

t_pass() {
	T_PASSED=$((T_PASSED + 1))
	echo "PASS $1"
}

# t_fail NAME REASON...
t_fail() {
	local name=$1
	shift
	T_FAILED=$((T_FAILED + 1))
	echo "FAIL $name: $*"
}

# t_skip NAME REASON...
t_skip() {
	local name=$1
	shift
	T_SKIPPED=$((T_SKIPPED + 1))
	echo "SKIP $name: $*"
}

# t_check NAME CMD...: PASS when CMD succeeds, else FAIL with its output's tail.
t_check() {
	local name=$1 out rc=0
	shift
	out=$("$@" 2>&1) || rc=$?
	if [ "$rc" -eq 0 ]; then
		t_pass "$name"
	else
		t_fail "$name" "exit $rc from: $* :: $(printf '%s' "$out" | tail -n 3 | tr '\n' ' ')"
	fi
	return 0
}

# t_eq NAME GOT WANT
t_eq() {
	if [ "$2" = "$3" ]; then
		t_pass "$1"
	else
		t_fail "$1" "got '$2', want '$3'"
	fi
}

# t_done: prints the closing line and exits with the test's status.
t_done() {
	local line="$T_PASSED passed, $T_FAILED failed"
	if [ "$T_SKIPPED" -gt 0 ]; then
		line="$line, $T_SKIPPED skipped"
	fi
	echo "$line"
	if [ "$T_FAILED" -gt 0 ]; then
		exit 1
	fi
	exit 0
}

# t_skip_all REASON: skips the whole script (no root, no /dev/fuse, ...).
t_skip_all() {
	t_skip "$T_NAME" "$*"
	t_done
}

# t_require_mount: mount tests need root, /dev/fuse, fusermount3, nginx and the
# binaries; they skip with the reason where the first three are missing.
t_require_mount() {
	if [ "$(id -u)" -ne 0 ]; then
		t_skip_all "needs root (mounts, a private nginx); run as root"
	fi
	if [ ! -c /dev/fuse ]; then
		t_skip_all "/dev/fuse is missing"
	fi
	if ! command -v fusermount3 >/dev/null 2>&1; then
		t_skip_all "fusermount3 is missing (contrib/install-deps.sh installs fuse3)"
	fi
	if [ ! -x /usr/sbin/nginx ]; then
		t_skip_all "/usr/sbin/nginx is missing (contrib/install-deps.sh installs nginx-light)"
	fi
	if [ ! -x "$PACEFS" ]; then
		t_fail "$T_NAME" "pacefs binary not found at $PACEFS (run make)"
		t_done
	fi
	if [ ! -x "$READCMP" ]; then
		t_fail "$T_NAME" "readcmp not found at $READCMP (run make build/tests/readcmp)"
		t_done
	fi
}

# t_require_origin: tests against the project's origin fail (never skip)
# without its binary.
t_require_origin() {
	if [ ! -x "$ORIGIN_BIN" ]; then
		t_fail "$T_NAME" "pacefs-origin not found at $ORIGIN_BIN (run make)"
		t_done
	fi
}

# --- files ------------------------------------------------------------------

# gen_file PATH SIZE [SEED]: deterministic pseudo-random content (AES-CTR
# keystream), the same bytes for the same SEED on every machine.
gen_file() {
	local path=$1 size=$2 seed=${3:-1} key
	key=$(printf '%032x' "$seed")
	# openssl dies of SIGPIPE once head has enough: that is expected.
	{ openssl enc -aes-128-ctr -nosalt -K "$key" -iv 00000000000000000000000000000000 \
		</dev/zero 2>/dev/null || true; } | head -c "$size" >"$path"
	if [ "$(stat -c %s "$path")" != "$size" ]; then
		echo "gen_file: $path has $(stat -c %s "$path") bytes, wanted $size" >&2
		return 1
	fi
}

# random_files DIR NAME N BYTES: N files of BYTES random bytes each in DIR
# (made if missing), named by the printf pattern NAME of their index 0 to
# N - 1 (e.g. 'f-%d.bin').
random_files() {
	local i name
	mkdir -p "$1"
	for ((i = 0; i < $3; i++)); do
		# shellcheck disable=SC2059 # the pattern is the caller's
		printf -v name "$2" "$i"
		head -c "$4" /dev/urandom >"$1/$name"
	done
}

# block_digests FILE [BS]: the SHA-256 of each BS-byte block of FILE (64 KiB
# unless BS is given), as the items of a manifest's block_sha256 list:
# "HEX","HEX",... With python3 when there is one, else dd and sha256sum.
block_digests() {
	local file=$1 bs=${2:-65536} n i
	python3 - "$file" "$bs" <<'PY' 2>/dev/null && return 0
import hashlib, sys
d, bs = open(sys.argv[1], "rb").read(), int(sys.argv[2])
print(",".join('"%s"' % hashlib.sha256(d[i:i + bs]).hexdigest()
               for i in range(0, len(d), bs)))
PY
	n=$((($(stat -c %s "$file") + bs - 1) / bs))
	for i in $(seq 0 $((n - 1))); do
		dd if="$file" bs="$bs" skip="$i" count=1 2>/dev/null | sha256sum | cut -d' ' -f1
	done | sed 's/.*/"&"/' | paste -sd, -
}

# --- ports and the origin ---------------------------------------------------

# free_port: prints a loopback TCP port that nothing listens on right now.
free_port() {
	local port used i
	used=$(ss -Htan 2>/dev/null | awk '{ n = split($4, a, ":"); print a[n] }' | sort -u)
	for i in $(seq 1 200); do
		port=$((20000 + (RANDOM * 32768 + RANDOM + i) % 40000))
		if ! grep -qx "$port" <<<"$used"; then
			echo "$port"
			return 0
		fi
	done
	echo "free_port: no free port found" >&2
	return 1
}

# nginx_start [-w WORKERS] [-c CONNECTIONS] [-e LEVEL] [-f LOG_FORMAT]
#             [-h HTTP_DIRECTIVES] SERVER...: starts a private nginx, its
# config, logs and pid in a new folder under T_TMP, and waits until it
# listens. Each SERVER is the inside of one server block, listen line
# included; @PORT1@, @PORT2@, ... in any of them stand for free loopback
# ports, one per server, and @PREFIX@ in HTTP_DIRECTIVES for its folder.
# Defaults: 1 worker, 256 connections, error log
# at info, access log lines "method uri status "range" bytes". Sets
# NGINX_PID, NGINX_PORTS (an array), NGINX_PREFIX (its folder: access.log,
# error.log) and NGINX_URL (http://127.0.0.1:@PORT1@); the cleanup stops it.
nginx_start() {
	local workers=1 conns=256 level=info http='' opt OPTIND=1 prefix conf i k
	# shellcheck disable=SC2016 # nginx's variables
	local format='$request_method $uri $status "$http_range" $body_bytes_sent'
	local user_line=''
	while getopts w:c:e:f:h: opt; do
		case $opt in
		w) workers=$OPTARG ;;
		c) conns=$OPTARG ;;
		e) level=$OPTARG ;;
		f) format=$OPTARG ;;
		h) http=$OPTARG ;;
		*) return 2 ;;
		esac
	done
	shift $((OPTIND - 1))
	prefix=$(mktemp -d "$T_TMP/nginx.XXXXXX")
	mkdir -p "$prefix/tmp"
	http=${http//@PREFIX@/$prefix}
	if [ "$(id -u)" -eq 0 ]; then
		# Workers would otherwise drop to nobody and fail to read the
		# test's 0700 temp dirs.
		user_line="user root;"
	fi
	for _ in 1 2 3 4 5; do
		NGINX_PORTS=()
		for ((k = 1; k <= $#; k++)); do
			NGINX_PORTS+=("$(free_port)")
		done
		if [ "$(printf '%s\n' "${NGINX_PORTS[@]}" | sort -u | wc -l)" -ne $# ]; then
			continue
		fi
		conf=
		for ((k = 1; k <= $#; k++)); do
			conf+="    server { ${!k} }"$'\n'
		done
		for ((k = 1; k <= $#; k++)); do
			conf=${conf//@PORT$k@/${NGINX_PORTS[k - 1]}}
		done
		cat >"$prefix/nginx.conf" <<-EOF
			$user_line
			daemon off;
			master_process on;
			worker_processes $workers;
			pid $prefix/nginx.pid;
			error_log $prefix/error.log $level;
			events { worker_connections $conns; }
			http {
			    default_type application/octet-stream;
			    sendfile on;
			    tcp_nopush on;
			    keepalive_requests 100000;
			    client_body_temp_path $prefix/tmp/body;
			    proxy_temp_path $prefix/tmp/proxy;
			    fastcgi_temp_path $prefix/tmp/fastcgi;
			    uwsgi_temp_path $prefix/tmp/uwsgi;
			    scgi_temp_path $prefix/tmp/scgi;
			    log_format t '$format';
			    access_log $prefix/access.log t;
			    $http
			$conf
			}
		EOF
		rm -f "$prefix/nginx.pid"
		: >"$prefix/access.log"
		"${T_RUN_IN[@]}" /usr/sbin/nginx -e "$prefix/error.log" -p "$prefix" -c "$prefix/nginx.conf" \
			</dev/null >>"$prefix/nginx.out" 2>&1 &
		NGINX_PID=$!
		T_NGINX_PIDS+=("$NGINX_PID")
		NGINX_PREFIX=$prefix
		NGINX_URL=http://127.0.0.1:${NGINX_PORTS[0]}
		# nginx writes its pid file once every listening socket is bound;
		# a port taken meanwhile makes it retry for 2 s, then exit.
		for i in $(seq 1 200); do
			if [ "$(cat "$prefix/nginx.pid" 2>/dev/null)" = "$NGINX_PID" ]; then
				return 0
			fi
			kill -0 "$NGINX_PID" 2>/dev/null || break
			sleep 0.05
		done
		proc_stop "$NGINX_PID"
		if ! grep -q 'Address already in use' "$prefix/error.log" 2>/dev/null; then
			break
		fi
	done
	echo "nginx_start: nginx did not come up; its log:" >&2
	tail -n 5 "$prefix/error.log" >&2 || true
	return 1
}

# origin_start DIR [DIRECTIVES]: serves DIR over HTTP on 127.0.0.1 with
# nginx_start's defaults; DIRECTIVES go inside the server block (e.g.
# "location /norange/ { max_ranges 0; }"). Sets ORIGIN_PORT, ORIGIN_URL,
# ORIGIN_PREFIX and ORIGIN_PID.
origin_start() {
	local dir
	dir=$(cd "$1" && pwd)
	nginx_start "listen 127.0.0.1:@PORT1@; root $dir; ${2:-}" || return 1
	ORIGIN_PID=$NGINX_PID
	ORIGIN_PORT=${NGINX_PORTS[0]}
	ORIGIN_URL=$NGINX_URL
	ORIGIN_PREFIX=$NGINX_PREFIX
}

# tier_proxy_start SLICE: a private nginx as a forward caching proxy
# (proxy_cache with the slice module, SLICE bytes a slice, e.g. 1m: the
# cache tier of docs/deploy.md), with an empty cache; a request with a
# Cache-Control header goes to the origin (and refreshes the cache). Sets
# TP_PORT, TP_URL, TP_PREFIX and TP_PID; its access log
# ($TP_PREFIX/access.log) says: method uri status "range" bytes
# cache-status.
tier_proxy_start() {
	local slice=$1
	# shellcheck disable=SC2016 # nginx's variables
	nginx_start -f '$request_method $uri $status "$http_range" $body_bytes_sent $upstream_cache_status' \
		-h "proxy_cache_path @PREFIX@/cache levels=1:2 keys_zone=pc:10m max_size=2g inactive=60m use_temp_path=off;" \
		"listen 127.0.0.1:@PORT1@;
		location = /__pacefs_probe { access_log off; return 204; }
		location / {
			slice $slice;
			proxy_cache pc;
			proxy_cache_key \$http_host\$uri\$is_args\$args\$slice_range;
			proxy_set_header Range \$slice_range;
			proxy_set_header Host \$http_host;
			proxy_http_version 1.1;
			proxy_set_header Connection \"\";
			proxy_cache_valid 200 206 1h;
			proxy_cache_lock on;
			proxy_cache_lock_timeout 30s;
			proxy_cache_bypass \$http_cache_control;
			proxy_pass http://\$http_host;
			add_header X-Cache \$upstream_cache_status;
		}" || return 1
	TP_PID=$NGINX_PID
	TP_PORT=${NGINX_PORTS[0]}
	TP_URL=$NGINX_URL
	TP_PREFIX=$NGINX_PREFIX
}

# pid_gone PID SECS: true once process PID has exited, waiting up to SECS
# seconds (a daemon after its unmount).
pid_gone() {
	local pid=$1 i
	for i in $(seq 1 $(($2 * 20))); do
		kill -0 "$pid" 2>/dev/null || return 0
		sleep 0.05
	done
	! kill -0 "$pid" 2>/dev/null
}

# nginx_kill PID: kills one nginx this script started at once, its workers
# first (a worker outlives a killed master), as a crashed machine would
# go: its connections are reset mid-transfer.
nginx_kill() {
	local pid=$1 child
	# Stopped first: a master that saw a worker die would start another
	# before its own KILL, and that one would outlive the test.
	kill -STOP "$pid" 2>/dev/null || true
	for child in $(ps -o pid= --ppid "$pid" 2>/dev/null); do
		kill -KILL "$child" 2>/dev/null || true
	done
	kill -KILL "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
}

# proc_stop PID: stops a process this script started (a server, a mount's
# daemon): TERM, then KILL after 5 s, and waits for it. nginx's master
# stops its workers on TERM; one still up after 5 s (a worker that waited
# on a hung upstream) is killed with its children, else KILL would orphan
# them.
proc_stop() {
	local pid=$1 i
	kill -TERM "$pid" 2>/dev/null || return 0
	for i in $(seq 1 100); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.05
	done
	if kill -0 "$pid" 2>/dev/null; then
		nginx_kill "$pid"
		return 0
	fi
	wait "$pid" 2>/dev/null || true
}

# origin_stop: stops the origin that origin_start started last.
origin_stop() {
	if [ -n "$ORIGIN_PID" ]; then
		proc_stop "$ORIGIN_PID"
		ORIGIN_PID=
	fi
}

# origin_requests: how many requests the current origin has logged; a test
# diffs two counts.
origin_requests() {
	if [ -f "$ORIGIN_PREFIX/access.log" ]; then
		wc -l <"$ORIGIN_PREFIX/access.log"
	else
		echo 0
	fi
}

# origin_log: the current origin's access log (method uri status "range" bytes).
origin_log() {
	cat "$ORIGIN_PREFIX/access.log" 2>/dev/null || true
}

# --- mounts -----------------------------------------------------------------

# mount_line MNT: the /proc/self/mountinfo line for MNT, if it is mounted.
mount_line() {
	awk -v m="$1" '$5 == m' /proc/self/mountinfo | tail -n 1
}

# is_pacefs_mounted MNT
is_pacefs_mounted() {
	mount_line "$1" | grep -q ' - fuse\.pacefs '
}

# is_mounted MNT: anything mounted at MNT.
is_mounted() {
	[ -n "$(mount_line "$1")" ]
}

# mount_wait MNT [PID [SECS [TYPE]]]: waits until MNT is mounted, as a
# file system of TYPE (fuse.pacefs unless given; "any": whatever type), for
# at most SECS seconds (10), and no longer than PID (when given) lives.
# Returns 0 once mounted, 1 when PID exited first, 2 when time ran out.
mount_wait() {
	local mnt=$1 pid=${2:-} secs=${3:-10} type=${4:-fuse.pacefs} i line
	for i in $(seq 1 $((secs * 20))); do
		line=$(mount_line "$mnt")
		if [ -n "$line" ] && { [ "$type" = any ] || [[ $line == *" - $type "* ]]; }; then
			return 0
		fi
		if [ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null; then
			return 1
		fi
		sleep 0.05
	done
	return 2
}

# t_track_mount MNT: makes the cleanup unmount MNT (for mounts a test makes
# itself, e.g. a read-only tmpfs).
t_track_mount() {
	T_MOUNTS+=("$1")
}

# t_track_pid PID: makes the cleanup stop PID (proc_stop), a server other
# than nginx that the test started (Prometheus, say).
t_track_pid() {
	T_PIDS+=("$1")
}

# mount_pacefs ARGS...: runs pacefs (daemonizing) with ARGS, whose last is
# the mountpoint, and waits until the mount is live. Returns non-zero with
# pacefs's stderr in T_MOUNT_ERR (and on stderr) when it fails.
mount_pacefs() {
	local mnt=${*: -1} err rc=0
	mnt=$(cd "$mnt" 2>/dev/null && pwd || echo "$mnt")
	err=$(mktemp "$T_TMP/mount-err.XXXXXX")
	T_MOUNTS+=("$mnt")
	timeout 60 "$PACEFS" "$@" </dev/null >"$err.out" 2>"$err" || rc=$?
	T_MOUNT_ERR=$(cat "$err")
	if [ "$rc" -ne 0 ]; then
		echo "mount_pacefs: pacefs $* exited $rc: $T_MOUNT_ERR" >&2
		return 1
	fi
	if mount_wait "$mnt" "" 5; then
		return 0
	fi
	echo "mount_pacefs: pacefs $* exited 0 but $mnt is not a fuse.pacefs mount: $T_MOUNT_ERR" >&2
	return 1
}

# fuse_abort MNT: aborts MNT's FUSE connection, if fusectl is mounted, so
# that a hung daemon cannot block the unmount.
fuse_abort() {
	local dev minor
	dev=$(mount_line "$1" | awk '{ print $3 }')
	minor=${dev#*:}
	if [ -n "$dev" ] && [ -w "/sys/fs/fuse/connections/$minor/abort" ]; then
		echo 1 >"/sys/fs/fuse/connections/$minor/abort" 2>/dev/null || true
	fi
}

# umount_pacefs MNT: unmounts and waits for the mount to be gone.
umount_pacefs() {
	local mnt=$1 i
	mnt=$(cd "$mnt" 2>/dev/null && pwd || echo "$mnt")
	if ! is_mounted "$mnt"; then
		return 0
	fi
	if ! fusermount3 -u "$mnt" 2>/dev/null; then
		# Busy or hung: detach it lazily, aborting the connection if it
		# does not go.
		umount -l "$mnt" 2>/dev/null || {
			fuse_abort "$mnt"
			umount -l "$mnt" 2>/dev/null || true
		}
	fi
	for i in $(seq 1 100); do
		is_mounted "$mnt" || return 0
		sleep 0.05
	done
	echo "umount_pacefs: $mnt is still mounted" >&2
	return 1
}

# log_bytes LOG [FIELD]: the sum of the numeric FIELD-th fields (5: the
# body bytes of pacefs-origin's and nginx_start's default logs) of LOG's
# lines; 0 when LOG cannot be read.
log_bytes() {
	awk -v f="${2:-5}" '$f ~ /^[0-9]+$/ { s += $f } END { printf "%.0f\n", s }' "$1" 2>/dev/null || echo 0
}

# --- cleanup ----------------------------------------------------------------

# o_start NAME ARGS...: starts pacefs-origin (the project's test origin,
# contrib/origin) on a free loopback port with ARGS; sets O_PID, O_URL and
# O_LOG, its request log ($T_TMP/NAME.log).
o_start() {
	local name=$1 i
	shift
	rm -f "$T_TMP/$name.port"
	"${T_RUN_IN[@]}" "$ORIGIN_BIN" --port-file "$T_TMP/$name.port" --log "$T_TMP/$name.log" \
		"$@" </dev/null >"$T_TMP/$name.out" 2>"$T_TMP/$name.err" &
	O_PID=$!
	O_PIDS+=("$O_PID")
	for i in $(seq 1 100); do
		if [ -s "$T_TMP/$name.port" ]; then
			O_URL=http://127.0.0.1:$(cat "$T_TMP/$name.port")
			O_LOG=$T_TMP/$name.log
			return 0
		fi
		kill -0 "$O_PID" 2>/dev/null || break
		sleep 0.05
	done
	echo "o_start: pacefs-origin $* did not start: $(cat "$T_TMP/$name.err")" >&2
	return 1
}

# o_kill_all: stops every test origin this script started.
o_kill_all() {
	local pid
	for pid in "${O_PIDS[@]}"; do
		kill -KILL "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	done
	O_PIDS=()
}

# fg_mount LOG ARGS... MOUNTPOINT: runs pacefs in the foreground (-f) in the
# background with its log in LOG, and waits for the mount; sets FG_PID.
fg_mount() {
	local log=$1 mnt=${*: -1}
	shift
	mnt=$(cd "$mnt" 2>/dev/null && pwd || echo "$mnt")
	T_MOUNTS+=("$mnt")
	"${T_RUN_IN[@]}" "$PACEFS" -f "$@" </dev/null >/dev/null 2>"$log" &
	FG_PID=$!
	T_FG_PIDS+=("$FG_PID")
	if mount_wait "$mnt" "$FG_PID"; then
		return 0
	fi
	echo "fg_mount: pacefs -f $* did not mount: $(tail -n 3 "$log")" >&2
	return 1
}

t_cleanup() {
	local i pid left=0
	set +e
	for ((i = ${#T_MOUNTS[@]} - 1; i >= 0; i--)); do
		umount_pacefs "${T_MOUNTS[$i]}" 2>/dev/null
	done
	for pid in "${T_NGINX_PIDS[@]}" "${T_PIDS[@]}"; do
		proc_stop "$pid"
	done
	o_kill_all
	for pid in "${T_FG_PIDS[@]}"; do
		wait "$pid" 2>/dev/null
	done
	for i in "${T_CLEANUPS[@]}"; do
		$i
	done
	# Never recurse into something still mounted.
	for i in "${T_MOUNTS[@]}"; do
		if is_mounted "$i"; then
			echo "cleanup: $i is still mounted; leaving $T_TMP" >&2
			left=1
		fi
	done
	if [ "$left" -eq 0 ] && [ -z "${T_KEEP:-}" ]; then
		rm -rf --one-file-system "$T_TMP"
	fi
}

t_on_signal() {
	trap - EXIT
	t_cleanup
	echo "$T_NAME: interrupted"
	if [ -z "${T_NO_COUNTS:-}" ]; then
		echo "$T_PASSED passed, $((T_FAILED + 1)) failed"
	fi
	exit 130
}

trap t_cleanup EXIT
trap t_on_signal INT TERM HUP

# t_cmdline_pid ARG: the pid of a process one of whose arguments (after
# the first) begins with ARG, such as a daemon by its mountpoint.
t_cmdline_pid() {
	local p
	for p in /proc/[0-9]*; do
		if tr "\\0" " " 2>/dev/null <"$p/cmdline" | grep -qF -- " $1"; then
			echo "${p#/proc/}"
			return 0
		fi
	done
	return 1
}

# t_cmdline_count CMDLINE: how many processes run exactly CMDLINE.
t_cmdline_count() {
	local p n=0
	for p in /proc/[0-9]*; do
		if [ "$(tr '\0' ' ' 2>/dev/null <"$p/cmdline")" = "$1 " ]; then
			n=$((n + 1))
		fi
	done
	echo "$n"
}

#!/usr/bin/env bash
# run.sh: the side-by-side benchmark (`make bench`): pacefs, rclone mount
# (--vfs-cache-mode full) and httpdirfs (--cache) on the same files from the
# same origins, plus curl as the limit; writes docs/bench/README.md and PNG
# plots. Usage: contrib/bench/run.sh PACEFS_BINARY
#
# Environment: BENCH_RUNS (3), BENCH_OUT (docs/bench), BENCH_KEEP=1 keeps the
# work directory, BENCH_ONLY="seq_lo seq_wan ..." runs a subset (the names
# are in WORKLOADS below), BENCH_MEM_SIZE the bytes of the memory workload's
# file (4 GiB), BENCH_LEAD the player target's lead in seconds (3),
# BENCH_DATA a directory that keeps the real clients' generated files (the
# MP4, zip and database) from one run to the next (default: made anew in
# the work directory); the loader and fio workloads' sizes and subsets:
# BENCH_LOADER_N, BENCH_LOADER_SMALL_N, BENCH_LOADER_ORIGINS,
# BENCH_LOADER_SETS, BENCH_SHARDS,
# BENCH_SHARD_SIZE, BENCH_SMALL_FILES, BENCH_SMALL_SIZE, BENCH_FIO_JOBS,
# BENCH_FIO_ORIGINS, BENCH_FIO_SIZE, BENCH_FIO_SECS (see below).
# shellcheck disable=SC2317 # cleanup functions are called from traps
set -euo pipefail

if [ $# -ne 1 ]; then
	echo "usage: contrib/bench/run.sh PACEFS_BINARY" >&2
	exit 2
fi
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
PACEFS=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
BUILD=$(dirname "$PACEFS")
BUILD_REL=${BUILD#"$REPO"/}
ORIGIN_BIN=$BUILD/pacefs-origin
BR=$BUILD/bench/benchread
RUNS=${BENCH_RUNS:-3}
OUT=${BENCH_OUT:-$REPO/docs/bench}
ONLY=${BENCH_ONLY:-}

MiB=1048576
SEQ_LO_SIZE=$((256 * MiB)) # loopback sequential, warm, remount
SEQ_WAN_SIZE=$((64 * MiB)) # WAN sequential, first byte, mirrors
SMALLBUF_SIZE=$((128 * MiB)) # WAN sequential from the small-buffer origin
SMALLBUF_SNDBUF=32768 # its SO_SNDBUF (as where lanes crawled)
SMALLBUF_CHUNK=16384  # its paced writes
LONG_SIZE=$((128 * MiB))   # WAN random reads, player, seeks
MULTI_SIZE=$((32 * MiB))   # each of the many-readers files
MEM_SIZE=${BENCH_MEM_SIZE:-$((4096 * MiB))} # streamed while the daemon's RSS is read
MULTI_FILES=4
MULTI_READERS=8
MULTI_LO_N="4 16" # loopback many readers: readers (each on its own file) in one mount
MULTI_LO_FILES=16 # MULTI_SIZE files for them: the largest of MULTI_LO_N
WAN_RATE=8000000 # bytes/s per connection
WAN_LATENCY=20   # ms before every response
RANDOM_N_LO=200
RANDOM_N_WAN=100
PLAYER_RATE=4000000
PLAYER_BYTES=$((64 * MiB)) # of the SEQ_LO_SIZE file
PLAYER_BS=$((256 * 1024))
SEEK_N=6
SEEK_PLAY=$((2 * MiB))
SEEK_JUMP=$MiB # the first read at each new position in seek1m
PLAYER2_RATE=2000000
PLAYER2_BYTES=$((24 * MiB)) # 12.6 s of play
# shellcheck disable=SC2034 # for report.sh
PLAYER_LEAD=${BENCH_LEAD:-3} # s: the player may pull this far ahead of what it consumed
# shellcheck disable=SC2034 # for report.sh
LANES=16 # the lanes pacefs may open to one origin (-o host_lanes=; the mount's 32 are shared by its origins), for the seek target's bound
SYSTEMS=(pacefs rclone httpdirfs)

# The real clients: the same command through each system and on the local
# copy, which is in the page cache (the floor without a network).
CLIENT_SYSTEMS=(local pacefs rclone httpdirfs)
MEDIA_SECS=300 # the MP4: 640x360, 25 fps, H.264 at MEDIA_KBPS + AAC 128 kbit/s
MEDIA_KBPS=4000
PLAY_SECS=10 # ffmpeg -re plays the first PLAY_SECS of it
SS_POS=$((MEDIA_SECS / 2)) # ffmpeg -ss into the middle of the cold file
# AT:POS: AT s into the playback, ffmpeg -ss POS on the same file (a jump);
# three, for a median on a shared machine
PLAY_JUMPS="3:100 5:150 7:200"
ZIP_MEMBERS=100
ZIP_MEMBER_BYTES=$MiB
ZIP_READ=m050.bin # a member in the middle
DB_ROWS=262144    # 1000-byte payloads on 4 KiB pages: about 257 MiB
DB_PAYLOAD=1000
SQL_N=50                # point lookups
T1_FILE=multi0.bin      # MULTI_SIZE bytes, through the one-transfer origin
T1_RETRY_AFTER=1        # s, that origin's Retry-After on its 503s
STALL_SIZE=$((4 * MiB)) # the file behind the one-byte-per-response origin
READ_TIMEOUT=5          # pacefs -o read_timeout= against it
TIER_CHUNK=$MiB # -o chunk= and the tier's slice in the tier workload
TIER_STALL=10   # s, -o stall_timeout= of the mount that loses a proxy
S3SIG_N=2000    # random 4 KiB reads of the s3sig workload
S3SIG_BUCKET=s3sig # its bucket: a directory of WWW with the same files
# The dataset loader: LOADER_N worker processes (benchread
# loader) take the files of one set in one shuffled order and read each
# whole, through a directory-index mount of the set's folder on each
# origin of LOADER_ORIGINS ("wan": the WAN-like origin, "lo": loopback
# nginx); the sets are SHARD_N shards of SHARD_SIZE and SMALL_N small files
# of SMALL_SIZE, the latter with LOADER_SMALL_N workers only: httpdirfs
# reads about one small file a second per worker from the WAN origin, so
# that each worker count takes it minutes (2,000 files: 4 min with 8
# workers, 8 with 4).
LOADER_N=${BENCH_LOADER_N:-4 8 16}
LOADER_SMALL_N=${BENCH_LOADER_SMALL_N:-8}
LOADER_ORIGINS=${BENCH_LOADER_ORIGINS:-wan lo}
LOADER_SETS=${BENCH_LOADER_SETS:-shards small}
SHARD_N=${BENCH_SHARDS:-48}
SHARD_SIZE=${BENCH_SHARD_SIZE:-$((8 * MiB))}
SMALL_N=${BENCH_SMALL_FILES:-2000}
SMALL_SIZE=${BENCH_SMALL_SIZE:-$((32 * 1024))}
# mountpoint-s3's fio read jobs (awslabs/mountpoint-s3,
# mountpoint-s3/scripts/fio/read/), each on FIO_SIZE files (theirs are
# 100G) for FIO_SECS (their runtime is 30s), on the origins of FIO_ORIGINS;
# the jobs' parameters are in fio_job below.
FIO_JOBS=${BENCH_FIO_JOBS:-seq_read seq_read_4t rand_read rand_read_4t seq_read_skip_17m}
FIO_ORIGINS=${BENCH_FIO_ORIGINS:-wan lo}
FIO_SIZE=${BENCH_FIO_SIZE:-$((1024 * MiB))}
FIO_SECS=${BENCH_FIO_SECS:-10}
# shellcheck disable=SC2034 # for report.sh
HOST_LANES=16 # pacefs's default -o host_lanes=, for the fio target's bound
WORKLOADS=(seq_lo seq_wan seq_wan_smallbuf ttfb random positions player player2 seek1m mirrors multi multi_lo
	loader fio ffprobe ffss ffplay zip sqlite transfer1 stall memory tier s3sig)

# Per-step timeouts, seconds.
TO_MOUNT=30
TO_STEP=240
TO_SHORT=30 # steps that take seconds when all is well: the 503 origin, the stalled read
TO_LOADER=600 # a loader run: httpdirfs takes minutes over the small files

for need in /usr/sbin/nginx rclone httpdirfs gnuplot curl fusermount3 timeout ffmpeg ffprobe /usr/bin/python3 fio ss; do
	if ! command -v "$need" >/dev/null 2>&1; then
		echo "bench: $need is missing; run contrib/install-deps.sh --bench" >&2
		exit 1
	fi
done
if [ ! -x "$PACEFS" ] || [ ! -x "$ORIGIN_BIN" ]; then
	echo "bench: $PACEFS or $ORIGIN_BIN is not built; run make" >&2
	exit 1
fi
if [ ! -c /dev/fuse ] || [ "$(id -u)" -ne 0 ]; then
	echo "bench: needs root and /dev/fuse (it mounts and drops the page cache)" >&2
	exit 1
fi
make -C "$REPO" --no-print-directory BUILD="$BUILD_REL" "$BUILD_REL/bench/benchread" >/dev/null

# The mount tests' helpers: nginx_start, o_start (pacefs-origin),
# mount_wait, umount_pacefs, and a work directory (T_TMP) whose servers
# and mounts t_cleanup stops and unmounts.
T_NAME=bench
# shellcheck source=tests/lib.sh
source "$REPO/tests/lib.sh"
W=$T_TMP
WWW=$W/www
RAW=$W/raw.tsv
mkdir -p "$WWW" "$W/logs" "$W/mnt" "$W/cache" "$W/bin"
# Private copies: others rebuild build/ while this runs, and a binary
# relinked mid-run would fail a mount or mix two versions in one report.
cp "$PACEFS" "$ORIGIN_BIN" "$BR" "$HERE/clients.py" "$W/bin/"
PACEFS=$W/bin/pacefs
ORIGIN_BIN=$W/bin/pacefs-origin
BR=$W/bin/benchread
CL=(/usr/bin/python3 "$W/bin/clients.py")
: >"$RAW"
T_START=$(date +%s)
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
# What was measured, where and when, recorded now for the report.
BENCH_DATE=$(date -u '+%Y-%m-%d %H:%M UTC')
BENCH_MACHINE="$(nproc) CPUs ($(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo)), $(awk '/MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo) memory, Linux $(uname -r)"
BENCH_VERSIONS="$("$PACEFS" -V 2>&1 | awk 'NR == 1'); $(rclone version 2>/dev/null | awk 'NR == 1'); $(httpdirfs --version 2>&1 | awk 'NR == 1'); $(/usr/sbin/nginx -v 2>&1 | awk 'NR == 1'); $(curl -V | awk 'NR == 1')"
BENCH_COMMIT=$(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo unknown)
# Others edit the tree: say when the binary may hold more than the commit.
# (outside a git checkout, a source tarball, there is nothing to say)
dirty=$(git -C "$REPO" status --porcelain -- fs fetch cache pacing 2>/dev/null | awk '{ printf "%s%s", (NR > 1 ? ", " : ""), $2 }') || dirty=
if [ -n "$dirty" ]; then
	BENCH_COMMIT="$BENCH_COMMIT plus uncommitted changes in $dirty"
fi

# --- cleanup: every mount unmounted, every process stopped ------------------

MOUNT_PIDS=() # pids of mount daemons (foreground processes we started)
PAR_PIDS=()   # pids of the readers par_run has running at once
CONN_PID=     # conn_watch's sampler

cleanup() {
	local rc=$? m p
	trap - EXIT INT TERM HUP
	if [ -n "$STEP_PID" ]; then
		kill -TERM "$STEP_PID" 2>/dev/null || true
	fi
	for p in "${PAR_PIDS[@]}"; do
		kill -TERM "$p" 2>/dev/null || true
	done
	if [ -n "$CONN_PID" ]; then
		kill -TERM "$CONN_PID" 2>/dev/null || true
	fi
	for m in "${T_MOUNTS[@]}"; do
		umount_pacefs "$m" 2>/dev/null || true
	done
	for p in "${MOUNT_PIDS[@]}"; do
		proc_stop "$p"
	done
	if [ "${BENCH_KEEP:-0}" = 1 ] || [ "$rc" -ne 0 ]; then
		T_KEEP=1
		echo "bench: work directory kept: $W" >&2
	fi
	# the servers, then the work directory
	t_cleanup
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

# elapsed T0 T1: seconds between two `date +%s.%N` stamps.
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.6f", b - a }'; }

say() { printf '[%4ds] %s\n' "$(($(date +%s) - T_START))" "$*"; }

wanted() { [ -z "$ONLY" ] || [[ " $ONLY " == *" $1 "* ]]; }

# --- origins ----------------------------------------------------------------

# nginx_bench: nginx on a free loopback port over $WWW with autoindex, one
# worker per CPU; sets NGINX_URL and NGINX_LOG ("method uri range status
# bytes" per request).
nginx_bench() {
	# shellcheck disable=SC2016 # nginx's variables
	nginx_start -w "$(nproc)" -c 1024 -e warn \
		-f '$request_method $uri "$http_range" $status $body_bytes_sent' \
		-h 'tcp_nodelay on; keepalive_timeout 120s;' \
		"listen 127.0.0.1:@PORT1@; root $WWW; autoindex on;" || {
		echo "bench: nginx did not start" >&2
		return 1
	}
	NGINX_LOG=$NGINX_PREFIX/access.log
}

# pacefs-origins start with o_start NAME --root ROOT --quiet [OPTION...],
# which sets O_URL and O_LOG (its request log: "method path range status
# bytes fault").

# tier_start NAME: nginx on a free loopback port as a forward caching proxy
# (proxy_cache with the slice module, TIER_CHUNK a slice, an empty cache),
# the tier of docs/deploy.md; sets TIER_URL and TIER_PID.
tier_start() {
	local prefix=$W/$1 port i
	rm -rf "$prefix"
	mkdir -p "$prefix/tmp" "$prefix/cache"
	for _ in 1 2 3 4 5; do
		port=$(free_port)
		cat >"$prefix/nginx.conf" <<-EOF
			user root;
			daemon off;
			master_process on;
			worker_processes $(nproc);
			pid $prefix/nginx.pid;
			error_log $prefix/error.log warn;
			events { worker_connections 1024; }
			http {
			    client_body_temp_path $prefix/tmp/body;
			    proxy_temp_path $prefix/tmp/proxy;
			    fastcgi_temp_path $prefix/tmp/fastcgi;
			    uwsgi_temp_path $prefix/tmp/uwsgi;
			    scgi_temp_path $prefix/tmp/scgi;
			    access_log off;
			    keepalive_requests 100000;
			    sendfile on;
			    tcp_nopush on;
			    proxy_cache_path $prefix/cache levels=1:2 keys_zone=pc:10m max_size=2g inactive=60m use_temp_path=off;
			    server {
			        listen 127.0.0.1:$port;
			        location = /__probe { return 204; }
			        location / {
			            slice $((TIER_CHUNK / 1024))k;
			            proxy_cache pc;
			            proxy_cache_key \$http_host\$uri\$is_args\$args\$slice_range;
			            proxy_set_header Range \$slice_range;
			            proxy_set_header Host \$http_host;
			            proxy_http_version 1.1;
			            proxy_set_header Connection "";
			            proxy_cache_valid 200 206 1h;
			            proxy_cache_lock on;
			            proxy_cache_lock_timeout 30s;
			            proxy_cache_bypass \$http_cache_control;
			            proxy_pass http://\$http_host;
			            add_header X-Cache \$upstream_cache_status;
			        }
			    }
			}
		EOF
		/usr/sbin/nginx -e "$prefix/error.log" -p "$prefix" -c "$prefix/nginx.conf" \
			</dev/null >>"$prefix/nginx.out" 2>&1 &
		TIER_PID=$!
		SERVER_PIDS+=("$TIER_PID")
		TIER_URL=http://127.0.0.1:$port
		for i in $(seq 1 100); do
			kill -0 "$TIER_PID" 2>/dev/null || break
			if curl -s -o /dev/null --max-time 2 "$TIER_URL/__probe"; then
				return 0
			fi
			sleep 0.05
		done
		kill "$TIER_PID" 2>/dev/null || true
		wait "$TIER_PID" 2>/dev/null || true
	done
	echo "bench: the tier's nginx did not start: $(tail -n 3 "$prefix/error.log")" >&2
	return 1
}

# tier_stop PID [KILL]: stops a tier's nginx (with KILL at once, workers
# first, as a machine that dies: its connections reset mid-transfer).
tier_stop() {
	local p
	if [ -n "${2:-}" ]; then
		for p in $(ps -o pid= --ppid "$1" 2>/dev/null); do kill -KILL "$p" 2>/dev/null || true; done
		kill -KILL "$1" 2>/dev/null || true
	else
		kill -TERM "$1" 2>/dev/null || true
	fi
	wait "$1" 2>/dev/null || true
}

# wan_start NAME [ROOT]: pacefs-origin over ROOT ($WWW) with the WAN caps
# and a listing; sets WAN_URL and WAN_LOG.
wan_start() {
	o_start "$1" --root "${2:-$WWW}" --quiet --rate "$WAN_RATE" --latency "$WAN_LATENCY" --autoindex || return 1
	WAN_URL=$O_URL
	WAN_LOG=$O_LOG
}

# log_mark LOG: the log's current length; log_pulled LOG MARK: "pulled=BYTES
# reqs=N" for the lines written since MARK (field 5 is the body bytes in
# both log formats).
log_mark() { stat -c %s "$1"; }
log_pulled() {
	tail -c +$(($2 + 1)) "$1" | awk '{ s += $5; n++ } END { printf "pulled=%d reqs=%d", s, n }'
}

# --- caches -----------------------------------------------------------------

DROP_OK=1
# cold_caches FILE...: drops the page cache (every mount's cache files and
# the kernel's copy of FUSE files), then reads the origin's source FILEs so
# the origin side is always served from memory, as a busy server would be.
cold_caches() {
	local f
	sync
	if ! echo 3 >/proc/sys/vm/drop_caches 2>/dev/null; then
		DROP_OK=0
	fi
	# one cat for all: the loader's sets are thousands of files
	if [ $# -gt 0 ]; then
		(cd "$WWW" && cat -- "$@") >/dev/null
	fi
	cat "${CURL_FILES[@]}" >/dev/null
}

# curl's program and libraries, which cold_caches reads back in: the
# limits that start curl processes (par_run) are timed from their start,
# which after a dropped page cache would include loading curl and its 30
# libraries from disk, as no mount daemon's figure does.
mapfile -t CURL_FILES < <(
	p=$(command -v curl)
	echo "$p"
	ldd "$p" | awk '$3 ~ /^\// { print $3 }'
)

# --- mounts -----------------------------------------------------------------

# fs_mount SYS BASE_URL FILE MNT CACHE [PACEFS_OPTS...]: mounts SYS so that
# MNT/FILE is BASE_URL/FILE; pacefs mounts the one file (with FS_TREE=1
# the directory index BASE_URL/, as the others always do), the others the
# listing of BASE_URL/. Sets MPID; on failure returns 1 with MOUNT_ERR.
fs_mount() {
	local sys=$1 base=$2 file=$3 mnt=$4 cache=$5 log rc=0
	shift 5
	mkdir -p "$mnt" "$cache"
	T_MOUNTS+=("$mnt")
	log=$W/logs/$sys.log
	echo "=== $(date +%T) mount $sys $base/$file at $mnt" >>"$log"
	case $sys in
	pacefs)
		local url=$base/$file
		[ "${FS_TREE:-0}" != 1 ] || url=$base/
		"$PACEFS" -f -o "cache_dir=$cache" "$@" "$url" "$mnt" \
			</dev/null >>"$log" 2>&1 &
		;;
	rclone)
		rclone mount :http: "$mnt" --http-url "$base/" --vfs-cache-mode full \
			--cache-dir "$cache" --config "$W/rclone.conf" \
			</dev/null >>"$log" 2>&1 &
		;;
	httpdirfs)
		# --no-range-check: httpdirfs 1.2.5 exits ("This web server does
		# not support HTTP range requests") on a 206 without
		# Accept-Ranges, which nginx omits (httpdirfs issue #188).
		httpdirfs -f --cache --cache-location "$cache" --no-range-check "$base/" "$mnt" \
			</dev/null >>"$log" 2>&1 &
		;;
	esac
	MPID=$!
	MOUNT_PIDS+=("$MPID")
	mount_wait "$mnt" "$MPID" "$TO_MOUNT" any || rc=$?
	if [ "$rc" -eq 0 ] && [ -e "$mnt/$file" ]; then
		return 0
	fi
	if [ "$rc" -eq 1 ]; then
		MOUNT_ERR="$sys exited while mounting: $(grep -v '^===' "$log" | tail -n 1)"
		return 1
	fi
	MOUNT_ERR="$sys: $mnt/$file did not appear within ${TO_MOUNT}s"
	fs_umount "$mnt" "$MPID"
	return 1
}

# fs_umount MNT PID: unmounts and waits (bounded) for the daemon to exit.
fs_umount() {
	local mnt=$1 pid=$2 i
	umount_pacefs "$mnt" 2>/dev/null || true
	for i in $(seq 1 100); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.05
	done
	if kill -0 "$pid" 2>/dev/null; then
		echo "=== $(date +%T) pid $pid still alive 5 s after unmount: killed" >>"$W/logs/unmount.log"
		kill -KILL "$pid" 2>/dev/null || true
	fi
	wait "$pid" 2>/dev/null || true
}

# --- recording --------------------------------------------------------------

# record WL SYS RUN LINE [EXTRA]: appends one result: LINE is benchread's
# output ("ok k=v ..." or "failed: ...") or "skipped: WHY".
record() {
	local wl=$1 sys=$2 run=$3 line=$4 extra=${5:-}
	if [[ $line == ok* ]]; then
		printf '%s\t%s\t%s\tok\t%s %s\n' "$wl" "$sys" "$run" "${line#ok }" "$extra" >>"$RAW"
	elif [[ $line == skipped:* ]]; then
		printf '%s\t%s\t%s\tskipped\t%s\n' "$wl" "$sys" "$run" "${line#skipped: }" >>"$RAW"
		say "  $wl $sys run $run skipped: ${line#skipped: }"
	else
		line=${line#failed: }
		printf '%s\t%s\t%s\tfailed\t%s\n' "$wl" "$sys" "$run" "${line//$'\t'/ }" >>"$RAW"
		say "  $wl $sys run $run FAILED: $line"
	fi
}

# run_step CMD...: runs CMD under the step timeout (STEP_TO, else TO_STEP)
# and sets STEP to its last line, or to "failed: ..." with the reason. It
# runs in this shell, in the background with `wait`, so that a signal
# reaches the traps at once.
STEP_PID=
run_step() {
	local rc=0 to=${STEP_TO:-$TO_STEP}
	timeout -k 5 "$to" "$@" >"$W/step.out" 2>"$W/step.err" &
	STEP_PID=$!
	wait "$STEP_PID" || rc=$?
	STEP_PID=
	STEP=$(tail -n 1 "$W/step.out")
	if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
		STEP="failed: timed out after ${to}s"
	elif [ "$rc" -ne 0 ] && [[ $STEP != failed:* ]]; then
		STEP="failed: exit $rc: $(tail -n 1 "$W/step.err")"
	fi
}

# --- curl, the limit --------------------------------------------------------

# curl_one URL SIZE [FILE]: one connection, whole body to /dev/null or into
# FILE (written, not synced; removed afterwards, so that its dirty pages
# are dropped rather than written back under the next measurement).
curl_one() {
	local w code size t out=${3:-/dev/null} rc=0
	w=$(curl -s -o "$out" --max-time "$TO_STEP" -w '%{http_code} %{size_download} %{time_total}' "$1") || rc=$?
	[ "$out" = /dev/null ] || rm -f "$out"
	if [ "$rc" -ne 0 ]; then
		echo "failed: curl exit $rc"
		return
	fi
	read -r code size t <<<"$w"
	if [ "$code" != 200 ] || [ "$size" != "$2" ]; then
		echo "failed: status $code, $size of $2 bytes"
		return
	fi
	awk -v b="$size" -v t="$t" 'BEGIN { printf "ok bytes=%d secs=%.6f mbps=%.2f\n", b, t, b / t / 1e6 }'
}

# curl_ranges URL SIZE N: N parallel range requests in one curl (--parallel),
# wall time from start to the last byte.
curl_ranges() {
	local url=$1 size=$2 n=$3 cfg=$W/curl-par.cfg i a b part t0 t1 out
	part=$(((size + n - 1) / n))
	{
		echo "parallel"
		echo "parallel-max = $n"
		# otherwise curl waits for the first connection to learn whether
		# it can multiplex before opening the others
		echo "parallel-immediate"
		for ((i = 0; i < n; i++)); do
			a=$((i * part))
			b=$((a + part - 1))
			[ "$b" -lt "$size" ] || b=$((size - 1))
			echo "url = \"$url\""
			echo "range = $a-$b"
			echo "output = \"/dev/null\""
			printf '%s\n' 'write-out = "%{http_code} %{size_download}\n"'
			[ "$i" -eq $((n - 1)) ] || echo "next"
		done
	} >"$cfg"
	t0=$(date +%s.%N)
	out=$(curl -s --max-time "$TO_STEP" -K "$cfg" 2>/dev/null) || { echo "failed: curl exit $?"; return; }
	t1=$(date +%s.%N)
	printf '%s\n' "$out" | awk -v want="$size" -v t="$(elapsed "$t0" "$t1")" '
		$1 != 206 { bad = bad " status " $1 }
		{ got += $2 }
		END {
			if (bad != "" || got != want) { printf "failed:%s %d of %d bytes\n", bad, got, want; exit }
			printf "ok bytes=%d secs=%.6f mbps=%.2f\n", got, t, got / t / 1e6
		}'
}

# curl_first URL: one range request of the first 4 KiB, a fresh process and
# connection.
curl_first() {
	local w code size t
	w=$(curl -s -o /dev/null --max-time "$TO_STEP" -r 0-4095 -w '%{http_code} %{size_download} %{time_total}' "$1") ||
		{ echo "failed: curl exit $?"; return; }
	read -r code size t <<<"$w"
	if [ "$code" != 206 ] || [ "$size" != 4096 ]; then
		echo "failed: status $code, $size bytes"
		return
	fi
	echo "ok secs=$t"
}

# curl_random URL SIZE N SEED: N 4 KiB range requests at the same kind of
# offsets, one after another over one keep-alive connection; latency
# percentiles of the requests.
curl_random() {
	local url=$1 size=$2 n=$3 seed=$4 cfg=$W/curl-rnd.cfg out
	awk -v n="$n" -v seed="$seed" -v blocks="$((size / 4096))" -v url="$url" 'BEGIN {
		srand(seed)
		for (i = 0; i < n; i++) {
			a = int(rand() * blocks) * 4096
			printf "url = \"%s\"\nrange = %d-%d\noutput = \"/dev/null\"\n", url, a, a + 4095
			printf "write-out = \"%%{http_code} %%{size_download} %%{time_total}\\n\"\n"
			if (i < n - 1) print "next"
		}
	}' >"$cfg"
	out=$(curl -s --max-time "$TO_STEP" -K "$cfg") || { echo "failed: curl exit $?"; return; }
	printf '%s\n' "$out" | sort -k3 -g | awk -v n="$n" '
		$1 != 206 || $2 != 4096 { bad++ }
		{ t[NR] = $3 }
		END {
			if (bad || NR != n) { printf "failed: %d bad responses of %d\n", bad, NR; exit }
			k50 = int(0.5 * n + 0.999999); k95 = int(0.95 * n + 0.999999)
			printf "ok reads=%d p50=%.6f p95=%.6f max=%.6f bytes=%d\n", n, t[k50], t[k95], t[n], n * 4096
		}'
}

# par_run N BYTES OK CMD...: runs N copies of CMD at once, @K@ in its
# arguments replaced by the copy's number (0..N-1), each under the step
# timeout; a copy succeeds when it exits 0 and its last line matches the
# glob OK. Sets STEP to "ok bytes=N*BYTES secs=S mbps=M", S the wall time
# from the first start to the last exit, or to "failed: copy K: ...".
par_run() {
	local n=$1 bytes=$2 okpat=$3 k a t0 t1 rc last bad=
	shift 3
	PAR_PIDS=()
	t0=$(date +%s.%N)
	for ((k = 0; k < n; k++)); do
		local args=()
		for a in "$@"; do args+=("${a//@K@/$k}"); done
		timeout -k 5 "$TO_STEP" "${args[@]}" >"$W/par.$k" 2>&1 &
		PAR_PIDS+=("$!")
	done
	for ((k = 0; k < n; k++)); do
		rc=0
		wait "${PAR_PIDS[k]}" || rc=$?
		last=$(tail -n 1 "$W/par.$k")
		# shellcheck disable=SC2053 # OK is a glob
		if [ -n "$bad" ]; then
			continue
		elif [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
			bad="copy $k: timed out after ${TO_STEP}s"
		elif [ "$rc" -ne 0 ] || [[ $last != $okpat ]]; then
			bad="copy $k: exit $rc: ${last#failed: }"
		fi
	done
	t1=$(date +%s.%N)
	PAR_PIDS=()
	if [ -n "$bad" ]; then
		STEP="failed: $bad"
	else
		STEP=$(awk -v b=$((n * bytes)) -v t="$(elapsed "$t0" "$t1")" \
			'BEGIN { printf "ok bytes=%d secs=%.6f mbps=%.2f", b, t, b / t / 1e6 }')
	fi
}

# dd_mdb DIR: dd of DIR/data.mdb (1 MiB blocks) to /dev/null, after the page
# cache is dropped: "ok bytes=READ secs=S mbps=M file_bytes=F disk_bytes=D",
# MB/s over the bytes dd read, which is the whole file: LMDB's free pages and
# metadata as well as the blob, so it may be more than the blob.
dd_mdb() {
	local f=$1/data.mdb out line
	if [ ! -f "$f" ]; then
		echo "failed: no $f"
		return
	fi
	cold_caches
	out=$(LC_ALL=C timeout -k 5 "$TO_STEP" dd if="$f" of=/dev/null bs=1M 2>&1) ||
		{ echo "failed: dd: $(tail -n 1 <<<"$out")"; return; }
	# "268435456 bytes (268 MB, 256 MiB) copied, 0.254 s, 1.1 GB/s"
	line=$(sed -n 's/^\([0-9][0-9]*\) bytes .* copied, \([0-9.e+-]*\) s, .*/\1 \2/p' <<<"$out")
	if [ -z "$line" ]; then
		echo "failed: dd said: $(tail -n 1 <<<"$out")"
		return
	fi
	awk -v b="${line% *}" -v t="${line#* }" -v fb="$(stat -c %s "$f")" -v db="$(($(stat -c '%b * %B' "$f")))" \
		'BEGIN { if (t <= 0) t = 1e-6; printf "ok bytes=%d secs=%.6f mbps=%.2f file_bytes=%d disk_bytes=%d\n", b, t, b / t / 1e6, fb, db }'
}

# --- workloads --------------------------------------------------------------

# fresh RUN SYS: a new, empty cache directory and mountpoint for one run.
fresh() {
	CACHE=$W/cache/$1-$2-$RANDOM
	MNT=$W/mnt/$1-$2-$RANDOM
	rm -rf "$CACHE"
	mkdir -p "$CACHE" "$MNT"
}

# cold_mount WL SYS RUN URL FILE: mounts SYS afresh (fresh) so that
# MNT/FILE is URL/FILE, then drops the page cache (cold_caches FILE). When
# the mount fails it records "failed: mount: ..." for WL and returns 1.
cold_mount() {
	local wl=$1 sys=$2 r=$3 url=$4 f=$5
	fresh "$r" "$sys"
	if ! fs_mount "$sys" "$url" "$f" "$MNT" "$CACHE"; then
		record "$wl" "$sys" "$r" "failed: mount: $MOUNT_ERR"
		return 1
	fi
	cold_caches "$f"
}

# Cold sequential on loopback nginx, then in the same mount the warm re-read,
# then a remount over the same cache (page cache dropped) read in full.
wl_seq_lo() {
	local sys r line mark mark2 f=seq.bin
	for r in $(seq 1 "$RUNS"); do
		for sys in "${SYSTEMS[@]}"; do
			fresh "$r" "$sys"
			mark=$(log_mark "$NGINX_LOG")
			if ! fs_mount "$sys" "$NGINX_URL" "$f" "$MNT" "$CACHE"; then
				for wl in seq_lo warm remount; do record "$wl" "$sys" "$r" "failed: mount: $MOUNT_ERR"; done
				continue
			fi
			cold_caches "$f"
			mark2=$(log_mark "$NGINX_LOG")
			run_step "$BR" seq "$MNT/$f"
			line=$STEP
			record seq_lo "$sys" "$r" "$line" "$(log_pulled "$NGINX_LOG" "$mark2")"
			mark2=$(log_mark "$NGINX_LOG")
			run_step "$BR" seq "$MNT/$f"
			line=$STEP
			record warm "$sys" "$r" "$line" "$(log_pulled "$NGINX_LOG" "$mark2")"
			fs_umount "$MNT" "$MPID"
			cold_caches "$f"
			mark=$(log_mark "$NGINX_LOG")
			if ! fs_mount "$sys" "$NGINX_URL" "$f" "$MNT" "$CACHE"; then
				record remount "$sys" "$r" "failed: remount: $MOUNT_ERR"
				continue
			fi
			mark2=$(log_mark "$NGINX_LOG")
			run_step "$BR" seq "$MNT/$f"
			line=$STEP
			local during
			during=$(log_pulled "$NGINX_LOG" "$mark2")
			fs_umount "$MNT" "$MPID"
			# pulled: mount to unmount; read_pulled: during the read only.
			record remount "$sys" "$r" "$line" "$(log_pulled "$NGINX_LOG" "$mark") read_${during% *} read_${during#* }"
			if [ "$sys" = pacefs ]; then
				# what the read back is held to: the cache file itself,
				# read by dd from a dropped page cache
				record remount dd "$r" "$(dd_mdb "$CACHE")"
			fi
			say "  seq_lo/warm/remount $sys run $r: $(awk -F'\t' -v s="$sys" -v r="$r" '$2 == s && $3 == r && ($1 == "seq_lo" || $1 == "warm" || $1 == "remount") { split($5, kv, " "); printf "%s %s ", $1, ($4 == "ok" ? kv[3] : $4) }' "$RAW")"
		done
		cold_caches "$f"
		record seq_lo curl1 "$r" "$(curl_one "$NGINX_URL/$f" "$SEQ_LO_SIZE")"
		# curl into a file on the work directory's filesystem, the caches'
		cold_caches "$f"
		record seq_lo curlfile "$r" "$(curl_one "$NGINX_URL/$f" "$SEQ_LO_SIZE" "$W/curl-seq.bin")"
		cold_caches "$f"
		record seq_lo curl8 "$r" "$(curl_ranges "$NGINX_URL/$f" "$SEQ_LO_SIZE" 8)"
		say "  seq_lo curl (/dev/null, file, 8 ranges) run $r: $(tail -n 3 "$RAW" | cut -f5 | cut -d' ' -f3 | tr '\n' ' ')"
		say "  remount dd of data.mdb run $r: $(awk -F'\t' -v r="$r" '$1 == "remount" && $2 == "dd" && $3 == r { print $4, $5 }' "$RAW")"
	done
}

# Cold sequential through the WAN-like origin.
wl_seq_wan() {
	local sys r line mark f=wan.bin
	for r in $(seq 1 "$RUNS"); do
		for sys in "${SYSTEMS[@]}"; do
			cold_mount seq_wan "$sys" "$r" "$WAN_URL" "$f" || continue
			mark=$(log_mark "$WAN_LOG")
			run_step "$BR" seq "$MNT/$f"
			line=$STEP
			fs_umount "$MNT" "$MPID"
			record seq_wan "$sys" "$r" "$line" "$(log_pulled "$WAN_LOG" "$mark")"
			say "  seq_wan $sys run $r: $line"
		done
		cold_caches "$f"
		record seq_wan curl1 "$r" "$(curl_one "$WAN_URL/$f" "$SEQ_WAN_SIZE")"
		record seq_wan curl8 "$r" "$(curl_ranges "$WAN_URL/$f" "$SEQ_WAN_SIZE" 8)"
		say "  seq_wan curl run $r: $(tail -n 2 "$RAW" | cut -f5 | cut -d' ' -f3 | tr '\n' ' ')"
	done
}

# Cold sequential of a larger file through a WAN origin with the same
# latency and rate whose connections have small send buffers and pace small
# writes (lanes crawled on such an asyncio origin where 8 curl ranges
# did not); 8 curl ranges are the limit. Its own origin, stopped
# after.
wl_seq_wan_smallbuf() {
	local sys r line mark url log pid f=smallbuf.bin
	o_start smallbuf --root "$WWW" --quiet --rate "$WAN_RATE" --latency "$WAN_LATENCY" \
		--sndbuf "$SMALLBUF_SNDBUF" --write-chunk "$SMALLBUF_CHUNK" --autoindex || return 0
	url=$O_URL log=$O_LOG pid=$O_PID
	for r in $(seq 1 "$RUNS"); do
		for sys in "${SYSTEMS[@]}"; do
			cold_mount seq_wan_smallbuf "$sys" "$r" "$url" "$f" || continue
			mark=$(log_mark "$log")
			run_step "$BR" seq "$MNT/$f"
			line=$STEP
			fs_umount "$MNT" "$MPID"
			record seq_wan_smallbuf "$sys" "$r" "$line" "$(log_pulled "$log" "$mark")"
			say "  seq_wan_smallbuf $sys run $r: $line"
		done
		cold_caches "$f"
		record seq_wan_smallbuf curl8 "$r" "$(curl_ranges "$url/$f" "$SMALLBUF_SIZE" 8)"
		say "  seq_wan_smallbuf curl8 run $r: $(tail -n 1 "$RAW" | cut -f5 | cut -d' ' -f3)"
	done
	kill -TERM "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
}

# Time to the first 4 KiB of a cold file (open + read), on both origins.
wl_ttfb() {
	local sys r line wl url f
	for r in $(seq 1 "$RUNS"); do
		for wl in ttfb_lo ttfb_wan; do
			if [ "$wl" = ttfb_lo ]; then url=$NGINX_URL f=seq.bin; else url=$WAN_URL f=wan.bin; fi
			for sys in "${SYSTEMS[@]}"; do
				cold_mount "$wl" "$sys" "$r" "$url" "$f" || continue
				run_step "$BR" first "$MNT/$f"
				line=$STEP
				fs_umount "$MNT" "$MPID"
				record "$wl" "$sys" "$r" "$line"
			done
			record "$wl" curl1 "$r" "$(curl_first "$url/$f")"
			say "  $wl run $r: $(tail -n 4 "$RAW" | awk -F'\t' '{ print $2 ":" $5 }' | tr '\n' ' ')"
		done
	done
}

# Random 4 KiB reads: loopback (RANDOM_N_LO reads) and WAN (RANDOM_N_WAN).
wl_random() {
	local sys r line mark wl url log n f=long.bin
	for r in $(seq 1 "$RUNS"); do
		for wl in random_lo random_wan; do
			if [ "$wl" = random_lo ]; then url=$NGINX_URL log=$NGINX_LOG n=$RANDOM_N_LO; else url=$WAN_URL log=$WAN_LOG n=$RANDOM_N_WAN; fi
			for sys in "${SYSTEMS[@]}"; do
				mark=$(log_mark "$log")
				cold_mount "$wl" "$sys" "$r" "$url" "$f" || continue
				run_step "$BR" random "$MNT/$f" "$n" "$r"
				line=$STEP
				fs_umount "$MNT" "$MPID"
				record "$wl" "$sys" "$r" "$line" "$(log_pulled "$log" "$mark")"
				say "  $wl $sys run $r: $line $(log_pulled "$log" "$mark")"
			done
			record "$wl" curl1 "$r" "$(curl_random "$url/$f" "$LONG_SIZE" "$n" "$r")" "pulled=$((n * 4096))"
		done
	done
}

# A new reader at three cold positions (WAN origin): a process that opens
# the 128 MiB file of a fresh mount and reads 1 MiB at 70 %, 20 % and 90 %
# of it, one pread each; the slowest read is the figure.
positions_one() {
	local wl=$1 sys=$2 r=$3 line mark f=long.bin
	mark=$(log_mark "$WAN_LOG")
	cold_mount "$wl" "$sys" "$r" "$WAN_URL" "$f" || return 0
	run_step "$BR" positions "$MNT/$f"
	line=$STEP
	fs_umount "$MNT" "$MPID"
	record "$wl" "$sys" "$r" "$line" "$(log_pulled "$WAN_LOG" "$mark")"
	say "  $wl $sys run $r: $line $(log_pulled "$WAN_LOG" "$mark")"
}
wl_positions() { each_run positions_one positions; }

# player_one WL SYS RUN RATE BYTES: a player consuming BYTES at RATE on the
# WAN origin; bytes pulled are counted from mount to unmount. It consumes at
# most a quarter of the largest file, so that read-ahead beyond what it
# needs shows in the bytes pulled.
player_one() {
	local wl=$1 sys=$2 r=$3 rate=$4 bytes=$5 line mark f=seq.bin
	mark=$(log_mark "$WAN_LOG")
	cold_mount "$wl" "$sys" "$r" "$WAN_URL" "$f" || return 0
	run_step "$BR" player "$MNT/$f" "$rate" "$bytes" "$PLAYER_BS"
	line=$STEP
	fs_umount "$MNT" "$MPID"
	record "$wl" "$sys" "$r" "$line" "$(log_pulled "$WAN_LOG" "$mark")"
	say "  $wl $sys run $r: $line $(log_pulled "$WAN_LOG" "$mark")"
}

# seek_one WL SYS RUN JUMP: a playback at PLAYER_RATE that seeks SEEK_N
# times on the WAN origin, its first read at each new position JUMP bytes.
seek_one() {
	local wl=$1 sys=$2 r=$3 jump=$4 line mark f=long.bin
	mark=$(log_mark "$WAN_LOG")
	cold_mount "$wl" "$sys" "$r" "$WAN_URL" "$f" || return 0
	run_step "$BR" seek "$MNT/$f" "$PLAYER_RATE" "$SEEK_N" "$SEEK_PLAY" "$PLAYER_BS" "$r" "$jump"
	line=$STEP
	fs_umount "$MNT" "$MPID"
	record "$wl" "$sys" "$r" "$line" "$(log_pulled "$WAN_LOG" "$mark")"
	say "  $wl $sys run $r: $line"
}

# The player at PLAYER_RATE, then a playback that seeks (PLAYER_BS reads).
wl_player() {
	local sys r
	for r in $(seq 1 "$RUNS"); do
		for sys in "${SYSTEMS[@]}"; do
			player_one player "$sys" "$r" "$PLAYER_RATE" "$PLAYER_BYTES"
			seek_one seek "$sys" "$r" "$PLAYER_BS"
		done
	done
}

# each_run FN WL ARGS...: FN WL SYS RUN ARGS... for every run and, in each,
# every system.
each_run() {
	local fn=$1 wl=$2 r sys
	shift 2
	for r in $(seq 1 "$RUNS"); do
		for sys in "${SYSTEMS[@]}"; do
			"$fn" "$wl" "$sys" "$r" "$@"
		done
	done
}

# The player at PLAYER2_RATE.
wl_player2() { each_run player_one player2 "$PLAYER2_RATE" "$PLAYER2_BYTES"; }

# Seeks whose first read at each new position is SEEK_JUMP (1 MiB).
wl_seek1m() { each_run seek_one seek1m "$SEEK_JUMP"; }

# Two mirrors (pacefs only): each WAN origin alone, then both.
wl_mirrors() {
	local r line mA mB cfg f=wan.bin
	for r in $(seq 1 "$RUNS"); do
		for cfg in mirror_a mirror_b both; do
			fresh "$r" "pacefs"
			mA=$(log_mark "$WAN_LOG")
			mB=$(log_mark "$WAN2_LOG")
			case $cfg in
			mirror_a) fs_mount pacefs "$WAN_URL" "$f" "$MNT" "$CACHE" ;;
			mirror_b) fs_mount pacefs "$WAN2_URL" "$f" "$MNT" "$CACHE" ;;
			both) fs_mount pacefs "$WAN_URL" "$f" "$MNT" "$CACHE" -o "mirror=$WAN2_URL/$f" ;;
			esac || {
				record mirrors "$cfg" "$r" "failed: mount: $MOUNT_ERR"
				continue
			}
			cold_caches "$f"
			run_step "$BR" seq "$MNT/$f"
			line=$STEP
			fs_umount "$MNT" "$MPID"
			record mirrors "$cfg" "$r" "$line" \
				"a_$(log_pulled "$WAN_LOG" "$mA" | cut -d' ' -f1) b_$(log_pulled "$WAN2_LOG" "$mB" | cut -d' ' -f1)"
			say "  mirrors $cfg run $r: $line"
		done
	done
}

# Many readers over many files at once: MULTI_READERS readers, two per file,
# over MULTI_FILES files on the WAN origin; aggregate rate over the wall time.
wl_multi() {
	local sys r k mark t0 t1 bad pids files m
	files=()
	for ((k = 0; k < MULTI_FILES; k++)); do files+=("multi$k.bin"); done
	for r in $(seq 1 "$RUNS"); do
		for sys in "${SYSTEMS[@]}"; do
			fresh "$r" "$sys"
			mark=$(log_mark "$WAN_LOG")
			local mpids=() paths=() ok=1
			if [ "$sys" = pacefs ]; then
				# one blob per pacefs mount: one mount per file
				for ((k = 0; k < MULTI_FILES; k++)); do
					if fs_mount pacefs "$WAN_URL" "${files[k]}" "$MNT/$k" "$CACHE/$k"; then
						mpids+=("$MNT/$k:$MPID")
						paths+=("$MNT/$k/${files[k]}")
					else
						ok=0
					fi
				done
			elif fs_mount "$sys" "$WAN_URL" "${files[0]}" "$MNT" "$CACHE"; then
				mpids+=("$MNT:$MPID")
				for ((k = 0; k < MULTI_FILES; k++)); do paths+=("$MNT/${files[k]}"); done
			else
				ok=0
			fi
			if [ "$ok" -eq 0 ]; then
				record multi "$sys" "$r" "failed: mount: $MOUNT_ERR"
			else
				cold_caches "${files[@]}"
				pids=()
				t0=$(date +%s.%N)
				for ((k = 0; k < MULTI_READERS; k++)); do
					timeout -k 5 "$TO_STEP" "$BR" seq "${paths[k % MULTI_FILES]}" >"$W/multi.$k" 2>&1 &
					pids+=("$!")
				done
				bad=
				for ((k = 0; k < MULTI_READERS; k++)); do
					if ! wait "${pids[k]}"; then
						bad="reader $k: $(tail -n 1 "$W/multi.$k")"
					fi
				done
				t1=$(date +%s.%N)
			fi
			for m in "${mpids[@]}"; do fs_umount "${m%%:*}" "${m##*:}"; done
			if [ "$ok" -eq 1 ]; then
				if [ -n "$bad" ]; then
					record multi "$sys" "$r" "failed: $bad"
				else
					record multi "$sys" "$r" "$(awk -v b=$((MULTI_READERS * MULTI_SIZE)) -v t="$(elapsed "$t0" "$t1")" \
						'BEGIN { printf "ok bytes=%d secs=%.6f mbps=%.2f", b, t, b / t / 1e6 }')" \
						"$(log_pulled "$WAN_LOG" "$mark")"
				fi
				say "  multi $sys run $r: $(tail -n 1 "$RAW" | cut -f4-)"
			fi
		done
	done
}

# Many readers on loopback nginx, one mount: for each N of MULTI_LO_N, N
# readers at once, each on its own MULTI_SIZE file, through one fresh mount
# of each system (pacefs mounts nginx's directory index, as rclone and
# httpdirfs mount its listing); the limit is N curl processes at once, each
# into its own file on the work directory's filesystem. Aggregate MB/s =
# N x MULTI_SIZE / the wall time from the first start to the last exit.
wl_multi_lo() {
	local sys r n k mark wl files
	for r in $(seq 1 "$RUNS"); do
		for n in $MULTI_LO_N; do
			wl=multi_lo_$n
			files=()
			for ((k = 0; k < n; k++)); do files+=("multi$k.bin"); done
			for sys in "${SYSTEMS[@]}"; do
				fresh "$r" "$sys"
				mark=$(log_mark "$NGINX_LOG")
				if ! FS_TREE=1 fs_mount "$sys" "$NGINX_URL" "${files[0]}" "$MNT" "$CACHE"; then
					record "$wl" "$sys" "$r" "failed: mount: $MOUNT_ERR"
					continue
				fi
				cold_caches "${files[@]}"
				par_run "$n" "$MULTI_SIZE" 'ok *' "$BR" seq "$MNT/multi@K@.bin"
				fs_umount "$MNT" "$MPID"
				record "$wl" "$sys" "$r" "$STEP" "$(log_pulled "$NGINX_LOG" "$mark")"
				say "  $wl $sys run $r: $(tail -n 1 "$RAW" | cut -f4-)"
			done
			mkdir -p "$W/curl-multi"
			cold_caches "${files[@]}"
			par_run "$n" "$MULTI_SIZE" "200 $MULTI_SIZE" \
				curl -s --max-time "$TO_STEP" -o "$W/curl-multi/@K@.bin" -w '%{http_code} %{size_download}\n' \
				"$NGINX_URL/multi@K@.bin"
			# dropped unwritten rather than written back under the next step
			rm -rf "$W/curl-multi"
			record "$wl" curlfile "$r" "$STEP"
			say "  $wl curl into files run $r: $(tail -n 1 "$RAW" | cut -f4-)"
		done
	done
}

# proc_kib PID FIELD: a /proc/PID/status figure (VmHWM, VmRSS, ...) in KiB,
# or "-" when the process is gone.
proc_kib() { awk -v k="$2:" '$1 == k { print $2; found = 1 } END { if (!found) print "-" }' "/proc/$1/status" 2>/dev/null || echo -; }

# Memory: one cold sequential read of the MEM_SIZE file from loopback nginx;
# the daemon's peak resident set (VmHWM: anonymous memory and mapped cache
# pages alike) and its RSS at the end of the read, before the unmount.
wl_memory() {
	local sys r line hwm rss f=mem.bin
	for r in $(seq 1 "$RUNS"); do
		for sys in "${SYSTEMS[@]}"; do
			cold_mount memory "$sys" "$r" "$NGINX_URL" "$f" || continue
			run_step "$BR" seq "$MNT/$f"
			line=$STEP
			hwm=$(proc_kib "$MPID" VmHWM)
			rss=$(proc_kib "$MPID" VmRSS)
			fs_umount "$MNT" "$MPID"
			# MEM_SIZE of cache per run: give the disk back at once.
			rm -rf "$CACHE"
			record memory "$sys" "$r" "$line" "hwm_kib=$hwm rss_kib=$rss"
			say "  memory $sys run $r: $line hwm_kib=$hwm rss_kib=$rss"
		done
	done
}

# --- the dataset loader and mountpoint-s3's fio jobs ------------------------

# origin_of wan|lo DIR: sets OURL to the URL whose listing is the folder
# DIR of WWW, OLOG to its origin's request log and OPORT to its port. On
# loopback it is nginx's URL/DIR/. The WAN-like origin of a folder is a
# pacefs-origin of its own with the same caps, rooted at the folder
# (started at the first call): httpdirfs asks for a folder's listing
# without the trailing slash (URL/DIR), which nginx redirects and
# pacefs-origin answers with a 404. Returns 1 when that origin does not
# start.
declare -A DIR_WAN=() # folder -> "URL LOG" of its WAN-like origin
origin_of() {
	local url=$WAN_URL log=$WAN_LOG
	case $1 in
	wan)
		if [ -z "${DIR_WAN[$2]:-}" ]; then
			wan_start "wan_$2" "$WWW/$2" || return 1
			DIR_WAN[$2]="$WAN_URL $WAN_LOG"
			# WAN_URL and WAN_LOG stay the main WAN origin's
			WAN_URL=$url WAN_LOG=$log
		fi
		read -r OURL OLOG <<<"${DIR_WAN[$2]}"
		OPORT=${OURL##*:}
		;;
	lo)
		OURL=$NGINX_URL/$2 OLOG=$NGINX_LOG
		OPORT=${NGINX_URL##*:}
		;;
	*)
		echo "bench: unknown origin $1 (wan or lo)" >&2
		return 1
		;;
	esac
}

# conn_watch PORT: samples, every 0.1 s until conn_unwatch, the established
# TCP connections to 127.0.0.1:PORT into $W/conns, a line per sample: how
# many, how many of them were busy, and their local addresses. Busy: a
# request sent after the last byte received (waiting for its answer), or a
# byte received in the last 0.1 s (ss's lastsnd and lastrcv); an HTTP
# client keeps idle connections open, which carry nothing. One mount or one
# curl limit reads an origin at a time, so they are its connections;
# counted with ss rather than from a system's own figures so that every
# system is counted the same way.
conn_watch() {
	: >"$W/conns"
	while :; do
		ss -Htni state established "( dport = :$1 )" | awk '
			/^[ \t]/ {
				r = match($0, /lastrcv:[0-9]+/) ? substr($0, RSTART + 8, RLENGTH - 8) + 0 : 1e9
				s = match($0, /lastsnd:[0-9]+/) ? substr($0, RSTART + 8, RLENGTH - 8) + 0 : 1e9
				if (s < r || r < 100) busy++
				next
			}
			{ n++; addrs = addrs " " $3 }
			END { print n + 0, busy + 0 addrs }'
		sleep 0.1
	done >>"$W/conns" 2>/dev/null &
	CONN_PID=$!
}

# conn_unwatch: stops the sampler and sets CONNS to "conns=OPEN
# conns_active=BUSY conns_seen=SEEN": the most connections open in one
# sample; the busy ones of the samples with any, their 90th percentile
# (a connection that just ended and the one that replaced it are both busy
# in a sample: the peak would count churn); and the connections seen in
# any sample (one that lived less than a sample's 0.1 s may be missed).
conn_unwatch() {
	kill -TERM "$CONN_PID" 2>/dev/null || true
	wait "$CONN_PID" 2>/dev/null || true
	CONN_PID=
	CONNS="$(awk '{ if ($1 > p) p = $1; for (i = 3; i <= NF; i++) seen[$i] = 1 }
		END { n = 0; for (k in seen) n++; printf "conns=%d conns_seen=%d", p, n }' "$W/conns")"
	CONNS="$CONNS $(awk '$2 > 0 { print $2 }' "$W/conns" | sort -n |
		awk '{ b[NR] = $1 } END { printf "conns_active=%d", (NR ? b[int(0.9 * NR + 0.999999)] : 0) }')"
}

# tree_step WL SYS RUN ORIGIN DIR COLD CMD...: one cold run of CMD through a
# fresh mount of SYS on the directory index of the folder DIR of ORIGIN
# (origin_of), every system mounting the same listing. COLD names the file
# listing DIR's files that cold_caches reads (the first must show in the
# mount); $W/tree.list is made to hold DIR's files ($W/sets/DIR.names) as
# paths in the mount, and @MNT@ in CMD's arguments becomes the mountpoint.
# Records CMD's line with the requests and bytes the origin logged from
# mount to unmount, the daemon's peak RSS (VmHWM, read before the unmount)
# and the connections during CMD (conn_watch). The cache is removed after
# the unmount: these workloads leave up to gigabytes in each.
tree_step() {
	local wl=$1 sys=$2 r=$3 o=$4 dir=$5 cold=() a args=() mark hwm
	mapfile -t cold <"$6"
	shift 6
	if ! origin_of "$o" "$dir"; then
		record "$wl" "$sys" "$r" "failed: the origin of $dir did not start"
		return 0
	fi
	fresh "$r" "$sys"
	mark=$(log_mark "$OLOG")
	if ! FS_TREE=1 fs_mount "$sys" "$OURL" "${cold[0]}" "$MNT" "$CACHE"; then
		record "$wl" "$sys" "$r" "failed: mount: $MOUNT_ERR"
		rm -rf "$CACHE"
		return 0
	fi
	cold_caches "${cold[@]/#/$dir/}"
	sed "s|^|$MNT/|" "$W/sets/$dir.names" >"$W/tree.list"
	for a in "$@"; do args+=("${a//@MNT@/$MNT}"); done
	conn_watch "$OPORT"
	run_step "${args[@]}"
	conn_unwatch
	# "-" when the daemon is gone (httpdirfs has crashed): no figure
	hwm=$(proc_kib "$MPID" VmHWM)
	fs_umount "$MNT" "$MPID"
	rm -rf "$CACHE"
	if [ "$hwm" = - ]; then hwm=daemon_gone=1; else hwm=hwm_kib=$hwm; fi
	record "$wl" "$sys" "$r" "$STEP" "$(log_pulled "$OLOG" "$mark") $hwm $CONNS"
	say "  $wl $sys run $r: $(tail -n 1 "$RAW" | cut -f4-)"
}

# loader_gen: the loader's sets of LOADER_SETS, each file generated by
# benchread in WWW/SET, their names in $W/sets/SET.names.
loader_gen() {
	local set n size k name
	mkdir -p "$W/sets"
	for set in $LOADER_SETS; do
		case $set in
		shards) n=$SHARD_N size=$SHARD_SIZE name=shard ;;
		small) n=$SMALL_N size=$SMALL_SIZE name=sample ;;
		*)
			echo "bench: unknown loader set $set (shards or small)" >&2
			return 1
			;;
		esac
		mkdir -p "$WWW/$set"
		for ((k = 0; k < n; k++)); do printf '%s-%05d.bin\n' "$name" "$k"; done >"$W/sets/$set.names"
		sed "s|^|$WWW/$set/|" "$W/sets/$set.names" >"$W/sets/$set.gen"
		"$BR" genlist "$W/sets/$set.gen" "$size" >/dev/null
	done
}

# curl_loader WL SYS RUN ORIGIN SET SIZE N: the loader's limit, N curl
# processes at once over SET's files in the loader's order of this run
# (benchread order), process k taking files k, k+N, k+2N, ... over one
# connection of its own, as a loader's worker would keep one (the files
# are all of one size, so fixed shares end together as the loader's
# dynamic ones do). From the WAN origin into /dev/null; from loopback into
# files on the work directory's filesystem (where the caches are), not
# synced and removed at once, as multi_lo's limit. Every response must be
# a 200 of SIZE bytes. Records files/s and MB/s over the wall time from the
# first start to the last exit, with the origin's requests and bytes and
# the connections (conn_watch).
curl_loader() {
	local wl=$1 sys=$2 r=$3 o=$4 set=$5 size=$6 n=$7 k nf mark secs cold=()
	if ! origin_of "$o" "$set"; then
		record "$wl" "$sys" "$r" "failed: the origin of $set did not start"
		return 0
	fi
	"$BR" order "$W/sets/$set.names" "$r" >"$W/curl-loader.order"
	nf=$(wc -l <"$W/curl-loader.order")
	[ "$n" -le "$nf" ] || n=$nf
	rm -rf "$W/curl-loader"
	mkdir -p "$W/curl-loader"
	for ((k = 0; k < n; k++)); do
		awk -v n="$n" -v k="$k" -v base="$OURL" -v o="$o" -v dir="$W/curl-loader" '
			(NR - 1) % n == k {
				if (c++) print "next"
				printf "url = \"%s/%s\"\n", base, $0
				printf "output = \"%s\"\n", (o == "wan" ? "/dev/null" : dir "/" $0)
				print "write-out = \"%{http_code} %{size_download}\\n\""
			}' "$W/curl-loader.order" >"$W/curl-loader.$k.cfg"
	done
	mapfile -t cold <"$W/sets/$set.names"
	cold_caches "${cold[@]/#/$set/}"
	mark=$(log_mark "$OLOG")
	conn_watch "$OPORT"
	par_run "$n" 0 "200 $size" curl -s --max-time "$TO_STEP" -K "$W/curl-loader.@K@.cfg"
	conn_unwatch
	# dropped unwritten rather than written back under the next step
	rm -rf "$W/curl-loader"
	if [[ $STEP == ok* ]]; then
		secs=$(sed -n 's/.* secs=\([0-9.]*\).*/\1/p' <<<"$STEP")
		# every response, not only each process's last
		STEP=$(for ((k = 0; k < n; k++)); do cat "$W/par.$k"; done | awk -v want="$nf" -v size="$size" -v t="$secs" -v w="$n" '
			$1 == 200 && $2 == size { good++; next }
			{ if (bad == "") bad = $0; nbad++ }
			END {
				if (nbad || good != want) { printf "failed: %d of %d files whole, first bad: %s\n", good, want, bad; exit }
				printf "ok files=%d bytes=%d secs=%.6f files_per_s=%.2f mbps=%.2f workers=%d\n", good, good * size, t, good / t, good * size / t / 1e6, w
			}')
	fi
	record "$wl" "$sys" "$r" "$STEP" "$(log_pulled "$OLOG" "$mark") $CONNS"
	say "  $wl $sys run $r: $(tail -n 1 "$RAW" | cut -f4-)"
}

# The dataset loader: for each origin of LOADER_ORIGINS, set of LOADER_SETS
# and N of LOADER_N (LOADER_SMALL_N for the small files), benchread loader with N worker processes through one
# fresh mount of each system on the set's folder (pacefs mounts its
# directory index, rclone and httpdirfs its listing), then the curl limit
# with N connections and with as many as pacefs had active in the same run.
wl_loader() {
	local r o set n ns size wl sys c
	for r in $(seq 1 "$RUNS"); do
		for o in $LOADER_ORIGINS; do
			for set in $LOADER_SETS; do
				size=$SHARD_SIZE ns=$LOADER_N
				[ "$set" = shards ] || size=$SMALL_SIZE ns=$LOADER_SMALL_N
				for n in $ns; do
					wl=loader_${o}_${set}_$n
					for sys in "${SYSTEMS[@]}"; do
						STEP_TO=$TO_LOADER tree_step "$wl" "$sys" "$r" "$o" "$set" "$W/sets/$set.names" \
							"$BR" loader "$W/tree.list" "$n" "$r"
					done
					curl_loader "$wl" curl "$r" "$o" "$set" "$size" "$n"
					# pacefs's connections grow past N (its lanes are a
					# mount-wide budget): curl with as many as it kept
					# busy at once (conn_unwatch's active ones)
					c=$(awk -F'\t' -v wl="$wl" -v r="$r" '$1 == wl && $2 == "pacefs" && $3 == r && $4 == "ok" {
						n = split($5, kv, " "); for (i = 1; i <= n; i++) if (kv[i] ~ /^conns_active=/) print substr(kv[i], 14) }' "$RAW")
					if [ -n "$c" ] && [ "$c" -gt 0 ]; then
						curl_loader "$wl" curlpeak "$r" "$o" "$set" "$size" "$c"
					else
						record "$wl" curlpeak "$r" "skipped: no pacefs connection count in this run (its run failed)"
					fi
				done
			done
		done
	done
}

# fio_job JOB: the parameters of mountpoint-s3's fio job JOB (their
# mountpoint-s3/scripts/fio/read/JOB.fio, in awslabs/mountpoint-s3; read
# there, not copied): FIO_NAME, its job section's name, by which fio names
# the files it reads NAME.K.0 (K = 0..numjobs-1) in --directory; FIO_BS,
# FIO_RW and FIO_THREADS (numjobs). Every one of theirs also has
# ioengine=sync, fallocate=none, time_based and group_reporting, size=100G
# (here FIO_SIZE) and runtime=30s (here FIO_SECS); fs_bench.sh runs them
# with fio --thread. Returns 1 for a job it does not know.
fio_job() {
	case $1 in
	seq_read) FIO_NAME=sequential_read FIO_BS=256k FIO_RW=read FIO_THREADS=1 ;;
	seq_read_4t) FIO_NAME=sequential_read_four_threads FIO_BS=256k FIO_RW=read FIO_THREADS=4 ;;
	rand_read) FIO_NAME=random_read FIO_BS=256k FIO_RW=randread FIO_THREADS=1 ;;
	rand_read_4t) FIO_NAME=random_read_four_threads FIO_BS=256k FIO_RW=randread FIO_THREADS=4 ;;
	# 256 MiB reads, each 17 MiB past the end of the last
	seq_read_skip_17m) FIO_NAME=seq_read_skip_17m FIO_BS=256m FIO_RW=read:17m FIO_THREADS=1 ;;
	*) return 1 ;;
	esac
}

# FIO_VERIFY bytes carry one of fio's verify headers (crc32c of the block,
# its offset): the file is written by fio with them, and every job reads
# with --verify at that interval, so that every byte a job reads is checked
# and a block served at the wrong offset fails. It divides every job's bs
# and every offset they read at (skip_17m's are multiples of 1 MiB).
FIO_VERIFY=256k

# fio_gen: one FIO_SIZE file written by fio with verify headers, linked
# into WWW/fio under every name the jobs of FIO_JOBS read; $W/sets/fio.names
# lists them, $W/sets/fio.cold one of them (all are the same inode, so
# reading one warms the origin's side for all).
fio_gen() {
	local job k
	mkdir -p "$W/sets" "$WWW/fio"
	# (--verify_state_save=0: no state file in the current directory)
	fio --name=gen --filename="$W/fio.gen" --rw=write --bs="$FIO_VERIFY" --size="$FIO_SIZE" \
		--ioengine=sync --verify=crc32c --do_verify=0 --verify_state_save=0 --output=/dev/null
	: >"$W/sets/fio.names"
	for job in $FIO_JOBS; do
		fio_job "$job" || {
			echo "bench: unknown fio job $job" >&2
			return 1
		}
		for ((k = 0; k < FIO_THREADS; k++)); do
			ln -f "$W/fio.gen" "$WWW/fio/$FIO_NAME.$k.0"
			echo "$FIO_NAME.$k.0" >>"$W/sets/fio.names"
		done
	done
	head -n 1 "$W/sets/fio.names" >"$W/sets/fio.cold"
}

# mountpoint-s3's fio read jobs (FIO_JOBS), each for FIO_SECS on FIO_SIZE
# files through one fresh mount of each system on the directory index of
# WWW/fio on each origin of FIO_ORIGINS, as their fs_bench.sh runs them:
# fio --thread --directory=MNT, the job's parameters (fio_job); plus
# --readonly, and --verify (FIO_VERIFY) for the harness's rule that every
# byte read is checked. A time-based sequential job that reaches the end of
# its file starts over: on loopback it may read its file more than once.
wl_fio() {
	local r o job sys wl
	for r in $(seq 1 "$RUNS"); do
		for o in $FIO_ORIGINS; do
			for job in $FIO_JOBS; do
				fio_job "$job"
				wl=fio_${o}_$job
				if [ "$job" = seq_read_skip_17m ] && [ "$FIO_SIZE" -lt $((256 * MiB)) ]; then
					for sys in "${SYSTEMS[@]}"; do
						record "$wl" "$sys" "$r" "skipped: its 256 MiB reads need a file of 256 MiB or more (BENCH_FIO_SIZE is $FIO_SIZE)"
					done
					continue
				fi
				for sys in "${SYSTEMS[@]}"; do
					tree_step "$wl" "$sys" "$r" "$o" fio "$W/sets/fio.cold" \
						"${CL[@]}" fio --thread --eta=never --readonly --directory=@MNT@ \
						--name="$FIO_NAME" --bs="$FIO_BS" --rw="$FIO_RW" --numjobs="$FIO_THREADS" \
						--ioengine=sync --fallocate=none --size="$FIO_SIZE" \
						--runtime="${FIO_SECS}s" --time_based --group_reporting \
						--verify=crc32c --verify_interval="$FIO_VERIFY" --verify_fatal=1
				done
			done
		done
	done
}

# --- real clients -----------------------------------------------------------

# warm_clients: puts the clients' programs and libraries back in the page
# cache after cold_caches (ffmpeg loads about 200 libraries: from disk that
# would add most of a second to every system's figure, the floor's too).
CLIENT_FILES=()
warm_clients() {
	local b
	if [ "${#CLIENT_FILES[@]}" -eq 0 ]; then
		for b in "$(command -v ffmpeg)" "$(command -v ffprobe)" /usr/bin/python3 \
			$(/usr/bin/python3 -c 'import _sqlite3, _hashlib; print(_sqlite3.__file__, _hashlib.__file__)'); do
			CLIENT_FILES+=("$b")
			mapfile -t -O "${#CLIENT_FILES[@]}" CLIENT_FILES < <(ldd "$b" | awk '$3 ~ /^\// { print $3 }')
		done
	fi
	cat "${CLIENT_FILES[@]}" >/dev/null
	# and Python's modules, by importing them
	"${CL[@]}" >/dev/null 2>&1 || true
}

# client_step WL SYS RUN FILE CMD...: runs CMD with @PATH@ replaced by FILE's
# path through a fresh mount of SYS on the WAN origin (the local copy, in the
# page cache, for SYS=local) and @LOG@ by the WAN origin's log ("-" for
# local); records its line with the bytes pulled from mount to unmount.
client_step() {
	local wl=$1 sys=$2 r=$3 f=$4 mark path log a args=()
	shift 4
	if [ "$sys" = local ]; then
		cold_caches "$f"
		path=$WWW/$f log=-
	else
		mark=$(log_mark "$WAN_LOG")
		cold_mount "$wl" "$sys" "$r" "$WAN_URL" "$f" || return 0
		path=$MNT/$f log=$WAN_LOG
	fi
	warm_clients
	for a in "$@"; do
		a=${a//@PATH@/$path}
		args+=("${a//@LOG@/$log}")
	done
	run_step "${args[@]}"
	if [ "$sys" = local ]; then
		record "$wl" "$sys" "$r" "$STEP"
	else
		fs_umount "$MNT" "$MPID"
		record "$wl" "$sys" "$r" "$STEP" "$(log_pulled "$WAN_LOG" "$mark")"
	fi
	say "  $wl $sys run $r: $(tail -n 1 "$RAW" | cut -f4-)"
}

# client_wl WL FILE CMD...: client_step for every run and every system.
client_wl() {
	local wl=$1 r sys
	shift
	for r in $(seq 1 "$RUNS"); do
		for sys in "${CLIENT_SYSTEMS[@]}"; do
			client_step "$wl" "$sys" "$r" "$@"
		done
	done
}

# ffprobe of the cold MP4 (its moov index is at the end).
wl_ffprobe() { client_wl ffprobe media.mp4 "${CL[@]}" ffprobe @PATH@ "$DATA/refs/probe.ref"; }

# ffmpeg -ss into the middle of the cold MP4, SS_SECS decoded.
wl_ffss() { client_wl ffss media.mp4 "${CL[@]}" ffss @PATH@ "$SS_POS" "$DATA/refs"; }

# ffmpeg -re playback of the first PLAY_SECS, with the PLAY_JUMPS (ffmpeg -ss
# on the same file) during it.
wl_ffplay() {
	# shellcheck disable=SC2086 # one argument per jump
	client_wl ffplay media.mp4 "${CL[@]}" play @PATH@ "$PLAY_SECS" "$DATA/refs" $PLAY_JUMPS
}

# Python's zipfile reading one member from the middle of the stored zip.
wl_zip() { client_wl zip big.zip "${CL[@]}" zip @PATH@ "$WWW/big.zip" "$ZIP_READ"; }

# SQL_N point lookups in the database (seeded by the run number).
wl_sqlite() {
	local r sys
	for r in $(seq 1 "$RUNS"); do
		for sys in "${CLIENT_SYSTEMS[@]}"; do
			client_step sqlite "$sys" "$r" lookup.db \
				"${CL[@]}" sqlite @PATH@ "$WWW/lookup.db" "$SQL_N" "$r" "$DB_ROWS" @LOG@
		done
	done
}

# One transfer at a time (pacefs only, and curl as the limit): the origin
# answers 503 with Retry-After beyond its first transfer; the whole file must
# come, correct, on loopback.
wl_transfer1() {
	local r line mark n503
	o_start transfer1 --root "$WWW" --quiet --max-transfers 1 --retry-after "$T1_RETRY_AFTER" || {
		for r in $(seq 1 "$RUNS"); do record transfer1 pacefs "$r" "failed: the one-transfer origin did not start"; done
		return
	}
	for r in $(seq 1 "$RUNS"); do
		mark=$(log_mark "$O_LOG")
		cold_mount transfer1 pacefs "$r" "$O_URL" "$T1_FILE" || continue
		STEP_TO=$TO_SHORT run_step "$BR" seq "$MNT/$T1_FILE"
		line=$STEP
		fs_umount "$MNT" "$MPID"
		n503=$(tail -c +$((mark + 1)) "$O_LOG" | awk '$4 == 503 { n++ } END { print n + 0 }')
		record transfer1 pacefs "$r" "$line" "$(log_pulled "$O_LOG" "$mark") n503=$n503"
		say "  transfer1 pacefs run $r: $line n503=$n503"
		record transfer1 curl1 "$r" "$(curl_one "$O_URL/$T1_FILE" "$MULTI_SIZE")"
	done
}

# read_timeout (pacefs only): an origin that sends one byte of every
# response and then nothing; the application's read must fail with EIO
# soon after READ_TIMEOUT.
wl_stall() {
	local r line root=$W/www-stall
	mkdir -p "$root"
	"$BR" gen "$root/stall.bin" "$STALL_SIZE" >/dev/null
	o_start stall --root "$root" --quiet --fault '/stall.bin:stall:1' || {
		for r in $(seq 1 "$RUNS"); do record stall pacefs "$r" "failed: the stalling origin did not start"; done
		return
	}
	for r in $(seq 1 "$RUNS"); do
		fresh "$r" pacefs
		if ! fs_mount pacefs "$O_URL" stall.bin "$MNT" "$CACHE" -o "read_timeout=$READ_TIMEOUT"; then
			record stall pacefs "$r" "failed: mount: $MOUNT_ERR"
			continue
		fi
		STEP_TO=$TO_SHORT run_step "${CL[@]}" eio "$MNT/stall.bin" "$STALL_SIZE"
		line=$STEP
		fs_umount "$MNT" "$MPID"
		record stall pacefs "$r" "$line"
		say "  stall pacefs run $r: $line"
	done
}

# gen_client_data: the MP4, the zip, the database and the reference outputs
# (ffprobe's report and frame checksums from the local copy) in DATA, made
# when missing or made with other settings or another clients.py; then
# linked into WWW.
gen_client_data() {
	local stamp rstamp f
	stamp="media $MEDIA_SECS $MEDIA_KBPS zip $ZIP_MEMBERS $ZIP_MEMBER_BYTES db $DB_ROWS $DB_PAYLOAD $(ffmpeg -version | awk 'NR == 1')"
	rstamp="$stamp play $PLAY_SECS ss $SS_POS $PLAY_JUMPS $(md5sum <"$W/bin/clients.py")"
	mkdir -p "$DATA/refs"
	if [ "$(cat "$DATA/stamp" 2>/dev/null)" != "$stamp" ]; then
		rm -f "$DATA/stamp" "$DATA/refs/stamp"
		say "generating the real clients' files in $DATA"
		"${CL[@]}" gen-media "$DATA/media.mp4" "$MEDIA_SECS" "$MEDIA_KBPS"
		"${CL[@]}" gen-zip "$DATA/big.zip" "$ZIP_MEMBERS" "$ZIP_MEMBER_BYTES"
		"${CL[@]}" gen-db "$DATA/lookup.db" "$DB_ROWS" "$DB_PAYLOAD"
		echo "$stamp" >"$DATA/stamp"
	fi
	if [ "$(cat "$DATA/refs/stamp" 2>/dev/null)" != "$rstamp" ]; then
		# shellcheck disable=SC2046,SC2086 # one argument per position
		"${CL[@]}" media-refs "$DATA/media.mp4" "$PLAY_SECS" "$DATA/refs" "$SS_POS" \
			$(printf '%s\n' $PLAY_JUMPS | cut -d: -f2)
		echo "$rstamp" >"$DATA/refs/stamp"
	fi
	for f in media.mp4 big.zip lookup.db; do
		ln -f "$DATA/$f" "$WWW/$f" 2>/dev/null || cp "$DATA/$f" "$WWW/$f"
	done
}

# Many mounts behind a shared cache tier (nginx proxy_cache + slice) in
# front of the WAN origin, chunk = slice = TIER_CHUNK. Per run, with a new
# tier: a first mount, then a second (fresh cache) reads the whole file;
# the same file straight from loopback nginx with the same options (the
# reference for the second mount's speed); with another new tier, two
# mounts together; a two-proxy group one of whose proxies is killed a
# quarter into the read; and random 4 KiB reads straight from the WAN
# origin with the default chunk and with TIER_CHUNK.
wl_tier() {
	local r line mark mark2 f=seq.bin copts="chunk=$((TIER_CHUNK / 1024))K" pid sent c d
	for r in $(seq 1 "$RUNS"); do
		tier_start tier
		for wl in tier_first tier_second; do
			fresh "$r" "$wl"
			mark=$(log_mark "$WAN_LOG")
			if ! fs_mount pacefs "$WAN_URL" "$f" "$MNT" "$CACHE" -o "$copts,proxy=$TIER_URL"; then
				record "$wl" pacefs "$r" "failed: mount: $MOUNT_ERR"
				continue
			fi
			cold_caches "$f"
			# The tier is the origin side, which the harness keeps warm:
			# its cache files, as a busy tier holds them in memory.
			find "$W/tier/cache" -type f -exec cat {} + >/dev/null
			run_step "$BR" seq "$MNT/$f"
			line=$STEP
			fs_umount "$MNT" "$MPID"
			record "$wl" pacefs "$r" "$line" "$(log_pulled "$WAN_LOG" "$mark")"
			say "  $wl run $r: $line $(log_pulled "$WAN_LOG" "$mark")"
		done
		tier_stop "$TIER_PID"
		fresh "$r" tier_direct
		if fs_mount pacefs "$NGINX_URL" "$f" "$MNT" "$CACHE" -o "$copts"; then
			cold_caches "$f"
			run_step "$BR" seq "$MNT/$f"
			fs_umount "$MNT" "$MPID"
			record tier_direct pacefs "$r" "$STEP"
		else
			record tier_direct pacefs "$r" "failed: mount: $MOUNT_ERR"
		fi
		say "  tier_direct run $r: $STEP"

		# Two mounts together through an empty tier.
		tier_start tier
		fresh "$r" tier_c
		c=$MNT
		mark=$(log_mark "$WAN_LOG")
		if fs_mount pacefs "$WAN_URL" "$f" "$c" "$CACHE" -o "$copts,proxy=$TIER_URL"; then
			pid=$MPID
			fresh "$r" tier_d
			d=$MNT
			if fs_mount pacefs "$WAN_URL" "$f" "$d" "$CACHE" -o "$copts,proxy=$TIER_URL"; then
				cold_caches "$f"
				run_step bash -c '"$1" seq "$2" >"$4.c" & a=$!; "$1" seq "$3" >"$4.d" & b=$!;
					rc=0; wait $a || rc=1; wait $b || rc=1
					[ $rc = 0 ] || { echo "failed: $(cat "$4.c" "$4.d" | grep -v ^ok | head -n 1)"; exit 1; }
					awk "{ for (i = 2; i <= NF; i++) { split(\$i, p, \"=\"); if (p[1] == \"secs\" && p[2] > s) s = p[2] } }
					     END { printf \"ok secs=%.6f\n\", s }" "$4.c" "$4.d"' _ "$BR" "$c/$f" "$d/$f" "$W/together"
				line=$STEP
				fs_umount "$d" "$MPID"
			else
				line="failed: mount: $MOUNT_ERR"
			fi
			fs_umount "$c" "$pid"
		else
			line="failed: mount: $MOUNT_ERR"
		fi
		record tier_together pacefs "$r" "$line" "$(log_pulled "$WAN_LOG" "$mark")"
		say "  tier_together run $r: $line $(log_pulled "$WAN_LOG" "$mark")"
		tier_stop "$TIER_PID"

		# A two-proxy group, one of them killed mid-read: the reader's
		# longest wait (benchread player at an unreachable rate: every
		# read as soon as the last one returned).
		tier_start tier_q1
		local q1=$TIER_URL q1pid=$TIER_PID
		tier_start tier_q2
		local q2=$TIER_URL q2pid=$TIER_PID
		fresh "$r" tier_kill
		mark=$(log_mark "$WAN_LOG")
		if fs_mount pacefs "$WAN_URL" "$f" "$MNT" "$CACHE" -o "$copts,stall_timeout=$TIER_STALL,proxy=$q1|$q2"; then
			cold_caches "$f"
			mark2=$(log_mark "$WAN_LOG")
			"$BR" player "$MNT/$f" 100000000000 "$SEQ_LO_SIZE" "$MiB" >"$W/kill.out" 2>&1 &
			pid=$!
			for _ in $(seq 1 1200); do
				sent=$(tail -c +$((mark2 + 1)) "$WAN_LOG" | awk '{ s += $5 } END { print s + 0 }')
				[ "$sent" -ge $((SEQ_LO_SIZE / 4)) ] && break
				kill -0 "$pid" 2>/dev/null || break
				sleep 0.05
			done
			tier_stop "$q1pid" kill
			if timeout 240 tail --pid="$pid" -f /dev/null; then
				wait "$pid" 2>/dev/null || true
				line=$(tail -n 1 "$W/kill.out")
			else
				line="failed: timed out"
			fi
			fs_umount "$MNT" "$MPID"
			record tier_kill pacefs "$r" "$line" "killed_at=$sent $(log_pulled "$WAN_LOG" "$mark")"
		else
			record tier_kill pacefs "$r" "failed: mount: $MOUNT_ERR"
		fi
		say "  tier_kill run $r: $(tail -n 1 "$RAW" | cut -f5)"
		tier_stop "$q2pid"

		# Random 4 KiB reads straight from the WAN origin: the default
		# chunk (one cache block) and TIER_CHUNK.
		for c in default "$copts"; do
			local wl=tier_rand_64k
			[ "$c" = default ] || wl=tier_rand_$((TIER_CHUNK / 1024))k
			fresh "$r" "$wl"
			mark=$(log_mark "$WAN_LOG")
			if [ "$c" = default ]; then
				fs_mount pacefs "$WAN_URL" long.bin "$MNT" "$CACHE" || { record "$wl" pacefs "$r" "failed: mount: $MOUNT_ERR"; continue; }
			else
				fs_mount pacefs "$WAN_URL" long.bin "$MNT" "$CACHE" -o "$c" || { record "$wl" pacefs "$r" "failed: mount: $MOUNT_ERR"; continue; }
			fi
			cold_caches long.bin
			run_step "$BR" random "$MNT/long.bin" "$RANDOM_N_WAN" "$r"
			line=$STEP
			fs_umount "$MNT" "$MPID"
			record "$wl" pacefs "$r" "$line" "$(log_pulled "$WAN_LOG" "$mark")"
			say "  $wl run $r: $line $(log_pulled "$WAN_LOG" "$mark")"
		done
	done
}

# The cost of SigV4, pacefs only: the same bytes from the same
# server read unsigned (an http:// URL) and signed (s3://BUCKET/KEY with
# -o endpoint=), so that only the signing differs. From loopback nginx,
# which ignores the signature: the client's cost alone; from
# pacefs-origin --s3, which checks every signature (botocore's
# computation, remembered for a second per object; unsigned through
# --s3-anonymous): the origin's too. Cold sequential (nginx, SEQ_LO_SIZE):
# one mount after the other, the first alternating from run to run.
# Random (S3SIG_N reads of 4 KiB): both mounts at once, each offset read
# from both in turn (benchread random2), so that both see the same
# moments of a shared machine's load.
S3SIG_ID=AKIDBENCH
S3SIG_SECRET=benchsecretbenchsecret

# s3sig_mount RUN MODE BASE FILE: a fresh pacefs mount of FILE in BASE's
# bucket, unsigned or signed; sets MNT and MPID, or returns 1 with
# MOUNT_ERR.
s3sig_mount() {
	fresh "$1" "s3sig_$2"
	if [ "$2" = signed ]; then
		AWS_ACCESS_KEY_ID=$S3SIG_ID AWS_SECRET_ACCESS_KEY=$S3SIG_SECRET \
			fs_mount pacefs "s3://$S3SIG_BUCKET" "$4" "$MNT" "$CACHE" -o "endpoint=$3,region=us-east-1"
	else
		fs_mount pacefs "$3/$S3SIG_BUCKET" "$4" "$MNT" "$CACHE"
	fi
}

wl_s3sig() {
	local r mode srv base f line s3url='' um up sm sp modes
	mkdir -p "$WWW/$S3SIG_BUCKET"
	for f in seq.bin long.bin; do
		ln -f "$WWW/$f" "$WWW/$S3SIG_BUCKET/$f" 2>/dev/null || cp "$WWW/$f" "$WWW/$S3SIG_BUCKET/$f"
	done
	printf '%s %s\n' "$S3SIG_ID" "$S3SIG_SECRET" >"$W/s3sig.keys"
	if o_start s3sig --root "$WWW" --quiet --s3 --s3-keys "$W/s3sig.keys" --s3-anonymous; then
		s3url=$O_URL
	fi
	for r in $(seq 1 "$RUNS"); do
		modes="unsigned signed"
		[ $((r % 2)) = 1 ] || modes="signed unsigned"
		for mode in $modes; do
			if ! s3sig_mount "$r" "$mode" "$NGINX_URL" seq.bin; then
				record s3sig_seq "nginx_$mode" "$r" "failed: mount: $MOUNT_ERR"
				continue
			fi
			cold_caches seq.bin
			run_step "$BR" seq "$MNT/seq.bin"
			line=$STEP
			fs_umount "$MNT" "$MPID"
			record s3sig_seq "nginx_$mode" "$r" "$line"
		done
		say "  s3sig nginx seq run $r: $(tail -n 2 "$RAW" | awk -F'\t' '{ printf "%s %s  ", $2, $5 }')"
		for srv in nginx origin; do
			if [ "$srv" = nginx ]; then base=$NGINX_URL; else base=$s3url; fi
			if [ -z "$base" ]; then
				line="failed: pacefs-origin --s3 did not start"
			elif ! s3sig_mount "$r" unsigned "$base" long.bin; then
				line="failed: mount: $MOUNT_ERR"
			else
				um=$MNT up=$MPID
				if ! s3sig_mount "$r" signed "$base" long.bin; then
					line="failed: mount: $MOUNT_ERR"
				else
					sm=$MNT sp=$MPID
					cold_caches long.bin
					run_step "$BR" random2 "$um/long.bin" "$sm/long.bin" "$S3SIG_N" "$r"
					line=$STEP
					fs_umount "$sm" "$sp"
				fi
				fs_umount "$um" "$up"
			fi
			# One line of random2 makes a row per side.
			if [[ $line == ok* ]]; then
				record s3sig_random "${srv}_unsigned" "$r" "$(awk '{ for (i = 1; i <= NF; i++) if ($i !~ /^b_/) { sub(/^a_/, "", $i); printf "%s%s", (i > 1 ? " " : ""), $i } }' <<<"$line")"
				record s3sig_random "${srv}_signed" "$r" "$(awk '{ for (i = 1; i <= NF; i++) if ($i !~ /^a_/) { sub(/^b_/, "", $i); printf "%s%s", (i > 1 ? " " : ""), $i } }' <<<"$line")"
			else
				record s3sig_random "${srv}_unsigned" "$r" "$line"
				record s3sig_random "${srv}_signed" "$r" "$line"
			fi
			say "  s3sig $srv random run $r: $line"
		done
	done
}

# --- main -------------------------------------------------------------------

say "work directory $W, $RUNS runs per figure"
say "generating files"
"$BR" gen "$WWW/seq.bin" "$SEQ_LO_SIZE" >/dev/null
"$BR" gen "$WWW/wan.bin" "$SEQ_WAN_SIZE" >/dev/null
if wanted seq_wan_smallbuf; then "$BR" gen "$WWW/smallbuf.bin" "$SMALLBUF_SIZE" >/dev/null; fi
"$BR" gen "$WWW/long.bin" "$LONG_SIZE" >/dev/null
n=$MULTI_FILES
if wanted multi_lo && [ "$MULTI_LO_FILES" -gt "$n" ]; then n=$MULTI_LO_FILES; fi
for ((k = 0; k < n; k++)); do "$BR" gen "$WWW/multi$k.bin" "$MULTI_SIZE" >/dev/null; done
if wanted memory; then "$BR" gen "$WWW/mem.bin" "$MEM_SIZE" >/dev/null; fi
if wanted loader; then loader_gen; fi
if wanted fio; then fio_gen; fi
DATA=${BENCH_DATA:-$W/data}
if wanted ffprobe || wanted ffss || wanted ffplay || wanted zip || wanted sqlite; then
	gen_client_data
fi
: >"$W/rclone.conf"

nginx_bench
wan_start wan
wan_start wan2
WAN2_URL=$WAN_URL WAN2_LOG=$WAN_LOG
wan_start wan
say "nginx $NGINX_URL; WAN origins $WAN_URL and $WAN2_URL (${WAN_LATENCY} ms, $WAN_RATE B/s per connection)"

for wl in "${WORKLOADS[@]}"; do
	if wanted "$wl"; then
		say "workload $wl"
		"wl_$wl"
	fi
done
T_END=$(date +%s)
LOAD_END=$(cut -d' ' -f1-3 /proc/loadavg)
say "measurements done in $((T_END - T_START)) s; writing the report"

export BENCH_RAW=$RAW BENCH_OUT=$OUT BENCH_DROP_OK=$DROP_OK \
	BENCH_SECS=$((T_END - T_START)) BENCH_RUNS=$RUNS \
	BENCH_DATE BENCH_MACHINE BENCH_VERSIONS BENCH_COMMIT \
	BENCH_LOAD="$LOAD_START at the start, $LOAD_END at the end"
SETTINGS=(SEQ_LO_SIZE SEQ_WAN_SIZE SMALLBUF_SIZE SMALLBUF_SNDBUF SMALLBUF_CHUNK LONG_SIZE MULTI_SIZE MULTI_FILES MULTI_READERS MULTI_LO_N MULTI_LO_FILES
	WAN_RATE WAN_LATENCY RANDOM_N_LO RANDOM_N_WAN PLAYER_RATE PLAYER_BYTES
	PLAYER_BS SEEK_N SEEK_PLAY MEM_SIZE SEEK_JUMP PLAYER2_RATE PLAYER2_BYTES
	PLAYER_LEAD LANES MEDIA_SECS MEDIA_KBPS PLAY_SECS PLAY_JUMPS SS_POS ZIP_MEMBERS
	ZIP_MEMBER_BYTES DB_ROWS DB_PAYLOAD SQL_N T1_RETRY_AFTER READ_TIMEOUT
	TIER_CHUNK TIER_STALL S3SIG_N S3SIG_BUCKET LOADER_N LOADER_SMALL_N LOADER_ORIGINS LOADER_SETS SHARD_N SHARD_SIZE
	SMALL_N SMALL_SIZE FIO_JOBS FIO_ORIGINS FIO_SIZE FIO_SECS HOST_LANES)
export "${SETTINGS[@]}"
mkdir -p "$OUT/logs"
cp "$RAW" "$OUT/raw.tsv"
# The mounts' own logs and the settings, so that report.sh can be run again
# on this run alone.
cp "$W/logs/pacefs.log" "$W/logs/rclone.log" "$W/logs/httpdirfs.log" "$OUT/logs/" 2>/dev/null || true
{
	for v in BENCH_DATE BENCH_MACHINE BENCH_VERSIONS BENCH_COMMIT BENCH_DROP_OK BENCH_SECS BENCH_RUNS BENCH_LOAD \
		"${SETTINGS[@]}"; do
		printf 'export %s=%q\n' "$v" "${!v}"
	done
} >"$OUT/settings.sh"
"$HERE/report.sh"
say "report: $OUT/README.md"

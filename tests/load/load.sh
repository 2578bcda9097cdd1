#!/usr/bin/env bash
# load.sh: 64 concurrent readers (sequential full reads and random preads,
# looping) over 16 files of a manifest mount for 60 s from a cold cache,
# every byte compared, with the daemon's RSS and open descriptors sampled
# every second: no reader error, RSS bounded, no descriptor leak.
# Not part of make check (it takes over a minute); CI runs it.
# Usage: tests/load/load.sh [BUILD_DIR]   (PACEFS=... also works)
set -euo pipefail
if [ $# -ge 1 ]; then
	PACEFS=$(cd "$1" && pwd)/pacefs
	export PACEFS
	unset READCMP
fi
# shellcheck source=tests/lib.sh
source "$(dirname "$0")/../lib.sh"
t_require_mount

NFILES=${LOAD_FILES:-16}
FILE_MIB=${LOAD_FILE_MIB:-16}
READERS=${LOAD_READERS:-64}
DURATION=${LOAD_SECONDS:-60}
RSS_LIMIT_MIB=${LOAD_RSS_LIMIT_MIB:-512}
# Descriptors the daemon may hold at the end beyond those it held before.
# Three kinds are pools, bounded rather than equal: libfuse's worker
# threads (pacefs runs them with clone_fd, one /dev/fuse descriptor each,
# at most 64, and idle ones stay), the pipe each worker splices its replies
# through (two descriptors, libfuse's, kept while the thread lives), and
# libcurl's kept-alive connections (at most one per lane, 8 by default).
# Everything else (files) must come back to its count before the load: a
# leak there grows with every open.
FD_SLACK=${LOAD_FD_SLACK:-2}
LOAD_LANES=8
FUSE_MAX_THREADS=64

WWW=$T_TMP/www
mkdir -p "$WWW"
# Sizes off the block boundaries, so every file has a partial last block.
for i in $(seq 1 "$NFILES"); do
	gen_file "$WWW/f$i.bin" $((FILE_MIB * 1048576 + i * 4099)) $((500 + i))
done
origin_start "$WWW"
{
	printf '{"version": 1, "files": [\n'
	for i in $(seq 1 "$NFILES"); do
		sep=,
		[ "$i" -eq "$NFILES" ] && sep=
		printf '{"path": "d%d/f%d.bin", "urls": ["%s/f%d.bin"], "size": %d}%s\n' \
			$((i % 4)) "$i" "$ORIGIN_URL" "$i" "$(stat -c %s "$WWW/f$i.bin")" "$sep"
	done
	printf ']}\n'
} >"$T_TMP/load.json"

MNT=$T_TMP/mnt
mkdir -p "$MNT"
LOG=$T_TMP/pacefs.log
if ! fg_mount "$LOG" -o "cache_dir=$T_TMP/cache" "$T_TMP/load.json" "$MNT"; then
	t_fail "mount" "$(tail -n 5 "$LOG")"
	t_done
fi
DAEMON=$FG_PID
t_pass "manifest mount of $NFILES files of ${FILE_MIB} MiB (pid $DAEMON)"

rss_kib() { awk '/^VmRSS:/ { print $2 }' "/proc/$DAEMON/status" 2>/dev/null || echo 0; }
fd_count() { find "/proc/$DAEMON/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l; }
# fd_count_to PATTERN: the daemon's descriptors whose target matches.
fd_count_to() { find "/proc/$DAEMON/fd" -mindepth 1 -maxdepth 1 -lname "$1" 2>/dev/null | wc -l; }
sock_count() { fd_count_to 'socket:*'; }
fuse_count() { fd_count_to /dev/fuse; }
pipe_count() { fd_count_to 'pipe:*'; }
fd_list() { find "/proc/$DAEMON/fd" -mindepth 1 -maxdepth 1 -printf "%l\n" 2>/dev/null | sed 's/\[[0-9]*\]$//' | sort | uniq -c | sort -rn | head -n 8; }

# Every file listed and stat'ed once, so the baseline holds whatever the
# daemon opens for the tree itself.
find "$MNT" -type f -exec stat -c %s {} + >/dev/null
fds_before=$(fd_count)
socks_before=$(sock_count)
fuse_before=$(fuse_count)
pipes_before=$(pipe_count)
other_before=$((fds_before - socks_before - fuse_before - pipes_before))
rss_before=$(rss_kib)

# The sampler: one line per second, "seconds rss_kib anon_kib fds", the
# seconds since it started. It forks nothing (bash's read and globs): with
# every core busy reading, a process per sample stretches its loop.
SAMPLES=$T_TMP/samples
(
	SECONDS=0
	shopt -s nullglob
	while kill -0 "$DAEMON" 2>/dev/null; do
		rss=0 anon=0
		while read -r key val _; do
			case $key in
			VmRSS:) rss=$val ;;
			RssAnon:) anon=$val ;;
			esac
		done <"/proc/$DAEMON/status" || true
		fds=("/proc/$DAEMON/fd/"*)
		echo "$SECONDS $rss $anon ${#fds[@]}"
		sleep 1
	done
) >"$SAMPLES" 2>/dev/null &
SAMPLER=$!

# reader R: loops until the deadline on file R mod NFILES; even readers read
# it whole with a buffer size that changes each round, odd ones do 64
# random preads with a fresh seed each round. One line per round in its log;
# stops at the first mismatch or error. Each round drops the file's page
# cache first, so that the reads reach pacefs rather than the kernel's copy.
export READCMP_DONTNEED=1
deadline=$(($(date +%s) + DURATION))
reader() {
	local r=$1 i f src round=0 bufs=(131072 4096 1048576 65536 12289)
	i=$((r % NFILES + 1))
	f=$MNT/d$((i % 4))/f$i.bin
	src=$WWW/f$i.bin
	while [ "$(date +%s)" -lt "$deadline" ]; do
		if [ $((r % 2)) -eq 0 ]; then
			"$READCMP" seq "$f" "$src" "${bufs[$((round % 5))]}" || return 1
		else
			"$READCMP" random "$f" "$src" 64 $((r * 1000000 + round)) || return 1
		fi
		round=$((round + 1))
	done
}
start=$(date +%s.%N)
pids=()
for r in $(seq 0 $((READERS - 1))); do
	reader "$r" >"$T_TMP/reader$r.log" 2>&1 &
	pids+=($!)
done
bad=0
for r in $(seq 0 $((READERS - 1))); do
	if ! wait "${pids[$r]}"; then
		bad=$((bad + 1))
		echo "reader $r failed: $(tail -n 2 "$T_TMP/reader$r.log" | tr '\n' ' ')"
	fi
done
secs=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }')

# What the readers did, from their logs.
read -r seq_reads seq_bytes rnd_reads rnd_bytes < <(cat "$T_TMP"/reader*.log | awk '
	/^readcmp: seq: [0-9]+ bytes equal/ { sr++; sb += $3 }
	/^readcmp: random: [0-9]+ preads equal, [0-9]+ bytes/ { rr += $3; rb += $6 }
	END { printf "%d %.0f %d %.0f\n", sr, sb, rr, rb }')
total_bytes=$(awk -v a="$seq_bytes" -v b="$rnd_bytes" 'BEGIN { printf "%.0f", a + b }')
mib() { awk -v b="$1" 'BEGIN { printf "%.0f", b / 1048576 }'; }
echo "load: $READERS readers for ${secs}s: $seq_reads full sequential reads ($(mib "$seq_bytes") MiB)," \
	"$rnd_reads random preads ($(mib "$rnd_bytes") MiB), $(mib "$total_bytes") MiB verified"
t_eq "$READERS readers for ${DURATION}s: no reader error, every byte equal" 0 "$bad"
if [ "$seq_reads" -ge "$NFILES" ] && [ "$rnd_reads" -gt 0 ]; then
	t_pass "readers made progress: $seq_reads whole files, $rnd_reads preads"
else
	t_fail "readers made progress" "$seq_reads whole files, $rnd_reads preads"
fi

if kill -0 "$DAEMON" 2>/dev/null && is_pacefs_mounted "$MNT"; then
	t_pass "daemon alive and mounted after the load"
else
	t_fail "daemon alive and mounted after the load" "$(tail -n 5 "$LOG")"
fi

# Handles are released asynchronously (FUSE release): let them settle.
other_now() { echo $(($(fd_count) - $(sock_count) - $(fuse_count) - $(pipe_count))); }
for _ in $(seq 1 20); do
	[ "$(other_now)" -le $((other_before + FD_SLACK)) ] && break
	sleep 0.25
done
# Read-ahead that was under way when the readers stopped still holds its
# connections (a lane's request and the range queued behind it on a
# second one): the sockets are counted once no lane is busy.
for _ in $(seq 1 40); do
	"$PACEFS" status --json "$MNT" 2>/dev/null |
		python3 -c 'import json, sys; sys.exit(len(json.load(sys.stdin)["lanes"]) > 0)' && break
	sleep 0.25
done
fds_after=$(fd_count)
socks_after=$(sock_count)
fuse_after=$(fuse_count)
pipes_after=$(pipe_count)
other_after=$((fds_after - socks_after - fuse_after - pipes_after))
threads_after=$(awk '/^Threads:/ { print $2 }' "/proc/$DAEMON/status" 2>/dev/null || echo 0)
kill "$SAMPLER" 2>/dev/null || true
wait "$SAMPLER" 2>/dev/null || true
read -r max_rss max_anon max_fds nsamples < <(awk '
	$2 > r { r = $2 } $3 > a { a = $3 } $4 > f { f = $4 }
	END { printf "%d %d %d %d\n", r, a, f, NR }' "$SAMPLES")
echo "load: RSS before $((rss_before / 1024)) MiB, max $((max_rss / 1024)) MiB" \
	"(anonymous max $((max_anon / 1024)) MiB) over $nsamples samples"
echo "load: fds before $fds_before ($other_before files, $pipes_before pipe ends, $socks_before sockets," \
	"$fuse_before /dev/fuse), max $max_fds, after $fds_after ($other_after files, $pipes_after pipe ends," \
	"$socks_after sockets, $fuse_after /dev/fuse for $threads_after threads)"

if [ "$nsamples" -ge $((DURATION * 2 / 3)) ] && [ "$max_rss" -gt 0 ]; then
	t_pass "RSS sampled every second ($nsamples samples)"
else
	t_fail "RSS sampled every second" "$nsamples samples"
fi
if [ "$max_rss" -le $((RSS_LIMIT_MIB * 1024)) ]; then
	t_pass "RSS bounded: max $((max_rss / 1024)) MiB <= $RSS_LIMIT_MIB MiB"
else
	t_fail "RSS bounded" "max $((max_rss / 1024)) MiB > $RSS_LIMIT_MIB MiB"
fi
if [ "$other_after" -le $((other_before + FD_SLACK)) ]; then
	t_pass "no descriptor leak: $other_after files open after, $other_before before"
else
	t_fail "no descriptor leak" "$other_after files open after, $other_before before; now: $(fd_list | tr '\n' ' ')"
fi
if [ "$pipes_after" -le $((pipes_before + 2 * fuse_after)) ]; then
	t_pass "pipes bounded by the worker pool: $pipes_after ends for $fuse_after workers, $pipes_before before (one splice pipe a worker)"
else
	t_fail "pipes bounded by the worker pool" "$pipes_after ends for $fuse_after workers, $pipes_before before; now: $(fd_list | tr '\n' ' ')"
fi
# A lane has two slots, its open request's and the one sent ahead of it,
# each keeping its connection alive; fetch caps an origin's connections
# at that (CURLMOPT_MAX_HOST_CONNECTIONS, 2 a lane).
if [ "$socks_after" -le $((socks_before + 2 * LOAD_LANES + FD_SLACK)) ]; then
	t_pass "sockets bounded: $socks_after after, $socks_before before (at most two kept-alive connections per lane)"
else
	t_fail "sockets bounded" "$socks_after after, $socks_before before, more than two per lane ($LOAD_LANES) kept"
fi
if [ "$fuse_after" -le $((FUSE_MAX_THREADS + 1)) ] && [ "$fuse_after" -le "$threads_after" ]; then
	t_pass "/dev/fuse descriptors bounded by the worker pool: $fuse_after for $threads_after threads (at most $FUSE_MAX_THREADS workers)"
else
	t_fail "/dev/fuse descriptors bounded by the worker pool" "$fuse_after for $threads_after threads"
fi

# A clean unmount: the daemon exits 0.
rc=0
umount_pacefs "$MNT" || true
for _ in $(seq 1 100); do
	kill -0 "$DAEMON" 2>/dev/null || break
	sleep 0.1
done
wait "$DAEMON" || rc=$?
t_eq "daemon exits 0 after the unmount" 0 "$rc"
warns=$(grep -ciE 'error|warn' "$LOG" || true)
echo "load: $warns warning or error lines in the daemon's log"
if [ "$T_FAILED" -gt 0 ]; then
	echo "load: the daemon's log ends:"
	tail -n 20 "$LOG" | sed 's/^/    /'
fi
t_done

#!/usr/bin/env bash
# metrics.sh: what the metrics endpoint costs against its targets, printed
# side by side: (1) the daemon's CPU per scrape of a mount with 64 open
# files (target 2 ms), from /proc/PID/stat across batches of scrapes on one
# keep-alive connection, less the same mount idle for as long; (2) cold
# sequential reads from loopback nginx with the endpoint off, and on and
# scraped every second (target: within 2 %), alternating runs, medians of
# throughput and of the daemon's CPU time (less noisy than wall time on a
# shared machine). Root and /dev/fuse (it mounts).
#
# Usage: contrib/bench/metrics.sh PACEFS_BINARY
# Environment: METRICS_RUNS (5 of each), METRICS_SIZE (bytes of the
# sequential file, 512 MiB), METRICS_SCRAPES (500 a batch), METRICS_BATCHES
# (5), METRICS_BASELINE (another pacefs binary, e.g. one built before the
# counters existed: a third column, what counting itself costs).
set -euo pipefail

if [ $# -ne 1 ]; then
	echo "usage: contrib/bench/metrics.sh PACEFS_BINARY" >&2
	exit 2
fi
PACEFS=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
export PACEFS T_NAME=bench-metrics T_NO_COUNTS=1
# shellcheck source=tests/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../tests/lib.sh"
RUNS=${METRICS_RUNS:-5}
SIZE=${METRICS_SIZE:-$((512 * 1024 * 1024))}
SCRAPES=${METRICS_SCRAPES:-500}
BATCHES=${METRICS_BATCHES:-5}
NFILES=64

# cpu_ticks PID [TID]: user + system clock ticks of a process (or one of
# its threads) so far.
cpu_ticks() {
	local f=/proc/$1/stat
	[ -n "${2:-}" ] && f=/proc/$1/task/$2/stat
	awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "$f"
}
TICK=$(getconf CLK_TCK)

median() {
	sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

echo "metrics.sh: $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg) at the start"

# ---- (1) a scrape of a mount with 64 open files ----
WWW=$T_TMP/www
mkdir -p "$WWW/many" "$T_TMP/m1"
origin_start "$WWW"
{
	printf '{"version": 1, "files": ['
	for i in $(seq 0 $((NFILES - 1))); do
		head -c 1048576 /dev/zero >"$WWW/many/f$i.bin"
		printf '%s{"path": "f%d.bin", "urls": ["%s/many/f%d.bin"]}' \
			"$([ "$i" -gt 0 ] && echo ,)" "$i" "$ORIGIN_URL" "$i"
	done
	printf ']}\n'
} >"$T_TMP/many.json"
MPORT=$(free_port)
fg_mount "$T_TMP/m1.log" -o "cache_dir=$T_TMP/c1,metrics=127.0.0.1:$MPORT" \
	"$T_TMP/many.json" "$T_TMP/m1"
DAEMON=$FG_PID
# Every file open (a reader each) with its first 4 KiB read, held open.
python3 - "$T_TMP/m1" "$NFILES" "$T_TMP/held" <<'EOF' &
import os, sys, time
fds = [os.open("%s/f%d.bin" % (sys.argv[1], i), os.O_RDONLY) for i in range(int(sys.argv[2]))]
for fd in fds:
    os.read(fd, 4096)
open(sys.argv[3], "w").close()
time.sleep(3600)
EOF
HOLDER=$!
t_track_pid "$HOLDER"
for _ in $(seq 1 200); do [ -e "$T_TMP/held" ] && break; sleep 0.1; done
readers=$(curl -s "http://127.0.0.1:$MPORT/metrics" | awk '/^pacefs_readers\{/ { print $NF }')
bytes=$(curl -s "http://127.0.0.1:$MPORT/metrics" | wc -c)
# The server's thread: the one that is not the mount's at rest.
scrape_batch() {
	python3 - "$MPORT" "$SCRAPES" <<'EOF'
import http.client, sys
c = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]))
for _ in range(int(sys.argv[2])):
    c.request("GET", "/metrics")
    r = c.getresponse()
    r.read()
    assert r.status == 200
EOF
}
per_scrape=()
for b in $(seq 1 "$BATCHES"); do
	t0=$(cpu_ticks "$DAEMON")
	w0=$(date +%s.%N)
	scrape_batch
	w1=$(date +%s.%N)
	t1=$(cpu_ticks "$DAEMON")
	# The same time idle: what the mount spends without scrapes.
	sleep "$(awk -v a="$w0" -v b="$w1" 'BEGIN { print b - a }')"
	t2=$(cpu_ticks "$DAEMON")
	ms=$(awk -v s="$((t1 - t0))" -v i="$((t2 - t1))" -v n="$SCRAPES" -v hz="$TICK" \
		'BEGIN { printf "%.3f", (s - i) * 1000 / hz / n }')
	per_scrape+=("$ms")
	echo "  batch $b: $SCRAPES scrapes in $(awk -v a="$w0" -v b="$w1" 'BEGIN { printf "%.2f", b - a }') s," \
		"daemon CPU $(((t1 - t0) * 1000 / TICK)) ms, idle as long $(((t2 - t1) * 1000 / TICK)) ms: $ms ms a scrape"
done
scrape_ms=$(printf '%s\n' "${per_scrape[@]}" | median)
kill "$HOLDER" 2>/dev/null || true
umount_pacefs "$T_TMP/m1"

# ---- (2) cold sequential, endpoint off and on (scraped every second) ----
gen_file "$WWW/seq.bin" "$SIZE" 3
BASELINE=${METRICS_BASELINE:-}
run_seq() { # MODE N: one cold read; prints "MB/s CPU-seconds"
	local mode=$1 n=$2 mnt=$T_TMP/s$2 opts port scraper='' t0 t1 c
	local PACEFS=$PACEFS
	mkdir -p "$mnt"
	opts="cache_dir=$T_TMP/cs$n"
	if [ "$mode" = on ]; then
		port=$(free_port)
		opts="$opts,metrics=127.0.0.1:$port"
	elif [ "$mode" = base ]; then
		PACEFS=$BASELINE
	fi
	fg_mount "$T_TMP/s$n.log" -o "$opts" "$ORIGIN_URL/seq.bin" "$mnt" >&2
	if [ "$mode" = on ]; then
		(while sleep 1; do curl -s -o /dev/null "http://127.0.0.1:$port/metrics"; done) &
		scraper=$!
	fi
	t0=$(date +%s.%N)
	dd if="$mnt/seq.bin" of=/dev/null bs=1M status=none
	t1=$(date +%s.%N)
	c=$(cpu_ticks "$FG_PID")
	[ -n "$scraper" ] && { kill "$scraper"; wait "$scraper" 2>/dev/null || true; }
	umount_pacefs "$mnt" >&2
	rm -rf "$T_TMP/cs$n"
	awk -v s="$SIZE" -v a="$t0" -v b="$t1" -v c="$c" -v hz="$TICK" \
		'BEGIN { printf "%.1f %.2f\n", s / (b - a) / 1e6, c / hz }'
}
echo "  cold sequential $((SIZE / 1048576)) MiB from loopback nginx, $RUNS runs of each, alternating:"
printf '  %-6s %10s %10s %10s %10s %10s %10s\n' run "off MB/s" "off CPU s" "on MB/s" \
	"on CPU s" "base MB/s" "base CPU s"
offs=() ons=() offc=() onc=() bases=() basec=()
for i in $(seq 1 "$RUNS"); do
	read -r a b < <(run_seq off "$((3 * i))")
	read -r c d < <(run_seq on "$((3 * i + 1))")
	e=- f=-
	if [ -n "$BASELINE" ]; then
		read -r e f < <(run_seq base "$((3 * i + 2))")
		bases+=("$e") basec+=("$f")
	fi
	offs+=("$a") offc+=("$b") ons+=("$c") onc+=("$d")
	printf '  %-6s %10s %10s %10s %10s %10s %10s\n' "$i" "$a" "$b" "$c" "$d" "$e" "$f"
done
m_off=$(printf '%s\n' "${offs[@]}" | median)
m_on=$(printf '%s\n' "${ons[@]}" | median)
c_off=$(printf '%s\n' "${offc[@]}" | median)
c_on=$(printf '%s\n' "${onc[@]}" | median)
m_base=- c_base=-
if [ -n "$BASELINE" ]; then
	m_base=$(printf '%s\n' "${bases[@]}" | median)
	c_base=$(printf '%s\n' "${basec[@]}" | median)
fi
printf '  %-6s %10s %10s %10s %10s %10s %10s\n' median "$m_off" "$c_off" "$m_on" "$c_on" \
	"$m_base" "$c_base"

echo
echo "| figure | measured | target |"
echo "| --- | ---: | --- |"
echo "| daemon CPU per scrape, $NFILES open files ($readers readers), $bytes-byte exposition, median of $BATCHES batches of $SCRAPES | $scrape_ms ms | <= 2 ms |"
echo "| cold sequential, endpoint on and scraped every second / off, throughput (medians) | $(awk -v a="$m_on" -v b="$m_off" 'BEGIN { printf "%.3f (%s / %s MB/s)", a / b, a, b }') | >= 0.98 |"
echo "| the same, the daemon's CPU time (medians) | $(awk -v a="$c_on" -v b="$c_off" 'BEGIN { printf "%.3f (%s / %s s)", a / b, a, b }') | <= 1.02 |"
if [ -n "$BASELINE" ]; then
	echo "| cold sequential, endpoint off / $BASELINE, throughput and CPU (medians) | $(awk -v a="$m_off" -v b="$m_base" -v c="$c_off" -v d="$c_base" 'BEGIN { printf "%.3f, %.3f", a / b, c / d }') | |"
fi
echo "metrics.sh: load average $(cut -d' ' -f1-3 /proc/loadavg) at the end"

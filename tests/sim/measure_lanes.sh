#!/usr/bin/env bash
# measure_lanes.sh: cold sequential throughput through a pacefs mount for
# several lane counts, against pacefs-origin with and without a
# per-connection rate cap; prints one row per (origin, lanes) with the
# median of RUNS runs. Needs root (drop_caches, FUSE). Not part of make check.
#
# usage: tests/sim/measure_lanes.sh [RUNS [LANES...]]
#   PACEFS, ORIGIN: binaries (default build/pacefs, build/pacefs-origin)
#   RATE (8000000), LATENCY_MS (20), SIZE_MIB (64)
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
PACEFS=${PACEFS:-$ROOT/build/pacefs}
ORIGIN=${ORIGIN:-$ROOT/build/pacefs-origin}
RATE=${RATE:-8000000}
LATENCY_MS=${LATENCY_MS:-20}
SIZE_MIB=${SIZE_MIB:-64}
RUNS=${1:-3}
shift || true
LANES=("$@")
[ ${#LANES[@]} -gt 0 ] || LANES=(1 2 4 8 16)

TMP=$(mktemp -d /tmp/pacefs-lanes.XXXXXX)
ORIGIN_PID=
MNT=$TMP/mnt
cleanup() {
	fusermount3 -u "$MNT" 2>/dev/null || true
	if [ -n "$ORIGIN_PID" ]; then
		kill "$ORIGIN_PID" 2>/dev/null || true
		wait "$ORIGIN_PID" 2>/dev/null || true
	fi
	rm -rf "$TMP"
}
trap cleanup EXIT

mkdir -p "$TMP/www" "$MNT"
head -c $((SIZE_MIB * 1048576)) /dev/urandom >"$TMP/www/blob.bin"

start_origin() {
	rm -f "$TMP/port"
	"$ORIGIN" --root "$TMP/www" --listen 127.0.0.1:0 --port-file "$TMP/port" \
		--quiet "$@" >/dev/null &
	ORIGIN_PID=$!
	for _ in $(seq 1 100); do
		[ -s "$TMP/port" ] && return 0
		sleep 0.05
	done
	echo "origin did not start" >&2
	exit 1
}

stop_origin() {
	kill "$ORIGIN_PID"
	wait "$ORIGIN_PID" 2>/dev/null || true
	ORIGIN_PID=
}

# one_run LANES: prints MB/s (decimal) of a cold dd through a fresh mount.
one_run() {
	local cache=$TMP/cache t0 t1
	rm -rf "$cache"
	mkdir -p "$cache"
	"$PACEFS" -o "cache_dir=$cache,lanes=$1" \
		"http://127.0.0.1:$(cat "$TMP/port")/blob.bin" "$MNT"
	for _ in $(seq 1 100); do
		grep -q " $MNT fuse.pacefs " /proc/mounts && break
		sleep 0.05
	done
	sync
	echo 3 >/proc/sys/vm/drop_caches
	t0=$(date +%s.%N)
	dd if="$MNT/blob.bin" of=/dev/null bs=1M status=none
	t1=$(date +%s.%N)
	fusermount3 -u "$MNT"
	for _ in $(seq 1 100); do
		grep -q " $MNT " /proc/mounts || break
		sleep 0.05
	done
	awk -v s="$SIZE_MIB" -v a="$t0" -v b="$t1" \
		'BEGIN { printf "%.1f\n", s * 1048576 / (b - a) / 1e6 }'
}

median() {
	sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'
}

measure() {
	local label=$1 n runs r
	for n in "${LANES[@]}"; do
		runs=()
		for _ in $(seq 1 "$RUNS"); do
			r=$(one_run "$n")
			runs+=("$r")
		done
		printf '%-28s lanes=%-3s median %8s MB/s  runs %s\n' "$label" "$n" \
			"$(printf '%s\n' "${runs[@]}" | median)" "${runs[*]}"
	done
}

start_origin --rate "$RATE" --latency "$LATENCY_MS"
measure "rate=$RATE latency=${LATENCY_MS}ms"
stop_origin
start_origin
measure "uncapped"
stop_origin

#!/usr/bin/env bash
# run.sh: the `make check` driver: runs every unit test binary, the simulator
# and every mount test, and closes with one "N passed, N failed" line.
# shellcheck disable=SC2317 # trap handlers are called indirectly
set -euo pipefail

if [ $# -ne 1 ]; then
	echo "usage: tests/run.sh BUILD_DIR" >&2
	exit 2
fi

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=$(cd "$1" && pwd)
UNIT_TIMEOUT=${UNIT_TIMEOUT:-300}
MOUNT_TIMEOUT=${MOUNT_TIMEOUT:-600}

export PACEFS=${PACEFS:-$BUILD/pacefs}
export READCMP=${READCMP:-$BUILD/tests/readcmp}
T_TMPROOT=$(mktemp -d "${TMPDIR:-/tmp}/pacefs-check.XXXXXX")
export T_TMPROOT
LOGS=$T_TMPROOT/logs
mkdir -p "$LOGS"
# Sanitizer reports go to files: a daemonized pacefs has no stderr, and its
# reports must still fail the run (make SAN=address,undefined check).
SAN_DIR=$T_TMPROOT/san
mkdir -p "$SAN_DIR"
export ASAN_OPTIONS="log_path=$SAN_DIR/asan${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="print_stacktrace=1:log_path=$SAN_DIR/ubsan${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"

total_passed=0
total_failed=0
total_skipped=0
failures=()
timings=()

# sweep: unmounts whatever a killed test left below T_TMPROOT and stops its
# nginx, so that one test's crash cannot leak into the next or the machine.
sweep() {
	local mnt pidfile pid ns
	while read -r mnt; do
		[ -n "$mnt" ] || continue
		echo "run.sh: unmounting leftover $mnt" >&2
		fusermount3 -u "$mnt" 2>/dev/null || umount -l "$mnt" 2>/dev/null || true
	done < <(awk -v r="$T_TMPROOT/" 'index($5, r) == 1 { print $5 }' /proc/self/mountinfo | sort -r)
	while read -r pidfile; do
		pid=$(cat "$pidfile" 2>/dev/null || true)
		if [ -n "$pid" ] && grep -q nginx "/proc/$pid/cmdline" 2>/dev/null; then
			echo "run.sh: stopping leftover nginx $pid" >&2
			kill -TERM "$pid" 2>/dev/null || true
		fi
	done < <(find "$T_TMPROOT" -name nginx.pid 2>/dev/null)
	# Network namespaces of a test killed before its cleanup ran
	# (tests/netnslib.sh names them after the test's pid).
	command -v ip >/dev/null || return 0
	while read -r ns; do
		pid=${ns#pf[hm]}
		pid=${pid%%-*}
		if ! kill -0 "$pid" 2>/dev/null; then
			echo "run.sh: removing leftover network namespace $ns" >&2
			ip netns delete "$ns" 2>/dev/null || true
		fi
	done < <(ip netns list 2>/dev/null | awk '$1 ~ /^pf[hm][0-9]+(-[0-9]+)?$/ { print $1 }')
}

finish() {
	sweep
	if [ -z "$(awk -v r="$T_TMPROOT/" 'index($5, r) == 1' /proc/self/mountinfo)" ]; then
		rm -rf --one-file-system "$T_TMPROOT"
	fi
}
CUR_PID=
TAIL_PID=
on_signal() {
	if [ -n "$CUR_PID" ]; then
		kill -TERM -- "-$CUR_PID" 2>/dev/null || kill -TERM "$CUR_PID" 2>/dev/null || true
		wait "$CUR_PID" 2>/dev/null || true
	fi
	if [ -n "$TAIL_PID" ]; then
		kill "$TAIL_PID" 2>/dev/null || true
	fi
	echo "run.sh: interrupted"
	exit 130
}
trap finish EXIT
trap on_signal INT TERM HUP

# san_reports NAME: shows and counts (in SAN_FOUND) the sanitizer reports
# written while NAME ran; the processes that wrote them may be daemons.
san_reports() {
	local report
	SAN_FOUND=0
	for report in "$SAN_DIR"/*; do
		[ -f "$report" ] || continue
		echo "run.sh: sanitizer report $(basename "$report") during $1:"
		head -n 40 "$report" | sed 's/^/    /'
		failures+=("$1: sanitizer report $(basename "$report"): $(grep -m 1 -E 'ERROR|runtime error' "$report" || head -n 1 "$report")")
		SAN_FOUND=$((SAN_FOUND + 1))
		rm -f "$report"
	done
}

# run_one NAME TIMEOUT CMD...: runs one test binary or script, shows its
# output, and adds its closing line's counts to the totals.
run_one() {
	local name=$1 limit=$2 log rc last p f s start secs
	shift 2
	log=$LOGS/$(echo "$name" | tr '/' '_').log
	echo "== $name"
	start=$(date +%s.%N)
	: >"$log"
	# In the background so that a Ctrl-C reaches this script's trap at
	# once; timeout leads its own process group, which the trap stops.
	timeout -k 10 "$limit" "$@" </dev/null >"$log" 2>&1 &
	CUR_PID=$!
	tail -n +1 -s 0.2 -f --pid="$CUR_PID" "$log" &
	TAIL_PID=$!
	rc=0
	wait "$CUR_PID" || rc=$?
	CUR_PID=
	wait "$TAIL_PID" || true
	TAIL_PID=
	secs=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }')
	timings+=("$(printf '%7ss  %s' "$secs" "$name")")
	sweep
	last=$(grep -v '^[[:space:]]*$' "$log" | tail -n 1 | tr -d '\r' || true)
	if [[ $last =~ ^([A-Za-z_]+:[[:space:]]*)?([0-9]+)\ passed,\ ([0-9]+)\ failed(,\ ([0-9]+)\ skipped)?$ ]]; then
		p=${BASH_REMATCH[2]}
		f=${BASH_REMATCH[3]}
		s=${BASH_REMATCH[5]:-0}
	else
		p=0
		f=0
		s=0
	fi
	total_passed=$((total_passed + p))
	total_skipped=$((total_skipped + s))
	if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
		f=$((f + 1))
		failures+=("$name: timed out after ${limit}s")
	elif [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
		f=1
		failures+=("$name: exited $rc with no failed test counted (crash?)")
	elif [ "$p" -eq 0 ] && [ "$f" -eq 0 ] && [ "$s" -eq 0 ]; then
		f=1
		failures+=("$name: no closing 'N passed, N failed' line")
	fi
	san_reports "$name"
	f=$((f + SAN_FOUND))
	if [ "$f" -gt 0 ]; then
		while read -r line; do
			failures+=("$name: $line")
		done < <(grep -E '^FAIL' "$log" || true)
	fi
	total_failed=$((total_failed + f))
}

shopt -s nullglob
for bin in "$BUILD"/tests/test_* "$BUILD"/tests/sim; do
	if [ -f "$bin" ] && [ -x "$bin" ]; then
		run_one "$(basename "$bin")" "$UNIT_TIMEOUT" "$bin"
	fi
done
for script in "$ROOT"/tests/mount/*.sh; do
	run_one "mount/$(basename "$script")" "$MOUNT_TIMEOUT" bash "$script"
done

# A daemon that exits late may report after its test's turn.
sleep 0.5
san_reports "(after the last test)"
total_failed=$((total_failed + SAN_FOUND))

echo
echo "== timings"
for t in "${timings[@]}"; do
	echo "$t"
done
if [ "${#failures[@]}" -gt 0 ]; then
	echo
	echo "== failures"
	for f in "${failures[@]}"; do
		echo "  $f"
	done
fi
echo
summary="$total_passed passed, $total_failed failed"
if [ "$total_skipped" -gt 0 ]; then
	summary="$summary, $total_skipped skipped"
fi
echo "$summary"
if [ "$total_failed" -gt 0 ] || [ "$total_passed" -eq 0 ]; then
	exit 1
fi
exit 0

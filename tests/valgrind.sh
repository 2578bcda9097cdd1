#!/usr/bin/env bash
# valgrind.sh: runs every unit test binary and the simulator (fewer random
# scenarios) under valgrind memcheck and fails on any error or definite leak.
# Usage: tests/valgrind.sh BUILD_DIR   (a build without sanitizers: make)
set -euo pipefail

if [ $# -ne 1 ]; then
	echo "usage: tests/valgrind.sh BUILD_DIR" >&2
	exit 2
fi
BUILD=$(cd "$1" && pwd)
# Under memcheck the simulator runs about 50 times slower: its fixed
# scenarios and this many randomized ones (1000 in make check) keep it to
# well under a minute.
SIM_RANDOM=${VALGRIND_SIM_RANDOM:-500}
LIMIT=${VALGRIND_TIMEOUT:-600}
# --track-origins makes the cache tests ten times slower: only on request
# (VALGRIND_ORIGINS=1), to find where an uninitialised value came from.
ORIGINS=
if [ -n "${VALGRIND_ORIGINS:-}" ]; then
	ORIGINS=--track-origins=yes
fi

if ! command -v valgrind >/dev/null 2>&1; then
	echo "valgrind.sh: valgrind is missing (contrib/install-deps.sh installs it)" >&2
	echo "0 passed, 1 failed"
	exit 1
fi
if nm "$BUILD/tests/test_pacing" 2>/dev/null | grep -q __asan_init; then
	echo "valgrind.sh: $BUILD is a sanitizer build; valgrind needs a plain one (make)" >&2
	echo "0 passed, 1 failed"
	exit 1
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/pacefs-valgrind.XXXXXX")
passed=0
failed=0
failures=()

# vg NAME BIN ARGS...: one binary under memcheck; PASS when it exits 0 and
# valgrind found nothing (--error-exitcode turns a finding into exit 99).
vg() {
	local name=$1 log rc=0 start secs
	shift
	log=$WORK/$name.log
	echo "== $name"
	start=$(date +%s)
	# Not the children: the cache tests re-execute themselves as victims
	# that are killed with -9 a fixed time after they start, and at
	# memcheck's pace they would be killed before doing anything. The
	# parent runs every test case.
	timeout -k 10 "$LIMIT" valgrind -q --error-exitcode=99 \
		--leak-check=full --errors-for-leak-kinds=definite \
		--show-leak-kinds=definite $ORIGINS \
		--trace-children=no \
		--log-file="$WORK/$name.vg.%p" \
		"$@" </dev/null >"$log" 2>&1 || rc=$?
	secs=$(($(date +%s) - start))
	tail -n 1 "$log" | sed 's/^/   /'
	if [ "$rc" -eq 0 ]; then
		echo "PASS $name (${secs}s)"
		passed=$((passed + 1))
		return 0
	fi
	echo "FAIL $name (exit $rc, ${secs}s); log and valgrind reports kept in $WORK"
	grep -h -m 40 -v '^==[0-9]*== *$' "$WORK/$name".vg.* 2>/dev/null | head -n 60 | sed 's/^/    /' || true
	grep -E '^FAIL' "$log" | head -n 10 | sed 's/^/    /' || true
	failures+=("$name: exit $rc")
	failed=$((failed + 1))
}

# Cases that take minutes at memcheck's pace and whose memory the
# sanitizer build checks in full (test_parse's manifests of 20 MB) look
# at this and step aside.
export T_VALGRIND=1
shopt -s nullglob
for bin in "$BUILD"/tests/test_*; do
	if [ ! -f "$bin" ] || [ ! -x "$bin" ]; then
		continue
	fi
	vg "$(basename "$bin")" "$bin"
done
if [ -x "$BUILD/tests/sim" ]; then
	vg sim "$BUILD/tests/sim" "$SIM_RANDOM"
fi

if [ $((passed + failed)) -eq 0 ]; then
	echo "valgrind.sh: no test binaries in $BUILD/tests (run make check first)" >&2
	failed=1
fi
if [ "$failed" -eq 0 ]; then
	rm -rf "$WORK"
else
	echo
	for f in "${failures[@]}"; do
		echo "  $f"
	done
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]

#!/usr/bin/env bash
# run.sh: runs every libFuzzer target for SECONDS each on a copy of its seed
# corpus and fails if any of them finds a crash, a leak or a timeout.
# Usage: tests/fuzz/run.sh SECONDS [BUILD_DIR]  (after `make fuzz`)
set -euo pipefail

if [ $# -lt 1 ] || [ $# -gt 2 ] || ! [[ $1 =~ ^[0-9]+$ ]]; then
	echo "usage: tests/fuzz/run.sh SECONDS [BUILD_DIR]" >&2
	exit 2
fi
SECONDS_EACH=$1
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BUILD=${2:-$HERE/../../build}
TARGETS=(fuzz_manifest fuzz_dirindex fuzz_http fuzz_name fuzz_headers fuzz_url fuzz_lmdb fuzz_s3xml fuzz_awsconf fuzz_proxy)

for t in "${TARGETS[@]}"; do
	if [ ! -x "$BUILD/fuzz/$t" ]; then
		echo "run.sh: $BUILD/fuzz/$t missing; run make fuzz first" >&2
		exit 2
	fi
done

WORK=$(mktemp -d "${TMPDIR:-/tmp}/pacefs-fuzz.XXXXXX")
failed=0
for t in "${TARGETS[@]}"; do
	corpus=$WORK/$t/corpus
	mkdir -p "$corpus" "$WORK/$t/artifacts"
	# A copy, so that what the run adds stays out of the source tree.
	cp "$HERE/corpus/$t/"* "$corpus/"
	dict=()
	case $t in
	fuzz_manifest) dict=(-dict="$HERE/manifest.dict") ;;
	fuzz_dirindex) dict=(-dict="$HERE/dirindex.dict") ;;
	esac
	log=$WORK/$t/log
	echo "== $t for ${SECONDS_EACH}s"
	rc=0
	"$BUILD/fuzz/$t" -max_total_time="$SECONDS_EACH" -timeout=10 \
		-rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 \
		-artifact_prefix="$WORK/$t/artifacts/" "${dict[@]}" \
		"$corpus" >"$log" 2>&1 || rc=$?
	grep -E '^stat::number_of_executed_units|^#[0-9]+.*DONE' "$log" || true
	if [ "$rc" -ne 0 ] || [ -n "$(ls -A "$WORK/$t/artifacts")" ]; then
		echo "FAIL $t (exit $rc); log and inputs kept in $WORK/$t:"
		grep -m 20 -E 'ERROR|SUMMARY|runtime error|Test unit written' "$log" | sed 's/^/    /' || true
		failed=$((failed + 1))
	else
		echo "PASS $t"
	fi
done

if [ "$failed" -eq 0 ]; then
	rm -rf "$WORK"
fi
echo "${#TARGETS[@]} fuzz targets: $((${#TARGETS[@]} - failed)) passed, $failed failed"
[ "$failed" -eq 0 ]

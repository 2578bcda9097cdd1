#!/usr/bin/env bash
# demo.sh: the first thing a new user runs (`make demo`): serves a 256 MiB
# sample from a local nginx, mounts it with pacefs, reads it with a live
# progress line, checks its SHA-256 and shows what the cache now holds.
set -euo pipefail

if [ $# -ne 1 ]; then
	echo "usage: contrib/demo.sh PACEFS_BINARY" >&2
	exit 2
fi
PACEFS=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
export PACEFS
if [ ! -x "$PACEFS" ]; then
	echo "demo: $PACEFS is not built; run make" >&2
	exit 1
fi

# The mount tests' helpers: a private nginx on a free loopback port, mounts,
# and a trap that unmounts and stops everything even on failure or Ctrl-C.
T_NO_COUNTS=1
# shellcheck source=tests/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../tests/lib.sh"

MiB=1048576
SIZE=$((256 * MiB))
SAMPLE_DIR=${TMPDIR:-/tmp}/pacefs-demo-sample
SAMPLE=$SAMPLE_DIR/sample.img

say() { printf '%s\n' "$*"; }
step() { printf '\n\033[1m%s\033[0m\n' "$*"; }
if [ ! -t 1 ]; then
	step() { printf '\n%s\n' "$*"; }
fi

for need in /usr/sbin/nginx fusermount3 openssl curl; do
	if ! command -v "$need" >/dev/null 2>&1; then
		echo "demo: $need is missing; run contrib/install-deps.sh" >&2
		exit 1
	fi
done
if [ ! -c /dev/fuse ]; then
	echo "demo: /dev/fuse is missing; FUSE is not available here" >&2
	exit 1
fi

step "1. A sample blob of $((SIZE / MiB)) MiB"
mkdir -p "$SAMPLE_DIR"
if [ -f "$SAMPLE.sha256" ] && [ "$(stat -c %s "$SAMPLE" 2>/dev/null || echo 0)" = "$SIZE" ]; then
	say "   reusing $SAMPLE"
else
	say "   generating $SAMPLE (deterministic pseudo-random bytes, kept for next time)"
	rm -f "$SAMPLE.sha256"
	gen_file "$SAMPLE" "$SIZE" 2026
	sha256sum <"$SAMPLE" | cut -d' ' -f1 >"$SAMPLE.sha256"
fi
ORIGIN_SUM=$(cat "$SAMPLE.sha256")

step "2. A local origin: nginx on 127.0.0.1"
origin_start "$SAMPLE_DIR"
URL=$ORIGIN_URL/sample.img
say "   serving $URL"

step "3. Mount it with pacefs"
MNT=$T_TMP/mnt
CACHE=$T_TMP/cache
mkdir -p "$MNT" "$CACHE"
say "   \$ pacefs -o cache_dir=$CACHE $URL $MNT"
if ! mount_pacefs -o "cache_dir=$CACHE" "$URL" "$MNT" 2>/dev/null; then
	echo "demo: mounting failed: ${T_MOUNT_ERR:-no message}" >&2
	exit 1
fi
say "   \$ ls -l $MNT"
# shellcheck disable=SC2012 # a listing for a person to read
ls -l "$MNT" | sed 's/^/   /'

step "4. Read it through the mount (nothing was downloaded before this)"
# One sequential read, as an application would, with dd's live progress
# line; then the SHA-256 of what the mount serves.
start=$(date +%s.%N)
if ! dd if="$MNT/sample.img" of=/dev/null bs=$MiB status=progress 2>&1 |
	tr '\r' '\n' | awk -v tty="$([ -t 1 ] && echo 1)" '
		/copied/ { if (tty) printf "\r   %s", $0; else last = $0 }
		END { if (tty) print ""; else if (last != "") print "   " last }'; then
	echo "demo: reading through the mount failed" >&2
	exit 1
fi
elapsed=$(awk -v s="$start" -v n="$(date +%s.%N)" 'BEGIN { printf "%.2f", n - s }')
say "   read $((SIZE / MiB)) MiB in ${elapsed} s: $(awk -v b="$SIZE" -v e="$elapsed" 'BEGIN { printf "%.0f", b / 1048576 / e }') MiB/s"
MOUNT_SUM=$(sha256sum "$MNT/sample.img" | cut -d' ' -f1)
REQUESTS=$(origin_requests)

step "5. Check the bytes"
say "   origin file : $ORIGIN_SUM"
say "   via pacefs  : $MOUNT_SUM"
if [ "$MOUNT_SUM" = "$ORIGIN_SUM" ]; then
	say "   SHA-256 MATCH"
else
	say "   SHA-256 MISMATCH"
	exit 1
fi

step "6. What the cache holds"
say "   the origin answered $REQUESTS requests"
say "   $(du -sh "$CACHE" | cut -f1) in $CACHE"
if out=$("$PACEFS" cache stat --cache-dir "$CACHE" 2>/dev/null); then
	printf '%s\n' "$out" | sed 's/^/   /'
fi

step "7. Clean up"
umount_pacefs "$MNT"
origin_stop
say "   unmounted $MNT and stopped the origin"
say ""
say "Next: man -l docs/pacefs.1 for the options; make check runs the tests."

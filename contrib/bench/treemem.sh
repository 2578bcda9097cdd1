#!/usr/bin/env bash
# treemem.sh: what a manifest mount costs: generates a manifest of DIRS x
# PER_DIR files (genmanifest.py) whose URLs point at a loopback nginx,
# mounts it with pacefs in the foreground, and prints the time until the
# last file stats and the daemon's memory then (VmRSS, VmHWM: the peak,
# parse included, VmSize), its RSS a few seconds later, and glibc's
# malloc_stats() taken through gdb when TREEMEM_GDB=1.
# Usage: contrib/bench/treemem.sh [PACEFS [DIRS [PER_DIR [RUNS]]]]
# (build/pacefs, 1000, 1000, 1). Needs root, /dev/fuse and nginx; nginx
# holds one real file (train/n00000/img_00000000.JPEG) so that a read is
# checked too.
set -euo pipefail
# shellcheck source=tests/lib.sh
source "$(dirname "$0")/../../tests/lib.sh"
t_require_mount

BIN=${1:-$T_ROOT/build/pacefs}
DIRS=${2:-1000}
PER=${3:-1000}
RUNS=${4:-1}
case $BIN in /*) ;; *) BIN=$PWD/$BIN ;; esac
cp "$BIN" "$T_TMP/pacefs" # build/ may be relinked meanwhile
WWW=$T_TMP/www
mkdir -p "$WWW/train/n00000"
head -c 80000 /dev/urandom >"$WWW/train/n00000/img_00000000.JPEG"
origin_start "$WWW"
python3 "$(dirname "$0")/genmanifest.py" --dirs "$DIRS" --per-dir "$PER" \
	"$ORIGIN_URL/" "$T_TMP/m.json" >/dev/null
LAST=$(printf 'train/n%05d/img_%08d.JPEG' $((DIRS - 1)) $((DIRS * PER - 1)))
echo "manifest: $((DIRS * PER)) files, $(stat -c %s "$T_TMP/m.json") bytes"

status_kb() { awk -v k="$2:" '$1 == k { print $2 }' "/proc/$1/status"; }

for run in $(seq 1 "$RUNS"); do
	MNT=$T_TMP/mnt$run
	mkdir -p "$MNT"
	T_MOUNTS+=("$MNT")
	cat "$T_TMP/m.json" >/dev/null # the manifest's read is not what is timed
	start=$(date +%s%N)
	"$T_TMP/pacefs" -f -o "cache_dir=$T_TMP/cache$run" "$T_TMP/m.json" "$MNT" \
		</dev/null >/dev/null 2>"$T_TMP/log$run" &
	PID=$!
	T_FG_PIDS+=("$PID")
	until stat "$MNT/$LAST" >/dev/null 2>&1; do
		if ! kill -0 "$PID" 2>/dev/null; then
			echo "pacefs exited: $(tail -n 3 "$T_TMP/log$run")" >&2
			exit 1
		fi
		sleep 0.01
	done
	took=$((($(date +%s%N) - start) / 1000000))
	echo "run $run: mount until $LAST stats: $took ms;" \
		"VmRSS $(($(status_kb "$PID" VmRSS) / 1024)) MiB," \
		"VmHWM $(($(status_kb "$PID" VmHWM) / 1024)) MiB," \
		"VmSize $(($(status_kb "$PID" VmSize) / 1024)) MiB"
	cmp "$MNT/train/n00000/img_00000000.JPEG" "$WWW/train/n00000/img_00000000.JPEG"
	python3 - "$MNT" "$DIRS" "$PER" <<'PY' | sed "s/^/run $run: /"
import os, random, sys, time
mnt, dirs, per = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = random.Random(7)
picks = rng.sample(range(dirs * per), min(20000, dirs * per))
lat = []
for n in picks:
    p = "%s/train/n%05d/img_%08d.JPEG" % (mnt, n // per, n)
    t = time.perf_counter_ns()
    os.stat(p)
    lat.append(time.perf_counter_ns() - t)
lat.sort()
print("stat of %d random paths: p50 %.0f us, p99 %.0f us"
      % (len(lat), lat[len(lat) // 2] / 1e3, lat[len(lat) * 99 // 100] / 1e3))
PY
	s0=$(date +%s%N)
	found=$(find "$MNT" | wc -l)
	echo "run $run: find of $found entries: $((($(date +%s%N) - s0) / 1000000)) ms"
	echo "run $run: after them: VmRSS $(($(status_kb "$PID" VmRSS) / 1024)) MiB"
	s0=$(date +%s%N)
	"$T_TMP/pacefs" status "$MNT" | grep '^tree:' | sed "s/^/run $run: /"
	echo "run $run: that status took $((($(date +%s%N) - s0) / 1000000)) ms"
	if [ "${TREEMEM_GDB:-0}" = 1 ]; then
		# malloc_stats() writes to the daemon's stderr, its log.
		gdb -p "$PID" -batch -ex 'call (void)malloc_stats()' >/dev/null 2>&1 || true
		sleep 0.2
		grep -A3 '^Total (incl. mmap)' "$T_TMP/log$run" || true
	fi
	umount_pacefs "$MNT"
	wait "$PID" || true
done
exit 0

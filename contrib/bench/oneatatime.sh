#!/usr/bin/env bash
# oneatatime.sh: a cold `cat` of one file through pacefs, rclone mount
# (--vfs-cache-mode full) and httpdirfs (--cache), one system after the
# other in each run, each on a new mount and cache, from an origin that
# serves one transfer at a time: a request that arrives while a body is
# being sent gets, 5 ms later, 503 with Retry-After: 1 and an empty body
# on a connection kept open; no rate cap, 32 KiB send buffers written in
# large sends. Prints each run and the medians side by side, with the
# 503s each system was answered. Root and /dev/fuse (it mounts).
#
# Usage: contrib/bench/oneatatime.sh PACEFS_BINARY
# Environment: ONE_RUNS (5), ONE_SIZE (bytes, 32 MiB), ONE_ORIGIN
# ("c": pacefs-origin --one-at-a-time 5 --sndbuf 32768 beside the
# binary; "py": contrib/bench/asyncorigin.py --one-at-a-time --latency 5
# --sndbuf 32K, the same behaviour in Python asyncio, whose transport
# sends what it buffered in sends as large as the socket takes),
# ONE_SYSTEMS ("pacefs rclone httpdirfs").
set -euo pipefail

if [ $# -ne 1 ]; then
	echo "usage: contrib/bench/oneatatime.sh PACEFS_BINARY" >&2
	exit 2
fi
PACEFS=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
export PACEFS T_NAME=bench-oneatatime T_NO_COUNTS=1
# shellcheck source=tests/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../tests/lib.sh"
RUNS=${ONE_RUNS:-5}
SIZE=${ONE_SIZE:-$((32 * 1024 * 1024))}
KIND=${ONE_ORIGIN:-c}
SYSTEMS=${ONE_SYSTEMS:-pacefs rclone httpdirfs}
MIB=$((1024 * 1024))

median() {
	sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "-"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# origin: starts the origin on the work folder's www/; sets O_URL, O_LOG.
origin() {
	case $KIND in
	c)
		o_start one --root "$T_TMP/www" --autoindex --one-at-a-time 5 \
			--sndbuf 32768
		;;
	py)
		rm -f "$T_TMP/py.port"
		/usr/bin/python3 "$T_ROOT/contrib/bench/asyncorigin.py" \
			--root "$T_TMP/www" --port-file "$T_TMP/py.port" \
			--log "$T_TMP/py.log" --autoindex --one-at-a-time \
			--latency 5 --sndbuf 32K \
			</dev/null >/dev/null 2>&1 &
		t_track_pid $!
		for _ in $(seq 1 100); do
			[ -s "$T_TMP/py.port" ] && break
			sleep 0.05
		done
		O_URL=http://127.0.0.1:$(cat "$T_TMP/py.port")
		O_LOG=$T_TMP/py.log
		;;
	*)
		echo "ONE_ORIGIN: c or py" >&2
		exit 2
		;;
	esac
}

# one SYS RUN: mounts SYS on a fresh cache, times `cat` of the file into
# the work folder, compares the bytes, unmounts; prints "MS 503S" or
# "failed: WHY".
one() {
	local sys=$1 run=$2 mnt=$T_TMP/m-$1-$2 cache=$T_TMP/c-$1-$2 pid
	local before start ms rc=0
	mkdir -p "$mnt" "$cache"
	T_MOUNTS+=("$mnt")
	case $sys in
	pacefs)
		"$PACEFS" -f -o "cache_dir=$cache" "$O_URL/" "$mnt" \
			</dev/null >/dev/null 2>"$T_TMP/$sys.log" &
		;;
	rclone)
		rclone mount :http: "$mnt" --http-url "$O_URL/" \
			--vfs-cache-mode full --cache-dir "$cache" \
			</dev/null >/dev/null 2>"$T_TMP/$sys.log" &
		;;
	httpdirfs)
		httpdirfs -f --cache --cache-location "$cache" \
			--no-range-check "$O_URL/" "$mnt" \
			</dev/null >/dev/null 2>"$T_TMP/$sys.log" &
		;;
	esac
	pid=$!
	t_track_pid "$pid"
	if ! mount_wait "$mnt" "$pid" 30 any; then
		echo "failed: did not mount"
		return 0
	fi
	for _ in $(seq 1 100); do
		[ -e "$mnt/f.bin" ] && break
		sleep 0.05
	done
	before=$(awk '$4 == 503' "$O_LOG" | wc -l)
	start=$(date +%s%N)
	timeout 120 cat "$mnt/f.bin" >"$T_TMP/out" 2>/dev/null || rc=$?
	ms=$((($(date +%s%N) - start) / 1000000))
	if [ "$rc" -ne 0 ]; then
		echo "failed: cat exited $rc after $ms ms"
	elif ! cmp -s "$T_TMP/out" "$T_TMP/www/f.bin"; then
		echo "failed: bytes differ"
	else
		echo "$ms $(($(awk '$4 == 503' "$O_LOG" | wc -l) - before))"
	fi
	rm -f "$T_TMP/out"
	umount_pacefs "$mnt" >/dev/null 2>&1 || true
	proc_stop "$pid"
	rm -rf "$cache"
}

mkdir -p "$T_TMP/www"
head -c "$SIZE" /dev/urandom >"$T_TMP/www/f.bin"
origin
echo "oneatatime.sh: $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg); $((SIZE / MIB)) MiB, origin $KIND, $RUNS runs"
for run in $(seq 1 "$RUNS"); do
	line="run $run:"
	for sys in $SYSTEMS; do
		r=$(one "$sys" "$run")
		echo "$r" >>"$T_TMP/$sys.runs"
		case $r in
		failed*) line="$line $sys $r;" ;;
		*) line="$line $sys ${r% *} ms (${r#* } 503s);" ;;
		esac
	done
	echo "$line"
done
printf '%-10s %10s %8s %s\n' system "median ms" "503s" "failed"
for sys in $SYSTEMS; do
	printf '%-10s %10s %8s %s\n' "$sys" \
		"$(grep -v failed "$T_TMP/$sys.runs" | awk '{ print $1 }' | median)" \
		"$(grep -v failed "$T_TMP/$sys.runs" | awk '{ print $2 }' | median)" \
		"$(grep -c failed "$T_TMP/$sys.runs" || true)"
done

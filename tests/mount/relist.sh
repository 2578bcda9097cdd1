#!/usr/bin/env bash
# relist.sh: a directory listed again and again holds the daemon's memory
# flat. Its index gives no exact sizes ("39K"), so every listing has the
# files' sizes probed in the background, and the origin answers each probe
# 0.5 s late: a file is queued for its probe once, however many listings
# ask, and one whose probe failed is not probed again for each of them.
set -euo pipefail
# shellcheck source=tests/lib.sh
source "$(dirname "$0")/../lib.sh"
t_require_mount
t_require_origin

PY=/usr/bin/python3
if [ ! -x "$PY" ]; then
	t_skip "$T_NAME" "no $PY"
	t_done
fi
N=20000
LISTINGS=600
GROWTH_PCT=10 # the most the daemon's RSS may grow over LISTINGS listings
# Under AddressSanitizer freed memory waits in a quarantine (256 MiB) before
# it is used again, so the RSS of a daemon that frees what each listing
# took would still grow: no quarantine there, and room for the
# sanitizer's own allocator (its thread caches and shadow grew a 41 MB
# daemon by 5 MB; the queue this bounds grew one by 52 MB).
if ldd "$PACEFS" 2>/dev/null | grep -q libasan; then
	export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=0"
	GROWTH_PCT=30
fi

NBAD=40

WWW=$T_TMP/www
mkdir -p "$WWW/d" "$WWW/bad"
# 40,000 bytes each, sparse: "39K" in the listing, a size to probe.
(cd "$WWW/d" && seq -f 'f%05g.bin' 0 $((N - 1)) | xargs truncate -s 40000)
(cd "$WWW/bad" && seq -f 'f%05g.bin' 0 $((NBAD - 1)) | xargs truncate -s 40000)
o_start relist --root "$WWW" --autoindex=human --latency 500 --fault '/bad/*.bin:status:404'

# rss PID: the resident memory of PID, in KiB.
rss() {
	awk '$1 == "VmRSS:" { print $2 }' "/proc/$1/status"
}

# listings DIR COUNT: COUNT times (opendir, one readdir, closedir), as a
# program that polls a directory does.
listings() {
	"$PY" - "$1" "$2" <<-'EOF'
		import os, sys
		for _ in range(int(sys.argv[2])):
		    with os.scandir(sys.argv[1]) as it:
		        next(it, None)
	EOF
}

# probes: how many probes of bad/ reached the origin.
probes() {
	grep -c "^GET /bad/f" "$O_LOG" || true
}

# mount_dir DIR: a foreground mount of the origin's DIR/ on MNT.
mount_dir() {
	MNT=$T_TMP/mnt-$1
	LOG=$T_TMP/$1.log
	mkdir -p "$MNT"
	fg_mount "$LOG" -o "cache_dir=$T_TMP/cache-$1,listing_ttl=3600" "$O_URL/$1/" "$MNT"
}

# Files whose probes answer late: the memory after LISTINGS listings.
if mount_dir d; then
	listings "$MNT" 1
	one=$(rss "$FG_PID")
	start=$(date +%s%N)
	listings "$MNT" "$LISTINGS"
	took=$((($(date +%s%N) - start) / 1000000))
	many=$(rss "$FG_PID")
	if [ "$many" -le $((one + one * GROWTH_PCT / 100)) ]; then
		t_pass "RSS after 1 listing of $N files $one KiB, after $LISTINGS more $many KiB ($took ms)"
	else
		t_fail "RSS after $LISTINGS listings of $N files within ${GROWTH_PCT}% of after 1" \
			"$one KiB -> $many KiB ($took ms)"
	fi
	umount_pacefs "$MNT"
else
	t_fail "d: mount" "$(tail -n 3 "$LOG")"
fi

# Files whose probes fail (404): each is probed once, not once more for
# every listing that finds it still unsized. A pass over them all takes
# NBAD / 16 probers x 0.5 s; the count is taken once it is done and again
# after as long.
if mount_dir bad; then
	listings "$MNT" "$LISTINGS"
	for _ in $(seq 1 200); do
		[ "$(probes)" -ge "$NBAD" ] && break
		sleep 0.05
	done
	sleep 2
	listings "$MNT" 1
	sleep 2
	t_eq "failed probes: $NBAD files, after $((LISTINGS + 1)) listings, probes" "$(probes)" "$NBAD"
	umount_pacefs "$MNT"
else
	t_fail "bad: mount" "$(tail -n 3 "$LOG")"
fi
t_done

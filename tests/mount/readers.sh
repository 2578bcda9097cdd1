#!/usr/bin/env bash
# readers.sh: many files read at once through one directory-index mount of
# a far origin (20 ms before every response, 8 MB/s per connection), as a
# dataset loader's workers read them: eight worker processes take shards
# from one shuffled list and read each whole (benchread loader, every byte
# compared). A waiting read must take its reader's window in one request,
# so a shard costs a few requests, not one per read; lanes are handed
# over rather than cut, so no byte is pulled twice; an arriving block
# wakes the reads waiting on it, not every waiting read of the mount.
# Then 200 small files the same way: their opens run in parallel, and
# each costs one request (its probe brings the whole file). Last, ls -l of
# the same files through an index whose sizes are not exact ("32K"): their
# probes run in parallel once the directory is listed.
set -euo pipefail
# shellcheck source=tests/lib.sh
source "$(dirname "$0")/../lib.sh"
t_require_mount
t_require_origin

BR=${BENCHREAD:-$(dirname "$PACEFS")/bench/benchread}
if [ ! -x "$BR" ]; then
	t_skip "readers" "$BR is not built (make build/bench/benchread)"
	t_done
fi

MiB=1048576
SHARDS=16
SHARD=$((4 * MiB))
SMALL=200
WWW=$T_TMP/www
mkdir -p "$WWW/shards" "$WWW/small" "$T_TMP/mnt" "$T_TMP/mnt2"
for ((i = 0; i < SHARDS; i++)); do
	"$BR" gen "$WWW/shards/shard-$i.bin" "$SHARD" >/dev/null
done
for ((i = 0; i < SMALL; i++)); do
	"$BR" gen "$WWW/small/s-$i.bin" 32768 >/dev/null
done
o_start far --root "$WWW" --latency 20 --rate 8M --autoindex
FAR=$O_URL
FAR_LOG=$O_LOG

# The debug log's last line counts the reads that waited and the times
# one woke.
if fg_mount "$T_TMP/mount.log" -o "cache_dir=$T_TMP/cache,log_level=debug" \
	"$FAR/shards/" "$T_TMP/mnt"; then
	ls "$T_TMP/mnt" | sed "s|^|$T_TMP/mnt/|" >"$T_TMP/list"
	mark=$(stat -c %s "$FAR_LOG")
	out=$(timeout 120 "$BR" loader "$T_TMP/list" 8 7 2>&1) || true
	if [[ $out == ok* ]]; then
		t_pass "8 workers, $SHARDS shards of 4 MiB: every byte correct ($out)"
	else
		t_fail "8 workers read the shards" "$out"
	fi
	umount_pacefs "$T_TMP/mnt"
	pid_gone "$FG_PID" 10 || true
	# Range requests of the shards, the probes (bytes=0-0) apart.
	read -r reqs pulled < <(tail -c +"$((mark + 1))" "$FAR_LOG" |
		awk '$2 ~ /^\/shards\// && $3 != "bytes=0-0" { n++; s += $5 }
		     END { print n + 0, s + 0 }')
	read_bytes=$((SHARDS * SHARD))
	# A read a round trip would be 32 requests a shard (the kernel's
	# 128 KiB pieces). The first eight shards, opened together on a cold
	# mount, start with no rate known and take 8 to 12 requests each
	# (their windows grow from 64 KiB); the later ones take two to four.
	if [ "$reqs" -le $((SHARDS * 12)) ]; then
		t_pass "requests: $reqs for $SHARDS shards (at most 12 a shard)"
	else
		t_fail "requests per shard" "$reqs for $SHARDS shards: more than 12 a shard, as if each read paid its own round trip"
	fi
	if [ "$pulled" -le $((read_bytes + read_bytes / 10)) ]; then
		t_pass "pulled $pulled bytes for $read_bytes read (at most 1.1 x)"
	else
		t_fail "bytes pulled" "$pulled for $read_bytes read: more than 1.1 x, bytes were pulled twice"
	fi
	line=$(grep -E 'reads waited, woken [0-9]+ times' "$T_TMP/mount.log" | tail -n 1)
	if [[ $line =~ ([0-9]+)\ reads\ waited,\ woken\ ([0-9]+)\ times ]]; then
		waits=${BASH_REMATCH[1]} wakes=${BASH_REMATCH[2]}
		# A read wakes about once for its bytes, and once a second
		# at most while it waits; every read woken by every arrival
		# would be hundreds a MiB.
		if [ "$wakes" -le $((3 * waits + 64)) ]; then
			t_pass "wake-ups: $wakes for $waits reads that waited"
		else
			t_fail "wake-ups" "$wakes for $waits reads that waited: reads are woken by bytes not theirs"
		fi
	else
		t_fail "wake-ups" "no count in the log: $(tail -n 2 "$T_TMP/mount.log")"
	fi
else
	t_fail "mount" "$(tail -n 3 "$T_TMP/mount.log")"
fi

# Small files, from an origin 60 ms away: one open at a time would cost a
# round trip each, 12 s for the 200 at least (a margin that CPU load and
# the sanitizers do not eat); a probe and then a read, two requests a
# file.
o_start small --root "$WWW" --latency 60 --rate 8M --autoindex
SMALL_URL=$O_URL SMALL_LOG=$O_LOG
if mount_pacefs -o "cache_dir=$T_TMP/cache2" "$SMALL_URL/small/" "$T_TMP/mnt2"; then
	ls "$T_TMP/mnt2" | sed "s|^|$T_TMP/mnt2/|" >"$T_TMP/list2"
	mark=$(stat -c %s "$SMALL_LOG")
	t0=$(date +%s%N)
	out=$(timeout 120 "$BR" loader "$T_TMP/list2" 8 7 2>&1) || true
	ms=$((($(date +%s%N) - t0) / 1000000))
	if [[ $out == ok* ]]; then
		t_pass "8 workers, $SMALL files of 32 KiB: every byte correct in $ms ms ($out)"
	else
		t_fail "8 workers read the small files" "$out"
	fi
	if [ "$ms" -le 6000 ]; then
		t_pass "small files: opened in parallel, $SMALL in $ms ms (at most 6000, half of one at a time)"
	else
		t_fail "small files opened in parallel" "$SMALL in $ms ms: over 6000, as if opens waited for each other"
	fi
	reqs=$(tail -c +"$((mark + 1))" "$SMALL_LOG" | awk '$2 ~ /^\/small\// { n++ } END { print n + 0 }')
	if [ "$reqs" -eq "$SMALL" ]; then
		t_pass "small files: one request each ($reqs for $SMALL)"
	else
		t_fail "small files: one request each" "$reqs requests for $SMALL files"
	fi
	umount_pacefs "$T_TMP/mnt2"
else
	t_fail "small files: mount" "$T_MOUNT_ERR"
fi

# One probe at a time would take 200 round trips of 60 ms, 12 s at least.
o_start human --root "$WWW" --latency 60 --rate 8M --autoindex=human
mkdir -p "$T_TMP/mnt3"
if mount_pacefs -o "cache_dir=$T_TMP/cache3" "$O_URL/small/" "$T_TMP/mnt3"; then
	t0=$(date +%s%N)
	ls -l "$T_TMP/mnt3" >"$T_TMP/ls3" 2>"$T_TMP/ls3.err" || true
	ms=$((($(date +%s%N) - t0) / 1000000))
	wrong=$(awk 'NF >= 9 && $5 != 32768 { n++ } END { print n + 0 }' "$T_TMP/ls3")
	listed=$(grep -c ' s-' "$T_TMP/ls3" || true)
	if [ "$listed" -eq "$SMALL" ] && [ "$wrong" -eq 0 ]; then
		t_pass "ls -l, sizes not in the index: $listed files, each of 32768 bytes"
	else
		t_fail "ls -l, sizes not in the index" "$listed listed, $wrong with another size: $(head -c 300 "$T_TMP/ls3.err")"
	fi
	if [ "$ms" -le 6000 ]; then
		t_pass "ls -l of $SMALL unsized files in $ms ms (at most 6000, half of one at a time)"
	else
		t_fail "ls -l probes in parallel" "$SMALL unsized files in $ms ms: over 6000, as if probed one at a time"
	fi
	umount_pacefs "$T_TMP/mnt3"
else
	t_fail "unsized files: mount" "$T_MOUNT_ERR"
fi

t_done

#!/usr/bin/env bash
# stream.sh: sources that ignore Range, through pacefs-origin (its norange
# fault: a 200 with the whole file to every range request). A read far
# past the stream's frontier waits for the stream and gets the right
# bytes, the log says once why (frontier, rate, seconds left) and status
# says it while the read waits, the file is sent once; read_timeout bounds such a wait; and in a manifest whose
# first mirror ignores Range and whose second honours it, the second does
# the ranged work and the first is only probed. A stream whose connection
# is lost starts again from byte 0 and the bytes are right, counted in
# status and the metrics; a remount
# under a revalidation policy still probes (never EIO); a reader paced
# under the stream's rate has it held ahead of it, not pull the file.
set -euo pipefail
# shellcheck source=tests/lib.sh
source "$(dirname "$0")/../lib.sh"
t_require_mount
t_require_origin

SIZE=$((24 * 1048576 + 4321))
WWW=$T_TMP/www
mkdir -p "$WWW"
gen_file "$WWW/s.bin" "$SIZE" 3611
SKIP=$((SIZE / 4096 * 9 / 10))
want90=$(dd if="$WWW/s.bin" bs=4096 skip="$SKIP" count=1 status=none | sha256sum)

# gets LOG: the GET requests of /s.bin in pacefs-origin's LOG.
gets() {
	awk '$1 == "GET" && $2 == "/s.bin"' "$1" | wc -l
}

# --- a far read waits for the stream, and the log says why ----------------
o_start slow --root "$WWW" --fault '/s.bin:norange' --rate 8M
mnt=$T_TMP/mnt
mkdir -p "$mnt"
if fg_mount "$T_TMP/pacefs-slow.log" -o "cache_dir=$T_TMP/cache,read_timeout=30" "$O_URL/s.bin" "$mnt"; then
	start=$(date +%s%N)
	dd if="$mnt/s.bin" bs=4096 skip="$SKIP" count=1 status=none 2>&1 | sha256sum >"$T_TMP/far.sum" &
	far=$!
	# While it waits, status says why: the stream's frontier, rate, the
	# read it waits for and the seconds left (once the rate is measured).
	said="" json=""
	for _ in $(seq 20); do
		said=$("$PACEFS" status "$mnt" 2>&1 | grep "stream (the source ignores Range)" || true)
		json=$("$PACEFS" status --json "$mnt" 2>&1 || true)
		case $said in *"waits for it, about"*) break ;; esac
		sleep 0.1
	done
	wait "$far" || true
	ms=$((($(date +%s%N) - start) / 1000000))
	t_eq "a 4 KiB read at 90 % waits for the stream, right bytes ($ms ms)" "$(cat "$T_TMP/far.sum")" "$want90"
	if [[ $said =~ running\ at\ [0-9.]+\ [KMG]i?B,\ [0-9.]+\ [KMG]i?B/s\;\ a\ read\ at\ [0-9.]+\ MiB\ waits\ for\ it,\ about\ [0-9.]+\ s\ to\ go ]]; then
		t_pass "status says why the far read waits: $said"
	else
		t_fail "status says why the far read waits" "'$said'"
	fi
	if grep -Eq '"stream":\{"running":true,"held":false,"frontier":[0-9]+,"rate":[1-9][0-9]*,"restarts":0,"waiting_read":'$((SKIP * 4096))',"wait_ms":[0-9]+\}' <<<"$json"; then
		t_pass "status --json: the stream's frontier, rate, the waiting read at $((SKIP * 4096)), the time left"
	else
		t_fail "status --json: the stream" "$(grep -o '"stream":{[^}]*}' <<<"$json")"
	fi
	got=$(dd if="$mnt/s.bin" bs=4096 skip=$((SKIP + 1)) count=1 status=none | sha256sum || true)
	t_eq "the next 4 KiB" "$got" \
		"$(dd if="$WWW/s.bin" bs=4096 skip=$((SKIP + 1)) count=1 status=none | sha256sum)"
	lines=$(grep -c "waits for the stream" "$T_TMP/pacefs-slow.log" || true)
	t_eq "the log says once why the read waits" "$lines" 1
	if grep -Eq "waits for the stream .*at byte [0-9]+, [0-9.]+ MB/s, about [0-9.]+ s to go" "$T_TMP/pacefs-slow.log"; then
		t_pass "with the frontier, the rate and the seconds left"
	else
		t_fail "with the frontier, the rate and the seconds left" "$(grep "waits for" "$T_TMP/pacefs-slow.log")"
	fi
	t_eq "sha256 of the whole file" "$(sha256sum <"$mnt/s.bin")" "$(sha256sum <"$WWW/s.bin")"
	t_eq "the file is asked twice (probe, one stream)" "$(gets "$O_LOG")" 2
	umount_pacefs "$mnt"
else
	t_fail "mount of a source that ignores Range" "$(tail -n 3 "$T_TMP/pacefs-slow.log")"
fi
# A revalidation policy takes a record without a probe; not for a stream,
# whose record does not say so. The first mount reads at 45 % and goes
# (the stream cut short), the second, under the policy, reads the last
# 4 KiB, which the cache does not hold: right bytes, not EIO.
mkdir -p "$T_TMP/cache-rv"
last=$(((SIZE - 1) / 4096))
for skip in $((SKIP / 2)) "$last"; do
	if mount_pacefs -o "cache_dir=$T_TMP/cache-rv,revalidate=3600" "$O_URL/s.bin" "$mnt"; then
		got=$(dd if="$mnt/s.bin" bs=4096 skip="$skip" count=1 status=none | sha256sum || true)
		t_eq "revalidate=3600: the 4 KiB at block $skip" "$got" \
			"$(dd if="$WWW/s.bin" bs=4096 skip="$skip" count=1 status=none | sha256sum)"
		umount_pacefs "$mnt"
	else
		t_fail "revalidate=3600: mount" "$T_MOUNT_ERR"
	fi
done

# --- a stream whose connection is lost starts again from byte 0 ------------
o_start lost --root "$WWW" --fault '/s.bin:norange' --rate 8M
LOST_PID=$O_PID LOST_URL=$O_URL
MPORT=$(free_port)
if fg_mount "$T_TMP/pacefs-lost.log" -o "cache_dir=$T_TMP/cache-lost,read_timeout=60,metrics=127.0.0.1:$MPORT" "$LOST_URL/s.bin" "$mnt"; then
	sha256sum <"$mnt/s.bin" >"$T_TMP/lost.sum" 2>&1 &
	reader=$!
	sleep 1.5
	kill "$LOST_PID"
	sleep 0.5
	o_start lost2 --root "$WWW" --fault '/s.bin:norange' --rate 8M --listen "${LOST_URL#http://}"
	wait "$reader" || true
	t_eq "a stream cut mid-way and started again: sha256" "$(cat "$T_TMP/lost.sum")" "$(sha256sum <"$WWW/s.bin")"
	t_eq "started again once, from byte 0" "$(gets "$O_LOG")" 1
	json=$("$PACEFS" status --json "$mnt" 2>&1 || true)
	t_eq "status counts the restart" "$(grep -o '"stream":{[^}]*}' <<<"$json" | grep -o '"restarts":[0-9]*')" '"restarts":1'
	t_eq "and the metrics" "$(curl -s "http://127.0.0.1:$MPORT/metrics" | awk '$1 ~ /^pacefs_stream_restarts_total/ { print $2 }')" 1
	umount_pacefs "$mnt"
else
	t_fail "mount for a lost stream" "$(tail -n 3 "$T_TMP/pacefs-lost.log")"
fi

# --- a paced reader holds the stream ---------------------------------------
# 2 MB/s for 4 s of a stream at 8 MB/s, 20 ms away: without a hold the
# stream pulls 32 MB in that time; held ahead of the reader, at most what
# it consumed and 16 MiB.
gen_file "$WWW/p.bin" $((48 * 1048576)) 3612
o_start paced --root "$WWW" --fault '/p.bin:norange' --rate 8000000 --latency 20
if ! command -v python3 >/dev/null; then
	t_skip "a paced reader holds the stream" "python3 is not installed"
elif fg_mount "$T_TMP/pacefs-paced.log" -o "cache_dir=$T_TMP/cache-paced" "$O_URL/p.bin" "$mnt"; then
	consumed=$(python3 - "$mnt/p.bin" <<'PY'
import sys, time
f = open(sys.argv[1], "rb", buffering=0)
t0, n = time.time(), 0
while time.time() - t0 < 4:
    n += len(f.read(65536))
    d = t0 + n / 2e6 - time.time()
    if d > 0:
        time.sleep(d)
print(n)
PY
)
	held=$("$PACEFS" status "$mnt" 2>&1 | awk '/p.bin/ { for (i = 1; i < NF; i++) if ($(i + 1) == "MiB" && $(i + 2) == "of") { printf "%.0f\n", $i * 1048576; exit } }')
	if [ -n "$held" ] && [ "$held" -le $((consumed + 16 * 1048576)) ]; then
		t_pass "a paced reader holds the stream: $held bytes pulled for $consumed consumed"
	else
		t_fail "a paced reader holds the stream" "$held bytes pulled for $consumed consumed"
	fi
	t_eq "then read whole: sha256" "$(sha256sum <"$mnt/p.bin")" "$(sha256sum <"$WWW/p.bin")"
	t_eq "one stream in all" "$(awk '$1 == "GET" && $2 == "/p.bin" && $3 == "-"' "$O_LOG" | wc -l)" 1
	umount_pacefs "$mnt"
else
	t_fail "mount for a paced reader" "$(tail -n 3 "$T_TMP/pacefs-paced.log")"
fi

# --- read_timeout bounds the wait -----------------------------------------
o_start crawl --root "$WWW" --fault '/s.bin:norange' --rate 1M
if fg_mount "$T_TMP/pacefs-crawl.log" -o "cache_dir=$T_TMP/cache-crawl,read_timeout=2" "$O_URL/s.bin" "$mnt"; then
	start=$SECONDS
	if dd if="$mnt/s.bin" of=/dev/null bs=4096 skip="$SKIP" count=1 status=none 2>/dev/null; then
		t_fail "a read the stream cannot reach in read_timeout fails" "it succeeded"
	else
		t_pass "a read the stream cannot reach in read_timeout fails"
	fi
	if [ $((SECONDS - start)) -le 10 ]; then
		t_pass "within about read_timeout ($((SECONDS - start)) s)"
	else
		t_fail "within about read_timeout" "$((SECONDS - start)) s"
	fi
	umount_pacefs "$mnt"
else
	t_fail "mount of a crawling source" "$(tail -n 3 "$T_TMP/pacefs-crawl.log")"
fi

# --- two mirrors: one ignores Range, one honours it ----------------------
o_start nr --root "$WWW" --fault '/s.bin:norange'
NR_URL=$O_URL NR_LOG=$O_LOG
o_start ranged --root "$WWW"
cat >"$T_TMP/m.json" <<JSON
{"version": 1, "files": [{"path": "s.bin", "urls": ["$NR_URL/s.bin", "$O_URL/s.bin"]}]}
JSON
if fg_mount "$T_TMP/pacefs-mirrors.log" -o "cache_dir=$T_TMP/cache-m" "$T_TMP/m.json" "$mnt"; then
	got=$(dd if="$mnt/s.bin" bs=4096 skip="$SKIP" count=1 status=none | sha256sum || true)
	t_eq "mirrors: a 4 KiB read at 90 %" "$got" "$want90"
	ranged=$(awk '$1 == "GET" && $2 == "/s.bin" && $3 != "-"' "$O_LOG" | wc -l)
	if [ "$ranged" -ge 2 ]; then
		t_pass "mirrors: the one that honours Range served it ($ranged range requests)"
	else
		t_fail "mirrors: the one that honours Range served it" "$(cat "$O_LOG")"
	fi
	t_eq "mirrors: sha256 of the whole file" "$(sha256sum <"$mnt/s.bin")" "$(sha256sum <"$WWW/s.bin")"
	t_eq "mirrors: the stream-only one was only probed" "$(gets "$NR_LOG")" 1
	umount_pacefs "$mnt"
else
	t_fail "mirrors mount" "$(tail -n 3 "$T_TMP/pacefs-mirrors.log")"
fi
t_done

#!/usr/bin/env bash
# streamcache.sh: a file bigger than the cache budget on a source that
# ignores Range. The mount says at first open what the budget keeps (the
# stream's most recent bytes) and what a read behind them costs (the
# stream again from byte 0); a whole read is right and the cache stays
# within its budget; a read behind the kept bytes starts the stream again
# (counted) and gets the right bytes.
set -euo pipefail
# shellcheck source=tests/lib.sh
source "$(dirname "$0")/../lib.sh"
t_require_mount
t_require_origin

SIZE=$((40 * 1048576 + 777))
WWW=$T_TMP/www
mkdir -p "$WWW"
gen_file "$WWW/big.bin" "$SIZE" 3701
CACHE=$T_TMP/cache
mnt=$T_TMP/mnt
mkdir -p "$mnt"

# held_bytes: what `pacefs cache stat` says the cache holds.
held_bytes() {
	"$PACEFS" cache stat --cache-dir "$CACHE" | awk '/^bytes held:/ { gsub(/[()]/, "", $5); print $5 }'
}

o_start big --root "$WWW" --fault '/big.bin:norange' --rate 64M
MPORT=$(free_port)
if fg_mount "$T_TMP/pacefs.log" -o "cache_dir=$CACHE,cache_size=8M,lanes=4,read_timeout=30,metrics=127.0.0.1:$MPORT" "$O_URL/big.bin" "$mnt"; then
	t_eq "sha256 through an 8 MiB cache" "$(sha256sum <"$mnt/big.bin")" "$(sha256sum <"$WWW/big.bin")"
	if grep -q "bigger than the cache budget" "$T_TMP/pacefs.log"; then
		t_pass "says what the budget keeps: $(grep -o "bigger than the cache budget.*" "$T_TMP/pacefs.log" | head -n 1)"
	else
		t_fail "says what the budget keeps" "$(grep -i stream "$T_TMP/pacefs.log" | head -n 5)"
	fi
	t_eq "one stream" "$(awk '$1 == "GET" && $2 == "/big.bin"' "$O_LOG" | wc -l)" 2
	held=$(held_bytes)
	# The budget may be passed by one commit batch (16 MiB) at most.
	if [ -n "$held" ] && [ "$held" -le $((8 * 1048576 + 16 * 1048576)) ]; then
		t_pass "cache within its budget: $held bytes held (budget 8 MiB)"
	else
		t_fail "cache within its budget" "held '$held'"
	fi
	# Behind the kept bytes: the stream again from byte 0.
	got=$(dd if="$mnt/big.bin" bs=4096 skip=256 count=4 iflag=direct status=none | sha256sum)
	t_eq "a read behind the kept bytes: right bytes" "$got" \
		"$(dd if="$WWW/big.bin" bs=4096 skip=256 count=4 status=none | sha256sum)"
	t_eq "counted as a restart" "$(curl -s "http://127.0.0.1:$MPORT/metrics" | awk '$1 ~ /^pacefs_stream_restarts_total/ { print $2 }')" 1
	# Past the kernel's pages: every byte from the cache or the stream.
	t_eq "sha256 again, with direct I/O" "$(dd if="$mnt/big.bin" bs=1M iflag=direct status=none | sha256sum)" \
		"$(sha256sum <"$WWW/big.bin")"
	umount_pacefs "$mnt"
	# A stream held ahead of no reader is logged once its connection
	# closes.
	for _ in $(seq 20); do
		[ "$(awk '$1 == "GET" && $2 == "/big.bin" && $3 == "-"' "$O_LOG" | wc -l)" -ge 2 ] && break
		sleep 0.1
	done
	t_eq "a second stream, from byte 0" "$(awk '$1 == "GET" && $2 == "/big.bin" && $3 == "-"' "$O_LOG" | wc -l)" 2
	held=$(held_bytes)
	if [ -n "$held" ] && [ "$held" -le $((8 * 1048576 + 16 * 1048576)) ]; then
		t_pass "still within its budget: $held bytes held"
	else
		t_fail "still within its budget" "held '$held'"
	fi
else
	t_fail "mount" "$(tail -n 3 "$T_TMP/pacefs.log")"
fi

# --- a reader slower than the stream, under the budget ---------------------
# At 2 MB/s against a stream of 16 MB/s, 8 MiB of cache: the stream is
# held within half the budget of the reader, so nothing ahead of the
# reader is evicted before it reads it (else each such read started the
# stream again). Then a read behind the kept bytes while the stream runs
# cancels it and starts one from byte 0 at once, rather than wait for
# the rest of the file.
rm -rf "$CACHE"
o_start paced --root "$WWW" --fault '/big.bin:norange' --rate 16M
MPORT=$(free_port)
if ! command -v python3 >/dev/null; then
	t_skip "a reader slower than the stream" "python3 is not installed"
elif fg_mount "$T_TMP/pacefs-paced.log" -o "cache_dir=$CACHE,cache_size=8M,lanes=4,read_timeout=30,metrics=127.0.0.1:$MPORT" "$O_URL/big.bin" "$mnt"; then
	python3 - "$mnt/big.bin" >"$T_TMP/paced.out" 2>&1 <<'PY' &
import hashlib, sys, time
f = open(sys.argv[1], "rb", buffering=0)
t0, n, h = time.time(), 0, hashlib.sha256()
while time.time() - t0 < 4:
    b = f.read(65536)
    h.update(b)
    n += len(b)
    d = t0 + n / 2e6 - time.time()
    if d > 0:
        time.sleep(d)
time.sleep(2)
print(n, h.hexdigest())
PY
	paced=$!
	sleep 4.3
	restarts=$(curl -s "http://127.0.0.1:$MPORT/metrics" | awk '$1 ~ /^pacefs_stream_restarts_total/ { print $2 }')
	t_eq "a paced reader: no restart (nothing evicted ahead of it)" "$restarts" 0
	got=$(dd if="$mnt/big.bin" bs=4096 skip=256 count=4 iflag=direct status=none | sha256sum)
	t_eq "a read behind the kept bytes while the stream runs: right bytes" "$got" \
		"$(dd if="$WWW/big.bin" bs=4096 skip=256 count=4 status=none | sha256sum)"
	# Behind them only if the paced reader got far enough (a loaded
	# machine, a sanitizer build): a restart says the read was.
	behind=$(curl -s "http://127.0.0.1:$MPORT/metrics" | awk '$1 ~ /^pacefs_stream_restarts_total/ { print $2 }')
	wait "$paced" || true
	read -r n sum <"$T_TMP/paced.out" || true
	t_eq "the paced reader's bytes" "$sum" "$(head -c "${n:-0}" "$WWW/big.bin" | sha256sum | cut -d' ' -f1)"
	t_eq "then read whole, with direct I/O" "$(dd if="$mnt/big.bin" bs=1M iflag=direct status=none | sha256sum)" \
		"$(sha256sum <"$WWW/big.bin")"
	umount_pacefs "$mnt"
	for _ in $(seq 20); do
		[ "$(awk '$1 == "GET" && $2 == "/big.bin" && $3 == "-"' "$O_LOG" | wc -l)" -ge 2 ] && break
		sleep 0.1
	done
	first=$(awk '$1 == "GET" && $2 == "/big.bin" && $3 == "-" { print $5; exit }' "$O_LOG")
	if [ "${behind:-0}" = 0 ]; then
		t_skip "the first stream was cancelled for the read behind it" \
			"the paced reader read $n bytes: the read found its bytes still kept"
	elif [ -n "$first" ] && [ "$first" -lt "$SIZE" ]; then
		t_pass "the first stream was cancelled for the read behind it ($first of $SIZE bytes sent)"
	else
		t_fail "the first stream was cancelled for the read behind it" "$(cat "$O_LOG")"
	fi
else
	t_fail "mount for a paced reader" "$(tail -n 3 "$T_TMP/pacefs-paced.log")"
fi
t_done

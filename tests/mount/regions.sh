#!/usr/bin/env bash
# regions.sh: the regions a file's first reader needed at open are
# remembered beside the cache; once its bytes are evicted, a reader that
# opens it again (a chain of dependent reads, as a database's first lookup
# makes) finds them asked together at open: its reads take about one round
# trip of the far origin, not one each, for no more bytes; so does a
# reader on a fresh cache whose manifest carries them. `pacefs cache
# regions` lists and clears them; a new version of the file drops them.
set -euo pipefail
# shellcheck source=tests/lib.sh
source "$(dirname "$0")/../lib.sh"
t_require_mount
t_require_origin
if [ ! -x /usr/bin/python3 ]; then
	t_skip_all "/usr/bin/python3 is missing (contrib/install-deps.sh installs it)"
fi

MiB=1048576
LAT=100 # ms the origin waits before each answer: its round trip
WWW=$T_TMP/www
MNT=$T_TMP/mnt
CACHE=$T_TMP/cache
mkdir -p "$WWW" "$MNT"
gen_file "$WWW/data.bin" $((48 * MiB)) 31
o_start far --root "$WWW" --latency "$LAT"
URL=$O_URL/data.bin

# chain FILE: six dependent 4 KiB reads, each at an offset the bytes read
# before name (a B-tree's descent); compares every read with the origin's
# file and prints the milliseconds the reads took after open.
chain() {
	/usr/bin/python3 - "$1" "$WWW/data.bin" <<'PY'
import os, sys, time
fd = os.open(sys.argv[1], os.O_RDONLY)
size = os.fstat(fd).st_size
with open(sys.argv[2], "rb") as ref:
    t0 = time.monotonic()
    off = 0
    for _ in range(6):
        got = os.pread(fd, 4096, off)
        ref.seek(off)
        if got != ref.read(4096):
            sys.exit("bytes differ at %d" % off)
        off = int.from_bytes(got[:4], "big") % (size // 4096) * 4096
    ms = (time.monotonic() - t0) * 1000
os.close(fd)
print("%.0f" % ms)
PY
}

# run NAME: mounts, runs the chain, unmounts; sets MS, REQS and BYTES (the
# origin's count of the run's range requests and bytes).
run() {
	local before bbefore
	if ! mount_pacefs -o "cache_dir=$CACHE" "$URL" "$MNT"; then
		t_fail "$1: mount" "$T_MOUNT_ERR"
		t_done
	fi
	before=$(grep -c 'bytes=' "$O_LOG" || true)
	bbefore=$(log_bytes "$O_LOG")
	MS=$(chain "$MNT/data.bin") || {
		t_fail "$1: the chain's bytes" "$MS"
		MS=0
	}
	REQS=$(($(grep -c 'bytes=' "$O_LOG" || true) - before))
	BYTES=$(($(log_bytes "$O_LOG") - bbefore))
	umount_pacefs "$MNT"
}

regions() {
	"$PACEFS" cache regions --cache-dir "$CACHE"
}

run cold
COLD_MS=$MS COLD_REQS=$REQS COLD_BYTES=$BYTES
out=$(regions) && rc=0 || rc=$?
t_eq "regions: listed" "$rc" 0
n=$(printf '%s\n' "$out" | awk 'NR == 2 { print $2 }')
t_eq "regions: the first reader's reads are remembered ($n regions)" "$((${n:-0} >= 4))" 1
validator=$(printf '%s\n' "$out" | awk 'NR == 2 { print $5 }')

t_check "evict every blob" "$PACEFS" cache evict --all --cache-dir "$CACHE"
t_eq "evicted: no blob left" "$("$PACEFS" cache ls --cache-dir "$CACHE" | wc -l)" 1
t_eq "evicted: the regions stay" "$(regions | awk 'NR == 2 { print $2 }')" "$n"

run evicted
echo "chain after evict: cold ${COLD_MS} ms, ${COLD_REQS} requests, ${COLD_BYTES} B; remembered ${MS} ms, ${REQS} requests, ${BYTES} B (round trip ${LAT} ms)"
t_eq "cold: a round trip a read (${COLD_MS} ms)" "$((COLD_MS >= 5 * LAT))" 1
t_eq "remembered: about one round trip for all (${MS} ms)" "$((MS < 3 * LAT))" 1
t_eq "remembered: no more requests (${REQS} vs ${COLD_REQS})" "$((REQS <= COLD_REQS))" 1
t_eq "remembered: no more bytes (${BYTES} vs ${COLD_BYTES})" \
	"$((BYTES <= COLD_BYTES + COLD_BYTES / 4))" 1

# Another machine: a fresh cache, the regions carried by a manifest's
# entry ("regions": [[offset, length], ...]).
pairs=$(regions | awk 'NR > 2 && NF == 1 { split($1, r, "-");
	printf "%s[%d,%d]", n++ ? "," : "", r[1], r[2] - r[1] + 1 }')
printf '{"version":1,"files":[{"path":"data.bin","urls":["%s"],"regions":[%s]}]}\n' \
	"$URL" "$pairs" >"$T_TMP/m.json"
CACHE_KEEP=$CACHE
CACHE=$T_TMP/cache-other
URL=$T_TMP/m.json
run manifest
CACHE=$CACHE_KEEP
URL=$O_URL/data.bin
echo "chain on a fresh cache with a manifest's regions: ${MS} ms, ${REQS} requests, ${BYTES} B"
t_eq "manifest: about one round trip for all (${MS} ms)" "$((MS < 3 * LAT))" 1
t_eq "manifest: no more bytes (${BYTES} vs ${COLD_BYTES})" \
	"$((BYTES <= COLD_BYTES + COLD_BYTES / 4))" 1

# A new version: its regions are dropped at its first open, not asked
# (a read of one byte costs its own request, not the old version's
# regions), and a single read leaves nothing to remember.
touch -d '2001-02-03 04:05:06' "$WWW/data.bin"
t_check "evict again" "$PACEFS" cache evict --all --cache-dir "$CACHE"
if ! mount_pacefs -o "cache_dir=$CACHE" "$URL" "$MNT"; then
	t_fail "changed: mount" "$T_MOUNT_ERR"
	t_done
fi
before=$(wc -l <"$O_LOG")
t_eq "changed: its first byte" "$(head -c 1 "$MNT/data.bin" | od -An -tx1 | tr -d ' ')" \
	"$(head -c 1 "$WWW/data.bin" | od -An -tx1 | tr -d ' ')"
umount_pacefs "$MNT"
# The byte and the kernel's readahead around it lie in the first MiB;
# every old region but the first lies past it.
far=$(tail -n +"$((before + 1))" "$O_LOG" | grep 'bytes=' |
	awk -v m=$MiB '{ split($3, r, /[=-]/); if (r[2] + 0 >= m) n++ } END { print n + 0 }')
t_eq "changed: the old regions are not asked" "$far" 0
t_eq "changed: the old version's regions are dropped" "$(regions | wc -l)" 1
run changed
v2=$(regions | awk 'NR == 2 { print $5 }')
t_eq "changed: recorded anew under its validator (${validator} -> ${v2})" \
	"$([ -n "$v2" ] && [ "$v2" != "$validator" ] && echo new)" new

t_check "clear --all" "$PACEFS" cache regions clear --all --cache-dir "$CACHE"
t_eq "cleared: none listed" "$(regions | wc -l)" 1
out=$("$PACEFS" cache regions bogus --cache-dir "$CACHE" 2>&1) && rc=0 || rc=$?
t_eq "regions: an unknown argument is a usage error" "$rc" 2

t_done

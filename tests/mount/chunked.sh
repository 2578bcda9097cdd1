#!/usr/bin/env bash
# chunked.sh: an origin that ignores Range and sends its bodies chunked,
# with no length (pacefs-origin's chunked fault). Its URL alone mounts
# with the file's size 0 and direct I/O until the stream ends (as /proc
# files): cat | sha256sum, a read at 90 % and Python's read() get every
# byte; stat then says the size, a second read asks nothing, and a
# remount knows the size from the cache's record. A manifest entry with
# the size is read as one stream, one without it as the URL alone; with
# two URLs and no size, refused with a line saying why. Beside a mirror
# that honours Range, that mirror does the work.
set -euo pipefail
# shellcheck source=tests/lib.sh
source "$(dirname "$0")/../lib.sh"
t_require_mount
t_require_origin

SIZE=$((12 * 1048576 + 777))
WWW=$T_TMP/www
mkdir -p "$WWW"
gen_file "$WWW/c.bin" "$SIZE" 3621
SKIP=$((SIZE / 4096 * 9 / 10))
want90=$(dd if="$WWW/c.bin" bs=4096 skip="$SKIP" count=1 status=none | sha256sum)
wantall=$(sha256sum <"$WWW/c.bin")

# gets LOG: the GET requests of /c.bin in pacefs-origin's LOG.
gets() {
	awk '$1 == "GET" && $2 == "/c.bin"' "$1" | wc -l
}

o_start chunked --root "$WWW" --fault '/c.bin:chunked' --rate 16M
C_URL=$O_URL C_LOG=$O_LOG
head=$(curl -s -D - -o "$T_TMP/curl.bin" -r 0-0 "$C_URL/c.bin" | tr -d '\r')
if grep -qi '^Transfer-Encoding: chunked' <<<"$head" && ! grep -qi '^Content-Length' <<<"$head" &&
	grep -q '^HTTP/1.1 200' <<<"$head" && cmp -s "$T_TMP/curl.bin" "$WWW/c.bin"; then
	t_pass "the origin's chunked mode: 200, chunked, no length, the whole file"
else
	t_fail "the origin's chunked mode" "$head"
fi
: >"$C_LOG"

# --- its URL alone: size 0 until the stream ends ---------------------------
mnt=$T_TMP/mnt
mkdir -p "$mnt"
: >"$C_LOG"
if fg_mount "$T_TMP/pacefs-u.log" -o "cache_dir=$T_TMP/cache-u,read_timeout=30" "$C_URL/c.bin" "$mnt"; then
	t_eq "its URL alone: stat says 0 before the stream ends" "$(stat -c %s "$mnt/c.bin")" 0
	t_eq "its URL alone: cat | sha256sum gets every byte" "$(cat "$mnt/c.bin" | sha256sum)" "$wantall"
	t_eq "its URL alone: stat says the size after" "$(stat -c %s "$mnt/c.bin")" "$SIZE"
	t_eq "its URL alone: asked twice (probe, one stream)" "$(gets "$C_LOG")" 2
	sync
	echo 1 >/proc/sys/vm/drop_caches 2>/dev/null || true
	t_eq "its URL alone: a second read, from the cache" "$(sha256sum <"$mnt/c.bin")" "$wantall"
	t_eq "its URL alone: the second read asks nothing" "$(gets "$C_LOG")" 2
	umount_pacefs "$mnt"
	# The next mount of the same cache knows the size from its record.
	: >"$C_LOG"
	if fg_mount "$T_TMP/pacefs-u2.log" -o "cache_dir=$T_TMP/cache-u" "$C_URL/c.bin" "$mnt"; then
		t_eq "remounted: stat says the size at once" "$(stat -c %s "$mnt/c.bin")" "$SIZE"
		t_eq "remounted: the bytes, from the cache" "$(sha256sum <"$mnt/c.bin")" "$wantall"
		t_eq "remounted: only the probe asked" "$(gets "$C_LOG")" 1
		umount_pacefs "$mnt"
	else
		t_fail "remount" "$(tail -n 3 "$T_TMP/pacefs-u2.log")"
	fi
else
	t_fail "its URL alone mounts" "$(tail -n 3 "$T_TMP/pacefs-u.log")"
fi

# A read at 90 % on a fresh mount, while the length is unknown.
: >"$C_LOG"
if fg_mount "$T_TMP/pacefs-f.log" -o "cache_dir=$T_TMP/cache-f,read_timeout=30" "$C_URL/c.bin" "$mnt"; then
	got=$(dd if="$mnt/c.bin" bs=4096 skip="$SKIP" count=1 status=none | sha256sum || true)
	t_eq "length unknown: a 4 KiB read at 90 %" "$got" "$want90"
	got=$(python3 -c 'import sys; print(len(open(sys.argv[1], "rb").read()))' "$mnt/c.bin" 2>&1 || true)
	t_eq "length unknown: a read to EOF gets every byte" "$got" "$SIZE"
	umount_pacefs "$mnt"
else
	t_fail "fresh mount" "$(tail -n 3 "$T_TMP/pacefs-f.log")"
fi

# --- a manifest entry with its size, and one without -----------------------
cat >"$T_TMP/m.json" <<JSON
{"version": 1, "files": [{"path": "c.bin", "urls": ["$C_URL/c.bin"], "size": $SIZE},
 {"path": "nosize.bin", "urls": ["$C_URL/c.bin?nosize"]},
 {"path": "two.bin", "urls": ["$C_URL/c.bin", "$C_URL/c.bin?again"]}]}
JSON
: >"$C_LOG"
if fg_mount "$T_TMP/pacefs-m.log" -o "cache_dir=$T_TMP/cache-m,read_timeout=30" "$T_TMP/m.json" "$mnt"; then
	t_eq "with its size: stat" "$(stat -c %s "$mnt/c.bin")" "$SIZE"
	got=$(dd if="$mnt/c.bin" bs=4096 skip="$SKIP" count=1 status=none | sha256sum || true)
	t_eq "with its size: a 4 KiB read at 90 %" "$got" "$want90"
	t_eq "with its size: sha256 of the whole file" "$(sha256sum <"$mnt/c.bin")" "$wantall"
	t_eq "with its size: asked twice (probe, one stream)" "$(gets "$C_LOG")" 2
	sync
	echo 1 >/proc/sys/vm/drop_caches 2>/dev/null || true
	t_eq "a second read: same bytes" "$(sha256sum <"$mnt/c.bin")" "$wantall"
	t_eq "a second read asks nothing" "$(gets "$C_LOG")" 2
	t_eq "without a size: stat says 0" "$(stat -c %s "$mnt/nosize.bin")" 0
	t_eq "without a size: read to its end" "$(sha256sum <"$mnt/nosize.bin")" "$wantall"
	t_eq "without a size: then stat says the size" "$(stat -c %s "$mnt/nosize.bin")" "$SIZE"
	if stat "$mnt/two.bin" >/dev/null 2>&1; then
		t_fail "two URLs without a size: refused" "stat succeeded"
	else
		t_pass "two URLs without a size: refused"
	fi
	if grep -q "two.bin: cannot open: .*no length" "$T_TMP/pacefs-m.log"; then
		t_pass "two URLs without a size: the log says why"
	else
		t_fail "two URLs without a size: the log says why" "$(tail -n 3 "$T_TMP/pacefs-m.log")"
	fi
	umount_pacefs "$mnt"
else
	t_fail "manifest mount" "$(tail -n 3 "$T_TMP/pacefs-m.log")"
fi

# --- beside a mirror that honours Range -----------------------------------
o_start ranged --root "$WWW"
cat >"$T_TMP/m2.json" <<JSON
{"version": 1, "files": [{"path": "c.bin", "urls": ["$C_URL/c.bin", "$O_URL/c.bin"], "size": $SIZE}]}
JSON
: >"$C_LOG"
if fg_mount "$T_TMP/pacefs-m2.log" -o "cache_dir=$T_TMP/cache-m2" "$T_TMP/m2.json" "$mnt"; then
	got=$(dd if="$mnt/c.bin" bs=4096 skip="$SKIP" count=1 status=none | sha256sum || true)
	t_eq "mirrors: a 4 KiB read at 90 %" "$got" "$want90"
	t_eq "mirrors: sha256 of the whole file" "$(sha256sum <"$mnt/c.bin")" "$wantall"
	t_eq "mirrors: the chunked one was only probed" "$(gets "$C_LOG")" 1
	if [ "$(awk '$1 == "GET" && $2 == "/c.bin" && $3 != "-"' "$O_LOG" | wc -l)" -ge 2 ]; then
		t_pass "mirrors: the one that honours Range served"
	else
		t_fail "mirrors: the one that honours Range served" "$(cat "$O_LOG")"
	fi
	umount_pacefs "$mnt"
else
	t_fail "mirrors mount" "$(tail -n 3 "$T_TMP/pacefs-m2.log")"
fi
t_done

#!/usr/bin/env bash
# chunked.sh: an origin that ignores Range and sends its bodies chunked,
# with no length (pacefs-origin's chunked fault). Its size cannot be
# learnt before the stream ends: a mount of its URL alone is refused with
# one line saying so, and so is a manifest entry without a size (its stat
# fails, the log says why); a manifest entry with the size is read as one
# stream: a 4 KiB read at 90 % and the whole file's sha256 are right, the
# file is asked twice (probe, stream), a second read asks nothing; beside
# a mirror that honours Range, that mirror does the work.
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

# --- its URL alone: refused, one line ---------------------------------------
mnt=$T_TMP/mnt
mkdir -p "$mnt"
rc=0
timeout 30 "$PACEFS" -o "cache_dir=$T_TMP/cache-x" "$C_URL/c.bin" "$mnt" </dev/null >/dev/null 2>"$T_TMP/x.err" || rc=$?
if [ "$rc" -eq 1 ] && [ "$(grep -c . "$T_TMP/x.err")" -eq 1 ] &&
	grep -q "$C_URL/c.bin.*no length" "$T_TMP/x.err" && ! is_mounted "$mnt"; then
	t_pass "its URL alone is refused: $(cat "$T_TMP/x.err")"
else
	t_fail "its URL alone is refused" "exit $rc: $(cat "$T_TMP/x.err")"
	t_track_mount "$mnt"
	umount_pacefs "$mnt" || true
fi

# --- a manifest entry with its size: one stream ----------------------------
cat >"$T_TMP/m.json" <<JSON
{"version": 1, "files": [{"path": "c.bin", "urls": ["$C_URL/c.bin"], "size": $SIZE},
 {"path": "nosize.bin", "urls": ["$C_URL/c.bin"]}]}
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
	if stat "$mnt/nosize.bin" >/dev/null 2>&1; then
		t_fail "without a size: refused" "stat succeeded"
	else
		t_pass "without a size: refused"
	fi
	if grep -q "nosize.bin\|c.bin.*no length" "$T_TMP/pacefs-m.log"; then
		t_pass "without a size: the log says why"
	else
		t_fail "without a size: the log says why" "$(tail -n 3 "$T_TMP/pacefs-m.log")"
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

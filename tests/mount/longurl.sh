#!/usr/bin/env bash
# longurl.sh: URLs are never cut. Presigned URLs run to several KiB: every
# range request carries the whole URL, and two URLs that share their first
# 4,100+ bytes but name different files keep apart in one cache (each mount
# serves its own bytes). A URL longer than a cache record holds is listed
# with its length said, not silently cut.
set -euo pipefail
# shellcheck source=tests/lib.sh
source "$(dirname "$0")/../lib.sh"
t_require_mount

WWW=$T_TMP/www
mkdir -p "$WWW"
SIZE=$((1048576 + 4321))
gen_file "$WWW/a.bin" "$SIZE" 51
gen_file "$WWW/b.bin" "$SIZE" 52
gen_file "$WWW/c.bin" "$SIZE" 53
# /get serves the file its `file` argument names; the rest of the query
# (a long padding, as a long query has) is ignored. The combined log shows each request
# line whole.
origin_start "$WWW" "large_client_header_buffers 4 64k;
	location = /get { try_files /\$arg_file =404; }
	access_log $T_TMP/requests.log combined;"

pad() { head -c "$1" /dev/zero | tr '\0' 'x'; }
PAD=$(pad 4200)
URL_A="$ORIGIN_URL/get?pad=$PAD&file=a.bin"
URL_B="$ORIGIN_URL/get?pad=$PAD&file=b.bin"
URL_C="$ORIGIN_URL/get?pad=$(pad 9000)&file=c.bin"
CACHE=$T_TMP/cache
N=0

# read_url NAME URL FILE: mounts URL (one cache for all), compares every
# byte with FILE, unmounts.
read_url() {
	local name=$1 url=$2 want=$3 mnt
	N=$((N + 1))
	mnt=$T_TMP/mnt-$N
	mkdir -p "$mnt"
	if ! mount_pacefs -o "cache_dir=$CACHE,name=f.bin,read_timeout=20" "$url" "$mnt"; then
		t_fail "$name: mount" "$T_MOUNT_ERR"
		return 0
	fi
	t_check "$name: its own bytes" cmp "$mnt/f.bin" "$want"
	umount_pacefs "$mnt"
}

read_url "a ${#URL_A}-byte URL" "$URL_A" "$WWW/a.bin"
read_url "another sharing its first $((${#URL_A} - 6)) bytes" "$URL_B" "$WWW/b.bin"
# Again, from the cache: each still gets its own.
read_url "the first again, from the cache" "$URL_A" "$WWW/a.bin"
read_url "the second again, from the cache" "$URL_B" "$WWW/b.bin"
read_url "a ${#URL_C}-byte URL" "$URL_C" "$WWW/c.bin"

# Every request the mounts made carried the whole URL.
path_a=${URL_A#"$ORIGIN_URL"}
total=$(grep -c '"GET /get?' "$T_TMP/requests.log" || true)
whole=$(grep -cF -e "\"GET $path_a HTTP" -e "\"GET ${URL_B#"$ORIGIN_URL"} HTTP" \
	-e "\"GET ${URL_C#"$ORIGIN_URL"} HTTP" "$T_TMP/requests.log" || true)
if [ "$total" -gt 3 ] && [ "$whole" -eq "$total" ]; then
	t_pass "every request carried its whole URL ($total requests)"
else
	t_fail "every request carried its whole URL" "$whole of $total did"
fi
t_eq "no request was refused" "$(awk '$9 != 206 && $9 != 200' "$T_TMP/requests.log" | wc -l)" 0

# The cache lists three blobs; the longest identity says it was shortened.
out=$("$PACEFS" cache ls --cache-dir "$CACHE" 2>&1 || true)
t_eq "cache ls: three blobs" "$(grep -c '/get?pad=' <<<"$out" || true)" 3
if grep -q "\.\.\. ($((${#URL_C} + 4)) bytes)" <<<"$out"; then
	t_pass "cache ls: a record too short for its identity says so"
else
	t_fail "cache ls: a record too short for its identity says so" "$(cut -c 1-120 <<<"$out")"
fi
t_done

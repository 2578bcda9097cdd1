#!/usr/bin/env bash
# origin.sh: pacefs-origin, the test origin, answers ranges, validators,
# keep-alive, its rate cap and latency, and every fault kind as its README
# says, checked with curl alone (no mount, no root needed).
set -euo pipefail
# shellcheck source=tests/lib.sh
source "$(dirname "$0")/../lib.sh"

if ! command -v curl >/dev/null 2>&1; then
	t_skip_all "curl is missing"
fi
t_require_origin

# slice FILE START LEN: bytes [START, START+LEN) of FILE.
slice() {
	tail -c +$(($2 + 1)) "$1" | head -c "$3"
}

# hdr FILE NAME: the value of header NAME in a curl -D dump.
hdr() {
	grep -i "^$2:" "$1" | tail -n 1 | cut -d: -f2- | sed 's/^ *//' | tr -d '\r'
}

# fetch NAME CURL_ARGS...: runs curl with the body in $T_TMP/NAME.body and
# the head in $T_TMP/NAME.head; sets C_RC (curl's exit), C_CODE (status),
# C_SIZE (body bytes), C_TTFB and C_TOTAL (seconds).
fetch() {
	local name=$1 w
	shift
	C_RC=0
	w=$(curl -sS -o "$T_TMP/$name.body" -D "$T_TMP/$name.head" \
		-w '%{http_code} %{size_download} %{time_starttransfer} %{time_total}' \
		"$@" 2>"$T_TMP/$name.cerr") || C_RC=$?
	read -r C_CODE C_SIZE C_TTFB C_TOTAL <<<"$w"
}

# between X LO HI: LO <= X <= HI for decimal X.
between() {
	awk -v x="$1" -v lo="$2" -v hi="$3" 'BEGIN { exit !(x >= lo && x <= hi) }'
}

WWW=$T_TMP/www
SIZE=1048699
DIRS="stall reset s503 s429 s500 s403 s410 s429n burst norange badrange short etag content slow refuse mute rate
big enc total clen etagv corrupt"
mkdir -p "$WWW/dir"
gen_file "$WWW/f.bin" "$SIZE" 71
gen_file "$WWW/eight.bin" $((8 * 1024 * 1024)) 72
for d in $DIRS; do
	mkdir -p "$WWW/$d"
	cp "$WWW/f.bin" "$WWW/$d/f.bin"
done

o_start main --root "$WWW" \
	--fault '/stall/*:stall:65536' \
	--fault '/reset/*:reset:65536' \
	--fault '/s503/*:status:503:7' \
	--fault '/s429/*:status:429:3' \
	--fault '/s500/*:status:500' \
	--fault '/s403/*:status:403' \
	--fault '/s410/*:status:410' \
	--fault '/burst/*:burst:500:2' \
	--fault '/norange/*:norange' \
	--fault '/badrange/*:badrange' \
	--fault '/short/*:short:1000' \
	--fault '/etag/*:etag-change:2' \
	--fault '/content/*:content-change:2' \
	--fault '/corrupt/*:corrupt:1' \
	--fault '/slow/*:slowfirst:300' \
	--fault '/refuse/*:refuse' \
	--fault '/mute/*:mute' \
	--fault '/rate/*:rate:2M' \
	--fault '/s429n/*:status:429:5:1:2' \
	--fault '/big/*:bigheader:200K:1' \
	--fault '/enc/*:encoding:gzip:1' \
	--fault '/total/*:total:9223372036854775808' \
	--fault '/clen/*:clen:18446744073709551616' \
	--fault "/etagv/*:etag:$(printf '"e\033[31m\001"')"
MAIN_PID=$O_PID
U=$O_URL
t_eq "prints its address" "$(head -n 1 "$T_TMP/main.out")" "listening on ${U#http://}"

# --- plain serving ---------------------------------------------------------

fetch full "$U/f.bin"
if [ "$C_CODE" = 200 ] && cmp -s "$T_TMP/full.body" "$WWW/f.bin"; then
	t_pass "full GET: 200 and equal bytes"
else
	t_fail "full GET" "status $C_CODE, $C_SIZE bytes, rc $C_RC"
fi
ETAG=$(hdr "$T_TMP/full.head" ETag)
LM=$(hdr "$T_TMP/full.head" Last-Modified)
if [[ $ETAG =~ ^\"[0-9a-f]+-[0-9a-f]+-[0-9a-f]+\"$ ]] &&
	[ "$(hdr "$T_TMP/full.head" Accept-Ranges)" = bytes ] &&
	[[ $LM =~ ^[A-Z][a-z]{2},\ [0-9]{2}\ [A-Z][a-z]{2}\ [0-9]{4}\ [0-9:]{8}\ GMT$ ]]; then
	t_pass "validators: ETag $ETAG, Last-Modified $LM, Accept-Ranges bytes"
else
	t_fail "validators" "ETag '$ETAG', Last-Modified '$LM'"
fi

# range_case NAME RANGE START LEN: a 206 with the right bytes and Content-Range.
range_case() {
	local name=$1 range=$2 start=$3 len=$4 want cr
	fetch "$name" -H "Range: bytes=$range" "$U/f.bin"
	cr=$(hdr "$T_TMP/$name.head" Content-Range)
	want="bytes $start-$((start + len - 1))/$SIZE"
	if [ "$C_CODE" = 206 ] && [ "$cr" = "$want" ] &&
		cmp -s "$T_TMP/$name.body" <(slice "$WWW/f.bin" "$start" "$len"); then
		t_pass "range bytes=$range: 206, $cr, equal bytes"
	else
		t_fail "range bytes=$range" "status $C_CODE, Content-Range '$cr' (want '$want'), $C_SIZE bytes"
	fi
}
range_case range_ab 1000-70999 1000 70000
range_case range_a 1000000- 1000000 $((SIZE - 1000000))
range_case range_n -4321 $((SIZE - 4321)) 4321
range_case range_end 1048600-99999999 1048600 $((SIZE - 1048600))

fetch r416 -H "Range: bytes=$SIZE-" "$U/f.bin"
t_eq "416 past the end with Content-Range */size" \
	"$C_CODE $(hdr "$T_TMP/r416.head" Content-Range)" "416 bytes */$SIZE"

fetch ifr_bad -H 'Range: bytes=0-9' -H 'If-Range: "0-0-0"' "$U/f.bin"
t_eq "If-Range with another ETag: 200, full body" "$C_CODE $C_SIZE" "200 $SIZE"
fetch ifr_ok -H 'Range: bytes=0-9' -H "If-Range: $ETAG" "$U/f.bin"
t_eq "If-Range with the ETag: 206" "$C_CODE $C_SIZE" "206 10"
fetch ifr_date -H 'Range: bytes=0-9' -H "If-Range: $LM" "$U/f.bin"
t_eq "If-Range with Last-Modified: 206" "$C_CODE $C_SIZE" "206 10"
fetch ifr_old -H 'Range: bytes=0-9' -H 'If-Range: Sun, 06 Nov 1994 08:49:37 GMT' "$U/f.bin"
t_eq "If-Range with an older date: 200, full body" "$C_CODE $C_SIZE" "200 $SIZE"

fetch head -I "$U/f.bin"
t_eq "HEAD: 200, Content-Length, ETag, no body" \
	"$C_CODE $(hdr "$T_TMP/head.head" Content-Length) $(hdr "$T_TMP/head.head" ETag) $C_SIZE" \
	"200 $SIZE $ETAG 0"

if curl -sv -o /dev/null -o /dev/null "$U/f.bin" "$U/f.bin" 2>&1 | grep -q 'Re-using existing connection'; then
	t_pass "keep-alive: two requests on one connection"
else
	t_fail "keep-alive" "curl did not re-use the connection"
fi
if curl -sv -H 'Connection: close' -o /dev/null -o /dev/null "$U/f.bin" "$U/f.bin" 2>&1 |
	grep -q 'Re-using existing connection'; then
	t_fail "Connection: close" "the connection was re-used"
else
	t_pass "Connection: close is honoured"
fi

fetch dotdot --path-as-is "$U/../$(basename "$T_TMP")/www/f.bin"
t_eq "'..' in the path: 404" "$C_CODE" 404
fetch dotdot_enc "$U/%2e%2e/etc/passwd"
t_eq "encoded '..' in the path: 404" "$C_CODE" 404
fetch dir "$U/dir/"
t_eq "a directory: 404" "$C_CODE" 404
fetch missing "$U/nope.bin"
t_eq "a missing file: 404" "$C_CODE" 404

if grep -qx "GET /f.bin bytes=1000-70999 206 70000 -" "$T_TMP/main.log"; then
	t_pass "the log has method path range status bytes fault"
else
	t_fail "log line" "no 'GET /f.bin bytes=1000-70999 206 70000 -' in: $(head -n 3 "$T_TMP/main.log" | tr '\n' '|')"
fi

# --- faults ----------------------------------------------------------------

fetch stall --max-time 2 "$U/stall/f.bin"
t_eq "stall:65536: 65536 bytes, then curl times out (28)" "$C_SIZE $C_RC" "65536 28"

fetch reset "$U/reset/f.bin"
t_eq "reset:65536: 65536 bytes, then a reset (56)" "$C_SIZE $C_RC" "65536 56"

fetch s503 "$U/s503/f.bin"
t_eq "status:503:7: 503 with Retry-After: 7" "$C_CODE $(hdr "$T_TMP/s503.head" Retry-After)" "503 7"
fetch s429 "$U/s429/f.bin"
t_eq "status:429:3: 429 with Retry-After: 3" "$C_CODE $(hdr "$T_TMP/s429.head" Retry-After)" "429 3"
for c in 500 403 410; do
	fetch "s$c" "$U/s$c/f.bin"
	t_eq "status:$c: $c without Retry-After" "$C_CODE $(hdr "$T_TMP/s$c.head" Retry-After)" "$c "
done

codes=
for i in 1 2 3 4; do
	fetch "s429n$i" "$U/s429n/f.bin"
	codes="$codes $C_CODE"
done
t_eq "status:429:5:1:2: served, two 429s, then served" "$codes" " 200 429 429 200"

codes=
for i in 1 2 3 4; do
	fetch "burst$i" "$U/burst/f.bin"
	codes="$codes $C_CODE"
done
if [ "$codes" = " 500 500 200 200" ] && cmp -s "$T_TMP/burst4.body" "$WWW/f.bin"; then
	t_pass "burst:500:2: 500 twice, then the file"
else
	t_fail "burst:500:2" "statuses$codes"
fi

fetch norange -H 'Range: bytes=0-9' "$U/norange/f.bin"
if [ "$C_CODE $C_SIZE" = "200 $SIZE" ] && cmp -s "$T_TMP/norange.body" "$WWW/f.bin"; then
	t_pass "norange: a Range gets 200 and the whole file"
else
	t_fail "norange" "status $C_CODE, $C_SIZE bytes"
fi

fetch badrange -H 'Range: bytes=100-199' "$U/badrange/f.bin"
cr=$(hdr "$T_TMP/badrange.head" Content-Range)
if [ "$C_CODE $C_SIZE" = "206 100" ] && [ "$cr" = "bytes 101-200/$SIZE" ] &&
	cmp -s "$T_TMP/badrange.body" <(slice "$WWW/f.bin" 100 100); then
	t_pass "badrange: 206 of the asked bytes labelled '$cr'"
else
	t_fail "badrange" "status $C_CODE, $C_SIZE bytes, Content-Range '$cr'"
fi

fetch short "$U/short/f.bin"
t_eq "short:1000: full Content-Length, 1000 bytes, curl error 18" \
	"$(hdr "$T_TMP/short.head" Content-Length) $C_SIZE $C_RC" "$SIZE 1000 18"

tags=()
for i in 1 2 3 4; do
	fetch "etag$i" "$U/etag/f.bin"
	tags+=("$(hdr "$T_TMP/etag$i.head" ETag)")
done
if [ "${tags[0]}" = "${tags[1]}" ] && [ "${tags[1]}" != "${tags[2]}" ] &&
	[ "${tags[2]}" = "${tags[3]}" ] && cmp -s "$T_TMP/etag3.body" "$WWW/f.bin"; then
	t_pass "etag-change:2: ETag ${tags[1]} became ${tags[2]}, same bytes"
else
	t_fail "etag-change:2" "ETags ${tags[*]}"
fi

for i in 1 2 3; do
	fetch "content$i" "$U/content/f.bin"
done
old_tag=$(hdr "$T_TMP/content2.head" ETag)
old_lm=$(hdr "$T_TMP/content2.head" Last-Modified)
new_tag=$(hdr "$T_TMP/content3.head" ETag)
new_lm=$(hdr "$T_TMP/content3.head" Last-Modified)
b_old=$(od -An -tx1 -N4 "$WWW/f.bin" | tr -d ' ')
b_new=$(od -An -tx1 -N4 "$T_TMP/content3.body" | tr -d ' ')
b_want=$(printf '%08x' $((0x$b_old ^ 0xffffffff)))
if cmp -s "$T_TMP/content2.body" "$WWW/f.bin" && [ "$C_SIZE" = "$SIZE" ] &&
	[ "$b_new" = "$b_want" ] && [ "$old_tag" != "$new_tag" ] && [ "$old_lm" != "$new_lm" ]; then
	t_pass "content-change:2: new bytes (XOR 0xFF), ETag and Last-Modified on the third request"
else
	t_fail "content-change:2" "bytes $b_old -> $b_new, ETag $old_tag -> $new_tag, Last-Modified $old_lm -> $new_lm"
fi
fetch content4 -H 'Range: bytes=0-9' -H "If-Range: $old_tag" "$U/content/f.bin"
t_eq "content-change: If-Range with the old ETag gets 200, full body" "$C_CODE $C_SIZE" "200 $SIZE"

fetch corrupt1 "$U/corrupt/f.bin"
fetch corrupt2 -H 'Range: bytes=0-9' -H "If-Range: $(hdr "$T_TMP/corrupt1.head" ETag)" "$U/corrupt/f.bin"
c_old=$(od -An -tx1 -N4 "$WWW/f.bin" | tr -d ' ')
c_new=$(od -An -tx1 -N4 "$T_TMP/corrupt2.body" | tr -d ' ')
if cmp -s "$T_TMP/corrupt1.body" "$WWW/f.bin" && [ "$C_CODE" = 206 ] &&
	[ "$c_new" = "$(printf '%08x' $((0x$c_old ^ 0xffffffff)))" ] &&
	[ "$(hdr "$T_TMP/corrupt1.head" ETag)" = "$(hdr "$T_TMP/corrupt2.head" ETag)" ] &&
	[ "$(hdr "$T_TMP/corrupt1.head" Last-Modified)" = "$(hdr "$T_TMP/corrupt2.head" Last-Modified)" ]; then
	t_pass "corrupt:1: the second answer's bytes XOR 0xFF under the same ETag and Last-Modified (If-Range still matches)"
else
	t_fail "corrupt:1" "code $C_CODE, bytes $c_old -> $c_new"
fi

fetch slow "$U/slow/f.bin"
if [ "$C_CODE" = 200 ] && between "$C_TOTAL" 0.3 5 && cmp -s "$T_TMP/slow.body" "$WWW/f.bin"; then
	t_pass "slowfirst:300: the body took ${C_TOTAL} s (head after ${C_TTFB} s)"
else
	t_fail "slowfirst:300" "status $C_CODE, total ${C_TOTAL} s"
fi

fetch refuse "$U/refuse/f.bin"
t_eq "refuse: no answer, curl error 52 (empty reply)" "$C_SIZE $C_RC" "0 52"

fetch mute --max-time 1 "$U/mute/f.bin"
t_eq "mute: the connection open, no answer, curl's timeout (28)" "$C_CODE $C_SIZE $C_RC" "000 0 28"

fetch rate "$U/rate/f.bin"
if between "$C_TOTAL" 0.35 1.5 && cmp -s "$T_TMP/rate.body" "$WWW/f.bin"; then
	t_pass "rate:2M: 1 MiB in ${C_TOTAL} s"
else
	t_fail "rate:2M" "1 MiB in ${C_TOTAL} s, want about 0.5 s"
fi

fetch big1 -H 'Range: bytes=0-9' "$U/big/f.bin"
fetch big2 -H 'Range: bytes=0-9' "$U/big/f.bin"
t_eq "bigheader:200K:1: the first answer plain, then curl refuses its 200 KB header (27)" \
	"$(grep -ci '^X-Pad:' "$T_TMP/big1.head" || true) $C_RC $(grep -c ' /big/f.bin .* bigheader$' "$T_TMP/main.log" || true)" "0 27 1"

fetch enc1 -H 'Range: bytes=0-9' "$U/enc/f.bin"
fetch enc2 -H 'Range: bytes=0-9' "$U/enc/f.bin"
if [ -z "$(hdr "$T_TMP/enc1.head" Content-Encoding)" ] &&
	[ "$C_CODE $(hdr "$T_TMP/enc2.head" Content-Encoding)" = "206 gzip" ] &&
	cmp -s "$T_TMP/enc2.body" <(slice "$WWW/f.bin" 0 10); then
	t_pass "encoding:gzip:1: then 'Content-Encoding: gzip' on the same bytes"
else
	t_fail "encoding:gzip:1" "'$(hdr "$T_TMP/enc1.head" Content-Encoding)', then $C_CODE '$(hdr "$T_TMP/enc2.head" Content-Encoding)'"
fi

fetch total -H 'Range: bytes=0-9' "$U/total/f.bin"
t_eq "total:N: the Content-Range total is N" "$C_CODE $(hdr "$T_TMP/total.head" Content-Range)" \
	"206 bytes 0-9/9223372036854775808"

fetch clen -H 'Range: bytes=0-9' "$U/clen/f.bin"
if [ "$(hdr "$T_TMP/clen.head" Content-Length)" = 18446744073709551616 ] &&
	[ "$C_CODE" = 200 ] && cmp -s "$T_TMP/clen.body" "$WWW/f.bin"; then
	t_pass "clen:N: a 200 with Content-Length N and the whole file"
else
	t_fail "clen:N" "status $C_CODE, Content-Length '$(hdr "$T_TMP/clen.head" Content-Length)', $C_SIZE bytes"
fi

fetch etagv "$U/etagv/f.bin"
t_eq "etag:VALUE: the ETag is VALUE, control bytes and all" \
	"$(hdr "$T_TMP/etagv.head" ETag | tr -d '\n' | od -An -c | tr -s ' ')" \
	"$(printf '"e\033[31m\001"' | od -An -c | tr -s ' ')"

fetch after_faults "$U/f.bin"
t_eq "still serving after the faults" "$C_CODE $C_SIZE" "200 $SIZE"

# --- redirect and --log-header ---------------------------------------------

o_start redir --root "$WWW" --log-header X-Token --log-header Authorization \
	--fault "/r/*:redirect:http://127.0.0.1:9/pre"
fetch redir -H 'X-Token: a b%c' "$O_URL/r/f.bin?q=1&x=y"
t_eq "redirect: 302 to the prefix and the whole target" \
	"$C_CODE $(hdr "$T_TMP/redir.head" Location)" "302 http://127.0.0.1:9/pre/r/f.bin?q=1&x=y"
fetch unredir -u 'u:p' "$O_URL/f.bin"
t_eq "--log-header: each value one field, '-' when absent" \
	"$(awk '{ print $6, $7, $8 }' "$T_TMP/redir.log" | tr '\n' ' ')" \
	"redirect a%20b%25c - - - Basic%20dTpw "
rc=0
timeout 5 "$ORIGIN_BIN" --root "$WWW" --fault '/r/*:redirect:' >/dev/null 2>"$T_TMP/badredir.err" || rc=$?
t_eq "redirect without a URL: usage error" "$rc" 2

# --- --require-header: only the current token, read again when rewritten --

printf '# tokens\nX-Token: one\n' >"$T_TMP/accept"
o_start req --root "$WWW" --require-header "$T_TMP/accept"
fetch req_none "$O_URL/f.bin"
fetch req_one -H 'x-token:  one' "$O_URL/f.bin"
fetch req_bad -H 'X-Token: two' "$O_URL/f.bin"
t_eq "--require-header: 401 without it, 200 with it (any case), 401 with another value" \
	"$(head -n 1 "$T_TMP/req_none.head" | tr -d '\r') $(hdr "$T_TMP/req_none.head" WWW-Authenticate) $C_CODE" \
	"HTTP/1.1 401 Unauthorized Bearer 401"
t_eq "--require-header: the token's request got the file" "$(cmp -s "$T_TMP/req_one.body" "$WWW/f.bin" && echo same)" same
printf 'X-Token: two\n' >"$T_TMP/accept.new"
mv "$T_TMP/accept.new" "$T_TMP/accept"
fetch req_old -H 'X-Token: one' "$O_URL/f.bin"
c_old=$C_CODE
fetch req_new -H 'X-Token: two' "$O_URL/f.bin"
t_eq "--require-header: the file rewritten, the old token refused, the new one served" "$c_old $C_CODE" "401 200"
rm "$T_TMP/accept"
fetch req_gone -H 'X-Token: two' "$O_URL/f.bin"
t_eq "--require-header: the file gone, nothing served" "$C_CODE" 401
t_eq "--require-header: refusals logged as unauthorized" \
	"$(awk '{ print $4 "/" $6 }' "$T_TMP/req.log" | tr '\n' ' ')" \
	"401/unauthorized 200/- 401/unauthorized 401/unauthorized 200/- 401/unauthorized "

# --- rate cap and latency --------------------------------------------------

o_start rate8 --root "$WWW" --rate 8M
fetch rate8 "$O_URL/eight.bin"
if between "$C_TOTAL" 0.7 2 && cmp -s "$T_TMP/rate8.body" "$WWW/eight.bin"; then
	t_pass "--rate 8M: 8 MiB in ${C_TOTAL} s"
else
	t_fail "--rate 8M" "8 MiB in ${C_TOTAL} s, want 0.7-2 s"
fi

# Small buffers and small paced writes (where lanes crawled): the same bytes, still
# at about the cap over loopback, and the socket's send buffer is small.
o_start smallbuf --root "$WWW" --rate 8M --sndbuf 32768 --write-chunk 16384
fetch smallbuf "$O_URL/eight.bin"
if between "$C_TOTAL" 0.7 3 && cmp -s "$T_TMP/smallbuf.body" "$WWW/eight.bin"; then
	t_pass "--sndbuf 32768 --write-chunk 16384 --rate 8M: 8 MiB in ${C_TOTAL} s"
else
	t_fail "--sndbuf --write-chunk" "8 MiB in ${C_TOTAL} s, want 0.7-3 s"
fi
# --slow-conns 2:1M: the second connection is the slow one.
o_start slowc --root "$WWW" --rate 8M --slow-conns 2:1M
fetch slowc1 -H 'Range: bytes=0-1048575' "$O_URL/eight.bin"
fetch slowc2 -H 'Range: bytes=0-1048575' "$O_URL/eight.bin"
if between "$C_TOTAL" 0.7 3 && cmp -s "$T_TMP/slowc2.body" <(head -c 1048576 "$WWW/eight.bin"); then
	t_pass "--slow-conns 2:1M: the second connection's 1 MiB in ${C_TOTAL} s"
else
	t_fail "--slow-conns 2:1M" "the second connection's 1 MiB in ${C_TOTAL} s, want about 1 s"
fi
# --uplink 8M: four connections share 8 MiB/s, each uncapped alone.
o_start uplink --root "$WWW" --uplink 8M
t0=$(date +%s.%N)
pids=()
for i in 0 1 2 3; do
	fetch "uplink$i" -H "Range: bytes=$((i * 2097152))-$((i * 2097152 + 2097151))" \
		"$O_URL/eight.bin" &
	pids+=($!)
done
wait "${pids[@]}"
t1=$(date +%s.%N)
secs=$(echo "$t1 - $t0" | bc)
if between "$secs" 0.8 3 && cmp -s <(cat "$T_TMP"/uplink[0-3].body) "$WWW/eight.bin"; then
	t_pass "--uplink 8M: four connections' 8 MiB together in $secs s"
else
	t_fail "--uplink 8M" "four connections' 8 MiB together in $secs s, want about 1 s"
fi
rc=0
"$ORIGIN_BIN" --root "$WWW" --uplink 8Q >/dev/null 2>&1 || rc=$?
t_eq "--uplink 8Q is a usage error" "$rc" 2
rc=0
"$ORIGIN_BIN" --root "$WWW" --write-chunk 0 >/dev/null 2>&1 || rc=$?
t_eq "--write-chunk 0 is a usage error" "$rc" 2
rc=0
"$ORIGIN_BIN" --root "$WWW" --write-chunk 65537 >/dev/null 2>&1 || rc=$?
t_eq "--write-chunk over 64K is a usage error" "$rc" 2

o_start lat --root "$WWW" --latency 100
fetch lat_base -H 'Range: bytes=0-0' "$U/f.bin"
base=$C_TTFB
fetch lat -H 'Range: bytes=0-0' "$O_URL/f.bin"
# The delay comes before the head, so the first byte is at least 100 ms in,
# whatever the connection cost (which varies run to run on a busy machine).
if between "$C_TTFB" 0.1 1; then
	t_pass "--latency 100: first byte after ${C_TTFB} s (${base} s without)"
else
	t_fail "--latency 100" "first byte after ${C_TTFB} s, ${base} s without"
fi

# --- --max-transfers with --hold-retry-after ------------------------------

# While a slow transfer runs, requests get 503 + Retry-After: 1 (each
# refusal starts the second again); the first request after it ends is
# still refused (held), one a second and more after the last refusal is
# served.
o_start hold --root "$WWW" --max-transfers 1 --retry-after 1 \
	--hold-retry-after --rate 4M
curl -sS -o /dev/null "$O_URL/eight.bin" &
slow=$!
sleep 0.3
codes=''
while kill -0 "$slow" 2>/dev/null; do
	fetch held -H 'Range: bytes=0-99' "$O_URL/f.bin"
	codes="$codes$C_CODE "
	sleep 0.3
done
wait "$slow" || true
fetch after -H 'Range: bytes=0-99' "$O_URL/f.bin"
ra=$(hdr "$T_TMP/after.head" Retry-After)
sleep 1.3
fetch later -H 'Range: bytes=0-99' "$O_URL/f.bin"
case $codes in
*206*) t_fail "--hold-retry-after" "served during the slow transfer: $codes" ;;
503*)
	if [ "$C_CODE" = 206 ] && [ "$(head -n 1 "$T_TMP/after.head" | awk '{ print $2 }')" = 503 ] && [ "$ra" = 1 ]; then
		t_pass "--hold-retry-after: 503 during the transfer, 503 (Retry-After $ra) just after it, 206 a second later"
	else
		t_fail "--hold-retry-after" "after the transfer: $(head -n 1 "$T_TMP/after.head"), Retry-After '$ra'; a second later: $C_CODE"
	fi
	;;
*) t_fail "--hold-retry-after" "no refusal during the slow transfer: '$codes'" ;;
esac

# --- --one-at-a-time ---------------------------------------------------------

# While a body is being sent, any request (a HEAD too) gets, 50 ms later,
# 503 with Retry-After: 1 and an empty body on a connection that stays
# open; once the body is sent, the next one is served.
o_start one --root "$WWW" --one-at-a-time 50 --rate 4M
curl -sS -o /dev/null "$O_URL/eight.bin" &
slow=$!
sleep 0.3
fetch busy -H 'Range: bytes=0-99' "$O_URL/f.bin"
busy="$C_CODE $C_SIZE $C_TOTAL"
fetch busyhead -I "$O_URL/f.bin"
wait "$slow" || true
fetch free -H 'Range: bytes=0-99' "$O_URL/f.bin"
read -r code size total <<<"$busy"
if [ "$code" = 503 ] && [ "$size" = 0 ] && between "$total" 0.05 1 &&
	[ "$(hdr "$T_TMP/busy.head" Retry-After)" = 1 ] &&
	[ "$(hdr "$T_TMP/busy.head" Content-Length)" = 0 ] &&
	! grep -qi '^Connection: close' "$T_TMP/busy.head" &&
	[ "$C_CODE" = 206 ] && grep -q ' 503 0 one-at-a-time' "$O_LOG"; then
	t_pass "--one-at-a-time 50: 503 (Retry-After 1, empty, kept alive) after $total s during a transfer, 206 after it"
else
	t_fail "--one-at-a-time 50" "during: $busy, $(head -n 1 "$T_TMP/busy.head"); after: $C_CODE"
fi
t_eq "--one-at-a-time 50: a HEAD during a transfer" "$(head -n 1 "$T_TMP/busyhead.head" | awk '{ print $2 }')" 503

# --- --fault-mix: a seeded draw per request, the same for the same seed ----

# mix_run NAME SPEC: 60 requests in a row (each on a connection of its
# own, -m 3 against stalls) to an origin with --fault-mix SPEC; prints
# the fault field of each logged request, one line.
mix_run() {
	local name=$1 spec=$2 i
	o_start "$name" --root "$WWW" --fault-mix "$spec" || return 0
	for i in $(seq 1 60); do
		curl -s -o /dev/null -m 3 -r 0-99999 "$O_URL/f.bin" 2>/dev/null || true
	done
	proc_stop "$O_PID"
	awk '{ print $6 }' "$T_TMP/$name.log" | tr '\n' ' '
}
mix_a=$(mix_run mix-a 7:50)
mix_b=$(mix_run mix-b 7:50)
mix_c=$(mix_run mix-c 8:50)
t_eq "--fault-mix: the same seed draws the same faults" "$mix_a" "$mix_b"
if [ "$mix_a" != "$mix_c" ]; then
	t_pass "--fault-mix: another seed draws others"
else
	t_fail "--fault-mix: another seed draws others" "seeds 7 and 8 both drew: $mix_a"
fi
faulted=$(tr ' ' '\n' <<<"$mix_a" | grep -cv '^-$\|^$' || true)
if between "$faulted" 15 45; then
	t_pass "--fault-mix 7:50: $faulted of 60 requests faulted ($(tr ' ' '\n' <<<"$mix_a" | grep -v '^-$\|^$' | sort -u | tr '\n' ' '))"
else
	t_fail "--fault-mix 7:50: about half the requests faulted" "$faulted of 60: $mix_a"
fi
if tr ' ' '\n' <<<"$mix_a" | grep -qx -e norange -e badrange -e etag-change -e content-change; then
	t_fail "--fault-mix: no verdict or change kind without :verdicts" "$mix_a"
else
	t_pass "--fault-mix: no verdict or change kind without :verdicts"
fi
mix_v=$(mix_run mix-v 7:100:verdicts)
if tr ' ' '\n' <<<"$mix_v" | grep -qx -e norange -e badrange; then
	t_pass "--fault-mix 7:100:verdicts: norange or badrange drawn"
else
	t_fail "--fault-mix 7:100:verdicts: norange or badrange drawn" "$mix_v"
fi
# A drawn fault keeps the bytes true: what a complete 206 carries is the file's.
if o_start mix-bytes --root "$WWW" --fault-mix 3:100; then
	bad=0 whole=0
	for i in $(seq 1 20); do
		fetch mixb -m 3 -r 1000-70999 "$O_URL/f.bin"
		if [ "$C_CODE" = 206 ] && [ "$C_SIZE" = 70000 ]; then
			whole=$((whole + 1))
			cmp -s "$T_TMP/mixb.body" <(slice "$WWW/f.bin" 1000 70000) || bad=$((bad + 1))
		fi
	done
	proc_stop "$O_PID"
	t_eq "--fault-mix: every complete 206 ($whole of 20) carries the file's bytes" "$bad" 0
else
	t_fail "--fault-mix: start" "$(cat "$T_TMP/mix-bytes.err")"
fi
for spec in x 7:0 7:101 7:50:all; do
	rc=0
	timeout 5 "$ORIGIN_BIN" --root "$WWW" --fault-mix "$spec" >/dev/null 2>"$T_TMP/badmix.err" || rc=$?
	t_eq "--fault-mix $spec: usage error" "$rc" 2
done

# --- command line and signals ----------------------------------------------

rc=0
timeout 5 "$ORIGIN_BIN" --root "$WWW" --listen 0.0.0.0:0 >/dev/null 2>"$T_TMP/any.err" || rc=$?
if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && grep -qi loopback "$T_TMP/any.err"; then
	t_pass "refuses a non-loopback address: $(cat "$T_TMP/any.err")"
else
	t_fail "non-loopback --listen" "exit $rc: $(cat "$T_TMP/any.err")"
fi

kill -TERM "$MAIN_PID"
rc=0
for i in $(seq 1 40); do
	kill -0 "$MAIN_PID" 2>/dev/null || break
	sleep 0.05
done
if kill -0 "$MAIN_PID" 2>/dev/null; then
	t_fail "SIGTERM" "still running 2 s after SIGTERM"
else
	wait "$MAIN_PID" || rc=$?
	t_eq "SIGTERM: exits with status 0" "$rc" 0
fi

t_done

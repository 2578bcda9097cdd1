#!/usr/bin/env bash
# encoding.sh: responses whose bytes are not the blob's as stored, or whose
# sizes cannot be a file's. Every request asks for identity; a range of
# gzip bytes is refused (at the probe, or by the transfers: EIO and a
# line), never served; a gzip directory page is decoded (a document, not
# blob bytes); a Content-Range total or a Content-Length over 2^63 - 1 is
# one line at mount, with nothing mounted.
set -euo pipefail
# shellcheck source=tests/lib.sh
source "$(dirname "$0")/../lib.sh"
t_require_mount
t_require_origin

WWW=$T_TMP/www
SIZE=$((1048576 + 999))
gen_file "$T_TMP/src.bin" "$SIZE" 73
mkdir -p "$WWW/ident/sub" "$WWW/gz" "$WWW/gzidx" "$WWW/enc" "$WWW/bigidx"
for d in ident ident/sub gz gzidx enc bigidx; do
	ln "$T_TMP/src.bin" "$WWW/$d/f.bin"
done
gzip -9 -n <"$T_TMP/src.bin" >"$WWW/gz/f.bin.gz"
# A directory page that only a gzip decoder can read.
cat >"$WWW/gzidx/index.html" <<'EOF'
<html><head><title>Index of /gzidx/</title></head><body><h1>Index of /gzidx/</h1><hr><pre><a href="../">../</a>
<a href="f.bin">f.bin</a>                                              01-Jan-2024 00:00             1049575
</pre><hr></body></html>
EOF
gzip -9 -k -n "$WWW/gzidx/index.html"
: >"$WWW/gzidx/index.html" # the plain page lists nothing
# A page that gives a size over 2^63 - 1.
cat >"$WWW/bigidx/index.html" <<'EOF'
<html><body><pre><a href="f.bin">f.bin</a>                   01-Jan-2024 00:00    9223372036854775808
</pre></body></html>
EOF
origin_start "$WWW" '
	location /ident/ { autoindex on; if ($http_accept_encoding != "identity") { return 406; } }
	location /gz/ { gzip_static always; }
	location /gzidx/ { gzip_static always; index index.html; }
	location /bigidx/ { index index.html; }'
U=$ORIGIN_URL

# refused NAME URL REGEX: mounting URL fails with exit 1, one line on
# stderr that names the URL and matches REGEX, and nothing mounted.
refused() {
	local name=$1 url=$2 want=$3 rc=0 mnt=$T_TMP/mnt-refused
	mkdir -p "$mnt"
	timeout 30 "$PACEFS" -o "cache_dir=$T_TMP/cache-refused" "$url" "$mnt" \
		</dev/null >/dev/null 2>"$T_TMP/refused.err" || rc=$?
	if [ "$rc" -eq 1 ] && [ "$(grep -c . "$T_TMP/refused.err")" -eq 1 ] &&
		grep -Eq -- "$url: .*($want)" "$T_TMP/refused.err" && ! is_mounted "$mnt"; then
		t_pass "$name: refused: $(cat "$T_TMP/refused.err")"
	else
		t_fail "$name: refused at mount" "exit $rc: $(head -c 300 "$T_TMP/refused.err")"
		umount_pacefs "$mnt" || true
	fi
}

# --- every request asks for identity ----------------------------------------
MNT=$T_TMP/mnt-ident
mkdir -p "$MNT"
if mount_pacefs -o "cache_dir=$T_TMP/cache-ident" "$U/ident/f.bin" "$MNT"; then
	t_check "Accept-Encoding identity: probe and ranges (nginx answers 406 otherwise): every byte" \
		cmp "$MNT/f.bin" "$T_TMP/src.bin"
	umount_pacefs "$MNT"
else
	t_fail "Accept-Encoding identity: probe" "$T_MOUNT_ERR"
fi
if mount_pacefs -o "cache_dir=$T_TMP/cache-ident-dir" "$U/ident/" "$MNT"; then
	t_eq "Accept-Encoding identity: directory pages" "$(ls "$MNT" | tr '\n' ' ')$(ls "$MNT/sub" | tr '\n' ' ')" \
		"f.bin sub f.bin "
	t_check "Accept-Encoding identity: a listed file's bytes" cmp "$MNT/sub/f.bin" "$T_TMP/src.bin"
	umount_pacefs "$MNT"
else
	t_fail "Accept-Encoding identity: directory pages" "$T_MOUNT_ERR"
fi
if grep -q ' 406 ' "$ORIGIN_PREFIX/access.log"; then
	t_fail "Accept-Encoding identity: no request without it" "$(grep -c ' 406 ' "$ORIGIN_PREFIX/access.log") answered 406"
else
	t_pass "Accept-Encoding identity: no request without it"
fi

# --- gzip bytes are never a blob's ------------------------------------------
# nginx with gzip_static always serves f.bin.gz (as a 200, whatever the
# Range).
refused "gzip_static always" "$U/gz/f.bin" "Content-Encoding: gzip"
# The project's origin: a 206 that says gzip, at the probe (enc0), or only
# after it (enc).
o_start enc --root "$WWW" --fault '/enc/*:encoding:gzip:1' \
	--fault '/enc0/*:encoding:gzip' \
	--fault '/total/*:total:9223372036854775808' \
	--fault '/total64/*:total:18446744073709551616' \
	--fault '/clen/*:clen:18446744073709551616' \
	--fault '/clen63/*:clen:9223372036854775808'
for d in enc0 total total64 clen clen63; do
	mkdir -p "$WWW/$d"
	ln "$T_TMP/src.bin" "$WWW/$d/f.bin"
done
refused "Content-Encoding gzip at the probe" "$O_URL/enc0/f.bin" "HTTP 206 with 'Content-Encoding: gzip'"
MNT=$T_TMP/mnt-enc
LOG=$T_TMP/enc.log
mkdir -p "$MNT"
fg_mount "$LOG" -o "cache_dir=$T_TMP/cache-enc,read_timeout=10" "$O_URL/enc/f.bin" "$MNT"
rc=0
timeout 30 dd if="$MNT/f.bin" of="$T_TMP/enc.out" bs=1M 2>"$T_TMP/enc.err" || rc=$?
if [ "$rc" -ne 0 ] && grep -q 'Input/output error' "$T_TMP/enc.err" && [ ! -s "$T_TMP/enc.out" ]; then
	t_pass "Content-Encoding gzip on ranges: EIO, no byte served"
else
	t_fail "Content-Encoding gzip on ranges: EIO" "dd exit $rc, $(stat -c %s "$T_TMP/enc.out") bytes: $(tail -n 1 "$T_TMP/enc.err")"
fi
if grep -Eq "error: lane [0-9]+: $O_URL/enc/f.bin: 'Content-Encoding: gzip' although identity was asked for" "$LOG"; then
	t_pass "Content-Encoding gzip on ranges: logged: $(grep -m1 'Content-Encoding' "$LOG" | cut -c1-160)"
else
	t_fail "Content-Encoding gzip on ranges: logged" "$(tail -n 3 "$LOG")"
fi
umount_pacefs "$MNT"

# --- a gzip directory page is a document: decoded ---------------------------
MNT=$T_TMP/mnt-gzidx
mkdir -p "$MNT"
if mount_pacefs -o "cache_dir=$T_TMP/cache-gzidx" "$U/gzidx/" "$MNT"; then
	t_eq "gzip directory page: decoded and listed" "$(ls "$MNT")" "f.bin"
	t_check "gzip directory page: the file's bytes" cmp "$MNT/f.bin" "$T_TMP/src.bin"
	umount_pacefs "$MNT"
else
	t_fail "gzip directory page" "$T_MOUNT_ERR"
fi

# --- sizes a file cannot have -----------------------------------------------
MNT=$T_TMP/mnt-bigidx
mkdir -p "$MNT"
if mount_pacefs -o "cache_dir=$T_TMP/cache-bigidx" "$U/bigidx/" "$MNT"; then
	t_eq "a listed size of 2^63: not taken, the probe's instead" "$(stat -c %s "$MNT/f.bin")" "$SIZE"
	t_check "a listed size of 2^63: the file's bytes" cmp "$MNT/f.bin" "$T_TMP/src.bin"
	umount_pacefs "$MNT"
else
	t_fail "a listed size of 2^63" "$T_MOUNT_ERR"
fi
refused "Content-Range total 2^63" "$O_URL/total/f.bin" "Content-Range total 9223372036854775808 is over"
refused "Content-Range total 2^64" "$O_URL/total64/f.bin" "Content-Range"
refused "200 with Content-Length 2^64" "$O_URL/clen/f.bin" "Content-Length '18446744073709551616'"
refused "200 with Content-Length 2^63" "$O_URL/clen63/f.bin" "Content-Length '9223372036854775808'"

t_done

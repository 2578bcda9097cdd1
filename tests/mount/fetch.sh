#!/usr/bin/env bash
# fetch.sh: pacefs against nginx over HTTPS with a CA the test makes, over
# HTTP/2, through redirects, with two mirrors (and one that disagrees), and
# with a request header the origin requires; every read compares bytes. Then
# fetch/ alone (tests/tools/fetchq) against the project's origin: a request
# sent ahead is promoted without being asked twice, or dropped unseen.
set -euo pipefail
# shellcheck source=tests/lib.sh
source "$(dirname "$0")/../lib.sh"
t_require_mount

WWW=$T_TMP/www
PKI=$T_TMP/pki
mkdir -p "$WWW/files" "$WWW/auth" "$WWW/other" "$PKI"
SIZE=$((5 * 1048576 + 4321))
gen_file "$WWW/files/blob.bin" "$SIZE" 41
cp "$WWW/files/blob.bin" "$WWW/auth/blob.bin"
gen_file "$WWW/other/blob.bin" $((SIZE + 1)) 42

# A CA and a server certificate for 127.0.0.1, made for this run only.
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=pacefs test CA" \
	-keyout "$PKI/ca.key" -out "$PKI/ca.pem" 2>/dev/null
openssl req -newkey rsa:2048 -nodes -subj "/CN=127.0.0.1" \
	-keyout "$PKI/server.key" -out "$PKI/server.csr" 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1\n' >"$PKI/ext.cnf"
openssl x509 -req -in "$PKI/server.csr" -CA "$PKI/ca.pem" -CAkey "$PKI/ca.key" \
	-CAcreateserial -days 2 -extfile "$PKI/ext.cnf" -out "$PKI/server.pem" 2>/dev/null

# One nginx, two servers: TLS with HTTP/2, and plain HTTP with a redirect,
# a second path to the same file (a mirror) and a path that needs a header.
# shellcheck disable=SC2016 # nginx's variables
nginx_start -f '$server_port $request_method $uri $status $server_protocol "$http_range" "$http_if_range"' "
	listen 127.0.0.1:@PORT1@ ssl http2;
	ssl_certificate $PKI/server.pem;
	ssl_certificate_key $PKI/server.key;
	root $WWW;
	location = /down/blob.bin { return 302 http://127.0.0.1:@PORT2@/auth/blob.bin; }" "
	listen 127.0.0.1:@PORT2@;
	root $WWW;
	location = /moved/blob.bin { return 302 /files/blob.bin; }
	location /mirror2/ { alias $WWW/files/; }
	location /auth/ {
		if (\$http_x_pacefs_token != \"s3cret\") { return 403; }
	}"
TLS_PORT=${NGINX_PORTS[0]}
HTTP_PORT=${NGINX_PORTS[1]}
PREFIX=$NGINX_PREFIX
HTTPS=https://127.0.0.1:$TLS_PORT
HTTP=http://127.0.0.1:$HTTP_PORT
SRC=$WWW/files/blob.bin
N=0

# try_mount NAME ARGS...: mounts with a fresh cache, compares the whole file
# and a few hundred random preads, unmounts.
try_mount() {
	local name=$1 mnt file
	shift
	N=$((N + 1))
	mnt=$T_TMP/mnt-$N
	mkdir -p "$mnt"
	if ! mount_pacefs -o "cache_dir=$T_TMP/cache-$N,read_timeout=20" "$@" "$mnt"; then
		t_fail "$name" "mount failed: $T_MOUNT_ERR"
		return 0
	fi
	file=$(find "$mnt" -maxdepth 1 -type f | head -n 1)
	t_check "$name: sequential bytes" "$READCMP" seq "$file" "$SRC"
	t_check "$name: random preads" "$READCMP" random "$file" "$SRC" 200 $N
	umount_pacefs "$mnt"
}

# requests PORT PATH: how many range GETs nginx logged for PATH on PORT.
requests() {
	awk -v p="$1" -v u="$2" '$1 == p && $2 == "GET" && $3 == u && $6 != "\"\"" { n++ } END { print n + 0 }' \
		"$PREFIX/access.log"
}

# HTTPS with the test's CA, then HTTP/2 on it.
try_mount "https with cafile" -o "cafile=$PKI/ca.pem" "$HTTPS/files/blob.bin"
h2=$(awk -v p="$TLS_PORT" '$1 == p && $6 != "\"\"" && $5 == "HTTP/2.0"' "$PREFIX/access.log" | wc -l)
if [ "$h2" -gt 0 ]; then
	t_pass "range requests over HTTP/2 ($h2)"
else
	t_fail "range requests over HTTP/2" "no HTTP/2.0 range request in the log: $(tail -n 3 "$PREFIX/access.log")"
fi
# Every range request pinned the validator.
unpinned=$(awk '$6 != "\"\"" && $7 == "\"\""' "$PREFIX/access.log" | wc -l)
t_eq "every range request carries If-Range" 0 "$unpinned"

# A certificate nobody vouches for is refused, with one line saying so.
rc=0
timeout 30 "$PACEFS" -o "cache_dir=$T_TMP/cache-bad" "$HTTPS/files/blob.bin" "$T_TMP/mnt-1" \
	</dev/null >/dev/null 2>"$T_TMP/tls.err" || rc=$?
if [ "$rc" -eq 1 ] && grep -qi 'certificate' "$T_TMP/tls.err" && ! is_mounted "$T_TMP/mnt-1"; then
	t_pass "unknown CA refused: $(cat "$T_TMP/tls.err")"
else
	t_fail "unknown CA refused" "exit $rc: $(cat "$T_TMP/tls.err")"
fi
try_mount "https with insecure" -o insecure "$HTTPS/files/blob.bin"
if grep -qi 'insecure' <<<"$T_MOUNT_ERR"; then
	t_pass "insecure is logged at mount"
else
	t_fail "insecure is logged at mount" "no line mentions it"
fi

# A redirect is followed once, at the probe; the transfers go to the final
# URL, and the file keeps the name the user gave.
before=$(requests "$HTTP_PORT" /moved/blob.bin)
try_mount "redirect" "$HTTP/moved/blob.bin"
t_eq "only the probe went to the redirecting URL" $((before + 1)) "$(requests "$HTTP_PORT" /moved/blob.bin)"

# A request header the origin requires, sent on every request.
rc=0
timeout 30 "$PACEFS" -o "cache_dir=$T_TMP/cache-noauth" "$HTTP/auth/blob.bin" "$T_TMP/mnt-1" \
	</dev/null >/dev/null 2>"$T_TMP/auth.err" || rc=$?
if [ "$rc" -eq 1 ] && grep -q '403' "$T_TMP/auth.err"; then
	t_pass "without the header: 403 named"
else
	t_fail "without the header: 403 named" "exit $rc: $(cat "$T_TMP/auth.err")"
fi
try_mount "with -o header" -o "header=X-Pacefs-Token: s3cret" "$HTTP/auth/blob.bin"
rc=0
timeout 30 "$PACEFS" -o "header=no colon here" "$HTTP/auth/blob.bin" "$T_TMP/mnt-1" \
	</dev/null >/dev/null 2>"$T_TMP/hdr.err" || rc=$?
if [ "$rc" -eq 1 ] && grep -q 'option header' "$T_TMP/hdr.err"; then
	t_pass "malformed header refused"
else
	t_fail "malformed header refused" "exit $rc: $(cat "$T_TMP/hdr.err")"
fi

# https never falls back to http: the redirect is refused with one line
# naming both URLs, and the header never travels in the clear.
before=$(awk -v p="$HTTP_PORT" '$1 == p && $3 == "/auth/blob.bin"' "$PREFIX/access.log" | wc -l)
rc=0
timeout 30 "$PACEFS" -o "cache_dir=$T_TMP/cache-down,cafile=$PKI/ca.pem" -o "header=X-Pacefs-Token: s3cret" \
	"$HTTPS/down/blob.bin" "$T_TMP/mnt-1" </dev/null >/dev/null 2>"$T_TMP/down.err" || rc=$?
after=$(awk -v p="$HTTP_PORT" '$1 == p && $3 == "/auth/blob.bin"' "$PREFIX/access.log" | wc -l)
if [ "$rc" -eq 1 ] && ! is_mounted "$T_TMP/mnt-1" && [ "$(wc -l <"$T_TMP/down.err")" -eq 1 ] &&
	grep -qF "refusing a redirect from https to http: $HTTPS/down/blob.bin -> $HTTP/auth/blob.bin" "$T_TMP/down.err"; then
	t_pass "https to http refused: $(cat "$T_TMP/down.err")"
else
	t_fail "https to http refused" "exit $rc: $(cat "$T_TMP/down.err")"
fi
t_eq "https to http: nothing sent over http" "$after" "$before"

# Two mirrors of one blob: both serve ranges. Four readers at cold
# positions at once keep four lanes busy, which the two sources share (a
# new sequential reader's first requests are large on loopback: one
# source alone may serve a 5 MiB file in a busy run).
a0=$(requests "$HTTP_PORT" /files/blob.bin)
b0=$(requests "$HTTP_PORT" /mirror2/blob.bin)
mnt=$T_TMP/mnt-mirrors
mkdir -p "$mnt"
if mount_pacefs -o "cache_dir=$T_TMP/cache-mirrors,read_timeout=20,lanes=4,speculate=off" \
	-o "mirror=$HTTP/mirror2/blob.bin" "$HTTP/files/blob.bin" "$mnt"; then
	pids=()
	for seed in 1 2 3 4; do
		"$READCMP" random "$mnt/blob.bin" "$SRC" 40 "$seed" >"$T_TMP/mirror$seed.out" 2>&1 &
		pids+=($!)
	done
	bad=0
	for pid in "${pids[@]}"; do wait "$pid" || bad=$((bad + 1)); done
	t_eq "two mirrors: four readers' random preads" 0 "$bad"
	t_check "two mirrors: sequential bytes" "$READCMP" seq "$mnt/blob.bin" "$SRC"
	umount_pacefs "$mnt"
else
	t_fail "two mirrors" "mount failed: $T_MOUNT_ERR"
fi
a1=$(requests "$HTTP_PORT" /files/blob.bin)
b1=$(requests "$HTTP_PORT" /mirror2/blob.bin)
if [ $((a1 - a0)) -gt 1 ] && [ $((b1 - b0)) -gt 1 ]; then
	t_pass "both mirrors served ranges ($((a1 - a0)) and $((b1 - b0)) requests)"
else
	t_fail "both mirrors served ranges" "primary $((a1 - a0)), mirror $((b1 - b0)) requests"
fi

# A mirror whose size disagrees is left out, with a log line, never used.
o0=$(requests "$HTTP_PORT" /other/blob.bin)
try_mount "disagreeing mirror" -o "mirror=$HTTP/other/blob.bin" "$HTTP/files/blob.bin"
o1=$(requests "$HTTP_PORT" /other/blob.bin)
t_eq "the disagreeing mirror got only its probe" 1 $((o1 - o0))
if grep -q "mirror $HTTP/other/blob.bin not used: its size" <<<"$T_MOUNT_ERR"; then
	t_pass "the disagreeing mirror is named in the log"
else
	t_fail "the disagreeing mirror is named in the log" "stderr: $T_MOUNT_ERR"
fi

proc_stop "$NGINX_PID"

# Requests sent ahead (fetch_lane_queue), through an origin 20 ms away.
FETCHQ=$(dirname "$READCMP")/fetchq
t_require_origin
if [ ! -x "$FETCHQ" ]; then
	t_fail "sent ahead" "fetchq not found at $FETCHQ (run make check)"
	t_done
fi
mkdir -p "$T_TMP/q"
cp "$WWW/files/blob.bin" "$T_TMP/q/b.bin"
o_start q --root "$T_TMP/q" --latency 20
# sent_ahead SCENARIO N: runs fetchq; prints its line, then the ranges the
# origin was asked for meanwhile, one per line, once it has logged N of them
# (it logs a request when its response ends; 5 s at most) and 0.3 s more, so
# that a request too many shows.
sent_ahead() {
	local n0 i
	n0=$(wc -l <"$T_TMP/q.log")
	"$FETCHQ" "$1" "$O_URL/b.bin" "$T_TMP/q/b.bin" || true
	for i in $(seq 1 50); do
		[ "$(($(wc -l <"$T_TMP/q.log") - n0))" -lt "$2" ] || break
		sleep 0.1
	done
	sleep 0.3
	tail -n +$((n0 + 1)) "$T_TMP/q.log" | awk '{ print $3 }'
}
out=$(sent_ahead promote 2)
t_eq "sent ahead, promoted: bytes in order" "$(head -n 1 <<<"$out")" "ok promote: 524288 bytes in order"
t_eq "sent ahead, promoted: asked once" "$(tail -n +2 <<<"$out" | sort | tr '\n' ' ' | sed 's/ $//')" "bytes=0-262143 bytes=262144-524287"
out=$(sent_ahead abandon 3)
t_eq "sent ahead, not promoted: none of its bytes" "$(head -n 1 <<<"$out")" "ok abandon: 524288 bytes in order"
t_eq "sent ahead, not promoted: it was sent" "$(grep -c '^bytes=262144-524287$' <<<"$out" || true)" 1
out=$(sent_ahead cancel 0)
t_eq "sent ahead, lane cancelled: no bytes" "$(head -n 1 <<<"$out")" "ok cancel: 0 bytes in order"
t_done

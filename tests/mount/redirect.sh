#!/usr/bin/env bash
# redirect.sh: credentials stay with the origin they were given for: a
# redirect to another origin is followed on every request without the
# configured headers or the URL's userinfo, one that stays on the origin is
# pinned with them; redirect loops end in one line; a request sent ahead
# through a redirect is still promoted, never asked twice; a directory
# index that redirects lists the files where it was redirected to.
set -euo pipefail
# shellcheck source=tests/lib.sh
source "$(dirname "$0")/../lib.sh"
t_require_mount
t_require_origin

WWW=$T_TMP/www
mkdir -p "$WWW/cdn" "$WWW/real/same" "$WWW/loop"
SIZE=$((3 * 1048576 + 777))
gen_file "$WWW/cdn/f.bin" "$SIZE" 61
cp "$WWW/cdn/f.bin" "$WWW/real/same/f.bin"
cp "$WWW/cdn/f.bin" "$WWW/loop/f.bin"
TOKEN=tok-$RANDOM$RANDOM
BASIC="Basic%20$(printf 'reader:pw%s' "$TOKEN" | base64 -w0)"

# B: the other origin (a CDN). A: the origin the credentials are for; it
# sends /cdn/ to B, /same/ to itself under /real/, /loop/ to itself again.
o_start b --root "$WWW" --latency 5 --log-header X-Token --log-header Authorization
B=$O_URL
# A's own rules name its port: it is picked beforehand.
PORT_A=$(free_port)
A=http://127.0.0.1:$PORT_A
o_start a --root "$WWW" --listen "127.0.0.1:$PORT_A" --latency 5 \
	--log-header X-Token --log-header Authorization \
	--fault "/cdn/*:redirect:$B" --fault "/same/*:redirect:$A/real" \
	--fault "/loop/*:redirect:$A"
AUTH_URL_A=http://reader:pw$TOKEN@127.0.0.1:$PORT_A
N=0

# mount_read NAME URL ARGS...: mounts URL with a fresh cache and the token
# header, compares every byte with SRC, unmounts.
mount_read() {
	local name=$1 url=$2 mnt
	shift 2
	N=$((N + 1))
	mnt=$T_TMP/mnt-$N
	mkdir -p "$mnt"
	if ! mount_pacefs -o "cache_dir=$T_TMP/cache-$N,lanes=4,read_timeout=20" \
		-o "header=X-Token: $TOKEN" "$@" "$url" "$mnt"; then
		t_fail "$name: mount" "$T_MOUNT_ERR"
		return 0
	fi
	t_check "$name: sequential bytes" "$READCMP" seq "$mnt/f.bin" "$WWW/cdn/f.bin"
	t_check "$name: random preads" "$READCMP" random "$mnt/f.bin" "$WWW/cdn/f.bin" 100 "$N"
	umount_pacefs "$mnt"
}

# --- another origin: every request goes through the redirect, and only A
# hears the credentials.
a0=$(wc -l <"$T_TMP/a.log")
b0=$(wc -l <"$T_TMP/b.log")
mount_read "cross-origin redirect" "$AUTH_URL_A/cdn/f.bin"
a_new=$(tail -n +$((a0 + 1)) "$T_TMP/a.log")
b_new=$(tail -n +$((b0 + 1)) "$T_TMP/b.log")
t_eq "B never got the header" "$(grep -c "$TOKEN" <<<"$b_new" || true)" 0
t_eq "B never got the userinfo (Basic auth)" "$(awk '$8 != "-"' <<<"$b_new" | wc -l)" 0
t_eq "A got the header and the userinfo on every request" \
	"$(awk -v t="$TOKEN" -v b="$BASIC" '$7 != t || $8 != b' <<<"$a_new" | wc -l)" 0
ranges_a=$(awk '$3 != "bytes=0-0"' <<<"$a_new" | wc -l)
ranges_b=$(awk '$3 != "bytes=0-0" && $4 == 206' <<<"$b_new" | wc -l)
if [ "$ranges_a" -gt 1 ] && [ "$ranges_a" -eq "$ranges_b" ]; then
	t_pass "each range request started at A ($ranges_a), then B served it"
else
	t_fail "each range request started at A" "A saw $ranges_a range requests, B served $ranges_b"
fi

# --- the same origin: pinned after the probe, with the credentials.
a0=$(wc -l <"$T_TMP/a.log")
mount_read "same-origin redirect" "$AUTH_URL_A/same/f.bin"
a_new=$(tail -n +$((a0 + 1)) "$T_TMP/a.log")
t_eq "same origin: only the probe asked the redirecting path" \
	"$(awk '$2 ~ /^\/same\//' <<<"$a_new" | wc -l)" 1
t_eq "same origin: the pinned URL got the header and the userinfo" \
	"$(awk -v t="$TOKEN" -v b="$BASIC" '$2 ~ /^\/real\// && ($7 != t || $8 != b)' <<<"$a_new" | wc -l)" 0

# --- a loop ends in one line naming it, nothing mounted.
rc=0
mkdir -p "$T_TMP/mnt-loop"
timeout 30 "$PACEFS" -o "cache_dir=$T_TMP/cache-loop" "$AUTH_URL_A/loop/f.bin" "$T_TMP/mnt-loop" \
	</dev/null >/dev/null 2>"$T_TMP/loop.err" || rc=$?
if [ "$rc" -eq 1 ] && grep -q 'too many redirects' "$T_TMP/loop.err" &&
	[ "$(wc -l <"$T_TMP/loop.err")" -eq 1 ] && ! grep -q "$TOKEN" "$T_TMP/loop.err" &&
	! is_mounted "$T_TMP/mnt-loop"; then
	t_pass "redirect loop refused: $(cat "$T_TMP/loop.err")"
else
	t_fail "redirect loop refused" "exit $rc: $(cat "$T_TMP/loop.err")"
fi

# --- requests sent ahead, through the redirect: promoted, asked once.
FETCHQ=$(dirname "$READCMP")/fetchq
if [ -x "$FETCHQ" ]; then
	b0=$(wc -l <"$T_TMP/b.log")
	out=$("$FETCHQ" promote "$A/cdn/f.bin" "$WWW/cdn/f.bin" 2>&1 || true)
	for _ in $(seq 1 50); do
		[ "$(($(wc -l <"$T_TMP/b.log") - b0))" -lt 2 ] || break
		sleep 0.1
	done
	sleep 0.3
	t_eq "sent ahead through a redirect: bytes in order" "$out" "ok promote: 524288 bytes in order"
	t_eq "sent ahead through a redirect: each range asked once" \
		"$(tail -n +$((b0 + 1)) "$T_TMP/b.log" | awk '{ print $3 }' | sort | tr '\n' ' ' | sed 's/ $//')" \
		"bytes=0-262143 bytes=262144-524287"
else
	t_fail "sent ahead through a redirect" "fetchq not found at $FETCHQ (run make check)"
fi

# --- a directory index that redirects: its links are read against where
# it was redirected to.
mkdir -p "$WWW/idx/new"
gen_file "$WWW/idx/new/g.bin" 200001 62
origin_start "$WWW/idx" 'autoindex on; autoindex_exact_size on; location = /old/ { return 302 /new/; }'
MNT=$T_TMP/mnt-idx
mkdir -p "$MNT"
if mount_pacefs -o "cache_dir=$T_TMP/cache-idx" "$ORIGIN_URL/old/" "$MNT"; then
	t_eq "redirected index: its file is listed" "$(ls "$MNT")" "g.bin"
	t_check "redirected index: the file's bytes" cmp "$MNT/g.bin" "$WWW/idx/new/g.bin"
	umount_pacefs "$MNT"
else
	t_fail "redirected index: mount" "$T_MOUNT_ERR"
fi
t_done

#!/usr/bin/env bash
# secrets.sh: a password in the URL's userinfo and a token in a header reach
# the origin and nothing else: not the log, the extended attributes, pacefs
# status (text or JSON), pacefs cache ls, the cache's data file, nor the
# daemon's command line; -o header_file= keeps the token off the command
# line from the start, is refused when others may read it, and is read again
# when rotated under a streaming reader with the old token revoked.
set -euo pipefail
# shellcheck source=tests/lib.sh
source "$(dirname "$0")/../lib.sh"
t_require_mount
t_require_origin

WWW=$T_TMP/www
mkdir -p "$WWW"
SIZE=$((2 * 1048576 + 99))
gen_file "$WWW/f.bin" "$SIZE" 31
gen_file "$WWW/g.bin" "$SIZE" 32
PW=pw$RANDOM$RANDOM$RANDOM
TOKEN=tok$RANDOM$RANDOM$RANDOM
BASIC="Basic%20$(printf 'reader:%s' "$PW" | base64 -w0)"
o_start o --root "$WWW" --log-header X-Token --log-header Authorization
HOSTPORT=${O_URL#http://}
URL=http://reader:$PW@$HOSTPORT/f.bin
CACHE=$T_TMP/cache

# leaks NAME FILE: PASS when FILE holds neither secret.
leaks() {
	local n
	n=$(grep -a -c -e "$PW" -e "$TOKEN" "$2" || true)
	t_eq "$1: no secret in it" "$n" 0
}

# --- a daemon mount, at debug level so that every request is logged.
MNT=$T_TMP/mnt
mkdir -p "$MNT"
if ! mount_pacefs -o "cache_dir=$CACHE,log_level=debug,lanes=4" -o "header=X-Token: $TOKEN" \
	-o "mirror=http://reader:$PW@$HOSTPORT/f.bin" "$URL" "$MNT"; then
	t_fail "mount" "$T_MOUNT_ERR"
	t_done
fi
t_check "bytes read through the mount" cmp "$MNT/f.bin" "$WWW/f.bin"
t_eq "the origin got the header and the userinfo on every request" \
	"$(awk -v t="$TOKEN" -v b="$BASIC" '$7 != t || $8 != b' "$T_TMP/o.log" | wc -l)" 0
pid=$(t_cmdline_pid "$MNT" || true)
if [ -n "$pid" ]; then
	tr '\0' ' ' <"/proc/$pid/cmdline" >"$T_TMP/cmdline"
	leaks "the daemon's /proc/PID/cmdline" "$T_TMP/cmdline"
	if grep -q 'X-Token:' "$T_TMP/cmdline"; then
		t_pass "the daemon's command line keeps the header's name"
	else
		t_fail "the daemon's command line keeps the header's name" "$(cat "$T_TMP/cmdline")"
	fi
else
	t_fail "the daemon's /proc/PID/cmdline" "no process names $MNT"
fi
getfattr --absolute-names -d -m - "$MNT/f.bin" >"$T_TMP/xattr-file" 2>&1 || true
getfattr --absolute-names -d -m - "$MNT" >"$T_TMP/xattr-root" 2>&1 || true
leaks "the file's extended attributes" "$T_TMP/xattr-file"
leaks "the root's extended attributes (status)" "$T_TMP/xattr-root"
t_eq "xattr url: the URL and the mirror without userinfo" \
	"$(getfattr --absolute-names --only-values -n user.pacefs.url "$MNT/f.bin")" \
	"$(printf '%s\n%s' "$O_URL/f.bin" "$O_URL/f.bin")"
"$PACEFS" status "$MNT" >"$T_TMP/status.txt" 2>&1 || true
"$PACEFS" status --json "$MNT" >"$T_TMP/status.json" 2>&1 || true
leaks "pacefs status" "$T_TMP/status.txt"
leaks "pacefs status --json" "$T_TMP/status.json"
if grep -qF "$O_URL/f.bin" "$T_TMP/status.json"; then
	t_pass "pacefs status --json shows the URL"
else
	t_fail "pacefs status --json shows the URL" "$(head -c 300 "$T_TMP/status.json")"
fi
umount_pacefs "$MNT"
"$PACEFS" cache ls --cache-dir "$CACHE" >"$T_TMP/ls.txt" 2>&1 || true
leaks "pacefs cache ls" "$T_TMP/ls.txt"
if grep -qF "$O_URL/f.bin (with userinfo)" "$T_TMP/ls.txt"; then
	t_pass "pacefs cache ls: the URL, said to carry userinfo"
else
	t_fail "pacefs cache ls: the URL, said to carry userinfo" "$(cat "$T_TMP/ls.txt")"
fi
leaks "the cache's data.mdb" "$CACHE/data.mdb"

# --- the foreground log, at debug level, through a probe failure too.
mkdir -p "$T_TMP/mnt-fg"
if fg_mount "$T_TMP/fg.log" -o "cache_dir=$T_TMP/cache-fg,log_level=debug" -o "header=X-Token: $TOKEN" \
	-o "mirror=http://reader:$PW@$HOSTPORT/missing.bin" "$URL" "$T_TMP/mnt-fg"; then
	t_check "foreground: bytes" cmp "$T_TMP/mnt-fg/f.bin" "$WWW/f.bin"
	umount_pacefs "$T_TMP/mnt-fg"
	wait "$FG_PID" 2>/dev/null || true
	if grep -q 'GET http://' "$T_TMP/fg.log" && grep -q 'missing.bin' "$T_TMP/fg.log"; then
		t_pass "foreground: the log names the URLs"
	else
		t_fail "foreground: the log names the URLs" "$(tail -n 3 "$T_TMP/fg.log")"
	fi
	leaks "the log" "$T_TMP/fg.log"
else
	t_fail "foreground mount" "$(tail -n 3 "$T_TMP/fg.log")"
fi
rc=0
timeout 30 "$PACEFS" -o "cache_dir=$CACHE" "http://reader:$PW@$HOSTPORT/none.bin" "$T_TMP/mnt-fg" \
	</dev/null >/dev/null 2>"$T_TMP/none.err" || rc=$?
if [ "$rc" -eq 1 ] && grep -q "$O_URL/none.bin: HTTP 404" "$T_TMP/none.err"; then
	t_pass "a refused URL is named without its userinfo: $(cat "$T_TMP/none.err")"
else
	t_fail "a refused URL is named without its userinfo" "exit $rc: $(cat "$T_TMP/none.err")"
fi
leaks "the error line" "$T_TMP/none.err"

# --- -o header_file=: the token never on the command line.
printf '# for the test origin\nX-Token: %s\n' "$TOKEN" >"$T_TMP/headers"
chmod 600 "$T_TMP/headers"
n0=$(wc -l <"$T_TMP/o.log")
MNT2=$T_TMP/mnt-hf
mkdir -p "$MNT2"
if mount_pacefs -o "cache_dir=$T_TMP/cache-hf,header_file=$T_TMP/headers" "$O_URL/g.bin" "$MNT2"; then
	t_check "header_file: bytes" cmp "$MNT2/g.bin" "$WWW/g.bin"
	t_eq "header_file: the origin got the header on every request" \
		"$(tail -n +$((n0 + 1)) "$T_TMP/o.log" | awk -v t="$TOKEN" '$7 != t' | wc -l)" 0
	umount_pacefs "$MNT2"
else
	t_fail "header_file: mount" "$T_MOUNT_ERR"
fi
chmod 644 "$T_TMP/headers"
rc=0
timeout 30 "$PACEFS" -o "cache_dir=$T_TMP/cache-hf,header_file=$T_TMP/headers" "$O_URL/g.bin" "$MNT2" \
	</dev/null >/dev/null 2>"$T_TMP/hf.err" || rc=$?
if [ "$rc" -eq 1 ] && [ "$(wc -l <"$T_TMP/hf.err")" -eq 1 ] &&
	grep -q "option header_file: $T_TMP/headers: mode 0644" "$T_TMP/hf.err" && ! is_mounted "$MNT2"; then
	t_pass "header_file readable by others: refused: $(cat "$T_TMP/hf.err")"
else
	t_fail "header_file readable by others: refused" "exit $rc: $(cat "$T_TMP/hf.err")"
fi

# --- -o header_file= rotated under a streaming reader: an origin that
# accepts only the current token (--require-header), the file rewritten
# mid-read with a new one and the old one revoked at once, before the
# mount's next look at the file: requests refused (401) read the file
# again and are sent once more; no read fails.
TOKA=rotA$RANDOM$RANDOM$RANDOM
TOKB=rotB$RANDOM$RANDOM$RANDOM
gen_file "$WWW/big.bin" $((24 * 1048576)) 34
printf 'X-Token: %s\n' "$TOKA" >"$T_TMP/accept"
o_start rot --root "$WWW" --rate 1M --log-header X-Token --require-header "$T_TMP/accept"
printf '# rotated\nX-Token: %s\n' "$TOKA" >"$T_TMP/rot-headers"
chmod 600 "$T_TMP/rot-headers"
MNT3=$T_TMP/mnt-rot
mkdir -p "$MNT3"
if fg_mount "$T_TMP/rot-mount.log" -o "cache_dir=$T_TMP/cache-rot,header_file=$T_TMP/rot-headers,lanes=4" \
	"$O_URL/big.bin" "$MNT3"; then
	"$READCMP" seq "$MNT3/big.bin" "$WWW/big.bin" >"$T_TMP/rot.cmp" 2>&1 &
	reader=$!
	sleep 1
	printf '# rotated\nX-Token: %s\n' "$TOKB" >"$T_TMP/rot-headers.new"
	chmod 600 "$T_TMP/rot-headers.new"
	mv "$T_TMP/rot-headers.new" "$T_TMP/rot-headers"
	printf 'X-Token: %s\n' "$TOKB" >"$T_TMP/accept.new"
	mv "$T_TMP/accept.new" "$T_TMP/accept"
	mark=$(wc -l <"$T_TMP/rot.log")
	rc=0
	wait "$reader" || rc=$?
	if [ "$rc" -eq 0 ] && grep -q "seq: $((24 * 1048576)) bytes equal" "$T_TMP/rot.cmp"; then
		t_pass "header_file rotated under a streaming reader: no failed read ($(cat "$T_TMP/rot.cmp"))"
	else
		t_fail "header_file rotated under a streaming reader" "exit $rc: $(cat "$T_TMP/rot.cmp")"
	fi
	# The log has a line per response once it is sent: transfers under
	# way at the revocation end with the old token, later ones carry the
	# new one.
	after=$(tail -n +$((mark + 1)) "$T_TMP/rot.log")
	ok_new=$(awk -v t="$TOKB" '$7 == t && $4 == 206' <<<"$after" | wc -l)
	refused=$(awk -v t="$TOKA" '$7 == t && $4 == 401' <<<"$after" | wc -l)
	if [ "$ok_new" -gt 0 ]; then
		t_pass "after the rotation the origin served $ok_new requests with the new token (and refused $refused with the old one)"
	else
		t_fail "after the rotation the origin served requests with the new token" "$after"
	fi
	umount_pacefs "$MNT3"
	wait "$FG_PID" 2>/dev/null || true
	t_eq "the rotation's mount log: no token in it" \
		"$(grep -a -c -e "$TOKA" -e "$TOKB" "$T_TMP/rot-mount.log" || true)" 0
else
	t_fail "header_file rotation: mount" "$(tail -n 3 "$T_TMP/rot-mount.log")"
fi
t_done

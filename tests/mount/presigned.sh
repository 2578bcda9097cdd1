#!/usr/bin/env bash
# presigned.sh: a presigned URL's signature and token (X-Amz-Signature,
# X-Amz-Security-Token, X-Amz-Credential, sig, access_token) reach the
# origin as given and are shown masked, names kept, everywhere else: the
# JSON log's lines (the "mounted" one too), the text log, the xattr
# user.pacefs.url, pacefs status (text and --json), an error line, pacefs
# cache ls, the cache's data file and the process's command line;
# -o show_signatures shows them; a URL given as "-" comes from -o url_file=
# (mode 0600) or standard input and never is an argument of the daemon.
set -euo pipefail
# shellcheck source=tests/lib.sh
source "$(dirname "$0")/../lib.sh"
t_require_mount
t_require_origin

WWW=$T_TMP/www
mkdir -p "$WWW"
SIZE=$((1048576 + 77))
gen_file "$WWW/f.bin" "$SIZE" 41
SIG=sig$RANDOM$RANDOM$RANDOM
TOK=tok$RANDOM$RANDOM$RANDOM
KEYID=AKIA$RANDOM$RANDOM
AZ=az$RANDOM$RANDOM
OT=ot$RANDOM$RANDOM
o_start o --root "$WWW"
Q="X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=$KEYID%2F20240101%2Fus-east-1%2Fs3%2Faws4_request"
Q="$Q&X-Amz-Date=20240101T000000Z&X-Amz-Expires=3600&X-Amz-SignedHeaders=host"
Q="$Q&X-Amz-Security-Token=$TOK&X-Amz-Signature=$SIG&sig=$AZ&access_token=$OT"
URL="$O_URL/f.bin?$Q"
SHOWN="$O_URL/f.bin?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=***"
SHOWN="$SHOWN&X-Amz-Date=20240101T000000Z&X-Amz-Expires=3600&X-Amz-SignedHeaders=host"
SHOWN="$SHOWN&X-Amz-Security-Token=***&X-Amz-Signature=***&sig=***&access_token=***"

# leaks NAME FILE: PASS when FILE holds no secret of the query.
leaks() {
	local n
	n=$(grep -a -c -e "$SIG" -e "$TOK" -e "$KEYID" -e "$AZ" -e "$OT" "$2" || true)
	t_eq "$1: no signature or token in it" "$n" 0
}

# shows NAME FILE: PASS when FILE shows the URL masked.
shows() {
	if grep -qF -- "$SHOWN" "$2"; then
		t_pass "$1: the URL, its signed values masked"
	else
		t_fail "$1: the URL, its signed values masked" "$(head -c 600 "$2")"
	fi
}

# --- the URL as an argument, a JSON log at debug level.
MNT=$T_TMP/mnt
mkdir -p "$MNT"
if fg_mount "$T_TMP/json.log" -o "cache_dir=$T_TMP/cache,log_format=json,log_level=debug" "$URL" "$MNT"; then
	t_check "bytes read through the mount" cmp "$MNT/f.bin" "$WWW/f.bin"
	t_eq "the origin got the signature on every request" \
		"$(awk -v s="$SIG" 'index($2, "X-Amz-Signature=" s "&") == 0' "$T_TMP/o.log" | wc -l)" 0
	tr '\0' ' ' <"/proc/$FG_PID/cmdline" >"$T_TMP/cmdline"
	leaks "the process's /proc/PID/cmdline" "$T_TMP/cmdline"
	getfattr --absolute-names --only-values -n user.pacefs.url "$MNT/f.bin" >"$T_TMP/xattr-url" 2>&1 || true
	getfattr --absolute-names -d -m - "$MNT/f.bin" >"$T_TMP/xattr-file" 2>&1 || true
	getfattr --absolute-names -d -m - "$MNT" >"$T_TMP/xattr-root" 2>&1 || true
	leaks "user.pacefs.url" "$T_TMP/xattr-url"
	shows "user.pacefs.url" "$T_TMP/xattr-url"
	leaks "the file's extended attributes" "$T_TMP/xattr-file"
	leaks "the root's extended attributes (status)" "$T_TMP/xattr-root"
	"$PACEFS" status "$MNT" >"$T_TMP/status.txt" 2>&1 || true
	"$PACEFS" status --json "$MNT" >"$T_TMP/status.json" 2>&1 || true
	leaks "pacefs status" "$T_TMP/status.txt"
	leaks "pacefs status --json" "$T_TMP/status.json"
	shows "pacefs status --json" "$T_TMP/status.json"
	umount_pacefs "$MNT"
	wait "$FG_PID" 2>/dev/null || true
	leaks "the JSON log" "$T_TMP/json.log"
	if grep '"message":"mounted ' "$T_TMP/json.log" | grep -qF -- "$SHOWN"; then
		t_pass "the JSON log's \"mounted\" line shows the URL masked"
	else
		t_fail "the JSON log's \"mounted\" line shows the URL masked" \
			"$(grep -m1 mounted "$T_TMP/json.log" | head -c 600)"
	fi
else
	t_fail "mount with a presigned URL" "$(tail -n 3 "$T_TMP/json.log")"
fi
"$PACEFS" cache ls --cache-dir "$T_TMP/cache" >"$T_TMP/ls.txt" 2>&1 || true
leaks "pacefs cache ls" "$T_TMP/ls.txt"
if grep -qF "$SHOWN (signed)" "$T_TMP/ls.txt"; then
	t_pass "pacefs cache ls: the URL masked, said to be signed"
else
	t_fail "pacefs cache ls: the URL masked, said to be signed" "$(cat "$T_TMP/ls.txt")"
fi
leaks "the cache's data.mdb" "$T_TMP/cache/data.mdb"

# --- an error line: the text log of a refused URL.
rc=0
timeout 30 "$PACEFS" -o "cache_dir=$T_TMP/cache" "$O_URL/none.bin?$Q" "$MNT" \
	</dev/null >/dev/null 2>"$T_TMP/none.err" || rc=$?
leaks "the error line" "$T_TMP/none.err"
if [ "$rc" -eq 1 ] && grep -q "none.bin?.*X-Amz-Signature=\*\*\*.*HTTP 404" "$T_TMP/none.err"; then
	t_pass "a refused URL is named with its signature masked: $(cut -c1-160 "$T_TMP/none.err")"
else
	t_fail "a refused URL is named with its signature masked" "exit $rc: $(cat "$T_TMP/none.err")"
fi

# --- -o show_signatures: the user asked to see them.
if fg_mount "$T_TMP/show.log" -o "cache_dir=$T_TMP/cache,show_signatures" "$URL" "$MNT"; then
	if getfattr --absolute-names --only-values -n user.pacefs.url "$MNT/f.bin" 2>/dev/null | grep -qF "X-Amz-Signature=$SIG"; then
		t_pass "show_signatures: user.pacefs.url shows the signature"
	else
		t_fail "show_signatures: user.pacefs.url shows the signature" \
			"$(getfattr --absolute-names --only-values -n user.pacefs.url "$MNT/f.bin" 2>&1)"
	fi
	tr '\0' ' ' <"/proc/$FG_PID/cmdline" >"$T_TMP/cmdline-show"
	leaks "show_signatures: the process's /proc/PID/cmdline" "$T_TMP/cmdline-show"
	umount_pacefs "$MNT"
	wait "$FG_PID" 2>/dev/null || true
	if grep -qF "X-Amz-Signature=$SIG" "$T_TMP/show.log"; then
		t_pass "show_signatures: the log shows the signature"
	else
		t_fail "show_signatures: the log shows the signature" "$(head -n 3 "$T_TMP/show.log")"
	fi
else
	t_fail "mount with show_signatures" "$(tail -n 3 "$T_TMP/show.log")"
fi

# --- the URL from -o url_file=, a daemon: never an argument.
printf '# a presigned URL\n%s\n' "$URL" >"$T_TMP/url"
chmod 600 "$T_TMP/url"
if mount_pacefs -o "cache_dir=$T_TMP/cache-file,url_file=$T_TMP/url" - "$MNT"; then
	t_check "url_file: bytes" cmp "$MNT/f.bin" "$WWW/f.bin"
	pid=$(t_cmdline_pid "$MNT" || true)
	if [ -n "$pid" ]; then
		tr '\0' ' ' <"/proc/$pid/cmdline" >"$T_TMP/cmdline-file"
		leaks "url_file: the daemon's /proc/PID/cmdline" "$T_TMP/cmdline-file"
		t_eq "url_file: no URL among the daemon's arguments" \
			"$(grep -c -e 'f\.bin' -e 'X-Amz' "$T_TMP/cmdline-file" || true)" 0
	else
		t_fail "url_file: the daemon's /proc/PID/cmdline" "no process names $MNT"
	fi
	umount_pacefs "$MNT"
else
	t_fail "url_file: mount" "$T_MOUNT_ERR"
fi
chmod 644 "$T_TMP/url"
rc=0
timeout 30 "$PACEFS" -o "cache_dir=$T_TMP/cache-file,url_file=$T_TMP/url" - "$MNT" \
	</dev/null >/dev/null 2>"$T_TMP/url.err" || rc=$?
if [ "$rc" -eq 1 ] && grep -q "option url_file: $T_TMP/url: mode 0644" "$T_TMP/url.err" && ! is_mounted "$MNT"; then
	t_pass "url_file readable by others: refused: $(cat "$T_TMP/url.err")"
else
	t_fail "url_file readable by others: refused" "exit $rc: $(cat "$T_TMP/url.err")"
fi

# --- the URL on standard input ("-"), a daemon.
T_MOUNTS+=("$MNT")
rc=0
printf '%s\n' "$URL" | timeout 60 "$PACEFS" -o "cache_dir=$T_TMP/cache-stdin" - "$MNT" \
	>/dev/null 2>"$T_TMP/stdin.err" || rc=$?
if [ "$rc" -eq 0 ] && mount_wait "$MNT" "" 5; then
	t_check "stdin: bytes" cmp "$MNT/f.bin" "$WWW/f.bin"
	pid=$(t_cmdline_pid "$MNT" || true)
	if [ -n "$pid" ]; then
		tr '\0' ' ' <"/proc/$pid/cmdline" >"$T_TMP/cmdline-stdin"
		t_eq "stdin: no URL among the daemon's arguments" \
			"$(grep -c -e 'f\.bin' -e 'X-Amz' -e "$SIG" "$T_TMP/cmdline-stdin" || true)" 0
	else
		t_fail "stdin: the daemon's /proc/PID/cmdline" "no process names $MNT"
	fi
	umount_pacefs "$MNT"
else
	t_fail "stdin: mount" "exit $rc: $(cat "$T_TMP/stdin.err")"
fi
t_done

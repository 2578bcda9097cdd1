#!/usr/bin/env bash
# escape.sh: names, ETags and reasons that servers and manifests choose
# reach the log, the mount errors and `pacefs status` with every control
# byte escaped (\xNN in text, \u escapes in JSON), and a name that is not
# UTF-8 does not break `pacefs status`.
set -euo pipefail
# shellcheck source=tests/lib.sh
source "$(dirname "$0")/../lib.sh"
t_require_mount
t_require_origin

# raw FILE: succeeds when FILE is not UTF-8 or holds a control character
# other than the line ends (C0 but \n, DEL, C1).
raw() {
	python3 -c '
import sys
try:
    t = open(sys.argv[1], "rb").read().decode("utf-8")
except UnicodeDecodeError:
    sys.exit(0)
sys.exit(0 if any(c != "\n" and (c < " " or "\x7f" <= c <= "\x9f") for c in t) else 1)
' "$1"
}

WWW=$T_TMP/www
mkdir -p "$WWW/idx" "$WWW/etag" "$WWW/encx"
gen_file "$T_TMP/src.bin" 300000 74
RED=$'red\x1b[31mname\x1b[0m.bin'
CSI=$'c1\xc2\x9b2Jname.bin'
LATIN=$'caf\xe9.bin'
GONE=$'gone\x1b]0;pwned\x07.bin'
for n in "$RED" "$CSI" "$LATIN" "$GONE" plain.bin; do
	ln "$T_TMP/src.bin" "$WWW/idx/$n"
done
ln "$T_TMP/src.bin" "$WWW/etag/f.bin"
ln "$T_TMP/src.bin" "$WWW/encx/f.bin"
ETAG=$'"e\x1b[2J\x01"'
o_start esc --root "$WWW" --autoindex \
	--fault '/idx/gone*:status:404' \
	--fault "/etag/*:etag:$ETAG:1" \
	--fault "/encx/*:encoding:"$'\x1b[31mgzip\x9b'
URL=$O_URL

# --- a directory index of names with escape sequences ----------------------
MNT=$T_TMP/mnt-idx
LOG=$T_TMP/idx.log
mkdir -p "$MNT"
fg_mount "$LOG" -o "cache_dir=$T_TMP/cache-idx" "$URL/idx/" "$MNT"
t_eq "names as listed (byte for byte)" "$(ls "$MNT" | LC_ALL=C sort | od -An -c | tr -s ' \n' ' ')" \
	"$(printf '%s\n' "$RED" "$CSI" "$LATIN" "$GONE" plain.bin | LC_ALL=C sort | od -An -c | tr -s ' \n' ' ')"
for n in "$RED" "$CSI" "$LATIN"; do
	if ! cmp -s "$MNT/$n" "$T_TMP/src.bin"; then
		t_fail "a file with control bytes in its name reads" "$(printf '%q' "$n")"
	fi
done
t_pass "files with control bytes and Latin-1 in their names read"
if cat "$MNT/$GONE" >/dev/null 2>&1; then
	t_fail "a 404 behind an escape-sequence name" "the read succeeded"
fi
if grep -aqF 'gone\x1b]0;pwned\x07.bin: cannot open' "$LOG" && ! raw "$LOG"; then
	t_pass "the log escapes the name: $(grep -a -m1 'cannot open' "$LOG" | cut -c1-120)"
else
	t_fail "the log escapes the name" "$(grep -a 'gone' "$LOG" | od -c | head -n 5)"
fi

"$PACEFS" status "$MNT" >"$T_TMP/status.txt" 2>&1 || true
if grep -aqF 'red\x1b[31mname\x1b[0m.bin' "$T_TMP/status.txt" &&
	grep -aqF 'c1\xc2\x9b2Jname.bin' "$T_TMP/status.txt" &&
	grep -aqF 'caf' "$T_TMP/status.txt" && ! raw "$T_TMP/status.txt"; then
	t_pass "pacefs status: names escaped"
else
	t_fail "pacefs status: names escaped" "$(od -c "$T_TMP/status.txt" | head -n 8)"
fi
"$PACEFS" status --json "$MNT" >"$T_TMP/status.json" 2>&1 || true
if ! raw "$T_TMP/status.json" &&
	python3 - "$T_TMP/status.json" "$RED" "$CSI" <<'EOF'; then
import json, os, sys
doc = json.load(open(sys.argv[1], encoding="utf-8"))
paths = {f["path"] for f in doc["files"]}
want = {os.fsdecode(os.fsencode(a)) for a in sys.argv[2:]} | {"caf\ufffd.bin"}
sys.exit(0 if want <= paths else "paths %r, want %r" % (paths, want))
EOF
	t_pass "pacefs status --json: valid JSON, control bytes as \\u escapes, names exact"
else
	t_fail "pacefs status --json" "$(head -c 400 "$T_TMP/status.json" | od -c | head -n 8)"
fi
umount_pacefs "$MNT"

# --- an ETag with control bytes ---------------------------------------------
# The first probe sees a plain ETag; the remount's sees ETAG, and says so.
MNT=$T_TMP/mnt-etag
mkdir -p "$MNT"
LOG=$T_TMP/etag1.log
fg_mount "$LOG" -o "cache_dir=$T_TMP/cache-etag" "$URL/etag/f.bin" "$MNT"
umount_pacefs "$MNT"
LOG=$T_TMP/etag2.log
fg_mount "$LOG" -o "cache_dir=$T_TMP/cache-etag" "$URL/etag/f.bin" "$MNT"
t_check "an ETag with control bytes: every byte" cmp "$MNT/f.bin" "$T_TMP/src.bin"
if grep -aqF -- "-> '\"e\\x1b[2J\\x01\"'" "$LOG" && ! raw "$LOG"; then
	t_pass "the log escapes the ETag: $(grep -a -m1 'changed on the origin' "$LOG" | cut -c1-200)"
else
	t_fail "the log escapes the ETag" "$(od -c "$LOG" | head -n 8)"
fi
umount_pacefs "$MNT"

# --- a manifest's names ------------------------------------------------------
MNT=$T_TMP/mnt-man
mkdir -p "$MNT"
python3 - "$URL" >"$T_TMP/m.json" <<'EOF'
import json, sys
u = sys.argv[1]
print(json.dumps({"version": 1, "files": [
    {"path": "dir\u001b[7m/ok\u009b.bin", "urls": [u + "/idx/plain.bin"]},
    {"path": "miss\u001b[5m\r.bin", "urls": [u + "/idx/missing.bin"]},
]}))
EOF
LOG=$T_TMP/man.log
fg_mount "$LOG" -o "cache_dir=$T_TMP/cache-man" "$T_TMP/m.json" "$MNT"
t_check "a manifest name with control bytes: every byte" cmp "$MNT/"$'dir\x1b[7m'/$'ok\xc2\x9b.bin' "$T_TMP/src.bin"
cat "$MNT/"$'miss\x1b[5m\r.bin' >/dev/null 2>&1 || true
"$PACEFS" status "$MNT" >"$T_TMP/mstatus.txt" 2>&1 || true
if grep -aqF 'miss\x1b[5m\x0d.bin: cannot open' "$LOG" && ! raw "$LOG" &&
	grep -aqF 'dir\x1b[7m/ok\xc2\x9b.bin' "$T_TMP/mstatus.txt" && ! raw "$T_TMP/mstatus.txt"; then
	t_pass "a manifest's names: escaped in the log and in pacefs status"
else
	t_fail "a manifest's names escaped" "$(od -c "$LOG" | head -n 6) / $(od -c "$T_TMP/mstatus.txt" | head -n 4)"
fi
umount_pacefs "$MNT"

# --- errors at mount quote what the server sent -------------------------------
rc=0
mkdir -p "$T_TMP/mnt-x"
timeout 30 "$PACEFS" -o "cache_dir=$T_TMP/cache-x" "$URL/encx/f.bin" "$T_TMP/mnt-x" \
	</dev/null >/dev/null 2>"$T_TMP/x.err" || rc=$?
if [ "$rc" -eq 1 ] && grep -aqF "'Content-Encoding: \x1b[31mgzip\x9b'" "$T_TMP/x.err" &&
	! raw "$T_TMP/x.err" && ! is_mounted "$T_TMP/mnt-x"; then
	t_pass "a refused mount's line has no raw control byte: $(cat "$T_TMP/x.err")"
else
	t_fail "a refused mount's line" "exit $rc: $(od -c "$T_TMP/x.err" | head -n 4)"
fi

t_done

#!/usr/bin/env bash
# clearproxy.sh: a proxy of -o proxy= reads what it carries for an http://
# origin: a URL's userinfo (Basic auth), -o header= values and a signed
# query. Such a mount is refused, with one line naming the option that
# allows it and nothing sent; -o creds_via_proxy allows it; a list of
# DIRECT alone, or no credentials, is not refused.
set -euo pipefail
# shellcheck source=tests/lib.sh
source "$(dirname "$0")/../lib.sh"
t_require_mount
t_require_origin

WWW=$T_TMP/www
mkdir -p "$WWW"
SIZE=$((512 * 1024 + 3))
gen_file "$WWW/f.bin" "$SIZE" 51
PW=pw$RANDOM$RANDOM$RANDOM
TOKEN=tok$RANDOM$RANDOM$RANDOM
SIG=sig$RANDOM$RANDOM$RANDOM
o_start origin --root "$WWW"
ORIGIN=$O_URL
HOSTPORT=${ORIGIN#http://}
# The proxy: a pacefs-origin serving the same files takes absolute URIs
# and logs the headers a proxy would see.
o_start proxy --root "$WWW" --log-header Authorization --log-header X-Token
PROXY=$O_URL
PLOG=$O_LOG
MNT=$T_TMP/mnt
mkdir -p "$MNT"

# refused NAME ARGS...: pacefs ARGS exits 1 with one line that names
# creds_via_proxy and no secret, mounts nothing, and the proxy saw no
# request.
refused() {
	local name=$1 rc=0 before
	shift
	before=$(wc -l <"$PLOG")
	timeout 30 "$PACEFS" "$@" </dev/null >/dev/null 2>"$T_TMP/err" || rc=$?
	if [ "$rc" -eq 1 ] && [ "$(wc -l <"$T_TMP/err")" -eq 1 ] &&
		grep -q "option proxy: .*-o creds_via_proxy" "$T_TMP/err" &&
		! grep -q -e "$PW" -e "$TOKEN" -e "$SIG" "$T_TMP/err" && ! is_mounted "$MNT"; then
		t_pass "$name: refused: $(cat "$T_TMP/err")"
	else
		t_fail "$name: refused" "exit $rc: $(cat "$T_TMP/err")"
		umount_pacefs "$MNT"
	fi
	t_eq "$name: nothing sent to the proxy" "$(wc -l <"$PLOG")" "$before"
}

T_MOUNTS+=("$MNT")
refused "userinfo through a proxy" -o "cache_dir=$T_TMP/c1,proxy=$PROXY;DIRECT" \
	"http://reader:$PW@$HOSTPORT/f.bin" "$MNT"
refused "a header through a proxy" -o "cache_dir=$T_TMP/c2,proxy=$PROXY" \
	-o "header=X-Token: $TOKEN" "$ORIGIN/f.bin" "$MNT"
refused "a mirror's userinfo through a proxy" -o "cache_dir=$T_TMP/c3,proxy=$PROXY" \
	-o "mirror=http://reader:$PW@$HOSTPORT/f.bin" "$ORIGIN/f.bin" "$MNT"
refused "a signed query through a proxy" -o "cache_dir=$T_TMP/c4,proxy=$PROXY" \
	"$ORIGIN/f.bin?X-Amz-Signature=$SIG" "$MNT"

# --- allowed: the option, DIRECT alone, no credentials.
before=$(wc -l <"$PLOG")
if mount_pacefs -o "cache_dir=$T_TMP/c5,proxy=$PROXY,creds_via_proxy" -o "header=X-Token: $TOKEN" \
	"http://reader:$PW@$HOSTPORT/f.bin" "$MNT"; then
	t_check "creds_via_proxy: bytes" cmp "$MNT/f.bin" "$WWW/f.bin"
	if tail -n +$((before + 1)) "$PLOG" | awk -v t="$TOKEN" '$8 == t' | grep -q .; then
		t_pass "creds_via_proxy: the requests went through the proxy, with the header"
	else
		t_fail "creds_via_proxy: the requests went through the proxy" "$(tail -n 3 "$PLOG")"
	fi
	umount_pacefs "$MNT"
else
	t_fail "creds_via_proxy: mount" "$T_MOUNT_ERR"
fi
if mount_pacefs -o "cache_dir=$T_TMP/c6,proxy=DIRECT" "http://reader:$PW@$HOSTPORT/f.bin" "$MNT"; then
	t_check "proxy=DIRECT with userinfo: bytes" cmp "$MNT/f.bin" "$WWW/f.bin"
	umount_pacefs "$MNT"
else
	t_fail "proxy=DIRECT with userinfo: mount" "$T_MOUNT_ERR"
fi
if mount_pacefs -o "cache_dir=$T_TMP/c7,proxy=$PROXY" "$ORIGIN/f.bin" "$MNT"; then
	t_check "a proxy and no credentials: bytes" cmp "$MNT/f.bin" "$WWW/f.bin"
	umount_pacefs "$MNT"
else
	t_fail "a proxy and no credentials: mount" "$T_MOUNT_ERR"
fi
t_done

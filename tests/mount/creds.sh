#!/usr/bin/env bash
# creds.sh: the credential surface under hostile and unlucky input (issue
# 22): a refused -o header_file= token recovers once the file is fixed,
# without a remount, and status says "refused: credentials" meanwhile (for
# -o header= too, which stays excluded); a credentials or config file that
# others may write, or that another user owns, never runs its
# credential_process; a FIFO at a header file or credentials path, a
# command that hangs at the mount or during a rotation: the mount fails in
# time, or the daemon exits at unmount, and nothing it ran is left; CR/LF
# in a session token never reaches the origin as a header; the headers
# pacefs owns are refused from a header file, a command and -o header=; an
# Expiration in the past fails the mount and is not run again each
# second; the command sees only descriptors 0, 1 and 2.
set -euo pipefail
# shellcheck source=tests/lib.sh
source "$(dirname "$0")/../lib.sh"
t_require_mount
t_require_origin

WWW=$T_TMP/www
mkdir -p "$WWW"
MIB=1048576
gen_file "$WWW/big.bin" $((32 * MIB)) 61
TOKA=credA$RANDOM$RANDOM
TOKB=credB$RANDOM$RANDOM
TOKC=credC$RANDOM$RANDOM
ACCEPT=$T_TMP/accept
printf 'X-Token: %s\n' "$TOKA" >"$ACCEPT"
o_start o --root "$WWW" --require-header "$ACCEPT" --log-header X-Token \
	--log-header X-Injected --log-header Range
HTTP=$O_URL

# put FILE TEXT: replaces FILE (mode 600) at once, as a rotation does.
put() {
	printf '%s' "$2" >"$1.new"
	chmod 600 "$1.new"
	mv "$1.new" "$1"
}

# piece MNT OFF_MIB OUT: reads 64 KiB of big.bin at OFF_MIB MiB into OUT;
# its exit status is dd's.
piece() {
	dd if="$1/big.bin" of="$3" bs=65536 count=1 skip=$(($2 * 16)) status=none
}

# same OUT OFF_MIB: the 64 KiB at OFF_MIB of the origin's file equal OUT.
same() {
	dd if="$WWW/big.bin" bs=65536 count=1 skip=$(($2 * 16)) status=none | cmp -s - "$1"
}

# state MNT: the state of the mount's one source, from pacefs status --json.
state() {
	"$PACEFS" status --json "$1" 2>/dev/null |
		python3 -c 'import json,sys; print(json.load(sys.stdin)["sources"][0]["state"])' 2>/dev/null || echo "?"
}

# mount_err NAME WANT SECONDS ARGS...: pacefs ARGS exits 1 within SECONDS
# with one line matching WANT, and mounts nothing.
mount_err() {
	local name=$1 want=$2 secs=$3 rc=0 t0 t1 mnt=${*: -1}
	shift 3
	T_MOUNTS+=("$mnt")
	t0=$(date +%s)
	timeout 20 env "${MOUNT_ENV[@]}" "$PACEFS" "$@" </dev/null >/dev/null 2>"$T_TMP/err" || rc=$?
	t1=$(date +%s)
	if [ "$rc" -eq 1 ] && [ "$(wc -l <"$T_TMP/err")" -eq 1 ] && grep -q -- "$want" "$T_TMP/err" &&
		[ $((t1 - t0)) -le "$secs" ] && ! is_mounted "$mnt"; then
		t_pass "$name: $(cat "$T_TMP/err")"
	else
		t_fail "$name" "exit $rc after $((t1 - t0)) s: $(cat "$T_TMP/err")"
	fi
	umount_pacefs "$mnt" 2>/dev/null || true
}
MOUNT_ENV=(PACEFS_UNUSED=1)

# reap_left CMDLINE: kills, by pid, what this test's commands left running
# (only where pacefs failed to).
reap_left() {
	local p
	for p in /proc/[0-9]*; do
		if [ "$(tr '\0' ' ' 2>/dev/null <"$p/cmdline")" = "$1 " ]; then
			kill -KILL "${p#/proc/}" 2>/dev/null || true
		fi
	done
}

MNT=$T_TMP/mnt
mkdir -p "$MNT"

# --- row 3: a rotated -o header_file= token, refused, then fixed: the
# read that waited, and the next one, get the right bytes; no remount.
HF=$T_TMP/headers
put "$HF" "X-Token: $TOKA
"
if fg_mount "$T_TMP/rot.log" -o "cache_dir=$T_TMP/cache-rot,header_file=$HF,read_timeout=8" \
	"$HTTP/big.bin" "$MNT"; then
	piece "$MNT" 0 "$T_TMP/p0" && same "$T_TMP/p0" 0 && t_pass "header_file: bytes before the rotation" ||
		t_fail "header_file: bytes before the rotation" "differ"
	# The origin takes only TOKB now; the file still says TOKA.
	put "$ACCEPT" "X-Token: $TOKB
"
	rc=0
	piece "$MNT" 8 "$T_TMP/p8" &
	reader=$!
	sleep 2.5
	st=$(state "$MNT")
	t_eq "header_file: status while refused" "$st" "refused: credentials"
	put "$HF" "X-Token: $TOKB
"
	wait "$reader" || rc=$?
	if [ "$rc" -eq 0 ] && same "$T_TMP/p8" 8; then
		t_pass "header_file fixed: the read that waited returns the right bytes"
	else
		t_fail "header_file fixed: the read that waited returns the right bytes" \
			"dd exit $rc; $(grep -a -e refused -e 'no source' -e 'read again' "$T_TMP/rot.log" | tail -n 3)"
	fi
	rc=0
	piece "$MNT" 16 "$T_TMP/p16" || rc=$?
	if [ "$rc" -eq 0 ] && same "$T_TMP/p16" 16; then
		t_pass "header_file fixed: the next uncached read returns the right bytes"
	else
		t_fail "header_file fixed: the next uncached read returns the right bytes" "dd exit $rc"
	fi
	t_eq "header_file fixed: status" "$(state "$MNT")" "ok"
	# Revoked and never fixed: the read fails at its deadline, not
	# before, not never.
	put "$ACCEPT" "X-Token: $TOKC
"
	t0=$(date +%s)
	rc=0
	piece "$MNT" 24 "$T_TMP/p24" 2>"$T_TMP/p24.err" || rc=$?
	t1=$(date +%s)
	if [ "$rc" -ne 0 ] && grep -q "Input/output error" "$T_TMP/p24.err" &&
		[ $((t1 - t0)) -ge 6 ] && [ $((t1 - t0)) -le 14 ]; then
		t_pass "header_file revoked: EIO at read_timeout=8 ($((t1 - t0)) s)"
	else
		t_fail "header_file revoked: EIO at read_timeout=8" "exit $rc after $((t1 - t0)) s: $(cat "$T_TMP/p24.err")"
	fi
	if grep -q 'the credentials are refused; the source is tried again' "$T_TMP/rot.log"; then
		t_pass "header_file: the log says the source waits for new credentials"
	else
		t_fail "header_file: the log says the source waits for new credentials" "$(tail -n 3 "$T_TMP/rot.log")"
	fi
	umount_pacefs "$MNT"
	wait "$FG_PID" 2>/dev/null || true
else
	t_fail "header_file rotation: mount" "$(tail -n 3 "$T_TMP/rot.log")"
fi

# --- row 3, static credentials (-o header= only): still excluded, but
# status says why.
put "$ACCEPT" "X-Token: $TOKB
"
if mount_pacefs -o "cache_dir=$T_TMP/cache-static,read_timeout=5" -o "header=X-Token: $TOKB" \
	"$HTTP/big.bin" "$MNT"; then
	piece "$MNT" 0 "$T_TMP/s0" && same "$T_TMP/s0" 0 && t_pass "header=: bytes" || t_fail "header=: bytes" "differ"
	put "$ACCEPT" "X-Token: $TOKC
"
	rc=0
	piece "$MNT" 8 "$T_TMP/s8" 2>/dev/null || rc=$?
	t_eq "header= refused: the read fails" "$rc" 1
	t_eq "header= refused: status says why" "$(state "$MNT")" "refused: credentials"
	"$PACEFS" status "$MNT" >"$T_TMP/status.txt" 2>&1 || true
	if grep -q "refused: credentials" "$T_TMP/status.txt"; then
		t_pass "header= refused: the text status says why"
	else
		t_fail "header= refused: the text status says why" "$(cat "$T_TMP/status.txt")"
	fi
	umount_pacefs "$MNT"
else
	t_fail "header=: mount" "$T_MOUNT_ERR"
fi
put "$ACCEPT" "X-Token: $TOKA
"

# --- row 10: headers pacefs owns, from every path; the small point: a
# mode that lets others write says "write".
put "$HF" "X-Token: $TOKA
Range: bytes=0-0
"
mount_err "header_file setting Range" "option header_file: $HF: line 2: pacefs sets Range itself" 10 \
	-o "cache_dir=$T_TMP/c1,header_file=$HF" "$HTTP/big.bin" "$MNT"
put "$HF" "X-Token: $TOKA
If-Range: x
"
mount_err "header_file setting If-Range" "line 2: pacefs sets If-Range itself" 10 \
	-o "cache_dir=$T_TMP/c1,header_file=$HF" "$HTTP/big.bin" "$MNT"
printf '#!/bin/sh\necho "X-Token: %s"\necho "Accept-Encoding: gzip"\n' "$TOKA" >"$T_TMP/ae.sh"
chmod 700 "$T_TMP/ae.sh"
mount_err "auth_command printing Accept-Encoding" \
	"option auth_command: command '$T_TMP/ae.sh': line 2: pacefs sets Accept-Encoding itself" 10 \
	-o "cache_dir=$T_TMP/c1,auth_command=$T_TMP/ae.sh" "$HTTP/big.bin" "$MNT"
mount_err "header= setting Host" "option header: pacefs sets Host itself" 10 \
	-o "cache_dir=$T_TMP/c1" -o "header=Host: elsewhere.example" "$HTTP/big.bin" "$MNT"
put "$HF" "X-Token: $TOKA
"
chmod 602 "$HF"
mount_err "header_file mode 0602: the message says others may write" \
	"$HF: mode 0602 lets others write to it; refused" 10 \
	-o "cache_dir=$T_TMP/c1,header_file=$HF" "$HTTP/big.bin" "$MNT"
chmod 600 "$HF"

# --- row 7: FIFOs and a command that hangs.
mkfifo "$T_TMP/fifo"
mount_err "header_file a FIFO" "option header_file: $T_TMP/fifo: not a regular file" 5 \
	-o "cache_dir=$T_TMP/c1,header_file=$T_TMP/fifo" "$HTTP/big.bin" "$MNT"
mount_err "auth_command that hangs" "option auth_command: command 'sleep': it did not finish within 2 s" 8 \
	-o "cache_dir=$T_TMP/c1,read_timeout=2,auth_command=sleep 1783" "$HTTP/big.bin" "$MNT"
sleep 0.3
t_eq "auth_command that hangs: no sleep left" "$(t_cmdline_count "sleep 1783")" 0
reap_left "sleep 1783"

# A header file turned into a FIFO under a running mount: the reload is
# refused and logged, and the daemon still exits at unmount.
put "$HF" "X-Token: $TOKA
"
if fg_mount "$T_TMP/fifo.log" -o "cache_dir=$T_TMP/cache-fifo,header_file=$HF" "$HTTP/big.bin" "$MNT"; then
	rm -f "$HF"
	mkfifo -m 600 "$HF"
	for _ in $(seq 1 40); do
		grep -q "cannot read the credentials again" "$T_TMP/fifo.log" && break
		sleep 0.1
	done
	if grep -q "cannot read the credentials again: option header_file: $HF: not a regular file" "$T_TMP/fifo.log"; then
		t_pass "header_file turned FIFO: the reload is refused and logged"
	else
		t_fail "header_file turned FIFO: the reload is refused and logged" "$(tail -n 2 "$T_TMP/fifo.log")"
	fi
	umount_pacefs "$MNT"
	gone=no
	pid_gone "$FG_PID" 5 && gone=yes
	t_eq "header_file turned FIFO: the daemon exits within 5 s of the unmount" "$gone" yes
	[ "$gone" = yes ] || kill -KILL "$FG_PID" 2>/dev/null || true
	wait "$FG_PID" 2>/dev/null || true
else
	t_fail "header_file turned FIFO: mount" "$(tail -n 3 "$T_TMP/fifo.log")"
fi
rm -f "$HF"

# A command that hangs during a rotation (a header file changed, which
# reads every source again): the daemon exits at unmount and kills it.
HANG=$T_TMP/hang
TOKFILE=$T_TMP/tok
printf '%s' "$TOKA" >"$TOKFILE"
cat >"$T_TMP/rot.sh" <<-EOS
	#!/bin/sh
	if [ -e $HANG ]; then exec sleep 1784; fi
	echo "X-Token: \$(cat $TOKFILE)"
EOS
chmod 700 "$T_TMP/rot.sh"
put "$HF" "X-Other: 1
"
if fg_mount "$T_TMP/hang.log" -o "cache_dir=$T_TMP/cache-hang,header_file=$HF,auth_command=$T_TMP/rot.sh" \
	"$HTTP/big.bin" "$MNT"; then
	piece "$MNT" 0 "$T_TMP/h0" && same "$T_TMP/h0" 0 && t_pass "hanging command: bytes before" ||
		t_fail "hanging command: bytes before" "differ"
	touch "$HANG"
	put "$HF" "X-Other: 2
"
	for _ in $(seq 1 40); do
		[ "$(t_cmdline_count "sleep 1784")" -eq 0 ] || break
		sleep 0.1
	done
	t_eq "hanging command: it runs" "$(t_cmdline_count "sleep 1784")" 1
	umount_pacefs "$MNT"
	gone=no
	pid_gone "$FG_PID" 5 && gone=yes
	t_eq "hanging command: the daemon exits within 5 s of the unmount" "$gone" yes
	sleep 0.3
	t_eq "hanging command: no sleep left" "$(t_cmdline_count "sleep 1784")" 0
	reap_left "sleep 1784"
	[ "$gone" = yes ] || kill -KILL "$FG_PID" 2>/dev/null || true
	wait "$FG_PID" 2>/dev/null || true
else
	t_fail "hanging command: mount" "$(tail -n 3 "$T_TMP/hang.log")"
fi
rm -f "$HANG"

# --- row 13: what the command inherits, run again by the daemon (the
# cache and the origin's connection are open by then).
FDS=$T_TMP/fds
printf '%s' "$TOKA" >"$TOKFILE"
if fg_mount "$T_TMP/fd.log" -o "cache_dir=$T_TMP/cache-fd,lanes=4" \
	-o "auth_command=echo RUN >>$FDS; ls -l /proc/self/fd >>$FDS; echo X-Token: \$(cat $TOKFILE)" \
	"$HTTP/big.bin" "$MNT"; then
	piece "$MNT" 0 "$T_TMP/f0" || true
	printf '%s' "$TOKB" >"$TOKFILE"
	put "$ACCEPT" "X-Token: $TOKB
"
	rc=0
	piece "$MNT" 8 "$T_TMP/f8" || rc=$?
	t_eq "auth_command run again by the daemon: bytes" "$rc $(same "$T_TMP/f8" 8 && echo same)" "0 same"
	runs=$(grep -c RUN "$FDS")
	if [ "$runs" -ge 2 ]; then
		t_pass "auth_command: run again by the daemon ($runs runs)"
	else
		t_fail "auth_command: run again by the daemon" "$runs runs"
	fi
	# The daemon's last run: the listing after the last RUN.
	awk '/^RUN/ { n = 0; delete l; next } / -> / { l[n++] = $(NF-2) " " $NF }
		END { for (i = 0; i < n; i++) print l[i] }' "$FDS" >"$T_TMP/fds.last"
	extra=$(awk '$1 != 0 && $1 != 1 && $1 != 2 && $2 !~ /^\/proc\/[0-9]+\/fd$/' "$T_TMP/fds.last")
	bad=$(grep -c -e data.mdb -e lock.mdb -e 'socket:' "$T_TMP/fds.last" || true)
	if [ -z "$extra" ] && [ "$bad" -eq 0 ] && [ -s "$T_TMP/fds.last" ]; then
		t_pass "auth_command: only 0, 1, 2 inherited ($(tr '\n' ' ' <"$T_TMP/fds.last"))"
	else
		t_fail "auth_command: only 0, 1, 2 inherited" "$(tr '\n' ' ' <"$T_TMP/fds.last")"
	fi
	umount_pacefs "$MNT"
	wait "$FG_PID" 2>/dev/null || true
else
	t_fail "auth_command fds: mount" "$(tail -n 3 "$T_TMP/fd.log")"
fi

# --- S3: rows 6, 7 (credentials files), 9 and 11.
if ! /usr/bin/python3 -c 'import botocore' 2>/dev/null; then
	t_fail "S3 cases" "python3-botocore is missing (contrib/install-deps.sh installs it)"
	t_done
fi
ROOT=$T_TMP/root
mkdir -p "$ROOT/bkt"
gen_file "$ROOT/bkt/f.bin" 70000 62
SECRET=sec$RANDOM$RANDOM
TOKS=tokS$RANDOM$RANDOM
printf 'AKIDTEST %s\nAKIDTMP %s %s\n' "$SECRET" "$SECRET" "$TOKS" >"$T_TMP/keys"
o_start s3 --root "$ROOT" --s3 --s3-region eu-west-1 --s3-keys "$T_TMP/keys" \
	--log-header x-amz-security-token --log-header X-Injected
S3OPTS="endpoint=$O_URL,region=eu-west-1"
unset AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_SESSION_TOKEN AWS_PROFILE AWS_REGION AWS_DEFAULT_REGION
export HOME=$T_TMP/home
mkdir -p "$HOME/.aws"
CFG=$HOME/.aws/config
MARK=$T_TMP/ran
JSON="{\"Version\": 1, \"AccessKeyId\": \"AKIDTMP\", \"SecretAccessKey\": \"$SECRET\", \"SessionToken\": \"$TOKS\"}"
cat >"$T_TMP/cp.sh" <<-EOS
	#!/bin/sh
	touch $MARK
	cat <<'J'
	$JSON
	J
EOS
chmod 755 "$T_TMP/cp.sh"

# row 6: a config others may write, or another user owns, never runs its
# command; a readable one does.
printf '[default]\ncredential_process = %s\n' "$T_TMP/cp.sh" >"$CFG"
chmod 666 "$CFG"
mount_err "config mode 0666 with credential_process" "$CFG: mode 0666 lets group and others write to it" 10 \
	-o "cache_dir=$T_TMP/c2,$S3OPTS" s3://bkt/f.bin "$MNT"
t_eq "config mode 0666: the command never ran" "$([ -e "$MARK" ] && echo ran || echo never)" never
chmod 646 "$CFG"
rm -f "$MARK"
mount_err "config mode 0646, -o creds_readable: still refused" "$CFG: mode 0646 lets others write to it" 10 \
	-o "cache_dir=$T_TMP/c2,$S3OPTS,creds_readable" s3://bkt/f.bin "$MNT"
t_eq "config mode 0646: the command never ran" "$([ -e "$MARK" ] && echo ran || echo never)" never
chmod 644 "$CFG"
chown 65534 "$CFG"
rm -f "$MARK"
mount_err "config owned by another user" "$CFG: owned by uid 65534, not by the user who mounts (uid 0)" 10 \
	-o "cache_dir=$T_TMP/c2,$S3OPTS" s3://bkt/f.bin "$MNT"
t_eq "config owned by another user: the command never ran" "$([ -e "$MARK" ] && echo ran || echo never)" never
chown 0 "$CFG"
if mount_pacefs -o "cache_dir=$T_TMP/c2,$S3OPTS" s3://bkt/f.bin "$MNT"; then
	t_check "config mode 0644 (no secret in it): the command runs, bytes" cmp "$MNT/f.bin" "$ROOT/bkt/f.bin"
	umount_pacefs "$MNT"
else
	t_fail "config mode 0644: mount" "$T_MOUNT_ERR"
fi

# row 7: a FIFO at the credentials or config path.
rm -f "$CFG"
mkfifo "$CFG"
mount_err "config a FIFO" "$CFG: not a regular file" 5 -o "cache_dir=$T_TMP/c2,$S3OPTS" s3://bkt/f.bin "$MNT"
rm -f "$CFG"
mkfifo "$HOME/.aws/credentials"
mount_err "credentials a FIFO" "$HOME/.aws/credentials: not a regular file" 5 \
	-o "cache_dir=$T_TMP/c2,$S3OPTS" s3://bkt/f.bin "$MNT"
rm -f "$HOME/.aws/credentials"

# row 9: CR/LF in a session token, from the environment and from a
# credential_process: no header injected, one line naming it.
n0=$(wc -l <"$T_TMP/s3.log")
MOUNT_ENV=(AWS_ACCESS_KEY_ID=AKIDTMP "AWS_SECRET_ACCESS_KEY=$SECRET" "AWS_SESSION_TOKEN=$TOKS"$'\r\nX-Injected: env')
mount_err "AWS_SESSION_TOKEN with CR/LF" "AWS_SESSION_TOKEN holds a control character (0x0d)" 10 \
	-o "cache_dir=$T_TMP/c2,$S3OPTS" s3://bkt/f.bin "$MNT"
MOUNT_ENV=(PACEFS_UNUSED=1)
cat >"$T_TMP/crlf.sh" <<-EOS
	#!/bin/sh
	cat <<'J'
	{"Version": 1, "AccessKeyId": "AKIDTMP", "SecretAccessKey": "$SECRET", "SessionToken": "$TOKS\\r\\nX-Injected: cp"}
	J
EOS
chmod 700 "$T_TMP/crlf.sh"
printf '[default]\ncredential_process = %s\n' "$T_TMP/crlf.sh" >"$CFG"
chmod 600 "$CFG"
mount_err "credential_process SessionToken with CR/LF" "its SessionToken holds a control character (0x0d)" 10 \
	-o "cache_dir=$T_TMP/c2,$S3OPTS" s3://bkt/f.bin "$MNT"
t_eq "CR/LF tokens: no injected header reached the origin" \
	"$(tail -n +$((n0 + 1)) "$T_TMP/s3.log" | awk '$8 != "-"' | wc -l)" 0

# row 11: an Expiration in the past: the mount fails, naming it, and the
# command is not run again and again.
COUNT=$T_TMP/count
cat >"$T_TMP/exp.sh" <<-EOS
	#!/bin/sh
	echo x >>$COUNT
	echo '{"Version": 1, "AccessKeyId": "AKIDTMP", "SecretAccessKey": "$SECRET", "SessionToken": "$TOKS", "Expiration": "2020-01-01T00:00:00Z"}'
EOS
chmod 700 "$T_TMP/exp.sh"
printf '[default]\ncredential_process = %s\n' "$T_TMP/exp.sh" >"$CFG"
chmod 600 "$CFG"
rc=0
T_MOUNTS+=("$MNT")
timeout 20 "$PACEFS" -o "cache_dir=$T_TMP/c2,$S3OPTS" s3://bkt/f.bin "$MNT" </dev/null >/dev/null 2>"$T_TMP/err" || rc=$?
WANT="the credential_process of profile 'default' in $CFG: command '$T_TMP/exp.sh': its Expiration 2020-01-01T00:00:00Z is in the past"
if [ "$rc" -eq 1 ] && grep -qF -- "$WANT" "$T_TMP/err" && ! is_mounted "$MNT"; then
	t_pass "credential_process Expiration in the past: $(cat "$T_TMP/err")"
else
	t_fail "credential_process Expiration in the past" "exit $rc: $(cat "$T_TMP/err")"
fi
sleep 4
t_eq "Expiration in the past: the command ran once in 4 s" "$(wc -l <"$COUNT")" 1
umount_pacefs "$MNT"
t_done

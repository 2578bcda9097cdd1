#!/usr/bin/env bash
# s3.sh: S3 sources against pacefs-origin --s3, whose signature check is
# botocore's (contrib/origin/s3verify.py): signed reads of s3://BUCKET/KEY
# and of a prefix as a tree, keys with spaces and non-ASCII bytes, a prefix
# of 10,000 keys listed across pages, a key deleted after its listing
# (ENOENT), credentials from the environment, ~/.aws/credentials (refused
# when others may read it) and -o auth_command=, a session token rotated
# under a streaming reader with no failed read, one line at mount for a
# wrong secret, an unknown bucket, a wrong region and no credentials, no
# secret in the log, status, xattrs or argv, and s3cmd reading the same
# objects.
set -euo pipefail
# shellcheck source=tests/lib.sh
source "$(dirname "$0")/../lib.sh"
t_require_mount
t_require_origin
if ! /usr/bin/python3 -c 'import botocore' 2>/dev/null || ! command -v s3cmd >/dev/null; then
	t_fail "$T_NAME" "python3-botocore and s3cmd are missing (contrib/install-deps.sh installs them)"
	t_done
fi

ROOT=$T_TMP/root
B=$ROOT/bkt
mkdir -p "$B/data/sub" "$B/big" "$ROOT/other"
gen_file "$B/data/f.bin" $((3 * 1048576 + 17)) 41
gen_file "$B/data/sub/g.bin" 70000 42
gen_file "$B/data/a b é ü.txt" 5000 43
gen_file "$B/data/gone.bin" 1000 44
gen_file "$B/stream.bin" $((24 * 1048576)) 45
# 10,000 keys: ten pages of 1000.
(cd "$B/big" && seq -w 1 10000 | sed 's/^/k/' | xargs touch)
SECRET=sec$RANDOM$RANDOM$RANDOM
TOK1=tokA$RANDOM$RANDOM
TOK2=tokB$RANDOM$RANDOM
KEYS=$T_TMP/keys
printf 'AKIDTEST %s\nAKIDTMP %s %s\n' "$SECRET" "$SECRET" "$TOK1" >"$KEYS"
o_start s3 --root "$ROOT" --s3 --s3-region eu-west-1 --s3-keys "$KEYS" --rate 1M \
	--log-header x-amz-security-token
EP=$O_URL
OPTS="endpoint=$EP,region=eu-west-1"
export AWS_ACCESS_KEY_ID=AKIDTEST AWS_SECRET_ACCESS_KEY=$SECRET
unset AWS_SESSION_TOKEN AWS_PROFILE AWS_REGION AWS_DEFAULT_REGION
export HOME=$T_TMP/home
mkdir -p "$HOME"

# leaks NAME FILE: PASS when FILE holds no secret.
leaks() {
	t_eq "$1: no secret in it" "$(grep -a -c -e "$SECRET" -e "$TOK1" -e "$TOK2" "$2" || true)" 0
}

# mount_err NAME WANT ARGS...: the mount fails with one line matching WANT;
# pacefs runs with the environment changes in MOUNT_ENV (env's arguments).
MOUNT_ENV=()
mount_err() {
	local name=$1 want=$2 rc=0
	shift 2
	timeout 30 env "${MOUNT_ENV[@]}" "$PACEFS" "$@" </dev/null >/dev/null 2>"$T_TMP/err" || rc=$?
	if [ "$rc" -eq 1 ] && [ "$(wc -l <"$T_TMP/err")" -eq 1 ] && grep -q -- "$want" "$T_TMP/err"; then
		t_pass "$name: $(cat "$T_TMP/err")"
	else
		t_fail "$name" "exit $rc: $(cat "$T_TMP/err")"
	fi
}

# --- a prefix as a tree, signed (debug log: every request is in it).
MNT=$T_TMP/mnt
mkdir -p "$MNT"
if ! fg_mount "$T_TMP/tree.log" -o "cache_dir=$T_TMP/cache,$OPTS,log_level=debug" s3://bkt/data/ "$MNT"; then
	t_fail "tree: mount" "$(tail -n 3 "$T_TMP/tree.log")"
	t_done
fi
t_eq "tree: the prefix's names" "$(cd "$MNT" && find . | LC_ALL=C sort | tr '\n' ' ')" \
	"$(cd "$B/data" && find . | LC_ALL=C sort | tr '\n' ' ')"
t_eq "tree: sizes from the listing" "$(stat -c %s "$MNT/f.bin" "$MNT/sub/g.bin")" \
	"$(printf '%s\n%s' $((3 * 1048576 + 17)) 70000)"
t_eq "tree: no object was asked for before a read" "$(grep -c -v ListObjects "$T_TMP/s3.log" || true)" 0
t_check "tree: signed reads give every byte" cmp "$MNT/f.bin" "$B/data/f.bin"
t_check "tree: a key with spaces and non-ASCII bytes" cmp "$MNT/a b é ü.txt" "$B/data/a b é ü.txt"
t_check "tree: a key two levels down" cmp "$MNT/sub/g.bin" "$B/data/sub/g.bin"
t_eq "tree: xattr etag is the listed ETag" "$(getfattr --only-values -n user.pacefs.etag "$MNT/sub/g.bin")" \
	"$(grep -o '<ETag>[^<]*</ETag>' <(curl -s --aws-sigv4 aws:amz:eu-west-1:s3 --user "AKIDTEST:$SECRET" \
		-H x-amz-content-sha256:UNSIGNED-PAYLOAD "$EP/bkt?list-type=2&prefix=data%2Fsub%2F") | sed 's/<[^>]*>//g; s/&quot;/"/g')"
rm "$B/data/gone.bin"
rc=0
cat "$MNT/gone.bin" >/dev/null 2>"$T_TMP/gone.err" || rc=$?
if [ "$rc" -ne 0 ] && grep -q 'No such file or directory' "$T_TMP/gone.err"; then
	t_pass "a key deleted after its listing: ENOENT ($(cat "$T_TMP/gone.err"))"
else
	t_fail "a key deleted after its listing: ENOENT" "exit $rc: $(cat "$T_TMP/gone.err")"
fi
getfattr --absolute-names -d -m - "$MNT/f.bin" "$MNT" >"$T_TMP/xattrs" 2>&1 || true
"$PACEFS" status --json "$MNT" >"$T_TMP/status" 2>&1 || true
leaks "xattrs" "$T_TMP/xattrs"
leaks "status" "$T_TMP/status"
umount_pacefs "$MNT"
wait "$FG_PID" 2>/dev/null || true
leaks "the debug log" "$T_TMP/tree.log"
"$PACEFS" cache ls --cache-dir "$T_TMP/cache" >"$T_TMP/cachels" 2>&1 || true
if grep -q "s3:eu-west-1:$EP/bkt/data/f.bin" "$T_TMP/cachels" && ! grep -q AKIDTEST "$T_TMP/cachels"; then
	t_pass "cache identity: region, endpoint, bucket and key, never the key id"
else
	t_fail "cache identity: region, endpoint, bucket and key, never the key id" "$(cat "$T_TMP/cachels")"
fi
leaks "the cache" "$T_TMP/cache/data.mdb"

# --- 10,000 keys across pages; ls -R against the pages themselves.
: >"$T_TMP/s3.log"
mkdir -p "$T_TMP/mnt-big"
mount_pacefs -o "cache_dir=$T_TMP/cache,$OPTS" s3://bkt/big/ "$T_TMP/mnt-big"
t0=$(date +%s%N)
n=$(ls -R "$T_TMP/mnt-big" | grep -c '^k')
t1=$(date +%s%N)
t_eq "10,000 keys listed" "$n" 10000
t_eq "across ten pages" "$(grep -c 'continuation-token' "$T_TMP/s3.log" || true)" 9
umount_pacefs "$T_TMP/mnt-big"
# The same pages with curl, one after the other.
p0=$(date +%s%N)
tok=
for _ in $(seq 1 10); do
	q="delimiter=%2F&encoding-type=url&list-type=2&prefix=big%2F"
	[ -z "$tok" ] || q="continuation-token=$tok&$q"
	tok=$(curl -s --aws-sigv4 aws:amz:eu-west-1:s3 --user "AKIDTEST:$SECRET" \
		-H x-amz-content-sha256:UNSIGNED-PAYLOAD "$EP/bkt?$q" |
		grep -o '<NextContinuationToken>[^<]*' | sed 's/.*>//' || true)
done
p1=$(date +%s%N)
ls_ms=$(((t1 - t0) / 1000000))
pages_ms=$(((p1 - p0) / 1000000))
if [ "$ls_ms" -le $((pages_ms * 2 + 500)) ]; then
	t_pass "ls -R of 10,000 keys: $ls_ms ms; the ten pages alone with curl: $pages_ms ms"
else
	t_fail "ls -R of 10,000 keys" "$ls_ms ms against $pages_ms ms for the pages alone"
fi

# --- one object: s3://BUCKET/KEY, virtual-hosted.
mkdir -p "$T_TMP/mnt-one"
if mount_pacefs -o "cache_dir=$T_TMP/cache-one,endpoint=http://s3.localhost:${EP##*:},region=eu-west-1,s3_addressing=virtual" \
	"s3://bkt/data/a b é ü.txt" "$T_TMP/mnt-one"; then
	t_check "one object, virtual-hosted: bytes" cmp "$T_TMP/mnt-one/a b é ü.txt" "$B/data/a b é ü.txt"
	umount_pacefs "$T_TMP/mnt-one"
else
	t_fail "one object, virtual-hosted" "$T_MOUNT_ERR"
fi

# --- bad input: one line naming what to fix.
MOUNT_ENV=(AWS_SECRET_ACCESS_KEY=wrong)
mount_err "a wrong secret" "the secret key is wrong.*check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY" \
	-o "cache_dir=$T_TMP/cache,$OPTS" s3://bkt/data/ "$MNT"
MOUNT_ENV=()
mount_err "an unknown bucket" "bucket 'nobucket' does not exist" \
	-o "cache_dir=$T_TMP/cache,$OPTS" s3://nobucket/ "$MNT"
mount_err "a wrong region" "mount with -o region=eu-west-1" \
	-o "cache_dir=$T_TMP/cache,endpoint=$EP,region=us-west-2" s3://bkt/data/ "$MNT"
MOUNT_ENV=(-u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY)
mount_err "no credentials" "no AWS credentials were found: set AWS_ACCESS_KEY_ID" \
	-o "cache_dir=$T_TMP/cache,$OPTS" s3://bkt/data/ "$MNT"
MOUNT_ENV=()
mount_err "a missing key" "no such key in bucket 'bkt'" \
	-o "cache_dir=$T_TMP/cache,$OPTS" s3://bkt/data/none.bin "$MNT"

# --- ~/.aws/credentials: a profile, refused while others may read it.
mkdir -p "$HOME/.aws"
printf '[other]\naws_access_key_id = AKIDTEST\naws_secret_access_key = %s\n' "$SECRET" >"$HOME/.aws/credentials"
chmod 644 "$HOME/.aws/credentials"
MOUNT_ENV=(-u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY AWS_PROFILE=other)
mount_err "a credentials file others may read" "mode 0644 lets group and others read its secrets; chmod 600 it" \
	-o "cache_dir=$T_TMP/cache,$OPTS" s3://bkt/data/ "$MNT"
MOUNT_ENV=()
chmod 600 "$HOME/.aws/credentials"
if env -u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY AWS_PROFILE=other \
	"$PACEFS" -o "cache_dir=$T_TMP/cache,$OPTS" s3://bkt/data/sub/g.bin "$MNT" </dev/null 2>"$T_TMP/err"; then
	T_MOUNTS+=("$MNT")
	t_check "profile 'other' in ~/.aws/credentials: bytes" cmp "$MNT/g.bin" "$B/data/sub/g.bin"
	umount_pacefs "$MNT"
else
	t_fail "profile 'other' in ~/.aws/credentials" "$(cat "$T_TMP/err")"
fi

# --- a session token rotated under a streaming reader: the credentials
# file changes first, then the origin drops the old token.
unset AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY
printf '[default]\naws_access_key_id = AKIDTMP\naws_secret_access_key = %s\naws_session_token = %s\n' \
	"$SECRET" "$TOK1" >"$HOME/.aws/credentials"
mkdir -p "$T_TMP/mnt-rot"
if fg_mount "$T_TMP/rot.log" \
	-o "cache_dir=$T_TMP/cache-rot,$OPTS,lanes=4" s3://bkt/stream.bin "$T_TMP/mnt-rot"; then
	: >"$T_TMP/s3.log"
	cmp "$T_TMP/mnt-rot/stream.bin" "$B/stream.bin" >"$T_TMP/rot.cmp" 2>&1 &
	reader=$!
	sleep 1
	printf '[default]\naws_access_key_id = AKIDTMP\naws_secret_access_key = %s\naws_session_token = %s\n' \
		"$SECRET" "$TOK2" >"$HOME/.aws/credentials.new"
	chmod 600 "$HOME/.aws/credentials.new"
	mv "$HOME/.aws/credentials.new" "$HOME/.aws/credentials"
	printf 'AKIDTEST %s\nAKIDTMP %s %s\n' "$SECRET" "$SECRET" "$TOK2" >"$KEYS.new"
	mv "$KEYS.new" "$KEYS"
	rc=0
	wait "$reader" || rc=$?
	t_eq "token rotated under a streaming reader: every byte, no failed read" "$rc $(cat "$T_TMP/rot.cmp")" "0 "
	t_eq "both tokens were used" "$(awk '{print $7}' "$T_TMP/s3.log" | sort -u | grep -c -e "$TOK1" -e "$TOK2")" 2
	umount_pacefs "$T_TMP/mnt-rot"
	wait "$FG_PID" 2>/dev/null || true
	leaks "the rotation's log" "$T_TMP/rot.log"
else
	t_fail "rotation: mount" "$(tail -n 3 "$T_TMP/rot.log")"
fi

# --- -o auth_command= printing a credential_process JSON: the origin
# drops the token first; the refused requests run the command again.
printf '%s' "$TOK2" >"$T_TMP/current"
cat >"$T_TMP/cred.sh" <<-EOS
	#!/bin/sh
	echo "{\"Version\": 1, \"AccessKeyId\": \"AKIDTMP\", \"SecretAccessKey\": \"$SECRET\", \"SessionToken\": \"\$(cat $T_TMP/current)\"}"
EOS
chmod 700 "$T_TMP/cred.sh"
if fg_mount "$T_TMP/cmd.log" \
	-o "cache_dir=$T_TMP/cache-cmd,$OPTS,lanes=4,auth_command=$T_TMP/cred.sh" s3://bkt/stream.bin "$T_TMP/mnt-rot"; then
	cmp "$T_TMP/mnt-rot/stream.bin" "$B/stream.bin" >"$T_TMP/cmd.cmp" 2>&1 &
	reader=$!
	sleep 1
	printf '%s' "$TOK1" >"$T_TMP/current"
	printf 'AKIDTEST %s\nAKIDTMP %s %s\n' "$SECRET" "$SECRET" "$TOK1" >"$KEYS.new"
	mv "$KEYS.new" "$KEYS"
	rc=0
	wait "$reader" || rc=$?
	t_eq "auth_command: token expired under a reader, command run again, no failed read" "$rc $(cat "$T_TMP/cmd.cmp")" "0 "
	if grep -q 'refuses the credentials' "$T_TMP/cmd.log" && grep -q 'credentials read again (an origin refused them)' "$T_TMP/cmd.log"; then
		t_pass "auth_command: the refusal and the new credentials are logged"
	else
		t_fail "auth_command: the refusal and the new credentials are logged" "$(tail -n 5 "$T_TMP/cmd.log")"
	fi
	umount_pacefs "$T_TMP/mnt-rot"
	wait "$FG_PID" 2>/dev/null || true
	leaks "the command's log" "$T_TMP/cmd.log"
else
	t_fail "auth_command: mount" "$(tail -n 3 "$T_TMP/cmd.log")"
fi

# --- s3cmd reads the same objects through its own SigV4.
printf '[default]\n' >"$T_TMP/s3cfg"
if timeout 60 s3cmd -c "$T_TMP/s3cfg" --access_key=AKIDTEST --secret_key="$SECRET" --host="${EP#http://}" \
	--host-bucket="${EP#http://}" --no-ssl --region=eu-west-1 get --force \
	"s3://bkt/data/a b é ü.txt" "$T_TMP/s3cmd.out" >/dev/null 2>"$T_TMP/s3cmd.err"; then
	t_check "s3cmd: the same bytes" cmp "$T_TMP/s3cmd.out" "$B/data/a b é ü.txt"
else
	t_fail "s3cmd get" "$(tail -n 3 "$T_TMP/s3cmd.err")"
fi
t_done

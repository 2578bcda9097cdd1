#!/usr/bin/env bash
# badproxy.sh: a proxy's wrong answer is that proxy's, never a verdict on
# the file (docs/security.md, second hostile review, row 4). pacefs-origin on the same root stands as a
# proxy that answers a range with a 200 (norange), with another
# Content-Range (badrange), with another ETag than the origin's after the
# probe (etag-change:1, which ignores no-cache) or with other bytes under
# another ETag after the probe (content-change:1): with proxy=BAD;DIRECT and proxy=GOOD|BAD;DIRECT the mount
# comes up (the probe too falls back), every byte read equals the
# origin's, the log names the bad proxy, its status counts failures and
# bad answers, the next route served, and a later read (pages dropped)
# still works (no "the blob changed" EIO). Under -o sha256= a proxy serving wrong bytes
# under the right ETag (corrupt) is excluded and the blob is fetched again
# by DIRECT: the second read has the right bytes and the digest verifies.
# With block digests the same proxy is excluded and counted. A real
# change that a good proxy and DIRECT agree on still fails reads with EIO,
# and the proxy is not counted as bad; without a proxy: change.sh.
set -euo pipefail
# shellcheck source=tests/lib.sh
source "$(dirname "$0")/../lib.sh"
t_require_mount
t_require_origin

MIB=1048576
SIZE=$((16 * MIB + 4321))
WWW=$T_TMP/www
mkdir -p "$WWW"
gen_file "$WWW/blob.bin" "$SIZE" 2201
SUM=$(sha256sum "$WWW/blob.bin" | cut -d' ' -f1)
o_start origin --root "$WWW"
ORIG=$O_URL
OLOG=$O_LOG
o_start good --root "$WWW"
GOOD=$O_URL
GLOG=$O_LOG

# served LOG: how many 206 answers LOG's server gave so far.
served() {
	awk '$4 == 206' "$1" 2>/dev/null | wc -l
}

# json_field MNT PROXY FIELD: FIELD of PROXY in MNT's pacefs status --json.
json_field() {
	"$PACEFS" status --json "$1" | python3 -c '
import json, sys
doc = json.load(sys.stdin)
for p in doc["proxies"]:
    if p["proxy"] == sys.argv[1]:
        print(p.get(sys.argv[2], "absent"))
' "$2" "$3"
}

# shellcheck disable=SC2317 # the checks below are run through t_check
# readcmp_all MNT FILE: every byte of FILE through MNT equals the origin's.
readcmp_all() {
	"$READCMP" seq "$1/$2" "$WWW/$2"
}

# shellcheck disable=SC2317
# no_verdict LOG: the log holds no verdict on the blob or the source.
no_verdict() {
	! grep -E "until it is remounted|no source can serve|source .* excluded" "$1"
}

# one_case KIND SPEC_NAME: a proxy with --fault '*:KIND' in a proxy list
# (bad: BAD;DIRECT, good: GOOD|BAD;DIRECT).
n=0
one_case() {
	local kind=$1 how=$2 name bad blog spec mnt log o0 g0 f b
	n=$((n + 1))
	name="$kind, $how"
	o_start "bad$n" --root "$WWW" --fault "*:$kind"
	bad=$O_URL
	blog=$O_LOG
	if [ "$how" = bad-first ]; then
		spec="$bad;DIRECT"
	else
		spec="$GOOD|$bad;DIRECT"
	fi
	mnt=$T_TMP/m$n
	log=$T_TMP/m$n.log
	mkdir -p "$mnt"
	o0=$(served "$OLOG")
	g0=$(served "$GLOG")
	if ! fg_mount "$log" -o "cache_dir=$T_TMP/c$n,chunk=256K,proxy_reset=1,proxy=$spec" \
		"$ORIG/blob.bin" "$mnt"; then
		t_fail "$name: the mount comes up" "$(grep -v DEBUG "$log" | tail -n 2 | tr '\n' ' ')"
		return 0
	fi
	t_pass "$name: the mount comes up"
	t_check "$name: every byte read equals the origin's" readcmp_all "$mnt" blob.bin
	t_check "$name: the proxy was asked" test "$(wc -l <"$blog")" -gt 0
	t_check "$name: the log names the bad proxy" \
		grep -Eq "proxy $bad (gave a wrong answer|answered the probe wrongly)" "$log"
	f=$(json_field "$mnt" "$bad" failures 2>/dev/null || echo "?")
	b=$(json_field "$mnt" "$bad" bad_answers 2>/dev/null || echo "?")
	if [[ $f =~ ^[0-9]+$ ]] && [[ $b =~ ^[0-9]+$ ]] && [ "$f" -gt 0 ] && [ "$b" -gt 0 ]; then
		t_pass "$name: status --json counts the bad proxy ($f failures, $b bad answers)"
	else
		t_fail "$name: status --json counts the bad proxy" "failures '$f', bad_answers '$b'"
	fi
	t_check "$name: pacefs status shows its failures and bad answers" \
		grep -Eq "^proxy $bad \(group [12]\): [a-z]+.*, [1-9][0-9]* failures, [1-9][0-9]* bad answers" \
		<<<"$("$PACEFS" status "$mnt" 2>&1)"
	if [ "$how" = bad-first ]; then
		t_check "$name: DIRECT (the origin) served ranges" test "$(served "$OLOG")" -gt "$o0"
	else
		t_check "$name: another route (GOOD or DIRECT) served ranges" \
			test $(($(served "$OLOG") - o0 + $(served "$GLOG") - g0)) -gt 0
	fi
	# A later read, its pages dropped, after the bad proxy's failure
	# interval ran out: a blob taken as changed would fail it with EIO.
	sleep 1.1
	echo 3 >/proc/sys/vm/drop_caches
	t_check "$name: a later read still works" readcmp_all "$mnt" blob.bin
	t_check "$name: no verdict on the blob or its source in the log" no_verdict "$log"
	echo "$name: requests: bad proxy $(wc -l <"$blog"), good $(($(wc -l <"$GLOG") - g0)), DIRECT $(($(served "$OLOG") - o0)) ranges"
	umount_pacefs "$mnt"
	return 0
}

for kind in norange badrange etag-change:1 content-change:1; do
	one_case "$kind" bad-first
	one_case "$kind" group
done

# --- a real change, seen through a good proxy and DIRECT: believed ------------
# The proxy and DIRECT agree on another version: reads fail with EIO as
# without a proxy (change.sh), and the proxy, which told the truth, is
# not counted as bad.
gen_file "$WWW/change.bin" "$SIZE" 2203
gen_file "$T_TMP/change.new" "$SIZE" 2204
mnt=$T_TMP/mchg
log=$T_TMP/mchg.log
mkdir -p "$mnt"
if fg_mount "$log" -o "cache_dir=$T_TMP/cchg,chunk=256K,proxy=$GOOD;DIRECT" "$ORIG/change.bin" "$mnt"; then
	t_check "a real change: the old version's first MiB" cmp -n "$MIB" "$mnt/change.bin" "$WWW/change.bin"
	sleep 1.1 # a new mtime, so a new ETag
	cp "$T_TMP/change.new" "$WWW/change.bin.tmp"
	mv "$WWW/change.bin.tmp" "$WWW/change.bin"
	if dd if="$mnt/change.bin" of=/dev/null bs=1M skip=4 2>/dev/null; then
		t_fail "a real change through a proxy and DIRECT: EIO" "the read succeeded"
	else
		t_pass "a real change through a proxy and DIRECT: EIO"
	fi
	t_check "a real change: the log says it changed, until a remount" grep -q "until it is remounted" "$log"
	t_eq "a real change: the proxy that said so is no bad answer" "$(json_field "$mnt" "$GOOD" bad_answers)" 0
	umount_pacefs "$mnt"
else
	t_fail "a real change: the mount comes up" "$(tail -n 2 "$log" | tr '\n' ' ')"
fi

# --- -o sha256=: a proxy serving wrong bytes under the right ETag --------------
o_start corrupt --root "$WWW" --fault '*:corrupt:0'
CBAD=$O_URL
mnt=$T_TMP/msha
log=$T_TMP/msha.log
mkdir -p "$mnt"
o0=$(served "$OLOG")
if fg_mount "$log" -o "cache_dir=$T_TMP/csha,chunk=1M,sha256=$SUM,proxy=$CBAD;DIRECT" \
	"$ORIG/blob.bin" "$mnt"; then
	t_pass "sha256, corrupt proxy: the mount comes up"
	# The first read is served before the whole blob can be checked: its
	# bytes came through the corrupt proxy.
	cat "$mnt/blob.bin" >/dev/null || true
	for _ in $(seq 1 100); do
		grep -q "SHA-256 of the whole blob" "$log" && break
		sleep 0.1
	done
	t_check "sha256, corrupt proxy: the mismatch names the proxy, excluded" \
		grep -q "with bytes through proxy $CBAD: excluded" "$log"
	echo 3 >/proc/sys/vm/drop_caches
	t_check "sha256, corrupt proxy: a second read has the right bytes" \
		readcmp_all "$mnt" blob.bin
	for _ in $(seq 1 100); do
		grep -q "blob.bin: SHA-256 verified" "$log" && break
		sleep 0.1
	done
	t_check "sha256, corrupt proxy: the digest verifies" grep -q "blob.bin: SHA-256 verified" "$log"
	t_check "sha256, corrupt proxy: no EIO verdict" \
		bash -c "! grep -q 'its reads fail with EIO' '$log'"
	t_check "sha256, corrupt proxy: DIRECT served the second fetch" test "$(served "$OLOG")" -gt "$o0"
	t_eq "sha256, corrupt proxy: status says excluded" "$(json_field "$mnt" "$CBAD" state)" excluded
	t_eq "sha256, corrupt proxy: counted as a bad answer" "$(json_field "$mnt" "$CBAD" bad_answers)" 1
	umount_pacefs "$mnt"
else
	t_fail "sha256, corrupt proxy: the mount comes up" "$(tail -n 2 "$log" | tr '\n' ' ')"
fi

# --- block digests from a manifest: the corrupt proxy is excluded, counted ----
blocks=$(block_digests "$WWW/blob.bin")
cat >"$T_TMP/m.json" <<-EOF
	{"version": 1, "files": [{"path": "blob.bin", "urls": ["$ORIG/blob.bin"],
	 "size": $SIZE, "block_size": 65536, "block_sha256": [$blocks]}]}
EOF
mnt=$T_TMP/mblk
log=$T_TMP/mblk.log
mkdir -p "$mnt"
if fg_mount "$log" -o "cache_dir=$T_TMP/cblk,chunk=1M,proxy=$CBAD;DIRECT" "$T_TMP/m.json" "$mnt"; then
	t_check "block digests, corrupt proxy: every byte right on the first read" \
		readcmp_all "$mnt" blob.bin
	t_eq "block digests, corrupt proxy: status says excluded" "$(json_field "$mnt" "$CBAD" state)" excluded
	t_eq "block digests, corrupt proxy: counted as a bad answer" \
		"$(json_field "$mnt" "$CBAD" bad_answers)" 1
	umount_pacefs "$mnt"
else
	t_fail "block digests, corrupt proxy: the mount comes up" "$(tail -n 2 "$log" | tr '\n' ' ')"
fi

t_done

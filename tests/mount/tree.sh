#!/usr/bin/env bash
# tree.sh: manifest mounts (nested trees, modes, dates, attributes), bad
# manifests (each error names the entry and the field), directory-index
# mounts from nginx autoindex, pacefs status (also with more files in use
# than its attribute holds), an interrupted read, and 32
# readers over 8 files at once, every byte compared.
set -euo pipefail
# shellcheck source=tests/lib.sh
source "$(dirname "$0")/../lib.sh"
t_require_mount

WWW=$T_TMP/www
mkdir -p "$WWW/data/sub dir" "$WWW/slow"
for i in 1 2 3 4 5 6 7 8; do
	gen_file "$WWW/data/f$i.bin" $((3 * 1048576 + i * 1000)) $((80 + i))
done
gen_file "$WWW/data/sub dir/a b.bin" 123457 89
gen_file "$WWW/slow/s.bin" 4194304 90
origin_start "$WWW" 'autoindex on; autoindex_exact_size on;'
U=$ORIGIN_URL

# --- a manifest: a tree, with modes, dates and digests.
sha() { sha256sum "$1" | cut -d' ' -f1; }
{
	printf '{"version": 1, "files": [\n'
	for i in 1 2 3 4 5 6 7 8; do
		printf '{"path": "set/part%d/f%d.bin", "urls": ["%s/data/f%d.bin"], "size": %d, "sha256": "%s"},\n' \
			$((i % 2)) "$i" "$U" "$i" "$(stat -c %s "$WWW/data/f$i.bin")" "$(sha "$WWW/data/f$i.bin")"
	done
	printf '{"path": "top.bin", "urls": ["%s/data/sub%%20dir/a%%20b.bin"], "mode": "0440", "mtime": "2024-08-31T10:12:05Z"}\n' "$U"
	printf ']}\n'
} >"$T_TMP/m.json"
MNT=$T_TMP/mnt-m
mkdir -p "$MNT"
mount_pacefs -o "cache_dir=$T_TMP/cache-m" "$T_TMP/m.json" "$MNT"
t_eq "manifest: top level" "set top.bin" "$(ls "$MNT" | tr '\n' ' ' | sed 's/ $//')"
t_eq "manifest: nested directories" "f2.bin f4.bin f6.bin f8.bin" \
	"$(ls "$MNT/set/part0" | tr '\n' ' ' | sed 's/ $//')"
t_eq "manifest: mode" "440" "$(stat -c %a "$MNT/top.bin")"
t_eq "manifest: mtime" "$(date -d 2024-08-31T10:12:05Z +%s)" "$(stat -c %Y "$MNT/top.bin")"
t_eq "manifest: size probed when not given" 123457 "$(stat -c %s "$MNT/top.bin")"
t_check "manifest: a file's bytes" cmp "$MNT/top.bin" "$WWW/data/sub dir/a b.bin"

# 32 readers over 8 files at once, half sequential, half random preads.
pids=()
for r in $(seq 0 31); do
	i=$((r % 8 + 1))
	f=$MNT/set/part$((i % 2))/f$i.bin
	if [ $((r % 2)) -eq 0 ]; then
		"$READCMP" seq "$f" "$WWW/data/f$i.bin" >"$T_TMP/r$r.out" 2>&1 &
	else
		"$READCMP" random "$f" "$WWW/data/f$i.bin" 100 "$r" >"$T_TMP/r$r.out" 2>&1 &
	fi
	pids+=($!)
done
bad=0
for r in $(seq 0 31); do
	wait "${pids[$r]}" || { bad=$((bad + 1)); echo "reader $r: $(cat "$T_TMP/r$r.out")"; }
done
t_eq "32 readers over 8 files: every byte equal" 0 "$bad"

# Attributes.
F1=$MNT/set/part1/f1.bin
t_eq "xattr url" "$U/data/f1.bin" "$(getfattr --absolute-names --only-values -n user.pacefs.url "$F1")"
t_eq "xattr size" "$(stat -c %s "$WWW/data/f1.bin")" "$(getfattr --absolute-names --only-values -n user.pacefs.size "$F1")"
t_eq "xattr cached (all read)" "$(stat -c %s "$WWW/data/f1.bin")" \
	"$(getfattr --absolute-names --only-values -n user.pacefs.cached "$F1")"
t_eq "xattr sha256" "$(sha "$WWW/data/f1.bin")" "$(getfattr --absolute-names --only-values -n user.pacefs.sha256 "$F1")"
t_eq "xattr state" complete "$(getfattr --absolute-names --only-values -n user.pacefs.state "$F1")"
etag=$(getfattr --absolute-names --only-values -n user.pacefs.etag "$F1")
if [ -n "$etag" ] && curl -sI "$U/data/f1.bin" | grep -qF "$etag"; then
	t_pass "xattr etag is the origin's: $etag"
else
	t_fail "xattr etag" "'$etag'"
fi
t_check "listxattr" bash -c "getfattr --absolute-names -d -m 'user.pacefs' '$F1' | grep -q user.pacefs.state"

# pacefs status: a bar per file in use, and the cache.
"$PACEFS" status "$MNT" >"$T_TMP/status.out" 2>&1 || true
if grep -q 'set/part1/f1.bin .*\[#*\] 100.0%' "$T_TMP/status.out" && grep -q '^cache:' "$T_TMP/status.out" &&
	grep -q "^source $U/data/f1.bin: ok" "$T_TMP/status.out"; then
	t_pass "pacefs status: $(head -n 1 "$T_TMP/status.out")"
else
	t_fail "pacefs status" "$(head -n 5 "$T_TMP/status.out")"
fi
if "$PACEFS" status --json "$MNT" | grep -q '"files":\[{"path":'; then
	t_pass "pacefs status --json"
else
	t_fail "pacefs status --json" "$("$PACEFS" status --json "$MNT" 2>&1 | head -c 300)"
fi
# The tree's entries: 9 files; the root, set, part0 and part1; its memory
# a few KiB (a node is some 200 bytes, its name and URL beside it).
tree=$("$PACEFS" status --json "$MNT" | python3 -c '
import json, sys
t = json.load(sys.stdin)["tree"]
print(t["files"], t["dirs"], 2048 <= t["bytes"] <= 65536)')
t_eq "pacefs status: the tree's files, directories and memory" "9 4 True" "$tree"
t_check "pacefs status: a line for the tree" grep -q '^tree: 9 files, 4 directories, .* of memory$' "$T_TMP/status.out"
umount_pacefs "$MNT"

# --- bad manifests: one line naming the entry and the field, exit 1.
bad_manifest() {
	local name=$1 want=$2 json=$3 rc=0
	printf '%s' "$json" >"$T_TMP/bad.json"
	timeout 30 "$PACEFS" -o "cache_dir=$T_TMP/cache-bad" "$T_TMP/bad.json" "$MNT" \
		</dev/null >/dev/null 2>"$T_TMP/bad.err" || rc=$?
	if [ "$rc" -eq 1 ] && [ "$(grep -c . "$T_TMP/bad.err")" -eq 1 ] &&
		grep -qF -- "$want" "$T_TMP/bad.err" && ! is_mounted "$MNT"; then
		t_pass "bad manifest, $name: $(cat "$T_TMP/bad.err")"
	else
		t_fail "bad manifest, $name" "exit $rc: $(cat "$T_TMP/bad.err")"
	fi
}
bad_manifest "short digest" 'files[1].sha256' \
	'{"version":1,"files":[{"path":"a","urls":["http://h/a"]},{"path":"b","urls":["http://h/b"],"sha256":"abc"}]}'
bad_manifest "dot-dot path" 'files[0].path' '{"version":1,"files":[{"path":"a/../b","urls":["http://h/a"]}]}'
bad_manifest "duplicate path" 'files[1].path' \
	'{"version":1,"files":[{"path":"a","urls":["http://h/a"]},{"path":"a","urls":["http://h/b"]}]}'
bad_manifest "absolute path" 'files[0].path' '{"version":1,"files":[{"path":"/etc/x","urls":["http://h/a"]}]}'
bad_manifest "no urls" 'files[0].urls' '{"version":1,"files":[{"path":"a","urls":[]}]}'
bad_manifest "unknown field" 'files[0]' '{"version":1,"files":[{"path":"a","urls":["http://h/a"],"colour":1}]}'
bad_manifest "not JSON" 'line 1' '{"version":1,'

# --- a directory-index mount of nginx's autoindex, subdirectories too.
MNT=$T_TMP/mnt-i
mkdir -p "$MNT"
mount_pacefs -o "cache_dir=$T_TMP/cache-i,listing_ttl=1" "$U/data/" "$MNT"
t_eq "index: top level" "f1.bin f2.bin f3.bin f4.bin f5.bin f6.bin f7.bin f8.bin sub dir" \
	"$(ls "$MNT" | tr '\n' ' ' | sed 's/ $//')"
t_eq "index: subdirectory" "a b.bin" "$(ls "$MNT/sub dir")"
t_eq "index: size from the listing" 123457 "$(stat -c %s "$MNT/sub dir/a b.bin")"
t_check "index: bytes of a file in a subdirectory" cmp "$MNT/sub dir/a b.bin" "$WWW/data/sub dir/a b.bin"
t_check "index: bytes of a top file" "$READCMP" seq "$MNT/f3.bin" "$WWW/data/f3.bin"
cp "$WWW/data/f1.bin" "$WWW/data/new.bin"
sleep 1.2
if ls "$MNT" | grep -qx new.bin; then
	t_pass "index: a new file appears after the listing TTL"
else
	t_fail "index: a new file appears after the listing TTL" "$(ls "$MNT" | tr '\n' ' ')"
fi
umount_pacefs "$MNT"

# --- pacefs status with more files in use than its attribute holds (64
# KiB): the files it has room for, a count of the others, and every other
# section.
mkdir -p "$WWW/many"
for i in $(seq 1 600); do printf 'file %d\n' "$i" >"$WWW/many/f$i"; done
{
	printf '{"version": 1, "files": [\n'
	for i in $(seq 1 600); do
		printf '{"path": "a-directory-with-a-long-name/f%04d.txt", "urls": ["%s/many/f%d"]}%s\n' \
			"$i" "$U" "$i" "$([ "$i" -lt 600 ] && echo ,)"
	done
	printf ']}\n'
} >"$T_TMP/many.json"
MNT=$T_TMP/mnt-many
mkdir -p "$MNT"
mount_pacefs -o "cache_dir=$T_TMP/cache-many" "$T_TMP/many.json" "$MNT"
cat "$MNT"/a-directory-with-a-long-name/* >"$T_TMP/many.out"
t_eq "600 files read" "$(for i in $(seq 1 600); do printf 'file %d\n' "$i"; done | md5sum)" \
	"$(md5sum <"$T_TMP/many.out")"
many=$("$PACEFS" status --json "$MNT" 2>&1 | python3 -c '
import json, sys
d = json.load(sys.stdin)
print(len(d["files"]) + d.get("files_left_out", 0), d.get("files_left_out", 0) > 0,
      "cache" in d, "tree" in d)' 2>&1 || true)
t_eq "pacefs status --json: 600 files in use, some counted only, every section" \
	"$many" "600 True True True"
"$PACEFS" status "$MNT" >"$T_TMP/status-many.out" 2>&1 || true
t_check "pacefs status: the files left out counted, the cache shown" \
	grep -q '^cache:' "$T_TMP/status-many.out"
t_check "pacefs status: a line for the files not shown" \
	grep -q '^(and [0-9]* more files in use, not shown)$' "$T_TMP/status-many.out"
umount_pacefs "$MNT"

# --- an interrupted read returns at once with EINTR, not at its deadline.
o_start slow --root "$WWW" --fault '/slow/*:stall:1000'
MNT=$T_TMP/mnt-s
mkdir -p "$MNT"
fg_mount "$T_TMP/slow.log" -o "cache_dir=$T_TMP/cache-s,read_timeout=60,stall_timeout=60" \
	"$O_URL/slow/s.bin" "$MNT"
INTREAD=$(dirname "$READCMP")/intread
t_check "a blocked read ends with EINTR on a signal (deadline 60 s)" timeout 10 "$INTREAD" "$MNT/s.bin" 1
umount_pacefs "$MNT"

t_done

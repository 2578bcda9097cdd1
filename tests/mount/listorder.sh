#!/usr/bin/env bash
# listorder.sh: read-ahead without a plan, through a real mount of a far
# origin (20 ms before every response, 8 MB/s a connection), 32 KiB files.
# tar reads a directory in its listing's order: every byte compared with
# the origin's files, at least 150 files/s (one open at a time pays a
# round trip without read-ahead: ~39 files/s) over a few connections kept
# from one file to the next, and status shows the listing plan tar had; a process that opens the same files in a shuffled
# order gets no listing plan and pulls no file it did not open; with
# -o listahead=off tar gets none either; a process that reads the first
# KiB of each large file in listing order pulls little more than that; a
# loader's workers reading every 4th file each get a listing plan.
set -euo pipefail
# shellcheck source=tests/lib.sh
source "$(dirname "$0")/../lib.sh"
t_require_mount
t_require_origin

PY=/usr/bin/python3
if [ ! -x "$PY" ]; then
	t_skip_all "no $PY"
fi
N=400
WWW=$T_TMP/www
mkdir -p "$T_TMP/mnt" "$T_TMP/out"
random_files "$WWW/d" 'f-%d.bin' "$N" 32768
random_files "$WWW/d/sub" 's-%d.bin' 10 32768
random_files "$WWW/big" 'b-%d.bin' 40 $((2 * 1048576))
o_start far --root "$WWW" --latency 20 --rate 8M --autoindex

# mount_fresh [OPTS]: a new mount of the origin, cold cache.
mount_fresh() {
	umount_pacefs "$T_TMP/mnt"
	rm -rf "$T_TMP/cache"
	if ! fg_mount "$T_TMP/mount.log" -o "cache_dir=$T_TMP/cache${1:+,$1}" \
		"$O_URL/" "$T_TMP/mnt"; then
		t_fail "mount" "$(tail -n 3 "$T_TMP/mount.log")"
		t_done
	fi
}

# d_files: the names of d's files through the mount, in listing order.
d_files() {
	find "$T_TMP/mnt/d" -maxdepth 1 -name 'f-*' -printf '%f\n'
}

# origin_files MARK: distinct files of d/ the origin served since byte
# MARK of its log.
origin_files() {
	tail -c +"$(($1 + 1))" "$O_LOG" | awk '$2 ~ /^\/d\/f-/ { print $2 }' | sort -u | wc -l
}

# conns: this machine's TCP connections to the origin's port, in any state
# (a closed one stays in TIME-WAIT for a minute), one local port a line.
conns() {
	ss -tanH state all "( dport = :${O_URL##*:} )" | awk '{ print $4 }' | sort -u
}

# 1. tar of the directory, every byte compared, and its rate.
mount_fresh
ls "$T_TMP/mnt/d" >/dev/null
conns >"$T_TMP/conns.before"
t0=$(date +%s.%N)
rc=0
timeout 60 tar cf - -C "$T_TMP/mnt" d | tar xf - -C "$T_TMP/out" || rc=$?
t1=$(date +%s.%N)
conns >"$T_TMP/conns.after"
opened=$(comm -13 "$T_TMP/conns.before" "$T_TMP/conns.after" | wc -l)
rate=$(awk -v a="$t0" -v b="$t1" -v n=$((N + 10)) 'BEGIN { printf "%.0f", n / (b - a) }')
st=$("$PACEFS" status --json "$T_TMP/mnt" 2>&1 || true)
if [ "$rc" -ne 0 ] || ! diff -r "$WWW/d" "$T_TMP/out/d" >/dev/null; then
	t_fail "tar reads every byte" "exit $rc; $(diff -rq "$WWW/d" "$T_TMP/out/d" 2>&1 | head -n 3)"
elif [ "$rate" -ge 150 ]; then
	t_pass "tar of $((N + 10)) files of 32 KiB, bytes compared: $rate files/s (>= 150)"
else
	t_fail "tar at >= 150 files/s" "$rate files/s"
fi
# The plan's workers probe file after file on connections they keep (one
# a file before: 410).
if [ "$opened" -le 64 ]; then
	t_pass "tar's $((N + 10)) files came over $opened connections (<= 64)"
else
	t_fail "tar's files over <= 64 connections" "$opened connections opened"
fi
if grep -q '"kind":"listing","pid":[0-9]*,"dir":"/d"' <<<"$st" &&
	grep -q '"state":"done"' <<<"$st"; then
	t_pass "status shows tar's listing plan: $("$PACEFS" status "$T_TMP/mnt" | grep listing | head -n 2 | tr '\n' ' ')"
else
	t_fail "status shows tar's listing plan" "$(cut -c1-400 <<<"$st")"
fi

# 2. One process opens 100 files of the directory in a shuffled order
# (a fixed one, with no three in listing order): no listing plan, and the
# origin serves the files it opened and no other.
mount_fresh
mark=$(stat -c %s "$O_LOG")
d_files | shuf -n 100 --random-source=<(yes) >"$T_TMP/random"
rout=$(timeout 60 "$PY" - "$T_TMP/mnt/d" "$WWW/d" "$T_TMP/random" <<'EOF' 2>&1
import sys
mnt, www, lst = sys.argv[1:4]
names = [l.strip() for l in open(lst) if l.strip()]
bad = 0
for n in names:
    with open(mnt + "/" + n, "rb") as f, open(www + "/" + n, "rb") as g:
        bad += f.read() != g.read()
print("ok" if bad == 0 else "%d differ" % bad)
EOF
) || true
sleep 1
pulled=$(origin_files "$mark")
st=$("$PACEFS" status --json "$T_TMP/mnt" 2>&1 || true)
if [ "$rout" = ok ] && [ "$pulled" -le 100 ] && ! grep -q '"kind":"listing"' <<<"$st"; then
	t_pass "a shuffled reader gets no listing read-ahead: $pulled files pulled for 100 opened, bytes compared"
else
	t_fail "a shuffled reader gets no listing read-ahead" "$rout; $pulled files pulled; $(grep -o '"plans":\[[^]]*' <<<"$st" | cut -c1-300)"
fi

# 3. -o listahead=off: tar in listing order gets no listing plan; its
# first 30 files, with the origin's files pulled no more than opened.
mount_fresh "listahead=off"
mark=$(stat -c %s "$O_LOG")
d_files | head -n 30 >"$T_TMP/first"
rc=0
(cd "$T_TMP/mnt/d" && timeout 60 tar cf - -T "$T_TMP/first" | wc -c >/dev/null) || rc=$?
sleep 1
pulled=$(origin_files "$mark")
st=$("$PACEFS" status --json "$T_TMP/mnt" 2>&1 || true)
if [ "$rc" -eq 0 ] && [ "$pulled" -le 30 ] && ! grep -q '"kind":"listing"' <<<"$st"; then
	t_pass "listahead=off: $pulled files pulled for 30 read in order, no listing plan"
else
	t_fail "listahead=off" "exit $rc; $pulled files pulled; $(cut -c1-300 <<<"$st")"
fi

# 4. One process reads the first 4 KiB of each of 40 files of 2 MiB in
# listing order (file *, a thumbnailer): it gets a listing plan, which
# fetches 256 KiB of each file ahead at most: the origin sends at most
# that more than without listing plans (where each read's own reader
# fetches around it, about 1 MiB a file), not the files (80 MiB).
# big_sent: bytes the origin sent of big/ for that process.
big_sent() {
	local mark out
	mark=$(stat -c %s "$O_LOG")
	out=$(timeout 60 "$PY" - "$T_TMP/mnt/big" "$WWW/big" <<'EOF' 2>&1
import os, sys
mnt, www = sys.argv[1:3]
bad = 0
for n in os.listdir(mnt):
    with open(os.path.join(mnt, n), "rb") as f, open(os.path.join(www, n), "rb") as g:
        bad += f.read(4096) != g.read(4096)
print("ok" if bad == 0 else "%d differ" % bad)
EOF
	) || true
	sleep 1
	if [ "$out" != ok ]; then
		echo "$out"
		return
	fi
	tail -c +"$((mark + 1))" "$O_LOG" | awk '$2 ~ /^\/big\// { s += $5 } END { print s + 0 }'
}
# (Part 5's reading without listing plans, on this mount.)
d_files | sed -n '101,300p' | sed 's|^|d/|' >"$T_TMP/workers"
loff=$(timeout 60 "$PY" "$T_ROOT/tests/planload.py" "$T_TMP/mnt" "$WWW" "$T_TMP/workers" 4 2>&1) || true
off=$(big_sent)
mount_fresh
on=$(big_sent)
st=$("$PACEFS" status --json "$T_TMP/mnt" 2>&1 || true)
if [[ $on =~ ^[0-9]+$ && $off =~ ^[0-9]+$ ]] && [ "$on" -le $((off + 40 * 262144)) ] &&
	grep -q '"kind":"listing","pid":[0-9]*,"dir":"/big"' <<<"$st"; then
	t_pass "4 KiB of each of 40 files of 2 MiB in listing order: a listing plan, $((on / 1024)) KiB sent ($((off / 1024)) KiB without listing plans, + 10240 at most)"
else
	t_fail "a listing plan of large files read in part" "$on bytes sent, $off without; $(grep -o '"plans":\[[^]]*' <<<"$st" | cut -c1-300)"
fi
# 5. A loader's 4 worker processes read 200 files in listing order, each
# every 4th (planload.py): each gets a listing plan of its files, and the
# loader is faster than without listing plans (one round trip a file a
# worker there).
lon=$(timeout 60 "$PY" "$T_ROOT/tests/planload.py" "$T_TMP/mnt" "$WWW" "$T_TMP/workers" 4 2>&1) || true
st=$("$PACEFS" status --json "$T_TMP/mnt" 2>&1 || true)
fon=$(awk '/^ok/ { print $(NF - 1) }' <<<"$lon")
foff=$(awk '/^ok/ { print $(NF - 1) }' <<<"$loff")
nplans=$(grep -o '"kind":"listing","pid":[0-9]*,"dir":"/d"' <<<"$st" | wc -l)
if [[ $lon != ok* || $loff != ok* ]]; then
	t_fail "4 workers read every byte" "with listing plans: $lon; without: $loff"
elif [ "$nplans" -ge 4 ] && awk -v a="$fon" -v b="$foff" 'BEGIN { exit !(a >= 1.5 * b) }'; then
	t_pass "4 workers, each every 4th file in listing order, bytes compared: $fon files/s with $nplans listing plans, $foff without"
else
	t_fail "4 workers in listing order: 4 listing plans, 1.5x faster" "$nplans plans; $fon files/s with, $foff without"
fi

umount_pacefs "$T_TMP/mnt"
if grep -qiE 'assert|segfault|abort' "$T_TMP/mount.log"; then
	t_fail "the daemon's log" "$(grep -iE 'assert|segfault|abort' "$T_TMP/mount.log" | head -n 2)"
fi

t_done

#!/usr/bin/env bash
# outage.sh: sources that die, hosts that do not resolve, a cache on a full
# filesystem: reads end with correct bytes or EIO by their deadline, held
# bytes and metadata keep working, and the daemon stays up.
set -euo pipefail
# shellcheck source=tests/lib.sh
source "$(dirname "$0")/../lib.sh"
t_require_mount
t_require_origin

WWW=$T_TMP/www
mkdir -p "$WWW"
SIZE=$((24 * 1048576 + 777))
gen_file "$WWW/f.bin" "$SIZE" 71

# --- one of two mirrors dies mid-read: the read completes from the other.
# The kill must land while a lane of the first mirror is mid-transfer, or
# no transfer of it fails and the log has nothing to name it by (a read
# that a loaded machine let finish first did so): it waits for a lane of
# the first mirror with 64 KiB still to come, 2 s at its 32 KiB/s per
# connection (its first ranges, 128 KiB, take 4 s), a margin for a loaded
# machine between the look and the kill. A range under way is one the
# read still needs, so the read cannot have ended either.
o_start a --root "$WWW" --rate 32K
A_PID=$O_PID
A_URL=$O_URL
o_start b --root "$WWW" --rate 1M
B_URL=$O_URL
MNT=$T_TMP/mnt-mirrors
mkdir -p "$MNT"
fg_mount "$T_TMP/mirrors.log" -o "cache_dir=$T_TMP/cache-mirrors,read_timeout=20,stall_timeout=2" \
	-o "mirror=$B_URL/f.bin" "$A_URL/f.bin" "$MNT"
dd if="$MNT/f.bin" of="$T_TMP/out-mirrors" bs=1M 2>"$T_TMP/dd-mirrors.err" &
DD=$!
armed=
for _ in $(seq 1 400); do
	if "$PACEFS" status --json "$MNT" 2>/dev/null | python3 -c 'import json, sys
lanes = json.load(sys.stdin)["lanes"]
sys.exit(not any(l["source"] == sys.argv[1] and l["end"] - l["frontier"] >= 65536
	for l in lanes))' "$A_URL/f.bin"; then
		armed=1
		break
	fi
	kill -0 "$DD" 2>/dev/null || break
	sleep 0.05
done
{ kill -KILL "$A_PID" && wait "$A_PID"; } 2>/dev/null || true
# Whether a lane of the first mirror was still under way once it died: on a
# loaded machine the look and the kill are far apart, and the scheduler may
# have handed the slow mirror's range to the fast one meanwhile (nothing of
# it left to fail, nothing to log).
a_lanes=$("$PACEFS" status --json "$MNT" 2>/dev/null | python3 -c 'import json, sys
print(sum(l["source"] == sys.argv[1] for l in json.load(sys.stdin)["lanes"]))' "$A_URL/f.bin" 2>/dev/null || echo 0)
if [ -n "$armed" ]; then
	t_pass "the kill lands while a lane of the first mirror has 64 KiB to come"
else
	t_fail "the kill lands while a lane of the first mirror has 64 KiB to come" \
		"none seen$(kill -0 "$DD" 2>/dev/null || echo ' before the read ended')"
fi
rc=0
start=$SECONDS
timeout 60 tail --pid="$DD" -f /dev/null || rc=$?
wait "$DD" || rc=$?
if [ "$rc" -eq 0 ]; then
	t_check "mirror died mid-read: every byte from the other ($((SECONDS - start)) s after the kill)" \
		cmp "$T_TMP/out-mirrors" "$WWW/f.bin"
else
	t_fail "mirror died mid-read" "dd exit $rc: $(tail -n 2 "$T_TMP/dd-mirrors.err")"
fi
served_b=$(awk '$4 == 206' "$T_TMP/b.log" | wc -l)
if [ "$served_b" -gt 0 ]; then
	t_pass "the surviving mirror served $served_b ranges"
else
	t_fail "the surviving mirror served ranges" "none in its log"
fi
if grep -q "lane [0-9]*: $A_URL/f.bin: " "$T_TMP/mirrors.log"; then
	t_pass "the dead mirror is named in the log: $(grep -m1 "lane [0-9]*: $A_URL/f.bin: " "$T_TMP/mirrors.log" | cut -c1-150)"
elif [ "$a_lanes" = 0 ]; then
	t_skip "the dead mirror is named in the log" "no lane of it was under way when it died"
else
	t_fail "the dead mirror is named in the log" "$(tail -n 3 "$T_TMP/mirrors.log")"
fi
umount_pacefs "$MNT"

# --- every source dies: unheld reads fail by their deadline; metadata and
# held bytes keep working.
o_kill_all
o_start c --root "$WWW"
C_PID=$O_PID
MNT=$T_TMP/mnt-dead
mkdir -p "$MNT"
fg_mount "$T_TMP/dead.log" -o "cache_dir=$T_TMP/cache-dead,read_timeout=5" "$O_URL/f.bin" "$MNT"
# A small read, so that read-ahead stays far from offset 20 MiB.
t_check "before the outage: first 128 KiB" cmp -n 131072 "$MNT/f.bin" "$WWW/f.bin"
{ kill -KILL "$C_PID" && wait "$C_PID"; } 2>/dev/null || true
rc=0
start=$SECONDS
dd if="$MNT/f.bin" of=/dev/null bs=1M skip=20 count=1 iflag=direct 2>"$T_TMP/dd-dead.err" || rc=$?
took=$((SECONDS - start))
if [ "$rc" -ne 0 ] && grep -q 'Input/output error' "$T_TMP/dd-dead.err" && [ "$took" -le 7 ]; then
	t_pass "origin dead: an unheld read fails with EIO in ${took} s (deadline 5 s)"
else
	t_fail "origin dead: an unheld read fails with EIO by its deadline" "dd exit $rc after ${took} s"
fi
t_check "origin dead: ls" ls -l "$MNT/f.bin"
t_eq "origin dead: stat size" "$SIZE" "$(stat -c %s "$MNT/f.bin")"
t_check "origin dead: held bytes still read" cmp -n 131072 "$MNT/f.bin" "$WWW/f.bin"
if kill -0 "$FG_PID" 2>/dev/null; then
	t_pass "origin dead: daemon alive"
else
	t_fail "origin dead: daemon alive" "$(tail -n 3 "$T_TMP/dead.log")"
fi
umount_pacefs "$MNT"

# --- a host that does not resolve: in a network namespace of its own, so
# the lookup cannot leave the machine.
if unshare -n true 2>/dev/null; then
	rc=0
	timeout 30 unshare -n "$PACEFS" -o "cache_dir=$T_TMP/cache-dns" \
		http://pacefs-no-such-host.invalid/f.bin "$MNT" \
		</dev/null >/dev/null 2>"$T_TMP/dns.err" || rc=$?
	if [ "$rc" -eq 1 ] && grep -qi 'resolve' "$T_TMP/dns.err" && ! is_mounted "$MNT"; then
		t_pass "unresolvable host: $(cat "$T_TMP/dns.err")"
	else
		t_fail "unresolvable host" "exit $rc: $(cat "$T_TMP/dns.err")"
	fi
else
	t_skip "unresolvable host" "unshare -n is not available"
fi

# --- the cache on a small filesystem that fills up: reads still return
# correct bytes (or EIO), the daemon lives, the log says why.
o_start d --root "$WWW"
SMALL=$T_TMP/small
mkdir -p "$SMALL"
mount -t tmpfs -o size=6m tmpfs "$SMALL"
T_MOUNTS+=("$SMALL")
MNT=$T_TMP/mnt-full
mkdir -p "$MNT"
fg_mount "$T_TMP/full.log" -o "cache_dir=$SMALL/cache,read_timeout=20" "$O_URL/f.bin" "$MNT"
rc=0
timeout 120 dd if="$MNT/f.bin" of="$T_TMP/out-full" bs=1M 2>"$T_TMP/dd-full.err" || rc=$?
if [ "$rc" -eq 0 ]; then
	t_check "full cache filesystem: every byte correct" cmp "$T_TMP/out-full" "$WWW/f.bin"
elif grep -q 'Input/output error' "$T_TMP/dd-full.err"; then
	t_check "full cache filesystem: a clean EIO, no wrong byte before it" \
		cmp -n "$(stat -c %s "$T_TMP/out-full")" "$T_TMP/out-full" "$WWW/f.bin"
else
	t_fail "full cache filesystem" "dd exit $rc: $(tail -n 2 "$T_TMP/dd-full.err")"
fi
if grep -Eq 'could not be stored in the cache' "$T_TMP/full.log"; then
	t_pass "full cache filesystem: logged: $(grep -m1 'could not be stored' "$T_TMP/full.log" | cut -c1-160)"
else
	t_fail "full cache filesystem: logged" "$(tail -n 3 "$T_TMP/full.log")"
fi
if kill -0 "$FG_PID" 2>/dev/null; then
	t_pass "full cache filesystem: daemon alive"
else
	t_fail "full cache filesystem: daemon alive" "$(tail -n 3 "$T_TMP/full.log")"
fi
umount_pacefs "$MNT"
# The daemon lets go of the cache once it has flushed and closed it: only
# then may its filesystem go.
pid_gone "$FG_PID" 30 || true
wait "$FG_PID" 2>/dev/null || true
umount "$SMALL"

t_done

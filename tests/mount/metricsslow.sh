#!/usr/bin/env bash
# metricsslow.sh: the metrics endpoint against slow clients. While 64
# connections from the scraper's own address each dribble a request one
# header line at a time (reconnecting when closed, as a slowloris does),
# every scrape is answered within 1 s with the exposition; an unmount and
# a SIGTERM with those connections open end the daemon within 2 s; and a
# bind to every interface is a warning at mount saying who can reach it,
# a bind to loopback none.
set -euo pipefail
# shellcheck source=tests/lib.sh
source "$(dirname "$0")/../lib.sh"
t_require_mount
t_require_origin
for tool in curl python3; do
	if ! command -v "$tool" >/dev/null 2>&1; then
		t_fail "$T_NAME" "$tool is missing (contrib/install-deps.sh installs it)"
		t_done
	fi
done

WWW=$T_TMP/www
mkdir -p "$WWW"
SIZE=$((1048576 + 4321))
gen_file "$WWW/f.bin" "$SIZE" 33
o_start origin --root "$WWW"
SLOW=64
BOUND=2

# The slowloris: SLOW connections to 127.0.0.1:PORT, each sending a
# request line once connected, then one header line every 0.5 s, never
# the blank line that ends it; a connection the server closes is opened
# again 50 ms later. Until STOP exists or 120 s have passed; READY once
# every connection has been asked for; the counts in STATS at the end.
cat >"$T_TMP/slow.py" <<'EOF'
import errno, os, selectors, socket, sys, time
port, n, ready, stop, stats = int(sys.argv[1]), int(sys.argv[2]), *sys.argv[3:6]
sel = selectors.DefaultSelector()
opened = closed = 0
due = {}  # a connected socket: when its next header line is due
slot = {}  # a socket: its slot
again = [0.0] * n  # a slot: when to open it again (0: it is open)

def open_slot(i):
    s = socket.socket()
    s.setblocking(False)
    if s.connect_ex(("127.0.0.1", port)) not in (0, errno.EINPROGRESS):
        s.close()
        again[i] = time.monotonic() + 0.05
        return
    slot[s] = i
    sel.register(s, selectors.EVENT_WRITE)

def drop(s, by_server):
    global closed
    closed += by_server
    sel.unregister(s)
    again[slot.pop(s)] = time.monotonic() + 0.05
    due.pop(s, None)
    s.close()

def send(s, data):
    try:
        s.send(data)
        due[s] = time.monotonic() + 0.5
    except OSError:
        drop(s, 1)

for i in range(n):
    open_slot(i)
open(ready, "w").close()
end = time.monotonic() + 120
while time.monotonic() < end and not os.path.exists(stop):
    for key, ev in sel.select(0.05):
        s = key.fileobj
        if s not in due:  # connecting
            if s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR):
                drop(s, 0)
                continue
            opened += 1
            sel.modify(s, selectors.EVENT_READ)
            send(s, b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
            continue
        try:
            if s.recv(4096):
                continue  # an answer (408, 503): the close follows
        except OSError:
            pass
        drop(s, 1)
    now = time.monotonic()
    for s in [s for s, t in due.items() if t <= now]:
        send(s, b"X-Slow: 1\r\n")
    for i in range(n):
        if again[i] and again[i] <= now:
            again[i] = 0.0
            open_slot(i)
with open(stats, "w") as f:
    f.write("%d opened, %d closed by the server\n" % (opened, closed))
EOF

# slow_start PORT TAG: the slowloris against PORT (SLOW_PID), once every
# connection has been opened.
slow_start() {
	rm -f "$T_TMP/$2.ready" "$T_TMP/$2.stop"
	python3 "$T_TMP/slow.py" "$1" "$SLOW" "$T_TMP/$2.ready" "$T_TMP/$2.stop" \
		"$T_TMP/$2.stats" </dev/null >/dev/null 2>"$T_TMP/$2.err" &
	SLOW_PID=$!
	t_track_pid "$SLOW_PID"
	for _ in $(seq 1 600); do
		[ -e "$T_TMP/$2.ready" ] && break
		kill -0 "$SLOW_PID" 2>/dev/null || break
		sleep 0.05
	done
	# A dribble under way, not only connections opened.
	sleep 1
}

# slow_stop TAG: ends the slowloris; its counts in SLOW_COUNTS.
slow_stop() {
	touch "$T_TMP/$1.stop"
	wait "$SLOW_PID" 2>/dev/null || true
	SLOW_COUNTS=$(cat "$T_TMP/$1.stats" 2>/dev/null) ||
		SLOW_COUNTS="no counts: $(tail -n 2 "$T_TMP/$1.err")"
}

# wait_gone PID SECS: waits for PID (a child of this shell) to exit; sets
# took to the seconds, "more than SECS" if it did not.
wait_gone() {
	local t0
	t0=$(date +%s.%N)
	if pid_gone "$1" "$2"; then
		wait "$1" 2>/dev/null || true
		took=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
	else
		took="more than $2"
	fi
}

# mount_metrics TAG ADDR: a foreground daemon (FG_PID) serving its metrics
# at ADDR:MPORT, on a mountpoint of its own (MNT), its log in LOG.
mount_metrics() {
	MNT=$T_TMP/mnt-$1
	LOG=$T_TMP/$1.log
	MPORT=$(free_port)
	mkdir -p "$MNT"
	fg_mount "$LOG" -o "cache_dir=$T_TMP/cache-$1,metrics=$2:$MPORT" \
		"$O_URL/f.bin" "$MNT"
}

# --- scrapes while 64 slow connections are open.
if ! mount_metrics scrape 127.0.0.1; then
	t_fail "mount with -o metrics=127.0.0.1:PORT" "$(tail -n 3 "$LOG")"
	t_done
fi
t_check "bytes read through the mount" cmp "$MNT/f.bin" "$WWW/f.bin"
if grep -qi 'warning.*metrics' "$LOG"; then
	t_fail "a loopback endpoint: no warning" "$(grep -i 'warning.*metrics' "$LOG")"
else
	t_pass "a loopback endpoint: no warning"
fi
slow_start "$MPORT" scrape
slow=0
times=
for i in 1 2 3 4 5 6; do
	rc=0
	took=$(curl -s -o "$T_TMP/scrape-$i.txt" -w '%{time_total}' --max-time 5 \
		"http://127.0.0.1:$MPORT/metrics") || rc=$?
	times="$times ${took}s"
	if [ "$rc" -ne 0 ] || ! grep -q '^pacefs_read_bytes_total{.*} [1-9]' "$T_TMP/scrape-$i.txt" ||
		! awk -v t="$took" 'BEGIN { exit !(t <= 1.0) }'; then
		slow=$((slow + 1))
	fi
	sleep 0.5
done
slow_stop scrape
echo "figures: $SLOW slow connections ($SLOW_COUNTS); scrapes took$times"
t_eq "with $SLOW slow connections open, every scrape is answered within 1 s with the exposition" \
	"$slow of 6 failed" "0 of 6 failed"
t_check "the endpoint serves after them" curl -sf --max-time 5 -o /dev/null \
	"http://127.0.0.1:$MPORT/metrics"

# --- the daemon's end with 64 slow connections open: an unmount, then
# SIGTERM.
slow_start "$MPORT" unmount
fusermount3 -u "$MNT" || true
wait_gone "$FG_PID" 10
slow_stop unmount
if [ "$took" != "more than 10" ] && awk -v t="$took" -v b="$BOUND" 'BEGIN { exit !(t <= b) }'; then
	t_pass "unmount with $SLOW slow connections open: the daemon is gone in ${took} s (bound ${BOUND} s)"
else
	t_fail "unmount with $SLOW slow connections open: the daemon is gone within ${BOUND} s" "${took} s"
fi

if mount_metrics term 127.0.0.1; then
	slow_start "$MPORT" term
	kill -TERM "$FG_PID"
	wait_gone "$FG_PID" 10
	slow_stop term
	if [ "$took" != "more than 10" ] && awk -v t="$took" -v b="$BOUND" 'BEGIN { exit !(t <= b) }'; then
		t_pass "SIGTERM with $SLOW slow connections open: the daemon is gone in ${took} s (bound ${BOUND} s)"
	else
		t_fail "SIGTERM with $SLOW slow connections open: the daemon is gone within ${BOUND} s" "${took} s"
	fi
	if is_mounted "$MNT"; then
		t_fail "SIGTERM: the mount is gone" "$(mount_line "$MNT")"
	else
		t_pass "SIGTERM: the mount is gone"
	fi
else
	t_fail "mount for SIGTERM" "$(tail -n 3 "$LOG")"
fi

# --- every interface: a warning at mount, on the terminal, that says who
# can reach the endpoint.
MNT=$T_TMP/mnt-any
MPORT=$(free_port)
mkdir -p "$MNT"
if mount_pacefs -o "cache_dir=$T_TMP/cache-any,metrics=0.0.0.0:$MPORT" "$O_URL/f.bin" "$MNT"; then
	if [[ $T_MOUNT_ERR == *"metrics"*"0.0.0.0:$MPORT"*"any host"* ]]; then
		t_pass "every interface: warned at mount: $T_MOUNT_ERR"
	else
		t_fail "every interface: warned at mount" "stderr: '$T_MOUNT_ERR'"
	fi
	t_check "every interface: the endpoint answers" curl -sf --max-time 5 -o /dev/null \
		"http://127.0.0.1:$MPORT/metrics"
	t_check "unmount" umount_pacefs "$MNT"
else
	t_fail "mount with -o metrics=0.0.0.0:PORT" "$T_MOUNT_ERR"
fi
t_done

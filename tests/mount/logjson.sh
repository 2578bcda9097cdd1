#!/usr/bin/env bash
# logjson.sh: -o log_format=json: every line of a mount's log is one JSON
# object with its time, level and message; a transfer that fails and a
# read that times out carry the file, the source, the range and the error
# class as fields of their own; and no secret (a URL's userinfo, a header
# value) shows anywhere in it.
set -euo pipefail
# shellcheck source=tests/lib.sh
source "$(dirname "$0")/../lib.sh"
t_require_mount

WWW=$T_TMP/www
MNT=$T_TMP/mnt
mkdir -p "$WWW" "$MNT"
gen_file "$WWW/data.bin" $((4 * 1024 * 1024)) 26
origin_start "$WWW"
LOG=$T_TMP/pacefs.log
URL=http://reader:pa55word@127.0.0.1:$ORIGIN_PORT/data.bin

# Its first 64 KiB read and cached; then the origin goes, and a read past
# them fails: a refused connection on a lane, then the read's deadline.
if ! fg_mount "$LOG" -o "cache_dir=$T_TMP/cache,log_format=json,read_timeout=2,readahead=0.1" \
	-o "header=X-Token: t0ken5ecret" "$URL" "$MNT"; then
	t_fail "mount -f with -o log_format=json" "$(cat "$LOG")"
	t_done
fi
t_check "the first block reads" cmp -n 65536 "$MNT/data.bin" "$WWW/data.bin"
origin_stop
rc=0
dd if="$MNT/data.bin" of=/dev/null bs=64k skip=40 count=1 status=none 2>/dev/null || rc=$?
if [ "$rc" -ne 0 ]; then
	t_pass "a read with the origin gone fails"
else
	t_fail "a read with the origin gone fails" "dd exited 0"
fi
umount_pacefs "$MNT"
pid_gone "$FG_PID" 10 || true

out=$(python3 - "$LOG" <<'EOF'
import json, sys
lines = open(sys.argv[1], encoding="utf-8", errors="strict").read().splitlines()
bad = [l for l in lines if not l.startswith("{")]
objs = []
for l in lines:
    try:
        objs.append(json.loads(l))
    except ValueError:
        bad.append(l)
if bad or not objs:
    print("not JSON: %r" % (bad[:2] or "no line"))
    sys.exit(1)
for o in objs:
    if not (isinstance(o.get("time"), str) and o["time"].endswith("Z")
            and o.get("level") in ("error", "warning", "info", "debug")
            and isinstance(o.get("message"), str)):
        print("no time, level or message: %r" % o)
        sys.exit(1)
lane = [o for o in objs if o.get("error_class") == "transient"
        and o.get("blob") == "data.bin" and "range" in o
        and o.get("source", "").startswith("http://127.0.0.1:")]
read = [o for o in objs if o.get("error_class") in ("timeout", "unavailable")
        and o.get("blob") == "data.bin" and o.get("range", "").startswith("2621440-")]
if not lane:
    print("no failed transfer with blob, source, range and error_class")
    sys.exit(1)
if not read:
    print("no failed read with blob, range and error_class")
    sys.exit(1)
print("%d lines; e.g. %s" % (len(objs), json.dumps(read[0])))
EOF
) && rc=0 || rc=$?
if [ "$rc" -eq 0 ]; then
	t_pass "every line is a JSON object with its fields: $out"
else
	t_fail "every line is a JSON object with its fields" "$out :: $(head -c 600 "$LOG")"
fi
if grep -q -e pa55word -e t0ken5ecret "$LOG"; then
	t_fail "no secret in the JSON log" "$(grep -m 1 -e pa55word -e t0ken5ecret "$LOG")"
else
	t_pass "no secret in the JSON log"
fi
t_done

#!/usr/bin/env bash
# logflood.sh: a directory index of many distinct names whose probes all
# fail writes a bounded number of log lines: the log's rate limit groups
# lines by where they are written and the origin they are about, not by
# their text (which names a new file each time), and reports the lines
# left out once the window ends ("N similar lines left out").
set -euo pipefail
# shellcheck source=tests/lib.sh
source "$(dirname "$0")/../lib.sh"
t_require_mount
t_require_origin

N=300
WWW=$T_TMP/www
mkdir -p "$WWW/d"
# Names of letters only, so that no two are alike but for their digits.
python3 - "$WWW/d" "$N" <<'EOF'
import random, string, sys
rng = random.Random(7)
for i in range(int(sys.argv[2])):
    name = "".join(rng.choice(string.ascii_lowercase) for _ in range(12))
    with open("%s/%s.bin" % (sys.argv[1], name), "wb") as f:
        f.write(b"x" * 1500)
EOF
# The index says "1K" (not exact): every file must be probed, and each
# probe is refused.
o_start o --root "$WWW" --autoindex=human --fault '*.bin:status:403'
MNT=$T_TMP/mnt
mkdir -p "$MNT"
LOG=$T_TMP/mount.log
if ! fg_mount "$LOG" -o "cache_dir=$T_TMP/cache" "$O_URL/d/" "$MNT"; then
	t_fail "mount the index" "$(tail -n 3 "$LOG")"
	t_done
fi
start=$(date +%s)
ls -l "$MNT" >/dev/null 2>&1 || true
probed=$(grep -c ' 403 ' "$T_TMP/o.log" || true)
if [ "$probed" -ge "$N" ]; then
	t_pass "every file's probe was refused ($probed requests)"
else
	t_fail "every file's probe was refused" "$probed requests of $N files"
fi
lines=$(grep -c '\.bin' "$LOG" || true)
if [ "$lines" -le 20 ]; then
	t_pass "$N failed probes: $lines log lines"
else
	t_fail "$N failed probes: at most 20 log lines" "$lines: $(grep '\.bin' "$LOG" | head -n 3)"
fi
# The report comes with the first line after the window (10 s) ends: the
# unmount's, by SIGTERM.
while [ $(($(date +%s) - start)) -lt 12 ]; do
	sleep 1
done
kill -TERM "$FG_PID"
wait "$FG_PID" 2>/dev/null || true
left=$(sed -n 's/.* \([0-9][0-9]*\) similar lines left out in [0-9]* s; the last: .*\.bin.*/\1/p' "$LOG" |
	awk '{ s += $1 } END { print s + 0 }')
if [ "$left" -gt 0 ] && [ $((left + lines)) -ge "$N" ]; then
	t_pass "the lines left out are counted: $left ($(grep -m1 'similar lines left out' "$LOG" | cut -c1-160))"
else
	t_fail "the lines left out are counted" "$left left out, $lines logged: $(tail -n 3 "$LOG")"
fi
t_done

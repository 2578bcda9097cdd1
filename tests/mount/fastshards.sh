#!/usr/bin/env bash
# fastshards.sh: a dataset loader's shards on a fast link (nginx on
# loopback): eight worker processes take 24 shards of 8 MiB from one
# shuffled list and read each whole (benchread loader, every byte
# compared), through a directory-index mount. A new reader on a fast link
# must reach the link at once: each shard in a few requests (at most 4 on
# average), not a window that starts small and grows a request at a time,
# and no byte pulled twice (at most 1.02 x what was read).
set -euo pipefail
# shellcheck source=tests/lib.sh
source "$(dirname "$0")/../lib.sh"
t_require_mount

BR=${BENCHREAD:-$(dirname "$PACEFS")/bench/benchread}
if [ ! -x "$BR" ]; then
	t_skip "fastshards" "$BR is not built (make build/bench/benchread)"
	t_done
fi

MiB=1048576
SHARDS=${FAST_SHARDS:-24}
SHARD=$((8 * MiB))
WWW=$T_TMP/www
mkdir -p "$WWW/shards" "$T_TMP/mnt"
for ((i = 0; i < SHARDS; i++)); do
	"$BR" gen "$WWW/shards/shard-$i.bin" "$SHARD" >/dev/null
done
origin_start "$WWW" 'autoindex on; autoindex_exact_size on;'

if mount_pacefs -o "cache_dir=$T_TMP/cache" "$ORIGIN_URL/shards/" "$T_TMP/mnt"; then
	ls "$T_TMP/mnt" | sed "s|^|$T_TMP/mnt/|" >"$T_TMP/list"
	mark=$(origin_requests)
	out=$(timeout 120 "$BR" loader "$T_TMP/list" 8 7 2>&1) || true
	if [[ $out == ok* ]]; then
		t_pass "8 workers, $SHARDS shards of 8 MiB: every byte correct ($out)"
	else
		t_fail "8 workers read the shards" "$out"
	fi
	umount_pacefs "$T_TMP/mnt"
	# The shards' requests, probes (bytes=0-0) apart: method uri
	# status "range" bytes.
	read -r reqs pulled < <(tail -n +"$((mark + 1))" "$ORIGIN_PREFIX/access.log" |
		awk '$2 ~ /^\/shards\/shard-/ && $4 != "\"bytes=0-0\"" { n++; s += $5 }
		     END { print n + 0, s + 0 }')
	read_bytes=$((SHARDS * SHARD))
	# A window that opens at 256 KiB and doubles a request at a time
	# takes 8 or more requests for 8 MiB.
	if [ "$reqs" -le $((SHARDS * 4)) ]; then
		t_pass "requests: $reqs for $SHARDS shards (at most 4 a shard)"
	else
		t_fail "requests per shard" "$reqs for $SHARDS shards: more than 4 a shard, the window grew a request at a time"
	fi
	if [ "$pulled" -le $((read_bytes + read_bytes / 50)) ]; then
		t_pass "pulled $pulled bytes for $read_bytes read (at most 1.02 x)"
	else
		t_fail "bytes pulled" "$pulled for $read_bytes read: more than 1.02 x"
	fi
else
	t_fail "mount" "$T_MOUNT_ERR"
fi

t_done

#!/usr/bin/env bash
# tiervarnish.sh: two machines behind Varnish (docs/deploy.md's VCL:
# whole objects streamed, no-cache honoured) in front of a far origin,
# used as pacefs's proxy (-o proxy=). Two mounts with caches of their own
# read the same blob one after the other: every byte right, the origin
# sends the blob once (2% allowed), and the second mount's answers are
# hits. Skipped where Varnish is not installed.
set -euo pipefail
# shellcheck source=tests/lib.sh
source "$(dirname "$0")/../lib.sh"
t_require_mount
t_require_origin
VARNISHD=${VARNISHD:-/usr/sbin/varnishd}
if [ ! -x "$VARNISHD" ]; then
	t_skip_all "Varnish not installed (apt-get install varnish)"
fi

MIB=1048576
SIZE=$((32 * MIB))
WWW=$T_TMP/www
mkdir -p "$WWW"
gen_file "$WWW/blob.bin" "$SIZE" 2403
o_start origin --root "$WWW" --latency 20 --rate 8M
ORIG=$O_URL
OLOG=$O_LOG

origin_bytes() {
	awk '$5 ~ /^[0-9]+$/ { s += $5 } END { print s + 0 }' "$OLOG" 2>/dev/null || echo 0
}

# varnish_start: a private Varnish on a free loopback port in front of the
# origin, taking pacefs's proxy requests (absolute URLs: the VCL keeps
# their path); sets VN_URL.
varnish_start() {
	local port oport=${ORIG##*:}
	VN_DIR=$T_TMP/varnish
	mkdir -p "$VN_DIR"
	port=$(free_port)
	cat >"$VN_DIR/default.vcl" <<-EOF
		vcl 4.1;
		backend origin { .host = "127.0.0.1"; .port = "$oport"; }
		sub vcl_recv {
		    if (req.url ~ "^https?://") {
		        set req.url = regsub(req.url, "^https?://[^/]+", "");
		    }
		    if (req.http.Cache-Control ~ "no-cache") {
		        set req.hash_always_miss = true;
		    }
		}
		sub vcl_deliver {
		    if (obj.hits > 0) {
		        set resp.http.X-Cache = "HIT";
		    } else {
		        set resp.http.X-Cache = "MISS";
		    }
		}
	EOF
	"$VARNISHD" -F -j none -n "$VN_DIR/n" -a "127.0.0.1:$port" \
		-f "$VN_DIR/default.vcl" -s malloc,256m -T none \
		>"$VN_DIR/out" 2>&1 &
	VN_PID=$!
	t_track_pid "$VN_PID"
	for _ in $(seq 1 100); do
		if curl -s -o /dev/null -x "http://127.0.0.1:$port" "$ORIG/__ready" 2>/dev/null; then
			VN_URL=http://127.0.0.1:$port
			return 0
		fi
		kill -0 "$VN_PID" 2>/dev/null || break
		sleep 0.1
	done
	echo "varnish_start: Varnish did not come up: $(tail -n 3 "$VN_DIR/out")" >&2
	return 1
}

read_all() {
	"$READCMP" seq "$2/blob.bin" "$WWW/blob.bin" >"$T_TMP/$1.cmp" 2>&1
}

varnish_start
B0=$(origin_bytes)
for m in 1 2; do
	mkdir -p "$T_TMP/s$m" "$T_TMP/s$m.cache"
	fg_mount "$T_TMP/s$m.log" -o "cache_dir=$T_TMP/s$m.cache,chunk=1M,proxy=$VN_URL" \
		"$ORIG/blob.bin" "$T_TMP/s$m"
	t_check "Varnish: machine $m reads every byte" read_all "s$m" "$T_TMP/s$m"
	if [ "$m" -eq 2 ]; then
		st=$("$PACEFS" status --json "$T_TMP/s2")
		misses=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["proxies"][0]["misses"])' <<<"$st")
		t_eq "Varnish: the second machine's answers are hits (no miss)" "$misses" 0
	fi
	umount_pacefs "$T_TMP/s$m"
done
sent=$(($(origin_bytes) - B0))
echo "tiervarnish: origin sent $sent bytes for $SIZE ($(echo "scale=3; $sent / $SIZE" | bc)x)"
if [ "$sent" -le $((SIZE + SIZE / 50)) ]; then
	t_pass "Varnish: the origin sends the blob once ($sent bytes for $SIZE)"
else
	t_fail "Varnish: the origin sends the blob once" "origin sent $sent bytes for a $SIZE-byte blob"
fi

t_done

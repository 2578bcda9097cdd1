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
# shellcheck source=tests/tierlib.sh
source "$(dirname "$0")/../tierlib.sh"
t_require_mount
t_require_origin
VARNISHD=${VARNISHD:-/usr/sbin/varnishd}
if [ ! -x "$VARNISHD" ]; then
	t_skip_all "Varnish not installed (apt-get install varnish)"
fi

tier_origin

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

if ! varnish_start 2>"$T_TMP/start.err"; then
	t_fail "Varnish: start" "$(cat "$T_TMP/start.err")"
	t_done
fi
tier_two_machines "Varnish" "$VN_URL" hits

t_done

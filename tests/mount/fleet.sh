#!/usr/bin/env bash
# fleet.sh: two machines behind a two-proxy group (-o proxy="P1|P2"), each
# proxy an nginx slice cache (slice = chunk = 1 MiB) in front of a far
# origin. Two mounts with caches of their own read the same blob one after
# the other: every byte right, the origin sends each byte once (2%
# allowed), whatever the two mounts' request boundaries, and each member
# carries its share (within 15% of the mean). Run with a plain slice
# configuration (no proxy_cache_lock, no proxy_cache_bypass, nginx's
# default proxy_ignore_client_abort off: a request cut mid-slice loses the
# slice), with docs/deploy.md's, and with one plain proxy alone.
# FLEET_MIB sets the blob's size (64).
set -euo pipefail
# shellcheck source=tests/lib.sh
source "$(dirname "$0")/../lib.sh"
t_require_mount
t_require_origin

MIB=1048576
SIZE=${FLEET_MIB:-64}
SIZE=$((SIZE * MIB))
WWW=$T_TMP/www
mkdir -p "$WWW"
gen_file "$WWW/blob.bin" "$SIZE" 2402
# Far: a round trip of 20 ms and 8 MB/s a connection, as a WAN origin.
o_start origin --root "$WWW" --latency 20 --rate 8M
ORIG=$O_URL
OLOG=$O_LOG

# origin_bytes: body bytes the origin has sent so far.
origin_bytes() {
	log_bytes "$OLOG"
}

# plain_proxy_start: nginx's slice cache as its documentation shows it,
# keyed as CernVM-FS sites key it, and nothing more. Sets TP_URL, TP_PREFIX.
plain_proxy_start() {
	# shellcheck disable=SC2016 # nginx's variables
	nginx_start -f '$request_method $uri $status "$http_range" $body_bytes_sent $upstream_cache_status' \
		-h "proxy_cache_path @PREFIX@/cache levels=1:2 keys_zone=pc:10m max_size=2g inactive=60m use_temp_path=off;" \
		"listen 127.0.0.1:@PORT1@;
		location = /__pacefs_probe { access_log off; return 204; }
		location / {
			slice 1m;
			proxy_cache pc;
			proxy_cache_key \$scheme\$proxy_host\$uri\$slice_range;
			proxy_set_header Range \$slice_range;
			proxy_cache_valid 200 206 1h;
			proxy_pass http://\$http_host;
			add_header X-Cache \$upstream_cache_status;
		}" || return 1
	TP_URL=$NGINX_URL
	TP_PREFIX=$NGINX_PREFIX
}

# member_bytes PREFIX: body bytes the proxy at PREFIX sent to the mounts.
member_bytes() {
	log_bytes "$1/access.log"
}

# read_all NAME MNT: reads the blob through MNT and compares every byte.
read_all() {
	"$READCMP" seq "$2/blob.bin" "$WWW/blob.bin" >"$T_TMP/$1.cmp" 2>&1
}

# two_machines CONFIG START_FN [ONE]: two proxies started with START_FN
# in one group (ONE: a single proxy); two mounts read the blob one after
# the other.
two_machines() {
	local cfg=$1 b0 sent m1 m2 mean t0 t1 a b list
	# shellcheck disable=SC2086 # a function and its argument
	$2
	local p1=$TP_URL x1=$TP_PREFIX p2='' x2=''
	list=$p1
	if [ -z "${3:-}" ]; then
		# shellcheck disable=SC2086
		$2
		p2=$TP_URL
		x2=$TP_PREFIX
		list="$p1|$p2"
	fi
	b0=$(origin_bytes)
	t0=$(date +%s.%N)
	for m in 1 2; do
		mkdir -p "$T_TMP/$cfg$m" "$T_TMP/$cfg$m.cache"
		fg_mount "$T_TMP/$cfg$m.log" \
			-o "cache_dir=$T_TMP/$cfg$m.cache,chunk=1M,proxy=$list" \
			"$ORIG/blob.bin" "$T_TMP/$cfg$m"
		t_check "$cfg: machine $m reads every byte" read_all "$cfg$m" "$T_TMP/$cfg$m"
		umount_pacefs "$T_TMP/$cfg$m"
	done
	t1=$(date +%s.%N)
	sent=$(($(origin_bytes) - b0))
	echo "fleet: $cfg: origin sent $sent bytes for $SIZE ($(echo "scale=3; $sent / $SIZE" | bc)x) in $(echo "$t1 - $t0" | bc) s"
	if [ "$sent" -le $((SIZE + SIZE / 50)) ]; then
		t_pass "$cfg: the origin sends each byte once ($sent bytes for $SIZE)"
	else
		t_fail "$cfg: the origin sends each byte once" \
			"origin sent $sent bytes for a $SIZE-byte blob ($(echo "scale=3; $sent / $SIZE" | bc)x)"
	fi
	[ -n "$x2" ] || return 0
	m1=$(member_bytes "$x1")
	m2=$(member_bytes "$x2")
	mean=$(((m1 + m2) / 2))
	echo "fleet: $cfg: members sent $m1 and $m2 bytes"
	a=$((m1 - mean))
	b=$((m2 - mean))
	if [ "${a#-}" -le $((mean * 15 / 100)) ] && [ "${b#-}" -le $((mean * 15 / 100)) ]; then
		t_pass "$cfg: each member carries its share ($m1, $m2 bytes)"
	else
		t_fail "$cfg: each member carries its share" \
			"members sent $m1 and $m2 bytes: more than 15% off their mean"
	fi
}

two_machines plain plain_proxy_start
two_machines deploy "tier_proxy_start 1m"
two_machines single plain_proxy_start one

t_done

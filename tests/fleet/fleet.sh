#!/usr/bin/env bash
# fleet.sh: a fleet of machines behind a cache tier (make fleet). FLEET_MOUNTS
# mounts (16), each in a network namespace of its own with its own address
# on a bridge and its own cache, mount the origin's index through two nginx
# slice site proxies in one group (-o chunk=1M,proxy="A|B"); both sites
# fill from a regional nginx slice proxy, which fills from a far
# pacefs-origin (20 ms, 8 MB/s a connection, FLEET_UPLINK over all of them,
# 32M). Every mount reads the whole dataset (FLEET_FILES files, FLEET_MIB
# MiB in all: 8, 256) at once, in the same order, every byte compared. The
# cases, in FLEET_CASES's order ("lock warm kill nolock"):
#   lock    proxy_cache_lock on at every proxy, every cache empty
#   warm    then new mounts with empty caches read again from the warm tier,
#           and as many curls (one site each) measure what the tier delivers
#   kill    as lock, and site B killed once the origin sent half the dataset
#   nolock  as lock without proxy_cache_lock anywhere: measured, not judged
# Each case prints its figures; FLEET_OUT=FILE appends them as table rows.
# FLEET_SPEED=1 (make fleet) also judges the speed targets, which a
# shortened case on a busy host (make check) does not.
set -euo pipefail
# shellcheck source=tests/lib.sh
source "$(dirname "$0")/../lib.sh"
# shellcheck source=tests/netnslib.sh
source "$(dirname "$0")/../netnslib.sh"
t_require_mount
t_require_origin
ns_can || t_skip_all "cannot make network namespaces here (root and iproute2 needed)"

MIB=1048576
N=${FLEET_MOUNTS:-16}
NFILES=${FLEET_FILES:-8}
TOTAL=$((${FLEET_MIB:-256} * MIB))
UPLINK=${FLEET_UPLINK:-32M}
CASES=${FLEET_CASES:-lock warm kill nolock}
STALL=10 # -o stall_timeout's default
SITE_A=$NS_NET.2:3128
SITE_B=$NS_NET.3:3128

WWW=$T_TMP/www
mkdir -p "$WWW"
FILES=()
for ((i = 0; i < NFILES; i++)); do
	gen_file "$WWW/f$i.bin" $((TOTAL / NFILES)) $((2410 + i))
	FILES+=("f$i.bin")
done
TOTAL=$((TOTAL / NFILES * NFILES))
# fatal WHAT WHY: a step the rest cannot do without failed.
fatal() {
	t_fail "$1" "$2"
	t_done
}

ns_setup "$N" 2 3 || fatal "the network namespaces" "ip could not make them (see above)"
ns_enter "$NS_HUB"
o_start origin --root "$WWW" --autoindex --latency 20 --rate 8M --uplink "$UPLINK" ||
	fatal "the origin" "pacefs-origin did not start"
ns_enter ""
ORIG=$O_URL
OLOG=$O_LOG

# case_log PREFIX: the lines of a proxy's access log since the case began
# (fleet_run notes where each log stood).
case_log() {
	local var=LOG0_${1##*/}
	var=${var//[^A-Za-z0-9_]/_}
	tail -n +$((${!var:-0} + 1)) "$1/access.log" >"$1/case.log"
	echo "$1/case.log"
}

# case_logs_start: notes where each proxy's log stands.
case_logs_start() {
	local p var
	for p in "$R_PREFIX" "$A_PREFIX" "$B_PREFIX"; do
		var=LOG0_${p##*/}
		var=${var//[^A-Za-z0-9_]/_}
		printf -v "$var" '%s' "$(wc -l <"$p/access.log")"
	done
}

# hit_ratio LOG: of a proxy's requests with a cache status, the share of
# hits, in percent.
hit_ratio() {
	awk '$8 ~ /^[A-Z]+$/ { n++; if ($8 == "HIT") h++ }
		END { if (n) printf "%.0f\n", 100 * h / n; else print "-" }' "$1"
}

# ratio A B: A / B to three places.
ratio() {
	awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f\n", b ? a / b : 0 }'
}

# proxy_start NAME LISTEN UPSTREAM LOCK: an nginx slice cache (1 MiB
# slices, keyed by host, path and slice) in the hub, listening on LISTEN,
# filling from UPSTREAM (a URL; "http://$http_host": the origin the request
# names), with proxy_cache_lock LOCK. Its requests upstream carry
# X-Site: NAME; its log says: client site method path status "range" bytes
# cache-status. Sets P_PID and P_PREFIX.
proxy_start() {
	local rc=0
	ns_enter "$NS_HUB"
	# shellcheck disable=SC2016 # nginx's variables
	nginx_start -c 2048 \
		-f '$remote_addr $http_x_site $request_method $uri $status "$http_range" $body_bytes_sent $upstream_cache_status' \
		-h "proxy_cache_path @PREFIX@/cache levels=1:2 keys_zone=pc:10m max_size=4g inactive=60m use_temp_path=off;" \
		"listen $2;
		location = /__pacefs_probe { access_log off; return 204; }
		location / {
			slice 1m;
			proxy_cache pc;
			proxy_cache_key \$http_host\$uri\$slice_range;
			proxy_set_header Range \$slice_range;
			proxy_set_header Host \$http_host;
			proxy_set_header X-Site $1;
			proxy_http_version 1.1;
			proxy_set_header Connection \"\";
			proxy_cache_valid 200 206 1h;
			proxy_cache_lock $4;
			proxy_cache_lock_timeout 30s;
			proxy_pass $3;
		}" || rc=$?
	ns_enter ""
	[ "$rc" -eq 0 ] || fatal "proxy $1" "nginx did not come up on $2"
	P_PID=$NGINX_PID
	P_PREFIX=$NGINX_PREFIX
}

# tier_start LOCK: a regional proxy and sites A and B over it, empty (the
# last case's tier stopped first).
tier_start() {
	[ -z "${R_PID:-}" ] || tier_stop
	# shellcheck disable=SC2016 # nginx's variable
	proxy_start R "127.0.0.1:@PORT1@" 'http://$http_host' "$1"
	R_PID=$P_PID R_PREFIX=$P_PREFIX
	local up=${NGINX_URL}
	proxy_start A "$SITE_A" "$up" "$1"
	A_PID=$P_PID A_PREFIX=$P_PREFIX
	proxy_start B "$SITE_B" "$up" "$1"
	B_PID=$P_PID B_PREFIX=$P_PREFIX
}

tier_stop() {
	local pid
	for pid in "$A_PID" "$B_PID" "$R_PID"; do
		proc_stop "$pid"
	done
	R_PID=
}

# reader K MNT OUT: machine K reads every file through MNT, each compared
# with the origin's copy; writes "ok seconds longest-read" to OUT.
reader() {
	local k=$1 mnt=$2 out=$3 t0 f line l ok=1 longest=0
	t0=$(date +%s.%N)
	for f in "${FILES[@]}"; do
		if line=$("$READCMP" seq "$mnt/$f" "$WWW/$f" 2>&1); then
			l=$(sed -n 's/.*longest read \([0-9.]*\) s.*/\1/p' <<<"$line")
			longest=$(awk -v a="$longest" -v b="${l:-0}" 'BEGIN { print (b > a ? b : a) }')
		else
			ok=0
			echo "machine $k: $f: $line" >>"$out.err"
		fi
	done
	echo "$ok $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.3f", b - a }') $longest" >"$out"
}

# ticks PID...: the clock ticks (user and system) those processes used.
ticks() {
	local p files=()
	for p in "$@"; do
		[ -r "/proc/$p/stat" ] && files+=("/proc/$p/stat")
	done
	[ "${#files[@]}" -gt 0 ] || { echo 0; return; }
	# Past "pid (comm) ", utime and stime are the 12th and 13th fields.
	awk '{ sub(/^.*\) /, ""); s += $12 + $13 } END { print s + 0 }' "${files[@]}" 2>/dev/null || echo 0
}

# host_ticks: "busy total" clock ticks of every core so far.
host_ticks() {
	awk '/^cpu / { b = $2 + $3 + $4 + $7 + $8 + $9; print b, b + $5 + $6 }' /proc/stat
}

# proxy_workers: the pids of the proxies' worker processes.
proxy_workers() {
	local pid
	for pid in "$R_PID" "$A_PID" "$B_PID"; do
		ps -o pid= --ppid "$pid" 2>/dev/null || true
	done
}

# cpu_begin, cpu_end: where the CPU went between them: CPU_BUSY (% of
# every core), CPU_MOUNTS and CPU_PROXIES (seconds), CPU_REST (seconds:
# the readers, the origin, the kernel's network).
cpu_begin() {
	CPU_PROXY_PIDS=$(proxy_workers)
	read -r CPU_B0 CPU_T0 < <(host_ticks)
	CPU_M0=$(ticks "${MOUNT_PIDS[@]}")
	# shellcheck disable=SC2086 # a list of pids
	CPU_P0=$(ticks $CPU_PROXY_PIDS)
}
cpu_end() {
	local b t m p hz
	hz=$(getconf CLK_TCK)
	read -r b t < <(host_ticks)
	m=$(ticks "${MOUNT_PIDS[@]}")
	# shellcheck disable=SC2086
	p=$(ticks $CPU_PROXY_PIDS)
	read -r CPU_BUSY CPU_MOUNTS CPU_PROXIES CPU_REST < <(awk -v b=$((b - CPU_B0)) -v t=$((t - CPU_T0)) \
		-v m=$((m - CPU_M0)) -v p=$((p - CPU_P0)) -v hz="$hz" \
		'BEGIN { printf "%.0f %.1f %.1f %.1f\n", t ? 100 * b / t : 0, m / hz, p / hz, (b - m - p) / hz }')
}

# fleet_run CASE [KILL]: mounts every machine, starts their readers at
# once, kills site B once the origin sent half the dataset (KILL=kill),
# and waits for them. Leaves the mounts up, their folders $T_TMP/CASE.K.
fleet_run() {
	local c=$1 k pids=() t0 sent0
	sent0=$(log_bytes "$OLOG")
	case_logs_start
	MOUNT_PIDS=()
	for ((k = 0; k < N; k++)); do
		mkdir -p "$T_TMP/$c.$k" "$T_TMP/$c.$k.cache"
		ns_enter "${NS_MACHINES[k]}"
		fg_mount "$T_TMP/$c.$k.log" -o "cache_dir=$T_TMP/$c.$k.cache,chunk=1M,proxy=http://$SITE_A|http://$SITE_B" \
			"$ORIG/" "$T_TMP/$c.$k" || t_fail "$c: machine $k mounts" "$(tail -n 2 "$T_TMP/$c.$k.log")"
		MOUNT_PIDS+=("$FG_PID")
		ns_enter ""
	done
	cpu_begin
	t0=$(date +%s.%N)
	for ((k = 0; k < N; k++)); do
		reader "$k" "$T_TMP/$c.$k" "$T_TMP/$c.$k.read" &
		pids+=($!)
	done
	if [ "${2:-}" = kill ]; then
		while [ $(($(log_bytes "$OLOG") - sent0)) -lt $((TOTAL / 2)) ] &&
			kill -0 "${pids[0]}" 2>/dev/null; do
			sleep 0.1
		done
		nginx_kill "$B_PID"
		echo "fleet: $c: site B killed $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s in"
	fi
	wait "${pids[@]}"
	FLEET_SECS=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
	cpu_end
	ORIGIN_SENT=$(($(log_bytes "$OLOG") - sent0))
}

# fleet_unmount CASE
fleet_unmount() {
	local k
	for ((k = 0; k < N; k++)); do
		umount_pacefs "$T_TMP/$1.$k"
	done
}

# failures CASE: "A B" failures the mounts counted against each site, and
# how many mounts counted any.
failures() {
	local k
	for ((k = 0; k < N; k++)); do
		"$PACEFS" status --json "$T_TMP/$1.$k" || echo '{}'
	done | python3 -c '
import json, sys
text, dec, i, a, b, mounts = sys.stdin.read(), json.JSONDecoder(), 0, 0, 0, 0
while text[i:].strip():
    d, i = dec.raw_decode(text, len(text) - len(text[i:].lstrip()))
    n = 0
    for p in d.get("proxies", []):
        f = p.get("failures", 0)
        n += f
        if "'"$SITE_A"'" in p.get("proxy", ""):
            a += f
        elif "'"$SITE_B"'" in p.get("proxy", ""):
            b += f
    mounts += n > 0
print(a, b, mounts)'
}

# spread CASE COL: min, median and max over the machines of a case of
# their readers' figure COL (2: MB/s, from the seconds; 3: longest read).
spread() {
	local k
	for ((k = 0; k < N; k++)); do cat "$T_TMP/$1.$k.read"; done |
		awk -v col="$2" -v total="$TOTAL" '{ print col == 2 ? total / $2 / 1e6 : $col }' |
		sort -g | awk '{ v[NR] = $1 } END { printf "%.2f %.2f %.2f\n", v[1], v[int((NR + 1) / 2)], v[NR] }'
}

# judge_reads CASE: every machine read every byte; sets the per-mount
# figures (MB/s min, median, max; longest read).
judge_reads() {
	local c=$1 k bad=0
	for ((k = 0; k < N; k++)); do
		if [ "$(cut -d' ' -f1 "$T_TMP/$c.$k.read" 2>/dev/null)" != 1 ]; then
			bad=$((bad + 1))
		fi
	done
	if [ "$bad" -eq 0 ]; then
		t_pass "$c: $N machines read every byte of $NFILES files"
	else
		t_fail "$c: every machine reads every byte" "$bad machines failed: $(cat "$T_TMP/$c".*.read.err 2>/dev/null | head -n 3)"
	fi
	read -r MB_MIN MB_MED MB_MAX < <(spread "$c" 2)
	read -r _ LONG_MED LONGEST < <(spread "$c" 3)
	if [ "$(awk -v l="$LONGEST" -v s="$STALL" 'BEGIN { print (l <= s) }')" = 1 ]; then
		t_pass "$c: no read waited longer than stall_timeout ($LONGEST s)"
	else
		t_fail "$c: no read waits longer than stall_timeout" "a read waited $LONGEST s"
	fi
}

# report CASE: prints and records a case's figures.
report() {
	local c=$1 fa='?' fb='?' fm='?' agg both rlog alog blog
	read -r fa fb fm < <(failures "$c") || true
	rlog=$(case_log "$R_PREFIX")
	alog=$(case_log "$A_PREFIX")
	blog=$(case_log "$B_PREFIX")
	agg=$(awk -v n="$N" -v t="$TOTAL" -v s="$FLEET_SECS" 'BEGIN { printf "%.1f", n * t / s / 1e6 }')
	# Slices the regional proxy answered to both sites.
	both=$(awk '{ k = $4 " " $6; s[k] = s[k] == "" || s[k] == $2 ? $2 : "both" }
		END { for (k in s) if (s[k] == "both") n++; print n + 0 }' "$rlog")
	F_A=$fa F_B=$fb BOTH=$both
	A_BYTES=$(log_bytes "$alog" 7)
	B_BYTES=$(log_bytes "$blog" 7)
	echo "fleet: $c: $N machines, $((TOTAL / MIB)) MiB each, in $FLEET_SECS s ($agg MB/s in all);" \
		"per machine MB/s min $MB_MIN median $MB_MED max $MB_MAX; longest read $LONGEST s (median of each machine's longest $LONG_MED s)"
	echo "fleet: $c: origin sent $ORIGIN_SENT bytes ($(ratio "$ORIGIN_SENT" "$TOTAL")x the dataset);" \
		"regional: $(log_bytes "$rlog" 7) bytes, hits $(hit_ratio "$rlog")%, $both slices to both sites;" \
		"site A: $A_BYTES bytes, hits $(hit_ratio "$alog")%; site B: $B_BYTES bytes, hits $(hit_ratio "$blog")%;" \
		"failures counted: A $fa, B $fb ($fm machines)"
	echo "fleet: $c: CPU: the host's cores $CPU_BUSY% busy; the mounts' daemons $CPU_MOUNTS s, the proxies $CPU_PROXIES s," \
		"the rest (readers, origin, kernel) $CPU_REST s"
	if [ -n "${FLEET_OUT:-}" ]; then
		printf '| %s | %d | %d | %s | %s | %s / %s / %s | %s (%s) | %s | %s%% / %s%% / %s%% | %s / %s | %s / %s (%s) | %s |\n' \
			"$c" "$N" $((TOTAL / MIB)) "$FLEET_SECS" "$agg" "$MB_MIN" "$MB_MED" "$MB_MAX" "$LONGEST" "$LONG_MED" \
			"$(ratio "$ORIGIN_SENT" "$TOTAL")" "$(hit_ratio "$rlog")" \
			"$(hit_ratio "$alog")" "$(hit_ratio "$blog")" \
			$((A_BYTES / MIB)) $((B_BYTES / MIB)) "$fa" "$fb" "$fm" "$both" >>"$FLEET_OUT"
	fi
}

# judge_origin CASE MAX: the origin sent at most MAX times the dataset.
judge_origin() {
	local r
	r=$(ratio "$ORIGIN_SENT" "$TOTAL")
	if [ "$(awk -v r="$r" -v m="$2" 'BEGIN { print (r <= m) }')" = 1 ]; then
		t_pass "$1: the origin sent ${r}x the dataset (at most ${2}x)"
	else
		t_fail "$1: the origin sends at most ${2}x the dataset" "it sent ${r}x ($ORIGIN_SENT bytes)"
	fi
}

# judge_spread CASE: each site's bytes within 15% of their mean.
judge_spread() {
	local mean=$(((A_BYTES + B_BYTES) / 2)) a b
	a=$((A_BYTES - mean))
	b=$((B_BYTES - mean))
	if [ "$mean" -gt 0 ] && [ "${a#-}" -le $((mean * 15 / 100)) ] && [ "${b#-}" -le $((mean * 15 / 100)) ]; then
		t_pass "$1: each site carries its share ($A_BYTES, $B_BYTES bytes)"
	else
		t_fail "$1: each site carries its share" "sites sent $A_BYTES and $B_BYTES bytes: more than 15% off their mean"
	fi
}

# judge_speed CASE: the slowest machine at 0.7x the median at least.
judge_speed() {
	[ "${FLEET_SPEED:-}" = 1 ] || return 0
	if [ "$(awk -v a="$MB_MIN" -v m="$MB_MED" 'BEGIN { print (a >= 0.7 * m) }')" = 1 ]; then
		t_pass "$1: the slowest machine $MB_MIN MB/s, at least 0.7x the median $MB_MED"
	else
		t_fail "$1: the slowest machine at 0.7x the median at least" "$MB_MIN MB/s against $MB_MED"
	fi
}

# curl_all K SITE: machine K's curl fetches every file through SITE;
# prints the bytes it got.
curl_all() {
	local f
	for f in "${FILES[@]}"; do
		nsenter "--net=/run/netns/${NS_MACHINES[$1]}" \
			curl -sf -o /dev/null -w '%{size_download}\n' -x "http://$2" "$ORIG/$f" || echo 0
	done | awk '{ s += $1 } END { printf "%.0f\n", s }'
}

# capacity: what the warm tier delivers to N curls at once, each through
# one site (alternating), once both sites hold every slice. Sets CAP_MBS;
# a curl that did not get every byte fails the test.
capacity() {
	local k pids=() t0 got site
	curl_all 0 "$SITE_A" >/dev/null
	curl_all 0 "$SITE_B" >/dev/null
	t0=$(date +%s.%N)
	for ((k = 0; k < N; k++)); do
		site=$SITE_A
		[ $((k % 2)) -eq 0 ] || site=$SITE_B
		curl_all "$k" "$site" >"$T_TMP/curl.$k" &
		pids+=($!)
	done
	wait "${pids[@]}"
	CAP_MBS=$(awk -v n="$N" -v t="$TOTAL" -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", n * t / (b - a) / 1e6 }')
	got=$(cat "$T_TMP"/curl.* | awk '{ s += $1 } END { printf "%.0f\n", s }')
	[ "$got" = $((N * TOTAL)) ] ||
		t_fail "warm: the curls get every byte through the tier" "they got $got bytes of $((N * TOTAL))"
}

for c in $CASES; do
	case $c in
	lock | kill | nolock)
		lock=on
		[ "$c" = nolock ] && lock=off
		tier_start "$lock"
		fleet_run "$c" "$([ "$c" = kill ] && echo kill)"
		judge_reads "$c"
		report "$c"
		case $c in
		lock)
			judge_origin "$c" 1.05
			judge_spread "$c"
			t_eq "$c: no slice fetched by both sites" "$BOTH" 0
			t_eq "$c: no failure counted against a site that is up (A, B)" "$F_A $F_B" "0 0"
			judge_speed "$c"
			;;
		kill)
			judge_origin "$c" 1.1
			t_eq "$c: no failure counted against the site that stayed up" "$F_A" 0
			;;
		esac
		fleet_unmount "$c"
		;;
	warm)
		if [ -z "${R_PID:-}" ] || ! kill -0 "$R_PID" 2>/dev/null; then
			t_fail "warm" "the lock case must come just before it (it reads from that tier)"
			continue
		fi
		fleet_run warm
		judge_reads warm
		report warm
		capacity
		echo "fleet: warm: the tier delivers $CAP_MBS MB/s to $N curls at once"
		if [ -n "${FLEET_OUT:-}" ]; then
			echo "| curl through the warm tier | $N | $((TOTAL / MIB)) | | $CAP_MBS | | | | | | | | |" >>"$FLEET_OUT"
		fi
		agg=$(awk -v n="$N" -v t="$TOTAL" -v s="$FLEET_SECS" 'BEGIN { printf "%.1f", n * t / s / 1e6 }')
		# On one host the machines share its cores with the tier: when
		# they are all busy and the proxies had a small part of them,
		# the clients' CPU set the pace, not the tier, and the
		# comparison says nothing of the tier.
		if [ "${FLEET_SPEED:-}" != 1 ]; then
			:
		elif [ "$CPU_BUSY" -ge 90 ] &&
			[ "$(awk -v p="$CPU_PROXIES" -v m="$CPU_MOUNTS" -v r="$CPU_REST" 'BEGIN { print (p < 0.2 * (m + p + r)) }')" = 1 ]; then
			t_skip "warm: the fleet at 0.8x what the tier delivers ($agg MB/s against $CAP_MBS)" \
				"not measurable here: the host's cores were $CPU_BUSY% busy, the proxies used $CPU_PROXIES s of them," \
				"the $N mounts' daemons $CPU_MOUNTS s and their readers and the kernel $CPU_REST s"
		elif [ "$(awk -v a="$agg" -v c="$CAP_MBS" 'BEGIN { print (a >= 0.8 * c) }')" = 1 ]; then
			t_pass "warm: the fleet's $agg MB/s, at least 0.8x the tier's $CAP_MBS"
		else
			t_fail "warm: the fleet at 0.8x what the tier delivers" "$agg MB/s against $CAP_MBS"
		fi
		fleet_unmount warm
		;;
	*)
		t_fail "FLEET_CASES" "unknown case '$c' (lock, warm, kill, nolock)"
		;;
	esac
done

t_done

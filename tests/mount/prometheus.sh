#!/usr/bin/env bash
# prometheus.sh: the metrics endpoint with the real client. Debian's
# Prometheus scrapes a mount every second while a file is read through it;
# its HTTP API then says the bytes read (within 1 %) and the requests sent
# (exactly the origin's log lines), promtool accepts the exposition and
# contrib/prometheus's configuration and alert rules (and their rule
# tests), pacefs status shows the same samples, and a bad or busy address
# or label is one line naming the option with nothing mounted.
set -euo pipefail
# shellcheck source=tests/lib.sh
source "$(dirname "$0")/../lib.sh"
t_require_mount
for tool in prometheus promtool curl python3; do
	if ! command -v "$tool" >/dev/null 2>&1; then
		t_fail "$T_NAME" "$tool is missing (contrib/install-deps.sh installs it)"
		t_done
	fi
done

WWW=$T_TMP/www
MNT=$T_TMP/mnt
mkdir -p "$WWW" "$MNT" "$T_TMP/prom"
SIZE=$((24 * 1024 * 1024 + 12345))
gen_file "$WWW/data.bin" "$SIZE" 25
origin_start "$WWW"

# metric URL QUERY: the value of a PromQL query's one sample at URL (a
# Prometheus), or "" when it has none yet.
metric() {
	curl -s --max-time 5 --get --data-urlencode "query=$2" "$1/api/v1/query" |
		python3 -c 'import json, sys
r = json.load(sys.stdin)["data"]["result"]
print(r[0]["value"][1] if r else "")' 2>/dev/null || true
}

# scraped EXPOSITION NAME: the sum of the samples of NAME in a text
# exposition.
scraped() {
	awk -v n="$2" '$1 ~ "^" n "[{ ]" { s += $NF } END { printf "%.0f\n", s }' "$1"
}

MPORT=$(free_port)
if ! mount_pacefs -o "cache_dir=$T_TMP/cache,metrics=127.0.0.1:$MPORT,metrics_label=site=check" \
	"$ORIGIN_URL/data.bin" "$MNT"; then
	t_fail "mount with -o metrics=" "$T_MOUNT_ERR"
	t_done
fi
METRICS=http://127.0.0.1:$MPORT/metrics

# The project's rules, as a site would load them; their own tests.
cp "$T_ROOT/contrib/prometheus/pacefs.rules.yml" "$T_TMP/prom/"
t_check "promtool check config: contrib/prometheus/prometheus.yml" \
	promtool check config "$T_ROOT/contrib/prometheus/prometheus.yml"
t_check "promtool test rules: the alert on a mount whose sources all fail" \
	promtool test rules "$T_ROOT/contrib/prometheus/pacefs.rules.test.yml"
PPORT=$(free_port)
cat >"$T_TMP/prom/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files:
  - pacefs.rules.yml
scrape_configs:
  - job_name: pacefs
    static_configs:
      - targets: ['127.0.0.1:$MPORT']
EOF
prometheus --config.file="$T_TMP/prom/prometheus.yml" \
	--storage.tsdb.path="$T_TMP/prom/data" \
	--web.listen-address="127.0.0.1:$PPORT" --log.level=warn \
	</dev/null >"$T_TMP/prom/out.log" 2>&1 &
t_track_pid $!
PROM=http://127.0.0.1:$PPORT
up=
for _ in $(seq 1 300); do
	up=$(metric "$PROM" 'up{job="pacefs"}')
	[ "$up" = 1 ] && break
	sleep 0.1
done
t_eq "prometheus scrapes the endpoint" "$up" 1

t_check "bytes read through the mount" cmp "$MNT/data.bin" "$WWW/data.bin"

# Settled: no transfer left, the requests sent ahead dropped; two scrapes
# a second apart that agree.
prev=
for _ in $(seq 1 20); do
	curl -s --max-time 5 "$METRICS" >"$T_TMP/scrape.txt"
	now=$(scraped "$T_TMP/scrape.txt" pacefs_http_requests_total):$(scraped "$T_TMP/scrape.txt" pacefs_lanes_busy)
	[ "$now" = "$prev" ] && [ "${now#*:}" = 0 ] && break
	prev=$now
	sleep 1
done
ours_bytes=$(scraped "$T_TMP/scrape.txt" pacefs_read_bytes_total)
ours_requests=$(scraped "$T_TMP/scrape.txt" pacefs_http_requests_total)
origin_lines=$(origin_requests)

out=$(promtool check metrics <"$T_TMP/scrape.txt" 2>&1) && rc=0 || rc=$?
if [ "$rc" -eq 0 ] && [ -z "$out" ]; then
	t_pass "promtool check metrics accepts the exposition"
else
	t_fail "promtool check metrics accepts the exposition" "exit $rc: $out"
fi

# Prometheus's view, once a scrape after the read reached it.
prom_bytes=
prom_requests=
for _ in $(seq 1 150); do
	prom_bytes=$(metric "$PROM" 'sum(pacefs_read_bytes_total{site="check"})')
	prom_requests=$(metric "$PROM" 'sum(pacefs_http_requests_total{site="check"})')
	[ "$prom_bytes" = "$ours_bytes" ] && [ "$prom_requests" = "$ours_requests" ] && break
	sleep 0.1
done
echo "figures: read $SIZE bytes; the endpoint says $ours_bytes, Prometheus $prom_bytes;" \
	"requests: the origin logged $origin_lines, the endpoint says $ours_requests, Prometheus $prom_requests"
# The counter is what the mount answered the kernel, which is the
# application's bytes unless the kernel asked for some again: pages it
# read ahead are the first it reclaims, and a loaded machine (the sanitizer
# step beside other work) once had it read 256 KiB of 24 MiB twice. Never
# fewer; a few percent more.
if [ -n "$prom_bytes" ] && awk -v p="$prom_bytes" -v s="$SIZE" \
	'BEGIN { exit !(p >= s && p - s <= s / 20) }'; then
	t_pass "Prometheus's bytes read are the application's, or up to 5 % more ($prom_bytes of $SIZE)"
else
	t_fail "Prometheus's bytes read are the application's, or up to 5 % more" "got '$prom_bytes', read $SIZE"
fi
t_eq "Prometheus's request count is the origin's log" "$prom_requests" "$origin_lines"
label=$(metric "$PROM" 'count(pacefs_read_bytes_total{site="check",mount="'"$MNT"'",from="network"})')
t_eq "every series has mount= and the metrics_label" "$label" 1
for _ in $(seq 1 50); do
	rules=$(curl -s "$PROM/api/v1/rules" | python3 -c 'import json, sys
g = json.load(sys.stdin)["data"]["groups"]
print(" ".join(r["name"] + ":" + r["health"] for x in g for r in x["rules"]))')
	[[ $rules == *unknown* ]] || break
	sleep 0.1
done
t_eq "Prometheus evaluates the rules" "$rules" \
	"PacefsSourcesFailing:ok PacefsReadErrors:ok PacefsDown:ok"

# pacefs status reads the same samples (nothing moves now).
"$PACEFS" status --json "$MNT" >"$T_TMP/status.json"
status_sums=$(python3 -c 'import json, sys
m = json.load(open(sys.argv[1]))["metrics"]
s = lambda n: sum(x["value"] for x in m if x["name"] == n)
print("%d %d" % (s("pacefs_read_bytes_total"), s("pacefs_http_requests_total")))' "$T_TMP/status.json")
t_eq "pacefs status shows the endpoint's numbers" "$status_sums" "$ours_bytes $ours_requests"
if "$PACEFS" status "$MNT" | grep -q '^requests: '"$ours_requests"' '; then
	t_pass "pacefs status prints the requests"
else
	t_fail "pacefs status prints the requests" "$("$PACEFS" status "$MNT" | tail -n 2)"
fi
t_eq "another path is 404" "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$MPORT/")" 404

# Bad input: one line naming the option, nothing mounted.
refused() {
	local name=$1 want=$2 err rc=0
	shift 2
	mkdir -p "$T_TMP/bad"
	err=$("$PACEFS" "$@" "$ORIGIN_URL/data.bin" "$T_TMP/bad" 2>&1) || rc=$?
	if [ "$rc" -eq 1 ] && [ "$(printf '%s\n' "$err" | wc -l)" -eq 1 ] &&
		[[ $err == *"$want"* ]] && ! is_mounted "$T_TMP/bad"; then
		t_pass "$name: $err"
	else
		t_fail "$name" "exit $rc: $err"
		umount_pacefs "$T_TMP/bad"
	fi
}
refused "a malformed address" "option metrics: 'localhost' is not ADDR:PORT" \
	-o "cache_dir=$T_TMP/c2,metrics=localhost"
refused "an address in use" "option metrics: cannot listen on 127.0.0.1:$MPORT: Address already in use" \
	-o "cache_dir=$T_TMP/c2,metrics=127.0.0.1:$MPORT"
refused "an address not this machine's" "option metrics: cannot listen on 192.0.2.1:$MPORT" \
	-o "cache_dir=$T_TMP/c2,metrics=192.0.2.1:$MPORT"
refused "a label pacefs sets" "option metrics_label: pacefs sets the label 'mount'" \
	-o "cache_dir=$T_TMP/c2,metrics_label=mount=x"

t_check "unmount" umount_pacefs "$MNT"
t_done

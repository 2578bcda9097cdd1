#!/usr/bin/env bash
# report.sh: turns the benchmark's raw results (raw.tsv: workload, system,
# run, ok|failed, key=value...) into docs/bench/README.md and PNG plots;
# run.sh calls it with its settings in the environment.
# shellcheck disable=SC2154 # the SL_*, SW_*, ... figures are made by declare
set -euo pipefail

# Run alone (contrib/bench/report.sh [OUT]), it rebuilds the report from a
# previous run's raw.tsv, settings.sh and logs/ in OUT (docs/bench).
if [ -z "${BENCH_RAW:-}" ]; then
	BENCH_OUT=${1:-$(cd "$(dirname "$0")/../.." && pwd)/docs/bench}
	# shellcheck source=/dev/null
	. "$BENCH_OUT/settings.sh"
	BENCH_RAW=$BENCH_OUT/raw.tsv
fi
RAW=${BENCH_RAW:?}
OUT=${BENCH_OUT:?}
RUNS=${BENCH_RUNS:-3}
MD=$OUT/README.md
MiB=1048576

# med WL SYS KEY: the median of KEY over the runs, or "failed (k of n runs):
# reason" when any run failed, or "-" when there is no such row.
med() {
	awk -F'\t' -v wl="$1" -v sys="$2" -v key="$3" '
		$1 == wl && $2 == sys {
			n++
			if ($4 != "ok") { nf++; if (why == "") why = $5; next }
			split($5, kv, " ")
			for (i in kv) { split(kv[i], p, "="); if (p[1] == key) v[++m] = p[2] + 0 }
		}
		END {
			if (n == 0) { print "-"; exit }
			if (nf) { printf "failed (%d of %d runs): %s\n", nf, n, why; exit }
			if (m == 0) { print "-"; exit }
			for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
			if (m % 2) print v[(m + 1) / 2]; else print (v[m / 2] + v[m / 2 + 1]) / 2
		}' "$RAW"
}

# vals WL SYS KEY SCALE FMT: every run's value of KEY (divided by SCALE),
# comma-separated, failed runs as "failed".
vals() {
	awk -F'\t' -v wl="$1" -v sys="$2" -v key="$3" -v sc="$4" -v fmt="$5" '
		$1 == wl && $2 == sys {
			s = ""
			if ($4 != "ok") s = "failed"
			else {
				split($5, kv, " ")
				for (i in kv) { split(kv[i], p, "="); if (p[1] == key) s = sprintf(fmt, p[2] / sc) }
			}
			out = out (out == "" ? "" : ", ") s
		}
		END { print out }' "$RAW"
}

isnum() { [[ $1 =~ ^-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$ ]]; }

# f VALUE SCALE FMT: VALUE/SCALE formatted, or VALUE itself when it is not a
# number (a failure text).
f() {
	if isnum "$1"; then awk -v v="$1" -v s="$2" -v fmt="$3" 'BEGIN { printf fmt, v / s }'; else printf '%s' "$1"; fi
}

# ratio A B: A/B as "1.23x", or "n/a" when either is not a positive number.
ratio() {
	if isnum "$1" && isnum "$2" && awk -v b="$2" 'BEGIN { exit !(b > 0) }'; then
		awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2fx", a / b }'
	else
		printf 'n/a'
	fi
}

# le A B / ge A B: numeric comparisons that are false for non-numbers.
ge() { isnum "$1" && isnum "$2" && awk -v a="$1" -v b="$2" 'BEGIN { exit !(a >= b) }'; }
le() { isnum "$1" && isnum "$2" && awk -v a="$1" -v b="$2" 'BEGIN { exit !(a <= b) }'; }
mul() { if isnum "$1"; then awk -v a="$1" -v b="$2" 'BEGIN { printf "%.9g", a * b }'; else printf '%s' "$1"; fi; }
minnum() {
	local best=
	for v in "$@"; do
		if isnum "$v" && { [ -z "$best" ] || le "$v" "$best"; }; then best=$v; fi
	done
	printf '%s' "${best:-n/a}"
}
maxnum() {
	local best=
	for v in "$@"; do
		if isnum "$v" && { [ -z "$best" ] || ge "$v" "$best"; }; then best=$v; fi
	done
	printf '%s' "${best:-n/a}"
}
# yesno CMP A B: the verdict of CMP (ge or le) on pacefs's figure A and the
# bound B; a failed pacefs is NOT met, a failed reference cannot be judged.
yesno() {
	if ! isnum "$2"; then
		printf '**NOT met** (pacefs failed)'
	elif ! isnum "$3"; then
		printf 'n/a (the reference failed)'
	elif "$@"; then
		printf '**met**'
	else
		printf '**NOT met**'
	fi
}

label() {
	case $1 in
	pacefs) echo "pacefs" ;;
	rclone) echo "rclone mount, --vfs-cache-mode full" ;;
	httpdirfs) echo "httpdirfs --cache" ;;
	curl1) echo "curl alone, one connection (limit)" ;;
	curl8) echo "curl, 8 parallel ranges (limit)" ;;
	*) echo "$1" ;;
	esac
}

SYS=(pacefs rclone httpdirfs)

# --- numbers used by several sections ---------------------------------------

for s in pacefs rclone httpdirfs curl1 curl8; do
	declare "SL_$s=$(med seq_lo "$s" mbps)"
	declare "SW_$s=$(med seq_wan "$s" mbps)"
done
for s in pacefs rclone httpdirfs curl1; do
	declare "TL_$s=$(med ttfb_lo "$s" secs)"
	declare "TW_$s=$(med ttfb_wan "$s" secs)"
	for o in lo wan; do
		declare "R50_${o}_$s=$(med "random_$o" "$s" p50)"
		declare "R95_${o}_$s=$(med "random_$o" "$s" p95)"
		declare "RP_${o}_$s=$(med "random_$o" "$s" pulled)"
	done
done
for s in pacefs rclone httpdirfs; do
	declare "WM_$s=$(med warm "$s" mbps)"
	declare "SK_$s=$(med seek "$s" p50)"
	declare "PP_$s=$(med player "$s" pulled)"
	declare "PC_$s=$(med player "$s" consumed)"
	declare "PW_$s=$(med player "$s" worst)"
	declare "MH_$s=$(med memory "$s" hwm_kib)"
done
v() { local n=$1; printf '%s' "${!n}"; }

# --- plots ------------------------------------------------------------------

PLOTS=()
PLOT_ERR=$(mktemp)
rm -f "$OUT/cold_seq.png" "$OUT/latency.png" "$OUT/pulled.png"
if command -v gnuplot >/dev/null 2>&1; then
	dat=$(mktemp)
	for s in pacefs rclone httpdirfs curl1 curl8; do
		a=$(v "SL_$s") b=$(v "SW_$s")
		isnum "$a" || a=0
		isnum "$b" || b=0
		printf '"%s" %s %s\n' "$s" "$a" "$b" >>"$dat"
	done
	gnuplot <<-EOF 2>>"$PLOT_ERR" && PLOTS+=(cold_seq.png) || echo "report: the cold_seq plot failed: $(grep . "$PLOT_ERR" | tail -n 1)" >&2
		set terminal pngcairo size 1000,420 font "sans,10" noenhanced
		set output "$OUT/cold_seq.png"
		set multiplot layout 1,2 title "Cold sequential read, MB/s (median of $RUNS runs; 0 = failed)"
		set style data histograms
		set style fill solid 0.8 border -1
		set boxwidth 0.7
		set grid ytics
		set yrange [0:*]
		set key off
		set title "loopback nginx, $((SEQ_LO_SIZE / MiB)) MiB"
		plot "$dat" using 2:xtic(1) lc rgb "#3b75af", '' using 0:2:(sprintf("%.0f",\$2)) with labels offset 0,0.7 notitle
		set title "WAN origin (${WAN_LATENCY} ms, $WAN_RATE B/s per conn), $((SEQ_WAN_SIZE / MiB)) MiB"
		plot "$dat" using 3:xtic(1) lc rgb "#e1812c", '' using 0:3:(sprintf("%.1f",\$3)) with labels offset 0,0.7 notitle
		unset multiplot
	EOF

	: >"$dat"
	for s in pacefs rclone httpdirfs curl1; do
		row="\"$s\""
		for k in R50_lo R95_lo R50_wan R95_wan TL TW; do
			x=$(v "${k}_$s")
			if isnum "$x"; then row="$row $(awk -v x="$x" 'BEGIN { printf "%.4f", x * 1000 }')"; else row="$row NaN"; fi
		done
		echo "$row" >>"$dat"
	done
	gnuplot <<-EOF 2>>"$PLOT_ERR" && PLOTS+=(latency.png) || echo "report: the latency plot failed: $(grep . "$PLOT_ERR" | tail -n 1)" >&2
		set terminal pngcairo size 1000,420 font "sans,10" noenhanced
		set output "$OUT/latency.png"
		set multiplot layout 1,2 title "Latency, ms, log scale (median of $RUNS runs; missing bar = failed)"
		set style data histograms
		set style histogram clustered gap 1
		set style fill solid 0.8 border -1
		set logscale y
		set grid ytics
		set key top left
		set title "random 4 KiB reads (p50, p95) and first byte, loopback"
		plot "$dat" using 2:xtic(1) title "p50", '' using 3 title "p95", '' using 6 title "first 4 KiB"
		set title "the same on the WAN origin"
		plot "$dat" using 4:xtic(1) title "p50", '' using 5 title "p95", '' using 7 title "first 4 KiB"
		unset multiplot
	EOF

	: >"$dat"
	for s in pacefs rclone httpdirfs; do
		row="\"$s\""
		for k in "random_lo pulled" "random_wan pulled" "player pulled" "seek pulled"; do
			x=$(med "${k% *}" "$s" "${k#* }")
			if isnum "$x"; then row="$row $(awk -v x="$x" -v m=$MiB 'BEGIN { printf "%.3f", x / m }')"; else row="$row NaN"; fi
		done
		echo "$row" >>"$dat"
	done
	gnuplot <<-EOF 2>>"$PLOT_ERR" && PLOTS+=(pulled.png) || echo "report: the pulled plot failed: $(grep . "$PLOT_ERR" | tail -n 1)" >&2
		set terminal pngcairo size 1000,420 font "sans,10" noenhanced
		set output "$OUT/pulled.png"
		set title "MiB pulled from the origin, mount to unmount (median of $RUNS runs; missing bar = failed)"
		set style data histograms
		set style histogram clustered gap 1
		set style fill solid 0.8 border -1
		set logscale y
		set grid ytics
		set key top left
		plot "$dat" using 2:xtic(1) title "random 4 KiB, loopback ($RANDOM_N_LO reads = $(awk -v n="$RANDOM_N_LO" 'BEGIN { printf "%.2f", n * 4 / 1024 }') MiB)", \
			'' using 3 title "random 4 KiB, WAN ($RANDOM_N_WAN reads = $(awk -v n="$RANDOM_N_WAN" 'BEGIN { printf "%.2f", n * 4 / 1024 }') MiB)", \
			'' using 4 title "player ($((PLAYER_BYTES / MiB)) MiB consumed)", \
			'' using 5 title "seeks ($(((SEEK_N + 1) * SEEK_PLAY / MiB)) MiB consumed)"
	EOF
	rm -f "$dat"
fi

# --- targets, computed first so that the headline can count them -----------

WINDOW=$((64 * MiB)) # pacing's window_max, the largest read-ahead window
RTT=$(awk -v l="$WAN_LATENCY" 'BEGIN { print l / 1000 }')
OWN=$(awk -v b="$PLAYER_BS" -v r="$WAN_RATE" 'BEGIN { print b / r }')
TGT=$(mktemp)
trap 'rm -f "$TGT" "$PLOT_ERR"' EXIT
{
	# --- targets ---
	best_lo_comp=$(maxnum "$SL_rclone" "$SL_httpdirfs")
	best_wan_comp=$(maxnum "$SW_rclone" "$SW_httpdirfs")
	echo "| target | measured (same run) | verdict |"
	echo "| --- | --- | --- |"
	echo "| cold sequential, loopback: >= 2x rclone | pacefs $(f "$SL_pacefs" 1 %.0f) MB/s vs rclone $(f "$SL_rclone" 1 %.0f) MB/s: $(ratio "$SL_pacefs" "$SL_rclone") | $(yesno ge "$SL_pacefs" "$(mul "$SL_rclone" 2)") |"
	echo "| cold sequential, loopback: >= 0.5x curl alone | vs curl one connection $(f "$SL_curl1" 1 %.0f) MB/s: $(ratio "$SL_pacefs" "$SL_curl1") | $(yesno ge "$SL_pacefs" "$(mul "$SL_curl1" 0.5)") |"
	echo "| cold sequential, WAN: >= 0.8x curl 8 ranges | pacefs $(f "$SW_pacefs" 1 %.1f) MB/s vs $(f "$SW_curl8" 1 %.1f) MB/s: $(ratio "$SW_pacefs" "$SW_curl8") | $(yesno ge "$SW_pacefs" "$(mul "$SW_curl8" 0.8)") |"
	echo "| cold sequential, WAN: >= 5x rclone | vs $(f "$SW_rclone" 1 %.1f) MB/s: $(ratio "$SW_pacefs" "$SW_rclone") | $(yesno ge "$SW_pacefs" "$(mul "$SW_rclone" 5)") |"
	echo "| cold sequential, WAN: >= 5x httpdirfs | vs $(f "$SW_httpdirfs" 1 %.1f) MB/s: $(ratio "$SW_pacefs" "$SW_httpdirfs") | $(yesno ge "$SW_pacefs" "$(mul "$SW_httpdirfs" 5)") |"
	echo "| first byte, loopback: <= 1.3x one curl range request | pacefs $(f "$TL_pacefs" 0.001 %.2f) ms vs curl $(f "$TL_curl1" 0.001 %.2f) ms: $(ratio "$TL_pacefs" "$TL_curl1") | $(yesno le "$TL_pacefs" "$(mul "$TL_curl1" 1.3)") |"
	echo "| first byte, WAN: <= 1.3x one curl range request | pacefs $(f "$TW_pacefs" 0.001 %.1f) ms vs curl $(f "$TW_curl1" 0.001 %.1f) ms: $(ratio "$TW_pacefs" "$TW_curl1") | $(yesno le "$TW_pacefs" "$(mul "$TW_curl1" 1.3)") |"
	for o in lo wan; do
		p95=$(v "R95_${o}_pacefs") c95=$(v "R95_${o}_curl1") pp=$(v "RP_${o}_pacefs")
		bc=$(minnum "$(v "RP_${o}_rclone")" "$(v "RP_${o}_httpdirfs")")
		on=$([ $o = lo ] && echo loopback || echo WAN)
		echo "| random 4 KiB, $on: p95 <= 2x one curl range request | pacefs $(f "$p95" 0.001 %.2f) ms vs curl $(f "$c95" 0.001 %.2f) ms: $(ratio "$p95" "$c95") | $(yesno le "$p95" "$(mul "$c95" 2)") |"
		echo "| random 4 KiB, $on: bytes pulled <= 1/4 of the best competitor's | pacefs $(f "$pp" $MiB %.2f) MiB vs $(f "$bc" $MiB %.2f) MiB: $(ratio "$pp" "$bc") | $(yesno le "$pp" "$(mul "$bc" 0.25)") |"
	done
	lim=$(awk -v c="$PC_pacefs" -v w="$WINDOW" 'BEGIN { print c + w }' 2>/dev/null || echo n/a)
	echo "| player: pulled <= consumed + one window ($((WINDOW / MiB)) MiB, pacing's window_max) | pulled $(f "$PP_pacefs" $MiB %.1f) MiB for $(f "$PC_pacefs" $MiB %.1f) MiB consumed | $(yesno le "$PP_pacefs" "$lim") |"
	lim=$(awk -v a="$RTT" -v b="$OWN" 'BEGIN { print a + b }')
	echo "| player: worst wait after the first read <= one round trip + the read's own transfer ($(f "$lim" 0.001 %.1f) ms: $WAN_LATENCY ms + $((PLAYER_BS / 1024)) KiB at $WAN_RATE B/s) | $(f "$PW_pacefs" 0.001 %.1f) ms | $(yesno le "$PW_pacefs" "$lim") |"
	bs=$(minnum "$SK_rclone" "$SK_httpdirfs")
	echo "| seek: first read at the new position <= 1/3 of the best competitor's | pacefs $(f "$SK_pacefs" 0.001 %.1f) ms vs $(f "$bs" 0.001 %.1f) ms: $(ratio "$SK_pacefs" "$bs") | $(yesno le "$SK_pacefs" "$(mul "$bs" "$(awk 'BEGIN { print 1/3 }')")") |"
	echo "| warm re-read: >= 2x httpdirfs | pacefs $(f "$WM_pacefs" 1 %.0f) MB/s vs $(f "$WM_httpdirfs" 1 %.0f) MB/s: $(ratio "$WM_pacefs" "$WM_httpdirfs") | $(yesno ge "$WM_pacefs" "$(mul "$WM_httpdirfs" 2)") |"
	echo "| warm re-read: >= 1.5x rclone | vs $(f "$WM_rclone" 1 %.0f) MB/s: $(ratio "$WM_pacefs" "$WM_rclone") | $(yesno ge "$WM_pacefs" "$(mul "$WM_rclone" 1.5)") |"
	rp=$(med remount pacefs read_pulled) rq=$(med remount pacefs pulled)
	lim=$(awk -v w="$WINDOW" 'BEGIN { print (64 * 1048576 + w) / 1024 }')
	echo "| memory (issue 5): daemon's peak RSS streaming $((${MEM_SIZE:-0} / MiB)) MiB <= 64 MiB + one window ($((WINDOW / MiB)) MiB) | pacefs $(f "$MH_pacefs" 1024 %.0f) MiB (rclone $(f "$MH_rclone" 1024 %.0f), httpdirfs $(f "$MH_httpdirfs" 1024 %.0f)) | $(yesno le "$MH_pacefs" "$lim") |"
	echo "| remount: zero bytes pulled by the full read | $(f "$rp" 1 %.0f) bytes during the read; $(f "$rq" 1 %.0f) bytes mount to unmount (requests: $(vals remount pacefs reqs 1 %d)) | $(yesno le "$rp" 0) |"
	echo

} >"$TGT"
n_met=$(grep -c '| \*\*met\*\* |$' "$TGT" || true)
n_not=$(grep -c '| \*\*NOT met\*\*' "$TGT" || true)
n_na=$(grep -c '| n/a (the reference failed) |$' "$TGT" || true)

# --- the report -------------------------------------------------------------



{
	cat <<-EOF
		# pacefs benchmark: side by side with rclone and httpdirfs

		Generated by \`make bench\` (\`contrib/bench/run.sh\`) on $BENCH_DATE, pacefs commit $BENCH_COMMIT; the measurements took $((BENCH_SECS / 60)) min $((BENCH_SECS % 60)) s.
		Every figure is the median of $RUNS runs; the per-run values are listed next to it. Ratios compare figures of the same run.
		Raw results: [raw.tsv](raw.tsv) (workload, system, run, ok/failed, values).

		**Machine:** $BENCH_MACHINE. Shared with other engineers' builds and tests while it ran, so expect noise: load average ${BENCH_LOAD:-unknown}.

		**Versions:** $BENCH_VERSIONS.

		## Setup

		- **Loopback origin:** nginx on 127.0.0.1, a free port, \`autoindex on\`, sendfile, one worker per CPU. Raw speed.
		- **WAN-like origin:** the project's \`pacefs-origin\` with \`--latency $WAN_LATENCY --rate $WAN_RATE --autoindex\`: every response (listings, HEADs and ranges alike) waits $WAN_LATENCY ms before its head, and every connection is capped at $WAN_RATE bytes/s. Its \`--autoindex\` page mimics nginx's, so all three systems list, probe and read through the same latency and cap. (nginx's \`limit_rate\` would have given the cap but not the latency.)
		- **Systems:** \`pacefs -f -o cache_dir=DIR URL MNT\` (one blob per mount; defaults, 8 lanes); \`rclone mount :http: MNT --http-url URL/ --vfs-cache-mode full --cache-dir DIR\` (defaults otherwise); \`httpdirfs -f --cache --cache-location DIR URL/ MNT\` (defaults otherwise). Limit rows: \`curl\` to /dev/null, one connection, and one \`curl --parallel\` with 8 range requests.
		- **Cold:** every run starts with a new empty cache directory and a new mount; then \`sync; echo 3 > /proc/sys/vm/drop_caches\`$( [ "${BENCH_DROP_OK:-1}" = 1 ] || printf ' (**failed on this machine: page cache NOT dropped**)'), then the origin's source file is read once so that the origin serves from memory.
		- **Verification:** the files are generated by \`benchread gen\` (word i of a file is x ^ (x >> 29) with x = (FNV-1a(name) + i) times an odd constant: no two words of a file are equal); the reader \`benchread\` checks every byte it reads against that formula (about 5 GB/s on this machine, so it does not cap warm reads), so a wrong byte at any offset fails the run ("failed: content mismatch ... at offset N"). curl rows check status codes and byte counts.
		- **Bytes pulled** are the body bytes the origin logged (nginx \`\$body_bytes_sent\`, pacefs-origin's per-request log), from before the mount to after the unmount unless said otherwise.
		- Files: $((SEQ_LO_SIZE / MiB)) MiB for loopback sequential/warm/remount, $((SEQ_WAN_SIZE / MiB)) MiB for WAN sequential, first byte and mirrors, $((LONG_SIZE / MiB)) MiB for random reads and seeks (the player reads the $((SEQ_LO_SIZE / MiB)) MiB file), $MULTI_FILES x $((MULTI_SIZE / MiB)) MiB for many readers.

	EOF

	echo "## Headline"
	echo
	echo "- Targets: **$n_met met, $n_not NOT met**$( [ "$n_na" -eq 0 ] || printf ', %s not judged (a reference failed)' "$n_na") (table below)."
	echo "- Cold sequential: loopback pacefs $(f "$SL_pacefs" 1 %.0f) MB/s = $(ratio "$SL_pacefs" "$SL_rclone") rclone, $(ratio "$SL_pacefs" "$SL_httpdirfs") httpdirfs, $(ratio "$SL_pacefs" "$SL_curl1") curl alone; WAN $(f "$SW_pacefs" 1 %.1f) MB/s = $(ratio "$SW_pacefs" "$SW_rclone") rclone, $(ratio "$SW_pacefs" "$SW_httpdirfs") httpdirfs, $(ratio "$SW_pacefs" "$SW_curl8") curl with 8 ranges."
	echo "- First byte of a cold file: pacefs $(f "$TL_pacefs" 0.001 %.2f) ms on loopback ($(ratio "$TL_pacefs" "$TL_curl1") one curl range request), $(f "$TW_pacefs" 0.001 %.1f) ms on WAN ($(ratio "$TW_pacefs" "$TW_curl1"))."
	echo "- Random 4 KiB on WAN: pacefs p95 $(f "$R95_wan_pacefs" 0.001 %.1f) ms vs rclone $(f "$R95_wan_rclone" 0.001 %.1f) ms and httpdirfs $(f "$R95_wan_httpdirfs" 0.001 %.1f) ms, pulling $(f "$RP_wan_pacefs" $MiB %.1f) MiB vs $(f "$RP_wan_rclone" $MiB %.1f) and $(f "$RP_wan_httpdirfs" $MiB %.1f) MiB."
	echo "- Warm re-read: $(ratio "$WM_pacefs" "$WM_rclone") rclone, $(ratio "$WM_pacefs" "$WM_httpdirfs") httpdirfs; after a remount pacefs read the whole file pulling $(f "$(med remount pacefs read_pulled)" 1 %.0f) bytes."
	echo
	for p in "${PLOTS[@]}"; do echo "![$p]($p)"; done
	echo
	echo "## Targets (issues 4, 5 and 8)"
	echo

	cat "$TGT"

	# --- tables ---
	echo "## Cold sequential read"
	echo
	echo "MB/s (10^6 bytes/s) from open to the last verified byte, 1 MiB reads."
	echo
	echo "| system | loopback nginx, $((SEQ_LO_SIZE / MiB)) MiB | runs | pacefs is | WAN origin, $((SEQ_WAN_SIZE / MiB)) MiB | runs | pacefs is | WAN pulled MiB |"
	echo "| --- | ---: | --- | ---: | ---: | --- | ---: | ---: |"
	for s in pacefs rclone httpdirfs curl1 curl8; do
		echo "| $(label "$s") | $(f "$(v "SL_$s")" 1 %.0f) | $(vals seq_lo "$s" mbps 1 %.0f) | $(ratio "$SL_pacefs" "$(v "SL_$s")") | $(f "$(v "SW_$s")" 1 %.1f) | $(vals seq_wan "$s" mbps 1 %.1f) | $(ratio "$SW_pacefs" "$(v "SW_$s")") | $(f "$(med seq_wan "$s" pulled)" $MiB %.1f) |"
	done
	echo
	echo "Best competitor: loopback $(ratio "$SL_pacefs" "$best_lo_comp") of its rate, WAN $(ratio "$SW_pacefs" "$best_wan_comp"); vs curl alone: loopback $(ratio "$SL_pacefs" "$SL_curl1"), WAN $(ratio "$SW_pacefs" "$SW_curl1") (one connection) and $(ratio "$SW_pacefs" "$SW_curl8") (8 ranges)."
	echo

	echo "## Time to first byte of a cold file"
	echo
	echo "Milliseconds from open() to the end of the first 4 KiB read on a fresh mount with an empty cache; curl: one range request of 4 KiB, a fresh process and connection."
	echo
	echo "| system | loopback ms | runs | pacefs is | WAN ms | runs | pacefs is |"
	echo "| --- | ---: | --- | ---: | ---: | --- | ---: |"
	for s in pacefs rclone httpdirfs curl1; do
		echo "| $(label "$s" | sed 's/one connection (limit)/one range request (limit)/') | $(f "$(v "TL_$s")" 0.001 %.2f) | $(vals ttfb_lo "$s" secs 0.001 %.2f) | $(ratio "$TL_pacefs" "$(v "TL_$s")") | $(f "$(v "TW_$s")" 0.001 %.1f) | $(vals ttfb_wan "$s" secs 0.001 %.1f) | $(ratio "$TW_pacefs" "$(v "TW_$s")") |"
	done
	echo

	echo "## Random 4 KiB reads"
	echo
	echo "$RANDOM_N_LO (loopback) and $RANDOM_N_WAN (WAN) reads at seeded 4 KiB-aligned offsets of the $((LONG_SIZE / MiB)) MiB file, the file opened first (untimed); latency per read. curl: the same number of 4 KiB range requests over one keep-alive connection."
	echo
	echo "| system | origin | p50 ms | p95 ms | p95 runs | pulled MiB | requests | pacefs p95 is | pacefs pulled is |"
	echo "| --- | --- | ---: | ---: | --- | ---: | ---: | ---: | ---: |"
	for o in lo wan; do
		for s in pacefs rclone httpdirfs curl1; do
			echo "| $(label "$s" | sed 's/one connection (limit)/4 KiB range requests (limit)/') | $([ $o = lo ] && echo loopback || echo WAN) | $(f "$(v "R50_${o}_$s")" 0.001 %.2f) | $(f "$(v "R95_${o}_$s")" 0.001 %.2f) | $(vals "random_$o" "$s" p95 0.001 %.2f) | $(f "$(v "RP_${o}_$s")" $MiB %.2f) | $(f "$(med "random_$o" "$s" reqs)" 1 %.0f) | $(ratio "$(v "R95_${o}_pacefs")" "$(v "R95_${o}_$s")") | $(ratio "$(v "RP_${o}_pacefs")" "$(v "RP_${o}_$s")") |"
		done
	done
	echo

	echo "## Player at a fixed rate (WAN origin)"
	echo
	echo "Reads the first $((PLAYER_BYTES / MiB)) MiB of the $((SEQ_LO_SIZE / MiB)) MiB file in $((PLAYER_BS / 1024)) KiB reads at $PLAYER_RATE bytes/s (a late read is not made up for), then closes; the mount is unmounted right after. Pulled: mount to unmount."
	echo
	echo "| system | consumed MiB | pulled MiB | pulled runs | pulled - consumed MiB | first read ms | worst wait after the first, ms | worst-wait runs | time stalled s |"
	echo "| --- | ---: | ---: | --- | ---: | ---: | ---: | --- | ---: |"
	for s in "${SYS[@]}"; do
		pc=$(v "PC_$s") pp=$(v "PP_$s")
		d=n/a
		if isnum "$pc" && isnum "$pp"; then d=$(awk -v a="$pp" -v b="$pc" -v m=$MiB 'BEGIN { printf "%.1f", (a - b) / m }'); fi
		echo "| $(label "$s") | $(f "$pc" $MiB %.0f) | $(f "$pp" $MiB %.1f) | $(vals player "$s" pulled $MiB %.1f) | $d | $(f "$(med player "$s" first)" 0.001 %.1f) | $(f "$(v "PW_$s")" 0.001 %.1f) | $(vals player "$s" worst 0.001 %.1f) | $(f "$(med player "$s" stalled)" 1 %.2f) |"
	done
	echo

	echo "## Seeks during playback (WAN origin)"
	echo
	echo "Plays $((SEEK_PLAY / MiB)) MiB at $PLAYER_RATE bytes/s, then $SEEK_N times jumps to a seeded position and plays $((SEEK_PLAY / MiB)) MiB there; latency of the first $((PLAYER_BS / 1024)) KiB read at each new position (p50 and max within a run; medians over runs)."
	echo
	echo "| system | seek p50 ms | p50 runs | seek max ms | worst wait while playing after a seek, ms | pulled MiB | pacefs p50 is |"
	echo "| --- | ---: | --- | ---: | ---: | ---: | ---: |"
	for s in "${SYS[@]}"; do
		echo "| $(label "$s") | $(f "$(v "SK_$s")" 0.001 %.1f) | $(vals seek "$s" p50 0.001 %.1f) | $(f "$(med seek "$s" max)" 0.001 %.1f) | $(f "$(med seek "$s" worst_after)" 0.001 %.1f) | $(f "$(med seek "$s" pulled)" $MiB %.1f) | $(ratio "$SK_pacefs" "$(v "SK_$s")") |"
	done
	echo

	echo "## Warm re-read and full read after remount (loopback, $((SEQ_LO_SIZE / MiB)) MiB)"
	echo
	echo "Warm: the same mount reads the file again right after the cold read (page cache not dropped). Remount: unmount, drop the page cache, mount over the same cache directory, read in full."
	echo
	echo "| system | warm MB/s | warm runs | pacefs is | warm pulled MiB | remount MB/s | remount runs | pulled during the read, bytes | pulled mount to unmount, bytes (requests) |"
	echo "| --- | ---: | --- | ---: | ---: | ---: | --- | ---: | ---: |"
	for s in "${SYS[@]}"; do
		echo "| $(label "$s") | $(f "$(v "WM_$s")" 1 %.0f) | $(vals warm "$s" mbps 1 %.0f) | $(ratio "$WM_pacefs" "$(v "WM_$s")") | $(f "$(med warm "$s" pulled)" $MiB %.1f) | $(f "$(med remount "$s" mbps)" 1 %.0f) | $(vals remount "$s" mbps 1 %.0f) | $(f "$(med remount "$s" read_pulled)" 1 %.0f) | $(f "$(med remount "$s" pulled)" 1 %.0f) ($(vals remount "$s" reqs 1 %d)) |"
	done
	echo

	echo "## Two mirrors (pacefs only, WAN origins)"
	echo
	echo "Two pacefs-origin instances with the same caps serving the same $((SEQ_WAN_SIZE / MiB)) MiB file; cold sequential read with each alone and with both (\`-o mirror=URL\`). The cap is per connection, so one mirror alone already offers 8 lanes x $WAN_RATE B/s; a second mirror can only add bandwidth where a single origin limits its total, which this origin does not model."
	echo
	echo "| configuration | MB/s | runs | from A MiB | from B MiB | both is |"
	echo "| --- | ---: | --- | ---: | ---: | ---: |"
	mb=$(med mirrors both mbps)
	for c in mirror_a mirror_b both; do
		echo "| $c | $(f "$(med mirrors "$c" mbps)" 1 %.1f) | $(vals mirrors "$c" mbps 1 %.1f) | $(f "$(med mirrors "$c" a_pulled)" $MiB %.1f) | $(f "$(med mirrors "$c" b_pulled)" $MiB %.1f) | $(ratio "$mb" "$(med mirrors "$c" mbps)") |"
	done
	echo

	echo "## Many readers over many files (WAN origin)"
	echo
	echo "$MULTI_READERS readers at once, two per file, over $MULTI_FILES files of $((MULTI_SIZE / MiB)) MiB; aggregate MB/s = bytes read by all readers / wall time. pacefs mounts one blob per mount, so it runs $MULTI_FILES mounts (each with its own 8 lanes)."
	echo
	echo "| system | aggregate MB/s | runs | pulled MiB | pacefs is |"
	echo "| --- | ---: | --- | ---: | ---: |"
	mp=$(med multi pacefs mbps)
	for s in "${SYS[@]}"; do
		echo "| $(label "$s") | $(f "$(med multi "$s" mbps)" 1 %.1f) | $(vals multi "$s" mbps 1 %.1f) | $(f "$(med multi "$s" pulled)" $MiB %.1f) | $(ratio "$mp" "$(med multi "$s" mbps)") |"
	done
	echo
	echo "## Memory while streaming (loopback, $((${MEM_SIZE:-0} / MiB)) MiB)"
	echo
	echo "One cold sequential read of the whole file; the mount daemon's peak resident set (VmHWM: heap, buffers and the pages of its cache files it has mapped) and its RSS at the end of the read, before the unmount."
	echo
	echo "| system | MB/s | peak RSS MiB | runs | RSS at the end, MiB |"
	echo "| --- | ---: | ---: | --- | ---: |"
	for s in "${SYS[@]}"; do
		echo "| $(label "$s") | $(f "$(med memory "$s" mbps)" 1 %.0f) | $(f "$(v "MH_$s")" 1024 %.0f) | $(vals memory "$s" hwm_kib 1024 %.0f) | $(f "$(med memory "$s" rss_kib)" 1024 %.0f) |"
	done
	echo
	echo "## Noise"
	echo
	echo "The machine was shared. Largest spreads between runs of one figure (max / min over the $RUNS runs):"
	echo
	echo "| workload | system | figure | runs | max / min |"
	echo "| --- | --- | --- | --- | ---: |"
	awk -F'\t' '
		BEGIN {
			key["seq_lo"] = "mbps"; key["seq_wan"] = "mbps"; key["warm"] = "mbps"
			key["remount"] = "mbps"; key["mirrors"] = "mbps"; key["multi"] = "mbps"
			key["memory"] = "hwm_kib"
			key["ttfb_lo"] = "secs"; key["ttfb_wan"] = "secs"; key["random_lo"] = "p95"
			key["random_wan"] = "p95"; key["player"] = "worst"; key["seek"] = "p50"
		}
		$4 == "ok" && ($1 in key) {
			n = split($5, kv, " ")
			for (i = 1; i <= n; i++) {
				split(kv[i], p, "=")
				if (p[1] != key[$1] || p[2] + 0 <= 0) continue
				id = $1 "\t" $2
				v = p[2] + 0
				if (!(id in lo) || v < lo[id]) lo[id] = v
				if (!(id in hi) || v > hi[id]) hi[id] = v
				list[id] = list[id] (list[id] == "" ? "" : ", ") sprintf("%.3g", v)
			}
		}
		END {
			for (id in lo) {
				split(id, w, "\t")
				printf "%.3f\t| %s | %s | %s | %s | %.2f |\n", hi[id] / lo[id], w[1], w[2], key[w[1]], list[id], hi[id] / lo[id]
			}
		}' "$RAW" | sort -rn | head -n 6 | cut -f2-
	echo
	echo "## Caveats"
	echo
	echo "- pacefs mounts one blob per mount; the many-readers workload gives it one mount per file, each with its own 8 lanes, while rclone and httpdirfs serve all files from one mount."
	echo "- httpdirfs runs with \`--no-range-check\`: without it httpdirfs 1.2.5 exits on nginx's 206 responses, which carry Content-Range but no Accept-Ranges (httpdirfs issue #188). It also crashed at unmount in some runs (see Logs); only reads before the unmount count."
	echo "- Warm re-reads do not drop the page cache: they measure what a user sees on a second read, kernel page cache included where the filesystem keeps it."
	echo "- Timings include benchread's check of every byte (about 0.05 s per 256 MiB on this machine), the same for every system; curl rows do no check."
	echo "- The player target's 'one window' is taken as pacing's window_max (64 MiB), the largest read-ahead window; pacefs's window at any moment is not visible from outside."
	echo "- The WAN origin caps each connection, not the origin as a whole, so the two-mirror workload cannot show aggregation: either mirror alone fills 8 lanes."
	echo
	echo "## Logs"
	echo
	echo "Lines other than routine ones in each system's log over the whole run ([logs/](logs/)):"
	echo
	for s in pacefs rclone httpdirfs; do
		lf=$OUT/logs/$s.log
		case $s in
		pacefs) pat='^===|: info: ' ;;
		rclone) pat='^===|NOTICE: Config file' ;;
		httpdirfs) pat='^===|^LinkTable_print|^fs_open|^fs_release' ;;
		esac
		if [ -f "$lf" ]; then
			n=$(grep -c -v -E "$pat" "$lf" || true)
			echo "- $s: $n line(s)$( [ "$n" -eq 0 ] || printf '; the first distinct ones:')"
			# each with the mount it came from (the "=== mount" line)
			awk -v pat="$pat" '
				/^===/ { hdr = $0; shown = 0; next }
				$0 ~ pat || $0 == "" { next }
				seen[$0]++ { next }
				{ if (!shown) { print substr(hdr, 5); shown = 1 } print "    " substr($0, 1, 200) }
			' "$lf" | head -n 12 | sed 's/^/    /' || true
		else
			echo "- $s: no log"
		fi
	done
	echo
	if [ -s "$OUT/notes.md" ]; then
		cat "$OUT/notes.md"
	fi
} >"$MD"

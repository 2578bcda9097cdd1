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
# reason" when any run failed, "skipped: reason" when every run was skipped,
# or "-" when there is no such row.
med() {
	awk -F'\t' -v wl="$1" -v sys="$2" -v key="$3" '
		$1 == wl && $2 == sys {
			n++
			if ($4 == "skipped") { ns++; skip = $5; next }
			if ($4 != "ok") { nf++; if (why == "") why = $5; next }
			split($5, kv, " ")
			for (i in kv) { split(kv[i], p, "="); if (p[1] == key) v[++m] = p[2] + 0 }
		}
		END {
			if (n == 0) { print "-"; exit }
			if (ns == n) { printf "skipped: %s\n", skip; exit }
			if (nf) { printf "failed (%d of %d runs): %s\n", nf, n - ns, why; exit }
			if (m == 0) { print "-"; exit }
			for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
			if (m % 2) print v[(m + 1) / 2]; else print (v[m / 2] + v[m / 2 + 1]) / 2
		}' "$RAW"
}

# med_ratio_of WL1 SYS1 WL2 SYS2 KEY: the median over the runs of the KEY
# of SYS1 in WL1 over that of SYS2 in WL2 in the same run, or "-".
med_ratio_of() {
	awk -F'\t' -v wa="$1" -v sa="$2" -v wb="$3" -v sb="$4" -v key="$5" '
		$4 == "ok" && (($1 == wa && $2 == sa) || ($1 == wb && $2 == sb)) {
			side = ($1 == wa && $2 == sa) ? "a" : "b"
			split($5, kv, " ")
			for (i in kv) { split(kv[i], p, "="); if (p[1] == key) x[side, $3] = p[2] + 0 }
			runs[$3] = 1
		}
		END {
			for (r in runs) if (("a", r) in x && ("b", r) in x && x["b", r] > 0) v[++m] = x["a", r] / x["b", r]
			if (m == 0) { print "-"; exit }
			for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
			if (m % 2) print v[(m + 1) / 2]; else print (v[m / 2] + v[m / 2 + 1]) / 2
		}' "$RAW"
}

# med_ratio WL1 WL2 SYS KEY: WL1's KEY over WL2's, SYS's figures of one run
# compared (med_ratio_of).
med_ratio() { med_ratio_of "$1" "$3" "$2" "$3" "$4"; }

# med_ratio_sys WL A B KEY: system A's KEY over system B's in the same run
# of WL (med_ratio_of).
med_ratio_sys() { med_ratio_of "$1" "$2" "$1" "$3" "$4"; }

# med_q WL SYS NUM DEN: the median over SYS's ok runs of WL of NUM / DEN,
# two keys of one run's line (requests per file: reqs / files), or "-".
med_q() {
	awk -F'\t' -v wl="$1" -v sys="$2" -v a="$3" -v b="$4" '
		$1 == wl && $2 == sys && $4 == "ok" {
			split("", x)
			n = split($5, kv, " ")
			for (i = 1; i <= n; i++) { split(kv[i], p, "="); x[p[1]] = p[2] + 0 }
			if ((a in x) && (b in x) && x[b] > 0) v[++m] = x[a] / x[b]
		}
		END {
			if (m == 0) { print "-"; exit }
			for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
			if (m % 2) print v[(m + 1) / 2]; else print (v[m / 2] + v[m / 2 + 1]) / 2
		}' "$RAW"
}

# med_ratio_best WL KEY: the median over the runs of pacefs's KEY over the
# best of rclone's and httpdirfs's in the same run (a peer that failed in
# a run did not beat pacefs there), or "-".
med_ratio_best() {
	awk -F'\t' -v wl="$1" -v key="$2" '
		$1 == wl && $4 == "ok" && ($2 == "pacefs" || $2 == "rclone" || $2 == "httpdirfs") {
			n = split($5, kv, " ")
			for (i = 1; i <= n; i++) {
				split(kv[i], p, "=")
				if (p[1] != key) continue
				if ($2 == "pacefs") a[$3] = p[2] + 0
				else if (!($3 in b) || p[2] + 0 > b[$3]) b[$3] = p[2] + 0
			}
		}
		END {
			for (r in a) if ((r in b) && b[r] > 0) v[++m] = a[r] / b[r]
			if (m == 0) { print "-"; exit }
			for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
			if (m % 2) print v[(m + 1) / 2]; else print (v[m / 2] + v[m / 2 + 1]) / 2
		}' "$RAW"
}

# lowest WL SYS KEY: the smallest KEY over the ok runs, or "-": a floor's
# estimate, which the machine's noise can only raise.
lowest() {
	awk -F'\t' -v wl="$1" -v sys="$2" -v key="$3" '
		$1 == wl && $2 == sys && $4 == "ok" {
			split($5, kv, " ")
			for (i in kv) { split(kv[i], p, "="); if (p[1] == key && (m == "" || p[2] + 0 < m)) m = p[2] + 0 }
		}
		END { print (m == "" ? "-" : m) }' "$RAW"
}

# vals WL SYS KEY SCALE FMT: every run's value of KEY (divided by SCALE),
# comma-separated, failed runs as "failed".
vals() {
	awk -F'\t' -v wl="$1" -v sys="$2" -v key="$3" -v sc="$4" -v fmt="$5" '
		$1 == wl && $2 == sys {
			s = ""
			if ($4 == "skipped") s = "skipped"
			else if ($4 != "ok") s = "failed"
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

# g VALUE SCALE FMT: as f, but a failure or skip text is "-", for the cells
# of a row whose first figure already shows it.
g() { if isnum "$1"; then f "$@"; else printf -- '-'; fi; }

# ratio A B [DIGITS]: A/B as "1.23x" (DIGITS decimals, 2 unless given), or
# "n/a" when either is not a positive number.
ratio() {
	if isnum "$1" && isnum "$2" && awk -v b="$2" 'BEGIN { exit !(b > 0) }'; then
		awk -v a="$1" -v b="$2" -v d="${3:-2}" 'BEGIN { printf "%.*fx", d, a / b }'
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
# bound B; a failed pacefs is NOT met, a failed reference cannot be judged,
# a skipped workload, or one without rows (BENCH_ONLY), is not run.
yesno() {
	if [[ $2 == skipped:* ]]; then
		printf 'not run (%s)' "${2#skipped: }"
	elif [ "$2" = - ]; then
		printf 'not run (no figures in this run)'
	elif ! isnum "$2"; then
		printf '**NOT met** (pacefs failed)'
	elif ! isnum "$3"; then
		printf 'n/a (the reference failed)'
	elif "$@"; then
		printf '**met**'
	else
		printf '**NOT met**'
	fi
}

# gf VALUE SCALE FMT: as g, but a failure is "failed", for a reference
# inside a sentence.
gf() { if [[ $1 == failed* ]]; then printf failed; else g "$@"; fi; }

# conns_cell WL SYS: the connections of SYS in WL (run.sh's conn_watch):
# "open, active (seen)", medians over the runs.
conns_cell() {
	printf '%s, %s (%s)' "$(g "$(med "$1" "$2" conns)" 1 %.0f)" "$(g "$(med "$1" "$2" conns_active)" 1 %.0f)" "$(g "$(med "$1" "$2" conns_seen)" 1 %.0f)"
}

# qx Q: a ratio Q as "1.23x", or "n/a" when it is not a number.
qx() { if isnum "$1"; then f "$1" 1 %.2f && printf x; else printf 'n/a'; fi; }

# verdict_q CMP Q BOUND WL KEY: the verdict of CMP on a same-run ratio Q
# of pacefs's KEY in WL (med_ratio_of, med_ratio_best) and BOUND. pacefs's
# own median comes first, as yesno's does: a run of pacefs that failed is
# NOT met, a workload without rows not run; then a missing ratio is the
# reference's failure.
verdict_q() {
	local p
	p=$(med "$4" pacefs "$5")
	if ! isnum "$p"; then
		yesno "$1" "$p" "$3"
	elif isnum "$2"; then
		yesno "$1" "$2" "$3"
	else
		printf 'n/a (the reference failed)'
	fi
}

label() {
	case $1 in
	pacefs) echo "pacefs" ;;
	rclone) echo "rclone mount, --vfs-cache-mode full" ;;
	httpdirfs) echo "httpdirfs --cache" ;;
	curl1) echo "curl alone, one connection (limit)" ;;
	curl8) echo "curl, 8 parallel ranges (limit)" ;;
	curlfile) echo "curl alone, one connection, into a file (limit)" ;;
	dd) echo "dd of pacefs's data.mdb, 1 MiB blocks (limit)" ;;
	local) echo "local copy, in the page cache (floor)" ;;
	*) echo "$1" ;;
	esac
}

SYS=(pacefs rclone httpdirfs)
CSYS=(local pacefs rclone httpdirfs)

# chunk_label 64k: "64 KiB"; 1024k: "1 MiB".
chunk_label() {
	local k=${1%k}
	if [ $((k % 1024)) -eq 0 ]; then echo "$((k / 1024)) MiB"; else echo "$k KiB"; fi
}

# --- numbers used by several sections ---------------------------------------

for s in pacefs rclone httpdirfs curl1 curl8 curlfile; do
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
	declare "RM_$s=$(med remount "$s" mbps)"
	declare "SK_$s=$(med seek "$s" p50)"
	declare "PP_$s=$(med player "$s" pulled)"
	declare "PC_$s=$(med player "$s" consumed)"
	declare "PW_$s=$(med player "$s" worst)"
	declare "MH_$s=$(med memory "$s" hwm_kib)"
	declare "P2P_$s=$(med player2 "$s" pulled)"
	declare "P2C_$s=$(med player2 "$s" consumed)"
	declare "P2W_$s=$(med player2 "$s" worst)"
	declare "S1_$s=$(med seek1m "$s" p50)"
	declare "PO_$s=$(med positions "$s" worst)"
done
# The real clients: the timed figure of each (the -ss during playback for
# ffplay, the time per lookup for sqlite).
for s in "${CSYS[@]}"; do
	declare "CP_$s=$(med ffprobe "$s" secs)"
	declare "CS_$s=$(med ffss "$s" secs)"
	declare "CJ_$s=$(med ffplay "$s" ss_secs)"
	declare "CZ_$s=$(med zip "$s" secs)"
	declare "CQ_$s=$(med sqlite "$s" per)"
done
RM_dd=$(med remount dd mbps)
# Many readers on loopback, one mount: MLN readers (MULTI_LO_N; runs
# without it in their settings had no such workload).
MLN=${MULTI_LO_N:-}
# The dataset loader and fio workloads: the origins, sets and
# worker counts of the run (runs without them in their settings had none).
LDO=${LOADER_ORIGINS:-}
LDS=${LOADER_SETS:-}
LDN=${LOADER_N:-}
LDSN=${LOADER_SMALL_N:-$LDN}
FJ=${FIO_JOBS:-}
FJO=${FIO_ORIGINS:-}
LSYS=(pacefs rclone httpdirfs curl curlpeak)
# the loader's figure: MB/s for shards, files/s for small files
lkey() { if [ "$1" = small ]; then echo files_per_s; else echo mbps; fi; }
lunit() { if [ "$1" = small ]; then echo files/s; else echo MB/s; fi; }
oname() { if [ "$1" = wan ]; then echo "WAN origin"; else echo "loopback nginx"; fi; }
# lns SET: the loader's worker counts for SET
lns() { if [ "$1" = small ]; then echo "$LDSN"; else echo "$LDN"; fi; }
# ld8 SET: the worker count the headline and targets use: 8 when run
ld8() {
	local n w=
	for n in $(lns "$1"); do
		[ -n "$w" ] || w=$n
		[ "$n" != 8 ] || w=8
	done
	echo "$w"
}
LD8=$(ld8 shards)
LD8S=$(ld8 small)
# fio_threads JOB: the job's numjobs (run.sh's fio_job)
fio_threads() { case $1 in *_4t) echo 4 ;; *) echo 1 ;; esac; }
v() { local n=$1; printf '%s' "${!n}"; }
# sub A B: A - B; A itself when A is not a number (a failure text), "n/a"
# when B is not.
sub() {
	if ! isnum "$1"; then
		printf '%s' "$1"
	elif ! isnum "$2"; then
		printf 'n/a'
	else
		awk -v a="$1" -v b="$2" 'BEGIN { printf "%.9g", a - b }'
	fi
}

# --- plots ------------------------------------------------------------------

PLOTS=()
PLOT_ERR=$(mktemp)
# plot NAME WIDTH,HEIGHT: runs gnuplot's commands from stdin into
# $OUT/NAME.png and adds it to PLOTS, or says why it failed.
plot() {
	if {
		printf 'set terminal pngcairo size %s font "sans,10" noenhanced\n' "$2"
		printf 'set output "%s"\n' "$OUT/$1.png"
		cat
	} | gnuplot 2>>"$PLOT_ERR"; then
		PLOTS+=("$1.png")
	else
		# gnuplot leaves the empty file it opened
		rm -f "$OUT/$1.png"
		echo "report: the $1 plot failed: $(grep . "$PLOT_ERR" | tail -n 1)" >&2
	fi
}
# Clustered bars on a log scale, as the latency, pulled and clients plots
# draw them.
LOG_BARS='set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set logscale y
set grid ytics'
rm -f "$OUT/cold_seq.png" "$OUT/latency.png" "$OUT/pulled.png" "$OUT/clients.png" "$OUT/loader.png" "$OUT/fio.png"
if command -v gnuplot >/dev/null 2>&1; then
	dat=$(mktemp)
	for s in pacefs rclone httpdirfs curl1 curl8; do
		a=$(v "SL_$s") b=$(v "SW_$s")
		isnum "$a" || a=0
		isnum "$b" || b=0
		printf '"%s" %s %s\n' "$s" "$a" "$b" >>"$dat"
	done
	plot cold_seq 1000,420 <<-EOF
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
	plot latency 1000,420 <<-EOF
		set multiplot layout 1,2 title "Latency, ms, log scale (median of $RUNS runs; missing bar = failed)"
		$LOG_BARS
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
		for k in "random_lo pulled" "random_wan pulled" "player pulled" "player2 pulled" "seek pulled"; do
			x=$(med "${k% *}" "$s" "${k#* }")
			if isnum "$x"; then row="$row $(awk -v x="$x" -v m=$MiB 'BEGIN { printf "%.3f", x / m }')"; else row="$row NaN"; fi
		done
		echo "$row" >>"$dat"
	done
	plot pulled 1000,420 <<-EOF
		set title "MiB pulled from the origin, mount to unmount (median of $RUNS runs; missing bar = failed)"
		$LOG_BARS
		set key top left
		plot "$dat" using 2:xtic(1) title "random 4 KiB, loopback ($RANDOM_N_LO reads = $(awk -v n="$RANDOM_N_LO" 'BEGIN { printf "%.2f", n * 4 / 1024 }') MiB)", \
			'' using 3 title "random 4 KiB, WAN ($RANDOM_N_WAN reads = $(awk -v n="$RANDOM_N_WAN" 'BEGIN { printf "%.2f", n * 4 / 1024 }') MiB)", \
			'' using 4 title "player at $PLAYER_RATE B/s ($((PLAYER_BYTES / MiB)) MiB consumed)", \
			'' using 5 title "player at ${PLAYER2_RATE:-0} B/s ($((${PLAYER2_BYTES:-0} / MiB)) MiB consumed)", \
			'' using 6 title "seeks ($(((SEEK_N + 1) * SEEK_PLAY / MiB)) MiB consumed)"
	EOF

	# Real clients: seconds per system (left) and MiB pulled next to the
	# MiB the client itself read (right), one cluster per client.
	: >"$dat"
	for c in "ffprobe secs read ffprobe ffprobe" "ffss secs read ffmpeg_-ss ffmpeg_-ss" \
		"ffplay ss_secs consumed -ss_in_playback playback_and_its_-ss" "zip secs bytes zip_member zip_member" \
		"sqlite secs lookup_pulled sqlite_${SQL_N:-0}_lookups sqlite_${SQL_N:-0}_lookups"; do
		read -r wl key rk name pname <<<"$c"
		row="\"${name//_/ }\""
		for s in "${CSYS[@]}"; do
			x=$(med "$wl" "$s" "$key")
			if isnum "$x"; then row="$row $x"; else row="$row NaN"; fi
		done
		row="$row \"${pname//_/ }\""
		for s in "${CSYS[@]}"; do
			if [ "$s" = local ]; then
				# what the client read: what a perfect cache would pull
				case $wl in
				zip) x=${ZIP_MEMBER_BYTES:-0} ;;
				sqlite) x=$(awk -v n="${SQL_N:-0}" 'BEGIN { print n * 2 * 4096 }') ;;
				*) x=$(med "$wl" local "$rk") ;;
				esac
			else
				x=$(med "$wl" "$s" pulled)
			fi
			if isnum "$x"; then row="$row $(awk -v x="$x" -v m=$MiB 'BEGIN { printf "%.4f", x / m }')"; else row="$row NaN"; fi
		done
		echo "$row" >>"$dat"
	done
	plot clients 1200,500 <<-EOF
		set multiplot layout 1,2 title "Real clients on the WAN origin (median of $RUNS runs; missing bar = failed)"
		$LOG_BARS
		set key below horizontal
		set xtics rotate by 20 right
		set title "seconds, log scale"
		plot "$dat" using 2:xtic(1) title "local copy (floor)", '' using 3 title "pacefs", '' using 4 title "rclone", '' using 5 title "httpdirfs"
		set title "MiB pulled from the origin, mount to unmount, log scale"
		plot "$dat" using 7:xtic(6) title "read by the client (sqlite: 2 pages a lookup)", '' using 8 title "pacefs", '' using 9 title "rclone", '' using 10 title "httpdirfs"
		unset multiplot
	EOF
	# The loader: the figure against the workers, a panel per origin and
	# set, a line per system.
	if grep -q '^loader_' "$RAW"; then
		cmds=""
		for o in $LDO; do
			for set in $LDS; do
				: >"$dat.$o.$set"
				for n in $(lns "$set"); do
					row=$n
					for s in "${LSYS[@]}"; do
						x=$(med "loader_${o}_${set}_$n" "$s" "$(lkey "$set")")
						if isnum "$x"; then row="$row $x"; else row="$row NaN"; fi
					done
					echo "$row" >>"$dat.$o.$set"
				done
				ns=$(lns "$set")
				cmds="$cmds
set xtics (${ns// /, })
set title \"$(oname "$o"), $set, $(lunit "$set")\"
plot \"$dat.$o.$set\" using 1:2 title \"pacefs\", '' using 1:3 title \"rclone\", '' using 1:4 title \"httpdirfs\", '' using 1:5 title \"curl, N connections\", '' using 1:6 title \"curl, pacefs's active connections\""
			done
		done
		read -ra los <<<"$LDO"
		read -ra lss <<<"$LDS"
		plot loader 1000,$((330 * ${#los[@]})) <<-EOF
			set multiplot layout ${#los[@]},${#lss[@]} title "Dataset loader: N workers over shuffled files (median of $RUNS runs; missing point = failed)"
			set style data linespoints
			set grid
			set key below horizontal font ",8"
			set yrange [0:*]
			set xlabel "workers"
			$cmds
			unset multiplot
		EOF
		rm -f "$dat".*.*
	fi

	# fio: MiB/s per job, a cluster per job, a panel per origin.
	if grep -q '^fio_' "$RAW"; then
		cmds=""
		for o in $FJO; do
			: >"$dat.$o"
			for job in $FJ; do
				row="\"$job\""
				for s in "${SYS[@]}"; do
					x=$(med "fio_${o}_$job" "$s" mibps)
					# 0, not NaN: gnuplot's histograms fail on a column without a number
					if isnum "$x"; then row="$row $x"; else row="$row 0"; fi
				done
				echo "$row" >>"$dat.$o"
			done
			cmds="$cmds
set title \"$(oname "$o")\"
plot \"$dat.$o\" using 2:xtic(1) title \"pacefs\", '' using 3 title \"rclone\", '' using 4 title \"httpdirfs\""
		done
		read -ra fos <<<"$FJO"
		plot fio 1100,420 <<-EOF
			set multiplot layout 1,${#fos[@]} title "mountpoint-s3's fio read jobs, MiB/s, ${FIO_SECS:-10} s on $((${FIO_SIZE:-0} / MiB)) MiB files (median of $RUNS runs; 0 = failed)"
			set style data histograms
			set style histogram clustered gap 1
			set style fill solid 0.8 border -1
			set grid ytics
			set yrange [0:*]
			set key top right
			set xtics rotate by 20 right
			$cmds
			unset multiplot
		EOF
		rm -f "$dat".*
	fi
	rm -f "$dat"
fi

# --- targets, computed first so that the headline can count them -----------

WINDOW=$((64 * MiB)) # pacing's window_max, the largest read-ahead window
RTT=$(awk -v l="$WAN_LATENCY" 'BEGIN { print l / 1000 }')
# lanes_bound BYTES: seconds a read of BYTES at a cold position on the WAN
# origin may take: 2 x (RTT + BYTES over the lanes' combined rate).
lanes_bound() {
	awk -v rtt="$RTT" -v b="$1" -v l="${LANES:-8}" -v r="$WAN_RATE" 'BEGIN { print 2 * (rtt + b / (l * r)) }'
}
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
	echo "| cold sequential, loopback: >= 0.6x curl into a file | vs curl one connection into a file $(f "$SL_curlfile" 1 %.0f) MB/s: $(ratio "$SL_pacefs" "$SL_curlfile" 3) (curl into /dev/null: $(f "$SL_curl1" 1 %.0f) MB/s) | $(yesno ge "$SL_pacefs" "$(mul "$SL_curlfile" 0.6)") |"
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
	lim_wait=$(awk -v a="$RTT" -v b="$OWN" 'BEGIN { print a + b }')
	for pr in "player PP PC PW ${PLAYER_RATE:-0}" "player2 P2P P2C P2W ${PLAYER2_RATE:-0}"; do
		read -r _ kp kc kw rate <<<"$pr"
		pp=$(v "${kp}_pacefs") pc=$(v "${kc}_pacefs") pw=$(v "${kw}_pacefs")
		lim=$(awk -v l="${PLAYER_LEAD:-3}" -v r="$rate" -v m=$MiB 'BEGIN { x = l * r; print (x > 4 * m ? x : 4 * m) }')
		echo "| player at $(awk -v r="$rate" 'BEGIN { print r / 1e6 }') MB/s: pulled - consumed <= max(4 MiB, lead x rate) = $(f "$lim" $MiB %.1f) MiB (lead ${PLAYER_LEAD:-3} s), mount to unmount | pulled $(f "$pp" $MiB %.1f) MiB for $(f "$pc" $MiB %.1f) MiB consumed: $(f "$(sub "$pp" "$pc")" $MiB %.1f) MiB ahead | $(yesno le "$(sub "$pp" "$pc")" "$lim") |"
		echo "| player at $(awk -v r="$rate" 'BEGIN { print r / 1e6 }') MB/s: worst wait after the first read <= one round trip + the read's own transfer ($(f "$lim_wait" 0.001 %.1f) ms: $WAN_LATENCY ms + $((PLAYER_BS / 1024)) KiB at $WAN_RATE B/s) | $(f "$pw" 0.001 %.1f) ms | $(yesno le "$pw" "$lim_wait") |"
	done
	bs=$(minnum "$SK_rclone" "$SK_httpdirfs")
	echo "| seek: first read at the new position <= 1/3 of the best competitor's | pacefs $(f "$SK_pacefs" 0.001 %.1f) ms vs $(f "$bs" 0.001 %.1f) ms: $(ratio "$SK_pacefs" "$bs") | $(yesno le "$SK_pacefs" "$(mul "$bs" "$(awk 'BEGIN { print 1/3 }')")") |"
	lim=$(lanes_bound "${SEEK_JUMP:-0}")
	echo "| $((${SEEK_JUMP:-0} / 1024)) KiB read at a new position during playback (p50) <= 2 x (RTT + $((${SEEK_JUMP:-0} / 1024)) KiB / (${LANES:-8} lanes x $WAN_RATE B/s)) = $(f "$lim" 0.001 %.1f) ms | pacefs $(f "$S1_pacefs" 0.001 %.1f) ms (max $(f "$(med seek1m pacefs max)" 0.001 %.1f) ms; rclone $(f "$S1_rclone" 0.001 %.1f), httpdirfs $(f "$S1_httpdirfs" 0.001 %.1f)) | $(yesno le "$S1_pacefs" "$lim") |"
	bs=$(minnum "$PO_rclone" "$PO_httpdirfs")
	lim=$(lanes_bound $MiB)
	echo "| a new reader's 1 MiB pread at three cold positions (the slowest): <= 1/3 of the best competitor's | pacefs $(f "$PO_pacefs" 0.001 %.1f) ms vs $(f "$bs" 0.001 %.1f) ms: $(ratio "$PO_pacefs" "$bs") | $(yesno le "$PO_pacefs" "$(mul "$bs" "$(awk 'BEGIN { print 1/3 }')")") |"
	echo "| a new reader's 1 MiB pread at three cold positions (the slowest): <= 2 x (RTT + 1024 KiB / (${LANES:-8} lanes x $WAN_RATE B/s)) = $(f "$lim" 0.001 %.1f) ms | pacefs $(f "$PO_pacefs" 0.001 %.1f) ms | $(yesno le "$PO_pacefs" "$lim") |"
	# the floor: the fastest ffmpeg -ss on the local copy, during playback
	# or cold (the same command on cached data; noise only slows it)
	fl=$(minnum "$(lowest ffplay local ss_secs)" "$(lowest ffss local secs)")
	dp=$(sub "$CJ_pacefs" "$fl") dr=$(sub "$CJ_rclone" "$fl")
	# without a floor, the verdict is the reference's failure, not pacefs's
	isnum "$fl" || dp=$CJ_pacefs
	echo "| ffmpeg -ss during playback (median of the jumps): pacefs - local <= (rclone - local) / 3, local being the fastest ffmpeg -ss on the local copy in any run, cold or during playback | pacefs $(f "$CJ_pacefs" 1 %.3f) s, rclone $(f "$CJ_rclone" 1 %.3f) s, local $(f "$fl" 1 %.3f) s: $(f "$dp" 1 %.3f) s vs $(f "$dr" 1 %.3f) s above the floor (cold, in a fresh mount: pacefs $(f "$CS_pacefs" 1 %.3f) s, rclone $(f "$CS_rclone" 1 %.3f) s, local $(f "$CS_local" 1 %.3f) s) | $(yesno le "$dp" "$(mul "$dr" "$(awk 'BEGIN { print 1/3 }')")") |"
	zp=$(med zip pacefs pulled)
	echo "| zip: one $((${ZIP_MEMBER_BYTES:-0} / 1024)) KiB member, pulled <= 1.5 MiB, mount to unmount | pacefs $(f "$zp" $MiB %.2f) MiB (rclone $(f "$(med zip rclone pulled)" $MiB %.2f), httpdirfs $(f "$(med zip httpdirfs pulled)" $MiB %.2f)) | $(yesno le "$zp" $((3 * MiB / 2))) |"
	qr=$(med sqlite pacefs lookup_reqs)
	qn=$(awk -v r="$qr" -v n="${SQL_N:-1}" 'BEGIN { printf "%.9g", r / n }' 2>/dev/null)
	isnum "$qr" || qn=$qr
	echo "| sqlite: <= 3 round trips per lookup on average (requests in the origin log during the lookups / lookups) | pacefs $(f "$qn" 1 %.2f) requests per lookup; $(f "$CQ_pacefs" 0.001 %.1f) ms per lookup = $(f "$(awk -v t="$CQ_pacefs" -v r="$RTT" 'BEGIN { print t / r }' 2>/dev/null)" 1 %.2f) RTT | $(yesno le "$qn" 3) |"
	t1=$(med transfer1 pacefs secs)
	m1="pacefs $(f "$t1" 1 %.2f) s, $(g "$(med transfer1 pacefs n503)" 1 %.0f) 503s (curl, one connection: $(f "$(med transfer1 curl1 secs)" 1 %.2f) s)"
	[[ $t1 != skipped:* ]] || m1=-
	echo "| one-transfer origin answering 503 + Retry-After ${T1_RETRY_AFTER:-1} s beyond it: $((MULTI_SIZE / MiB)) MiB whole and correct in <= 2 s on loopback | $m1 | $(yesno le "$t1" 2) |"
	st=$(med stall pacefs secs)
	echo "| read_timeout=${READ_TIMEOUT:-5} against a one-byte-per-response origin: EIO in the application by $((${READ_TIMEOUT:-5} + 1)) s | pacefs $(f "$st" 1 %.2f) s to EIO | $(yesno le "$st" $((${READ_TIMEOUT:-5} + 1))) |"
	echo "| second read in the same mount (warm re-read): >= 2x httpdirfs | pacefs $(f "$WM_pacefs" 1 %.0f) MB/s vs $(f "$WM_httpdirfs" 1 %.0f) MB/s: $(ratio "$WM_pacefs" "$WM_httpdirfs") | $(yesno ge "$WM_pacefs" "$(mul "$WM_httpdirfs" 2)") |"
	echo "| warm re-read: >= 1.5x rclone | vs $(f "$WM_rclone" 1 %.0f) MB/s: $(ratio "$WM_pacefs" "$WM_rclone") | $(yesno ge "$WM_pacefs" "$(mul "$WM_rclone" 1.5)") |"
	rp=$(med remount pacefs read_pulled) rq=$(med remount pacefs pulled)
	lim=$(awk -v w="$WINDOW" 'BEGIN { print (64 * 1048576 + w) / 1024 }')
	echo "| memory: daemon's peak RSS streaming $((${MEM_SIZE:-0} / MiB)) MiB <= 64 MiB + one window ($((WINDOW / MiB)) MiB) | pacefs $(f "$MH_pacefs" 1024 %.0f) MiB (rclone $(f "$MH_rclone" 1024 %.0f), httpdirfs $(f "$MH_httpdirfs" 1024 %.0f)) | $(yesno le "$MH_pacefs" "$lim") |"
	echo "| read back from the cache after a remount (page cache dropped): >= 2x httpdirfs's | pacefs $(f "$RM_pacefs" 1 %.0f) MB/s vs $(f "$RM_httpdirfs" 1 %.0f) MB/s: $(ratio "$RM_pacefs" "$RM_httpdirfs" 3) | $(yesno ge "$RM_pacefs" "$(mul "$RM_httpdirfs" 2)") |"
	echo "| read back after a remount: >= 0.8x dd of data.mdb from a dropped page cache (dd's MB/s over the bytes it read: the whole file, $(g "$(med remount dd file_bytes)" $MiB %.0f) MiB for the $((SEQ_LO_SIZE / MiB)) MiB blob) | vs dd $(f "$RM_dd" 1 %.0f) MB/s: $(ratio "$RM_pacefs" "$RM_dd" 3) | $(yesno ge "$RM_pacefs" "$(mul "$RM_dd" 0.8)") |"
	echo "| remount: zero bytes pulled by the full read | $(f "$rp" 1 %.0f) bytes during the read; $(f "$rq" 1 %.0f) bytes mount to unmount (requests: $(vals remount pacefs reqs 1 %d)) | $(yesno le "$rp" 0) |"
	for n in $MLN; do
		mp=$(med "multi_lo_$n" pacefs mbps) mc=$(med "multi_lo_$n" curlfile mbps)
		echo "| $n readers on $n files of one mount, loopback: aggregate >= 0.6x $n curl processes into files | pacefs $(f "$mp" 1 %.0f) MB/s vs curl $(f "$mc" 1 %.0f) MB/s: $(ratio "$mp" "$mc" 3) (rclone $(f "$(med "multi_lo_$n" rclone mbps)" 1 %.0f), httpdirfs $(f "$(med "multi_lo_$n" httpdirfs mbps)" 1 %.0f)) | $(yesno ge "$mp" "$(mul "$mc" 0.6)") |"
	done
	# The dataset loader and fio, when they were run.
	if grep -q '^loader_' "$RAW"; then
		wl=loader_wan_shards_$LD8
		mp=$(med "$wl" pacefs mbps)
		q=$(med_ratio_sys "$wl" pacefs curlpeak mbps)
		echo "| loader, $LD8 workers, ${SHARD_N:-0} shards of $((${SHARD_SIZE:-0} / MiB)) MiB, WAN: >= 0.9x curl with as many connections as pacefs opened (as it kept busy at once: ss, see the loader's section) | pacefs $(f "$mp" 1 %.1f) MB/s with $(g "$(med "$wl" pacefs conns_active)" 1 %.0f) active connections ($(g "$(med "$wl" pacefs conns)" 1 %.0f) open) vs curl $(gf "$(med "$wl" curlpeak mbps)" 1 %.1f) MB/s: $(qx "$q") (curl with $LD8: $(gf "$(med "$wl" curl mbps)" 1 %.1f) MB/s) | $(verdict_q ge "$q" 0.9 "$wl" mbps) |"
		q=$(med_ratio_sys "$wl" pacefs rclone mbps)
		echo "| loader, $LD8 workers, shards, WAN: >= 1.5x rclone | vs rclone $(gf "$(med "$wl" rclone mbps)" 1 %.1f) MB/s: $(qx "$q") | $(verdict_q ge "$q" 1.5 "$wl" mbps) |"
		q=$(med_q "$wl" pacefs reqs files)
		# a failed run of pacefs, as yesno judges it
		isnum "$mp" || q=$mp
		echo "| loader, $LD8 workers, shards, WAN: <= 4 requests per shard on average (the origin's log, mount to unmount, listing and probes included) | $(f "$q" 1 %.2f) requests per shard (rclone $(g "$(med_q "$wl" rclone reqs files)" 1 %.2f), httpdirfs $(g "$(med_q "$wl" httpdirfs reqs files)" 1 %.2f), curl 1) | $(yesno le "$q" 4) |"
		q=$(med_q "$wl" pacefs pulled bytes)
		isnum "$mp" || q=$mp
		echo "| loader, $LD8 workers, shards, WAN: pulled <= 1.02x read | $(f "$q" 1 %.3f)x | $(yesno le "$q" 1.02) |"
		wl=loader_wan_small_$LD8S
		q=$(med_ratio_sys "$wl" pacefs curl files_per_s)
		echo "| loader, $LD8S workers, ${SMALL_N:-0} files of $((${SMALL_SIZE:-0} / 1024)) KiB, WAN: files/s >= 0.9x curl with $LD8S connections | pacefs $(f "$(med "$wl" pacefs files_per_s)" 1 %.1f) files/s vs curl $(gf "$(med "$wl" curl files_per_s)" 1 %.1f): $(qx "$q") | $(verdict_q ge "$q" 0.9 "$wl" files_per_s) |"
		wl=loader_lo_shards_$LD8
		q=$(med_ratio_sys "$wl" pacefs rclone mbps)
		echo "| loader, $LD8 workers, shards, loopback: >= 1.5x rclone | pacefs $(f "$(med "$wl" pacefs mbps)" 1 %.0f) MB/s vs rclone $(gf "$(med "$wl" rclone mbps)" 1 %.0f) MB/s: $(qx "$q") | $(verdict_q ge "$q" 1.5 "$wl" mbps) |"
	fi
	if grep -q '^fio_' "$RAW"; then
		for o in $FJO; do
			for job in $FJ; do
				wl=fio_${o}_$job
				q=$(med_ratio_best "$wl" mibps)
				echo "| fio $job (mountpoint-s3), $(oname "$o"): pacefs >= the best peer (median of the runs' ratios) | pacefs $(gf "$(med "$wl" pacefs mibps)" 1 %.1f) MiB/s (rclone $(gf "$(med "$wl" rclone mibps)" 1 %.1f), httpdirfs $(gf "$(med "$wl" httpdirfs mibps)" 1 %.1f)): $(qx "$q") | $(verdict_q ge "$q" 1 "$wl" mibps) |"
			done
		done
		wl=fio_wan_seq_read_4t
		lim=$(awk -v l="${HOST_LANES:-16}" -v r="$WAN_RATE" -v m=$MiB 'BEGIN { print l * r / m }')
		mp=$(med "$wl" pacefs mibps)
		echo "| fio seq_read_4t, WAN: >= 0.9x what the lanes can carry (${HOST_LANES:-16} lanes, pacefs's -o host_lanes= default, x $WAN_RATE B/s = $(f "$lim" 1 %.1f) MiB/s) | pacefs $(f "$mp" 1 %.1f) MiB/s with $(g "$(med "$wl" pacefs conns_active)" 1 %.0f) active connections ($(g "$(med "$wl" pacefs conns)" 1 %.0f) open): $(ratio "$mp" "$lim") | $(yesno ge "$mp" "$(mul "$lim" 0.9)") |"
	fi
	if [ "$(med tier_first pacefs mbps)" != - ]; then
		tc=${TIER_CHUNK:-1048576}
		lim=$(awk -v s="$SEQ_LO_SIZE" 'BEGIN { print 1.05 * s }')
		t12=$(awk -v a="$(med tier_first pacefs pulled)" -v b="$(med tier_second pacefs pulled)" 'BEGIN { print a + b }')
		isnum "$(med tier_second pacefs pulled)" || t12=$(med tier_second pacefs pulled)
		echo "| cache tier: two mounts one after the other pull each byte from the origin at most once (<= 1.05 x $((SEQ_LO_SIZE / MiB)) MiB) | $(f "$(med tier_first pacefs pulled)" $MiB %.1f) + $(f "$(med tier_second pacefs pulled)" $MiB %.1f) MiB | $(yesno le "$t12" "$lim") |"
		echo "| cache tier: two mounts together through an empty tier, the same | $(f "$(med tier_together pacefs pulled)" $MiB %.1f) MiB | $(yesno le "$(med tier_together pacefs pulled)" "$lim") |"
		tr=$(med_ratio tier_second tier_direct pacefs mbps)
		echo "| cache tier: the second mount's cold read >= 0.8x its read straight from loopback nginx (median of the runs' ratios) | $(f "$(med tier_second pacefs mbps)" 1 %.0f) MB/s vs $(f "$(med tier_direct pacefs mbps)" 1 %.0f) MB/s (medians); ratios $(paste -d' ' <(vals tier_second pacefs mbps 1 %.9g | tr -d ' ' | tr ',' '\n') <(vals tier_direct pacefs mbps 1 %.9g | tr -d ' ' | tr ',' '\n') | awk '{ if ($2 > 0) printf "%s%.2fx", (NR > 1 ? ", " : ""), $1 / $2 }'): median $(f "$tr" 1 %.2f)x | $(yesno ge "$tr" 0.8) |"
		for c in 64k $((tc / 1024))k; do
			per=$(awk -v p="$(med "tier_rand_$c" pacefs pulled)" -v n="$(med "tier_rand_$c" pacefs reads)" 'BEGIN { if (n > 0) printf "%.9g", p / n; else print "n/a" }')
			isnum "$(med "tier_rand_$c" pacefs pulled)" || per=$(med "tier_rand_$c" pacefs pulled)
			echo "| random 4 KiB, WAN, chunk=$(chunk_label "$c"): bytes pulled per read <= one chunk | $(f "$per" 1024 %.1f) KiB per read | $(yesno le "$per" "$(( ${c%k} * 1024 ))") |"
		done
		# The default chunk against the random workload's pacefs row of
		# the same run (the same mount as before chunks existed): a
		# chunk-aligned scheduler must not cost random reads.
		verdict=$(yesno le "$(med tier_rand_64k pacefs p95)" "$(mul "$(med random_wan pacefs p95)" 1.2)")
		[ "$(med random_wan pacefs p95)" != - ] || verdict="not judged (the random workload was not run)"
		echo "| random 4 KiB, WAN, chunk mode (the default chunk, 64 KiB): p95 <= 1.2x the random workload's | $(f "$(med tier_rand_64k pacefs p95)" 0.001 %.1f) ms vs $(f "$(med random_wan pacefs p95)" 0.001 %.1f) ms: $(ratio "$(med tier_rand_64k pacefs p95)" "$(med random_wan pacefs p95)") | $verdict |"
		echo "| cache tier: one proxy of a two-proxy group killed a quarter into the read: right bytes, no wait >= stall_timeout (${TIER_STALL:-10} s) | longest read $(f "$(med tier_kill pacefs worst)" 0.001 %.0f) ms, $(f "$(med tier_kill pacefs pulled)" $MiB %.1f) MiB from the origin | $(yesno le "$(med tier_kill pacefs worst)" "${TIER_STALL:-10}") |"
	fi
	if [ "$(med s3sig_seq nginx_unsigned mbps)" != - ]; then
		# Ratios of the same run's signed and unsigned figures, their
		# median over the runs (the random ones read in turn).
		q=$(med_ratio_sys s3sig_seq nginx_signed nginx_unsigned mbps)
		isnum "$q" || q=$(med s3sig_seq nginx_signed mbps)
		echo "| SigV4, loopback nginx: signed cold sequential >= 0.95x unsigned (median of the runs' ratios) | signed $(f "$(med s3sig_seq nginx_signed mbps)" 1 %.0f) MB/s, unsigned $(f "$(med s3sig_seq nginx_unsigned mbps)" 1 %.0f) MB/s: $(f "$q" 1 %.2f)x | $(yesno ge "$q" 0.95) |"
		q=$(med_ratio_sys s3sig_random nginx_signed nginx_unsigned p50)
		isnum "$q" || q=$(med s3sig_random nginx_signed p50)
		echo "| SigV4, loopback nginx: signed random 4 KiB p50 <= 1.05x unsigned (median of the runs' ratios) | signed $(f "$(med s3sig_random nginx_signed p50)" 0.001 %.3f) ms, unsigned $(f "$(med s3sig_random nginx_unsigned p50)" 0.001 %.3f) ms: $(f "$q" 1 %.2f)x | $(yesno le "$q" 1.05) |"
	fi
	echo

} >"$TGT"
n_met=$(grep -c '| \*\*met\*\* |$' "$TGT" || true)
n_not=$(grep -c '| \*\*NOT met\*\*' "$TGT" || true)
n_na=$(grep -c '| n/a (the reference failed) |$' "$TGT" || true)
n_skip=$(grep -c '| not run (' "$TGT" || true)

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
		- **Systems:** \`pacefs -f -o cache_dir=DIR URL MNT\` (one blob per mount, except the loopback many-readers workload, which mounts nginx's directory index URL/ for all its files; defaults: 32 lanes for the mount, 16 to one origin); \`rclone mount :http: MNT --http-url URL/ --vfs-cache-mode full --cache-dir DIR\` (defaults otherwise); \`httpdirfs -f --cache --cache-location DIR URL/ MNT\` (defaults otherwise). Limit rows: \`curl\` to /dev/null, one connection, and one \`curl --parallel\` with 8 range requests; on loopback also \`curl\` into a file (one process, and N at once for N readers) and, for the read back after a remount, \`dd\` of pacefs's data.mdb.
		- **Cold:** every run starts with a new empty cache directory and a new mount; then \`sync; echo 3 > /proc/sys/vm/drop_caches\`$( [ "${BENCH_DROP_OK:-1}" = 1 ] || printf ' (**failed on this machine: page cache NOT dropped**)'), then the origin's source file is read once so that the origin serves from memory.
		- **Verification:** the files are generated by \`benchread gen\` (word i of a file is x ^ (x >> 29) with x = (FNV-1a(name) + i) times an odd constant: no two words of a file are equal); the reader \`benchread\` checks every byte it reads against that formula (about 5 GB/s on this machine, so it does not cap warm reads), so a wrong byte at any offset fails the run ("failed: content mismatch ... at offset N"). curl rows check status codes and byte counts.
		- **Bytes pulled** are the body bytes the origin logged (nginx \`\$body_bytes_sent\`, pacefs-origin's per-request log), from before the mount to after the unmount unless said otherwise.
		- Files: $((SEQ_LO_SIZE / MiB)) MiB for loopback sequential/warm/remount, $((SEQ_WAN_SIZE / MiB)) MiB for WAN sequential, first byte and mirrors, $((LONG_SIZE / MiB)) MiB for random reads and seeks (the player reads the $((SEQ_LO_SIZE / MiB)) MiB file), $MULTI_FILES x $((MULTI_SIZE / MiB)) MiB for many readers on WAN$( [ -z "$MLN" ] || printf ', %s x %s MiB for many readers on loopback (%s readers)' "${MULTI_LO_FILES:-0}" "$((MULTI_SIZE / MiB))" "${MLN// / and }")$(grep -q '^loader_' "$RAW" && printf ', %s x %s MiB shards and %s x %s KiB files for the loader' "${SHARD_N:-0}" "$((${SHARD_SIZE:-0} / MiB))" "${SMALL_N:-0}" "$((${SMALL_SIZE:-0} / 1024))")$(grep -q '^fio_' "$RAW" && printf ', one %s MiB file written by fio for its jobs, linked under each name they read' "$((${FIO_SIZE:-0} / MiB))").

	EOF

	echo "## Headline"
	echo
	echo "- Targets: **$n_met met, $n_not NOT met**$( [ "$n_na" -eq 0 ] || printf ', %s not judged (a reference failed)' "$n_na")$( [ "$n_skip" -eq 0 ] || printf ', %s not run' "$n_skip") (table below)."
	echo "- Cold sequential: loopback pacefs $(f "$SL_pacefs" 1 %.0f) MB/s = $(ratio "$SL_pacefs" "$SL_rclone") rclone, $(ratio "$SL_pacefs" "$SL_httpdirfs") httpdirfs, $(ratio "$SL_pacefs" "$SL_curl1") curl alone, $(ratio "$SL_pacefs" "$SL_curlfile") curl into a file; WAN $(f "$SW_pacefs" 1 %.1f) MB/s = $(ratio "$SW_pacefs" "$SW_rclone") rclone, $(ratio "$SW_pacefs" "$SW_httpdirfs") httpdirfs, $(ratio "$SW_pacefs" "$SW_curl8") curl with 8 ranges."
	echo "- First byte of a cold file: pacefs $(f "$TL_pacefs" 0.001 %.2f) ms on loopback ($(ratio "$TL_pacefs" "$TL_curl1") one curl range request), $(f "$TW_pacefs" 0.001 %.1f) ms on WAN ($(ratio "$TW_pacefs" "$TW_curl1"))."
	echo "- Random 4 KiB on WAN: pacefs p95 $(f "$R95_wan_pacefs" 0.001 %.1f) ms vs rclone $(f "$R95_wan_rclone" 0.001 %.1f) ms and httpdirfs $(f "$R95_wan_httpdirfs" 0.001 %.1f) ms, pulling $(f "$RP_wan_pacefs" $MiB %.1f) MiB vs $(f "$RP_wan_rclone" $MiB %.1f) and $(f "$RP_wan_httpdirfs" $MiB %.1f) MiB."
	echo "- Warm re-read: $(ratio "$WM_pacefs" "$WM_rclone") rclone, $(ratio "$WM_pacefs" "$WM_httpdirfs") httpdirfs; after a remount pacefs read the whole file at $(f "$RM_pacefs" 1 %.0f) MB/s ($(ratio "$RM_pacefs" "$RM_httpdirfs") httpdirfs, $(ratio "$RM_pacefs" "$RM_dd") dd of data.mdb) pulling $(f "$(med remount pacefs read_pulled)" 1 %.0f) bytes."
	for n in $MLN; do
		mp=$(med "multi_lo_$n" pacefs mbps)
		printf -- '- %s readers on %s files of one mount, loopback: pacefs %s MB/s = %s %s curls into files, %s rclone, %s httpdirfs.\n' "$n" "$n" \
			"$(f "$mp" 1 %.0f)" "$(ratio "$mp" "$(med "multi_lo_$n" curlfile mbps)")" "$n" \
			"$(ratio "$mp" "$(med "multi_lo_$n" rclone mbps)")" "$(ratio "$mp" "$(med "multi_lo_$n" httpdirfs mbps)")"
	done
	# the loader and fio: ratios of the same run, their median
	if grep -q '^loader_' "$RAW"; then
		for o in $LDO; do
			line="- Dataset loader, $(oname "$o"):"
			for set in $LDS; do
				n=$(ld8 "$set")
				wl=loader_${o}_${set}_$n k=$(lkey "$set")
				line="$line $set, $n workers, pacefs $(f "$(med "$wl" pacefs "$k")" 1 %.1f) $(lunit "$set") = $(qx "$(med_ratio_sys "$wl" pacefs rclone "$k")") rclone, $(qx "$(med_ratio_sys "$wl" pacefs httpdirfs "$k")") httpdirfs, $(qx "$(med_ratio_sys "$wl" pacefs curl "$k")") curl with $n connections, $(qx "$(med_ratio_sys "$wl" pacefs curlpeak "$k")") curl with pacefs's $(g "$(med "$wl" pacefs conns_active)" 1 %.0f) active connections;"
			done
			echo "${line%;}."
		done
	fi
	if grep -q '^fio_' "$RAW"; then
		line="- mountpoint-s3's fio read jobs, pacefs / the best of rclone and httpdirfs (same run):"
		for o in $FJO; do
			line="$line $(oname "$o")"
			for job in $FJ; do
				line="$line $job $(qx "$(med_ratio_best "fio_${o}_$job" mibps)"),"
			done
			line="${line%,};"
		done
		echo "${line%;}."
	fi
	echo "- Real clients on the WAN origin, seconds (pacefs / rclone / httpdirfs / local copy): ffprobe $(f "$CP_pacefs" 1 %.2f) / $(f "$CP_rclone" 1 %.2f) / $(f "$CP_httpdirfs" 1 %.2f) / $(f "$CP_local" 1 %.2f); ffmpeg -ss $(f "$CS_pacefs" 1 %.2f) / $(f "$CS_rclone" 1 %.2f) / $(f "$CS_httpdirfs" 1 %.2f) / $(f "$CS_local" 1 %.2f); zip member $(f "$CZ_pacefs" 1 %.2f) / $(f "$CZ_rclone" 1 %.2f) / $(f "$CZ_httpdirfs" 1 %.2f) / $(f "$CZ_local" 1 %.3f); sqlite lookup $(f "$CQ_pacefs" 0.001 %.1f) / $(f "$CQ_rclone" 0.001 %.1f) / $(f "$CQ_httpdirfs" 0.001 %.1f) / $(f "$CQ_local" 0.001 %.2f) ms."
	echo
	for p in "${PLOTS[@]}"; do echo "![$p]($p)"; done
	echo
	echo "## Targets"
	echo

	cat "$TGT"

	# --- tables ---
	echo "## Cold sequential read"
	echo
	echo "MB/s (10^6 bytes/s) from open to the last verified byte, 1 MiB reads."
	echo
	echo "| system | loopback nginx, $((SEQ_LO_SIZE / MiB)) MiB | runs | pacefs is | WAN origin, $((SEQ_WAN_SIZE / MiB)) MiB | runs | pacefs is | WAN pulled MiB |"
	echo "| --- | ---: | --- | ---: | ---: | --- | ---: | ---: |"
	for s in pacefs rclone httpdirfs curl1 curlfile curl8; do
		echo "| $(label "$s") | $(f "$(v "SL_$s")" 1 %.0f) | $(vals seq_lo "$s" mbps 1 %.0f) | $(ratio "$SL_pacefs" "$(v "SL_$s")") | $(f "$(v "SW_$s")" 1 %.1f) | $(vals seq_wan "$s" mbps 1 %.1f) | $(ratio "$SW_pacefs" "$(v "SW_$s")") | $(f "$(med seq_wan "$s" pulled)" $MiB %.1f) |"
	done
	echo
	echo "curl into a file: \`curl -s -o FILE\` on the loopback URL, FILE on the filesystem of the work directory (where the caches are), written and not synced, removed after each run; loopback only."
	echo
	echo "Best competitor: loopback $(ratio "$SL_pacefs" "$best_lo_comp") of its rate, WAN $(ratio "$SW_pacefs" "$best_wan_comp"); vs curl alone: loopback $(ratio "$SL_pacefs" "$SL_curl1") (into /dev/null) and $(ratio "$SL_pacefs" "$SL_curlfile") (into a file), WAN $(ratio "$SW_pacefs" "$SW_curl1") (one connection) and $(ratio "$SW_pacefs" "$SW_curl8") (8 ranges)."
	echo

	# Only in runs that had it (a raw.tsv from before has none).
	if grep -q '^seq_wan_smallbuf' "$RAW"; then
		echo "## Cold sequential read, small-buffer origin"
		echo
		echo "The WAN origin's latency and rate, with \`--sndbuf ${SMALLBUF_SNDBUF:-} --write-chunk ${SMALLBUF_CHUNK:-}\` (connections whose small send buffers wait on the client's ACKs, paced in small writes, as on the asyncio origin where lanes once crawled), $((${SMALLBUF_SIZE:-0} / MiB)) MiB; MB/s, and pacefs against each."
		echo
		echo "| system | MB/s | runs | pacefs is | pulled MiB |"
		echo "| --- | ---: | --- | ---: | ---: |"
		for s in pacefs rclone httpdirfs curl8; do
			echo "| $(label "$s") | $(f "$(med seq_wan_smallbuf "$s" mbps)" 1 %.1f) | $(vals seq_wan_smallbuf "$s" mbps 1 %.1f) | $(ratio "$(med seq_wan_smallbuf pacefs mbps)" "$(med seq_wan_smallbuf "$s" mbps)") | $(f "$(med seq_wan_smallbuf "$s" pulled)" $MiB %.1f) |"
		done
		echo
	fi

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
	echo "Reads the start of the $((SEQ_LO_SIZE / MiB)) MiB file in $((PLAYER_BS / 1024)) KiB reads at a fixed rate (a late read is not made up for): $((PLAYER_BYTES / MiB)) MiB at $PLAYER_RATE bytes/s and $((${PLAYER2_BYTES:-0} / MiB)) MiB at ${PLAYER2_RATE:-0} bytes/s; then closes, and the mount is unmounted right after. Pulled: mount to unmount."
	echo
	echo "| rate B/s | system | consumed MiB | pulled MiB | pulled runs | pulled - consumed MiB | first read ms | worst wait after the first, ms | worst-wait runs | time stalled s |"
	echo "| ---: | --- | ---: | ---: | --- | ---: | ---: | ---: | --- | ---: |"
	for wl in player player2; do
		rate=$PLAYER_RATE
		[ "$wl" = player ] || rate=${PLAYER2_RATE:-0}
		for s in "${SYS[@]}"; do
			pc=$(med "$wl" "$s" consumed) pp=$(med "$wl" "$s" pulled)
			echo "| $rate | $(label "$s") | $(f "$pc" $MiB %.0f) | $(g "$pp" $MiB %.1f) | $(vals "$wl" "$s" pulled $MiB %.1f) | $(g "$(sub "$pp" "$pc")" $MiB %.1f) | $(g "$(med "$wl" "$s" first)" 0.001 %.1f) | $(g "$(med "$wl" "$s" worst)" 0.001 %.1f) | $(vals "$wl" "$s" worst 0.001 %.1f) | $(g "$(med "$wl" "$s" stalled)" 1 %.2f) |"
		done
	done
	echo

	echo "## Seeks during playback (WAN origin)"
	echo
	echo "Plays $((SEEK_PLAY / MiB)) MiB at $PLAYER_RATE bytes/s, then $SEEK_N times jumps to a seeded position and plays $((SEEK_PLAY / MiB)) MiB there; latency of the first read at each new position (p50 and max within a run; medians over runs): $((PLAYER_BS / 1024)) KiB in one run (seek), $((${SEEK_JUMP:-0} / 1024)) KiB in another (seek1m), the player's reads being $((PLAYER_BS / 1024)) KiB otherwise."
	echo
	echo "| first read | system | seek p50 ms | p50 runs | seek max ms | worst wait while playing after a seek, ms | pulled MiB | pacefs p50 is |"
	echo "| ---: | --- | ---: | --- | ---: | ---: | ---: | ---: |"
	for wl in seek seek1m; do
		jb=$PLAYER_BS
		[ "$wl" = seek ] || jb=${SEEK_JUMP:-0}
		for s in "${SYS[@]}"; do
			echo "| $((jb / 1024)) KiB | $(label "$s") | $(f "$(med "$wl" "$s" p50)" 0.001 %.1f) | $(vals "$wl" "$s" p50 0.001 %.1f) | $(g "$(med "$wl" "$s" max)" 0.001 %.1f) | $(g "$(med "$wl" "$s" worst_after)" 0.001 %.1f) | $(g "$(med "$wl" "$s" pulled)" $MiB %.1f) | $(ratio "$(med "$wl" pacefs p50)" "$(med "$wl" "$s" p50)") |"
		done
	done
	echo

	echo "## A new reader at three cold positions (WAN origin)"
	echo
	echo "A process opens the 128 MiB file of a fresh mount (untimed) and reads 1 MiB at 70 %, 20 % and 90 % of it, one \`pread\` each, every byte checked; the kernel hands each read to the filesystem in readahead-sized pieces. Seconds of each read (medians over runs) and the slowest, which is the figure."
	echo
	echo "| system | at 70 %, ms | at 20 %, ms | at 90 %, ms | slowest, ms | slowest runs | pulled MiB | pacefs is |"
	echo "| --- | ---: | ---: | ---: | ---: | --- | ---: | ---: |"
	for s in "${SYS[@]}"; do
		echo "| $(label "$s") | $(g "$(med positions "$s" at70)" 0.001 %.1f) | $(g "$(med positions "$s" at20)" 0.001 %.1f) | $(g "$(med positions "$s" at90)" 0.001 %.1f) | $(f "$(med positions "$s" worst)" 0.001 %.1f) | $(vals positions "$s" worst 0.001 %.1f) | $(g "$(med positions "$s" pulled)" $MiB %.1f) | $(ratio "$(med positions pacefs worst)" "$(med positions "$s" worst)") |"
	done
	echo

	echo "## Real clients (WAN origin)"
	echo
	echo "Each client runs on a fresh mount with an empty cache after the page cache is dropped (the clients' programs and libraries are then read back in), and on the local copy, which is in the page cache: the floor without a network. The media file is $((${MEDIA_SECS:-0} / 60)) min of 640x360 25 fps H.264 at ${MEDIA_KBPS:-0} kbit/s + AAC, its moov index at the end (written without +faststart); the zip holds ${ZIP_MEMBERS:-0} stored members of $((${ZIP_MEMBER_BYTES:-0} / 1024)) KiB of random bytes; the database is one table (INTEGER PRIMARY KEY, ${DB_PAYLOAD:-0}-byte blob) of ${DB_ROWS:-0} rows on 4 KiB pages, opened read-only and immutable."
	echo
	echo "- **ffprobe**: \`ffprobe -show_format -show_streams\` of the cold file (reads the head, the moov at the end, the first packets); its report is compared with the local copy's."
	echo "- **ffmpeg -ss**: \`ffmpeg -ss ${SS_POS:-0} -i FILE -t 2 -c copy -f framemd5\`, into the middle of the cold file; the packets' checksums are compared with the local copy's. Stream copy, not decoding: decoding is the same CPU work on every system and on this shared machine its noise hid the cost of the reading."
	echo "- **playback**: \`ffmpeg -re -i FILE -t ${PLAY_SECS:-0} -f framemd5\` (decoded at the media's rate), and during it, one after another, ffmpeg -ss as above on the same file (jumps during playback; AT:POS, seconds into the playback : position in the media: ${PLAY_JUMPS:-none}); their median time is the figure. Startup: wall time minus media time at ffmpeg's first progress report; stall: how much that lag grew later (0.1 s resolution: ffmpeg -re catches up after a stall, so the wall time hides it)."
	echo "- **zip**: Python's zipfile opens the archive and reads the member in the middle (${ZIP_READ:-m050.bin}; zipfile checks its CRC-32); compared with the local copy's member."
	echo "- **sqlite**: ${SQL_N:-0} point lookups by seeded random key with Python's sqlite3 after the schema is read (untimed); results compared with the local copy's. Requests: lines of the origin's log between the first lookup and 0.5 s after the last."
	echo "- **Read**: the bytes the client itself read (ffmpeg's own input statistics). **Pulled**: from the origin's log, mount to unmount."
	echo
	echo "| client | system | seconds | runs | above the floor, s | read MiB | pulled MiB | pulled runs | pacefs is |"
	echo "| --- | --- | ---: | --- | ---: | ---: | ---: | --- | ---: |"
	for c in "ffprobe secs read ffprobe" "ffss secs read ffmpeg_-ss" "zip secs bytes zip_member"; do
		read -r wl key rk name <<<"$c"
		fl=$(med "$wl" local "$key") fp=$(med "$wl" pacefs "$key")
		for s in "${CSYS[@]}"; do
			x=$(med "$wl" "$s" "$key")
			echo "| ${name//_/ } | $(label "$s") | $(f "$x" 1 %.3f) | $(vals "$wl" "$s" "$key" 1 %.3f) | $(g "$(sub "$x" "$fl")" 1 %.3f) | $(g "$(med "$wl" "$s" "$rk")" $MiB %.2f) | $(g "$(med "$wl" "$s" pulled)" $MiB %.2f) | $(vals "$wl" "$s" pulled $MiB %.2f) | $(ratio "$fp" "$x") |"
		done
	done
	echo
	echo "### Playback with jumps (ffmpeg -re, ${PLAY_SECS:-0} s, and ffmpeg -ss at ${PLAY_JUMPS:-none})"
	echo
	echo "| system | wall s | startup s | stall s | -ss during playback, median s | its runs | slowest -ss s | above the floor, s | consumed MiB | pulled MiB | pulled - consumed MiB |"
	echo "| --- | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: |"
	for s in "${CSYS[@]}"; do
		pc=$(med ffplay "$s" consumed) pp=$(med ffplay "$s" pulled)
		echo "| $(label "$s") | $(f "$(med ffplay "$s" secs)" 1 %.2f) | $(g "$(med ffplay "$s" startup)" 1 %.2f) | $(g "$(med ffplay "$s" stall)" 1 %.2f) | $(g "$(v "CJ_$s")" 1 %.3f) | $(vals ffplay "$s" ss_secs 1 %.3f) | $(g "$(med ffplay "$s" ss_max)" 1 %.3f) | $(g "$(sub "$(v "CJ_$s")" "$CJ_local")" 1 %.3f) | $(g "$pc" $MiB %.1f) | $(g "$pp" $MiB %.1f) | $(g "$(sub "$pp" "$pc")" $MiB %.1f) |"
	done
	echo
	echo "### SQLite point lookups (${SQL_N:-0} lookups)"
	echo
	echo "| system | ms per lookup | runs | p50 ms | max ms | RTTs per lookup (time / $WAN_LATENCY ms) | requests per lookup | pulled during the lookups MiB | pulled MiB, mount to unmount |"
	echo "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |"
	for s in "${CSYS[@]}"; do
		x=$(v "CQ_$s") qr=$(med sqlite "$s" lookup_reqs)
		rq=$qr
		isnum "$qr" && rq=$(awk -v r="$qr" -v n="${SQL_N:-1}" 'BEGIN { printf "%.9g", r / n }')
		rt=$x
		isnum "$x" && rt=$(awk -v t="$x" -v r="$RTT" 'BEGIN { printf "%.9g", t / r }')
		echo "| $(label "$s") | $(f "$x" 0.001 %.2f) | $(vals sqlite "$s" per 0.001 %.2f) | $(g "$(med sqlite "$s" p50)" 0.001 %.2f) | $(g "$(med sqlite "$s" max)" 0.001 %.1f) | $(g "$rt" 1 %.2f) | $(g "$rq" 1 %.2f) | $(g "$(med sqlite "$s" lookup_pulled)" $MiB %.2f) | $(g "$(med sqlite "$s" pulled)" $MiB %.2f) |"
	done
	echo

	echo "## One transfer at a time (loopback origin answering 503 + Retry-After)"
	echo
	echo "\`pacefs-origin --max-transfers 1 --retry-after ${T1_RETRY_AFTER:-1}\` (no latency, no rate cap): one transfer at a time, 503 with Retry-After beyond it. pacefs reads the $((MULTI_SIZE / MiB)) MiB file in full, every byte checked; curl, one connection, is the limit."
	echo
	echo "| system | seconds | runs | MB/s | 503 answers | requests | pulled MiB |"
	echo "| --- | ---: | --- | ---: | ---: | ---: | ---: |"
	for s in pacefs curl1; do
		echo "| $(label "$s") | $(f "$(med transfer1 "$s" secs)" 1 %.2f) | $(vals transfer1 "$s" secs 1 %.2f) | $(g "$(med transfer1 "$s" mbps)" 1 %.0f) | $(g "$(med transfer1 "$s" n503)" 1 %.0f) | $(g "$(med transfer1 "$s" reqs)" 1 %.0f) | $(g "$(med transfer1 "$s" pulled)" $MiB %.1f) |"
	done
	echo

	echo "## read_timeout against a stalled origin (pacefs only)"
	echo
	echo "pacefs-origin with \`--fault '/stall.bin:stall:1'\`: every response to a range of more than one byte sends one byte, then nothing, and keeps the connection open (the mount's one-byte probe passes). pacefs is mounted with \`-o read_timeout=${READ_TIMEOUT:-5}\`; the application opens the file and reads; seconds from open() to the EIO."
	echo
	echo "| system | seconds to EIO | runs |"
	echo "| --- | ---: | --- |"
	echo "| pacefs | $(f "$(med stall pacefs secs)" 1 %.2f) | $(vals stall pacefs secs 1 %.2f) |"
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
	echo "| $(label dd) | | | | | $(f "$RM_dd" 1 %.0f) | $(vals remount dd mbps 1 %.0f) | | |"
	echo
	echo "dd: \`dd if=CACHE/data.mdb of=/dev/null bs=1M\` on pacefs's cache directory right after its remount read and unmount, the page cache dropped first as for the remount; MB/s over the bytes dd read, which is the whole file: $(g "$(med remount dd file_bytes)" $MiB %.1f) MiB ($(g "$(med remount dd disk_bytes)" $MiB %.1f) MiB allocated on disk) for the $((SEQ_LO_SIZE / MiB)) MiB blob, since data.mdb also holds LMDB's metadata and free pages. pacefs's remount figure is over the blob's bytes only."
	echo

	echo "## Two mirrors (pacefs only, WAN origins)"
	echo
	echo "Two pacefs-origin instances with the same caps serving the same $((SEQ_WAN_SIZE / MiB)) MiB file; cold sequential read with each alone and with both (\`-o mirror=URL\`). The cap is per connection, so one mirror alone already offers 16 lanes x $WAN_RATE B/s; a second mirror can only add bandwidth where a single origin limits its total, which this origin does not model."
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
	echo "$MULTI_READERS readers at once, two per file, over $MULTI_FILES files of $((MULTI_SIZE / MiB)) MiB; aggregate MB/s = bytes read by all readers / wall time. pacefs mounts one blob per mount, so it runs $MULTI_FILES mounts (each with its own 16 lanes to the origin)."
	echo
	echo "| system | aggregate MB/s | runs | pulled MiB | pacefs is |"
	echo "| --- | ---: | --- | ---: | ---: |"
	mp=$(med multi pacefs mbps)
	for s in "${SYS[@]}"; do
		echo "| $(label "$s") | $(f "$(med multi "$s" mbps)" 1 %.1f) | $(vals multi "$s" mbps 1 %.1f) | $(f "$(med multi "$s" pulled)" $MiB %.1f) | $(ratio "$mp" "$(med multi "$s" mbps)") |"
	done
	echo
	if [ -n "$MLN" ]; then
		echo "## Many readers on many files of one mount (loopback nginx)"
		echo
		echo "N readers at once, each reading its own cold $((MULTI_SIZE / MiB)) MiB file in full through one fresh mount of each system with an empty cache (pacefs mounts nginx's directory index of the loopback root, rclone and httpdirfs its listing, as always); the limit: N curl processes at once, each into its own file on the work directory's filesystem (not synced). Aggregate MB/s = N x $((MULTI_SIZE / MiB)) MiB / the wall time from the first start to the last exit (process start included for every system)."
		echo
		echo "| readers | system | aggregate MB/s | runs | pulled MiB | pacefs is |"
		echo "| ---: | --- | ---: | --- | ---: | ---: |"
		for n in $MLN; do
			mp=$(med "multi_lo_$n" pacefs mbps)
			for s in "${SYS[@]}" curlfile; do
				lb=$(label "$s")
				[ "$s" != curlfile ] || lb="$n curl processes, each into a file (limit)"
				echo "| $n | $lb | $(f "$(med "multi_lo_$n" "$s" mbps)" 1 %.0f) | $(vals "multi_lo_$n" "$s" mbps 1 %.0f) | $(g "$(med "multi_lo_$n" "$s" pulled)" $MiB %.1f) | $(ratio "$mp" "$(med "multi_lo_$n" "$s" mbps)") |"
			done
		done
		echo
	fi
	if grep -q '^loader_' "$RAW"; then
		echo "## Dataset loader: N workers over shuffled files"
		echo
		echo "As a training job's data loader: \`benchread loader\` forks N worker processes that take the files of one set in one shuffled order (seeded by the run's number), each the next file not yet taken, and read it whole in 1 MiB reads, every byte checked; files/s and MB/s over the wall time from the first worker's start to the last one's exit. The sets: ${SHARD_N:-0} shards of $((${SHARD_SIZE:-0} / MiB)) MiB, and ${SMALL_N:-0} small files of $((${SMALL_SIZE:-0} / 1024)) KiB, each in a folder of its own, which every system mounts fresh with an empty cache for each run: pacefs the folder's directory index (\`pacefs URL/ MNT\`), rclone and httpdirfs its listing. On loopback the folder is nginx's URL/SET/; the WAN-like origin of a folder is a pacefs-origin with the same caps rooted at it (httpdirfs asks for URL/SET without the trailing slash, which pacefs-origin does not redirect as nginx does)."
		echo
		echo "The limits: **curl, N connections**: N curl processes at once, process k taking the files k, k+N, k+2N, ... of the loader's order of the same run (\`benchread order\`) over one keep-alive connection (the files are all of one size, so fixed shares end together as the loader's taken ones do); from the WAN origin into /dev/null, from loopback into files on the work directory's filesystem (where the caches are), not synced and removed at once; every response must be a 200 of the file's size; the wall time from the first process's start to the last one's exit. **curl, as many connections as pacefs had active**: the same with as many processes as pacefs kept connections busy at once in that run (its active connections below; no more processes than files)."
		echo
		echo "**Connections** are counted with \`ss\` every 0.1 s while the loader or curl runs, the established TCP connections to the origin's port (one system reads an origin at a time): **open**, the most in one sample; **active**, the busy ones (a request sent after the last byte received, or a byte received in the last 0.1 s: ss's lastsnd and lastrcv; an HTTP client keeps idle connections open), the 90th percentile over the samples with any (a connection that just ended and its replacement are both busy in a sample, so the peak would count churn); in parentheses, how many different ones were seen in any sample (one that lived less than 0.1 s can be missed). On loopback an answer takes microseconds, so few connections are ever seen busy there and the limit with pacefs's active connections says little. **Requests per file** and **pulled / read**: the origin's log from mount to unmount (listing and probes included) over the files and bytes read. **Peak RSS**: the mount daemon's VmHWM before the unmount. **pacefs is**: the median over the runs of pacefs's figure over that row's in the same run."
		echo
		for o in $LDO; do
			for set in $LDS; do
				k=$(lkey "$set")
				if [ "$set" = small ]; then
					echo "### $(oname "$o"): ${SMALL_N:-0} files of $((${SMALL_SIZE:-0} / 1024)) KiB"
				else
					echo "### $(oname "$o"): ${SHARD_N:-0} shards of $((${SHARD_SIZE:-0} / MiB)) MiB"
				fi
				echo
				echo "| workers | system | $(lunit "$set") | runs | $([ "$set" = small ] && echo "MB/s" || echo "files/s") | median file ms | requests per file | pulled / read | peak RSS MiB | connections: open, active (seen) | pacefs is |"
				echo "| ---: | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | --- | ---: |"
				k2=files_per_s
				[ "$set" != small ] || k2=mbps
				for n in $(lns "$set"); do
					wl=loader_${o}_${set}_$n
					for s in "${LSYS[@]}"; do
						case $s in
						curl) lb="curl, $n connections (limit)" ;;
						curlpeak) lb="curl, as many connections as pacefs had active (limit)" ;;
						*) lb=$(label "$s") ;;
						esac
						q=-
						[ "$s" = pacefs ] || q=$(qx "$(med_ratio_sys "$wl" pacefs "$s" "$k")")
						echo "| $n | $lb | $(f "$(med "$wl" "$s" "$k")" 1 %.1f) | $(vals "$wl" "$s" "$k" 1 %.1f) | $(g "$(med "$wl" "$s" "$k2")" 1 %.2f) | $(g "$(med "$wl" "$s" p50)" 0.001 %.0f) | $(g "$(med_q "$wl" "$s" reqs files)" 1 %.2f) | $(g "$(med_q "$wl" "$s" pulled bytes)" 1 %.3f) | $(g "$(med "$wl" "$s" hwm_kib)" 1024 %.0f) | $(conns_cell "$wl" "$s") | $q |"
					done
				done
				echo
			done
		done
	fi
	if grep -q '^fio_' "$RAW"; then
		echo "## mountpoint-s3's fio read jobs"
		echo
		echo "The read jobs of mountpoint-s3's benchmark (awslabs/mountpoint-s3, mountpoint-s3/scripts/fio/read/), their parameters on run.sh's fio command lines: seq_read (bs=256k, rw=read, one thread), seq_read_4t (the same, numjobs=4, a file each), rand_read (bs=256k, rw=randread), rand_read_4t (numjobs=4), seq_read_skip_17m (bs=256m, rw=read:17m: 256 MiB reads, each 17 MiB past the last); all ioengine=sync, time_based, group_reporting, run with \`fio --thread --directory=MNT\` as their fs_bench.sh does. Cut here to $((${FIO_SIZE:-0} / MiB)) MiB files (theirs: 100G) and ${FIO_SECS:-10} s (theirs: 30 s). Added: \`--readonly\` and \`--verify=crc32c --verify_interval=256k\`: the files are written by fio with a verify header every 256 KiB (the block's checksum and offset), so every byte fio reads is checked and a block at the wrong offset fails. Each job on a fresh mount of each system with an empty cache, pacefs mounting the folder's directory index, on each origin as the loader's folders are. A sequential job that reaches the end of its file starts over (time_based), so on loopback a file may be read more than once (read / file size > 1); and fio ends a job at the first read that completes after the ${FIO_SECS:-10} s, so where one of seq_read_skip_17m's 256 MiB reads takes longer (from the WAN origin: 32 s at one connection's $WAN_RATE B/s) its figure is one or two reads over a longer time."
		echo
		echo "MiB/s is fio's (2^20 bytes/s over its runtime, threads summed); p50 and p99: fio's completion latency of one read. Requests, pulled, peak RSS and connections as in the loader's tables; pulled / read counts mount to unmount, so read-ahead past the last read shows."
		echo
		echo "| job | origin | system | MiB/s | runs | p50 ms | p99 ms | read / file size | pulled / read | requests | peak RSS MiB | connections: open, active (seen) | pacefs is |"
		echo "| --- | --- | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: |"
		for job in $FJ; do
			fsz=$(( $(fio_threads "$job") * ${FIO_SIZE:-1} ))
			for o in $FJO; do
				wl=fio_${o}_$job
				for s in "${SYS[@]}"; do
					q=-
					[ "$s" = pacefs ] || q=$(qx "$(med_ratio_sys "$wl" pacefs "$s" mibps)")
					echo "| $job | $(oname "$o") | $(label "$s") | $(f "$(med "$wl" "$s" mibps)" 1 %.1f) | $(vals "$wl" "$s" mibps 1 %.1f) | $(g "$(med "$wl" "$s" p50)" 0.001 %.1f) | $(g "$(med "$wl" "$s" p99)" 0.001 %.1f) | $(g "$(med "$wl" "$s" bytes)" "$fsz" %.2f) | $(g "$(med_q "$wl" "$s" pulled bytes)" 1 %.2f) | $(g "$(med "$wl" "$s" reqs)" 1 %.0f) | $(g "$(med "$wl" "$s" hwm_kib)" 1024 %.0f) | $(conns_cell "$wl" "$s") | $q |"
				done
			done
		done
		echo
	fi
	if [ "$(med tier_first pacefs mbps)" != - ]; then
		tc=${TIER_CHUNK:-1048576}
		echo "## A shared cache tier (WAN origin behind nginx proxy_cache + slice)"
		echo
		echo "pacefs only, -o chunk=$((tc / MiB))M,proxy=TIER: nginx on loopback as a forward caching proxy (slice $((tc / MiB))m, proxy_cache_lock on: the configuration of docs/deploy.md) in front of the WAN origin, a new tier with an empty cache for each part. Mounts have caches of their own, like machines of a fleet. MB/s from open to the last verified byte of the $((SEQ_LO_SIZE / MiB)) MiB file; pulled = bytes the WAN origin sent."
		echo
		echo "| step | MB/s | runs | pulled from the origin, MiB |"
		echo "| --- | ---: | --- | ---: |"
		echo "| first mount (the tier fills) | $(f "$(med tier_first pacefs mbps)" 1 %.1f) | $(vals tier_first pacefs mbps 1 %.1f) | $(f "$(med tier_first pacefs pulled)" $MiB %.1f) |"
		echo "| second mount (the tier's copy) | $(f "$(med tier_second pacefs mbps)" 1 %.1f) | $(vals tier_second pacefs mbps 1 %.1f) | $(f "$(med tier_second pacefs pulled)" $MiB %.1f) |"
		echo "| the same straight from loopback nginx (reference) | $(f "$(med tier_direct pacefs mbps)" 1 %.1f) | $(vals tier_direct pacefs mbps 1 %.1f) | |"
		echo "| two mounts together, empty tier: seconds of the slower | $(f "$(med tier_together pacefs secs)" 1 %.2f) s | $(vals tier_together pacefs secs 1 %.2f) | $(f "$(med tier_together pacefs pulled)" $MiB %.1f) |"
		echo "| two-proxy group, one killed a quarter in: seconds, longest read | $(f "$(med tier_kill pacefs secs)" 1 %.2f) s, $(f "$(med tier_kill pacefs worst)" 0.001 %.0f) ms | $(vals tier_kill pacefs worst 0.001 %.0f) ms | $(f "$(med tier_kill pacefs pulled)" $MiB %.1f) |"
		echo
		echo "Random 4 KiB reads ($RANDOM_N_WAN, WAN origin, no tier) with the default chunk and with $((tc / MiB)) MiB: a random read pulls one chunk, so a large chunk costs each random read its transfer; the default stays one cache block."
		echo
		echo "| chunk | p50 ms | p95 ms | runs (p95) | pulled MiB | per read KiB |"
		echo "| --- | ---: | ---: | --- | ---: | ---: |"
		for c in 64k $((tc / 1024))k; do
			echo "| $(chunk_label "$c") | $(f "$(med "tier_rand_$c" pacefs p50)" 0.001 %.1f) | $(f "$(med "tier_rand_$c" pacefs p95)" 0.001 %.1f) | $(vals "tier_rand_$c" pacefs p95 0.001 %.1f) | $(f "$(med "tier_rand_$c" pacefs pulled)" $MiB %.1f) | $(f "$(awk -v p="$(med "tier_rand_$c" pacefs pulled)" -v n="$RANDOM_N_WAN" 'BEGIN { print p / n }')" 1024 %.1f) |"
		done
		echo
	fi
	if [ "$(med s3sig_seq nginx_unsigned mbps)" != - ]; then
		echo "## SigV4 signing (pacefs only, loopback)"
		echo
		echo "The same bytes from the same server read unsigned (an http:// URL) and signed (s3://${S3SIG_BUCKET:-s3sig}/KEY with -o endpoint=). nginx ignores the signature: what signing costs the client. pacefs-origin --s3 checks every signature (botocore's computation, remembered for a second per object; unsigned through --s3-anonymous): the client's cost and the origin's. Cold sequential: $((SEQ_LO_SIZE / MiB)) MiB, one mount after the other (the first alternating from run to run). Random: ${S3SIG_N:-2000} reads of 4 KiB of the $((LONG_SIZE / MiB)) MiB file through both mounts at once, each offset read from both in turn, so that both see the same moments of the machine's load; \"sum\" adds up one side's read latencies. The ratio is the median over the runs of signed / unsigned in the same run. docs/s3.md says where the time goes."
		echo
		echo "| server, figure | unsigned | signed | signed / unsigned | runs (unsigned; signed) |"
		echo "| --- | ---: | ---: | ---: | --- |"
		for row in "nginx seq mbps 1 %.0f MB/s" "nginx random p50 0.001 %.3f ms" "nginx random p95 0.001 %.3f ms" \
			"nginx random secs 1 %.3f s_(sum)" "origin random p50 0.001 %.3f ms" "origin random p95 0.001 %.3f ms" \
			"origin random secs 1 %.3f s_(sum)"; do
			read -r srv wl key sc fmt unit <<<"$row"
			a=$(med "s3sig_$wl" "${srv}_unsigned" "$key") b=$(med "s3sig_$wl" "${srv}_signed" "$key")
			q=$(med_ratio_sys "s3sig_$wl" "${srv}_signed" "${srv}_unsigned" "$key")
			echo "| $srv, $wl $key, ${unit//_/ } | $(f "$a" "$sc" "$fmt") | $(f "$b" "$sc" "$fmt") | $(f "$q" 1 %.3f) | $(vals "s3sig_$wl" "${srv}_unsigned" "$key" "$sc" "$fmt"); $(vals "s3sig_$wl" "${srv}_signed" "$key" "$sc" "$fmt") |"
		done
		echo
	fi
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
			key["seq_wan_smallbuf"] = "mbps"
			key["remount"] = "mbps"; key["mirrors"] = "mbps"; key["multi"] = "mbps"
			key["memory"] = "hwm_kib"
			key["ttfb_lo"] = "secs"; key["ttfb_wan"] = "secs"; key["random_lo"] = "p95"
			key["random_wan"] = "p95"; key["player"] = "worst"; key["seek"] = "p50"
			key["player2"] = "worst"; key["seek1m"] = "p50"; key["ffprobe"] = "secs"
			key["positions"] = "worst"
			key["ffss"] = "secs"; key["ffplay"] = "ss_secs"; key["zip"] = "secs"
			key["sqlite"] = "per"; key["transfer1"] = "secs"; key["stall"] = "secs"
		}
		$1 ~ /^multi_lo_/ { key[$1] = "mbps" }
		$1 ~ /^loader_.*_small_/ { key[$1] = "files_per_s" }
		$1 ~ /^loader_.*_shards_/ { key[$1] = "mbps" }
		$1 ~ /^fio_/ { key[$1] = "mibps" }
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
	echo "- The WAN many-readers workload gives pacefs one mount per file, each with its own 16 lanes to the origin, as it did before pacefs mounted trees, so that its figures stay comparable with earlier runs; rclone and httpdirfs serve all files from one mount. The loopback many-readers workload uses one mount for every system."
	echo "- httpdirfs runs with \`--no-range-check\`: without it httpdirfs 1.2.5 exits on nginx's 206 responses, which carry Content-Range but no Accept-Ranges (httpdirfs issue #188). It also crashed at unmount in some runs (see Logs); only reads before the unmount count."
	echo "- Warm re-reads do not drop the page cache: they measure what a user sees on a second read, kernel page cache included where the filesystem keeps it."
	echo "- Timings include benchread's check of every byte (about 0.05 s per 256 MiB on this machine), the same for every system; curl rows do no check."
	echo "- The player's pulled - consumed is counted from mount to unmount, so it includes the mount's probe and whatever the read-ahead fetched past the last read before the unmount."
	echo "- The real clients' 'read' is what the client asked for; the kernel's own read-ahead on a FUSE file makes the filesystem see more than that, for every system alike."
	if [[ $(med sqlite httpdirfs per) == failed*malformed* ]]; then
		echo "- httpdirfs's sqlite runs failed on wrong bytes, not on time: when this workload was written, httpdirfs 1.2.5 served zeros for the last 4 KiB page of one of its 8 MiB download segments of the database (offset 226488320, found by comparing the pages sqlite read with the local copy), which sqlite reports as a malformed database."
	fi
	echo "- The WAN origin caps each connection, not the origin as a whole, so the two-mirror workload cannot show aggregation: either mirror alone fills 16 lanes."
	# the loader's and fio's daemons that were gone before their unmount
	gone=$(awk -F'\t' '$5 ~ /(^| )daemon_gone=1( |$)/ { n[$2]++; w[$2] = w[$2] (w[$2] == "" ? "" : ", ") $1 " run " $3 }
		END { for (s in n) printf "%s%s %d time(s) (%s)", (k++ ? "; " : ""), s, n[s], w[s] }' "$RAW")
	if [ -n "$gone" ]; then
		echo "- A mount daemon had exited before its unmount, after the workload's reads had succeeded (so no peak RSS for that run): $gone."
	fi
	echo
	echo "## Logs"
	echo
	# The logs are linked only where they are kept beside the report (a
	# subset run's folder may hold the report alone).
	if [ -d "$OUT/logs" ]; then
		echo "Lines other than routine ones in each system's log over the whole run ([logs/](logs/)):"
	else
		echo "Lines other than routine ones in each system's log over the whole run (the logs themselves are not kept with this report):"
	fi
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

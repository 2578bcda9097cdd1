#!/usr/bin/env bash
# soak.sh: every fault at once. pacefs-origin serves the files with a
# seeded random mix of every fault kind that keeps the bytes true (a
# second one, with its own mix, as a mirror, and a third as the proxy in
# front), mounts of every kind (a single URL through the proxy, a
# directory index, a manifest with mirrors, an S3 prefix, and two S3
# prefixes whose listings are hostile, listed over and over) and 16 readers
# for SOAK_SECONDS (600): no wrong byte, no read past its deadline (and at
# most 1% failed), every hostile listing EIO by its deadline, no hang of
# unmount, and each daemon's RSS flat after the first minute. The seed is printed at the
# start and on failure; SOAK_SEED=N runs the same mix again.
# Not part of make check (it takes ten minutes); CI runs it.
# Usage: tests/soak/soak.sh [BUILD_DIR]   (PACEFS=... also works)
set -euo pipefail
if [ $# -ge 1 ]; then
	PACEFS=$(cd "$1" && pwd)/pacefs
	export PACEFS
	unset READCMP
fi
# shellcheck source=tests/lib.sh
source "$(dirname "$0")/../lib.sh"
t_require_mount
t_require_origin

SOAKREAD=$(dirname "$PACEFS")/tests/soakread
[ -x "$SOAKREAD" ] || SOAKREAD=$T_ROOT/build/tests/soakread
if [ ! -x "$SOAKREAD" ]; then
	t_fail soak "soakread not found (run make build/tests/soakread)"
	t_done
fi
DURATION=${SOAK_SECONDS:-600}
SEED=${SOAK_SEED:-$(((RANDOM << 15 | RANDOM) % 1000000000))}
READERS=${SOAK_READERS:-16}
PERCENT=${SOAK_FAULT_PERCENT:-10}
RT=${SOAK_READ_TIMEOUT:-20}
# A read may wait its read_timeout, then fail; past this it is late.
DEADLINE_MS=$(((RT + ${SOAK_SLACK:-5}) * 1000))
# Unmount: fusermount3 -u returns, and the daemon exits, within this.
UMOUNT_BOUND=${SOAK_UMOUNT_BOUND:-15}
# RSS: the last window's max at most the first's x 1.2 + 8 MiB; a window
# is a minute, or a third of a shorter run.
WINDOW=$((DURATION >= 180 ? 60 : DURATION / 3))
MiB=1048576
echo "soak: seed $SEED (SOAK_SEED=$SEED runs it again), ${DURATION}s, $READERS readers," \
	"faults on $PERCENT% of requests, read_timeout=$RT"

# on_failure: the seed again, where a failing log ends.
say_seed() {
	if [ "$T_FAILED" -gt 0 ]; then
		echo "soak: FAILED with seed $SEED: rerun with SOAK_SEED=$SEED SOAK_SECONDS=$DURATION"
	fi
}

WWW=$T_TMP/www
mkdir -p "$WWW/idx"
# Sizes off the block boundaries; 72 MiB in all, 24 MiB a mount, three
# times the cache each is given, so that bytes keep leaving it and coming
# back.
gen_file "$WWW/one.bin" $((24 * MiB + 4097)) 801
for i in 1 2 3; do
	gen_file "$WWW/idx/i$i.bin" $((8 * MiB + i * 12289)) $((810 + i))
	gen_file "$WWW/m$i.bin" $((8 * MiB + i * 8191)) $((820 + i))
done

# The origin (with an index for the directory mount), a mirror and the
# proxy: each its own mix, drawn from the seed.
o_start origin --root "$WWW" --autoindex --fault-mix "$SEED:$PERCENT"
ORIGIN=$O_URL
o_start mirror --root "$WWW" --fault-mix "$((SEED + 1)):$PERCENT"
MIRROR=$O_URL
# The proxy draws the verdict kinds too (norange, badrange; not with
# SOAK_PROXY_VERDICTS=0): a proxy's bad answer must fail only that
# request through it, which the next route serves (docs/security.md,
# second hostile review, row 4).
pv=
[ "${SOAK_PROXY_VERDICTS:-1}" = 1 ] && pv=:verdicts
o_start proxy --root "$WWW" --fault-mix "$((SEED + 2)):$PERCENT$pv"
PROXY=$O_URL
{
	printf '{"version": 1, "files": [\n'
	for i in 1 2 3; do
		sep=,
		[ "$i" -eq 3 ] && sep=
		printf '{"path": "m/m%d.bin", "urls": ["%s/m%d.bin", "%s/m%d.bin"], "size": %d}%s\n' \
			"$i" "$ORIGIN" "$i" "$MIRROR" "$i" "$(stat -c %s "$WWW/m$i.bin")" "$sep"
	done
	printf ']}\n'
} >"$T_TMP/soak.json"

OPTS="read_timeout=$RT,stall_timeout=2,connect_timeout=2,retry_after_max=2,cache_size=8M,listing_ttl=20"
NAMES=()
PIDS=()
MNTS=()
PAIRS=()
# soak_mount NAME SOURCE [OPTIONS]: a foreground daemon of its own; its
# files join the readers' list by the caller.
soak_mount() {
	local name=$1 src=$2 extra=${3:-} mnt=$T_TMP/mnt-$1
	mkdir -p "$mnt"
	# The probe (or the first listing) draws faults too, and a mount
	# whose probe fails says so and exits 1: try it three times.
	for try in 1 2 3; do
		if fg_mount "$T_TMP/$name.log" -o "cache_dir=$T_TMP/cache-$name,$OPTS$extra" "$src" "$mnt"; then
			break
		fi
		echo "soak: $name: mount $try failed: $(tail -n 1 "$T_TMP/$name.log")"
		if [ "$try" -eq 3 ]; then
			t_fail "$name: mount" "$(tail -n 3 "$T_TMP/$name.log" | tr '\n' ' ')"
			return 1
		fi
	done
	t_pass "$name: mounted (pid $FG_PID)"
	NAMES+=("$name")
	PIDS+=("$FG_PID")
	MNTS+=("$mnt")
}
# Each mount kind is one block: its mount and the files it adds.
# A failed proxy is tried again 3 s on (not 300), so that it stays in
# the path.
if soak_mount url "$ORIGIN/one.bin" ",proxy=$PROXY;DIRECT,proxy_reset=3"; then
	PAIRS+=("$T_TMP/mnt-url/one.bin=$WWW/one.bin")
fi
if soak_mount index "$ORIGIN/idx/"; then
	for i in 1 2 3; do
		PAIRS+=("$T_TMP/mnt-index/i$i.bin=$WWW/idx/i$i.bin")
	done
fi
if soak_mount manifest "$T_TMP/soak.json"; then
	for i in 1 2 3; do
		PAIRS+=("$T_TMP/mnt-manifest/m/m$i.bin=$WWW/m$i.bin")
	done
fi
# S3: one origin serves objects with its own fault mix and listings that
# end, slowly, with a key that holds a NUL and one with a dot segment
# among the real ones; a second answers every listing with empty pages
# and a new token for ever, a third with the same token on every page.
# (A listing that declares an entity is refused at mount, so it cannot
# be mounted to be listed; tests/mount/s3hostile.sh covers it.)
# Readers read the first's objects; a lister lists the other two over and
# over: each ls must fail (EIO) within the deadline, and those daemons'
# memory stay flat too.
S3ROOT=$T_TMP/s3
HOSTILE=()
if /usr/bin/python3 -c 'import botocore' 2>/dev/null; then
	mkdir -p "$S3ROOT/bkt/s" "$S3ROOT/bkt/h" "$S3ROOT/bkt/a/..dotdot"
	for i in 1 2; do
		gen_file "$S3ROOT/bkt/s/s$i.bin" $((8 * MiB + i * 4093)) $((830 + i))
	done
	gen_file "$S3ROOT/bkt/h/h.bin" 4096 840
	gen_file "$S3ROOT/bkt/a/..dotdot/x" 4096 841
	S3SECRET=soak$RANDOM$RANDOM
	printf 'AKIDSOAK %s\n' "$S3SECRET" >"$T_TMP/s3keys"
	export AWS_ACCESS_KEY_ID=AKIDSOAK AWS_SECRET_ACCESS_KEY=$S3SECRET
	unset AWS_SESSION_TOKEN AWS_PROFILE AWS_REGION AWS_DEFAULT_REGION AWS_CONFIG_FILE
	export HOME=$T_TMP/home
	mkdir -p "$HOME"
	s3o() {
		o_start "$1" --root "$S3ROOT" --s3 --s3-region eu-west-1 --s3-keys "$T_TMP/s3keys" \
			--s3-hostile "$2" ${3:+--fault-mix "$3"}
	}
	s3o s3-origin nul-key,dotdot-keys,slow-list:50 "$((SEED + 3)):$PERCENT"
	if soak_mount s3 s3://bkt/s/ ",endpoint=$O_URL,region=eu-west-1"; then
		for i in 1 2; do
			PAIRS+=("$T_TMP/mnt-s3/s$i.bin=$S3ROOT/bkt/s/s$i.bin")
		done
	fi
	s3o s3loop-origin new-token,slow-list:200
	soak_mount s3loop s3://bkt/h/ ",endpoint=$O_URL,region=eu-west-1" && HOSTILE+=(s3loop)
	s3o s3same-origin same-token,slow-list:20
	soak_mount s3same s3://bkt/h/ ",endpoint=$O_URL,region=eu-west-1" && HOSTILE+=(s3same)
else
	t_fail "s3: mounts" "python3-botocore is missing (contrib/install-deps.sh installs it)"
fi
if [ "${#PAIRS[@]}" -eq 0 ]; then
	say_seed
	t_done
fi

# The sampler: about one line a second per daemon, "seconds name rss_kib",
# the seconds since it started: a loaded machine stretches its loop, so
# it stamps the time rather than counting turns, and reads /proc with
# bash's own read (no process per sample).
SAMPLES=$T_TMP/samples
(
	SECONDS=0
	while :; do
		alive=0
		for k in "${!PIDS[@]}"; do
			r=
			while read -r key val _; do
				[ "$key" = VmRSS: ] && r=$val && break
			done <"/proc/${PIDS[$k]}/status" 2>/dev/null || true
			[ -n "$r" ] || continue
			alive=1
			echo "$SECONDS ${NAMES[$k]} $r"
		done
		[ "$alive" -eq 1 ] || break
		sleep 1
	done
) >"$SAMPLES" 2>/dev/null &
SAMPLER=$!

# The lister: ls of each hostile mount, one after the other, until the
# readers are done; one line each, "name exit_status milliseconds".
LISTS=$T_TMP/lists
: >"$LISTS"
if [ "${#HOSTILE[@]}" -gt 0 ]; then
	(
		until_s=$(($(date +%s) + DURATION))
		while [ "$(date +%s)" -lt "$until_s" ]; do
			for name in "${HOSTILE[@]}"; do
				t0=$(date +%s%N) rc=0
				timeout $((RT + 30)) ls "$T_TMP/mnt-$name" >/dev/null 2>"$T_TMP/ls.err" || rc=$?
				echo "$name $rc $((($(date +%s%N) - t0) / 1000000)) $(grep -c 'Input/output error' "$T_TMP/ls.err" || true)"
			done >>"$LISTS"
			sleep 1
		done
	) &
	LISTER=$!
fi

start=$(date +%s)
"$SOAKREAD" "$READERS" "$DURATION" "$DEADLINE_MS" "$SEED" "${PAIRS[@]}" >"$T_TMP/soakread.out" 2>&1 || true
secs=$(($(date +%s) - start))
cat "$T_TMP/soakread.out"
summary=$(grep '^soakread: reads=' "$T_TMP/soakread.out" || true)
field() { sed -n "s/.* $1=\([0-9]*\).*/\1/p" <<<"$summary"; }
if [ -z "$summary" ]; then
	t_fail "readers" "soakread gave no summary: $(tail -n 3 "$T_TMP/soakread.out" | tr '\n' ' ')"
else
	t_pass "readers: $(field reads) reads, $(field opens) opens, $(($(field bytes) / MiB)) MiB in ${secs}s"
	t_eq "no wrong byte (reads whose bytes differ from the origin's file)" "$(field wrong)" 0
	t_eq "no read past ${DEADLINE_MS} ms (longest $(field max_wait_ms) ms)" "$(field late)" 0
	# A read may fail (EIO): a source that failed four times in a row
	# without a byte counts as down, and the reads waiting on it fail at
	# once rather than at their deadline. Most must not.
	errs=$(field errors) reads=$(field reads)
	if [ "$reads" -gt 0 ] && [ $((errs * 100)) -le "$reads" ]; then
		t_pass "reads failed: $errs of $reads ($(field short) of them short), at most 1%"
	else
		t_fail "reads failed: at most 1%" "$errs of $reads ($(field short) of them short)"
	fi
fi

if [ "${#HOSTILE[@]}" -gt 0 ]; then
	wait "$LISTER" 2>/dev/null || true
	for name in "${HOSTILE[@]}"; do
		read -r n eio late longest < <(awk -v n="$name" -v d="$DEADLINE_MS" '
			$1 == n { c++; if ($2 != 0 && $4 > 0) e++; if ($3 > d) l++
				  if ($3 > m) m = $3 }
			END { print c + 0, e + 0, l + 0, m + 0 }' "$LISTS")
		if [ "$n" -gt 0 ] && [ "$eio" -eq "$n" ] && [ "$late" -eq 0 ]; then
			t_pass "$name: $n listings, each EIO within ${DEADLINE_MS} ms (longest $longest ms)"
		else
			t_fail "$name: every listing EIO within ${DEADLINE_MS} ms" \
				"$n listings, $eio EIO, $late late (longest $longest ms)"
		fi
	done
fi

# Unmount each: fusermount3 -u returns, the daemon exits 0, in the bound.
for k in "${!PIDS[@]}"; do
	name=${NAMES[$k]} pid=${PIDS[$k]} t0=$(date +%s.%N) rc=0
	timeout "$UMOUNT_BOUND" fusermount3 -u "${MNTS[$k]}" 2>"$T_TMP/fu.err" || rc=$?
	status=running
	for _ in $(seq 1 $((UMOUNT_BOUND * 20))); do
		if ! kill -0 "$pid" 2>/dev/null; then
			status=0
			wait "$pid" || status=$?
			break
		fi
		sleep 0.05
	done
	took=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
	if [ "$rc" -eq 0 ] && [ "$status" = 0 ]; then
		t_pass "$name: unmounted and exited 0 in ${took}s"
	else
		t_fail "$name: unmount within ${UMOUNT_BOUND}s" \
			"fusermount3 -u exit $rc ($(cat "$T_TMP/fu.err")), daemon status $status after ${took}s"
		kill -KILL "$pid" 2>/dev/null || true
	fi
done
wait "$SAMPLER" 2>/dev/null || true

# RSS, per daemon: the first window's max and the last's.
for name in "${NAMES[@]}"; do
	read -r first last n < <(awk -v n="$name" -v w="$WINDOW" -v d="$DURATION" '
		$2 == n { if ($1 < w && $3 > f) f = $3
			  if ($1 >= d - w && $1 < d && $3 > l) l = $3
			  c++ }
		END { print f + 0, l + 0, c + 0 }' "$SAMPLES")
	limit=$((first * 12 / 10 + 8192))
	if [ "$n" -lt $((DURATION / 4)) ] || [ "$first" -eq 0 ] || [ "$last" -eq 0 ]; then
		t_fail "$name: RSS sampled" "$n samples, first window max $first KiB, last $last KiB"
	elif [ "$last" -le "$limit" ]; then
		t_pass "$name: RSS flat: last ${WINDOW}s max $((last / 1024)) MiB <= first ${WINDOW}s max $((first / 1024)) MiB x 1.2 + 8"
	else
		t_fail "$name: RSS flat" "last ${WINDOW}s max $((last / 1024)) MiB > $((limit / 1024)) MiB (first ${WINDOW}s max $((first / 1024)) MiB)"
	fi
done

# What was injected, by kind, from the three request logs.
for o in origin mirror proxy s3-origin; do
	[ -f "$T_TMP/$o.log" ] || continue
	echo "soak: $o: $(wc -l <"$T_TMP/$o.log") requests; faults: $(awk '$6 != "-" { n[$6]++ }
		END { for (k in n) printf "%s %d, ", k, n[k] }' "$T_TMP/$o.log" | sed 's/, $//')"
done
kinds=$(cat "$T_TMP"/origin.log "$T_TMP"/mirror.log "$T_TMP"/proxy.log | awk '$6 != "-" { print $6 }' | sort -u | wc -l)
if [ "$DURATION" -lt 60 ]; then
	t_skip "faults injected: $kinds kinds" "a run under 60 s need not draw 7 kinds"
elif [ "$kinds" -ge 7 ]; then
	t_pass "faults injected: $kinds kinds"
else
	t_fail "faults injected" "only $kinds kinds in ${DURATION}s"
fi
for name in "${NAMES[@]}"; do
	n=$(grep -c 'error' "$T_TMP/$name.log" || true)
	echo "soak: $name: $n error lines; the last: $(grep 'error' "$T_TMP/$name.log" | tail -n 1 | cut -c 1-200)"
done
say_seed
t_done

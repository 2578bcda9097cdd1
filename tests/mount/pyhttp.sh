#!/usr/bin/env bash
# pyhttp.sh: an origin that ignores Range, the server most people start to
# share a file (python3 -m http.server's handler: a 200 with the whole file
# to every range request, a directory listing without sizes). A file of it
# mounts and is read as one stream from its start: a 4 KiB read at 90 % on
# a fresh mount and the whole file's sha256 equal the source's, the file is
# sent once (the probe's request, cut after its head, and one stream), a
# second read asks nothing; its directory lists every size with bodies
# left unread (each probe reads the head and closes).
set -euo pipefail
# shellcheck source=tests/lib.sh
source "$(dirname "$0")/../lib.sh"
t_require_mount
command -v python3 >/dev/null || t_skip_all "python3 is not installed"

SIZE=$((48 * 1048576 + 12345))
WWW=$T_TMP/www
mkdir -p "$WWW/dir"
gen_file "$WWW/big.bin" "$SIZE" 3601
# The listing's files: large and sparse, so that a probe that read bodies
# would show in the bytes sent.
for i in $(seq 1 20); do
	truncate -s $((16 * 1048576 + i)) "$WWW/dir/f$i.bin"
done

PORT=$(free_port)
PYLOG=$T_TMP/py.log
: >"$PYLOG"
python3 "$T_ROOT/tests/tools/pyhttp.py" "$PORT" "$WWW" "$PYLOG" </dev/null >/dev/null 2>"$T_TMP/py.err" &
t_track_pid $!
URL=http://127.0.0.1:$PORT
for _ in $(seq 1 100); do
	curl -sf -o /dev/null "$URL/dir/" && break
	sleep 0.05
done
: >"$PYLOG"

# gets PATH: the GET requests of PATH the server answered.
gets() {
	grep -c "^GET $1 " "$PYLOG" || true
}

# --- one file -------------------------------------------------------------
mnt=$T_TMP/mnt
mkdir -p "$mnt" "$T_TMP/cache"
if fg_mount "$T_TMP/pacefs.log" -o "cache_dir=$T_TMP/cache,read_timeout=60" "$URL/big.bin" "$mnt"; then
	t_pass "a file of a server that ignores Range mounts"
	t_eq "stat size" "$(stat -c %s "$mnt/big.bin")" "$SIZE"
	skip=$((SIZE / 4096 * 9 / 10))
	got=$(dd if="$mnt/big.bin" bs=4096 skip="$skip" count=1 status=none | sha256sum || true)
	t_eq "a 4 KiB read at 90 % on a fresh mount" "$got" \
		"$(dd if="$WWW/big.bin" bs=4096 skip="$skip" count=1 status=none | sha256sum)"
	got=$(sha256sum <"$mnt/big.bin" || true)
	t_eq "sha256 of the whole file" "$got" "$(sha256sum <"$WWW/big.bin")"
	# The probe's GET (cut after its head) and one stream: nothing twice.
	t_eq "the file is sent twice at most (probe, stream)" "$(gets /big.bin)" 2
	t_eq "the stream sent the file whole, once" \
		"$(awk '$2 == "/big.bin" && $3 == '"$SIZE"'' "$PYLOG" | wc -l)" 1
	sync
	echo 1 >/proc/sys/vm/drop_caches 2>/dev/null || true
	got=$(sha256sum <"$mnt/big.bin" || true)
	t_eq "a second read: same bytes" "$got" "$(sha256sum <"$WWW/big.bin")"
	t_eq "a second read asks nothing" "$(gets /big.bin)" 2
	umount_pacefs "$mnt"
else
	t_fail "a file of a server that ignores Range mounts" "$(tail -n 3 "$T_TMP/pacefs.log")"
fi

# --- its directory listing ------------------------------------------------
: >"$PYLOG"
mnt=$T_TMP/mnt-dir
mkdir -p "$mnt" "$T_TMP/cache-dir"
if fg_mount "$T_TMP/pacefs-dir.log" -o "cache_dir=$T_TMP/cache-dir" "$URL/dir/" "$mnt"; then
	want=$(cd "$WWW/dir" && stat -c '%n %s' ./* | sed 's|^\./||' | sort)
	got=$(cd "$mnt" && stat -c '%n %s' ./* 2>&1 | sed 's|^\./||' | sort || true)
	t_eq "ls -l of the listing gives every size" "$got" "$want"
	# What the server wrote counts what the loopback's socket buffers took
	# before the probe closed (up to a few MiB); bodies read would be 320.
	sent=$(awk '$1 == "GET" && $2 ~ /\.bin$/ { s += $3 } END { printf "%.0f\n", s }' "$PYLOG")
	if [ "$sent" -le $((20 * 4 * 1048576)) ]; then
		t_pass "the probes left the bodies unread ($sent bytes sent of $((20 * 16)) MiB)"
	else
		t_fail "the probes left the bodies unread" "$sent bytes sent"
	fi
	# What pacefs received of them (its status counts every request's
	# body bytes): a KiB or so a probe.
	recv=$("$PACEFS" status "$mnt" 2>&1 | sed -n 's/^requests: .*, \(.*\) received.*/\1/p')
	case $recv in
	*" B" | [0-9].*" KiB" | [0-9][0-9].*" KiB") t_pass "the probes received $recv of bodies (<= 100 KiB for 20 files)" ;;
	*) t_fail "the probes received <= 100 KiB of bodies" "received '$recv': $("$PACEFS" status "$mnt" 2>&1 | grep requests)" ;;
	esac
	f=$mnt/f7.bin
	t_eq "a listed file reads right" "$(sha256sum <"$f")" "$(sha256sum <"$WWW/dir/f7.bin")"
	umount_pacefs "$mnt"
else
	t_fail "the listing mounts" "$(tail -n 3 "$T_TMP/pacefs-dir.log")"
fi
t_done

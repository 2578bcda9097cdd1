#!/usr/bin/env bash
# cacheowner.sh: a cache directory, data.mdb or lock.mdb that another user
# owns, or that group or others may write, is refused (as ssh's StrictModes
# refuses ~/.ssh) by the mount and by `pacefs cache`, with one line naming
# the path, its owner and mode; -o cache_shared (--cache-shared) accepts a
# cache shared on purpose; and a user without HOME gets no guessable
# default under /var/tmp.
set -euo pipefail
# shellcheck source=tests/lib.sh
source "$(dirname "$0")/../lib.sh"
t_require_mount
if ! id nobody >/dev/null 2>&1 || ! command -v setpriv >/dev/null 2>&1; then
	t_skip_all "needs the user nobody and setpriv (util-linux)"
fi

MiB=1048576
WWW=$T_TMP/www
MNT=$T_TMP/mnt
mkdir -p "$WWW" "$MNT"
gen_file "$WWW/data.bin" $((2 * MiB + 11)) 61
origin_start "$WWW"
URL=$ORIGIN_URL/data.bin

# refused NAME CACHE PATH WANT: the mount and `pacefs cache ls` on CACHE exit
# 1 with one line naming PATH and containing WANT; nothing is mounted.
refused() {
	local name=$1 cache=$2 path=$3 want=$4 out rc
	t_track_mount "$MNT"
	out=$(timeout 60 "$PACEFS" -o "cache_dir=$cache" "$URL" "$MNT" </dev/null 2>&1) && rc=0 || rc=$?
	t_eq "$name: the mount exits 1" "$rc" 1
	t_eq "$name: one line" "$(printf '%s\n' "$out" | wc -l)" 1
	case $out in
	*"$path is owned by $want"*) t_pass "$name: the line names the path, owner and mode" ;;
	*) t_fail "$name: the line names the path, owner and mode" "got '$out'" ;;
	esac
	if is_mounted "$MNT"; then
		t_fail "$name: nothing mounted" "$(mount_line "$MNT")"
		umount_pacefs "$MNT" || true
	else
		t_pass "$name: nothing mounted"
	fi
	out=$(timeout 60 "$PACEFS" cache ls --cache-dir "$cache" </dev/null 2>&1) && rc=0 || rc=$?
	t_eq "$name: cache ls exits 1" "$rc" 1
	case $out in
	*"$path is owned by $want"*) t_pass "$name: cache ls says why in its line" ;;
	*) t_fail "$name: cache ls says why in its line" "got '$out'" ;;
	esac
}

# serves NAME CACHE OPTIONS: a mount on CACHE with OPTIONS serves the
# origin's bytes.
serves() {
	if mount_pacefs -o "cache_dir=$2${3:+,$3}" "$URL" "$MNT"; then
		t_check "$1: the origin's bytes" timeout 120 "$READCMP" seq "$MNT/data.bin" "$WWW/data.bin"
		t_check "$1: unmount" umount_pacefs "$MNT"
	else
		t_fail "$1: mount" "$T_MOUNT_ERR"
	fi
}

# --- a world-writable directory that another user owns ----------------------
D=$T_TMP/other
mkdir -p "$D"
chmod 0777 "$D"
chown nobody "$D"
serves "0777 dir of nobody, -o cache_shared" "$D" cache_shared
refused "0777 dir of nobody" "$D" "$D" "uid 65534 (nobody) with mode 0777"
out=$(timeout 60 "$PACEFS" cache ls --cache-shared --cache-dir "$D" 2>&1) && rc=0 || rc=$?
t_eq "0777 dir of nobody: cache ls --cache-shared ($out)" "$rc" 0

# --- our directory, group-writable -------------------------------------------
D=$T_TMP/group
serves "0770 dir: first mount" "$D" ""
chmod 0770 "$D"
refused "0770 dir" "$D" "$D" "uid 0 (root) with mode 0770"

# --- our directory, but a data.mdb or lock.mdb that is not ours --------------
D=$T_TMP/files
serves "own dir: first mount" "$D" ""
chown nobody "$D/data.mdb"
refused "data.mdb of nobody" "$D" "$D/data.mdb" "uid 65534 (nobody) with mode 0600"
chown root "$D/data.mdb"
chmod 0666 "$D/lock.mdb"
refused "lock.mdb 0666" "$D" "$D/lock.mdb" "uid 0 (root) with mode 0666"
chmod 0600 "$D/lock.mdb"
serves "own dir and files again" "$D" ""

# --- no HOME: the account's home, never /var/tmp -----------------------------
# As nobody (home /nonexistent) without HOME or XDG_CACHE_HOME: the default
# cache directory is under the account's home, which does not exist. The
# binary is run through a descriptor: nobody may not enter the test's
# private folders.
out=$(cd / && setpriv --reuid=nobody --regid=nogroup --clear-groups \
	env -u HOME -u XDG_CACHE_HOME /proc/self/fd/3 cache ls 3<"$PACEFS" 2>&1) && rc=0 || rc=$?
t_eq "no HOME: cache ls exits 1 (no cache there)" "$rc" 1
case $out in
*/var/tmp*) t_fail "no HOME: no /var/tmp path" "got '$out'" ;;
*"/nonexistent/.cache/pacefs"*) t_pass "no HOME: the account's home ($out)" ;;
*) t_fail "no HOME: the account's home" "got '$out'" ;;
esac

t_done

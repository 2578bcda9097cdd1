#!/usr/bin/env bash
# budget.sh: -o cache_size keeps the cache within its budget while a larger
# file streams with every byte correct; -o revalidate trusts a fresh record
# without asking the origin; -o cache_sync is accepted and validated.
set -euo pipefail
# shellcheck source=tests/lib.sh
source "$(dirname "$0")/../lib.sh"
t_require_mount

WWW=$T_TMP/www
mkdir -p "$WWW"
gen_file "$WWW/big.bin" $((40 * 1048576 + 99)) 111
origin_start "$WWW"
MNT=$T_TMP/mnt
CACHE=$T_TMP/cache
mkdir -p "$MNT"

# held_bytes: what `pacefs cache stat` says the cache holds.
held_bytes() {
	"$PACEFS" cache stat --cache-dir "$CACHE" | awk '/^bytes held:/ { gsub(/[()]/, "", $5); print $5 }'
}

mount_pacefs -o "cache_dir=$CACHE,cache_size=8M,cache_sync=meta" "$ORIGIN_URL/big.bin" "$MNT"
t_check "40 MiB through an 8 MiB cache: every byte" "$READCMP" seq "$MNT/big.bin" "$WWW/big.bin"
t_check "random preads after it" "$READCMP" random "$MNT/big.bin" "$WWW/big.bin" 200 5
umount_pacefs "$MNT"
held=$(held_bytes)
# The budget may be passed by one batch (16 MiB) at most.
if [ -n "$held" ] && [ "$held" -le $((8 * 1048576 + 16 * 1048576)) ]; then
	t_pass "cache within its budget: $held bytes held (budget 8 MiB)"
else
	t_fail "cache within its budget" "held '$held'"
fi

# A fresh record needs no probe with -o revalidate=SECONDS.
mount_pacefs -o "cache_dir=$CACHE,revalidate=3600" "$ORIGIN_URL/big.bin" "$MNT"
umount_pacefs "$MNT"
before=$(origin_requests)
mount_pacefs -o "cache_dir=$CACHE,revalidate=3600" "$ORIGIN_URL/big.bin" "$MNT"
t_eq "revalidate=3600: no request at mount" "$before" "$(origin_requests)"
umount_pacefs "$MNT"
before=$(origin_requests)
mount_pacefs -o "cache_dir=$CACHE,revalidate=always" "$ORIGIN_URL/big.bin" "$MNT"
t_eq "revalidate=always: one probe at mount" $((before + 1)) "$(origin_requests)"
umount_pacefs "$MNT"

for bad in "cache_size=12Q" "cache_sync=sometimes" "revalidate=often"; do
	rc=0
	"$PACEFS" -o "cache_dir=$CACHE,$bad" "$ORIGIN_URL/big.bin" "$MNT" 2>"$T_TMP/err" || rc=$?
	if [ "$rc" -eq 1 ] && grep -q "option ${bad%%=*}" "$T_TMP/err"; then
		t_pass "bad $bad: $(cat "$T_TMP/err")"
	else
		t_fail "bad $bad" "exit $rc: $(cat "$T_TMP/err")"
	fi
done
t_done

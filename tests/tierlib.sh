# tierlib.sh: what the tier products' tests (tests/mount/tier{squid,
# varnish,ats}.sh) share, sourced after tests/lib.sh: a far origin with
# one blob, and two machines (mounts with caches of their own) reading it
# one after the other through a proxy.

# tier_origin: a 32 MiB blob, old (a heuristic freshness keeps it, as a
# dataset's file), behind a pacefs-origin 20 ms away at 8 MB/s a
# connection; sets SIZE, WWW, ORIG and OLOG.
tier_origin() {
	SIZE=$((32 * 1048576))
	WWW=$T_TMP/www
	mkdir -p "$WWW"
	gen_file "$WWW/blob.bin" "$SIZE" 2403
	touch -d '2024-01-01 00:00:00' "$WWW/blob.bin"
	o_start origin --root "$WWW" --latency 20 --rate 8M
	ORIG=$O_URL
	OLOG=$O_LOG
}

# tier_origin_bytes: the body bytes the origin has sent so far.
tier_origin_bytes() {
	log_bytes "$OLOG"
}

# tier_two_machines NAME PROXY_URL HITS: two mounts (-o chunk=1M,
# proxy=PROXY_URL) read the blob whole one after the other, every byte
# compared; with HITS=hits the second's answers must all be hits (its
# status counts no miss); the origin must send the blob once (2% allowed).
tier_two_machines() {
	local name=$1 proxy=$2 hits=$3 b0 sent m st misses
	b0=$(tier_origin_bytes)
	for m in 1 2; do
		mkdir -p "$T_TMP/s$m" "$T_TMP/s$m.cache"
		fg_mount "$T_TMP/s$m.log" -o "cache_dir=$T_TMP/s$m.cache,chunk=1M,proxy=$proxy" \
			"$ORIG/blob.bin" "$T_TMP/s$m"
		t_check "$name: machine $m reads every byte" \
			"$READCMP" seq "$T_TMP/s$m/blob.bin" "$WWW/blob.bin"
		if [ "$m" -eq 2 ] && [ "$hits" = hits ]; then
			st=$("$PACEFS" status --json "$T_TMP/s2")
			misses=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["proxies"][0]["misses"])' <<<"$st")
			t_eq "$name: the second machine's answers are hits (no miss)" "$misses" 0
		fi
		umount_pacefs "$T_TMP/s$m"
	done
	sent=$(($(tier_origin_bytes) - b0))
	echo "$name: origin sent $sent bytes for $SIZE ($(echo "scale=3; $sent / $SIZE" | bc)x)"
	if [ "$sent" -le $((SIZE + SIZE / 50)) ]; then
		t_pass "$name: the origin sends the blob once ($sent bytes for $SIZE)"
	else
		t_fail "$name: the origin sends the blob once" "origin sent $sent bytes for a $SIZE-byte blob"
	fi
}

/* read: block reads: from the write queue, else from data.mdb with pread
 * (not through the map), each chunk checked against its checksum before a
 * byte of it is served; a block that fails is dropped. */
#include "cache/cache_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

/* pread copies from the page cache without mapping the pages into the
 * process: a stream read back through the map grows the RSS by every page
 * it touches, which the kernel drops only under pressure. One preadv reads
 * a block and its checksums. */
void cache__value_read(const struct cache *c, const void *p, size_t voff,
		       void *a, size_t na, void *b, size_t nb)
{
	const unsigned char *src = (const unsigned char *)p + voff;
	size_t done = 0, total = na + nb;

	if (c->data_fd >= 0 && c->map_base && src >= c->map_base &&
	    (size_t)(src - c->map_base) + total <= c->map_len) {
		off_t off = (off_t)(src - c->map_base);

		while (done < total) {
			struct iovec iov[2];
			int niov = 0;
			ssize_t got;

			if (done < na) {
				iov[niov].iov_base = (char *)a + done;
				iov[niov++].iov_len = na - done;
			}
			if (nb) {
				size_t bo = done > na ? done - na : 0;

				iov[niov].iov_base = (char *)b + bo;
				iov[niov++].iov_len = nb - bo;
			}
			got = preadv(c->data_fd, iov, niov, off + (off_t)done);
			if (got <= 0)
				break;
			done += (size_t)got;
		}
	}
	if (done < na)
		memcpy((char *)a + done, src + done, na - done);
	if (done < total) {
		size_t bo = done > na ? done - na : 0;

		memcpy((char *)b + bo, src + na + bo, nb - bo);
	}
}

bool cache__value_ok(const struct cache *c, const struct cache_id *id,
		     uint64_t index, const MDB_val *v, unsigned char *scratch)
{
	size_t blen;

	if (!cache__sum_block_len(v->mv_size, &blen))
		return false;
	cache__value_read(c, v->mv_data, 0, scratch, v->mv_size, NULL, 0);
	return cache__sum_ok(cache__sum_seed(id, index), 0, scratch, blen,
			     scratch + blen);
}

/* Copies n bytes from byte off of the stored block (id, index) of blen
 * bytes whose value LMDB returned at p into buf, checking the chunks they
 * lie in. A range of whole chunks is read straight into buf with its
 * checksums (one preadv for a whole block); another one through scratch
 * memory. Returns whether a chunk failed (buf then holds unchecked
 * bytes: the caller must not use them). */
static bool cache__block_copy(const struct cache *c, const struct cache_id *id,
			      uint64_t index, const void *p, size_t blen,
			      size_t off, size_t n, void *buf)
{
	unsigned char sums[CACHE__SUM_LEN *
			   (CACHE_BLOCK_SIZE / CACHE__SUM_CHUNK + 1)];
	unsigned char small[2 * CACHE__SUM_CHUNK];
	size_t first = off / CACHE__SUM_CHUNK;
	size_t last = (off + n - 1) / CACHE__SUM_CHUNK;
	size_t start = first * CACHE__SUM_CHUNK;
	size_t end = (last + 1) * CACHE__SUM_CHUNK < blen
			     ? (last + 1) * CACHE__SUM_CHUNK
			     : blen;
	size_t nsums = (last - first + 1) * CACHE__SUM_LEN;
	unsigned char *dst = buf;
	bool ok;

	if (start != off || end != off + n) {
		dst = end - start <= sizeof(small) ? small
						   : malloc(end - start);
		if (!dst)
			return true; /* cannot check: not served */
	}
	if (first == 0 && end == blen) /* the block, then its checksums */
		cache__value_read(c, p, start, dst, end - start, sums, nsums);
	else {
		cache__value_read(c, p, start, dst, end - start, NULL, 0);
		cache__value_read(c, p, blen + first * CACHE__SUM_LEN, sums,
				  nsums, NULL, 0);
	}
	ok = cache__sum_ok(cache__sum_seed(id, index), first, dst, end - start,
			   sums);
	if (dst != buf) {
		if (ok)
			memcpy(buf, dst + (off - start), n);
		if (dst != small)
			free(dst);
	}
	return !ok;
}

int cache__block_bad(struct cache *c, const struct cache_id *id, uint64_t index)
{
	unsigned char key[CACHE__BLOCK_KEY_LEN];
	MDB_val k = {.mv_size = sizeof(key), .mv_data = key}, v;
	unsigned char *scratch = malloc(CACHE__VALUE_MAX);
	char hex[2 * CACHE_ID_LEN + 1];
	const char *step = "begin";
	MDB_txn *txn = NULL;
	bool found = false;
	int rc;

	if (!scratch)
		return -ENOMEM;
	rc = mdb_txn_begin(c->env, NULL, 0, &txn);
	if (rc)
		goto out;
	step = "read block";
	cache__key(key, id, index);
	rc = mdb_get(txn, c->dbi_blocks, &k, &v);
	if (rc == MDB_NOTFOUND ||
	    (rc == 0 && cache__value_ok(c, id, index, &v, scratch))) {
		rc = 0; /* gone or replaced since: nothing to drop */
		goto out;
	}
	if (rc)
		goto out;
	step = "remove block";
	rc = cache__block_remove(c, txn, id, index, &found);
	if (rc == 0 && found)
		rc = cache__record_unverify(c, txn, id);
	if (rc)
		goto out;
	step = "commit";
	rc = mdb_txn_commit(txn);
	txn = NULL;
	if (rc == 0) {
		cache_id_to_hex(id, hex);
		cache__log(c, CACHE_LOG_ERR,
			   "%s: blob %s block %" PRIu64
			   ": checksum mismatch in data.mdb (damaged on "
			   "disk); dropped, to be fetched again",
			   c->dir, hex, index);
	}
out:
	if (txn)
		mdb_txn_abort(txn);
	free(scratch);
	if (rc) {
		cache__log(c, CACHE_LOG_ERR,
			   "%s: drop a block that failed its checksum: %s: %s",
			   c->dir, step, mdb_strerror(rc));
		return cache__errno(rc);
	}
	return -ENOENT;
}

long cache_block_read(struct cache *c, const struct cache_id *id,
		      uint64_t index, size_t off, void *buf, size_t len)
{
	unsigned char key[CACHE__BLOCK_KEY_LEN];
	MDB_val k = {.mv_size = sizeof(key), .mv_data = key}, v;
	MDB_txn *txn = NULL;
	size_t blen = 0;
	bool bad = false;
	long n;
	int rc;

	if (!c || !id || (!buf && len))
		return -EINVAL;
	n = cache__queue_read(c, id, index, off, buf, len);
	if (n != -ENOENT)
		return n;

	/* Not queued: either committed before the lookup above (so visible to
	 * a transaction begun now) or not held. */
	rc = cache__rtxn_get(c, &txn);
	if (rc) {
		cache__log(c, CACHE_LOG_ERR, "%s: read block: begin: %s",
			   c->dir, mdb_strerror(rc));
		return cache__errno(rc);
	}
	cache__key(key, id, index);
	rc = mdb_get(txn, c->dbi_blocks, &k, &v);
	if (rc == 0 && !cache__sum_block_len(v.mv_size, &blen)) {
		n = 0;
		bad = true;
	} else if (rc == 0) {
		n = 0;
		if (off < blen) {
			n = (long)(blen - off < len ? blen - off : len);
			bad = cache__block_copy(c, id, index, v.mv_data, blen,
						off, (size_t)n, buf);
			if (bad)
				memset(buf, 0, (size_t)n);
		}
	} else if (rc == MDB_NOTFOUND) {
		n = -ENOENT;
	} else {
		cache__log(c, CACHE_LOG_ERR, "%s: read block: %s", c->dir,
			   mdb_strerror(rc));
		n = cache__errno(rc);
	}
	cache__rtxn_put(c, txn);
	if (bad)
		n = cache__block_bad(c, id, index);
	return n;
}

/* cache_blocks_serve checks pieces through the map, and the pages it
 * touches stay mapped, counting in the daemon's RSS, until they are
 * unmapped (cache__map_unmap_pages). Unmapping after every reply cost more
 * than the copy splicing saves (a TLB shootdown on every core the daemon
 * runs on, docs/cache-notes.md); so the whole map is unmapped once this
 * many bytes have been served through it. */
#define CACHE__SERVE_UNMAP (32u << 20)

/* Resolves piece p of a block whose stored value LMDB returned as v, in
 * the caller's read transaction: checks the chunks it touches and either
 * leaves it in the data file (fds) or copies it into p->buf. Returns 0,
 * -EBADMSG (a chunk failed: the block is bad), -EIO (shorter than p). */
static int cache__piece_resolve(const struct cache *c,
				const struct cache_id *id,
				struct cache_piece *p, const MDB_val *v,
				bool fds, size_t *mapped)
{
	const unsigned char *val = v->mv_data;
	size_t blen, first, last, start, end;

	if (!cache__sum_block_len(v->mv_size, &blen))
		return -EBADMSG;
	if (p->off > blen || blen - p->off < p->len)
		return -EIO;
	if (p->len == 0) {
		p->mem = p->buf;
		return 0;
	}
	if (!fds || c->data_fd < 0 || !c->map_base || val < c->map_base ||
	    (size_t)(val - c->map_base) + v->mv_size > c->map_len) {
		if (cache__block_copy(c, id, p->index, val, blen, p->off,
				      p->len, p->buf))
			return -EBADMSG;
		p->mem = p->buf;
		return 0;
	}
	/* Checked where they lie, through the map: no copy. */
	first = p->off / CACHE__SUM_CHUNK;
	last = (p->off + p->len - 1) / CACHE__SUM_CHUNK;
	start = first * CACHE__SUM_CHUNK;
	end = (last + 1) * CACHE__SUM_CHUNK < blen
		      ? (last + 1) * CACHE__SUM_CHUNK
		      : blen;
	if (!cache__sum_ok(cache__sum_seed(id, p->index), first, val + start,
			   end - start, val + blen + first * CACHE__SUM_LEN))
		return -EBADMSG;
	*mapped += end - start;
	p->mem = NULL;
	p->fd = c->data_fd;
	p->pos = (uint64_t)(val - c->map_base) + p->off;
	return 0;
}

int cache_blocks_serve(struct cache *c, const struct cache_id *id,
		       struct cache_piece *p, size_t n, bool fds,
		       int (*fn)(void *ctx, struct cache_piece *p, size_t n),
		       void *ctx, uint64_t *missing)
{
	unsigned char key[CACHE__BLOCK_KEY_LEN];
	MDB_val k = {.mv_size = sizeof(key), .mv_data = key}, v;
	size_t mapped = 0;
	MDB_txn *txn = NULL;
	bool committed = false;
	uint64_t bad = UINT64_MAX;
	int rc = 0;

	if (!c || !id || !fn || !missing || (n && !p))
		return -EINVAL;
	/* The queue first: a block not queued now was committed before (so a
	 * transaction begun after sees it) or is not held. */
	for (size_t i = 0; i < n; i++) {
		long got;

		if (p[i].mem)
			continue;
		p[i].fd = -1;
		got = cache__queue_read(c, id, p[i].index, p[i].off, p[i].buf,
					p[i].len);
		if (got == -ENOENT) {
			committed = true;
			continue;
		}
		if (got < 0 || (size_t)got != p[i].len) {
			*missing = p[i].index;
			return got < 0 ? (int)got : -EIO;
		}
		p[i].mem = p[i].buf;
	}
	if (committed) {
		rc = cache__rtxn_get(c, &txn);
		if (rc) {
			cache__log(c, CACHE_LOG_ERR,
				   "%s: read block: begin: %s", c->dir,
				   mdb_strerror(rc));
			return cache__errno(rc);
		}
	}
	for (size_t i = 0; committed && i < n && rc == 0; i++) {
		if (p[i].mem)
			continue;
		cache__key(key, id, p[i].index);
		rc = mdb_get(txn, c->dbi_blocks, &k, &v);
		if (rc == MDB_NOTFOUND) {
			*missing = p[i].index;
			rc = -ENOENT;
		} else if (rc) {
			cache__log(c, CACHE_LOG_ERR, "%s: read block: %s",
				   c->dir, mdb_strerror(rc));
			*missing = p[i].index;
			rc = cache__errno(rc);
		} else {
			rc = cache__piece_resolve(c, id, &p[i], &v, fds,
						  &mapped);
			if (rc == -EBADMSG)
				bad = p[i].index;
			if (rc == -EIO)
				cache__log(c, CACHE_LOG_ERR,
					   "%s: block %" PRIu64
					   " is shorter than its reader asks",
					   c->dir, p[i].index);
			if (rc)
				*missing = p[i].index;
		}
	}
	if (rc == 0)
		rc = fn(ctx, p, n);
	if (txn)
		cache__rtxn_put(c, txn);
	if (mapped) {
		uint64_t before = atomic_fetch_add_explicit(
			&c->map_served, mapped, memory_order_relaxed);

		if (before % CACHE__SERVE_UNMAP + mapped >= CACHE__SERVE_UNMAP)
			cache__map_unmap_pages(c);
	}
	if (bad != UINT64_MAX)
		rc = cache__block_bad(c, id, bad);
	return rc;
}

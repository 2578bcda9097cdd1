/* extent: the extent map, which says what bytes of a blob the cache holds:
 * merged on commit, cut on removal, walked by readers and by the checks. */
#include "cache/cache_int.h"

#include <errno.h>
#include <inttypes.h>

/* Writes the extent [start, end) of id. MDB code. */
static int cache__extent_put(MDB_txn *txn, MDB_dbi dbi,
			     const struct cache_id *id, uint64_t start,
			     uint64_t end)
{
	unsigned char key[CACHE__EXTENT_KEY_LEN], val[8];
	MDB_val k = {.mv_size = sizeof(key), .mv_data = key};
	MDB_val v = {.mv_size = sizeof(val), .mv_data = val};

	cache__key(key, id, start);
	cache__be64_put(val, end);
	return mdb_put(txn, dbi, &k, &v, 0);
}

/* Absorbs the extent that reaches start from below and every extent that
 * starts at or before the (growing) end, then writes the union as one
 * extent. A malformed extent (a value not of 8 bytes) starting inside
 * the union is deleted with the others. */
int cache__extent_merge(MDB_txn *txn, MDB_dbi dbi, const struct cache_id *id,
			uint64_t start, uint64_t end)
{
	unsigned char key[CACHE__EXTENT_KEY_LEN];
	MDB_cursor *cur = NULL;
	MDB_val k, v;
	int rc;

	rc = mdb_cursor_open(txn, dbi, &cur);
	if (rc)
		return rc;
	cache__key(key, id, start);
	k.mv_size = sizeof(key);
	k.mv_data = key;
	rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
	if (rc == 0 || rc == MDB_NOTFOUND) {
		/* The extent before the first one at or after start. */
		int prc = rc == 0 ? mdb_cursor_get(cur, &k, &v, MDB_PREV)
				  : mdb_cursor_get(cur, &k, &v, MDB_LAST);
		if (prc == 0 && cache__key_is(&k, id) && v.mv_size == 8) {
			uint64_t ps = cache__key_n(&k);
			uint64_t pe = cache__be64_get(v.mv_data);
			if (pe >= start) {
				if (pe >= end) {
					rc = 0; /* already held */
					goto out;
				}
				start = ps;
			}
		} else if (prc != 0 && prc != MDB_NOTFOUND) {
			rc = prc;
			goto out;
		}
	} else {
		goto out;
	}

	/* Delete every extent of id starting in [start, end]. */
	cache__key(key, id, start);
	k.mv_size = sizeof(key);
	k.mv_data = key;
	rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
	while (rc == 0 && cache__key_is(&k, id) && cache__key_n(&k) <= end) {
		if (v.mv_size == 8) {
			uint64_t e2 = cache__be64_get(v.mv_data);
			if (e2 > end)
				end = e2;
		}
		rc = mdb_cursor_del(cur, 0);
		if (rc)
			goto out;
		/* Seek again rather than trust the cursor after a delete. */
		k.mv_size = sizeof(key);
		k.mv_data = key;
		rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
	}
	if (rc != 0 && rc != MDB_NOTFOUND)
		goto out;

	rc = cache__extent_put(txn, dbi, id, start, end);
out:
	mdb_cursor_close(cur);
	return rc;
}

/* The cache stops claiming the bytes of a block in the transaction that
 * deletes it: splits the extent that holds them. */
int cache__extent_cut(MDB_txn *txn, MDB_dbi dbi, const struct cache_id *id,
		      uint64_t s, uint64_t e)
{
	unsigned char key[CACHE__EXTENT_KEY_LEN];
	MDB_cursor *cur = NULL;
	MDB_val k = {.mv_size = sizeof(key), .mv_data = key}, v;
	uint64_t a = 0, b = 0;
	bool found = false;
	int rc;

	rc = mdb_cursor_open(txn, dbi, &cur);
	if (rc)
		return rc;
	cache__key(key, id, s);
	rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
	if (rc == 0 && cache__key_is(&k, id) && cache__key_n(&k) == s) {
		found = true;
	} else if (rc == 0 || rc == MDB_NOTFOUND) {
		rc = mdb_cursor_get(cur, &k, &v, rc == 0 ? MDB_PREV : MDB_LAST);
		found = rc == 0 && cache__key_is(&k, id);
		if (rc == MDB_NOTFOUND)
			rc = 0;
	}
	if (rc)
		goto out;
	if (found && v.mv_size == 8) {
		a = cache__key_n(&k);
		b = cache__be64_get(v.mv_data);
		found = a <= s && s < b;
	} else {
		found = false;
	}
	if (!found)
		goto out; /* not claimed: nothing to cut */
	rc = mdb_cursor_del(cur, 0);
	if (rc)
		goto out;
	if (a < s) {
		rc = cache__extent_put(txn, dbi, id, a, s);
		if (rc)
			goto out;
	}
	if (e < b)
		rc = cache__extent_put(txn, dbi, id, e, b);
out:
	mdb_cursor_close(cur);
	return rc;
}

struct cache__ext_walk {
	struct cache *c;
	const struct cache_id *id;
	int (*fn)(void *ctx, uint64_t start, uint64_t end);
	void *ctx;
	bool malformed;
};

static int cache__ext_one(void *ctx, const MDB_val *k, const MDB_val *v)
{
	struct cache__ext_walk *w = ctx;
	char hex[2 * CACHE_ID_LEN + 1];

	if (v->mv_size == 8)
		return w->fn(w->ctx, cache__key_n(k),
			     cache__be64_get(v->mv_data));
	cache_id_to_hex(w->id, hex);
	cache__log(w->c, CACHE_LOG_ERR,
		   "%s: blob %s: the extent at byte %" PRIu64
		   " is malformed (a value of %zu bytes, not 8): the blob's "
		   "extent map is damaged; evict the blob to fetch it again",
		   w->c->dir, hex, cache__key_n(k), v->mv_size);
	w->malformed = true;
	return 1;
}

int cache__extents_walk(struct cache *c, MDB_txn *txn,
			const struct cache_id *id,
			int (*fn)(void *ctx, uint64_t start, uint64_t end),
			void *ctx, int *stopped)
{
	struct cache__ext_walk w = {.c = c, .id = id, .fn = fn, .ctx = ctx};
	char hex[2 * CACHE_ID_LEN + 1];
	int rc;

	rc = cache__db_walk(txn, c->dbi_extents, id, cache__ext_one, &w,
			    stopped);
	if (w.malformed) {
		*stopped = 0;
		return MDB_CORRUPTED;
	}
	if (rc) {
		cache_id_to_hex(id, hex);
		cache__log(c, CACHE_LOG_ERR, "%s: blob %s: read extents: %s",
			   c->dir, hex, mdb_strerror(rc));
	}
	return rc;
}

int cache_extents_each(struct cache *c, const struct cache_id *id,
		       int (*fn)(void *ctx, uint64_t start, uint64_t end),
		       void *ctx)
{
	MDB_txn *txn = NULL;
	int rc, stopped = 0;

	if (!c || !id || !fn)
		return -EINVAL;
	rc = cache__rtxn_get(c, &txn);
	if (rc) {
		cache__log(c, CACHE_LOG_ERR, "%s: read extents: begin: %s",
			   c->dir, mdb_strerror(rc));
		return cache__errno(rc);
	}
	rc = cache__extents_walk(c, txn, id, fn, ctx, &stopped);
	cache__rtxn_put(c, txn);
	return rc ? cache__errno(rc) : stopped;
}

static int cache__sum_extent(void *ctx, uint64_t start, uint64_t end)
{
	*(uint64_t *)ctx += end - start;
	return 0;
}

int cache_blob_held(struct cache *c, const struct cache_id *id, uint64_t *bytes)
{
	uint64_t sum = 0;
	int rc;

	if (!bytes)
		return -EINVAL;
	rc = cache_extents_each(c, id, cache__sum_extent, &sum);
	if (rc == 0)
		*bytes = sum;
	return rc;
}

struct cache__check {
	struct cache *c;
	MDB_txn *txn;
	const struct cache_id *id;
	uint64_t uncovered;
};

/* Counts the blocks of extent [a, b) that are missing or too short; stops
 * the walk with an MDB code on an error. */
static int cache__check_extent(void *ctx, uint64_t a, uint64_t b)
{
	struct cache__check *k = ctx;
	unsigned char key[CACHE__BLOCK_KEY_LEN];
	MDB_val bk = {.mv_size = sizeof(key), .mv_data = key}, bv;

	for (uint64_t i = a / CACHE_BLOCK_SIZE; i * CACHE_BLOCK_SIZE < b; i++) {
		uint64_t need = b - i * CACHE_BLOCK_SIZE;
		size_t blen = 0;
		int rc;

		if (need > CACHE_BLOCK_SIZE)
			need = CACHE_BLOCK_SIZE;
		cache__key(key, k->id, i);
		rc = mdb_get(k->txn, k->c->dbi_blocks, &bk, &bv);
		if (rc == MDB_NOTFOUND ||
		    (rc == 0 &&
		     (!cache__sum_block_len(bv.mv_size, &blen) || blen < need)))
			k->uncovered++;
		else if (rc)
			return rc;
	}
	return 0;
}

int cache_blob_check(struct cache *c, const struct cache_id *id,
		     uint64_t *uncovered)
{
	struct cache__check k = {.c = c, .id = id};
	int rc, stopped = 0;

	if (!c || !id || !uncovered)
		return -EINVAL;
	rc = cache__rtxn_get(c, &k.txn);
	if (rc) {
		cache__log(c, CACHE_LOG_ERR, "%s: check: begin: %s", c->dir,
			   mdb_strerror(rc));
		return cache__errno(rc);
	}
	rc = cache__extents_walk(c, k.txn, id, cache__check_extent, &k,
				 &stopped);
	cache__rtxn_put(c, k.txn);
	if (rc == 0 && stopped) {
		cache__log(c, CACHE_LOG_ERR, "%s: check: read blocks: %s",
			   c->dir, mdb_strerror(stopped));
		rc = stopped;
	}
	if (rc)
		return cache__errno(rc);
	*uncovered = k.uncovered;
	return 0;
}

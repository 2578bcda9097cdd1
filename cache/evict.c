/* evict: what leaves the cache and in which order: access ticks and the
 * LRU order, pins, eviction under the budget, and the removal of blocks
 * and blobs on request. */
#include "cache/cache_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Eviction per commit looks at most at this many LRU entries (pinned ones
 * are skipped). */
#define CACHE__EVICT_SCAN_MAX 65536

struct cache__pin {
	struct cache_id id;
	uint64_t slot, start, end;
};

/* Small: read by the writer for each eviction candidate, written by
 * readers. */
struct cache__pins {
	pthread_mutex_t mu;
	struct cache__pin *v; /* guarded by mu */
	size_t n, cap;	      /* guarded by mu */
};

/* ---- access ticks ---- */

int cache__access_set(struct cache *c, MDB_txn *txn, const struct cache_id *id,
		      uint64_t index, uint64_t tick, bool only_present)
{
	unsigned char ak[CACHE__BLOCK_KEY_LEN], lk[CACHE__LRU_KEY_LEN], tv[8];
	MDB_val k = {.mv_size = sizeof(ak), .mv_data = ak};
	MDB_val lkv = {.mv_size = sizeof(lk), .mv_data = lk};
	MDB_val empty = {.mv_size = 0, .mv_data = tv};
	MDB_val v;
	int rc;

	cache__key(ak, id, index);
	rc = mdb_get(txn, c->dbi_access, &k, &v);
	if (rc == 0 && v.mv_size == 8) {
		uint64_t old = cache__be64_get(v.mv_data);

		if (old >= tick)
			return 0;
		cache__lru_key(lk, old, id, index);
		rc = mdb_del(txn, c->dbi_lru, &lkv, NULL);
		if (rc && rc != MDB_NOTFOUND)
			return rc;
	} else if (rc == 0 || rc == MDB_NOTFOUND) {
		if (only_present)
			return 0;
	} else {
		return rc;
	}
	cache__lru_key(lk, tick, id, index);
	rc = mdb_put(txn, c->dbi_lru, &lkv, &empty, 0);
	if (rc)
		return rc;
	cache__be64_put(tv, tick);
	v.mv_size = 8;
	v.mv_data = tv;
	k.mv_size = sizeof(ak);
	k.mv_data = ak;
	return mdb_put(txn, c->dbi_access, &k, &v, 0);
}

/* Deletes the lru entry that the access entry (id, index) -> v points
 * to. */
static int cache__lru_del(struct cache *c, MDB_txn *txn,
			  const struct cache_id *id, uint64_t index,
			  const MDB_val *v)
{
	unsigned char lk[CACHE__LRU_KEY_LEN];
	MDB_val lkv = {.mv_size = sizeof(lk), .mv_data = lk};
	int rc;

	if (v->mv_size != 8)
		return 0;
	cache__lru_key(lk, cache__be64_get(v->mv_data), id, index);
	rc = mdb_del(txn, c->dbi_lru, &lkv, NULL);
	return rc == MDB_NOTFOUND ? 0 : rc;
}

/* ---- removal ---- */

int cache__value_freeable(struct cache *c, const MDB_val *v)
{
	/* The header of the first overflow page, whose page count LMDB
	 * trusts when it frees them, was not read at open (one scattered
	 * read per block; envcheck.c). */
	if (cache__ov_ok(c->data_fd, c->map_base, c->map_len, c->psize,
			 v->mv_data, v->mv_size) == 0)
		return 0;
	cache__log(c, CACHE_LOG_ERR,
		   "%s: data.mdb is damaged: a block's overflow page header "
		   "is wrong, so it is not freed; remove %s/data.mdb and "
		   "%s/lock.mdb (the bytes are fetched again)",
		   c->dir, c->dir, c->dir);
	return MDB_CORRUPTED;
}

int cache__block_remove(struct cache *c, MDB_txn *txn,
			const struct cache_id *id, uint64_t index, bool *found)
{
	unsigned char key[CACHE__BLOCK_KEY_LEN];
	MDB_val k = {.mv_size = sizeof(key), .mv_data = key}, v;
	size_t len = 0;
	int rc;

	*found = false;
	cache__key(key, id, index);
	rc = mdb_get(txn, c->dbi_blocks, &k, &v);
	if (rc == 0)
		rc = cache__value_freeable(c, &v);
	if (rc == MDB_CORRUPTED)
		return rc;
	if (rc == 0) {
		/* A damaged value: its bytes leave the extents whole. */
		if (!cache__sum_block_len(v.mv_size, &len))
			len = CACHE_BLOCK_SIZE;
		*found = true;
		rc = mdb_del(txn, c->dbi_blocks, &k, NULL);
	} else if (rc == MDB_NOTFOUND) {
		rc = 0;
	}
	if (rc)
		return rc;
	k.mv_size = sizeof(key);
	k.mv_data = key;
	rc = mdb_get(txn, c->dbi_access, &k, &v);
	if (rc == 0)
		rc = cache__lru_del(c, txn, id, index, &v);
	if (rc == 0)
		rc = mdb_del(txn, c->dbi_access, &k, NULL);
	if (rc == MDB_NOTFOUND)
		rc = 0;
	if (rc || !*found)
		return rc;
	return cache__extent_cut(txn, c->dbi_extents, id,
				 index * CACHE_BLOCK_SIZE,
				 index * CACHE_BLOCK_SIZE + len);
}

struct cache__drop {
	struct cache *c;
	MDB_txn *txn;
	const struct cache_id *id;
};

/* Before an access entry of the dropped blob goes: its lru entry. */
static int cache__drop_lru(void *ctx, const MDB_val *k, const MDB_val *v)
{
	struct cache__drop *d = ctx;

	return cache__lru_del(d->c, d->txn, d->id, cache__key_n(k), v);
}

/* Before a block of the dropped blob goes: LMDB may free its pages. */
static int cache__drop_block(void *ctx, const MDB_val *k, const MDB_val *v)
{
	struct cache__drop *d = ctx;

	(void)k;
	return cache__value_freeable(d->c, v);
}

int cache_blob_drop(struct cache *c, const struct cache_id *id)
{
	struct cache__drop d = {.c = c, .id = id};
	const char *step = "begin";
	int rc;

	if (!c || !id)
		return -EINVAL;
	cache__queue_remove(c, id, 0, UINT64_MAX);

	MDB_val k = {.mv_size = CACHE_ID_LEN, .mv_data = (void *)id->b};
	rc = mdb_txn_begin(c->env, NULL, 0, &d.txn);
	if (rc == 0) {
		step = "delete record";
		rc = mdb_del(d.txn, c->dbi_blobs, &k, NULL);
		if (rc == MDB_NOTFOUND)
			rc = 0;
	}
	if (rc == 0) {
		step = "delete access times";
		rc = cache__db_delete(d.txn, c->dbi_access, id, cache__drop_lru,
				      &d);
	}
	if (rc == 0) {
		step = "delete extents";
		rc = cache__db_delete(d.txn, c->dbi_extents, id, NULL, NULL);
	}
	if (rc == 0) {
		step = "delete blocks";
		rc = cache__db_delete(d.txn, c->dbi_blocks, id,
				      cache__drop_block, &d);
	}
	return cache__txn_finish(c, d.txn, rc, "drop blob", step);
}

int cache_blocks_evict(struct cache *c, const struct cache_id *id,
		       uint64_t first, uint64_t count)
{
	MDB_txn *txn = NULL;
	const char *step = "begin";
	bool any = false, found;
	int rc;

	if (!c || !id || count > UINT64_MAX - first)
		return -EINVAL;
	cache__queue_remove(c, id, first, count);

	rc = mdb_txn_begin(c->env, NULL, 0, &txn);
	if (rc == 0)
		step = "remove blocks";
	for (uint64_t i = 0; rc == 0 && i < count; i++) {
		rc = cache__block_remove(c, txn, id, first + i, &found);
		any |= found;
	}
	if (rc == 0 && any) {
		step = "update record";
		rc = cache__record_unverify(c, txn, id);
	}
	return cache__txn_finish(c, txn, rc, "evict blocks", step);
}

/* ---- pins ---- */

struct cache__pins *cache__pins_new(void)
{
	struct cache__pins *p = calloc(1, sizeof(*p));

	if (p)
		pthread_mutex_init(&p->mu, NULL);
	return p;
}

void cache__pins_free(struct cache__pins *p)
{
	if (!p)
		return;
	pthread_mutex_destroy(&p->mu);
	free(p->v);
	free(p);
}

int cache_pin_set(struct cache *c, const struct cache_id *id, uint64_t slot,
		  uint64_t start, uint64_t end)
{
	struct cache__pins *p;
	size_t i = 0;
	int rc = 0;

	if (!c || !id)
		return -EINVAL;
	p = c->pins;
	pthread_mutex_lock(&p->mu);
	while (i < p->n &&
	       (p->v[i].slot != slot || !cache__id_eq(&p->v[i].id, id)))
		i++;
	if (start >= end) {
		if (i < p->n)
			p->v[i] = p->v[--p->n];
		goto out;
	}
	if (i == p->n) {
		if (p->n == p->cap) {
			size_t cap = p->cap ? p->cap * 2 : 16;
			struct cache__pin *v = realloc(p->v, cap * sizeof(*v));

			if (!v) {
				rc = -ENOMEM;
				goto out;
			}
			p->v = v;
			p->cap = cap;
		}
		p->v[i].id = *id;
		p->v[i].slot = slot;
		p->n++;
	}
	p->v[i].start = start;
	p->v[i].end = end;
out:
	pthread_mutex_unlock(&p->mu);
	return rc;
}

/* Whether a pin covers any byte of block (id, index). */
static bool cache__pinned(struct cache *c, const struct cache_id *id,
			  uint64_t index)
{
	struct cache__pins *p = c->pins;
	uint64_t s = index * CACHE_BLOCK_SIZE, e = s + CACHE_BLOCK_SIZE;
	bool pinned = false;

	pthread_mutex_lock(&p->mu);
	for (size_t i = 0; i < p->n && !pinned; i++)
		pinned = cache__id_eq(&p->v[i].id, id) && p->v[i].start < e &&
			 s < p->v[i].end;
	pthread_mutex_unlock(&p->mu);
	return pinned;
}

/* ---- eviction under the budget ---- */

/* Adds 1 to a big-endian key: the first key after it. */
static void cache__key_inc(unsigned char *key, size_t len)
{
	for (size_t i = len; i-- > 0;)
		if (++key[i] != 0)
			break;
}

int cache__evict(struct cache *c, MDB_txn *txn, uint64_t budget, uint64_t tick,
		 struct cache__evicted *out, int *n)
{
	unsigned char pos[CACHE__LRU_KEY_LEN];
	MDB_cursor *cur = NULL;
	MDB_stat st;
	MDB_val k, v;
	uint64_t entries;
	int rc, scanned = 0;

	rc = mdb_stat(txn, c->dbi_blocks, &st);
	if (rc)
		return rc;
	entries = st.ms_entries;
	if (entries * CACHE_BLOCK_SIZE <= budget)
		return 0;
	rc = mdb_cursor_open(txn, c->dbi_lru, &cur);
	if (rc)
		return rc;
	memset(pos, 0, sizeof(pos));
	while (entries * CACHE_BLOCK_SIZE > budget && *n < CACHE__EVICT_MAX &&
	       scanned++ < CACHE__EVICT_SCAN_MAX) {
		struct cache_id id;
		uint64_t index;
		bool found;

		k.mv_size = sizeof(pos);
		k.mv_data = pos;
		/* Seek again each time: deletes went through other cursors. */
		rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
		if (rc)
			break;
		if (k.mv_size != CACHE__LRU_KEY_LEN) {
			rc = MDB_CORRUPTED;
			break;
		}
		memcpy(pos, k.mv_data, sizeof(pos));
		if (cache__be64_get(pos) >= tick)
			break; /* everything left is this commit's */
		memcpy(id.b, pos + 8, CACHE_ID_LEN);
		index = cache__be64_get(pos + 8 + CACHE_ID_LEN);
		if (cache__pinned(c, &id, index)) {
			cache__key_inc(pos, sizeof(pos));
			continue;
		}
		rc = cache__block_remove(c, txn, &id, index, &found);
		if (rc)
			break;
		/* An lru entry without its access entry would stay forever. */
		k.mv_size = sizeof(pos);
		k.mv_data = pos;
		rc = mdb_del(txn, c->dbi_lru, &k, NULL);
		if (rc && rc != MDB_NOTFOUND)
			break;
		rc = 0;
		if (!found)
			continue;
		entries--;
		if (*n == 0 || !cache__id_eq(&out[*n - 1].id, &id)) {
			rc = cache__record_unverify(c, txn, &id);
			if (rc)
				break;
		}
		out[*n].id = id;
		out[*n].index = index;
		(*n)++;
	}
	mdb_cursor_close(cur);
	return rc == MDB_NOTFOUND ? 0 : rc;
}

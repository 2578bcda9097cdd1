/* verify: integrity beyond the block checksums: per-block digests checked
 * as blocks are put, the whole-blob SHA-256, and the check of every stored
 * block's checksums for `pacefs cache verify`. */
#include "cache/cache_int.h"

#include <errno.h>
#include <inttypes.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CACHE__DIGEST_BLOCK_MIN 4096u
/* The most digest blocks one cache block holds. */
#define CACHE__DIGESTS_PER_BLOCK (CACHE_BLOCK_SIZE / CACHE__DIGEST_BLOCK_MIN)

/* Expected SHA-256 per digest block of one blob. */
struct cache__dg {
	struct cache_id id;
	uint64_t size;
	uint32_t dbs; /* digest block size */
	uint64_t n;
	uint8_t (*d)[CACHE_SHA256_LEN];
};

struct cache__digests {
	pthread_mutex_t mu;
	struct cache__dg *v; /* guarded by mu */
	size_t n, cap;	     /* guarded by mu */
	/* Held by a put of a blob whose digest blocks span several cache
	 * blocks, from the look at the other blocks until it is queued. */
	pthread_mutex_t put_mu;
};

struct cache__digests *cache__digests_new(void)
{
	struct cache__digests *d = calloc(1, sizeof(*d));

	if (d) {
		pthread_mutex_init(&d->mu, NULL);
		pthread_mutex_init(&d->put_mu, NULL);
	}
	return d;
}

void cache__digests_free(struct cache__digests *d)
{
	if (!d)
		return;
	for (size_t i = 0; i < d->n; i++)
		free(d->v[i].d);
	pthread_mutex_destroy(&d->put_mu);
	pthread_mutex_destroy(&d->mu);
	free(d->v);
	free(d);
}

/* The registered digests of id, or NULL. Called with d->mu held. */
static struct cache__dg *cache__dg_find(struct cache__digests *d,
					const struct cache_id *id)
{
	for (size_t i = 0; i < d->n; i++)
		if (cache__id_eq(&d->v[i].id, id))
			return &d->v[i];
	return NULL;
}

int cache_blob_digests_set(struct cache *c, const struct cache_id *id,
			   uint64_t blob_size, uint32_t digest_block_size,
			   const uint8_t (*digests)[CACHE_SHA256_LEN],
			   uint64_t n)
{
	uint32_t dbs = digest_block_size;
	uint8_t(*copy)[CACHE_SHA256_LEN] = NULL;
	struct cache__digests *d;
	struct cache__dg *dg;
	int rc = 0;

	if (!c || !id)
		return -EINVAL;
	if (n) {
		if (!digests || dbs < CACHE__DIGEST_BLOCK_MIN ||
		    (dbs <= CACHE_BLOCK_SIZE ? CACHE_BLOCK_SIZE % dbs
					     : dbs % CACHE_BLOCK_SIZE) ||
		    n != (blob_size + dbs - 1) / dbs ||
		    n > SIZE_MAX / CACHE_SHA256_LEN)
			return -EINVAL;
		copy = malloc((size_t)n * CACHE_SHA256_LEN);
		if (!copy)
			return -ENOMEM;
		memcpy(copy, digests, (size_t)n * CACHE_SHA256_LEN);
	}
	d = c->dg;
	pthread_mutex_lock(&d->mu);
	dg = cache__dg_find(d, id);
	if (!n) {
		if (dg) {
			free(dg->d);
			*dg = d->v[--d->n];
		}
		goto out;
	}
	if (!dg) {
		if (d->n == d->cap) {
			size_t cap = d->cap ? d->cap * 2 : 4;
			struct cache__dg *v = realloc(d->v, cap * sizeof(*v));

			if (!v) {
				free(copy);
				rc = -ENOMEM;
				goto out;
			}
			d->v = v;
			d->cap = cap;
		}
		dg = &d->v[d->n++];
		dg->id = *id;
		dg->d = NULL;
	}
	free(dg->d);
	dg->d = copy;
	dg->size = blob_size;
	dg->dbs = dbs;
	dg->n = n;
out:
	pthread_mutex_unlock(&d->mu);
	return rc;
}

/* ---- hashing bytes into digest blocks ---- */

/* Hashes a run of a blob's bytes, fed in order from the start of a digest
 * block, and compares each digest block with its expected SHA-256 as its
 * last byte passes: the one path by which the cache checks digest blocks,
 * whatever their size. */
struct cache__dgh {
	EVP_MD_CTX *ctx;
	uint64_t size;				 /* the blob's */
	uint32_t dbs;				 /* digest block size */
	const uint8_t (*want)[CACHE_SHA256_LEN]; /* from digest block first */
	uint64_t first, nwant;
	uint64_t pos;	    /* the next byte's offset in the blob */
	uint64_t nbad;	    /* digest blocks that did not match */
	uint64_t bad_first; /* the first of them */
	/* Optional: called for each digest block that does not match. */
	void (*on_bad)(void *ctx, uint64_t didx, uint64_t start, uint64_t end);
	void *bad_ctx;
	void *owned; /* freed with the hasher */
};

/* Starts at the first byte of digest block first; want[0..nwant) are the
 * digests from that one on. Returns 0 or -ENOMEM. */
static int cache__dgh_init(struct cache__dgh *h, uint64_t size, uint32_t dbs,
			   const uint8_t (*want)[CACHE_SHA256_LEN],
			   uint64_t first, uint64_t nwant)
{
	memset(h, 0, sizeof(*h));
	h->size = size;
	h->dbs = dbs;
	h->want = want;
	h->first = first;
	h->nwant = nwant;
	h->pos = first * dbs;
	h->ctx = EVP_MD_CTX_new();
	if (!h->ctx || EVP_DigestInit_ex(h->ctx, EVP_sha256(), NULL) != 1) {
		EVP_MD_CTX_free(h->ctx);
		h->ctx = NULL;
		return -ENOMEM;
	}
	return 0;
}

static void cache__dgh_done(struct cache__dgh *h)
{
	EVP_MD_CTX_free(h->ctx);
	h->ctx = NULL;
	free(h->owned);
	h->owned = NULL;
}

/* Notes a digest block that does not match. */
static void cache__dgh_bad(struct cache__dgh *h, uint64_t didx)
{
	if (h->nbad++ == 0)
		h->bad_first = didx;
}

/* Feeds the next n bytes. Bytes past the blob's end count as a mismatch
 * of a digest block past its last. */
static void cache__dgh_feed(struct cache__dgh *h, const void *data, size_t n)
{
	const unsigned char *p = data;

	while (n > 0) {
		uint64_t didx = h->pos / h->dbs;
		uint64_t start = didx * h->dbs, end = start + h->dbs;
		uint8_t got[CACHE_SHA256_LEN];
		unsigned int md_len = 0;
		bool ok;

		if (end > h->size)
			end = h->size;
		if (h->pos >= end) {
			cache__dgh_bad(h, didx);
			return;
		}
		size_t take = n < end - h->pos ? n : (size_t)(end - h->pos);
		EVP_DigestUpdate(h->ctx, p, take);
		p += take;
		n -= take;
		h->pos += take;
		if (h->pos < end)
			continue;
		ok = EVP_DigestFinal_ex(h->ctx, got, &md_len) == 1 &&
		     didx >= h->first && didx - h->first < h->nwant &&
		     memcmp(got, h->want[didx - h->first], sizeof(got)) == 0;
		EVP_DigestInit_ex(h->ctx, EVP_sha256(), NULL);
		if (ok)
			continue;
		cache__dgh_bad(h, didx);
		if (h->on_bad)
			h->on_bad(h->bad_ctx, didx, start, end);
	}
}

/* ---- the check of a put ---- */

/* Whether block (id, index) is held: queued, or else committed (looked up
 * after the queue, since a block leaves the queue once committed). */
static bool cache__block_held(struct cache *c, const struct cache_id *id,
			      uint64_t index)
{
	unsigned char key[CACHE__BLOCK_KEY_LEN];
	MDB_val k = {.mv_size = sizeof(key), .mv_data = key}, v;
	MDB_txn *txn = NULL;
	bool held;

	if (cache__queue_has(c, id, index))
		return true;
	if (cache__rtxn_get(c, &txn) != 0)
		return false;
	cache__key(key, id, index);
	held = mdb_get(txn, c->dbi_blocks, &k, &v) == 0;
	cache__rtxn_put(c, txn);
	return held;
}

/* The length of block index of a blob of size bytes. */
static size_t cache__block_len(uint64_t size, uint64_t index)
{
	uint64_t left = size - index * CACHE_BLOCK_SIZE;

	return left < CACHE_BLOCK_SIZE ? (size_t)left : CACHE_BLOCK_SIZE;
}

/* A digest block of k cache blocks [first, first + nb): when every other
 * one is held, feeds them all, in order, with data as block index.
 * *complete: whether they were. Returns 0 or -ENOMEM. */
static int cache__put_check_group(struct cache *c, const struct cache_id *id,
				  struct cache__dgh *h, uint64_t first,
				  uint64_t nb, uint64_t index, const void *data,
				  size_t len, bool *complete)
{
	unsigned char *buf = NULL;
	int rc = 0;

	/* Those after index first: blocks mostly arrive in order, so the
	 * first look usually finds the group incomplete. */
	*complete = false;
	for (uint64_t j = 1; j < nb; j++) {
		uint64_t b = first + (index - first + j) % nb;

		if (!cache__block_held(c, id, b))
			return 0;
	}
	buf = malloc(CACHE_BLOCK_SIZE);
	if (!buf)
		return -ENOMEM;
	for (uint64_t b = first; b < first + nb; b++) {
		long got;

		if (b == index) {
			cache__dgh_feed(h, data, len);
			continue;
		}
		got = cache_block_read(c, id, b, 0, buf, CACHE_BLOCK_SIZE);
		if (got == -ENOENT)
			goto out; /* evicted since: still incomplete */
		if (got < 0) {
			rc = (int)got;
			goto out;
		}
		if ((size_t)got != cache__block_len(h->size, b)) {
			cache__dgh_bad(h, h->first); /* the wrong length */
			break;
		}
		cache__dgh_feed(h, buf, (size_t)got);
	}
	*complete = true;
out:
	free(buf);
	return rc;
}

int cache__digests_put_check(struct cache *c, const struct cache_id *id,
			     uint64_t index, const void *data, size_t len,
			     bool *locked)
{
	struct cache__digests *d = c->dg;
	uint8_t want[CACHE__DIGESTS_PER_BLOCK][CACHE_SHA256_LEN];
	uint64_t size = 0, nblocks = 0, first = 0, nwant = 0, gfirst = 0,
		 gn = 0;
	uint32_t dbs = 0;
	struct cache__dgh h;
	char hex[2 * CACHE_ID_LEN + 1];
	bool complete = true;
	int rc;

	*locked = false;
	pthread_mutex_lock(&d->mu);
	struct cache__dg *dg = cache__dg_find(d, id);
	if (dg) {
		size = dg->size;
		dbs = dg->dbs;
		nblocks = (size + CACHE_BLOCK_SIZE - 1) / CACHE_BLOCK_SIZE;
	}
	if (dg && index < nblocks && len == cache__block_len(size, index)) {
		if (dbs <= CACHE_BLOCK_SIZE) {
			first = index * (CACHE_BLOCK_SIZE / dbs);
			nwant = (len + dbs - 1) / dbs;
		} else {
			uint64_t k = dbs / CACHE_BLOCK_SIZE;

			first = index / k;
			nwant = 1;
			gfirst = first * k;
			gn = nblocks - gfirst < k ? nblocks - gfirst : k;
		}
		memcpy(want, dg->d[first], (size_t)nwant * sizeof(want[0]));
	}
	pthread_mutex_unlock(&d->mu);
	if (!dg)
		return 0;
	cache_id_to_hex(id, hex);
	if (nwant == 0) {
		cache__log(c, CACHE_LOG_ERR,
			   "%s: blob %s block %" PRIu64 ": %zu bytes, not a "
			   "block of the %" PRIu64 "-byte blob its digests "
			   "describe; not stored",
			   c->dir, hex, index, len, size);
		return -EBADMSG;
	}
	rc = cache__dgh_init(&h, size, dbs, want, first, nwant);
	if (rc)
		return rc;
	if (dbs <= CACHE_BLOCK_SIZE) {
		cache__dgh_feed(&h, data, len);
	} else {
		/* Two puts of one group must not both find it incomplete. */
		pthread_mutex_lock(&d->put_mu);
		*locked = true;
		rc = cache__put_check_group(c, id, &h, gfirst, gn, index, data,
					    len, &complete);
	}
	cache__dgh_done(&h);
	if (rc == 0 && complete && h.nbad) {
		cache__log(c, CACHE_LOG_ERR,
			   "%s: blob %s block %" PRIu64
			   ": SHA-256 of digest block %" PRIu64
			   " (%u bytes) does not match; not stored",
			   c->dir, hex, index, h.bad_first, dbs);
		rc = -EBADMSG;
	}
	if (rc && *locked) {
		pthread_mutex_unlock(&d->put_mu);
		*locked = false;
	}
	return rc;
}

void cache__digests_put_done(struct cache *c)
{
	pthread_mutex_unlock(&c->dg->put_mu);
}

/* ---- the whole blob ---- */

struct cache__bad_list {
	uint64_t *v;
	size_t cap, n;
};

/* Adds the cache blocks of bytes [start, end) to the bad list, skipping
 * repeats; n counts past cap. */
static void cache__bad_add(void *ctx, uint64_t didx, uint64_t start,
			   uint64_t end)
{
	struct cache__bad_list *l = ctx;

	(void)didx;
	for (uint64_t b = start / CACHE_BLOCK_SIZE;
	     b <= (end - 1) / CACHE_BLOCK_SIZE; b++) {
		if (l->n > 0 && l->n <= l->cap && l->v[l->n - 1] >= b)
			continue;
		if (l->n < l->cap)
			l->v[l->n] = b;
		l->n++;
	}
}

/* Sets h up to check blob id (size bytes) against a copy of its
 * registered digests, if they describe a blob of that size. Returns
 * whether it did; cache__dgh_done frees the copy. */
static bool cache__dg_copy(struct cache *c, const struct cache_id *id,
			   uint64_t size, struct cache__dgh *h)
{
	struct cache__digests *d = c->dg;
	uint8_t(*copy)[CACHE_SHA256_LEN] = NULL;
	uint64_t n = 0;
	uint32_t dbs = 0;

	pthread_mutex_lock(&d->mu);
	struct cache__dg *dg = cache__dg_find(d, id);
	if (dg && dg->size == size) {
		copy = malloc((size_t)dg->n * CACHE_SHA256_LEN);
		if (copy) {
			memcpy(copy, dg->d, (size_t)dg->n * CACHE_SHA256_LEN);
			n = dg->n;
			dbs = dg->dbs;
		}
	}
	pthread_mutex_unlock(&d->mu);
	if (!copy)
		return false;
	if (cache__dgh_init(h, size, dbs, copy, 0, n) != 0) {
		free(copy);
		return false;
	}
	h->owned = copy;
	return true;
}

/* Feeds every block of blob id (size bytes) to whole and, with dg, to h,
 * from one read transaction, reading with pread. Returns 0, -ENODATA (a
 * block missing or of the wrong length), -ENOMEM or -EIO. */
static int cache__blob_hash(struct cache *c, const struct cache_id *id,
			    uint64_t size, EVP_MD_CTX *whole,
			    struct cache__dgh *h)
{
	unsigned char *buf = malloc(CACHE_BLOCK_SIZE);
	uint64_t nblocks = (size + CACHE_BLOCK_SIZE - 1) / CACHE_BLOCK_SIZE;
	MDB_txn *txn = NULL;
	int rc, err = 0;

	if (!buf)
		return -ENOMEM;
	rc = cache__rtxn_get(c, &txn);
	if (rc) {
		free(buf);
		return cache__errno(rc);
	}
	for (uint64_t i = 0; i < nblocks && !err; i++) {
		unsigned char key[CACHE__BLOCK_KEY_LEN];
		MDB_val k = {.mv_size = sizeof(key), .mv_data = key}, v;
		size_t len = cache__block_len(size, i);

		cache__key(key, id, i);
		rc = mdb_get(txn, c->dbi_blocks, &k, &v);
		if (rc == MDB_NOTFOUND ||
		    (rc == 0 && v.mv_size != cache__sum_value_len(len)))
			err = -ENODATA;
		else if (rc)
			err = cache__errno(rc);
		if (err)
			break;
		cache__value_read(c, v.mv_data, 0, buf, len, NULL, 0);
		EVP_DigestUpdate(whole, buf, len);
		if (h)
			cache__dgh_feed(h, buf, len);
	}
	cache__rtxn_put(c, txn);
	free(buf);
	return err;
}

int cache_blob_verify(struct cache *c, const struct cache_id *id,
		      const uint8_t *expected, uint64_t *bad, size_t bad_cap,
		      size_t *nbad)
{
	struct cache_blob_record *rec = NULL;
	struct cache__bad_list list = {.v = bad, .cap = bad_cap};
	uint8_t want[CACHE_SHA256_LEN], got[CACHE_SHA256_LEN];
	struct cache__dgh h;
	bool dg = false;
	EVP_MD_CTX *whole = NULL;
	unsigned int md_len;
	uint64_t held = 0;
	int rc, err = 0;

	if (nbad)
		*nbad = 0;
	if (!c || !id || (bad_cap && !bad))
		return -EINVAL;
	rec = malloc(sizeof(*rec));
	whole = EVP_MD_CTX_new();
	if (!rec || !whole ||
	    EVP_DigestInit_ex(whole, EVP_sha256(), NULL) != 1) {
		err = -ENOMEM;
		goto out;
	}
	err = cache_blob_get(c, id, rec);
	if (err)
		goto out;
	if (expected)
		memcpy(want, expected, sizeof(want));
	else if (rec->has_sha256)
		memcpy(want, rec->sha256, sizeof(want));
	else {
		err = -ENOENT;
		goto out;
	}
	err = cache_blob_held(c, id, &held);
	if (err)
		goto out;
	if (held != rec->size) {
		err = -ENODATA;
		goto out;
	}
	dg = cache__dg_copy(c, id, rec->size, &h);
	if (dg) {
		h.on_bad = cache__bad_add;
		h.bad_ctx = &list;
	}
	err = cache__blob_hash(c, id, rec->size, whole, dg ? &h : NULL);
	if (dg)
		cache__dgh_done(&h);
	if (err)
		goto out;
	EVP_DigestFinal_ex(whole, got, &md_len);
	bool ok = memcmp(got, want, CACHE_SHA256_LEN) == 0;
	rc = cache__record_set_verified(c, id, want, ok);
	if (rc) {
		cache__log(c, CACHE_LOG_ERR, "%s: verify: update record: %s",
			   c->dir, mdb_strerror(rc));
		err = cache__errno(rc);
		goto out;
	}
	if (!ok) {
		char hex[2 * CACHE_ID_LEN + 1];

		cache_id_to_hex(id, hex);
		cache__log(c, CACHE_LOG_ERR,
			   "%s: blob %s (%s): SHA-256 of the whole blob does "
			   "not match; %zu bad blocks found by block digests",
			   c->dir, hex, rec->identity, list.n);
		err = -EBADMSG;
	}
	if (nbad)
		*nbad = list.n < bad_cap ? list.n : bad_cap;
out:
	EVP_MD_CTX_free(whole);
	free(rec);
	return err;
}

/* ---- every block's checksums ---- */

struct cache__sums {
	struct cache *c;
	const struct cache_id *id;
	unsigned char *scratch; /* CACHE__VALUE_MAX */
	uint64_t count;
	uint64_t *bad; /* the blocks that failed */
	size_t nbad, cap;
};

static int cache__sums_one(void *ctx, const MDB_val *k, const MDB_val *v)
{
	struct cache__sums *s = ctx;
	uint64_t index = cache__key_n(k);

	s->count++;
	if (cache__value_ok(s->c, s->id, index, v, s->scratch))
		return 0;
	if (s->nbad == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 16;
		uint64_t *p = realloc(s->bad, cap * sizeof(*p));

		if (!p)
			return ENOMEM;
		s->bad = p;
		s->cap = cap;
	}
	s->bad[s->nbad++] = index;
	return 0;
}

int cache_blob_sums_check(struct cache *c, const struct cache_id *id,
			  uint64_t *nblocks, uint64_t *bad, size_t bad_cap,
			  size_t *nbad)
{
	struct cache__sums s = {.c = c, .id = id};
	MDB_txn *txn = NULL;
	int rc, stopped = 0, err = 0;

	if (!c || !id || !nblocks || !nbad || (bad_cap && !bad))
		return -EINVAL;
	*nblocks = 0;
	*nbad = 0;
	s.scratch = malloc(CACHE__VALUE_MAX);
	if (!s.scratch)
		return -ENOMEM;
	rc = cache__rtxn_get(c, &txn);
	if (rc == 0) {
		rc = cache__db_walk(txn, c->dbi_blocks, id, cache__sums_one, &s,
				    &stopped);
		cache__rtxn_put(c, txn);
	}
	free(s.scratch);
	if (rc == 0)
		rc = stopped;
	if (rc) {
		free(s.bad);
		cache__log(c, CACHE_LOG_ERR, "%s: check block checksums: %s",
			   c->dir, mdb_strerror(rc));
		return cache__errno(rc);
	}
	/* Dropped outside the read transaction, each as a read would. */
	for (size_t i = 0; i < s.nbad; i++) {
		int brc = cache__block_bad(c, id, s.bad[i]);

		if (brc != -ENOENT && err == 0)
			err = brc;
		if (i < bad_cap)
			bad[i] = s.bad[i];
	}
	free(s.bad);
	*nblocks = s.count;
	*nbad = s.nbad;
	return err;
}

/* writer: the write queue and the one writer thread that commits it to
 * LMDB in batches, with the reads to persist and the evictions the budget
 * asks for. */
#include "cache/cache_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* A batch ends at this many bytes or when the queue drains: big enough to
 * amortise the fsync, small enough that the queue keeps filling while it
 * commits (docs/cache-notes.md). */
#ifndef CACHE__BATCH_BYTES
#define CACHE__BATCH_BYTES (16u << 20)
#endif
#define CACHE__BATCH_MAX 256
#define CACHE__QUEUE_BYTES_DEFAULT (32u * 1024u * 1024u)
#define CACHE__HASH_BUCKETS 4096u /* power of two */
/* Reads are remembered in memory (a table of this many blocks) and
 * persisted by the writer with its next batch, or after a second. */
#define CACHE__TOUCH_CAP 8192u /* power of two */
#define CACHE__TOUCH_PERIOD_S 1
/* After a full disk or map, the writer evicts down to what was held minus
 * this much. */
#define CACHE__PRESSURE_SLACK ((uint64_t)CACHE__BATCH_BYTES * 2)
/* The blobs a commit moves the last_access of, at most. */
#define CACHE__COMMIT_BLOBS 16

/* One block handed to cache_block_put() and not yet committed. It sits in
 * the FIFO (commit order) and in a hash chain (lookup). refs counts the
 * queue's own reference plus readers copying out of it outside the lock.
 * Its bytes are a shared buffer (the putter's, or a copy of them). */
struct cache__pending {
	struct cache__pending *prev, *next; /* FIFO, oldest first */
	struct cache__pending *hnext;	    /* hash chain, newest first */
	struct cache_id id;
	uint64_t index;
	uint64_t seq;
	size_t len;
	int refs;
	bool committing; /* taken by the writer's current batch */
	struct cache_buf *buf;
	const unsigned char *data; /* buf's bytes */
};

/* A read of a block, to be persisted in the access and lru databases.
 * tick 0: a free slot. */
struct cache__touch {
	struct cache_id id;
	uint64_t index;
	uint64_t tick;
};

struct cache__writer {
	pthread_mutex_t mu;
	pthread_cond_t cv_work;	 /* writer: entries to commit, or stop */
	pthread_cond_t cv_space; /* putters: queue bytes went down */
	pthread_cond_t cv_done;	 /* flushers, droppers: a batch finished */
	struct cache__pending *head, *tail; /* guarded by mu */
	struct cache__pending **buckets;    /* guarded by mu */
	size_t queue_bytes, queue_max;	    /* guarded by mu */
	uint64_t seq;			    /* guarded by mu */
	int first_err;			    /* guarded by mu */
	bool stopping;			    /* guarded by mu */
	bool reporting; /* the writer is calling on_lost or on_evicted;
			   guarded by mu */
	struct cache__touch *touch; /* open-addressed by (id, index),
				       CACHE__TOUCH_CAP; guarded by mu */
	size_t ntouch;		    /* guarded by mu */
	uint64_t touch_dropped;	    /* guarded by mu */
	uint64_t evicted_total;	    /* guarded by mu */
	pthread_t thread;
	bool started;

	/* The writer thread's own. */
	uint64_t budget_eff; /* the budget, lowered after a full disk or map;
				0: none */
	struct cache__evicted *evicted;	  /* CACHE__EVICT_MAX */
	struct cache__touch *touch_spare; /* CACHE__TOUCH_CAP */
};

/* ---- the queue ---- */

static uint64_t cache__hash(const struct cache_id *id, uint64_t index)
{
	uint64_t h;

	memcpy(&h, id->b, sizeof(h)); /* the id is already a hash */
	h ^= index * 0x9e3779b97f4a7c15ull;
	h ^= h >> 29;
	return h;
}

static size_t cache__bucket(const struct cache_id *id, uint64_t index)
{
	return (size_t)(cache__hash(id, index) & (CACHE__HASH_BUCKETS - 1));
}

static size_t cache__cost(const struct cache__pending *e)
{
	return sizeof(*e) + e->len;
}

static void cache__pending_free(struct cache__pending *e)
{
	cache_buf_unref(e->buf);
	free(e);
}

/* The newest queued entry of (id, index), or NULL. Called with w->mu
 * held. */
static struct cache__pending *
cache__find(struct cache__writer *w, const struct cache_id *id, uint64_t index)
{
	struct cache__pending *e = w->buckets[cache__bucket(id, index)];

	while (e && (e->index != index || !cache__id_eq(&e->id, id)))
		e = e->hnext;
	return e;
}

/* Takes e out of the FIFO and the hash and drops the queue's reference.
 * Called with w->mu held. */
static void cache__unqueue(struct cache__writer *w, struct cache__pending *e)
{
	struct cache__pending **pp =
		&w->buckets[cache__bucket(&e->id, e->index)];

	while (*pp && *pp != e)
		pp = &(*pp)->hnext;
	if (*pp)
		*pp = e->hnext;
	if (e->prev)
		e->prev->next = e->next;
	else
		w->head = e->next;
	if (e->next)
		e->next->prev = e->prev;
	else
		w->tail = e->prev;
	w->queue_bytes -= cache__cost(e);
	if (--e->refs == 0)
		cache__pending_free(e);
}

/* Remembers a read of block (id, index) at `tick` for the writer to
 * persist. A full table drops the read (the block then looks older than it
 * is, which only affects eviction order). Called with w->mu held. */
static void cache__touch_locked(struct cache__writer *w,
				const struct cache_id *id, uint64_t index,
				uint64_t tick)
{
	size_t i =
		(size_t)(cache__hash(id, index) >> 20) & (CACHE__TOUCH_CAP - 1);

	for (size_t probe = 0; probe < CACHE__TOUCH_CAP;
	     probe++, i = (i + 1) & (CACHE__TOUCH_CAP - 1)) {
		struct cache__touch *t = &w->touch[i];

		if (t->tick == 0) {
			if (w->ntouch >= CACHE__TOUCH_CAP / 4 * 3) {
				w->touch_dropped++;
				return;
			}
			t->id = *id;
			t->index = index;
			t->tick = tick;
			if (++w->ntouch == CACHE__TOUCH_CAP / 2)
				pthread_cond_signal(&w->cv_work);
			return;
		}
		if (t->index == index && cache__id_eq(&t->id, id)) {
			if (tick > t->tick)
				t->tick = tick;
			return;
		}
	}
}

long cache__queue_read(struct cache *c, const struct cache_id *id,
		       uint64_t index, size_t off, void *buf, size_t len)
{
	struct cache__writer *w = c->w;
	uint64_t tick = cache__now_us();
	struct cache__pending *e;
	long n = 0;

	pthread_mutex_lock(&w->mu);
	/* Optimistic: a miss leaves a touch the writer skips. */
	cache__touch_locked(w, id, index, tick);
	e = cache__find(w, id, index);
	if (e)
		e->refs++;
	pthread_mutex_unlock(&w->mu);
	if (!e)
		return -ENOENT;
	/* Copy outside the lock; the reference keeps e alive. */
	if (off < e->len) {
		n = (long)(e->len - off < len ? e->len - off : len);
		memcpy(buf, e->data + off, (size_t)n);
	}
	pthread_mutex_lock(&w->mu);
	if (--e->refs == 0)
		cache__pending_free(e);
	pthread_mutex_unlock(&w->mu);
	return n;
}

bool cache__queue_has(struct cache *c, const struct cache_id *id,
		      uint64_t index)
{
	bool has;

	pthread_mutex_lock(&c->w->mu);
	has = cache__find(c->w, id, index) != NULL;
	pthread_mutex_unlock(&c->w->mu);
	return has;
}

void cache__queue_remove(struct cache *c, const struct cache_id *id,
			 uint64_t first, uint64_t count)
{
	struct cache__writer *w = c->w;
	bool busy;

	/* Blocks in the batch being committed cannot be pulled back: wait for
	 * that commit; the caller deletes them from LMDB next. */
	pthread_mutex_lock(&w->mu);
	do {
		struct cache__pending *e, *next;

		busy = false;
		for (e = w->head; e; e = next) {
			next = e->next;
			if (e->index < first || e->index - first >= count ||
			    !cache__id_eq(&e->id, id))
				continue;
			if (e->committing)
				busy = true;
			else
				cache__unqueue(w, e);
		}
		if (busy)
			pthread_cond_wait(&w->cv_done, &w->mu);
	} while (busy);
	/* Flushers may be waiting on entries that are gone now. */
	pthread_cond_broadcast(&w->cv_done);
	pthread_cond_broadcast(&w->cv_space);
	pthread_mutex_unlock(&w->mu);
}

/* Queues block (id, index) from buf, whose reference the queue takes.
 * cache_block_put and cache_block_put_buf's common part. */
static int cache__put(struct cache *c, const struct cache_id *id,
		      uint64_t index, struct cache_buf *buf, size_t len)
{
	struct cache__writer *w = c->w;
	struct cache__pending *e;
	bool locked = false;
	int rc;

	e = malloc(sizeof(*e));
	if (!e) {
		cache_buf_unref(buf);
		return -ENOMEM;
	}
	memset(e, 0, sizeof(*e));
	e->id = *id;
	e->index = index;
	e->len = len;
	e->refs = 1;
	e->buf = buf;
	e->data = cache_buf_data(buf);
	rc = cache__digests_put_check(c, id, index, e->data, len, &locked);
	if (rc) {
		cache__pending_free(e);
		return rc;
	}

	pthread_mutex_lock(&w->mu);
	/* An empty queue always admits one entry, so any block fits. */
	while (w->queue_bytes > 0 &&
	       w->queue_bytes + cache__cost(e) > w->queue_max && !w->stopping)
		pthread_cond_wait(&w->cv_space, &w->mu);
	e->seq = ++w->seq;
	e->prev = w->tail;
	if (w->tail)
		w->tail->next = e;
	else
		w->head = e;
	w->tail = e;
	size_t b = cache__bucket(id, index);
	e->hnext = w->buckets[b];
	w->buckets[b] = e;
	w->queue_bytes += cache__cost(e);
	pthread_cond_signal(&w->cv_work);
	pthread_mutex_unlock(&w->mu);
	if (locked)
		cache__digests_put_done(c);
	return 0;
}

static bool cache__put_valid(const struct cache *c, const struct cache_id *id,
			     uint64_t index, size_t len)
{
	return c && id && len > 0 && len <= CACHE_BLOCK_SIZE &&
	       index <= UINT64_MAX / CACHE_BLOCK_SIZE - 1;
}

int cache_block_put(struct cache *c, const struct cache_id *id, uint64_t index,
		    const void *data, size_t len)
{
	struct cache_buf *buf;

	if (!cache__put_valid(c, id, index, len) || !data)
		return -EINVAL;
	buf = cache_buf_new();
	if (!buf)
		return -ENOMEM;
	memcpy(cache_buf_data(buf), data, len);
	return cache__put(c, id, index, buf, len);
}

int cache_block_put_buf(struct cache *c, const struct cache_id *id,
			uint64_t index, struct cache_buf *b, size_t len)
{
	if (!cache__put_valid(c, id, index, len) || !b)
		return -EINVAL;
	return cache__put(c, id, index, cache_buf_ref(b), len);
}

int cache_flush(struct cache *c)
{
	struct cache__writer *w;
	int rc;

	if (!c)
		return -EINVAL;
	w = c->w;
	pthread_mutex_lock(&w->mu);
	/* Seqs grow along the FIFO; drops may remove entries, so wait for the
	 * oldest one left to be younger than the call rather than counting. */
	uint64_t target = w->seq;
	while ((w->head && w->head->seq <= target) || w->reporting)
		pthread_cond_wait(&w->cv_done, &w->mu);
	rc = w->first_err;
	w->first_err = 0;
	pthread_mutex_unlock(&w->mu);
	return rc;
}

uint64_t cache__writer_evicted(struct cache *c)
{
	uint64_t n;

	pthread_mutex_lock(&c->w->mu);
	n = c->w->evicted_total;
	pthread_mutex_unlock(&c->w->mu);
	return n;
}

/* ---- commits ---- */

/* Notes blob id among the (few) blobs a commit touched. */
static void cache__note_blob(struct cache_id *ids, int *n,
			     const struct cache_id *id)
{
	for (int i = 0; i < *n; i++)
		if (cache__id_eq(&ids[i], id))
			return;
	if (*n < CACHE__COMMIT_BLOBS)
		ids[(*n)++] = *id;
}

/* Stores one queued block in txn: its data and checksums, the extent that
 * claims it, its access tick. MDB code. */
static int cache__commit_block(struct cache *c, MDB_txn *txn,
			       const struct cache__pending *e, uint64_t tick,
			       const char **step)
{
	unsigned char key[CACHE__BLOCK_KEY_LEN];
	MDB_val k = {.mv_size = sizeof(key), .mv_data = key};
	MDB_val v = {.mv_size = cache__sum_value_len(e->len)};
	MDB_val old;
	uint64_t start = e->index * CACHE_BLOCK_SIZE;
	int rc;

	cache__key(key, &e->id, e->index);
	*step = "put block";
	/* A put over a stored block frees its pages. */
	rc = mdb_get(txn, c->dbi_blocks, &k, &old);
	if (rc == 0)
		rc = cache__value_freeable(c, &old);
	else if (rc == MDB_NOTFOUND)
		rc = 0;
	if (rc == 0)
		rc = mdb_put(txn, c->dbi_blocks, &k, &v, MDB_RESERVE);
	if (rc)
		return rc;
	/* The checksum is of the bytes as they arrived, computed here rather
	 * than on the fetch thread that queued them. */
	memcpy(v.mv_data, e->data, e->len);
	cache__sum_put(cache__sum_seed(&e->id, e->index), e->data, e->len,
		       (unsigned char *)v.mv_data + e->len);
	*step = "merge extent";
	rc = cache__extent_merge(txn, c->dbi_extents, &e->id, start,
				 start + e->len);
	if (rc)
		return rc;
	*step = "set access";
	return cache__access_set(c, txn, &e->id, e->index, tick, false);
}

/* Commits the batch in one write transaction: each block's data and the
 * extent that claims it together, the reads remembered in `touches` (may
 * be NULL), and the evictions the budget asks for. Returns an MDB/errno
 * code; *nevicted counts the evictions in w->evicted. */
static int cache__commit(struct cache *c, struct cache__pending **batch, int n,
			 const struct cache__touch *touches, int *nevicted,
			 const char **step)
{
	struct cache__writer *w = c->w;
	struct cache_id blobs[CACHE__COMMIT_BLOBS];
	int nblobs = 0;
	uint64_t tick = cache__now_us();
	MDB_txn *txn = NULL;
	int rc;

	*nevicted = 0;
	*step = "begin";
	rc = mdb_txn_begin(c->env, NULL, 0, &txn);
	if (rc)
		return rc;
	for (int i = 0; i < n; i++) {
		rc = cache__commit_block(c, txn, batch[i], tick, step);
		if (rc)
			goto out;
		cache__note_blob(blobs, &nblobs, &batch[i]->id);
	}
	*step = "persist reads";
	for (size_t i = 0; touches && i < CACHE__TOUCH_CAP; i++) {
		const struct cache__touch *t = &touches[i];

		if (t->tick == 0)
			continue;
		rc = cache__access_set(c, txn, &t->id, t->index, t->tick, true);
		if (rc)
			goto out;
		cache__note_blob(blobs, &nblobs, &t->id);
	}
	*step = "update records";
	for (int i = 0; i < nblobs; i++) {
		rc = cache__record_touch(c, txn, &blobs[i], tick / 1000000u);
		if (rc)
			goto out;
	}
	if (w->budget_eff) {
		*step = "evict";
		rc = cache__evict(c, txn, w->budget_eff, tick, w->evicted,
				  nevicted);
		if (rc)
			goto out;
	}
	*step = "commit";
out:
	rc = cache__txn_end(txn, rc);
	if (rc)
		*nevicted = 0;
	return rc;
}

/* A full disk or map: lower this process's effective budget below what is
 * stored, so that the following commits evict and the cache keeps
 * working, smaller. Writer thread only. */
static void cache__pressure(struct cache *c)
{
	struct cache__writer *w = c->w;
	MDB_txn *txn = NULL;
	MDB_stat st;
	uint64_t held, target;

	if (cache__rtxn_get(c, &txn) != 0)
		return;
	int rc = mdb_stat(txn, c->dbi_blocks, &st);
	cache__rtxn_put(c, txn);
	if (rc)
		return;
	held = (uint64_t)st.ms_entries * CACHE_BLOCK_SIZE;
	target =
		held > CACHE__PRESSURE_SLACK ? held - CACHE__PRESSURE_SLACK : 1;
	if (w->budget_eff == 0 || target < w->budget_eff) {
		w->budget_eff = target;
		cache__log(c, CACHE_LOG_WARN,
			   "%s: the disk or the map is full: evicting down "
			   "to %" PRIu64 " MiB of blocks",
			   c->dir, target >> 20);
	}
}

/* A commit of one small meta entry: moves LMDB's transaction id on, so
 * that the pages an eviction freed are reusable by the next commit. */
static int cache__bump(struct cache *c, const char **step)
{
	unsigned char b[8];
	MDB_val k = {.mv_size = 4, .mv_data = "bump"};
	MDB_val v = {.mv_size = 8, .mv_data = b};
	MDB_txn *txn = NULL;
	int rc;

	*step = "bump";
	cache__be64_put(b, cache__now_us());
	rc = mdb_txn_begin(c->env, NULL, 0, &txn);
	if (rc)
		return rc;
	return cache__txn_end(txn, mdb_put(txn, c->dbi_meta, &k, &v, 0));
}

/* After a commit failed for want of room: evicts, when the process hears
 * of evictions (only then can it stop counting the evicted bytes as held;
 * for others a full disk stays a clean -ENOSPC). */
static void cache__make_room(struct cache *c, int *nevicted)
{
	const char *step = "";
	int rc;

	cache__pressure(c);
	/* In a commit of its own, which needs few pages; LMDB reuses the
	 * pages it frees from the second commit after it. */
	rc = cache__commit(c, NULL, 0, NULL, nevicted, &step);
	if (rc == 0 && *nevicted)
		rc = cache__bump(c, &step);
	if (rc)
		cache__log(c, CACHE_LOG_ERR,
			   "%s: eviction after a full disk or map: %s: %s",
			   c->dir, step, mdb_strerror(rc));
}

/* Waits for work: blocks to commit, reads to persist (when the table is
 * half full, else a second after the first one), or the stop. Returns
 * false when stopping with nothing left. Called with w->mu held. */
static bool cache__writer_wait(struct cache__writer *w)
{
	for (;;) {
		while (!w->head && !w->stopping &&
		       w->ntouch < CACHE__TOUCH_CAP / 2) {
			struct timespec ts;

			if (w->ntouch == 0) {
				pthread_cond_wait(&w->cv_work, &w->mu);
				continue;
			}
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_sec += CACHE__TOUCH_PERIOD_S;
			if (pthread_cond_timedwait(&w->cv_work, &w->mu, &ts) ==
			    ETIMEDOUT)
				break;
		}
		if (w->head || w->ntouch)
			return true;
		if (w->stopping)
			return false;
	}
}

/* Reports the blocks of a failed batch (on_lost) and the evicted ones
 * (on_evicted), without the lock: flushers wait for the reports too.
 * Called with w->mu held. */
static void cache__report(struct cache *c, int err,
			  const struct cache__evicted *lost, int nlost,
			  int nevicted)
{
	struct cache__writer *w = c->w;

	if (!(err && nlost && c->on_lost) && !(nevicted && c->on_evicted))
		return;
	w->reporting = true;
	pthread_mutex_unlock(&w->mu);
	for (int i = 0; err && c->on_lost && i < nlost; i++)
		c->on_lost(c->lost_ctx, &lost[i].id, lost[i].index, err);
	for (int i = 0; c->on_evicted && i < nevicted; i++)
		c->on_evicted(c->evicted_ctx, &w->evicted[i].id,
			      w->evicted[i].index);
	pthread_mutex_lock(&w->mu);
	w->reporting = false;
}

static void *cache__writer_main(void *arg)
{
	struct cache *c = arg;
	struct cache__writer *w = c->w;
	struct cache__pending *batch[CACHE__BATCH_MAX];
	struct cache__evicted lost[CACHE__BATCH_MAX];

	pthread_mutex_lock(&w->mu);
	while (cache__writer_wait(w)) {
		int n = 0;
		size_t bytes = 0;
		for (struct cache__pending *e = w->head;
		     e && n < CACHE__BATCH_MAX && bytes < CACHE__BATCH_BYTES;
		     e = e->next) {
			e->committing = true;
			batch[n++] = e;
			bytes += e->len;
		}
		struct cache__touch *touches = NULL;
		if (w->ntouch) {
			touches = w->touch;
			w->touch = w->touch_spare;
			w->touch_spare = touches;
			w->ntouch = 0;
		}
		pthread_mutex_unlock(&w->mu);

		const char *step = "";
		int nevicted = 0;
		int rc = cache__commit(c, batch, n, touches, &nevicted, &step);
		if (rc)
			cache__log(c, CACHE_LOG_ERR,
				   "%s: commit of %d blocks: %s: %s; the "
				   "blocks are dropped, not claimed",
				   c->dir, n, step, mdb_strerror(rc));
		if ((rc == MDB_MAP_FULL || rc == ENOSPC || rc == EDQUOT) &&
		    c->on_evicted)
			cache__make_room(c, &nevicted);
		if (touches)
			memset(touches, 0, CACHE__TOUCH_CAP * sizeof(*touches));
		cache__map_unmap_pages(c);

		/* Keep what on_lost needs: unqueue may free the entries. */
		for (int i = 0; rc && i < n; i++) {
			lost[i].id = batch[i]->id;
			lost[i].index = batch[i]->index;
		}
		pthread_mutex_lock(&w->mu);
		if (rc && !w->first_err)
			w->first_err = cache__errno(rc);
		w->evicted_total += (uint64_t)nevicted;
		for (int i = 0; i < n; i++)
			cache__unqueue(w, batch[i]);
		cache__report(c, cache__errno(rc), lost, n, nevicted);
		pthread_cond_broadcast(&w->cv_space);
		pthread_cond_broadcast(&w->cv_done);
	}
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

/* ---- life ---- */

struct cache__writer *cache__writer_new(size_t queue_max, uint64_t budget)
{
	struct cache__writer *w = calloc(1, sizeof(*w));

	if (!w)
		return NULL;
	pthread_mutex_init(&w->mu, NULL);
	pthread_cond_init(&w->cv_work, NULL);
	pthread_cond_init(&w->cv_space, NULL);
	pthread_cond_init(&w->cv_done, NULL);
	w->queue_max = queue_max ? queue_max : CACHE__QUEUE_BYTES_DEFAULT;
	w->budget_eff = budget;
	w->buckets = calloc(CACHE__HASH_BUCKETS, sizeof(*w->buckets));
	w->touch = calloc(CACHE__TOUCH_CAP, sizeof(*w->touch));
	w->touch_spare = calloc(CACHE__TOUCH_CAP, sizeof(*w->touch_spare));
	w->evicted = calloc(CACHE__EVICT_MAX, sizeof(*w->evicted));
	if (!w->buckets || !w->touch || !w->touch_spare || !w->evicted) {
		cache__writer_free(w);
		return NULL;
	}
	return w;
}

int cache__writer_start(struct cache *c)
{
	int rc = -pthread_create(&c->w->thread, NULL, cache__writer_main, c);

	if (rc) {
		cache__log(c, CACHE_LOG_ERR, "open %s: start writer: %s",
			   c->dir, strerror(-rc));
		return rc;
	}
	c->w->started = true;
	return 0;
}

int cache__writer_stop(struct cache *c)
{
	struct cache__writer *w = c->w;

	if (!w->started)
		return 0;
	pthread_mutex_lock(&w->mu);
	w->stopping = true;
	pthread_cond_broadcast(&w->cv_work);
	pthread_cond_broadcast(&w->cv_space);
	pthread_mutex_unlock(&w->mu);
	pthread_join(w->thread, NULL);
	w->started = false;
	return w->first_err;
}

void cache__writer_free(struct cache__writer *w)
{
	if (!w)
		return;
	while (w->head)
		cache__unqueue(w, w->head);
	pthread_cond_destroy(&w->cv_done);
	pthread_cond_destroy(&w->cv_space);
	pthread_cond_destroy(&w->cv_work);
	pthread_mutex_destroy(&w->mu);
	free(w->touch);
	free(w->touch_spare);
	free(w->evicted);
	free(w->buckets);
	free(w);
}

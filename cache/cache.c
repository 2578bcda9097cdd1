/* cache: the LMDB sparse-range cache: environment, schema, write queue and
 * writer thread, and the read paths. */
#include "cache/cache.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <lmdb.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

/* The on-disk schema version this build reads and writes (see README.md). */
#define CACHE__FORMAT 1u

/* A batch ends at 16 MiB (64 blocks of 256 KiB) or when the queue drains:
 * big enough to amortise the fsync, small enough that the queue keeps
 * filling while it commits (see README.md for the measurements). */
#ifndef CACHE__BATCH_BYTES
#define CACHE__BATCH_BYTES (16u << 20)
#endif
#define CACHE__BATCH_MAX 256
#define CACHE__QUEUE_BYTES_DEFAULT (64u * 1024u * 1024u)
#define CACHE__HASH_BUCKETS 4096u /* power of two */
#define CACHE__TXN_POOL 64
#define CACHE__MAXREADERS 510
#define CACHE__MAP_MIN ((uint64_t)1 << 30)
#define CACHE__BLOCK_KEY_LEN (CACHE_ID_LEN + 8)
#define CACHE__EXTENT_KEY_LEN (CACHE_ID_LEN + 8)
#define CACHE__RECORD_VERSION 1u
/* version(1) size(8) last_access(8) validator_len(2) validator */
#define CACHE__RECORD_HDR 19u

/* One block handed to cache_block_put() and not yet committed. It sits in
 * the FIFO (commit order) and in a hash chain (lookup). refs counts the
 * queue's own reference plus readers copying out of it outside the lock. */
struct cache__pending {
	struct cache__pending *prev, *next; /* FIFO, oldest first */
	struct cache__pending *hnext;	    /* hash chain, newest first */
	struct cache_id id;
	uint64_t index;
	uint64_t seq;
	size_t len;
	int refs;
	bool committing; /* taken by the writer's current batch */
	bool queued;	 /* still in the FIFO and hash */
	unsigned char data[];
};

struct cache {
	MDB_env *env;
	MDB_dbi dbi_meta, dbi_blobs, dbi_extents, dbi_blocks;
	char *dir;
	void (*log)(void *ctx, enum cache_log_level level, const char *msg);
	void *log_ctx;
	void (*on_lost)(void *ctx, const struct cache_id *id, uint64_t index,
			int err);
	void *lost_ctx;

	pthread_mutex_t mu;
	pthread_cond_t cv_work;	 /* writer: entries to commit, or stop */
	pthread_cond_t cv_space; /* putters: queue bytes went down */
	pthread_cond_t cv_done;	 /* flushers, droppers: a batch finished */
	struct cache__pending *head, *tail;	  /* guarded by mu */
	struct cache__pending **buckets;	  /* guarded by mu */
	size_t queue_bytes, queue_max;		  /* guarded by mu */
	uint64_t seq;				  /* guarded by mu */
	int first_err;				  /* guarded by mu */
	bool stopping;				  /* guarded by mu */
	bool reporting; /* writer is calling on_lost; guarded by mu */
	pthread_t writer;
	bool writer_started;

	/* Reset read transactions ready for mdb_txn_renew(): a warm read costs
	 * a renew and a reset instead of a begin and an abort. */
	pthread_mutex_t pool_mu;
	MDB_txn *pool[CACHE__TXN_POOL]; /* guarded by pool_mu */
	int pool_n;			/* guarded by pool_mu */
};

/* ---- helpers ---- */

static void cache__log(const struct cache *c, enum cache_log_level level,
		       const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void cache__log(const struct cache *c, enum cache_log_level level,
		       const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (c->log)
		c->log(c->log_ctx, level, msg);
	else
		fprintf(stderr, "pacefs: cache: %s\n", msg);
}

/* Maps an LMDB or system error code to a negative errno. */
static int cache__errno(int rc)
{
	switch (rc) {
	case 0:
		return 0;
	case MDB_MAP_FULL:
	case ENOSPC:
	case EDQUOT:
		return -ENOSPC;
	case MDB_VERSION_MISMATCH:
	case MDB_INVALID:
		return -EPROTO;
	case ENOMEM:
		return -ENOMEM;
	case EACCES:
	case EPERM:
		return -EACCES;
	case EROFS:
		return -EROFS;
	case ENOTDIR:
		return -ENOTDIR;
	default:
		return -EIO;
	}
}

static void cache__be64_put(unsigned char *p, uint64_t v)
{
	for (int i = 7; i >= 0; i--) {
		p[i] = (unsigned char)(v & 0xff);
		v >>= 8;
	}
}

static uint64_t cache__be64_get(const unsigned char *p)
{
	uint64_t v = 0;

	for (int i = 0; i < 8; i++)
		v = (v << 8) | p[i];
	return v;
}

/* Key of block `index` or of the extent starting at `start`: the id, then
 * the number big-endian, so that LMDB's byte order is numeric order. */
static void cache__key(unsigned char *key, const struct cache_id *id,
		       uint64_t n)
{
	memcpy(key, id->b, CACHE_ID_LEN);
	cache__be64_put(key + CACHE_ID_LEN, n);
}

static bool cache__key_is(const MDB_val *k, const struct cache_id *id)
{
	return k->mv_size == CACHE_ID_LEN + 8 &&
	       memcmp(k->mv_data, id->b, CACHE_ID_LEN) == 0;
}

void cache_id_from_string(const char *identity, struct cache_id *out)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int md_len = 0;

	/* Fails only when OpenSSL cannot allocate; a made-up id could mix two
	 * blobs' bytes, which is worse than stopping. */
	if (EVP_Digest(identity, strlen(identity), md, &md_len, EVP_sha256(),
		       NULL) != 1 ||
	    md_len < CACHE_ID_LEN) {
		fprintf(stderr, "pacefs: cache: SHA-256 failed\n");
		abort();
	}
	memcpy(out->b, md, CACHE_ID_LEN);
}

/* ---- read transactions ---- */

static int cache__rtxn_get(struct cache *c, MDB_txn **out)
{
	MDB_txn *txn = NULL;
	int rc;

	pthread_mutex_lock(&c->pool_mu);
	if (c->pool_n > 0)
		txn = c->pool[--c->pool_n];
	pthread_mutex_unlock(&c->pool_mu);
	if (txn) {
		rc = mdb_txn_renew(txn);
		if (rc == 0) {
			*out = txn;
			return 0;
		}
		mdb_txn_abort(txn);
	}
	return mdb_txn_begin(c->env, NULL, MDB_RDONLY, out);
}

static void cache__rtxn_put(struct cache *c, MDB_txn *txn)
{
	mdb_txn_reset(txn);
	pthread_mutex_lock(&c->pool_mu);
	if (c->pool_n < CACHE__TXN_POOL) {
		c->pool[c->pool_n++] = txn;
		txn = NULL;
	}
	pthread_mutex_unlock(&c->pool_mu);
	if (txn)
		mdb_txn_abort(txn);
}

/* ---- open ---- */

/* mkdir -p with mode 0700. Returns 0 or -errno; *step names what failed. */
static int cache__mkdirs(char *path, const char **step)
{
	struct stat st;

	if (stat(path, &st) == 0) {
		*step = "stat";
		return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
	}
	if (errno != ENOENT) {
		*step = "stat";
		return -errno;
	}
	char *slash = strrchr(path, '/');
	if (slash && slash != path) {
		*slash = '\0';
		int rc = cache__mkdirs(path, step);
		*slash = '/';
		if (rc < 0)
			return rc;
	}
	if (mkdir(path, 0700) != 0 && errno != EEXIST) {
		*step = "mkdir";
		return -errno;
	}
	if (stat(path, &st) != 0) {
		*step = "stat";
		return -errno;
	}
	*step = "stat";
	return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
}

static int cache__meta_u32(MDB_txn *txn, MDB_dbi dbi, const char *name,
			   uint32_t *out, bool *found)
{
	MDB_val k = {.mv_size = strlen(name), .mv_data = (void *)name};
	MDB_val v;
	int rc = mdb_get(txn, dbi, &k, &v);

	*found = false;
	if (rc == MDB_NOTFOUND)
		return 0;
	if (rc != 0)
		return rc;
	if (v.mv_size != 4)
		return MDB_INVALID;
	const unsigned char *p = v.mv_data;
	*out = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	       (uint32_t)p[2] << 8 | p[3];
	*found = true;
	return 0;
}

static int cache__meta_put_u32(MDB_txn *txn, MDB_dbi dbi, const char *name,
			       uint32_t x)
{
	unsigned char b[4] = {x >> 24, x >> 16, x >> 8, x};
	MDB_val k = {.mv_size = strlen(name), .mv_data = (void *)name};
	MDB_val v = {.mv_size = 4, .mv_data = b};

	return mdb_put(txn, dbi, &k, &v, 0);
}

/* Opens the named databases and checks or writes the meta entries. An
 * environment of another format is left untouched (the txn aborts). */
static int cache__schema(struct cache *c)
{
	MDB_txn *txn = NULL;
	uint32_t version = 0, bsize = 0;
	bool have_version, have_bsize;
	const char *step = "begin";
	int rc;

	rc = mdb_txn_begin(c->env, NULL, 0, &txn);
	if (rc)
		goto out;
	step = "open databases";
	rc = mdb_dbi_open(txn, "meta", MDB_CREATE, &c->dbi_meta);
	if (rc)
		goto out;
	step = "read meta";
	rc = cache__meta_u32(txn, c->dbi_meta, "format", &version,
			     &have_version);
	if (rc)
		goto out;
	if (have_version && version != CACHE__FORMAT) {
		cache__log(c, CACHE_LOG_ERR,
			   "open %s: cache format version %u found, this "
			   "build supports version %u only; use another "
			   "cache directory or remove this one",
			   c->dir, version, CACHE__FORMAT);
		mdb_txn_abort(txn);
		return -EPROTO;
	}
	rc = cache__meta_u32(txn, c->dbi_meta, "block_size", &bsize,
			     &have_bsize);
	if (rc)
		goto out;
	if (have_bsize && bsize != CACHE_BLOCK_SIZE) {
		cache__log(c, CACHE_LOG_ERR,
			   "open %s: cache made with block size %u, this "
			   "build uses %u; use another cache directory or "
			   "remove this one",
			   c->dir, bsize, CACHE_BLOCK_SIZE);
		mdb_txn_abort(txn);
		return -EPROTO;
	}
	step = "open databases";
	rc = mdb_dbi_open(txn, "blobs", MDB_CREATE, &c->dbi_blobs);
	if (rc == 0)
		rc = mdb_dbi_open(txn, "extents", MDB_CREATE, &c->dbi_extents);
	if (rc == 0)
		rc = mdb_dbi_open(txn, "blocks", MDB_CREATE, &c->dbi_blocks);
	if (rc)
		goto out;
	step = "write meta";
	if (!have_version)
		rc = cache__meta_put_u32(txn, c->dbi_meta, "format",
					 CACHE__FORMAT);
	if (rc == 0 && !have_bsize)
		rc = cache__meta_put_u32(txn, c->dbi_meta, "block_size",
					 CACHE_BLOCK_SIZE);
	if (rc)
		goto out;
	step = "commit";
	rc = mdb_txn_commit(txn);
	txn = NULL;
out:
	if (txn)
		mdb_txn_abort(txn);
	if (rc) {
		cache__log(c, CACHE_LOG_ERR, "open %s: %s: %s", c->dir, step,
			   mdb_strerror(rc));
		return cache__errno(rc);
	}
	return 0;
}

static void *cache__writer_main(void *arg);
static void cache__free(struct cache *c);

/* Creates and opens c->env with the given map size. On failure c->env is
 * closed and NULL, and the LMDB/errno code is returned. */
static int cache__env_open(struct cache *c, uint64_t map_size,
			   const char **step)
{
	int rc;

	*step = "create environment";
	rc = mdb_env_create(&c->env);
	if (rc) {
		c->env = NULL;
		return rc;
	}
	*step = "set map size";
	rc = mdb_env_set_mapsize(c->env, (size_t)map_size);
	if (rc == 0)
		rc = mdb_env_set_maxdbs(c->env, 4);
	if (rc == 0)
		rc = mdb_env_set_maxreaders(c->env, CACHE__MAXREADERS);
	if (rc == 0) {
		*step = "open environment";
		/* MDB_NOTLS: read transactions are pooled and used by any
		 * FUSE worker thread. No NOSYNC/NOMETASYNC: a commit is
		 * durable; the writer's batches amortise the fsync. */
		rc = mdb_env_open(c->env, c->dir, MDB_NOTLS, 0600);
	}
	if (rc) {
		mdb_env_close(c->env);
		c->env = NULL;
	}
	return rc;
}

int cache_open(const struct cache_config *cfg, struct cache **out)
{
	struct cache *c = NULL;
	const char *step = "";
	uint64_t map_size;
	int rc;

	if (!cfg || !cfg->dir || !cfg->dir[0] || !out)
		return -EINVAL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->log = cfg->log;
	c->log_ctx = cfg->log_ctx;
	c->on_lost = cfg->on_lost;
	c->lost_ctx = cfg->lost_ctx;
	c->queue_max = cfg->queue_bytes ? cfg->queue_bytes
					: CACHE__QUEUE_BYTES_DEFAULT;
	pthread_mutex_init(&c->mu, NULL);
	pthread_mutex_init(&c->pool_mu, NULL);
	pthread_cond_init(&c->cv_work, NULL);
	pthread_cond_init(&c->cv_space, NULL);
	pthread_cond_init(&c->cv_done, NULL);
	c->dir = strdup(cfg->dir);
	c->buckets = calloc(CACHE__HASH_BUCKETS, sizeof(*c->buckets));
	if (!c->dir || !c->buckets) {
		rc = -ENOMEM;
		goto out;
	}

	rc = cache__mkdirs(c->dir, &step);
	if (rc < 0) {
		cache__log(c, CACHE_LOG_ERR,
			   "open %s: %s: %s (the cache directory must be a "
			   "writable directory)",
			   c->dir, step, strerror(-rc));
		goto out;
	}

	/* A huge map costs only address space; it must not fill in practice
	 * because growing it needs every transaction of the process closed. */
	if (cfg->map_size)
		map_size = cfg->map_size;
	else if (sizeof(size_t) >= 8)
		map_size = (uint64_t)1 << 40;
	else
		map_size = (uint64_t)1 << 30;
	if (map_size > SIZE_MAX)
		map_size = SIZE_MAX;

	/* The default map is address space only, but some hosts cap it
	 * (ulimit -v, valgrind): mmap fails with ENOMEM or EINVAL, and then a
	 * smaller map is better than no cache. */
	for (;;) {
		rc = cache__env_open(c, map_size, &step);
		if (cfg->map_size || (rc != ENOMEM && rc != EINVAL) ||
		    map_size <= CACHE__MAP_MIN)
			break;
		map_size /= 4;
		cache__log(c, CACHE_LOG_WARN,
			   "open %s: %s: %s; retrying with a map of %" PRIu64
			   " MiB",
			   c->dir, step, mdb_strerror(rc), map_size >> 20);
	}
	if (rc) {
		cache__log(c, CACHE_LOG_ERR, "open %s: %s: %s", c->dir, step,
			   mdb_strerror(rc));
		rc = cache__errno(rc);
		if (rc == -EPROTO)
			cache__log(c, CACHE_LOG_ERR,
				   "open %s: not an LMDB environment of a "
				   "version this build reads",
				   c->dir);
		goto out;
	}

	/* Slots of readers killed with -9 would pin old snapshots, so that
	 * freed pages are never reused and the file only grows. */
	int dead = 0;
	if (mdb_reader_check(c->env, &dead) == 0 && dead > 0)
		cache__log(c, CACHE_LOG_INFO,
			   "open %s: cleared %d stale reader slots", c->dir,
			   dead);

	rc = cache__schema(c);
	if (rc)
		goto out;

	rc = -pthread_create(&c->writer, NULL, cache__writer_main, c);
	if (rc) {
		cache__log(c, CACHE_LOG_ERR, "open %s: start writer: %s",
			   c->dir, strerror(-rc));
		goto out;
	}
	c->writer_started = true;
	*out = c;
	c = NULL;
out:
	cache__free(c);
	return rc;
}

/* ---- queue ---- */

static size_t cache__bucket(const struct cache_id *id, uint64_t index)
{
	uint64_t h;

	memcpy(&h, id->b, sizeof(h)); /* the id is already a hash */
	h ^= index * 0x9e3779b97f4a7c15ull;
	h ^= h >> 29;
	return (size_t)(h & (CACHE__HASH_BUCKETS - 1));
}

static size_t cache__cost(const struct cache__pending *e)
{
	return sizeof(*e) + e->len;
}

/* Takes e out of the FIFO and the hash and drops the queue's reference.
 * Called with c->mu held. */
static void cache__unqueue(struct cache *c, struct cache__pending *e)
{
	struct cache__pending **pp = &c->buckets[cache__bucket(&e->id, e->index)];

	while (*pp && *pp != e)
		pp = &(*pp)->hnext;
	if (*pp)
		*pp = e->hnext;
	if (e->prev)
		e->prev->next = e->next;
	else
		c->head = e->next;
	if (e->next)
		e->next->prev = e->prev;
	else
		c->tail = e->prev;
	e->queued = false;
	c->queue_bytes -= cache__cost(e);
	if (--e->refs == 0)
		free(e);
}

int cache_block_put(struct cache *c, const struct cache_id *id,
		    uint64_t index, const void *data, size_t len)
{
	struct cache__pending *e;

	if (!c || !id || !data || len == 0 || len > CACHE_BLOCK_SIZE ||
	    index > UINT64_MAX / CACHE_BLOCK_SIZE - 1)
		return -EINVAL;
	e = malloc(sizeof(*e) + len);
	if (!e)
		return -ENOMEM;
	memset(e, 0, sizeof(*e));
	e->id = *id;
	e->index = index;
	e->len = len;
	e->refs = 1;
	e->queued = true;
	memcpy(e->data, data, len);

	pthread_mutex_lock(&c->mu);
	/* An empty queue always admits one entry, so any block fits. */
	while (c->queue_bytes > 0 &&
	       c->queue_bytes + cache__cost(e) > c->queue_max && !c->stopping)
		pthread_cond_wait(&c->cv_space, &c->mu);
	e->seq = ++c->seq;
	e->prev = c->tail;
	if (c->tail)
		c->tail->next = e;
	else
		c->head = e;
	c->tail = e;
	size_t b = cache__bucket(id, index);
	e->hnext = c->buckets[b];
	c->buckets[b] = e;
	c->queue_bytes += cache__cost(e);
	pthread_cond_signal(&c->cv_work);
	pthread_mutex_unlock(&c->mu);
	return 0;
}

/* ---- writer ---- */

/* Merges [start, end) into the extents of id: absorbs the extent that
 * reaches start from below and every extent that starts at or before the
 * (growing) end, then writes the union as one extent. */
static int cache__extent_merge(MDB_txn *txn, MDB_dbi dbi,
			       const struct cache_id *id, uint64_t start,
			       uint64_t end)
{
	unsigned char key[CACHE__EXTENT_KEY_LEN], val[8];
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
			uint64_t ps = cache__be64_get((unsigned char *)k.mv_data +
						      CACHE_ID_LEN);
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
	while (rc == 0 && cache__key_is(&k, id) &&
	       cache__be64_get((unsigned char *)k.mv_data + CACHE_ID_LEN) <=
		       end) {
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

	cache__key(key, id, start);
	cache__be64_put(val, end);
	k.mv_size = sizeof(key);
	k.mv_data = key;
	v.mv_size = sizeof(val);
	v.mv_data = val;
	rc = mdb_put(txn, dbi, &k, &v, 0);
out:
	mdb_cursor_close(cur);
	return rc;
}

/* Commits the batch in one write transaction: each block's data and the
 * extent that claims it together. Returns an MDB/errno code. */
static int cache__commit(struct cache *c, struct cache__pending **batch,
			 int n, const char **step)
{
	MDB_txn *txn = NULL;
	int rc;

	*step = "begin";
	rc = mdb_txn_begin(c->env, NULL, 0, &txn);
	if (rc)
		return rc;
	for (int i = 0; i < n; i++) {
		struct cache__pending *e = batch[i];
		unsigned char key[CACHE__BLOCK_KEY_LEN];
		MDB_val k = {.mv_size = sizeof(key), .mv_data = key};
		MDB_val v = {.mv_size = e->len, .mv_data = e->data};

		cache__key(key, &e->id, e->index);
		*step = "put block";
		rc = mdb_put(txn, c->dbi_blocks, &k, &v, 0);
		if (rc)
			goto out;
		*step = "merge extent";
		uint64_t start = e->index * CACHE_BLOCK_SIZE;
		rc = cache__extent_merge(txn, c->dbi_extents, &e->id, start,
					 start + e->len);
		if (rc)
			goto out;
	}
	*step = "commit";
	rc = mdb_txn_commit(txn);
	txn = NULL;
out:
	if (txn)
		mdb_txn_abort(txn);
	return rc;
}

static void *cache__writer_main(void *arg)
{
	struct cache *c = arg;
	struct cache__pending *batch[CACHE__BATCH_MAX];
	struct cache_id lost_id[CACHE__BATCH_MAX];
	uint64_t lost_index[CACHE__BATCH_MAX];

	pthread_mutex_lock(&c->mu);
	for (;;) {
		while (!c->head && !c->stopping)
			pthread_cond_wait(&c->cv_work, &c->mu);
		if (!c->head)
			break; /* stopping and drained */
		int n = 0;
		size_t bytes = 0;
		for (struct cache__pending *e = c->head;
		     e && n < CACHE__BATCH_MAX && bytes < CACHE__BATCH_BYTES;
		     e = e->next) {
			e->committing = true;
			batch[n++] = e;
			bytes += e->len;
		}
		pthread_mutex_unlock(&c->mu);

		const char *step = "";
		int rc = cache__commit(c, batch, n, &step);
		if (rc)
			cache__log(c, CACHE_LOG_ERR,
				   "%s: commit of %d blocks: %s: %s; the "
				   "blocks are dropped, not claimed",
				   c->dir, n, step, mdb_strerror(rc));

		/* Keep what on_lost needs: unqueue may free the entries. */
		for (int i = 0; rc && i < n; i++) {
			lost_id[i] = batch[i]->id;
			lost_index[i] = batch[i]->index;
		}
		pthread_mutex_lock(&c->mu);
		if (rc && !c->first_err)
			c->first_err = cache__errno(rc);
		for (int i = 0; i < n; i++)
			cache__unqueue(c, batch[i]);
		if (rc && c->on_lost) {
			/* Flushers wait for the reports too (c->reporting). */
			c->reporting = true;
			pthread_mutex_unlock(&c->mu);
			for (int i = 0; i < n; i++)
				c->on_lost(c->lost_ctx, &lost_id[i],
					   lost_index[i], cache__errno(rc));
			pthread_mutex_lock(&c->mu);
			c->reporting = false;
		}
		pthread_cond_broadcast(&c->cv_space);
		pthread_cond_broadcast(&c->cv_done);
	}
	pthread_mutex_unlock(&c->mu);
	return NULL;
}

int cache_flush(struct cache *c)
{
	int rc;

	if (!c)
		return -EINVAL;
	pthread_mutex_lock(&c->mu);
	/* Seqs grow along the FIFO; drops may remove entries, so wait for the
	 * oldest one left to be younger than the call rather than counting. */
	uint64_t target = c->seq;
	while ((c->head && c->head->seq <= target) || c->reporting)
		pthread_cond_wait(&c->cv_done, &c->mu);
	rc = c->first_err;
	c->first_err = 0;
	pthread_mutex_unlock(&c->mu);
	return rc;
}

static void cache__free(struct cache *c)
{
	if (!c)
		return;
	for (int i = 0; i < c->pool_n; i++)
		mdb_txn_abort(c->pool[i]);
	if (c->env)
		mdb_env_close(c->env);
	while (c->head)
		cache__unqueue(c, c->head);
	pthread_cond_destroy(&c->cv_done);
	pthread_cond_destroy(&c->cv_space);
	pthread_cond_destroy(&c->cv_work);
	pthread_mutex_destroy(&c->pool_mu);
	pthread_mutex_destroy(&c->mu);
	free(c->buckets);
	free(c->dir);
	free(c);
}

void cache_close(struct cache *c)
{
	if (!c)
		return;
	if (c->writer_started) {
		pthread_mutex_lock(&c->mu);
		c->stopping = true;
		pthread_cond_broadcast(&c->cv_work);
		pthread_cond_broadcast(&c->cv_space);
		pthread_mutex_unlock(&c->mu);
		pthread_join(c->writer, NULL);
	}
	if (c->first_err)
		cache__log(c, CACHE_LOG_WARN,
			   "close %s: some blocks were not committed: %s",
			   c->dir, strerror(-c->first_err));
	cache__free(c);
}

/* ---- reads ---- */

long cache_block_read(struct cache *c, const struct cache_id *id,
		      uint64_t index, size_t off, void *buf, size_t len)
{
	struct cache__pending *e;
	MDB_txn *txn = NULL;
	long n;
	int rc;

	if (!c || !id || (!buf && len))
		return -EINVAL;

	pthread_mutex_lock(&c->mu);
	for (e = c->buckets[cache__bucket(id, index)]; e; e = e->hnext)
		if (e->index == index &&
		    memcmp(e->id.b, id->b, CACHE_ID_LEN) == 0)
			break;
	if (e)
		e->refs++;
	pthread_mutex_unlock(&c->mu);
	if (e) {
		/* Copy outside the lock; the reference keeps e alive. */
		n = 0;
		if (off < e->len) {
			n = (long)(e->len - off < len ? e->len - off : len);
			memcpy(buf, e->data + off, (size_t)n);
		}
		pthread_mutex_lock(&c->mu);
		if (--e->refs == 0)
			free(e);
		pthread_mutex_unlock(&c->mu);
		return n;
	}

	/* Not queued: either committed before the lookup above (so visible to
	 * a transaction begun now) or not held. */
	rc = cache__rtxn_get(c, &txn);
	if (rc) {
		cache__log(c, CACHE_LOG_ERR, "%s: read block: begin: %s",
			   c->dir, mdb_strerror(rc));
		return cache__errno(rc);
	}
	unsigned char key[CACHE__BLOCK_KEY_LEN];
	MDB_val k = {.mv_size = sizeof(key), .mv_data = key}, v;
	cache__key(key, id, index);
	rc = mdb_get(txn, c->dbi_blocks, &k, &v);
	if (rc == 0) {
		n = 0;
		if (off < v.mv_size) {
			n = (long)(v.mv_size - off < len ? v.mv_size - off
							 : len);
			memcpy(buf, (unsigned char *)v.mv_data + off,
			       (size_t)n);
		}
	} else if (rc == MDB_NOTFOUND) {
		n = -ENOENT;
	} else {
		cache__log(c, CACHE_LOG_ERR, "%s: read block: %s", c->dir,
			   mdb_strerror(rc));
		n = cache__errno(rc);
	}
	cache__rtxn_put(c, txn);
	return n;
}

int cache_extents_each(struct cache *c, const struct cache_id *id,
		       int (*fn)(void *ctx, uint64_t start, uint64_t end),
		       void *ctx)
{
	unsigned char key[CACHE__EXTENT_KEY_LEN];
	MDB_cursor *cur = NULL;
	MDB_txn *txn = NULL;
	MDB_val k, v;
	int rc;

	if (!c || !id || !fn)
		return -EINVAL;
	rc = cache__rtxn_get(c, &txn);
	if (rc)
		goto out;
	rc = mdb_cursor_open(txn, c->dbi_extents, &cur);
	if (rc)
		goto out;
	cache__key(key, id, 0);
	k.mv_size = sizeof(key);
	k.mv_data = key;
	rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
	while (rc == 0 && cache__key_is(&k, id)) {
		if (v.mv_size != 8) {
			rc = MDB_CORRUPTED;
			goto out;
		}
		int frc = fn(ctx,
			     cache__be64_get((unsigned char *)k.mv_data +
					     CACHE_ID_LEN),
			     cache__be64_get(v.mv_data));
		if (frc) {
			mdb_cursor_close(cur);
			cache__rtxn_put(c, txn);
			return frc;
		}
		rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT);
	}
	if (rc == MDB_NOTFOUND || rc == 0)
		rc = 0;
out:
	if (cur)
		mdb_cursor_close(cur);
	if (txn)
		cache__rtxn_put(c, txn);
	if (rc) {
		cache__log(c, CACHE_LOG_ERR, "%s: read extents: %s", c->dir,
			   mdb_strerror(rc));
		return cache__errno(rc);
	}
	return 0;
}

/* ---- blob records ---- */

int cache_blob_get(struct cache *c, const struct cache_id *id,
		   struct cache_blob_record *out)
{
	MDB_txn *txn = NULL;
	MDB_val k = {.mv_size = CACHE_ID_LEN}, v;
	int rc;

	if (!c || !id || !out)
		return -EINVAL;
	k.mv_data = (void *)id->b;
	rc = cache__rtxn_get(c, &txn);
	if (rc)
		goto out;
	rc = mdb_get(txn, c->dbi_blobs, &k, &v);
	if (rc == MDB_NOTFOUND) {
		cache__rtxn_put(c, txn);
		return -ENOENT;
	}
	if (rc)
		goto out;
	const unsigned char *p = v.mv_data;
	size_t vlen = 0;
	if (v.mv_size >= CACHE__RECORD_HDR)
		vlen = (size_t)p[17] << 8 | p[18];
	if (v.mv_size < CACHE__RECORD_HDR || p[0] != CACHE__RECORD_VERSION ||
	    vlen >= CACHE_VALIDATOR_MAX || CACHE__RECORD_HDR + vlen > v.mv_size) {
		rc = MDB_CORRUPTED;
		goto out;
	}
	memset(out, 0, sizeof(*out));
	out->size = cache__be64_get(p + 1);
	out->last_access = cache__be64_get(p + 9);
	memcpy(out->validator, p + CACHE__RECORD_HDR, vlen);
out:
	if (txn)
		cache__rtxn_put(c, txn);
	if (rc) {
		cache__log(c, CACHE_LOG_ERR, "%s: read blob record: %s", c->dir,
			   mdb_strerror(rc));
		return cache__errno(rc);
	}
	return 0;
}

int cache_blob_put(struct cache *c, const struct cache_id *id,
		   const struct cache_blob_record *rec)
{
	unsigned char buf[CACHE__RECORD_HDR + CACHE_VALIDATOR_MAX];
	MDB_txn *txn = NULL;
	const char *step = "begin";
	size_t vlen;
	int rc;

	if (!c || !id || !rec)
		return -EINVAL;
	vlen = strnlen(rec->validator, CACHE_VALIDATOR_MAX);
	if (vlen == CACHE_VALIDATOR_MAX)
		return -EINVAL; /* not terminated */
	buf[0] = CACHE__RECORD_VERSION;
	cache__be64_put(buf + 1, rec->size);
	cache__be64_put(buf + 9, rec->last_access);
	buf[17] = (unsigned char)(vlen >> 8);
	buf[18] = (unsigned char)vlen;
	memcpy(buf + CACHE__RECORD_HDR, rec->validator, vlen);

	MDB_val k = {.mv_size = CACHE_ID_LEN, .mv_data = (void *)id->b};
	MDB_val v = {.mv_size = CACHE__RECORD_HDR + vlen, .mv_data = buf};
	rc = mdb_txn_begin(c->env, NULL, 0, &txn);
	if (rc)
		goto out;
	step = "put";
	rc = mdb_put(txn, c->dbi_blobs, &k, &v, 0);
	if (rc)
		goto out;
	step = "commit";
	rc = mdb_txn_commit(txn);
	txn = NULL;
out:
	if (txn)
		mdb_txn_abort(txn);
	if (rc) {
		cache__log(c, CACHE_LOG_ERR, "%s: write blob record: %s: %s",
			   c->dir, step, mdb_strerror(rc));
		return cache__errno(rc);
	}
	return 0;
}

/* Deletes every key of dbi that starts with id. */
static int cache__del_prefix(MDB_txn *txn, MDB_dbi dbi,
			     const struct cache_id *id)
{
	unsigned char key[CACHE_ID_LEN + 8];
	MDB_cursor *cur = NULL;
	MDB_val k = {.mv_size = sizeof(key), .mv_data = key}, v;
	int rc;

	rc = mdb_cursor_open(txn, dbi, &cur);
	if (rc)
		return rc;
	cache__key(key, id, 0);
	rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
	while (rc == 0 && cache__key_is(&k, id)) {
		rc = mdb_cursor_del(cur, 0);
		if (rc)
			break;
		k.mv_size = sizeof(key);
		k.mv_data = key;
		rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
	}
	if (rc == MDB_NOTFOUND)
		rc = 0;
	mdb_cursor_close(cur);
	return rc;
}

int cache_blob_drop(struct cache *c, const struct cache_id *id)
{
	MDB_txn *txn = NULL;
	const char *step = "begin";
	bool busy;
	int rc;

	if (!c || !id)
		return -EINVAL;

	/* Queued blocks of the blob go now; blocks in the batch being
	 * committed cannot be pulled back, so wait for that commit and delete
	 * them with the rest below. */
	pthread_mutex_lock(&c->mu);
	do {
		busy = false;
		struct cache__pending *e = c->head, *next;
		for (; e; e = next) {
			next = e->next;
			if (memcmp(e->id.b, id->b, CACHE_ID_LEN) != 0)
				continue;
			if (e->committing)
				busy = true;
			else
				cache__unqueue(c, e);
		}
		if (busy)
			pthread_cond_wait(&c->cv_done, &c->mu);
	} while (busy);
	/* Flushers may be waiting on entries that are gone now. */
	pthread_cond_broadcast(&c->cv_done);
	pthread_cond_broadcast(&c->cv_space);
	pthread_mutex_unlock(&c->mu);

	MDB_val k = {.mv_size = CACHE_ID_LEN, .mv_data = (void *)id->b};
	rc = mdb_txn_begin(c->env, NULL, 0, &txn);
	if (rc)
		goto out;
	step = "delete record";
	rc = mdb_del(txn, c->dbi_blobs, &k, NULL);
	if (rc == MDB_NOTFOUND)
		rc = 0;
	if (rc)
		goto out;
	step = "delete extents";
	rc = cache__del_prefix(txn, c->dbi_extents, id);
	if (rc)
		goto out;
	step = "delete blocks";
	rc = cache__del_prefix(txn, c->dbi_blocks, id);
	if (rc)
		goto out;
	step = "commit";
	rc = mdb_txn_commit(txn);
	txn = NULL;
out:
	if (txn)
		mdb_txn_abort(txn);
	if (rc) {
		cache__log(c, CACHE_LOG_ERR, "%s: drop blob: %s: %s", c->dir,
			   step, mdb_strerror(rc));
		return cache__errno(rc);
	}
	return 0;
}

/* ---- stats ---- */

int cache_stats_get(struct cache *c, struct cache_stats *out)
{
	MDB_txn *txn = NULL;
	MDB_cursor *cur = NULL;
	MDB_stat st;
	MDB_envinfo info;
	MDB_val k, v;
	struct stat fst;
	char *path = NULL;
	int rc;

	if (!c || !out)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	rc = cache__rtxn_get(c, &txn);
	if (rc)
		goto out;
	rc = mdb_stat(txn, c->dbi_blobs, &st);
	if (rc)
		goto out;
	out->blobs = st.ms_entries;
	rc = mdb_stat(txn, c->dbi_blocks, &st);
	if (rc)
		goto out;
	out->blocks = st.ms_entries;
	/* Held bytes from the extents: few per blob, so cheap to sum. */
	rc = mdb_cursor_open(txn, c->dbi_extents, &cur);
	if (rc)
		goto out;
	rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST);
	while (rc == 0) {
		if (k.mv_size == CACHE__EXTENT_KEY_LEN && v.mv_size == 8)
			out->bytes += cache__be64_get(v.mv_data) -
				      cache__be64_get((unsigned char *)k.mv_data +
						      CACHE_ID_LEN);
		rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT);
	}
	if (rc != MDB_NOTFOUND)
		goto out;
	rc = mdb_env_info(c->env, &info);
	if (rc)
		goto out;
	out->map_size = info.me_mapsize;
	size_t plen = strlen(c->dir) + sizeof("/data.mdb");
	path = malloc(plen);
	if (!path) {
		rc = ENOMEM;
		goto out;
	}
	snprintf(path, plen, "%s/data.mdb", c->dir);
	if (stat(path, &fst) == 0)
		out->file_size = (uint64_t)fst.st_blocks * 512u;
	rc = 0;
out:
	free(path);
	if (cur)
		mdb_cursor_close(cur);
	if (txn)
		cache__rtxn_put(c, txn);
	if (rc) {
		cache__log(c, CACHE_LOG_ERR, "%s: stats: %s", c->dir,
			   mdb_strerror(rc));
		return cache__errno(rc);
	}
	return 0;
}

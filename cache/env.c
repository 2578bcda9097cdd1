/* env: opening and closing the cache: the directory, the LMDB environment
 * and its map, the schema and its format, the checks of the data file, and
 * the pool of read transactions. */
#include "cache/cache_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#define CACHE__MAXREADERS 510
#define CACHE__MAP_MIN ((uint64_t)1 << 30)

void cache__log(const struct cache *c, enum cache_log_level level,
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

int cache__errno(int rc)
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

uint64_t cache__now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u +
	       1;
}

/* ---- read transactions ---- */

int cache__rtxn_get(struct cache *c, MDB_txn **out)
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

void cache__rtxn_put(struct cache *c, MDB_txn *txn)
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

int cache__txn_end(MDB_txn *txn, int rc)
{
	if (rc == 0)
		return txn ? mdb_txn_commit(txn) : 0;
	if (txn)
		mdb_txn_abort(txn);
	return rc;
}

int cache__txn_finish(struct cache *c, MDB_txn *txn, int rc, const char *what,
		      const char *step)
{
	if (rc == 0)
		step = "commit";
	rc = cache__txn_end(txn, rc);
	if (rc == 0)
		return 0;
	cache__log(c, CACHE_LOG_ERR, "%s: %s: %s: %s", c->dir, what, step,
		   mdb_strerror(rc));
	return cache__errno(rc);
}

int cache__put_alone(struct cache *c, MDB_dbi dbi, const struct cache_id *id,
		     MDB_val *v, const char *what)
{
	MDB_val k = {.mv_size = CACHE_ID_LEN, .mv_data = (void *)id->b};
	MDB_txn *txn = NULL;
	const char *step = "begin";
	int rc = mdb_txn_begin(c->env, NULL, 0, &txn);

	if (rc == 0) {
		step = "put";
		rc = mdb_put(txn, dbi, &k, v, 0);
	}
	return cache__txn_finish(c, txn, rc, what, step);
}

/* The entries of blob id (every one: id NULL) in key order, each through
 * fn, deleted after it with del. */
static int
cache__db_each(MDB_txn *txn, MDB_dbi dbi, const struct cache_id *id, bool del,
	       int (*fn)(void *ctx, const MDB_val *k, const MDB_val *v),
	       void *ctx, int *stopped)
{
	unsigned char key[CACHE_ID_LEN + 8];
	MDB_cursor *cur = NULL;
	MDB_val k, v;
	int rc;

	*stopped = 0;
	if (id)
		cache__key(key, id, 0);
	rc = mdb_cursor_open(txn, dbi, &cur);
	for (bool first = true; rc == 0; first = false) {
		if (first || del) {
			/* After a delete, seek again rather than trust the
			 * cursor. */
			k.mv_size = sizeof(key);
			k.mv_data = key;
			rc = mdb_cursor_get(cur, &k, &v,
					    id ? MDB_SET_RANGE : MDB_FIRST);
		} else {
			rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT);
		}
		if (rc || (id && !cache__key_is(&k, id)))
			break;
		*stopped = fn ? fn(ctx, &k, &v) : 0;
		if (*stopped)
			break;
		if (del)
			rc = mdb_cursor_del(cur, 0);
	}
	if (cur)
		mdb_cursor_close(cur);
	return rc == MDB_NOTFOUND ? 0 : rc;
}

int cache__db_walk(MDB_txn *txn, MDB_dbi dbi, const struct cache_id *id,
		   int (*fn)(void *ctx, const MDB_val *k, const MDB_val *v),
		   void *ctx, int *stopped)
{
	return cache__db_each(txn, dbi, id, false, fn, ctx, stopped);
}

int cache__db_delete(MDB_txn *txn, MDB_dbi dbi, const struct cache_id *id,
		     int (*fn)(void *ctx, const MDB_val *k, const MDB_val *v),
		     void *ctx)
{
	int stopped, rc = cache__db_each(txn, dbi, id, true, fn, ctx, &stopped);

	return rc ? rc : stopped;
}

/* ---- the directory and the schema ---- */

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
		/* Formats 1 and 2 stored blocks without a checksum: their
		 * bytes cannot be told from damaged ones, so they are
		 * refused rather than upgraded (README.md, "Bumping the
		 * format"). */
		if (version < CACHE__FORMAT)
			cache__log(
				c, CACHE_LOG_ERR,
				"open %s: cache format %u has no block "
				"checksums; this build needs format %u: "
				"remove %s/data.mdb and %s/lock.mdb (the "
				"bytes are fetched again), or keep using the "
				"pacefs that wrote it",
				c->dir, version, CACHE__FORMAT, c->dir, c->dir);
		else
			cache__log(c, CACHE_LOG_ERR,
				   "open %s: cache format version %u found, "
				   "this build supports version %u only; use "
				   "another cache directory or remove this one",
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
	if (rc == 0)
		rc = mdb_dbi_open(txn, "access", MDB_CREATE, &c->dbi_access);
	if (rc == 0)
		rc = mdb_dbi_open(txn, "lru", MDB_CREATE, &c->dbi_lru);
	/* Added within format 3: a build that does not know it leaves it
	 * alone, and one that does creates it empty. */
	if (rc == 0)
		rc = mdb_dbi_open(txn, "regions", MDB_CREATE, &c->dbi_regions);
	if (rc)
		goto out;
	step = "write meta";
	if (!have_version)
		rc = cache__meta_put_u32(txn, c->dbi_meta, "format",
					 CACHE__FORMAT);
	if (rc == 0 && c->budget) {
		unsigned char b[8];
		MDB_val k = {.mv_size = 6, .mv_data = "budget"};
		MDB_val v = {.mv_size = 8, .mv_data = b};

		cache__be64_put(b, c->budget);
		rc = mdb_put(txn, c->dbi_meta, &k, &v, 0);
	}
	if (rc == 0 && !have_bsize)
		rc = cache__meta_put_u32(txn, c->dbi_meta, "block_size",
					 CACHE_BLOCK_SIZE);
	if (rc)
		goto out;
	step = "commit";
out:
	rc = cache__txn_end(txn, rc);
	if (rc) {
		cache__log(c, CACHE_LOG_ERR, "open %s: %s: %s", c->dir, step,
			   mdb_strerror(rc));
		return cache__errno(rc);
	}
	return 0;
}

/* ---- the map ---- */

/* Remembers the data file's descriptor and where LMDB mapped it, for
 * cache__value_read and cache__map_unmap_pages. LMDB has no call that
 * gives the map's address (mdb_env_info's me_mapaddr is only set for a
 * fixed map), so it is looked up in /proc/self/maps by the file's inode.
 * Without it reads copy from the map and nothing is unmapped. */
static void cache__map_learn(struct cache *c)
{
	mdb_filehandle_t fd;
	struct stat st;
	char line[512];
	FILE *f;

	c->data_fd = -1;
	if (mdb_env_get_fd(c->env, &fd) != 0 || fstat(fd, &st) != 0)
		return;
	f = fopen("/proc/self/maps", "re");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long lo, hi, off, ino;
		unsigned dmaj, dmin;

		if (sscanf(line, "%llx-%llx %*s %llx %x:%x %llu", &lo, &hi,
			   &off, &dmaj, &dmin, &ino) != 6 ||
		    off != 0 || ino != (unsigned long long)st.st_ino ||
		    makedev(dmaj, dmin) != st.st_dev)
			continue;
		c->data_fd = fd;
		c->map_base = (const unsigned char *)(uintptr_t)lo;
		c->map_len = (size_t)(hi - lo);
		break;
	}
	fclose(f);
}

/* The mapping is shared and read-only, so a later access maps the same
 * bytes again. Kernels that map whole large folios on a fault map
 * megabytes of block data around each B-tree page the writer looks up;
 * without this the RSS grows with every gigabyte streamed. */
void cache__map_unmap_pages(const struct cache *c)
{
	if (c->map_base)
		(void)madvise((void *)c->map_base, c->map_len, MADV_DONTNEED);
}

/* ---- checks of the data file ---- */

int cache__file_check(struct cache *c, bool deep)
{
	mdb_filehandle_t fd;
	MDB_stat st;
	MDB_txn *txn = NULL;
	char msg[512] = "";
	int rc;

	rc = mdb_env_get_fd(c->env, &fd);
	if (rc == 0)
		rc = mdb_env_stat(c->env, &st);
	if (rc) {
		cache__log(c, CACHE_LOG_ERR, "open %s: check data.mdb: %s",
			   c->dir, mdb_strerror(rc));
		return cache__errno(rc);
	}
	c->psize = st.ms_psize;
	/* A read transaction keeps the pages of its snapshot from being
	 * reused by another process's commits while they are walked. */
	for (int tries = 0; tries < 8; tries++) {
		rc = mdb_txn_begin(c->env, NULL, MDB_RDONLY, &txn);
		if (rc) {
			cache__log(c, CACHE_LOG_ERR,
				   "open %s: check data.mdb: begin: %s", c->dir,
				   mdb_strerror(rc));
			return cache__errno(rc);
		}
		rc = cache__env_check(fd, c->env, txn, deep, msg, sizeof(msg));
		mdb_txn_abort(txn);
		if (rc != -EAGAIN)
			break;
	}
	if (rc == -EPROTO)
		cache__log(c, CACHE_LOG_ERR,
			   "open %s: %s/data.mdb is damaged (%s); refused: "
			   "remove %s/data.mdb and %s/lock.mdb (the bytes are "
			   "fetched again)",
			   c->dir, c->dir, msg, c->dir, c->dir);
	else if (rc)
		cache__log(c, CACHE_LOG_ERR, "open %s: check data.mdb: %s",
			   c->dir, msg[0] ? msg : strerror(-rc));
	return rc;
}

/* ---- open and close ---- */

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
		rc = mdb_env_set_maxdbs(c->env, 7);
	if (rc == 0)
		rc = mdb_env_set_maxreaders(c->env, CACHE__MAXREADERS);
	if (rc == 0) {
		*step = "open environment";
		/* MDB_NOTLS: read transactions are pooled and used by any
		 * FUSE worker thread. CACHE_SYNC_FULL (the library's
		 * default) adds no NOSYNC/NOMETASYNC: a commit is durable;
		 * the writer's batches amortise the fsync. */
		rc = mdb_env_open(c->env, c->dir, MDB_NOTLS | c->sync_flags,
				  0600);
	}
	if (rc) {
		mdb_env_close(c->env);
		c->env = NULL;
	}
	return rc;
}

/* Opens the environment: the largest map the host allows, down to
 * CACHE__MAP_MIN, unless the caller fixed its size. */
static int cache__env_open_sized(struct cache *c, uint64_t cfg_size)
{
	const char *step = "";
	uint64_t map_size;
	int rc;

	/* A huge map costs only address space; it must not fill in practice
	 * because growing it needs every transaction of the process closed. */
	if (cfg_size)
		map_size = cfg_size;
	else if (sizeof(size_t) >= 8)
		map_size = (uint64_t)1 << 40;
	else
		map_size = (uint64_t)1 << 30;
	if (map_size > SIZE_MAX)
		map_size = SIZE_MAX;

	/* Some hosts cap the address space (ulimit -v, valgrind): mmap fails
	 * with ENOMEM or EINVAL, and then a smaller map is better than no
	 * cache. */
	for (;;) {
		rc = cache__env_open(c, map_size, &step);
		if (cfg_size || (rc != ENOMEM && rc != EINVAL) ||
		    map_size <= CACHE__MAP_MIN)
			break;
		map_size /= 4;
		cache__log(c, CACHE_LOG_WARN,
			   "open %s: %s: %s; retrying with a map of %" PRIu64
			   " MiB",
			   c->dir, step, mdb_strerror(rc), map_size >> 20);
	}
	if (rc == 0)
		return 0;
	cache__log(c, CACHE_LOG_ERR, "open %s: %s: %s", c->dir, step,
		   mdb_strerror(rc));
	rc = cache__errno(rc);
	if (rc == -EPROTO)
		cache__log(c, CACHE_LOG_ERR,
			   "open %s: not an LMDB environment of a version "
			   "this build reads",
			   c->dir);
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
	cache__writer_free(c->w);
	cache__pins_free(c->pins);
	cache__digests_free(c->dg);
	pthread_mutex_destroy(&c->pool_mu);
	free(c->dir);
	free(c);
}

int cache_open(const struct cache_config *cfg, struct cache **out)
{
	struct cache *c = NULL;
	const char *step = "";
	char msg[768];
	int rc;

	if (!cfg || !cfg->dir || !cfg->dir[0] || !out)
		return -EINVAL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->data_fd = -1;
	c->log = cfg->log;
	c->log_ctx = cfg->log_ctx;
	c->on_lost = cfg->on_lost;
	c->lost_ctx = cfg->lost_ctx;
	c->on_evicted = cfg->on_evicted;
	c->evicted_ctx = cfg->evicted_ctx;
	c->sync_flags = cfg->sync == CACHE_SYNC_META   ? MDB_NOMETASYNC
			: cfg->sync == CACHE_SYNC_NONE ? MDB_NOSYNC
						       : 0;
	c->budget = cfg->budget_bytes;
	pthread_mutex_init(&c->pool_mu, NULL);
	c->dir = strdup(cfg->dir);
	c->w = cache__writer_new(cfg->queue_bytes, cfg->budget_bytes);
	c->pins = cache__pins_new();
	c->dg = cache__digests_new();
	if (!c->dir || !c->w || !c->pins || !c->dg) {
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
	rc = cache__dir_check(c->dir, cfg->shared, msg, sizeof(msg));
	if (rc < 0) {
		cache__log(c, CACHE_LOG_ERR, "open %s: %s", c->dir, msg);
		goto out;
	}
	rc = cache__env_open_sized(c, cfg->map_size);
	if (rc)
		goto out;
	rc = cache__file_check(c, false);
	if (rc)
		goto out;

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
	cache__map_learn(c);
	rc = cache__writer_start(c);
	if (rc)
		goto out;
	*out = c;
	c = NULL;
out:
	cache__free(c);
	return rc;
}

void cache_close(struct cache *c)
{
	if (!c)
		return;
	int err = cache__writer_stop(c);
	if (err)
		cache__log(c, CACHE_LOG_WARN,
			   "close %s: some blocks were not committed: %s",
			   c->dir, strerror(-err));
	cache__free(c);
}

/* cache: the LMDB sparse-range cache: environment, schema, write queue and
 * writer thread, and the read paths. */
#include "cache/cache.h"
#include "cache/cache_int.h"

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
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <fcntl.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

/* The on-disk schema version this build reads and writes (see README.md). */
#define CACHE__FORMAT 3u

/* A batch ends at 16 MiB (64 blocks of 256 KiB) or when the queue drains:
 * big enough to amortise the fsync, small enough that the queue keeps
 * filling while it commits (see README.md for the measurements). */
#ifndef CACHE__BATCH_BYTES
#define CACHE__BATCH_BYTES (16u << 20)
#endif
#define CACHE__BATCH_MAX 256
#define CACHE__QUEUE_BYTES_DEFAULT (32u * 1024u * 1024u)
#define CACHE__HASH_BUCKETS 4096u /* power of two */
#define CACHE__TXN_POOL 64
#define CACHE__MAXREADERS 510
#define CACHE__MAP_MIN ((uint64_t)1 << 30)
#define CACHE__BLOCK_KEY_LEN (CACHE_ID_LEN + 8)
#define CACHE__EXTENT_KEY_LEN (CACHE_ID_LEN + 8)
#define CACHE__RECORD_VERSION 2u
/* version(1) size(8) last_access(8) validator_len(2) validator, then in
 * version 2: validated_at(8) flags(1) [sha256(32)] identity_len(2)
 * identity */
#define CACHE__RECORD_HDR 19u
#define CACHE__RECORD_MAX                                                      \
	(CACHE__RECORD_HDR + CACHE_VALIDATOR_MAX + 8 + 1 + CACHE_SHA256_LEN +   \
	 2 + CACHE_IDENTITY_MAX)
#define CACHE__REC_VERIFIED 1u
#define CACHE__REC_SHA256 2u
#define CACHE__LRU_KEY_LEN (8 + CACHE_ID_LEN + 8)
/* Reads are remembered in memory (a table of this many blocks) and
 * persisted by the writer with its next batch, or after a second. */
#define CACHE__TOUCH_CAP 8192u /* power of two */
#define CACHE__TOUCH_PERIOD_S 1
/* Eviction per commit: at most this many blocks, looking at most at this
 * many LRU entries (pinned ones are skipped). */
#define CACHE__EVICT_MAX 4096
#define CACHE__EVICT_SCAN_MAX 65536
/* After a full disk or map, the writer evicts down to what was held minus
 * this much. */
#define CACHE__PRESSURE_SLACK ((uint64_t)CACHE__BATCH_BYTES * 2)
#define CACHE__DIGEST_BLOCK_MIN 4096u

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

/* A read of a block, to be persisted in the access and lru databases.
 * tick 0: a free slot. */
struct cache__touch {
	struct cache_id id;
	uint64_t index;
	uint64_t tick;
};

struct cache__pin {
	struct cache_id id;
	uint64_t slot, start, end;
};

/* Expected SHA-256 per digest block of one blob. */
struct cache__digests {
	struct cache_id id;
	uint64_t size;
	uint32_t dbs; /* digest block size */
	uint64_t n;
	uint8_t (*d)[CACHE_SHA256_LEN];
};

struct cache__evicted {
	struct cache_id id;
	uint64_t index;
};

struct cache {
	MDB_env *env;
	/* The data file and where LMDB maps it (set once: the map never
	 * moves), so that block reads can copy with pread instead of
	 * touching the map, whose pages would count in the daemon's RSS. */
	int data_fd;
	const unsigned char *map_base;
	size_t map_len;
	size_t psize; /* LMDB's page size */
	MDB_dbi dbi_meta, dbi_blobs, dbi_extents, dbi_blocks;
	MDB_dbi dbi_access, dbi_lru;
	char *dir;
	void (*log)(void *ctx, enum cache_log_level level, const char *msg);
	void *log_ctx;
	void (*on_lost)(void *ctx, const struct cache_id *id, uint64_t index,
			int err);
	void *lost_ctx;
	void (*on_evicted)(void *ctx, const struct cache_id *id,
			   uint64_t index);
	void *evicted_ctx;
	unsigned sync_flags;	/* MDB_NOMETASYNC or MDB_NOSYNC, by cfg->sync */
	uint64_t budget;	/* configured; 0: none */
	uint64_t budget_eff;	/* writer only: the budget, lowered after a
				   full disk or map; 0: none */
	struct cache__evicted *evicted; /* writer only, CACHE__EVICT_MAX */
	struct cache__touch *touch_spare; /* writer only, CACHE__TOUCH_CAP */

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
	bool reporting; /* writer is calling on_lost or on_evicted; guarded
			   by mu */
	struct cache__touch *touch; /* open-addressed by (id, index),
				       CACHE__TOUCH_CAP; guarded by mu */
	size_t ntouch;		    /* guarded by mu */
	uint64_t touch_dropped;	    /* guarded by mu */
	uint64_t evicted_total;	    /* guarded by mu */

	/* Pins and digests: small tables, read by the writer and by putters. */
	pthread_mutex_t aux_mu;
	struct cache__pin *pins;	    /* guarded by aux_mu */
	size_t npins, cap_pins;		    /* guarded by aux_mu */
	struct cache__digests *dgs;	    /* guarded by aux_mu */
	size_t ndgs, cap_dgs;		    /* guarded by aux_mu */
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

/* Wall-clock microseconds: the LRU order is shared by every process on
 * the directory, so it needs a clock they share. Never 0 (a free touch). */
static uint64_t cache__now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u + 1;
}

/* Key of the lru database: access tick, id, block index. */
static void cache__lru_key(unsigned char *key, uint64_t tick,
			   const struct cache_id *id, uint64_t index)
{
	cache__be64_put(key, tick);
	memcpy(key + 8, id->b, CACHE_ID_LEN);
	cache__be64_put(key + 8 + CACHE_ID_LEN, index);
}

void cache_id_to_hex(const struct cache_id *id, char out[2 * CACHE_ID_LEN + 1])
{
	static const char hex[] = "0123456789abcdef";

	for (int i = 0; i < CACHE_ID_LEN; i++) {
		out[2 * i] = hex[id->b[i] >> 4];
		out[2 * i + 1] = hex[id->b[i] & 15];
	}
	out[2 * CACHE_ID_LEN] = '\0';
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
	/* Formats 1 and 2 stored blocks without a checksum: their bytes
	 * cannot be told from damaged ones, so they are refused rather than
	 * upgraded (README.md, "Bumping the format"). */
	if (have_version && version < CACHE__FORMAT) {
		cache__log(c, CACHE_LOG_ERR,
			   "open %s: cache format %u has no block checksums; "
			   "this build needs format %u: remove %s/data.mdb "
			   "and %s/lock.mdb (the bytes are fetched again), "
			   "or keep using the pacefs that wrote it",
			   c->dir, version, CACHE__FORMAT, c->dir, c->dir);
		mdb_txn_abort(txn);
		return -EPROTO;
	}
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
	if (rc == 0)
		rc = mdb_dbi_open(txn, "access", MDB_CREATE, &c->dbi_access);
	if (rc == 0)
		rc = mdb_dbi_open(txn, "lru", MDB_CREATE, &c->dbi_lru);
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

/* Remembers the data file's descriptor and where LMDB mapped it, for
 * cache__value_copy and cache__map_unmap_pages. LMDB has no call that gives
 * the map's address (mdb_env_info's me_mapaddr is only set for a fixed
 * map), so it is looked up in /proc/self/maps by the file's inode. Without
 * it reads copy from the map and nothing is unmapped. */
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

/* Drops the daemon's page-table entries for the map (not the page cache:
 * the mapping is shared and read-only, so a later access maps the same
 * bytes again). Kernels that map whole large folios on a fault (6.18 on
 * ext4 here) map megabytes of block data around each B-tree page the
 * writer looks up, so without this the RSS grew with every gigabyte
 * streamed (380 MiB after 2 GiB). Called by the writer after a batch. */
static void cache__map_unmap_pages(const struct cache *c)
{
	if (c->map_base)
		(void)madvise((void *)c->map_base, c->map_len, MADV_DONTNEED);
}

/* Copies na + nb bytes from byte voff of a value that LMDB returned at p
 * (inside the map, valid under the caller's read transaction): the first
 * na into a, the rest into b. pread copies from the page cache without
 * mapping the pages into the daemon: a stream read back from the cache
 * through the map grew RSS by every page it touched (about 180 MiB of
 * data.mdb after 2 GiB), which the kernel only drops under pressure. One
 * preadv reads a block and its checksums. */
static void cache__value_read(const struct cache *c, const void *p, size_t voff,
			      void *a, size_t na, void *b, size_t nb)
{
	const unsigned char *src = (const unsigned char *)p + voff;
	size_t done = 0, total = na + nb;

	if (c->data_fd >= 0 && src >= c->map_base &&
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

/* Refuses a data file that LMDB's own code would fault on, before any of
 * it reads the map beyond the meta pages: one shorter than the pages its
 * meta page says it uses (a read of those through the map is SIGBUS), or
 * whose B-trees are damaged (cache__env_check). Returns 0 or -EPROTO /
 * -errno, logged in one line. */
static int cache__file_check(struct cache *c, bool deep)
{
	mdb_filehandle_t fd;
	MDB_envinfo info;
	MDB_stat st;
	MDB_txn *txn = NULL;
	struct stat fst;
	char msg[512] = "";
	int rc;

	rc = mdb_env_get_fd(c->env, &fd);
	if (rc == 0)
		rc = mdb_env_info(c->env, &info);
	if (rc == 0)
		rc = mdb_env_stat(c->env, &st);
	if (rc == 0 && fstat(fd, &fst) != 0)
		rc = errno;
	if (rc) {
		cache__log(c, CACHE_LOG_ERR, "open %s: check data.mdb: %s",
			   c->dir, mdb_strerror(rc));
		return cache__errno(rc);
	}
	c->psize = st.ms_psize;
	uint64_t need = ((uint64_t)info.me_last_pgno + 1) * st.ms_psize;
	if ((uint64_t)fst.st_size < need) {
		cache__log(c, CACHE_LOG_ERR,
			   "open %s: %s/data.mdb is %" PRIu64 " bytes but its "
			   "last page ends at byte %" PRIu64 ": the file was "
			   "truncated; refused: remove %s/data.mdb and "
			   "%s/lock.mdb (the bytes are fetched again)",
			   c->dir, c->dir, (uint64_t)fst.st_size, need, c->dir,
			   c->dir);
		return -EPROTO;
	}
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
		rc = mdb_env_set_maxdbs(c->env, 6);
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
	c->sync_flags = cfg->sync == CACHE_SYNC_META   ? MDB_NOMETASYNC
			: cfg->sync == CACHE_SYNC_NONE ? MDB_NOSYNC
						       : 0;
	c->on_evicted = cfg->on_evicted;
	c->evicted_ctx = cfg->evicted_ctx;
	c->budget = cfg->budget_bytes;
	c->budget_eff = cfg->budget_bytes;
	c->queue_max = cfg->queue_bytes ? cfg->queue_bytes
					: CACHE__QUEUE_BYTES_DEFAULT;
	pthread_mutex_init(&c->mu, NULL);
	pthread_mutex_init(&c->pool_mu, NULL);
	pthread_mutex_init(&c->aux_mu, NULL);
	pthread_cond_init(&c->cv_work, NULL);
	pthread_cond_init(&c->cv_space, NULL);
	pthread_cond_init(&c->cv_done, NULL);
	c->dir = strdup(cfg->dir);
	c->buckets = calloc(CACHE__HASH_BUCKETS, sizeof(*c->buckets));
	c->touch = calloc(CACHE__TOUCH_CAP, sizeof(*c->touch));
	c->touch_spare = calloc(CACHE__TOUCH_CAP, sizeof(*c->touch_spare));
	c->evicted = calloc(CACHE__EVICT_MAX, sizeof(*c->evicted));
	if (!c->dir || !c->buckets || !c->touch || !c->touch_spare ||
	    !c->evicted) {
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
	char msg[768];
	rc = cache__dir_check(c->dir, cfg->shared, msg, sizeof(msg));
	if (rc < 0) {
		cache__log(c, CACHE_LOG_ERR, "open %s: %s", c->dir, msg);
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

/* Remembers a read of block (id, index) at `tick` for the writer to
 * persist. A full table drops the read (the block then looks older than it
 * is, which only affects eviction order). Called with c->mu held. */
static void cache__touch_locked(struct cache *c, const struct cache_id *id,
				uint64_t index, uint64_t tick)
{
	size_t i = (size_t)(cache__hash(id, index) >> 20) &
		   (CACHE__TOUCH_CAP - 1);

	for (size_t probe = 0; probe < CACHE__TOUCH_CAP;
	     probe++, i = (i + 1) & (CACHE__TOUCH_CAP - 1)) {
		struct cache__touch *t = &c->touch[i];

		if (t->tick == 0) {
			if (c->ntouch >= CACHE__TOUCH_CAP / 4 * 3) {
				c->touch_dropped++;
				return;
			}
			t->id = *id;
			t->index = index;
			t->tick = tick;
			if (++c->ntouch == CACHE__TOUCH_CAP / 2)
				pthread_cond_signal(&c->cv_work);
			return;
		}
		if (t->index == index &&
		    memcmp(t->id.b, id->b, CACHE_ID_LEN) == 0) {
			if (tick > t->tick)
				t->tick = tick;
			return;
		}
	}
}

/* SHA-256 of len bytes. */
static void cache__sha256(const void *data, size_t len,
			  uint8_t out[CACHE_SHA256_LEN])
{
	unsigned int md_len = 0;

	if (EVP_Digest(data, len, out, &md_len, EVP_sha256(), NULL) != 1) {
		fprintf(stderr, "pacefs: cache: SHA-256 failed\n");
		abort();
	}
}

/* The registered digests of id, or NULL. Called with c->aux_mu held. */
static struct cache__digests *cache__dg_find(struct cache *c,
					     const struct cache_id *id)
{
	for (size_t i = 0; i < c->ndgs; i++)
		if (memcmp(c->dgs[i].id.b, id->b, CACHE_ID_LEN) == 0)
			return &c->dgs[i];
	return NULL;
}

/* Checks a block about to be queued against the blob's registered
 * digests. Returns 0 (matches, or nothing to check yet), -EBADMSG, or a
 * negative errno. */
static int cache__put_verify(struct cache *c, const struct cache_id *id,
			     uint64_t index, const unsigned char *data,
			     size_t len)
{
	uint8_t want[CACHE_BLOCK_SIZE / CACHE__DIGEST_BLOCK_MIN + 1]
		    [CACHE_SHA256_LEN];
	uint8_t got[CACHE_SHA256_LEN];
	uint64_t first = 0, count = 0, nblocks = 0, dfirst = 0;
	uint32_t dbs = 0;
	char hex[2 * CACHE_ID_LEN + 1];
	int rc = 0;

	pthread_mutex_lock(&c->aux_mu);
	struct cache__digests *dg = cache__dg_find(c, id);
	if (dg) {
		dbs = dg->dbs;
		if (dbs <= CACHE_BLOCK_SIZE) {
			dfirst = index * (CACHE_BLOCK_SIZE / dbs);
			count = (len + dbs - 1) / dbs;
			if (dfirst >= dg->n)
				count = 0;
			else if (count > dg->n - dfirst)
				count = dg->n - dfirst;
			memcpy(want, dg->d[dfirst], count * sizeof(want[0]));
		} else {
			uint64_t k = dbs / CACHE_BLOCK_SIZE;

			dfirst = index / k;
			first = dfirst * k;
			nblocks = (dg->size + CACHE_BLOCK_SIZE - 1) /
				  CACHE_BLOCK_SIZE;
			count = dfirst < dg->n ? 1 : 0;
			if (count) {
				memcpy(want[0], dg->d[dfirst], sizeof(want[0]));
				nblocks = nblocks - first < k ? nblocks - first
							      : k;
			}
		}
	}
	pthread_mutex_unlock(&c->aux_mu);
	if (count == 0)
		return 0;

	if (dbs <= CACHE_BLOCK_SIZE) {
		for (uint64_t j = 0; j < count; j++) {
			size_t off = (size_t)(j * dbs);
			size_t n = len - off < dbs ? len - off : dbs;

			cache__sha256(data + off, n, got);
			if (memcmp(got, want[j], CACHE_SHA256_LEN) != 0) {
				rc = -EBADMSG;
				dfirst += j;
				break;
			}
		}
	} else {
		/* The other cache blocks of the digest block, in order. */
		EVP_MD_CTX *ctx = EVP_MD_CTX_new();
		unsigned char *buf = malloc(CACHE_BLOCK_SIZE);
		unsigned int md_len = 0;
		bool complete = true;

		if (!ctx || !buf || EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1) {
			rc = -ENOMEM;
			goto out_group;
		}
		for (uint64_t b = first; b < first + nblocks && complete; b++) {
			if (b == index) {
				EVP_DigestUpdate(ctx, data, len);
				continue;
			}
			long got_n = cache_block_read(c, id, b, 0, buf,
						      CACHE_BLOCK_SIZE);
			if (got_n == -ENOENT)
				complete = false;
			else if (got_n < 0)
				rc = (int)got_n;
			else
				EVP_DigestUpdate(ctx, buf, (size_t)got_n);
			if (rc)
				goto out_group;
		}
		if (complete && EVP_DigestFinal_ex(ctx, got, &md_len) == 1 &&
		    memcmp(got, want[0], CACHE_SHA256_LEN) != 0)
			rc = -EBADMSG;
	out_group:
		EVP_MD_CTX_free(ctx);
		free(buf);
	}
	if (rc == -EBADMSG) {
		cache_id_to_hex(id, hex);
		cache__log(c, CACHE_LOG_ERR,
			   "%s: blob %s block %" PRIu64
			   ": SHA-256 of digest block %" PRIu64
			   " (%u bytes) does not match; not stored",
			   c->dir, hex, index, dfirst, dbs);
	}
	return rc;
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
	int rc = cache__put_verify(c, id, index, data, len);
	if (rc)
		return rc;
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

/* Writes the extent [start, end) of id. Returns an MDB code. */
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

/* Merges [start, end) into the extents of id: absorbs the extent that
 * reaches start from below and every extent that starts at or before the
 * (growing) end, then writes the union as one extent. */
static int cache__extent_merge(MDB_txn *txn, MDB_dbi dbi,
			       const struct cache_id *id, uint64_t start,
			       uint64_t end)
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

	rc = cache__extent_put(txn, dbi, id, start, end);
out:
	mdb_cursor_close(cur);
	return rc;
}

/* Sets the access tick of block (id, index) to `tick` unless it already
 * has a later one, moving its lru entry along. only_present: do nothing
 * for a block without an access entry (a read of a block since evicted or
 * never committed). Returns an MDB code. */
static int cache__access_set(struct cache *c, MDB_txn *txn,
			     const struct cache_id *id, uint64_t index,
			     uint64_t tick, bool only_present)
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

/* Cuts [s, e) out of the extent of id that contains s: the cache stops
 * claiming the bytes of a block in the transaction that deletes it. */
static int cache__extent_cut(MDB_txn *txn, MDB_dbi dbi,
			     const struct cache_id *id, uint64_t s, uint64_t e)
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
	if (rc == 0 && cache__key_is(&k, id) &&
	    cache__be64_get((unsigned char *)k.mv_data + CACHE_ID_LEN) == s) {
		found = true;
	} else if (rc == 0 || rc == MDB_NOTFOUND) {
		rc = mdb_cursor_get(cur, &k, &v,
				    rc == 0 ? MDB_PREV : MDB_LAST);
		found = rc == 0 && cache__key_is(&k, id);
		if (rc == MDB_NOTFOUND)
			rc = 0;
	}
	if (rc)
		goto out;
	if (found && v.mv_size == 8) {
		a = cache__be64_get((unsigned char *)k.mv_data + CACHE_ID_LEN);
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

/* Whether LMDB may free the stored block value v: the header of its first
 * overflow page, whose page count LMDB trusts when it frees them, was not
 * read at open (one scattered read per block; envcheck.c). Returns 0 or
 * MDB_CORRUPTED (logged: freeing it would hand out pages still in use). */
static int cache__value_freeable(struct cache *c, const MDB_val *v)
{
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

/* Removes block (id, index): its data, its access and lru entries and its
 * bytes from the extents, in txn. *found says whether it was stored. */
static int cache__block_remove(struct cache *c, MDB_txn *txn,
			       const struct cache_id *id, uint64_t index,
			       bool *found)
{
	unsigned char key[CACHE__BLOCK_KEY_LEN], lk[CACHE__LRU_KEY_LEN];
	MDB_val k = {.mv_size = sizeof(key), .mv_data = key}, v;
	MDB_val lkv = {.mv_size = sizeof(lk), .mv_data = lk};
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
	if (rc == 0 && v.mv_size == 8) {
		cache__lru_key(lk, cache__be64_get(v.mv_data), id, index);
		rc = mdb_del(txn, c->dbi_lru, &lkv, NULL);
		if (rc == 0 || rc == MDB_NOTFOUND)
			rc = mdb_del(txn, c->dbi_access, &k, NULL);
	}
	if (rc == MDB_NOTFOUND)
		rc = 0;
	if (rc || !*found)
		return rc;
	return cache__extent_cut(txn, c->dbi_extents, id,
				 index * CACHE_BLOCK_SIZE,
				 index * CACHE_BLOCK_SIZE + len);
}

/* Rewrites the stored record of id in txn through fn (a no-op without a
 * record). fn patches the raw record in buf (len bytes, room for
 * CACHE__RECORD_MAX) and returns whether it changed it. */
static int cache__record_patch(struct cache *c, MDB_txn *txn,
			       const struct cache_id *id,
			       bool (*fn)(unsigned char *buf, size_t len,
					  uint64_t arg),
			       uint64_t arg)
{
	unsigned char buf[CACHE__RECORD_MAX];
	MDB_val k = {.mv_size = CACHE_ID_LEN, .mv_data = (void *)id->b}, v;
	int rc;

	rc = mdb_get(txn, c->dbi_blobs, &k, &v);
	if (rc == MDB_NOTFOUND)
		return 0;
	if (rc)
		return rc;
	if (v.mv_size < CACHE__RECORD_HDR || v.mv_size > sizeof(buf))
		return 0; /* cache_blob_get reports a bad record */
	memcpy(buf, v.mv_data, v.mv_size);
	if (!fn(buf, v.mv_size, arg))
		return 0;
	v.mv_data = buf;
	return mdb_put(txn, c->dbi_blobs, &k, &v, 0);
}

/* Moves the record's last_access (seconds) on to arg. */
static bool cache__rec_touch(unsigned char *buf, size_t len, uint64_t arg)
{
	(void)len;
	if (cache__be64_get(buf + 9) >= arg)
		return false;
	cache__be64_put(buf + 9, arg);
	return true;
}

/* Clears the verified flag of a version 2 record. */
static bool cache__rec_unverify(unsigned char *buf, size_t len, uint64_t arg)
{
	size_t vlen = (size_t)buf[17] << 8 | buf[18];
	size_t at = CACHE__RECORD_HDR + vlen + 8;

	(void)arg;
	if (buf[0] != 2 || at >= len || !(buf[at] & CACHE__REC_VERIFIED))
		return false;
	buf[at] &= (unsigned char)~CACHE__REC_VERIFIED;
	return true;
}

/* Whether a pin covers any byte of block (id, index). */
static bool cache__pinned(struct cache *c, const struct cache_id *id,
			  uint64_t index)
{
	uint64_t s = index * CACHE_BLOCK_SIZE, e = s + CACHE_BLOCK_SIZE;
	bool pinned = false;

	pthread_mutex_lock(&c->aux_mu);
	for (size_t i = 0; i < c->npins && !pinned; i++)
		pinned = memcmp(c->pins[i].id.b, id->b, CACHE_ID_LEN) == 0 &&
			 c->pins[i].start < e && s < c->pins[i].end;
	pthread_mutex_unlock(&c->aux_mu);
	return pinned;
}

/* Adds 1 to a big-endian key: the first key after it. */
static void cache__key_inc(unsigned char *key, size_t len)
{
	for (size_t i = len; i-- > 0;)
		if (++key[i] != 0)
			break;
}

/* Evicts least recently used, unpinned blocks until the stored blocks fit
 * c->budget_eff, never a block accessed at or after `tick` (this commit's
 * own), at most CACHE__EVICT_MAX. Appends them to c->evicted. */
static int cache__evict(struct cache *c, MDB_txn *txn, uint64_t tick,
			int *nevicted)
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
	if (entries * CACHE_BLOCK_SIZE <= c->budget_eff)
		return 0;
	rc = mdb_cursor_open(txn, c->dbi_lru, &cur);
	if (rc)
		return rc;
	memset(pos, 0, sizeof(pos));
	while (entries * CACHE_BLOCK_SIZE > c->budget_eff &&
	       *nevicted < CACHE__EVICT_MAX &&
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
		if (*nevicted == 0 ||
		    memcmp(c->evicted[*nevicted - 1].id.b, id.b,
			   CACHE_ID_LEN) != 0) {
			rc = cache__record_patch(c, txn, &id,
						 cache__rec_unverify, 0);
			if (rc)
				break;
		}
		c->evicted[*nevicted].id = id;
		c->evicted[*nevicted].index = index;
		(*nevicted)++;
	}
	mdb_cursor_close(cur);
	return rc == MDB_NOTFOUND ? 0 : rc;
}

/* Notes blob id among the (few) blobs a commit touched. */
static void cache__note_blob(struct cache_id *ids, int *n, int cap,
			     const struct cache_id *id)
{
	for (int i = 0; i < *n; i++)
		if (memcmp(ids[i].b, id->b, CACHE_ID_LEN) == 0)
			return;
	if (*n < cap)
		ids[(*n)++] = *id;
}

/* Commits the batch in one write transaction: each block's data and the
 * extent that claims it together, the reads remembered in `touches` (may
 * be NULL), and the evictions the budget asks for. Returns an MDB/errno
 * code; *nevicted counts the evictions in c->evicted. */
static int cache__commit(struct cache *c, struct cache__pending **batch,
			 int n, const struct cache__touch *touches,
			 int *nevicted, const char **step)
{
	struct cache_id blobs[16];
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
		struct cache__pending *e = batch[i];
		unsigned char key[CACHE__BLOCK_KEY_LEN];
		MDB_val k = {.mv_size = sizeof(key), .mv_data = key};
		MDB_val v = {.mv_size = cache__sum_value_len(e->len)};
		MDB_val old;

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
			goto out;
		/* The checksum is of the bytes as they arrived, computed here
		 * rather than on the fetch thread that queued them. */
		memcpy(v.mv_data, e->data, e->len);
		cache__sum_put(cache__sum_seed(&e->id, e->index), e->data,
			       e->len, (unsigned char *)v.mv_data + e->len);
		*step = "merge extent";
		uint64_t start = e->index * CACHE_BLOCK_SIZE;
		rc = cache__extent_merge(txn, c->dbi_extents, &e->id, start,
					 start + e->len);
		if (rc)
			goto out;
		*step = "set access";
		rc = cache__access_set(c, txn, &e->id, e->index, tick, false);
		if (rc)
			goto out;
		cache__note_blob(blobs, &nblobs, 16, &e->id);
	}
	*step = "persist reads";
	for (size_t i = 0; touches && i < CACHE__TOUCH_CAP; i++) {
		const struct cache__touch *t = &touches[i];

		if (t->tick == 0)
			continue;
		rc = cache__access_set(c, txn, &t->id, t->index, t->tick, true);
		if (rc)
			goto out;
		cache__note_blob(blobs, &nblobs, 16, &t->id);
	}
	*step = "update records";
	for (int i = 0; i < nblobs; i++) {
		rc = cache__record_patch(c, txn, &blobs[i], cache__rec_touch,
					 tick / 1000000u);
		if (rc)
			goto out;
	}
	if (c->budget_eff) {
		*step = "evict";
		rc = cache__evict(c, txn, tick, nevicted);
		if (rc)
			goto out;
	}
	*step = "commit";
	rc = mdb_txn_commit(txn);
	txn = NULL;
out:
	if (txn)
		mdb_txn_abort(txn);
	if (rc)
		*nevicted = 0;
	return rc;
}

/* A full disk or map: lower this process's effective budget below what is
 * stored, so that the following commits evict and the cache keeps
 * working, smaller. Writer thread only. */
static void cache__pressure(struct cache *c)
{
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
	target = held > CACHE__PRESSURE_SLACK ? held - CACHE__PRESSURE_SLACK
					      : 1;
	if (c->budget_eff == 0 || target < c->budget_eff) {
		c->budget_eff = target;
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
	rc = mdb_put(txn, c->dbi_meta, &k, &v, 0);
	if (rc == 0)
		return mdb_txn_commit(txn);
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
		/* Reads alone wake the writer when the table is half full,
		 * else a second after the first one. */
		while (!c->head && !c->stopping &&
		       c->ntouch < CACHE__TOUCH_CAP / 2) {
			struct timespec ts;

			if (c->ntouch == 0) {
				pthread_cond_wait(&c->cv_work, &c->mu);
				continue;
			}
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_sec += CACHE__TOUCH_PERIOD_S;
			if (pthread_cond_timedwait(&c->cv_work, &c->mu, &ts) ==
			    ETIMEDOUT)
				break;
		}
		if (!c->head && c->ntouch == 0) {
			if (c->stopping)
				break; /* stopping and drained */
			continue;
		}
		int n = 0;
		size_t bytes = 0;
		for (struct cache__pending *e = c->head;
		     e && n < CACHE__BATCH_MAX && bytes < CACHE__BATCH_BYTES;
		     e = e->next) {
			e->committing = true;
			batch[n++] = e;
			bytes += e->len;
		}
		struct cache__touch *touches = NULL;
		if (c->ntouch) {
			touches = c->touch;
			c->touch = c->touch_spare;
			c->touch_spare = touches;
			c->ntouch = 0;
		}
		pthread_mutex_unlock(&c->mu);

		const char *step = "";
		int nevicted = 0;
		int rc = cache__commit(c, batch, n, touches, &nevicted, &step);
		if (rc)
			cache__log(c, CACHE_LOG_ERR,
				   "%s: commit of %d blocks: %s: %s; the "
				   "blocks are dropped, not claimed",
				   c->dir, n, step, mdb_strerror(rc));
		/* Only a caller that hears of evictions can stop counting the
		 * evicted bytes as held; for others a full disk stays a clean
		 * -ENOSPC. */
		if ((rc == MDB_MAP_FULL || rc == ENOSPC || rc == EDQUOT) &&
		    c->on_evicted) {
			/* Evict now, in a commit of its own that needs few
			 * pages; LMDB reuses the pages it frees from the
			 * second commit after it. */
			cache__pressure(c);
			int erc = cache__commit(c, NULL, 0, NULL, &nevicted,
						&step);
			if (erc == 0 && nevicted)
				erc = cache__bump(c, &step);
			if (erc)
				cache__log(c, CACHE_LOG_ERR,
					   "%s: eviction after a full disk "
					   "or map: %s: %s",
					   c->dir, step, mdb_strerror(erc));
		}
		if (touches)
			memset(touches, 0, CACHE__TOUCH_CAP * sizeof(*touches));
		cache__map_unmap_pages(c);

		/* Keep what on_lost needs: unqueue may free the entries. */
		for (int i = 0; rc && i < n; i++) {
			lost_id[i] = batch[i]->id;
			lost_index[i] = batch[i]->index;
		}
		pthread_mutex_lock(&c->mu);
		if (rc && !c->first_err)
			c->first_err = cache__errno(rc);
		c->evicted_total += (uint64_t)nevicted;
		for (int i = 0; i < n; i++)
			cache__unqueue(c, batch[i]);
		if ((rc && n && c->on_lost) || (nevicted && c->on_evicted)) {
			/* Flushers wait for the reports too (c->reporting). */
			c->reporting = true;
			pthread_mutex_unlock(&c->mu);
			for (int i = 0; rc && c->on_lost && i < n; i++)
				c->on_lost(c->lost_ctx, &lost_id[i],
					   lost_index[i], cache__errno(rc));
			for (int i = 0; c->on_evicted && i < nevicted; i++)
				c->on_evicted(c->evicted_ctx,
					      &c->evicted[i].id,
					      c->evicted[i].index);
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
	pthread_mutex_destroy(&c->aux_mu);
	pthread_mutex_destroy(&c->mu);
	for (size_t i = 0; i < c->ndgs; i++)
		free(c->dgs[i].d);
	free(c->dgs);
	free(c->pins);
	free(c->touch);
	free(c->touch_spare);
	free(c->evicted);
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

/* Room for a whole stored value: a block and its checksums. */
#define CACHE__VALUE_MAX                                                       \
	(CACHE_BLOCK_SIZE +                                                    \
	 CACHE__SUM_LEN * (CACHE_BLOCK_SIZE / CACHE__SUM_CHUNK + 1))

/* Whether the stored block value v of (id, index) has a plausible length
 * and every chunk matches its checksum; scratch holds CACHE__VALUE_MAX
 * bytes. */
static bool cache__value_ok(const struct cache *c, const struct cache_id *id,
			    uint64_t index, const MDB_val *v,
			    unsigned char *scratch)
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

/* A committed block failed its checksum: removes it (data, access and lru
 * entries, its bytes from the extents, the blob's verified flag) in a
 * write transaction that first checks it again, so that a block put
 * again meanwhile stays, and logs it once. Returns -ENOENT (the block is
 * not held: the caller fetches it again) or a negative errno. */
static int cache__block_bad(struct cache *c, const struct cache_id *id,
			    uint64_t index)
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
		rc = cache__record_patch(c, txn, id, cache__rec_unverify, 0);
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
	struct cache__pending *e;
	MDB_txn *txn = NULL;
	long n;
	int rc;

	if (!c || !id || (!buf && len))
		return -EINVAL;

	uint64_t tick = cache__now_us();
	pthread_mutex_lock(&c->mu);
	/* Optimistic: a miss leaves a touch the writer skips. */
	cache__touch_locked(c, id, index, tick);
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
	size_t blen = 0;
	bool bad = false;
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

/* Decodes a stored record (version 1 or 2). Returns 0 or MDB_CORRUPTED. */
static int cache__record_decode(const MDB_val *v, struct cache_blob_record *out)
{
	const unsigned char *p = v->mv_data;
	size_t len = v->mv_size, vlen, at;

	if (len < CACHE__RECORD_HDR || (p[0] != 1 && p[0] != 2))
		return MDB_CORRUPTED;
	vlen = (size_t)p[17] << 8 | p[18];
	if (vlen >= CACHE_VALIDATOR_MAX || CACHE__RECORD_HDR + vlen > len)
		return MDB_CORRUPTED;
	memset(out, 0, sizeof(*out));
	out->size = cache__be64_get(p + 1);
	out->last_access = cache__be64_get(p + 9);
	memcpy(out->validator, p + CACHE__RECORD_HDR, vlen);
	if (p[0] == 1)
		return 0;
	at = CACHE__RECORD_HDR + vlen;
	if (at + 8 + 1 + 2 > len)
		return MDB_CORRUPTED;
	out->validated_at = cache__be64_get(p + at);
	unsigned flags = p[at + 8];
	at += 9;
	out->verified = flags & CACHE__REC_VERIFIED;
	out->has_sha256 = flags & CACHE__REC_SHA256;
	if (out->has_sha256) {
		if (at + CACHE_SHA256_LEN + 2 > len)
			return MDB_CORRUPTED;
		memcpy(out->sha256, p + at, CACHE_SHA256_LEN);
		at += CACHE_SHA256_LEN;
	}
	size_t ilen = (size_t)p[at] << 8 | p[at + 1];
	at += 2;
	if (ilen >= CACHE_IDENTITY_MAX || at + ilen > len)
		return MDB_CORRUPTED;
	memcpy(out->identity, p + at, ilen);
	return 0;
}

/* Encodes rec as a version 2 record into buf (CACHE__RECORD_MAX bytes).
 * Returns the length, or 0 when a string is not terminated. */
static size_t cache__record_encode(const struct cache_blob_record *rec,
				   unsigned char *buf)
{
	size_t vlen = strnlen(rec->validator, CACHE_VALIDATOR_MAX);
	size_t ilen = strnlen(rec->identity, CACHE_IDENTITY_MAX);
	size_t at;

	if (vlen == CACHE_VALIDATOR_MAX || ilen == CACHE_IDENTITY_MAX)
		return 0;
	buf[0] = CACHE__RECORD_VERSION;
	cache__be64_put(buf + 1, rec->size);
	cache__be64_put(buf + 9, rec->last_access);
	buf[17] = (unsigned char)(vlen >> 8);
	buf[18] = (unsigned char)vlen;
	memcpy(buf + CACHE__RECORD_HDR, rec->validator, vlen);
	at = CACHE__RECORD_HDR + vlen;
	cache__be64_put(buf + at, rec->validated_at);
	buf[at + 8] = (unsigned char)((rec->verified ? CACHE__REC_VERIFIED : 0) |
				      (rec->has_sha256 ? CACHE__REC_SHA256 : 0));
	at += 9;
	if (rec->has_sha256) {
		memcpy(buf + at, rec->sha256, CACHE_SHA256_LEN);
		at += CACHE_SHA256_LEN;
	}
	buf[at] = (unsigned char)(ilen >> 8);
	buf[at + 1] = (unsigned char)ilen;
	memcpy(buf + at + 2, rec->identity, ilen);
	return at + 2 + ilen;
}

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
	rc = cache__record_decode(&v, out);
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
	unsigned char *buf = NULL;
	MDB_txn *txn = NULL;
	const char *step = "begin";
	size_t len;
	int rc;

	if (!c || !id || !rec)
		return -EINVAL;
	buf = malloc(CACHE__RECORD_MAX);
	if (!buf)
		return -ENOMEM;
	len = cache__record_encode(rec, buf);
	if (len == 0) {
		free(buf);
		return -EINVAL; /* not terminated */
	}

	MDB_val k = {.mv_size = CACHE_ID_LEN, .mv_data = (void *)id->b};
	MDB_val v = {.mv_size = len, .mv_data = buf};
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
	free(buf);
	if (txn)
		mdb_txn_abort(txn);
	if (rc) {
		cache__log(c, CACHE_LOG_ERR, "%s: write blob record: %s: %s",
			   c->dir, step, mdb_strerror(rc));
		return cache__errno(rc);
	}
	return 0;
}

/* Deletes the access and lru entries of every block of id. */
static int cache__del_access(struct cache *c, MDB_txn *txn,
			     const struct cache_id *id)
{
	unsigned char key[CACHE__BLOCK_KEY_LEN], lk[CACHE__LRU_KEY_LEN];
	MDB_cursor *cur = NULL;
	MDB_val k = {.mv_size = sizeof(key), .mv_data = key}, v;
	MDB_val lkv = {.mv_size = sizeof(lk), .mv_data = lk};
	int rc;

	rc = mdb_cursor_open(txn, c->dbi_access, &cur);
	if (rc)
		return rc;
	cache__key(key, id, 0);
	rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
	while (rc == 0 && cache__key_is(&k, id)) {
		if (v.mv_size == 8) {
			cache__lru_key(lk, cache__be64_get(v.mv_data), id,
				       cache__be64_get((unsigned char *)k.mv_data +
						       CACHE_ID_LEN));
			rc = mdb_del(txn, c->dbi_lru, &lkv, NULL);
			if (rc && rc != MDB_NOTFOUND)
				break;
		}
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

/* Deletes every block of id, each checked before LMDB frees its pages. */
static int cache__del_blocks(struct cache *c, MDB_txn *txn,
			     const struct cache_id *id)
{
	unsigned char key[CACHE__BLOCK_KEY_LEN];
	MDB_cursor *cur = NULL;
	MDB_val k = {.mv_size = sizeof(key), .mv_data = key}, v;
	int rc;

	rc = mdb_cursor_open(txn, c->dbi_blocks, &cur);
	if (rc)
		return rc;
	cache__key(key, id, 0);
	rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
	while (rc == 0 && cache__key_is(&k, id)) {
		rc = cache__value_freeable(c, &v);
		if (rc == 0)
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
	step = "delete access times";
	rc = cache__del_access(c, txn, id);
	if (rc)
		goto out;
	step = "delete extents";
	rc = cache__del_prefix(txn, c->dbi_extents, id);
	if (rc)
		goto out;
	step = "delete blocks";
	rc = cache__del_blocks(c, txn, id);
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
	out->format = CACHE__FORMAT;
	out->block_size = CACHE_BLOCK_SIZE;
	out->budget = c->budget;
	if (!out->budget) {
		MDB_val bk = {.mv_size = 6, .mv_data = "budget"}, bv;

		if (mdb_get(txn, c->dbi_meta, &bk, &bv) == 0 && bv.mv_size == 8)
			out->budget = cache__be64_get(bv.mv_data);
	}
	pthread_mutex_lock(&c->mu);
	out->evicted = c->evicted_total;
	pthread_mutex_unlock(&c->mu);
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

/* ---- pins ---- */

int cache_pin_set(struct cache *c, const struct cache_id *id, uint64_t slot,
		  uint64_t start, uint64_t end)
{
	int rc = 0;

	if (!c || !id)
		return -EINVAL;
	pthread_mutex_lock(&c->aux_mu);
	size_t i = 0;
	while (i < c->npins &&
	       (c->pins[i].slot != slot ||
		memcmp(c->pins[i].id.b, id->b, CACHE_ID_LEN) != 0))
		i++;
	if (start >= end) {
		if (i < c->npins)
			c->pins[i] = c->pins[--c->npins];
		goto out;
	}
	if (i == c->npins) {
		if (c->npins == c->cap_pins) {
			size_t cap = c->cap_pins ? c->cap_pins * 2 : 16;
			struct cache__pin *p =
				realloc(c->pins, cap * sizeof(*p));
			if (!p) {
				rc = -ENOMEM;
				goto out;
			}
			c->pins = p;
			c->cap_pins = cap;
		}
		c->pins[i].id = *id;
		c->pins[i].slot = slot;
		c->npins++;
	}
	c->pins[i].start = start;
	c->pins[i].end = end;
out:
	pthread_mutex_unlock(&c->aux_mu);
	return rc;
}

/* ---- eviction on demand ---- */

int cache_blocks_evict(struct cache *c, const struct cache_id *id,
		       uint64_t first, uint64_t count)
{
	MDB_txn *txn = NULL;
	const char *step = "begin";
	bool busy, found;
	int rc;

	if (!c || !id || count > UINT64_MAX - first)
		return -EINVAL;
	/* As in cache_blob_drop: queued ones go now, a batch in flight is
	 * waited for. */
	pthread_mutex_lock(&c->mu);
	do {
		busy = false;
		struct cache__pending *e = c->head, *next;
		for (; e; e = next) {
			next = e->next;
			if (e->index < first || e->index - first >= count ||
			    memcmp(e->id.b, id->b, CACHE_ID_LEN) != 0)
				continue;
			if (e->committing)
				busy = true;
			else
				cache__unqueue(c, e);
		}
		if (busy)
			pthread_cond_wait(&c->cv_done, &c->mu);
	} while (busy);
	pthread_cond_broadcast(&c->cv_done);
	pthread_cond_broadcast(&c->cv_space);
	pthread_mutex_unlock(&c->mu);

	rc = mdb_txn_begin(c->env, NULL, 0, &txn);
	if (rc)
		goto out;
	step = "remove blocks";
	bool any = false;
	for (uint64_t i = 0; i < count; i++) {
		rc = cache__block_remove(c, txn, id, first + i, &found);
		if (rc)
			goto out;
		any |= found;
	}
	if (any) {
		step = "update record";
		rc = cache__record_patch(c, txn, id, cache__rec_unverify, 0);
		if (rc)
			goto out;
	}
	step = "commit";
	rc = mdb_txn_commit(txn);
	txn = NULL;
out:
	if (txn)
		mdb_txn_abort(txn);
	if (rc) {
		cache__log(c, CACHE_LOG_ERR, "%s: evict blocks: %s: %s", c->dir,
			   step, mdb_strerror(rc));
		return cache__errno(rc);
	}
	return 0;
}

/* ---- integrity ---- */

int cache_blob_digests_set(struct cache *c, const struct cache_id *id,
			   uint64_t blob_size, uint32_t digest_block_size,
			   const uint8_t (*digests)[CACHE_SHA256_LEN],
			   uint64_t n)
{
	uint32_t dbs = digest_block_size;
	uint8_t(*copy)[CACHE_SHA256_LEN] = NULL;
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
	pthread_mutex_lock(&c->aux_mu);
	struct cache__digests *dg = cache__dg_find(c, id);
	if (!n) {
		if (dg) {
			free(dg->d);
			*dg = c->dgs[--c->ndgs];
		}
		goto out;
	}
	if (!dg) {
		if (c->ndgs == c->cap_dgs) {
			size_t cap = c->cap_dgs ? c->cap_dgs * 2 : 4;
			struct cache__digests *p =
				realloc(c->dgs, cap * sizeof(*p));
			if (!p) {
				free(copy);
				rc = -ENOMEM;
				goto out;
			}
			c->dgs = p;
			c->cap_dgs = cap;
		}
		dg = &c->dgs[c->ndgs++];
		dg->id = *id;
		dg->d = NULL;
	}
	free(dg->d);
	dg->d = copy;
	dg->size = blob_size;
	dg->dbs = dbs;
	dg->n = n;
out:
	pthread_mutex_unlock(&c->aux_mu);
	return rc;
}

/* Adds cache blocks [first, last] to the bad list, skipping repeats. */
static void cache__bad_add(uint64_t *bad, size_t cap, size_t *n,
			   uint64_t first, uint64_t last)
{
	for (uint64_t b = first; b <= last; b++) {
		if (*n > 0 && *n <= cap && bad[*n - 1] >= b)
			continue;
		if (*n < cap)
			bad[*n] = b;
		(*n)++;
	}
}

/* Sets or clears the record's verified flag (and stores the digest) in a
 * write transaction of its own. */
static int cache__record_set_verified(struct cache *c,
				      const struct cache_id *id,
				      const uint8_t *sha256, bool ok)
{
	struct cache_blob_record *rec = malloc(sizeof(*rec));
	unsigned char *buf = malloc(CACHE__RECORD_MAX);
	MDB_val k = {.mv_size = CACHE_ID_LEN, .mv_data = (void *)id->b}, v;
	MDB_txn *txn = NULL;
	int rc = ENOMEM;

	if (!rec || !buf)
		goto out;
	rc = mdb_txn_begin(c->env, NULL, 0, &txn);
	if (rc)
		goto out;
	rc = mdb_get(txn, c->dbi_blobs, &k, &v);
	if (rc)
		goto out;
	rc = cache__record_decode(&v, rec);
	if (rc)
		goto out;
	rec->verified = ok;
	if (ok) {
		rec->has_sha256 = true;
		memcpy(rec->sha256, sha256, CACHE_SHA256_LEN);
	}
	v.mv_size = cache__record_encode(rec, buf);
	v.mv_data = buf;
	rc = mdb_put(txn, c->dbi_blobs, &k, &v, 0);
	if (rc)
		goto out;
	rc = mdb_txn_commit(txn);
	txn = NULL;
out:
	if (txn)
		mdb_txn_abort(txn);
	free(rec);
	free(buf);
	return rc;
}

int cache_blob_mark_verified(struct cache *c, const struct cache_id *id,
			     const uint8_t *sha256, bool ok)
{
	int rc;

	if (!c || !id || (ok && !sha256))
		return -EINVAL;
	rc = cache__record_set_verified(c, id, sha256, ok);
	if (rc == MDB_NOTFOUND)
		return -ENOENT;
	if (rc) {
		cache__log(c, CACHE_LOG_ERR, "%s: mark verified: %s", c->dir,
			   mdb_strerror(rc));
		return cache__errno(rc);
	}
	return 0;
}

int cache_blob_verify(struct cache *c, const struct cache_id *id,
		      const uint8_t *expected, uint64_t *bad, size_t bad_cap,
		      size_t *nbad)
{
	struct cache_blob_record *rec = NULL;
	uint8_t want[CACHE_SHA256_LEN], got[CACHE_SHA256_LEN];
	uint8_t(*dg)[CACHE_SHA256_LEN] = NULL;
	uint64_t dg_n = 0, nblocks, pos = 0, dpos = 0, didx = 0;
	uint32_t dbs = 0;
	EVP_MD_CTX *whole = NULL, *part = NULL;
	MDB_txn *txn = NULL;
	size_t nb = 0;
	unsigned int md_len;
	int rc, err = 0;

	if (nbad)
		*nbad = 0;
	if (!c || !id || (bad_cap && !bad))
		return -EINVAL;
	rec = malloc(sizeof(*rec));
	whole = EVP_MD_CTX_new();
	part = EVP_MD_CTX_new();
	if (!rec || !whole || !part) {
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
	uint64_t held = 0;
	err = cache_blob_held(c, id, &held);
	if (err)
		goto out;
	if (held != rec->size) {
		err = -ENODATA;
		goto out;
	}
	pthread_mutex_lock(&c->aux_mu);
	struct cache__digests *d = cache__dg_find(c, id);
	if (d && d->size == rec->size) {
		dg = malloc((size_t)d->n * CACHE_SHA256_LEN);
		if (dg) {
			memcpy(dg, d->d, (size_t)d->n * CACHE_SHA256_LEN);
			dg_n = d->n;
			dbs = d->dbs;
		}
	}
	pthread_mutex_unlock(&c->aux_mu);

	EVP_DigestInit_ex(whole, EVP_sha256(), NULL);
	EVP_DigestInit_ex(part, EVP_sha256(), NULL);
	rc = cache__rtxn_get(c, &txn);
	if (rc) {
		err = cache__errno(rc);
		goto out;
	}
	nblocks = (rec->size + CACHE_BLOCK_SIZE - 1) / CACHE_BLOCK_SIZE;
	for (uint64_t i = 0; i < nblocks; i++) {
		unsigned char key[CACHE__BLOCK_KEY_LEN];
		MDB_val k = {.mv_size = sizeof(key), .mv_data = key}, v;
		uint64_t want_len = rec->size - pos < CACHE_BLOCK_SIZE
					    ? rec->size - pos
					    : CACHE_BLOCK_SIZE;

		cache__key(key, id, i);
		rc = mdb_get(txn, c->dbi_blocks, &k, &v);
		if (rc == MDB_NOTFOUND ||
		    (rc == 0 && v.mv_size != cache__sum_value_len(want_len))) {
			err = -ENODATA;
			goto out;
		}
		if (rc) {
			err = cache__errno(rc);
			goto out;
		}
		v.mv_size = want_len; /* the bytes, not the checksums */
		EVP_DigestUpdate(whole, v.mv_data, v.mv_size);
		/* Per digest block: feed and close them as the bytes pass. */
		for (size_t off = 0; dg && off < v.mv_size;) {
			uint64_t dend = (didx + 1) * (uint64_t)dbs;
			if (dend > rec->size)
				dend = rec->size;
			size_t take = v.mv_size - off;
			if (take > dend - dpos)
				take = (size_t)(dend - dpos);
			EVP_DigestUpdate(part, (unsigned char *)v.mv_data + off,
					 take);
			off += take;
			dpos += take;
			if (dpos == dend) {
				EVP_DigestFinal_ex(part, got, &md_len);
				if (didx < dg_n &&
				    memcmp(got, dg[didx], CACHE_SHA256_LEN))
					cache__bad_add(
						bad, bad_cap, &nb,
						didx * dbs / CACHE_BLOCK_SIZE,
						(dend - 1) / CACHE_BLOCK_SIZE);
				didx++;
				EVP_DigestInit_ex(part, EVP_sha256(), NULL);
			}
		}
		pos += v.mv_size;
	}
	cache__rtxn_put(c, txn);
	txn = NULL;
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
			   c->dir, hex, rec->identity, nb);
		err = -EBADMSG;
	}
	if (nbad)
		*nbad = nb < bad_cap ? nb : bad_cap;
out:
	if (txn)
		cache__rtxn_put(c, txn);
	EVP_MD_CTX_free(whole);
	EVP_MD_CTX_free(part);
	free(dg);
	free(rec);
	return err;
}

int cache_blob_sums_check(struct cache *c, const struct cache_id *id,
			  uint64_t *nblocks, uint64_t *bad, size_t bad_cap,
			  size_t *nbad)
{
	unsigned char key[CACHE__BLOCK_KEY_LEN];
	unsigned char *scratch = NULL;
	uint64_t *list = NULL, count = 0;
	size_t nlist = 0, cap = 0;
	MDB_cursor *cur = NULL;
	MDB_txn *txn = NULL;
	MDB_val k, v;
	int rc, err = 0;

	if (!c || !id || !nblocks || !nbad || (bad_cap && !bad))
		return -EINVAL;
	*nblocks = 0;
	*nbad = 0;
	scratch = malloc(CACHE__VALUE_MAX);
	if (!scratch)
		return -ENOMEM;
	rc = cache__rtxn_get(c, &txn);
	if (rc == 0)
		rc = mdb_cursor_open(txn, c->dbi_blocks, &cur);
	if (rc)
		goto out;
	cache__key(key, id, 0);
	k.mv_size = sizeof(key);
	k.mv_data = key;
	rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
	while (rc == 0 && cache__key_is(&k, id)) {
		uint64_t index = cache__be64_get((unsigned char *)k.mv_data +
						 CACHE_ID_LEN);

		count++;
		if (!cache__value_ok(c, id, index, &v, scratch)) {
			if (nlist == cap) {
				size_t ncap = cap ? cap * 2 : 16;
				uint64_t *p = realloc(list, ncap * sizeof(*p));

				if (!p) {
					rc = ENOMEM;
					goto out;
				}
				list = p;
				cap = ncap;
			}
			list[nlist++] = index;
		}
		rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT);
	}
	if (rc == MDB_NOTFOUND)
		rc = 0;
out:
	if (cur)
		mdb_cursor_close(cur);
	if (txn)
		cache__rtxn_put(c, txn);
	free(scratch);
	if (rc) {
		free(list);
		cache__log(c, CACHE_LOG_ERR, "%s: check block checksums: %s",
			   c->dir, mdb_strerror(rc));
		return cache__errno(rc);
	}
	/* Dropped outside the read transaction, each as a read would. */
	for (size_t i = 0; i < nlist; i++) {
		int brc = cache__block_bad(c, id, list[i]);

		if (brc != -ENOENT && err == 0)
			err = brc;
		if (i < bad_cap)
			bad[i] = list[i];
	}
	free(list);
	*nblocks = count;
	*nbad = nlist;
	return err;
}

int cache_blob_check(struct cache *c, const struct cache_id *id,
		     uint64_t *uncovered)
{
	unsigned char key[CACHE__EXTENT_KEY_LEN], bkey[CACHE__BLOCK_KEY_LEN];
	MDB_cursor *cur = NULL;
	MDB_txn *txn = NULL;
	MDB_val k, v, bk = {.mv_size = sizeof(bkey), .mv_data = bkey}, bv;
	uint64_t n = 0;
	int rc;

	if (!c || !id || !uncovered)
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
		uint64_t a = cache__be64_get((unsigned char *)k.mv_data +
					     CACHE_ID_LEN);
		uint64_t b = v.mv_size == 8 ? cache__be64_get(v.mv_data) : a;

		for (uint64_t i = a / CACHE_BLOCK_SIZE;
		     i * CACHE_BLOCK_SIZE < b; i++) {
			uint64_t need = b - i * CACHE_BLOCK_SIZE;
			int brc;

			if (need > CACHE_BLOCK_SIZE)
				need = CACHE_BLOCK_SIZE;
			cache__key(bkey, id, i);
			brc = mdb_get(txn, c->dbi_blocks, &bk, &bv);
			size_t blen = 0;

			if (brc == MDB_NOTFOUND ||
			    (brc == 0 &&
			     (!cache__sum_block_len(bv.mv_size, &blen) ||
			      blen < need)))
				n++;
			else if (brc) {
				rc = brc;
				goto out;
			}
		}
		rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT);
	}
	if (rc == MDB_NOTFOUND)
		rc = 0;
out:
	if (cur)
		mdb_cursor_close(cur);
	if (txn)
		cache__rtxn_put(c, txn);
	if (rc) {
		cache__log(c, CACHE_LOG_ERR, "%s: check: %s", c->dir,
			   mdb_strerror(rc));
		return cache__errno(rc);
	}
	*uncovered = n;
	return 0;
}

/* ---- listing ---- */

int cache_blob_ids(struct cache *c, struct cache_id **ids, size_t *n)
{
	struct cache_id *arr = NULL;
	size_t cnt = 0, cap = 0;
	MDB_cursor *cur = NULL;
	MDB_txn *txn = NULL;
	MDB_val k, v;
	int rc;

	if (!c || !ids || !n)
		return -EINVAL;
	rc = cache__rtxn_get(c, &txn);
	if (rc)
		goto out;
	rc = mdb_cursor_open(txn, c->dbi_blobs, &cur);
	if (rc)
		goto out;
	rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST);
	while (rc == 0) {
		if (k.mv_size == CACHE_ID_LEN) {
			if (cnt == cap) {
				size_t ncap = cap ? cap * 2 : 64;
				struct cache_id *p =
					realloc(arr, ncap * sizeof(*p));
				if (!p) {
					rc = ENOMEM;
					goto out;
				}
				arr = p;
				cap = ncap;
			}
			memcpy(arr[cnt++].b, k.mv_data, CACHE_ID_LEN);
		}
		rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT);
	}
	if (rc == MDB_NOTFOUND)
		rc = 0;
out:
	if (cur)
		mdb_cursor_close(cur);
	if (txn)
		cache__rtxn_put(c, txn);
	if (rc) {
		free(arr);
		cache__log(c, CACHE_LOG_ERR, "%s: list blobs: %s", c->dir,
			   mdb_strerror(rc));
		return cache__errno(rc);
	}
	*ids = arr;
	*n = cnt;
	return 0;
}

static int cache__sum_extent(void *ctx, uint64_t start, uint64_t end)
{
	*(uint64_t *)ctx += end - start;
	return 0;
}

int cache_blob_held(struct cache *c, const struct cache_id *id,
		    uint64_t *bytes)
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

/* ---- compaction ---- */

static uint64_t cache__file_size(const char *dir)
{
	char path[PATH_MAX];
	struct stat st;

	snprintf(path, sizeof(path), "%s/data.mdb", dir);
	return stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
}

int cache_compact(const struct cache_config *cfg, uint64_t *before,
		  uint64_t *after)
{
	char lockpath[PATH_MAX], tmp[PATH_MAX], from[PATH_MAX], to[PATH_MAX];
	struct cache *c = NULL;
	const char *step = "open";
	int fd = -1, rc;

	if (!cfg || !cfg->dir || !before || !after)
		return -EINVAL;
	rc = cache_open(cfg, &c);
	if (rc)
		return rc;
	snprintf(lockpath, sizeof(lockpath), "%s/lock.mdb", c->dir);
	snprintf(tmp, sizeof(tmp), "%s/compact.tmp", c->dir);
	snprintf(from, sizeof(from), "%s/compact.tmp/data.mdb", c->dir);
	snprintf(to, sizeof(to), "%s/data.mdb", c->dir);
	/* Every process with the environment open holds a shared fcntl lock
	 * on byte 0 of lock.mdb; turning ours into an exclusive one succeeds
	 * only when no other process has it open, and makes a process that
	 * opens it meanwhile wait in mdb_env_open until we are done. */
	step = "lock";
	fd = open(lockpath, O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		rc = -errno;
		goto out;
	}
	struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET,
			   .l_start = 0, .l_len = 1};
	if (fcntl(fd, F_SETLK, &fl) != 0) {
		struct flock who = fl;

		rc = -EBUSY;
		if (fcntl(fd, F_GETLK, &who) == 0 && who.l_type != F_UNLCK)
			cache__log(c, CACHE_LOG_ERR,
				   "%s: in use by another process (pid %ld, "
				   "perhaps a mount); unmount it first",
				   c->dir, (long)who.l_pid);
		else
			cache__log(c, CACHE_LOG_ERR,
				   "%s: in use by another process; unmount "
				   "it first",
				   c->dir);
		goto out_quiet;
	}
	step = "flush";
	rc = cache_flush(c);
	if (rc)
		goto out;
	/* The copy follows every overflow value's page count: check their
	 * headers first (cache_open does not read them). */
	rc = cache__file_check(c, true);
	if (rc)
		goto out_quiet;
	*before = cache__file_size(c->dir);
	step = "copy";
	unlink(from);
	rmdir(tmp);
	if (mkdir(tmp, 0700) != 0) {
		rc = -errno;
		goto out;
	}
	rc = mdb_env_copy2(c->env, tmp, MDB_CP_COMPACT);
	if (rc) {
		unlink(from);
		rmdir(tmp);
		rc = cache__errno(rc);
		goto out;
	}
	step = "fsync";
	int cfd = open(from, O_RDONLY | O_CLOEXEC);
	if (cfd < 0 || fsync(cfd) != 0) {
		rc = -errno;
		if (cfd >= 0)
			close(cfd);
		unlink(from);
		rmdir(tmp);
		goto out;
	}
	close(cfd);
	step = "swap";
	if (rename(from, to) != 0) {
		rc = -errno;
		unlink(from);
		rmdir(tmp);
		goto out;
	}
	rmdir(tmp);
	*after = cache__file_size(c->dir);
	rc = 0;
out:
	if (rc)
		cache__log(c, CACHE_LOG_ERR, "%s: compact: %s: %s", c->dir,
			   step, strerror(-rc));
out_quiet:
	/* Closing the environment closes its lock file, which drops every
	 * fcntl lock of this process on it, ours included. */
	cache_close(c);
	if (fd >= 0)
		close(fd);
	return rc;
}

/* cache_int: what the files of cache/ share and nothing outside includes:
 * the handle, the key layout, and each file's entry points for the others. */
#ifndef CACHE_INT_H
#define CACHE_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <lmdb.h>

#include "cache/cache.h"

/* The on-disk schema version this build reads and writes (README.md). */
#define CACHE__FORMAT 3u

#define CACHE__BLOCK_KEY_LEN (CACHE_ID_LEN + 8)
#define CACHE__EXTENT_KEY_LEN (CACHE_ID_LEN + 8)
#define CACHE__LRU_KEY_LEN (8 + CACHE_ID_LEN + 8)
#define CACHE__TXN_POOL 64
/* Eviction per commit: at most this many blocks. */
#define CACHE__EVICT_MAX 4096

struct cache__writer;  /* the write queue and writer thread: writer.c */
struct cache__pins;    /* evict.c */
struct cache__digests; /* per-block digests: verify.c */

/* The handle. The fields above the pool are set by cache_open (env.c) and
 * only read afterwards; each file owns the state behind its pointer and
 * the others reach it through the functions below. */
struct cache {
	MDB_env *env;
	MDB_dbi dbi_meta, dbi_blobs, dbi_extents, dbi_blocks;
	MDB_dbi dbi_access, dbi_lru;
	MDB_dbi dbi_regions; /* regions.c */
	char *dir;
	void (*log)(void *ctx, enum cache_log_level level, const char *msg);
	void *log_ctx;
	void (*on_lost)(void *ctx, const struct cache_id *id, uint64_t index,
			int err);
	void *lost_ctx;
	void (*on_evicted)(void *ctx, const struct cache_id *id,
			   uint64_t index);
	void *evicted_ctx;
	unsigned sync_flags; /* MDB_NOMETASYNC or MDB_NOSYNC, by cfg->sync */
	uint64_t budget;     /* configured; 0: none */
	/* The data file and where LMDB maps it (the map never moves), so that
	 * block reads copy with pread instead of touching the map, whose
	 * pages would count in the daemon's RSS. data_fd -1: not found, reads
	 * copy from the map. */
	int data_fd;
	const unsigned char *map_base;
	size_t map_len;
	size_t psize; /* LMDB's page size */
	/* Bytes cache_blocks_serve checked through the map since its pages
	 * were last unmapped (read.c). */
	atomic_uint_fast64_t map_served;

	/* Reset read transactions ready for mdb_txn_renew(): a warm read costs
	 * a renew and a reset instead of a begin and an abort. */
	pthread_mutex_t pool_mu;
	MDB_txn *pool[CACHE__TXN_POOL]; /* guarded by pool_mu */
	int pool_n;			/* guarded by pool_mu */

	struct cache__writer *w;
	struct cache__pins *pins;
	struct cache__digests *dg;
};

/* ---- keys (big-endian numbers: LMDB's byte order is numeric order) ---- */

static inline void cache__be64_put(unsigned char *p, uint64_t v)
{
	for (int i = 7; i >= 0; i--) {
		p[i] = (unsigned char)(v & 0xff);
		v >>= 8;
	}
}

static inline uint64_t cache__be64_get(const unsigned char *p)
{
	uint64_t v = 0;

	for (int i = 0; i < 8; i++)
		v = (v << 8) | p[i];
	return v;
}

/* Key of block `index`, of its access entry, or of the extent starting at
 * byte `n`: the id, then the number. */
static inline void cache__key(unsigned char *key, const struct cache_id *id,
			      uint64_t n)
{
	memcpy(key, id->b, CACHE_ID_LEN);
	cache__be64_put(key + CACHE_ID_LEN, n);
}

/* Whether k is such a key of blob id. */
static inline bool cache__key_is(const MDB_val *k, const struct cache_id *id)
{
	return k->mv_size == CACHE_ID_LEN + 8 &&
	       memcmp(k->mv_data, id->b, CACHE_ID_LEN) == 0;
}

/* The number of such a key. */
static inline uint64_t cache__key_n(const MDB_val *k)
{
	return cache__be64_get((const unsigned char *)k->mv_data +
			       CACHE_ID_LEN);
}

/* Key of the lru database: access tick, id, block index. */
static inline void cache__lru_key(unsigned char *key, uint64_t tick,
				  const struct cache_id *id, uint64_t index)
{
	cache__be64_put(key, tick);
	memcpy(key + 8, id->b, CACHE_ID_LEN);
	cache__be64_put(key + 8 + CACHE_ID_LEN, index);
}

static inline bool cache__id_eq(const struct cache_id *a,
				const struct cache_id *b)
{
	return memcmp(a->b, b->b, CACHE_ID_LEN) == 0;
}

/* ---- environment (env.c) ---- */

void cache__log(const struct cache *c, enum cache_log_level level,
		const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Maps an LMDB or system error code to a negative errno. */
int cache__errno(int rc);

/* Wall-clock microseconds, never 0: the LRU order is shared by every
 * process on the directory, so it needs a clock they share. */
uint64_t cache__now_us(void);

/* A read transaction from the pool (MDB code), and back to it. */
int cache__rtxn_get(struct cache *c, MDB_txn **out);
void cache__rtxn_put(struct cache *c, MDB_txn *txn);

/* Ends write transaction txn (NULL: its begin failed, or nothing to
 * write): commits it when rc is 0, else aborts it. Returns the commit's
 * MDB code, or rc. */
int cache__txn_end(MDB_txn *txn, int rc);

/* cache__txn_end, with a failure logged as "DIR: what: step: reason"
 * (step "commit" when the commit failed). Returns 0 or a negative
 * errno. */
int cache__txn_finish(struct cache *c, MDB_txn *txn, int rc, const char *what,
		      const char *step);

/* Puts v under blob id in dbi in a write transaction of its own, a
 * failure logged as cache__txn_finish logs it ("DIR: what: step: ...").
 * 0 or a negative errno. */
int cache__put_alone(struct cache *c, MDB_dbi dbi, const struct cache_id *id,
		     MDB_val *v, const char *what);

/* Calls fn(ctx, k, v) for each entry of dbi in txn, in key order: those
 * keyed by blob id (CACHE_ID_LEN + 8 bytes), or every one (id NULL). A
 * non-zero value of fn stops the walk: it goes to *stopped and the walk
 * returns 0. Otherwise an MDB code. */
int cache__db_walk(MDB_txn *txn, MDB_dbi dbi, const struct cache_id *id,
		   int (*fn)(void *ctx, const MDB_val *k, const MDB_val *v),
		   void *ctx, int *stopped);

/* The blob ids that key dbi's entries (record.c), into *ids (the
 * caller frees it) and *n; a failure is logged as "DIR: list WHAT: ...".
 * 0 or a negative errno. */
int cache__ids_of(struct cache *c, MDB_dbi dbi, const char *what,
		  struct cache_id **ids, size_t *n);

/* Deletes the entries of dbi in txn keyed by blob id (every one: id
 * NULL), each after fn(ctx, k, v) (NULL: none) returned 0 for it; a
 * non-zero value of fn (an MDB code) stops and is returned. MDB code. */
int cache__db_delete(MDB_txn *txn, MDB_dbi dbi, const struct cache_id *id,
		     int (*fn)(void *ctx, const MDB_val *k, const MDB_val *v),
		     void *ctx);

/* Refuses a data file that LMDB's own code would fault on: shorter than
 * the pages its meta page uses, or with damaged B-trees (with deep, the
 * overflow headers too). Returns 0, or -EPROTO / -errno, logged. */
int cache__file_check(struct cache *c, bool deep);

/* Drops the process's page-table entries for the map (not the page cache);
 * called by the writer after a batch. */
void cache__map_unmap_pages(const struct cache *c);

/* ---- the write queue and the writer thread (writer.c) ---- */

/* NULL on ENOMEM. queue_max: the bound on queued bytes (0: the default);
 * budget: the configured byte budget (0: none). */
struct cache__writer *cache__writer_new(size_t queue_max, uint64_t budget);
int cache__writer_start(struct cache *c);
/* Commits what is queued and joins the thread; returns the commit error no
 * cache_flush() collected, or 0. */
int cache__writer_stop(struct cache *c);
void cache__writer_free(struct cache__writer *w);

/* Copies up to len bytes from byte off of block (id, index) if it is
 * queued, and records the read for the LRU order either way. Returns the
 * bytes copied, or -ENOENT (not queued). */
long cache__queue_read(struct cache *c, const struct cache_id *id,
		       uint64_t index, size_t off, void *buf, size_t len);

/* Whether block (id, index) is queued. */
bool cache__queue_has(struct cache *c, const struct cache_id *id,
		      uint64_t index);

/* Removes the queued blocks [first, first + count) of id; waits for a
 * batch in flight that holds some, so that they are committed when it
 * returns (the caller deletes them next). */
void cache__queue_remove(struct cache *c, const struct cache_id *id,
			 uint64_t first, uint64_t count);

/* Blocks this process's writer evicted. */
uint64_t cache__writer_evicted(struct cache *c);

/* ---- extents (extent.c) ---- */

/* Merges [start, end) into the extents of id, in txn. MDB code. */
int cache__extent_merge(MDB_txn *txn, MDB_dbi dbi, const struct cache_id *id,
			uint64_t start, uint64_t end);

/* Cuts [s, e) out of the extent of id that contains s. MDB code. */
int cache__extent_cut(MDB_txn *txn, MDB_dbi dbi, const struct cache_id *id,
		      uint64_t s, uint64_t e);

/* Calls fn(ctx, start, end) for each extent of id in txn, in order: the
 * one walk of a blob's extents. An extent whose value is not 8 bytes is
 * damage, never an empty range: MDB_CORRUPTED. A non-zero value of fn
 * stops the walk: it goes to *stopped and the walk returns 0. Otherwise
 * an MDB code, logged (naming the blob, and the extent if malformed). */
int cache__extents_walk(struct cache *c, MDB_txn *txn,
			const struct cache_id *id,
			int (*fn)(void *ctx, uint64_t start, uint64_t end),
			void *ctx, int *stopped);

/* ---- LRU, pins, eviction and removal (evict.c) ---- */

struct cache__evicted {
	struct cache_id id;
	uint64_t index;
};

struct cache__pins *cache__pins_new(void);
void cache__pins_free(struct cache__pins *p);

/* Sets the access tick of block (id, index) to tick unless it has a later
 * one, moving its lru entry. only_present: nothing for a block without an
 * access entry (a read of a block since evicted, or never committed). */
int cache__access_set(struct cache *c, MDB_txn *txn, const struct cache_id *id,
		      uint64_t index, uint64_t tick, bool only_present);

/* Whether LMDB may free the stored block value v (the header of its first
 * overflow page is sound). 0 or MDB_CORRUPTED (logged). */
int cache__value_freeable(struct cache *c, const MDB_val *v);

/* Removes block (id, index): its data, access and lru entries and its
 * bytes from the extents, in txn. *found: whether it was stored. */
int cache__block_remove(struct cache *c, MDB_txn *txn,
			const struct cache_id *id, uint64_t index, bool *found);

/* Evicts least recently used, unpinned blocks until the stored blocks fit
 * budget, never one accessed at or after tick (this commit's own), at most
 * CACHE__EVICT_MAX - *n of them; appends them to out[*n...]. MDB code. */
int cache__evict(struct cache *c, MDB_txn *txn, uint64_t budget, uint64_t tick,
		 struct cache__evicted *out, int *n);

/* ---- block reads (read.c) ---- */

/* Room for a whole stored value: a block and its checksums. */
#define CACHE__VALUE_MAX                                                       \
	(CACHE_BLOCK_SIZE +                                                    \
	 CACHE__SUM_LEN * (CACHE_BLOCK_SIZE / CACHE__SUM_CHUNK + 1))

/* Copies na + nb bytes from byte voff of a value that LMDB returned at p
 * (inside the map; valid under the caller's transaction): the first na to
 * a, the rest to b; with pread when the map's place in the file is known. */
void cache__value_read(const struct cache *c, const void *p, size_t voff,
		       void *a, size_t na, void *b, size_t nb);

/* Whether the stored value v of block (id, index) has a plausible length
 * and every chunk matches its checksum; scratch: CACHE__VALUE_MAX bytes. */
bool cache__value_ok(const struct cache *c, const struct cache_id *id,
		     uint64_t index, const MDB_val *v, unsigned char *scratch);

/* A committed block failed its checksum: drops it unless it was put again
 * meanwhile, and logs it. Returns -ENOENT or a negative errno. */
int cache__block_bad(struct cache *c, const struct cache_id *id,
		     uint64_t index);

/* ---- per-block digests (verify.c) ---- */

struct cache__digests *cache__digests_new(void);
void cache__digests_free(struct cache__digests *d);

/* Checks a block about to be queued against the blob's digests, if any.
 * Returns 0 (queue it), -EBADMSG (logged; do not), or a negative errno.
 * On 0 with *locked set, the check holds a lock that cache_block_put
 * releases with cache__digests_put_done() once the block is queued: a
 * digest block larger than a cache block is complete when its last block
 * is queued, and two puts must not both find it incomplete. */
int cache__digests_put_check(struct cache *c, const struct cache_id *id,
			     uint64_t index, const void *data, size_t len,
			     bool *locked);
void cache__digests_put_done(struct cache *c);

/* ---- blob records (record.c) ---- */

/* Moves the record's last_access on to secs, in txn (none: nothing). */
int cache__record_touch(struct cache *c, MDB_txn *txn,
			const struct cache_id *id, uint64_t secs);

/* Clears the record's verified flag, in txn (none: nothing). */
int cache__record_unverify(struct cache *c, MDB_txn *txn,
			   const struct cache_id *id);

/* Sets or clears the verified flag (ok also stores sha256), in a write
 * transaction of its own. MDB code (MDB_NOTFOUND: no record). */
int cache__record_set_verified(struct cache *c, const struct cache_id *id,
			       const uint8_t *sha256, bool ok);

/* ---- block checksums (blocksum.c) ---- */

/* Every stored block value is the block's bytes followed by a checksum of
 * each CACHE__SUM_CHUNK bytes of them (the last chunk may be shorter): the
 * big-endian XXH3-64 of the chunk, seeded by the block's key (id, index)
 * plus the chunk's number, so that bytes moved under another key or to
 * another place fail too. Per chunk, a small read checks only what it
 * reads. */
#define CACHE__SUM_CHUNK 4096u
#define CACHE__SUM_LEN 8u

/* The number of chunks of a block of len bytes. */
size_t cache__sum_chunks(size_t len);

/* The size of the stored value of a block of len bytes. */
size_t cache__sum_value_len(size_t len);

/* The block length of a stored value of vlen bytes; false when no block
 * length gives that value size (a damaged value). */
bool cache__sum_block_len(size_t vlen, size_t *len);

/* The seed of block (id, index), for the two functions below. */
uint64_t cache__sum_seed(const struct cache_id *id, uint64_t index);

/* Writes the checksums of the len bytes of a block to out (8 bytes per
 * chunk). */
void cache__sum_put(uint64_t seed, const void *data, size_t len,
		    unsigned char *out);

/* Whether the len bytes at data, which start at chunk `first` of the block
 * and end at a chunk boundary or at the block's end, match the checksums
 * at sums (8 bytes per chunk, from chunk `first` on). */
bool cache__sum_ok(uint64_t seed, size_t first, const void *data, size_t len,
		   const unsigned char *sums);

/* ---- structural check of data.mdb (envcheck.c) ---- */

/* Checks the snapshot of the environment that txn (a read transaction of
 * env, whose data file is open as fd) sees, reading pages with pread, never
 * through the map, so that no damage can fault: every branch and leaf page
 * of every database (the free list and the main database included) has a
 * sound header, lies inside the file, is used once, and its nodes fit in
 * it; every overflow value's pages lie inside the file and are used once
 * (with deep, the header of its first page is read and checked too: one
 * scattered read per value); every free page is listed once (it may lie
 * past the file's end: LMDB does not write a page it allocated and freed
 * in one transaction); keys ascend; entry and page counts match the
 * database records; tree depth is bounded. Returns 0 (sound), -EPROTO
 * (damaged: why in msg, one line), or a negative errno from reading the
 * file. */
int cache__env_check(int fd, MDB_env *env, MDB_txn *txn, bool deep, char *msg,
		     size_t msglen);

/* The same walk without LMDB (the fuzz target's entry): pages of psize
 * bytes, the snapshot of the meta page whose txnid is txnid (-EAGAIN when
 * neither meta page has it). */
int cache__file_walk(int fd, size_t psize, uint64_t txnid, bool deep, char *msg,
		     size_t msglen);

/* Before LMDB frees the overflow pages of a value (a delete, or a put over
 * it), it trusts the page count in their first page's header: checks that
 * header (read from fd, else from the map) for the value LMDB returned at
 * `value` (vsize bytes) inside the map at `map` (map_len bytes, pages of
 * psize bytes). Returns 0 (sound; or an inline value, or one outside the
 * map: a page of the current write transaction), -EPROTO. */
int cache__ov_ok(int fd, const unsigned char *map, size_t map_len, size_t psize,
		 const void *value, size_t vsize);

/* ---- ownership of the cache directory (dirmode.c) ---- */

/* Refuses, like ssh's StrictModes, a cache directory or a data.mdb or
 * lock.mdb in it that is not owned by the effective uid, is writable by
 * group or others, or (the files) is not a regular file. With shared, only
 * the type is checked. Missing files are fine (LMDB creates them 0600).
 * Returns 0, or -EPERM with one line naming the path, its owner and mode
 * in msg, or a negative errno from lstat/stat (the step in msg). */
int cache__dir_check(const char *dir, bool shared, char *msg, size_t msglen);

#endif

/* cache: the persistent sparse-range cache of blob bytes, in LMDB. */
#ifndef CACHE_H
#define CACHE_H

struct cache;
struct cache_id;

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Contract.
 *
 * One LMDB environment per cache directory. Bytes are stored in blocks of
 * CACHE_BLOCK_SIZE keyed by (blob id, block index); the last block of a blob
 * may be shorter. The extent map (merged present byte ranges per blob) is
 * the single source of truth for "held"; a block and the extent that claims
 * it commit in the same write transaction.
 *
 * Writes go through one writer thread that commits in batches. A block
 * handed to cache_block_put() is readable through cache_block_read() at
 * once, from memory until its commit lands.
 *
 * All functions are thread-safe unless noted. They return 0 or a negative
 * errno; MDB_* codes are mapped at this edge (MDB_MAP_FULL -> -ENOSPC,
 * MDB_VERSION_MISMATCH and an unknown format -> -EPROTO, others -> -EIO)
 * and the detail goes to the log callback with the step and the reason. A
 * miss is a result (-ENOENT), not an error, and is not logged.
 */

/* Overridable only to build the block-size benchmark (cache/bench.c); a
 * cache records its block size and is refused by a build with another. */
#ifndef CACHE_BLOCK_SIZE
#define CACHE_BLOCK_SIZE (64u * 1024u)
#endif
#define CACHE_ID_LEN 16
#define CACHE_VALIDATOR_MAX 256
#define CACHE_IDENTITY_MAX 8192
#define CACHE_SHA256_LEN 32

enum cache_log_level { CACHE_LOG_ERR, CACHE_LOG_WARN, CACHE_LOG_INFO };

/* How commits reach the disk. */
enum cache_sync {
	CACHE_SYNC_FULL, /* data, then the meta page, fsynced at every commit:
			    a power loss keeps every committed byte */
	CACHE_SYNC_META, /* data fsynced, the meta page written but not
			    fsynced: a power loss may undo the last commits,
			    never corrupts (LMDB's MDB_NOMETASYNC) */
	CACHE_SYNC_NONE, /* nothing fsynced: the OS writes back when it likes;
			    safe from a crash of pacefs, but a power loss may
			    lose or corrupt the cache (MDB_NOSYNC) */
};

struct cache_config {
	enum cache_sync sync;
	const char *dir; /* created (mode 0700) if missing */
	/* Called from any thread, the writer thread included; NULL logs to
	 * stderr. msg is valid during the call only. */
	void (*log)(void *ctx, enum cache_log_level level, const char *msg);
	void *log_ctx;
	uint64_t map_size;  /* LMDB map size; 0: as large as the address
			       space allows */
	size_t queue_bytes; /* bound on queued, uncommitted block bytes;
			       0: the default */
	/* Optional. Called on the writer thread, with no cache lock held, for
	 * each queued block whose commit failed (err: negative errno, e.g.
	 * -ENOSPC). The block has left the queue: cache_block_read() of it
	 * misses (-ENOENT) until it is put again, so the caller must stop
	 * counting its bytes as held. Must not call cache_flush(),
	 * cache_block_put() or cache_close(), nor wait for a lock that a
	 * thread may hold while it calls cache_block_put() (that thread may
	 * be waiting for the writer). */
	void (*on_lost)(void *ctx, const struct cache_id *id, uint64_t index,
			int err);
	void *lost_ctx;
	/* Byte budget for block data; 0: unlimited. Counted as stored blocks
	 * times CACHE_BLOCK_SIZE (a short last block counts whole). Enforced
	 * by this process's writer at admission: a commit that adds blocks
	 * evicts the least recently used unpinned blocks, of any blob, in the
	 * same transaction. Also recorded in the environment for `pacefs
	 * cache stat`. */
	uint64_t budget_bytes;
	/* Optional. Called on the writer thread, after the commit that
	 * evicted it landed, for each block this process evicted (budget,
	 * or a full disk or map: only a cache with on_evicted set evicts to
	 * make room after -ENOSPC; not for cache_blocks_evict() or
	 * cache_blob_drop(), whose callers know). Same rules as on_lost: the
	 * block's bytes are no longer held. Blocks evicted by another process
	 * sharing the directory are not reported: a cache_block_read() of
	 * them returns -ENOENT. */
	void (*on_evicted)(void *ctx, const struct cache_id *id,
			   uint64_t index);
	void *evicted_ctx;
	/* The directory is shared on purpose: do not refuse it, or its
	 * data.mdb and lock.mdb, for another owner or for group or other
	 * write permission (see cache_open). */
	bool shared;
};

/* A blob's identity: the first CACHE_ID_LEN bytes of SHA-256 over the
 * canonical identity string (what the user configured, e.g. "url:" + URL),
 * never over whichever mirror answered. */
struct cache_id {
	uint8_t b[CACHE_ID_LEN];
};

void cache_id_from_string(const char *identity, struct cache_id *out);

/* Writes the id as 2 * CACHE_ID_LEN lowercase hex digits and a NUL. */
void cache_id_to_hex(const struct cache_id *id, char out[2 * CACHE_ID_LEN + 1]);

/* The stored record of one blob. Zero-initialise it before filling it in:
 * cache_blob_put() writes every field. */
struct cache_blob_record {
	uint64_t size;
	char validator[CACHE_VALIDATOR_MAX]; /* strong ETag, else
						Last-Modified; "" if none */
	uint64_t last_access;		     /* seconds since the epoch; the
						writer also moves it on when
						it persists reads or puts */
	/* Since record version 2 (zero in older records): */
	uint64_t validated_at; /* seconds since the epoch when the origin
				  last confirmed `validator`; 0: never */
	bool has_sha256;       /* sha256 holds the whole blob's digest */
	bool verified;	       /* the held bytes matched sha256 when the blob
				  was complete; cleared when a block of it is
				  evicted (cache_blob_verify sets it) */
	uint8_t sha256[CACHE_SHA256_LEN];
	char identity[CACHE_IDENTITY_MAX]; /* the canonical identity string
					      the id was made from (e.g.
					      "url:" + URL); "" unknown */
};

/* Opens (creating if needed) the cache in cfg->dir. Writes *out only on
 * success. Before LMDB uses the files, refuses (-EPERM, logged with the
 * path, its owner and mode) a directory, data.mdb or lock.mdb not owned
 * by the effective uid or writable by group or others (unless
 * cfg->shared), and a file that is not a regular file. Before anything
 * reads the map, refuses (-EPROTO, logged in one line) a data.mdb shorter
 * than the pages LMDB's meta page says it uses, one whose B-trees are
 * damaged (a structural walk of every database, reading with pread), and
 * a cache of format 1 or 2 (no block checksums). Errors:
 * -EACCES/-EROFS/-ENOTDIR (directory unusable, logged with the path), -EPERM,
 * -EPROTO (unknown format version, damaged file), -ENOMEM, -EIO. */
int cache_open(const struct cache_config *cfg, struct cache **out);

/* Waits for every queued block to commit, stops the writer and closes the
 * environment. cache_close(NULL) is a no-op. */
void cache_close(struct cache *c);

/* Reads the record of blob id. Returns 0, -ENOENT (none), -EIO. */
int cache_blob_get(struct cache *c, const struct cache_id *id,
		   struct cache_blob_record *out);

/* Writes the record of blob id (synchronously committed). */
int cache_blob_put(struct cache *c, const struct cache_id *id,
		   const struct cache_blob_record *rec);

/* Removes blob id: record, extents and blocks, including queued blocks not
 * yet committed. */
int cache_blob_drop(struct cache *c, const struct cache_id *id);

/* Calls fn(ctx, start, end) for every held extent of blob id in ascending
 * order, from one read transaction (committed bytes only). Stops early and
 * returns fn's value when it is non-zero. A malformed extent is damage:
 * -EIO, logged with the blob and the extent's start (the other blobs are
 * unaffected; dropping the blob clears it). */
int cache_extents_each(struct cache *c, const struct cache_id *id,
		       int (*fn)(void *ctx, uint64_t start, uint64_t end),
		       void *ctx);

/* Queues block `index` of blob id (len bytes, CACHE_BLOCK_SIZE except for
 * the blob's last block) for the writer. Copies data. May block while the
 * queue is over its memory bound (back-pressure). Returns 0, -EINVAL,
 * -ENOMEM, -EBADMSG (below). Must not be called from on_lost or
 * on_evicted, nor while holding a lock they take.
 *
 * With per-block digests registered for the blob (cache_blob_digests_set),
 * the bytes are checked on the caller's thread, before anything is
 * queued, and -EBADMSG (logged with the blob, the block and the digest
 * block; nothing queued) means they may not be stored:
 *  - the block is not one of the blob the digests describe: index past
 *    its end, or len other than the block's length there;
 *  - digest blocks of CACHE_BLOCK_SIZE or smaller: a digest block inside
 *    this block does not match;
 *  - larger digest blocks, each k cache blocks (the blob's last one may
 *    have fewer, its last block short): while another cache block of the
 *    digest block is not held (queued or committed), the put is queued
 *    unchecked. The put that makes it complete reads the other blocks
 *    (queue or LMDB, block checksums checked) and hashes the whole digest
 *    block: -EBADMSG then means the digest block as a whole is wrong, and
 *    the caller evicts its other cache blocks (cache_blocks_evict(c, id,
 *    first, k)) and fetches it again, from another source. Until then
 *    those blocks are readable (cache_block_read) without having been
 *    checked: a caller that must serve only checked bytes waits for the
 *    put that completes the digest block. Such puts take a lock of this
 *    process (two puts never both find a digest block incomplete; two
 *    processes sharing the directory may), and the completing one reads
 *    and hashes the digest block's bytes, on the caller's thread. */
int cache_block_put(struct cache *c, const struct cache_id *id, uint64_t index,
		    const void *data, size_t len);

/* ---- shared block buffers ---- */

/* CACHE_BLOCK_SIZE bytes that a caller fills where they arrive and then
 * queues by reference (cache_block_put_buf), so that a block's bytes are
 * not copied between their arrival and their commit. Reference counted
 * (the counts are atomic: any thread may take or drop a reference). The
 * bytes are the owners' to read; while more than one reference exists
 * (cache_buf_shared) nobody writes them: one that wants to takes a new
 * buffer. */
struct cache_buf;

/* A new buffer with one reference, or NULL (out of memory). */
struct cache_buf *cache_buf_new(void);

/* Its CACHE_BLOCK_SIZE bytes. */
unsigned char *cache_buf_data(struct cache_buf *b);

/* Takes a reference; returns b. */
struct cache_buf *cache_buf_ref(struct cache_buf *b);

/* Drops a reference; the last one frees the buffer. NULL: nothing. */
void cache_buf_unref(struct cache_buf *b);

/* Whether another reference than the caller's exists. */
bool cache_buf_shared(const struct cache_buf *b);

/* cache_block_put() of the first len bytes of b without copying them: the
 * queue takes a reference of its own (the caller keeps its), and the
 * writer commits from b. The caller must not write b's bytes from here
 * on (they are shared). Same results and rules as cache_block_put(). */
int cache_block_put_buf(struct cache *c, const struct cache_id *id,
			uint64_t index, struct cache_buf *b, size_t len);

/* ---- reads ---- */

/* Copies up to len bytes starting at byte `off` of block `index` of blob id
 * into buf, from the queue if the block is not yet committed, else from
 * LMDB. A committed block is read whole and checked against the checksum
 * stored with it; one that fails is never copied out: it is dropped from
 * the cache (logged once, with the blob and block) and the read returns
 * -ENOENT, so that the caller fetches it again. Returns the number of
 * bytes copied (short at the blob's end), -ENOENT when the block is not
 * held, -ENOMEM, -EIO. */
long cache_block_read(struct cache *c, const struct cache_id *id,
		      uint64_t index, size_t off, void *buf, size_t len);

/* One piece of a reply: bytes [off, off + len) of block `index`. */
struct cache_piece {
	uint64_t index;
	size_t off, len;
	void *buf; /* len bytes the cache may copy the piece into */
	/* In: non-NULL for a piece the caller holds itself (cache_blocks_serve
	 * leaves it as it is). Out: where the bytes are: in memory (buf), or,
	 * when NULL, at byte pos of the file fd. */
	const void *mem;
	int fd;
	uint64_t pos;
};

/* Finds the pieces p[0..n) of blob id that the caller does not hold
 * (mem NULL), checks them, and calls fn(ctx, p, n) once while they stay
 * as found; returns fn's value. A piece of a block still queued, or of any
 * block when !fds or the data file cannot be used, is copied into its buf
 * (mem = buf). With fds, a piece of a committed block is left where it is:
 * mem NULL, fd and pos name its bytes in the data file, and those bytes do
 * not change until fn returns, because the read transaction that found
 * them is held until then and LMDB reuses no page a reader holds, also
 * when the block is evicted or dropped meanwhile. So fn may splice them
 * (fd is the cache's: never write, seek or close it). Every checksum chunk
 * a piece touches is checked first, as cache_block_read() checks, and
 * where they lie: the pages that were checked are the pages fn gets (they
 * stay mapped in this process, and so in use, until fn returns). Keep fn
 * short: while it runs, no page freed since is reused, and the file
 * grows.
 *
 * Without calling fn, returns -ENOENT with *missing = its index when a
 * block is not held, or failed its checksum (it is then dropped, as by
 * cache_block_read()); -EIO (logged; *missing set) when a block is
 * shorter than a piece asks; -EINVAL, -ENOMEM, or another negative errno
 * from LMDB (logged). Thread-safe. */
int cache_blocks_serve(struct cache *c, const struct cache_id *id,
		       struct cache_piece *p, size_t n, bool fds,
		       int (*fn)(void *ctx, struct cache_piece *p, size_t n),
		       void *ctx, uint64_t *missing);

/* Blocks until everything queued before the call is committed. Returns the
 * first commit error since the last flush, or 0. */
int cache_flush(struct cache *c);

/* ---- budget and pins ---- */

/* Pins bytes [start, end) of blob id under `slot` (any number the caller
 * chooses, e.g. a reader id), replacing that (id, slot)'s previous pin;
 * start >= end removes it. Blocks overlapping a pin are never evicted by
 * this process's writer (the budget may then be exceeded). Pins live in
 * memory, per process; another process's writer does not see them. A pin
 * set while a commit runs applies from the next one. Cheap (a lock and a
 * scan of the pins): may be called on every read. Returns 0, -EINVAL,
 * -ENOMEM. */
int cache_pin_set(struct cache *c, const struct cache_id *id, uint64_t slot,
		  uint64_t start, uint64_t end);

/* Removes blocks [first, first + count) of blob id, queued or committed,
 * and cuts them out of its extents, in one transaction. Blocks not held
 * are skipped. Synchronous; not reported through on_evicted. */
int cache_blocks_evict(struct cache *c, const struct cache_id *id,
		       uint64_t first, uint64_t count);

/* ---- integrity ---- */

/* Registers the expected SHA-256 of each digest block of blob id (in
 * memory, per process; replaces any previous set; n == 0 removes it): the
 * bytes of every later cache_block_put of the blob are checked against
 * them. digest_block_size must be at least 4096 and divide
 * CACHE_BLOCK_SIZE or be a multiple of it (any power of two from 4 KiB
 * does); n must be ceil(blob_size / digest_block_size), the last digest
 * block being short. Copies the digests. Returns 0, -EINVAL, -ENOMEM. */
int cache_blob_digests_set(struct cache *c, const struct cache_id *id,
			   uint64_t blob_size, uint32_t digest_block_size,
			   const uint8_t (*digests)[CACHE_SHA256_LEN],
			   uint64_t n);

/* Checks the whole held blob id against `expected` (NULL: the record's
 * sha256), reading every block from one read transaction (committed
 * bytes: call cache_flush first). On a match the record gets verified =
 * true (and expected as its sha256); on a mismatch verified = false, and
 * when per-block digests are registered, the cache block indices of the
 * digest blocks that differ go to bad[0..bad_cap) with their count in
 * *nbad (0 means the culprits are unknown). Returns 0 (match), -EBADMSG
 * (mismatch), -ENODATA (some byte of [0, size) is not held), -ENOENT (no
 * record, or no digest to check against), -EIO. Takes as long as reading
 * the blob; the record update is a synchronous commit. */
int cache_blob_verify(struct cache *c, const struct cache_id *id,
		      const uint8_t *expected, uint64_t *bad, size_t bad_cap,
		      size_t *nbad);

/* Records the outcome of a whole-blob check the caller made itself (e.g.
 * while the bytes streamed past): ok sets verified and stores sha256 as
 * the blob's digest; !ok clears verified (sha256 may be NULL then). One
 * synchronous commit that rewrites only those fields. Returns 0, -ENOENT
 * (no record), -EINVAL, -EIO. */
int cache_blob_mark_verified(struct cache *c, const struct cache_id *id,
			     const uint8_t *sha256, bool ok);

/* Checks the checksum of every committed block of blob id, reading each
 * from the data file. A block that fails is dropped, as a read that finds
 * it drops it (logged; its bytes leave the extents). *nblocks gets the
 * number of blocks checked, *nbad the number dropped, and bad[0..bad_cap)
 * their indices. Returns 0, -ENOMEM, -EIO. Takes as long as reading the
 * blob's blocks. */
int cache_blob_sums_check(struct cache *c, const struct cache_id *id,
			  uint64_t *nblocks, uint64_t *bad, size_t bad_cap,
			  size_t *nbad);

/* Structural check of blob id: every byte an extent claims is in a stored
 * block of the right length. *uncovered gets the number of blocks an
 * extent claims that are missing or too short (0: sound). A malformed
 * extent returns -EIO, logged with the blob and the extent's start. */
int cache_blob_check(struct cache *c, const struct cache_id *id,
		     uint64_t *uncovered);

/* ---- listing and maintenance (pacefs cache) ---- */

/* The ids of every blob record, in key order, as a malloc'd array the
 * caller frees. Returns 0 (with *n possibly 0 and *ids NULL), -ENOMEM,
 * -EIO. */
int cache_blob_ids(struct cache *c, struct cache_id **ids, size_t *n);

/* Sum of the lengths of blob id's extents (committed bytes). */
int cache_blob_held(struct cache *c, const struct cache_id *id,
		    uint64_t *bytes);

/* Rewrites the environment at cfg->dir compactly (mdb_env_copy2 with
 * MDB_CP_COMPACT) and swaps it in: freed pages are returned to the file
 * system. Opens the environment itself: cfg->dir must not be open in this
 * process. While it runs it holds LMDB's lock so that no other process can
 * open the cache. Returns -EBUSY (logged) when another process has it
 * open, else 0 with the data file's size before and after. */
int cache_compact(const struct cache_config *cfg, uint64_t *before,
		  uint64_t *after);

/* ---- remembered regions ---- */

/* The byte ranges a blob's first reader needed at open (a header, an
 * index, a footer), kept in a table of their own beside the blob: they
 * outlive its blocks (eviction, cache_blob_drop, `pacefs cache evict`),
 * so that a later open whose bytes are not held can ask for them all at
 * once. They describe one version of the blob: `validator` is the one
 * they were recorded under, and a reader that finds another drops them
 * (cache_regions_drop). At most CACHE_REGIONS_MAX, each start < end. */
#define CACHE_REGIONS_MAX 32

struct cache_region {
	uint64_t start, end; /* bytes [start, end) */
};

struct cache_regions {
	char validator[CACHE_VALIDATOR_MAX]; /* NUL-terminated; "" none */
	struct cache_region r[CACHE_REGIONS_MAX];
	size_t n;
};

/* Replaces the regions of blob id (synchronously committed). Returns 0,
 * -EINVAL (n 0 or over CACHE_REGIONS_MAX, an empty region, a validator
 * not terminated), -ENOSPC, -EIO. */
int cache_regions_put(struct cache *c, const struct cache_id *id,
		      const struct cache_regions *rg);

/* Reads the regions of blob id. Returns 0, -ENOENT (none; also a
 * damaged entry, which is logged and dropped), -EIO. */
int cache_regions_get(struct cache *c, const struct cache_id *id,
		      struct cache_regions *out);

/* Forgets the regions of blob id (synchronously committed). Returns 0,
 * -ENOENT (none), -EIO. */
int cache_regions_drop(struct cache *c, const struct cache_id *id);

/* The ids of every blob with regions, in key order, as a malloc'd array
 * the caller frees (a blob may have regions and no record). Returns 0
 * (with *n possibly 0 and *ids NULL), -ENOMEM, -EIO. */
int cache_regions_ids(struct cache *c, struct cache_id **ids, size_t *n);

/* Whole-cache figures for status and `pacefs cache`. */
struct cache_stats {
	uint64_t blobs;
	uint64_t blocks;
	uint64_t bytes;	    /* bytes of block data held */
	uint64_t map_size;  /* LMDB map size */
	uint64_t file_size; /* data.mdb size on disk */
	uint64_t budget;    /* this process's budget_bytes, else the one the
			       last process with a budget recorded; 0: none */
	uint64_t evicted;   /* blocks this process's writer evicted */
	uint32_t format;    /* on-disk format version */
	uint32_t block_size;
};

int cache_stats_get(struct cache *c, struct cache_stats *out);

#endif

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
#define CACHE_BLOCK_SIZE (256u * 1024u)
#endif
#define CACHE_ID_LEN 16
#define CACHE_VALIDATOR_MAX 256

enum cache_log_level { CACHE_LOG_ERR, CACHE_LOG_WARN, CACHE_LOG_INFO };

struct cache_config {
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
};

/* A blob's identity: the first CACHE_ID_LEN bytes of SHA-256 over the
 * canonical identity string (what the user configured, e.g. "url:" + URL),
 * never over whichever mirror answered. */
struct cache_id {
	uint8_t b[CACHE_ID_LEN];
};

void cache_id_from_string(const char *identity, struct cache_id *out);

/* The stored record of one blob. */
struct cache_blob_record {
	uint64_t size;
	char validator[CACHE_VALIDATOR_MAX]; /* strong ETag, else
						Last-Modified; "" if none */
	uint64_t last_access;		     /* seconds since the epoch */
};

/* Opens (creating if needed) the cache in cfg->dir. Writes *out only on
 * success. Errors: -EACCES/-EROFS/-ENOTDIR (directory unusable, logged with
 * the path), -EPROTO (unknown format version), -ENOMEM, -EIO. */
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
 * returns fn's value when it is non-zero. */
int cache_extents_each(struct cache *c, const struct cache_id *id,
		       int (*fn)(void *ctx, uint64_t start, uint64_t end),
		       void *ctx);

/* Queues block `index` of blob id (len bytes, CACHE_BLOCK_SIZE except for
 * the blob's last block) for the writer. Copies data. May block while the
 * queue is over its memory bound (back-pressure). */
int cache_block_put(struct cache *c, const struct cache_id *id,
		    uint64_t index, const void *data, size_t len);

/* Copies up to len bytes starting at byte `off` of block `index` of blob id
 * into buf, from the queue if the block is not yet committed, else from
 * LMDB. Returns the number of bytes copied (short at the blob's end),
 * -ENOENT when the block is not held, -EIO. */
long cache_block_read(struct cache *c, const struct cache_id *id,
		      uint64_t index, size_t off, void *buf, size_t len);

/* Blocks until everything queued before the call is committed. Returns the
 * first commit error since the last flush, or 0. */
int cache_flush(struct cache *c);

/* Whole-cache figures for status and `pacefs cache`. */
struct cache_stats {
	uint64_t blobs;
	uint64_t blocks;
	uint64_t bytes;	    /* bytes of block data held */
	uint64_t map_size;  /* LMDB map size */
	uint64_t file_size; /* data.mdb size on disk */
};

int cache_stats_get(struct cache *c, struct cache_stats *out);

#endif

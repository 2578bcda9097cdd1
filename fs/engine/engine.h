/* engine: the running mount's scheduler, transfers, in-memory blocks and
 * cache, behind one lock: what the rest of fs/ may ask of it. */
#ifndef FS_ENGINE_H
#define FS_ENGINE_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>

#include "cache/cache.h"
#include "fetch/fetch.h"
#include "fs/base.h"
#include "pacing/pace.h"

/*
 * Contract.
 *
 * struct engine is opaque outside the engine's files (engine.c,
 * blobs.c, blocks.c, transfers.c, reads.c, wholecheck.c, regions.c;
 * engine_int.h). Every function here is thread-safe and takes the
 * engine's lock itself; none is called with it held. Blob indices are
 * those engine_blob_add() wrote; a string the engine returns (a name, a
 * URL) is immutable and lives as long as the engine. Errors are negative
 * errno values; detail is logged.
 */

struct engine;

/* One source (URL) of a blob, as probed. */
struct engine_source {
	char *url;	 /* final URL after redirects */
	char *validator; /* strong ETag or Last-Modified, or NULL */
	uint32_t pace_id;
	bool if_match; /* an object store's: If-Match pins the validator */
	bool stream;   /* ignores Range: read as one whole-object stream
			  (PACE_CAPS_NO_RANGES) */
};

struct engine_config {
	uint32_t max_blobs;
	uint32_t max_sources;
	unsigned lanes;	     /* connections of the whole mount */
	unsigned host_lanes; /* connections to one origin (0: lanes) */
	unsigned read_timeout_s;
	unsigned stall_timeout_s;
	unsigned retry_after_max_s;
	unsigned readahead_ms; /* a sequential reader's lead */
	uint64_t chunk;	       /* requests cover whole chunks; 0: a block */
	uint64_t inflight_max; /* bytes requested and not yet received; 0:
				  no cap but the lanes' */
	uint64_t kernel_ahead; /* bytes the kernel reads ahead of readers */
	uint64_t speculate;    /* speculative fill (pace_config.fill_max) */
	bool creds_change; /* credentials can change (auth_creds_changeable):
			      a refusal for them holds a source, with a
			      backoff, instead of excluding it */
	struct fetch_config fetch;
	/* Where the engine's log lines go (obs/'s obs_log_hook); NULL:
	 * nowhere. Called from any of its threads, with or without its lock:
	 * it must not call the engine. */
	void (*log)(void *ctx, enum fs_log_level level, const char *fmt,
		    va_list ap);
	void *log_ctx;
	/* The lines that are about a file, a source, a range or a status,
	 * with those as fields (for a log a collector parses), to the same
	 * ctx; NULL: they go to log. The same rules as log. */
	void (*log_fields)(void *ctx, enum fs_log_level level,
			   const struct fs_log_fields *f, const char *fmt,
			   va_list ap);
	/* Has the kernel's pages of bytes [start, end) of blob b dropped, the
	 * file of inode ino (0: never opened, so the kernel holds no page of
	 * it); name (for the log) lives as long as the engine. Called under
	 * the engine's lock: it queues, and never waits for the kernel (which
	 * waits, in an invalidation, for reads that take that lock). NULL:
	 * no pages are dropped. */
	void (*inval)(void *ctx, uint32_t b, const char *name, uint64_t ino,
		      uint64_t start, uint64_t end);
	void *inval_ctx;
};

/* Creates the engine, with room for cfg->max_blobs blobs, over an open
 * cache (borrowed; must outlive the engine). */
int engine_new(const struct engine_config *cfg, struct cache *cache,
	       struct engine **out);

/* Starts the transfer thread. */
int engine_start(struct engine *e);

/* Stops transfers and the whole-blob checks, flushes the cache, frees the
 * engine. engine_free(NULL) does nothing. */
void engine_free(struct engine *e);

/* ---- blobs (blobs.c) ---- */

/* Adds a blob of `size` bytes; writes its index. Its sources come with
 * engine_blob_ready(). -ENOSPC when max_blobs are in use. */
int engine_blob_add(struct engine *e, const char *name, uint64_t size,
		    const struct cache_id *id, uint32_t *out);

/* The most bytes a blob of unknown length may have: its size in the
 * scheduler and the engine until its stream ends. */
#define ENGINE_SIZE_OPEN (1ull << 40)

/* Marks blob i, added with ENGINE_SIZE_OPEN, as of unknown length: its
 * only sources send no length (a chunked stream), and its size is where
 * the stream ends (FETCH_OK with fetch_result.length), which then
 * becomes the blob's, the scheduler's and the cache record's, and the
 * kernel's attributes of its inode are dropped. Before
 * engine_blob_ready. */
void engine_blob_set_open(struct engine *e, uint32_t i);

/* Blob i's size into *size: 0 while its length is unknown (the stream
 * has not ended), so that stat says 0 as for /proc files. Returns true
 * while unknown. Any thread. */
bool engine_blob_size(struct engine *e, uint32_t i, uint64_t *size);

/* Gives blob i the digests a manifest or -o sha256 names: the whole
 * blob's (sha256, or NULL) and per-block ones (dblocks[n] over blocks of
 * dblock bytes, or n == 0), which the cache then checks each block
 * against before it stores it (cache_blob_digests_set). Before
 * engine_blob_ready. -EINVAL when the block digests do not cover
 * every byte. */
int engine_blob_digests(struct engine *e, uint32_t i, const uint8_t *sha256,
			uint32_t dblock, const uint8_t (*dblocks)[32],
			uint32_t n);

/* Gives blob i the regions a manifest names for it (r[0..n), at most
 * CACHE_REGIONS_MAX used, each cut to its size): the byte ranges its
 * readers need at open, asked together when it is opened while they are
 * not held. Regions the cache remembers for its validator take their
 * place. Before engine_blob_ready; copies them. Returns 0, -ENOMEM. */
int engine_blob_regions(struct engine *e, uint32_t i,
			const struct cache_region *r, size_t n);

/* Gives blob i its probed sources (their strings move in; the array stays
 * the caller's) and marks the bytes the cache holds as held (read from the
 * cache without the engine's lock), and [0, queued) too: bytes the caller
 * put into the cache (cache_block_put) that may not be committed yet (a
 * read finds them in the writer's queue; a failed commit drops them as
 * any block's). Once only: a second call does nothing. */
int engine_blob_ready(struct engine *e, uint32_t i,
		      struct engine_source *sources, uint32_t n,
		      uint64_t queued);

bool engine_blob_is_ready(struct engine *e, uint32_t i);

/* Bytes of blob b held (in memory or in the cache). */
uint64_t engine_held(struct engine *e, uint32_t b);

/* The validator of blob b's first source into buf; its length or
 * -ENODATA. */
int engine_validator(struct engine *e, uint32_t b, char *buf, size_t cap);

/* "remote" (not probed), "empty", "partial", "complete" or "changed". */
const char *engine_state(struct engine *e, uint32_t b);

/* The stream of a file whose every source ignores Range (streamnote.c). */
struct engine_stream_view {
	bool running;	   /* a lane streams it now */
	bool held;	   /* that lane is held ahead of its readers */
	uint64_t frontier; /* its next byte; the bytes held when none runs */
	uint64_t rate;	   /* bytes per second; 0: not measured yet */
	uint64_t wait_off; /* the first byte of the earliest waiting read;
			      UINT64_MAX: none waits */
	uint64_t eta_ms;   /* until the frontier reaches wait_off at rate;
			      UINT64_MAX: unknown or none waits */
	uint64_t restarts; /* streams of it that came again from byte 0 */
};

/* Fills *out with blob b's stream. Returns 0, or -ENOENT when b is not
 * stream-only (a source of it honours Range) or unknown. Thread-safe. */
int engine_stream(struct engine *e, uint32_t b, struct engine_stream_view *out);

/* ---- reads (reads.c) ---- */

/* Opens a reader stream on blob b, the file of inode ino. *keep_cache
 * says whether the kernel may keep its cached pages of the file: false
 * once after bytes were dropped as wrong or stale. */
int engine_open(struct engine *e, uint32_t b, uint64_t ino,
		uint32_t *reader_out, bool *keep_cache);

/* Opens a read plan's reader on blob b (ready): the application will
 * read [off, off + len) of it, so those bytes are fetched as read-ahead after
 * every paced reader's (pace_reader_plan) and pinned in the cache until
 * the reader closes (engine_close). 0 or a negative errno (-ENOSPC: no
 * reader free). */
int engine_plan_open(struct engine *e, uint32_t b, uint64_t off, uint64_t len,
		     uint32_t *reader_out);

/* Closes a reader stream. */
void engine_close(struct engine *e, uint32_t b, uint32_t reader);

/* The most pieces a reply gets: one per block, so a FUSE read (max_pages,
 * 1 MiB: at most 17 blocks) fits; a longer read is copied and replied as
 * one piece. */
#define ENGINE_REPLY_PIECES 64

/* How a read is answered: reply(ctx, p, n, err) is called exactly once
 * per engine_read, and is the one place the caller answers its request.
 * A read that succeeds gives its bytes, in order, as pieces (err 0;
 * struct cache_piece: mem and len, or with fds, fd, pos and len: bytes of
 * the cache's file, under the cache's read transaction, that stay as
 * they are until reply returns, so the reply can splice them); one that
 * fails gives its negative errno (p NULL, n 0). It returns 0.
 * cancelled(arg) says whether the request was interrupted. */
struct engine_read_reply {
	int (*reply)(void *ctx, struct cache_piece *p, size_t n, int err);
	void *ctx;
	bool fds; /* the reply can send a file's bytes (splice) */
	bool (*cancelled)(void *arg);
	void *arg;
};

/* Reads up to len bytes at off of blob b for reader, waiting for missing
 * bytes (and, for a blob with block digests, for their digest blocks to
 * be checked), and answers it through rr->reply, once: with its pieces,
 * or with its error; buf (len bytes) is where pieces are copied that are
 * not referenced where they lie. Returns the byte count, or the negative
 * errno replied: -EIO when no source can serve or past the read deadline
 * (logged), -EINTR when rr->cancelled turns true while it waits (checked
 * whenever the waiting reads are woken: see engine_wake_readers). */
long engine_read(struct engine *e, uint32_t b, uint32_t reader, uint64_t off,
		 size_t len, char *buf, const struct engine_read_reply *rr);

/* Wakes every waiting read (an interrupt arrived). */
void engine_wake_readers(struct engine *e);

/* ---- the cache's callbacks (engine.c) ---- */

/* The cache's on_lost callback: ctx points to the engine pointer (which
 * may still be NULL while the mount starts). The block stays readable
 * from memory while it is there; after that it is no longer held. */
void engine_on_lost(void *ctx, const struct cache_id *id, uint64_t index,
		    int err);

/* The cache's on_evicted callback, as on_lost without an error. */
void engine_on_evicted(void *ctx, const struct cache_id *id, uint64_t index);

/* ---- what status shows (engine.c) ---- */

/* A running transfer. */
struct engine_lane_view {
	uint32_t lane;
	const char *file;
	const char *source; /* its URL, or NULL */
	struct pace_lane_info info;
};

/* An open reader. */
struct engine_reader_view {
	uint32_t reader;
	const char *file;
	const char *mode; /* "new", "random", "sequential", "paused" */
	struct pace_reader_info info;
};

/* A source of a ready blob. */
struct engine_source_view {
	const char *url;
	const char *state; /* "ok", "excluded", "down", "backing off" */
	uint32_t lanes;
	uint64_t rate;
};

/* What status shows, taken under one hold of the lock: the caller gives
 * the arrays and their capacities; at most that many of each are
 * written, and their counts set. */
struct engine_view {
	struct engine_lane_view *lanes;
	uint32_t cap_lanes, nlanes;
	struct engine_reader_view *readers;
	uint32_t cap_readers, nreaders;
	struct engine_source_view *sources;
	uint32_t cap_sources, nsources;
};

void engine_view(struct engine *e, struct engine_view *v);

/* ---- what the metrics and status count (counters.c) ---- */

/* Where the bytes a read was answered with came from (the kernel's page
 * cache answers reads that never reach the engine). */
enum engine_read_from {
	ENGINE_FROM_MEMORY,  /* blocks the engine held in memory */
	ENGINE_FROM_CACHE,   /* the cache's file */
	ENGINE_FROM_NETWORK, /* the read waited for a transfer */
	ENGINE_FROM_N,
};

/* How a transfer failed: fetch's outcomes, and a lane the scheduler
 * took back because it stalled or slowed to a fraction of its rate. */
enum engine_fault {
	ENGINE_FAULT_TRANSIENT,
	ENGINE_FAULT_THROTTLED,
	ENGINE_FAULT_GONE,
	ENGINE_FAULT_FATAL,
	ENGINE_FAULT_LOCAL,
	ENGINE_FAULT_STALLED,
	ENGINE_FAULT_N,
};

/* Their names in metrics, status and log fields: "memory", ...;
 * "transient", ... */
extern const char *const engine_read_from_names[ENGINE_FROM_N];
extern const char *const engine_fault_names[ENGINE_FAULT_N];

/* The engine's counters since it started, and its gauges now. */
struct engine_counters {
	uint64_t read_bytes[ENGINE_FROM_N]; /* bytes replied to reads */
	uint64_t hits;	 /* reads whose bytes were all held when they came */
	uint64_t misses; /* reads that waited for a transfer */
	uint64_t faults[ENGINE_FAULT_N];
	uint64_t retries;      /* ranges taken back to be asked again: after a
				  transient fault, a throttle, a stall */
	uint64_t refused;      /* transfers refused for their credentials */
	uint64_t digest_units; /* units that failed their block digests */
	uint64_t digest_blobs; /* whole blobs that failed their SHA-256 */
	uint64_t readers;      /* open now */
	uint32_t lanes;	       /* configured */
	uint32_t lanes_busy;   /* with a transfer now */
	uint64_t inflight;     /* bytes requested and not yet received */
	uint64_t spec_bytes;   /* bytes asked speculatively (fill) */
	uint64_t spec_read;    /* of those, bytes read since */
	uint64_t stream_restarts; /* streams that came again from byte 0 */
};

/* Reads the counters (atomics, without the lock) and the gauges of the
 * lanes (under one hold of the lock, O(lanes)). Allocates nothing;
 * thread-safe. */
void engine_counters(struct engine *e, struct engine_counters *out);

#endif

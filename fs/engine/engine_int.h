/* engine_int: what the engine's files (engine.c, blobs.c, blocks.c,
 * transfers.c, reads.c, wholecheck.c, regions.c) share; no file outside
 * fs/engine/ includes it (but its unit tests). */
#ifndef FS_ENGINE_INT_H
#define FS_ENGINE_INT_H

#include <pthread.h>
#include <stdatomic.h>

#include "fs/engine/engine.h"
#include "pacing/pace.h"

/* Why bytes stop being held (engine__drop). */
enum engine_drop {
	ENGINE_DROP_GONE,  /* the cache no longer has them (evicted, lost, or
			  missing when read): fetched again when read */
	ENGINE_DROP_WRONG, /* they failed a digest: also evicted from the
			  cache, and the kernel's pages of them dropped */
	ENGINE_DROP_STALE, /* the origin serves another version: the blob's
			  cached bytes are dropped, and the kernel's pages */
};

/*
 * A blob's life. Every change goes through engine__blob_set, which logs
 * it at debug level and refuses a change this diagram does not draw
 * (engine__bug):
 *
 *   ADDED ----> READY ----> CHANGED ----> DROPPED
 *
 *   ADDED    -> READY     probed: its sources are known and the bytes the
 *                         cache holds are held (engine_blob_ready)
 *   READY    -> CHANGED   its first source serves another version: its
 *                         reads fail with EIO until a remount
 *   CHANGED  -> DROPPED   the first read since dropped its cached bytes
 *                         (a reader's thread: the transfer thread never
 *                         commits)
 */
enum engine_blob_state {
	ENGINE_BLOB_ADDED,
	ENGINE_BLOB_READY,
	ENGINE_BLOB_CHANGED,
	ENGINE_BLOB_DROPPED,
	ENGINE_BLOB_NSTATES
};

/*
 * Where the whole-blob check of a blob stands: beside its life, not in
 * it, since the check runs (and fails, and runs again) while the blob is
 * READY, and a thread may still be hashing when it changes. Every change
 * goes through verify_set (engine.c), logged at debug level:
 *
 *   NONE     -> RUNNING   complete and not checked (engine__verify_due)
 *   RUNNING  -> OK        the digest matched
 *   RUNNING  -> NONE      it could not be read, or did not match once, or
 *                         the bytes came through proxies now excluded:
 *                         checked again once complete again
 *   RUNNING  -> FAILED    it did not match twice: its reads fail with EIO
 */
enum engine_verify {
	ENGINE_VERIFY_NONE,    /* not complete yet, or no digest */
	ENGINE_VERIFY_RUNNING, /* a thread is hashing it */
	ENGINE_VERIFY_OK,
	ENGINE_VERIFY_FAILED, /* failed twice: its reads fail with EIO */
	ENGINE_VERIFY_NSTATES
};

/* One file of the mount. Fields without a lock named are set before the
 * blob is ready and immutable after. */
/* The regions of a blob (regions.c): the byte ranges its first reader
 * needed at open, recorded once and remembered in the cache beside it,
 * or given by a manifest; asked together when a later open finds them
 * not held.
 *
 *   NONE --> RECORDING --> SAVING --> KNOWN
 *     |                                 ^
 *     +---------------------------------+  (remembered, or a manifest's)
 */
enum engine_regions_state {
	ENGINE_REGIONS_NONE,	  /* none known: the next open records */
	ENGINE_REGIONS_RECORDING, /* reads since the first open are added */
	ENGINE_REGIONS_SAVING,	  /* recorded: to be stored, outside the lock */
	ENGINE_REGIONS_KNOWN,	  /* known: each open asks those not held */
};

/* A first open's reads are recorded for this long, this many reads and
 * this many bytes at most (the record stops at the first that would
 * pass a bound); reads closer than a cache block are one region. Files
 * below ENGINE_REGIONS_MIN_SIZE are not recorded (their first request
 * covers them), nor records of a single region (a sequential reader,
 * which read-ahead serves; a lone region costs one round trip anyway). */
#define ENGINE_REGIONS_WINDOW_NS (2000ull * 1000000ull)
#define ENGINE_REGIONS_READS 64u
#define ENGINE_REGIONS_BYTES (8ull << 20)
#define ENGINE_REGIONS_MIN_SIZE (1ull << 20)
/* Waits begun for remembered regions and not yet ended, over the engine. */
#define ENGINE_PREFETCH_MAX 128u

struct engine_regions {
	enum engine_regions_state state;
	bool from_manifest;	  /* rg came from a manifest, not the cache */
	uint64_t began_ns;	  /* RECORDING: the first open */
	uint32_t reads;		  /* RECORDING: reads added */
	uint64_t bytes;		  /* RECORDING: bytes of rg */
	struct cache_regions *rg; /* NULL until recorded or known */
};

struct engine_blob {
	char *name;
	uint64_t size;
	uint64_t ino; /* its file's inode once opened, 0 before; guarded by
			 mu */
	struct cache_id id;
	struct engine_source *sources;
	uint32_t nsources;
	enum engine_blob_state state; /* guarded by mu; engine__blob_set */
	bool has_sha256;
	uint8_t sha256[32]; /* of the whole blob */
	/* Block digests, checked by the cache as each block is stored. A
	 * unit is what one check covers: a cache block, or a digest block
	 * when those are larger. Only checked units are served. */
	uint64_t unit; /* bytes; 0: no block digests */
	uint64_t nunits;
	uint64_t *checked;  /* a bit per unit; guarded by mu */
	uint32_t *unit_src; /* the scheduler's source that sent the unit's
			       blocks since it was last dropped; PACE_NONE:
			       none yet, ENGINE_SRC_MIXED: several or unknown;
			       guarded by mu */
	int *unit_proxy;    /* the proxy they all came through: -1 none,
			       ENGINE_PROXY_UNSET, ENGINE_PROXY_MIXED (several, or
			       some through none); guarded by mu */
	uint32_t via;	    /* the routes its bytes came through since its last
			       whole-digest failure: bit i proxy entry i,
			       ENGINE_VIA_DIRECT no proxy; guarded by mu */
	enum engine_verify verify; /* guarded by mu; verify_set */
	uint32_t verify_failures;  /* guarded by mu */
	/* Bytes dropped as wrong or stale since the last open: its next open
	 * must not keep the kernel's pages. A fact about the kernel's copy,
	 * set by each such drop and cleared by each open, not a step of the
	 * blob's life; guarded by mu. */
	bool pages_stale;
	struct engine_regions regions; /* regions.c; guarded by mu */
	/* A read waited far ahead of its stream and was told why
	 * (engine__stream_note); guarded by mu. */
	bool stream_told;
	/* Streams started of it in this mount, and of those the ones that
	 * came again from byte 0 over bytes held or streamed before; the
	 * last one is such a stream and its bytes have not come yet, from
	 * stream_from (engine__stream_started); guarded by mu. */
	uint64_t streams, stream_restarts, stream_from;
	bool stream_again;
	/* Said at an open that it is bigger than the cache budget
	 * (engine__stream_budget_note); guarded by mu. */
	bool budget_told;
	/* Its length is unknown (engine_blob_set_open): size is
	 * ENGINE_SIZE_OPEN until the stream ends; guarded by mu. */
	bool open_ended;
};

#define ENGINE_VIA_DIRECT (1u << 31)
#define ENGINE_SRC_MIXED (PACE_NONE - 1)
#define ENGINE_PROXY_MIXED (-2)
#define ENGINE_PROXY_UNSET (-3)

/* A block in memory: assembled from arriving bytes until whole, then kept
 * (least recently used first out) after it went to the cache, so that
 * readers close behind the transfers, and every reader while the cache
 * cannot store (a full disk), are served from here.
 *
 * Its life. Every change goes through engine__block_set, which logs it at
 * debug level and refuses a change this diagram does not draw
 * (engine__bug):
 *
 *   FREE ------> FILLING ------> HANDING ------> DONE
 *    ^ ^            ^              |               | |
 *    | |            +--------------|---------------+ |
 *    | +---------------------------+                 |
 *    +-----------------------------------------------+
 *
 *   FREE     -> FILLING   a slot of the free list takes a block's bytes
 *                         (engine__block_get)
 *   FILLING  -> HANDING   every byte credited: the transfer thread hands
 *                         it to the cache outside the lock (take_bytes)
 *   HANDING  -> DONE      the cache took it, or failed to (lost): kept
 *                         in memory, least recently used first out
 *   HANDING  -> FREE      it failed its block digest, or the cache could
 *                         not take a block that must be checked first
 *   DONE     -> FILLING   fetched again (its bytes were dropped), or its
 *                         slot reused, least recently used, for another
 *   DONE     -> FREE      its bytes were dropped as wrong or stale
 *                         (engine__blocks_forget)
 */
enum engine_block_state {
	ENGINE_BLOCK_FREE,
	ENGINE_BLOCK_FILLING, /* bytes arriving; held bytes of it are readable
			    unless the blob has block digests */
	ENGINE_BLOCK_HANDING, /* whole, being stored by the transfer thread
			    outside the lock */
	ENGINE_BLOCK_DONE,    /* whole, and the cache has it or lost it */
};

struct engine_block {
	enum engine_block_state state;
	uint32_t source;  /* the scheduler's source that wrote into it */
	bool mixed;	  /* more than one source wrote into it */
	int proxy;	  /* the proxy its bytes came through (-1: none) */
	bool proxy_mixed; /* through more than one (or some through none) */
	bool lost; /* the cache failed to store it: memory holds the only copy,
		      so its bytes stop being held when it leaves */
	uint32_t filled; /* bytes of it credited since it began filling: it
			    is whole when they are all its bytes */
	uint32_t blob;
	uint64_t index;
	uint32_t hnext;	     /* next in its hash chain */
	uint32_t prev, next; /* the free list or the LRU list (DONE) */
	/* Its bytes: a buffer the cache's queue and replies share by
	 * reference once the block is whole (HANDING, DONE). Only the
	 * transfer thread writes it, only while FILLING, and a block starts
	 * filling in a buffer nobody else holds. */
	struct cache_buf *buf;
	uint8_t *data; /* buf's bytes */
};

/* The in-memory blocks: a hash by (blob, index), a free list, and the
 * whole blocks in least recently used order. Guarded by the engine's
 * mu. */
struct engine_blocks {
	struct engine_block *v;
	uint32_t n;
	uint32_t *buckets; /* nbuckets heads of hash chains; ENGINE_NO_BLOCK */
	uint32_t nbuckets; /* a power of two */
	uint32_t free_head;
	uint32_t lru_head, lru_tail; /* oldest first */
	struct engine *e;	     /* whose log hears its changes of state */
};

#define ENGINE_NO_BLOCK UINT32_MAX

/* Ranges whose bytes failed a digest lately: requests of them send
 * Cache-Control: no-cache, so that a cache on the way (a proxy's bad copy)
 * is replaced, not served again. */
#define ENGINE_RECHECK_MAX 16

/* Origins the scheduler measures as one server each. */
#define ENGINE_ORIGINS_MAX 64

/* The running mount: scheduler, transfers and cache, under one lock. */
/* A read that waits, on a condition of its own: what arrives for its
 * bytes wakes it alone (engine__wake_range), not every read of the
 * mount. Lives on the waiting thread's stack, linked while it waits. */
struct engine_waiter {
	pthread_cond_t cv;
	uint32_t blob;
	uint64_t start, end; /* the bytes it waits for */
	struct engine_waiter *prev, *next;
};

/* What engine_counters reads: atomics that any thread adds to
 * (engine__count), with or without the lock, so that a scrape never waits
 * for a read and a read never waits for a scrape. */
struct engine_stats {
	_Atomic uint64_t read_bytes[ENGINE_FROM_N];
	_Atomic uint64_t hits, misses;
	_Atomic uint64_t faults[ENGINE_FAULT_N];
	_Atomic uint64_t retries, refused, digest_units, digest_blobs;
	_Atomic uint64_t readers;	  /* opens less closes */
	_Atomic uint64_t stream_restarts; /* engine__stream_started */
};

static inline void engine__count(_Atomic uint64_t *c, uint64_t n)
{
	atomic_fetch_add_explicit(c, n, memory_order_relaxed);
}

struct engine {
	pthread_mutex_t mu;
	pthread_cond_t cv; /* a whole-blob check ended (verifiers) */
	struct engine_waiter *waiters; /* guarded by mu */
	uint64_t waits, wakeups;       /* reads that waited, and the times one
					  woke; guarded by mu */
	struct pace *pace;	       /* guarded by mu */
	struct fetch *fetch;
	struct cache *cache;
	/* The hooks of its configuration (engine_config). */
	void (*log)(void *ctx, enum fs_log_level level, const char *fmt,
		    va_list ap);
	void (*log_fields)(void *ctx, enum fs_log_level level,
			   const struct fs_log_fields *f, const char *fmt,
			   va_list ap);
	void *log_ctx;
	void (*inval)(void *ctx, uint32_t b, const char *name, uint64_t ino,
		      uint64_t start, uint64_t end);
	void *inval_ctx;
	struct engine_blob
		*blobs;	 /* max_blobs slots; the first nblobs in use */
	uint32_t nblobs; /* guarded by mu */
	uint32_t max_blobs;
	struct engine_blocks blocks; /* guarded by mu */
	uint32_t *source_of_pace;    /* pace source id -> blob index */
	/* The origins ("scheme://host:port") of the sources, each a group
	 * of the scheduler (pace_source_set_group): one lane budget and
	 * one measure of the server for all of its files. A source of an
	 * origin past ENGINE_ORIGINS_MAX is a group of its own. Guarded by
	 * mu. */
	char *origins[ENGINE_ORIGINS_MAX];
	uint32_t norigins;
	uint32_t nsource_map;
	/* Per pace source id: requests refused for their credentials in a
	 * row (0: its last answer was no such refusal); guarded by mu. */
	uint8_t *src_refused;
	uint64_t *src_refused_until; /* the hold that refusal began */
	bool creds_change;
	uint64_t read_timeout_ns;
	/* The cache's byte budget when the engine was made (cache_stats_get:
	 * this process's, else the one last recorded); 0: none. */
	uint64_t cache_budget;
	uint64_t stall_ns;
	uint64_t retry_after_max_ns;
	uint32_t nlanes;
	/* What each lane fetches, from the START that the transfer thread
	 * ran (a QUEUE names the same blob and source): only that thread
	 * writes them, and reads them without the lock. PACE_NONE: idle. */
	uint32_t *lane_blob;
	uint32_t *lane_source;
	uint32_t verifiers; /* whole-blob checks running; guarded by mu */
	bool stopping;	    /* the engine is being freed; guarded by mu */
	struct fetch_proxies *proxies; /* -o proxy=, or NULL; borrowed */
	/* Ranges fetched again past any cache; guarded by mu. */
	struct engine_recheck {
		uint32_t blob;
		uint64_t start, end; /* end 0: unused */
	} recheck[ENGINE_RECHECK_MAX];
	uint32_t recheck_next;
	struct engine_stats stats;
	/* Waits begun for remembered regions (regions.c), ended by the
	 * transfer thread once served or failed; guarded by mu. */
	uint32_t prefetch[ENGINE_PREFETCH_MAX];
	uint32_t nprefetch;
};

/* The end of cache block `index` of b (its size for the last). */
uint64_t engine__block_end(const struct engine_blob *b, uint64_t index);

/* ---- blocks.c; callers hold e->mu ---- */

int engine__blocks_init(struct engine_blocks *bs, struct engine *e, uint32_t n);
void engine__blocks_fini(struct engine_blocks *bs);

/* The in-memory block (blob, index) in any state but FREE, or NULL. */
struct engine_block *engine__block_find(struct engine_blocks *bs, uint32_t blob,
					uint64_t index);

/* Finds or makes the in-memory block (blob, index) for arriving bytes: a
 * free slot, else the least recently used whole block (whose bytes stop
 * being held if the cache lost them). A whole block found is filled
 * again. NULL when every slot is being filled or stored, or memory ran
 * out. */
struct engine_block *engine__block_get(struct engine *e, uint32_t blob,
				       uint64_t index);

/* Copies len bytes of blob offset off into block p (FILLING), which came
 * from the scheduler's source `source` through proxy entry `proxy` (-1:
 * none): a block written by several is mixed. */
void engine__block_write(struct engine_block *p, uint64_t off,
			 const uint8_t *src, size_t len, uint32_t source,
			 int proxy);

/* n bytes written into block p of blob b were credited to the scheduler
 * (pace_on_data took them): true when p is filling and now whole. A block
 * counts the bytes it holds, it does not map them: each byte is credited
 * once (a request covers bytes not held, and a retry skips what was
 * delivered), and a drop into it starts its count again
 * (engine__blocks_forget). */
bool engine__block_credit(const struct engine_blob *b, struct engine_block *p,
			  uint64_t n);

/* Widens [*start, *end) of blob b to the bounds of the blocks filling at
 * either end, before a drop: a block's count cannot lose only some of
 * its bytes. */
void engine__blocks_widen(struct engine_blocks *bs,
			  const struct engine_blob *blob, uint32_t b,
			  uint64_t *start, uint64_t *end);

/* Bytes [start, end) of blob b stop being held (engine__drop_locked): a
 * block filling there counts from none again, and for wrong or stale
 * bytes (why) the whole blocks there leave memory; a block being stored
 * is the transfer thread's, which frees it if it was wrong. */
void engine__blocks_forget(struct engine_blocks *bs,
			   const struct engine_blob *blob, uint32_t b,
			   uint64_t start, uint64_t end, enum engine_drop why);

/* A whole block was stored (lost: the cache failed to): it joins the
 * least recently used list. */
void engine__block_done(struct engine_blocks *bs, struct engine_block *p,
			bool lost);

/* A whole block was read: it becomes the most recently used. */
void engine__block_touch(struct engine_blocks *bs, struct engine_block *p);

/* Frees the block: its bytes are gone from memory. */
void engine__block_free(struct engine_blocks *bs, struct engine_block *p);

/* Moves block p to state `to` (the diagram above), with a debug line;
 * false, and p unchanged, for a change the diagram does not draw (a bug:
 * engine__bug). Moves it and nothing else: the lists and the hash are
 * its callers'. */
bool engine__block_set(struct engine_blocks *bs, struct engine_block *p,
		       enum engine_block_state to);

/* ---- streamnote.c ---- */

/* How far past a stream's frontier a read is far, at least (and a
 * second of the stream's rate): nearer, it is the stream's own
 * sequential reader. */
#define ENGINE_STREAM_NEAR (4ull << 20)

/* A read of blob b at off waits: when every source of b ignores Range,
 * off is far past the stream's frontier and the stream's rate is
 * measured, logs once for the blob why it waits (frontier, rate, seconds
 * left). Called at each wake of a wait. Caller holds e->mu. */
void engine__stream_note(struct engine *e, uint32_t b, uint64_t off);

/* A stream of blob b starts, asked from `start` (the first byte not
 * held): a restart when the blob was streamed before in this mount or
 * has bytes held, which the source sends again; counted and logged by
 * engine__stream_data when its first byte past them comes. Caller holds
 * e->mu. */
void engine__stream_started(struct engine *e, uint32_t b, uint64_t start);
void engine__stream_data(struct engine *e, uint32_t b);

/* At an open of blob b: when every source of b ignores Range and b is
 * bigger than the cache budget (or of unknown length), logs once what
 * the cache keeps of it and what a read behind that costs. Without
 * e->mu. */
void engine__stream_budget_note(struct engine *e, uint32_t b);

/* ---- transfers.c ---- */

/* Block p (HANDING) went to the cache with result rc
 * (cache_block_put_buf): it is DONE, its unit checked when it is whole.
 * Without e->mu. */
void engine__block_stored(struct engine *e, struct engine_block *p, int rc);

/* ---- streamhold.c ---- */

/* Lanes whose hold changes in one turn, at most (the rest change in the
 * next). */
#define ENGINE_HOLD_MAX 16

/* Holds the streams that run far ahead of their readers, and lets held
 * ones go on (pace_lane_hold_wanted, fetch_lane_pause). Event thread
 * (on_tick), without e->mu. */
void engine__stream_holds(struct engine *e);

/* ---- openend.c ---- */

/* Blob b's stream of unknown length ended whole at `length` bytes: that
 * is its size now (the engine's, the scheduler's, the kernel's after its
 * attributes are dropped), and its last block, short, is complete. Call
 * after the lane's pace_on_done. Writes into *last the block to store
 * once the lock is released (engine__open_stored), or NULL. Caller holds
 * e->mu. */
void engine__open_ended(struct engine *e, uint32_t b, uint64_t length,
			struct engine_block **last);

/* Stores the block engine__open_ended gave (NULL: none) and writes the
 * blob's size into its cache record. Without e->mu. */
void engine__open_stored(struct engine *e, uint32_t b,
			 struct engine_block *last);

/* ---- engine.c ---- */

/* A log line of engine e, through its log hook (nothing without one):
 * the engine never calls the driver's log. */
#define engine__log(e, ...) fs__log_via((e)->log, (e)->log_ctx, __VA_ARGS__)

/* A change of state a diagram does not draw: a bug. Logged as
 * "bug: ..." at error level; in strict builds (PACEFS_STRICT, which the
 * sanitizer build defines: Makefile) it also goes to stderr and aborts, so
 * a test that takes one fails. Else the caller refuses the change. */
void engine__bug(const struct engine *e, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* The same, for a line about what f names: through the log_fields hook
 * when there is one, else as engine__log. */
void engine__log_about(const struct engine *e, enum fs_log_level level,
		       const struct fs_log_fields *f, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* Has the kernel's pages of bytes [start, end) of blob b dropped, through
 * the inval hook (nothing without one). Caller holds e->mu. */
void engine__pages_inval(struct engine *e, uint32_t b, const char *name,
			 uint64_t ino, uint64_t start, uint64_t end);

/* The one way held bytes [start, end) of blob b stop being held: the
 * scheduler forgets them (should its range set be full, it forgets from
 * start to the blob's end instead, which always fits, and logs it), their
 * in-memory blocks go (WRONG, STALE), their digest blocks are no longer
 * counted as checked, the cache drops them (WRONG: the blocks, or the
 * whole blob when [start, end) is all of it; STALE: the whole blob), and
 * the kernel's pages of them are queued to be dropped (WRONG, STALE).
 * Waiting reads are woken. Errors are logged and returned (the held state
 * is right whatever the cache said). Without the engine's lock; WRONG and
 * STALE wait for a cache commit, so the transfer thread calls it only for
 * a digest block larger than a cache block. */
int engine__drop(struct engine *e, uint32_t b, uint64_t start, uint64_t end,
		 enum engine_drop why);

/* engine__drop's part under the lock: the scheduler, the in-memory
 * blocks (WRONG, STALE), the checked units, the kernel's pages. Caller
 * holds e->mu; the caller does the cache's part (or has nothing for it to
 * do: GONE). */
void engine__drop_locked(struct engine *e, uint32_t b, uint64_t start,
			 uint64_t end, enum engine_drop why);

/* True when a request of [start, end) of blob b must send no-cache: its
 * bytes failed a digest lately (engine__drop_locked notes them). Caller holds
 * e->mu. */
bool engine__recheck(const struct engine *e, uint32_t b, uint64_t start,
		     uint64_t end);

/* Whether blob b's whole-blob check should start now (complete, not
 * checked): marks it running. Caller holds e->mu, then calls
 * engine__verify_spawn without it. */
bool engine__verify_due(struct engine *e, uint32_t b);

/* ---- engine.c: what the whole-blob check asks ---- */

/* Blob b's whole-blob digest (32 bytes) and size, fixed once it is
 * ready. */
const uint8_t *engine__blob_sha256(struct engine *e, uint32_t b,
				   uint64_t *size);

/* True once engine_free began: a check stops. */
bool engine__stopping(struct engine *e);

/* Records the outcome of blob b's check (0: the digest matched, -EBADMSG:
 * it did not, another errno: it could not be read, so it runs again when
 * the blob is next complete) and returns the check's new state. On a
 * mismatch the caller drops the bytes first (engine__drop). The thread
 * then ends with engine__verify_exit. */
enum engine_verify engine__verify_result(struct engine *e, uint32_t b,
					 int outcome);

/* Blob b's whole digest failed: excludes every proxy (-o proxy=) its
 * bytes came through since the last such call, for the mount's life (a
 * whole-blob digest cannot tell which one), and forgets the routes.
 * Returns how many it excluded now (0: the bytes came without a proxy, or
 * from the cache), with their names, comma-separated, in names. */
uint32_t engine__blame_routes(struct engine *e, uint32_t b, char *names,
			      size_t cap);

/* The engine's cache, and blob b's id in it. */
struct cache *engine__cache(struct engine *e);
const struct cache_id *engine__blob_id(struct engine *e, uint32_t b);

/* A check's thread ends (engine_free waits for them). */
void engine__verify_exit(struct engine *e);

/* ---- reads.c ---- */

/* Copies held bytes [off, off + len) of blob b into buf, from memory or
 * the cache, whether their block digests were checked yet or not (the
 * whole-blob check reads through it); -EAGAIN when a block left the cache
 * since it was held (it is then no longer held). Without the engine's
 * lock. */
int engine__copy_held(struct engine *e, uint32_t b, uint64_t off, size_t len,
		      char *buf);

/* ---- wholecheck.c ---- */

/* Runs the check of blob b (complete, marked running by
 * engine__verify_due) on a thread of its own. Without the engine's
 * lock. */
void engine__verify_spawn(struct engine *e, uint32_t b);

/* ---- blobs.c ---- */

/* Moves blob b to state `to` (the diagram above), with a debug line;
 * false, and the blob unchanged, for a change the diagram does not draw
 * (a bug: engine__bug). Caller holds e->mu. */
bool engine__blob_set(struct engine *e, uint32_t b, enum engine_blob_state to);

/* The blob's version is no longer served: CHANGED or DROPPED. */
static inline bool engine__blob_changed(const struct engine_blob *b)
{
	return b->state >= ENGINE_BLOB_CHANGED;
}

/* Blob b's name (for log lines). */
const char *engine__blob_name(struct engine *e, uint32_t b);

/* The source the scheduler knows as `id`, or NULL. */
const struct engine_source *engine__source_of(const struct engine *e,
					      uint32_t id);

/* The URL of scheduler source `id` for a log line: "(unknown source)"
 * when there is none. */
const char *engine__source_url(const struct engine *e, uint32_t id);

/* The block-digest layer over held bytes: true when a unit of [start,
 * end) of blob b is not checked yet, with the first such unit, whole, in
 * [*from, *to) (only a whole unit is checked): the range a read asks the
 * scheduler about next (pace_read_step), and, once held, waits on to be
 * checked (its blocks are on their way to the cache, whose put checks
 * them). A unit's bit is set once the cache's put passed it and cleared
 * by every drop, so a checked unit is held. False without block digests
 * or when every unit is checked. Caller holds e->mu. */
bool engine__unchecked(const struct engine *e, uint32_t b, uint64_t start,
		       uint64_t end, uint64_t *from, uint64_t *to);

/* Marks the units inside [start, end) checked or not. Caller holds
 * e->mu. */
void engine__blob_set_checked(struct engine_blob *b, uint64_t start,
			      uint64_t end, bool checked);

/* ---- waiting reads (reads.c); callers hold e->mu ---- */

/* Wakes the reads waiting on bytes of blob b that [start, end) overlaps
 * and whose bytes the scheduler now holds all of. */
void engine__wake_range(struct engine *e, uint32_t b, uint64_t start,
			uint64_t end);

/* Wakes every read waiting on blob b: its state changed (a transfer
 * ended, bytes were dropped or checked, the blob changed). */
void engine__wake_blob(struct engine *e, uint32_t b);

/* Wakes every waiting read of the mount (an interrupt, the session's
 * end). */
void engine__wake_all(struct engine *e);

/* ---- transfers.c ---- */

/* The hooks the fetch event thread calls. */
void engine__transfers_hooks(struct engine *e, struct fetch_hooks *h);

/* ---- remembered regions (regions.c) ---- */

/* Reads blob i's remembered regions from the cache (without the lock),
 * dropping them when they were recorded under another validator than
 * `validator` (NULL: none); *out gets them, malloc'd, or NULL. */
void engine__regions_load(struct engine *e, uint32_t i, const char *validator,
			  struct cache_regions **out);

/* Installs what engine__regions_load found (taking rg), else keeps a
 * manifest's, else leaves the blob to record. Caller holds e->mu. */
void engine__regions_install(struct engine *e, uint32_t i,
			     struct cache_regions *rg);

/* An open of blob b by reader: begins a wait for each known region not
 * held, or starts recording. Returns whether a wait began (demand: wake
 * the transfer thread). Caller holds e->mu. */
bool engine__regions_open(struct engine *e, uint32_t b, uint32_t reader,
			  uint64_t now);

/* A read of [off, end) of blob b, added to its record while one runs.
 * Returns whether the record just ended (engine__regions_save, after the
 * lock). Caller holds e->mu. */
bool engine__regions_read(struct engine *e, uint32_t b, uint64_t off,
			  uint64_t end, uint64_t now);

/* A close of blob b: ends its record, if one runs. Returns as
 * engine__regions_read. Caller holds e->mu. */
bool engine__regions_close(struct engine *e, uint32_t b);

/* Stores the record of blob b that ended, in the cache (a synchronous
 * commit): called without the lock. */
void engine__regions_save(struct engine *e, uint32_t b);

/* Ends the waits for regions that were served or failed. Caller holds
 * e->mu. */
void engine__regions_sweep(struct engine *e, uint64_t now);

#endif

/* engine_int: what the engine's files (engine.c, blobs.c, parts.c,
 * transfers.c, read.c, verify.c) share; no file outside fs/engine/
 * includes it (but its unit tests). */
#ifndef FS_ENGINE_INT_H
#define FS_ENGINE_INT_H

#include <pthread.h>
#include <stdatomic.h>

#include "fs/engine/engine.h"
#include "pacing/pace.h"

/* One file of the mount. Fields without a lock named are set before the
 * blob is ready and immutable after. */
struct fs_blob {
	char *name;
	uint64_t size;
	uint64_t ino; /* its file's inode once opened, 0 before; guarded by
			 mu */
	struct cache_id id;
	struct fs_source *sources;
	uint32_t nsources;
	bool ready; /* probed, sources added, held bytes loaded; guarded by
		       mu */
	bool has_sha256;
	uint8_t sha256[32]; /* of the whole blob */
	/* Block digests, checked by the cache as each block is stored. A
	 * unit is what one check covers: a cache block, or a digest block
	 * when those are larger. Only checked units are served. */
	uint64_t unit;	    /* bytes; 0: no block digests */
	uint64_t nunits;
	uint64_t *checked;  /* a bit per unit; guarded by mu */
	uint32_t *unit_src; /* the scheduler's source that sent the unit's
			       blocks since it was last dropped; PACE_NONE:
			       none yet, FS_SRC_MIXED: several or unknown;
			       guarded by mu */
	int *unit_proxy;    /* the proxy they all came through: -1 none,
			       FS_PROXY_UNSET, FS_PROXY_MIXED (several, or
			       some through none); guarded by mu */
	uint32_t via; /* the routes its bytes came through since its last
			 whole-digest failure: bit i proxy entry i,
			 FS_VIA_DIRECT no proxy; guarded by mu */
	enum fs_verify verify;	  /* guarded by mu */
	uint32_t verify_failures; /* guarded by mu */
	bool changed; /* the origin now serves another version; guarded by
			 mu */
	bool dropped; /* its cached bytes are gone; guarded by mu */
	bool pages_stale; /* bytes dropped as wrong or stale since the last
			     open: its next open must not keep the kernel's
			     pages; guarded by mu */
};

#define FS_VIA_DIRECT (1u << 31)
#define FS_SRC_MIXED (PACE_NONE - 1)
#define FS_PROXY_MIXED (-2)
#define FS_PROXY_UNSET (-3)

/* A block in memory: assembled from arriving bytes until whole, then kept
 * (least recently used first out) after it went to the cache, so that
 * readers close behind the transfers, and every reader while the cache
 * cannot store (a full disk), are served from here. */
enum fs_part_state {
	FS_PART_FREE,
	FS_PART_FILLING, /* bytes arriving; held bytes of it are readable
			    unless the blob has block digests */
	FS_PART_HANDING, /* whole, being stored by the transfer thread
			    outside the lock */
	FS_PART_DONE,	 /* whole, and the cache has it or lost it */
};

struct fs_part {
	enum fs_part_state state;
	uint32_t source; /* the scheduler's source that wrote into it */
	bool mixed;	 /* more than one source wrote into it */
	int proxy;	 /* the proxy its bytes came through (-1: none) */
	bool proxy_mixed; /* through more than one (or some through none) */
	bool lost; /* the cache failed to store it: memory holds the only copy,
		      so its bytes stop being held when it leaves */
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
struct fs_parts {
	struct fs_part *v;
	uint32_t n;
	uint32_t *buckets; /* nbuckets heads of hash chains; FS_NO_PART */
	uint32_t nbuckets; /* a power of two */
	uint32_t free_head;
	uint32_t lru_head, lru_tail; /* oldest first */
};

#define FS_NO_PART UINT32_MAX

/* A read that failed (its deadline passed, or no source could serve it)
 * is remembered this long: the kernel asks again at once for what a
 * failed readahead covered, and without the memory each ask waited a whole
 * read_timeout more. A later read tries again. */
#define FS_FAILED_MAX 16
#define FS_FAILED_NS (1000u * 1000000u)

/* Ranges whose bytes failed a digest lately: requests of them send
 * Cache-Control: no-cache, so that a cache on the way (a proxy's bad copy)
 * is replaced, not served again. */
#define FS_RECHECK_MAX 16

/* What fs__engine_counters reads: atomics that any thread adds to
 * (fs__count), with or without the lock, so that a scrape never waits for
 * a read and a read never waits for a scrape. */
struct fs_engine_stats {
	_Atomic uint64_t read_bytes[FS_FROM_N];
	_Atomic uint64_t hits, misses;
	_Atomic uint64_t faults[FS_FAULT_N];
	_Atomic uint64_t retries, refused, digest_units, digest_blobs;
	_Atomic uint64_t readers; /* opens less closes */
};

static inline void fs__count(_Atomic uint64_t *c, uint64_t n)
{
	atomic_fetch_add_explicit(c, n, memory_order_relaxed);
}

/* The running mount: scheduler, transfers and cache, under one lock. */
struct fs_engine {
	pthread_mutex_t mu;
	pthread_cond_t cv; /* bytes arrived or were checked, or a wait
			      changed state */
	struct pace *pace; /* guarded by mu */
	struct fetch *fetch;
	struct cache *cache;
	/* The hooks of its configuration (fs_engine_config). */
	void (*log)(void *ctx, enum fs_log_level level, const char *fmt,
		    va_list ap);
	void (*log_fields)(void *ctx, enum fs_log_level level,
			   const struct fs_log_fields *f, const char *fmt,
			   va_list ap);
	void *log_ctx;
	void (*inval)(void *ctx, uint32_t b, const char *name, uint64_t ino,
		      uint64_t start, uint64_t end);
	void *inval_ctx;
	struct fs_blob *blobs; /* max_blobs slots; the first nblobs in use */
	uint32_t nblobs;       /* guarded by mu */
	uint32_t max_blobs;
	struct fs_parts parts;	  /* guarded by mu */
	uint32_t *source_of_pace; /* pace source id -> blob index */
	uint32_t nsource_map;
	/* Per pace source id: requests refused for their credentials in a
	 * row (0: its last answer was no such refusal); guarded by mu. */
	uint8_t *src_refused;
	uint64_t *src_refused_until; /* the hold that refusal began */
	bool creds_change;
	uint64_t read_timeout_ns;
	uint64_t stall_ns;
	uint64_t retry_after_max_ns;
	uint32_t nlanes;
	/* What each lane fetches, from the START that the transfer thread
	 * ran (a QUEUE names the same blob and source): only that thread
	 * writes them, and reads them without the lock. PACE_NONE: idle. */
	uint32_t *lane_blob;
	uint32_t *lane_source;
	uint32_t verifiers;	/* whole-blob checks running; guarded by mu */
	bool stopping;		/* the engine is being freed; guarded by mu */
	/* Reads that just failed, so that the kernel's retry of the same
	 * bytes fails at once; guarded by mu. */
	struct fs_failed {
		uint32_t blob;
		uint64_t start, end;
		uint64_t at_ns; /* 0: unused */
	} failed[FS_FAILED_MAX];
	uint32_t failed_next;
	struct fetch_proxies *proxies; /* -o proxy=, or NULL; borrowed */
	/* Ranges fetched again past any cache; guarded by mu. */
	struct fs_recheck {
		uint32_t blob;
		uint64_t start, end; /* end 0: unused */
	} recheck[FS_RECHECK_MAX];
	uint32_t recheck_next;
	struct fs_engine_stats stats;
};

/* The end of cache block `index` of b (its size for the last). */
uint64_t fs__block_end(const struct fs_blob *b, uint64_t index);

/* ---- parts.c; callers hold e->mu ---- */

int fs__parts_init(struct fs_parts *ps, uint32_t n);
void fs__parts_fini(struct fs_parts *ps);

/* The in-memory block (blob, index) in any state but FREE, or NULL. */
struct fs_part *fs__part_find(struct fs_parts *ps, uint32_t blob,
			      uint64_t index);

/* Finds or makes the in-memory block (blob, index) for arriving bytes: a
 * free slot, else the least recently used whole block (whose bytes stop
 * being held if the cache lost them). A whole block found is filled
 * again. NULL when every slot is being filled or stored, or memory ran
 * out. */
struct fs_part *fs__part_get(struct fs_engine *e, uint32_t blob,
			     uint64_t index);

/* A whole block was stored (lost: the cache failed to): it joins the
 * least recently used list. */
void fs__part_done(struct fs_parts *ps, struct fs_part *p, bool lost);

/* A whole block was read: it becomes the most recently used. */
void fs__part_touch(struct fs_parts *ps, struct fs_part *p);

/* Frees the block: its bytes are gone from memory. */
void fs__part_free(struct fs_parts *ps, struct fs_part *p);

/* ---- engine.c ---- */

/* A log line of engine e, through its log hook (nothing without one):
 * the engine never calls the driver's log. */
void fs__engine_log(const struct fs_engine *e, enum fs_log_level level,
		    const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* The same, for a line about what f names: through the log_fields hook
 * when there is one, else as fs__engine_log. */
void fs__engine_log_about(const struct fs_engine *e, enum fs_log_level level,
			  const struct fs_log_fields *f, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* Has the kernel's pages of bytes [start, end) of blob b dropped, through
 * the inval hook (nothing without one). Caller holds e->mu. */
void fs__pages_inval(struct fs_engine *e, uint32_t b, const char *name,
		     uint64_t ino, uint64_t start, uint64_t end);

/* fs__engine_drop's part under the lock: the scheduler, the in-memory
 * blocks (WRONG, STALE), the checked units, the kernel's pages. Caller
 * holds e->mu; the caller does the cache's part (or has nothing for it to
 * do: GONE). */
void fs__drop_locked(struct fs_engine *e, uint32_t b, uint64_t start,
		     uint64_t end, enum fs_drop why);

/* True when a request of [start, end) of blob b must send no-cache: its
 * bytes failed a digest lately (fs__drop_locked notes them). Caller holds
 * e->mu. */
bool fs__recheck(const struct fs_engine *e, uint32_t b, uint64_t start,
		 uint64_t end);

/* Whether blob b's whole-blob check should start now (complete, not
 * checked): marks it running. Caller holds e->mu, then calls
 * fs__verify_spawn without it. */
bool fs__verify_due(struct fs_engine *e, uint32_t b);

/* ---- blobs.c ---- */

/* The source the scheduler knows as `id`, or NULL. */
const struct fs_source *fs__source_of(const struct fs_engine *e,
				      uint32_t id);

/* The URL of scheduler source `id` for a log line: "(unknown source)"
 * when there is none. */
const char *fs__source_url(const struct fs_engine *e, uint32_t id);

/* The first unit of b overlapping [start, end) not checked yet, as its
 * byte range; false when there is none. Caller holds e->mu. */
bool fs__blob_unchecked(const struct fs_blob *b, uint64_t start, uint64_t end,
			uint64_t *ustart, uint64_t *uend);

/* Marks the units inside [start, end) checked or not. Caller holds
 * e->mu. */
void fs__blob_set_checked(struct fs_blob *b, uint64_t start, uint64_t end,
			  bool checked);

/* ---- transfers.c ---- */

/* The hooks the fetch event thread calls. */
void fs__transfers_hooks(struct fs_engine *e, struct fetch_hooks *h);

#endif

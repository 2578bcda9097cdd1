/* fs_int: what the files of fs/ share; no other folder includes this. */
#ifndef FS_INT_H
#define FS_INT_H

#include <pthread.h>
#include <sys/types.h>
#include <time.h>

#include <fuse_lowlevel.h>
#include <stdbool.h>
#include <stdint.h>

#include "cache/cache.h"
#include "fetch/fetch.h"
#include "fs/fs.h"
#include "pacing/pace.h"

enum fs_log_level { FS_LOG_ERR, FS_LOG_WARN, FS_LOG_INFO, FS_LOG_DEBUG };

/* Sends log lines to stderr (foreground) or syslog (daemon). */
void fs__log_init(bool to_stderr, enum fs_log_level level);
void fs__log(enum fs_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Adapters for the modules' log callbacks. */
void fs__log_cache(void *ctx, enum cache_log_level level, const char *msg);
void fs__log_fetch(void *ctx, enum fetch_log_level level, const char *msg);

uint64_t fs__now_ns(void);

/* One source (URL) of a blob. */
struct fs_source {
	char *url;	 /* final URL after redirects */
	char *validator; /* strong ETag or Last-Modified, or NULL */
	uint32_t pace_id;
};

/* One file of the mount. */
struct fs_blob {
	char *name;
	uint64_t size;
	uint64_t ino;
	struct cache_id id;
	uint32_t pace_id;
	struct fs_source *sources;
	uint32_t nsources;
	bool changed; /* the origin now serves another version; guarded by
			 the engine's mu */
	bool dropped; /* its cached bytes are gone; guarded by mu */
};

/* A block in memory: assembled from arriving bytes until whole, then kept
 * (least recently used first out) after it went to the cache, so that
 * readers close behind the transfers, and every reader while the cache
 * cannot store (a full disk), are served from here. */
enum fs_part_state {
	FS_PART_FREE,
	FS_PART_FILLING, /* bytes arriving; held bytes of it are readable */
	FS_PART_HANDING, /* whole, being queued to the cache outside the lock */
	FS_PART_DONE,	 /* whole, and the cache has it or lost it */
};

struct fs_part {
	enum fs_part_state state;
	bool lost; /* the cache failed to store it: memory holds the only copy,
		      so its bytes stop being held when it leaves */
	uint32_t blob;
	uint64_t index;
	uint64_t last_use;
	uint8_t *data;
};

/* The running mount: scheduler, transfers and cache, under one lock. */
struct fs_engine {
	pthread_mutex_t mu;
	pthread_cond_t cv; /* bytes arrived or a wait changed state */
	struct pace *pace; /* guarded by mu */
	struct fetch *fetch;
	struct cache *cache;
	struct fs_blob *blobs;
	uint32_t nblobs;
	struct fs_part *parts; /* guarded by mu */
	uint32_t nparts;
	uint64_t part_clock;	  /* guarded by mu */
	uint32_t *source_of_pace; /* pace source id -> blob index */
	uint32_t nsource_map;
	uint64_t read_timeout_ns;
	uint64_t stall_ns;
	uint64_t *lane_seen_ns; /* last start or byte per lane; guarded by mu */
};

struct fs_engine_config {
	unsigned lanes;
	unsigned read_timeout_s;
	unsigned stall_timeout_s;
	struct fetch_config fetch;
};

/* Creates the engine over blobs (ownership of the array moves in) and an
 * open cache (borrowed; must outlive the engine). Loads held extents. */
int fs__engine_new(const struct fs_engine_config *cfg, struct cache *cache,
		   struct fs_blob *blobs, uint32_t nblobs,
		   struct fs_engine **out);

/* Frees a blob table and the strings it owns; NULL is a no-op. */
void fs__blobs_free(struct fs_blob *blobs, uint32_t n);

/* Starts the transfer thread. */
int fs__engine_start(struct fs_engine *e);

/* Stops transfers, flushes the cache, frees the engine. */
void fs__engine_free(struct fs_engine *e);

/* The cache's on_lost callback: ctx points to the engine pointer (which
 * may still be NULL while the mount starts). The lost block's bytes are no
 * longer held, so they are fetched again. */
void fs__engine_on_lost(void *ctx, const struct cache_id *id, uint64_t index,
			int err);

/* Opens and closes a reader stream on blob b. */
int fs__engine_open(struct fs_engine *e, uint32_t b, uint32_t *reader_out);
void fs__engine_close(struct fs_engine *e, uint32_t reader);

/* Reads up to len bytes at off of blob b for reader into buf, waiting for
 * missing bytes. Returns the byte count or a negative errno (-EIO when no
 * source can serve, -ETIMEDOUT past the read deadline). */
long fs__engine_read(struct fs_engine *e, uint32_t b, uint32_t reader,
		     uint64_t off, size_t len, char *buf);

/* What the FUSE operations see through fuse_req_userdata(). */
struct fs_mount {
	struct fs_engine *engine;
	uid_t uid;
	gid_t gid;
	struct timespec mtime; /* of the files: the probe's Last-Modified or
				  the mount time */
	double attr_timeout;
	double entry_timeout;
	unsigned read_ahead_kb; /* set on the mount's bdi at init */
};

/* The low-level operations of a pacefs mount. */
extern const struct fuse_lowlevel_ops fs__ops;

#endif

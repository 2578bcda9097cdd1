/* driver_int: what the driver's files (fs.c, mount.c, node.c, probe.c,
 * status.c, inval.c, log.c) share: the mount's state, the probe, the
 * nodes' readiness and listings, the page invalidator; no file outside
 * fs/driver/ includes it (but the unit tests). */
#ifndef FS_DRIVER_INT_H
#define FS_DRIVER_INT_H

#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "cache/cache.h"
#include "fetch/fetch.h"
#include "fs/base.h"

struct fs_engine;
struct fs_ns;
struct fs_node;
struct fs_s3;
struct fs_creds;
struct fs_source;
struct fuse_session;
struct fuse_lowlevel_ops;
struct fs_metrics;

/* The process's log (fs/driver/log.c): one line per call, to stderr in
 * the foreground and to syslog when daemonized, every URL's userinfo
 * removed, every byte a server chose escaped, repeated lines rate-limited.
 * The engine and the credentials reach it through the log hooks of their
 * configurations (fs__log_hook). Thread-safe. */
void fs__log(enum fs_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void fs__vlog(enum fs_log_level level, const char *fmt, va_list ap)
	__attribute__((format(printf, 2, 0)));
/* The same for a line about what f names (NULL: nothing): its fields
 * stand on their own in a JSON log (-o log_format=json). */
void fs__vlog_about(enum fs_log_level level, const struct fs_log_fields *f,
		    const char *fmt, va_list ap)
	__attribute__((format(printf, 3, 0)));

/* The cache's log callback (cache_config.log). */
void fs__log_cache(void *ctx, enum cache_log_level level, const char *msg);
/* The log hook of the engine (fs_engine_config.log) and of the
 * credentials (fs_creds_config.log): their lines as fs__log's. */
void fs__log_hook(void *ctx, enum fs_log_level level, const char *fmt,
		  va_list ap) __attribute__((format(printf, 3, 0)));
/* The engine's log_fields hook: its lines with their fields. */
void fs__log_fields_hook(void *ctx, enum fs_log_level level,
			 const struct fs_log_fields *f, const char *fmt,
			 va_list ap) __attribute__((format(printf, 4, 0)));

struct fs_mount;

/* The readahead the mount asks of the kernel (FUSE_INIT's max_readahead
 * and the bdi's read_ahead_kb): the kernel then sends reads of up to that
 * size. Counted in every sequential reader's lead. */
#define FS_KERNEL_AHEAD (128u * 1024u)

/* Threads the FUSE loop may run; a read that waits on the network holds
 * one. */
#define FS_THREADS 64

/* Reads the kernel may have outstanding in the background (FUSE_INIT's
 * max_background): its page-cache reads, readahead included, are all sent
 * so, and a read that waits on the network holds its slot. At the
 * kernel's default of 12, twelve readers of a file the origin sends
 * slowly held every slot and another file's reads queued in the kernel
 * behind them, whatever the scheduler gave them; below FS_THREADS, so
 * that requests that do not wait (lookups, cached reads) find a thread. */
#define FS_BACKGROUND 48

/* Past this many background requests the kernel skips readahead that no
 * reader waits for yet: the kernel's own threshold for 12. At 3/4 of
 * FS_BACKGROUND the kernel sent more ahead of eight loader workers, and
 * pacing read those reads as jumps: more requests and bytes pulled twice
 * (tests/mount/readers.sh). */
#define FS_CONGESTION 9

/* The largest status document: an extended attribute's value limit. */
#define FS_STATUS_MAX 65536

/* Files a directory-index mount can hold (a bound on its tables). */
#define FS_INDEX_MAX_FILES 65536u

/* The mount's state as one JSON document (for `pacefs status`, through the
 * root's user.pacefs.status attribute): its length, or -ERANGE when cap is
 * too small. */
int fs__status_json(struct fs_mount *m, char *buf, size_t cap);

/* What probing a file's URLs found: the sources that agree, with their
 * strings owned here. */
struct fs_learned {
	uint64_t size;
	int64_t mtime; /* -1: unknown */
	struct fs_source *sources;
	uint32_t nsources;
	bool offline; /* nothing answered; from the cache's record */
	uint64_t queued; /* [0, queued) came with the probe and were put
			    into the cache (fs__engine_blob_ready) */
};

/* What fs__learn() is asked about one file. */
struct fs_learn_args {
	const char *identity;	 /* the cache identity string */
	const char *const *urls; /* the first is the primary */
	uint32_t nurls;
	bool has_size; /* the manifest or listing gives the size */
	uint64_t size;
	const uint8_t *sha256; /* the whole blob's digest, or NULL */
	int64_t revalidate_s;  /* trust a record the origin confirmed less
				  than this long ago; -1: always ask */
	bool content; /* the identity names the content (verified per block),
			 not what a source serves */
	bool object_store; /* S3: If-Match, and the listing's size may be
			      older than what the probe finds */
	size_t first;	   /* > 1: the first URL's probe asks this many bytes
			      from 0, and a file no longer than them (a block
			      at most) is stored whole in the cache */
};

/* Probes a file's URLs. Sources that disagree on the size (with each other,
 * or with a->size when given) are left out with a log line. A blob whose
 * primary validator changed is dropped from the cache (not under a content
 * identity: its bytes are the content, whatever a URL serves now); when
 * nothing answers but the cache has the blob, its record stands in
 * (offline); when the record is fresh for the revalidation policy, nothing
 * is asked (never under a content identity). On failure writes one line
 * naming the URL and the cause into err. */
int fs__learn(const struct fetch_config *fc, struct cache *cache,
	      const struct fs_learn_args *a, struct fs_learned *out, char *err,
	      size_t errlen);
void fs__learned_free(struct fs_learned *l);

/* What the FUSE operations see through fuse_req_userdata(). */
struct fs_mount {
	struct fs_ns *ns;
	struct fs_engine *engine;
	struct fs_inval *inval;	   /* the engine's inval hook queues here */
	struct cache *cache;	   /* the engine's */
	struct fetch_config fetch; /* for probes and directory pages */
	uid_t uid;
	gid_t gid;
	struct timespec mtime; /* of files with no date of their own */
	double attr_timeout;
	double entry_timeout;
	uint64_t listing_ttl_ns;
	int64_t revalidate_s;  /* -1: always ask the origin at first open */
	uint64_t kernel_ahead; /* the kernel's readahead on this mount */
	bool splice; /* reads of the cache's file are answered by splicing
			its pages (set once, at FUSE's init) */
	const struct fs_s3 *s3; /* an S3 tree: how its directories list */
	const struct fs_creds *creds;
	/* -o read_timeout=: how long a FUSE request may wait on the
	 * network (a listing, a probe), as a read may. */
	uint64_t read_timeout_ns;
	struct fuse_session *se;    /* its end (an unmount, a signal, the
				       connection gone) stops requests and ends
				       a read waiting, so the daemon's exit never
				       waits on one */
	struct fs_metrics *metrics; /* what the endpoint and status show;
				       counted whether or not -o metrics=
				       serves them */
	struct fs_sizes *sizes;	    /* probes the unsized files of a listing */
};

/* ---- sizes.c: the sizes an index did not give, probed in parallel ---- */

struct fs_sizes;

/* The probers of m's unsized files, at most `probers` threads, started
 * when the first files are queued. 0 or -ENOMEM. */
int fs__sizes_new(struct fs_mount *m, uint32_t probers, struct fs_sizes **out);

/* Queues the files of directory d (just listed) whose size its index did
 * not give and that no request probes yet: the probers probe them
 * (fs__node_ready, each by read_timeout), and a stat of one waits for its
 * probe. 0, or -ENOMEM / -ECANCELED (stopping): the stats then probe. */
int fs__sizes_queue(struct fs_sizes *s, uint32_t d);

/* Stops the probers (after the session ended, so that a probe under way
 * stops within about a second), joins them and frees s. NULL-safe. */
void fs__sizes_free(struct fs_sizes *s);

/* The fetch configuration for a synchronous request made for one FUSE
 * request (or the mount's own checks) that must end by deadline_ns
 * (fs__now_ns's clock; 0: none), or as soon as the mount is ending:
 * m->fetch with those bounds (fetch_config's deadline_ms and stop). */
void fs__mount_bound(const struct fs_mount *m, uint64_t deadline_ns,
		     struct fetch_config *out);

/* The cache identity of a file (docs/manifest.md, "The cache"): a content
 * identity when its block digests are checked before its bytes are cached
 * (fs__node_has_content_identity), shared by every file naming the same
 * digests; else that of its URLs (fs__sources_identity), never whichever
 * mirror answered. A new string (free() it); NULL when memory ran out. Caller
 * holds the namespace's mu. */
char *fs__node_identity(const struct fs_node *n);

/* True when node n's identity names its content: every block stored under
 * it passed the per-block digests the identity is made of. Caller holds
 * the namespace's mu. */
bool fs__node_has_content_identity(const struct fs_node *n);

/* Makes node i's blob ready to read: probes its URLs if it has never been,
 * adds its blob to the engine, by deadline_ns (fs__now_ns's clock; the
 * wait for another file's probe too). Returns 0 or -EIO (logged). */
int fs__node_ready(struct fs_mount *m, uint32_t i, uint64_t deadline_ns);

/* Reads the directory-index page of directory node i when it was never
 * read or is older than the listing TTL, and adds what it lists. While
 * another thread reads it, waits for that result when there is no listing
 * yet or `fresh` asks for it (a readdir), else returns at once and the
 * caller uses the listing there is (a lookup). Reading the page, and
 * waiting for another thread's, end by deadline_ns (fs__now_ns's clock).
 * Returns 0 or a negative errno (logged). */
int fs__node_list(struct fs_mount *m, uint32_t i, bool fresh,
		  uint64_t deadline_ns);

/* The kernel's page cache (fs/driver/inval.c): the engine's inval hook queues
 * here. */
struct fs_inval;

/* An invalidator for blobs 0 .. max_blobs - 1 (the engine's max_blobs).
 * 0, -ENOMEM. fs__inval_free(NULL) does nothing; stops the thread first. */
int fs__inval_new(uint32_t max_blobs, struct fs_inval **out);
void fs__inval_free(struct fs_inval *v);

/* Queues the kernel's pages of bytes [start, end) of blob b, the file of
 * inode ino (0: never opened, so the kernel holds no page of it), to be
 * dropped; name (which must outlive v) is for the log. Pending ranges of
 * one blob merge into their hull. Never blocks on the kernel: a thread of
 * its own sends them. The engine calls it (through its inval hook) under
 * its lock: the invalidator's lock nests inside the engine's, never the
 * other way. */
void fs__inval_queue(struct fs_inval *v, uint32_t b, const char *name,
		     uint64_t ino, uint64_t start, uint64_t end);

/* Starts the thread that sends queued invalidations through se. Call
 * while the session serves requests (the kernel waits, in an
 * invalidation, for the reads in flight over those pages). 0 or a
 * negative errno. */
int fs__inval_start(struct fs_inval *v, struct fuse_session *se);

/* Stops that thread; before the session is destroyed. Pending ranges are
 * left (the mount ends). fs__inval_stop(NULL) and a second call do
 * nothing. */
void fs__inval_stop(struct fs_inval *v);

/* fs/driver/exitguard.c. Bounds the daemon's exit. Once the session has ended
 * it wakes the waiting reads (they see the end and return), and should the
 * shutdown (libfuse joining its threads, then the engine's, the cache's) still
 * not be done FS_EXIT_GRACE_S later, it unmounts and exits the process with
 * status 1, rather than let a stuck thread keep a daemon alive after its
 * mount. */
struct fs_exit_guard {
	struct fuse_session *se;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct fs_engine *engine; /* guarded by mu; NULL once it is freed */
	bool ended;	/* guarded by mu: the session loop returned (it resets
			   what fuse_session_exited says) */
	bool done;	/* guarded by mu: the shutdown finished */
	bool unmounted; /* guarded by mu */
	bool started;
	pthread_t thread;
};

/* Starts the guard of session se, whose readers are engine's. */
int fs__exit_guard_start(struct fs_exit_guard *g, struct fuse_session *se,
			 struct fs_engine *engine);
/* The session loop returned: from here on se may be freed. */
void fs__exit_guard_ended(struct fs_exit_guard *g);
/* Takes the mount down once, whether the main thread or the guard does. */
void fs__exit_guard_unmount(struct fs_exit_guard *g, struct fuse_session *se);
/* Before the engine is freed: the guard no longer wakes its readers. */
void fs__exit_guard_forget_engine(struct fs_exit_guard *g);
/* The shutdown is done: stops and joins the guard. */
void fs__exit_guard_stop(struct fs_exit_guard *g);

/* The low-level operations of a pacefs mount. */
extern const struct fuse_lowlevel_ops fs__ops;

#endif

/* driver_int: what the driver's files share: the mount's state, the
 * probe of a file's URLs, the nodes' readiness and listings, the sizes'
 * probers, the page invalidator, the exit guard and the FUSE operations;
 * no file outside fs/driver/ includes it (but the unit tests). */
#ifndef FS_DRIVER_INT_H
#define FS_DRIVER_INT_H

#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "cache/cache.h"
#include "fetch/fetch.h"
#include "fs/base.h"
#include "fs/tree/tree.h"

struct engine;
struct tree_ns;
struct tree_node;
struct tree_s3;
struct auth_creds;
struct engine_source;
struct fuse_session;
struct fuse_lowlevel_ops;
struct obs_metrics;
struct obs_view;
struct fs_opts;
struct fetch_auth;

struct driver_mount;

/* The readahead the mount asks of the kernel (FUSE_INIT's max_readahead
 * and the bdi's read_ahead_kb): the kernel then sends reads of up to that
 * size. Counted in every sequential reader's lead. */
#define DRIVER_KERNEL_AHEAD (128u * 1024u)

/* Threads the FUSE loop may run; a read that waits on the network holds
 * one. */
#define DRIVER_THREADS 64

/* Reads the kernel may have outstanding in the background (FUSE_INIT's
 * max_background): its page-cache reads, readahead included, are all sent
 * so, and a read that waits on the network holds its slot. At the
 * kernel's default of 12, twelve readers of a file the origin sends
 * slowly held every slot and another file's reads queued in the kernel
 * behind them, whatever the scheduler gave them; below DRIVER_THREADS, so
 * that requests that do not wait (lookups, cached reads) find a thread. */
#define DRIVER_BACKGROUND 48

/* Past this many background requests the kernel skips readahead that no
 * reader waits for yet: the kernel's own threshold for 12. At 3/4 of
 * DRIVER_BACKGROUND the kernel sent more ahead of eight loader workers,
 * and pacing read those reads as jumps: more requests and bytes pulled
 * twice (tests/mount/readers.sh). */
#define DRIVER_CONGESTION 9

/* Files a directory-index mount can hold (a bound on its tables). */
#define DRIVER_INDEX_MAX_FILES 65536u

/* What probing a file's URLs found: the sources that agree, with their
 * strings owned here. */
struct driver_learned {
	uint64_t size;
	int64_t mtime; /* -1: unknown */
	struct engine_source *sources;
	uint32_t nsources;
	bool offline;	 /* nothing answered; from the cache's record */
	bool open_ended; /* its one source sends no length and none was
			    given: size 0, the blob's length unknown until
			    its stream ends (engine_blob_set_open) */
	uint64_t queued; /* [0, queued) came with the probe and were put
			    into the cache (engine_blob_ready) */
};

/* What driver__learn() is asked about one file. */
struct driver_learn_args {
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
int driver__learn(const struct fetch_config *fc, struct cache *cache,
		  const struct driver_learn_args *a, struct driver_learned *out,
		  char *err, size_t errlen);
void driver__learned_free(struct driver_learned *l);

/* What the FUSE operations see through fuse_req_userdata(). */
struct driver_mount {
	struct tree_ns *ns;
	struct engine *engine;
	struct driver_inval *inval; /* the engine's inval hook queues here */
	struct cache *cache;	    /* the engine's */
	struct fetch_config fetch;  /* for probes and directory pages */
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
	const struct tree_s3 *s3; /* an S3 tree: how its directories list */
	const struct auth_creds *creds;
	/* -o read_timeout=: how long a FUSE request may wait on the
	 * network (a listing, a probe), as a read may. */
	uint64_t read_timeout_ns;
	struct fuse_session *se;     /* its end (an unmount, a signal, the
					connection gone) stops requests and ends
					a read waiting, so the daemon's exit never
					waits on one */
	struct obs_metrics *metrics; /* what the endpoint and status show;
				       counted whether or not -o metrics=
				       serves them */
	struct driver_sizes *sizes;  /* probes the unsized files of a listing */
	struct driver_plans *plans;  /* read plans and their control socket */
	bool allow_other; /* -o allow_other: every user may read the mount */
	/* Set once the session's loop returned (driver__mount_end), never
	 * cleared: libfuse's loop resets what fuse_session_exited says as
	 * it returns, and the probers, joined after it, must still see the
	 * end. */
	atomic_bool ended;
};

/* ---- plan.c, planahead.c, plansock.c: read plans ---- */

struct driver_plans;

/* The mount's read plans, with no plan yet, and the threads that fetch
 * along them, started with the first plan (lead_ms: -o readahead=, the
 * window's time; threads: as many as the origin may have connections,
 * each probing one file at a time, at most DRIVER_PLAN_THREADS;
 * listahead: -o listahead=on, a directory opened in its listing's order
 * is planned without being told). 0 or -ENOMEM. */
int driver__plan_set_new(struct driver_mount *m, uint64_t lead_ms,
			 uint32_t threads, bool listahead,
			 struct driver_plans **out);

/* Binds the control socket (an abstract Unix socket, named by
 * driver__plan_socket) and starts accepting plans; allow_other: the
 * mount lets every user read it. 0 or a negative errno. */
int driver__plan_listen(struct driver_plans *s, bool allow_other);

/* The control socket's name, "@..." (abstract), for the root's
 * user.pacefs.control attribute; "" before driver__plan_listen. */
const char *driver__plan_socket(const struct driver_plans *s);

/* File node was opened by process pid of user uid: the cursors of the
 * plans whose window holds it move, the others count a miss (and are
 * abandoned after enough; a listing plan counts its own process's opens
 * alone); an open no plan expected may start a listing plan
 * (listorder.c); a plan reader of it closes. NULL-safe, thread-safe. */
void driver__plan_opened(struct driver_plans *s, uint32_t node, pid_t pid,
			 uid_t uid);

/* The plans as a JSON array into buf (obs_view.plans_json): length
 * written or -ERANGE. */
int driver__plan_status_json(void *s, char *buf, size_t cap);

/* Stops the socket and the threads, closes the plan readers, frees s.
 * Before the engine goes. NULL-safe. */
void driver__plan_set_free(struct driver_plans *s);

/* ---- sizes.c: the sizes an index did not give, probed in parallel ---- */

struct driver_sizes;

/* The probers of m's unsized files, at most `probers` threads, started
 * when the first files are queued. 0 or -ENOMEM. */
int driver__sizes_new(struct driver_mount *m, uint32_t probers,
		      struct driver_sizes **out);

/* Queues the files of directory d (just listed) whose size its index did
 * not give and that no request probes yet: the probers probe them
 * (driver__file_ready, each by read_timeout), and a stat of one waits for its
 * probe. 0, or -ENOMEM / -ECANCELED (stopping): the stats then probe. */
int driver__sizes_queue(struct driver_sizes *s, uint32_t d);

/* Stops the probers (after driver__mount_end, so that a probe under way
 * stops within about a second), joins them and frees s. NULL-safe. */
void driver__sizes_free(struct driver_sizes *s);

/* The mount has ended: its session's loop returned. From here on every
 * request bounded by driver__mount_bound stops, as it did while the loop was
 * ending. Thread-safe; call it once the loop returned, before anything
 * waits for the requests under way (driver__sizes_free). */
void driver__mount_end(struct driver_mount *m);

/* The fetch configuration for a synchronous request made for one FUSE
 * request (or the mount's own checks) that must end by deadline_ns
 * (fs__now_ns's clock; 0: none), or as soon as the mount is ending:
 * m->fetch with those bounds (fetch_config's deadline_ms and stop). */
void driver__mount_bound(const struct driver_mount *m, uint64_t deadline_ns,
			 struct fetch_config *out);

/* The cache identity of a file (docs/manifest.md, "The cache"): a content
 * identity when its block digests are checked before its bytes are cached
 * (driver__file_has_content_identity), shared by every file naming the same
 * digests; else that of its URLs (auth_sources_identity), never whichever
 * mirror answered; urls are its nurls URLs (tree_ns_url). A new string
 * (free() it); NULL when memory ran out. Caller holds the namespace's mu. */
char *driver__file_identity(const struct tree_node *n, const char *const *urls,
			    uint32_t nurls);

/* True when node n's identity names its content: every block stored under
 * it passed the per-block digests the identity is made of. Caller holds
 * the namespace's mu. */
bool driver__file_has_content_identity(const struct tree_node *n);

/* Makes node i's blob ready to read: probes its URLs if it has never been,
 * adds its blob to the engine, by deadline_ns (fs__now_ns's clock; the
 * wait for another file's probe too). Returns 0 or -EIO (logged). */
int driver__file_ready(struct driver_mount *m, uint32_t i,
		       uint64_t deadline_ns);

/* Reads the directory-index page of directory node i when it was never
 * read or is older than the listing TTL, and adds what it lists. While
 * another thread reads it, waits for that result when there is no listing
 * yet or `fresh` asks for it (a readdir), else returns at once and the
 * caller uses the listing there is (a lookup). Reading the page, and
 * waiting for another thread's, end by deadline_ns (fs__now_ns's clock).
 * Returns 0 or a negative errno (logged). */
int driver__dir_list(struct driver_mount *m, uint32_t i, bool fresh,
		     uint64_t deadline_ns);

/* The kernel's page cache (driver/inval.c): the engine's inval hook queues
 * here. */
struct driver_inval;

/* An invalidator for blobs 0 .. max_blobs - 1 (the engine's max_blobs).
 * 0, -ENOMEM. driver__inval_free(NULL) does nothing; stops the thread first. */
int driver__inval_new(uint32_t max_blobs, struct driver_inval **out);
void driver__inval_free(struct driver_inval *v);

/* Queues the kernel's pages of bytes [start, end) of blob b, the file of
 * inode ino (0: never opened, so the kernel holds no page of it), to be
 * dropped; name (which must outlive v) is for the log. Pending ranges of
 * one blob merge into their hull. Never blocks on the kernel: a thread of
 * its own sends them. The engine calls it (through its inval hook) under
 * its lock: the invalidator's lock nests inside the engine's, never the
 * other way. */
void driver__inval_queue(struct driver_inval *v, uint32_t b, const char *name,
			 uint64_t ino, uint64_t start, uint64_t end);

/* Starts the thread that sends queued invalidations through se. Call
 * while the session serves requests (the kernel waits, in an
 * invalidation, for the reads in flight over those pages). 0 or a
 * negative errno. */
int driver__inval_start(struct driver_inval *v, struct fuse_session *se);

/* Stops that thread; before the session is destroyed. Pending ranges are
 * left (the mount ends). driver__inval_stop(NULL) and a second call do
 * nothing. */
void driver__inval_stop(struct driver_inval *v);

/* driver/exitguard.c. Bounds the daemon's exit. Once the session has ended
 * it wakes the waiting reads (they see the end and return), and should the
 * shutdown (libfuse joining its threads, then the engine's, the cache's) still
 * not be done DRIVER_EXIT_GRACE_S later, it unmounts and exits the process with
 * status 1, rather than let a stuck thread keep a daemon alive after its
 * mount. */
struct driver_exit_guard {
	struct fuse_session *se;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct engine *engine; /* guarded by mu; NULL once it is freed */
	bool ended;	/* guarded by mu: the session loop returned (it resets
			   what fuse_session_exited says) */
	bool done;	/* guarded by mu: the shutdown finished */
	bool unmounted; /* guarded by mu */
	bool started;
	pthread_t thread;
};

/* Starts the guard of session se, whose readers are engine's. */
int driver__exit_guard_start(struct driver_exit_guard *g,
			     struct fuse_session *se, struct engine *engine);
/* The session loop returned: from here on se may be freed. */
void driver__exit_guard_ended(struct driver_exit_guard *g);
/* Takes the mount down once, whether the main thread or the guard does. */
void driver__exit_guard_unmount(struct driver_exit_guard *g,
				struct fuse_session *se);
/* Before the engine is freed: the guard no longer wakes its readers. */
void driver__exit_guard_forget_engine(struct driver_exit_guard *g);
/* The shutdown is done: stops and joins the guard. */
void driver__exit_guard_stop(struct driver_exit_guard *g);

/* What obs/ reads of mount m (the status document, a scrape). */
void driver__mount_view(const struct driver_mount *m, struct obs_view *out);

/* The low-level operations of a pacefs mount. */
extern const struct fuse_lowlevel_ops driver__ops;

/* ---- the mount's life: mount.c (fs_main), check.c, prepare.c, serve.c ---- */

/* How the first argument names what to mount. */
enum driver_mount_kind {
	DRIVER_MOUNT_URL,      /* one blob */
	DRIVER_MOUNT_MANIFEST, /* a local JSON manifest */
	DRIVER_MOUNT_INDEX,    /* a URL ending in '/': its directory index */
};

/* What the parent learned before mounting, for the daemon to build on. */
struct driver_prepared {
	enum driver_mount_kind kind;
	char name[NAME_MAX + 1]; /* DRIVER_MOUNT_URL */
	char *identity;		 /* DRIVER_MOUNT_URL: auth_url_identity */
	char **origins;		 /* where the headers may go */
	size_t norigins;
	char **urls; /* DRIVER_MOUNT_URL: the URL, then mirrors */
	uint32_t nurls;
	struct driver_learned learned; /* DRIVER_MOUNT_URL */
	struct tree_manifest manifest; /* DRIVER_MOUNT_MANIFEST */
	struct tree_s3 s3;	 /* an s3:// source: bucket == NULL if not */
	struct fetch_auth *auth; /* credentials that change, or NULL */
	struct auth_creds *creds;
};

/* check.c. Writes "pacefs: " and the line (every URL's userinfo removed,
 * every byte a server chose escaped) to stderr; returns 1, the exit
 * status of a mount refused before it was made. */
int driver__fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* check.c. What source (the URL argument) names: an s3:// object, bucket
 * or prefix, an http(s) URL or directory index, else a manifest's path. */
enum driver_mount_kind driver__mount_kind_of(const char *source);

/* check.c. Checks what the command line names before anything is done:
 * the URLs, the S3 source (parsed into s3), the mountpoint (made
 * absolute), the file's name (into name, cap bytes, for a single URL),
 * the CA file, the cache directory (its default set). 0, or 1 with the
 * line written (driver__fail). */
int driver__check_inputs(struct fs_opts *o, enum driver_mount_kind kind,
			 struct tree_s3 *s3, char *name, size_t cap);

/* prepare.c. Opens the cache of o (engine: where its on_lost and
 * on_evicted hooks find the engine). On the terminal (quiet) a failure
 * is one line with the cache's own detail; in the daemon the detail goes
 * to the log. 0, or 1 with the line written. */
int driver__open_cache(const struct fs_opts *o, bool quiet,
		       struct engine **engine, struct cache **out);

/* prepare.c. Everything the mount needs before libfuse mounts it, in the
 * parent: libcurl, m's fetch configuration, credentials and proxies, the
 * cache checked, the source probed or listed (into p), the namespace.
 * 0, or 1 with the line written; what it made is m's and p's to free. */
int driver__prepare_mount(struct fs_opts *o, struct driver_mount *m,
			  struct driver_prepared *p);

/* prepare.c. Frees what p holds (not p). */
void driver__prepared_free(struct driver_prepared *p);

/* serve.c. In the daemon: opens the cache, starts the engine, builds the
 * tree from p and serves se until unmounted or signalled; the metrics
 * endpoint, when *metrics_fd >= 0, takes that socket (*metrics_fd is
 * then -1). 0 (an unmount, or a signal libfuse handles); else a
 * negative errno (logged), or 1 when the cache did not open. */
int driver__serve(struct fs_opts *o, struct fuse_session *se,
		  struct driver_mount *m, struct driver_prepared *p,
		  struct driver_exit_guard *g, int *metrics_fd);

#endif

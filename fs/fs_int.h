/* fs_int: what the files of fs/ share; no other folder includes this. */
#ifndef FS_INT_H
#define FS_INT_H

#include <pthread.h>
#include <stdarg.h>
#include <sys/types.h>
#include <time.h>

#include <fuse_lowlevel.h>
#include <stdbool.h>
#include <stdint.h>

#include "cache/cache.h"
#include "fetch/fetch.h"
#include "fs/engine.h"
#include "fs/fs.h"
#include "pacing/pace.h"

enum fs_log_level { FS_LOG_ERR, FS_LOG_WARN, FS_LOG_INFO, FS_LOG_DEBUG };

/* Sends log lines to stderr (foreground) or syslog (daemon). Every line is
 * escaped (fs__escape): servers choose much of what is logged (names,
 * ETags, reasons). Lines alike but for their numbers (fs__log_key) are
 * rate-limited (fs__log_admit), debug lines aside, so that a fault that
 * repeats cannot flood the log. Thread-safe. */
void fs__log_init(bool to_stderr, enum fs_log_level level);
void fs__log(enum fs_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* vsnprintf into buf with every URL's userinfo removed (removed before a
 * long line is cut): what every log line and terminal line goes through. */
void fs__format_shown(char *buf, size_t cap, const char *fmt, va_list ap);

/* Copies s into out (cap > 0 bytes, always NUL-terminated, cut when full)
 * with every byte a terminal or a log reader could take for something
 * else written as \xNN: control bytes (< 0x20, 0x7f), UTF-8 C1 controls
 * (U+0080..U+009F) and bytes that are not well-formed UTF-8. Returns out. */
char *fs__escape(const char *s, char *out, size_t cap);

/* The length of the well-formed UTF-8 sequence of two to four bytes at s
 * (its code point in *cp), or 0: ASCII, a stray or overlong byte, a
 * surrogate, a cut sequence. Reads up to s's NUL. */
size_t fs__utf8_seq(const char *s, uint32_t *cp);

/* A line's kind for the rate limit: a hash of its text with every run of
 * digits counted as one, so that "lane 3: ..." and "lane 5: ..." or two
 * offsets are the same kind. */
uint64_t fs__log_key(const char *msg);

/* Lines of one kind logged per window; the rest are counted. */
#define FS_LOG_BURST 5
#define FS_LOG_WINDOW_NS (10 * 1000000000ull)
#define FS_LOG_KINDS 32

/* Lines left out of one kind, reported when its window ends. */
struct fs_log_report {
	uint32_t suppressed;
	int level;
	char sample[120]; /* the last line left out, cut */
};

/* The rate limit's state: the kinds seen lately (the oldest window makes
 * room for a new kind, and its count is then lost). */
struct fs_log_limit {
	struct {
		bool used;
		uint64_t key;
		uint64_t since; /* the window's start */
		uint32_t logged;
		struct fs_log_report left_out;
	} kind[FS_LOG_KINDS];
};

/* Admits a line of kind key (text msg) at now_ns: true for the first
 * FS_LOG_BURST lines of a kind in each FS_LOG_WINDOW_NS; a later one is
 * counted (msg kept as the sample) and false. Pure; the caller locks. */
bool fs__log_admit(struct fs_log_limit *l, uint64_t key, int level,
		   const char *msg, uint64_t now_ns);

/* Takes one kind whose window has ended with lines left out: fills *r and
 * clears the count. False when there is none. Call it before each line (in
 * a loop) so that a storm that stopped is still reported. */
bool fs__log_take_report(struct fs_log_limit *l, uint64_t now_ns,
			 struct fs_log_report *r);
/* Adapters for the modules' log callbacks. */
void fs__log_cache(void *ctx, enum cache_log_level level, const char *msg);
void fs__log_fetch(void *ctx, enum fetch_log_level level, const char *msg);

uint64_t fs__now_ns(void);

/* The default cache directory, a new string: /var/cache/pacefs for root,
 * else $XDG_CACHE_HOME/pacefs, else $HOME/.cache/pacefs, else the
 * account's home (getpwuid) + /.cache/pacefs; never a shared, guessable
 * path. NULL with the reason in err when there is none. */
char *fs__default_cache_dir(char *err, size_t errlen);

/* Writes the n bytes at d as 2n lowercase hex digits and a NUL into out
 * (2n + 1 bytes); returns out. */
char *fs__hex(const uint8_t *d, size_t n, char *out);

/* Writes n bytes as "512 B", "1.5 KiB", "12.0 MiB", ...; returns buf. */
const char *fs__human_size(uint64_t n, char *buf, size_t cap);

struct fs_mount;

/* The readahead the mount asks of the kernel (FUSE_INIT's max_readahead
 * and the bdi's read_ahead_kb): the kernel then sends reads of up to that
 * size. Counted in every sequential reader's lead. */
#define FS_KERNEL_AHEAD (128u * 1024u)

/* The largest status document: an extended attribute's value limit. */
#define FS_STATUS_MAX 65536

/* Files a directory-index mount can hold (a bound on its tables). */
#define FS_INDEX_MAX_FILES 65536u

/* The mount's state as one JSON document (for `pacefs status`, through the
 * root's user.pacefs.status attribute): its length, or -ERANGE when cap is
 * too small. */
int fs__status_json(struct fs_mount *m, char *buf, size_t cap);

#define FS_NO_NODE UINT32_MAX
#define FS_NO_BLOB UINT32_MAX

/* One directory or file of the mount. Fields are guarded by the
 * namespace's mu. */
struct fs_node {
	char *name;
	uint32_t parent; /* the root is its own parent */
	bool is_dir;
	bool gone; /* no longer in its re-read directory index */
	uint32_t mode;
	int64_t mtime; /* seconds; -1: unknown */
	/* directories */
	uint32_t *children; /* in the order they were added */
	uint32_t nchildren, cap_children;
	uint32_t *index; /* children by name: an open-addressing table of
			    nindex slots (a power of two, at most half
			    full; FS_NO_NODE: free) once the directory has
			    FS_NS_INDEX_MIN children; NULL before */
	uint32_t nindex;
	char *list_url;	    /* a directory-index mount's page for it */
	uint64_t listed_ns; /* when that page was read; 0: never */
	bool listing;	    /* a thread is reading and merging that page */
	uint32_t list_gen;  /* bumped by each merge of the page */
	uint32_t seen_gen;  /* in a listed directory: the parent's list_gen
			       of the last page that listed this node */
	/* files */
	char **urls;
	uint32_t nurls;
	bool has_size;
	uint64_t size;
	bool has_sha256;
	uint8_t sha256[32];
	uint32_t dblock;	/* block_sha256's block size; 0: none */
	uint8_t (*dblocks)[32]; /* immutable once the tree is built */
	uint32_t ndblocks;
	uint32_t blob; /* the engine's blob once its size is known */
	char *etag;	/* an object store's listed ETag; NULL: none */
	char *identity; /* its cache identity when not that of its URLs */
};

/* Children a directory has before it gets a table by name: below, a scan
 * is as fast and costs no memory. */
#define FS_NS_INDEX_MIN 16

/* The tree; node i is inode i + 1. Every lookup of a name is O(1): a
 * server lists as many names as it likes, and chooses them, so the table
 * is keyed with a random SipHash key (no names it could make collide). */
struct fs_ns {
	pthread_mutex_t mu;
	pthread_cond_t listed;	/* a directory's listing ended */
	struct fs_node **nodes; /* guarded by mu */
	uint32_t n, cap;	/* guarded by mu */
	uint64_t key[2];	/* SipHash key of the name tables */
};

/* Creates a namespace holding the root directory. */
int fs__ns_new(struct fs_ns **out);
void fs__ns_free(struct fs_ns *ns);

/* Node i, or NULL. Caller holds ns->mu; the pointer is valid while it
 * does. */
struct fs_node *fs__ns_get(struct fs_ns *ns, uint32_t i);

/* The child of dir called name, or FS_NO_NODE. Caller holds ns->mu. */
uint32_t fs__ns_child(struct fs_ns *ns, uint32_t dir, const char *name);

/* Makes room for dir to hold `total` children without growing its arrays
 * or its table by name again (a directory page's merge: one allocation,
 * and no rehash under the lock on the first listing). -ENOTDIR, -ENOMEM,
 * -ENOSPC (no inode numbers left). Caller holds ns->mu. */
int fs__ns_reserve(struct fs_ns *ns, uint32_t dir, uint32_t total);

/* A new node called name, not in any tree yet (no lock needed), or NULL
 * when memory ran out; fs__node_free() frees one that is in none. */
struct fs_node *fs__node_new(const char *name, bool is_dir);
void fs__node_free(struct fs_node *n);

/* Makes n (from fs__node_new) a child of dir: the tree owns it from then
 * on. -EEXIST (a child of that name exists), -ENOTDIR, -ENOMEM: n is still
 * the caller's. Caller holds ns->mu. */
int fs__ns_link(struct fs_ns *ns, uint32_t dir, struct fs_node *n,
		uint32_t *out);

/* Adds a child to dir. -EEXIST, -ENOTDIR, -ENOMEM. Caller holds ns->mu. */
int fs__ns_add(struct fs_ns *ns, uint32_t dir, const char *name, bool is_dir,
	       uint32_t *out);

/* Writes node i's path relative to the root ("a/b/c"; "" for the root).
 * Caller holds ns->mu. */
void fs__ns_path(struct fs_ns *ns, uint32_t i, char *buf, size_t cap);

/* Adds the file at a relative path ("a/b/c"), making its directories.
 * -EEXIST when it is there, -ENOTDIR when a component is a file, -EINVAL
 * for an empty or too long component. Caller holds ns->mu. */
int fs__ns_add_path(struct fs_ns *ns, const char *path, uint32_t *out);

/* What probing a file's URLs found: the sources that agree, with their
 * strings owned here. */
struct fs_learned {
	uint64_t size;
	int64_t mtime; /* -1: unknown */
	struct fs_source *sources;
	uint32_t nsources;
	bool offline; /* nothing answered; from the cache's record */
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
	      const struct fs_learn_args *a, struct fs_learned *out,
	      char *err, size_t errlen);
void fs__learned_free(struct fs_learned *l);

/* Credentials (fs/creds.c): the sources of a mount's credentials and the
 * thread that keeps them current in a fetch_auth. */
struct fs_creds;
struct fs_index_entry;

struct fs_creds_config {
	bool s3;		  /* find an AWS key (none is no error) */
	bool readable_ok;	  /* -o creds_readable */
	const char *auth_command; /* -o auth_command=, or NULL */
	char **header_files;	  /* -o header_file= */
	unsigned nheader_files;
	char **headers; /* -o header=, sent first */
	unsigned nheaders;
	uid_t uid; /* who must own a header file */
};

/* Loads every source once and hands the set to auth; one line in err
 * naming the source when one fails (a header file, the command, a
 * credentials file others may read). Strings of cfg are borrowed for the
 * object's life. */
int fs__creds_new(const struct fs_creds_config *cfg, struct fetch_auth *auth,
		  struct fs_creds **out, char *err, size_t errlen);

/* Starts the thread that reads the sources again: a file that changed
 * (checked every second), a command's credentials that are about to
 * expire, and at once when an origin refuses the current set. */
int fs__creds_start(struct fs_creds *c);

/* Stops the thread; before the fetch_auth is freed. NULL: no-op. */
void fs__creds_free(struct fs_creds *c);

/* Where the AWS key came from, for error lines ("profile 'x' in FILE");
 * NULL when none was found. */
const char *fs__creds_source(const struct fs_creds *c);

/* The region: opt (-o region=), else AWS_REGION, AWS_DEFAULT_REGION, the
 * profile's region in the config file, else us-east-1. */
void fs__creds_region(const char *opt, char *out, size_t cap);

/* An S3 source (fs/s3.c): s3://BUCKET/KEY, or s3://BUCKET/PREFIX/ (and
 * s3://BUCKET) for a tree. */
struct fs_s3 {
	char *endpoint; /* "scheme://host[:port]" */
	bool virtual_host; /* BUCKET.host, else host/BUCKET */
	char region[64];
	char *bucket;
	char *path; /* the key, or the prefix ("" or ending in '/') */
	bool is_prefix;
};

/* Parses an s3:// URL with the -o endpoint=, region (resolved) and
 * s3_addressing= options (NULL: the defaults: AWS's regional endpoint,
 * virtual-hosted there and path-style on another endpoint). -EINVAL with
 * one line naming what to fix. */
int fs__s3_parse(const char *url, const char *endpoint, const char *region,
		 const char *addressing, struct fs_s3 *out, char *err,
		 size_t errlen);
void fs__s3_free(struct fs_s3 *s);

/* The URL requests for key go to; new strings (free() them), NULL when
 * memory ran out. */
char *fs__s3_object_url(const struct fs_s3 *s, const char *key);

/* The cache identity of key: "s3:REGION:" + its path-style URL, never
 * what signs it. */
char *fs__s3_identity(const struct fs_s3 *s, const char *key);

/* A URL whose origin is the one requests go to: the credentials go there
 * and nowhere else. */
char *fs__s3_origin_url(const struct fs_s3 *s);

/* The listing name of a directory: "s3://BUCKET/PREFIX". */
char *fs__s3_dir_url(const struct fs_s3 *s, const char *prefix);

/* Lists the directory dir_url (fs__s3_dir_url's form) with
 * ListObjectsV2, '/' as delimiter, every page (only the first with
 * first_only): its objects with their sizes, ETags and dates, and its
 * common prefixes as directories. Keys that make no file name (empty,
 * ".", "..", too long) are left out. -EIO with one line in err naming what
 * to fix. */
int fs__s3_list(const struct fs_s3 *s, const struct fetch_config *fc,
		const struct fs_creds *creds, const char *dir_url,
		bool first_only, struct fs_index_entry **out, uint32_t *n,
		char *err, size_t errlen);

/* Says, in err, why key cannot be read (after its probe failed): asks the
 * bucket for a one-key listing, whose error names the cause (no bucket, a
 * wrong region, secret or token), or finds the key missing. */
void fs__s3_explain(const struct fs_s3 *s, const struct fetch_config *fc,
		    const struct fs_creds *creds, const char *key, char *err,
		    size_t errlen);

/* What the FUSE operations see through fuse_req_userdata(). */
struct fs_mount {
	struct fs_ns *ns;
	struct fs_engine *engine;
	struct cache *cache;	   /* the engine's */
	struct fetch_config fetch; /* for probes and directory pages */
	pthread_mutex_t learn_mu;  /* one file is probed at a time */
	uid_t uid;
	gid_t gid;
	struct timespec mtime; /* of files with no date of their own */
	double attr_timeout;
	double entry_timeout;
	uint64_t listing_ttl_ns;
	int64_t revalidate_s; /* -1: always ask the origin at first open */
	uint64_t kernel_ahead; /* the kernel's readahead on this mount */
	bool splice; /* reads of the cache's file are answered by splicing
			its pages (set once, at FUSE's init) */
	const struct fs_s3 *s3; /* an S3 tree: how its directories list */
	const struct fs_creds *creds;
	struct fuse_session *se; /* a read waiting when it has exited ends:
				    the daemon's exit never waits on one */
};

/* The cache identity of a file (docs/manifest.md, "The cache"): a content
 * identity when its block digests are checked before its bytes are cached
 * (fs__node_has_content_identity), shared by every file naming the same
 * digests; else that of its URLs (fs__sources_identity), never whichever
 * mirror answered. A new string (free() it); NULL when memory ran out. Caller
 * holds the namespace's mu. */
char *fs__node_identity(const struct fs_node *n);

/* What follows a newline in the identity of a URL with userinfo, and in
 * that of a URL with mirrors. */
#define FS_IDENTITY_USERINFO "userinfo-sha256:"
#define FS_IDENTITY_MIRRORS "mirrors-sha256:"

/* fs/identity.c. The cache identity of url, whole (never cut): "url:" +
 * url when it has no userinfo; else "url:" + url without its userinfo +
 * "\n" FS_IDENTITY_USERINFO + the hex SHA-256 of the whole URL, so that
 * no credential is stored and two never share bytes. A new string (free()
 * it); NULL when memory ran out. */
char *fs__url_identity(const char *url);

/* The cache identity of a blob served by urls[0..n): the first URL's
 * (fs__url_identity), and with mirrors "\n" FS_IDENTITY_MIRRORS + the hex
 * SHA-256 of the other URLs, sorted, so that bytes a set of sources
 * served are never found by a mount of other sources. A new string (free()
 * it); NULL when memory ran out. */
char *fs__sources_identity(const char *const *urls, uint32_t n);

/* True when node n's identity names its content: every block stored under
 * it passed the per-block digests the identity is made of. Caller holds
 * the namespace's mu. */
bool fs__node_has_content_identity(const struct fs_node *n);

/* Makes node i's blob ready to read: probes its URLs if it has never been,
 * adds its blob to the engine. Returns 0 or -EIO (logged). */
int fs__node_ready(struct fs_mount *m, uint32_t i);

/* Reads the directory-index page of directory node i when it was never
 * read or is older than the listing TTL, and adds what it lists. While
 * another thread reads it, waits for that result when there is no listing
 * yet or `fresh` asks for it (a readdir), else returns at once and the
 * caller uses the listing there is (a lookup). Returns 0 or a negative
 * errno (logged). */
int fs__node_list(struct fs_mount *m, uint32_t i, bool fresh);

/* The low-level operations of a pacefs mount. */
extern const struct fuse_lowlevel_ops fs__ops;

#endif

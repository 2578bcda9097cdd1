/* tree: the mount's namespace and where it comes from: a manifest, an
 * HTML directory index, an S3 bucket or prefix. What the driver may ask of
 * the tree's files (ns.c, manifest.c, dirindex.c, s3.c, s3xml.c). */
#ifndef FS_TREE_H
#define FS_TREE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct fetch_config;
struct auth_creds;

#define TREE_NO_NODE UINT32_MAX
#define TREE_NO_BLOB UINT32_MAX

/* A directory's own fields (tree_node.dir): every directory has them. */
struct tree_dir {
	uint32_t *children; /* in the order they were added */
	uint32_t nchildren, cap_children;
	uint32_t *index; /* children by name: an open-addressing table of
			    nindex slots (a power of two, at most half
			    full; TREE_NO_NODE: free) once the directory has
			    TREE_NS_INDEX_MIN children; NULL before */
	uint32_t nindex;
	char *list_url;	    /* a directory-index mount's page for it */
	uint64_t listed_ns; /* when that page was read; 0: never */
	bool listing;	    /* a thread is reading and merging that page */
	uint32_t list_gen;  /* bumped by each merge of the page */
};

/* What few files have (tree_node.file): NULL for a manifest's entry of a
 * URL, a size, a date and a mode, which is most of them. */
struct tree_file {
	/* Its URLs as given, when they are not one of the namespace's
	 * prefixes followed by the file's own path (tree_node.url_own). */
	char **urls;
	uint32_t nurls;
	bool has_sha256;
	uint8_t sha256[32];
	uint32_t dblock;	/* block_sha256's block size; 0: none */
	uint8_t (*dblocks)[32]; /* immutable once the tree is built */
	uint32_t ndblocks;
	/* A manifest's regions: [offset, length] pairs read at open;
	 * immutable once the tree is built. */
	uint64_t (*regions)[2];
	uint32_t nregions;
	char *etag;	/* an object store's listed ETag; NULL: none */
	char *identity; /* its cache identity when not that of its URLs */
};

/* One directory or file of the mount: 56 bytes, in the namespace's slabs
 * (no allocation of its own), its name in the namespace's arena. Fields
 * are guarded by the namespace's mu. */
struct tree_node {
	const char *name;
	union {
		struct tree_dir *dir;	/* is_dir: never NULL */
		struct tree_file *file; /* a file: NULL when it has none */
	};
	uint64_t size;
	int64_t mtime;	   /* seconds; -1: unknown */
	uint32_t parent;   /* the root is its own parent */
	uint32_t blob;	   /* the engine's blob once its size is known */
	uint32_t seen_gen; /* in a listed directory: the parent's list_gen
			      of the last page that listed this node */
	uint16_t mode;
	uint8_t url_prefix; /* url_own: the namespace's prefix number */
	bool is_dir;
	bool gone; /* no longer in its re-read directory index */
	bool has_size;
	bool probing; /* a thread is probing it (driver__file_ready) */
	/* The driver's probers of the sizes a listing did not give
	 * (driver/sizes.c): the node is in their queue, once at most; their
	 * probe of it failed, and a listing queues it no more (a stat still
	 * probes it). */
	bool size_queued;
	bool size_failed;
	/* Its one URL is prefixes[url_prefix] followed by its path from the
	 * root, percent-encoded (tree_ns_url composes it). */
	bool url_own;
};

/* The fields of a file that has none of its own: all zero. */
extern const struct tree_file tree_file_none;

/* n's file fields, or tree_file_none's. */
static inline const struct tree_file *tree_file_of(const struct tree_node *n)
{
	return n->is_dir || n->file == NULL ? &tree_file_none : n->file;
}

/* Children a directory has before it gets a table by name: below, a scan
 * is as fast and costs no memory. */
#define TREE_NS_INDEX_MIN 16

/* Nodes a slab holds (a power of two), and the most URL prefixes kept. */
#define TREE_NS_SLAB_SHIFT 14
#define TREE_NS_PREFIXES 255
/* The longest directory path tree_ns_add_path remembers. */
#define TREE_NS_LAST_DIR 4096
/* Bytes of a chunk of the names' arena. */
#define TREE_NS_ARENA (1u << 20)

/* The tree; node i is inode i + 1. Every lookup of a name is O(1): a
 * server lists as many names as it likes, and chooses them, so the table
 * is keyed with a random SipHash key (no names it could make collide).
 * Nodes live in slabs of 2^TREE_NS_SLAB_SHIFT, mapped as they are needed
 * and never moved (a node's pointer is stable until the namespace is
 * freed), names in an arena of mapped chunks. */
struct tree_ns {
	pthread_mutex_t mu;
	pthread_cond_t listed; /* a directory's listing ended (its waits
				  on CLOCK_MONOTONIC) */
	pthread_cond_t probed; /* a file's probe ended (the same) */
	/* The rest is guarded by mu. */
	struct tree_node **slabs;
	uint32_t nslabs;
	uint32_t n, cap; /* nodes, and the slabs' room */
	uint64_t key[2]; /* SipHash key of the name tables */
	char **arenas;	 /* the names' chunks, TREE_NS_ARENA bytes each */
	uint32_t narenas;
	size_t arena_used;		  /* bytes of the last chunk */
	char *prefixes[TREE_NS_PREFIXES]; /* URL prefixes (nsurl.c) */
	uint32_t nprefixes, last_prefix;
	/* tree_ns_add_path's last directory: its path with the '/' (not
	 * terminated) and its node. */
	char last_dir[TREE_NS_LAST_DIR];
	size_t last_dir_len;
	uint32_t last_dir_id;
};

/* Creates a namespace holding the root directory. */
int tree_ns_new(struct tree_ns **out);
void tree_ns_free(struct tree_ns *ns);

/* Node i, or NULL. Caller holds ns->mu; the pointer stays valid until
 * the namespace is freed (what it points to is guarded by mu). */
static inline struct tree_node *tree_ns_get(struct tree_ns *ns, uint32_t i)
{
	return i < ns->n ? &ns->slabs[i >> TREE_NS_SLAB_SHIFT]
				     [i & ((1u << TREE_NS_SLAB_SHIFT) - 1)]
			 : NULL;
}

/* The child of dir called name, or TREE_NO_NODE. Caller holds ns->mu. */
uint32_t tree_ns_child(struct tree_ns *ns, uint32_t dir, const char *name);

/* Makes room for dir to hold `total` children without growing its arrays
 * or its table by name again (a directory page's merge: one allocation,
 * and no rehash under the lock on the first listing). -ENOTDIR, -ENOMEM,
 * -ENOSPC (no inode numbers left). Caller holds ns->mu. */
int tree_ns_reserve(struct tree_ns *ns, uint32_t dir, uint32_t total);

/* A new node called name, not in any tree yet (no lock needed), or NULL
 * when memory ran out; tree_node_free() frees one that is in none. */
struct tree_node *tree_node_new(const char *name, bool is_dir);
void tree_node_free(struct tree_node *n);

/* Makes n (from tree_node_new) a child of dir: the tree takes what it
 * holds into a node of its own and frees n (tree_ns_get(*out) is the
 * node from then on); a file's one URL that is a prefix and its path is
 * kept as the prefix's number. -EEXIST (a child of that name exists),
 * -ENOTDIR, -ENOMEM: n is still the caller's. Caller holds ns->mu. */
int tree_ns_link(struct tree_ns *ns, uint32_t dir, struct tree_node *n,
		 uint32_t *out);

/* Adds a child to dir. -EEXIST, -ENOTDIR, -ENOMEM. Caller holds ns->mu. */
int tree_ns_add(struct tree_ns *ns, uint32_t dir, const char *name, bool is_dir,
		uint32_t *out);

/* URLs of a file node n (0 for a directory). */
uint32_t tree_node_nurls(const struct tree_node *n);

/* File i's URL k, composed: a new string (free() it); NULL when memory
 * ran out or there is no such URL. Caller holds ns->mu. */
char *tree_ns_url(struct tree_ns *ns, uint32_t i, uint32_t k);

/* Gives file i the nurls URLs of urls (strings and array from malloc),
 * which the tree owns from then on whatever it returns: one that is a
 * prefix followed by the file's path, percent-encoded as an index's or
 * S3's links are (the unreserved characters and '/' as they are), is
 * kept as the prefix's number, and freed. 0, -ENOMEM, or -EINVAL when
 * i is no file. Caller holds ns->mu. */
int tree_ns_set_urls(struct tree_ns *ns, uint32_t i, char **urls,
		     uint32_t nurls);

/* File n's own fields, made when it has none: NULL when memory ran out
 * (or n is a directory). Caller holds ns->mu when n is in a tree. */
struct tree_file *tree_node_file(struct tree_node *n);

/* Writes node i's path relative to the root ("a/b/c"; "" for the root).
 * Caller holds ns->mu. */
void tree_ns_path(struct tree_ns *ns, uint32_t i, char *buf, size_t cap);

/* Adds the file at a relative path ("a/b/c"), making its directories.
 * -EEXIST when it is there, -ENOTDIR when a component is a file, -EINVAL
 * for an empty or too long component. Caller holds ns->mu. */
int tree_ns_add_path(struct tree_ns *ns, const char *path, uint32_t *out);

/* What the tree holds: its entries (those gone from a re-read listing
 * aside) and the bytes of its nodes (their slabs' part in use), names
 * (the arena's chunks), URLs and tables (the heap's, as the allocator
 * counts them: chunk headers included). */
struct tree_usage {
	uint64_t files;
	uint64_t dirs;
	uint64_t bytes;
};

/* Fills *u by a walk of every node (tree/usage.c): O(entries), as the
 * status document's own walk. Caller holds ns->mu. */
void tree_ns_usage(struct tree_ns *ns, struct tree_usage *u);

/* Limits a manifest is checked against; see docs/manifest.md. */
#define TREE_MANIFEST_PATH_MAX 4096	    /* bytes in a whole path */
#define TREE_MANIFEST_NAME_MAX 255	    /* bytes in one path component */
#define TREE_MANIFEST_URLS_MAX 64	    /* urls of one entry */
#define TREE_MANIFEST_URL_MAX 8192	    /* bytes in one URL */
#define TREE_MANIFEST_BLOCK_MIN 4096u	    /* smallest block_size */
#define TREE_MANIFEST_BLOCK_MAX (64u << 20) /* largest block_size */
#define TREE_MANIFEST_REGIONS_MAX 32	    /* regions of one entry */
/* The most bytes tree_manifest_load reads: a regular file is mapped, not
 * read into the heap, so this bounds the parse's time, not its memory. */
#define TREE_MANIFEST_FILE_MAX (4ull << 30)

/* One file of a manifest. Everything is owned by the manifest. */
struct tree_manifest_entry {
	char *path;  /* relative, checked: no empty, "." or ".."
			component, no NUL */
	char **urls; /* http:// or https://, at least one */
	uint32_t nurls;
	bool has_size;
	uint64_t size;
	bool has_sha256;
	uint8_t sha256[32];
	uint32_t block_size;	     /* 0 when absent */
	uint8_t (*block_sha256)[32]; /* nblocks digests, or NULL */
	uint32_t nblocks;	     /* ceil(size / block_size) when present */
	uint64_t (*regions)[2];	     /* [offset, length] pairs, or NULL */
	uint32_t nregions;
	bool has_mode;
	uint32_t mode; /* permission bits only (& 07777) */
	bool has_mtime;
	int64_t mtime; /* seconds since the epoch, UTC */
};

/* A parsed manifest: the files in the order the manifest lists them, with
 * unique paths of which none is a directory of another. */
struct tree_manifest {
	struct tree_manifest_entry *files;
	uint32_t nfiles;
};

/* Parses and checks a manifest of len bytes (need not be NUL-terminated).
 * Returns 0 and fills *out, which the caller frees with tree_manifest_free;
 * or returns -EINVAL (bad JSON or a broken rule) or -ENOMEM, writes one
 * line into err naming the entry index and the field ("files[3].sha256:
 * expected 64 hex digits, got 63") or, for JSON syntax, the line and
 * column, and leaves *out untouched. Thread-safe. */
int tree_manifest_parse(const char *text, size_t len, struct tree_manifest *out,
			char *err, size_t errlen);

/* Reads the file at path (at most TREE_MANIFEST_FILE_MAX bytes: a regular
 * file mapped, anything else read) and parses it as tree_manifest_parse
 * does. Errors are as there, or the negative
 * errno of open or read (-EFBIG when too large); the line in err starts
 * with the path. */
int tree_manifest_load(const char *path, struct tree_manifest *out, char *err,
		       size_t errlen);

/* Frees what the manifest owns and zeroes it; NULL is a no-op. */
void tree_manifest_free(struct tree_manifest *m);

/* Most entries one index page may list, and the longest name kept. */
#define TREE_DIRINDEX_MAX 1048576u
#define TREE_DIRINDEX_NAME_MAX 255

/* One entry of an HTML directory index. */
struct tree_index_entry {
	char *name; /* percent-decoded, never "", ".", "..", nor holding '/'
		       or NUL; no trailing slash */
	bool is_dir;
	bool has_size; /* false for "-", for human sizes like "1.2M" and for
			  numbers over INT64_MAX */
	uint64_t size;
	bool has_mtime;
	int64_t mtime; /* the listed time read as UTC, seconds */
	/* An object store's listing (tree/s3.c) says more; NULL otherwise. */
	char *url;	/* where the entry is (a file's URL, a directory's
			   listing), instead of an href of the page */
	char *etag;	/* its validator, as listed */
	char *identity; /* its cache identity */
};

/* Parses an nginx autoindex or Apache mod_autoindex page (fancy table,
 * fancy preformatted and plain list forms) of len bytes, which need not be
 * NUL-terminated. Names come from relative hrefs of the same directory
 * level; everything else (parent, sort links, absolute URLs, fragments,
 * other schemes) is skipped, and a name listed twice is kept once, in the
 * order of first appearance. Any input is accepted: a page without
 * entries gives n == 0 (and *out NULL). Returns 0, or -ENOMEM or -E2BIG
 * (more than TREE_DIRINDEX_MAX entries) with one line in err and *out, *n
 * untouched. The caller frees *out with tree_dirindex_free. Thread-safe. */
int tree_dirindex_parse(const char *html, size_t len,
			struct tree_index_entry **out, uint32_t *n, char *err,
			size_t errlen);

/* Frees n entries and their names; NULL is a no-op. */
void tree_dirindex_free(struct tree_index_entry *e, uint32_t n);

/* An S3 source (fs/tree/s3.c): s3://BUCKET/KEY, or s3://BUCKET/PREFIX/ (and
 * s3://BUCKET) for a tree. */
struct tree_s3 {
	char *endpoint;	   /* "scheme://host[:port]" */
	bool virtual_host; /* BUCKET.host, else host/BUCKET */
	char region[64];
	char *bucket;
	char *path; /* the key, or the prefix ("" or ending in '/') */
	bool is_prefix;
};

/* Parses an s3:// URL with the -o endpoint=, region (resolved; region_from
 * says where from, for errors) and s3_addressing= options (NULL: the
 * defaults: AWS's regional endpoint, virtual-hosted there and path-style
 * on another endpoint). Each goes into a URL, so each is checked against
 * what botocore allows: a region of letters, digits and inner '-' (1 to
 * 63); an endpoint that is scheme://host[:port] and nothing else; a
 * bucket that is a DNS label sequence (3 to 63 lowercase letters, digits,
 * '.', '-') when it goes into the host, or botocore's legacy names
 * (letters, digits, '.', '-', '_', 1 to 255) path-style. -EINVAL with one
 * line naming the field, its source and what to fix. */
int tree_s3_parse(const char *url, const char *endpoint, const char *region,
		  const char *region_from, const char *addressing,
		  struct tree_s3 *out, char *err, size_t errlen);
void tree_s3_free(struct tree_s3 *s);

/* The URL requests for key go to; new strings (free() them), NULL when
 * memory ran out. */
char *tree_s3_object_url(const struct tree_s3 *s, const char *key);

/* The cache identity of key: "s3:REGION:" + its path-style URL, never
 * what signs it. */
char *tree_s3_identity(const struct tree_s3 *s, const char *key);

/* A URL whose origin is the one requests go to: the credentials go there
 * and nowhere else. */
char *tree_s3_origin_url(const struct tree_s3 *s);

/* The listing name of a directory: "s3://BUCKET/PREFIX". */
char *tree_s3_dir_url(const struct tree_s3 *s, const char *prefix);

/* Lists the directory dir_url (tree_s3_dir_url's form) with
 * ListObjectsV2, '/' as delimiter, every page (only the first with
 * first_only): its objects with their sizes, ETags and dates, and its
 * common prefixes as directories. Keys that make no file name (empty,
 * ".", "..", a NUL byte, a '/' inside, too long) are left out, and on
 * success err then holds one warning line saying so (else it is left as
 * it was). -EIO with one line in err naming what to fix. */
int tree_s3_list(const struct tree_s3 *s, const struct fetch_config *fc,
		 const struct auth_creds *creds, const char *dir_url,
		 bool first_only, struct tree_index_entry **out, uint32_t *n,
		 char *err, size_t errlen);

/* Says, in err, why key cannot be read (after its probe failed): asks the
 * bucket for a one-key listing, whose error names the cause (no bucket, a
 * wrong region, secret or token), or finds the key missing. */
void tree_s3_explain(const struct tree_s3 *s, const struct fetch_config *fc,
		     const struct auth_creds *creds, const char *key, char *err,
		     size_t errlen);

#endif

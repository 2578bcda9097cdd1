/* s3: pacefs-origin's S3 mode: buckets and keys over the served directory,
 * ListObjectsV2, S3's XML errors, and SigV4 checked by botocore. */
#ifndef ORIGIN_S3_H
#define ORIGIN_S3_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

/* The ETag the origin serves for a file: its size, mtime in nanoseconds
 * and inode in hex, quoted (the closing quote is the caller's, so that the
 * fault rules can extend it). A listing gives the same one. */
#define ORIGIN_ETAG_FMT "\"%" PRIx64 "-%" PRIx64 "-%" PRIx64
#define ORIGIN_ETAG_ARGS(st)                                                   \
	(uint64_t)(st)->st_size,                                               \
		(uint64_t)(st)->st_mtim.tv_sec *(uint64_t)1000000000 +         \
			(uint64_t)(st)->st_mtim.tv_nsec,                       \
		(uint64_t)(st)->st_ino

struct s3_origin;

struct s3_config {
	const char *root; /* realpath of --root: each directory a bucket */
	const char *region;
	const char *keys_path; /* "ID SECRET [TOKEN]" lines; NULL: none */
	const char *verifier;  /* s3verify.py */
	bool anonymous;	       /* unsigned requests may read */
	unsigned max_keys;     /* the largest page a listing returns */
	unsigned hostile;      /* S3_HOSTILE_* bits (--s3-hostile) */
	unsigned slow_list_ms; /* --s3-hostile slow-list:MS */
};

/* --s3-hostile modes: listings that misbehave on purpose (README). */
#define S3_HOSTILE_SAME_TOKEN 0x01u
#define S3_HOSTILE_NEW_TOKEN 0x02u
#define S3_HOSTILE_CYCLE_TOKEN 0x04u
#define S3_HOSTILE_ENTITY 0x08u
#define S3_HOSTILE_ENTITY_ERROR 0x10u
#define S3_HOSTILE_NUL_KEY 0x20u
#define S3_HOSTILE_DOTDOT_KEYS 0x40u

/* Adds the modes of spec (a comma list) to cfg. Returns 0, or -EINVAL
 * with the mode that is unknown in err. */
int s3_hostile_parse(const char *spec, struct s3_config *cfg, char *err,
		     size_t errlen);

struct s3_header {
	const char *name;
	const char *value;
};

struct s3_request {
	const char *method;
	const char *target; /* as sent: path and query, percent-encoded */
	const struct s3_header *h;
	size_t nh;
};

struct s3_answer {
	int status;	     /* 0: serve the object at path */
	char path[PATH_MAX]; /* "/BUCKET/KEY", decoded, when status is 0 */
	char *body;	     /* the XML document otherwise (free() it) */
	size_t len;
	char code[48]; /* S3's error code or the operation, for the log */
};

/* Starts the verifier and checks that it answers. Returns 0, or a negative
 * errno with one line in err. */
int s3_origin_new(const struct s3_config *cfg, struct s3_origin **out,
		  char *err, size_t errlen);

/* Decides what rq gets: a signature or routing error, a listing, or the
 * object to serve. Thread-safe. Returns 0 or -ENOMEM. */
int s3_origin_answer(struct s3_origin *s, const struct s3_request *rq,
		     struct s3_answer *a);

#endif

/* origin_int: what the files of pacefs-origin share: the server, a
 * connection, a parsed request, the fault rules and the helpers that
 * parse requests and write responses. Private to contrib/origin. */
#ifndef ORIGIN_INT_H
#define ORIGIN_INT_H

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>
#include <time.h>

#include "contrib/origin/s3.h"

#define ORIGIN_HEAD_MAX 16384
#define ORIGIN_CHUNK_MAX (64 * 1024)
/* Uncapped bodies go out in large sendfile calls: fewer syscalls a byte. */
#define ORIGIN_UNCAPPED_CHUNK (8 * 1024 * 1024)
#define ORIGIN_IDLE_SECS 120
#define ORIGIN_DRAIN_MS 2000
#define NS_PER_SEC ((uint64_t)1000000000)
#define NS_PER_MS ((uint64_t)1000000)

enum fault_kind {
	FAULT_STALL,
	FAULT_RESET,
	FAULT_STATUS,
	FAULT_BURST,
	FAULT_NORANGE,
	FAULT_BADRANGE,
	FAULT_SHORT,
	FAULT_ETAG_CHANGE,
	FAULT_CONTENT_CHANGE,
	FAULT_SLOWFIRST,
	FAULT_REFUSE,
	FAULT_RATE,
	FAULT_REDIRECT,
	FAULT_BIGHEADER,
	FAULT_ENCODING,
	FAULT_TOTAL,
	FAULT_CLEN,
	FAULT_ETAG,
	FAULT_CORRUPT,
	FAULT_MUTE,
	FAULT_CHUNKED,
	FAULT_KIND_COUNT
};

struct fault {
	char *glob;
	enum fault_kind kind;
	uint64_t n;	  /* bytes, count, milliseconds or rate, by kind */
	int code;	  /* status and burst */
	long retry_after; /* status: seconds, or -1 for none */
	uint64_t skip;	  /* status: the first `skip` requests are served */
	char *location;	  /* redirect: the prefix of the Location */
	uint64_t count;	  /* status: then this many get CODE; 0: all */
	char *text; /* encoding, etag: the header's value; total, clen: the
		       number, as digits (it may not fit 64 bits) */
	atomic_ullong hits; /* requests this rule has matched so far */
};

/* A token bucket over body bytes; it takes the time as an argument so that
 * it stays a pure function of its inputs. Tokens are kept in byte-ns. */
struct bucket {
	uint64_t rate;	/* bytes per second, > 0 */
	uint64_t burst; /* bytes */
	uint64_t tokens;
	uint64_t last_ns;
};

#define ORIGIN_REQUIRE_MAX 16

struct server {
	char root[PATH_MAX]; /* realpath of --root, no trailing slash */
	size_t root_len;
	uint64_t rate; /* bytes per second per connection, 0: uncapped */
	uint64_t latency_ms;
	uint64_t sndbuf;      /* --sndbuf: SO_SNDBUF of each connection; 0: the
				 kernel's */
	uint64_t write_chunk; /* --write-chunk: bytes per paced write (the
				 bucket's burst); 0: the default */
	uint64_t slow_every;  /* --slow-conns EVERY:RATE: every EVERY-th
				 connection sends at slow_rate; 0: none */
	uint64_t slow_rate;
	uint64_t uplink; /* --uplink: bytes per second over every connection
			    together, 0: uncapped */
	pthread_mutex_t uplink_mu;
	struct bucket uplink_bucket; /* guarded by uplink_mu; set on first
					use */
	bool uplink_set;
	atomic_ullong conns; /* connections accepted so far */
	bool quiet;
	bool autoindex; /* GET of a directory path ending in '/' lists it */
	bool autoindex_human; /* its sizes as nginx's autoindex_exact_size
				 off writes them ("32K"): not exact */
	struct fault *faults;
	size_t nfaults;
	pthread_mutex_t log_mu;
	FILE *log;	    /* guarded by log_mu; NULL: no request log */
	char **log_headers; /* --log-header NAME: their values are logged */
	size_t nlog_headers;
	uint64_t max_transfers;	  /* --max-transfers: file bodies sent at once,
				     503 beyond; 0: any */
	int64_t retry_after;	  /* --retry-after for those 503s; -1: none */
	bool hold_retry_after;	  /* --hold-retry-after: a refusal refuses
				     every request for its Retry-After */
	atomic_ullong held_until; /* CLOCK_MONOTONIC ns: refuse until then */
	atomic_ullong transfers;  /* file bodies being sent now */
	bool one_at_a_time;	  /* --one-at-a-time: a request that arrives
				     while a body is being sent gets 503 */
	uint64_t refuse_ms;	  /* --one-at-a-time MS: the refusal's delay */
	atomic_ullong sending;	  /* file bodies being written now */
	struct s3_origin *s3;	  /* --s3: buckets, keys, SigV4 */
	const char *require_path; /* --require-header FILE; NULL: none */
	pthread_mutex_t require_mu; /* guards what follows */
	struct stat require_st;	    /* of the file when it was read */
	struct {
		char name[128];
		char value[1024];
	} require[ORIGIN_REQUIRE_MAX]; /* the lines a request may carry */
	size_t nrequire;
	bool mix; /* --fault-mix: a seeded draw per request */
	uint64_t mix_seed;
	unsigned mix_percent;	 /* of requests that draw a fault */
	bool mix_verdicts;	 /* norange and badrange are drawn too */
	atomic_ullong mix_draws; /* requests that drew so far */
	atomic_uint mix_burst;	 /* requests a drawn burst still answers */
};

struct conn {
	struct server *srv;
	int fd;
	size_t have; /* bytes of head[] that hold request data */
	char head[ORIGIN_HEAD_MAX + 1];
	unsigned char *buf; /* ORIGIN_CHUNK_MAX bytes for transformed bodies */
	struct bucket bucket;
	bool bucket_set;
	bool slow; /* --slow-conns: this connection sends at slow_rate */
};

#define ORIGIN_LOG_HEADERS_MAX 8
#define ORIGIN_HEADERS_MAX 64

struct request {
	const char *method;
	const char *logged[ORIGIN_LOG_HEADERS_MAX]; /* --log-header values */
	const char *target;			    /* as sent, for the log */
	char path[PATH_MAX];  /* percent-decoded, without the query */
	const char *range;    /* NULL: no Range header */
	const char *if_range; /* NULL: no If-Range header */
	const char *if_match; /* NULL: no If-Match header */
	bool want_close;
	struct s3_header hdr[ORIGIN_HEADERS_MAX]; /* every header (--s3) */
	size_t nhdr;
};

/* The file being served, as this response presents it. */
struct entity {
	int fd;
	uint64_t size;
	bool xor ; /* content-change: every byte XOR 0xFF */
	time_t mtime;
	char etag[96];
};

enum after {
	AFTER_KEEP,  /* read the next request */
	AFTER_CLOSE, /* close normally */
	AFTER_STALL, /* wait for the client to close */
	AFTER_RESET, /* let the sent bytes arrive, then reset */
};

enum range_result { RANGE_FULL, RANGE_PART, RANGE_UNSATISFIABLE };

/* A bounded string builder for response heads. */
struct head {
	char buf[ORIGIN_HEAD_MAX + 2048]; /* a Location may echo the target */
	size_t len;
	bool overflow;
};

/* fault.c */

/* Parses one --fault rule into f; returns 0, -EINVAL or -ENOMEM. */
int origin__fault_parse(const char *spec, struct fault *f);
/* The first rule whose glob matches path, or NULL. */
struct fault *origin__fault_match(struct server *srv, const char *path);
const char *origin__fault_name(enum fault_kind kind);
/* Parses --fault-mix "SEED[:PERCENT[:verdicts]]" into srv; returns 0 or
 * -EINVAL. */
int origin__fault_mix_parse(struct server *srv, const char *spec);
/* --fault-mix: draws, for one request, whether and which fault applies;
 * fills *out and returns it, or returns NULL for none. Thread-safe. */
struct fault *origin__fault_draw(struct server *srv, struct fault *out);

/* http.c: pure parsing and formatting, no I/O. */

int origin__parse_u64(const char *s, size_t len, uint64_t *out);
int origin__parse_size(const char *s, size_t len, uint64_t *out);
void origin__http_date(time_t t, char *out, size_t cap);
int origin__http_date_parse(const char *s, time_t *out);
enum range_result origin__range_parse(const char *v, uint64_t size,
				      uint64_t *start, uint64_t *len);
/* Splits head in place into rq; rq points into head. */
int origin__request_parse(const struct server *srv, char *head,
			  struct request *rq);

/* log.c */

/* Appends rq's line to the request log, if there is one. Thread-safe. */
void origin__log_request(struct server *srv, const struct request *rq,
			 int status, uint64_t sent, const char *fault);
/* A diagnostic on stderr, unless --quiet. */
void origin__warn_conn(struct conn *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* send.c: each returns 0 or a negative errno from the socket; *sent
 * counts the body bytes that went out. */

void origin__sleep_ns(uint64_t ns);
int origin__send_all(int fd, const void *data, size_t len, int flags);
void origin__head_add(struct head *h, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void origin__head_start(struct head *h, int status);
void origin__head_end(struct head *h, bool closing);
int origin__head_send(struct conn *c, struct head *h, bool more);
int origin__head_send_padded(struct conn *c, struct head *h, uint64_t pad,
			     bool more);
int origin__send_status(struct conn *c, const struct request *rq, int status,
			long retry_after, const char *extra, bool closing,
			uint64_t *sent);
int origin__send_doc(struct conn *c, const struct request *rq, int status,
		     const char *type, const char *doc, size_t len,
		     bool closing, uint64_t *sent);
int origin__send_body(struct conn *c, const struct entity *e, uint64_t off,
		      uint64_t len, uint64_t rate, uint64_t *sent);
/* The same bytes in chunked framing (Transfer-Encoding: chunked), the
 * last chunk included; *sent counts the body bytes, not the framing. */
int origin__send_chunked(struct conn *c, const struct entity *e, uint64_t off,
			 uint64_t len, uint64_t rate, uint64_t *sent);

/* listing.c: --autoindex; answers with the listing or 404. A stall fault
 * (f, or NULL) applies to the listing's body as to a file's: its first
 * f->n bytes, then *after is AFTER_STALL and *applied "stall". */
int origin__send_listing(struct conn *c, const struct request *rq,
			 const struct fault *f, bool closing, int *status,
			 uint64_t *sent, enum after *after,
			 const char **applied);

/* require.c: whether rq may be served under --require-header. */
bool origin__require_ok(struct server *srv, const struct request *rq);

/* serve.c: answers rq; *after says what the connection does next. Returns
 * 0 or a negative errno when the connection failed. */
int origin__serve(struct conn *c, struct request *rq, enum after *after);

/* conn.c: serves the accepted socket fd on a thread of its own, which owns
 * fd from then on (closed here too on failure). Returns 0 or a negative
 * errno. */
int origin__conn_start(struct server *srv, int fd);

#endif

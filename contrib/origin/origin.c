/* pacefs-origin: a small range-capable HTTP/1.1 test origin that serves one
 * directory on loopback, with a per-connection rate cap, added latency and
 * per-path fault injection, one thread per connection. */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/ioctl.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

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
	FAULT_KIND_COUNT
};

/* Per kind: its name on the command line and how many ':' arguments it
 * takes at least and at most. */
static const struct {
	const char *name;
	int min_args;
	int max_args;
} fault_kinds[FAULT_KIND_COUNT] = {
	[FAULT_STALL] = {"stall", 1, 1},
	[FAULT_RESET] = {"reset", 1, 1},
	[FAULT_STATUS] = {"status", 1, 4},
	[FAULT_BURST] = {"burst", 2, 2},
	[FAULT_NORANGE] = {"norange", 0, 0},
	[FAULT_BADRANGE] = {"badrange", 0, 0},
	[FAULT_SHORT] = {"short", 1, 1},
	[FAULT_ETAG_CHANGE] = {"etag-change", 1, 1},
	[FAULT_CONTENT_CHANGE] = {"content-change", 1, 1},
	[FAULT_SLOWFIRST] = {"slowfirst", 1, 1},
	[FAULT_REFUSE] = {"refuse", 0, 0},
	[FAULT_RATE] = {"rate", 1, 1},
	/* A redirect's one argument is the rest of the rule. */
	[FAULT_REDIRECT] = {"redirect", 1, 1},
	[FAULT_BIGHEADER] = {"bigheader", 1, 2},
	[FAULT_ENCODING] = {"encoding", 1, 2},
	[FAULT_TOTAL] = {"total", 1, 1},
	[FAULT_CLEN] = {"clen", 1, 1},
	[FAULT_ETAG] = {"etag", 1, 2},
};

struct fault {
	char *glob;
	enum fault_kind kind;
	uint64_t n;	    /* bytes, count, milliseconds or rate, by kind */
	int code;	    /* status and burst */
	long retry_after;   /* status: seconds, or -1 for none */
	uint64_t skip;	    /* status: the first `skip` requests are served */
	char *location;	    /* redirect: the prefix of the Location */
	uint64_t count;	    /* status: then this many get CODE; 0: all */
	char *text; /* encoding, etag: the header's value; total, clen: the
		       number, as digits (it may not fit 64 bits) */
	atomic_ullong hits; /* requests this rule has matched so far */
};

#define ORIGIN_REQUIRE_MAX 16

struct server {
	char root[PATH_MAX]; /* realpath of --root, no trailing slash */
	size_t root_len;
	uint64_t rate; /* bytes per second per connection, 0: uncapped */
	uint64_t latency_ms;
	bool quiet;
	bool autoindex; /* GET of a directory path ending in '/' lists it */
	struct fault *faults;
	size_t nfaults;
	pthread_mutex_t log_mu;
	FILE *log; /* guarded by log_mu; NULL: no request log */
	char **log_headers; /* --log-header NAME: their values are logged */
	size_t nlog_headers;
	uint64_t max_transfers; /* --max-transfers: file bodies sent at once,
				   503 beyond; 0: any */
	int64_t retry_after;	/* --retry-after for those 503s; -1: none */
	atomic_ullong transfers; /* file bodies being sent now */
	struct s3_origin *s3;	 /* --s3: buckets, keys, SigV4 */
	const char *require_path;   /* --require-header FILE; NULL: none */
	pthread_mutex_t require_mu; /* guards what follows */
	struct stat require_st;	    /* of the file when it was read */
	struct {
		char name[128];
		char value[1024];
	} require[ORIGIN_REQUIRE_MAX]; /* the lines a request may carry */
	size_t nrequire;
};

/* A token bucket over body bytes; it takes the time as an argument so that
 * it stays a pure function of its inputs. Tokens are kept in byte-ns. */
struct bucket {
	uint64_t rate;	/* bytes per second, > 0 */
	uint64_t burst; /* bytes */
	uint64_t tokens;
	uint64_t last_ns;
};

struct conn {
	struct server *srv;
	int fd;
	size_t have; /* bytes of head[] that hold request data */
	char head[ORIGIN_HEAD_MAX + 1];
	unsigned char *buf; /* ORIGIN_CHUNK_MAX bytes for transformed bodies */
	struct bucket bucket;
	bool bucket_set;
};

#define ORIGIN_LOG_HEADERS_MAX 8
#define ORIGIN_HEADERS_MAX 64

struct request {
	const char *method;
	const char *logged[ORIGIN_LOG_HEADERS_MAX]; /* --log-header values */
	const char *target;   /* as sent, for the log */
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

static volatile sig_atomic_t stop_signal;

static void on_signal(int sig)
{
	stop_signal = sig;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * NS_PER_SEC + (uint64_t)ts.tv_nsec;
}

static void sleep_ns(uint64_t ns)
{
	struct timespec ts = {
		.tv_sec = (time_t)(ns / NS_PER_SEC),
		.tv_nsec = (long)(ns % NS_PER_SEC),
	};

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* --- rate limiting -------------------------------------------------------- */

/* Starts full so that the first chunk goes at once; the burst is one chunk,
 * small enough for slow rates to come out smooth. */
static void bucket_init(struct bucket *b, uint64_t rate, uint64_t now)
{
	uint64_t burst = rate / 20;

	if (burst > ORIGIN_CHUNK_MAX)
		burst = ORIGIN_CHUNK_MAX;
	if (burst < 1)
		burst = 1;
	b->rate = rate;
	b->burst = burst;
	b->tokens = burst * NS_PER_SEC;
	b->last_ns = now;
}

/* Returns 0 and takes n bytes (n <= burst) when they may go now, else the
 * nanoseconds to wait before asking again. */
static uint64_t bucket_take(struct bucket *b, uint64_t n, uint64_t now)
{
	uint64_t cap = b->burst * NS_PER_SEC;
	uint64_t elapsed = now > b->last_ns ? now - b->last_ns : 0;
	uint64_t fill_ns = cap / b->rate + 1;
	uint64_t need = n * NS_PER_SEC;

	/* Bounding elapsed keeps elapsed * rate from overflowing. */
	if (elapsed > fill_ns)
		elapsed = fill_ns;
	b->tokens += elapsed * b->rate;
	if (b->tokens > cap)
		b->tokens = cap;
	b->last_ns = now;
	if (b->tokens >= need) {
		b->tokens -= need;
		return 0;
	}
	return (need - b->tokens + b->rate - 1) / b->rate;
}

/* --- parsing helpers ------------------------------------------------------ */

/* Parses a whole string of decimal digits; returns 0 or -EINVAL/-ERANGE. */
static int parse_u64(const char *s, size_t len, uint64_t *out)
{
	uint64_t v = 0;
	size_t i;

	if (len == 0)
		return -EINVAL;
	for (i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -EINVAL;
		if (v > (UINT64_MAX - (uint64_t)(s[i] - '0')) / 10)
			return -ERANGE;
		v = v * 10 + (uint64_t)(s[i] - '0');
	}
	*out = v;
	return 0;
}

/* Parses "N", "NK", "NM" or "NG" (powers of 1024) of length len. */
static int parse_size(const char *s, size_t len, uint64_t *out)
{
	uint64_t v, mult = 1;
	int rc;

	if (len > 0) {
		switch (s[len - 1]) {
		case 'k':
		case 'K':
			mult = 1024;
			break;
		case 'm':
		case 'M':
			mult = 1024 * 1024;
			break;
		case 'g':
		case 'G':
			mult = 1024 * 1024 * 1024;
			break;
		}
		if (mult > 1)
			len--;
	}
	rc = parse_u64(s, len, &v);
	if (rc < 0)
		return rc;
	if (v > UINT64_MAX / mult)
		return -ERANGE;
	*out = v * mult;
	return 0;
}

/* Parses "GLOB:KIND[:ARG[:ARG]]"; the kind is found at the first ':' that
 * is followed by a known kind name, so globs may hold ':' themselves. */
static int fault_parse(const char *spec, struct fault *f)
{
	const char *p, *args = NULL, *a[4];
	size_t alen[4];
	int kind = -1, nargs = 0, i, rc = -EINVAL;
	uint64_t v;

	for (p = strchr(spec, ':'); p && kind < 0; p = strchr(p + 1, ':')) {
		for (i = 0; i < FAULT_KIND_COUNT; i++) {
			size_t n = strlen(fault_kinds[i].name);

			if (strncmp(p + 1, fault_kinds[i].name, n) == 0 &&
			    (p[1 + n] == ':' || p[1 + n] == '\0')) {
				kind = i;
				args = p[1 + n] ? p + 2 + n : NULL;
				break;
			}
		}
		if (kind >= 0)
			break;
	}
	if (kind < 0 || p == spec)
		goto out;
	/* A redirect's prefix is a URL: its colons are its own. */
	while (args && kind == FAULT_REDIRECT && nargs == 0) {
		a[nargs] = args;
		alen[nargs] = strlen(args);
		nargs++;
		args = NULL;
	}
	while (args) {
		const char *colon = strchr(args, ':');

		if (nargs == 4)
			goto out;
		a[nargs] = args;
		alen[nargs] = colon ? (size_t)(colon - args) : strlen(args);
		nargs++;
		args = colon ? colon + 1 : NULL;
	}
	if (nargs < fault_kinds[kind].min_args ||
	    nargs > fault_kinds[kind].max_args)
		goto out;
	memset(f, 0, sizeof(*f));
	f->kind = (enum fault_kind)kind;
	f->retry_after = -1;
	atomic_init(&f->hits, 0);
	switch (f->kind) {
	case FAULT_STATUS:
	case FAULT_BURST:
		rc = parse_u64(a[0], alen[0], &v);
		if (rc < 0 || v < 100 || v > 599) {
			rc = -EINVAL;
			goto out;
		}
		f->code = (int)v;
		if (nargs >= 3) {
			rc = parse_u64(a[2], alen[2], &f->skip);
			if (rc < 0)
				goto out;
		}
		if (nargs == 4) {
			rc = parse_u64(a[3], alen[3], &f->count);
			if (rc < 0 || f->count == 0) {
				rc = -EINVAL;
				goto out;
			}
		}
		if (nargs >= 2) {
			rc = parse_u64(a[1], alen[1], &v);
			if (rc < 0 || v > LONG_MAX) {
				rc = -EINVAL;
				goto out;
			}
			if (f->kind == FAULT_STATUS)
				f->retry_after = (long)v;
			else
				f->n = v;
		}
		break;
	case FAULT_STALL:
	case FAULT_RESET:
	case FAULT_SHORT:
	case FAULT_RATE:
		rc = parse_size(a[0], alen[0], &f->n);
		if (rc < 0)
			goto out;
		if (f->kind == FAULT_RATE && f->n == 0) {
			rc = -EINVAL;
			goto out;
		}
		break;
	case FAULT_ETAG_CHANGE:
	case FAULT_CONTENT_CHANGE:
	case FAULT_SLOWFIRST:
		rc = parse_u64(a[0], alen[0], &f->n);
		if (rc < 0)
			goto out;
		break;
	case FAULT_REDIRECT:
		if (alen[0] == 0 || strpbrk(a[0], " \t\r\n") != NULL) {
			rc = -EINVAL;
			goto out;
		}
		f->location = strndup(a[0], alen[0]);
		if (!f->location) {
			rc = -ENOMEM;
			goto out;
		}
		break;
	case FAULT_BIGHEADER:
		rc = parse_size(a[0], alen[0], &f->n);
		if (rc < 0 || f->n > ((uint64_t)64 << 20)) {
			rc = -EINVAL;
			goto out;
		}
		break;
	case FAULT_TOTAL:
	case FAULT_CLEN:
		if (alen[0] == 0 || alen[0] > 40 ||
		    strspn(a[0], "0123456789") < alen[0]) {
			rc = -EINVAL;
			goto out;
		}
		break;
	case FAULT_ENCODING:
	case FAULT_ETAG:
		/* Any byte a header line can hold, control bytes included. */
		if (alen[0] == 0 || memchr(a[0], '\r', alen[0]) ||
		    memchr(a[0], '\n', alen[0])) {
			rc = -EINVAL;
			goto out;
		}
		break;
	default:
		break;
	}
	if (f->kind == FAULT_BIGHEADER || f->kind == FAULT_ENCODING ||
	    f->kind == FAULT_ETAG) {
		if (nargs == 2) {
			rc = parse_u64(a[1], alen[1], &f->skip);
			if (rc < 0)
				goto out;
		}
	}
	if (f->kind == FAULT_TOTAL || f->kind == FAULT_CLEN ||
	    f->kind == FAULT_ENCODING || f->kind == FAULT_ETAG) {
		f->text = strndup(a[0], alen[0]);
		if (!f->text) {
			rc = -ENOMEM;
			goto out;
		}
	}
	f->glob = strndup(spec, (size_t)(p - spec));
	if (!f->glob) {
		rc = -ENOMEM;
		goto out;
	}
	rc = 0;
out:
	return rc;
}

static const char *reason_phrase(int code)
{
	switch (code) {
	case 200:
		return "OK";
	case 206:
		return "Partial Content";
	case 302:
		return "Found";
	case 400:
		return "Bad Request";
	case 401:
		return "Unauthorized";
	case 403:
		return "Forbidden";
	case 404:
		return "Not Found";
	case 405:
		return "Method Not Allowed";
	case 408:
		return "Request Timeout";
	case 410:
		return "Gone";
	case 412:
		return "Precondition Failed";
	case 416:
		return "Range Not Satisfiable";
	case 429:
		return "Too Many Requests";
	case 431:
		return "Request Header Fields Too Large";
	case 500:
		return "Internal Server Error";
	case 501:
		return "Not Implemented";
	case 502:
		return "Bad Gateway";
	case 503:
		return "Service Unavailable";
	case 504:
		return "Gateway Timeout";
	default:
		return "Status";
	}
}

/* Writes an IMF-fixdate; the process never calls setlocale, so the day and
 * month names are the C locale's English ones, as HTTP requires. */
static void http_date(time_t t, char *out, size_t cap)
{
	struct tm tm;

	gmtime_r(&t, &tm);
	if (strftime(out, cap, "%a, %d %b %Y %H:%M:%S GMT", &tm) == 0 &&
	    cap > 0)
		out[0] = '\0';
}

/* Parses an IMF-fixdate; returns 0 or -EINVAL. */
static int http_date_parse(const char *s, time_t *out)
{
	struct tm tm;
	const char *end;

	memset(&tm, 0, sizeof(tm));
	end = strptime(s, "%a, %d %b %Y %H:%M:%S GMT", &tm);
	if (!end)
		return -EINVAL;
	while (*end == ' ' || *end == '\t')
		end++;
	if (*end)
		return -EINVAL;
	*out = timegm(&tm);
	return 0;
}

enum range_result { RANGE_FULL, RANGE_PART, RANGE_UNSATISFIABLE };

/* Reads one "bytes=a-b", "bytes=a-" or "bytes=-n". Anything else (other
 * units, several ranges, bad syntax) yields RANGE_FULL: RFC 9110 lets a
 * server ignore a Range it does not want to honour. */
static enum range_result range_parse(const char *v, uint64_t size,
				     uint64_t *start, uint64_t *len)
{
	const char *dash, *end;
	uint64_t a = 0, b = 0;
	bool has_a, has_b;

	while (*v == ' ' || *v == '\t')
		v++;
	if (strncasecmp(v, "bytes=", 6) != 0)
		return RANGE_FULL;
	v += 6;
	while (*v == ' ' || *v == '\t')
		v++;
	end = v + strlen(v);
	while (end > v && (end[-1] == ' ' || end[-1] == '\t'))
		end--;
	if (memchr(v, ',', (size_t)(end - v)))
		return RANGE_FULL;
	dash = memchr(v, '-', (size_t)(end - v));
	if (!dash)
		return RANGE_FULL;
	has_a = dash > v;
	has_b = dash + 1 < end;
	if (has_a && parse_u64(v, (size_t)(dash - v), &a) < 0)
		return RANGE_FULL;
	if (has_b && parse_u64(dash + 1, (size_t)(end - dash - 1), &b) < 0)
		return RANGE_FULL;
	if (!has_a && !has_b)
		return RANGE_FULL;
	if (!has_a) {
		if (b == 0 || size == 0)
			return RANGE_UNSATISFIABLE;
		if (b > size)
			b = size;
		*start = size - b;
		*len = b;
		return RANGE_PART;
	}
	if (has_b && b < a)
		return RANGE_FULL;
	if (a >= size)
		return RANGE_UNSATISFIABLE;
	if (!has_b || b >= size)
		b = size - 1;
	*start = a;
	*len = b - a + 1;
	return RANGE_PART;
}

/* Decodes the path of a request target into out; returns 0, -EINVAL for a
 * malformed target or -ENOENT for one that tries to leave the root. */
static int path_decode(const char *target, char *out, size_t cap)
{
	const char *p = target, *seg;
	size_t n = 0;

	if (strncasecmp(p, "http://", 7) == 0) {
		p = strchr(p + 7, '/');
		if (!p)
			p = "/";
	}
	if (*p != '/')
		return -EINVAL;
	for (; *p && *p != '?' && *p != '#'; p++) {
		char c = *p;

		if (c == '%') {
			char hex[3] = {0};
			char *end;
			long v;

			if (!p[1] || !p[2])
				return -EINVAL;
			hex[0] = p[1];
			hex[1] = p[2];
			v = strtol(hex, &end, 16);
			if (*end || v == 0)
				return -EINVAL;
			c = (char)v;
			p += 2;
		}
		if (n + 1 >= cap)
			return -ENAMETOOLONG;
		out[n++] = c;
	}
	out[n] = '\0';
	for (seg = out; seg; seg = strchr(seg + 1, '/')) {
		if (strncmp(seg, "/..", 3) == 0 && (seg[3] == '/' || !seg[3]))
			return -ENOENT;
	}
	return 0;
}

/* --- the request log ------------------------------------------------------ */

static void log_request(struct server *srv, const struct request *rq,
			int status, uint64_t sent, const char *fault)
{
	char range[128];
	size_t n = 0;
	const char *r;

	/* Fields are space-separated, so the range loses its blanks. */
	if (rq->range) {
		for (r = rq->range; *r && n + 1 < sizeof(range); r++) {
			if (*r != ' ' && *r != '\t')
				range[n++] = *r;
		}
	}
	if (n == 0)
		range[n++] = '-';
	range[n] = '\0';
	pthread_mutex_lock(&srv->log_mu);
	if (srv->log) {
		fprintf(srv->log, "%s %s %s %d %" PRIu64 " %s",
			rq->method ? rq->method : "-",
			rq->target ? rq->target : "-", range, status, sent,
			fault ? fault : "-");
		/* --log-header values, blanks and '%' percent-encoded so
		 * that each stays one field. */
		for (size_t i = 0; i < srv->nlog_headers; i++) {
			const char *v = rq->logged[i];

			fputc(' ', srv->log);
			if (!v || !*v)
				fputc('-', srv->log);
			for (; v && *v; v++) {
				if (*v == ' ' || *v == '\t' || *v == '%')
					fprintf(srv->log, "%%%02X",
						(unsigned char)*v);
				else
					fputc(*v, srv->log);
			}
		}
		fputc('\n', srv->log);
		fflush(srv->log);
	}
	pthread_mutex_unlock(&srv->log_mu);
}

static void warn_conn(struct conn *c, const char *fmt, ...)
{
	va_list ap;

	if (c->srv->quiet)
		return;
	va_start(ap, fmt);
	fputs("pacefs-origin: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

/* --- sending -------------------------------------------------------------- */

static int send_all(int fd, const void *data, size_t len, int flags)
{
	const char *p = data;
	ssize_t n;

	while (len > 0) {
		n = send(fd, p, len, flags | MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* A bounded string builder for response heads. */
struct head {
	char buf[ORIGIN_HEAD_MAX + 2048]; /* a Location may echo the target */
	size_t len;
	bool overflow;
};

static void head_add(struct head *h, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void head_add(struct head *h, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (h->overflow)
		return;
	va_start(ap, fmt);
	n = vsnprintf(h->buf + h->len, sizeof(h->buf) - h->len, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(h->buf) - h->len)
		h->overflow = true;
	else
		h->len += (size_t)n;
}

/* Starts a head with the status line and the headers every response has. */
static void head_start(struct head *h, int status)
{
	char date[40];

	h->len = 0;
	h->overflow = false;
	http_date(time(NULL), date, sizeof(date));
	head_add(h, "HTTP/1.1 %d %s\r\nDate: %s\r\nServer: pacefs-origin\r\n",
		 status, reason_phrase(status), date);
}

static void head_end(struct head *h, bool closing)
{
	if (closing)
		head_add(h, "Connection: close\r\n");
	head_add(h, "\r\n");
}

/* Sends the head (corked with the body to come when more is true). */
static int head_send(struct conn *c, struct head *h, bool more)
{
	if (h->overflow)
		return -EOVERFLOW;
	return send_all(c->fd, h->buf, h->len, more ? MSG_MORE : 0);
}

/* Sends the head with an X-Pad header of pad bytes before its end
 * (bigheader), corked with the body to come when more is true. */
static int head_send_padded(struct conn *c, struct head *h, uint64_t pad,
			    bool more)
{
	char fill[4096];
	int rc;

	if (h->overflow)
		return -EOVERFLOW;
	memset(fill, 'a', sizeof(fill));
	/* The head ends with its empty line: the pad goes before it. */
	rc = send_all(c->fd, h->buf, h->len - 2, MSG_MORE);
	if (rc == 0)
		rc = send_all(c->fd, "X-Pad: ", 7, MSG_MORE);
	while (rc == 0 && pad > 0) {
		size_t n = pad < sizeof(fill) ? (size_t)pad : sizeof(fill);

		rc = send_all(c->fd, fill, n, MSG_MORE);
		pad -= n;
	}
	if (rc == 0)
		rc = send_all(c->fd, "\r\n\r\n", 4, more ? MSG_MORE : 0);
	return rc;
}

/* Answers with a short text body, e.g. for 404 or an injected status. */
static int send_status(struct conn *c, const struct request *rq, int status,
		       long retry_after, const char *extra, bool closing,
		       uint64_t *sent)
{
	struct head h;
	char body[96];
	int n, rc;

	n = snprintf(body, sizeof(body), "%d %s\n", status,
		     reason_phrase(status));
	if (n < 0 || (size_t)n >= sizeof(body))
		n = 0;
	head_start(&h, status);
	head_add(&h, "Content-Type: text/plain\r\nContent-Length: %d\r\n", n);
	if (retry_after >= 0)
		head_add(&h, "Retry-After: %ld\r\n", retry_after);
	if (extra)
		head_add(&h, "%s", extra);
	head_end(&h, closing);
	rc = head_send(c, &h, rq->method && strcmp(rq->method, "HEAD") != 0);
	if (rc < 0 || !rq->method || strcmp(rq->method, "HEAD") == 0)
		return rc;
	rc = send_all(c->fd, body, (size_t)n, 0);
	if (rc == 0)
		*sent = (uint64_t)n;
	return rc;
}

/* Sends bytes [off, off + len) of the entity at the bucket's rate (rate 0:
 * uncapped), adding to *sent as bytes go. */
static int send_body(struct conn *c, const struct entity *e, uint64_t off,
		     uint64_t len, uint64_t rate, uint64_t *sent)
{
	uint64_t end = off + len, chunk, wait, done;
	ssize_t n;
	size_t i;
	int rc = 0;

	if (rate && (!c->bucket_set || c->bucket.rate != rate)) {
		bucket_init(&c->bucket, rate, now_ns());
		c->bucket_set = true;
	}
	while (off < end) {
		chunk = end - off;
		if (rate) {
			if (chunk > c->bucket.burst)
				chunk = c->bucket.burst;
			for (;;) {
				wait = bucket_take(&c->bucket, chunk, now_ns());
				if (wait == 0)
					break;
				sleep_ns(wait);
			}
		} else if (chunk > ORIGIN_UNCAPPED_CHUNK) {
			chunk = ORIGIN_UNCAPPED_CHUNK;
		}
		if (e->xor &&chunk > ORIGIN_CHUNK_MAX)
			chunk = ORIGIN_CHUNK_MAX;
		for (done = 0; done < chunk; done += (uint64_t)n) {
			if (e->xor) {
				n = pread(e->fd, c->buf, (size_t)(chunk - done),
					  (off_t)(off + done));
				if (n > 0) {
					for (i = 0; i < (size_t)n; i++)
						c->buf[i] ^= 0xFF;
					rc = send_all(c->fd, c->buf, (size_t)n,
						      0);
					if (rc < 0)
						goto out;
				}
			} else {
				off_t pos = (off_t)(off + done);

				n = sendfile(c->fd, e->fd, &pos,
					     (size_t)(chunk - done));
			}
			if (n < 0 && errno == EINTR) {
				n = 0;
				continue;
			}
			if (n < 0) {
				rc = -errno;
				goto out;
			}
			if (n == 0) {
				/* The file shrank under us. */
				rc = -EIO;
				goto out;
			}
			*sent += (uint64_t)n;
		}
		off += chunk;
	}
out:
	return rc;
}

/* --- serving one request -------------------------------------------------- */

static struct fault *fault_match(struct server *srv, const char *path)
{
	size_t i;

	for (i = 0; i < srv->nfaults; i++) {
		if (fnmatch(srv->faults[i].glob, path, 0) == 0)
			return &srv->faults[i];
	}
	return NULL;
}

/* Opens the regular file that path names under the root; returns 0, or
 * -ENOENT (missing, a directory, or outside the root) or -EACCES. */
static int entity_open(struct server *srv, const char *path, struct entity *e)
{
	char full[PATH_MAX], real[PATH_MAX];
	struct stat st;
	int n, fd = -1, rc;

	n = snprintf(full, sizeof(full), "%s%s", srv->root, path);
	if (n < 0 || (size_t)n >= sizeof(full)) {
		rc = -ENOENT;
		goto out;
	}
	if (!realpath(full, real)) {
		rc = errno == EACCES ? -EACCES : -ENOENT;
		goto out;
	}
	/* Symlinks may point anywhere; only what resolves inside counts. */
	if (strncmp(real, srv->root, srv->root_len) != 0 ||
	    (real[srv->root_len] != '/' && srv->root_len > 1)) {
		rc = -ENOENT;
		goto out;
	}
	fd = open(real, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		rc = errno == EACCES ? -EACCES : -ENOENT;
		goto out;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		rc = -ENOENT;
		goto out;
	}
	e->fd = fd;
	fd = -1;
	e->size = (uint64_t)st.st_size;
	e->mtime = st.st_mtim.tv_sec;
	e->xor = false;
	snprintf(e->etag, sizeof(e->etag), ORIGIN_ETAG_FMT,
		 ORIGIN_ETAG_ARGS(&st));
	rc = 0;
out:
	if (fd >= 0)
		close(fd);
	return rc;
}

/* Whether If-Range lets the Range apply: a strong ETag equal to the one
 * served, or a date equal to Last-Modified. Weak tags never match. */
static bool if_range_matches(const char *v, const struct entity *e)
{
	time_t t;

	while (*v == ' ' || *v == '\t')
		v++;
	if (*v == '"' || strncmp(v, "W/", 2) == 0) {
		size_t n = strlen(e->etag);

		if (strncmp(v, e->etag, n) != 0)
			return false;
		v += n;
		while (*v == ' ' || *v == '\t')
			v++;
		return *v == '\0';
	}
	if (http_date_parse(v, &t) < 0)
		return false;
	return t == e->mtime;
}

/* --- directory listings (--autoindex) ------------------------------------ */

/* A growing text buffer for listings; on allocation failure it sets oom and
 * stops growing. */
struct text {
	char *buf;
	size_t len, cap;
	bool oom;
};

static void text_add(struct text *t, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void text_add(struct text *t, const char *fmt, ...)
{
	va_list ap;
	size_t want;
	char *nb;
	int n;

	for (;;) {
		if (t->oom)
			return;
		va_start(ap, fmt);
		n = vsnprintf(t->buf ? t->buf + t->len : NULL,
			      t->buf ? t->cap - t->len : 0, fmt, ap);
		va_end(ap);
		if (n < 0) {
			t->oom = true;
			return;
		}
		if (t->buf && (size_t)n < t->cap - t->len) {
			t->len += (size_t)n;
			return;
		}
		want = t->cap ? t->cap * 2 : 4096;
		while (want < t->len + (size_t)n + 1)
			want *= 2;
		nb = realloc(t->buf, want);
		if (!nb) {
			t->oom = true;
			return;
		}
		t->buf = nb;
		t->cap = want;
	}
}

/* Appends name percent-encoded for an href (unreserved bytes kept). */
static void text_add_href(struct text *t, const char *name)
{
	const unsigned char *p;

	for (p = (const unsigned char *)name; *p; p++) {
		if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		    (*p >= '0' && *p <= '9') || strchr("-._~", *p))
			text_add(t, "%c", *p);
		else
			text_add(t, "%%%02X", *p);
	}
}

/* Appends name with HTML's special characters escaped. */
static void text_add_html(struct text *t, const char *name)
{
	const char *p;

	for (p = name; *p; p++) {
		switch (*p) {
		case '<':
			text_add(t, "&lt;");
			break;
		case '>':
			text_add(t, "&gt;");
			break;
		case '&':
			text_add(t, "&amp;");
			break;
		case '"':
			text_add(t, "&quot;");
			break;
		default:
			text_add(t, "%c", *p);
		}
	}
}

static int dirent_filter(const struct dirent *d)
{
	return d->d_name[0] != '.';
}

/* Builds an nginx-autoindex-style HTML listing of the directory that path
 * (ending in '/') names under the root, so that clients which list by
 * scraping links (rclone's http backend, httpdirfs) see the same page as
 * from nginx. Returns 0 with the page in *t (the caller frees t->buf),
 * -ENOENT for a missing directory or one outside the root, or -ENOMEM. */
static int listing_build(struct server *srv, const char *path, struct text *t)
{
	char full[PATH_MAX], real[PATH_MAX], entry[PATH_MAX * 2];
	struct dirent **names = NULL;
	struct stat st;
	struct tm tm;
	char when[32];
	int n, i, count = 0, rc;

	n = snprintf(full, sizeof(full), "%s%s", srv->root, path);
	if (n < 0 || (size_t)n >= sizeof(full) || !realpath(full, real)) {
		rc = -ENOENT;
		goto out;
	}
	if (strncmp(real, srv->root, srv->root_len) != 0 ||
	    (real[srv->root_len] != '/' && real[srv->root_len] != '\0' &&
	     srv->root_len > 1) ||
	    stat(real, &st) < 0 || !S_ISDIR(st.st_mode)) {
		rc = -ENOENT;
		goto out;
	}
	count = scandir(real, &names, dirent_filter, alphasort);
	if (count < 0) {
		count = 0;
		rc = -ENOENT;
		goto out;
	}
	text_add(t, "<html>\r\n<head><title>Index of ");
	text_add_html(t, path);
	text_add(t, "</title></head>\r\n<body>\r\n<h1>Index of ");
	text_add_html(t, path);
	text_add(t, "</h1><hr><pre><a href=\"../\">../</a>\r\n");
	for (i = 0; i < count; i++) {
		bool dir;

		n = snprintf(entry, sizeof(entry), "%s/%s", real,
			     names[i]->d_name);
		if (n < 0 || (size_t)n >= sizeof(entry) || stat(entry, &st) < 0)
			continue;
		dir = S_ISDIR(st.st_mode);
		if (!dir && !S_ISREG(st.st_mode))
			continue;
		gmtime_r(&st.st_mtim.tv_sec, &tm);
		if (strftime(when, sizeof(when), "%d-%b-%Y %H:%M", &tm) == 0)
			when[0] = '\0';
		text_add(t, "<a href=\"");
		text_add_href(t, names[i]->d_name);
		text_add(t, "%s\">", dir ? "/" : "");
		text_add_html(t, names[i]->d_name);
		if (dir)
			text_add(t, "/</a> %s %19s\r\n", when, "-");
		else
			text_add(t, "</a> %s %19" PRIu64 "\r\n", when,
				 (uint64_t)st.st_size);
	}
	text_add(t, "</pre><hr></body>\r\n</html>\r\n");
	rc = t->oom ? -ENOMEM : 0;
out:
	for (i = 0; i < count; i++)
		free(names[i]);
	free(names);
	return rc;
}

/* Answers a GET or HEAD of a directory path with its listing (200), or
 * 404 when there is no such directory. */
static int send_listing(struct conn *c, const struct request *rq,
			bool closing, int *status, uint64_t *sent)
{
	struct text t = {0};
	struct head h;
	int rc;

	rc = listing_build(c->srv, rq->path, &t);
	if (rc < 0) {
		*status = rc == -ENOMEM ? 500 : 404;
		rc = send_status(c, rq, *status, -1, NULL, closing, sent);
		goto out;
	}
	*status = 200;
	head_start(&h, 200);
	head_add(&h, "Content-Type: text/html\r\nContent-Length: %zu\r\n",
		 t.len);
	head_end(&h, closing);
	rc = head_send(c, &h, strcmp(rq->method, "HEAD") != 0);
	if (rc < 0 || strcmp(rq->method, "HEAD") == 0)
		goto out;
	rc = send_all(c->fd, t.buf, t.len, 0);
	if (rc == 0)
		*sent = t.len;
out:
	free(t.buf);
	return rc;
}

/* Answers with a document of len bytes (an S3 listing or error). */
static int send_doc(struct conn *c, const struct request *rq, int status,
		    const char *type, const char *doc, size_t len,
		    bool closing, uint64_t *sent)
{
	struct head h;
	int rc;

	head_start(&h, status);
	head_add(&h, "Content-Type: %s\r\nContent-Length: %zu\r\n", type,
		 len);
	head_end(&h, closing);
	rc = head_send(c, &h, strcmp(rq->method, "HEAD") != 0 && len > 0);
	if (rc < 0 || strcmp(rq->method, "HEAD") == 0 || len == 0)
		return rc;
	rc = send_all(c->fd, doc, len, 0);
	if (rc == 0)
		*sent = len;
	return rc;
}

/* --require-header: reads FILE again when it changed (its inode, size or
 * mtime), so that a test rotates a token under a running mount; a file
 * that is gone accepts nothing. Caller holds srv->require_mu. */
static void require_reload(struct server *srv)
{
	char line[1200];
	struct stat st;
	FILE *fp;

	if (stat(srv->require_path, &st) != 0) {
		srv->nrequire = 0;
		memset(&srv->require_st, 0, sizeof(srv->require_st));
		return;
	}
	if (st.st_ino == srv->require_st.st_ino &&
	    st.st_size == srv->require_st.st_size &&
	    st.st_mtim.tv_sec == srv->require_st.st_mtim.tv_sec &&
	    st.st_mtim.tv_nsec == srv->require_st.st_mtim.tv_nsec)
		return;
	fp = fopen(srv->require_path, "r");
	if (fp == NULL)
		return;
	srv->require_st = st;
	srv->nrequire = 0;
	while (fgets(line, sizeof(line), fp) != NULL &&
	       srv->nrequire < ORIGIN_REQUIRE_MAX) {
		char *colon = strchr(line, ':'), *v, *e;

		if (line[0] == '#' || colon == NULL || colon == line)
			continue;
		*colon = '\0';
		v = colon + 1 + strspn(colon + 1, " \t");
		e = v + strcspn(v, "\r\n");
		while (e > v && (e[-1] == ' ' || e[-1] == '\t'))
			e--;
		*e = '\0';
		/* A line too long to hold is left out, never cut. */
		if (strlen(line) >= sizeof(srv->require[0].name) ||
		    strlen(v) >= sizeof(srv->require[0].value))
			continue;
		memcpy(srv->require[srv->nrequire].name, line,
		       strlen(line) + 1);
		memcpy(srv->require[srv->nrequire].value, v, strlen(v) + 1);
		srv->nrequire++;
	}
	fclose(fp);
}

/* True when rq carries one of the --require-header lines (name in any
 * case, value exactly), or no --require-header was given. */
static bool require_ok(struct server *srv, const struct request *rq)
{
	bool ok = false;

	if (srv->require_path == NULL)
		return true;
	pthread_mutex_lock(&srv->require_mu);
	require_reload(srv);
	for (size_t i = 0; i < srv->nrequire && !ok; i++)
		for (size_t j = 0; j < rq->nhdr && !ok; j++)
			ok = strcasecmp(rq->hdr[j].name,
					srv->require[i].name) == 0 &&
			     strcmp(rq->hdr[j].value, srv->require[i].value) ==
				     0;
	pthread_mutex_unlock(&srv->require_mu);
	return ok;
}

/* --s3: what rq names (a bucket's listing, an object) and whether its
 * signature holds. Returns 1 when the answer was sent, 0 when rq->path
 * now names the object's file, or a negative errno. */
static int s3_route(struct conn *c, struct request *rq, bool closing,
		    int *status, char *code, size_t codelen, uint64_t *sent)
{
	struct s3_request srq = {.method = rq->method,
				 .target = rq->target,
				 .h = rq->hdr,
				 .nh = rq->nhdr};
	struct s3_answer a;
	int rc = s3_origin_answer(c->srv->s3, &srq, &a);

	if (rc < 0)
		return rc;
	if (a.status == 0) {
		snprintf(rq->path, sizeof(rq->path), "%s", a.path);
		return 0;
	}
	*status = a.status;
	snprintf(code, codelen, "%s", a.code);
	rc = send_doc(c, rq, a.status, "application/xml", a.body, a.len,
		      closing, sent);
	free(a.body);
	a.body = NULL;
	return rc < 0 ? rc : 1;
}

/* Serves the parsed request rq; says in *after what the connection does
 * next. Returns 0 or a negative errno when the connection failed. */
static int serve(struct conn *c, struct request *rq, enum after *after)
{
	struct server *srv = c->srv;
	struct fault *f;
	struct entity e = {.fd = -1};
	struct head h;
	const char *applied = NULL;
	char lm[40], s3code[48] = "";
	uint64_t start = 0, len = 0, body = 0, sent = 0, rate = srv->rate;
	unsigned long long hits = 0;
	enum range_result rr = RANGE_FULL;
	bool head_only, closing = rq->want_close, counted = false;
	int status = 0, rc;

	*after = closing ? AFTER_CLOSE : AFTER_KEEP;
	f = fault_match(srv, rq->path);
	if (f)
		hits = atomic_fetch_add(&f->hits, 1) + 1;
	if (f && f->kind == FAULT_REFUSE) {
		log_request(srv, rq, 0, 0, "refuse");
		*after = AFTER_CLOSE;
		rc = 0;
		goto out;
	}
	if (srv->latency_ms)
		sleep_ns(srv->latency_ms * NS_PER_MS);
	if (!require_ok(srv, rq)) {
		applied = "unauthorized";
		status = 401;
		rc = send_status(c, rq, status, -1,
				 "WWW-Authenticate: Bearer\r\n", closing,
				 &sent);
		goto out;
	}
	if (f && f->kind == FAULT_REDIRECT) {
		size_t n = strlen(f->location) + strlen(rq->target) + 16;
		char *loc = malloc(n);

		applied = "redirect";
		status = 302;
		if (!loc) {
			rc = -ENOMEM;
			goto out;
		}
		snprintf(loc, n, "Location: %s%s\r\n", f->location, rq->target);
		rc = send_status(c, rq, status, -1, loc, closing, &sent);
		free(loc);
		goto out;
	}
	if (f && ((f->kind == FAULT_STATUS && hits > f->skip &&
		   (f->count == 0 || hits <= f->skip + f->count)) ||
		  (f->kind == FAULT_BURST && hits <= f->n))) {
		applied = fault_kinds[f->kind].name;
		status = f->code;
		rc = send_status(c, rq, status, f->retry_after, NULL, closing,
				 &sent);
		goto out;
	}
	if (strcmp(rq->method, "GET") != 0 && strcmp(rq->method, "HEAD") != 0) {
		status = 405;
		rc = send_status(c, rq, status, -1, "Allow: GET, HEAD\r\n",
				 closing, &sent);
		goto out;
	}
	head_only = strcmp(rq->method, "HEAD") == 0;
	if (srv->s3 != NULL) {
		rc = s3_route(c, rq, closing, &status, s3code, sizeof(s3code),
			      &sent);
		if (rc != 0) {
			applied = s3code[0] != '\0' ? s3code : NULL;
			goto out;
		}
	}
	if (srv->autoindex && rq->path[0] &&
	    rq->path[strlen(rq->path) - 1] == '/') {
		rc = send_listing(c, rq, closing, &status, &sent);
		goto out;
	}
	rc = entity_open(srv, rq->path, &e);
	if (rc < 0) {
		status = rc == -EACCES ? 403 : 404;
		rc = send_status(c, rq, status, -1, NULL, closing, &sent);
		goto out;
	}
	/* An origin that serves so many transfers at once and refuses the
	 * rest, as object stores and CDNs in front of small servers do. */
	if (srv->max_transfers && !head_only) {
		counted = true;
		if (atomic_fetch_add(&srv->transfers, 1) >= srv->max_transfers) {
			applied = "max-transfers";
			status = 503;
			rc = send_status(c, rq, status, srv->retry_after, NULL,
					 closing, &sent);
			goto out;
		}
	}
	if (f && f->kind == FAULT_ETAG_CHANGE && hits > f->n) {
		applied = "etag-change";
		snprintf(e.etag + strlen(e.etag),
			 sizeof(e.etag) - strlen(e.etag), "-e1");
	}
	if (f && f->kind == FAULT_CONTENT_CHANGE && hits > f->n) {
		applied = "content-change";
		e.xor = true;
		e.mtime += 1;
		snprintf(e.etag + strlen(e.etag),
			 sizeof(e.etag) - strlen(e.etag), "-c1");
	}
	snprintf(e.etag + strlen(e.etag), sizeof(e.etag) - strlen(e.etag),
		 "\"");
	if (f && f->kind == FAULT_ETAG && hits > f->skip) {
		applied = "etag";
		snprintf(e.etag, sizeof(e.etag), "%s", f->text);
	}
	if (rq->if_match && strcmp(rq->if_match, "*") != 0 &&
	    strcmp(rq->if_match, e.etag) != 0) {
		status = 412;
		rc = send_status(c, rq, status, -1, NULL, closing, &sent);
		goto out;
	}
	if (f && f->kind == FAULT_RATE) {
		applied = "rate";
		rate = f->n;
	}
	if (rq->range && f && f->kind == FAULT_NORANGE) {
		applied = "norange";
	} else if (f && f->kind == FAULT_CLEN) {
		/* A 200 whose Content-Length is the rule's number: the
		 * connection closes after the body, whatever it said. */
		applied = "clen";
		closing = true;
		*after = AFTER_CLOSE;
	} else if (rq->range &&
		   (!rq->if_range || if_range_matches(rq->if_range, &e))) {
		rr = range_parse(rq->range, e.size, &start, &len);
	}
	http_date(e.mtime, lm, sizeof(lm));
	if (rr == RANGE_UNSATISFIABLE) {
		char extra[64];

		status = 416;
		snprintf(extra, sizeof(extra),
			 "Content-Range: bytes */%" PRIu64 "\r\n", e.size);
		rc = send_status(c, rq, status, -1, extra, closing, &sent);
		goto out;
	}
	if (rr == RANGE_FULL) {
		start = 0;
		len = e.size;
	}
	status = rr == RANGE_PART ? 206 : 200;
	head_start(&h, status);
	if (f && f->kind == FAULT_CLEN)
		head_add(&h, "Content-Length: %s\r\n", f->text);
	else
		head_add(&h, "Content-Length: %" PRIu64 "\r\n", len);
	head_add(&h,
		 "Content-Type: application/octet-stream\r\n"
		 "Accept-Ranges: bytes\r\nETag: %s\r\nLast-Modified: %s\r\n",
		 e.etag, lm);
	if (f && f->kind == FAULT_ENCODING && hits > f->skip) {
		applied = "encoding";
		head_add(&h, "Content-Encoding: %s\r\n", f->text);
	}
	if (rr == RANGE_PART) {
		uint64_t shift = 0;
		char total[48];

		if (f && f->kind == FAULT_BADRANGE) {
			applied = "badrange";
			shift = 1;
		}
		snprintf(total, sizeof(total), "%" PRIu64, e.size);
		if (f && f->kind == FAULT_TOTAL) {
			applied = "total";
			snprintf(total, sizeof(total), "%s", f->text);
		}
		head_add(&h,
			 "Content-Range: bytes %" PRIu64 "-%" PRIu64 "/%s\r\n",
			 start + shift, start + len - 1 + shift, total);
	}
	body = head_only ? 0 : len;
	if (f && body > 0) {
		switch (f->kind) {
		case FAULT_STALL:
		case FAULT_RESET:
		case FAULT_SHORT:
			if (f->n < body) {
				applied = fault_kinds[f->kind].name;
				body = f->n;
				*after = f->kind == FAULT_STALL	  ? AFTER_STALL
					 : f->kind == FAULT_RESET ? AFTER_RESET
								  : AFTER_CLOSE;
			}
			break;
		case FAULT_SLOWFIRST:
			applied = "slowfirst";
			break;
		default:
			break;
		}
	}
	head_end(&h, closing);
	/* slowfirst: the head goes at once, only the body waits. */
	if (f && f->kind == FAULT_BIGHEADER && hits > f->skip) {
		applied = "bigheader";
		rc = head_send_padded(c, &h, f->n, body > 0);
	} else {
		rc = head_send(c, &h,
			       body > 0 && !(f && f->kind == FAULT_SLOWFIRST));
	}
	if (rc < 0 || body == 0)
		goto out;
	if (f && f->kind == FAULT_SLOWFIRST)
		sleep_ns(f->n * NS_PER_MS);
	rc = send_body(c, &e, start, body, rate, &sent);
out:
	if (counted)
		atomic_fetch_sub(&srv->transfers, 1);
	if (status)
		log_request(srv, rq, status, sent, applied);
	if (e.fd >= 0)
		close(e.fd);
	if (rc < 0)
		*after = AFTER_CLOSE;
	return rc;
}

/* --- connections ---------------------------------------------------------- */

/* Reads until a whole head is in c->head; returns 0 with its length in
 * *head_len, -ENOTCONN when the client closed between requests,
 * -EMSGSIZE when the head is too large, or another negative errno. */
static int read_head(struct conn *c, size_t *head_len)
{
	char *end;
	ssize_t n;

	for (;;) {
		c->head[c->have] = '\0';
		end = strstr(c->head, "\r\n\r\n");
		if (end) {
			*head_len = (size_t)(end - c->head) + 4;
			return 0;
		}
		if (c->have >= ORIGIN_HEAD_MAX)
			return -EMSGSIZE;
		n = recv(c->fd, c->head + c->have, ORIGIN_HEAD_MAX - c->have,
			 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return c->have == 0 ? -ENOTCONN : -ECONNRESET;
		c->have += (size_t)n;
	}
}

/* Splits the head in place into rq; returns 0 or -EINVAL. The pointers in
 * rq stay valid until the head buffer is reused for the next request. */
static int request_parse(const struct server *srv, char *head,
			 struct request *rq)
{
	char *line, *next, *sp1, *sp2, *colon, *v, *e;
	bool http10;
	int rc;

	memset(rq, 0, sizeof(*rq));
	next = strstr(head, "\r\n");
	if (!next)
		return -EINVAL;
	*next = '\0';
	next += 2;
	line = head;
	sp1 = strchr(line, ' ');
	sp2 = sp1 ? strchr(sp1 + 1, ' ') : NULL;
	if (!sp1 || !sp2 || sp1 == line || sp2 == sp1 + 1)
		return -EINVAL;
	*sp1 = '\0';
	*sp2 = '\0';
	rq->method = line;
	rq->target = sp1 + 1;
	if (strncmp(sp2 + 1, "HTTP/1.", 7) != 0)
		return -EINVAL;
	http10 = strcmp(sp2 + 1, "HTTP/1.0") == 0;
	rq->want_close = http10;
	while (*next) {
		line = next;
		next = strstr(line, "\r\n");
		if (!next)
			break;
		*next = '\0';
		next += 2;
		colon = strchr(line, ':');
		if (!colon)
			return -EINVAL;
		*colon = '\0';
		v = colon + 1;
		while (*v == ' ' || *v == '\t')
			v++;
		e = v + strlen(v);
		while (e > v && (e[-1] == ' ' || e[-1] == '\t'))
			*--e = '\0';
		for (size_t i = 0; i < srv->nlog_headers; i++)
			if (strcasecmp(line, srv->log_headers[i]) == 0)
				rq->logged[i] = v;
		if (rq->nhdr < ORIGIN_HEADERS_MAX) {
			rq->hdr[rq->nhdr].name = line;
			rq->hdr[rq->nhdr++].value = v;
		}
		if (strcasecmp(line, "Range") == 0) {
			rq->range = v;
		} else if (strcasecmp(line, "If-Range") == 0) {
			rq->if_range = v;
		} else if (strcasecmp(line, "If-Match") == 0) {
			rq->if_match = v;
		} else if (strcasecmp(line, "Connection") == 0) {
			if (strcasestr(v, "close"))
				rq->want_close = true;
			else if (http10 && strcasestr(v, "keep-alive"))
				rq->want_close = false;
		} else if (strcasecmp(line, "Transfer-Encoding") == 0 ||
			   (strcasecmp(line, "Content-Length") == 0 &&
			    strcmp(v, "0") != 0)) {
			/* Request bodies are not read; the connection
			 * cannot be reused after one. */
			rq->want_close = true;
		}
	}
	rc = path_decode(rq->target, rq->path, sizeof(rq->path));
	if (rc == -ENOENT) {
		/* Serve as a 404: a path that never resolves. */
		rq->path[0] = '\0';
		rc = 0;
	}
	return rc;
}

/* Waits, without a bound, until the client closes the connection. */
static void wait_client_close(int fd)
{
	char scratch[4096];
	ssize_t n;

	do {
		n = recv(fd, scratch, sizeof(scratch), 0);
	} while (n > 0 || (n < 0 && errno == EINTR));
}

/* Waits (bounded) until the peer has acknowledged everything sent, so that
 * a reset does not discard bytes the fault promised to deliver. */
static void drain_sent(int fd)
{
	int pending, i;

	for (i = 0; i < ORIGIN_DRAIN_MS; i++) {
		if (ioctl(fd, TIOCOUTQ, &pending) < 0 || pending == 0)
			break;
		sleep_ns(NS_PER_MS);
	}
}

/* Answers a request head that could not be read whole (431) or parsed
 * (400) with status, and logs it with no method or target; the connection
 * then closes. */
static void refuse_request(struct conn *c, struct request *rq, int status)
{
	memset(rq, 0, sizeof(*rq));
	rq->method = "-";
	send_status(c, rq, status, -1, NULL, true, &(uint64_t){0});
	log_request(c->srv, rq, status, 0, NULL);
}

static void *conn_main(void *arg)
{
	struct conn *c = arg;
	struct request rq;
	enum after after = AFTER_CLOSE;
	size_t head_len = 0;
	int rc;

	for (;;) {
		rc = read_head(c, &head_len);
		if (rc == -EMSGSIZE) {
			refuse_request(c, &rq, 431);
			after = AFTER_CLOSE;
			break;
		}
		if (rc < 0) {
			if (rc != -ENOTCONN && rc != -EAGAIN &&
			    rc != -ECONNRESET)
				warn_conn(c, "reading a request: %s",
					  strerror(-rc));
			after = AFTER_CLOSE;
			break;
		}
		c->head[head_len - 2] = '\0';
		rc = request_parse(c->srv, c->head, &rq);
		if (rc < 0) {
			refuse_request(c, &rq, 400);
			after = AFTER_CLOSE;
			break;
		}
		rc = serve(c, &rq, &after);
		if (rc < 0 && rc != -EPIPE && rc != -ECONNRESET)
			warn_conn(c, "%s %s: %s", rq.method, rq.target,
				  strerror(-rc));
		if (after != AFTER_KEEP)
			break;
		/* Keep whatever the client sent after this head. */
		memmove(c->head, c->head + head_len, c->have - head_len);
		c->have -= head_len;
	}
	if (after == AFTER_STALL) {
		wait_client_close(c->fd);
	} else if (after == AFTER_RESET) {
		struct linger lg = {.l_onoff = 1, .l_linger = 0};

		drain_sent(c->fd);
		setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	}
	close(c->fd);
	free(c->buf);
	free(c);
	return NULL;
}

static int conn_start(struct server *srv, int fd)
{
	struct timeval tv = {.tv_sec = ORIGIN_IDLE_SECS};
	pthread_attr_t attr;
	pthread_t tid;
	struct conn *c;
	int one = 1, rc;

	c = calloc(1, sizeof(*c));
	if (!c) {
		rc = -ENOMEM;
		goto out;
	}
	c->buf = malloc(ORIGIN_CHUNK_MAX);
	if (!c->buf) {
		rc = -ENOMEM;
		goto out;
	}
	c->srv = srv;
	c->fd = fd;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	rc = -pthread_attr_init(&attr);
	if (rc < 0)
		goto out;
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 256 * 1024);
	rc = -pthread_create(&tid, &attr, conn_main, c);
	pthread_attr_destroy(&attr);
	if (rc < 0)
		goto out;
	c = NULL;
out:
	if (c) {
		free(c->buf);
		free(c);
		close(fd);
	}
	return rc;
}

/* --- start-up ------------------------------------------------------------- */

/* Parses "HOST:PORT", "[V6]:PORT" or "PORT" into a loopback address;
 * returns 0, -EINVAL for bad syntax, or -EPERM for a non-loopback host. */
static int listen_parse(const char *s, struct sockaddr_storage *ss,
			socklen_t *sslen)
{
	char host[64];
	const char *colon, *h = "127.0.0.1";
	struct sockaddr_in *in4 = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
	uint64_t port;
	size_t hl;

	memset(ss, 0, sizeof(*ss));
	colon = strrchr(s, ':');
	if (colon) {
		hl = (size_t)(colon - s);
		if (hl >= 2 && s[0] == '[' && s[hl - 1] == ']') {
			s++;
			hl -= 2;
		}
		if (hl == 0 || hl >= sizeof(host))
			return -EINVAL;
		memcpy(host, s, hl);
		host[hl] = '\0';
		h = host;
		if (strcmp(h, "localhost") == 0)
			h = "127.0.0.1";
		s = colon + 1;
	}
	if (parse_u64(s, strlen(s), &port) < 0 || port > 65535)
		return -EINVAL;
	if (inet_pton(AF_INET, h, &in4->sin_addr) == 1) {
		in4->sin_family = AF_INET;
		in4->sin_port = htons((uint16_t)port);
		*sslen = sizeof(*in4);
		if ((ntohl(in4->sin_addr.s_addr) >> 24) != 127)
			return -EPERM;
		return 0;
	}
	if (inet_pton(AF_INET6, h, &in6->sin6_addr) == 1) {
		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons((uint16_t)port);
		*sslen = sizeof(*in6);
		if (!IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr))
			return -EPERM;
		return 0;
	}
	return -EINVAL;
}

/* Binds and listens; returns the socket or a negative errno. */
static int listen_open(const struct sockaddr_storage *ss, socklen_t sslen)
{
	int fd, one = 1, rc;

	fd = socket(ss->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (const struct sockaddr *)ss, sslen) < 0 ||
	    listen(fd, 128) < 0) {
		rc = -errno;
		close(fd);
		return rc;
	}
	return fd;
}

/* Writes the port through a temporary file and rename, so that a reader
 * never sees it half written. */
static int port_file_write(const char *path, unsigned port)
{
	char tmp[PATH_MAX];
	FILE *fp;
	int n, rc = 0;

	n = snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	if (n < 0 || (size_t)n >= sizeof(tmp))
		return -ENAMETOOLONG;
	fp = fopen(tmp, "w");
	if (!fp)
		return -errno;
	if (fprintf(fp, "%u\n", port) < 0)
		rc = -EIO;
	if (fclose(fp) != 0 && rc == 0)
		rc = -errno;
	if (rc == 0 && rename(tmp, path) < 0)
		rc = -errno;
	if (rc < 0)
		unlink(tmp);
	return rc;
}

static void usage(FILE *fp)
{
	fputs("usage: pacefs-origin --root DIR [--listen 127.0.0.1:PORT]\n"
	      "         [--port-file FILE] [--rate BYTES_PER_SEC[K|M|G]]\n"
	      "         [--latency MS] [--fault GLOB:KIND[:ARG]]...\n"
	      "         [--log FILE] [--log-header NAME]... [--quiet] "
	      "[--autoindex]\n"
	      "         [--max-transfers N [--retry-after SECS]]\n"
	      "         [--require-header FILE]\n"
	      "         [--s3 [--s3-region R] [--s3-keys FILE] "
	      "[--s3-anonymous]\n"
	      "               [--s3-max-keys N] [--s3-verifier PATH]]\n"
	      "fault kinds: stall:N reset:N status:CODE[:RETRY_AFTER] "
	      "burst:CODE:K norange\n"
	      "  badrange short:N etag-change:N content-change:N "
	      "slowfirst:MS refuse rate:BYTES redirect:URL_PREFIX\n",
	      fp);
}

static void die(const char *fmt, ...)
	__attribute__((noreturn, format(printf, 1, 2)));

static void die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs("pacefs-origin: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(2);
}

static struct server server = {.log_mu = PTHREAD_MUTEX_INITIALIZER,
			       .require_mu = PTHREAD_MUTEX_INITIALIZER,
			       .retry_after = -1};

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"root", required_argument, NULL, 'r'},
		{"listen", required_argument, NULL, 'l'},
		{"port-file", required_argument, NULL, 'p'},
		{"rate", required_argument, NULL, 'R'},
		{"latency", required_argument, NULL, 'L'},
		{"fault", required_argument, NULL, 'f'},
		{"log", required_argument, NULL, 'g'},
		{"log-header", required_argument, NULL, 'H'},
		{"max-transfers", required_argument, NULL, 'M'},
		{"retry-after", required_argument, NULL, 'A'},
		{"require-header", required_argument, NULL, 'Q'},
		{"quiet", no_argument, NULL, 'q'},
		{"autoindex", no_argument, NULL, 'a'},
		{"s3", no_argument, NULL, 's'},
		{"s3-region", required_argument, NULL, 'G'},
		{"s3-keys", required_argument, NULL, 'K'},
		{"s3-verifier", required_argument, NULL, 'V'},
		{"s3-anonymous", no_argument, NULL, 'N'},
		{"s3-max-keys", required_argument, NULL, 'X'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	const char *root = NULL, *listen_at = "127.0.0.1:0", *port_file = NULL;
	const char *log_path = NULL;
	struct s3_config s3c = {.region = "us-east-1",
				.verifier = ORIGIN_S3VERIFY,
				.max_keys = 1000};
	bool s3 = false;
	struct sockaddr_storage ss;
	socklen_t sslen = sizeof(ss);
	struct sigaction sa;
	sigset_t block, old;
	struct stat st;
	char addr[INET6_ADDRSTRLEN];
	unsigned port;
	int opt, lfd, fd, rc;

	for (;;) {
		opt = getopt_long(argc, argv, "", opts, NULL);
		if (opt == -1)
			break;
		switch (opt) {
		case 'r':
			root = optarg;
			break;
		case 'l':
			listen_at = optarg;
			break;
		case 'p':
			port_file = optarg;
			break;
		case 'R':
			if (parse_size(optarg, strlen(optarg), &server.rate) <
			    0)
				die("--rate %s: want bytes per second, e.g. 8M",
				    optarg);
			break;
		case 'L':
			if (parse_u64(optarg, strlen(optarg),
				      &server.latency_ms) < 0 ||
			    server.latency_ms > 3600 * 1000)
				die("--latency %s: want milliseconds", optarg);
			break;
		case 'f': {
			struct fault *nf;

			nf = realloc(server.faults,
				     (server.nfaults + 1) * sizeof(*nf));
			if (!nf)
				die("out of memory");
			server.faults = nf;
			if (fault_parse(optarg, &nf[server.nfaults]) < 0)
				die("--fault %s: want GLOB:KIND[:ARG], see "
				    "--help",
				    optarg);
			server.nfaults++;
			break;
		}
		case 'g':
			log_path = optarg;
			break;
		case 'H': {
			char **nh;

			if (server.nlog_headers == ORIGIN_LOG_HEADERS_MAX)
				die("--log-header: at most %d",
				    ORIGIN_LOG_HEADERS_MAX);
			nh = realloc(server.log_headers,
				     (server.nlog_headers + 1) * sizeof(*nh));
			if (!nh)
				die("out of memory");
			server.log_headers = nh;
			nh[server.nlog_headers++] = optarg;
			break;
		}
		case 'M':
			if (parse_u64(optarg, strlen(optarg),
				      &server.max_transfers) < 0 ||
			    server.max_transfers == 0)
				die("--max-transfers %s: want a number of "
				    "transfers, at least 1",
				    optarg);
			break;
		case 'A': {
			uint64_t secs;

			if (parse_u64(optarg, strlen(optarg), &secs) < 0 ||
			    secs > 86400)
				die("--retry-after %s: want seconds", optarg);
			server.retry_after = (int64_t)secs;
			break;
		}
		case 'Q':
			server.require_path = optarg;
			break;
		case 'q':
			server.quiet = true;
			break;
		case 'a':
			server.autoindex = true;
			break;
		case 's':
			s3 = true;
			break;
		case 'G':
			s3c.region = optarg;
			break;
		case 'K':
			s3c.keys_path = optarg;
			break;
		case 'V':
			s3c.verifier = optarg;
			break;
		case 'N':
			s3c.anonymous = true;
			break;
		case 'X': {
			uint64_t n;

			if (parse_u64(optarg, strlen(optarg), &n) < 0 ||
			    n == 0 || n > 1000)
				die("--s3-max-keys %s: want 1 to 1000", optarg);
			s3c.max_keys = (unsigned)n;
			break;
		}
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc || !root) {
		usage(stderr);
		return 2;
	}
	if (!realpath(root, server.root) || stat(server.root, &st) < 0 ||
	    !S_ISDIR(st.st_mode))
		die("--root %s: not a directory", root);
	server.root_len = strlen(server.root);
	if (server.root_len == 1)
		server.root_len = 0; /* "/": joined paths start with '/' */
	if (s3) {
		char why[512];

		s3c.root = server.root;
		if (s3_origin_new(&s3c, &server.s3, why, sizeof(why)) != 0)
			die("%s", why);
	}
	rc = listen_parse(listen_at, &ss, &sslen);
	if (rc == -EPERM)
		die("--listen %s: only loopback addresses (127.0.0.0/8, ::1)",
		    listen_at);
	if (rc < 0)
		die("--listen %s: want 127.0.0.1:PORT or [::1]:PORT",
		    listen_at);
	if (log_path) {
		server.log = fopen(log_path, "a");
		if (!server.log)
			die("--log %s: %s", log_path, strerror(errno));
	} else if (!server.quiet) {
		server.log = stderr;
	}

	/* Only the accept loop takes SIGINT and SIGTERM, inside ppoll;
	 * connection threads inherit the blocked mask. */
	signal(SIGPIPE, SIG_IGN);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigemptyset(&block);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &block, &old);
	sigdelset(&old, SIGINT);
	sigdelset(&old, SIGTERM);

	lfd = listen_open(&ss, sslen);
	if (lfd < 0) {
		fprintf(stderr, "pacefs-origin: --listen %s: %s\n", listen_at,
			strerror(-lfd));
		return 1;
	}
	sslen = sizeof(ss);
	if (getsockname(lfd, (struct sockaddr *)&ss, &sslen) < 0) {
		perror("pacefs-origin: getsockname");
		return 1;
	}
	if (ss.ss_family == AF_INET) {
		struct sockaddr_in *in4 = (struct sockaddr_in *)&ss;

		inet_ntop(AF_INET, &in4->sin_addr, addr, sizeof(addr));
		port = ntohs(in4->sin_port);
		printf("listening on %s:%u\n", addr, port);
	} else {
		struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;

		inet_ntop(AF_INET6, &in6->sin6_addr, addr, sizeof(addr));
		port = ntohs(in6->sin6_port);
		printf("listening on [%s]:%u\n", addr, port);
	}
	fflush(stdout);
	if (port_file) {
		rc = port_file_write(port_file, port);
		if (rc < 0) {
			fprintf(stderr, "pacefs-origin: --port-file %s: %s\n",
				port_file, strerror(-rc));
			return 1;
		}
	}

	while (!stop_signal) {
		struct pollfd pfd = {.fd = lfd, .events = POLLIN};

		rc = ppoll(&pfd, 1, NULL, &old);
		if (rc < 0) {
			if (errno == EINTR)
				continue;
			perror("pacefs-origin: poll");
			break;
		}
		fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0) {
			/* Out of descriptors or an aborted handshake: the
			 * listener stays up. */
			if (errno != EINTR && errno != ECONNABORTED &&
			    errno != EAGAIN)
				sleep_ns(10 * NS_PER_MS);
			continue;
		}
		rc = conn_start(&server, fd);
		if (rc < 0 && !server.quiet)
			fprintf(stderr, "pacefs-origin: connection: %s\n",
				strerror(-rc));
	}
	close(lfd);
	pthread_mutex_lock(&server.log_mu);
	if (server.log && server.log != stderr)
		fclose(server.log);
	server.log = NULL;
	pthread_mutex_unlock(&server.log_mu);
	if (!server.quiet)
		fprintf(stderr, "pacefs-origin: exiting on %s\n",
			stop_signal == SIGINT ? "SIGINT" : "SIGTERM");
	return 0;
}

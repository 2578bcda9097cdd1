/* send: writing responses: the head builder, short status answers,
 * documents, and file bodies at a per-connection rate and a shared
 * uplink's. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "contrib/origin/origin_int.h"

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * NS_PER_SEC + (uint64_t)ts.tv_nsec;
}

void origin__sleep_ns(uint64_t ns)
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
 * small enough for slow rates to come out smooth, or --write-chunk. The
 * bucket holds no more than one chunk, so the time a write spends blocked
 * (a small send buffer waiting on acknowledgements) is not made up: as a
 * server that sleeps a chunk's time after each write, it goes slower. */
static void bucket_init(struct bucket *b, uint64_t rate, uint64_t chunk,
			uint64_t now)
{
	uint64_t burst = rate / 20;

	if (burst > ORIGIN_CHUNK_MAX)
		burst = ORIGIN_CHUNK_MAX;
	if (chunk)
		burst = chunk;
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

/* The most bytes one write may take from the uplink: its bucket's burst
 * (bucket_init's without --write-chunk). */
static uint64_t uplink_burst(const struct server *s)
{
	uint64_t burst = s->uplink / 20;

	if (burst > ORIGIN_CHUNK_MAX)
		burst = ORIGIN_CHUNK_MAX;
	return burst ? burst : 1;
}

/* --uplink: takes n bytes (n <= uplink_burst) from the bucket every
 * connection shares, waiting until it has them, as bodies leave one link. */
static void uplink_take(struct server *s, uint64_t n)
{
	uint64_t wait;

	for (;;) {
		pthread_mutex_lock(&s->uplink_mu);
		if (!s->uplink_set) {
			bucket_init(&s->uplink_bucket, s->uplink, 0, now_ns());
			s->uplink_set = true;
		}
		wait = bucket_take(&s->uplink_bucket, n, now_ns());
		pthread_mutex_unlock(&s->uplink_mu);
		if (wait == 0)
			return;
		origin__sleep_ns(wait);
	}
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

/* --- sending -------------------------------------------------------------- */

int origin__send_all(int fd, const void *data, size_t len, int flags)
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

void origin__head_add(struct head *h, const char *fmt, ...)
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
void origin__head_start(struct head *h, int status)
{
	char date[40];

	h->len = 0;
	h->overflow = false;
	origin__http_date(time(NULL), date, sizeof(date));
	origin__head_add(
		h, "HTTP/1.1 %d %s\r\nDate: %s\r\nServer: pacefs-origin\r\n",
		status, reason_phrase(status), date);
}

void origin__head_end(struct head *h, bool closing)
{
	if (closing)
		origin__head_add(h, "Connection: close\r\n");
	origin__head_add(h, "\r\n");
}

/* Sends the head (corked with the body to come when more is true). */
int origin__head_send(struct conn *c, struct head *h, bool more)
{
	if (h->overflow)
		return -EOVERFLOW;
	return origin__send_all(c->fd, h->buf, h->len, more ? MSG_MORE : 0);
}

/* Sends the head with an X-Pad header of pad bytes before its end
 * (bigheader), corked with the body to come when more is true. */
int origin__head_send_padded(struct conn *c, struct head *h, uint64_t pad,
			     bool more)
{
	char fill[4096];
	int rc;

	if (h->overflow)
		return -EOVERFLOW;
	memset(fill, 'a', sizeof(fill));
	/* The head ends with its empty line: the pad goes before it. */
	rc = origin__send_all(c->fd, h->buf, h->len - 2, MSG_MORE);
	if (rc == 0)
		rc = origin__send_all(c->fd, "X-Pad: ", 7, MSG_MORE);
	while (rc == 0 && pad > 0) {
		size_t n = pad < sizeof(fill) ? (size_t)pad : sizeof(fill);

		rc = origin__send_all(c->fd, fill, n, MSG_MORE);
		pad -= n;
	}
	if (rc == 0)
		rc = origin__send_all(c->fd, "\r\n\r\n", 4,
				      more ? MSG_MORE : 0);
	return rc;
}

/* Answers with a short text body, e.g. for 404 or an injected status. */
int origin__send_status(struct conn *c, const struct request *rq, int status,
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
	origin__head_start(&h, status);
	origin__head_add(
		&h, "Content-Type: text/plain\r\nContent-Length: %d\r\n", n);
	if (retry_after >= 0)
		origin__head_add(&h, "Retry-After: %ld\r\n", retry_after);
	if (extra)
		origin__head_add(&h, "%s", extra);
	origin__head_end(&h, closing);
	rc = origin__head_send(c, &h,
			       rq->method && strcmp(rq->method, "HEAD") != 0);
	if (rc < 0 || !rq->method || strcmp(rq->method, "HEAD") == 0)
		return rc;
	rc = origin__send_all(c->fd, body, (size_t)n, 0);
	if (rc == 0)
		*sent = (uint64_t)n;
	return rc;
}

/* Sends bytes [off, off + len) of the entity at the bucket's rate (rate 0:
 * uncapped), adding to *sent as bytes go. */
int origin__send_body(struct conn *c, const struct entity *e, uint64_t off,
		      uint64_t len, uint64_t rate, uint64_t *sent)
{
	uint64_t end = off + len, chunk, wait, done;
	ssize_t n;
	size_t i;
	int rc = 0;

	if (rate && (!c->bucket_set || c->bucket.rate != rate)) {
		bucket_init(&c->bucket, rate, c->srv->write_chunk, now_ns());
		c->bucket_set = true;
	}
	while (off < end) {
		chunk = end - off;
		if (c->srv->uplink && chunk > uplink_burst(c->srv))
			chunk = uplink_burst(c->srv);
		if (rate) {
			if (chunk > c->bucket.burst)
				chunk = c->bucket.burst;
			for (;;) {
				wait = bucket_take(&c->bucket, chunk, now_ns());
				if (wait == 0)
					break;
				origin__sleep_ns(wait);
			}
		} else if (c->srv->write_chunk && chunk > c->srv->write_chunk) {
			chunk = c->srv->write_chunk;
		} else if (chunk > ORIGIN_UNCAPPED_CHUNK) {
			chunk = ORIGIN_UNCAPPED_CHUNK;
		}
		if (e->xor &&chunk > ORIGIN_CHUNK_MAX)
			chunk = ORIGIN_CHUNK_MAX;
		if (c->srv->uplink)
			uplink_take(c->srv, chunk);
		for (done = 0; done < chunk; done += (uint64_t)n) {
			if (e->xor) {
				n = pread(e->fd, c->buf, (size_t)(chunk - done),
					  (off_t)(off + done));
				if (n > 0) {
					for (i = 0; i < (size_t)n; i++)
						c->buf[i] ^= 0xFF;
					rc = origin__send_all(c->fd, c->buf,
							      (size_t)n, 0);
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

int origin__send_chunked(struct conn *c, const struct entity *e, uint64_t off,
			 uint64_t len, uint64_t rate, uint64_t *sent)
{
	uint64_t end = off + len, n;
	char line[32];
	int rc = 0;

	for (; off < end; off += n) {
		n = end - off < ORIGIN_CHUNK_MAX ? end - off : ORIGIN_CHUNK_MAX;
		snprintf(line, sizeof(line), "%" PRIx64 "\r\n", n);
		rc = origin__send_all(c->fd, line, strlen(line), MSG_MORE);
		if (rc == 0)
			rc = origin__send_body(c, e, off, n, rate, sent);
		if (rc == 0)
			rc = origin__send_all(c->fd, "\r\n", 2, MSG_MORE);
		if (rc < 0)
			return rc;
	}
	return origin__send_all(c->fd, "0\r\n\r\n", 5, 0);
}

/* Answers with a document of len bytes (an S3 listing or error). */
int origin__send_doc(struct conn *c, const struct request *rq, int status,
		     const char *type, const char *doc, size_t len,
		     bool closing, uint64_t *sent)
{
	struct head h;
	int rc;

	origin__head_start(&h, status);
	origin__head_add(&h, "Content-Type: %s\r\nContent-Length: %zu\r\n",
			 type, len);
	origin__head_end(&h, closing);
	rc = origin__head_send(c, &h,
			       strcmp(rq->method, "HEAD") != 0 && len > 0);
	if (rc < 0 || strcmp(rq->method, "HEAD") == 0 || len == 0)
		return rc;
	rc = origin__send_all(c->fd, doc, len, 0);
	if (rc == 0)
		*sent = len;
	return rc;
}

/* serve: answers one parsed request: the faults that apply to it, the
 * file it names and the range of it, and the response. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "contrib/origin/origin_int.h"

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
	if (origin__http_date_parse(v, &t) < 0)
		return false;
	return t == e->mtime;
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
	rc = origin__send_doc(c, rq, a.status, "application/xml", a.body, a.len,
			      closing, sent);
	free(a.body);
	a.body = NULL;
	return rc < 0 ? rc : 1;
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* --hold-retry-after: an origin that enforces the Retry-After it asked
 * refuses every request until it has passed, and each refusal starts it
 * again, so a client that retries at once never gets in. */
static bool refusing(struct server *srv)
{
	return srv->hold_retry_after && srv->retry_after > 0 &&
	       mono_ns() < atomic_load(&srv->held_until);
}

static void hold_refusals(struct server *srv)
{
	if (srv->hold_retry_after && srv->retry_after > 0)
		atomic_store(&srv->held_until,
			     mono_ns() +
				     (uint64_t)srv->retry_after * 1000000000u);
}

/* --one-at-a-time: the answer to a request that arrived while a body was
 * being sent, after the refusal's delay: 503 with Retry-After (1 s unless
 * --retry-after says otherwise) and an empty body, the connection kept, as
 * a small asyncio server that serves one transfer at a time answers. */
static int refuse_busy(struct conn *c, bool closing)
{
	struct server *srv = c->srv;
	struct head h;

	if (srv->refuse_ms)
		origin__sleep_ns(srv->refuse_ms * NS_PER_MS);
	origin__head_start(&h, 503);
	origin__head_add(&h,
			 "Content-Length: 0\r\nRetry-After: %" PRId64 "\r\n",
			 srv->retry_after >= 0 ? srv->retry_after : 1);
	origin__head_end(&h, closing);
	return origin__head_send(c, &h, false);
}

/* Serves the parsed request rq; says in *after what the connection does
 * next. Returns 0 or a negative errno when the connection failed. */
int origin__serve(struct conn *c, struct request *rq, enum after *after)
{
	struct server *srv = c->srv;
	struct fault *f, drawn;
	struct entity e = {.fd = -1};
	struct head h;
	const char *applied = NULL;
	char lm[40], s3code[48] = "";
	uint64_t start = 0, len = 0, body = 0, sent = 0,
		 rate = c->slow ? srv->slow_rate : srv->rate;
	unsigned long long hits = 0;
	enum range_result rr = RANGE_FULL;
	bool head_only, closing = rq->want_close, counted = false,
			sending = false;
	int status = 0, rc;

	*after = closing ? AFTER_CLOSE : AFTER_KEEP;
	f = origin__fault_match(srv, rq->path);
	if (f)
		hits = atomic_fetch_add(&f->hits, 1) + 1;
	else if (srv->mix && (f = origin__fault_draw(srv, &drawn)) != NULL)
		hits = 1;
	if (f && f->kind == FAULT_REFUSE) {
		origin__log_request(srv, rq, 0, 0, "refuse");
		*after = AFTER_CLOSE;
		rc = 0;
		goto out;
	}
	/* An origin that took the connection and never answers on it: the
	 * client's own bounds are all that end the request. */
	if (f && f->kind == FAULT_MUTE) {
		origin__log_request(srv, rq, 0, 0, "mute");
		*after = AFTER_STALL;
		rc = 0;
		goto out;
	}
	/* Whether a body is being sent is decided when the request arrives,
	 * not when it would be answered. */
	if (srv->one_at_a_time && atomic_load(&srv->sending) > 0) {
		applied = "one-at-a-time";
		status = 503;
		rc = refuse_busy(c, closing);
		goto out;
	}
	if (srv->latency_ms)
		origin__sleep_ns(srv->latency_ms * NS_PER_MS);
	if (!origin__require_ok(srv, rq)) {
		applied = "unauthorized";
		status = 401;
		rc = origin__send_status(c, rq, status, -1,
					 "WWW-Authenticate: Bearer\r\n",
					 closing, &sent);
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
		rc = origin__send_status(c, rq, status, -1, loc, closing,
					 &sent);
		free(loc);
		goto out;
	}
	if (f && ((f->kind == FAULT_STATUS && hits > f->skip &&
		   (f->count == 0 || hits <= f->skip + f->count)) ||
		  (f->kind == FAULT_BURST && hits <= f->n))) {
		applied = origin__fault_name(f->kind);
		status = f->code;
		rc = origin__send_status(c, rq, status, f->retry_after, NULL,
					 closing, &sent);
		goto out;
	}
	if (strcmp(rq->method, "GET") != 0 && strcmp(rq->method, "HEAD") != 0) {
		status = 405;
		rc = origin__send_status(c, rq, status, -1,
					 "Allow: GET, HEAD\r\n", closing,
					 &sent);
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
		rc = origin__send_listing(c, rq, f, closing, &status, &sent,
					  after, &applied);
		goto out;
	}
	rc = entity_open(srv, rq->path, &e);
	if (rc < 0) {
		status = rc == -EACCES ? 403 : 404;
		rc = origin__send_status(c, rq, status, -1, NULL, closing,
					 &sent);
		goto out;
	}
	/* An origin that serves so many transfers at once and refuses the
	 * rest, as object stores and CDNs in front of small servers do. */
	if (srv->max_transfers && !head_only) {
		counted = true;
		if (atomic_fetch_add(&srv->transfers, 1) >=
			    srv->max_transfers ||
		    refusing(srv)) {
			applied = "max-transfers";
			status = 503;
			rc = origin__send_status(c, rq, status,
						 srv->retry_after, NULL,
						 closing, &sent);
			hold_refusals(srv);
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
	if (f && f->kind == FAULT_CORRUPT && hits > f->n) {
		/* Wrong bytes under the right validator: only a digest
		 * tells (a cache's damaged copy). */
		applied = "corrupt";
		e.xor = true;
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
		rc = origin__send_status(c, rq, status, -1, NULL, closing,
					 &sent);
		goto out;
	}
	if (f && f->kind == FAULT_RATE) {
		applied = "rate";
		rate = f->n;
	}
	if (rq->range && f && f->kind == FAULT_NORANGE) {
		applied = "norange";
	} else if (f && f->kind == FAULT_CHUNKED) {
		/* Range ignored, the whole file chunked, no length. */
		applied = "chunked";
	} else if (f && f->kind == FAULT_CLEN) {
		/* A 200 whose Content-Length is the rule's number: the
		 * connection closes after the body, whatever it said. */
		applied = "clen";
		closing = true;
		*after = AFTER_CLOSE;
	} else if (rq->range &&
		   (!rq->if_range || if_range_matches(rq->if_range, &e))) {
		rr = origin__range_parse(rq->range, e.size, &start, &len);
	}
	origin__http_date(e.mtime, lm, sizeof(lm));
	if (rr == RANGE_UNSATISFIABLE) {
		char extra[64];

		status = 416;
		snprintf(extra, sizeof(extra),
			 "Content-Range: bytes */%" PRIu64 "\r\n", e.size);
		rc = origin__send_status(c, rq, status, -1, extra, closing,
					 &sent);
		goto out;
	}
	if (rr == RANGE_FULL) {
		start = 0;
		len = e.size;
	}
	status = rr == RANGE_PART ? 206 : 200;
	origin__head_start(&h, status);
	if (f && f->kind == FAULT_CLEN)
		origin__head_add(&h, "Content-Length: %s\r\n", f->text);
	else if (f && f->kind == FAULT_CHUNKED)
		origin__head_add(&h, "Transfer-Encoding: chunked\r\n");
	else
		origin__head_add(&h, "Content-Length: %" PRIu64 "\r\n", len);
	origin__head_add(
		&h,
		"Content-Type: application/octet-stream\r\n"
		"Accept-Ranges: bytes\r\nETag: %s\r\nLast-Modified: %s\r\n",
		e.etag, lm);
	if (f && f->kind == FAULT_ENCODING && hits > f->skip) {
		applied = "encoding";
		origin__head_add(&h, "Content-Encoding: %s\r\n", f->text);
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
		origin__head_add(&h,
				 "Content-Range: bytes %" PRIu64 "-%" PRIu64
				 "/%s\r\n",
				 start + shift, start + len - 1 + shift, total);
	}
	body = head_only ? 0 : len;
	if (f && body > 0) {
		switch (f->kind) {
		case FAULT_STALL:
		case FAULT_RESET:
		case FAULT_SHORT:
			if (f->n < body) {
				applied = origin__fault_name(f->kind);
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
	origin__head_end(&h, closing);
	if (body > 0) {
		sending = true;
		atomic_fetch_add(&srv->sending, 1);
	}
	/* slowfirst: the head goes at once, only the body waits. */
	if (f && f->kind == FAULT_BIGHEADER && hits > f->skip) {
		applied = "bigheader";
		rc = origin__head_send_padded(c, &h, f->n, body > 0);
	} else {
		rc = origin__head_send(
			c, &h, body > 0 && !(f && f->kind == FAULT_SLOWFIRST));
	}
	if (rc < 0 || body == 0)
		goto out;
	if (f && f->kind == FAULT_SLOWFIRST)
		origin__sleep_ns(f->n * NS_PER_MS);
	if (f && f->kind == FAULT_CHUNKED)
		rc = origin__send_chunked(c, &e, start, body, rate, &sent);
	else
		rc = origin__send_body(c, &e, start, body, rate, &sent);
out:
	if (counted)
		atomic_fetch_sub(&srv->transfers, 1);
	if (sending)
		atomic_fetch_sub(&srv->sending, 1);
	if (status)
		origin__log_request(srv, rq, status, sent, applied);
	if (e.fd >= 0)
		close(e.fd);
	if (rc < 0)
		*after = AFTER_CLOSE;
	return rc;
}

/* probe: the synchronous requests made outside the event thread: a probe
 * that learns a URL's size, Range support and validators with a range GET
 * of its first byte (or of a small file's bytes), and a plain GET of a
 * small document (a directory index). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <curl/curl.h>

#include "fetch/fetch.h"
#include "fetch/fetch_int.h"

struct probe_state {
	CURL *easy;
	struct fetch__head head;
	size_t want;   /* the bytes asked from 0: 1, or fetch_probe's first */
	uint8_t *keep; /* want > 1: the bytes of a 206, want of them */
	size_t body;
	char errbody[1024]; /* the start of an error's body (S3's code) */
	size_t nerrbody;
	char *note; /* what a proxy answered wrongly (fetch_probe's
		       proxy_note), cap bytes */
	size_t note_cap;
};

static size_t probe_header(char *line, size_t size, size_t n, void *arg)
{
	struct probe_state *s = arg;

	fetch__head_line(&s->head, line, size * n);
	return size * n;
}

static size_t probe_body(char *buf, size_t size, size_t n, void *arg)
{
	struct probe_state *s = arg;

	long status = 0;

	if (fetch__is_redirect(s->easy))
		return size * n; /* the next hop follows */
	curl_easy_getinfo(s->easy, CURLINFO_RESPONSE_CODE, &status);
	if (status >= 400) {
		/* An error's document: its start says why (S3's code). */
		size_t take = size * n;

		if (take > sizeof(s->errbody) - 1 - s->nerrbody)
			take = sizeof(s->errbody) - 1 - s->nerrbody;
		memcpy(s->errbody + s->nerrbody, buf, take);
		s->nerrbody += take;
		s->errbody[s->nerrbody] = '\0';
		/* Enough of it: an error page is no reason to wait. */
		s->body += size * n;
		return s->body > 65536 ? 0 : size * n;
	}
	/* A 200's body is the blob's from its first byte too. */
	if (s->keep != NULL && (status == 206 || status == 200) &&
	    s->body < s->want)
		memcpy(s->keep + s->body, buf,
		       size * n < s->want - s->body ? size * n
						    : s->want - s->body);
	s->body += size * n;
	/* A server that ignores Range sends the whole blob: stop at once,
	 * having read the head and a buffer of the body at most. */
	return s->body > s->want ? 0 : size * n;
}

/* Forgets an answer before the probe is sent again (to the next hop,
 * through the next proxy, with newer credentials). */
static void probe_reset(void *arg)
{
	struct probe_state *s = arg;

	s->body = 0;
	s->nerrbody = 0;
	s->errbody[0] = '\0';
	memset(&s->head, 0, sizeof(s->head));
}

/* Whether a 206's Content-Range is the probe's: from 0 to the last byte
 * asked, or to the blob's last when it is shorter. */
static bool probe_range_ok(const struct fetch__head *h, size_t want)
{
	return h->cr_seen && h->cr_start == 0 && h->cr_total != UINT64_MAX &&
	       h->cr_end + 1 == (h->cr_total < want ? h->cr_total : want);
}

/* An answer through a proxy that no origin gives to the probe's range
 * (bytes=0-0 or 0-N): a 200 with a body (Range ignored), a 206 of other
 * bytes, an encoded one, a 416 of a blob that is not empty. The request
 * then goes through the next route (fetch__perform). */
static bool probe_bad(void *arg, const char *proxy)
{
	struct probe_state *s = arg;
	const struct fetch__head *h = &s->head;
	char why[160];
	long status = 0;

	curl_easy_getinfo(s->easy, CURLINFO_RESPONSE_CODE, &status);
	if (status >= 200 && status < 300 && h->coding[0] != '\0')
		snprintf(why, sizeof(why), "HTTP %ld with '%s'", status,
			 h->coding);
	else if (status == 200 && !(h->cl_seen && h->content_length == 0))
		snprintf(why, sizeof(why),
			 "HTTP 200 to a range request (Range ignored)");
	else if (status == 206 && !probe_range_ok(h, s->want))
		snprintf(why, sizeof(why),
			 "HTTP 206 with Content-Range '%s', not "
			 "'bytes 0-%zu/SIZE'",
			 h->cr_raw, s->want - 1);
	else if (status == 416 &&
		 !(h->cr_seen && h->cr_start == UINT64_MAX && h->cr_total == 0))
		snprintf(why, sizeof(why),
			 "HTTP 416 with Content-Range '%s' to bytes 0-%zu",
			 h->cr_raw, s->want - 1);
	else
		return false;
	snprintf(s->note, s->note_cap,
		 "proxy %s answered the probe wrongly (%s): the next route, if "
		 "any, is asked",
		 proxy, why);
	return true;
}

static const char *probe_errbody(void *arg)
{
	return ((struct probe_state *)arg)->errbody;
}

/* Every error line (fetch_text_errf, -EIO unless said) names the URL as
 * shown: without its userinfo (free() it; NULL: memory ran out, which
 * the callers show as "?"). */
#define SHOWN(u) ((u) != NULL ? (u) : "?")

/* How a synchronous request that fetch__perform ran (its return rc, and
 * herr) ended, unless an answer came to be judged: past the caller's
 * bound (cfg->deadline_ms, cfg->stop), that bound's errno (-ETIMEDOUT,
 * -ECANCELED) with "URL: which"; a redirect refused (rc), -EIO with
 * "URL: herr"; else 0. An answer that came (answered) stands, however
 * late. */
static int perform_ended(const struct fetch_config *cfg, int rc, bool answered,
			 const char *shown, const char *herr, char *err,
			 size_t errlen)
{
	const char *why;
	int bound = answered ? 0 : fetch__bound_check(cfg, &why);

	if (bound != 0)
		return fetch_text_errf(err, errlen, bound, "%s: %s", shown,
				       why);
	if (rc != 0)
		return fetch_text_errf(err, errlen, -EIO, "%s: %s", shown,
				       herr);
	return 0;
}

/* Judges the head of a probe's answer (status out->status, head h): the
 * blob's size into out, or -EIO with one line in err and *kind saying
 * whether to try again (a refusal's Retry-After in *retry_after_ms). */
static int probe_judge(const struct fetch_config *cfg,
		       const struct probe_state *s, const char *shown,
		       struct fetch_probe *out, enum fetch_probe_error *kind,
		       uint64_t *retry_after_ms, char *err, size_t errlen)
{
	const struct fetch__head *h = &s->head;
	long st = out->status;

	/* A range of encoded bytes is not a range of the blob. */
	if (h->coding[0] != '\0' && st >= 200 && st < 300)
		return fetch_text_errf(
			err, errlen, -EIO,
			"%s: HTTP %ld with '%s' although identity was "
			"asked for; pacefs needs the bytes as stored",
			shown, st, h->coding);
	if (st == 200 && h->cl_bad[0] != '\0')
		return fetch_text_errf(
			err, errlen, -EIO,
			"%s: HTTP 200 with Content-Length '%s', which is "
			"no size (at most %" PRIu64 ")",
			shown, h->cl_bad, FETCH_SIZE_MAX);
	if (st == 200 && h->cl_seen && h->content_length == 0) {
		/* An empty blob: some servers answer a range of it with an
		 * empty 200 rather than a 416. */
		out->size = 0;
		return 0;
	}
	if (st == 200 && h->cl_seen && h->content_length > FETCH_SIZE_MAX)
		return fetch_text_errf(
			err, errlen, -EIO,
			"%s: Content-Length %" PRIu64 " is over the largest "
			"file size (%" PRIu64 ")",
			shown, h->content_length, FETCH_SIZE_MAX);
	if (st == 200 && h->cl_seen) {
		/* Range ignored: the source is read as one stream from its
		 * first byte (fetch_target.stream). */
		out->size = h->content_length;
		return 0;
	}
	if (st == 200) {
		/* Range ignored and no length (chunked): a stream whose
		 * size the caller must know otherwise. */
		out->size = 0;
		out->no_length = true;
		return 0;
	}
	if (st == 416 && h->cr_seen && h->cr_start == UINT64_MAX &&
	    h->cr_total == 0) {
		/* "bytes * /0": an empty blob. */
		out->size = 0;
		return 0;
	}
	if (st == 206) {
		if (!probe_range_ok(h, s->want))
			return fetch_text_errf(
				err, errlen, -EIO,
				"%s: HTTP 206 with Content-Range '%s', not "
				"'bytes 0-%zu/SIZE'",
				shown, h->cr_raw, s->want - 1);
		if (h->cr_total > FETCH_SIZE_MAX)
			return fetch_text_errf(
				err, errlen, -EIO,
				"%s: Content-Range total %" PRIu64
				" is over the largest file size (%" PRIu64 ")",
				shown, h->cr_total, FETCH_SIZE_MAX);
		if (s->keep != NULL && s->body != h->cr_end + 1)
			return fetch_text_errf(
				err, errlen, -EIO,
				"%s: HTTP 206 of %zu bytes where "
				"Content-Range '%s' says %" PRIu64,
				shown, s->body, h->cr_raw, h->cr_end + 1);
		out->size = h->cr_total;
		return 0;
	}
	/* Through a proxy, a gateway error says the origin could not be
	 * reached: the cache may serve what it holds. */
	*kind = cfg->proxies != NULL && (st == 502 || st == 504)
			? FETCH_PROBE_UNREACHABLE
			: FETCH_PROBE_REFUSED;
	*retry_after_ms = h->retry_after_ms;
	return fetch_text_errf(err, errlen, -EIO, "%s: HTTP %ld", shown, st);
}

/* Asks easy for the probe's range, bytes 0 to s->want - 1, into s's
 * callbacks, within the caller's deadline (curl copies the range). */
static void probe_setopt(const struct fetch_config *cfg, CURL *easy,
			 struct probe_state *s)
{
	char range[48];

	snprintf(range, sizeof(range), "0-%zu", s->want - 1);
	curl_easy_setopt(easy, CURLOPT_RANGE, range);
	/* A server that ignores Range sends the whole object, which the
	 * probe stops at its first buffer: a small one (curl's least) when
	 * one byte is asked, so that probing a listing of such a server
	 * reads about a KiB of each body, not curl's 16. */
	curl_easy_setopt(easy, CURLOPT_BUFFERSIZE,
			 (long)(s->want > 1024 ? s->want : 1024));
	curl_easy_setopt(easy, CURLOPT_HEADERFUNCTION, probe_header);
	curl_easy_setopt(easy, CURLOPT_HEADERDATA, s);
	curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, probe_body);
	curl_easy_setopt(easy, CURLOPT_WRITEDATA, s);
	curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS,
			 fetch__bound_ms(cfg, cfg->connect_timeout_ms * 3));
}

/* One probe request; fetch_probe() retries it. */
static int probe_once(const struct fetch_config *cfg, const char *url,
		      bool no_cache, size_t first, struct fetch_probe *out,
		      enum fetch_probe_error *kind, uint64_t *retry_after_ms,
		      char *err, size_t errlen)
{
	struct probe_state s;
	const struct fetch__head *h = &s.head;
	char errbuf[CURL_ERROR_SIZE] = "", herr[512] = "";
	char *shown = fetch_url_redacted(url), *final = NULL;
	struct curl_slist *headers;
	bool headers_ok;
	CURL *easy;
	CURLcode cc = CURLE_OK;
	int rc;

	fetch_probe_free(out);
	memset(out, 0, sizeof(*out));
	memset(&s, 0, sizeof(s));
	s.note = out->proxy_note;
	s.note_cap = sizeof(out->proxy_note);
	s.want = first > 1 ? first : 1;
	s.keep = s.want > 1 ? malloc(s.want) : NULL;
	*kind = FETCH_PROBE_UNSUITABLE;
	headers = fetch__headers(cfg, &headers_ok);
	easy = fetch__easy_take();
	s.easy = easy;
	if (easy == NULL || !headers_ok || shown == NULL ||
	    (s.want > 1 && s.keep == NULL)) {
		rc = fetch_text_errf(err, errlen, -EIO, "%s: out of memory",
				     SHOWN(shown));
		goto out;
	}
	if (fetch__easy_setup(easy, cfg, errbuf) != CURLE_OK) {
		rc = fetch_text_errf(err, errlen, -EIO,
				     "%s: cannot set up curl options", shown);
		goto out;
	}
	probe_setopt(cfg, easy, &s);
	rc = fetch__perform(cfg, easy, url, headers, no_cache, probe_reset,
			    probe_bad, &s, probe_errbody, &cc, &final,
			    &out->status, herr, sizeof(herr));
	snprintf(out->etag, sizeof(out->etag), "%s", h->etag);
	snprintf(out->last_modified, sizeof(out->last_modified), "%s",
		 h->last_modified);
	rc = perform_ended(
		cfg, rc, rc == 0 && (cc == CURLE_OK || cc == CURLE_WRITE_ERROR),
		shown, herr, err, errlen);
	if (rc != 0) {
		/* Past the caller's deadline, or the mount is ending: no
		 * answer in time is an origin that cannot be reached. A
		 * redirect refused is final: no retry. */
		if (rc == -ETIMEDOUT || rc == -ECANCELED)
			*kind = FETCH_PROBE_UNREACHABLE;
		free(final);
		goto out;
	}
	out->final_url = final;
	curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &out->status);
	if (cc != CURLE_OK && cc != CURLE_WRITE_ERROR) {
		*kind = out->status == 0 ? FETCH_PROBE_UNREACHABLE
					 : FETCH_PROBE_REFUSED;
		rc = fetch_text_errf(err, errlen, -EIO, "%s: %s", shown,
				     herr[0]	 ? herr
				     : errbuf[0] ? errbuf
						 : curl_easy_strerror(cc));
		goto out;
	}
	rc = probe_judge(cfg, &s, shown, out, kind, retry_after_ms, err,
			 errlen);
	if (rc != 0)
		goto out;
	if (s.keep != NULL && (out->status == 206 || out->status == 200)) {
		out->body = s.keep;
		out->nbody = s.body < s.want ? s.body : s.want;
		s.keep = NULL;
	}
	/* An empty 200 says nothing of Range: the blob has no bytes. */
	out->ranges = out->status != 200 || (out->size == 0 && !out->no_length);
	out->etag_weak = strncmp(out->etag, "W/", 2) == 0;
	out->mtime = out->last_modified[0] != '\0'
			     ? (int64_t)curl_getdate(out->last_modified, NULL)
			     : -1;
	*kind = FETCH_PROBE_OK;
	rc = 0;
out:
	if (rc != 0)
		fetch_probe_free(out);
	fetch__easy_give(easy);
	curl_slist_free_all(headers);
	free(shown);
	free(s.keep);
	return rc;
}

void fetch_probe_free(struct fetch_probe *p)
{
	if (p == NULL)
		return;
	free(p->final_url);
	p->final_url = NULL;
	free(p->body);
	p->body = NULL;
	p->nbody = 0;
}

int fetch_probe(const struct fetch_config *cfg, const char *url, bool no_cache,
		size_t first, struct fetch_probe *out,
		enum fetch_probe_error *kind, char *err, size_t errlen)
{
	uint64_t wait_ms = FETCH__PROBE_FIRST_WAIT_MS;
	int rc = 0;

	memset(out, 0, sizeof(*out));

	/* 5xx and 429 may pass: try again a few times, as Retry-After says
	 * when it asks for little enough. Anything else is final at once. */
	for (int attempt = 0; attempt < FETCH__PROBE_TRIES; attempt++) {
		uint64_t retry_after_ms = 0;

		rc = probe_once(cfg, url, no_cache, first, out, kind,
				&retry_after_ms, err, errlen);
		if (rc == 0 || *kind != FETCH_PROBE_REFUSED ||
		    fetch_classify_status(out->status) == FETCH_GONE ||
		    attempt + 1 == FETCH__PROBE_TRIES)
			break;
		if (retry_after_ms > FETCH__PROBE_MAX_WAIT_MS)
			break;
		if (retry_after_ms > wait_ms)
			wait_ms = retry_after_ms;
		/* A wait that would end past the deadline is no retry. */
		if ((long)wait_ms >= fetch__bound_ms(cfg, (long)wait_ms + 1))
			break;
		if (fetch__bound_sleep(cfg, (long)wait_ms) != 0)
			break;
		wait_ms *= 2;
	}
	return rc;
}

struct get_state {
	CURL *easy;
	char *buf;
	size_t len;
	size_t max;
	bool too_big;
};

/* Forgets an answer before the GET is sent again (to the next hop,
 * through the next proxy, with newer credentials). */
static void get_reset(void *arg)
{
	struct get_state *g = arg;

	free(g->buf);
	g->buf = NULL;
	g->len = 0;
	g->too_big = false;
}

static size_t get_body(char *data, size_t size, size_t n, void *arg)
{
	struct get_state *g = arg;
	size_t len = size * n;
	char *grown;

	if (fetch__is_redirect(g->easy))
		return len; /* the next hop follows */
	if (g->len + len > g->max) {
		g->too_big = true;
		return 0;
	}
	grown = realloc(g->buf, g->len + len + 1);
	if (grown == NULL)
		return 0;
	memcpy(grown + g->len, data, len);
	g->buf = grown;
	g->len += len;
	g->buf[g->len] = '\0';
	return len;
}

static int get_doc(const struct fetch_config *cfg, const char *url, size_t max,
		   char **body, size_t *len, char **final, long *status_out,
		   char *err, size_t errlen);

static const char *get_body_text(void *arg)
{
	return ((struct get_state *)arg)->buf;
}

int fetch_get(const struct fetch_config *cfg, const char *url, size_t max,
	      char **body, size_t *len, char **final, char *err, size_t errlen)
{
	return get_doc(cfg, url, max, body, len, final, NULL, err, errlen);
}

int fetch_get_any(const struct fetch_config *cfg, const char *url, size_t max,
		  char **body, size_t *len, long *status, char *err,
		  size_t errlen)
{
	return get_doc(cfg, url, max, body, len, NULL, status, err, errlen);
}

/* fetch_get, or with status set fetch_get_any. */
static int get_doc(const struct fetch_config *cfg, const char *url, size_t max,
		   char **body, size_t *len, char **final, long *status_out,
		   char *err, size_t errlen)
{
	struct get_state g = {.max = max};
	char errbuf[CURL_ERROR_SIZE] = "", herr[512] = "";
	char *shown = fetch_url_redacted(url), *last = NULL;
	struct curl_slist *headers;
	bool headers_ok;
	long status = 0;
	CURL *easy;
	CURLcode cc = CURLE_OK;
	int rc = 0;

	headers = fetch__headers(cfg, &headers_ok);
	easy = fetch__easy_take();
	g.easy = easy;
	if (easy == NULL || !headers_ok || shown == NULL ||
	    fetch__easy_setup(easy, cfg, errbuf) != CURLE_OK) {
		rc = fetch_text_errf(err, errlen, -EIO,
				     "%s: cannot set up a request",
				     SHOWN(shown));
		goto out;
	}
	/* A document, parsed and never served: one a server encodes although
	 * identity was asked for is decoded (at most `max` bytes of it), and
	 * an encoding curl does not know is an error. */
	curl_easy_setopt(easy, CURLOPT_HTTP_CONTENT_DECODING, 1L);
	curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, get_body);
	curl_easy_setopt(easy, CURLOPT_WRITEDATA, &g);
	curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS,
			 fetch__bound_ms(cfg, cfg->connect_timeout_ms * 3));
	rc = fetch__perform(cfg, easy, url, headers, false, get_reset, NULL, &g,
			    get_body_text, &cc, &last, &status, herr,
			    sizeof(herr));
	rc = perform_ended(cfg, rc, rc == 0 && cc == CURLE_OK, shown, herr, err,
			   errlen);
	if (rc != 0)
		goto out;
	if (status_out != NULL)
		*status_out = status;
	if (g.too_big)
		rc = fetch_text_errf(err, errlen, -EIO,
				     "%s: larger than %zu bytes", shown, max);
	else if (cc != CURLE_OK)
		rc = fetch_text_errf(err, errlen, -EIO, "%s: %s", shown,
				     herr[0]	 ? herr
				     : errbuf[0] ? errbuf
						 : curl_easy_strerror(cc));
	else if (status != 200 && status_out == NULL)
		rc = fetch_text_errf(err, errlen, -EIO, "%s: HTTP %ld", shown,
				     status);
out:
	fetch__easy_give(easy);
	curl_slist_free_all(headers);
	free(shown);
	if (rc == 0 && g.buf == NULL && (g.buf = strdup("")) == NULL)
		rc = fetch_text_errf(err, errlen, -EIO, "out of memory");
	if (rc != 0) {
		free(g.buf);
		free(last);
		return rc;
	}
	*body = g.buf;
	*len = g.len;
	if (final != NULL)
		*final = last;
	else
		free(last);
	return 0;
}

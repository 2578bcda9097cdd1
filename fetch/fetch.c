/* fetch: the event thread that runs range transfers on lanes with libcurl's
 * multi interface and checks every response before passing its bytes on. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <curl/curl.h>

#include "fetch/fetch.h"
#include "fetch/fetch_int.h"

/* Large receive buffers mean fewer callbacks per MiB; curl caps this. */
#define FETCH_BUFFER_SIZE ((long)FETCH_BUFFER_BYTES)

/* One transfer slot. Each lane owns two: the one carrying its open request
 * and one for the request queued behind it (PACE_ACT_QUEUE), sent ahead on
 * its own connection so that the round trip overlaps the open request's
 * end; its body is held (the transfer paused at its first body byte) until
 * the lane's START for that range promotes it. */
struct fetch_lane {
	struct fetch *f;
	uint32_t id; /* the lane, for the hooks */
	CURL *easy;
	bool busy;
	bool ahead; /* sent ahead, not promoted yet: its body waits */
	bool held;  /* paused in on_body while ahead */
	bool refused; /* no proxy left to send it through: ends with
			 res at the end of the turn */
	const char *url; /* where the request started (the target's) */
	char *hop;	 /* after a redirect: where it is now (owned) */
	unsigned hops;
	const char *validator;
	uint64_t size;
	uint64_t start;
	uint64_t end; /* may be lowered by fetch_lane_set_end */
	uint64_t asked_end;
	uint64_t pos; /* next byte expected */
	uint64_t from; /* where this attempt's range starts (a retry on
			  another proxy starts at its chunk's start) */
	uint64_t rx;   /* the next byte this attempt's body brings */
	int proxy;     /* the entry of cfg.proxies in use; -1: none */
	uint32_t tried; /* entries this request failed on */
	bool no_cache;	/* Cache-Control: no-cache on this request */
	bool stale;	/* another version came through a proxy: ask it
			   again with no-cache before believing it */
	bool checked; /* the response head passed its checks */
	bool cr_seen;
	uint64_t cr_start, cr_end, cr_total;
	char etag[256];
	char last_modified[128];
	char coding[128]; /* a Content- or Transfer-Encoding that is not
			     identity: the header line, for the reason */
	uint64_t retry_after_ms;
	bool forced; /* the write callback aborted with `res` */
	struct fetch_result res;
	char range[48];
	char shown[160]; /* url without userinfo, cut, for reasons */
	char if_range[300];
	struct curl_slist if_range_node; /* heads the shared header list */
	char nocache[32];
	struct curl_slist nocache_node;	 /* before it, when no_cache */
	char errbuf[CURL_ERROR_SIZE];
};

struct fetch {
	struct fetch_config cfg;
	struct fetch_hooks hooks;
	CURLM *multi;
	struct curl_slist *headers; /* the configured headers */
	struct fetch_lane *slots;   /* 2 per lane */
	struct fetch_lane **cur;    /* per lane: the slot of its open request */
	pthread_t thread;
	bool started;
	atomic_bool stop;
};

static void flog(struct fetch *f, enum fetch_log_level level, const char *fmt,
		 ...) __attribute__((format(printf, 3, 4)));

static void flog(struct fetch *f, enum fetch_log_level level, const char *fmt,
		 ...)
{
	char msg[512];
	va_list ap;

	if (f->hooks.log == NULL)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	f->hooks.log(f->hooks.ctx, level, msg);
}

const char *fetch_version(void)
{
	return curl_version();
}

int fetch_global_init(void)
{
	return curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK ? 0 : -ENOMEM;
}

struct curl_slist *fetch__headers(const struct fetch_config *cfg, bool *ok)
{
	struct curl_slist *list = NULL;

	*ok = true;
	for (size_t i = 0; i < cfg->nheaders; i++) {
		struct curl_slist *grown =
			curl_slist_append(list, cfg->headers[i]);

		if (grown == NULL) {
			curl_slist_free_all(list);
			*ok = false;
			return NULL;
		}
		list = grown;
	}
	return list;
}

CURLcode fetch__easy_setup(CURL *easy, const struct fetch_config *cfg,
			   char *errbuf)
{
	CURLcode rc = CURLE_OK;

	rc |= curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
	rc |= curl_easy_setopt(easy, CURLOPT_ERRORBUFFER, errbuf);
	rc |= curl_easy_setopt(easy, CURLOPT_USERAGENT, FETCH__USER_AGENT);
	/* Redirects are followed by fetch/redirect.c, hop by hop, so that
	 * credentials never cross to another origin. */
	rc |= curl_easy_setopt(easy, CURLOPT_FOLLOWLOCATION, 0L);
	rc |= curl_easy_setopt(easy, CURLOPT_PROTOCOLS_STR, "http,https");
	rc |= curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS,
			       cfg->connect_timeout_ms);
	rc |= curl_easy_setopt(easy, CURLOPT_TCP_NODELAY, 1L);
	rc |= curl_easy_setopt(easy, CURLOPT_TCP_KEEPALIVE, 1L);
	/* Ranges are of the stored bytes: ask for them as stored, and keep
	 * curl from decoding what a server encodes anyway, so that the
	 * header checks see it and refuse it (fetch_get decodes documents). */
	rc |= curl_easy_setopt(easy, CURLOPT_ACCEPT_ENCODING, "identity");
	rc |= curl_easy_setopt(easy, CURLOPT_HTTP_CONTENT_DECODING, 0L);
	if (cfg->cafile != NULL)
		rc |= curl_easy_setopt(easy, CURLOPT_CAINFO, cfg->cafile);
	if (cfg->insecure) {
		rc |= curl_easy_setopt(easy, CURLOPT_SSL_VERIFYPEER, 0L);
		rc |= curl_easy_setopt(easy, CURLOPT_SSL_VERIFYHOST, 0L);
	}
	/* With a proxy list, each request sets its proxy (DIRECT: none), and
	 * no environment variable overrides the list. */
	if (cfg->proxies != NULL)
		rc |= curl_easy_setopt(easy, CURLOPT_NOPROXY, "");
	return rc;
}

/* The lane's first URL as reasons show it: without userinfo, cut. */
static const char *lane_shown(struct fetch_lane *l)
{
	fetch__url_shown(l->url, l->shown, sizeof(l->shown));
	return l->shown;
}

/* Ends the write callback's transfer with an outcome of our choosing. */
static size_t lane_abort(struct fetch_lane *l, enum fetch_outcome outcome,
			 const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static size_t lane_abort(struct fetch_lane *l, enum fetch_outcome outcome,
			 const char *fmt, ...)
{
	va_list ap;

	l->forced = true;
	l->res.outcome = outcome;
	va_start(ap, fmt);
	vsnprintf(l->res.reason, sizeof(l->res.reason), fmt, ap);
	va_end(ap);
	return 0; /* curl aborts the transfer with CURLE_WRITE_ERROR */
}

static size_t on_header(char *line, size_t size, size_t n, void *arg)
{
	struct fetch_lane *l = arg;
	size_t len = size * n;
	const char *v;

	if (len >= 5 && strncmp(line, "HTTP/", 5) == 0) {
		/* A new response (after a redirect): forget the last one. */
		l->cr_seen = false;
		l->etag[0] = '\0';
		l->last_modified[0] = '\0';
		l->coding[0] = '\0';
		l->retry_after_ms = 0;
	} else if (fetch__header_is(line, len, "Content-Encoding", &v) ||
		   fetch__header_is(line, len, "Transfer-Encoding", &v)) {
		char buf[128];
		bool transfer = (line[0] | 0x20) == 't';

		fetch__header_value(v, len - (size_t)(v - line), buf,
				    sizeof(buf));
		if (l->coding[0] == '\0' &&
		    !fetch_coding_is_identity(buf, transfer))
			snprintf(l->coding, sizeof(l->coding), "%s: %.100s",
				 transfer ? "Transfer-Encoding"
					  : "Content-Encoding",
				 buf);
	} else if (fetch__header_is(line, len, "Content-Range", &v)) {
		char buf[128];

		fetch__header_value(v, len - (size_t)(v - line), buf,
				    sizeof(buf));
		l->cr_seen =
			fetch_parse_content_range(buf, &l->cr_start, &l->cr_end,
						  &l->cr_total) == 0;
	} else if (fetch__header_is(line, len, "ETag", &v)) {
		fetch__header_value(v, len - (size_t)(v - line), l->etag,
				    sizeof(l->etag));
	} else if (fetch__header_is(line, len, "Last-Modified", &v)) {
		fetch__header_value(v, len - (size_t)(v - line),
				    l->last_modified, sizeof(l->last_modified));
	} else if (fetch__header_is(line, len, "Retry-After", &v)) {
		char buf[128];
		uint64_t ms;

		fetch__header_value(v, len - (size_t)(v - line), buf,
				    sizeof(buf));
		if (fetch_parse_retry_after(buf, (int64_t)time(NULL), &ms) == 0)
			l->retry_after_ms = ms;
	}
	return len;
}

/* Checks the head of a response before its first body byte is used. */
static size_t lane_check_head(struct fetch_lane *l)
{
	long status = 0;
	const char *validator;

	curl_easy_getinfo(l->easy, CURLINFO_RESPONSE_CODE, &status);
	l->res.status = status;
	if (l->proxy >= 0) {
		bool direct = fetch__proxy_is_direct(l->f->cfg.proxies,
						     l->proxy);

		if (direct || !fetch__proxy_fault(l->easy, CURLE_OK))
			fetch__proxy_answered(
				l->f->cfg.proxies, l->proxy,
				direct ? 0 : fetch__proxy_cache_status(l->easy));
	}
	if (status != 206) {
		enum fetch_outcome o = fetch_classify_status(status);

		if (status == 200) {
			/* With If-Range sent, a 200 says the blob changed. */
			l->res.blob_changed = l->validator != NULL &&
					      l->validator[0] != '\0';
			l->stale = l->res.blob_changed;
			return lane_abort(l, o,
					  "%s: HTTP 200 to a range request "
					  "(%s)",
					  lane_shown(l),
					  l->res.blob_changed
						  ? "the blob changed"
						  : "Range is ignored");
		}
		return lane_abort(l, o, "%s: HTTP %ld", lane_shown(l), status);
	}
	if (l->coding[0] != '\0')
		/* The range is of the encoded bytes, and they are not the
		 * blob's: never store them as its bytes. */
		return lane_abort(l, FETCH_FATAL,
				  "%s: '%s' although identity was asked for: "
				  "pacefs serves the bytes as stored only",
				  lane_shown(l), l->coding);
	if (!l->cr_seen)
		return lane_abort(l, FETCH_FATAL,
				  "%s: 206 without a valid Content-Range",
				  lane_shown(l));
	if (l->cr_total != l->size) {
		l->res.blob_changed = true;
		l->stale = true;
		return lane_abort(l, FETCH_FATAL,
				  "%s: the blob changed: its size is now "
				  "%" PRIu64 ", not %" PRIu64,
				  lane_shown(l), l->cr_total, l->size);
	}
	if (l->cr_start != l->from || l->cr_end + 1 != l->asked_end)
		return lane_abort(l, FETCH_FATAL,
				  "%s: Content-Range %" PRIu64 "-%" PRIu64
				  "/%" PRIu64 " does not match the request "
				  "%" PRIu64 "-%" PRIu64 "/%" PRIu64,
				  lane_shown(l), l->cr_start, l->cr_end,
				  l->cr_total, l->from, l->asked_end - 1,
				  l->size);
	validator = l->validator;
	if (validator != NULL && validator[0] != '\0' &&
	    strcmp(validator, l->etag) != 0 &&
	    strcmp(validator, l->last_modified) != 0) {
		l->res.blob_changed = true;
		l->stale = true;
		return lane_abort(l, FETCH_FATAL,
				  "%s: the blob changed: ETag '%s', "
				  "Last-Modified '%s', expected '%s'",
				  lane_shown(l), l->etag, l->last_modified,
				  validator);
	}
	l->checked = true;
	return 1;
}

static size_t on_body(char *buf, size_t size, size_t n, void *arg)
{
	struct fetch_lane *l = arg;
	struct fetch *f = l->f;
	size_t len = size * n;
	size_t take;

	if (!l->checked && fetch__is_redirect(l->easy))
		return len; /* drain_done follows it once it ends */
	if (l->ahead) {
		/* curl keeps these bytes and passes them again once the
		 * promotion unpauses the transfer. */
		l->held = true;
		return CURL_WRITEFUNC_PAUSE;
	}
	if (!l->checked && lane_check_head(l) == 0)
		return 0;
	if (l->proxy >= 0)
		fetch__proxy_bytes(f->cfg.proxies, l->proxy, len);
	if (l->rx < l->pos) {
		/* A retry from its chunk's start: these were delivered. */
		size_t skip = l->pos - l->rx < len ? (size_t)(l->pos - l->rx)
						   : len;

		l->rx += skip;
		buf += skip;
		len -= skip;
		if (len == 0)
			return size * n;
	}
	if (l->pos >= l->asked_end)
		return lane_abort(l, FETCH_FATAL,
				  "%s: body longer than the %" PRIu64
				  " bytes of its Content-Range",
				  lane_shown(l), l->asked_end - l->start);
	take = len;
	if (l->pos + take > l->asked_end)
		take = (size_t)(l->asked_end - l->pos);
	if (l->pos + take > l->end)
		take = l->end > l->pos ? (size_t)(l->end - l->pos) : 0;
	if (take > 0) {
		f->hooks.on_data(f->hooks.ctx, l->id, l->pos, buf, take);
		l->pos += take;
		l->rx += take;
		l->res.received += take;
	}
	if (l->pos >= l->end && l->end < l->asked_end)
		return lane_abort(l, FETCH_OK, "end lowered");
	if (take < len)
		return lane_abort(l, FETCH_FATAL,
				  "%s: body longer than the %" PRIu64
				  " bytes of its Content-Range",
				  lane_shown(l), l->asked_end - l->start);
	return size * n;
}

int fetch_new(const struct fetch_config *cfg, const struct fetch_hooks *hooks,
	      struct fetch **out)
{
	struct fetch *f;
	int rc = -ENOMEM;

	if (cfg->max_lanes == 0 || hooks->on_data == NULL ||
	    hooks->on_done == NULL || hooks->on_tick == NULL)
		return -EINVAL;
	f = calloc(1, sizeof(*f));
	if (f == NULL)
		return -ENOMEM;
	f->cfg = *cfg;
	f->hooks = *hooks;
	atomic_init(&f->stop, false);
	f->multi = curl_multi_init();
	f->slots = calloc(2 * (size_t)cfg->max_lanes, sizeof(*f->slots));
	f->cur = calloc(cfg->max_lanes, sizeof(*f->cur));
	if (f->multi == NULL || f->slots == NULL || f->cur == NULL)
		goto out;
	{
		bool ok;

		f->headers = fetch__headers(cfg, &ok);
		if (!ok)
			goto out;
	}
	curl_multi_setopt(f->multi, CURLMOPT_PIPELINING, CURLPIPE_MULTIPLEX);
	/* A lane's open request and the one sent ahead of it. */
	curl_multi_setopt(f->multi, CURLMOPT_MAX_HOST_CONNECTIONS,
			  2L * (long)cfg->max_lanes);
	for (uint32_t i = 0; i < 2 * cfg->max_lanes; i++) {
		struct fetch_lane *l = &f->slots[i];

		if (i % 2 == 0)
			f->cur[i / 2] = l;
		l->f = f;
		l->id = i / 2;
		l->proxy = -1;
		l->easy = curl_easy_init();
		if (l->easy == NULL)
			goto out;
		if (fetch__easy_setup(l->easy, cfg, l->errbuf) != CURLE_OK) {
			rc = -EINVAL;
			goto out;
		}
		curl_easy_setopt(l->easy, CURLOPT_BUFFERSIZE,
				 FETCH_BUFFER_SIZE);
		curl_easy_setopt(l->easy, CURLOPT_HEADERFUNCTION, on_header);
		curl_easy_setopt(l->easy, CURLOPT_HEADERDATA, l);
		curl_easy_setopt(l->easy, CURLOPT_WRITEFUNCTION, on_body);
		curl_easy_setopt(l->easy, CURLOPT_WRITEDATA, l);
		curl_easy_setopt(l->easy, CURLOPT_PRIVATE, l);
	}
	*out = f;
	return 0;
out:
	fetch_free(f);
	return rc;
}

/* Reports the end of a lane's transfer; the lane is idle again first so
 * that on_done may start a new transfer on it. */
static void lane_finish(struct fetch_lane *l, CURLcode cc)
{
	struct fetch *f = l->f;
	struct fetch_result res;

	if (!l->refused)
		curl_multi_remove_handle(f->multi, l->easy);
	res = l->res;
	if (l->forced) {
		/* outcome and reason were set where the transfer aborted */
	} else if (cc != CURLE_OK) {
		switch (cc) {
		case CURLE_PEER_FAILED_VERIFICATION:
		case CURLE_SSL_CACERT_BADFILE:
		case CURLE_SSL_CERTPROBLEM:
		case CURLE_UNSUPPORTED_PROTOCOL:
		case CURLE_TOO_MANY_REDIRECTS:
			res.outcome = FETCH_GONE;
			break;
		default:
			/* Everything else, CURLE_OUT_OF_MEMORY included: curl
			 * 7.x reports a response header over its 100 KB limit
			 * so (8.6 says CURLE_TOO_LARGE), and a server must not
			 * be able to make a lane retry at once, forever. */
			res.outcome = FETCH_TRANSIENT;
			break;
		}
		snprintf(res.reason, sizeof(res.reason), "%.120s: %.80s%s",
			 lane_shown(l),
			 l->errbuf[0] ? l->errbuf : curl_easy_strerror(cc),
			 cc == CURLE_OUT_OF_MEMORY
				 ? " (or a response header over curl's limit)"
				 : "");
	} else if (!l->checked) {
		/* No body byte arrived: judge the status alone. */
		long status = 0;

		curl_easy_getinfo(l->easy, CURLINFO_RESPONSE_CODE, &status);
		res.status = status;
		res.outcome = status == 206 ? FETCH_TRANSIENT
					    : fetch_classify_status(status);
		snprintf(res.reason, sizeof(res.reason),
			 "%s: HTTP %ld with an empty body", lane_shown(l),
			 status);
	} else if (l->pos == l->end) {
		res.outcome = FETCH_OK;
	} else {
		res.outcome = FETCH_TRANSIENT;
		snprintf(res.reason, sizeof(res.reason),
			 "%s: short body: %" PRIu64 " of %" PRIu64 " bytes",
			 lane_shown(l), l->pos - l->start, l->end - l->start);
	}
	res.retry_after_ms = l->retry_after_ms;
	l->busy = false;
	l->refused = false;
	f->hooks.on_done(f->hooks.ctx, l->id, &res);
}

/* The lane's other slot: where a request is sent ahead. */
static struct fetch_lane *lane_spare(struct fetch *f, uint32_t lane)
{
	struct fetch_lane *pair = &f->slots[2 * (size_t)lane];

	return f->cur[lane] == pair ? pair + 1 : pair;
}

/* Drops a request sent ahead, without on_done: the scheduler never counted
 * it as started. */
static void slot_abandon(struct fetch_lane *l)
{
	if (!l->busy)
		return;
	curl_multi_remove_handle(l->f->multi, l->easy);
	l->busy = false;
	l->ahead = false;
	l->held = false;
	l->refused = false;
}

/* The chunk index that picks a request's proxy. */
static uint64_t slot_chunk(const struct fetch *f, const struct fetch_lane *l)
{
	return l->from / (f->cfg.chunk != 0 ? f->cfg.chunk : 65536u);
}

/* Points slot l at url, through the proxy the list picks for it (none
 * left: -ENETUNREACH): the configured headers only when url's origin is
 * one they were given for; If-Range (no secret) on every hop;
 * Cache-Control: no-cache when the request asks for it. */
static int slot_aim(struct fetch *f, struct fetch_lane *l, const char *url)
{
	struct curl_slist *creds, *headers;

	if (f->cfg.proxies != NULL) {
		l->proxy = fetch__proxy_choose(f->cfg.proxies, url,
					       slot_chunk(f, l),
					       fetch__now_ms(), l->tried);
		if (l->proxy < 0) {
			l->proxy = -1;
			return -ENETUNREACH;
		}
		curl_easy_setopt(l->easy, CURLOPT_PROXY,
				 fetch__proxy_url(f->cfg.proxies, l->proxy));
		fetch__proxy_request(f->cfg.proxies, l->proxy);
	}
	creds = fetch__sends_headers(&f->cfg, url) ? f->headers : NULL;
	headers = creds;
	if (l->validator != NULL && l->validator[0] != '\0') {
		/* If-Range turns a changed blob into a 200, which the head
		 * check rejects: two versions never mix. The node lives in
		 * the slot, so a request allocates no header list. */
		l->if_range_node.data = l->if_range;
		l->if_range_node.next = creds;
		headers = &l->if_range_node;
	}
	if (l->no_cache) {
		snprintf(l->nocache, sizeof(l->nocache),
			 "Cache-Control: no-cache");
		l->nocache_node.data = l->nocache;
		l->nocache_node.next = headers;
		headers = &l->nocache_node;
	}
	snprintf(l->range, sizeof(l->range), "%" PRIu64 "-%" PRIu64, l->from,
		 l->asked_end - 1);
	curl_easy_setopt(l->easy, CURLOPT_RANGE, l->range);
	curl_easy_setopt(l->easy, CURLOPT_URL, url);
	curl_easy_setopt(l->easy, CURLOPT_HTTPHEADER, headers);
	return 0;
}

/* Forgets what the last response of slot l said; what it delivered
 * stays delivered. */
static void slot_reset_response(struct fetch_lane *l)
{
	uint64_t received = l->res.received;

	l->rx = l->from;
	l->checked = false;
	l->stale = false;
	l->cr_seen = false;
	l->etag[0] = '\0';
	l->last_modified[0] = '\0';
	l->coding[0] = '\0';
	l->retry_after_ms = 0;
	l->forced = false;
	l->errbuf[0] = '\0';
	memset(&l->res, 0, sizeof(l->res));
	l->res.received = received;
}

/* Sets up slot l for GET Range: bytes=start-(end-1) and hands it to curl. */
static int slot_start(struct fetch *f, struct fetch_lane *l,
		      const struct fetch_target *t, uint64_t start,
		      uint64_t end, bool ahead)
{
	l->url = t->url;
	free(l->hop);
	l->hop = NULL;
	l->hops = 0;
	l->validator = t->validator;
	l->size = t->size;
	l->start = start;
	l->end = end;
	l->asked_end = end;
	l->pos = start;
	l->from = start;
	l->tried = 0;
	l->no_cache = t->no_cache;
	memset(&l->res, 0, sizeof(l->res));
	slot_reset_response(l);
	l->ahead = ahead;
	l->held = false;
	l->refused = false;
	if (t->validator != NULL && t->validator[0] != '\0')
		snprintf(l->if_range, sizeof(l->if_range), "If-Range: %s",
			 t->validator);
	if (slot_aim(f, l, t->url) != 0) {
		if (ahead)
			return -ENETUNREACH;
		/* Started all the same, so that it ends as a transfer does,
		 * with its reason, at the end of this turn. */
		l->forced = true;
		l->res.outcome = FETCH_GONE;
		snprintf(l->res.reason, sizeof(l->res.reason),
			 "%s: every proxy of -o proxy= is excluded (they "
			 "served bytes that failed their digest)",
			 lane_shown(l));
		l->refused = true;
		l->busy = true;
		return 0;
	}
	if (curl_multi_add_handle(f->multi, l->easy) != CURLM_OK)
		return -ENOMEM;
	l->busy = true;
	return 0;
}

/* When slot l's transfer, which ended with cc, failed because of its
 * proxy, or brought another version through it, sends the rest of it
 * again at once: through the next proxy (from the start of the chunk it
 * stopped in, so that a cache keys on whole chunks), or through the same
 * one with no-cache; returns 0. Returns 1 when there is nothing to retry
 * or no proxy left. */
static int slot_retry(struct fetch *f, struct fetch_lane *l, CURLcode cc)
{
	struct fetch_proxies *list = f->cfg.proxies;
	uint64_t chunk = f->cfg.chunk != 0 ? f->cfg.chunk : 65536u;
	uint64_t from;
	const char *url = l->hop != NULL ? l->hop : l->url;
	int was = l->proxy;

	if (list == NULL || was < 0 || fetch__proxy_is_direct(list, was) ||
	    l->pos >= l->end)
		return 1;
	if (l->stale && !l->no_cache) {
		/* A cache's old copy, or a new version: the origin says. */
		flog(f, FETCH_LOG_INFO,
		     "lane %u: %s: another version came through proxy %s; "
		     "asking again with Cache-Control: no-cache",
		     l->id, lane_shown(l), fetch__proxy_shown(list, was));
		l->no_cache = true;
	} else if (!l->stale && fetch__proxy_fault(l->easy, cc)) {
		fetch__proxy_failed(list, was, fetch__now_ms());
		l->tried |= 1u << was;
		if (fetch__proxy_choose(list, url, slot_chunk(f, l),
					fetch__now_ms(), l->tried) < 0)
			return 1;
		flog(f, FETCH_LOG_WARN,
		     "lane %u: proxy %s failed (%s); bytes %" PRIu64
		     "-%" PRIu64 " go through the next",
		     l->id, fetch__proxy_shown(list, was),
		     l->forced ? l->res.reason
		     : l->errbuf[0] ? l->errbuf
				    : curl_easy_strerror(cc),
		     l->pos, l->end - 1);
	} else {
		return 1;
	}
	curl_multi_remove_handle(f->multi, l->easy);
	from = l->pos / chunk * chunk;
	l->from = from > l->start ? from : l->start;
	slot_reset_response(l);
	l->held = false;
	if (slot_aim(f, l, url) != 0 ||
	    curl_multi_add_handle(f->multi, l->easy) != CURLM_OK) {
		l->forced = true;
		l->res.outcome = FETCH_TRANSIENT;
		snprintf(l->res.reason, sizeof(l->res.reason),
			 "%s: no proxy left to retry through", lane_shown(l));
		return 1;
	}
	return 0;
}

/* When slot l's finished response is a redirect, sends the same range to
 * its next hop on the same slot (also while sent ahead: a promotion finds
 * it under way) and returns 0. Returns 1 when it is no redirect, or a
 * negative errno with the outcome set (FETCH_GONE for a refused hop). */
static int slot_follow(struct fetch *f, struct fetch_lane *l)
{
	char *next = NULL, why[200];
	int rc;

	rc = fetch__redirect_next(l->easy, l->url,
				  l->hop != NULL ? l->hop : l->url, l->hops,
				  &next, why, sizeof(why));
	if (rc == 1)
		return 1;
	curl_easy_getinfo(l->easy, CURLINFO_RESPONSE_CODE, &l->res.status);
	l->forced = true;
	if (rc != 0) {
		l->res.outcome = rc == -ENOMEM ? FETCH_LOCAL : FETCH_GONE;
		snprintf(l->res.reason, sizeof(l->res.reason), "%s",
			 rc == -ENOMEM ? "out of memory" : why);
		return rc;
	}
	curl_multi_remove_handle(f->multi, l->easy);
	free(l->hop);
	l->hop = next;
	l->hops++;
	slot_reset_response(l);
	l->tried = 0;
	if (slot_aim(f, l, l->hop) != 0 ||
	    curl_multi_add_handle(f->multi, l->easy) != CURLM_OK) {
		l->forced = true;
		l->res.outcome = FETCH_LOCAL;
		snprintf(l->res.reason, sizeof(l->res.reason),
			 "%s: cannot follow a redirect", lane_shown(l));
		return -ENOMEM;
	}
	return 0;
}

int fetch_lane_start(struct fetch *f, uint32_t lane,
		     const struct fetch_target *t, uint64_t start, uint64_t end)
{
	struct fetch_lane *l, *a;

	if (lane >= f->cfg.max_lanes || start >= end || end > t->size)
		return -EINVAL;
	l = f->cur[lane];
	if (l->busy)
		return -EBUSY;
	a = lane_spare(f, lane);
	if (a->busy && a->ahead && a->start == start && a->asked_end == end &&
	    a->url == t->url) {
		/* The request queued behind the last one is under way:
		 * promote it; its held bytes come now. */
		f->cur[lane] = a;
		a->ahead = false;
		if (a->held) {
			a->held = false;
			curl_easy_pause(a->easy, CURLPAUSE_CONT);
		}
		return 0;
	}
	slot_abandon(a);
	return slot_start(f, l, t, start, end, false);
}

int fetch_lane_queue(struct fetch *f, uint32_t lane,
		     const struct fetch_target *t, uint64_t start, uint64_t end)
{
	struct fetch_lane *a;

	if (lane >= f->cfg.max_lanes || start >= end || end > t->size)
		return -EINVAL;
	if (!f->cur[lane]->busy)
		return -EINVAL;
	a = lane_spare(f, lane);
	slot_abandon(a);
	return slot_start(f, a, t, start, end, true);
}

int fetch_lane_proxy(struct fetch *f, uint32_t lane)
{
	struct fetch_lane *l;

	if (lane >= f->cfg.max_lanes || !f->cur[lane]->busy)
		return -1;
	l = f->cur[lane];
	if (l->proxy < 0 || fetch__proxy_is_direct(f->cfg.proxies, l->proxy))
		return -1;
	return l->proxy;
}

void fetch_lane_set_end(struct fetch *f, uint32_t lane, uint64_t end)
{
	struct fetch_lane *l;

	if (lane >= f->cfg.max_lanes)
		return;
	l = f->cur[lane];
	if (!l->busy || end >= l->end)
		return;
	l->end = end > l->pos ? end : l->pos;
	/* Already there: end the transfer now rather than at the next
	 * byte, which may never come. */
	if (l->pos >= l->end) {
		l->forced = true;
		l->res.outcome = FETCH_OK;
		snprintf(l->res.reason, sizeof(l->res.reason), "end lowered");
		lane_finish(l, CURLE_OK);
	}
}

void fetch_lane_cancel(struct fetch *f, uint32_t lane)
{
	struct fetch_lane *l;

	if (lane >= f->cfg.max_lanes)
		return;
	/* A cancel drops the queued range too. */
	slot_abandon(lane_spare(f, lane));
	l = f->cur[lane];
	if (!l->busy)
		return;
	l->forced = true;
	l->res.outcome = FETCH_CANCELLED;
	snprintf(l->res.reason, sizeof(l->res.reason), "cancelled");
	lane_finish(l, CURLE_OK);
}

/* Reports every transfer curl finished. */
static void drain_done(struct fetch *f)
{
	CURLMsg *msg;
	int left;

	while ((msg = curl_multi_info_read(f->multi, &left)) != NULL) {
		struct fetch_lane *l = NULL;

		if (msg->msg != CURLMSG_DONE)
			continue;
		curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE,
				  (char **)&l);
		if (l == NULL || !l->busy)
			continue;
		if (msg->data.result == CURLE_OK && !l->forced &&
		    slot_follow(f, l) == 0)
			continue;
		if (slot_retry(f, l, msg->data.result) == 0)
			continue;
		if (l->ahead)
			/* Ended before its START (a refused connection, an
			 * error with no body): forget it; the START, if it
			 * comes, asks again and hears the reason itself. */
			slot_abandon(l);
		else
			lane_finish(l, msg->data.result);
	}
}

static void *fetch_loop(void *arg)
{
	struct fetch *f = arg;

	while (!atomic_load(&f->stop)) {
		int running = 0;
		long timeout_ms;
		CURLMcode mc;

		/* The scheduler sees every turn's bytes and completions before
		 * the loop sleeps, so that a finished or yielded lane gets its
		 * next range in the same turn. */
		mc = curl_multi_perform(f->multi, &running);
		if (mc != CURLM_OK)
			flog(f, FETCH_LOG_ERR, "curl_multi_perform: %s",
			     curl_multi_strerror(mc));
		drain_done(f);
		timeout_ms = f->hooks.on_tick(f->hooks.ctx);
		/* A request sent ahead of one that has ended and that this
		 * turn did not promote is no longer wanted (pace.h). */
		for (uint32_t i = 0; i < f->cfg.max_lanes; i++)
			if (!f->cur[i]->busy)
				slot_abandon(lane_spare(f, i));
		/* Requests with no proxy to go through end now, and the
		 * scheduler hears it next turn. */
		for (uint32_t i = 0; i < f->cfg.max_lanes; i++)
			if (f->cur[i]->busy && f->cur[i]->refused) {
				lane_finish(f->cur[i], CURLE_OK);
				timeout_ms = 0;
			}
		if (timeout_ms < 0 || timeout_ms > 1000)
			timeout_ms = 1000;
		curl_multi_poll(f->multi, NULL, 0, (int)timeout_ms, NULL);
	}
	return NULL;
}

int fetch_start(struct fetch *f)
{
	int rc = pthread_create(&f->thread, NULL, fetch_loop, f);

	if (rc != 0)
		return -rc;
	f->started = true;
	return 0;
}

void fetch_wake(struct fetch *f)
{
	curl_multi_wakeup(f->multi);
}

void fetch_free(struct fetch *f)
{
	if (f == NULL)
		return;
	if (f->started) {
		atomic_store(&f->stop, true);
		curl_multi_wakeup(f->multi);
		pthread_join(f->thread, NULL);
	}
	for (uint32_t i = 0; f->slots != NULL && i < 2 * f->cfg.max_lanes;
	     i++) {
		struct fetch_lane *l = &f->slots[i];

		if (l->busy)
			curl_multi_remove_handle(f->multi, l->easy);
		if (l->easy != NULL)
			curl_easy_cleanup(l->easy);
		free(l->hop);
	}
	free(f->slots);
	free(f->cur);
	curl_slist_free_all(f->headers);
	if (f->multi != NULL)
		curl_multi_cleanup(f->multi);
	free(f);
}

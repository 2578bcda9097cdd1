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
struct fetch_slot {
	struct fetch *f;
	uint32_t id; /* the lane it belongs to, for the hooks */
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
	struct fetch__head head; /* of the response under way */
	bool forced; /* the write callback aborted with `res` */
	struct fetch_result res;
	char range[48];
	char shown[160]; /* url without userinfo, cut, for reasons */
	char if_range[300];
	struct curl_slist if_range_node; /* heads the shared header list */
	char nocache[32];
	struct curl_slist nocache_node;	 /* before it, when no_cache */
	char errbuf[CURL_ERROR_SIZE];
	bool if_match; /* the validator goes in If-Match, not If-Range */
	/* Credentials that change (cfg.auth): the set this request uses;
	 * a refusal for it holds the slot (auth_wait) until a newer set
	 * comes, then the request is sent once more (auth_retried). */
	struct fetch__cref *cref;
	bool auth_wait;
	bool auth_retried;
	uint64_t auth_gen;
	uint64_t auth_until_ns;
	char errbody[512]; /* an error's first bytes: S3's code */
	size_t nerrbody;
};

struct fetch {
	struct fetch_config cfg;
	struct fetch_hooks hooks;
	CURLM *multi;
	struct curl_slist *headers; /* the configured headers */
	struct fetch_slot *slots;   /* 2 per lane */
	struct fetch_slot **cur;    /* per lane: the slot of its open request */
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

/* The slot's first URL as reasons show it: without userinfo, cut. */
static const char *slot_shown(struct fetch_slot *s)
{
	fetch__url_shown(s->url, s->shown, sizeof(s->shown));
	return s->shown;
}

/* Ends the write callback's transfer with an outcome of our choosing. */
static size_t slot_abort(struct fetch_slot *s, enum fetch_outcome outcome,
			 const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static size_t slot_abort(struct fetch_slot *s, enum fetch_outcome outcome,
			 const char *fmt, ...)
{
	va_list ap;

	s->forced = true;
	s->res.outcome = outcome;
	va_start(ap, fmt);
	vsnprintf(s->res.reason, sizeof(s->res.reason), fmt, ap);
	va_end(ap);
	return 0; /* curl aborts the transfer with CURLE_WRITE_ERROR */
}

static size_t on_header(char *line, size_t size, size_t n, void *arg)
{
	struct fetch_slot *s = arg;

	fetch__head_line(&s->head, line, size * n);
	return size * n;
}

/* Checks the head of a response before its first body byte is used. */
static size_t slot_check_head(struct fetch_slot *s)
{
	long status = 0;
	const char *validator;

	curl_easy_getinfo(s->easy, CURLINFO_RESPONSE_CODE, &status);
	s->res.status = status;
	if (s->proxy >= 0) {
		bool direct = fetch__proxy_is_direct(s->f->cfg.proxies,
						     s->proxy);

		if (direct || !fetch__proxy_fault(s->easy, CURLE_OK))
			fetch__proxy_answered(
				s->f->cfg.proxies, s->proxy,
				direct ? 0 : fetch__proxy_cache_status(s->easy));
	}
	if (status == 412 && s->if_match) {
		/* If-Match sent: the object is another version now. */
		s->res.blob_changed = true;
		return slot_abort(s, FETCH_FATAL,
				  "%s: HTTP 412: the blob changed (its ETag is "
				  "no longer %s)",
				  slot_shown(s), s->validator);
	}
	if (status != 206) {
		enum fetch_outcome o = fetch_classify_status(status);

		if (status == 200) {
			/* With If-Range sent, a 200 says the blob changed. */
			s->res.blob_changed =
				s->validator != NULL && s->validator[0] != '\0';
			s->stale = s->res.blob_changed;
			return slot_abort(s, o,
					  "%s: HTTP 200 to a range request "
					  "(%s)",
					  slot_shown(s),
					  s->res.blob_changed
						  ? "the blob changed"
						  : "Range is ignored");
		}
		return slot_abort(s, o, "%s: HTTP %ld", slot_shown(s), status);
	}
	if (s->head.coding[0] != '\0')
		/* The range is of the encoded bytes, and they are not the
		 * blob's: never store them as its bytes. */
		return slot_abort(s, FETCH_FATAL,
				  "%s: '%s' although identity was asked for: "
				  "pacefs serves the bytes as stored only",
				  slot_shown(s), s->head.coding);
	if (!s->head.cr_seen)
		return slot_abort(s, FETCH_FATAL,
				  "%s: 206 without a valid Content-Range",
				  slot_shown(s));
	if (s->head.cr_total != s->size) {
		s->res.blob_changed = true;
		s->stale = true;
		return slot_abort(s, FETCH_FATAL,
				  "%s: the blob changed: its size is now "
				  "%" PRIu64 ", not %" PRIu64,
				  slot_shown(s), s->head.cr_total, s->size);
	}
	if (s->head.cr_start != s->from || s->head.cr_end + 1 != s->asked_end)
		return slot_abort(s, FETCH_FATAL,
				  "%s: Content-Range %" PRIu64 "-%" PRIu64
				  "/%" PRIu64 " does not match the request "
				  "%" PRIu64 "-%" PRIu64 "/%" PRIu64,
				  slot_shown(s), s->head.cr_start,
				  s->head.cr_end, s->head.cr_total, s->from,
				  s->asked_end - 1, s->size);
	validator = s->validator;
	if (validator != NULL && validator[0] != '\0' &&
	    strcmp(validator, s->head.etag) != 0 &&
	    strcmp(validator, s->head.last_modified) != 0) {
		s->res.blob_changed = true;
		s->stale = true;
		return slot_abort(s, FETCH_FATAL,
				  "%s: the blob changed: ETag '%s', "
				  "Last-Modified '%s', expected '%s'",
				  slot_shown(s), s->head.etag,
				  s->head.last_modified, validator);
	}
	s->checked = true;
	return 1;
}

/* True when slot s's response is a status that may refuse its
 * credentials. */
static bool slot_auth_status(struct fetch_slot *s)
{
	long status = 0;

	curl_easy_getinfo(s->easy, CURLINFO_RESPONSE_CODE, &status);
	return status == 400 || status == 401 || status == 403;
}

static size_t on_body(char *buf, size_t size, size_t n, void *arg)
{
	struct fetch_slot *s = arg;
	struct fetch *f = s->f;
	size_t len = size * n;
	size_t take;

	if (!s->checked && fetch__is_redirect(s->easy))
		return len; /* drain_done follows it once it ends */
	if (!s->checked && s->cref != NULL && !s->auth_retried &&
	    slot_auth_status(s)) {
		/* Maybe refused for its credentials: keep the start of the
		 * error for drain_done to judge. */
		size_t keep = len;

		if (keep > sizeof(s->errbody) - 1 - s->nerrbody)
			keep = sizeof(s->errbody) - 1 - s->nerrbody;
		memcpy(s->errbody + s->nerrbody, buf, keep);
		s->nerrbody += keep;
		s->errbody[s->nerrbody] = '\0';
		return len;
	}
	if (s->ahead) {
		/* curl keeps these bytes and passes them again once the
		 * promotion unpauses the transfer. */
		s->held = true;
		return CURL_WRITEFUNC_PAUSE;
	}
	if (!s->checked && slot_check_head(s) == 0)
		return 0;
	if (s->proxy >= 0)
		fetch__proxy_bytes(f->cfg.proxies, s->proxy, len);
	if (s->rx < s->pos) {
		/* A retry from its chunk's start: these were delivered. */
		size_t skip = s->pos - s->rx < len ? (size_t)(s->pos - s->rx)
						   : len;

		s->rx += skip;
		buf += skip;
		len -= skip;
		if (len == 0)
			return size * n;
	}
	if (s->pos >= s->asked_end)
		return slot_abort(s, FETCH_FATAL,
				  "%s: body longer than the %" PRIu64
				  " bytes of its Content-Range",
				  slot_shown(s), s->asked_end - s->start);
	take = len;
	if (s->pos + take > s->asked_end)
		take = (size_t)(s->asked_end - s->pos);
	if (s->pos + take > s->end)
		take = s->end > s->pos ? (size_t)(s->end - s->pos) : 0;
	if (take > 0) {
		f->hooks.on_data(f->hooks.ctx, s->id, s->pos, buf, take);
		s->pos += take;
		s->rx += take;
		s->res.received += take;
	}
	if (s->pos >= s->end && s->end < s->asked_end)
		return slot_abort(s, FETCH_OK, "end lowered");
	if (take < len)
		return slot_abort(s, FETCH_FATAL,
				  "%s: body longer than the %" PRIu64
				  " bytes of its Content-Range",
				  slot_shown(s), s->asked_end - s->start);
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
		struct fetch_slot *s = &f->slots[i];

		if (i % 2 == 0)
			f->cur[i / 2] = s;
		s->f = f;
		s->id = i / 2;
		s->proxy = -1;
		s->easy = curl_easy_init();
		if (s->easy == NULL)
			goto out;
		if (fetch__easy_setup(s->easy, cfg, s->errbuf) != CURLE_OK) {
			rc = -EINVAL;
			goto out;
		}
		curl_easy_setopt(s->easy, CURLOPT_BUFFERSIZE,
				 FETCH_BUFFER_SIZE);
		curl_easy_setopt(s->easy, CURLOPT_HEADERFUNCTION, on_header);
		curl_easy_setopt(s->easy, CURLOPT_HEADERDATA, s);
		curl_easy_setopt(s->easy, CURLOPT_WRITEFUNCTION, on_body);
		curl_easy_setopt(s->easy, CURLOPT_WRITEDATA, s);
		curl_easy_setopt(s->easy, CURLOPT_PRIVATE, s);
	}
	*out = f;
	return 0;
out:
	fetch_free(f);
	return rc;
}

/* Reports the end of the transfer of a lane's open slot; the slot is idle
 * again first so that on_done may start a new transfer on the lane. */
static void slot_finish(struct fetch_slot *s, CURLcode cc)
{
	struct fetch *f = s->f;
	struct fetch_result res;

	if (!s->refused)
		curl_multi_remove_handle(f->multi, s->easy);
	fetch__auth_put(s->cref);
	s->cref = NULL;
	s->auth_wait = false;
	res = s->res;
	if (s->forced) {
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
			 slot_shown(s),
			 s->errbuf[0] ? s->errbuf : curl_easy_strerror(cc),
			 cc == CURLE_OUT_OF_MEMORY
				 ? " (or a response header over curl's limit)"
				 : "");
	} else if (!s->checked) {
		/* No body byte arrived: judge the status alone. */
		long status = 0;

		curl_easy_getinfo(s->easy, CURLINFO_RESPONSE_CODE, &status);
		res.status = status;
		res.outcome = status == 206 ? FETCH_TRANSIENT
					    : fetch_classify_status(status);
		snprintf(res.reason, sizeof(res.reason),
			 "%s: HTTP %ld with an empty body", slot_shown(s),
			 status);
	} else if (s->pos == s->end) {
		res.outcome = FETCH_OK;
	} else {
		res.outcome = FETCH_TRANSIENT;
		snprintf(res.reason, sizeof(res.reason),
			 "%s: short body: %" PRIu64 " of %" PRIu64 " bytes",
			 slot_shown(s), s->pos - s->start, s->end - s->start);
	}
	res.retry_after_ms = s->head.retry_after_ms;
	s->busy = false;
	s->refused = false;
	f->hooks.on_done(f->hooks.ctx, s->id, &res);
}

/* The lane's other slot: where a request is sent ahead. */
static struct fetch_slot *lane_spare(struct fetch *f, uint32_t lane)
{
	struct fetch_slot *pair = &f->slots[2 * (size_t)lane];

	return f->cur[lane] == pair ? pair + 1 : pair;
}

/* Drops a request sent ahead, without on_done: the scheduler never counted
 * it as started. */
static void slot_abandon(struct fetch_slot *s)
{
	if (!s->busy)
		return;
	curl_multi_remove_handle(s->f->multi, s->easy);
	fetch__auth_put(s->cref);
	s->cref = NULL;
	s->auth_wait = false;
	s->busy = false;
	s->ahead = false;
	s->held = false;
	s->refused = false;
}

/* The chunk index that picks a request's proxy. */
static uint64_t slot_chunk(const struct fetch *f, const struct fetch_slot *s)
{
	return s->from / (f->cfg.chunk != 0 ? f->cfg.chunk : 65536u);
}

/* Points slot s at url, through the proxy the list picks for it (none
 * left: -ENETUNREACH): the configured headers only when url's origin is
 * one they were given for; If-Range (no secret) on every hop;
 * Cache-Control: no-cache when the request asks for it. */
static int slot_aim(struct fetch *f, struct fetch_slot *s, const char *url)
{
	struct curl_slist *creds, *headers;
	bool allowed = fetch__sends_headers(&f->cfg, url);

	if (f->cfg.proxies != NULL) {
		s->proxy = fetch__proxy_choose(f->cfg.proxies, url,
					       slot_chunk(f, s),
					       fetch__now_ms(), s->tried);
		if (s->proxy < 0) {
			s->proxy = -1;
			return -ENETUNREACH;
		}
		curl_easy_setopt(s->easy, CURLOPT_PROXY,
				 fetch__proxy_url(f->cfg.proxies, s->proxy));
		fetch__proxy_request(f->cfg.proxies, s->proxy);
	}
	creds = !allowed	  ? NULL
		: s->cref != NULL ? s->cref->headers
				  : f->headers;
	fetch__auth_apply(s->easy, s->cref, allowed);
	headers = creds;
	if (s->validator != NULL && s->validator[0] != '\0') {
		/* If-Range turns a changed blob into a 200, which the head
		 * check rejects: two versions never mix. The node lives in
		 * the slot, so a request allocates no header list. */
		s->if_range_node.data = s->if_range;
		s->if_range_node.next = creds;
		headers = &s->if_range_node;
	}
	if (s->no_cache) {
		snprintf(s->nocache, sizeof(s->nocache),
			 "Cache-Control: no-cache");
		s->nocache_node.data = s->nocache;
		s->nocache_node.next = headers;
		headers = &s->nocache_node;
	}
	snprintf(s->range, sizeof(s->range), "%" PRIu64 "-%" PRIu64, s->from,
		 s->asked_end - 1);
	curl_easy_setopt(s->easy, CURLOPT_RANGE, s->range);
	curl_easy_setopt(s->easy, CURLOPT_URL, url);
	curl_easy_setopt(s->easy, CURLOPT_HTTPHEADER, headers);
	return 0;
}

/* Forgets what the last response of slot s said; what it delivered
 * stays delivered. */
static void slot_reset_response(struct fetch_slot *s)
{
	uint64_t received = s->res.received;

	s->rx = s->from;
	s->checked = false;
	s->stale = false;
	memset(&s->head, 0, sizeof(s->head));
	s->forced = false;
	s->errbuf[0] = '\0';
	s->errbody[0] = '\0';
	s->nerrbody = 0;
	memset(&s->res, 0, sizeof(s->res));
	s->res.received = received;
}

/* Sets up slot s for GET Range: bytes=start-(end-1) and hands it to curl. */
static int slot_start(struct fetch *f, struct fetch_slot *s,
		      const struct fetch_target *t, uint64_t start,
		      uint64_t end, bool ahead)
{
	s->url = t->url;
	free(s->hop);
	s->hop = NULL;
	s->hops = 0;
	s->validator = t->validator;
	s->size = t->size;
	s->start = start;
	s->end = end;
	s->asked_end = end;
	s->pos = start;
	s->from = start;
	s->tried = 0;
	s->no_cache = t->no_cache;
	memset(&s->res, 0, sizeof(s->res));
	slot_reset_response(s);
	s->ahead = ahead;
	s->held = false;
	s->refused = false;
	s->if_match = t->if_match;
	s->auth_wait = false;
	s->auth_retried = false;
	fetch__auth_put(s->cref);
	s->cref = fetch__auth_get(f->cfg.auth);
	if (t->validator != NULL && t->validator[0] != '\0')
		snprintf(s->if_range, sizeof(s->if_range), "%s: %s",
			 t->if_match ? "If-Match" : "If-Range", t->validator);
	if (slot_aim(f, s, t->url) != 0) {
		if (ahead)
			return -ENETUNREACH;
		/* Started all the same, so that it ends as a transfer does,
		 * with its reason, at the end of this turn. */
		s->forced = true;
		s->res.outcome = FETCH_GONE;
		snprintf(s->res.reason, sizeof(s->res.reason),
			 "%s: every proxy of -o proxy= is excluded (they "
			 "served bytes that failed their digest)",
			 slot_shown(s));
		s->refused = true;
		s->busy = true;
		return 0;
	}
	if (curl_multi_add_handle(f->multi, s->easy) != CURLM_OK)
		return -ENOMEM;
	s->busy = true;
	return 0;
}

/* When slot s's transfer, which ended with cc, failed because of its
 * proxy, or brought another version through it, sends the rest of it
 * again at once: through the next proxy (from the start of the chunk it
 * stopped in, so that a cache keys on whole chunks), or through the same
 * one with no-cache; returns 0. Returns 1 when there is nothing to retry
 * or no proxy left. */
static int slot_retry(struct fetch *f, struct fetch_slot *s, CURLcode cc)
{
	struct fetch_proxies *list = f->cfg.proxies;
	uint64_t chunk = f->cfg.chunk != 0 ? f->cfg.chunk : 65536u;
	uint64_t from;
	const char *url = s->hop != NULL ? s->hop : s->url;
	int was = s->proxy;

	if (list == NULL || was < 0 || fetch__proxy_is_direct(list, was) ||
	    s->pos >= s->end)
		return 1;
	if (s->stale && !s->no_cache) {
		/* A cache's old copy, or a new version: the origin says. */
		flog(f, FETCH_LOG_INFO,
		     "lane %u: %s: another version came through proxy %s; "
		     "asking again with Cache-Control: no-cache",
		     s->id, slot_shown(s), fetch__proxy_shown(list, was));
		s->no_cache = true;
	} else if (!s->stale && fetch__proxy_fault(s->easy, cc)) {
		fetch__proxy_failed(list, was, fetch__now_ms());
		s->tried |= 1u << was;
		if (fetch__proxy_choose(list, url, slot_chunk(f, s),
					fetch__now_ms(), s->tried) < 0)
			return 1;
		flog(f, FETCH_LOG_WARN,
		     "lane %u: proxy %s failed (%s); bytes %" PRIu64
		     "-%" PRIu64 " go through the next",
		     s->id, fetch__proxy_shown(list, was),
		     s->forced ? s->res.reason
		     : s->errbuf[0] ? s->errbuf
				    : curl_easy_strerror(cc),
		     s->pos, s->end - 1);
	} else {
		return 1;
	}
	curl_multi_remove_handle(f->multi, s->easy);
	from = s->pos / chunk * chunk;
	s->from = from > s->start ? from : s->start;
	slot_reset_response(s);
	s->held = false;
	if (slot_aim(f, s, url) != 0 ||
	    curl_multi_add_handle(f->multi, s->easy) != CURLM_OK) {
		s->forced = true;
		s->res.outcome = FETCH_TRANSIENT;
		snprintf(s->res.reason, sizeof(s->res.reason),
			 "%s: no proxy left to retry through", slot_shown(s));
		return 1;
	}
	return 0;
}

/* When slot s's finished response is a redirect, sends the same range to
 * its next hop on the same slot (also while sent ahead: a promotion finds
 * it under way) and returns 0. Returns 1 when it is no redirect, or a
 * negative errno with the outcome set (FETCH_GONE for a refused hop). */
static int slot_follow(struct fetch *f, struct fetch_slot *s)
{
	char *next = NULL, why[200];
	int rc;

	rc = fetch__redirect_next(s->easy, s->url,
				  s->hop != NULL ? s->hop : s->url, s->hops,
				  &next, why, sizeof(why));
	if (rc == 1)
		return 1;
	curl_easy_getinfo(s->easy, CURLINFO_RESPONSE_CODE, &s->res.status);
	s->forced = true;
	if (rc != 0) {
		s->res.outcome = rc == -ENOMEM ? FETCH_LOCAL : FETCH_GONE;
		snprintf(s->res.reason, sizeof(s->res.reason), "%s",
			 rc == -ENOMEM ? "out of memory" : why);
		return rc;
	}
	curl_multi_remove_handle(f->multi, s->easy);
	free(s->hop);
	s->hop = next;
	s->hops++;
	slot_reset_response(s);
	s->tried = 0;
	if (slot_aim(f, s, s->hop) != 0 ||
	    curl_multi_add_handle(f->multi, s->easy) != CURLM_OK) {
		s->forced = true;
		s->res.outcome = FETCH_LOCAL;
		snprintf(s->res.reason, sizeof(s->res.reason),
			 "%s: cannot follow a redirect", slot_shown(s));
		return -ENOMEM;
	}
	return 0;
}

int fetch_lane_start(struct fetch *f, uint32_t lane,
		     const struct fetch_target *t, uint64_t start, uint64_t end)
{
	struct fetch_slot *s, *a;

	if (lane >= f->cfg.max_lanes || start >= end || end > t->size)
		return -EINVAL;
	s = f->cur[lane];
	if (s->busy)
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
	return slot_start(f, s, t, start, end, false);
}

int fetch_lane_queue(struct fetch *f, uint32_t lane,
		     const struct fetch_target *t, uint64_t start, uint64_t end)
{
	struct fetch_slot *a;

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
	struct fetch_slot *s;

	if (lane >= f->cfg.max_lanes || !f->cur[lane]->busy)
		return -1;
	s = f->cur[lane];
	if (s->proxy < 0 || fetch__proxy_is_direct(f->cfg.proxies, s->proxy))
		return -1;
	return s->proxy;
}

void fetch_lane_set_end(struct fetch *f, uint32_t lane, uint64_t end)
{
	struct fetch_slot *s;

	if (lane >= f->cfg.max_lanes)
		return;
	s = f->cur[lane];
	if (!s->busy || end >= s->end)
		return;
	s->end = end > s->pos ? end : s->pos;
	/* Already there: end the transfer now rather than at the next
	 * byte, which may never come. */
	if (s->pos >= s->end) {
		s->forced = true;
		s->res.outcome = FETCH_OK;
		snprintf(s->res.reason, sizeof(s->res.reason), "end lowered");
		slot_finish(s, CURLE_OK);
	}
}

void fetch_lane_cancel(struct fetch *f, uint32_t lane)
{
	struct fetch_slot *s;

	if (lane >= f->cfg.max_lanes)
		return;
	/* A cancel drops the queued range too. */
	slot_abandon(lane_spare(f, lane));
	s = f->cur[lane];
	if (!s->busy)
		return;
	s->forced = true;
	s->res.outcome = FETCH_CANCELLED;
	snprintf(s->res.reason, sizeof(s->res.reason), "cancelled");
	slot_finish(s, CURLE_OK);
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* When slot s's response refused its credentials and it was not sent
 * again yet, holds it until newer ones come (slot_auth_resume) and
 * returns true. */
static bool slot_auth_hold(struct fetch *f, struct fetch_slot *s)
{
	long status = 0;

	if (s->cref == NULL || s->auth_retried)
		return false;
	curl_easy_getinfo(s->easy, CURLINFO_RESPONSE_CODE, &status);
	if (!fetch__auth_refused(status, s->errbody))
		return false;
	curl_multi_remove_handle(f->multi, s->easy);
	s->auth_wait = true;
	s->auth_gen = s->cref->gen;
	s->auth_until_ns =
		mono_ns() + (uint64_t)FETCH_AUTH_WAIT_MS * 1000000u;
	flog(f, FETCH_LOG_INFO,
	     "lane %u: %s: HTTP %ld refuses the credentials; asking for "
	     "new ones",
	     s->id, slot_shown(s), status);
	fetch__auth_expired(f->cfg.auth, s->auth_gen);
	return true;
}

/* Sends again, once, each held request for which newer credentials came
 * (or whose wait is over: then with the ones there are). Returns whether
 * one still waits. */
static bool slot_auth_resume(struct fetch *f)
{
	uint64_t gen = 0, now = 0;
	bool waiting = false;

	for (uint32_t i = 0; i < 2 * f->cfg.max_lanes; i++) {
		struct fetch_slot *s = &f->slots[i];

		if (!s->busy || !s->auth_wait)
			continue;
		if (gen == 0) {
			gen = fetch__auth_gen(f->cfg.auth);
			now = mono_ns();
		}
		if (gen <= s->auth_gen && now < s->auth_until_ns) {
			waiting = true;
			continue;
		}
		s->auth_wait = false;
		s->auth_retried = true;
		fetch__auth_put(s->cref);
		s->cref = fetch__auth_get(f->cfg.auth);
		free(s->hop);
		s->hop = NULL;
		s->hops = 0;
		slot_reset_response(s);
		if (slot_aim(f, s, s->url) != 0 ||
		    curl_multi_add_handle(f->multi, s->easy) != CURLM_OK) {
			s->forced = true;
			s->res.outcome = FETCH_LOCAL;
			snprintf(s->res.reason, sizeof(s->res.reason),
				 "%s: cannot send again", slot_shown(s));
			slot_finish(s, CURLE_OK);
		}
	}
	return waiting;
}

/* Reports every transfer curl finished. */
static void drain_done(struct fetch *f)
{
	CURLMsg *msg;
	int left;

	while ((msg = curl_multi_info_read(f->multi, &left)) != NULL) {
		struct fetch_slot *s = NULL;

		if (msg->msg != CURLMSG_DONE)
			continue;
		curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE,
				  (char **)&s);
		if (s == NULL || !s->busy)
			continue;
		if (msg->data.result == CURLE_OK && !s->forced &&
		    slot_follow(f, s) == 0)
			continue;
		if (msg->data.result == CURLE_OK && !s->forced &&
		    !s->checked && !s->ahead && slot_auth_hold(f, s))
			continue;
		if (slot_retry(f, s, msg->data.result) == 0)
			continue;
		if (s->ahead)
			/* Ended before its START (a refused connection, an
			 * error with no body): forget it; the START, if it
			 * comes, asks again and hears the reason itself. */
			slot_abandon(s);
		else
			slot_finish(s, msg->data.result);
	}
}

static void *fetch_loop(void *arg)
{
	struct fetch *f = arg;

	while (!atomic_load(&f->stop)) {
		int running = 0;
		long timeout_ms;
		bool waiting;
		CURLMcode mc;

		/* The scheduler sees every turn's bytes and completions before
		 * the loop sleeps, so that a finished or yielded lane gets its
		 * next range in the same turn. */
		mc = curl_multi_perform(f->multi, &running);
		if (mc != CURLM_OK)
			flog(f, FETCH_LOG_ERR, "curl_multi_perform: %s",
			     curl_multi_strerror(mc));
		drain_done(f);
		waiting = f->cfg.auth != NULL && slot_auth_resume(f);
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
				slot_finish(f->cur[i], CURLE_OK);
				timeout_ms = 0;
			}
		if (timeout_ms < 0 || timeout_ms > 1000)
			timeout_ms = 1000;
		if (waiting && timeout_ms > 50)
			timeout_ms = 50;
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
		struct fetch_slot *s = &f->slots[i];

		if (s->busy)
			curl_multi_remove_handle(f->multi, s->easy);
		fetch__auth_put(s->cref);
		if (s->easy != NULL)
			curl_easy_cleanup(s->easy);
		free(s->hop);
	}
	free(f->slots);
	free(f->cur);
	curl_slist_free_all(f->headers);
	if (f->multi != NULL)
		curl_multi_cleanup(f->multi);
	free(f);
}

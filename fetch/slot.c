/* slot: one range transfer on a lane's slot: the request (range, validator,
 * headers for its origin, proxy), the checks of the response's head and
 * body, redirects, retries through the next proxy, and requests held
 * while credentials are renewed. Runs on the event thread (fetch.c). */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <curl/curl.h>

#include "fetch/fetch.h"
#include "fetch/fetch_int.h"

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

size_t fetch__slot_on_header(char *line, size_t size, size_t n, void *arg)
{
	struct fetch_slot *s = arg;

	fetch__head_line(&s->head, line, size * n);
	return size * n;
}

/* What an answer naming another version says: through a proxy, only that
 * the proxy serves another one (fetch__slot_retry asks the next route). */
static const char *slot_changed(const struct fetch_slot *s)
{
	if (s->proxy < 0 || fetch__proxy_is_direct(s->f->cfg.proxies, s->proxy))
		return "the blob changed";
	return "another version through the proxy";
}

/* The proxy of slot s answered with a response that is not its own fault
 * (fetch__proxy_fault) and passed the checks, or is an origin's answer
 * passed through: it works. A refused answer is a failure of the proxy
 * (fetch__slot_retry), never a sign that it works. */
static void slot_answered(struct fetch_slot *s)
{
	struct fetch_proxies *list = s->f->cfg.proxies;
	bool direct;

	if (s->proxy < 0)
		return;
	direct = fetch__proxy_is_direct(list, s->proxy);
	if (direct || !fetch__proxy_fault(s->easy, CURLE_OK))
		fetch__proxy_answered(
			list, s->proxy,
			direct ? 0 : fetch__proxy_cache_status(s->easy));
}

/* Slot s's response serves the pinned version: every proxy that named
 * another one for this request gave a wrong answer. */
static void slot_blame(struct fetch_slot *s)
{
	struct fetch_proxies *list = s->f->cfg.proxies;

	for (int i = 0; s->suspect != 0 && i < FETCH_PROXIES_MAX; i++) {
		if ((s->suspect & (1u << i)) == 0)
			continue;
		s->suspect &= ~(1u << i);
		fetch__proxy_bad(list, i, fetch__now_ms());
		fetch__log(s->f, FETCH_LOG_WARN,
			   "lane %u: proxy %s gave a wrong answer (%s), where "
			   "%s%s serves the pinned version",
			   s->id, fetch__proxy_shown(list, i), s->suspect_why,
			   fetch__proxy_is_direct(list, s->proxy) ? ""
								  : "proxy ",
			   fetch__proxy_shown(list, s->proxy));
	}
}

/* Whether the response's validator (ETag or Last-Modified) is the
 * target's, when it has one. */
static bool slot_validator_ok(const struct fetch_slot *s)
{
	const char *v = s->validator;

	return v == NULL || v[0] == '\0' || strcmp(v, s->head.etag) == 0 ||
	       strcmp(v, s->head.last_modified) == 0;
}

/* A body sent with a Content-Encoding although identity was asked for:
 * a range of it is of the encoded bytes, not the blob's, and a stream's
 * are not the blob's either; never stored as its bytes. */
static size_t slot_refuse_coding(struct fetch_slot *s)
{
	return slot_abort(s, FETCH_FATAL,
			  "%s: '%s' although identity was asked for: "
			  "pacefs serves the bytes as stored only",
			  slot_shown(s), s->head.coding);
}

/* Checks the head of a whole-object stream's answer (a GET without
 * Range): a 200 of the identity bytes, whose Content-Length, when sent,
 * is the blob's size, and whose validator is the target's. */
static size_t slot_check_stream(struct fetch_slot *s, long status)
{
	if (status != 200) {
		enum fetch_outcome o = fetch_classify_status(status);

		if (o != FETCH_FATAL)
			slot_answered(s);
		return slot_abort(s, o, "%s: HTTP %ld", slot_shown(s), status);
	}
	if (s->head.coding[0] != '\0')
		return slot_refuse_coding(s);
	if ((s->head.cl_seen && !s->no_length &&
	     s->head.content_length != s->size) ||
	    !slot_validator_ok(s)) {
		s->res.blob_changed = true;
		return slot_abort(s, FETCH_FATAL,
				  "%s: %s: Content-Length %" PRIu64
				  ", ETag '%s', Last-Modified '%s'; expected "
				  "%" PRIu64 " bytes, '%s'",
				  slot_shown(s), slot_changed(s),
				  s->head.content_length, s->head.etag,
				  s->head.last_modified, s->size,
				  s->validator != NULL ? s->validator : "");
	}
	slot_answered(s);
	slot_blame(s);
	fetch__slot_set(s, SLOT_RECEIVING);
	return 1;
}

/* Checks the head of a response before its first body byte is used. */
static size_t slot_check_head(struct fetch_slot *s)
{
	long status = 0;

	curl_easy_getinfo(s->easy, CURLINFO_RESPONSE_CODE, &status);
	s->res.status = status;
	if (s->stream)
		return slot_check_stream(s, status);
	if (status == 412 && s->if_match) {
		/* If-Match sent: the object is another version now. */
		s->res.blob_changed = true;
		return slot_abort(s, FETCH_FATAL,
				  "%s: HTTP 412: %s (its ETag is no longer %s)",
				  slot_shown(s), slot_changed(s), s->validator);
	}
	if (status != 206) {
		enum fetch_outcome o = fetch_classify_status(status);

		if (status == 200) {
			/* With If-Range sent, a 200 says the blob changed. */
			s->res.blob_changed =
				s->validator != NULL && s->validator[0] != '\0';
			return slot_abort(s, o,
					  "%s: HTTP 200 to a range request "
					  "(%s)",
					  slot_shown(s),
					  s->res.blob_changed
						  ? slot_changed(s)
						  : "Range is ignored");
		}
		if (o != FETCH_FATAL)
			slot_answered(s); /* the origin's answer, passed on */
		return slot_abort(s, o, "%s: HTTP %ld", slot_shown(s), status);
	}
	if (s->head.coding[0] != '\0')
		return slot_refuse_coding(s);
	if (!s->head.cr_seen)
		return slot_abort(s, FETCH_FATAL,
				  "%s: 206 without a valid Content-Range",
				  slot_shown(s));
	if (s->head.cr_total != s->size) {
		s->res.blob_changed = true;
		return slot_abort(s, FETCH_FATAL,
				  "%s: %s: its size is now %" PRIu64
				  ", not %" PRIu64,
				  slot_shown(s), slot_changed(s),
				  s->head.cr_total, s->size);
	}
	if (s->head.cr_start != s->from || s->head.cr_end + 1 != s->asked_end)
		return slot_abort(s, FETCH_FATAL,
				  "%s: Content-Range %" PRIu64 "-%" PRIu64
				  "/%" PRIu64 " does not match the request "
				  "%" PRIu64 "-%" PRIu64 "/%" PRIu64,
				  slot_shown(s), s->head.cr_start,
				  s->head.cr_end, s->head.cr_total, s->from,
				  s->asked_end - 1, s->size);
	if (!slot_validator_ok(s)) {
		s->res.blob_changed = true;
		return slot_abort(s, FETCH_FATAL,
				  "%s: %s: ETag '%s', Last-Modified '%s', "
				  "expected '%s'",
				  slot_shown(s), slot_changed(s), s->head.etag,
				  s->head.last_modified, s->validator);
	}
	slot_answered(s);
	slot_blame(s);
	fetch__slot_set(s, SLOT_RECEIVING);
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

/* Acknowledges at once what the connection received (fetch/ack.c). The
 * socket is looked for each time: curl may have moved the transfer to
 * another connection (a reused one that the server had closed). */
static void slot_quick_ack(struct fetch_slot *s)
{
	fetch__ack_now(fetch__acks_find(&s->f->acks, s->easy));
}

size_t fetch__slot_on_body(char *buf, size_t size, size_t n, void *arg)
{
	struct fetch_slot *s = arg;
	struct fetch *f = s->f;
	size_t len = size * n;
	size_t take;

	slot_quick_ack(s);
	if (s->state == SLOT_DRAINING) {
		/* Cut: the proxy finishes its slice, nobody wants the bytes. */
		if (s->proxy >= 0)
			fetch__proxy_bytes(f->cfg.proxies, s->proxy, len);
		return len;
	}
	if (s->state != SLOT_RECEIVING && fetch__is_redirect(s->easy))
		return len; /* drain_done follows it once it ends */
	if (s->state != SLOT_RECEIVING && s->cref != NULL && !s->auth_retried &&
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
	if (fetch__slot_ahead(s)) {
		/* curl keeps these bytes and passes them again once the
		 * promotion unpauses the transfer. */
		fetch__slot_set(s, SLOT_HELD);
		return CURL_WRITEFUNC_PAUSE;
	}
	if (s->state != SLOT_RECEIVING && slot_check_head(s) == 0)
		return 0;
	if (s->proxy >= 0)
		fetch__proxy_bytes(f->cfg.proxies, s->proxy, len);
	if (s->rx < s->pos) {
		/* A retry from its chunk's start: these were delivered. */
		size_t skip =
			s->pos - s->rx < len ? (size_t)(s->pos - s->rx) : len;

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
	if (s->pos >= s->end && s->end < s->asked_end) {
		if (fetch__slot_cut_drain(f, s, FETCH_OK, "end lowered"))
			return size * n;
		return slot_abort(s, FETCH_OK, "end lowered");
	}
	if (take < len)
		return slot_abort(s, FETCH_FATAL,
				  "%s: body longer than the %" PRIu64
				  " bytes of its Content-Range",
				  slot_shown(s), s->asked_end - s->start);
	return size * n;
}

void fetch__slot_finish(struct fetch_slot *s, CURLcode cc)
{
	struct fetch *f = s->f;
	struct fetch_result res;
	bool auth_refused = false;

	/* Sent with credentials and refused (with changing ones, again
	 * after new ones were asked for): the caller may wait for newer ones
	 * rather than give the source up, and says why it is refused. */
	if (s->sent_creds && s->state != SLOT_REFUSED) {
		long status = 0;

		curl_easy_getinfo(s->easy, CURLINFO_RESPONSE_CODE, &status);
		auth_refused = status == 401 || status == 403 ||
			       (s->auth_retried && slot_auth_status(s));
	}
	if (s->state != SLOT_REFUSED && s->state != SLOT_DRAINING) {
		fetch__slot_detach(s);
		fetch__auth_put(s->cref);
		s->cref = NULL;
	}
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
	} else if (s->state != SLOT_RECEIVING) {
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
	} else if (s->no_length && s->pos >= s->start) {
		/* No length said: the body's clean end is the blob's. */
		res.outcome = FETCH_OK;
		res.length = s->pos;
	} else {
		res.outcome = FETCH_TRANSIENT;
		snprintf(res.reason, sizeof(res.reason),
			 "%s: short body: %" PRIu64 " of %" PRIu64 " bytes",
			 slot_shown(s), s->pos - s->start, s->end - s->start);
	}
	res.retry_after_ms = s->head.retry_after_ms;
	res.auth_refused = auth_refused && res.outcome == FETCH_GONE;
	if (s->state != SLOT_DRAINING)
		fetch__slot_set(s, SLOT_IDLE);
	f->hooks.on_done(f->hooks.ctx, s->id, &res);
}

void fetch__slot_drain_end(struct fetch_slot *s)
{
	if (s->state != SLOT_DRAINING)
		return;
	fetch__slot_detach(s);
	fetch__auth_put(s->cref);
	s->cref = NULL;
	fetch__slot_set(s, SLOT_IDLE);
}

void fetch__slot_abandon(struct fetch_slot *s)
{
	/* A drain ends by itself (fetch__slot_drain_end). */
	if (s->state == SLOT_IDLE || s->state == SLOT_DRAINING)
		return;
	fetch__slot_detach(s);
	fetch__auth_put(s->cref);
	s->cref = NULL;
	fetch__slot_set(s, SLOT_IDLE);
}

uint64_t fetch__stripe_size(const struct fetch_config *cfg)
{
	uint64_t chunk = cfg->chunk != 0 ? cfg->chunk : 65536u;

	return chunk > FETCH__STRIPE_MIN ? chunk : FETCH__STRIPE_MIN;
}

/* The stripe index that picks a request's proxy. */
static uint64_t slot_stripe(const struct fetch *f, const struct fetch_slot *s)
{
	return s->from / fetch__stripe_size(&f->cfg);
}

/* Slot s's request goes through a proxy (not DIRECT). */
static bool slot_via_proxy(const struct fetch *f, const struct fetch_slot *s)
{
	return f->cfg.proxies != NULL && s->proxy >= 0 &&
	       !fetch__proxy_is_direct(f->cfg.proxies, s->proxy);
}

/* Where the request of slot s, aimed at its proxy, ends: through a proxy,
 * at the end of the stripe it starts in (a piece), so that each stripe is
 * asked of its owner whatever the lane's range, and a cut that falls
 * between pieces leaves no slice half fetched in the proxy; without one,
 * at the range's end. */
static uint64_t slot_piece_end(const struct fetch *f,
			       const struct fetch_slot *s)
{
	uint64_t stripe = fetch__stripe_size(&f->cfg);
	uint64_t next = (s->from / stripe + 1) * stripe;

	if (!slot_via_proxy(f, s))
		return s->end;
	return next < s->end ? next : s->end;
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
					       slot_stripe(f, s),
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
	s->sent_creds = allowed && (s->cref != NULL || f->cfg.nheaders > 0);
	headers = creds;
	if (s->validator != NULL && s->validator[0] != '\0' &&
	    (s->if_match || !slot_via_proxy(f, s))) {
		/* If-Range turns a changed blob into a 200, which the head
		 * check rejects: two versions never mix. The node lives in
		 * the slot, so a request allocates no header list. Not
		 * through a proxy: nginx's slice module answers a request
		 * with If-Range from the blob's first slice on (so a
		 * member that lacks it fetches it for every such request);
		 * there the head check's comparison of the response's
		 * validator is the pin, and another version is still
		 * refused and asked again with no-cache. */
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
	if (s->stream) {
		/* The whole object from its first byte: no Range, which the
		 * source ignores anyway. */
		s->asked_end = s->no_length ? s->end : s->size;
		curl_easy_setopt(s->easy, CURLOPT_RANGE, NULL);
	} else {
		s->asked_end = slot_piece_end(f, s);
		snprintf(s->range, sizeof(s->range), "%" PRIu64 "-%" PRIu64,
			 s->from, s->asked_end - 1);
		curl_easy_setopt(s->easy, CURLOPT_RANGE, s->range);
	}
	curl_easy_setopt(s->easy, CURLOPT_URL, url);
	curl_easy_setopt(s->easy, CURLOPT_HTTPHEADER, headers);
	return 0;
}

/* Forgets what the last response of slot s said, before it is sent
 * again; what it delivered stays delivered. A transfer receiving is
 * SENT again, one held while ahead AHEAD again. */
static void slot_reset_response(struct fetch_slot *s)
{
	uint64_t received = s->res.received;

	if (s->state == SLOT_RECEIVING)
		fetch__slot_set(s, SLOT_SENT);
	else if (s->state == SLOT_HELD)
		fetch__slot_set(s, SLOT_AHEAD);
	s->rx = s->from;
	memset(&s->head, 0, sizeof(s->head));
	s->forced = false;
	s->errbuf[0] = '\0';
	s->errbody[0] = '\0';
	s->nerrbody = 0;
	memset(&s->res, 0, sizeof(s->res));
	s->res.received = received;
}

int fetch__slot_start(struct fetch *f, struct fetch_slot *s,
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
	s->stream = t->stream;
	s->no_length = t->stream && t->no_length;
	s->from = t->stream ? 0 : start;
	s->tried = 0;
	s->suspect = 0;
	s->no_cache = t->no_cache;
	memset(&s->res, 0, sizeof(s->res));
	slot_reset_response(s);
	s->if_match = t->if_match;
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
		fetch__slot_set(s, SLOT_REFUSED);
		return 0;
	}
	if (fetch__slot_attach(s) != CURLM_OK)
		return -ENOMEM;
	fetch__slot_set(s, ahead ? SLOT_AHEAD : SLOT_SENT);
	return 0;
}

/* True when slot s's response, which ended with cc, is one no origin
 * gives to the request sent (FETCH_FATAL: a 200 to a range, another
 * Content-Range, size or validator, an encoded or a longer body, a 416):
 * through a proxy, that proxy's answer is refused, not believed. */
static bool slot_refused(struct fetch_slot *s, CURLcode cc)
{
	long status = 0;

	if (s->forced)
		return s->res.outcome == FETCH_FATAL;
	if (cc != CURLE_OK || s->state == SLOT_RECEIVING)
		return false;
	curl_easy_getinfo(s->easy, CURLINFO_RESPONSE_CODE, &status);
	return status != 206 && !fetch__is_redirect(s->easy) &&
	       fetch_classify_status(status) == FETCH_FATAL;
}

int fetch__slot_retry(struct fetch *f, struct fetch_slot *s, CURLcode cc)
{
	struct fetch_proxies *list = f->cfg.proxies;
	uint64_t chunk = f->cfg.chunk != 0 ? f->cfg.chunk : 65536u;
	uint64_t from;
	const char *url = s->hop != NULL ? s->hop : s->url;
	int was = s->proxy;
	bool refused;

	if (list == NULL || was < 0 || fetch__proxy_is_direct(list, was) ||
	    s->pos >= s->end)
		return 1;
	refused = slot_refused(s, cc);
	if (s->res.blob_changed && !s->no_cache) {
		/* A cache's old copy, or a new version: the origin says. */
		fetch__log(
			f, FETCH_LOG_INFO,
			"lane %u: %s: another version came through proxy %s; "
			"asking again with Cache-Control: no-cache",
			s->id, slot_shown(s), fetch__proxy_shown(list, was));
		s->no_cache = true;
	} else if (refused && s->res.blob_changed) {
		/* Another version still, past the proxy's cache: a change,
		 * or the proxy's lie. The next route says which; the proxy
		 * is not failed unless it serves the pinned version
		 * (slot_blame), and the last route's word stands. */
		s->suspect |= 1u << was;
		s->tried |= 1u << was;
		snprintf(s->suspect_why, sizeof(s->suspect_why), "%.159s",
			 s->res.reason);
		if (fetch__proxy_choose(list, url, slot_stripe(f, s),
					fetch__now_ms(), s->tried) < 0)
			return 1;
		fetch__log(f, FETCH_LOG_INFO,
			   "lane %u: proxy %s names another version (%s); "
			   "asking the next route",
			   s->id, fetch__proxy_shown(list, was), s->res.reason);
	} else if (refused || fetch__proxy_fault(s->easy, cc)) {
		/* A wrong answer through a proxy is that proxy's, for this
		 * request: the next route (the next member, the next group,
		 * DIRECT) is asked, and only an answer without a proxy, or
		 * the last route's, is a verdict on the blob. */
		if (refused)
			fetch__proxy_bad(list, was, fetch__now_ms());
		else
			fetch__proxy_failed(list, was, fetch__now_ms());
		s->tried |= 1u << was;
		if (fetch__proxy_choose(list, url, slot_stripe(f, s),
					fetch__now_ms(), s->tried) < 0)
			return 1;
		fetch__log(f, FETCH_LOG_WARN,
			   "lane %u: proxy %s %s (%s); bytes %" PRIu64
			   "-%" PRIu64 " go through the next route",
			   s->id, fetch__proxy_shown(list, was),
			   refused ? "gave a wrong answer" : "failed",
			   s->forced	  ? s->res.reason
			   : s->errbuf[0] ? s->errbuf
					  : curl_easy_strerror(cc),
			   s->pos, s->end - 1);
	} else {
		return 1;
	}
	fetch__slot_detach(s);
	from = s->pos / chunk * chunk;
	s->from = s->stream ? 0 : from > s->start ? from : s->start;
	slot_reset_response(s);
	if (slot_aim(f, s, url) != 0 || fetch__slot_attach(s) != CURLM_OK) {
		s->forced = true;
		s->res.outcome = FETCH_TRANSIENT;
		snprintf(s->res.reason, sizeof(s->res.reason),
			 "%s: no proxy left to retry through", slot_shown(s));
		return 1;
	}
	return 0;
}

int fetch__slot_next_piece(struct fetch *f, struct fetch_slot *s, CURLcode cc)
{
	const char *url = s->hop != NULL ? s->hop : s->url;

	if (cc != CURLE_OK || s->forced || s->state != SLOT_RECEIVING ||
	    s->pos != s->asked_end || s->pos >= s->end)
		return 1;
	/* The piece came whole, its proxy kept its slices: the next stripe
	 * is asked of its own owner. */
	fetch__slot_detach(s);
	s->from = s->pos;
	slot_reset_response(s);
	if (slot_aim(f, s, url) != 0 || fetch__slot_attach(s) != CURLM_OK) {
		s->forced = true;
		s->res.outcome = FETCH_TRANSIENT;
		snprintf(s->res.reason, sizeof(s->res.reason),
			 "%s: no proxy left for bytes %" PRIu64 "-%" PRIu64,
			 slot_shown(s), s->pos, s->end - 1);
		return 1;
	}
	return 0;
}

int fetch__slot_follow(struct fetch *f, struct fetch_slot *s)
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
	fetch__slot_detach(s);
	free(s->hop);
	s->hop = next;
	s->hops++;
	slot_reset_response(s);
	s->tried = 0;
	s->suspect = 0;
	if (slot_aim(f, s, s->hop) != 0 || fetch__slot_attach(s) != CURLM_OK) {
		s->forced = true;
		s->res.outcome = FETCH_LOCAL;
		snprintf(s->res.reason, sizeof(s->res.reason),
			 "%s: cannot follow a redirect", slot_shown(s));
		return -ENOMEM;
	}
	return 0;
}

bool fetch__slot_auth_hold(struct fetch *f, struct fetch_slot *s)
{
	long status = 0;

	if (s->cref == NULL || s->auth_retried)
		return false;
	curl_easy_getinfo(s->easy, CURLINFO_RESPONSE_CODE, &status);
	if (!fetch__auth_refused(status, s->errbody))
		return false;
	fetch__slot_detach(s);
	fetch__slot_set(s, SLOT_AUTH_WAIT);
	s->auth_gen = s->cref->gen;
	s->auth_until_ms = fetch__now_ms() + FETCH_AUTH_WAIT_MS;
	fetch__log(f, FETCH_LOG_INFO,
		   "lane %u: %s: HTTP %ld refuses the credentials; asking for "
		   "new ones",
		   s->id, slot_shown(s), status);
	fetch__auth_expired(f->cfg.auth, s->auth_gen);
	return true;
}

bool fetch__slot_auth_resume(struct fetch *f)
{
	uint64_t gen = 0, now = 0;
	bool waiting = false;

	for (uint32_t i = 0; i < 2 * f->cfg.max_lanes; i++) {
		struct fetch_slot *s = &f->slots[i];

		if (s->state != SLOT_AUTH_WAIT)
			continue;
		if (gen == 0) {
			gen = fetch_auth_gen(f->cfg.auth);
			now = fetch__now_ms();
		}
		if (gen <= s->auth_gen && now < s->auth_until_ms) {
			waiting = true;
			continue;
		}
		fetch__slot_set(s, SLOT_SENT);
		s->auth_retried = true;
		fetch__auth_put(s->cref);
		s->cref = fetch__auth_get(f->cfg.auth);
		free(s->hop);
		s->hop = NULL;
		s->hops = 0;
		slot_reset_response(s);
		if (slot_aim(f, s, s->url) != 0 ||
		    fetch__slot_attach(s) != CURLM_OK) {
			s->forced = true;
			s->res.outcome = FETCH_LOCAL;
			snprintf(s->res.reason, sizeof(s->res.reason),
				 "%s: cannot send again", slot_shown(s));
			fetch__slot_finish(s, CURLE_OK);
		}
	}
	return waiting;
}

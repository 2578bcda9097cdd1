/* fetch: the event thread that runs range transfers on lanes with libcurl's
 * multi interface; each transfer (slot.c) checks its response before passing
 * its bytes on. */
#include <errno.h>
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

void fetch__log(struct fetch *f, enum fetch_log_level level, const char *fmt,
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

long fetch__bound_ms(const struct fetch_config *cfg, long def_ms)
{
	uint64_t now = fetch__now_ms();

	if (cfg->deadline_ms == 0)
		return def_ms;
	if (now >= cfg->deadline_ms)
		return 1;
	if (cfg->deadline_ms - now < (uint64_t)def_ms)
		return (long)(cfg->deadline_ms - now);
	return def_ms;
}

int fetch__bound_check(const struct fetch_config *cfg, const char **reason)
{
	if (cfg->stop != NULL && cfg->stop(cfg->stop_arg)) {
		*reason = "stopped: the mount is ending";
		return -ECANCELED;
	}
	if (cfg->deadline_ms != 0 && fetch__now_ms() >= cfg->deadline_ms) {
		*reason = "no answer within the deadline (-o read_timeout=)";
		return -ETIMEDOUT;
	}
	return 0;
}

int fetch__bound_sleep(const struct fetch_config *cfg, long ms)
{
	const char *why;
	uint64_t until = fetch__now_ms() + (uint64_t)ms;
	int rc;

	while ((rc = fetch__bound_check(cfg, &why)) == 0) {
		uint64_t now = fetch__now_ms();
		long left = now < until ? (long)(until - now) : 0;
		struct timespec ts;

		if (left == 0)
			break;
		if (left > FETCH__STOP_POLL_MS)
			left = FETCH__STOP_POLL_MS;
		ts.tv_sec = left / 1000;
		ts.tv_nsec = (left % 1000) * 1000000L;
		nanosleep(&ts, NULL);
	}
	return rc;
}

/* curl's progress callback on a bounded synchronous request: aborts it
 * once its deadline passed or the mount is ending. */
static int bound_progress(void *arg, curl_off_t dltotal, curl_off_t dlnow,
			  curl_off_t ultotal, curl_off_t ulnow)
{
	const char *why;

	(void)dltotal;
	(void)dlnow;
	(void)ultotal;
	(void)ulnow;
	return fetch__bound_check(arg, &why) != 0;
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
	if (cfg->path_as_is)
		rc |= curl_easy_setopt(easy, CURLOPT_PATH_AS_IS, 1L);
	/* cfg is the caller's, alive for the whole synchronous request. */
	if (cfg->deadline_ms != 0 || cfg->stop != NULL) {
		rc |= curl_easy_setopt(easy, CURLOPT_XFERINFOFUNCTION,
				       bound_progress);
		rc |= curl_easy_setopt(easy, CURLOPT_XFERINFODATA, (void *)cfg);
		rc |= curl_easy_setopt(easy, CURLOPT_NOPROGRESS, 0L);
	}
	return rc;
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
	/* A synchronous request's bounds: lanes have none (a read's wait
	 * has its own deadline), and the caller's cfg may not outlive this. */
	f->cfg.deadline_ms = 0;
	f->cfg.stop = NULL;
	f->hooks = *hooks;
	atomic_init(&f->stop, false);
	f->multi = curl_multi_init();
	f->slots = calloc(2 * (size_t)cfg->max_lanes, sizeof(*f->slots));
	f->cur = calloc(cfg->max_lanes, sizeof(*f->cur));
	if (f->multi == NULL || f->slots == NULL || f->cur == NULL)
		goto out;
	/* Each slot's connection, and those closing or failing to connect
	 * beside them. */
	if (fetch__acks_init(&f->acks, 4 * cfg->max_lanes + 8) != 0)
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
		if (fetch__easy_setup(s->easy, &f->cfg, s->errbuf) !=
		    CURLE_OK) {
			rc = -EINVAL;
			goto out;
		}
		curl_easy_setopt(s->easy, CURLOPT_BUFFERSIZE,
				 FETCH_BUFFER_SIZE);
		fetch__acks_setup(&f->acks, s->easy);
		curl_easy_setopt(s->easy, CURLOPT_HEADERFUNCTION,
				 fetch__slot_on_header);
		curl_easy_setopt(s->easy, CURLOPT_HEADERDATA, s);
		curl_easy_setopt(s->easy, CURLOPT_WRITEFUNCTION,
				 fetch__slot_on_body);
		curl_easy_setopt(s->easy, CURLOPT_WRITEDATA, s);
		curl_easy_setopt(s->easy, CURLOPT_PRIVATE, s);
	}
	*out = f;
	return 0;
out:
	fetch_free(f);
	return rc;
}

/* The lane's other slot: where a request is sent ahead. */
static struct fetch_slot *lane_spare(struct fetch *f, uint32_t lane)
{
	struct fetch_slot *pair = &f->slots[2 * (size_t)lane];

	return f->cur[lane] == pair ? pair + 1 : pair;
}

int fetch_lane_start(struct fetch *f, uint32_t lane,
		     const struct fetch_target *t, uint64_t start, uint64_t end)
{
	struct fetch_slot *s, *a;

	if (lane >= f->cfg.max_lanes || start >= end || end > t->size)
		return -EINVAL;
	s = f->cur[lane];
	if (s->state != SLOT_IDLE)
		return -EBUSY;
	a = lane_spare(f, lane);
	/* Not a request sent ahead through a proxy that failed since: it
	 * would wait for the stall timeout again (a hung proxy). */
	if (fetch__slot_ahead(a) && a->start == start && a->end == end &&
	    a->url == t->url &&
	    (a->proxy < 0 ||
	     !fetch__proxy_down(f->cfg.proxies, a->proxy, fetch__now_ms()))) {
		/* The request queued behind the last one is under way:
		 * promote it; its held bytes come now. */
		bool held = a->state == SLOT_HELD;

		f->cur[lane] = a;
		/* Before the unpause, which may pass the held bytes at once. */
		fetch__slot_set(a, SLOT_SENT);
		if (held)
			curl_easy_pause(a->easy, CURLPAUSE_CONT);
		return 0;
	}
	fetch__slot_abandon(a);
	return fetch__slot_start(f, s, t, start, end, false);
}

int fetch_lane_pause(struct fetch *f, uint32_t lane, bool pause)
{
	struct fetch_slot *s;

	if (lane >= f->cfg.max_lanes)
		return -EINVAL;
	s = f->cur[lane];
	if (s->state != SLOT_SENT && s->state != SLOT_RECEIVING)
		return -EINVAL;
	return curl_easy_pause(s->easy, pause ? CURLPAUSE_RECV
					      : CURLPAUSE_CONT) == CURLE_OK
		       ? 0
		       : -EIO;
}

bool fetch__slot_cut_drain(struct fetch *f, struct fetch_slot *s,
			   enum fetch_outcome o, const char *why)
{
	struct fetch_proxies *list = f->cfg.proxies;
	struct fetch_slot *a = lane_spare(f, s->id);

	if (list == NULL || s->proxy < 0 || f->cur[s->id] != s ||
	    (s->state != SLOT_RECEIVING && s->state != SLOT_SENT) ||
	    a->state != SLOT_IDLE || s->rx >= s->asked_end ||
	    fetch__proxy_is_direct(list, s->proxy) ||
	    fetch__proxy_down(list, s->proxy, fetch__now_ms()))
		return false;
	/* The other slot first: on_done may start the lane's next request. */
	f->cur[s->id] = a;
	s->forced = true;
	s->res.outcome = o;
	snprintf(s->res.reason, sizeof(s->res.reason), "%s", why);
	s->drain_until_ms = fetch__now_ms() + FETCH__DRAIN_MAX_MS;
	fetch__slot_set(s, SLOT_DRAINING);
	fetch__slot_finish(s, CURLE_OK);
	return true;
}

int fetch_lane_queue(struct fetch *f, uint32_t lane,
		     const struct fetch_target *t, uint64_t start, uint64_t end)
{
	struct fetch_slot *a;

	if (lane >= f->cfg.max_lanes || start >= end || end > t->size)
		return -EINVAL;
	if (f->cur[lane]->state == SLOT_IDLE)
		return -EINVAL;
	a = lane_spare(f, lane);
	if (a->state == SLOT_DRAINING)
		return -EBUSY; /* a cut piece still drains on it */
	fetch__slot_abandon(a);
	return fetch__slot_start(f, a, t, start, end, true);
}

int fetch_lane_proxy(struct fetch *f, uint32_t lane)
{
	struct fetch_slot *s;

	if (lane >= f->cfg.max_lanes || f->cur[lane]->state == SLOT_IDLE)
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
	if (s->state == SLOT_IDLE || end >= s->end)
		return;
	s->end = end > s->pos ? end : s->pos;
	/* Already there: end the transfer now rather than at the next
	 * byte, which may never come. */
	if (s->pos >= s->end &&
	    !fetch__slot_cut_drain(f, s, FETCH_OK, "end lowered")) {
		s->forced = true;
		s->res.outcome = FETCH_OK;
		snprintf(s->res.reason, sizeof(s->res.reason), "end lowered");
		fetch__slot_finish(s, CURLE_OK);
	}
}

void fetch_lane_cancel(struct fetch *f, uint32_t lane)
{
	struct fetch_slot *s;

	if (lane >= f->cfg.max_lanes)
		return;
	/* A cancel drops the queued range too. */
	fetch__slot_abandon(lane_spare(f, lane));
	s = f->cur[lane];
	if (s->state == SLOT_IDLE ||
	    fetch__slot_cut_drain(f, s, FETCH_CANCELLED, "cancelled"))
		return;
	s->forced = true;
	s->res.outcome = FETCH_CANCELLED;
	snprintf(s->res.reason, sizeof(s->res.reason), "cancelled");
	fetch__slot_finish(s, CURLE_OK);
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
		if (s == NULL || s->state == SLOT_IDLE)
			continue;
		if (s->state == SLOT_DRAINING) {
			fetch__slot_drain_end(s);
			continue;
		}
		if (fetch__slot_next_piece(f, s, msg->data.result) == 0)
			continue;
		if (msg->data.result == CURLE_OK && !s->forced &&
		    fetch__slot_follow(f, s) == 0)
			continue;
		if (msg->data.result == CURLE_OK && !s->forced &&
		    s->state == SLOT_SENT && fetch__slot_auth_hold(f, s))
			continue;
		if (fetch__slot_retry(f, s, msg->data.result) == 0)
			continue;
		if (fetch__slot_ahead(s))
			/* Ended before its START (a refused connection, an
			 * error with no body): forget it; the START, if it
			 * comes, asks again and hears the reason itself. */
			fetch__slot_abandon(s);
		else
			fetch__slot_finish(s, msg->data.result);
	}
}

/* Ends the drains that last too long or whose proxy failed since. */
static void drains_due(struct fetch *f)
{
	uint64_t now = 0;

	for (uint32_t i = 0; i < 2 * f->cfg.max_lanes; i++) {
		struct fetch_slot *s = &f->slots[i];

		if (s->state != SLOT_DRAINING)
			continue;
		if (now == 0)
			now = fetch__now_ms();
		if (now >= s->drain_until_ms ||
		    fetch__proxy_down(f->cfg.proxies, s->proxy, now))
			fetch__slot_drain_end(s);
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
			fetch__log(f, FETCH_LOG_ERR, "curl_multi_perform: %s",
				   curl_multi_strerror(mc));
		drain_done(f);
		waiting = f->cfg.auth != NULL && fetch__slot_auth_resume(f);
		timeout_ms = f->hooks.on_tick(f->hooks.ctx);
		/* A request sent ahead of one that has ended and that this
		 * turn did not promote is no longer wanted (pace.h). */
		for (uint32_t i = 0; i < f->cfg.max_lanes; i++)
			if (f->cur[i]->state == SLOT_IDLE)
				fetch__slot_abandon(lane_spare(f, i));
		drains_due(f);
		/* Requests with no proxy to go through end now, and the
		 * scheduler hears it next turn. */
		for (uint32_t i = 0; i < f->cfg.max_lanes; i++)
			if (f->cur[i]->state == SLOT_REFUSED) {
				fetch__slot_finish(f->cur[i], CURLE_OK);
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

		if (s->state != SLOT_IDLE)
			fetch__slot_detach(s);
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
	fetch__acks_free(&f->acks);
	free(f);
}

/* fetch_int: helpers shared inside fetch/; no other folder includes this. */
#ifndef FETCH_INT_H
#define FETCH_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <curl/curl.h>

#include "fetch/fetch.h"

#define FETCH__USER_AGENT "pacefs/" PACEFS_VERSION
#define FETCH__MAX_REDIRS 8L

/* A probe answered 5xx or 429 is tried this many times in all, waiting
 * 250 ms, then twice as long each time, or what Retry-After asks when that
 * is longer but at most 5 s. */
#define FETCH__PROBE_TRIES 4
#define FETCH__PROBE_FIRST_WAIT_MS 250u
#define FETCH__PROBE_MAX_WAIT_MS 5000u

/* True when the header line [line, line + len) is "name: ..."; *value_out
 * then points just past the colon. Case-insensitive. */
bool fetch__header_is(const char *line, size_t len, const char *name,
		      const char **value_out);

/* Copies a header value of len bytes into out (cap bytes), trimmed of
 * surrounding white space and the line end, truncated, NUL-terminated. */
void fetch__header_value(const char *v, size_t len, char *out, size_t cap);

/* What a response's head said, as far as the checks need it; one parser
 * (fetch__head_line) fills it for the lanes' transfers and the probe. */
struct fetch__head {
	bool cr_seen; /* a Content-Range that parses */
	uint64_t cr_start, cr_end, cr_total;
	char cr_raw[64]; /* the Content-Range value, cut, for errors */
	bool cl_seen;	 /* a Content-Length that is a size */
	uint64_t content_length;
	char cl_bad[64]; /* one that is not: the value, cut, for errors */
	char etag[256];	 /* "" if none */
	char last_modified[128];
	char coding[128]; /* the first Content- or Transfer-Encoding line that
			     is not identity, for the reason; "" if none */
	uint64_t retry_after_ms; /* 0 if none */
};

/* Takes one header line [line, line + len) of a response into h; a status
 * line ("HTTP/...") starts a new response (after a redirect) and forgets
 * the last one. Other headers are ignored. */
void fetch__head_line(struct fetch__head *h, const char *line, size_t len);

/* Builds the list of the configured headers; NULL when there are none or
 * memory ran out (*ok says which). */
struct curl_slist *fetch__headers(const struct fetch_config *cfg, bool *ok);

/* Applies the options every handle shares: timeouts, TLS, proxy, user
 * agent, no signals; curl follows no redirect itself (fetch/redirect.c
 * does). Returns a CURLcode. */
CURLcode fetch__easy_setup(CURL *easy, const struct fetch_config *cfg,
			   char *errbuf);

/* A handle for one blocking request (probe.c): the thread's kept one,
 * reset, while it keeps (fetch_thread_keep; keep.c), else a new one; NULL
 * when memory ran out. fetch__easy_give() hands it back: a kept handle
 * stays, with its connections; any other is cleaned up. */
CURL *fetch__easy_take(void);
void fetch__easy_give(CURL *easy);

/* What is left of cfg->deadline_ms for a synchronous request that would
 * wait at most def_ms: at least 1 ms, at most def_ms. */
long fetch__bound_ms(const struct fetch_config *cfg, long def_ms);

/* -ECANCELED when cfg->stop says the request must end, -ETIMEDOUT past
 * cfg->deadline_ms, else 0; reason (when not 0) says which. */
int fetch__bound_check(const struct fetch_config *cfg, const char **reason);

/* How often a synchronous request's waits of its own (a pause before a
 * retry, the wait for newer credentials) ask cfg->stop: a mount's end is
 * seen within this many ms of it. */
#define FETCH__STOP_POLL_MS 100

/* Sleeps ms, or less: until cfg->stop says the request must end. Returns
 * fetch__bound_check's answer after the sleep. */
int fetch__bound_sleep(const struct fetch_config *cfg, long ms);

/* fetch/url.c. The URL a redirect to target leads to: target without any
 * userinfo, with start's userinfo when it has start's origin. Returns 0,
 * -ENOMEM. */
int fetch__url_hop(const char *start, const char *target, char **out);

/* fetch/url.c. Writes url as fetch_url_redacted shows it into buf, cut to
 * cap bytes (for reasons and log lines; never for a request). */
void fetch__url_shown(const char *url, char *buf, size_t cap);

/* fetch/auth.c. One set of credentials as requests use it: immutable,
 * counted references (fetch__auth_get, fetch__auth_put). */
struct fetch__cref {
	atomic_uint refs;
	uint64_t gen;
	char sigv4[96]; /* CURLOPT_AWS_SIGV4's value; "": no key */
	char *id, *secret;
	struct curl_slist *headers; /* the headers, x-amz ones included */
};

/* The current set with a reference taken, or NULL (no auth, no set). */
struct fetch__cref *fetch__auth_get(struct fetch_auth *a);
void fetch__auth_put(struct fetch__cref *r);

/* A request with set gen was refused: asks for a newer one. */
void fetch__auth_expired(struct fetch_auth *a, uint64_t gen);

/* Waits until a set of cfg->auth newer than gen is current, at most
 * timeout_ms, and no longer than cfg->stop allows (FETCH__STOP_POLL_MS);
 * true when one is. */
bool fetch__auth_wait(const struct fetch_config *cfg, uint64_t gen,
		      long timeout_ms);

/* Signs easy's next request with r's key when allowed (its URL's origin
 * is one the credentials were given for), else signs nothing. */
CURLcode fetch__auth_apply(CURL *easy, const struct fetch__cref *r,
			   bool allowed);

/* True when a response of status with body (its first bytes, or NULL)
 * refuses the request's credentials. */
bool fetch__auth_refused(long status, const char *body);

/* fetch/redirect.c: the rules every request follows redirects by. */

/* True when the configured headers may go to url: its origin is one of
 * cfg->header_origins. */
bool fetch__sends_headers(const struct fetch_config *cfg, const char *url);

/* True when easy's last response is a 3xx, whose body is not the
 * document asked for: body callbacks drop it. */
bool fetch__is_redirect(CURL *easy);

/* When easy's finished response is a redirect (a 3xx with a Location),
 * the next hop of a request that started at start and is now at from,
 * after `hops` hops: 0 with *next (free() it), 1 when it is no redirect,
 * -ELOOP (too many hops) or -EPERM (https to http) with one line naming
 * the URLs (userinfo removed) in err, -ENOMEM. */
int fetch__redirect_next(CURL *easy, const char *start, const char *from,
			 unsigned hops, char **next, char *err, size_t errlen);

/* Runs easy's request from url, following redirects: each hop gets
 * `headers` (or cfg->auth's current set, which signs it) only when
 * fetch__sends_headers allows them, and Cache-Control: no-cache when
 * no_cache; each goes through the proxy the list picks, and again through
 * the next one while a proxy fails it. A response refused for its
 * credentials (body(arg) gives its document's start) is asked once more
 * with newer ones. Before a request is sent again (the next hop, the next
 * proxy, newer credentials) reset(arg) forgets what the callbacks
 * gathered. bad (NULL: none) judges an answer through a proxy (not
 * DIRECT): true when it is one no origin gives (a 200 to a range, say),
 * which fails that proxy (fetch__proxy_bad) and sends the request through
 * the next route; the last route's answer stands whatever it is. proxy is
 * the proxy's name as shown, for the callback's note. Returns 0 once a
 * response that is no redirect ended (its CURLcode in *cc, its status in
 * *status, the URL it came from in *final: free() it), or what
 * fetch__redirect_next returned, with err set. */
int fetch__perform(const struct fetch_config *cfg, CURL *easy, const char *url,
		   struct curl_slist *headers, bool no_cache,
		   void (*reset)(void *arg),
		   bool (*bad)(void *arg, const char *proxy), void *arg,
		   const char *(*body)(void *arg), CURLcode *cc, char **final,
		   long *status, char *err, size_t errlen);

/* fetch/proxy.c: the choice of a proxy and what is learnt from each
 * request. */

/* Which entry of list a request of url for stripe index stripe
 * (fetch__stripe_size bytes a stripe) goes through at now_ms
 * (CLOCK_MONOTONIC), entries whose bit is set in tried left out: an
 * index, or -ENOENT when none is left. In the first group with a working
 * member, a stripe's owner is the same on every machine, each member owns
 * one stripe in every round of as many stripes as the group has members,
 * and a member that is down or in tried gives its stripes to the others
 * by rendezvous hashing of (member, URL, stripe), moving no one else's. */
int fetch__proxy_choose(struct fetch_proxies *list, const char *url,
			uint64_t stripe, uint64_t now_ms, uint32_t tried);

/* Entry i's URL as CURLOPT_PROXY takes it ("" for DIRECT), and as shown;
 * valid while the list is. */
const char *fetch__proxy_url(const struct fetch_proxies *list, int i);
const char *fetch__proxy_shown(const struct fetch_proxies *list, int i);
bool fetch__proxy_is_direct(const struct fetch_proxies *list, int i);

/* Counts: a request sent; a response head received (cache: 1 hit, -1 miss,
 * 0 unknown), which also ends a failure; body bytes; a failure, which
 * leaves the entry out until the reset interval has passed. */
void fetch__proxy_request(struct fetch_proxies *list, int i);
void fetch__proxy_answered(struct fetch_proxies *list, int i, int cache);
void fetch__proxy_bytes(struct fetch_proxies *list, int i, uint64_t n);
void fetch__proxy_failed(struct fetch_proxies *list, int i, uint64_t now_ms);
/* A wrong answer through entry i (one no origin gives to the request
 * sent: fetch__slot_retry, the probe): counted as a failure and a bad
 * answer, and the entry is left out as for a failure. */
void fetch__proxy_bad(struct fetch_proxies *list, int i, uint64_t now_ms);
/* True when entry i failed lately (within its reset interval) or is
 * excluded: a request sent through it before is sent again. */
bool fetch__proxy_down(struct fetch_proxies *list, int i, uint64_t now_ms);

/* True when easy's request, which went through a proxy and ended with
 * cc, failed because of the proxy (see fetch.h, "Proxies"). */
bool fetch__proxy_fault(CURL *easy, CURLcode cc);

/* What easy's last response said of a cache (fetch_parse_x_cache). */
int fetch__proxy_cache_status(CURL *easy);

/* The monotonic clock in milliseconds. */
uint64_t fetch__now_ms(void);

/* The event thread's state: a slot is one transfer (fetch/slot.c), two per
 * lane; struct fetch is the thread that runs them (fetch/fetch.c). */

/*
 * A transfer's life on a slot. Every change goes through fetch__slot_set,
 * which logs it at debug level and refuses an arrow not drawn here (a bug:
 * slot_drawn in slotstate.c is this drawing as a table):
 *
 *   IDLE       -> SENT       fetch_lane_start: the lane's open request
 *   IDLE       -> REFUSED    the same with every proxy excluded: it ends,
 *                            with its reason, at the end of the turn
 *   IDLE       -> AHEAD      fetch_lane_queue: sent ahead of the open one
 *   AHEAD      -> HELD       its first body byte: the transfer is paused
 *   AHEAD,     -> SENT       the lane's START of exactly its range promotes
 *   HELD                     it (a held one is unpaused: its bytes come now)
 *   HELD       -> AHEAD      sent again through the next proxy, still ahead
 *   SENT       -> RECEIVING  the response's head passed its checks: body
 *                            bytes go to on_data
 *   RECEIVING  -> SENT       sent again: through the next proxy, or through
 *                            the same one with no-cache; or its piece came
 *                            whole and the next one is sent
 *   SENT       -> AUTH_WAIT  refused for its credentials: out of curl until
 *                            newer ones come
 *   AUTH_WAIT  -> SENT       they came (or the wait is over): sent once more
 *   not IDLE   -> IDLE       fetch__slot_finish (on_done), or, sent ahead,
 *                            fetch__slot_abandon (no on_done)
 *   SENT or    -> DRAINING   cut (a cancel, a lowered end) through a proxy
 *   RECEIVING                mid-piece: on_done now, and the piece goes on
 *                            to its end, its bytes dropped, so that the
 *                            proxy keeps the slice it was fetching; the
 *                            lane's next request takes the other slot
 *   DRAINING   -> IDLE       the piece ended, its proxy failed, or
 *                            FETCH__DRAIN_MAX_MS passed (no on_done)
 *
 * A redirect followed (fetch__slot_follow) stays where it is: SENT, or
 * AHEAD (a redirect's body is dropped before the pause). curl runs the
 * transfers of SENT, RECEIVING, AHEAD and HELD (paused); AUTH_WAIT and
 * REFUSED are out of it. A slot AHEAD or HELD is its lane's spare
 * (lane_spare in fetch.c); one SENT, RECEIVING, AUTH_WAIT or REFUSED is
 * its open one (f->cur).
 */
enum slot_state {
	SLOT_IDLE,	/* no transfer */
	SLOT_AHEAD,	/* sent ahead, not promoted: its body waits */
	SLOT_HELD,	/* sent ahead and paused at its first body byte */
	SLOT_SENT,	/* the lane's open request; no head checked yet */
	SLOT_RECEIVING, /* its head passed the checks: bytes go on */
	SLOT_AUTH_WAIT, /* refused for its credentials: waits for new ones */
	SLOT_REFUSED,	/* no proxy to send it through: ends with res at the
			   end of the turn */
	SLOT_DRAINING,	/* cut, on_done told: the rest of its piece is
			   received and dropped */
	SLOT_NSTATES
};

/* One transfer slot. Each lane owns two: the one carrying its open request
 * and one for the request queued behind it (PACE_ACT_QUEUE), sent ahead on
 * its own connection so that the round trip overlaps the open request's
 * end; its body is held (the transfer paused at its first body byte) until
 * the lane's START for that range promotes it.
 *
 * Where the transfer is in its life is `state` alone. The flags beside it
 * are no states of that life, and stay flags: if_match and no_cache are
 * options of the request (no_cache is turned on, for the rest of it, when
 * another version came through a proxy); forced says that res holds the
 * outcome already (an abort from a callback, a cancel, a lowered end
 * reached, a refused hop), which curl's own code then does not override,
 * in whatever state the transfer ends; auth_retried is history (the one
 * resend for newer credentials is spent), sent_creds what the last hop
 * carried; attached is curl's side, whether the easy handle is in the
 * multi (a slot SENT again after a retry whose handle could not be added
 * is not), so that each request on the wire is counted once when it
 * ends. Another version through a proxy is res.blob_changed. */
struct fetch_slot {
	struct fetch *f;
	uint32_t id; /* the lane it belongs to, for the hooks */
	CURL *easy;
	enum slot_state state; /* changed by fetch__slot_set only */
	bool attached;	 /* its easy handle is in the multi (a request is on
			    the wire): fetch__slot_attach and _detach only */
	const char *url; /* where the request started (the target's) */
	char *hop;	 /* after a redirect: where it is now (owned) */
	unsigned hops;
	const char *validator;
	uint64_t size;
	uint64_t start;
	uint64_t end; /* may be lowered by fetch_lane_set_end */
	/* Where this attempt's request ends: end, or through a proxy the
	 * end of the stripe `from` is in (a piece; slot_piece_end). */
	uint64_t asked_end;
	uint64_t pos;	       /* next byte expected */
	uint64_t from;	       /* where this attempt's range starts (a retry on
				  another proxy starts at its chunk's start) */
	uint64_t rx;	       /* the next byte this attempt's body brings */
	int proxy;	       /* the entry of cfg.proxies in use; -1: none */
	uint32_t tried;	       /* entries this request failed on */
	uint32_t suspect;      /* entries that named another version (after
				  no-cache) while the next route was asked: a
				  route that serves the pinned one makes theirs
				  bad answers; the last route agreeing, a
				  change */
	char suspect_why[160]; /* the last one's reason, for the log */
	bool no_cache;	       /* Cache-Control: no-cache on this request */
	bool stream;	/* a whole-object GET without Range: its body starts
			   at byte 0 (from), the bytes before pos are skipped */
	bool no_length; /* stream of unknown size: its end is the body's */
	struct fetch__head head; /* of the response under way */
	bool forced; /* res holds the outcome, whatever curl's code says */
	struct fetch_result res;
	char range[48];
	char shown[160]; /* url without userinfo, cut, for reasons */
	char if_range[300];
	struct curl_slist if_range_node; /* heads the shared header list */
	char nocache[32];
	struct curl_slist nocache_node; /* before it, when no_cache */
	char errbuf[CURL_ERROR_SIZE];
	bool if_match; /* the validator goes in If-Match, not If-Range */
	/* Credentials that change (cfg.auth): the set this request uses;
	 * a refusal for it holds the slot (AUTH_WAIT) until a newer set
	 * comes, then the request is sent once more (auth_retried). */
	struct fetch__cref *cref;
	bool auth_retried;
	uint64_t drain_until_ms; /* DRAINING: ended at this time at the
				    latest (CLOCK_MONOTONIC) */
	bool sent_creds; /* its last hop carried the headers or the key */
	uint64_t auth_gen;
	uint64_t auth_until_ms;
	char errbody[512]; /* an error's first bytes: S3's code */
	size_t nerrbody;
};

/* Sent ahead of its lane's open request, not promoted yet. */
static inline bool fetch__slot_ahead(const struct fetch_slot *s)
{
	return s->state == SLOT_AHEAD || s->state == SLOT_HELD;
}

/* The sockets curl opened for the lanes (fetch/ack.c), to find the one a
 * transfer runs on. */
struct fetch__sock {
	curl_socket_t fd;
	unsigned port; /* local; 0: not asked yet */
	unsigned peer; /* remote */
};

struct fetch_acks {
	struct fetch__sock *v;
	uint32_t n, cap;
};

/* fetch/ack.c. acks_init sizes the table for cap sockets (-ENOMEM);
 * acks_free frees it (curl's handles, whose callbacks use it, first).
 * acks_setup makes easy report its sockets to a. acks_find returns the
 * socket easy's transfer is on, or CURL_SOCKET_BAD when unknown. ack_now
 * has fd acknowledge what it received at once (the kernel holds a lone
 * segment's ACK for its timer), and does nothing for CURL_SOCKET_BAD. */
int fetch__acks_init(struct fetch_acks *a, uint32_t cap);
void fetch__acks_free(struct fetch_acks *a);
void fetch__acks_setup(struct fetch_acks *a, CURL *easy);
curl_socket_t fetch__acks_find(struct fetch_acks *a, CURL *easy);
void fetch__ack_now(curl_socket_t fd);

struct fetch {
	struct fetch_config cfg;
	struct fetch_hooks hooks;
	CURLM *multi;
	struct curl_slist *headers; /* the configured headers */
	struct fetch_slot *slots;   /* 2 per lane */
	struct fetch_slot **cur;    /* per lane: the slot of its open request */
	struct fetch_acks acks;	    /* the lanes' sockets; event thread */
	pthread_t thread;
	bool started;
	atomic_bool stop;
};

/* fetch/count.c. Tells cfg->on_request (if any) that easy's request of
 * url through proxy entry `proxy` (-1: none) ended; lane: a lane's. */
void fetch__request_ended(const struct fetch_config *cfg, CURL *easy,
			  const char *url, int proxy, bool lane);

/* Hands slot s's easy handle to curl: a request is sent. Returns what
 * curl_multi_add_handle does. */
CURLMcode fetch__slot_attach(struct fetch_slot *s);

/* Takes it back from curl, once per attach: the request ended (done, cut
 * or dropped), and on_request hears of it. Does nothing when it is not
 * attached. */
void fetch__slot_detach(struct fetch_slot *s);

/* Logs through the hooks' log, if any. */
void fetch__log(struct fetch *f, enum fetch_log_level level, const char *fmt,
		...) __attribute__((format(printf, 3, 4)));

/* One transfer on a slot (fetch/slot.c; its states, fetch/slotstate.c).
 * Everything runs on the event thread. on_header and on_body are the
 * slot's curl callbacks; fetch__slot_set moves slot s to state `to`, with a
 * debug line "lane N: transfer FROM -> TO"; staying where it is is no
 * transition and logs nothing. A transition the diagram above does not draw is
 * a bug in fetch/: built with PACEFS_STRICT (the sanitizer builds) it aborts,
 * so that the tests catch it; otherwise it is logged as a bug (FETCH_LOG_ERR)
 * and refused: the state stays and -EINVAL is returned. Returns 0 when
 * the slot is in state `to`. fetch__slot_drawn says whether the diagram
 * draws from -> to. */
int fetch__slot_set(struct fetch_slot *s, enum slot_state to);
bool fetch__slot_drawn(enum slot_state from, enum slot_state to);

size_t fetch__slot_on_header(char *line, size_t size, size_t n, void *arg);
size_t fetch__slot_on_body(char *buf, size_t size, size_t n, void *arg);

/* Reports the end of the transfer of a lane's open slot; the slot is idle
 * again first so that on_done may start a new transfer on the lane. */
void fetch__slot_finish(struct fetch_slot *s, CURLcode cc);

/* Drops a request sent ahead, without on_done: the scheduler never counted
 * it as started. */
void fetch__slot_abandon(struct fetch_slot *s);

/* Sets up slot s for GET Range: bytes=start-(end-1) and hands it to curl;
 * ahead: sent ahead of the lane's open request, its body held until the
 * lane's START promotes it. */
int fetch__slot_start(struct fetch *f, struct fetch_slot *s,
		      const struct fetch_target *t, uint64_t start,
		      uint64_t end, bool ahead);

/* When slot s's transfer, which ended with cc, failed because of its
 * proxy, or brought another version through it, sends the rest of it
 * again at once: through the next proxy (from the start of the chunk it
 * stopped in, so that a cache keys on whole chunks), or through the same
 * one with no-cache; returns 0. Returns 1 when there is nothing to retry
 * or no proxy left. */
int fetch__slot_retry(struct fetch *f, struct fetch_slot *s, CURLcode cc);

/* When slot s's request through a proxy brought its piece whole (cc
 * CURLE_OK) and the lane's range goes on, sends the next piece (the next
 * stripe, to its owner: fetch__proxy_choose) on the same slot and returns
 * 0, without on_done; its delivered bytes stay delivered. Returns 1 when
 * the transfer is over, or with the outcome set (FETCH_TRANSIENT) when no
 * proxy is left. */
int fetch__slot_next_piece(struct fetch *f, struct fetch_slot *s, CURLcode cc);

/* How long a cut piece may drain: a proxy that is slow to finish it
 * costs a slot no longer. */
#define FETCH__DRAIN_MAX_MS 5000u

/* Ends the cut transfer of slot s at once, with fetch__slot_finish's
 * on_done (outcome o, reason why), and when s is its lane's open request
 * through a proxy (not down), mid-piece, sent or receiving, and the lane's
 * other slot is idle, leaves its piece draining (DRAINING, on the event
 * thread's later turns) and makes the other slot the lane's open one, so
 * that the proxy finishes the slice under way rather than dropping it
 * (nginx does, when its client goes: proxy_ignore_client_abort off).
 * Returns true when it did; false, doing nothing, otherwise. May be
 * called from s's body callback. */
bool fetch__slot_cut_drain(struct fetch *f, struct fetch_slot *s,
			   enum fetch_outcome o, const char *why);

/* Ends the drain of slot s (the request counted, the handle out of
 * curl): IDLE, no on_done. */
void fetch__slot_drain_end(struct fetch_slot *s);

/* Bytes a stripe, the unit a group's members share: the chunk, or
 * FETCH__STRIPE_MIN when the chunk is smaller. A request through a proxy
 * (a piece) covers one stripe at most. */
#define FETCH__STRIPE_MIN (1024u * 1024u)
uint64_t fetch__stripe_size(const struct fetch_config *cfg);

/* When slot s's finished response is a redirect, sends the same range to
 * its next hop on the same slot (also while sent ahead: a promotion finds
 * it under way) and returns 0. Returns 1 when it is no redirect, or a
 * negative errno with the outcome set (FETCH_GONE for a refused hop). */
int fetch__slot_follow(struct fetch *f, struct fetch_slot *s);

/* When slot s's response refused its credentials and it was not sent
 * again yet, holds it until newer ones come (fetch__slot_auth_resume) and
 * returns true. */
bool fetch__slot_auth_hold(struct fetch *f, struct fetch_slot *s);

/* Sends again, once, each held request for which newer credentials came
 * (or whose wait is over: then with the ones there are). Returns whether
 * one still waits. */
bool fetch__slot_auth_resume(struct fetch *f);

#endif

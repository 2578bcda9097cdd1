/* fetch_int: helpers shared inside fetch/; no other folder includes this. */
#ifndef FETCH_INT_H
#define FETCH_INT_H

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

/* fetch/url.c. The URL a redirect to target leads to: target without any
 * userinfo, with start's userinfo when it has start's origin. Returns 0,
 * -ENOMEM. */
int fetch__url_hop(const char *start, const char *target, char **out);

/* fetch/url.c. Writes url without its userinfo into buf, cut to cap
 * bytes (for reasons and log lines; never for a request). */
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
uint64_t fetch__auth_gen(struct fetch_auth *a);

/* A request with set gen was refused: asks for a newer one. */
void fetch__auth_expired(struct fetch_auth *a, uint64_t gen);

/* Waits until a set newer than gen is current, at most timeout_ms; true
 * when one is. */
bool fetch__auth_wait(struct fetch_auth *a, uint64_t gen, long timeout_ms);

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
 * gathered. Returns 0 once a response that is no redirect ended (its
 * CURLcode in *cc, its status in *status, the URL it came from in *final:
 * free() it), or what fetch__redirect_next returned, with err set. */
int fetch__perform(const struct fetch_config *cfg, CURL *easy, const char *url,
		   struct curl_slist *headers, bool no_cache,
		   void (*reset)(void *arg), void *arg,
		   const char *(*body)(void *arg), CURLcode *cc, char **final,
		   long *status, char *err, size_t errlen);

/* fetch/proxy.c: the choice of a proxy and what is learnt from each
 * request. */

/* Which entry of list a request of url whose chunk index is chunk goes
 * through at now_ms (CLOCK_MONOTONIC), entries whose bit is set in tried
 * left out: an index, or -ENOENT when none is left. */
int fetch__proxy_choose(struct fetch_proxies *list, const char *url,
			uint64_t chunk, uint64_t now_ms, uint32_t tried);

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

/* True when easy's request, which went through a proxy and ended with
 * cc, failed because of the proxy (see fetch.h, "Proxies"). */
bool fetch__proxy_fault(CURL *easy, CURLcode cc);

/* What easy's last response said of a cache (fetch_parse_x_cache). */
int fetch__proxy_cache_status(CURL *easy);

/* The monotonic clock in milliseconds. */
uint64_t fetch__now_ms(void);

#endif

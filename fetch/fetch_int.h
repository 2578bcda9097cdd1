/* fetch_int: helpers shared inside fetch/; no other folder includes this. */
#ifndef FETCH_INT_H
#define FETCH_INT_H

#include <stdbool.h>
#include <stddef.h>

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

/* Builds the list of the configured headers; NULL when there are none or
 * memory ran out (*ok says which). */
struct curl_slist *fetch__headers(const struct fetch_config *cfg, bool *ok);

/* Applies the options every handle shares: timeouts, TLS, proxy, user
 * agent, redirects, no signals. Returns a CURLcode. */
CURLcode fetch__easy_setup(CURL *easy, const struct fetch_config *cfg,
			   char *errbuf);

#endif

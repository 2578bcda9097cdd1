/* redirect: how every request follows a redirect: the next hop's URL, what
 * it may carry (the configured headers, the first URL's userinfo) and when
 * the chain is refused. curl follows none itself, so that no credential
 * crosses to an origin it was not given for. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <curl/curl.h>

#include "fetch/fetch.h"
#include "fetch/fetch_int.h"

bool fetch__sends_headers(const struct fetch_config *cfg, const char *url)
{
	char *origin = NULL;
	bool yes = false;

	if ((cfg->nheaders == 0 && cfg->auth == NULL) ||
	    fetch_url_origin(url, &origin) != 0)
		return false;
	for (size_t i = 0; i < cfg->nheader_origins && !yes; i++)
		yes = strcmp(origin, cfg->header_origins[i]) == 0;
	free(origin);
	return yes;
}

bool fetch__is_redirect(CURL *easy)
{
	long status = 0;

	curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
	return status >= 300 && status <= 399;
}

/* Writes "what: A -> B" with both URLs shown without userinfo into err;
 * returns rc. */
static int hop_error(char *err, size_t errlen, int rc, const char *what,
		     const char *a, const char *b)
{
	char *ra = fetch_url_redacted(a), *rb = fetch_url_redacted(b);

	rc = fetch_text_errf(err, errlen, rc, "%s: %s -> %s", what,
			     ra != NULL ? ra : "?", rb != NULL ? rb : "?");
	free(ra);
	free(rb);
	return rc;
}

int fetch__redirect_next(CURL *easy, const char *start, const char *from,
			 unsigned hops, char **next, char *err, size_t errlen)
{
	char *target = NULL;

	if (!fetch__is_redirect(easy) ||
	    curl_easy_getinfo(easy, CURLINFO_REDIRECT_URL, &target) !=
		    CURLE_OK ||
	    target == NULL)
		return 1;
	if (hops >= (unsigned)FETCH__MAX_REDIRS)
		return hop_error(err, errlen, -ELOOP,
				 "too many redirects (over 8)", start, target);
	/* A secret given for https never travels in the clear, and a reader
	 * never gets bytes an attacker on the path could have changed. */
	if (strncasecmp(from, "https://", 8) == 0 &&
	    strncasecmp(target, "https://", 8) != 0)
		return hop_error(err, errlen, -EPERM,
				 "refusing a redirect from https to http", from,
				 target);
	return fetch__url_hop(start, target, next);
}

/* Runs easy's request of `at` through the proxy the list picks (none: as
 * configured), and again through the next one while a proxy fails it or
 * gives an answer bad(arg, proxy) refuses; reset(arg) forgets what a
 * failed attempt's callbacks gathered. */
static CURLcode perform_via(const struct fetch_config *cfg, CURL *easy,
			    const char *at, void (*reset)(void *),
			    bool (*bad)(void *, const char *), void *arg,
			    char *err, size_t errlen)
{
	uint32_t tried = 0;
	const char *why;
	CURLcode cc;

	if (cfg->proxies == NULL) {
		cc = curl_easy_perform(easy);
		fetch__request_ended(cfg, easy, at, -1, false);
		return cc;
	}
	for (;;) {
		int px = fetch__proxy_choose(cfg->proxies, at, 0,
					     fetch__now_ms(), tried);
		bool direct;

		if (px < 0) {
			snprintf(err, errlen,
				 "every proxy of -o proxy= is excluded");
			return CURLE_COULDNT_RESOLVE_PROXY;
		}
		direct = fetch__proxy_is_direct(cfg->proxies, px);
		curl_easy_setopt(easy, CURLOPT_PROXY,
				 fetch__proxy_url(cfg->proxies, px));
		fetch__proxy_request(cfg->proxies, px);
		cc = curl_easy_perform(easy);
		fetch__request_ended(cfg, easy, at, px, false);
		/* The caller's deadline or the mount's end cut the request:
		 * no word on the proxy either way. */
		if (fetch__bound_check(cfg, &why) != 0)
			return cc;
		if (direct) {
			fetch__proxy_answered(cfg->proxies, px, 0);
			return cc;
		}
		if (fetch__proxy_fault(easy, cc)) {
			fetch__proxy_failed(cfg->proxies, px, fetch__now_ms());
		} else if (bad != NULL &&
			   bad(arg, fetch__proxy_shown(cfg->proxies, px))) {
			/* An answer no origin gives: the proxy's, not a
			 * verdict on the URL while another route is left. */
			fetch__proxy_bad(cfg->proxies, px, fetch__now_ms());
		} else {
			fetch__proxy_answered(cfg->proxies, px,
					      fetch__proxy_cache_status(easy));
			return cc;
		}
		tried |= 1u << px;
		if (fetch__proxy_choose(cfg->proxies, at, 0, fetch__now_ms(),
					tried) < 0)
			return cc; /* the last one's answer */
		reset(arg);
	}
}

/* One request from url, hop by hop, with the credentials of cref (NULL:
 * headers alone), which sign each hop whose origin they were given for. */
static int perform_hops(const struct fetch_config *cfg, CURL *easy,
			const char *url, struct curl_slist *headers,
			const struct fetch__cref *cref, bool no_cache,
			void (*reset)(void *),
			bool (*bad)(void *, const char *), void *arg,
			CURLcode *cc, char **final, char *err, size_t errlen)
{
	char *hop = NULL, *next = NULL;
	const char *at = url;
	char nocache[] = "Cache-Control: no-cache";
	struct curl_slist nc = {.data = nocache};
	int rc;

	for (unsigned hops = 0;; hops++) {
		bool allowed = fetch__sends_headers(cfg, at);
		struct curl_slist *list = !allowed	 ? NULL
					  : cref != NULL ? cref->headers
							 : headers;

		if (no_cache) {
			nc.next = list;
			list = &nc;
		}
		curl_easy_setopt(easy, CURLOPT_URL, at);
		curl_easy_setopt(easy, CURLOPT_HTTPHEADER, list);
		fetch__auth_apply(easy, cref, allowed);
		err[0] = '\0';
		*cc = perform_via(cfg, easy, at, reset, bad, arg, err, errlen);
		if (*cc != CURLE_OK && *cc != CURLE_WRITE_ERROR)
			break;
		rc = fetch__redirect_next(easy, url, at, hops, &next, err,
					  errlen);
		if (rc == 1)
			break;
		if (rc != 0) {
			free(hop);
			if (rc == -ENOMEM)
				return fetch_text_errf(err, errlen, rc,
						       "out of memory");
			return rc;
		}
		free(hop);
		hop = next;
		at = hop;
		reset(arg);
	}
	*final = hop != NULL ? hop : strdup(url);
	return *final != NULL ? 0 : -ENOMEM;
}

int fetch__perform(const struct fetch_config *cfg, CURL *easy, const char *url,
		   struct curl_slist *headers, bool no_cache,
		   void (*reset)(void *arg),
		   bool (*bad)(void *arg, const char *proxy), void *arg,
		   const char *(*body)(void *arg), CURLcode *cc, char **final,
		   long *status, char *err, size_t errlen)
{
	struct fetch__cref *cref = fetch__auth_get(cfg->auth);
	int rc;

	*status = 0;
	rc = perform_hops(cfg, easy, url, headers, cref, no_cache, reset, bad,
			  arg, cc, final, err, errlen);
	if (rc == 0)
		curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, status);
	if (rc == 0 && cref != NULL &&
	    fetch__auth_refused(*status, body(arg))) {
		/* Refused for its credentials: once more with newer ones. */
		uint64_t gen = cref->gen;

		fetch__auth_expired(cfg->auth, gen);
		fetch__auth_wait(cfg, gen,
				 fetch__bound_ms(cfg, FETCH_AUTH_WAIT_MS));
		fetch__auth_put(cref);
		cref = fetch__auth_get(cfg->auth);
		free(*final);
		*final = NULL;
		reset(arg);
		rc = perform_hops(cfg, easy, url, headers, cref, no_cache,
				  reset, bad, arg, cc, final, err, errlen);
		if (rc == 0)
			curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, status);
	}
	fetch__auth_put(cref);
	return rc;
}

/* url: the parts of a URL that decide where secrets may go and what may be
 * shown: its origin (scheme, host, port) and its userinfo. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "fetch/fetch.h"

/* The userinfo of url, as [*start, *end) offsets; false when it has none.
 * The authority runs from "://" to the first '/', '?' or '#'; userinfo is
 * everything up to its last '@', so that a password holding an unencoded
 * '@' is still all taken for userinfo. */
static bool userinfo_span(const char *url, size_t *start, size_t *end)
{
	const char *auth = strstr(url, "://");
	size_t alen;
	const char *at = NULL;

	if (auth == NULL)
		return false;
	auth += 3;
	alen = strcspn(auth, "/?#");
	for (size_t i = 0; i < alen; i++)
		if (auth[i] == '@')
			at = auth + i;
	if (at == NULL)
		return false;
	*start = (size_t)(auth - url);
	*end = (size_t)(at + 1 - url);
	return true;
}

bool fetch_url_has_userinfo(const char *url)
{
	size_t s, e;

	return userinfo_span(url, &s, &e);
}

char *fetch_url_redacted(const char *url)
{
	size_t s, e, len = strlen(url);
	char *out;

	if (!userinfo_span(url, &s, &e))
		return strdup(url);
	out = malloc(len - (e - s) + 1);
	if (out == NULL)
		return NULL;
	memcpy(out, url, s);
	memcpy(out + s, url + e, len - e + 1);
	return out;
}

int fetch_url_origin(const char *url, char **out)
{
	CURLU *h = curl_url();
	char *scheme = NULL, *host = NULL, *port = NULL;
	size_t len;
	int rc = -EINVAL;

	if (h == NULL)
		return -ENOMEM;
	if (curl_url_set(h, CURLUPART_URL, url, 0) != CURLUE_OK ||
	    curl_url_get(h, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
	    curl_url_get(h, CURLUPART_HOST, &host, 0) != CURLUE_OK ||
	    curl_url_get(h, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) !=
		    CURLUE_OK)
		goto out;
	/* curl lowercases the scheme; host names compare without case. */
	for (char *p = host; *p != '\0'; p++)
		if (*p >= 'A' && *p <= 'Z')
			*p = (char)(*p - 'A' + 'a');
	len = strlen(scheme) + strlen(host) + strlen(port) + 5;
	*out = malloc(len);
	if (*out == NULL) {
		rc = -ENOMEM;
		goto out;
	}
	snprintf(*out, len, "%s://%s:%s", scheme, host, port);
	rc = 0;
out:
	curl_free(scheme);
	curl_free(host);
	curl_free(port);
	curl_url_cleanup(h);
	return rc;
}

bool fetch_url_same_origin(const char *a, const char *b)
{
	char *oa = NULL, *ob = NULL;
	bool same;

	same = fetch_url_origin(a, &oa) == 0 && fetch_url_origin(b, &ob) == 0 &&
	       strcmp(oa, ob) == 0;
	free(oa);
	free(ob);
	return same;
}

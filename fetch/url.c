/* url: the parts of a URL that decide where secrets may go and what may be
 * shown: its origin (scheme, host, port) and its userinfo. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "fetch/fetch.h"
#include "fetch/fetch_int.h"

/* The length of the userinfo ("user:password@") at the start of the
 * authority auth, or 0 when it has none. The authority runs to the first
 * character of `stops`; userinfo is everything up to its last '@', so that
 * a password holding an unencoded '@' is still all taken for userinfo. */
static size_t userinfo_len(const char *auth, const char *stops)
{
	size_t alen = strcspn(auth, stops);
	size_t len = 0;

	for (size_t i = 0; i < alen; i++)
		if (auth[i] == '@')
			len = i + 1;
	return len;
}

bool fetch_url_userinfo(const char *url, size_t *start, size_t *end)
{
	const char *auth = strstr(url, "://");
	size_t len;

	if (auth == NULL)
		return false;
	auth += 3;
	len = userinfo_len(auth, "/?#");
	if (len == 0)
		return false;
	*start = (size_t)(auth - url);
	*end = *start + len;
	return true;
}

bool fetch_url_has_userinfo(const char *url)
{
	size_t s, e;

	return fetch_url_userinfo(url, &s, &e);
}

char *fetch_url_redacted(const char *url)
{
	size_t s, e, len = strlen(url);
	char *out;

	if (!fetch_url_userinfo(url, &s, &e))
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

void fetch_text_redact(char *text)
{
	char *p = text;

	/* In text a URL also ends at white space; a password cannot hold
	 * one (curl refuses it), so nothing of it is left behind. */
	while ((p = strstr(p, "://")) != NULL) {
		char *auth = p + 3;
		size_t len = userinfo_len(auth, "/?# \t\r\n");

		if (len > 0)
			memmove(auth, auth + len, strlen(auth + len) + 1);
		p = auth;
	}
}

void fetch_text_fit(char *buf, size_t cap, const char *whole)
{
	char mark[48];
	size_t len = strlen(whole), head, tail, room;
	int ml;

	if (len < cap) {
		memcpy(buf, whole, len + 1);
		return;
	}

	ml = snprintf(mark, sizeof(mark), " [... %zu bytes left out ...] ",
		      len);
	if (ml < 0 || cap < (size_t)ml + 64) {
		snprintf(buf, cap, "%s", whole);
		return;
	}
	room = cap - 1 - (size_t)ml;
	/* The reason gets the larger share: it is what the reader needs. */
	head = room * 3 / 8;
	tail = room - head;
	while (head > 0 && ((unsigned char)whole[head] & 0xc0) == 0x80)
		head--;
	while (tail > 0 && ((unsigned char)whole[len - tail] & 0xc0) == 0x80)
		tail--;
	snprintf(mark, sizeof(mark), " [... %zu bytes left out ...] ",
		 len - head - tail);
	memcpy(buf, whole, head);
	snprintf(buf + head, cap - head, "%s%s", mark, whole + len - tail);
}

void fetch_text_vformat(char *buf, size_t cap, const char *fmt, va_list ap)
{
	va_list again;
	char *whole;
	int n;

	va_copy(again, ap);
	n = vsnprintf(buf, cap, fmt, ap);
	if (n > 0 && (size_t)n >= cap &&
	    (whole = malloc((size_t)n + 1)) != NULL) {
		vsnprintf(whole, (size_t)n + 1, fmt, again);
		fetch_text_fit(buf, cap, whole);
		free(whole);
	}
	va_end(again);
}

int fetch__url_hop(const char *start, const char *target, char **out)
{
	char *bare = fetch_url_redacted(target), *joined;
	const char *auth;
	size_t s, e, at, len;

	if (bare == NULL)
		return -ENOMEM;
	/* Whatever userinfo the target names, only the first URL's own goes
	 * on, and only to its own origin. */
	if (!fetch_url_userinfo(start, &s, &e) ||
	    !fetch_url_same_origin(start, bare)) {
		*out = bare;
		return 0;
	}
	auth = strstr(bare, "://");
	at = (size_t)(auth + 3 - bare);
	len = strlen(bare);
	joined = malloc(len + (e - s) + 1);
	if (joined == NULL) {
		free(bare);
		return -ENOMEM;
	}
	memcpy(joined, bare, at);
	memcpy(joined + at, start + s, e - s);
	memcpy(joined + at + (e - s), bare + at, len - at + 1);
	free(bare);
	*out = joined;
	return 0;
}

void fetch__url_shown(const char *url, char *buf, size_t cap)
{
	size_t s = 0, e = 0;

	/* The userinfo is skipped before the cut, so that no part of it is
	 * left however short buf is. */
	if (!fetch_url_userinfo(url, &s, &e))
		s = e = 0;
	snprintf(buf, cap, "%.*s%s", (int)s, url, url + e);
}

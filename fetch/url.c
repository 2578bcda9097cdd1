/* url: the parts of a URL that decide where secrets may go and what may be
 * shown: its origin (scheme, host, port), its userinfo and the signed
 * values of its query. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

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

/* Set once, before any thread starts (fetch_url_show_signatures). */
static bool show_signatures;

/* The last words of the names of query parameters whose value is a
 * credential: a presigned URL's signature and token (S3's
 * X-Amz-Signature, X-Amz-Security-Token and X-Amz-Credential, GCS's
 * X-Goog-Signature, CloudFront's Signature, Azure's sig) let whoever
 * reads them fetch the object until they expire, as a password does; an
 * OAuth access_token, an api_key, a secret or password likewise. */
static const char *const secret_words[] = {
	"signature", "sig", "token",  "credential", "credentials",
	"secret",    "key", "apikey", "password",   "passwd",
};

/* True when the query parameter named [name, name + len) holds a
 * credential: its last word (after the last '-', '_' or '.'), without
 * case, is one of secret_words. */
static bool secret_param(const char *name, size_t len)
{
	size_t w = len;

	while (w > 0 && name[w - 1] != '-' && name[w - 1] != '_' &&
	       name[w - 1] != '.')
		w--;
	for (size_t i = 0; i < sizeof(secret_words) / sizeof(secret_words[0]);
	     i++)
		if (strlen(secret_words[i]) == len - w &&
		    strncasecmp(name + w, secret_words[i], len - w) == 0)
			return true;
	return false;
}

/* Masks the value of every secret parameter of the query at q, which
 * runs to '#' or to q + len: the value becomes as many '*' as it had
 * bytes, at most 3, so that the query only shrinks. With keep_len every
 * byte of the value becomes a '*' instead (argv keeps its length). In
 * text (text true), a value that ends the query loses its last byte
 * from the mask when it is punctuation the line put after the URL.
 * Returns the query's new length; the bytes after it are moved up. */
static size_t mask_query(char *q, size_t len, bool keep_len, bool text)
{
	size_t i = 0, end = len;
	char *hash = memchr(q, '#', len);

	if (hash != NULL)
		end = (size_t)(hash - q);
	while (i < end) {
		size_t name = i, eq, stop, vlen, shown;

		while (i < end && q[i] != '&' && q[i] != '=')
			i++;
		eq = i;
		while (i < end && q[i] != '&')
			i++;
		stop = i;
		if (eq < stop && secret_param(q + name, eq - name)) {
			vlen = stop - eq - 1;
			if (text && stop == end && vlen > 1 &&
			    strchr(".,:;)]", q[stop - 1]) != NULL)
				vlen--;
			shown = keep_len || vlen < 3 ? vlen : 3;
			memset(q + eq + 1, '*', shown);
			if (shown < vlen) {
				memmove(q + eq + 1 + shown, q + eq + 1 + vlen,
					len - (eq + 1 + vlen));
				len -= vlen - shown;
				end -= vlen - shown;
				stop -= vlen - shown;
			}
			i = stop;
		}
		i++;
	}
	return len;
}

/* Where url's query starts (its '?'), or NULL: the first '?' past the
 * authority of its first "://" (in a string with none, the first '?'),
 * so that masking never reaches the authority whose userinfo is
 * removed. */
static char *query_of(char *url)
{
	char *p = strstr(url, "://");

	if (p == NULL)
		return strchr(url, '?');
	p += 3;
	return strchr(p + strcspn(p, "/?#"), '?');
}

void fetch_url_show_signatures(bool show)
{
	show_signatures = show;
}

bool fetch_url_signed(const char *url)
{
	char *copy = strdup(url), *q;
	bool is = false;

	/* Masking a copy and comparing is the one rule in one place. */
	if (copy == NULL)
		return true; /* treated as secret when unsure */
	q = query_of(copy);
	if (q != NULL) {
		size_t len = strlen(q + 1);

		mask_query(q + 1, len, true, false);
		is = strcmp(copy, url) != 0;
	}
	free(copy);
	return is;
}

void fetch_url_mask_signed(char *url)
{
	char *q = query_of(url);

	if (q != NULL)
		mask_query(q + 1, strlen(q + 1), true, false);
}

/* Masks the signed values of the URL text at url (NUL-terminated), in
 * place, unless asked to show them. */
static void shown_query(char *url, bool always)
{
	char *q = query_of(url);

	if (q != NULL && (always || !show_signatures))
		q[1 + mask_query(q + 1, strlen(q + 1), false, false)] = '\0';
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

/* url without its userinfo, as a new string; NULL when memory ran out. */
static char *url_bare(const char *url)
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

/* url without its userinfo, its signed values masked when always or
 * unless asked to show them; NULL when memory ran out. */
static char *redacted(const char *url, bool always)
{
	char *out = url_bare(url);

	if (out != NULL)
		shown_query(out, always);
	return out;
}

char *fetch_url_redacted(const char *url)
{
	return redacted(url, false);
}

char *fetch_url_masked(const char *url)
{
	return redacted(url, true);
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
		size_t len = userinfo_len(auth, "/?# \t\r\n"), ulen, qlen;
		char *q;

		if (len > 0)
			memmove(auth, auth + len, strlen(auth + len) + 1);
		p = auth;
		/* The URL runs to white space or a quote; its query, from
		 * its first '?'. */
		ulen = strcspn(auth, " \t\r\n\"'<>`");
		q = memchr(auth, '?', ulen);
		if (q == NULL || show_signatures)
			continue;
		qlen = (size_t)(auth + ulen - (q + 1));
		len = mask_query(q + 1, qlen, false, true);
		if (len < qlen)
			memmove(q + 1 + len, q + 1 + qlen,
				strlen(q + 1 + qlen) + 1);
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

/* fetch_text_vformat, and with redact fetch_text_vformat_redacted: the
 * whole line is redacted before it is cut, so that a cut inside a long
 * userinfo never leaves part of it behind; a redacted line too long for
 * cap that cannot be formatted whole (memory ran out) is not shown cut
 * unredacted but as "(a line too long to show)". */
static void text_vformat(char *buf, size_t cap, const char *fmt, va_list ap,
			 bool redact)
{
	va_list again;
	char *whole;
	int n;

	va_copy(again, ap);
	n = vsnprintf(buf, cap, fmt, ap);
	if (n >= 0 && (size_t)n >= cap) {
		whole = malloc((size_t)n + 1);
		if (whole != NULL) {
			vsnprintf(whole, (size_t)n + 1, fmt, again);
			if (redact)
				fetch_text_redact(whole);
			fetch_text_fit(buf, cap, whole);
			free(whole);
		} else if (redact) {
			snprintf(buf, cap, "(a line too long to show)");
		}
	} else if (redact) {
		fetch_text_redact(buf);
	}
	va_end(again);
}

void fetch_text_vformat(char *buf, size_t cap, const char *fmt, va_list ap)
{
	text_vformat(buf, cap, fmt, ap, false);
}

void fetch_text_vformat_redacted(char *buf, size_t cap, const char *fmt,
				 va_list ap)
{
	text_vformat(buf, cap, fmt, ap, true);
}

int fetch_text_verrf(char *err, size_t errlen, int rc, const char *fmt,
		     va_list ap)
{
	fetch_text_vformat(err, errlen, fmt, ap);
	return rc;
}

int fetch_text_errf(char *err, size_t errlen, int rc, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	rc = fetch_text_verrf(err, errlen, rc, fmt, ap);
	va_end(ap);
	return rc;
}

int fetch__url_hop(const char *start, const char *target, char **out)
{
	/* The next request's URL: its query is sent as given. */
	char *bare = url_bare(target), *joined;
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
	/* Redacted before the cut, so that no part of a userinfo or of a
	 * signed value is left however short buf is. */
	char *r = redacted(url, false);

	snprintf(buf, cap, "%s", r != NULL ? r : "(a URL: out of memory)");
	free(r);
}

/* http: parsers and classifiers for the HTTP headers that range transfers
 * depend on; no I/O, so they are unit-tested and fuzzed directly. */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "fetch/fetch.h"
#include "fetch/fetch_int.h"

/* Parses a decimal uint64 at *p, advancing it; rejects overflow and an
 * empty number. */
static int parse_u64(const char **p, uint64_t *out)
{
	const char *s = *p;
	uint64_t v = 0;

	if (!isdigit((unsigned char)*s))
		return -EINVAL;
	while (isdigit((unsigned char)*s)) {
		unsigned d = (unsigned)(*s - '0');

		if (v > (UINT64_MAX - d) / 10)
			return -EINVAL;
		v = v * 10 + d;
		s++;
	}
	*p = s;
	*out = v;
	return 0;
}

static const char *skip_space(const char *s)
{
	while (*s == ' ' || *s == '\t')
		s++;
	return s;
}

int fetch_parse_content_range(const char *v, uint64_t *start_out,
			      uint64_t *end_incl_out, uint64_t *total_out)
{
	const char *p = skip_space(v);
	uint64_t start = UINT64_MAX, end = UINT64_MAX, total = UINT64_MAX;

	if (strncasecmp(p, "bytes", 5) != 0)
		return -EINVAL;
	p = skip_space(p + 5);
	/* UINT64_MAX marks "*" in the results: a number that large is no
	 * offset or size, and would pass for one. */
	if (*p == '*') {
		p++;
	} else {
		if (parse_u64(&p, &start) != 0 || *p++ != '-' ||
		    parse_u64(&p, &end) != 0 || end < start ||
		    end == UINT64_MAX)
			return -EINVAL;
	}
	if (*p++ != '/')
		return -EINVAL;
	if (*p == '*') {
		if (start == UINT64_MAX)
			return -EINVAL; /* "* / *" says nothing */
		p++;
	} else {
		if (parse_u64(&p, &total) != 0 || total == UINT64_MAX)
			return -EINVAL;
		if (start != UINT64_MAX && end >= total)
			return -EINVAL;
	}
	p = skip_space(p);
	if (*p != '\0' && *p != '\r' && *p != '\n')
		return -EINVAL;
	*start_out = start;
	*end_incl_out = end;
	*total_out = total;
	return 0;
}

int fetch_parse_retry_after(const char *v, int64_t now_s, uint64_t *ms_out)
{
	const char *p = skip_space(v);
	uint64_t secs;
	struct tm tm;
	const char *rest;

	if (isdigit((unsigned char)*p)) {
		/* Any run of digits is a delay, however long: a number past
		 * 64 bits asks for longer than any cap, not for none. */
		if (parse_u64(&p, &secs) != 0) {
			secs = UINT64_MAX;
			while (isdigit((unsigned char)*p))
				p++;
		}
		p = skip_space(p);
		if (*p != '\0' && *p != '\r' && *p != '\n')
			return -EINVAL;
		if (secs > UINT64_MAX / 1000)
			secs = UINT64_MAX / 1000;
		*ms_out = secs * 1000;
		return 0;
	}
	/* IMF-fixdate, the only date form servers send in practice. */
	memset(&tm, 0, sizeof(tm));
	rest = strptime(p, "%a, %d %b %Y %H:%M:%S GMT", &tm);
	if (rest == NULL)
		return -EINVAL;
	{
		int64_t at = (int64_t)timegm(&tm);
		uint64_t secs_left =
			at > now_s ? (uint64_t)at - (uint64_t)now_s : 0;

		*ms_out = secs_left > UINT64_MAX / 1000 ? UINT64_MAX
							: secs_left * 1000;
	}
	return 0;
}

int fetch_parse_content_length(const char *v, uint64_t *out)
{
	const char *p = skip_space(v);
	uint64_t n;

	if (parse_u64(&p, &n) != 0)
		return -EINVAL;
	p = skip_space(p);
	if (*p != '\0' && *p != '\r' && *p != '\n')
		return -EINVAL;
	*out = n;
	return n > FETCH_SIZE_MAX ? -EFBIG : 0;
}

bool fetch_coding_is_identity(const char *v, bool transfer)
{
	const char *p = v;

	for (;;) {
		size_t n;

		while (*p == ' ' || *p == '\t' || *p == ',')
			p++;
		if (*p == '\0' || *p == '\r' || *p == '\n')
			return true;
		n = strcspn(p, " \t,\r\n");
		if (!(n == 8 && strncasecmp(p, "identity", 8) == 0) &&
		    !(transfer && n == 7 && strncasecmp(p, "chunked", 7) == 0))
			return false;
		p += n;
	}
}

/* True when the word [w, w + n) contains s, case-insensitive. */
static bool word_has(const char *w, size_t n, const char *s)
{
	size_t k = strlen(s);

	for (size_t i = 0; i + k <= n; i++)
		if (strncasecmp(w + i, s, k) == 0)
			return true;
	return false;
}

int fetch_parse_x_cache(const char *x_cache, const char *age)
{
	if (x_cache != NULL) {
		const char *w = x_cache;
		size_t n;

		while (*w == ' ' || *w == '\t')
			w++;
		n = strcspn(w, " \t,;\r\n");
		/* nginx's $upstream_cache_status, Squid's "HIT from host" and
		 * TCP_MEM_HIT, Traffic Server's hit-fresh: a served copy is a
		 * hit, stale or revalidated ones too. */
		if (word_has(w, n, "hit") || word_has(w, n, "stale") ||
		    word_has(w, n, "updating") || word_has(w, n, "revalidated"))
			return 1;
		if (word_has(w, n, "miss") || word_has(w, n, "expired") ||
		    word_has(w, n, "bypass"))
			return -1;
		return 0;
	}
	if (age != NULL) {
		const char *p = age;
		uint64_t v;

		while (*p == ' ' || *p == '\t')
			p++;
		if (parse_u64(&p, &v) != 0)
			return 0;
		p = skip_space(p);
		if (*p != '\0' && *p != '\r' && *p != '\n')
			return 0;
		return v > 0 ? 1 : -1;
	}
	return 0;
}

enum fetch_outcome fetch_classify_status(long status)
{
	switch (status) {
	case 429:
	case 503:
		return FETCH_THROTTLED;
	case 401:
	case 403:
	case 404:
	case 410:
		return FETCH_GONE;
	case 200:
	case 416:
		return FETCH_FATAL;
	default:
		break;
	}
	if (status >= 500)
		return FETCH_TRANSIENT;
	if (status >= 400)
		return FETCH_GONE;
	return FETCH_FATAL;
}

bool fetch__header_is(const char *line, size_t len, const char *name,
		      const char **value_out)
{
	size_t n = strlen(name);

	if (len <= n || strncasecmp(line, name, n) != 0 || line[n] != ':')
		return false;
	*value_out = line + n + 1;
	return true;
}

void fetch__header_value(const char *v, size_t len, char *out, size_t cap)
{
	size_t n;

	while (len > 0 && (*v == ' ' || *v == '\t')) {
		v++;
		len--;
	}
	while (len > 0 && (v[len - 1] == '\r' || v[len - 1] == '\n' ||
			   v[len - 1] == ' ' || v[len - 1] == '\t'))
		len--;
	n = len < cap - 1 ? len : cap - 1;
	memcpy(out, v, n);
	out[n] = '\0';
}

/* Copies a header value into a short field for an error line: at most 40
 * bytes of it, "..." when it was cut. */
static void value_cut(const char *v, char *out, size_t cap)
{
	snprintf(out, cap, "%.40s%s", v, strlen(v) > 40 ? "..." : "");
}

void fetch__head_line(struct fetch__head *h, const char *line, size_t len)
{
	const char *v;
	char buf[128];
	bool transfer;
	uint64_t ms;

	if (len >= 5 && strncmp(line, "HTTP/", 5) == 0) {
		/* A new response (after a redirect): forget the last one. */
		memset(h, 0, sizeof(*h));
	} else if (fetch__header_is(line, len, "ETag", &v)) {
		fetch__header_value(v, len - (size_t)(v - line), h->etag,
				    sizeof(h->etag));
	} else if (fetch__header_is(line, len, "Last-Modified", &v)) {
		fetch__header_value(v, len - (size_t)(v - line),
				    h->last_modified, sizeof(h->last_modified));
	} else if (fetch__header_is(line, len, "Content-Range", &v)) {
		fetch__header_value(v, len - (size_t)(v - line), buf,
				    sizeof(buf));
		h->cr_seen =
			fetch_parse_content_range(buf, &h->cr_start, &h->cr_end,
						  &h->cr_total) == 0;
		value_cut(buf, h->cr_raw, sizeof(h->cr_raw));
	} else if (fetch__header_is(line, len, "Content-Length", &v)) {
		fetch__header_value(v, len - (size_t)(v - line), buf,
				    sizeof(buf));
		h->cl_seen = fetch_parse_content_length(
				     buf, &h->content_length) == 0;
		if (!h->cl_seen)
			value_cut(buf, h->cl_bad, sizeof(h->cl_bad));
	} else if (fetch__header_is(line, len, "Retry-After", &v)) {
		fetch__header_value(v, len - (size_t)(v - line), buf,
				    sizeof(buf));
		if (fetch_parse_retry_after(buf, (int64_t)time(NULL), &ms) == 0)
			h->retry_after_ms = ms;
	} else if ((transfer = fetch__header_is(line, len, "Transfer-Encoding",
						&v)) ||
		   fetch__header_is(line, len, "Content-Encoding", &v)) {
		fetch__header_value(v, len - (size_t)(v - line), buf,
				    sizeof(buf));
		if (h->coding[0] == '\0' &&
		    !fetch_coding_is_identity(buf, transfer))
			snprintf(h->coding, sizeof(h->coding), "%s: %.100s",
				 transfer ? "Transfer-Encoding"
					  : "Content-Encoding",
				 buf);
	}
}

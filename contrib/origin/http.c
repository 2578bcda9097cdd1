/* http: the pieces of HTTP/1.1 the origin reads and writes, as pure
 * functions: a request head, a Range, dates, the path of a target and
 * the numbers of the command line and of headers. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "contrib/origin/origin_int.h"

/* Parses a whole string of decimal digits; returns 0 or -EINVAL/-ERANGE. */
int origin__parse_u64(const char *s, size_t len, uint64_t *out)
{
	uint64_t v = 0;
	size_t i;

	if (len == 0)
		return -EINVAL;
	for (i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -EINVAL;
		if (v > (UINT64_MAX - (uint64_t)(s[i] - '0')) / 10)
			return -ERANGE;
		v = v * 10 + (uint64_t)(s[i] - '0');
	}
	*out = v;
	return 0;
}

/* Parses "N", "NK", "NM" or "NG" (powers of 1024) of length len. */
int origin__parse_size(const char *s, size_t len, uint64_t *out)
{
	uint64_t v, mult = 1;
	int rc;

	if (len > 0) {
		switch (s[len - 1]) {
		case 'k':
		case 'K':
			mult = 1024;
			break;
		case 'm':
		case 'M':
			mult = 1024 * 1024;
			break;
		case 'g':
		case 'G':
			mult = 1024 * 1024 * 1024;
			break;
		}
		if (mult > 1)
			len--;
	}
	rc = origin__parse_u64(s, len, &v);
	if (rc < 0)
		return rc;
	if (v > UINT64_MAX / mult)
		return -ERANGE;
	*out = v * mult;
	return 0;
}

/* Writes an IMF-fixdate; the process never calls setlocale, so the day and
 * month names are the C locale's English ones, as HTTP requires. */
void origin__http_date(time_t t, char *out, size_t cap)
{
	struct tm tm;

	gmtime_r(&t, &tm);
	if (strftime(out, cap, "%a, %d %b %Y %H:%M:%S GMT", &tm) == 0 &&
	    cap > 0)
		out[0] = '\0';
}

/* Parses an IMF-fixdate; returns 0 or -EINVAL. */
int origin__http_date_parse(const char *s, time_t *out)
{
	struct tm tm;
	const char *end;

	memset(&tm, 0, sizeof(tm));
	end = strptime(s, "%a, %d %b %Y %H:%M:%S GMT", &tm);
	if (!end)
		return -EINVAL;
	while (*end == ' ' || *end == '\t')
		end++;
	if (*end)
		return -EINVAL;
	*out = timegm(&tm);
	return 0;
}

/* Reads one "bytes=a-b", "bytes=a-" or "bytes=-n". Anything else (other
 * units, several ranges, bad syntax) yields RANGE_FULL: RFC 9110 lets a
 * server ignore a Range it does not want to honour. */
enum range_result origin__range_parse(const char *v, uint64_t size,
				      uint64_t *start, uint64_t *len)
{
	const char *dash, *end;
	uint64_t a = 0, b = 0;
	bool has_a, has_b;

	while (*v == ' ' || *v == '\t')
		v++;
	if (strncasecmp(v, "bytes=", 6) != 0)
		return RANGE_FULL;
	v += 6;
	while (*v == ' ' || *v == '\t')
		v++;
	end = v + strlen(v);
	while (end > v && (end[-1] == ' ' || end[-1] == '\t'))
		end--;
	if (memchr(v, ',', (size_t)(end - v)))
		return RANGE_FULL;
	dash = memchr(v, '-', (size_t)(end - v));
	if (!dash)
		return RANGE_FULL;
	has_a = dash > v;
	has_b = dash + 1 < end;
	if (has_a && origin__parse_u64(v, (size_t)(dash - v), &a) < 0)
		return RANGE_FULL;
	if (has_b &&
	    origin__parse_u64(dash + 1, (size_t)(end - dash - 1), &b) < 0)
		return RANGE_FULL;
	if (!has_a && !has_b)
		return RANGE_FULL;
	if (!has_a) {
		if (b == 0 || size == 0)
			return RANGE_UNSATISFIABLE;
		if (b > size)
			b = size;
		*start = size - b;
		*len = b;
		return RANGE_PART;
	}
	if (has_b && b < a)
		return RANGE_FULL;
	if (a >= size)
		return RANGE_UNSATISFIABLE;
	if (!has_b || b >= size)
		b = size - 1;
	*start = a;
	*len = b - a + 1;
	return RANGE_PART;
}

/* Decodes the path of a request target into out; returns 0, -EINVAL for a
 * malformed target or -ENOENT for one that tries to leave the root. */
static int path_decode(const char *target, char *out, size_t cap)
{
	const char *p = target, *seg;
	size_t n = 0;

	if (strncasecmp(p, "http://", 7) == 0) {
		p = strchr(p + 7, '/');
		if (!p)
			p = "/";
	}
	if (*p != '/')
		return -EINVAL;
	for (; *p && *p != '?' && *p != '#'; p++) {
		char c = *p;

		if (c == '%') {
			char hex[3] = {0};
			char *end;
			long v;

			if (!p[1] || !p[2])
				return -EINVAL;
			hex[0] = p[1];
			hex[1] = p[2];
			v = strtol(hex, &end, 16);
			if (*end || v == 0)
				return -EINVAL;
			c = (char)v;
			p += 2;
		}
		if (n + 1 >= cap)
			return -ENAMETOOLONG;
		out[n++] = c;
	}
	out[n] = '\0';
	for (seg = out; seg; seg = strchr(seg + 1, '/')) {
		if (strncmp(seg, "/..", 3) == 0 && (seg[3] == '/' || !seg[3]))
			return -ENOENT;
	}
	return 0;
}

/* Splits the head in place into rq; returns 0 or -EINVAL. The pointers in
 * rq stay valid until the head buffer is reused for the next request. */
int origin__request_parse(const struct server *srv, char *head,
			  struct request *rq)
{
	char *line, *next, *sp1, *sp2, *colon, *v, *e;
	bool http10;
	int rc;

	memset(rq, 0, sizeof(*rq));
	next = strstr(head, "\r\n");
	if (!next)
		return -EINVAL;
	*next = '\0';
	next += 2;
	line = head;
	sp1 = strchr(line, ' ');
	sp2 = sp1 ? strchr(sp1 + 1, ' ') : NULL;
	if (!sp1 || !sp2 || sp1 == line || sp2 == sp1 + 1)
		return -EINVAL;
	*sp1 = '\0';
	*sp2 = '\0';
	rq->method = line;
	rq->target = sp1 + 1;
	if (strncmp(sp2 + 1, "HTTP/1.", 7) != 0)
		return -EINVAL;
	http10 = strcmp(sp2 + 1, "HTTP/1.0") == 0;
	rq->want_close = http10;
	while (*next) {
		line = next;
		next = strstr(line, "\r\n");
		if (!next)
			break;
		*next = '\0';
		next += 2;
		colon = strchr(line, ':');
		if (!colon)
			return -EINVAL;
		*colon = '\0';
		v = colon + 1;
		while (*v == ' ' || *v == '\t')
			v++;
		e = v + strlen(v);
		while (e > v && (e[-1] == ' ' || e[-1] == '\t'))
			*--e = '\0';
		for (size_t i = 0; i < srv->nlog_headers; i++)
			if (strcasecmp(line, srv->log_headers[i]) == 0)
				rq->logged[i] = v;
		if (rq->nhdr < ORIGIN_HEADERS_MAX) {
			rq->hdr[rq->nhdr].name = line;
			rq->hdr[rq->nhdr++].value = v;
		}
		if (strcasecmp(line, "Range") == 0) {
			rq->range = v;
		} else if (strcasecmp(line, "If-Range") == 0) {
			rq->if_range = v;
		} else if (strcasecmp(line, "If-Match") == 0) {
			rq->if_match = v;
		} else if (strcasecmp(line, "Connection") == 0) {
			if (strcasestr(v, "close"))
				rq->want_close = true;
			else if (http10 && strcasestr(v, "keep-alive"))
				rq->want_close = false;
		} else if (strcasecmp(line, "Transfer-Encoding") == 0 ||
			   (strcasecmp(line, "Content-Length") == 0 &&
			    strcmp(v, "0") != 0)) {
			/* Request bodies are not read; the connection
			 * cannot be reused after one. */
			rq->want_close = true;
		}
	}
	rc = path_decode(rq->target, rq->path, sizeof(rq->path));
	if (rc == -ENOENT) {
		/* Serve as a 404: a path that never resolves. */
		rq->path[0] = '\0';
		rc = 0;
	}
	return rc;
}

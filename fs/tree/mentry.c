/* mentry: one entry of a manifest's files array, its fields checked
 * against docs/manifest.md's rules, and the error lines every check of
 * the manifest writes (naming the entry and the field). What an entry is
 * does not depend on the others: whether its path clashes with another's
 * is the document's check (tree/manifest.c). */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>

#include "fs/base.h"
#include "fs/tree/parse_int.h"
#include "fs/tree/tree.h"

static const char *const entry_fields[] = {
	"path",		"urls", "size",	 "sha256",  "block_size",
	"block_sha256", "mode", "mtime", "regions",
};

const char *tree__json_type(const json_t *v)
{
	switch (json_typeof(v)) {
	case JSON_OBJECT:
		return "an object";
	case JSON_ARRAY:
		return "an array";
	case JSON_STRING:
		return "a string";
	case JSON_INTEGER:
		return "an integer";
	case JSON_REAL:
		return "a real number";
	case JSON_TRUE:
	case JSON_FALSE:
		return "a boolean";
	case JSON_NULL:
		return "null";
	}
	return "an unknown value";
}

/* Writes s (len bytes) into buf as a double-quoted, one-line C-style
 * string, cut with "..." past 80 bytes, so that an error stays readable
 * whatever the manifest holds. Returns buf. */
const char *tree__mquote(const char *s, size_t len, char *buf, size_t cap)
{
	static const char hex[] = "0123456789abcdef";
	size_t o = 0, shown = len > 80 ? 80 : len;

	if (cap < 16)
		return "";
	buf[o++] = '"';
	for (size_t i = 0; i < shown && o + 8 < cap; i++) {
		unsigned char ch = (unsigned char)s[i];

		if (ch == '"' || ch == '\\') {
			buf[o++] = '\\';
			buf[o++] = (char)ch;
		} else if (ch < 0x20 || ch == 0x7f) {
			buf[o++] = '\\';
			buf[o++] = 'x';
			buf[o++] = hex[ch >> 4];
			buf[o++] = hex[ch & 15];
		} else {
			buf[o++] = (char)ch;
		}
	}
	if (shown < len) {
		memcpy(buf + o, "...", 3);
		o += 3;
	}
	buf[o++] = '"';
	buf[o] = '\0';
	return buf;
}

/* Formats "PREFIX: message" into err; returns -EINVAL. */
static int failv(struct tree_mctx *c, const char *prefix, const char *fmt,
		 va_list ap)
{
	char msg[512];

	vsnprintf(msg, sizeof(msg), fmt, ap);
	return fs__errf(c->err, c->errlen, -EINVAL, "%s: %s", prefix, msg);
}

/* An error about the manifest's top level ("files: ..."). */
int tree__mfail_top(struct tree_mctx *c, const char *field, const char *fmt,
		    ...)
{
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = failv(c, field, fmt, ap);
	va_end(ap);
	return rc;
}

/* An error about a field of entry c->index ("files[3].sha256: ..."); a
 * NULL field names the entry itself. */
int tree__mfail(struct tree_mctx *c, const char *field, const char *fmt, ...)
{
	char prefix[64];
	va_list ap;
	int rc;

	if (field != NULL)
		snprintf(prefix, sizeof(prefix), "files[%" PRIu32 "].%s",
			 c->index, field);
	else
		snprintf(prefix, sizeof(prefix), "files[%" PRIu32 "]",
			 c->index);
	va_start(ap, fmt);
	rc = failv(c, prefix, fmt, ap);
	va_end(ap);
	return rc;
}

int tree__moom(struct tree_mctx *c)
{
	return fs__errf(c->err, c->errlen, -ENOMEM, "manifest: out of memory");
}

/* Reads a SHA-256 digest written as 64 hex digits. */
static int parse_digest(struct tree_mctx *c, const char *field, const json_t *v,
			uint8_t out[32])
{
	const char *s;
	size_t len, at;
	int rc;

	if (!json_is_string(v))
		return tree__mfail(c, field,
				   "expected a string of 64 hex digits, "
				   "got %s",
				   tree__json_type(v));
	s = json_string_value(v);
	len = json_string_length(v);
	rc = fs__unhex(s, len, out, 32, &at);
	if (rc == -EINVAL)
		return tree__mfail(c, field, "expected 64 hex digits, got %zu",
				   len);
	if (rc != 0) {
		char q[32];

		return tree__mfail(
			c, field,
			"expected 64 hex digits, got %s at position %zu",
			tree__mquote(s + at, 1, q, sizeof(q)), at);
	}
	return 0;
}

/* The text quoted for an error line, made only when there is one: these
 * checks run on every path and URL of a manifest. */
#define QUOTED(s, n) tree__mquote((s), (n), q, sizeof(q))

int tree__mcheck_path(struct tree_mctx *c, const char *p, size_t len)
{
	char q[200];
	size_t start = 0;

	if (len == 0)
		return tree__mfail(c, "path", "is empty");
	if (memchr(p, '\0', len) != NULL)
		return tree__mfail(c, "path", "%s contains a NUL byte",
				   QUOTED(p, len));
	if (len > TREE_MANIFEST_PATH_MAX)
		return tree__mfail(c, "path", "%s is %zu bytes long, over %d",
				   QUOTED(p, len), len, TREE_MANIFEST_PATH_MAX);
	if (p[0] == '/')
		return tree__mfail(c, "path",
				   "%s is absolute; paths are relative to the "
				   "mount's root",
				   QUOTED(p, len));
	while (start <= len) {
		const char *slash = memchr(p + start, '/', len - start);
		size_t end = slash != NULL ? (size_t)(slash - p) : len;
		size_t n = end - start;

		if (n == 0)
			return tree__mfail(c, "path",
					   "%s has an empty component",
					   QUOTED(p, len));
		if (n == 1 && p[start] == '.')
			return tree__mfail(c, "path",
					   "%s has a \".\" component",
					   QUOTED(p, len));
		if (n == 2 && p[start] == '.' && p[start + 1] == '.')
			return tree__mfail(c, "path",
					   "%s has a \"..\" component",
					   QUOTED(p, len));
		if (n > TREE_MANIFEST_NAME_MAX)
			return tree__mfail(
				c, "path",
				"%s has a component of %zu bytes, over %d",
				QUOTED(p, len), n, TREE_MANIFEST_NAME_MAX);
		start = end + 1;
	}
	return 0;
}

int tree__mcheck_url(struct tree_mctx *c, const char *field, const char *u,
		     size_t len)
{
	char q[200];
	size_t host;

	if (len > TREE_MANIFEST_URL_MAX)
		return tree__mfail(c, field, "%s is %zu bytes long, over %d",
				   QUOTED(u, len), len, TREE_MANIFEST_URL_MAX);
	if (len >= 7 && strncasecmp(u, "http://", 7) == 0)
		host = 7;
	else if (len >= 8 && strncasecmp(u, "https://", 8) == 0)
		host = 8;
	else
		return tree__mfail(c, field,
				   "%s is not an http:// or https:// URL",
				   QUOTED(u, len));
	if (host == len || strchr("/?#", u[host]) != NULL)
		return tree__mfail(c, field, "%s has no host", QUOTED(u, len));
	for (size_t i = 0; i < len; i++) {
		unsigned char ch = (unsigned char)u[i];

		if (ch <= 0x20 || ch == 0x7f)
			return tree__mfail(c, field,
					   "%s has a space or control byte at "
					   "position %zu; percent-encode it",
					   QUOTED(u, len), i);
	}
	return 0;
}

static int parse_urls(struct tree_mctx *c, const json_t *v,
		      struct tree_manifest_entry *e)
{
	size_t n;

	if (!json_is_array(v))
		return tree__mfail(c, "urls",
				   "expected an array of URLs, got %s",
				   tree__json_type(v));
	n = json_array_size(v);
	if (n == 0)
		return tree__mfail(c, "urls",
				   "expected at least one URL, got none");
	if (n > TREE_MANIFEST_URLS_MAX)
		return tree__mfail(c, "urls", "has %zu URLs, over %d", n,
				   TREE_MANIFEST_URLS_MAX);
	e->urls = calloc(n, sizeof(*e->urls));
	if (e->urls == NULL)
		return tree__moom(c);
	for (size_t i = 0; i < n; i++) {
		const json_t *u = json_array_get(v, i);
		char field[32];
		size_t len;
		int rc;

		snprintf(field, sizeof(field), "urls[%zu]", i);
		if (!json_is_string(u))
			return tree__mfail(c, field,
					   "expected a URL string, got %s",
					   tree__json_type(u));
		len = json_string_length(u);
		rc = tree__mcheck_url(c, field, json_string_value(u), len);
		if (rc != 0)
			return rc;
		for (size_t j = 0; j < i; j++) {
			if (strcmp(e->urls[j], json_string_value(u)) == 0)
				return tree__mfail(c, field,
						   "duplicates urls[%zu]", j);
		}
		e->urls[i] = strdup(json_string_value(u));
		if (e->urls[i] == NULL)
			return tree__moom(c);
		e->nurls = (uint32_t)(i + 1);
	}
	return 0;
}

static int parse_size(struct tree_mctx *c, const json_t *v,
		      struct tree_manifest_entry *e)
{
	if (!json_is_integer(v))
		return tree__mfail(c, "size", "expected an integer, got %s",
				   tree__json_type(v));
	if (json_integer_value(v) < 0)
		return tree__mfail(
			c, "size",
			"must not be negative, got %" JSON_INTEGER_FORMAT,
			json_integer_value(v));
	e->has_size = true;
	e->size = (uint64_t)json_integer_value(v);
	return 0;
}

static int parse_block_size(struct tree_mctx *c, const json_t *v,
			    struct tree_manifest_entry *e)
{
	json_int_t bs;

	if (!json_is_integer(v))
		return tree__mfail(c, "block_size",
				   "expected an integer, got %s",
				   tree__json_type(v));
	bs = json_integer_value(v);
	if (bs < TREE_MANIFEST_BLOCK_MIN || bs > TREE_MANIFEST_BLOCK_MAX ||
	    (bs & (bs - 1)) != 0)
		return tree__mfail(c, "block_size",
				   "expected a power of two from %u to %u, got "
				   "%" JSON_INTEGER_FORMAT,
				   TREE_MANIFEST_BLOCK_MIN,
				   TREE_MANIFEST_BLOCK_MAX, bs);
	e->block_size = (uint32_t)bs;
	return 0;
}

/* Needs size and block_size already parsed. */
static int parse_block_sha256(struct tree_mctx *c, const json_t *v,
			      struct tree_manifest_entry *e)
{
	uint64_t want;
	size_t n;

	if (!json_is_array(v))
		return tree__mfail(c, "block_sha256",
				   "expected an array of digests, got %s",
				   tree__json_type(v));
	if (e->block_size == 0)
		return tree__mfail(c, "block_sha256", "needs block_size");
	if (!e->has_size)
		return tree__mfail(c, "block_sha256", "needs size");
	n = json_array_size(v);
	want = e->size / e->block_size + (e->size % e->block_size != 0);
	if (want != n)
		return tree__mfail(c, "block_sha256",
				   "expected %" PRIu64 " digests (size %" PRIu64
				   " in blocks of %" PRIu32 "), got %zu",
				   want, e->size, e->block_size, n);
	if (n == 0)
		return 0;
	e->block_sha256 = malloc(n * sizeof(*e->block_sha256));
	if (e->block_sha256 == NULL)
		return tree__moom(c);
	for (size_t i = 0; i < n; i++) {
		char field[40];
		int rc;

		snprintf(field, sizeof(field), "block_sha256[%zu]", i);
		rc = parse_digest(c, field, json_array_get(v, i),
				  e->block_sha256[i]);
		if (rc != 0)
			return rc;
	}
	e->nblocks = (uint32_t)n;
	return 0;
}

/* One [offset, length] pair of regions[i]: integers, length > 0, within
 * size when the entry gives one (size parsed first). */
static int parse_region(struct tree_mctx *c, size_t i, const json_t *v,
			const struct tree_manifest_entry *e, uint64_t out[2])
{
	char field[40];
	json_int_t off, len;

	snprintf(field, sizeof(field), "regions[%zu]", i);
	if (!json_is_array(v) || json_array_size(v) != 2 ||
	    !json_is_integer(json_array_get(v, 0)) ||
	    !json_is_integer(json_array_get(v, 1)))
		return tree__mfail(c, field,
				   "expected [offset, length], two integers");
	off = json_integer_value(json_array_get(v, 0));
	len = json_integer_value(json_array_get(v, 1));
	if (off < 0 || len <= 0 || (uint64_t)off > UINT64_MAX - (uint64_t)len)
		return tree__mfail(c, field,
				   "expected an offset >= 0 and a length > 0");
	if (e->has_size && (uint64_t)off + (uint64_t)len > e->size)
		return tree__mfail(c, field,
				   "ends at %" PRIu64 ", past size %" PRIu64,
				   (uint64_t)off + (uint64_t)len, e->size);
	out[0] = (uint64_t)off;
	out[1] = (uint64_t)len;
	return 0;
}

/* Needs size already parsed. */
static int parse_regions(struct tree_mctx *c, const json_t *v,
			 struct tree_manifest_entry *e)
{
	size_t n;

	if (!json_is_array(v))
		return tree__mfail(c, "regions",
				   "expected an array of [offset, length], "
				   "got %s",
				   tree__json_type(v));
	n = json_array_size(v);
	if (n > TREE_MANIFEST_REGIONS_MAX)
		return tree__mfail(c, "regions", "at most %d, got %zu",
				   TREE_MANIFEST_REGIONS_MAX, n);
	if (n == 0)
		return 0;
	e->regions = malloc(n * sizeof(*e->regions));
	if (e->regions == NULL)
		return tree__moom(c);
	for (size_t i = 0; i < n; i++) {
		int rc = parse_region(c, i, json_array_get(v, i), e,
				      e->regions[i]);

		if (rc != 0)
			return rc;
	}
	e->nregions = (uint32_t)n;
	return 0;
}

static int parse_mode(struct tree_mctx *c, const json_t *v,
		      struct tree_manifest_entry *e)
{
	long long mode = 0;

	if (json_is_integer(v)) {
		mode = json_integer_value(v);
	} else if (json_is_string(v)) {
		const char *s = json_string_value(v);
		size_t len = json_string_length(v);
		char q[64];

		if (len == 0 || len > 12 || strspn(s, "01234567") != len)
			return tree__mfail(
				c, "mode",
				"%s is not an octal number like \"0444\"",
				tree__mquote(s, len, q, sizeof(q)));
		for (size_t i = 0; i < len; i++)
			mode = mode * 8 + (s[i] - '0');
	} else {
		return tree__mfail(
			c, "mode",
			"expected an octal string like \"0444\" or an "
			"integer, got %s",
			tree__json_type(v));
	}
	if (mode < 0)
		return tree__mfail(c, "mode", "must not be negative, got %lld",
				   mode);
	if ((mode & ~07777LL) != 0)
		return tree__mfail(
			c, "mode",
			"%#llo has bits outside 07777; give permission "
			"bits only",
			(unsigned long long)mode);
	e->has_mode = true;
	e->mode = (uint32_t)mode;
	return 0;
}

/* Reads exactly n digits at *p into *out; advances *p. */
static bool digits(const char **p, const char *end, int n, int *out)
{
	int v = 0;

	if (end - *p < n)
		return false;
	for (int i = 0; i < n; i++) {
		char ch = (*p)[i];

		if (ch < '0' || ch > '9')
			return false;
		v = v * 10 + (ch - '0');
	}
	*p += n;
	*out = v;
	return true;
}

/* Parses an RFC 3339 date-time ("2026-11-29T23:48:00Z", fraction and
 * offset allowed, 't', 'z' and a space separator too) into seconds since
 * the epoch; the fraction is dropped. */
static bool parse_rfc3339(const char *s, size_t len, int64_t *out)
{
	const char *p = s, *end = s + len;
	int y, mo, d, h, mi, sec, oh = 0, om = 0, sign = 0;
	int64_t t;

	if (!digits(&p, end, 4, &y) || p == end || *p++ != '-' ||
	    !digits(&p, end, 2, &mo) || p == end || *p++ != '-' ||
	    !digits(&p, end, 2, &d) || p == end)
		return false;
	if (*p != 'T' && *p != 't' && *p != ' ')
		return false;
	p++;
	if (!digits(&p, end, 2, &h) || p == end || *p++ != ':' ||
	    !digits(&p, end, 2, &mi) || p == end || *p++ != ':' ||
	    !digits(&p, end, 2, &sec) || p == end)
		return false;
	if (*p == '.') {
		p++;
		if (p == end || *p < '0' || *p > '9')
			return false;
		while (p < end && *p >= '0' && *p <= '9')
			p++;
	}
	if (p == end)
		return false;
	if (*p == 'Z' || *p == 'z') {
		p++;
	} else if (*p == '+' || *p == '-') {
		sign = *p++ == '+' ? 1 : -1;
		if (!digits(&p, end, 2, &oh) || p == end || *p++ != ':' ||
		    !digits(&p, end, 2, &om))
			return false;
	} else {
		return false;
	}
	if (p != end || mo < 1 || mo > 12 || d < 1 ||
	    (unsigned)d > tree__month_days(y, (unsigned)mo) || h > 23 ||
	    mi > 59 || sec > 60 || oh > 23 || om > 59)
		return false;
	t = tree__days_from_civil(y, (unsigned)mo, (unsigned)d) * 86400 +
	    h * 3600 + mi * 60 + sec;
	*out = t - sign * (oh * 3600 + om * 60);
	return true;
}

static int parse_mtime(struct tree_mctx *c, const json_t *v,
		       struct tree_manifest_entry *e)
{
	if (json_is_integer(v)) {
		e->mtime = json_integer_value(v);
	} else if (json_is_string(v)) {
		const char *s = json_string_value(v);
		size_t len = json_string_length(v);
		char q[64];

		if (!parse_rfc3339(s, len, &e->mtime))
			return tree__mfail(
				c, "mtime",
				"%s is not an RFC 3339 date-time like "
				"\"2026-11-29T23:48:00Z\"",
				tree__mquote(s, len, q, sizeof(q)));
	} else {
		return tree__mfail(
			c, "mtime",
			"expected seconds since the epoch or an RFC 3339 "
			"string, got %s",
			tree__json_type(v));
	}
	e->has_mtime = true;
	return 0;
}

bool tree__mknown(const char *key, const char *const *names, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(key, names[i]) == 0)
			return true;
	return false;
}

int tree__mentry_parse(struct tree_mctx *c, json_t *obj,
		       struct tree_manifest_entry *e)
{
	const char *key;
	json_t *v;
	int rc;

	if (!json_is_object(obj))
		return tree__mfail(c, NULL, "expected an object, got %s",
				   tree__json_type(obj));
	json_object_foreach(obj, key, v)
	{
		char q[100];

		if (!tree__mknown(key, entry_fields,
				  sizeof(entry_fields) /
					  sizeof(entry_fields[0])))
			return tree__mfail(
				c, NULL,
				"unknown field %s; known are path, urls, "
				"size, sha256, block_size, block_sha256, "
				"mode, mtime, regions",
				tree__mquote(key, strlen(key), q, sizeof(q)));
	}

	v = json_object_get(obj, "path");
	if (v == NULL)
		return tree__mfail(c, "path", "missing");
	if (!json_is_string(v))
		return tree__mfail(c, "path", "expected a string, got %s",
				   tree__json_type(v));
	rc = tree__mcheck_path(c, json_string_value(v), json_string_length(v));
	if (rc != 0)
		return rc;
	e->path = strdup(json_string_value(v));
	if (e->path == NULL)
		return tree__moom(c);

	v = json_object_get(obj, "urls");
	if (v == NULL)
		return tree__mfail(c, "urls", "missing");
	rc = parse_urls(c, v, e);
	if (rc == 0 && (v = json_object_get(obj, "size")) != NULL)
		rc = parse_size(c, v, e);
	if (rc == 0 && (v = json_object_get(obj, "sha256")) != NULL) {
		rc = parse_digest(c, "sha256", v, e->sha256);
		e->has_sha256 = rc == 0;
	}
	if (rc == 0 && (v = json_object_get(obj, "block_size")) != NULL)
		rc = parse_block_size(c, v, e);
	if (rc == 0 && (v = json_object_get(obj, "block_sha256")) != NULL)
		rc = parse_block_sha256(c, v, e);
	if (rc == 0 && (v = json_object_get(obj, "mode")) != NULL)
		rc = parse_mode(c, v, e);
	if (rc == 0 && (v = json_object_get(obj, "mtime")) != NULL)
		rc = parse_mtime(c, v, e);
	if (rc == 0 && (v = json_object_get(obj, "regions")) != NULL)
		rc = parse_regions(c, v, e);
	return rc;
}

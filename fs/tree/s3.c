/* s3: an S3 bucket or prefix as a tree: where its objects are (endpoint,
 * region, path-style or virtual-hosted addressing, keys encoded as SigV4
 * signs them), its directories listed with ListObjectsV2, and S3's errors
 * turned into one line that says what to fix. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "fetch/fetch.h"
#include "fs/auth/auth.h"
#include "fs/tree/parse_int.h"
#include "fs/tree/tree.h"

/* The largest listing page read. */
#define TREE_S3_PAGE_BYTES (32u << 20)

/* The longest continuation token taken: S3's are a few hundred bytes, and
 * each goes into the next request's URL, encoded. */
#define TREE_S3_TOKEN_MAX 4096u

void tree_s3_free(struct tree_s3 *s)
{
	if (s == NULL)
		return;
	free(s->endpoint);
	free(s->bucket);
	free(s->path);
	memset(s, 0, sizeof(*s));
}

static bool is_alnum(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9');
}

/* botocore's region names (validate_region_name): letters, digits and
 * '-', 1 to 63, a letter or digit at each end. A region goes into the
 * endpoint's host name and the signature's scope. */
static bool region_ok(const char *r)
{
	size_t n = strlen(r);

	if (n == 0 || n > 63 || !is_alnum(r[0]) || !is_alnum(r[n - 1]))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!is_alnum(r[i]) && r[i] != '-')
			return false;
	return true;
}

/* A bucket that goes into a host name (virtual-hosted addressing): S3's
 * DNS-compatible rules, 3 to 63 lowercase letters, digits, '.' and '-',
 * a letter or digit at each end, no "..", not an IPv4 address. Path-style
 * (the bucket is the path's first segment) takes botocore's legacy names
 * too: letters of either case, digits, '.', '-' and '_', 1 to 255, never
 * "." or "..". */
static bool bucket_ok(const char *b, bool in_host)
{
	size_t n = strlen(b), dots = 0;
	bool digits_dots = true;

	if (!in_host) {
		if (n == 0 || n > 255 || strcmp(b, ".") == 0 ||
		    strcmp(b, "..") == 0)
			return false;
		for (size_t i = 0; i < n; i++)
			if (!is_alnum(b[i]) && b[i] != '.' && b[i] != '-' &&
			    b[i] != '_')
				return false;
		return true;
	}
	if (n < 3 || n > 63 || strstr(b, "..") != NULL || !is_alnum(b[0]) ||
	    !is_alnum(b[n - 1]))
		return false;
	for (size_t i = 0; i < n; i++) {
		if (!((b[i] >= 'a' && b[i] <= 'z') ||
		      (b[i] >= '0' && b[i] <= '9') || b[i] == '-' ||
		      b[i] == '.'))
			return false;
		dots += b[i] == '.';
		digits_dots &= b[i] == '.' || (b[i] >= '0' && b[i] <= '9');
	}
	return !(digits_dots && dots == 3);
}

/* An endpoint's authority, [h, end): a host name (letters, digits, '-',
 * '.'), an IPv4 address or a bracketed IPv6 address, then an optional
 * ":PORT" (1 to 65535). Nothing else: no userinfo, no '#', '?', '%',
 * '\\' or white space that a URL parser could read another way. */
static bool authority_ok(const char *h, const char *end)
{
	const char *colon;

	if (h == end)
		return false;
	if (*h == '[') {
		const char *close = memchr(h, ']', (size_t)(end - h));

		if (close == NULL || close == h + 1)
			return false;
		for (const char *p = h + 1; p < close; p++)
			if (!((*p >= '0' && *p <= '9') ||
			      (*p >= 'a' && *p <= 'f') ||
			      (*p >= 'A' && *p <= 'F') || *p == ':' ||
			      *p == '.'))
				return false;
		colon = close + 1 < end ? close + 1 : NULL;
		if (colon != NULL && *colon != ':')
			return false;
	} else {
		colon = memchr(h, ':', (size_t)(end - h));
		if ((colon != NULL ? colon : end) == h)
			return false;
		for (const char *p = h; p < (colon != NULL ? colon : end); p++)
			if (!is_alnum(*p) && *p != '-' && *p != '.')
				return false;
	}
	if (colon != NULL) {
		unsigned long port = 0;
		const char *p = colon + 1;

		if (p == end || end - p > 5)
			return false;
		for (; p < end; p++) {
			if (*p < '0' || *p > '9')
				return false;
			port = port * 10 + (unsigned long)(*p - '0');
		}
		if (port == 0 || port > 65535)
			return false;
	}
	return true;
}

/* The endpoint requests go to, into ep (cap bytes): -o endpoint= checked
 * (scheme://host[:port], its trailing slashes dropped), else AWS's
 * regional one. -EINVAL with one line in err. */
static int endpoint_of(const char *endpoint, const char *region, char *ep,
		       size_t cap, char *err, size_t errlen)
{
	char shown[600];
	const char *host;
	size_t n;

	if (endpoint == NULL) {
		snprintf(ep, cap, "https://s3.%s.amazonaws.com", region);
		return 0;
	}
	if (strncmp(endpoint, "http://", 7) != 0 &&
	    strncmp(endpoint, "https://", 8) != 0)
		return fs__errf(err, errlen, -EINVAL,
				"option endpoint: '%s' is not an http:// or "
				"https:// URL",
				fs__escape(endpoint, shown, sizeof(shown)));
	snprintf(ep, cap, "%s", endpoint);
	n = strlen(ep);
	while (n > 0 && ep[n - 1] == '/')
		ep[--n] = '\0';
	host = strstr(ep, "://") + 3;
	if (strlen(endpoint) >= cap || !authority_ok(host, ep + n))
		return fs__errf(err, errlen, -EINVAL,
				"option endpoint: '%s': give "
				"scheme://host[:port] "
				"only (a host name or address, no user, path, "
				"query or '#')",
				fs__escape(endpoint, shown, sizeof(shown)));
	return 0;
}

/* Checks s's bucket against its addressing's rules; -EINVAL with one
 * line in err naming the fix. */
static int bucket_check(const struct tree_s3 *s, const char *url, char *err,
			size_t errlen)
{
	char shown[600];

	if (bucket_ok(s->bucket, s->virtual_host))
		return 0;
	fs__escape(s->bucket, shown, sizeof(shown));
	if (s->virtual_host && bucket_ok(s->bucket, false))
		return fs__errf(err, errlen, -EINVAL,
				"URL '%s': bucket '%s' cannot go into a host "
				"name "
				"(virtual-hosted addressing takes 3 to 63 "
				"lowercase letters, digits, '-' and '.'): "
				"mount "
				"with -o s3_addressing=path",
				url, shown);
	return fs__errf(err, errlen, -EINVAL,
			"URL '%s': '%s' is no bucket name (%s)", url, shown,
			s->virtual_host ? "3 to 63 lowercase "
					  "letters, digits, '-' "
					  "and '.'"
					: "letters, digits, '.', "
					  "'-' and '_', at "
					  "most 255");
}

int tree_s3_parse(const char *url, const char *endpoint, const char *region,
		  const char *region_from, const char *addressing,
		  struct tree_s3 *out, char *err, size_t errlen)
{
	const char *b = url + 5, *slash;
	char ep[512], shown[600];
	size_t n;

	memset(out, 0, sizeof(*out));
	if (strncmp(url, "s3://", 5) != 0)
		return fs__errf(err, errlen, -EINVAL,
				"URL '%s': not an s3:// URL", url);
	slash = strchr(b, '/');
	n = slash != NULL ? (size_t)(slash - b) : strlen(b);
	if (strlen(region) >= sizeof(out->region) || !region_ok(region))
		return fs__errf(
			err, errlen, -EINVAL,
			"%s: '%s' is no region (letters, digits and '-', "
			"at most 63, as botocore allows): fix it there or "
			"give -o region=",
			region_from, fs__escape(region, shown, sizeof(shown)));
	snprintf(out->region, sizeof(out->region), "%s", region);
	out->bucket = strndup(b, n);
	out->path = strdup(slash != NULL ? slash + 1 : "");
	if (out->bucket == NULL || out->path == NULL)
		goto oom;
	n = strlen(out->path);
	out->is_prefix = n == 0 || out->path[n - 1] == '/';
	if (strstr(out->path, "//") != NULL || out->path[0] == '/') {
		fs__errf(err, errlen, -EINVAL,
			 "URL '%s': an empty path segment ('//')", url);
		goto fail;
	}
	if (endpoint_of(endpoint, out->region, ep, sizeof(ep), err, errlen) !=
	    0)
		goto fail;
	out->endpoint = strdup(ep);
	if (out->endpoint == NULL)
		goto oom;
	if (addressing == NULL)
		out->virtual_host = endpoint == NULL;
	else if (strcmp(addressing, "virtual") == 0)
		out->virtual_host = true;
	else if (strcmp(addressing, "path") == 0)
		out->virtual_host = false;
	else {
		fs__errf(err, errlen, -EINVAL,
			 "option s3_addressing: '%s' is not path or virtual",
			 addressing);
		goto fail;
	}
	if (bucket_check(out, url, err, errlen) != 0)
		goto fail;
	return 0;
oom:
	fs__errf(err, errlen, -EINVAL, "out of memory");
fail:
	tree_s3_free(out);
	return -EINVAL;
}

/* Appends s to buf at *n encoded as SigV4 signs a path: every byte but
 * A-Z a-z 0-9 - . _ ~ (and '/' when keep_slash) as %XX. curl 7.88 signs
 * the path as sent, so it must already be in that form. */
static void encode(char *buf, size_t *n, const char *s, bool keep_slash)
{
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		    (*p >= '0' && *p <= '9') || *p == '-' || *p == '.' ||
		    *p == '_' || *p == '~' || (keep_slash && *p == '/'))
			buf[(*n)++] = (char)*p;
		else
			*n += (size_t)snprintf(buf + *n, 4, "%%%02X", *p);
	}
	buf[*n] = '\0';
}

/* endpoint/bucket + "/" (path-style) or scheme://bucket.host + "/"
 * (virtual), then key encoded, then query; a new string. */
static char *build(const struct tree_s3 *s, bool path_style, const char *key,
		   const char *query)
{
	const char *host = strstr(s->endpoint, "://") + 3;
	size_t cap = strlen(s->endpoint) + strlen(s->bucket) + 3 * strlen(key) +
		     (query != NULL ? strlen(query) : 0) + 8;
	char *url = malloc(cap);
	size_t n;

	if (url == NULL)
		return NULL;
	if (path_style || !s->virtual_host)
		n = (size_t)snprintf(url, cap, "%s/%s/", s->endpoint,
				     s->bucket);
	else
		n = (size_t)snprintf(url, cap, "%.*s%s.%s/",
				     (int)(host - s->endpoint), s->endpoint,
				     s->bucket, host);
	encode(url, &n, key, true);
	if (query != NULL)
		snprintf(url + n, cap - n, "?%s", query);
	return url;
}

char *tree_s3_object_url(const struct tree_s3 *s, const char *key)
{
	return build(s, false, key, NULL);
}

char *tree_s3_origin_url(const struct tree_s3 *s)
{
	return build(s, false, "", NULL);
}

char *tree_s3_identity(const struct tree_s3 *s, const char *key)
{
	char *url = build(s, true, key, NULL), *id;
	size_t len;

	if (url == NULL)
		return NULL;
	len = strlen(url) + strlen(s->region) + 5;
	id = malloc(len);
	if (id != NULL)
		snprintf(id, len, "s3:%s:%s", s->region, url);
	free(url);
	return id;
}

char *tree_s3_dir_url(const struct tree_s3 *s, const char *prefix)
{
	size_t len = strlen(s->bucket) + strlen(prefix) + 7;
	char *u = malloc(len);

	if (u != NULL)
		snprintf(u, len, "s3://%s/%s", s->bucket, prefix);
	return u;
}

/* The ListObjectsV2 request for prefix after token (NULL: the first
 * page). Its query is in SigV4's canonical order and encoding, as curl
 * 7.88 signs the query as sent. A new string. */
static char *list_url(const struct tree_s3 *s, const char *prefix,
		      const char *token, const char *max_keys)
{
	size_t cap = 3 * strlen(prefix) + (token ? 3 * strlen(token) : 0) + 128;
	char *q = malloc(cap), *url;
	size_t n = 0;

	if (q == NULL)
		return NULL;
	q[0] = '\0';
	if (token != NULL) {
		n = (size_t)snprintf(q, cap, "continuation-token=");
		encode(q, &n, token, false);
		q[n++] = '&';
	}
	n += (size_t)snprintf(q + n, cap - n,
			      "delimiter=%%2F&encoding-type=url&list-type=2&%s"
			      "prefix=",
			      max_keys);
	encode(q, &n, prefix, false);
	url = build(s, false, "", q);
	free(q);
	if (url != NULL && !s->virtual_host) {
		/* Path-style: the bucket itself, "/bucket?..." */
		char *slash = strstr(url, "/?");

		if (slash != NULL)
			memmove(slash, slash + 1, strlen(slash + 1) + 1);
	}
	return url;
}

/* One line for an S3 error document (or a bare status), naming what to
 * fix; returns -EIO. */
static int explain(const struct tree_s3 *s, const struct auth_creds *creds,
		   const char *what, long status, const char *body, size_t len,
		   char *err, size_t errlen)
{
	char code[64] = "", msg[256] = "", region[64] = "", srcbuf[160];
	const char *src = auth_creds_source(creds, srcbuf, sizeof(srcbuf));

	if (body != NULL && tree__s3_error_parse(body, len, code, sizeof(code),
						 msg, sizeof(msg), region,
						 sizeof(region)) == -EPROTO)
		return fs__errf(
			err, errlen, -EIO,
			"%s: HTTP %ld, and its error document declares a "
			"DTD (<!DOCTYPE>), which S3 never sends: not read",
			what, status);
	if (strcmp(code, "NoSuchBucket") == 0)
		return fs__errf(
			err, errlen, -EIO,
			"%s: bucket '%s' does not exist at %s (check the "
			"bucket's name, or -o endpoint=)",
			what, s->bucket, s->endpoint);
	if (region[0] != '\0' || strcmp(code, "PermanentRedirect") == 0)
		return fs__errf(
			err, errlen, -EIO,
			"%s: bucket '%s' is in another region%s%s%s than "
			"'%s': mount with -o region=%s",
			what, s->bucket, region[0] ? " ('" : "", region,
			region[0] ? "')" : "", s->region,
			region[0] ? region : "REGION");
	if (strcmp(code, "SignatureDoesNotMatch") == 0)
		return fs__errf(
			err, errlen, -EIO,
			"%s: the secret key is wrong for its access key "
			"(SignatureDoesNotMatch): check %s",
			what, src != NULL ? src : "the credentials");
	if (strcmp(code, "InvalidAccessKeyId") == 0)
		return fs__errf(err, errlen, -EIO,
				"%s: the access key is unknown at %s "
				"(InvalidAccessKeyId): check %s",
				what, s->endpoint,
				src != NULL ? src : "the credentials");
	if (strcmp(code, "ExpiredToken") == 0 ||
	    strcmp(code, "InvalidToken") == 0)
		return fs__errf(
			err, errlen, -EIO,
			"%s: the session token is refused (%s): renew it "
			"in %s",
			what, code, src != NULL ? src : "the credentials");
	if (src == NULL && (status == 401 || status == 403))
		return fs__errf(
			err, errlen, -EIO,
			"%s: HTTP %ld%s%s and no AWS credentials were found: "
			"set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, "
			"AWS_PROFILE (~/.aws/credentials), or -o "
			"auth_command=",
			what, status, code[0] ? " " : "", code);
	if (code[0] != '\0')
		return fs__errf(err, errlen, -EIO, "%s: HTTP %ld %s: %s", what,
				status, code, msg);
	return fs__errf(err, errlen, -EIO, "%s: HTTP %ld", what, status);
}

/* Turns one listed item into a directory entry under prefix; false when
 * it makes no name (left out). */
static int item_entry(const struct tree_s3 *s, const char *prefix,
		      struct tree_s3_item *it, struct tree_index_entry *e)
{
	size_t pl = strlen(prefix), n;
	const char *name;

	memset(e, 0, sizeof(*e));
	if (it->no_name || strncmp(it->key, prefix, pl) != 0)
		return 1;
	name = it->key + pl;
	n = strlen(name);
	if (it->is_prefix && n > 0 && name[n - 1] == '/')
		n--;
	if (n == 0 || n > TREE_DIRINDEX_NAME_MAX || memchr(name, '/', n) ||
	    (n == 1 && name[0] == '.') ||
	    (n == 2 && name[0] == '.' && name[1] == '.'))
		return 1;
	e->name = strndup(name, n);
	if (e->name == NULL)
		return -ENOMEM;
	e->is_dir = it->is_prefix;
	if (it->is_prefix) {
		e->url = tree_s3_dir_url(s, it->key);
	} else {
		e->has_size = true;
		e->size = it->size;
		e->has_mtime = it->has_mtime;
		e->mtime = it->mtime;
		e->url = tree_s3_object_url(s, it->key);
		e->identity = tree_s3_identity(s, it->key);
		e->etag = it->etag;
		it->etag = NULL;
		if (e->identity == NULL)
			return -ENOMEM;
	}
	return e->url == NULL ? -ENOMEM : 0;
}

/* FNV-1a of a continuation token: a listing remembers the tokens it sent
 * by these, to see a server send one again. A collision, which a server
 * could make on purpose, only ends that server's own listing early. */
static uint64_t token_hash(const char *t)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (const unsigned char *p = (const unsigned char *)t; *p; p++)
		h = (h ^ *p) * 0x100000001b3ull;
	return h;
}

/* Checks the token page `pages` ends with against those sent before
 * (seen[0..pages-1]), and records it. 0, or -EIO with the reason in err:
 * the same token again, or an earlier one (a cycle), which would never
 * end. */
static int token_new(const char *what, const char *token, uint64_t *seen,
		     uint32_t pages, char *err, size_t errlen)
{
	uint64_t h;

	if (strlen(token) > TREE_S3_TOKEN_MAX) {
		return fs__errf(
			err, errlen, -EIO,
			"%s: listing stopped after %u pages: a "
			"NextContinuationToken of %zu bytes (at most %u)",
			what, pages, strlen(token), TREE_S3_TOKEN_MAX);
	}
	h = token_hash(token);
	for (uint32_t i = 0; i < pages; i++)
		if (seen[i] == h) {
			/* pages tokens came before: this is page
			 * pages + 1's. */
			return fs__errf(
				err, errlen, -EIO,
				"%s: listing stopped after %u pages: page %u "
				"sent the continuation token of page %u "
				"again%s (a listing that never ends)",
				what, pages + 1, pages + 1, i + 1,
				i + 1 == pages ? "" : ", a cycle");
		}
	seen[pages] = h;
	return 0;
}

/* One listing under way: what it has gathered and what bounds it. */
struct listing {
	const struct tree_s3 *s;
	const char *prefix;
	char what[600]; /* "s3://BUCKET/PREFIX", for error lines */
	struct tree_index_entry *ents;
	uint32_t count, cap, pages, skipped;
	char skip_shown[160]; /* the first key left out, escaped */
	uint64_t *seen;	      /* the tokens sent, hashed (token_new) */
};

/* True when fc's deadline (if any) is less than slack_ms away, or past. */
static bool near_deadline(const struct fetch_config *fc, uint64_t slack_ms)
{
	return fc->deadline_ms != 0 &&
	       fs__now_ns() / 1000000u + slack_ms >= fc->deadline_ms;
}

/* Fetches and parses the listing's next page (the one token names; the
 * first with NULL) into *page. A listing is bounded in pages and in time
 * (the caller's deadline, read_timeout), whatever the server answers.
 * Returns 0, or a negative errno with one line in err. */
static int list_page(struct listing *l, const struct fetch_config *fc,
		     const struct auth_creds *creds, const char *token,
		     bool first_only, struct tree_s3_page *page, char *err,
		     size_t errlen)
{
	char *url, *body = NULL, why[1024];
	size_t len = 0;
	long status = 0;
	int rc;

	if (l->pages == TREE_S3_PAGES_MAX) {
		return fs__errf(
			err, errlen, -EIO,
			"%s: listing stopped after %u pages (at most %u), %u "
			"entries so far: the server does not end it",
			l->what, l->pages, TREE_S3_PAGES_MAX, l->count);
	}
	if (l->pages > 0 && near_deadline(fc, 0))
		rc = -ETIMEDOUT;
	else if ((url = list_url(l->s, l->prefix, token,
				 first_only ? "max-keys=1&" : "")) == NULL)
		rc = -ENOMEM;
	else {
		rc = fetch_get_any(fc, url, TREE_S3_PAGE_BYTES, &body, &len,
				   &status, why, sizeof(why));
		free(url);
		l->pages++;
		/* A page the request's timeout cut, which the deadline
		 * set, is the deadline too, though curl's clock may call
		 * it a few ms before ours does. */
		if (rc != 0 && rc != -ECANCELED && rc != -ENOMEM &&
		    near_deadline(fc, 50))
			rc = -ETIMEDOUT;
	}
	if (rc == -ETIMEDOUT)
		fs__errf(err, errlen, rc,
			 "%s: listing not done by its deadline (-o "
			 "read_timeout=) after %u page%s, %u entries so far",
			 l->what, l->pages, l->pages == 1 ? "" : "s", l->count);
	else if (rc == -ECANCELED)
		fs__errf(err, errlen, rc,
			 "%s: listing stopped after %u page%s: the mount is "
			 "ending",
			 l->what, l->pages, l->pages == 1 ? "" : "s");
	else if (rc == -ENOMEM)
		fs__errf(err, errlen, rc, "out of memory");
	else if (rc != 0)
		fs__errf(err, errlen, rc, "%s: page %u: %s", l->what, l->pages,
			 why);
	if (rc != 0)
		return rc;
	if (status != 200) {
		rc = explain(l->s, creds, l->what, status, body, len, err,
			     errlen);
		free(body);
		return rc;
	}
	rc = tree__s3_page_parse(body, len, page, why, sizeof(why));
	free(body);
	if (rc != 0)
		fs__errf(err, errlen, rc, "%s: %s", l->what, why);
	return rc;
}

/* Adds page's entries to the listing; a key that makes no file name is
 * left out and counted. Returns 0, -E2BIG or -ENOMEM (one line in err). */
static int list_add(struct listing *l, struct tree_s3_page *page, char *err,
		    size_t errlen)
{
	if (l->count + page->n > TREE_DIRINDEX_MAX) {
		return fs__errf(err, errlen, -E2BIG, "%s: more than %u entries",
				l->what, TREE_DIRINDEX_MAX);
	}
	if (l->count + page->n > l->cap) {
		uint32_t ncap = l->cap ? l->cap : 1024;
		struct tree_index_entry *grown;

		while (ncap < l->count + page->n)
			ncap *= 2;
		grown = realloc(l->ents, ncap * sizeof(*grown));
		if (grown == NULL) {
			return fs__errf(err, errlen, -ENOMEM, "out of memory");
		}
		l->ents = grown;
		l->cap = ncap;
	}
	for (uint32_t i = 0; i < page->n; i++) {
		struct tree_s3_item *it = &page->items[i];
		struct tree_index_entry *e = &l->ents[l->count];
		int r = item_entry(l->s, l->prefix, it, e);

		if (r == 1 &&
		    (it->no_name ||
		     strncmp(it->key, l->prefix, strlen(l->prefix)) == 0)) {
			/* Named by the listing, yet no file name: left
			 * out, said once per listing. */
			if (l->skipped++ == 0)
				fs__escape(it->key, l->skip_shown,
					   sizeof(l->skip_shown));
		}
		if (r < 0) {
			/* What the entry got so far is its own. */
			free(e->name);
			free(e->url);
			free(e->etag);
			free(e->identity);
			return fs__errf(err, errlen, r, "out of memory");
		}
		if (r == 0)
			l->count++;
	}
	return 0;
}

int tree_s3_list(const struct tree_s3 *s, const struct fetch_config *fc,
		 const struct auth_creds *creds, const char *dir_url,
		 bool first_only, struct tree_index_entry **out, uint32_t *n,
		 char *err, size_t errlen)
{
	struct listing l = {.s = s,
			    .prefix = dir_url + 5 + strlen(s->bucket) + 1};
	char *token = NULL;
	int rc = 0;

	snprintf(l.what, sizeof(l.what), "s3://%s/%s", s->bucket, l.prefix);
	l.seen = malloc(TREE_S3_PAGES_MAX * sizeof(*l.seen));
	if (l.seen == NULL) {
		return fs__errf(err, errlen, -ENOMEM, "out of memory");
	}
	do {
		struct tree_s3_page page;

		rc = list_page(&l, fc, creds, token, first_only, &page, err,
			       errlen);
		if (rc != 0)
			break;
		rc = list_add(&l, &page, err, errlen);
		free(token);
		token = page.truncated ? page.next_token : NULL;
		page.next_token = NULL;
		tree__s3_page_free(&page);
		if (rc == 0 && token != NULL && !first_only)
			rc = token_new(l.what, token, l.seen, l.pages - 1, err,
				       errlen);
	} while (rc == 0 && token != NULL && !first_only);
	free(token);
	free(l.seen);
	if (l.skipped > 0 && rc == 0) /* a warning: the listing stands */
		fs__errf(err, errlen, 0,
			 "%s: %u key%s left out that make%s no file name "
			 "(empty, '.', '..', a NUL byte, a '/' inside "
			 "or too long), e.g. '%s'",
			 l.what, l.skipped, l.skipped == 1 ? "" : "s",
			 l.skipped == 1 ? "s" : "", l.skip_shown);
	if (rc != 0) {
		tree_dirindex_free(l.ents, l.count);
		return rc == -ENOMEM	  ? -ENOMEM
		       : rc == -ETIMEDOUT ? -ETIMEDOUT
					  : -EIO;
	}
	*out = l.ents;
	*n = l.count;
	return 0;
}

void tree_s3_explain(const struct tree_s3 *s, const struct fetch_config *fc,
		     const struct auth_creds *creds, const char *key, char *err,
		     size_t errlen)
{
	struct tree_index_entry *ents = NULL;
	uint32_t n = 0;
	char what[600], *prefix;
	int rc;

	snprintf(what, sizeof(what), "s3://%s/%s", s->bucket, key);
	prefix = tree_s3_dir_url(s, key);
	if (prefix == NULL)
		return;
	rc = tree_s3_list(s, fc, creds, prefix, true, &ents, &n, err, errlen);
	free(prefix);
	/* The bucket answers, with these credentials and this region:
	 * the key is what is missing. */
	if (rc == 0)
		fs__errf(err, errlen, -ENOENT,
			 "%s: no such key in bucket '%s' (at %s)", what,
			 s->bucket, s->endpoint);
	tree_dirindex_free(ents, n);
}

/* s3: an S3 bucket or prefix as a tree: where its objects are (endpoint,
 * region, path-style or virtual-hosted addressing, keys encoded as SigV4
 * signs them), its directories listed with ListObjectsV2, and S3's errors
 * turned into one line that says what to fix. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "fetch/fetch.h"
#include "fs/auth/auth.h"
#include "fs/tree/parse_int.h"
#include "fs/tree/tree.h"

/* The largest listing page read. */
#define FS_S3_PAGE_BYTES (32u << 20)

static int bad(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int bad(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

void fs__s3_free(struct fs_s3 *s)
{
	if (s == NULL)
		return;
	free(s->endpoint);
	free(s->bucket);
	free(s->path);
	memset(s, 0, sizeof(*s));
}

/* S3's bucket naming rules, the ones that keep a name usable in a host. */
static bool bucket_ok(const char *b)
{
	size_t n = strlen(b);

	if (n < 3 || n > 63)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((b[i] >= 'a' && b[i] <= 'z') ||
		      (b[i] >= '0' && b[i] <= '9') || b[i] == '-' ||
		      b[i] == '.'))
			return false;
	return true;
}

int fs__s3_parse(const char *url, const char *endpoint, const char *region,
		 const char *addressing, struct fs_s3 *out, char *err,
		 size_t errlen)
{
	const char *b = url + 5, *slash;
	char ep[512];
	size_t n;

	memset(out, 0, sizeof(*out));
	if (strncmp(url, "s3://", 5) != 0)
		return bad(err, errlen, "URL '%s': not an s3:// URL", url);
	slash = strchr(b, '/');
	n = slash != NULL ? (size_t)(slash - b) : strlen(b);
	if (strlen(region) >= sizeof(out->region) || region[0] == '\0')
		return bad(err, errlen, "option region: '%s' is no region",
			   region);
	snprintf(out->region, sizeof(out->region), "%s", region);
	out->bucket = strndup(b, n);
	out->path = strdup(slash != NULL ? slash + 1 : "");
	if (out->bucket == NULL || out->path == NULL)
		goto oom;
	if (!bucket_ok(out->bucket)) {
		bad(err, errlen,
		    "URL '%s': '%s' is no bucket name (3 to 63 lowercase "
		    "letters, digits, '-' and '.')",
		    url, out->bucket);
		goto fail;
	}
	n = strlen(out->path);
	out->is_prefix = n == 0 || out->path[n - 1] == '/';
	if (strstr(out->path, "//") != NULL || out->path[0] == '/') {
		bad(err, errlen, "URL '%s': an empty path segment ('//')", url);
		goto fail;
	}
	if (endpoint != NULL) {
		if (strncmp(endpoint, "http://", 7) != 0 &&
		    strncmp(endpoint, "https://", 8) != 0) {
			bad(err, errlen,
			    "option endpoint: '%s' is not an http:// or "
			    "https:// URL",
			    endpoint);
			goto fail;
		}
		snprintf(ep, sizeof(ep), "%s", endpoint);
		n = strlen(ep);
		while (n > 0 && ep[n - 1] == '/')
			ep[--n] = '\0';
		if (strchr(strstr(ep, "://") + 3, '/') != NULL ||
		    fetch_url_has_userinfo(ep)) {
			bad(err, errlen,
			    "option endpoint: '%s': give scheme, host and "
			    "port only",
			    endpoint);
			goto fail;
		}
	} else {
		snprintf(ep, sizeof(ep), "https://s3.%s.amazonaws.com",
			 out->region);
	}
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
		bad(err, errlen,
		    "option s3_addressing: '%s' is not path or virtual",
		    addressing);
		goto fail;
	}
	return 0;
oom:
	bad(err, errlen, "out of memory");
fail:
	fs__s3_free(out);
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
static char *build(const struct fs_s3 *s, bool path_style, const char *key,
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

char *fs__s3_object_url(const struct fs_s3 *s, const char *key)
{
	return build(s, false, key, NULL);
}

char *fs__s3_origin_url(const struct fs_s3 *s)
{
	return build(s, false, "", NULL);
}

char *fs__s3_identity(const struct fs_s3 *s, const char *key)
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

char *fs__s3_dir_url(const struct fs_s3 *s, const char *prefix)
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
static char *list_url(const struct fs_s3 *s, const char *prefix,
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
 * fix. */
static void explain(const struct fs_s3 *s, const struct fs_creds *creds,
		    const char *what, long status, const char *body,
		    size_t len, char *err, size_t errlen)
{
	char code[64] = "", msg[256] = "", region[64] = "";
	const char *src = fs__creds_source(creds);

	if (body != NULL)
		fs__s3_error_parse(body, len, code, sizeof(code), msg,
				   sizeof(msg), region, sizeof(region));
	if (strcmp(code, "NoSuchBucket") == 0)
		snprintf(err, errlen,
			 "%s: bucket '%s' does not exist at %s (check the "
			 "bucket's name, or -o endpoint=)",
			 what, s->bucket, s->endpoint);
	else if (region[0] != '\0' ||
		 strcmp(code, "PermanentRedirect") == 0)
		snprintf(err, errlen,
			 "%s: bucket '%s' is in another region%s%s%s than "
			 "'%s': mount with -o region=%s",
			 what, s->bucket, region[0] ? " ('" : "", region,
			 region[0] ? "')" : "", s->region,
			 region[0] ? region : "REGION");
	else if (strcmp(code, "SignatureDoesNotMatch") == 0)
		snprintf(err, errlen,
			 "%s: the secret key is wrong for its access key "
			 "(SignatureDoesNotMatch): check %s",
			 what, src != NULL ? src : "the credentials");
	else if (strcmp(code, "InvalidAccessKeyId") == 0)
		snprintf(err, errlen,
			 "%s: the access key is unknown at %s "
			 "(InvalidAccessKeyId): check %s",
			 what, s->endpoint,
			 src != NULL ? src : "the credentials");
	else if (strcmp(code, "ExpiredToken") == 0 ||
		 strcmp(code, "InvalidToken") == 0)
		snprintf(err, errlen,
			 "%s: the session token is refused (%s): renew it "
			 "in %s",
			 what, code, src != NULL ? src : "the credentials");
	else if (src == NULL && (status == 401 || status == 403))
		snprintf(err, errlen,
			 "%s: HTTP %ld%s%s and no AWS credentials were found: "
			 "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, "
			 "AWS_PROFILE (~/.aws/credentials), or -o "
			 "auth_command=",
			 what, status, code[0] ? " " : "", code);
	else if (code[0] != '\0')
		snprintf(err, errlen, "%s: HTTP %ld %s: %s", what, status,
			 code, msg);
	else
		snprintf(err, errlen, "%s: HTTP %ld", what, status);
}

/* Turns one listed item into a directory entry under prefix; false when
 * it makes no name (left out). */
static int item_entry(const struct fs_s3 *s, const char *prefix,
		      struct fs_s3_item *it, struct fs_index_entry *e)
{
	size_t pl = strlen(prefix), n;
	const char *name;

	memset(e, 0, sizeof(*e));
	if (strncmp(it->key, prefix, pl) != 0)
		return 1;
	name = it->key + pl;
	n = strlen(name);
	if (it->is_prefix && n > 0 && name[n - 1] == '/')
		n--;
	if (n == 0 || n > FS_DIRINDEX_NAME_MAX || memchr(name, '/', n) ||
	    (n == 1 && name[0] == '.') ||
	    (n == 2 && name[0] == '.' && name[1] == '.'))
		return 1;
	e->name = strndup(name, n);
	if (e->name == NULL)
		return -ENOMEM;
	e->is_dir = it->is_prefix;
	if (it->is_prefix) {
		e->url = fs__s3_dir_url(s, it->key);
	} else {
		e->has_size = true;
		e->size = it->size;
		e->has_mtime = it->has_mtime;
		e->mtime = it->mtime;
		e->url = fs__s3_object_url(s, it->key);
		e->identity = fs__s3_identity(s, it->key);
		e->etag = it->etag;
		it->etag = NULL;
		if (e->identity == NULL)
			return -ENOMEM;
	}
	return e->url == NULL ? -ENOMEM : 0;
}

int fs__s3_list(const struct fs_s3 *s, const struct fetch_config *fc,
		const struct fs_creds *creds, const char *dir_url,
		bool first_only, struct fs_index_entry **out, uint32_t *n,
		char *err, size_t errlen)
{
	struct fs_index_entry *ents = NULL;
	uint32_t count = 0, cap = 0;
	const char *prefix = dir_url + 5 + strlen(s->bucket) + 1;
	char *token = NULL, what[600];
	int rc = 0;

	snprintf(what, sizeof(what), "s3://%s/%s", s->bucket, prefix);
	do {
		char *url = list_url(s, prefix, token,
				     first_only ? "max-keys=1&" : "");
		char *body = NULL, why[1024];
		struct fs_s3_page page;
		size_t len = 0;
		long status = 0;

		if (url == NULL) {
			rc = -ENOMEM;
			snprintf(err, errlen, "out of memory");
			break;
		}
		rc = fetch_get_any(fc, url, FS_S3_PAGE_BYTES, &body, &len,
				   &status, why, sizeof(why));
		free(url);
		if (rc != 0) {
			snprintf(err, errlen, "%s", why);
			break;
		}
		if (status != 200) {
			explain(s, creds, what, status, body, len, err, errlen);
			free(body);
			rc = -EIO;
			break;
		}
		rc = fs__s3_page_parse(body, len, &page, why, sizeof(why));
		free(body);
		if (rc != 0) {
			snprintf(err, errlen, "%s: %s", what, why);
			break;
		}
		if (count + page.n > FS_DIRINDEX_MAX) {
			snprintf(err, errlen, "%s: more than %u entries", what,
				 FS_DIRINDEX_MAX);
			fs__s3_page_free(&page);
			rc = -E2BIG;
			break;
		}
		if (count + page.n > cap) {
			uint32_t ncap = cap ? cap : 1024;
			struct fs_index_entry *grown;

			while (ncap < count + page.n)
				ncap *= 2;
			grown = realloc(ents, ncap * sizeof(*grown));
			if (grown == NULL) {
				fs__s3_page_free(&page);
				rc = -ENOMEM;
				break;
			}
			ents = grown;
			cap = ncap;
		}
		for (uint32_t i = 0; i < page.n && rc == 0; i++) {
			int r = item_entry(s, prefix, &page.items[i],
					   &ents[count]);

			if (r < 0) {
				/* What the entry got so far is its own. */
				free(ents[count].name);
				free(ents[count].url);
				free(ents[count].etag);
				free(ents[count].identity);
				rc = r;
			} else if (r == 0) {
				count++;
			}
		}
		free(token);
		token = page.truncated ? page.next_token : NULL;
		page.next_token = NULL;
		fs__s3_page_free(&page);
		if (rc == -ENOMEM)
			snprintf(err, errlen, "out of memory");
	} while (rc == 0 && token != NULL && !first_only);
	free(token);
	if (rc != 0) {
		fs__dirindex_free(ents, count);
		return rc == -ENOMEM ? -ENOMEM : -EIO;
	}
	*out = ents;
	*n = count;
	return 0;
}

void fs__s3_explain(const struct fs_s3 *s, const struct fetch_config *fc,
		    const struct fs_creds *creds, const char *key, char *err,
		    size_t errlen)
{
	struct fs_index_entry *ents = NULL;
	uint32_t n = 0;
	char what[600], *prefix;
	int rc;

	snprintf(what, sizeof(what), "s3://%s/%s", s->bucket, key);
	prefix = fs__s3_dir_url(s, key);
	if (prefix == NULL)
		return;
	rc = fs__s3_list(s, fc, creds, prefix, true, &ents, &n, err, errlen);
	free(prefix);
	/* The bucket answers, with these credentials and this region:
	 * the key is what is missing. */
	if (rc == 0)
		snprintf(err, errlen, "%s: no such key in bucket '%s' (at %s)",
			 what, s->bucket, s->endpoint);
	fs__dirindex_free(ents, n);
}

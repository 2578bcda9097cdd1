/* s3xml: reads what an S3 server answers in XML, a ListObjectsV2 page and
 * an error, with libxml2, without ever trusting it. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libxml/parser.h>
#include <libxml/tree.h>

#include "fs/base.h"
#include "fs/tree/parse_int.h"

/* No entity substituted, no DTD or anything else fetched, no error
 * printed: the document is a server's, parsed and never shown as such. */
#define S3XML_OPTIONS                                                          \
	(XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING |           \
	 XML_PARSE_NOBLANKS | XML_PARSE_NOCDATA)

/* The longest text of one element taken (S3's keys are at most 1024
 * bytes, its tokens and messages a few hundred). */
#define S3XML_TEXT_MAX 65536u

static bool named(const xmlNode *n, const char *name)
{
	return n->type == XML_ELEMENT_NODE &&
	       strcmp((const char *)n->name, name) == 0;
}

/* True when the document declares a DTD. S3 never sends one, and a DTD is
 * where entities are declared: xmlNodeGetContent expands every reference
 * to one whatever the parser's options, so a small document can grow
 * without bound. Seen in the bytes before parsing (an UTF-8 document:
 * S3's), and in the tree after (any other encoding). */
static bool has_dtd(const char *xml, size_t len, const xmlDoc *doc)
{
	static const char mark[] = "<!DOCTYPE";

	if (doc != NULL)
		return doc->intSubset != NULL || doc->extSubset != NULL;
	for (const char *p = xml; p != NULL && (size_t)(p - xml) < len;) {
		p = memchr(p, '<', len - (size_t)(p - xml));
		if (p == NULL)
			break;
		if (len - (size_t)(p - xml) >= sizeof(mark) - 1 &&
		    memcmp(p, mark, sizeof(mark) - 1) == 0)
			return true;
		p++;
	}
	return false;
}

/* The text of element n: its text children only, so that an entity
 * reference, were one ever there, is never expanded; cut at
 * S3XML_TEXT_MAX. A new string, or NULL when memory ran out. */
static char *text_of(const xmlNode *n)
{
	size_t len = 0, used;
	char *out;

	for (const xmlNode *c = n->children; c != NULL; c = c->next)
		if ((c->type == XML_TEXT_NODE ||
		     c->type == XML_CDATA_SECTION_NODE) &&
		    c->content != NULL)
			len += strlen((const char *)c->content);
	if (len > S3XML_TEXT_MAX)
		len = S3XML_TEXT_MAX;
	out = malloc(len + 1);
	if (out == NULL)
		return NULL;
	used = 0;
	for (const xmlNode *c = n->children; c != NULL && used < len;
	     c = c->next) {
		size_t take;

		if ((c->type != XML_TEXT_NODE &&
		     c->type != XML_CDATA_SECTION_NODE) ||
		    c->content == NULL)
			continue;
		take = strlen((const char *)c->content);
		if (take > len - used)
			take = len - used;
		memcpy(out + used, c->content, take);
		used += take;
	}
	out[used] = '\0';
	return out;
}

/* Undoes S3's encoding-type=url in place ('+' a space, %XX a byte);
 * -EINVAL for a NUL. A '%' not followed by two hex digits stays. */
static int url_decode(char *s)
{
	size_t len = strlen(s), n;

	return fs__pct_decode(s, len, FS_PCT_PLUS, s, len + 1, &n);
}

/* "2026-11-30T13:17:25.000Z" into seconds since the epoch. */
static bool parse_iso(const char *s, int64_t *out)
{
	int y, mo, d, h, mi, sec;
	char tail[8] = "";

	if (sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%7s", &y, &mo, &d, &h, &mi, &sec,
		   tail) < 6 ||
	    mo < 1 || mo > 12 || d < 1 ||
	    (unsigned)d > tree__month_days(y, (unsigned)mo) || h > 23 ||
	    mi > 59 || sec > 60 || h < 0 || mi < 0 || sec < 0)
		return false;
	*out = tree__days_from_civil(y, (unsigned)mo, (unsigned)d) * 86400 +
	       h * 3600 + mi * 60 + sec;
	return true;
}

static bool parse_size(const char *s, uint64_t *out)
{
	uint64_t v = 0;

	if (*s == '\0')
		return false;
	for (; *s != '\0'; s++) {
		if (*s < '0' || *s > '9' ||
		    v > ((uint64_t)INT64_MAX - (uint64_t)(*s - '0')) / 10)
			return false;
		v = v * 10 + (uint64_t)(*s - '0');
	}
	*out = v;
	return true;
}

void tree__s3_page_free(struct tree_s3_page *p)
{
	if (p == NULL)
		return;
	for (uint32_t i = 0; i < p->n; i++) {
		free(p->items[i].key);
		free(p->items[i].etag);
	}
	free(p->items);
	free(p->next_token);
	memset(p, 0, sizeof(*p));
}

/* Every error line of a listing page starts so. */
#define LISTING "ListObjectsV2: "

/* Reads one Contents or CommonPrefixes element into it. */
static int read_item(const xmlNode *e, bool url, struct tree_s3_item *it,
		     char *err, size_t errlen)
{
	bool is_prefix = named(e, "CommonPrefixes");

	memset(it, 0, sizeof(*it));
	it->is_prefix = is_prefix;
	for (const xmlNode *c = e->children; c != NULL; c = c->next) {
		char *t;

		if (c->type != XML_ELEMENT_NODE)
			continue;
		if (named(c, is_prefix ? "Prefix" : "Key")) {
			t = text_of(c);
			if (t == NULL)
				return fs__errf(err, errlen, -ENOMEM,
						LISTING "out of memory");
			free(it->key);
			it->key = t;
			/* A key with a NUL in it names no file: the entry
			 * is left out, not the page. */
			it->no_name = false;
			if (url && url_decode(t) != 0) {
				free(it->key);
				it->key = text_of(c);
				it->no_name = true;
				if (it->key == NULL)
					return fs__errf(err, errlen, -ENOMEM,
							LISTING
							"out of memory");
			}
		} else if (!is_prefix && named(c, "Size")) {
			t = text_of(c);
			if (t == NULL)
				return fs__errf(err, errlen, -ENOMEM,
						LISTING "out of memory");
			if (!parse_size(t, &it->size)) {
				free(t);
				return fs__errf(err, errlen, -EINVAL,
						LISTING
						"a Size that is no size");
			}
			free(t);
		} else if (!is_prefix && named(c, "ETag")) {
			free(it->etag);
			it->etag = text_of(c);
			if (it->etag == NULL)
				return fs__errf(err, errlen, -ENOMEM,
						LISTING "out of memory");
		} else if (!is_prefix && named(c, "LastModified")) {
			t = text_of(c);
			if (t == NULL)
				return fs__errf(err, errlen, -ENOMEM,
						LISTING "out of memory");
			it->has_mtime = parse_iso(t, &it->mtime);
			free(t);
		}
	}
	if (it->key == NULL)
		return fs__errf(err, errlen, -EINVAL, LISTING "%s",
				is_prefix ? "a CommonPrefixes without a Prefix"
					  : "a Contents without a Key");
	return 0;
}

int tree__s3_page_parse(const char *xml, size_t len, struct tree_s3_page *out,
			char *err, size_t errlen)
{
	struct tree_s3_page p = {0};
	xmlDoc *doc;
	const xmlNode *root;
	uint32_t cap = 0;
	bool url = false;
	int rc = 0;

	if (len > INT32_MAX)
		return fs__errf(err, errlen, -EINVAL,
				LISTING "larger than 2 GiB");
	if (has_dtd(xml, len, NULL))
		return fs__errf(
			err, errlen, -EINVAL,
			LISTING
			"the document declares a DTD (<!DOCTYPE>), which "
			"S3 never sends: refused unread");
	doc = xmlReadMemory(xml, (int)len, "listing.xml", NULL, S3XML_OPTIONS);
	if (doc != NULL && has_dtd(xml, len, doc)) {
		rc = fs__errf(err, errlen, -EINVAL,
			      LISTING
			      "the document declares a DTD, which S3 never "
			      "sends: refused");
		goto out;
	}
	root = doc != NULL ? xmlDocGetRootElement(doc) : NULL;
	if (root == NULL || !named(root, "ListBucketResult")) {
		rc = fs__errf(err, errlen, -EINVAL, LISTING "%s",
			      root == NULL ? "not XML"
					   : "not a ListBucketResult");
		goto out;
	}
	/* The encoding is said once for the page, maybe after keys. */
	for (const xmlNode *c = root->children; c != NULL; c = c->next)
		if (named(c, "EncodingType")) {
			char *t = text_of(c);

			url = t != NULL && strcmp(t, "url") == 0;
			free(t);
		}
	for (const xmlNode *c = root->children; c != NULL && rc == 0;
	     c = c->next) {
		if (named(c, "IsTruncated")) {
			char *t = text_of(c);

			p.truncated = t != NULL && strcmp(t, "true") == 0;
			free(t);
		} else if (named(c, "NextContinuationToken")) {
			free(p.next_token);
			p.next_token = text_of(c);
			if (p.next_token == NULL)
				rc = fs__errf(err, errlen, -ENOMEM,
					      LISTING "out of memory");
		} else if (named(c, "Contents") || named(c, "CommonPrefixes")) {
			if (p.n == TREE_S3_PAGE_MAX) {
				rc = fs__errf(err, errlen, -E2BIG,
					      LISTING
					      "more entries than a page holds");
				break;
			}
			if (p.n == cap) {
				uint32_t ncap = cap != 0 ? cap * 2 : 64;
				struct tree_s3_item *grown =
					realloc(p.items, ncap * sizeof(*grown));

				if (grown == NULL) {
					rc = fs__errf(err, errlen, -ENOMEM,
						      LISTING "out of memory");
					break;
				}
				p.items = grown;
				cap = ncap;
			}
			rc = read_item(c, url, &p.items[p.n], err, errlen);
			/* Counted either way: the item's strings are its. */
			p.n++;
		}
	}
	if (rc == 0 && p.truncated && p.next_token == NULL)
		rc = fs__errf(err, errlen, -EINVAL,
			      LISTING
			      "IsTruncated without a NextContinuationToken");
out:
	xmlFreeDoc(doc);
	if (rc != 0) {
		tree__s3_page_free(&p);
		return rc;
	}
	*out = p;
	return 0;
}

int tree__s3_error_parse(const char *xml, size_t len, char *code,
			 size_t codelen, char *message, size_t msglen,
			 char *region, size_t regionlen)
{
	xmlDoc *doc;
	const xmlNode *root;
	int rc = 0;

	code[0] = message[0] = region[0] = '\0';
	if (len > INT32_MAX)
		return -EINVAL;
	if (has_dtd(xml, len, NULL))
		return -EPROTO;
	doc = xmlReadMemory(xml, (int)len, "error.xml", NULL, S3XML_OPTIONS);
	if (doc != NULL && has_dtd(xml, len, doc)) {
		rc = -EPROTO;
		goto out;
	}
	root = doc != NULL ? xmlDocGetRootElement(doc) : NULL;
	if (root == NULL || !named(root, "Error")) {
		rc = -EINVAL;
		goto out;
	}
	for (const xmlNode *c = root->children; c != NULL; c = c->next) {
		char *buf = named(c, "Code")	  ? code
			    : named(c, "Message") ? message
			    : named(c, "Region")  ? region
						  : NULL;
		size_t cap = buf == code      ? codelen
			     : buf == message ? msglen
					      : regionlen;
		char *t;

		if (buf == NULL)
			continue;
		t = text_of(c);
		if (t != NULL)
			snprintf(buf, cap, "%s", t);
		free(t);
	}
out:
	xmlFreeDoc(doc);
	return rc;
}

/* parse_int: what the tree's pure parsers share (dates, a manifest's
 * entry and error lines that manifest.c and mentry.c share, and the S3
 * listing's pages that s3.c reads through s3xml.c); no file outside
 * fs/tree/ includes it (but the parsers' tests and fuzzers). */
#ifndef FS_PARSE_INT_H
#define FS_PARSE_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Days from 1970-01-01 to y-m-d in the proleptic Gregorian calendar
 * (m 1..12, d 1..31); the civil-date algorithm both parsers share. */
static inline int64_t tree__days_from_civil(int64_t y, unsigned m, unsigned d)
{
	int64_t era, yoe, doy, doe;

	y -= m <= 2;
	era = (y >= 0 ? y : y - 399) / 400;
	yoe = y - era * 400;
	doy = (153 * (int64_t)(m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
	doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + doe - 719468;
}

/* Days in month m (1..12) of year y. */
static inline unsigned tree__month_days(int64_t y, unsigned m)
{
	static const unsigned char days[12] = {31, 28, 31, 30, 31, 30,
					       31, 31, 30, 31, 30, 31};
	bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;

	return m == 2 && leap ? 29 : days[m - 1];
}

/* The manifest (JSON, jansson): tree/manifest.c reads the document and
 * checks the paths together, tree/mentry.c parses one entry and writes
 * the error lines. */
struct json_t;
struct tree_manifest;
struct tree_manifest_entry;

/* Where a manifest's error line goes, and which entry is being checked
 * (files[index]). */
struct tree_mctx {
	char *err;
	size_t errlen;
	uint32_t index;
};

/* Fills e from obj, entry c->index, checked against docs/manifest.md's
 * rules for one entry. 0; -EINVAL with one line in c->err naming the
 * entry and field; -ENOMEM. On error e may hold allocations, which the
 * caller frees with the manifest. Thread-safe. */
int tree__mentry_parse(struct tree_mctx *c, struct json_t *obj,
		       struct tree_manifest_entry *e);

/* The rules of an entry's path and of one of its URLs (field names it in
 * the error line): 0, or -EINVAL with the line in c->err. */
int tree__mcheck_path(struct tree_mctx *c, const char *p, size_t len);
int tree__mcheck_url(struct tree_mctx *c, const char *field, const char *u,
		     size_t len);

/* The common entry, {"path": P, "urls": [U, ...], "size": N} in any order
 * (size optional) with plain strings (printable ASCII, no escape) and a
 * plain integer, parsed from [p, q) without jansson (tree/mfast.c) and
 * checked by the same rules. 0 with e filled as tree__mentry_parse
 * fills it; 1 when the text is not of that shape or breaks a rule (e
 * left empty: jansson's parse is to say what and where); -ENOMEM. */
int tree__mentry_fast(struct tree_mctx *c, const char *p, const char *q,
		      struct tree_manifest_entry *e);

/* Rejects a path listed twice and a file that another path uses as a
 * directory, naming the later entry (tree/manifest.c). 0, -EINVAL,
 * -ENOMEM. */
int tree__manifest_check(struct tree_mctx *c, const struct tree_manifest *m);

/* A manifest of the plain shape (an object of version 1 and a non-empty
 * files array, nothing else) parsed an entry at a time, never holding
 * the whole JSON document (tree/mstream.c): 0 with *m filled; 1 when the
 * text is of another shape or any error was found, which
 * tree__manifest_parse_whole then names (err holds the streaming parse's
 * own line for the first bad entry in the document's order when it could
 * name one, an empty string otherwise); -ENOMEM. On non-zero *m may
 * hold allocations: the caller frees it with tree_manifest_free. With
 * mapped, text is a private read-only mapping of a file, whose pages the
 * parse gives back behind it (madvise MADV_DONTNEED). */
int tree__manifest_stream(const char *text, size_t len, bool mapped,
			  struct tree_manifest *m, char *err, size_t errlen);

/* The whole document parsed at once and checked, as tree_manifest_parse
 * promises (tree/manifest.c); every error line comes from here. */
int tree__manifest_parse_whole(const char *text, size_t len,
			       struct tree_manifest *out, char *err,
			       size_t errlen);

/* Error lines, each written into c->err: "files[I].FIELD: ..." (a NULL
 * field names the entry itself), "FIELD: ..." about the top level, and
 * "manifest: out of memory". They return -EINVAL, -EINVAL and -ENOMEM. */
int tree__mfail(struct tree_mctx *c, const char *field, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
int tree__mfail_top(struct tree_mctx *c, const char *field, const char *fmt,
		    ...) __attribute__((format(printf, 3, 4)));
int tree__moom(struct tree_mctx *c);

/* s (len bytes) as a double-quoted, one-line C-style string in buf, cut
 * with "..." past 80 bytes, so that an error stays readable whatever the
 * manifest holds. Returns buf. */
const char *tree__mquote(const char *s, size_t len, char *buf, size_t cap);

/* What kind of JSON value v is, for errors ("an object", "null"). */
const char *tree__json_type(const struct json_t *v);

/* Whether key is one of names[0..n). */
bool tree__mknown(const char *key, const char *const *names, size_t n);

/* S3 (fs/tree/s3xml.c, libxml2). One entry of a ListObjectsV2 page. */
struct tree_s3_item {
	char *key;	/* decoded (encoding-type=url undone) */
	bool is_prefix; /* a CommonPrefixes entry: a directory */
	uint64_t size;
	bool has_mtime;
	int64_t mtime; /* LastModified, seconds since the epoch */
	char *etag;    /* as listed, quotes kept; NULL for a prefix */
	bool no_name;  /* the key decodes to a NUL byte: no file can be
			  called that (key is then as listed, undecoded) */
};

/* A parsed ListObjectsV2 page. */
struct tree_s3_page {
	struct tree_s3_item *items;
	uint32_t n;
	bool truncated;
	char *next_token; /* NextContinuationToken; NULL when none */
};

/* Most entries one page may list (S3 sends at most 1000). */
#define TREE_S3_PAGE_MAX 100000u

/* Most pages one listing reads: a directory of TREE_DIRINDEX_MAX entries in
 * S3's pages of 1000, and some room. */
#define TREE_S3_PAGES_MAX (TREE_DIRINDEX_MAX / 1000u + 64u)

/* Parses a ListObjectsV2 answer of len bytes (libxml2; nothing is
 * fetched). A document with a DTD (<!DOCTYPE>, which S3 never sends, and
 * where entities are declared) is refused, and an element's text is its
 * text children only: no entity is ever expanded. Keys are decoded when
 * the page says EncodingType url ('+' a space, %XX a byte); one that
 * decodes to a NUL is kept undecoded and marked no_name. Returns 0 with
 * *out (free with tree__s3_page_free), or -EINVAL (not such a document, a
 * DTD, a size that is no number) or -ENOMEM with one line in err.
 * Thread-safe. */
int tree__s3_page_parse(const char *xml, size_t len, struct tree_s3_page *out,
			char *err, size_t errlen);
void tree__s3_page_free(struct tree_s3_page *p);

/* Reads an S3 error document: its Code, Message and Region (empty when
 * absent), each cut to its buffer, text children only. -EINVAL when it is
 * no <Error>, -EPROTO when it declares a DTD (refused unread). */
int tree__s3_error_parse(const char *xml, size_t len, char *code,
			 size_t codelen, char *message, size_t msglen,
			 char *region, size_t regionlen);

#endif

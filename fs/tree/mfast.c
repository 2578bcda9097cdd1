/* mfast: the common manifest entry parsed without jansson. Most entries
 * are a path, a URL or a few, and a size, written plainly; building a
 * jansson document for each (an object, its hash table, three pairs, two
 * strings, an array, an integer: an allocation each) was most of a
 * million-entry manifest's parse. This reads that shape in place and
 * checks it by mentry.c's own rules. Anything else is jansson's, so
 * that what is accepted and every error line stay the whole parse's: a
 * string with an escape or a byte outside printable ASCII, another
 * field, a field twice, a number that is not a plain integer, and an
 * entry that breaks a rule. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fs/tree/parse_int.h"
#include "fs/tree/tree.h"

static const char *ws(const char *p, const char *q)
{
	while (p < q && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
		p++;
	return p;
}

/* The plain string at p (printable ASCII, no escape): its bytes in *s,
 * *len; past its closing quote, or NULL. */
static const char *str(const char *p, const char *q, const char **s,
		       size_t *len)
{
	if (p >= q || *p != '"')
		return NULL;
	*s = ++p;
	for (; p < q; p++) {
		unsigned char ch = (unsigned char)*p;

		if (ch == '"') {
			*len = (size_t)(p - *s);
			return p + 1;
		}
		if (ch < 0x20 || ch >= 0x7f || ch == '\\')
			return NULL;
	}
	return NULL;
}

/* The plain non-negative integer at p, of 18 digits at most (so within
 * jansson's json_int_t), without a fraction or an exponent: past it, or
 * NULL. */
static const char *integer(const char *p, const char *q, uint64_t *v)
{
	const char *s = p;

	*v = 0;
	while (p < q && *p >= '0' && *p <= '9' && p - s <= 18)
		*v = *v * 10 + (uint64_t)(*p++ - '0');
	if (p == s || p - s > 18 || (*s == '0' && p - s > 1))
		return NULL;
	if (p < q && strchr(" \t\n\r,}", *p) == NULL)
		return NULL;
	return p;
}

static char *dup(const char *s, size_t len)
{
	char *d = malloc(len + 1);

	if (d != NULL) {
		memcpy(d, s, len);
		d[len] = '\0';
	}
	return d;
}

/* The urls array at p, checked, into e: past it, or NULL (*rc -ENOMEM
 * when memory ran out). */
static const char *urls(struct tree_mctx *c, const char *p, const char *q,
			struct tree_manifest_entry *e, int *rc)
{
	const char *u[TREE_MANIFEST_URLS_MAX];
	size_t len[TREE_MANIFEST_URLS_MAX], n = 0;

	if (p >= q || *p != '[')
		return NULL;
	for (p = ws(p + 1, q);; p = ws(p + 1, q)) {
		char field[32];

		if (n == TREE_MANIFEST_URLS_MAX ||
		    (p = str(p, q, &u[n], &len[n])) == NULL)
			return NULL;
		snprintf(field, sizeof(field), "urls[%zu]", n);
		if (tree__mcheck_url(c, field, u[n], len[n]) != 0)
			return NULL;
		for (size_t j = 0; j < n; j++)
			if (len[j] == len[n] && memcmp(u[j], u[n], len[n]) == 0)
				return NULL;
		n++;
		p = ws(p, q);
		if (p < q && *p == ']')
			break;
		if (p >= q || *p != ',')
			return NULL;
	}
	e->urls = calloc(n, sizeof(*e->urls));
	for (size_t i = 0; e->urls != NULL && i < n; i++) {
		if ((e->urls[i] = dup(u[i], len[i])) == NULL)
			break;
		e->nurls = (uint32_t)(i + 1);
	}
	if (e->nurls < n) {
		*rc = -ENOMEM;
		return NULL;
	}
	return p + 1;
}

static void undo(struct tree_manifest_entry *e)
{
	free(e->path);
	for (uint32_t i = 0; i < e->nurls; i++)
		free(e->urls[i]);
	free(e->urls);
	memset(e, 0, sizeof(*e));
}

int tree__mentry_fast(struct tree_mctx *c, const char *p, const char *q,
		      struct tree_manifest_entry *e)
{
	bool seen_path = false, seen_urls = false, seen_size = false;
	const char *path = NULL, *k;
	size_t plen = 0, klen;
	uint64_t size = 0;
	int rc = 0;

	p = ws(p, q);
	if (p >= q || *p != '{')
		return 1;
	for (p = ws(p + 1, q);; p = ws(p + 1, q)) {
		if ((p = str(p, q, &k, &klen)) == NULL || klen != 4)
			goto other;
		p = ws(p, q);
		if (p >= q || *p != ':')
			goto other;
		p = ws(p + 1, q);
		if (memcmp(k, "path", 4) == 0 && !seen_path) {
			seen_path = true;
			p = str(p, q, &path, &plen);
		} else if (memcmp(k, "urls", 4) == 0 && !seen_urls) {
			seen_urls = true;
			p = urls(c, p, q, e, &rc);
		} else if (memcmp(k, "size", 4) == 0 && !seen_size) {
			seen_size = true;
			p = integer(p, q, &size);
		} else {
			goto other;
		}
		if (p == NULL)
			goto other;
		p = ws(p, q);
		if (p < q && *p == '}')
			break;
		if (p >= q || *p != ',')
			goto other;
	}
	if (ws(p + 1, q) != q || !seen_path || !seen_urls ||
	    tree__mcheck_path(c, path, plen) != 0)
		goto other;
	if ((e->path = dup(path, plen)) == NULL) {
		rc = -ENOMEM;
		goto other;
	}
	e->has_size = seen_size;
	e->size = size;
	return 0;
other:
	undo(e);
	return rc == -ENOMEM ? tree__moom(c) : 1;
}

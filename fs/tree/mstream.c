/* mstream: a manifest parsed one entry at a time. The document's top level
 * and the files array are walked in place, without building them; each
 * entry is one small jansson document, parsed and checked
 * (tree/mentry.c), then freed. A manifest of a million entries so never
 * holds the whole JSON tree (840 bytes an entry) at once.
 *
 * An entry of the common shape (a path, its URLs, a size, written plainly)
 * is read without jansson at all (tree/mfast.c).
 *
 * Only the plain shape takes this path: an object of version 1 and a
 * non-empty files array, no other key, nothing twice. Anything else, and
 * any error at all, is left to the whole-document parse (manifest.c), so
 * that every error line, and which error wins when there are several, is
 * what that parse says (it builds the document only up to the error). */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <jansson.h>

#include "fs/base.h"
#include "fs/tree/parse_int.h"
#include "fs/tree/tree.h"

/* Entries past which the array is parsed by two threads, one a half. */
#define MSTREAM_SPLIT_MIN 65536

/* Bytes of a mapped manifest read before the pages behind are given
 * back. */
#define MSTREAM_RELEASE_STEP (16u << 20)

/* The flags of the whole-document parse, for every piece. */
#define MSTREAM_JSON_FLAGS                                                     \
	(JSON_REJECT_DUPLICATES | JSON_DECODE_ANY | JSON_ALLOW_NUL)

static const char *ws(const char *p, const char *end)
{
	while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
		p++;
	return p;
}

/* Past the string that starts at p (a '"'), or NULL when it does not end.
 * Its contents are jansson's to check, in the piece it belongs to. */
static const char *skip_string(const char *p, const char *end)
{
	for (p++; p < end; p++) {
		if (*p == '\\')
			p++;
		else if (*p == '"')
			return p + 1;
	}
	return NULL;
}

/* Past the value that starts at p: a string, an object or array (nested
 * brackets counted, strings skipped), or a bare word up to the next
 * delimiter. NULL when the text ends first. The value's own syntax is
 * checked by whoever parses its piece. */
static const char *skip_value(const char *p, const char *end)
{
	size_t depth = 0;

	if (p >= end)
		return NULL;
	if (*p == '"')
		return skip_string(p, end);
	if (*p != '{' && *p != '[') {
		while (p < end && strchr(",]} \t\n\r", *p) == NULL)
			p++;
		return p;
	}
	while (p < end) {
		if (*p == '"') {
			p = skip_string(p, end);
			if (p == NULL)
				return NULL;
			continue;
		}
		if (*p == '{' || *p == '[')
			depth++;
		else if ((*p == '}' || *p == ']') && --depth == 0)
			return p + 1;
		p++;
	}
	return NULL;
}

/* The piece [p, q) as a jansson value, or NULL (a syntax error, or out of
 * memory: *jerr says which). */
static json_t *piece_err(const char *p, const char *q, json_error_t *jerr)
{
	return json_loadb(p, (size_t)(q - p), MSTREAM_JSON_FLAGS, jerr);
}

static json_t *piece(const char *p, const char *q)
{
	json_error_t jerr;

	return piece_err(p, q, &jerr);
}

/* The syntax error jansson found in the piece at p as the whole-document
 * parse words it: "line L, column C: ..." counted from the document's
 * start at text (lines by '\n', columns in characters, as jansson counts
 * them), into err. */
static void syntax_line(const char *text, const char *p,
			const json_error_t *jerr, char *err, size_t errlen)
{
	size_t line = 1, col = 0;

	for (const char *x = text; x < p; x++) {
		if (*x == '\n') {
			line++;
			col = 0;
		} else if (((unsigned char)*x & 0xc0) != 0x80) {
			col++;
		}
	}
	if (jerr->line > 1) {
		line += (size_t)jerr->line - 1;
		col = 0;
	}
	fs__errf(err, errlen, -EINVAL, "line %zu, column %zu: %s", line,
		 col + (size_t)jerr->column, jerr->text);
	for (char *x = err; errlen > 0 && *x != '\0'; x++)
		if ((unsigned char)*x < 0x20 || *x == 0x7f)
			*x = '?';
}

/* The top-level key at p, known and not seen before: 'v' for version,
 * 'f' for files, 0 for anything else. */
static char top_key(const char *p, const char *q)
{
	json_t *k = piece(p, q);
	const char *s = json_string_value(k);
	char which = 0;

	if (s != NULL && strlen(s) == json_string_length(k))
		which = strcmp(s, "version") == 0 ? 'v'
			: strcmp(s, "files") == 0 ? 'f'
						  : 0;
	json_decref(k);
	return which;
}

/* Gives back the whole pages of a mapped manifest in [*mark, p) once
 * they are MSTREAM_RELEASE_STEP bytes: the walk and the parse read the
 * text once each, front to back, so that its mapping's resident pages
 * never add up to the whole file beside the parsed entries. Pages
 * touched again (the whole-document parse, after an error) are read
 * from the file again. */
static void release(bool mapped, const char **mark, const char *p)
{
	uintptr_t pg, a, b;

	if (!mapped || (size_t)(p - *mark) < MSTREAM_RELEASE_STEP)
		return;
	pg = (uintptr_t)sysconf(_SC_PAGESIZE);
	a = ((uintptr_t)*mark + pg - 1) & ~(pg - 1);
	b = (uintptr_t)p & ~(pg - 1);
	if (b > a)
		(void)madvise((void *)a, b - a, MADV_DONTNEED);
	*mark = p;
}

/* The files array at p: counts its entries into *n and returns the end
 * of the array, or NULL when it is not a plain non-empty array. */
static const char *walk_files(const char *p, const char *end, bool mapped,
			      size_t *n)
{
	const char *mark = p;

	*n = 0;
	if (p >= end || *p != '[')
		return NULL;
	p = ws(p + 1, end);
	if (p < end && *p == ']')
		return NULL; /* empty: the whole parse says so */
	for (;;) {
		p = skip_value(p, end);
		if (p == NULL)
			return NULL;
		(*n)++;
		release(mapped, &mark, p);
		p = ws(p, end);
		if (p < end && *p == ']')
			return p + 1;
		if (p >= end || *p != ',')
			return NULL;
		p = ws(p + 1, end);
	}
}

/* Walks the top level: finds the files array (*files, its entries in
 * *n). false when the document is not of the plain shape. */
static bool walk_top(const char *text, size_t len, bool mapped,
		     const char **files, size_t *n)
{
	const char *end = text + len, *p = ws(text, end), *q;
	bool seen_v = false, seen_f = false;

	if (p >= end || *p != '{')
		return false;
	p = ws(p + 1, end);
	for (;;) {
		char key;

		if (p >= end || *p != '"')
			return false;
		q = skip_string(p, end);
		if (q == NULL)
			return false;
		key = top_key(p, q);
		p = ws(q, end);
		if (key == 0 || (key == 'v' && seen_v) ||
		    (key == 'f' && seen_f) || p >= end || *p != ':')
			return false;
		p = ws(p + 1, end);
		if (key == 'f') {
			seen_f = true;
			*files = p;
			q = walk_files(p, end, mapped, n);
		} else {
			json_t *v;

			seen_v = true;
			q = skip_value(p, end);
			v = q != NULL ? piece(p, q) : NULL;
			if (!json_is_integer(v) || json_integer_value(v) != 1)
				q = NULL;
			json_decref(v);
		}
		if (q == NULL)
			return false;
		p = ws(q, end);
		if (p < end && *p == '}')
			break;
		if (p >= end || *p != ',')
			return false;
		p = ws(p + 1, end);
	}
	return seen_v && seen_f && ws(p + 1, end) == end && *n <= UINT32_MAX;
}

/* One thread's part of the files array: entries [lo, hi), the first at
 * p, in the document at text; rc as tree__manifest_stream's, err its line
 * when -ENOMEM, or when named, the line of the part's first bad entry. */
struct mstream_part {
	struct tree_manifest *m;
	const char *text, *p, *end;
	bool mapped;
	size_t lo, hi;
	int rc;
	bool named;
	char err[256];
};

static void *parse_part(void *arg)
{
	struct mstream_part *w = arg;
	struct tree_mctx c = {.err = w->err, .errlen = sizeof(w->err)};
	const char *p = w->p, *mark = w->p;
	int rc = 0;

	for (size_t i = w->lo; i < w->hi && rc == 0; i++) {
		const char *q = skip_value(p, w->end);
		json_t *obj;

		if (q == NULL) {
			rc = 1;
			break;
		}
		c.index = (uint32_t)i;
		/* The common shape without jansson, else its document. */
		rc = tree__mentry_fast(&c, p, q, &w->m->files[i]);
		if (rc == 1) {
			json_error_t jerr;

			obj = piece_err(p, q, &jerr);
			if (obj == NULL) {
				if (json_error_code(&jerr) ==
				    json_error_out_of_memory) {
					rc = tree__moom(&c);
					break;
				}
				syntax_line(w->text, p, &jerr, w->err,
					    sizeof(w->err));
				w->named = true;
				break;
			}
			rc = tree__mentry_parse(&c, obj, &w->m->files[i]);
			json_decref(obj);
			w->named = rc == -EINVAL;
		}
		p = ws(ws(q, w->end) + 1, w->end); /* past the ',' */
		release(w->mapped, &mark, p);
	}
	w->rc = rc == -ENOMEM ? rc : rc != 0 ? 1 : 0;
	return NULL;
}

/* Past the files array's first n entries, from its first at p. */
static const char *skip_entries(const char *p, const char *end, size_t n)
{
	for (size_t i = 0; i < n && p != NULL; i++) {
		p = skip_value(p, end);
		if (p != NULL)
			p = ws(ws(p, end) + 1, end);
	}
	return p;
}

int tree__manifest_stream(const char *text, size_t len, bool mapped,
			  struct tree_manifest *m, char *err, size_t errlen)
{
	struct tree_mctx c = {.err = err, .errlen = errlen};
	struct mstream_part w[2];
	const char *files = NULL, *end = text + len;
	size_t n = 0, half;
	pthread_t t;
	bool two;
	int rc, k;

	if (errlen > 0)
		err[0] = '\0';
	if (!walk_top(text, len, mapped, &files, &n))
		return 1;
	m->files = calloc(n, sizeof(*m->files));
	if (m->files == NULL)
		return tree__moom(&c);
	/* Every entry is the manifest's from here: a part that stops early
	 * leaves zeroes, which tree_manifest_free frees as nothing. */
	m->nfiles = (uint32_t)n;
	/* Each entry's parse is its own document: a large array is cut in
	 * two at an entry's start, and a second thread parses the second
	 * half while this one parses the first. */
	half = n >= MSTREAM_SPLIT_MIN && sysconf(_SC_NPROCESSORS_ONLN) > 1
		       ? n / 2
		       : n;
	w[0] = (struct mstream_part){.m = m,
				     .text = text,
				     .p = ws(files + 1, end),
				     .end = end,
				     .mapped = mapped,
				     .hi = half};
	w[1] = (struct mstream_part){.m = m,
				     .text = text,
				     .end = end,
				     .mapped = mapped,
				     .lo = half,
				     .hi = n};
	w[1].p = half < n ? skip_entries(w[0].p, end, half) : NULL;
	two = w[1].p != NULL &&
	      pthread_create(&t, NULL, parse_part, &w[1]) == 0;
	if (!two)
		w[0].hi = n;
	parse_part(&w[0]);
	if (two)
		pthread_join(t, NULL);
	if (w[0].rc == -ENOMEM || (two && w[1].rc == -ENOMEM))
		return tree__moom(&c);
	/* The first bad entry in the document's order: the first part's,
	 * else the second's. */
	k = w[0].rc != 0 ? 0 : two && w[1].rc != 0 ? 1 : 2;
	if (k < 2) {
		if (w[k].named)
			snprintf(err, errlen, "%s", w[k].err);
		return 1;
	}
	rc = tree__manifest_check(&c, m);
	return rc == -ENOMEM ? rc : rc != 0 ? 1 : 0;
}

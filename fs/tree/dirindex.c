/* dirindex: reads the entries of an nginx autoindex or Apache
 * mod_autoindex HTML page (names, directories, exact sizes, times) from
 * any input, without ever trusting it. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "fs/base.h"
#include "fs/tree/parse_int.h"
#include "fs/tree/tree.h"

/* The longest href looked at; longer ones cannot hold a name we keep. */
#define HREF_MAX (TREE_DIRINDEX_NAME_MAX * 12 + 16)
/* Tokens read after a link while looking for its time and size. */
#define TAIL_TOKENS 8
#define TOKEN_MAX 32

struct parser {
	const char *p, *end;
	struct tree_index_entry *e;
	uint32_t n, cap;
	char *err;
	size_t errlen;
};

static bool is_space(char ch)
{
	return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' ||
	       ch == '\f' || ch == '\v';
}

static char lower(char ch)
{
	return ch >= 'A' && ch <= 'Z' ? (char)(ch - 'A' + 'a') : ch;
}

/* Whether [p, end) starts with lit, ASCII case ignored. */
static bool starts_ci(const char *p, const char *end, const char *lit)
{
	size_t n = strlen(lit);

	if ((size_t)(end - p) < n)
		return false;
	for (size_t i = 0; i < n; i++)
		if (lower(p[i]) != lit[i])
			return false;
	return true;
}

/* Whether p starts an <a> open tag. */
static bool at_anchor(const char *p, const char *end)
{
	return end - p >= 3 && p[0] == '<' && lower(p[1]) == 'a' &&
	       (is_space(p[2]) || p[2] == '>');
}

/* Appends code point cp as UTF-8; false if it is not a character. */
static bool put_utf8(char *out, size_t *o, size_t cap, unsigned long cp)
{
	if (cp == 0 || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff) ||
	    *o + 4 > cap)
		return false;
	if (cp < 0x80) {
		out[(*o)++] = (char)cp;
	} else if (cp < 0x800) {
		out[(*o)++] = (char)(0xc0 | (cp >> 6));
		out[(*o)++] = (char)(0x80 | (cp & 0x3f));
	} else if (cp < 0x10000) {
		out[(*o)++] = (char)(0xe0 | (cp >> 12));
		out[(*o)++] = (char)(0x80 | ((cp >> 6) & 0x3f));
		out[(*o)++] = (char)(0x80 | (cp & 0x3f));
	} else {
		out[(*o)++] = (char)(0xf0 | (cp >> 18));
		out[(*o)++] = (char)(0x80 | ((cp >> 12) & 0x3f));
		out[(*o)++] = (char)(0x80 | ((cp >> 6) & 0x3f));
		out[(*o)++] = (char)(0x80 | (cp & 0x3f));
	}
	return true;
}

/* Decodes the character reference at s[0] == '&' (named: amp, lt, gt,
 * quot, apos; numeric: &#N; &#xH;) into out; returns the bytes of input
 * it used, or 0 if it is not one (the '&' is then literal). */
static size_t entity(const char *s, size_t len, char *out, size_t *o,
		     size_t cap)
{
	static const struct {
		const char *name;
		char ch;
	} named[] = {{"&amp;", '&'},
		     {"&lt;", '<'},
		     {"&gt;", '>'},
		     {"&quot;", '"'},
		     {"&apos;", '\''}};
	unsigned long cp = 0;
	size_t i = 2;
	bool hex;

	for (size_t k = 0; k < sizeof(named) / sizeof(named[0]); k++) {
		size_t n = strlen(named[k].name);

		if (len >= n && memcmp(s, named[k].name, n) == 0) {
			if (*o + 1 > cap)
				return 0;
			out[(*o)++] = named[k].ch;
			return n;
		}
	}
	if (len < 4 || s[1] != '#')
		return 0;
	hex = s[2] == 'x' || s[2] == 'X';
	if (hex)
		i++;
	for (size_t start = i; i < len && i < start + 8; i++) {
		int d = hex ? fs__hexval(s[i])
			    : (s[i] >= '0' && s[i] <= '9' ? s[i] - '0' : -1);

		if (d < 0)
			break;
		cp = cp * (hex ? 16 : 10) + (unsigned long)d;
	}
	if (i >= len || s[i] != ';' || i == (hex ? 3u : 2u))
		return 0;
	if (!put_utf8(out, o, cap, cp))
		return 0;
	return i + 1;
}

/* Decodes character references in the href [s, s+len) into out (cap
 * bytes, not NUL-terminated); returns the length, or SIZE_MAX if it does
 * not fit. */
static size_t unescape_html(const char *s, size_t len, char *out, size_t cap)
{
	size_t o = 0;

	for (size_t i = 0; i < len;) {
		if (s[i] == '&') {
			size_t used = entity(s + i, len - i, out, &o, cap);

			if (used > 0) {
				i += used;
				continue;
			}
		}
		if (o + 1 > cap)
			return SIZE_MAX;
		out[o++] = s[i++];
	}
	return o;
}

/* Turns an href into an entry's name and kind; false when it is not an
 * entry of this directory (parent, sort link, other path, scheme,
 * fragment, or a name that cannot be a file's). name has room for
 * TREE_DIRINDEX_NAME_MAX + 1 bytes. */
static bool href_name(const char *raw, size_t rawlen, char *name, bool *is_dir)
{
	char h[HREF_MAX];
	size_t len, n;
	const char *s = h;

	while (rawlen > 0 && is_space(*raw)) {
		raw++;
		rawlen--;
	}
	while (rawlen > 0 && is_space(raw[rawlen - 1]))
		rawlen--;
	if (rawlen > sizeof(h))
		return false;
	len = unescape_html(raw, rawlen, h, sizeof(h));
	if (len == 0 || len == SIZE_MAX)
		return false;
	/* A query, a fragment, an absolute path or another host. */
	if (memchr(h, '?', len) != NULL || memchr(h, '#', len) != NULL ||
	    h[0] == '/')
		return false;
	/* A scheme ("mailto:", "https:"); servers write "./a:b" for a name
	 * with a colon, which this lets through. */
	for (size_t i = 0; i < len && h[i] != '/'; i++)
		if (h[i] == ':')
			return false;
	if (len >= 2 && h[0] == '.' && h[1] == '/') {
		s += 2;
		len -= 2;
	}
	*is_dir = len > 0 && s[len - 1] == '/';
	if (*is_dir)
		len--;
	if (len == 0 || memchr(s, '/', len) != NULL)
		return false;
	/* An href is a URL path: '+' is itself; a NUL, an escaped '/' or a
	 * name longer than a file's is no entry. */
	if (fs__pct_decode(s, len, 0, name, TREE_DIRINDEX_NAME_MAX + 1, &n) < 0)
		return false;
	if (memchr(name, '/', n) != NULL)
		return false;
	return strcmp(name, ".") != 0 && strcmp(name, "..") != 0;
}

/* Reads the next token of the text after a link: skips blanks, tags and
 * character references (Apache's "&nbsp;" cells). Stops at the end of the
 * line, the next <a> tag or the end of a table row; returns false then.
 * tok gets up to TOKEN_MAX bytes. */
static bool next_token(struct parser *ps, char *tok, size_t *toklen)
{
	const char *p = ps->p, *end = ps->end;
	size_t n = 0;

	for (;;) {
		if (p == end || *p == '\n' || at_anchor(p, end) ||
		    starts_ci(p, end, "</tr")) {
			ps->p = p;
			return false;
		}
		if (is_space(*p)) {
			p++;
		} else if (*p == '<') {
			const char *gt = memchr(p, '>', (size_t)(end - p));

			p = gt != NULL ? gt + 1 : end;
		} else if (*p == '&') {
			const char *semi = p + 1;

			while (semi < end && semi < p + 10 && *semi != ';' &&
			       !is_space(*semi) && *semi != '<')
				semi++;
			p = semi < end && *semi == ';' ? semi + 1 : p + 1;
		} else {
			break;
		}
	}
	while (p < end && !is_space(*p) && *p != '<' && *p != '&') {
		if (n < TOKEN_MAX)
			tok[n] = *p;
		n++;
		p++;
	}
	ps->p = p;
	*toklen = n > TOKEN_MAX ? TOKEN_MAX + 1 : n;
	return true;
}

static bool num(const char *s, size_t n, int *out)
{
	int v = 0;

	if (n == 0 || n > 4)
		return false;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		v = v * 10 + (s[i] - '0');
	}
	*out = v;
	return true;
}

/* Parses nginx's "29-Nov-2026" (Apache 2.2's too) or Apache 2.4's
 * "2026-11-29" into days since the epoch. */
static bool parse_date(const char *t, size_t n, int64_t *days)
{
	static const char months[] = "janfebmaraprmayjunjulaugsepoctnovdec";
	int y, m = 0, d;

	if (n == 10 && t[4] == '-' && t[7] == '-') {
		if (!num(t, 4, &y) || !num(t + 5, 2, &m) || !num(t + 8, 2, &d))
			return false;
	} else if ((n == 11 || n == 10) && t[n - 5] == '-' && t[n - 9] == '-') {
		const char *mon = t + n - 8;

		if (!num(t, n - 9, &d) || !num(t + n - 4, 4, &y))
			return false;
		for (int i = 0; i < 12; i++)
			if (lower(mon[0]) == months[3 * i] &&
			    lower(mon[1]) == months[3 * i + 1] &&
			    lower(mon[2]) == months[3 * i + 2])
				m = i + 1;
	} else {
		return false;
	}
	if (m < 1 || m > 12 || d < 1 ||
	    (unsigned)d > tree__month_days(y, (unsigned)m))
		return false;
	*days = tree__days_from_civil(y, (unsigned)m, (unsigned)d);
	return true;
}

/* Parses "23:48" or "23:48:05" into seconds of the day. */
static bool parse_time(const char *t, size_t n, int64_t *secs)
{
	int h, m, s = 0;

	if ((n != 5 && n != 8) || t[2] != ':' || !num(t, 2, &h) ||
	    !num(t + 3, 2, &m))
		return false;
	if (n == 8 && (t[5] != ':' || !num(t + 6, 2, &s)))
		return false;
	if (h > 23 || m > 59 || s > 60)
		return false;
	*secs = h * 3600 + m * 60 + s;
	return true;
}

/* Reads a size column: exact bytes ("1234"), or a human size ("1.2M",
 * "12K", "3.5 GiB" parts) that is known but not exact, or "-". A number
 * over INT64_MAX is no file's size: left unknown, for the probe. */
static void parse_size(const char *t, size_t n, struct tree_index_entry *e)
{
	uint64_t v = 0;
	size_t i = 0;

	while (i < n && t[i] >= '0' && t[i] <= '9') {
		unsigned d = (unsigned)(t[i] - '0');

		if (v > ((uint64_t)INT64_MAX - d) / 10)
			return;
		v = v * 10 + d;
		i++;
	}
	if (i == n && n > 0) {
		e->has_size = true;
		e->size = v;
	}
}

/* Reads "DATE TIME SIZE" from the text after an entry's link, the shape
 * of every nginx and Apache fancy row; fills what it finds. */
static void read_tail(struct parser *ps, struct tree_index_entry *e)
{
	char tok[TOKEN_MAX];
	size_t n;
	int64_t days = 0, secs;
	int state = 0; /* 0: before the date, 1: after it, 2: after time */

	for (int i = 0; i < TAIL_TOKENS && next_token(ps, tok, &n); i++) {
		if (n > TOKEN_MAX) {
			state = 0;
			continue;
		}
		if (state == 2) {
			parse_size(tok, n, e);
			return;
		}
		if (state == 1 && parse_time(tok, n, &secs)) {
			e->has_mtime = true;
			e->mtime = days * 86400 + secs;
			state = 2;
			continue;
		}
		state = parse_date(tok, n, &days) ? 1 : 0;
	}
}

/* Scans the attributes of the tag whose name ends at ps->p, up to and
 * past its '>'; *href gets the first href value (NULL if none). */
static void read_attrs(struct parser *ps, const char **href, size_t *hreflen)
{
	const char *p = ps->p, *end = ps->end;

	*href = NULL;
	*hreflen = 0;
	while (p < end) {
		const char *name, *val = NULL;
		size_t namelen, vallen = 0;

		while (p < end && (is_space(*p) || *p == '/'))
			p++;
		if (p == end)
			break;
		if (*p == '>') {
			p++;
			break;
		}
		name = p;
		while (p < end && !is_space(*p) && *p != '=' && *p != '>')
			p++;
		namelen = (size_t)(p - name);
		while (p < end && is_space(*p))
			p++;
		if (p < end && *p == '=') {
			p++;
			while (p < end && is_space(*p))
				p++;
			if (p < end && (*p == '"' || *p == '\'')) {
				const char *q = memchr(p + 1, *p,
						       (size_t)(end - p - 1));

				val = p + 1;
				vallen = (size_t)((q != NULL ? q : end) - val);
				p = q != NULL ? q + 1 : end;
			} else {
				val = p;
				while (p < end && !is_space(*p) && *p != '>')
					p++;
				vallen = (size_t)(p - val);
			}
		}
		if (namelen == 0 && val == NULL && p < end)
			p++; /* a stray byte such as '=': step over it */
		if (*href == NULL && val != NULL && namelen == 4 &&
		    starts_ci(name, name + 4, "href")) {
			*href = val;
			*hreflen = vallen;
		}
	}
	ps->p = p;
}

/* Moves past the link's text to just after its </a>; stops at the next
 * <a> tag instead when the link is not closed. */
static void skip_link_text(struct parser *ps)
{
	const char *p = ps->p, *end = ps->end;

	while (p < end) {
		const char *lt = memchr(p, '<', (size_t)(end - p));

		if (lt == NULL) {
			p = end;
			break;
		}
		if (at_anchor(lt, end)) {
			p = lt;
			break;
		}
		if (starts_ci(lt, end, "</a")) {
			const char *gt = memchr(lt, '>', (size_t)(end - lt));

			p = gt != NULL ? gt + 1 : end;
			break;
		}
		p = lt + 1;
	}
	ps->p = p;
}

static int add(struct parser *ps, const char *name, bool is_dir,
	       struct tree_index_entry **slot)
{
	struct tree_index_entry *e;

	if (ps->n == ps->cap) {
		uint32_t ncap = ps->cap == 0 ? 64 : ps->cap * 2;
		struct tree_index_entry *ne;

		if (ps->cap >= TREE_DIRINDEX_MAX) {
			return fs__errf(ps->err, ps->errlen, -E2BIG,
					"directory index: more than %u entries",
					TREE_DIRINDEX_MAX);
		}
		if (ncap > TREE_DIRINDEX_MAX)
			ncap = TREE_DIRINDEX_MAX;
		ne = realloc(ps->e, ncap * sizeof(*ne));
		if (ne == NULL)
			goto oom;
		ps->e = ne;
		ps->cap = ncap;
	}
	e = &ps->e[ps->n];
	memset(e, 0, sizeof(*e));
	e->name = strdup(name);
	if (e->name == NULL)
		goto oom;
	e->is_dir = is_dir;
	ps->n++;
	*slot = e;
	return 0;
oom:
	return fs__errf(ps->err, ps->errlen, -ENOMEM,
			"directory index: out of memory");
}

struct order {
	const char *name;
	uint32_t idx;
};

static int order_cmp(const void *a, const void *b)
{
	const struct order *x = a, *y = b;
	int c = strcmp(x->name, y->name);

	if (c != 0)
		return c;
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* Keeps the first of each name (Apache's IconsAreLinks links a name twice,
 * the icon's link without the columns): a later link of the same kind
 * fills in what the first lacked; one of the other kind is dropped. */
static int dedup(struct parser *ps)
{
	struct order *o;
	bool *drop;
	uint32_t w = 0;

	if (ps->n < 2)
		return 0;
	o = malloc(ps->n * sizeof(*o));
	drop = calloc(ps->n, sizeof(*drop));
	if (o == NULL || drop == NULL) {
		free(o);
		free(drop);
		return fs__errf(ps->err, ps->errlen, -ENOMEM,
				"directory index: out of memory");
	}
	for (uint32_t i = 0; i < ps->n; i++) {
		o[i].name = ps->e[i].name;
		o[i].idx = i;
	}
	qsort(o, ps->n, sizeof(*o), order_cmp);
	for (uint32_t i = 0, first = 0; i < ps->n; i++) {
		struct tree_index_entry *keep, *dup;

		if (i == 0 || strcmp(o[i].name, o[first].name) != 0) {
			first = i;
			continue;
		}
		keep = &ps->e[o[first].idx];
		dup = &ps->e[o[i].idx];
		drop[o[i].idx] = true;
		if (keep->is_dir != dup->is_dir)
			continue;
		if (!keep->has_size && dup->has_size) {
			keep->has_size = true;
			keep->size = dup->size;
		}
		if (!keep->has_mtime && dup->has_mtime) {
			keep->has_mtime = true;
			keep->mtime = dup->mtime;
		}
	}
	for (uint32_t i = 0; i < ps->n; i++) {
		if (drop[i])
			free(ps->e[i].name);
		else
			ps->e[w++] = ps->e[i];
	}
	ps->n = w;
	free(o);
	free(drop);
	return 0;
}

void tree_dirindex_free(struct tree_index_entry *e, uint32_t n)
{
	if (e == NULL)
		return;
	for (uint32_t i = 0; i < n; i++) {
		free(e[i].name);
		free(e[i].url);
		free(e[i].etag);
		free(e[i].identity);
	}
	free(e);
}

int tree_dirindex_parse(const char *html, size_t len,
			struct tree_index_entry **out, uint32_t *n, char *err,
			size_t errlen)
{
	struct parser ps = {
		.p = html, .end = html + len, .err = err, .errlen = errlen};
	char name[TREE_DIRINDEX_NAME_MAX + 1];
	int rc = 0;

	while (ps.p < ps.end) {
		const char *lt = memchr(ps.p, '<', (size_t)(ps.end - ps.p));
		const char *href;
		size_t hreflen;
		struct tree_index_entry *e = NULL;
		bool is_dir;

		if (lt == NULL)
			break;
		if (starts_ci(lt, ps.end, "<!--")) {
			const char *c = memmem(
				lt + 4, (size_t)(ps.end - lt - 4), "-->", 3);

			ps.p = c != NULL ? c + 3 : ps.end;
			continue;
		}
		if (!at_anchor(lt, ps.end)) {
			ps.p = lt + 1;
			continue;
		}
		ps.p = lt + 2;
		read_attrs(&ps, &href, &hreflen);
		if (href == NULL || !href_name(href, hreflen, name, &is_dir))
			continue;
		rc = add(&ps, name, is_dir, &e);
		if (rc != 0)
			goto out;
		skip_link_text(&ps);
		read_tail(&ps, e);
		if (e->is_dir)
			e->has_size = false;
	}
	rc = dedup(&ps);
out:
	if (rc != 0) {
		tree_dirindex_free(ps.e, ps.n);
		return rc;
	}
	if (ps.n == 0) {
		free(ps.e);
		ps.e = NULL;
	}
	*out = ps.e;
	*n = ps.n;
	return 0;
}

/* text: the one appender obs/'s documents are written with (the metrics'
 * text and JSON, the status document): printf-style pieces and escaped
 * strings, into a buffer that grows up to a limit or into a caller's
 * buffer of fixed size, remembering that a piece did not fit. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "fs/obs/obs_int.h"

/* Makes room for need more bytes and a NUL; false once it cannot. */
static bool room(struct obs_text *t, size_t need)
{
	size_t cap = t->cap * 2 + need;
	char *grown;

	if (t->failed || need < t->cap - t->len)
		return !t->failed;
	grown = cap <= t->limit ? realloc(t->p, cap) : NULL;
	if (grown == NULL) {
		t->failed = true;
		return false;
	}
	t->p = grown;
	t->cap = cap;
	return true;
}

void obs__text_add(struct obs_text *t, const char *fmt, ...)
{
	va_list ap;
	int n;

	do {
		if (t->failed)
			return;
		va_start(ap, fmt);
		n = vsnprintf(t->p + t->len, t->cap - t->len, fmt, ap);
		va_end(ap);
		if (n < 0)
			t->failed = true;
	} while (n >= 0 && (size_t)n >= t->cap - t->len && room(t, (size_t)n));
	if (!t->failed)
		t->len += (size_t)n;
}

void obs__text_add_escaped(struct obs_text *t, const char *s,
			   size_t (*esc)(const char *, char *, size_t))
{
	if (room(t, esc(s, NULL, 0)))
		t->len += esc(s, t->p + t->len, t->cap - t->len);
}

/* escape: what a server chose (names, ETags, reasons, keys), written so
 * that a terminal, a log reader or a JSON parser takes it for nothing
 * else; every room of fs/ shows such text, so it lives beside base.h. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "fs/base.h"

size_t fs__utf8_seq(const char *str, uint32_t *cp_out)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t n;
	uint32_t cp;

	if (s[0] < 0xc2 || s[0] > 0xf4)
		return 0; /* ASCII is no sequence; 0x80..0xc1 never lead */
	n = s[0] < 0xe0 ? 2 : s[0] < 0xf0 ? 3 : 4;
	cp = s[0] & (0x7f >> n);
	for (size_t i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0; /* the NUL terminator stops here too */
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) ||
	    (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
		return 0; /* overlong, surrogate, out of range */
	*cp_out = cp;
	return n;
}

/* The length of the well-formed UTF-8 sequence at s that is no C1
 * control, or 0. */
static size_t utf8_printable(const unsigned char *s)
{
	uint32_t cp;
	size_t n = fs__utf8_seq((const char *)s, &cp);

	return n > 0 && (cp < 0x80 || cp > 0x9f) ? n : 0;
}

char *fs__escape(const char *s, char *out, size_t cap)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *p = (const unsigned char *)s;
	size_t o = 0;

	while (*p != '\0') {
		size_t n = 1;

		if (*p >= 0x80)
			n = utf8_printable(p);
		if (n > 0 && (*p >= 0x80 || (*p >= 0x20 && *p != 0x7f))) {
			if (o + n >= cap)
				break;
			memcpy(out + o, p, n);
			o += n;
			p += n;
			continue;
		}
		if (o + 4 >= cap)
			break;
		out[o++] = '\\';
		out[o++] = 'x';
		out[o++] = hex[*p >> 4];
		out[o++] = hex[*p & 15];
		p++;
	}
	out[o] = '\0';
	return out;
}

size_t fs__json_escape(const char *s, char *out, size_t cap)
{
	size_t o = 0;

	while (*s != '\0') {
		unsigned char c = (unsigned char)*s;
		uint32_t cp = c;
		size_t n = c < 0x80 ? 1 : fs__utf8_seq(s, &cp);
		char esc[8];
		const char *w = esc;
		size_t wn;

		if (c == '"' || c == '\\') {
			wn = (size_t)snprintf(esc, sizeof(esc), "\\%c", c);
		} else if (n == 0) {
			wn = (size_t)snprintf(esc, sizeof(esc), "\\ufffd");
			n = 1;
		} else if (cp < 0x20 || (cp >= 0x7f && cp <= 0x9f)) {
			wn = (size_t)snprintf(esc, sizeof(esc), "\\u%04x",
					      (unsigned)cp);
		} else {
			w = s;
			wn = n;
		}
		/* Whole escapes and sequences only: a cut one would not
		 * parse. */
		if (o + wn < cap)
			memcpy(out + o, w, wn);
		else if (o < cap)
			cap = o + 1; /* full: nothing more is written */
		o += wn;
		s += n;
	}
	if (cap > 0)
		out[o < cap ? o : cap - 1] = '\0';
	return o;
}

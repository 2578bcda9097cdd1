/* decode: what URLs and digests spell in ASCII, read back into bytes:
 * percent-escapes and hex digits, each decoded by one function that every
 * room of fs/ calls with its own rules. */
#include <errno.h>
#include <stdint.h>

#include "fs/base.h"

int fs__pct_decode(const char *s, size_t len, unsigned flags, char *out,
		   size_t cap, size_t *outlen)
{
	size_t n = 0;

	for (size_t i = 0; i < len; i++) {
		char ch = s[i];

		if (ch == '%' && i + 2 < len && fs__hexval(s[i + 1]) >= 0 &&
		    fs__hexval(s[i + 2]) >= 0) {
			ch = (char)(fs__hexval(s[i + 1]) * 16 +
				    fs__hexval(s[i + 2]));
			i += 2;
		} else if (ch == '+' && (flags & FS_PCT_PLUS)) {
			ch = ' ';
		}
		if (ch == '\0')
			return -EINVAL;
		if (n + 1 >= cap)
			return -ENAMETOOLONG;
		out[n++] = ch;
	}
	out[n] = '\0';
	*outlen = n;
	return 0;
}

int fs__unhex(const char *s, size_t len, uint8_t *out, size_t n, size_t *at)
{
	if (len != 2 * n)
		return -EINVAL;
	for (size_t i = 0; i < len; i++)
		if (fs__hexval(s[i]) < 0) {
			*at = i;
			return -EILSEQ;
		}
	for (size_t i = 0; i < n; i++)
		out[i] = (uint8_t)(fs__hexval(s[2 * i]) * 16 +
				   fs__hexval(s[2 * i + 1]));
	return 0;
}

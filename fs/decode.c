/* decode: what URLs spell in ASCII, read back into bytes: percent-escapes,
 * decoded by one function that every room of fs/ calls with its own
 * rules. */
#include <errno.h>

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

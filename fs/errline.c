/* errline: the one way a function of fs/ writes the error line its
 * caller shows: fetch/'s (fetch_text_errf), so that every room's errors,
 * fetch/'s included, survive a long URL the same way. */
#include <stdarg.h>

#include "fetch/fetch.h"
#include "fs/base.h"

int fs__errf(char *err, size_t errlen, int rc, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	rc = fetch_text_verrf(err, errlen, rc, fmt, ap);
	va_end(ap);
	return rc;
}

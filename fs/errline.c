/* errline: the one way a function of fs/ writes the error line its
 * caller shows, cut as fetch/ cuts its lines, so that every room's
 * errors survive a long URL the same way. */
#include <stdarg.h>

#include "fetch/fetch.h"
#include "fs/base.h"

int fs__errf(char *err, size_t errlen, int rc, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fetch_text_vformat(err, errlen, fmt, ap);
	va_end(ap);
	return rc;
}

/* fuzz_headers: the header-file parser (-o header_file=): every accepted
 * header passes the same check as -o header=, none sets a header pacefs
 * owns, and an error is one line that never quotes a value. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fs/auth/auth.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char **h = NULL, err[256] = "";
	unsigned n = 0;

	if (auth_headers_parse((const char *)data, size, &h, &n, err,
			       sizeof(err)) != 0) {
		if (err[0] == '\0' || strchr(err, '\n') != NULL)
			abort();
		return 0;
	}
	if (n > AUTH_HEADERS_MAX)
		abort();
	for (unsigned i = 0; i < n; i++)
		if (auth_header_check(h[i], strlen(h[i])) != 0 ||
		    auth_header_owned(h[i], strlen(h[i])) != NULL ||
		    strpbrk(h[i], "\r\n") != NULL)
			abort();
	auth_headers_free(h, n);
	return 0;
}

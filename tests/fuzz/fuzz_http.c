/* fuzz_http: the Content-Range, Content-Length, Retry-After and coding
 * parsers on any header value; an accepted Content-Range must describe a
 * possible range, an accepted Content-Length a file's size, and a value
 * said to be identity must hold no other coding. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "fetch/fetch.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *v = malloc(size + 1);
	uint64_t start, end, total, ms, len;
	int rc;

	if (v == NULL)
		return 0;
	memcpy(v, data, size);
	v[size] = '\0';
	if (fetch_parse_content_range(v, &start, &end, &total) == 0) {
		if (start != UINT64_MAX &&
		    (end < start || (total != UINT64_MAX && end >= total)))
			abort();
		if (start == UINT64_MAX &&
		    (end != UINT64_MAX || total == UINT64_MAX))
			abort();
	}
	fetch_parse_retry_after(v, 1764460080, &ms);
	rc = fetch_parse_content_length(v, &len);
	if ((rc == 0 && len > FETCH_SIZE_MAX) ||
	    (rc == -EFBIG && len <= FETCH_SIZE_MAX) ||
	    (rc != 0 && rc != -EFBIG && rc != -EINVAL))
		abort();
	for (int transfer = 0; transfer < 2; transfer++) {
		if (!fetch_coding_is_identity(v, transfer))
			continue;
		/* Only identity, chunked (transfer), separators and a line
		 * end may be there. */
		for (const char *p = v; *p && *p != '\r' && *p != '\n';) {
			size_t n = strcspn(p, " \t,\r\n");

			if (n == 0) {
				p++;
				continue;
			}
			if (!(n == 8 && strncasecmp(p, "identity", 8) == 0) &&
			    !(transfer && n == 7 &&
			      strncasecmp(p, "chunked", 7) == 0))
				abort();
			p += n;
		}
	}
	free(v);
	return 0;
}

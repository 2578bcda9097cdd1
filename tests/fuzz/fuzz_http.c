/* fuzz_http: the Content-Range and Retry-After parsers on any header
 * value; an accepted Content-Range must describe a possible range. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fetch/fetch.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *v = malloc(size + 1);
	uint64_t start, end, total, ms;

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
	free(v);
	return 0;
}

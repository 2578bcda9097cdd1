/* fuzz_s3xml: the ListObjectsV2 and S3 error readers (libxml2): an
 * accepted page has a key for every item, a token when it says it is
 * truncated, and an error is one line; a document with a DTD (where
 * entities are declared) is never accepted. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fs/tree/parse_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tree_s3_page p;
	char err[256] = "", code[64], msg[256], region[64];
	bool dtd = memmem(data, size, "<!DOCTYPE", 9) != NULL;

	if (tree__s3_page_parse((const char *)data, size, &p, err,
				sizeof(err)) != 0) {
		if (err[0] == '\0' || strchr(err, '\n') != NULL)
			abort();
	} else {
		if (dtd || (p.truncated && p.next_token == NULL))
			abort();
		for (uint32_t i = 0; i < p.n; i++)
			if (p.items[i].key == NULL ||
			    (p.items[i].is_prefix && p.items[i].etag != NULL) ||
			    p.items[i].size > (uint64_t)INT64_MAX)
				abort();
		tree__s3_page_free(&p);
	}
	if (tree__s3_error_parse((const char *)data, size, code, sizeof(code),
				 msg, sizeof(msg), region,
				 sizeof(region)) == 0 &&
	    (dtd || strlen(code) >= sizeof(code) ||
	     strlen(region) >= sizeof(region)))
		abort();
	return 0;
}

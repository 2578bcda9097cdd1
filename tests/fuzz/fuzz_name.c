/* fuzz_name: the file name derived from a URL and the -o name= check; the
 * first input byte picks the output capacity, the rest is the string. */
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fs/fs.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[256], *v, *out;
	size_t cap;

	if (size < 1)
		return 0;
	cap = (size_t)data[0] + 1; /* 1..256, NAME_MAX + 1 included */
	v = malloc(size);
	out = malloc(cap);
	if (v == NULL || out == NULL)
		goto out;
	memcpy(v, data + 1, size - 1);
	v[size - 1] = '\0';
	if (fs_name_from_url(v, out, cap, err, sizeof(err)) == 0) {
		size_t len = strnlen(out, cap);

		if (len == 0 || len >= cap || strchr(out, '/') != NULL ||
		    strcmp(out, ".") == 0 || strcmp(out, "..") == 0)
			abort();
	}
	if (fs_name_check(v, err, sizeof(err)) == 0) {
		if (v[0] == '\0' || strchr(v, '/') != NULL ||
		    strlen(v) > NAME_MAX)
			abort();
	}
out:
	free(v);
	free(out);
	return 0;
}

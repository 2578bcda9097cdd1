/* fuzz_dirindex: tree_dirindex_parse on any bytes; every entry it returns
 * must be a usable, unique file name. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fs/tree/tree.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tree_index_entry *e = NULL;
	uint32_t n = 0;
	char err[256];

	if (tree_dirindex_parse((const char *)data, size, &e, &n, err,
				sizeof(err)) != 0)
		abort(); /* only resource exhaustion may fail */
	for (uint32_t i = 0; i < n; i++) {
		size_t len = strlen(e[i].name);

		if (len == 0 || len > TREE_DIRINDEX_NAME_MAX ||
		    strchr(e[i].name, '/') != NULL ||
		    strcmp(e[i].name, ".") == 0 ||
		    strcmp(e[i].name, "..") == 0 ||
		    (e[i].is_dir && e[i].has_size) ||
		    (e[i].has_size && e[i].size > (uint64_t)INT64_MAX))
			abort();
		for (uint32_t j = 0; j < i; j++)
			if (strcmp(e[i].name, e[j].name) == 0)
				abort();
	}
	tree_dirindex_free(e, n);
	return 0;
}

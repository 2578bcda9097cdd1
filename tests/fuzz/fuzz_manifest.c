/* fuzz_manifest: tree_manifest_parse on any bytes; a manifest it accepts
 * must keep every promise fs/tree/tree.h makes about it. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "fs/tree/tree.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_entry(const struct tree_manifest_entry *e)
{
	size_t len = strlen(e->path);

	if (len == 0 || len > TREE_MANIFEST_PATH_MAX || e->path[0] == '/' ||
	    e->path[len - 1] == '/' || strstr(e->path, "//") != NULL)
		abort();
	if (e->nurls == 0 || e->nurls > TREE_MANIFEST_URLS_MAX)
		abort();
	for (uint32_t i = 0; i < e->nurls; i++)
		if (strncasecmp(e->urls[i], "http", 4) != 0)
			abort();
	if (e->has_mode && (e->mode & ~07777u) != 0)
		abort();
	if (e->block_sha256 != NULL &&
	    (e->block_size == 0 || !e->has_size ||
	     e->nblocks != (e->size + e->block_size - 1) / e->block_size))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tree_manifest m;
	char err[256];

	if (tree_manifest_parse((const char *)data, size, &m, err,
				sizeof(err)) != 0) {
		if (strlen(err) == 0 || strchr(err, '\n') != NULL)
			abort();
		return 0;
	}
	if (m.nfiles == 0)
		abort();
	for (uint32_t i = 0; i < m.nfiles; i++)
		check_entry(&m.files[i]);
	tree_manifest_free(&m);
	return 0;
}

/* fuzz_manifest: tree_manifest_parse on any bytes; a manifest it accepts
 * must keep every promise fs/tree/tree.h makes about it, and the
 * entry-at-a-time parse must agree with the whole-document one: accept
 * what it accepts, with the same entries, and nothing else. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "fs/tree/parse_int.h"
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

static bool same_str(const char *a, const char *b)
{
	return strcmp(a, b) == 0;
}

/* Entry a of the streaming parse equals entry b of the whole one. */
static void check_same(const struct tree_manifest_entry *a,
		       const struct tree_manifest_entry *b)
{
	if (!same_str(a->path, b->path) || a->nurls != b->nurls ||
	    a->has_size != b->has_size || a->size != b->size ||
	    a->has_sha256 != b->has_sha256 ||
	    memcmp(a->sha256, b->sha256, sizeof(a->sha256)) != 0 ||
	    a->block_size != b->block_size || a->nblocks != b->nblocks ||
	    a->has_mode != b->has_mode || a->mode != b->mode ||
	    a->has_mtime != b->has_mtime || a->mtime != b->mtime ||
	    a->nregions != b->nregions ||
	    (a->nregions > 0 &&
	     memcmp(a->regions, b->regions,
		    (size_t)a->nregions * sizeof(a->regions[0])) != 0))
		abort();
	for (uint32_t i = 0; i < a->nurls; i++)
		if (!same_str(a->urls[i], b->urls[i]))
			abort();
	if ((a->block_sha256 == NULL) != (b->block_sha256 == NULL) ||
	    (a->block_sha256 != NULL && memcmp(a->block_sha256, b->block_sha256,
					       (size_t)a->nblocks * 32) != 0))
		abort();
}

/* Whatever the streaming parse accepts, the whole-document parse accepts
 * with the same entries; whatever it rejects naming an error (the line a
 * large manifest's mount shows), the whole parse rejects too. */
static void check_paths_agree(const uint8_t *data, size_t size)
{
	struct tree_manifest s = {0}, w;
	char err[256];
	int rs = tree__manifest_stream((const char *)data, size, false, &s, err,
				       sizeof(err));

	if (rs == 0) {
		if (tree__manifest_parse_whole((const char *)data, size, &w,
					       err, sizeof(err)) != 0 ||
		    w.nfiles != s.nfiles)
			abort();
		for (uint32_t i = 0; i < s.nfiles; i++)
			check_same(&s.files[i], &w.files[i]);
		tree_manifest_free(&w);
	} else if (rs == 1 && err[0] != '\0') {
		if (strchr(err, '\n') != NULL ||
		    tree__manifest_parse_whole((const char *)data, size, &w,
					       err, sizeof(err)) == 0)
			abort();
	}
	tree_manifest_free(&s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tree_manifest m;
	char err[256];

	check_paths_agree(data, size);

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

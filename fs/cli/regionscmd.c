/* regionscmd: `pacefs cache regions [clear BLOB...|--all]`: the regions
 * the cache remembers (the byte ranges each file's first reader needed
 * at open), listed, or forgotten. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache/cache.h"
#include "fetch/fetch.h"
#include "fs/cli/cli_int.h"

#define ID_SHOWN 12 /* hex digits of an id shown, as ls shows them */

/* One blob's line and its regions'. Returns 0, or 1 when they cannot be
 * read. */
static int list_one(struct cache *c, const struct cache_id *id,
		    struct cache_regions *rg, struct cache_blob_record *rec)
{
	char hex[2 * CACHE_ID_LEN + 1], sz[32];
	uint64_t bytes = 0;
	const char *ident = "(no record: its bytes were evicted)";

	cache_id_to_hex(id, hex);
	if (cache_regions_get(c, id, rg) != 0)
		return 1;
	if (cache_blob_get(c, id, rec) == 0 && rec->identity[0] != '\0') {
		/* Credentials never shown; a URL as ls shows it. */
		char *nl = strchr(rec->identity, '\n');

		if (nl != NULL)
			*nl = '\0';
		fetch_text_redact(rec->identity);
		ident = strncmp(rec->identity, "url:", 4) == 0
				? rec->identity + 4
				: rec->identity;
	}
	for (size_t i = 0; i < rg->n; i++)
		bytes += rg->r[i].end - rg->r[i].start;
	printf("%-*.*s %7zu %10s  %-20s %s\n", ID_SHOWN, ID_SHOWN, hex, rg->n,
	       cli__human_size(bytes, sz, sizeof(sz)),
	       rg->validator[0] != '\0' ? rg->validator : "-", ident);
	for (size_t i = 0; i < rg->n; i++)
		printf("%*s %" PRIu64 "-%" PRIu64 "\n", ID_SHOWN, "",
		       rg->r[i].start, rg->r[i].end - 1);
	return 0;
}

static int list(struct cache *c)
{
	struct cache_id *ids = NULL;
	struct cache_regions *rg = malloc(sizeof(*rg));
	struct cache_blob_record *rec = malloc(sizeof(*rec));
	size_t n = 0;
	int rc, status = 0;

	rc = rg != NULL && rec != NULL ? cache_regions_ids(c, &ids, &n)
				       : -ENOMEM;
	if (rc != 0) {
		fprintf(stderr, "pacefs: cache: regions: %s\n", strerror(-rc));
		free(rg);
		free(rec);
		return 1;
	}
	printf("%-*s %7s %10s  %-20s %s\n", ID_SHOWN, "ID", "REGIONS", "BYTES",
	       "VALIDATOR", "IDENTITY");
	for (size_t i = 0; i < n; i++)
		status |= list_one(c, &ids[i], rg, rec);
	free(ids);
	free(rg);
	free(rec);
	return status;
}

static int clear(struct cache *c, char **args, int nargs)
{
	struct cache_id *ids = NULL;
	size_t n = 0;
	bool all = nargs == 1 && strcmp(args[0], "--all") == 0;
	int rc, status = 0;

	if (nargs == 0 || (!all && strcmp(args[0], "--all") == 0)) {
		fprintf(stderr, "pacefs: cache: usage: pacefs cache regions "
				"clear BLOB...|--all\n");
		return 2;
	}
	rc = cache_regions_ids(c, &ids, &n);
	if (rc != 0) {
		fprintf(stderr, "pacefs: cache: regions: %s\n", strerror(-rc));
		return 1;
	}
	for (size_t i = 0; all && i < n; i++)
		status |= cache_regions_drop(c, &ids[i]) != 0;
	if (all)
		printf("forgot the regions of %zu blobs\n", n);
	for (int i = 0; !all && i < nargs; i++) {
		struct cache_id id;

		if (cli__cache_resolve(ids, n, args[i], &id) != 0) {
			status = 1;
			continue;
		}
		rc = cache_regions_drop(c, &id);
		fetch_text_redact(args[i]);
		if (rc != 0) {
			fprintf(stderr, "pacefs: cache: regions clear %s: %s\n",
				args[i], strerror(-rc));
			status = 1;
		} else {
			printf("forgot the regions of %s\n", args[i]);
		}
	}
	free(ids);
	return status;
}

int cli__cache_regions(struct cache *c, char **args, int nargs)
{
	if (nargs == 0)
		return list(c);
	if (strcmp(args[0], "clear") == 0)
		return clear(c, args + 1, nargs - 1);
	fprintf(stderr,
		"pacefs: cache: regions: unexpected argument '%s' (clear "
		"BLOB...|--all forgets them)\n",
		args[0]);
	return 2;
}

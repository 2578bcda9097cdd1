/* regions: the byte ranges a file's first reader needed at open (headers,
 * indexes, footers, interior pages), recorded once and remembered in the
 * cache beside the blob, and asked together, one wait each on the lanes,
 * when a later open finds them not held: the reads that follow find them
 * arriving instead of paying a round trip each. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fs/engine/engine_int.h"

int engine_blob_regions(struct engine *e, uint32_t i,
			const struct cache_region *r, size_t n)
{
	struct engine_blob *b = &e->blobs[i];
	struct cache_regions *rg;
	size_t k = 0;

	if (n > CACHE_REGIONS_MAX)
		n = CACHE_REGIONS_MAX;
	rg = calloc(1, sizeof(*rg));
	if (rg == NULL)
		return -ENOMEM;
	for (size_t j = 0; j < n; j++) {
		uint64_t s = r[j].start, t = r[j].end;

		if (t > b->size)
			t = b->size;
		if (s < t)
			rg->r[k++] = (struct cache_region){s, t};
	}
	rg->n = k;
	pthread_mutex_lock(&e->mu);
	if (b->state == ENGINE_BLOB_ADDED && b->regions.rg == NULL && k > 0) {
		b->regions.rg = rg;
		b->regions.from_manifest = true;
		rg = NULL;
	}
	pthread_mutex_unlock(&e->mu);
	free(rg);
	return 0;
}

void engine__regions_load(struct engine *e, uint32_t i, const char *validator,
			  struct cache_regions **out)
{
	const struct engine_blob *b = &e->blobs[i];
	struct cache_regions *rg = malloc(sizeof(*rg));
	size_t k = 0;

	*out = NULL;
	if (rg == NULL || cache_regions_get(e->cache, &b->id, rg) != 0) {
		free(rg);
		return;
	}
	if (strcmp(rg->validator, validator != NULL ? validator : "") != 0) {
		engine__log(e, FS_LOG_INFO,
			    "%s: its remembered regions were recorded under "
			    "validator '%s', not '%s': dropped",
			    b->name, rg->validator,
			    validator != NULL ? validator : "");
		cache_regions_drop(e->cache, &b->id);
		free(rg);
		return;
	}
	/* A hint, checked no further than the blob's size. */
	for (size_t j = 0; j < rg->n; j++)
		if (rg->r[j].start < b->size)
			rg->r[k++] = (struct cache_region){
				rg->r[j].start, rg->r[j].end < b->size
							? rg->r[j].end
							: b->size};
	rg->n = k;
	if (k == 0) {
		free(rg);
		return;
	}
	*out = rg;
}

void engine__regions_install(struct engine *e, uint32_t i,
			     struct cache_regions *rg)
{
	struct engine_regions *r = &e->blobs[i].regions;

	if (rg != NULL) {
		free(r->rg);
		r->rg = rg;
		r->from_manifest = false;
	}
	r->state = r->rg != NULL ? ENGINE_REGIONS_KNOWN : ENGINE_REGIONS_NONE;
}

bool engine__regions_open(struct engine *e, uint32_t b, uint32_t reader,
			  uint64_t now)
{
	struct engine_blob *blob = &e->blobs[b];
	struct engine_regions *r = &blob->regions;
	uint64_t bytes = 0;
	uint32_t asked = 0, w;

	if (blob->state == ENGINE_BLOB_ADDED)
		return false; /* its regions come when it is ready */
	if (r->state == ENGINE_REGIONS_NONE) {
		if (blob->size < ENGINE_REGIONS_MIN_SIZE)
			return false;
		if (r->rg == NULL)
			r->rg = calloc(1, sizeof(*r->rg));
		if (r->rg == NULL)
			return false;
		r->rg->n = 0;
		r->began_ns = now;
		r->reads = 0;
		r->bytes = 0;
		r->state = ENGINE_REGIONS_RECORDING;
		return false;
	}
	if (r->state != ENGINE_REGIONS_KNOWN)
		return false;
	for (size_t j = 0; j < r->rg->n; j++) {
		const struct cache_region *g = &r->rg->r[j];

		if (e->nprefetch == ENGINE_PREFETCH_MAX)
			break;
		if (pace_is_held(e->pace, b, g->start, g->end))
			continue;
		if (pace_wait_begin(e->pace, reader, g->start,
				    g->end - g->start, now, &w) != 0)
			break;
		e->prefetch[e->nprefetch++] = w;
		asked++;
		bytes += g->end - g->start;
	}
	if (asked == 0)
		return false;
	engine__log(e, FS_LOG_DEBUG,
		    "%s: opened with %" PRIu32 " of its %zu remembered regions "
		    "(%" PRIu64 " bytes) not held: asked together",
		    blob->name, asked, r->rg->n, bytes);
	return true;
}

/* Adds [off, end) to the record, merged with a region it overlaps or
 * comes within a cache block of. false when the record is full. */
static bool record_add(struct engine_regions *r, uint64_t off, uint64_t end)
{
	struct cache_regions *rg = r->rg;
	size_t j, k;

	for (j = 0; j < rg->n; j++) {
		struct cache_region *g = &rg->r[j];

		if (off <= g->end + CACHE_BLOCK_SIZE &&
		    g->start <= end + CACHE_BLOCK_SIZE)
			break;
	}
	if (j == rg->n) {
		if (rg->n == CACHE_REGIONS_MAX ||
		    r->bytes + (end - off) > ENGINE_REGIONS_BYTES)
			return false;
		rg->r[rg->n++] = (struct cache_region){off, end};
		r->bytes += end - off;
		return true;
	}
	{
		struct cache_region *g = &rg->r[j];
		uint64_t s = off < g->start ? off : g->start;
		uint64_t t = end > g->end ? end : g->end;

		if (r->bytes - (g->end - g->start) + (t - s) >
		    ENGINE_REGIONS_BYTES)
			return false;
		r->bytes += (t - s) - (g->end - g->start);
		*g = (struct cache_region){s, t};
	}
	/* The grown region may now reach others: fold them in. */
	for (k = 0; k < rg->n; k++) {
		struct cache_region *g = &rg->r[j], *h = &rg->r[k];

		if (k == j || h->start > g->end + CACHE_BLOCK_SIZE ||
		    g->start > h->end + CACHE_BLOCK_SIZE)
			continue;
		r->bytes -= (g->end - g->start) + (h->end - h->start);
		g->start = g->start < h->start ? g->start : h->start;
		g->end = g->end > h->end ? g->end : h->end;
		r->bytes += g->end - g->start;
		rg->r[k] = rg->r[--rg->n];
		if (j == rg->n)
			j = k;
		k = (size_t)-1; /* again from the start */
	}
	return true;
}

bool engine__regions_read(struct engine *e, uint32_t b, uint64_t off,
			  uint64_t end, uint64_t now)
{
	struct engine_regions *r = &e->blobs[b].regions;

	if (r->state != ENGINE_REGIONS_RECORDING)
		return false;
	if (now - r->began_ns <= ENGINE_REGIONS_WINDOW_NS &&
	    r->reads < ENGINE_REGIONS_READS && record_add(r, off, end)) {
		r->reads++;
		return false;
	}
	r->state = ENGINE_REGIONS_SAVING;
	return true;
}

bool engine__regions_close(struct engine *e, uint32_t b)
{
	struct engine_regions *r = &e->blobs[b].regions;

	if (r->state != ENGINE_REGIONS_RECORDING)
		return false;
	r->state = ENGINE_REGIONS_SAVING;
	return true;
}

static int region_cmp(const void *a, const void *b)
{
	const struct cache_region *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

void engine__regions_save(struct engine *e, uint32_t b)
{
	struct engine_blob *blob = &e->blobs[b];
	struct cache_regions *rg = malloc(sizeof(*rg));
	const char *v;
	bool save = false;
	int rc;

	if (rg == NULL)
		return;
	pthread_mutex_lock(&e->mu);
	if (blob->regions.state == ENGINE_REGIONS_SAVING) {
		/* One region is a sequential reader's, or one round trip
		 * anyway: nothing to save, and nothing to ask at open. */
		save = blob->regions.rg->n >= 2;
		if (save)
			*rg = *blob->regions.rg;
		else
			blob->regions.rg->n = 0;
		blob->regions.state = ENGINE_REGIONS_KNOWN;
	}
	pthread_mutex_unlock(&e->mu);
	if (!save) {
		free(rg);
		return;
	}
	/* Sources are set once, when the blob became ready: no lock. */
	v = blob->nsources > 0 ? blob->sources[0].validator : NULL;
	snprintf(rg->validator, sizeof(rg->validator), "%s",
		 v != NULL ? v : "");
	qsort(rg->r, rg->n, sizeof(rg->r[0]), region_cmp);
	rc = cache_regions_put(e->cache, &blob->id, rg);
	if (rc != 0)
		engine__log(e, FS_LOG_WARN,
			    "%s: its regions could not be remembered: %s",
			    blob->name, strerror(-rc));
	else
		engine__log(e, FS_LOG_DEBUG,
			    "%s: remembered %zu regions read at open",
			    blob->name, rg->n);
	free(rg);
}

void engine__regions_sweep(struct engine *e, uint64_t now)
{
	uint32_t k = 0;

	for (uint32_t j = 0; j < e->nprefetch; j++) {
		uint32_t w = e->prefetch[j];

		if (pace_wait_state(e->pace, w, now) == -EINPROGRESS)
			e->prefetch[k++] = w;
		else
			pace_wait_end(e->pace, w);
	}
	e->nprefetch = k;
}

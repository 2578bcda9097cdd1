/* blobs: the engine's registry of files: each blob's sources, digests and
 * which of its units passed their block digests, and the bytes the cache
 * holds of it when it becomes ready. */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "fs/engine/engine_int.h"

int engine_blob_add(struct engine *e, const char *name, uint64_t size,
		    const struct cache_id *id, uint32_t *out)
{
	struct engine_blob *b;
	uint32_t pace_id;
	int rc;

	pthread_mutex_lock(&e->mu);
	rc = e->nblobs < e->max_blobs ? 0 : -ENOSPC;
	if (rc == 0)
		rc = pace_blob_add(e->pace, size, &pace_id);
	if (rc != 0)
		goto out;
	/* Engine code indexes e->blobs by the scheduler's blob id. */
	if (pace_id != e->nblobs) {
		rc = -EINVAL;
		goto out;
	}
	b = &e->blobs[pace_id];
	b->name = strdup(name);
	if (b->name == NULL) {
		rc = -ENOMEM;
		goto out;
	}
	b->size = size;
	b->id = *id;
	e->nblobs++;
	*out = pace_id;
out:
	pthread_mutex_unlock(&e->mu);
	return rc;
}

int engine_blob_digests(struct engine *e, uint32_t i, const uint8_t *sha256,
			uint32_t dblock, const uint8_t (*dblocks)[32],
			uint32_t n)
{
	struct engine_blob *b = &e->blobs[i];
	uint64_t unit, nunits;
	uint64_t *checked = NULL;
	uint32_t *src = NULL;
	int *proxy = NULL;
	int rc = 0;

	/* Every byte must have its digest: bytes no digest covers would
	 * pass unchecked, and be stored under a content identity. */
	if (n > 0 && (dblock == 0 || (b->size + dblock - 1) / dblock != n)) {
		engine__log(e, FS_LOG_ERR,
			    "%s: %" PRIu32 " block digests of %" PRIu32
			    " bytes do not cover its %" PRIu64 " bytes",
			    b->name, n, dblock, b->size);
		return -EINVAL;
	}
	if (n > 0) {
		unit = dblock > CACHE_BLOCK_SIZE ? dblock : CACHE_BLOCK_SIZE;
		nunits = (b->size + unit - 1) / unit;
		checked = calloc((nunits + 63) / 64, sizeof(*checked));
		src = malloc(nunits * sizeof(*src));
		proxy = malloc(nunits * sizeof(*proxy));
		rc = checked != NULL && src != NULL && proxy != NULL ? 0
								     : -ENOMEM;
		if (rc == 0)
			rc = cache_blob_digests_set(e->cache, &b->id, b->size,
						    dblock, dblocks, n);
		if (rc != 0) {
			engine__log(e, FS_LOG_ERR,
				    "%s: cannot register its block digests: %s",
				    b->name, strerror(-rc));
			free(checked);
			free(src);
			free(proxy);
			return rc;
		}
		for (uint64_t u = 0; u < nunits; u++) {
			src[u] = PACE_NONE;
			proxy[u] = ENGINE_PROXY_UNSET;
		}
	}
	pthread_mutex_lock(&e->mu);
	if (sha256 != NULL) {
		b->has_sha256 = true;
		memcpy(b->sha256, sha256, sizeof(b->sha256));
	}
	if (n > 0 && b->unit == 0) {
		b->unit = unit;
		b->nunits = nunits;
		b->checked = checked;
		b->unit_src = src;
		b->unit_proxy = proxy;
		checked = NULL;
		src = NULL;
		proxy = NULL;
	}
	pthread_mutex_unlock(&e->mu);
	free(checked);
	free(src);
	free(proxy);
	return rc;
}

/* The held extents of a blob, read from the cache without the engine's
 * lock and applied under it. */
struct extents {
	uint64_t (*v)[2];
	size_t n, cap;
};

static int extent_add(void *arg, uint64_t start, uint64_t end)
{
	struct extents *x = arg;

	if (x->n == x->cap) {
		size_t cap = x->cap ? 2 * x->cap : 64;
		uint64_t(*v)[2] = realloc(x->v, cap * sizeof(*v));

		if (v == NULL)
			return -ENOMEM;
		x->v = v;
		x->cap = cap;
	}
	x->v[x->n][0] = start;
	x->v[x->n][1] = end;
	x->n++;
	return 0;
}

/* Resume: what the cache holds is never requested again, and a unit it
 * holds whole is counted as checked (it passed its digests when it was
 * stored, or came from a mount that had none: the whole-blob digest, if
 * any, checks it). Caller holds e->mu. */
static int extents_apply(struct engine *e, uint32_t i, const struct extents *x)
{
	struct engine_blob *b = &e->blobs[i];
	int rc = 0;

	for (size_t k = 0; k < x->n && rc == 0; k++) {
		uint64_t s = x->v[k][0], t = x->v[k][1];

		rc = pace_blob_held(e->pace, i, s, t);
		if (rc != 0 || b->unit == 0)
			continue;
		/* A unit held in part came, in part, from who knows where:
		 * a mismatch there blames no source. */
		if (s % b->unit != 0) {
			b->unit_src[s / b->unit] = ENGINE_SRC_MIXED;
			b->unit_proxy[s / b->unit] = ENGINE_PROXY_MIXED;
		}
		if (t % b->unit != 0 && t != b->size) {
			b->unit_src[t / b->unit] = ENGINE_SRC_MIXED;
			b->unit_proxy[t / b->unit] = ENGINE_PROXY_MIXED;
		}
		s = (s + b->unit - 1) / b->unit * b->unit;
		t = t == b->size ? t : t / b->unit * b->unit;
		if (s < t)
			engine__blob_set_checked(b, s, t, true);
	}
	return rc;
}

/* Puts scheduler source `id` in the group of url's origin (a new one
 * for an origin not seen yet, none once ENGINE_ORIGINS_MAX are known). Caller
 * holds e->mu. */
static int group_by_origin(struct engine *e, uint32_t id, const char *url)
{
	char *origin = NULL;
	uint32_t g;
	int rc;

	if (fetch_url_origin(url, &origin) != 0)
		return 0; /* no origin to share: a group of its own */
	for (g = 0; g < e->norigins; g++)
		if (strcmp(e->origins[g], origin) == 0)
			break;
	if (g == e->norigins) {
		if (g == ENGINE_ORIGINS_MAX) {
			free(origin);
			return 0;
		}
		e->origins[e->norigins++] = origin;
		origin = NULL;
	}
	free(origin);
	rc = pace_source_set_group(e->pace, id, g);
	return rc;
}

int engine_blob_ready(struct engine *e, uint32_t i,
		      struct engine_source *sources, uint32_t n,
		      uint64_t queued)
{
	struct engine_blob *b = &e->blobs[i];
	struct extents x = {0};
	struct cache_regions *rg = NULL;
	bool verify = false;
	int rc;

	if (engine_blob_is_ready(e, i))
		return 0;
	engine__regions_load(e, i, n > 0 ? sources[0].validator : NULL, &rg);
	/* Slow (a read transaction over the blob's extents): without the
	 * lock. Only the probing thread readies a blob (driver__file_ready). */
	rc = cache_extents_each(e->cache, &b->id, extent_add, &x);
	if (rc == 0 && queued > 0)
		rc = extent_add(&x, 0, queued < b->size ? queued : b->size);
	if (rc != 0)
		goto out_free;
	pthread_mutex_lock(&e->mu);
	if (b->state != ENGINE_BLOB_ADDED)
		goto out;
	b->sources = calloc(n ? n : 1, sizeof(*b->sources));
	if (b->sources == NULL) {
		rc = -ENOMEM;
		goto out;
	}
	for (uint32_t j = 0; j < n; j++) {
		struct engine_source *s = &b->sources[j];
		enum pace_caps caps = sources[j].stream ? PACE_CAPS_NO_RANGES
				      : sources[j].validator != NULL
					      ? PACE_CAPS_FULL
					      : PACE_CAPS_NO_VALIDATOR;

		rc = pace_source_add(e->pace, i, caps, &s->pace_id);
		if (rc == 0 && s->pace_id >= e->nsource_map)
			rc = -ENOSPC;
		if (rc == 0)
			rc = group_by_origin(e, s->pace_id, sources[j].url);
		/* Several proxies: a lane that stalls is its proxy's
		 * fault, and its range goes by another. */
		if (rc == 0 && fetch_proxies_count(e->proxies) > 1)
			rc = pace_source_set_routed(e->pace, s->pace_id);
		if (rc != 0)
			goto out;
		s->url = sources[j].url;
		s->validator = sources[j].validator;
		s->if_match = sources[j].if_match;
		s->stream = sources[j].stream;
		sources[j].url = NULL;
		sources[j].validator = NULL;
		e->source_of_pace[s->pace_id] = i;
		b->nsources++;
	}
	rc = extents_apply(e, i, &x);
	if (rc == 0) {
		engine__regions_install(e, i, rg);
		rg = NULL;
	}
	if (rc == 0 && engine__blob_set(e, i, ENGINE_BLOB_READY))
		verify = engine__verify_due(e, i);
out:
	pthread_mutex_unlock(&e->mu);
	if (verify)
		engine__verify_spawn(e, i);
out_free:
	free(x.v);
	free(rg);
	return rc;
}

bool engine_blob_is_ready(struct engine *e, uint32_t i)
{
	bool ready;

	pthread_mutex_lock(&e->mu);
	ready = e->blobs[i].state != ENGINE_BLOB_ADDED;
	pthread_mutex_unlock(&e->mu);
	return ready;
}

static const char *const blob_state_names[ENGINE_BLOB_NSTATES] = {
	[ENGINE_BLOB_ADDED] = "added",
	[ENGINE_BLOB_READY] = "ready",
	[ENGINE_BLOB_CHANGED] = "changed",
	[ENGINE_BLOB_DROPPED] = "dropped",
};

/* The diagram of engine_int.h: each state's one successor. */
static const enum engine_blob_state blob_next[ENGINE_BLOB_NSTATES] = {
	[ENGINE_BLOB_ADDED] = ENGINE_BLOB_READY,
	[ENGINE_BLOB_READY] = ENGINE_BLOB_CHANGED,
	[ENGINE_BLOB_CHANGED] = ENGINE_BLOB_DROPPED,
	[ENGINE_BLOB_DROPPED] = ENGINE_BLOB_NSTATES, /* none */
};

bool engine__blob_set(struct engine *e, uint32_t b, enum engine_blob_state to)
{
	struct engine_blob *blob = &e->blobs[b];

	assert(to < ENGINE_BLOB_NSTATES);
	if (blob_next[blob->state] != to) {
		engine__bug(e, "%s: blob: %s -> %s not drawn", blob->name,
			    blob_state_names[blob->state],
			    blob_state_names[to]);
		return false;
	}
	engine__log(e, FS_LOG_DEBUG, "%s: %s -> %s", blob->name,
		    blob_state_names[blob->state], blob_state_names[to]);
	blob->state = to;
	return true;
}

const char *engine__blob_name(struct engine *e, uint32_t b)
{
	return e->blobs[b].name;
}

const struct engine_source *engine__source_of(const struct engine *e,
					      uint32_t id)
{
	const struct engine_blob *b;

	if (id >= e->nsource_map)
		return NULL;
	b = &e->blobs[e->source_of_pace[id]];
	for (uint32_t i = 0; i < b->nsources; i++)
		if (b->sources[i].pace_id == id)
			return &b->sources[i];
	return NULL;
}

const char *engine__source_url(const struct engine *e, uint32_t id)
{
	const struct engine_source *s = engine__source_of(e, id);

	return s != NULL ? s->url : "(unknown source)";
}

static bool unit_checked(const struct engine_blob *b, uint64_t u)
{
	return (b->checked[u / 64] >> (u % 64)) & 1;
}

bool engine__unchecked(const struct engine *e, uint32_t b, uint64_t start,
		       uint64_t end, uint64_t *from, uint64_t *to)
{
	const struct engine_blob *blob = &e->blobs[b];

	if (blob->unit == 0)
		return false;
	for (uint64_t u = start / blob->unit; u * blob->unit < end; u++) {
		if (unit_checked(blob, u))
			continue;
		*from = u * blob->unit;
		*to = *from + blob->unit < blob->size ? *from + blob->unit
						      : blob->size;
		return true;
	}
	return false;
}

void engine__blob_set_checked(struct engine_blob *b, uint64_t start,
			      uint64_t end, bool checked)
{
	if (b->unit == 0 || start >= end)
		return;
	for (uint64_t u = start / b->unit; u * b->unit < end; u++) {
		if (checked) {
			b->checked[u / 64] |= 1ull << (u % 64);
		} else {
			b->checked[u / 64] &= ~(1ull << (u % 64));
			b->unit_src[u] = PACE_NONE;
			b->unit_proxy[u] = ENGINE_PROXY_UNSET;
		}
	}
}

/* engine: the running mount's life cycle and configuration, the one way
 * held bytes stop being held, and what the engine shows of itself (state,
 * status, the whole-blob check's hand-off). */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fs/engine/engine_int.h"

/* Blocks kept in memory: each lane fills one at a time, one left behind by
 * a cancelled or faulted lane waits for its remainder, and the rest keep
 * the most recently used whole blocks (8 lanes: 256 blocks, 16 MiB). */
#define ENGINE_BLOCKS_PER_LANE 16
#define ENGINE_BLOCKS_EXTRA 128

uint64_t engine__block_end(const struct engine_blob *b, uint64_t index)
{
	uint64_t end = (index + 1) * CACHE_BLOCK_SIZE;

	return end < b->size ? end : b->size;
}

static void config_pacing(const struct engine_config *cfg,
			  uint64_t read_timeout_ns, struct pace_config *pc)
{
	pace_config_default(pc);
	pc->max_lanes = cfg->lanes;
	pc->lanes_per_source =
		cfg->host_lanes != 0 && cfg->host_lanes < cfg->lanes
			? cfg->host_lanes
			: cfg->lanes;
	/* Requests cover whole chunks, aligned: what a cache in front of
	 * the origin keys on. A random read pulls one chunk, not more. */
	pc->align = cfg->chunk != 0 ? cfg->chunk : CACHE_BLOCK_SIZE;
	pc->min_request = pc->align;
	pc->deadline_ns = read_timeout_ns;
	if (cfg->readahead_ms != 0)
		pc->lead_ns = (uint64_t)cfg->readahead_ms * 1000000u;
	/* A sequential reader has up to two of the kernel's readahead
	 * windows ahead of it: the one it reads in and the next, which the
	 * kernel asks for as soon as the reader enters the first. */
	pc->kernel_ahead = 2 * cfg->kernel_ahead;
	/* A large read at a cold position comes in pieces of it. */
	pc->kernel_piece = cfg->kernel_ahead;
	/* A memory cap: read-ahead shrinks to fit, and a waiting read takes
	 * its room from read-ahead. */
	pc->budget_bytes = cfg->inflight_max;
	pc->fill_max = cfg->speculate;
	/* A window opens small: a reader that stops soon after it showed it
	 * reads sequentially (one member of an archive) pulls little. */
	pc->window_min = 4 * CACHE_BLOCK_SIZE > pc->align ? 4 * CACHE_BLOCK_SIZE
							  : pc->align;
	pc->stall_ns = (uint64_t)cfg->stall_timeout_s * 1000000000u;
	if (cfg->retry_after_max_s != 0)
		pc->retry_after_max_ns =
			(uint64_t)cfg->retry_after_max_s * 1000000000u;
	pc->max_blobs = cfg->max_blobs;
	pc->max_sources = cfg->max_sources;
	pc->max_groups = ENGINE_ORIGINS_MAX;
}

int engine_new(const struct engine_config *cfg, struct cache *cache,
	       struct engine **out)
{
	struct engine *e;
	struct pace_config pc;
	struct cache_stats cs;
	struct fetch_hooks hooks;
	pthread_condattr_t ca;
	const char *field = NULL;
	int rc = -ENOMEM;

	e = calloc(1, sizeof(*e));
	if (e == NULL)
		return -ENOMEM;
	pthread_mutex_init(&e->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&e->cv, &ca);
	pthread_condattr_destroy(&ca);
	e->cache = cache;
	e->log = cfg->log;
	e->log_fields = cfg->log_fields;
	e->log_ctx = cfg->log_ctx;
	e->inval = cfg->inval;
	e->inval_ctx = cfg->inval_ctx;
	e->proxies = cfg->fetch.proxies;
	e->read_timeout_ns = (uint64_t)cfg->read_timeout_s * 1000000000u;
	config_pacing(cfg, e->read_timeout_ns, &pc);
	/* A stream (a source that ignores Range) held before it runs past
	 * half the cache budget ahead of its slowest reader: the bytes
	 * beyond would be evicted unread, and the stream asked again from
	 * byte 0 for them. The other half keeps bytes behind the readers. */
	if (cache != NULL && cache_stats_get(cache, &cs) == 0)
		e->cache_budget = cs.budget;
	pc.stream_keep = e->cache_budget / 2;
	e->stall_ns = pc.stall_ns;
	e->retry_after_max_ns = pc.retry_after_max_ns;
	rc = pace_config_check(&pc, &field);
	if (rc != 0) {
		engine__log(e, FS_LOG_ERR, "scheduler configuration: bad %s",
			    field);
		goto fail;
	}
	rc = pace_new(&pc, &e->pace);
	if (rc == 0)
		rc = engine__blocks_init(&e->blocks, e,
					 cfg->lanes * ENGINE_BLOCKS_PER_LANE +
						 ENGINE_BLOCKS_EXTRA);
	if (rc != 0)
		goto fail;
	rc = -ENOMEM;
	e->max_blobs = cfg->max_blobs;
	e->blobs = calloc(cfg->max_blobs, sizeof(*e->blobs));
	e->nsource_map = cfg->max_sources;
	e->source_of_pace = calloc(cfg->max_sources, sizeof(uint32_t));
	e->src_refused = calloc(cfg->max_sources, 1);
	e->src_refused_until = calloc(cfg->max_sources, sizeof(uint64_t));
	e->creds_change = cfg->creds_change;
	e->nlanes = cfg->lanes;
	e->lane_blob = malloc(cfg->lanes * sizeof(*e->lane_blob));
	e->lane_source = malloc(cfg->lanes * sizeof(*e->lane_source));
	if (e->blobs == NULL || e->source_of_pace == NULL ||
	    e->src_refused == NULL || e->src_refused_until == NULL ||
	    e->lane_blob == NULL || e->lane_source == NULL)
		goto fail;
	for (uint32_t l = 0; l < cfg->lanes; l++)
		e->lane_blob[l] = e->lane_source[l] = PACE_NONE;
	engine__transfers_hooks(e, &hooks);
	rc = fetch_new(&cfg->fetch, &hooks, &e->fetch);
	if (rc != 0)
		goto fail;
	*out = e;
	return 0;
fail:
	engine_free(e);
	return rc;
}

int engine_start(struct engine *e)
{
	return fetch_start(e->fetch);
}

static void blobs_free(struct engine_blob *blobs, uint32_t n)
{
	for (uint32_t i = 0; blobs != NULL && i < n; i++) {
		struct engine_blob *b = &blobs[i];

		for (uint32_t j = 0; j < b->nsources; j++) {
			free(b->sources[j].url);
			free(b->sources[j].validator);
		}
		free(b->sources);
		free(b->name);
		free(b->checked);
		free(b->unit_src);
		free(b->unit_proxy);
		free(b->regions.rg);
	}
	free(blobs);
}

void engine_free(struct engine *e)
{
	int rc;

	if (e == NULL)
		return;
	fetch_free(e->fetch);
	/* Whole-blob checks read through the engine: let them end first. */
	pthread_mutex_lock(&e->mu);
	e->stopping = true;
	while (e->verifiers > 0)
		pthread_cond_wait(&e->cv, &e->mu);
	engine__log(e, FS_LOG_DEBUG,
		    "%" PRIu64 " reads waited, woken %" PRIu64 " times",
		    e->waits, e->wakeups);
	pthread_mutex_unlock(&e->mu);
	if (e->cache != NULL) {
		rc = cache_flush(e->cache);
		if (rc != 0)
			engine__log(e, FS_LOG_ERR,
				    "cache: final flush failed: %s",
				    strerror(-rc));
	}
	pace_free(e->pace);
	engine__blocks_fini(&e->blocks);
	free(e->source_of_pace);
	for (uint32_t g = 0; g < e->norigins; g++)
		free(e->origins[g]);
	free(e->src_refused);
	free(e->src_refused_until);
	free(e->lane_blob);
	free(e->lane_source);
	blobs_free(e->blobs, e->nblobs);
	pthread_cond_destroy(&e->cv);
	pthread_mutex_destroy(&e->mu);
	free(e);
}

void engine__log_about(const struct engine *e, enum fs_log_level level,
		       const struct fs_log_fields *f, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	if (e->log_fields != NULL)
		e->log_fields(e->log_ctx, level, f, fmt, ap);
	else if (e->log != NULL)
		e->log(e->log_ctx, level, fmt, ap);
	va_end(ap);
}

void engine__bug(const struct engine *e, const char *fmt, ...)
{
	char line[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	engine__log(e, FS_LOG_ERR, "bug: %s", line);
#ifdef PACEFS_STRICT
	fprintf(stderr, "pacefs: bug: %s\n", line);
	abort();
#endif
}

void engine__pages_inval(struct engine *e, uint32_t b, const char *name,
			 uint64_t ino, uint64_t start, uint64_t end)
{
	if (e->inval != NULL)
		e->inval(e->inval_ctx, b, name, ino, start, end);
}

/* ---- dropping held bytes ---- */

static const char *const drop_why[] = {
	[ENGINE_DROP_GONE] = "no longer in the cache",
	[ENGINE_DROP_WRONG] = "wrong",
	[ENGINE_DROP_STALE] = "of an old version",
};

static void drop_failed(const struct engine *e, const struct engine_blob *blob,
			uint64_t start, uint64_t end, enum engine_drop why,
			const char *step, int rc)
{
	engine__log(e, FS_LOG_ERR,
		    "%s: cannot %s bytes %" PRIu64 "-%" PRIu64 " (%s): %s",
		    blob->name, step, start, end - 1, drop_why[why],
		    strerror(-rc));
}

void engine__drop_locked(struct engine *e, uint32_t b, uint64_t start,
			 uint64_t end, enum engine_drop why)
{
	struct engine_blob *blob = &e->blobs[b];
	int rc;

	if (end > blob->size)
		end = blob->size;
	if (start >= end)
		return;
	engine__blocks_widen(&e->blocks, blob, b, &start, &end);
	rc = pace_blob_forget(e->pace, b, start, end);
	if (rc == -ENOSPC) {
		/* The range set is full and this would split a range:
		 * forgetting up to the end only trims one, so it fits. What
		 * the cache still has past `end` is fetched again. */
		engine__log(e, FS_LOG_WARN,
			    "%s: too many held ranges to forget bytes %" PRIu64
			    "-%" PRIu64 " alone: bytes %" PRIu64
			    " to its end are fetched again when read",
			    blob->name, start, end - 1, start);
		end = blob->size;
		rc = pace_blob_forget(e->pace, b, start, end);
	}
	if (rc != 0)
		drop_failed(e, blob, start, end, why, "forget", rc);
	engine__blob_set_checked(blob, start, end, false);
	engine__blocks_forget(&e->blocks, blob, b, start, end, why);
	engine__wake_blob(e, b);
	if (why == ENGINE_DROP_GONE)
		return;
	if (why == ENGINE_DROP_WRONG) {
		/* Fetched again past any cache on the way. */
		struct engine_recheck *r =
			&e->recheck[e->recheck_next++ % ENGINE_RECHECK_MAX];

		*r = (struct engine_recheck){
			.blob = b, .start = start, .end = end};
	}
	/* They may have been served, and the kernel keeps what it was
	 * served. */
	blob->pages_stale = true;
	engine__pages_inval(e, b, blob->name, blob->ino, start, end);
}

int engine__drop(struct engine *e, uint32_t b, uint64_t start, uint64_t end,
		 enum engine_drop why)
{
	struct engine_blob *blob = &e->blobs[b];
	uint64_t first, count;
	int rc = 0;

	pthread_mutex_lock(&e->mu);
	engine__drop_locked(e, b, start, end, why);
	pthread_mutex_unlock(&e->mu);
	if (end > blob->size)
		end = blob->size;
	if (why == ENGINE_DROP_GONE || start >= end)
		return 0;
	if (why == ENGINE_DROP_STALE || (start == 0 && end == blob->size)) {
		rc = cache_blob_drop(e->cache, &blob->id);
	} else {
		first = start / CACHE_BLOCK_SIZE;
		count = (end - 1) / CACHE_BLOCK_SIZE + 1 - first;
		rc = cache_blocks_evict(e->cache, &blob->id, first, count);
	}
	if (rc != 0)
		drop_failed(e, blob, start, end, why, "drop from the cache",
			    rc);
	return rc;
}

bool engine__recheck(const struct engine *e, uint32_t b, uint64_t start,
		     uint64_t end)
{
	for (uint32_t i = 0; i < ENGINE_RECHECK_MAX; i++) {
		const struct engine_recheck *r = &e->recheck[i];

		if (r->end != 0 && r->blob == b && start < r->end &&
		    r->start < end)
			return true;
	}
	return false;
}

/* A block the cache no longer has: served from memory while it is there,
 * else no longer held, so a read fetches it again. */
static void block_gone(struct engine *e, const struct cache_id *id,
		       uint64_t index, int err)
{
	struct engine_block *p;

	for (uint32_t i = 0; i < e->nblobs; i++) {
		const struct engine_blob *b = &e->blobs[i];

		if (memcmp(b->id.b, id->b, sizeof(id->b)) != 0)
			continue;
		if (err != 0)
			engine__log(
				e, FS_LOG_ERR,
				"%s: block %" PRIu64 " could not be stored in "
				"the cache (%s); it is served from memory "
				"while it lasts, then fetched again when read",
				b->name, index, strerror(-err));
		pthread_mutex_lock(&e->mu);
		p = engine__block_find(&e->blocks, i, index);
		if (p != NULL && p->state != ENGINE_BLOCK_FILLING)
			p->lost = true;
		else
			engine__drop_locked(e, i, index * CACHE_BLOCK_SIZE,
					    engine__block_end(b, index),
					    ENGINE_DROP_GONE);
		pthread_mutex_unlock(&e->mu);
	}
}

void engine_on_lost(void *ctx, const struct cache_id *id, uint64_t index,
		    int err)
{
	struct engine *e = *(struct engine **)ctx;

	if (e != NULL)
		block_gone(e, id, index, err);
}

void engine_on_evicted(void *ctx, const struct cache_id *id, uint64_t index)
{
	struct engine *e = *(struct engine **)ctx;

	if (e != NULL)
		block_gone(e, id, index, 0);
}

/* ---- the whole-blob check ---- */

static const char *const verify_names[ENGINE_VERIFY_NSTATES] = {
	[ENGINE_VERIFY_NONE] = "not checked",
	[ENGINE_VERIFY_RUNNING] = "being checked",
	[ENGINE_VERIFY_OK] = "checked",
	[ENGINE_VERIFY_FAILED] = "failed",
};

/* Moves blob's whole-blob check to `to` (the diagram in engine_int.h),
 * with a debug line. Caller holds e->mu. */
static void verify_set(struct engine *e, struct engine_blob *blob,
		       enum engine_verify to)
{
	assert(to < ENGINE_VERIFY_NSTATES);
	engine__log(e, FS_LOG_DEBUG, "%s: whole-blob check: %s -> %s",
		    blob->name, verify_names[blob->verify], verify_names[to]);
	blob->verify = to;
}

bool engine__verify_due(struct engine *e, uint32_t b)
{
	struct engine_blob *blob = &e->blobs[b];

	if (!blob->has_sha256 || blob->verify != ENGINE_VERIFY_NONE ||
	    e->stopping || pace_held_bytes(e->pace, b) != blob->size)
		return false;
	verify_set(e, blob, ENGINE_VERIFY_RUNNING);
	e->verifiers++;
	return true;
}

const uint8_t *engine__blob_sha256(struct engine *e, uint32_t b, uint64_t *size)
{
	*size = e->blobs[b].size;
	return e->blobs[b].sha256;
}

struct cache *engine__cache(struct engine *e)
{
	return e->cache;
}

const struct cache_id *engine__blob_id(struct engine *e, uint32_t b)
{
	return &e->blobs[b].id;
}

bool engine__stopping(struct engine *e)
{
	bool stopping;

	pthread_mutex_lock(&e->mu);
	stopping = e->stopping;
	pthread_mutex_unlock(&e->mu);
	return stopping;
}

enum engine_verify engine__verify_result(struct engine *e, uint32_t b,
					 int outcome)
{
	struct engine_blob *blob = &e->blobs[b];
	enum engine_verify v;

	pthread_mutex_lock(&e->mu);
	if (outcome == 0) {
		verify_set(e, blob, ENGINE_VERIFY_OK);
	} else if (outcome == -EBADMSG) {
		blob->verify_failures++;
		verify_set(e, blob,
			   blob->verify_failures >= 2 ? ENGINE_VERIFY_FAILED
						      : ENGINE_VERIFY_NONE);
	} else {
		/* tried again when complete */
		verify_set(e, blob, ENGINE_VERIFY_NONE);
	}
	v = blob->verify;
	pthread_mutex_unlock(&e->mu);
	return v;
}

uint32_t engine__blame_routes(struct engine *e, uint32_t b, char *names,
			      size_t cap)
{
	struct fetch_proxy_info pi;
	uint32_t via, n = 0;
	size_t used = 0;

	/* wholecheck.c calls this once per whole-blob mismatch: counted here.
	 */
	engine__count(&e->stats.digest_blobs, 1);
	pthread_mutex_lock(&e->mu);
	via = e->blobs[b].via;
	e->blobs[b].via = 0;
	pthread_mutex_unlock(&e->mu);
	names[0] = '\0';
	for (int i = 0; i < FETCH_PROXIES_MAX; i++) {
		/* A proxy excluded already (its bytes came before it was)
		 * is blamed as well: those bytes were not the origin's. */
		if ((via & (1u << i)) == 0 ||
		    fetch_proxies_info(e->proxies, (uint32_t)i, 0, &pi) != 0 ||
		    strcmp(pi.name, "DIRECT") == 0)
			continue;
		fetch_proxies_exclude(e->proxies, i);
		n++;
		if (used < cap)
			used += (size_t)snprintf(names + used, cap - used,
						 "%s%s", used > 0 ? ", " : "",
						 pi.name);
	}
	return n;
}

void engine__verify_exit(struct engine *e)
{
	pthread_mutex_lock(&e->mu);
	e->verifiers--;
	pthread_cond_broadcast(&e->cv);
	pthread_mutex_unlock(&e->mu);
}

/* ---- what the engine shows ---- */

uint64_t engine_held(struct engine *e, uint32_t b)
{
	uint64_t held;

	pthread_mutex_lock(&e->mu);
	held = b < e->nblobs ? pace_held_bytes(e->pace, b) : 0;
	pthread_mutex_unlock(&e->mu);
	return held;
}

int engine_validator(struct engine *e, uint32_t b, char *buf, size_t cap)
{
	int len = -ENODATA;

	pthread_mutex_lock(&e->mu);
	if (b < e->nblobs && e->blobs[b].nsources > 0 &&
	    e->blobs[b].sources[0].validator != NULL)
		len = snprintf(buf, cap, "%s",
			       e->blobs[b].sources[0].validator);
	pthread_mutex_unlock(&e->mu);
	return len;
}

const char *engine_state(struct engine *e, uint32_t b)
{
	const char *state = "remote";

	pthread_mutex_lock(&e->mu);
	if (b >= e->nblobs)
		state = "remote";
	else if (engine__blob_changed(&e->blobs[b]))
		state = "changed";
	else if (pace_held_bytes(e->pace, b) == e->blobs[b].size)
		state = "complete";
	else if (pace_held_bytes(e->pace, b) > 0)
		state = "partial";
	else
		state = e->blobs[b].state != ENGINE_BLOB_ADDED ? "empty"
							       : "remote";
	pthread_mutex_unlock(&e->mu);
	return state;
}

void engine_view(struct engine *e, struct engine_view *v)
{
	static const char *const modes[] = {
		[PACE_READER_NEW] = "new",
		[PACE_READER_RANDOM] = "random",
		[PACE_READER_SEQUENTIAL] = "sequential",
		[PACE_READER_PAUSED] = "paused",
	};
	struct pace_lane_info li;
	struct pace_reader_info ri;
	struct pace_source_info si;
	const struct engine_source *s;
	uint64_t now;

	v->nlanes = v->nreaders = v->nsources = 0;
	pthread_mutex_lock(&e->mu);
	now = fs__now_ns();
	for (uint32_t l = 0;
	     v->nlanes < v->cap_lanes && pace_lane_info(e->pace, l, &li) == 0;
	     l++) {
		if (!li.busy || li.blob >= e->nblobs)
			continue;
		s = engine__source_of(e, li.source);
		v->lanes[v->nlanes++] = (struct engine_lane_view){
			l, e->blobs[li.blob].name, s != NULL ? s->url : NULL,
			li};
	}
	for (uint32_t r = 0;
	     v->nreaders < v->cap_readers && r < pace_reader_bound(e->pace);
	     r++)
		if (pace_reader_info(e->pace, r, now, &ri) == 0 &&
		    ri.blob < e->nblobs)
			v->readers[v->nreaders++] = (struct engine_reader_view){
				r, e->blobs[ri.blob].name, modes[ri.mode], ri};
	for (uint32_t b = 0; b < e->nblobs; b++)
		for (uint32_t i = 0;
		     i < e->blobs[b].nsources && v->nsources < v->cap_sources;
		     i++) {
			s = &e->blobs[b].sources[i];
			if (pace_source_info(e->pace, s->pace_id, now, &si) !=
			    0)
				continue;
			v->sources[v->nsources++] = (struct engine_source_view){
				s->url,
				s->pace_id < e->nsource_map &&
						e->src_refused[s->pace_id] != 0
					? "refused: credentials"
				: si.excluded	      ? "excluded"
				: si.down	      ? "down"
				: si.held_until > now ? "backing off"
						      : "ok",
				si.lanes, si.rate};
		}
	pthread_mutex_unlock(&e->mu);
}

/* engine: joins the scheduler, the transfer thread and the cache: turns
 * reads into demand, arriving bytes into cache blocks, and actions into
 * transfers. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fs/fs_int.h"

_Static_assert(FS_CHUNK_MIN == CACHE_BLOCK_SIZE,
	       "the smallest chunk is a cache block");

/* Blocks kept in memory: each lane fills one at a time, one left behind by
 * a cancelled or faulted lane waits for its remainder, and the rest keep
 * the most recently used whole blocks (8 lanes: 256 blocks, 16 MiB). */
#define FS_PARTS_PER_LANE 16
#define FS_PARTS_EXTRA 128
/* Blocks one on_data call can complete: curl's largest write, in blocks,
 * and both partial ends. */
#define FS_DONE_MAX (FETCH_BUFFER_BYTES / CACHE_BLOCK_SIZE + 2)
#define FS_ACTIONS 32

static uint64_t block_end(const struct fs_blob *b, uint64_t index)
{
	uint64_t end = (index + 1) * CACHE_BLOCK_SIZE;

	return end < b->size ? end : b->size;
}

static enum pace_outcome pace_outcome_of(enum fetch_outcome o)
{
	switch (o) {
	case FETCH_OK:
		return PACE_OUT_OK;
	case FETCH_CANCELLED:
		return PACE_OUT_CANCELLED;
	case FETCH_TRANSIENT:
		return PACE_OUT_TRANSIENT;
	case FETCH_THROTTLED:
		return PACE_OUT_THROTTLED;
	case FETCH_GONE:
		return PACE_OUT_GONE;
	case FETCH_FATAL:
		return PACE_OUT_FATAL;
	case FETCH_LOCAL:
		break;
	}
	return PACE_OUT_LOCAL;
}

/* Finds the in-memory block (blob, index); NULL if none. Caller holds
 * e->mu. */
static struct fs_part *part_find(struct fs_engine *e, uint32_t blob,
				 uint64_t index)
{
	for (uint32_t i = 0; i < e->nparts; i++) {
		struct fs_part *p = &e->parts[i];

		if (p->state != FS_PART_FREE && p->blob == blob &&
		    p->index == index)
			return p;
	}
	return NULL;
}

/* Finds or makes the in-memory block (blob, index) for arriving bytes:
 * a free slot, else the least recently used whole block. NULL when every
 * slot is being filled or handed over. Caller holds e->mu. */
static struct fs_part *part_get(struct fs_engine *e, uint32_t blob,
				uint64_t index)
{
	struct fs_part *p = part_find(e, blob, index);
	struct fs_part *slot = NULL;

	if (p != NULL) {
		if (p->state == FS_PART_DONE) {
			p->state = FS_PART_FILLING; /* fetched again */
			p->source = PACE_NONE;
			p->mixed = false;
			p->proxy = -1;
			p->proxy_mixed = false;
		}
		return p;
	}
	for (uint32_t i = 0; i < e->nparts; i++) {
		struct fs_part *c = &e->parts[i];

		if (c->state == FS_PART_FREE) {
			slot = c;
			break;
		}
		if (c->state == FS_PART_DONE &&
		    (slot == NULL || c->last_use < slot->last_use))
			slot = c;
	}
	if (slot == NULL)
		return NULL;
	if (slot->state == FS_PART_DONE && slot->lost) {
		const struct fs_blob *b = &e->blobs[slot->blob];

		pace_blob_forget(e->pace, slot->blob,
				 slot->index * CACHE_BLOCK_SIZE,
				 block_end(b, slot->index));
	}
	if (slot->data == NULL) {
		slot->data = malloc(CACHE_BLOCK_SIZE);
		if (slot->data == NULL)
			return NULL;
	}
	slot->state = FS_PART_FILLING;
	slot->lost = false;
	slot->source = PACE_NONE;
	slot->mixed = false;
	slot->proxy = -1;
	slot->proxy_mixed = false;
	slot->blob = blob;
	slot->index = index;
	return slot;
}

static void on_data(void *ctx, uint32_t lane, uint64_t off, const void *buf,
		    size_t len)
{
	struct fs_engine *e = ctx;
	struct pace_lane_info li;
	struct fs_part *done[FS_DONE_MAX];
	uint32_t ndone = 0;
	const uint8_t *src = buf;
	uint64_t end = off + len;
	uint64_t credited_end = off;
	const struct fs_blob *b;
	int proxy = fetch_lane_proxy(e->fetch, lane);

	pthread_mutex_lock(&e->mu);
	if (pace_lane_info(e->pace, lane, &li) != 0 || !li.busy ||
	    li.blob >= e->nblobs)
		goto out;
	b = &e->blobs[li.blob];
	if (b->changed)
		goto out; /* bytes of a version being dropped: never cached */
	/* Copy block by block; stop crediting at the first block that has no
	 * buffer, so that the scheduler sees those bytes as missing. */
	while (credited_end < end) {
		uint64_t index = credited_end / CACHE_BLOCK_SIZE;
		uint64_t bstart = index * CACHE_BLOCK_SIZE;
		uint64_t stop = block_end(b, index);
		struct fs_part *p;

		if (stop > end)
			stop = end;
		p = part_get(e, li.blob, index);
		if (p == NULL) {
			fs__log(FS_LOG_WARN,
				"%s: no assembly buffer free for block %" PRIu64
				"; its bytes will be fetched again",
				b->name, index);
			break;
		}
		memcpy(p->data + (credited_end - bstart),
		       src + (credited_end - off), stop - credited_end);
		p->last_use = ++e->part_clock;
		p->mixed |= p->source != li.source && p->source != PACE_NONE;
		p->proxy_mixed |= p->proxy != proxy && p->source != PACE_NONE;
		p->source = li.source;
		p->proxy = proxy;
		credited_end = stop;
	}
	if (credited_end > off) {
		uint64_t now = fs__now_ns();

		pace_on_data(e->pace, lane, off, credited_end - off, now);
		e->lane_seen_ns[lane] = now;
	}
	/* Hand whole blocks to the cache. They stay here after, so a reader
	 * never misses held bytes. */
	for (uint64_t i = off / CACHE_BLOCK_SIZE;
	     i * CACHE_BLOCK_SIZE < credited_end && ndone < FS_DONE_MAX; i++) {
		struct fs_part *p = part_find(e, li.blob, i);

		if (p == NULL || p->state != FS_PART_FILLING ||
		    !pace_is_held(e->pace, li.blob, i * CACHE_BLOCK_SIZE,
				  block_end(b, i)))
			continue;
		if (!fs__verify_part(e, li.blob, p)) {
			/* Wrong bytes: never cached, never served. The one
			 * source that sent them all is not used again. */
			pace_blob_forget(e->pace, li.blob, i * CACHE_BLOCK_SIZE,
					 block_end(b, i));
			/* Its bytes were readable as they arrived. */
			fs__inval_queue(e, li.blob, i * CACHE_BLOCK_SIZE,
					block_end(b, i));
			fs__verify_blame(e, li.blob, p);
			p->state = FS_PART_FREE;
			continue;
		}
		p->state = FS_PART_HANDING;
		done[ndone++] = p;
	}
	fs__verify_start(e, li.blob);
	pthread_cond_broadcast(&e->cv);
	pthread_mutex_unlock(&e->mu);

	for (uint32_t i = 0; i < ndone; i++) {
		struct fs_part *p = done[i];
		uint64_t bstart = p->index * CACHE_BLOCK_SIZE;
		int rc = cache_block_put(e->cache, &b->id, p->index, p->data,
					 block_end(b, p->index) - bstart);

		if (rc != 0)
			fs__log(FS_LOG_ERR,
				"%s: cannot queue block %" PRIu64
				" for the cache: %s",
				b->name, p->index, strerror(-rc));
		pthread_mutex_lock(&e->mu);
		p->state = FS_PART_DONE;
		p->lost |= rc != 0;
		pthread_mutex_unlock(&e->mu);
	}
	return;
out:
	pthread_mutex_unlock(&e->mu);
}

/* The blob's primary source serves another version now: its reads fail
 * until a remount, which takes the new version; the two never mix. Caller
 * holds e->mu. */
static void blob_changed(struct fs_engine *e, uint32_t lane,
			 const struct fetch_result *res)
{
	struct pace_lane_info li;
	struct fs_blob *b;

	if (pace_lane_info(e->pace, lane, &li) != 0 || !li.busy ||
	    li.blob >= e->nblobs)
		return;
	b = &e->blobs[li.blob];
	if (b->changed || b->nsources == 0 || b->sources[0].pace_id != li.source)
		return; /* a mirror: the scheduler excludes it */
	b->changed = true;
	/* Its reads fail from now on, also those the kernel would serve
	 * from its cache. */
	fs__inval_queue(e, li.blob, 0, b->size);
	fs__log(FS_LOG_ERR,
		"%s: %s; its reads fail with EIO until it is remounted",
		b->name, res->reason);
}

/* Milliseconds to nanoseconds, saturated: a Retry-After is the server's
 * number, and a wrapped product would be a short hold chosen by chance. */
static uint64_t ms_to_ns(uint64_t ms)
{
	return ms > UINT64_MAX / 1000000u ? UINT64_MAX : ms * 1000000u;
}

static void on_done(void *ctx, uint32_t lane, const struct fetch_result *res)
{
	struct fs_engine *e = ctx;
	struct pace_lane_info li;
	struct pace_source_info si;
	uint64_t now, hold_ms = 0;
	uint32_t lane_cap = 0;
	char done[96];

	if (res->outcome != FETCH_OK && res->outcome != FETCH_CANCELLED &&
	    res->outcome != FETCH_THROTTLED)
		fs__log(res->outcome == FETCH_TRANSIENT ? FS_LOG_WARN
							: FS_LOG_ERR,
			"lane %u: %s", lane, res->reason);
	pthread_mutex_lock(&e->mu);
	now = fs__now_ns();
	if (res->blob_changed)
		blob_changed(e, lane, res);
	if (pace_lane_info(e->pace, lane, &li) != 0)
		li.busy = false;
	pace_on_done(e->pace, lane, pace_outcome_of(res->outcome),
		     ms_to_ns(res->retry_after_ms), now);
	/* What the scheduler did, for the log line: held the source (for
	 * Retry-After capped, or the backoff when that is longer), or only
	 * lowered its lane cap while it serves its other lanes. */
	if (res->outcome == FETCH_THROTTLED && li.busy &&
	    pace_source_info(e->pace, li.source, now, &si) == 0) {
		if (si.held_until > now)
			hold_ms = (si.held_until - now) / 1000000u;
		lane_cap = si.lane_cap;
	}
	pthread_cond_broadcast(&e->cv);
	pthread_mutex_unlock(&e->mu);
	if (res->outcome != FETCH_THROTTLED)
		return;
	if (hold_ms > 0)
		snprintf(done, sizeof(done),
			 "the source is held for %" PRIu64 ".%03" PRIu64 " s%s",
			 hold_ms / 1000, hold_ms % 1000,
			 ms_to_ns(res->retry_after_ms) > e->retry_after_max_ns
				 ? " (capped by retry_after_max)"
				 : "");
	else
		snprintf(done, sizeof(done),
			 "the source keeps at most %" PRIu32 " lane%s",
			 lane_cap, lane_cap == 1 ? "" : "s");
	if (res->retry_after_ms > 0)
		fs__log(FS_LOG_WARN, "lane %u: %s: Retry-After %" PRIu64 " s; %s",
			lane, res->reason, res->retry_after_ms / 1000, done);
	else
		fs__log(FS_LOG_WARN, "lane %u: %s; %s", lane, res->reason, done);
}

/* The source the scheduler knows as `id`, or NULL. */
static const struct fs_source *source_of(const struct fs_engine *e,
					 uint32_t id)
{
	const struct fs_blob *b;

	if (id >= e->nsource_map)
		return NULL;
	b = &e->blobs[e->source_of_pace[id]];
	for (uint32_t i = 0; i < b->nsources; i++)
		if (b->sources[i].pace_id == id)
			return &b->sources[i];
	return NULL;
}

/* A cancel of a lane that got nothing for the stall timeout is a stall
 * reclaim: say which source stalled, as the scheduler does not. A proxy
 * the lane went through is left out for its reset interval, so that the
 * range it retries does not stall there again. */
static void log_if_stalled(struct fs_engine *e, uint32_t lane)
{
	struct pace_lane_info li;
	const struct fs_source *s;
	uint64_t idle;
	bool stalled;
	int proxy = fetch_lane_proxy(e->fetch, lane);

	pthread_mutex_lock(&e->mu);
	idle = fs__now_ns() - e->lane_seen_ns[lane];
	stalled = idle >= e->stall_ns &&
		  pace_lane_info(e->pace, lane, &li) == 0 && li.busy;
	pthread_mutex_unlock(&e->mu);
	if (stalled && (s = source_of(e, li.source)) != NULL)
		fs__log(FS_LOG_WARN,
			"lane %u: %s: no byte for %" PRIu64 " s at offset %" PRIu64
			": stalled; its range is retried%s",
			lane, s->url, idle / 1000000000u, li.frontier,
			proxy >= 0 ? " through another proxy" : "");
	if (stalled && proxy >= 0)
		fetch_proxies_fail(e->proxies, proxy);
}

/* Fills t with what action a requests from; NULL if its source is gone. */
static const struct fs_source *action_target(const struct fs_engine *e,
					     const struct pace_action *a,
					     struct fetch_target *t)
{
	const struct fs_source *s = source_of(e, a->source);

	if (s == NULL)
		return NULL;
	t->url = s->url;
	t->validator = s->validator;
	t->if_match = s->if_match;
	t->size = e->blobs[e->source_of_pace[a->source]].size;
	t->no_cache = false;
	return s;
}

static void run_action(struct fs_engine *e, const struct pace_action *a)
{
	const struct fs_source *s;
	struct fetch_target t;
	int rc;

	switch (a->kind) {
	case PACE_ACT_START:
		s = action_target(e, a, &t);
		if (s == NULL)
			return;
		fs__log(FS_LOG_DEBUG,
			"lane %u: GET %s bytes %" PRIu64 "-%" PRIu64, a->lane,
			s->url, a->start, a->end - 1);
		pthread_mutex_lock(&e->mu);
		e->lane_seen_ns[a->lane] = fs__now_ns();
		t.no_cache = fs__verify_recheck(e, e->source_of_pace[a->source],
						a->start, a->end);
		pthread_mutex_unlock(&e->mu);
		rc = fetch_lane_start(e->fetch, a->lane, &t, a->start, a->end);
		if (rc != 0) {
			fs__log(FS_LOG_ERR, "lane %u: cannot start %s: %s",
				a->lane, s->url, strerror(-rc));
			pthread_mutex_lock(&e->mu);
			pace_on_done(e->pace, a->lane, PACE_OUT_LOCAL, 0,
				     fs__now_ns());
			pthread_mutex_unlock(&e->mu);
		}
		break;
	case PACE_ACT_SET_END:
		fetch_lane_set_end(e->fetch, a->lane, a->end);
		break;
	case PACE_ACT_CANCEL:
		log_if_stalled(e, a->lane);
		fetch_lane_cancel(e->fetch, a->lane);
		break;
	case PACE_ACT_QUEUE:
		/* Sent ahead on a connection of its own; the START that comes
		 * once the open request ends promotes it. Advisory: if it
		 * cannot be sent, that START asks for the range itself. */
		s = action_target(e, a, &t);
		if (s == NULL)
			return;
		fs__log(FS_LOG_DEBUG,
			"lane %u: GET %s bytes %" PRIu64 "-%" PRIu64
			" sent ahead",
			a->lane, s->url, a->start, a->end - 1);
		pthread_mutex_lock(&e->mu);
		t.no_cache = fs__verify_recheck(e, e->source_of_pace[a->source],
						a->start, a->end);
		pthread_mutex_unlock(&e->mu);
		rc = fetch_lane_queue(e->fetch, a->lane, &t, a->start, a->end);
		if (rc != 0)
			fs__log(FS_LOG_DEBUG, "lane %u: cannot send ahead: %s",
				a->lane, strerror(-rc));
		break;
	}
}

static long on_tick(void *ctx)
{
	struct fs_engine *e = ctx;
	struct pace_action acts[FS_ACTIONS];
	uint64_t now, wake;
	size_t n;
	int rounds = 0;

	do {
		pthread_mutex_lock(&e->mu);
		now = fs__now_ns();
		n = pace_poll(e->pace, now, acts, FS_ACTIONS);
		pthread_mutex_unlock(&e->mu);
		for (size_t i = 0; i < n; i++)
			run_action(e, &acts[i]);
		/* A cancel reports its lane done at once: poll again, so that
		 * what replaces it starts in this turn (a bounded number of
		 * times, should a start keep failing). */
	} while (n > 0 && ++rounds < 8);
	pthread_mutex_lock(&e->mu);
	now = fs__now_ns();
	wake = pace_next_wake(e->pace, now);
	pthread_mutex_unlock(&e->mu);
	if (wake == UINT64_MAX)
		return 1000;
	return wake <= now ? 0 : (long)((wake - now) / 1000000u) + 1;
}

struct load_ctx {
	struct pace *pace;
	uint32_t blob;
};

/* Resume: bytes the cache holds are never requested again. */
static int load_extent(void *arg, uint64_t start, uint64_t end)
{
	struct load_ctx *l = arg;

	return pace_blob_held(l->pace, l->blob, start, end);
}

int fs__engine_new(const struct fs_engine_config *cfg, struct cache *cache,
		   struct fs_engine **out)
{
	struct fs_engine *e;
	struct pace_config pc;
	struct fetch_hooks hooks = {
		.on_data = on_data,
		.on_done = on_done,
		.on_tick = on_tick,
		.log = fs__log_fetch,
	};
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
	pthread_cond_init(&e->inval_cv, NULL);
	e->cache = cache;
	e->proxies = cfg->fetch.proxies;
	e->read_timeout_ns = (uint64_t)cfg->read_timeout_s * 1000000000u;

	pace_config_default(&pc);
	pc.max_lanes = cfg->lanes;
	pc.lanes_per_source = cfg->lanes;
	/* Requests cover whole chunks, aligned: what a cache in front of
	 * the origin keys on. A random read pulls one chunk, not more. */
	pc.align = cfg->chunk != 0 ? cfg->chunk : CACHE_BLOCK_SIZE;
	pc.min_request = pc.align;
	pc.deadline_ns = e->read_timeout_ns;
	if (cfg->readahead_ms != 0)
		pc.lead_ns = (uint64_t)cfg->readahead_ms * 1000000u;
	pc.kernel_ahead = cfg->kernel_ahead;
	/* A window opens small: a reader that stops soon after it showed it
	 * reads sequentially (one member of an archive) pulls little. */
	pc.window_min = 4 * CACHE_BLOCK_SIZE > pc.align ? 4 * CACHE_BLOCK_SIZE
							 : pc.align;
	pc.stall_ns = (uint64_t)cfg->stall_timeout_s * 1000000000u;
	if (cfg->retry_after_max_s != 0)
		pc.retry_after_max_ns =
			(uint64_t)cfg->retry_after_max_s * 1000000000u;
	pc.max_blobs = cfg->max_blobs;
	pc.max_sources = cfg->max_sources;
	e->stall_ns = pc.stall_ns;
	e->retry_after_max_ns = pc.retry_after_max_ns;
	rc = pace_config_check(&pc, &field);
	if (rc != 0) {
		fs__log(FS_LOG_ERR, "scheduler configuration: bad %s", field);
		goto fail;
	}
	rc = pace_new(&pc, &e->pace);
	if (rc != 0)
		goto fail;
	rc = -ENOMEM;
	e->max_blobs = cfg->max_blobs;
	e->blobs = calloc(cfg->max_blobs, sizeof(*e->blobs));
	e->nsource_map = cfg->max_sources;
	e->source_of_pace = calloc(cfg->max_sources, sizeof(uint32_t));
	e->nparts = cfg->lanes * FS_PARTS_PER_LANE + FS_PARTS_EXTRA;
	e->parts = calloc(e->nparts, sizeof(*e->parts));
	e->lane_seen_ns = calloc(cfg->lanes, sizeof(*e->lane_seen_ns));
	if (e->blobs == NULL || e->source_of_pace == NULL ||
	    e->parts == NULL || e->lane_seen_ns == NULL)
		goto fail;
	hooks.ctx = e;
	rc = fetch_new(&cfg->fetch, &hooks, &e->fetch);
	if (rc != 0)
		goto fail;
	*out = e;
	return 0;
fail:
	fs__engine_free(e);
	return rc;
}

int fs__engine_blob_add(struct fs_engine *e, const char *name, uint64_t size,
			const struct cache_id *id, uint32_t *out)
{
	struct fs_blob *b;
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
	b->pace_id = pace_id;
	e->nblobs++;
	*out = pace_id;
out:
	pthread_mutex_unlock(&e->mu);
	return rc;
}

int fs__engine_blob_ready(struct fs_engine *e, uint32_t i,
			  struct fs_source *sources, uint32_t n)
{
	struct fs_blob *b = &e->blobs[i];
	struct load_ctx lc = {.blob = i};
	int rc = 0;

	pthread_mutex_lock(&e->mu);
	if (b->ready)
		goto out;
	b->sources = calloc(n ? n : 1, sizeof(*b->sources));
	if (b->sources == NULL) {
		rc = -ENOMEM;
		goto out;
	}
	for (uint32_t j = 0; j < n; j++) {
		struct fs_source *s = &b->sources[j];
		enum pace_caps caps = sources[j].validator != NULL
					      ? PACE_CAPS_FULL
					      : PACE_CAPS_NO_VALIDATOR;

		rc = pace_source_add(e->pace, i, caps, &s->pace_id);
		if (rc == 0 && s->pace_id >= e->nsource_map)
			rc = -ENOSPC;
		if (rc != 0)
			goto out;
		s->url = sources[j].url;
		s->validator = sources[j].validator;
		s->if_match = sources[j].if_match;
		sources[j].url = NULL;
		sources[j].validator = NULL;
		e->source_of_pace[s->pace_id] = i;
		b->nsources++;
	}
	/* Resume: what the cache holds is never requested again. */
	lc.pace = e->pace;
	rc = cache_extents_each(e->cache, &b->id, load_extent, &lc);
	if (rc == 0) {
		b->ready = true;
		fs__verify_start(e, i);
	}
out:
	pthread_mutex_unlock(&e->mu);
	return rc;
}

int fs__engine_blob_digests(struct fs_engine *e, uint32_t i,
			    const uint8_t *sha256, uint32_t dblock,
			    const uint8_t (*dblocks)[32], uint32_t n)
{
	struct fs_blob *b = &e->blobs[i];
	int rc = 0;

	pthread_mutex_lock(&e->mu);
	if (sha256 != NULL) {
		b->has_sha256 = true;
		memcpy(b->sha256, sha256, sizeof(b->sha256));
	}
	/* Every byte must have its digest: bytes no digest covers would pass
	 * fs__verify_part, and be stored under a content identity. */
	if (n > 0 && (dblock == 0 || (b->size + dblock - 1) / dblock != n)) {
		fs__log(FS_LOG_ERR,
			"%s: %" PRIu32 " block digests of %" PRIu32
			" bytes do not cover its %" PRIu64 " bytes",
			b->name, n, dblock, b->size);
		rc = -EINVAL;
		goto out;
	}
	if (n > 0 && b->dblocks == NULL) {
		b->dblocks = malloc((size_t)n * sizeof(*b->dblocks));
		if (b->dblocks == NULL) {
			rc = -ENOMEM;
			goto out;
		}
		memcpy(b->dblocks, dblocks, (size_t)n * sizeof(*b->dblocks));
		b->ndblocks = n;
		b->dblock = dblock;
	}
out:
	pthread_mutex_unlock(&e->mu);
	return rc;
}

bool fs__engine_blob_is_ready(struct fs_engine *e, uint32_t i)
{
	bool ready;

	pthread_mutex_lock(&e->mu);
	ready = e->blobs[i].ready;
	pthread_mutex_unlock(&e->mu);
	return ready;
}

static void blobs_free(struct fs_blob *blobs, uint32_t n)
{
	for (uint32_t i = 0; blobs != NULL && i < n; i++) {
		struct fs_blob *b = &blobs[i];

		for (uint32_t j = 0; j < b->nsources; j++) {
			free(b->sources[j].url);
			free(b->sources[j].validator);
		}
		free(b->sources);
		free(b->name);
		free(b->dblocks);
	}
	free(blobs);
}

int fs__engine_start(struct fs_engine *e)
{
	return fetch_start(e->fetch);
}

void fs__engine_free(struct fs_engine *e)
{
	int rc;

	if (e == NULL)
		return;
	fs__inval_stop(e);
	fetch_free(e->fetch);
	/* Whole-blob checks read through the engine: let them end first. */
	pthread_mutex_lock(&e->mu);
	e->stopping = true;
	while (e->verifiers > 0)
		pthread_cond_wait(&e->cv, &e->mu);
	pthread_mutex_unlock(&e->mu);
	if (e->cache != NULL) {
		rc = cache_flush(e->cache);
		if (rc != 0)
			fs__log(FS_LOG_ERR, "cache: final flush failed: %s",
				strerror(-rc));
	}
	pace_free(e->pace);
	for (uint32_t i = 0; e->parts != NULL && i < e->nparts; i++)
		free(e->parts[i].data);
	free(e->parts);
	free(e->source_of_pace);
	free(e->lane_seen_ns);
	blobs_free(e->blobs, e->nblobs);
	pthread_cond_destroy(&e->cv);
	pthread_cond_destroy(&e->inval_cv);
	pthread_mutex_destroy(&e->mu);
	free(e);
}

int fs__engine_open(struct fs_engine *e, uint32_t b, uint64_t ino,
		    uint32_t *reader_out, bool *keep_cache)
{
	struct fs_blob *blob = &e->blobs[b];
	int rc;

	pthread_mutex_lock(&e->mu);
	rc = pace_reader_open(e->pace, b, fs__now_ns(), reader_out);
	if (rc == 0) {
		blob->ino = ino;
		/* The kernel's pages were right when it read them unless
		 * bytes were dropped since: then this open drops them all,
		 * should an invalidation not have reached them. */
		*keep_cache = !blob->pages_stale;
		blob->pages_stale = false;
	}
	pthread_mutex_unlock(&e->mu);
	return rc;
}

void fs__engine_close(struct fs_engine *e, uint32_t b, uint32_t reader)
{
	pthread_mutex_lock(&e->mu);
	pace_reader_close(e->pace, reader, fs__now_ns());
	pthread_mutex_unlock(&e->mu);
	cache_pin_set(e->cache, &e->blobs[b].id, reader, 0, 0);
}

/* True when a read of [off, end) of blob b failed less than FS_FAILED_NS
 * ago. Caller holds e->mu. */
static bool failed_lately(const struct fs_engine *e, uint32_t b, uint64_t off,
			  uint64_t end, uint64_t now)
{
	for (uint32_t i = 0; i < FS_FAILED_MAX; i++) {
		const struct fs_failed *f = &e->failed[i];

		if (f->at_ns != 0 && f->blob == b && off < f->end &&
		    f->start < end && now - f->at_ns < FS_FAILED_NS)
			return true;
	}
	return false;
}

/* Remembers that a read of [off, end) of blob b failed. Caller holds
 * e->mu. */
static void failed_note(struct fs_engine *e, uint32_t b, uint64_t off,
			uint64_t end, uint64_t now)
{
	struct fs_failed *f = &e->failed[e->failed_next++ % FS_FAILED_MAX];

	f->blob = b;
	f->start = off;
	f->end = end;
	f->at_ns = now;
}

/* Waits until [off, end) of blob b is held, or the caller's cancelled()
 * says the read was interrupted (-EINTR). A read of bytes whose read just
 * failed fails at once: the application sees one read_timeout, not one
 * for the kernel's readahead and another for its retry. Caller holds
 * e->mu. */
static int wait_held(struct fs_engine *e, uint32_t b, uint32_t reader,
		     uint64_t off, uint64_t end, bool (*cancelled)(void *),
		     void *arg)
{
	uint64_t now = fs__now_ns();
	uint32_t w;
	int rc;

	if (failed_lately(e, b, off, end, now)) {
		fs__log(FS_LOG_DEBUG,
			"%s: read of bytes %" PRIu64 "-%" PRIu64
			" fails: a read of them just failed",
			e->blobs[b].name, off, end - 1);
		return -EIO;
	}
	rc = pace_wait_begin(e->pace, reader, off, end - off, now, &w);
	if (rc != 0)
		return rc;
	fetch_wake(e->fetch);
	while ((rc = pace_wait_state(e->pace, w, now)) == -EINPROGRESS &&
	       !e->blobs[b].changed) {
		if (cancelled != NULL && cancelled(arg)) {
			rc = -EINTR;
			break;
		}
		uint64_t until = now + 1000000000u;
		struct timespec ts = {
			.tv_sec = (time_t)(until / 1000000000u),
			.tv_nsec = (long)(until % 1000000000u),
		};

		pthread_cond_timedwait(&e->cv, &e->mu, &ts);
		now = fs__now_ns();
	}
	pace_wait_end(e->pace, w);
	if (rc == -EINTR)
		return rc;
	if (e->blobs[b].changed)
		return -EIO; /* logged once, where it was seen */
	if (rc == -ETIMEDOUT)
		fs__log(FS_LOG_ERR,
			"%s: read of bytes %" PRIu64 "-%" PRIu64
			" timed out after %" PRIu64 " s",
			e->blobs[b].name, off, end - 1,
			e->read_timeout_ns / 1000000000u);
	else if (rc != 0)
		fs__log(FS_LOG_ERR,
			"%s: read of bytes %" PRIu64 "-%" PRIu64
			" failed: no source can serve it",
			e->blobs[b].name, off, end - 1);
	if (rc != 0)
		failed_note(e, b, off, end, now);
	return rc == 0 ? 0 : -EIO;
}

int fs__engine_copy_held(struct fs_engine *e, uint32_t b, uint64_t off,
			 size_t len, char *buf)
{
	const struct fs_blob *blob = &e->blobs[b];
	uint64_t pos = off, end = off + len;

	while (pos < end) {
		uint64_t index = pos / CACHE_BLOCK_SIZE;
		uint64_t bstart = index * CACHE_BLOCK_SIZE;
		uint64_t stop = block_end(blob, index);
		struct fs_part *p;
		long got;

		if (stop > end)
			stop = end;
		pthread_mutex_lock(&e->mu);
		p = part_find(e, b, index);
		if (p != NULL) {
			memcpy(buf + (pos - off), p->data + (pos - bstart),
			       stop - pos);
			p->last_use = ++e->part_clock;
		}
		pthread_mutex_unlock(&e->mu);
		if (p == NULL) {
			got = cache_block_read(e->cache, &blob->id, index,
					       pos - bstart, buf + (pos - off),
					       stop - pos);
			if (got == -ENOENT) {
				/* Gone since it was held (a failed commit,
				 * a drop): fetch it again. */
				pthread_mutex_lock(&e->mu);
				pace_blob_forget(e->pace, b, bstart,
						 block_end(blob, index));
				pthread_mutex_unlock(&e->mu);
				return -EAGAIN;
			}
			if (got < 0 || (uint64_t)got != stop - pos) {
				fs__log(FS_LOG_ERR,
					"%s: block %" PRIu64
					" is held but cannot be read from "
					"the cache: %s",
					blob->name, index,
					got < 0 ? strerror((int)-got)
						: "short block");
				return -EIO;
			}
		}
		pos = stop;
	}
	return 0;
}

/* Drops the cached bytes of a blob that changed on the origin, once, from
 * a reader's thread (never the transfer thread, which must not commit).
 * Returns -EIO for the read that asked. */
static int drop_changed(struct fs_engine *e, uint32_t b)
{
	struct fs_blob *blob = &e->blobs[b];
	bool first;
	int rc;

	pthread_mutex_lock(&e->mu);
	first = !blob->dropped;
	blob->dropped = true;
	if (first)
		pace_blob_forget(e->pace, b, 0, blob->size);
	pthread_mutex_unlock(&e->mu);
	if (first) {
		rc = cache_blob_drop(e->cache, &blob->id);
		if (rc != 0)
			fs__log(FS_LOG_ERR,
				"%s: cannot drop the old version's bytes: %s",
				blob->name, strerror(-rc));
	}
	return -EIO;
}

long fs__engine_read(struct fs_engine *e, uint32_t b, uint32_t reader,
		     uint64_t off, size_t len, char *buf,
		     bool (*cancelled)(void *), void *arg)
{
	const struct fs_blob *blob = &e->blobs[b];
	uint64_t end, cursor = 0, window = 0;
	int rc = 0;

	if (off >= blob->size || len == 0)
		return 0;
	end = blob->size - off < len ? blob->size : off + len;
	pthread_mutex_lock(&e->mu);
	if (blob->changed) {
		pthread_mutex_unlock(&e->mu);
		return drop_changed(e, b);
	}
	if (blob->verify == FS_VERIFY_FAILED) {
		pthread_mutex_unlock(&e->mu);
		return -EIO; /* logged when the check failed */
	}
	pace_reader_read(e->pace, reader, off, end - off, fs__now_ns());
	if (pace_reader_window(e->pace, reader, &cursor, &window) != 0)
		window = 0;
	pthread_mutex_unlock(&e->mu);
	/* The reader's window is not evicted while it reads there. */
	cache_pin_set(e->cache, &blob->id, reader, off, cursor + window);
	/* A block the cache lost after it was held (a failed commit) is
	 * forgotten by fs__engine_on_lost and fetched again. */
	for (int tries = 0; tries < 3; tries++) {
		pthread_mutex_lock(&e->mu);
		if (!pace_is_held(e->pace, b, off, end))
			rc = wait_held(e, b, reader, off, end, cancelled,
				       arg);
		pthread_mutex_unlock(&e->mu);
		/* The cursor moved: read-ahead may start. */
		fetch_wake(e->fetch);
		if (rc != 0)
			return rc;
		rc = fs__engine_copy_held(e, b, off, (size_t)(end - off), buf);
		if (rc != -EAGAIN)
			break;
	}
	return rc != 0 ? (rc == -EAGAIN ? -EIO : rc) : (long)(end - off);
}

/* A block the cache no longer has: served from memory while it is there,
 * else no longer held, so a read fetches it again. */
static void block_gone(struct fs_engine *e, const struct cache_id *id,
		       uint64_t index, int err)
{
	struct fs_part *p;

	for (uint32_t i = 0; i < e->nblobs; i++) {
		const struct fs_blob *b = &e->blobs[i];

		if (memcmp(b->id.b, id->b, sizeof(id->b)) != 0)
			continue;
		if (err != 0)
			fs__log(FS_LOG_ERR,
				"%s: block %" PRIu64 " could not be stored in "
				"the cache (%s); it is served from memory "
				"while it lasts, then fetched again when read",
				b->name, index, strerror(-err));
		pthread_mutex_lock(&e->mu);
		p = part_find(e, i, index);
		if (p != NULL && p->state != FS_PART_FILLING)
			p->lost = true;
		else
			pace_blob_forget(e->pace, i, index * CACHE_BLOCK_SIZE,
					 block_end(b, index));
		pthread_mutex_unlock(&e->mu);
	}
}

void fs__engine_on_lost(void *ctx, const struct cache_id *id, uint64_t index,
			int err)
{
	struct fs_engine *e = *(struct fs_engine **)ctx;

	if (e != NULL)
		block_gone(e, id, index, err);
}

void fs__engine_on_evicted(void *ctx, const struct cache_id *id,
			   uint64_t index)
{
	struct fs_engine *e = *(struct fs_engine **)ctx;

	if (e != NULL)
		block_gone(e, id, index, 0);
}

void fs__engine_wake_readers(struct fs_engine *e)
{
	pthread_mutex_lock(&e->mu);
	pthread_cond_broadcast(&e->cv);
	pthread_mutex_unlock(&e->mu);
}

uint64_t fs__engine_held(struct fs_engine *e, uint32_t b)
{
	uint64_t held;

	pthread_mutex_lock(&e->mu);
	held = b < e->nblobs ? pace_held_bytes(e->pace, b) : 0;
	pthread_mutex_unlock(&e->mu);
	return held;
}

int fs__engine_validator(struct fs_engine *e, uint32_t b, char *buf,
			 size_t cap)
{
	int len = -ENODATA;

	pthread_mutex_lock(&e->mu);
	if (b < e->nblobs && e->blobs[b].nsources > 0 &&
	    e->blobs[b].sources[0].validator != NULL)
		len = snprintf(buf, cap, "%s", e->blobs[b].sources[0].validator);
	pthread_mutex_unlock(&e->mu);
	return len;
}

const char *fs__engine_state(struct fs_engine *e, uint32_t b)
{
	const char *state = "remote";

	pthread_mutex_lock(&e->mu);
	if (b >= e->nblobs)
		state = "remote";
	else if (e->blobs[b].changed)
		state = "changed";
	else if (pace_held_bytes(e->pace, b) == e->blobs[b].size)
		state = "complete";
	else if (pace_held_bytes(e->pace, b) > 0)
		state = "partial";
	else
		state = e->blobs[b].ready ? "empty" : "remote";
	pthread_mutex_unlock(&e->mu);
	return state;
}

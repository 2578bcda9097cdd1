/* transfers: the fetch event thread's side of the engine: arriving bytes
 * into in-memory blocks and on to the cache (whose block digests check
 * them first), transfer ends into the scheduler, and the scheduler's
 * actions into transfers. Every hook runs on that one thread, so blocks
 * reach the cache in one order and a digest block larger than a cache
 * block is checked by exactly the put that completes it. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "fs/engine/engine_int.h"

/* Blocks one on_data call can complete: curl's largest write, in blocks,
 * and both partial ends. */
#define ENGINE_DONE_MAX (FETCH_BUFFER_BYTES / CACHE_BLOCK_SIZE + 2)
#define ENGINE_ACTIONS 32

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

/* Copies arriving bytes into blocks and credits them; collects the blocks
 * they completed into done[]. Caller holds e->mu. */
static uint32_t take_bytes(struct engine *e, uint32_t lane, uint32_t blob,
			   uint32_t source, int proxy, uint64_t off,
			   const uint8_t *src, size_t len,
			   struct engine_block **done)
{
	const struct engine_blob *b = &e->blobs[blob];
	uint64_t end = off + len, credited_end = off;
	uint32_t ndone = 0;

	/* Copy block by block; stop crediting at the first block that has no
	 * buffer, so that the scheduler sees those bytes as missing. */
	while (credited_end < end) {
		uint64_t index = credited_end / CACHE_BLOCK_SIZE;
		uint64_t stop = engine__block_end(b, index);
		struct engine_block *p;

		if (stop > end)
			stop = end;
		p = engine__block_get(e, blob, index);
		if (p == NULL) {
			engine__log(
				e, FS_LOG_WARN,
				"%s: no assembly buffer free for block %" PRIu64
				"; its bytes will be fetched again",
				b->name, index);
			break;
		}
		engine__block_write(p, credited_end, src + (credited_end - off),
				    stop - credited_end, source, proxy);
		credited_end = stop;
	}
	/* Not credited (the scheduler's range set is full): not held, so
	 * fetched again, and not counted by their blocks. */
	if (credited_end == off ||
	    pace_on_data(e->pace, lane, off, credited_end - off,
			 fs__now_ns()) != 0)
		return 0;
	/* Each block counts what it was credited; a whole one goes to the
	 * cache. It stays here after, so a reader never misses held
	 * bytes. */
	for (uint64_t i = off / CACHE_BLOCK_SIZE;
	     i * CACHE_BLOCK_SIZE < credited_end; i++) {
		struct engine_block *p =
			engine__block_find(&e->blocks, blob, i);
		uint64_t from =
			i * CACHE_BLOCK_SIZE > off ? i * CACHE_BLOCK_SIZE : off;
		uint64_t to = engine__block_end(b, i) < credited_end
				      ? engine__block_end(b, i)
				      : credited_end;

		if (p == NULL || !engine__block_credit(b, p, to - from) ||
		    ndone == ENGINE_DONE_MAX ||
		    !engine__block_set(&e->blocks, p, ENGINE_BLOCK_HANDING))
			continue;
		done[ndone++] = p;
	}
	return ndone;
}

/* Folds the source and proxy of block p into its unit's; the unit's
 * source after, and its proxy in *proxy. Caller holds e->mu. */
static uint32_t unit_source(struct engine_blob *b, const struct engine_block *p,
			    int *proxy)
{
	uint64_t k = p->index * CACHE_BLOCK_SIZE / b->unit;
	uint32_t *u = &b->unit_src[k];
	int *x = &b->unit_proxy[k];

	if (p->mixed || (*u != PACE_NONE && *u != p->source))
		*u = ENGINE_SRC_MIXED;
	else
		*u = p->source;
	if (p->proxy_mixed || (*x != ENGINE_PROXY_UNSET && *x != p->proxy))
		*x = ENGINE_PROXY_MIXED;
	else
		*x = p->proxy;
	*proxy = *x;
	return *u;
}

/* The name of proxy entry i, for log lines. */
static const char *proxy_name(const struct engine *e, int i)
{
	struct fetch_proxy_info pi;

	if (fetch_proxies_info(e->proxies, (uint32_t)i, 0, &pi) != 0)
		return "(unknown proxy)";
	return pi.name;
}

/* Block p's unit failed its digests (the cache stored nothing of p): its
 * bytes are dropped and fetched again past any cache, and the one proxy
 * they all came through is not used again, else the one source that sent
 * them all: a cache's copy may be what is wrong, so the source is not
 * blamed for what a proxy served. */
static void unit_wrong(struct engine *e, struct engine_block *p)
{
	struct engine_blob *b = &e->blobs[p->blob];
	uint64_t u = p->index * CACHE_BLOCK_SIZE / b->unit;
	uint64_t start = u * b->unit;
	uint64_t end = start + b->unit < b->size ? start + b->unit : b->size;
	uint32_t blob = p->blob, src;
	struct fs_log_fields lf;
	int proxy;

	pthread_mutex_lock(&e->mu);
	src = unit_source(b, p, &proxy);
	if (proxy >= 0)
		fetch_proxies_exclude(e->proxies, proxy);
	else if (src != ENGINE_SRC_MIXED)
		pace_source_exclude(e->pace, src);
	engine__block_free(&e->blocks, p);
	engine__count(&e->stats.digest_units, 1);
	/* A unit of one cache block left nothing in the cache; a larger one
	 * did (its other blocks), which only a commit removes. */
	if (b->unit == CACHE_BLOCK_SIZE)
		engine__drop_locked(e, blob, start, end, ENGINE_DROP_WRONG);
	pthread_mutex_unlock(&e->mu);
	lf = (struct fs_log_fields){
		.blob = b->name,
		.source = src == ENGINE_SRC_MIXED ? NULL
						  : engine__source_url(e, src),
		.start = start,
		.end = end,
		.error = "digest",
	};
	engine__log_about(e, FS_LOG_ERR, &lf,
			  "%s: block %" PRIu64 " (bytes %" PRIu64 "-%" PRIu64
			  ") from %s%s%s has SHA-256 other than its digest: %s",
			  b->name, u, start, end - 1,
			  src == ENGINE_SRC_MIXED ? "several sources"
						  : engine__source_url(e, src),
			  proxy >= 0 ? " through proxy " : "",
			  proxy >= 0 ? proxy_name(e, proxy) : "",
			  proxy >= 0 ? "the proxy is excluded and the bytes "
				       "fetched again past any cache"
			  : src == ENGINE_SRC_MIXED
				  ? "its bytes are fetched again"
				  : "the source is excluded and the bytes "
				    "fetched again");
	if (b->unit > CACHE_BLOCK_SIZE)
		engine__drop(e, blob, start, end, ENGINE_DROP_WRONG);
}

/* After a put of block p of a unit larger than a cache block returned 0:
 * the cache checked the unit iff every other block of it was in the cache
 * then. Puts come from this thread only, so a block found in the cache
 * now was there during the put. Counts the unit checked if so; a block
 * held but not found is no longer held (fetched again, and the unit
 * checked when it is stored). */
static void unit_probe(struct engine *e, uint32_t blob, uint64_t index)
{
	struct engine_blob *b = &e->blobs[blob];
	uint64_t per = b->unit / CACHE_BLOCK_SIZE;
	uint64_t u = index / per, first = u * per;
	uint64_t nblocks = (b->size + CACHE_BLOCK_SIZE - 1) / CACHE_BLOCK_SIZE;
	uint64_t last = first + per < nblocks ? first + per : nblocks;
	uint64_t gone = UINT64_MAX;
	bool whole = true;
	char byte;

	pthread_mutex_lock(&e->mu);
	for (uint64_t j = first; j < last && whole; j++) {
		const struct engine_block *q =
			engine__block_find(&e->blocks, blob, j);

		whole = pace_is_held(e->pace, blob, j * CACHE_BLOCK_SIZE,
				     engine__block_end(b, j)) &&
			(q == NULL || q->state == ENGINE_BLOCK_DONE);
	}
	pthread_mutex_unlock(&e->mu);
	for (uint64_t j = first; j < last && whole; j++) {
		if (j != index &&
		    cache_block_read(e->cache, &b->id, j, 0, &byte, 1) < 0) {
			whole = false;
			gone = j;
		}
	}
	pthread_mutex_lock(&e->mu);
	/* Unless a drop reset the unit meanwhile. */
	if (whole && b->unit_src[u] != PACE_NONE) {
		engine__blob_set_checked(b, first * CACHE_BLOCK_SIZE,
					 engine__block_end(b, last - 1), true);
		engine__wake_blob(e, blob);
	} else if (gone != UINT64_MAX) {
		engine__drop_locked(e, blob, gone * CACHE_BLOCK_SIZE,
				    engine__block_end(b, gone),
				    ENGINE_DROP_GONE);
	}
	pthread_mutex_unlock(&e->mu);
}

/* Block p (HANDING) went to the cache with result rc. */
void engine__block_stored(struct engine *e, struct engine_block *p, int rc)
{
	struct engine_blob *b = &e->blobs[p->blob];
	uint32_t blob = p->blob;
	uint64_t index = p->index, start = index * CACHE_BLOCK_SIZE;
	uint64_t end = engine__block_end(b, index);
	bool probe = false;

	if (rc == -EBADMSG && b->unit != 0) {
		unit_wrong(e, p);
		return;
	}
	if (rc != 0)
		engine__log(e, FS_LOG_ERR,
			    "%s: cannot queue block %" PRIu64
			    " for the cache: %s",
			    b->name, index, strerror(-rc));
	pthread_mutex_lock(&e->mu);
	if (rc != 0 && b->unit != 0) {
		/* Not known to be checked, so never served: fetched again. */
		engine__block_free(&e->blocks, p);
		engine__drop_locked(e, blob, start, end, ENGINE_DROP_GONE);
		pthread_mutex_unlock(&e->mu);
		return;
	}
	engine__block_done(&e->blocks, p, rc != 0);
	/* Unless a drop (a failed whole-blob check) forgot it meanwhile. */
	if (b->unit != 0 && pace_is_held(e->pace, blob, start, end)) {
		int proxy;

		unit_source(b, p, &proxy);
		probe = b->unit > CACHE_BLOCK_SIZE;
		if (!probe) {
			engine__blob_set_checked(b, start, end, true);
			engine__wake_blob(e, blob);
		}
	}
	pthread_mutex_unlock(&e->mu);
	if (probe)
		unit_probe(e, blob, index);
}

static void on_data(void *ctx, uint32_t lane, uint64_t off, const void *buf,
		    size_t len)
{
	struct engine *e = ctx;
	struct engine_block *done[ENGINE_DONE_MAX];
	uint32_t blob = e->lane_blob[lane], ndone = 0;
	const struct engine_source *src;
	const struct engine_blob *b;
	bool verify = false;
	int proxy;

	if (blob == PACE_NONE)
		return;
	proxy = fetch_lane_proxy(e->fetch, lane);
	b = &e->blobs[blob];
	pthread_mutex_lock(&e->mu);
	/* Bytes of a version being dropped are never cached. */
	if (!engine__blob_changed(b)) {
		e->blobs[blob].via |=
			proxy >= 0 ? 1u << proxy : ENGINE_VIA_DIRECT;
		src = engine__source_of(e, e->lane_source[lane]);
		if (src != NULL && src->stream)
			engine__stream_data(e, blob);
		ndone = take_bytes(e, lane, blob, e->lane_source[lane], proxy,
				   off, buf, len, done);
		verify = engine__verify_due(e, blob);
		engine__wake_range(e, blob, off, off + len);
	}
	pthread_mutex_unlock(&e->mu);
	if (verify)
		engine__verify_spawn(e, blob);
	for (uint32_t i = 0; i < ndone; i++) {
		struct engine_block *p = done[i];
		uint64_t bstart = p->index * CACHE_BLOCK_SIZE;

		engine__block_stored(
			e, p,
			cache_block_put_buf(e->cache, &b->id, p->index, p->buf,
					    engine__block_end(b, p->index) -
						    bstart));
	}
}

/* The blob's primary source serves another version now: its reads fail
 * until a remount, which takes the new version; the two never mix. fetch
 * says so only on an answer without a proxy or from the last route of
 * -o proxy= (a proxy's other version is its own bad answer, and the next
 * route is asked). Caller holds e->mu. */
static void blob_changed(struct engine *e, uint32_t blob, uint32_t source,
			 const struct fetch_result *res,
			 const struct fs_log_fields *lf)
{
	struct engine_blob *b = &e->blobs[blob];

	if (engine__blob_changed(b) || b->nsources == 0 ||
	    b->sources[0].pace_id != source)
		return; /* a mirror: the scheduler excludes it */
	if (!engine__blob_set(e, blob, ENGINE_BLOB_CHANGED))
		return;
	/* Its reads fail from now on, also those the kernel would serve
	 * from its cache. */
	b->pages_stale = true;
	engine__pages_inval(e, blob, b->name, b->ino, 0, b->size);
	engine__log_about(
		e, FS_LOG_ERR, lf,
		"%s: %s; its reads fail with EIO until it is remounted",
		b->name, res->reason);
}

/* Milliseconds to nanoseconds, saturated: a Retry-After is the server's
 * number, and a wrapped product would be a short hold chosen by chance. */
static uint64_t ms_to_ns(uint64_t ms)
{
	return ms > UINT64_MAX / 1000000u ? UINT64_MAX : ms * 1000000u;
}

/* What the scheduler did with a 429/503, for the log: held the source
 * (for Retry-After capped, or the backoff when that is longer), or only
 * lowered its lane cap while it serves its other lanes. */
static void log_throttled(struct engine *e, uint32_t lane,
			  const struct fetch_result *res, uint64_t hold_ms,
			  uint32_t lane_cap, const struct fs_log_fields *lf)
{
	char done[96];

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
		engine__log_about(e, FS_LOG_WARN, lf,
				  "lane %u: %s: Retry-After %" PRIu64 " s; %s",
				  lane, res->reason, res->retry_after_ms / 1000,
				  done);
	else
		engine__log_about(e, FS_LOG_WARN, lf, "lane %u: %s; %s", lane,
				  res->reason, done);
}

/* How long a source whose credentials were refused n times in a row is
 * held while new ones may come: 1, 2, 4, then 8 s between tries, so that
 * a fixed header file or a new token is used within seconds and a read
 * still ends at its deadline when nothing changes. */
static uint64_t refused_hold_ns(uint8_t n)
{
	return (uint64_t)1000000000u << (n > 4 ? 3 : n - 1);
}

/* A refusal for the credentials when they can change is no verdict on
 * the source: it is held (as a 429 holds it), and tried again with what
 * the credentials thread read since; with static ones it is excluded as
 * ever. Either way status says "refused: credentials" until the source
 * answers otherwise. Caller holds e->mu. */
static enum pace_outcome judge_refusal(struct engine *e, uint32_t source,
				       const struct fetch_result *res,
				       uint64_t now, uint64_t *retry_ns)
{
	uint64_t *until;
	uint8_t *n;

	if (source == PACE_NONE || source >= e->nsource_map)
		return pace_outcome_of(res->outcome);
	n = &e->src_refused[source];
	if (!res->auth_refused) {
		if (res->outcome == FETCH_OK || res->outcome == FETCH_GONE ||
		    res->outcome == FETCH_FATAL)
			*n = 0;
		return pace_outcome_of(res->outcome);
	}
	until = &e->src_refused_until[source];
	if (!e->creds_change) {
		*n = 1;
		return PACE_OUT_GONE;
	}
	/* The lanes refused together count as one try: the backoff grows
	 * once per hold, not once per request. */
	if (*n == 0 || now >= *until) {
		if (*n < UINT8_MAX)
			(*n)++;
		*until = now + refused_hold_ns(*n);
	}
	*retry_ns = *until - now;
	return PACE_OUT_THROTTLED;
}

/* The fault class of a transfer's end; ENGINE_FAULT_N: none. */
static enum engine_fault fault_of(enum fetch_outcome o)
{
	switch (o) {
	case FETCH_TRANSIENT:
		return ENGINE_FAULT_TRANSIENT;
	case FETCH_THROTTLED:
		return ENGINE_FAULT_THROTTLED;
	case FETCH_GONE:
		return ENGINE_FAULT_GONE;
	case FETCH_FATAL:
		return ENGINE_FAULT_FATAL;
	case FETCH_LOCAL:
		return ENGINE_FAULT_LOCAL;
	case FETCH_OK:
	case FETCH_CANCELLED:
		break;
	}
	return ENGINE_FAULT_N;
}

/* Counts a transfer's end: its fault, a retry (the scheduler asks the
 * range of a transient fault or a throttle again), a refusal of the
 * credentials. */
static void count_done(struct engine *e, const struct fetch_result *res)
{
	enum engine_fault f = fault_of(res->outcome);

	if (f != ENGINE_FAULT_N)
		engine__count(&e->stats.faults[f], 1);
	if (f == ENGINE_FAULT_TRANSIENT || f == ENGINE_FAULT_THROTTLED)
		engine__count(&e->stats.retries, 1);
	if (res->auth_refused)
		engine__count(&e->stats.refused, 1);
}

/* What lane's transfer that ended with res is about, for the log: its
 * file, its source, its range (before the scheduler forgets it), its
 * status and fault. Caller holds e->mu. */
static void done_fields(struct engine *e, uint32_t lane, uint32_t blob,
			uint32_t source, const struct fetch_result *res,
			struct fs_log_fields *lf)
{
	const struct engine_source *s = engine__source_of(e, source);
	enum engine_fault f = fault_of(res->outcome);
	struct pace_lane_info li;

	*lf = (struct fs_log_fields){
		.blob = blob != PACE_NONE ? e->blobs[blob].name : NULL,
		.source = s != NULL ? s->url : NULL,
		.status = res->status,
		.error = res->auth_refused     ? "credentials"
			 : res->blob_changed   ? "changed"
			 : f != ENGINE_FAULT_N ? engine_fault_names[f]
					       : NULL,
	};
	if (pace_lane_info(e->pace, lane, &li) == 0 && li.busy) {
		lf->start = li.start;
		lf->end = li.end;
	}
}

static void on_done(void *ctx, uint32_t lane, const struct fetch_result *res)
{
	struct engine *e = ctx;
	uint32_t blob = e->lane_blob[lane], source = e->lane_source[lane];
	struct pace_source_info si;
	struct fs_log_fields lf;
	uint64_t now, hold_ms = 0, retry_ns = ms_to_ns(res->retry_after_ms);
	uint32_t lane_cap = 0;
	enum pace_outcome po;
	struct engine_block *last = NULL;
	bool ended = false;

	count_done(e, res);
	pthread_mutex_lock(&e->mu);
	now = fs__now_ns();
	/* Under the lock: the lane's range is still the scheduler's. */
	done_fields(e, lane, blob, source, res, &lf);
	if (res->outcome != FETCH_OK && res->outcome != FETCH_CANCELLED &&
	    res->outcome != FETCH_THROTTLED && !res->auth_refused)
		engine__log_about(e,
				  res->outcome == FETCH_TRANSIENT ? FS_LOG_WARN
								  : FS_LOG_ERR,
				  &lf, "lane %u: %s", lane, res->reason);
	if (res->blob_changed && blob != PACE_NONE)
		blob_changed(e, blob, source, res, &lf);
	po = judge_refusal(e, source, res, now, &retry_ns);
	pace_on_done(e->pace, lane, po, retry_ns, now);
	/* A stream of unknown length ended: its length is the blob's. */
	if (res->outcome == FETCH_OK && res->length != 0 && blob != PACE_NONE) {
		engine__open_ended(e, blob, res->length, &last);
		ended = true;
	}
	if (res->outcome == FETCH_THROTTLED && blob != PACE_NONE &&
	    pace_source_info(e->pace, source, now, &si) == 0) {
		if (si.held_until > now)
			hold_ms = (si.held_until - now) / 1000000u;
		lane_cap = si.lane_cap;
	}
	/* A wait may end with the transfer: its source failed for good. */
	if (blob != PACE_NONE)
		engine__wake_blob(e, blob);
	pthread_mutex_unlock(&e->mu);
	if (ended)
		engine__open_stored(e, blob, last);
	e->lane_blob[lane] = e->lane_source[lane] = PACE_NONE;
	if (res->outcome == FETCH_THROTTLED)
		log_throttled(e, lane, res, hold_ms, lane_cap, &lf);
	else if (res->auth_refused && po == PACE_OUT_THROTTLED)
		engine__log_about(
			e, FS_LOG_ERR, &lf,
			"lane %u: %s: the credentials are refused; the "
			"source is tried again in %" PRIu64 ".%" PRIu64
			" s, with new ones once they are read",
			lane, res->reason, retry_ns / 1000000000u,
			retry_ns / 100000000u % 10);
	else if (res->auth_refused)
		engine__log_about(
			e, FS_LOG_ERR, &lf,
			"lane %u: %s: the credentials are refused; the "
			"source is excluded (-o header= cannot change: "
			"remount with new ones, or use -o header_file=)",
			lane, res->reason);
}

/* A lane the scheduler took back because it stalled or collapsed. A
 * stall is logged with its source, as the scheduler does not log. A proxy
 * the lane stalled through is left out for its reset interval, so that the
 * range it retries goes by another route: with several proxies the source
 * is routed (pace_source_set_routed), and the scheduler holds it no
 * longer for what its route did. A collapse is the scheduler's alone: a
 * routed source's lanes do not collapse, and with one route there is no
 * other to take. */
static void lane_faulted(struct engine *e, const struct pace_action *a)
{
	struct pace_lane_info li;
	struct fs_log_fields lf;
	uint64_t idle = 0;
	bool known;
	int proxy = fetch_lane_proxy(e->fetch, a->lane);

	/* Idle by the scheduler's clock, which decided the stall. */
	pthread_mutex_lock(&e->mu);
	known = pace_lane_info(e->pace, a->lane, &li) == 0 && li.busy;
	if (known)
		idle = fs__now_ns() - li.progress_ns;
	pthread_mutex_unlock(&e->mu);
	/* Not stalled: a collapse, the scheduler's alone. */
	if (!known || idle < e->stall_ns ||
	    engine__source_of(e, a->source) == NULL)
		return;
	lf = (struct fs_log_fields){
		.blob = li.blob < e->nblobs ? e->blobs[li.blob].name : NULL,
		.source = engine__source_url(e, a->source),
		.start = li.frontier,
		.end = li.end,
		.error = "stalled",
	};
	engine__log_about(e, FS_LOG_WARN, &lf,
			  "lane %u: %s: no byte for %" PRIu64
			  " s at offset %" PRIu64
			  ": stalled; its range is retried%s",
			  a->lane, lf.source, idle / 1000000000u, li.frontier,
			  proxy >= 0 ? " through another proxy" : "");
	if (proxy >= 0)
		fetch_proxies_fail(e->proxies, proxy);
}

/* Fills t with what action a requests from; NULL if its source is gone. */
static const struct engine_source *action_target(const struct engine *e,
						 const struct pace_action *a,
						 struct fetch_target *t)
{
	const struct engine_source *s = engine__source_of(e, a->source);

	if (s == NULL)
		return NULL;
	t->url = s->url;
	t->validator = s->validator;
	t->if_match = s->if_match;
	t->size = e->blobs[e->source_of_pace[a->source]].size;
	t->no_cache = false;
	t->stream = s->stream;
	/* Written on this thread only, once readied (openend.c). */
	t->no_length = e->blobs[e->source_of_pace[a->source]].open_ended;
	engine__log(e, FS_LOG_DEBUG,
		    "lane %u: GET %s bytes %" PRIu64 "-%" PRIu64 "%s", a->lane,
		    s->url, a->start, a->end - 1,
		    a->kind == PACE_ACT_QUEUE ? " sent ahead" : "");
	return s;
}

static void run_action(struct engine *e, const struct pace_action *a)
{
	const struct engine_source *s;
	struct fetch_target t;
	int rc;

	switch (a->kind) {
	case PACE_ACT_START:
		s = action_target(e, a, &t);
		if (s == NULL)
			return;
		/* Its bytes come to on_data with the lane alone. */
		e->lane_blob[a->lane] = e->source_of_pace[a->source];
		e->lane_source[a->lane] = a->source;
		pthread_mutex_lock(&e->mu);
		t.no_cache = engine__recheck(e, e->lane_blob[a->lane], a->start,
					     a->end);
		if (t.stream)
			engine__stream_started(e, e->lane_blob[a->lane],
					       a->start);
		pthread_mutex_unlock(&e->mu);
		rc = fetch_lane_start(e->fetch, a->lane, &t, a->start, a->end);
		if (rc != 0) {
			engine__log(e, FS_LOG_ERR,
				    "lane %u: cannot start %s: %s", a->lane,
				    s->url, strerror(-rc));
			pthread_mutex_lock(&e->mu);
			pace_on_done(e->pace, a->lane, PACE_OUT_LOCAL, 0,
				     fs__now_ns());
			pthread_mutex_unlock(&e->mu);
			e->lane_blob[a->lane] = e->lane_source[a->lane] =
				PACE_NONE;
		}
		break;
	case PACE_ACT_SET_END:
		engine__log(e, FS_LOG_DEBUG, "lane %u: end lowered to %" PRIu64,
			    a->lane, a->end);
		fetch_lane_set_end(e->fetch, a->lane, a->end);
		break;
	case PACE_ACT_CANCEL:
		engine__log(e, FS_LOG_DEBUG, "lane %u: cancelled", a->lane);
		if (a->faulted) {
			/* Taken back to be asked again. */
			engine__count(&e->stats.faults[ENGINE_FAULT_STALLED],
				      1);
			engine__count(&e->stats.retries, 1);
			lane_faulted(e, a);
		}
		fetch_lane_cancel(e->fetch, a->lane);
		break;
	case PACE_ACT_QUEUE:
		/* Sent ahead on a connection of its own; the START that comes
		 * once the open request ends promotes it. Advisory: if it
		 * cannot be sent, that START asks for the range itself. */
		s = action_target(e, a, &t);
		if (s == NULL)
			return;
		pthread_mutex_lock(&e->mu);
		t.no_cache = engine__recheck(e, e->source_of_pace[a->source],
					     a->start, a->end);
		pthread_mutex_unlock(&e->mu);
		rc = fetch_lane_queue(e->fetch, a->lane, &t, a->start, a->end);
		if (rc != 0)
			engine__log(e, FS_LOG_DEBUG,
				    "lane %u: cannot send ahead: %s", a->lane,
				    strerror(-rc));
		break;
	}
}

static long on_tick(void *ctx)
{
	struct engine *e = ctx;
	struct pace_action acts[ENGINE_ACTIONS];
	uint64_t now, wake = UINT64_MAX;
	size_t n;
	int rounds = 0;

	do {
		pthread_mutex_lock(&e->mu);
		now = fs__now_ns();
		engine__regions_sweep(e, now);
		n = pace_poll(e->pace, now, acts, ENGINE_ACTIONS);
		if (n == 0)
			wake = pace_next_wake(e->pace, now);
		pthread_mutex_unlock(&e->mu);
		for (size_t i = 0; i < n; i++)
			run_action(e, &acts[i]);
		/* A cancel reports its lane done at once: poll again, so that
		 * what replaces it starts in this turn (a bounded number of
		 * times, should a start keep failing). */
	} while (n > 0 && ++rounds < 8);
	engine__stream_holds(e);
	if (n > 0) {
		pthread_mutex_lock(&e->mu);
		now = fs__now_ns();
		wake = pace_next_wake(e->pace, now);
		pthread_mutex_unlock(&e->mu);
	}
	if (wake == UINT64_MAX)
		return 1000;
	return wake <= now ? 0 : (long)((wake - now) / 1000000u) + 1;
}

/* fetch's log lines, through the engine's log hook. */
static void log_fetch(void *ctx, enum fetch_log_level level, const char *msg)
{
	struct engine *e = ctx;

	engine__log(e, (enum fs_log_level)level, "fetch: %s", msg);
}

void engine__transfers_hooks(struct engine *e, struct fetch_hooks *h)
{
	*h = (struct fetch_hooks){
		.on_data = on_data,
		.on_done = on_done,
		.on_tick = on_tick,
		.log = log_fetch,
		.ctx = e,
	};
}

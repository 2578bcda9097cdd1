/* counters: what the engine has counted, for the metrics endpoint and
 * `pacefs status`, read without holding its lock but for the lanes. */
#include "fs/engine/engine_int.h"

const char *const engine_read_from_names[ENGINE_FROM_N] = {
	[ENGINE_FROM_MEMORY] = "memory",
	[ENGINE_FROM_CACHE] = "cache",
	[ENGINE_FROM_NETWORK] = "network",
};

const char *const engine_fault_names[ENGINE_FAULT_N] = {
	[ENGINE_FAULT_TRANSIENT] = "transient",
	[ENGINE_FAULT_THROTTLED] = "throttled",
	[ENGINE_FAULT_GONE] = "gone",
	[ENGINE_FAULT_FATAL] = "fatal",
	[ENGINE_FAULT_LOCAL] = "local",
	[ENGINE_FAULT_STALLED] = "stalled",
};

static uint64_t get(_Atomic uint64_t *c)
{
	return atomic_load_explicit(c, memory_order_relaxed);
}

void engine_counters(struct engine *e, struct engine_counters *out)
{
	struct engine_stats *s = &e->stats;
	struct pace_lane_info li;
	struct pace_stats ps;

	for (int i = 0; i < ENGINE_FROM_N; i++)
		out->read_bytes[i] = get(&s->read_bytes[i]);
	for (int i = 0; i < ENGINE_FAULT_N; i++)
		out->faults[i] = get(&s->faults[i]);
	out->hits = get(&s->hits);
	out->misses = get(&s->misses);
	out->retries = get(&s->retries);
	out->refused = get(&s->refused);
	out->digest_units = get(&s->digest_units);
	out->digest_blobs = get(&s->digest_blobs);
	out->readers = get(&s->readers);
	out->stream_restarts = get(&s->stream_restarts);
	out->lanes = e->nlanes;
	out->lanes_busy = 0;
	/* The scheduler's, so under its lock: at most 64 lanes. */
	pthread_mutex_lock(&e->mu);
	for (uint32_t l = 0; l < e->nlanes; l++)
		if (pace_lane_info(e->pace, l, &li) == 0 && li.busy)
			out->lanes_busy++;
	out->inflight = pace_inflight(e->pace);
	pace_stats_get(e->pace, &ps);
	out->spec_bytes = ps.fill_bytes;
	out->spec_read = ps.fill_read;
	pthread_mutex_unlock(&e->mu);
}

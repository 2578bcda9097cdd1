/* streamnote: says why a read of a source that ignores Range waits (the
 * bytes come only as one stream from the start, and the read waits for
 * the stream to reach them): once per file in the log, and in status at
 * any time; what a cache budget smaller than such a file keeps; and
 * counts the streams that start again from byte 0. */
#include <errno.h>
#include <inttypes.h>

#include "fs/engine/engine_int.h"

/* Whether every source of blob b is a whole-object stream. */
static bool stream_only(const struct engine_blob *b)
{
	for (uint32_t i = 0; i < b->nsources; i++)
		if (!b->sources[i].stream)
			return false;
	return b->nsources > 0;
}

/* Blob b's stream: its frontier (the bytes held when none runs) and
 * rate into *frontier and *rate; whether a lane streams it now. Caller
 * holds e->mu. */
static bool stream_lane(struct engine *e, uint32_t b, uint64_t *frontier,
			uint64_t *rate, bool *held)
{
	struct pace_lane_info li;
	bool running = false;

	*frontier = pace_held_bytes(e->pace, b);
	*rate = 0;
	*held = false;
	for (uint32_t i = 0; i < e->nlanes; i++)
		if (pace_lane_info(e->pace, i, &li) == 0 && li.busy &&
		    li.blob == b) {
			*frontier = li.frontier;
			*rate = li.rate;
			*held = li.held;
			running = true;
		}
	return running;
}

void engine__stream_note(struct engine *e, uint32_t b, uint64_t off)
{
	struct engine_blob *blob = &e->blobs[b];
	uint64_t frontier, rate;
	bool held;

	if (blob->stream_told || !stream_only(blob))
		return;
	stream_lane(e, b, &frontier, &rate, &held);
	/* A read near the stream's frontier (a second of it, or
	 * ENGINE_STREAM_NEAR) is the stream's own reader; and the line
	 * waits for the stream's first measured rate (asked again at each
	 * wake of the wait). */
	if (rate == 0 || off < frontier + ENGINE_STREAM_NEAR ||
	    off - frontier < rate)
		return;
	blob->stream_told = true;
	engine__log(e, FS_LOG_INFO,
		    "%s: a read at byte %" PRIu64
		    " waits for the stream from %s (it ignores Range): at byte "
		    "%" PRIu64 ", %.1f MB/s, about %.1f s to go (read_timeout "
		    "%u s bounds the wait)",
		    blob->name, off, blob->sources[0].url, frontier, rate / 1e6,
		    (double)(off - frontier) / (double)rate,
		    (unsigned)(e->read_timeout_ns / 1000000000ull));
}

void engine__stream_budget_note(struct engine *e, uint32_t b)
{
	struct engine_blob *blob = &e->blobs[b];

	if (e->cache_budget == 0)
		return;
	pthread_mutex_lock(&e->mu);
	if (blob->budget_told || !stream_only(blob) ||
	    (!blob->open_ended && blob->size <= e->cache_budget))
		goto out;
	blob->budget_told = true;
	engine__log(e, FS_LOG_INFO,
		    "%s: %s the cache budget (%" PRIu64
		    " bytes) and its source ignores Range: the cache keeps "
		    "the stream's most recent bytes within the budget, the "
		    "oldest evicted as it goes on; a read behind them starts "
		    "the stream again from byte 0 and waits for it to get "
		    "there",
		    blob->name,
		    blob->open_ended ? "of unknown length, maybe bigger than"
				     : "bigger than",
		    e->cache_budget);
out:
	pthread_mutex_unlock(&e->mu);
}

void engine__stream_started(struct engine *e, uint32_t b, uint64_t start)
{
	struct engine_blob *blob = &e->blobs[b];

	/* The source sends from byte 0 whatever START asked: a stream of a
	 * blob streamed before in this mount (its connection lost, or its
	 * bytes evicted behind it), or with bytes held already, sends them
	 * again. Counted once its bytes come (engine__stream_data): a
	 * connection refused while the server is away is no restart. */
	blob->stream_again = blob->streams++ > 0 || start > 0;
	blob->stream_from = start;
}

void engine__stream_data(struct engine *e, uint32_t b)
{
	struct engine_blob *blob = &e->blobs[b];

	if (!blob->stream_again)
		return;
	blob->stream_again = false;
	blob->stream_restarts++;
	engine__count(&e->stats.stream_restarts, 1);
	engine__log(e, FS_LOG_INFO,
		    "%s: its stream started again from byte 0 (the source "
		    "ignores Range; %" PRIu64 " restarts): %" PRIu64
		    " bytes held before its first missing byte came again "
		    "and were dropped",
		    blob->name, blob->stream_restarts, blob->stream_from);
}

int engine_stream(struct engine *e, uint32_t b, struct engine_stream_view *out)
{
	int rc = -ENOENT;

	*out = (struct engine_stream_view){.wait_off = UINT64_MAX,
					   .eta_ms = UINT64_MAX};
	pthread_mutex_lock(&e->mu);
	if (b >= e->nblobs || !stream_only(&e->blobs[b]))
		goto out;
	out->running =
		stream_lane(e, b, &out->frontier, &out->rate, &out->held);
	out->restarts = e->blobs[b].stream_restarts;
	for (const struct engine_waiter *wt = e->waiters; wt != NULL;
	     wt = wt->next)
		if (wt->blob == b && wt->start < out->wait_off)
			out->wait_off = wt->start;
	/* A read behind the frontier waits for bytes evicted behind the
	 * stream: for the stream to start again, no time to tell. */
	if (out->wait_off != UINT64_MAX && out->wait_off >= out->frontier &&
	    out->running && !out->held && out->rate > 0)
		out->eta_ms =
			(out->wait_off - out->frontier) * 1000u / out->rate;
	rc = 0;
out:
	pthread_mutex_unlock(&e->mu);
	return rc;
}

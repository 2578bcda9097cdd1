/* streamnote: says once per file why a read of a source that ignores
 * Range waits: the bytes come only as one stream from the start, and the
 * read waits for the stream to reach them. */
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

void engine__stream_note(struct engine *e, uint32_t b, uint64_t off)
{
	struct engine_blob *blob = &e->blobs[b];
	struct pace_lane_info li;
	uint64_t frontier = pace_held_bytes(e->pace, b), rate = 0;

	if (blob->stream_told || !stream_only(blob))
		return;
	for (uint32_t i = 0; i < e->nlanes; i++)
		if (pace_lane_info(e->pace, i, &li) == 0 && li.busy &&
		    li.blob == b) {
			frontier = li.frontier;
			rate = li.rate;
		}
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

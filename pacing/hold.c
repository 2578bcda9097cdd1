/* hold: a whole-object stream held (its connection not read) while it is
 * far enough ahead of every reader of its blob and no read of it waits,
 * so that a paced reader does not have the stream pull the whole object
 * ahead of it (nor, under a cache budget, past what the cache keeps);
 * the server's window holds the rest. */
#include <errno.h>

#include "pacing/pace.h"
#include "pacing/pace_int.h"

/* The end of the furthest window of blob's readers; 0: none. */
static uint64_t readers_need(const struct pace *p, uint32_t blob)
{
	uint64_t need = 0;

	for (uint32_t i = 0; i < p->cfg.max_readers; i++) {
		const struct reader *r = &p->readers[i];

		if (r->used && r->blob == blob)
			need = pace__max64(need, r->cursor + r->w);
	}
	return need;
}

/* The cursor of blob's slowest reader; 0: none. */
static uint64_t readers_from(const struct pace *p, uint32_t blob)
{
	uint64_t from = UINT64_MAX;

	for (uint32_t i = 0; i < p->cfg.max_readers; i++) {
		const struct reader *r = &p->readers[i];

		if (r->used && r->blob == blob && r->cursor < from)
			from = r->cursor;
	}
	return from == UINT64_MAX ? 0 : from;
}

static bool blob_waits(const struct pace *p, uint32_t blob)
{
	for (uint32_t i = 0; i < p->cfg.max_waits; i++)
		if (p->waits[i].used && p->waits[i].blob == blob)
			return true;
	return false;
}

bool pace_lane_hold_wanted(const struct pace *p, uint32_t lane)
{
	const struct lane *l;
	uint64_t lead;

	if (!p || lane >= p->cfg.max_lanes)
		return false;
	l = &p->lanes[lane];
	if (!pace__lane_open(l) ||
	    !pace__caps_stream(p->sources[l->source].caps) ||
	    blob_waits(p, l->blob))
		return false;
	lead = l->held ? PACE_STREAM_LEAD / 2 : PACE_STREAM_LEAD;
	if (l->frontier >= readers_need(p, l->blob) + lead)
		return true;
	/* Bytes past what the cache keeps ahead of the slowest reader would
	 * be evicted before it reads them, and the stream asked again from
	 * byte 0 for them. */
	lead = l->held ? p->cfg.stream_keep / 2 : p->cfg.stream_keep;
	return p->cfg.stream_keep > 0 &&
	       l->frontier >= readers_from(p, l->blob) + lead;
}

size_t pace__streams_behind(struct pace *p, struct pace_action *acts,
			    size_t cap)
{
	size_t n = 0;

	for (uint32_t i = 0; i < p->cfg.max_lanes && n < cap; i++) {
		struct lane *l = &p->lanes[i];
		const struct blob *b;

		if (!pace__lane_open(l) ||
		    !pace__caps_stream(p->sources[l->source].caps))
			continue;
		b = &p->blobs[l->blob];
		for (uint32_t k = 0; k < p->cfg.max_waits; k++) {
			const struct wait *w = &p->waits[k];

			if (!w->used || w->blob != l->blob ||
			    pace__ranges_next_missing(&b->held, w->off) >=
				    pace__min64(w->end, l->frontier))
				continue;
			pace__lane_cancel(p, l, false, &acts[n++]);
			break;
		}
	}
	return n;
}

int pace_lane_hold(struct pace *p, uint32_t lane, bool hold, uint64_t now_ns)
{
	struct lane *l;

	if (!p || lane >= p->cfg.max_lanes)
		return -ENOENT;
	l = &p->lanes[lane];
	if (!pace__lane_open(l))
		return -ENOENT;
	pace__tick(p, now_ns);
	if (l->held == hold)
		return 0;
	l->held = hold;
	if (!hold) {
		/* A pause is no stall, and no slowness either. */
		l->last_progress_ns = p->now;
		l->rate_t0 = p->now;
		l->rate_bytes = 0;
		l->recv_t0 = p->now;
		l->recv_bytes = 0;
	}
	return 1;
}

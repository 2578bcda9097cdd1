/* hold: a whole-object stream held (its connection not read) while it is
 * far enough ahead of every reader of its blob and no read of it waits,
 * so that a paced reader does not have the stream pull the whole object
 * ahead of it; the server's window holds the rest. */
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
	return l->frontier >= readers_need(p, l->blob) + lead;
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

/* demand: how much of a waiting read one request takes (poll.c's
 * serve_wait): a sequential reader's read and its window in one request,
 * a read at a cold position split over the lanes that can start now, and
 * how many lanes read-ahead yields to it. */
#include "pacing/pace.h"
#include "pacing/pace_int.h"

/* Lanes that could start on blob now: idle lanes, within what its
 * sources' lane caps still allow (their groups' lanes counted once). */
static uint32_t lanes_free(const struct pace *p, uint32_t blob)
{
	const struct blob *b = &p->blobs[blob];
	uint32_t idle = 0, room = 0, seen[8], nseen = 0;

	for (uint32_t i = 0; i < p->cfg.max_lanes; i++)
		idle += p->lanes[i].state == LANE_IDLE;
	for (uint32_t i = b->first_src; i != PACE_NONE;
	     i = p->sources[i].next) {
		const struct source *s = &p->sources[i];
		const struct group *g = pace__group(p, s);
		uint32_t cap = g->lane_cap < p->cfg.lanes_per_source
				       ? g->lane_cap
				       : p->cfg.lanes_per_source;
		bool counted = false;

		if (s->excluded || p->now < s->hold_until || g->lanes >= cap)
			continue;
		for (uint32_t k = 0; k < nseen; k++)
			counted |= seen[k] == s->group;
		if (counted)
			continue;
		if (nseen < 8)
			seen[nseen++] = s->group;
		room += cap - g->lanes;
	}
	return idle < room ? idle : room;
}

/* The least piece a read at a cold position is split into: what one
 * connection of the source brings in a round trip (a smaller piece costs
 * its round trip for less than it saves), a chunk at least. Until a rate
 * window has measured the source, the rate of its short requests stands
 * for it: on a near origin a round trip carries a large read whole. That
 * rate says nothing past the bytes it was measured over: an origin that
 * sends a request's first tens of KiB at once and paces the rest (a
 * token bucket, a send buffer filled ahead) shows a short request many
 * times its connection's rate, and a piece sized by it would carry the
 * whole read on one slow connection. So it is trusted to twice those
 * bytes, and to the rate its group's fastest lane of late kept over a
 * whole request: after an idle second pacefs-origin's token bucket lets
 * 400 KiB out at once, and short requests showed 20-55 MB/s on a link
 * of 8 MB/s a connection, which put a whole 1 MiB run on one. */
static uint64_t split_least(const struct pace *p, uint32_t src)
{
	const struct group *g;
	uint64_t rate, least;

	if (src == PACE_NONE)
		return p->cfg.min_request;
	g = pace__group(p, &p->sources[src]);
	rate = pace__expected_rate(p, src);
	least = (uint64_t)((double)(rate ? rate : g->short_rate) *
			   (double)g->lat_est / (double)SEC);
	if (rate == 0)
		least = pace__min64(least, 2 * g->short_bytes);
	if (g->fast)
		least = pace__min64(
			least, (uint64_t)((double)g->fast * (double)g->lat_est /
					  (double)SEC));
	return pace__max64(pace__align_up(least, p->cfg.align),
			   p->cfg.min_request);
}

/* A read of w's reader continues its run, or starts one at the file's
 * start that is too small to be worth splitting over lanes: its window
 * comes with it. A read of a run the reader has left does not. */
bool pace__wait_sequential(const struct pace *p, const struct wait *w,
			   const struct reader *r)
{
	if (!r || r->w == 0 || !r->evident || w->off < r->run_start)
		return false; /* no window, or a large read's (speculate) */
	return !r->jumped ||
	       (r->from_start && r->gen == 0 && w->off < SEQ_BACK &&
		w->end - w->off < SPLIT_MIN * p->cfg.min_request);
}

/* w's reader streamed up to its jump and this is its first read there. */
static bool wait_reopened(const struct reader *r)
{
	return r && r->evident && r->jumped && r->gen > 0 && r->w > 0;
}

/* The end of what waiting read w asks: its own end; for a reader whose
 * large read is under way (speculate), the end of that read's pieces; for
 * one that streamed up to its jump (a player's seek), the end of the
 * window it reopens at the new position, so that the window's first bytes
 * are split over the lanes like a large read rather than left to the one
 * read-ahead request that would follow the read. A read of a run its
 * reader has left (the last piece of one read, still waiting when the
 * next read's first piece jumped: FUSE hands pieces over in parallel)
 * reaches its own end: the reader's reach is its new run's, and from
 * the old read up to it lay 11 MiB no one read. */
uint64_t pace__wait_reach(const struct pace *p, const struct wait *w)
{
	const struct reader *r = pace__reader_get(p, w->reader);
	uint64_t wend;

	if (!r || w->off < r->run_start || w->off > r->cursor)
		return w->end;
	if (r->w == 0 && pace__fill_tail(p, w) > w->end)
		return pace__fill_tail(p, w);
	if (!r->evident && r->spec_end > w->end)
		return r->spec_end;
	if (wait_reopened(r)) {
		wend = pace__sat_add(r->cursor, r->w);
		if (wend < p->blobs[w->blob].size)
			wend = pace__align_down(wend, p->cfg.align);
		return pace__max64(pace__min64(wend, p->blobs[w->blob].size),
				   w->end);
	}
	return w->end;
}

/* How much of waiting read w, from x on, one request on source src takes,
 * ending by *lim. A sequential reader's read (wait_sequential) takes the read
 * and its window in one request, up to its window's end: its window would fetch
 * those bytes next, and a read that waits then costs one round trip for the
 * window rather than one for each read, however many others wait. The request
 * is its share of the lanes: the window over the lanes each reader reading
 * ahead may have (the rest goes to read-ahead on another lane), a read-ahead
 * request's worth at most. Any other read (its reader just jumped, or reads at
 * random) is at a cold position: it is split over the lanes that can start now,
 * at least min_request each, so that it costs one round trip plus its
 * size over their combined rate rather than over one connection's. */
uint64_t pace__demand_share(const struct pace *p, const struct wait *w,
			    uint64_t x, uint32_t src, uint64_t *lim)
{
	const struct reader *r = pace__reader_get(p, w->reader);
	uint64_t left = w->end - x, wend, want, lanes, span;
	uint32_t n, share;

	*lim = UINT64_MAX;
	if (pace__wait_sequential(p, w, r)) {
		if (src == PACE_NONE)
			return left;
		wend = pace__align_down(pace__sat_add(r->cursor, r->w),
					p->cfg.align);
		*lim = pace__max64(wend, w->end);
		lanes = pace__min64(p->cfg.max_lanes, p->cfg.lanes_per_source);
		n = (uint32_t)pace__max64(p->nactive, 1);
		share = (uint32_t)pace__max64((lanes + n - 1) / n, 1);
		want = pace__min64(pace__request_want(p, src, r), r->w / share);
		return pace__max64(left, want);
	}
	left = pace__wait_reach(p, w) - x;
	/* A large read's pieces (whole chunks still: a cache in front keys
	 * on them) bound the requests; a read alone is one chunk at least. */
	if (pace__wait_reach(p, w) > w->end)
		*lim = pace__align_up(pace__wait_reach(p, w), p->cfg.align);
	n = lanes_free(p, w->blob);
	if (n <= 1)
		return left;
	/* A reopened window's pieces are sized by the read alone, so that
	 * its own bytes come first over all the lanes; the window's follow
	 * in pieces of the same size. */
	span = !wait_reopened(r) ? left : x < w->end ? w->end - x : 0;
	/* The least piece never asks past what the read reaches: a read
	 * smaller than a round trip's bytes is one request of its own. */
	return pace__min64(
		pace__max64(pace__align_up((span + n - 1) / n, p->cfg.align),
			    split_least(p, src)),
		pace__align_up(left, p->cfg.align));
}

/* Lanes a waiting read w should take from read-ahead when none is idle:
 * one, or, for a read at a cold position, one for each min_request of
 * what is left from x, so that its split runs on all of them at once. */
uint32_t pace__yields_wanted(struct pace *p, const struct wait *w, uint64_t x)
{
	const struct reader *r = pace__reader_get(p, w->reader);
	uint64_t n, least;

	if (pace__wait_sequential(p, w, r))
		return 1;
	least = split_least(p, pace__pick_source(p, w->blob, true));
	n = (pace__wait_reach(p, w) - x + least - 1) / least;
	return (uint32_t)pace__min64(pace__max64(n, 1), p->cfg.max_lanes);
}

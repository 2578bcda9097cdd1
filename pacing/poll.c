/* poll: pace_poll and its phases: what to start, shorten or cancel now,
 * demand first, then read-ahead inside each reader's window, steals, and
 * the ranges lanes queue behind their open requests. */
#include "pacing/pace.h"
#include "pacing/pace_int.h"

/* The lane owning byte x of blob, or NULL; writes the end of the span
 * that owns it (its open request or its queued range) to *oend. */
static struct lane *owner_of(struct pace *p, uint32_t blob, uint64_t x,
			     uint64_t *oend)
{
	for (uint32_t i = 0; i < p->cfg.max_lanes; i++) {
		struct lane *l = &p->lanes[i];

		if (!pace__lane_open(l) || l->blob != blob)
			continue;
		if (l->start <= x && x < l->end) {
			*oend = l->end;
			return l;
		}
		if (l->q && l->qstart <= x && x < l->qend) {
			*oend = l->qend;
			return l;
		}
	}
	return NULL;
}

/* The gap's end is not bounded by lim, only by the blob size. */
uint64_t pace__first_free(struct pace *p, uint32_t blob, uint64_t a,
			  uint64_t lim, uint64_t *gap_end)
{
	struct blob *b = &p->blobs[blob];
	uint64_t x = a, e;

	lim = pace__min64(lim, b->size);
	while (x < lim) {
		uint64_t oend;

		x = pace__ranges_next_missing(&b->held, x);
		if (x >= lim)
			break;
		if (!owner_of(p, blob, x, &oend))
			break;
		x = oend;
	}
	if (x >= lim)
		return lim;
	e = pace__min64(pace__ranges_next_present(&b->held, x), b->size);
	for (uint32_t i = 0; i < p->cfg.max_lanes; i++) {
		struct lane *l = &p->lanes[i];

		if (!pace__lane_open(l) || l->blob != blob)
			continue;
		if (l->start > x && l->start < e)
			e = l->start;
		if (l->q && l->qstart > x && l->qstart < e)
			e = l->qstart;
	}
	*gap_end = e;
	return x;
}

uint64_t pace__covered_from(const struct pace *p, uint32_t blob, uint64_t off)
{
	const struct blob *b = &p->blobs[blob];
	uint64_t x = off;

	for (;;) {
		bool owned = false;

		x = pace__ranges_next_missing(&b->held, x);
		if (x >= b->size)
			return b->size;
		for (uint32_t i = 0; i < p->cfg.max_lanes && !owned; i++) {
			const struct lane *l = &p->lanes[i];

			if (!pace__lane_open(l) || l->blob != blob)
				continue;
			if (l->start <= x && x < l->end) {
				x = l->end;
				owned = true;
			} else if (l->q && l->qstart <= x && x < l->qend) {
				x = l->qend;
				owned = true;
			}
		}
		if (!owned)
			return x;
	}
}

/* Aligned up, clamped to the blob size, the gap and max_request. */
uint64_t pace__request_end(const struct pace *p, const struct blob *b,
			   uint64_t x, uint64_t want, uint64_t gap_end,
			   uint64_t lim)
{
	const struct pace_config *c = &p->cfg;
	uint64_t e;

	want = pace__min64(pace__max64(want, c->min_request), c->max_request);
	/* Rounded down: from an unaligned start (where a transfer stopped)
	 * the request is a little shorter, never longer, than wanted. */
	e = pace__align_down(pace__sat_add(x, want), c->align);
	if (e <= x)
		e = pace__sat_add(x, want);
	e = pace__min64(e, gap_end);
	e = pace__min64(e, lim);
	e = pace__min64(e, b->size);
	return e;
}

/* Open requests past their frontier and queued ranges. Cancelling lanes
 * own nothing; a whole-object stream is one request the budget cannot
 * cut, and is left out (else it would hold the budget, and every other
 * file's reads, for the whole object). */
uint64_t pace__inflight_sum(const struct pace *p)
{
	uint64_t t = 0;

	for (uint32_t i = 0; i < p->cfg.max_lanes; i++) {
		const struct lane *l = &p->lanes[i];

		if (!pace__lane_open(l) ||
		    pace__caps_stream(p->sources[l->source].caps))
			continue;
		t += l->end - l->frontier;
		if (l->q)
			t += l->qend - l->qstart;
	}
	return t;
}

void pace__infl_add(struct pace *p, uint64_t n)
{
	p->infl += n;
	if (p->infl > p->stats.inflight_max)
		p->stats.inflight_max = p->infl;
}

void pace__infl_sub(struct pace *p, uint64_t n)
{
	p->infl = p->infl > n ? p->infl - n : 0;
}

/* Room left under budget_bytes (UINT64_MAX without a budget). */
static uint64_t budget_room(const struct pace *p)
{
	if (!p->cfg.budget_bytes)
		return UINT64_MAX;
	return p->cfg.budget_bytes > p->infl ? p->cfg.budget_bytes - p->infl
					     : 0;
}

/* On an aligned byte; returns x when nothing fits. */
uint64_t pace__budget_fit(const struct pace *p, uint64_t x, uint64_t e)
{
	uint64_t room = budget_room(p), f;

	if (e <= x || e - x <= room)
		return e;
	f = pace__align_down(x + room, p->cfg.align);
	return f > x ? f : x;
}

/* True while a waiting read's request has not had its first byte and was
 * started less than first_hold_ns ago. Read-ahead starts nothing new
 * meanwhile: on a cold start (open, seek) its new connections and
 * transfers would compete with the one the read waits for. It holds every
 * blob's read-ahead, not only the read's: holding one blob's alone handed
 * its lanes to the others. */
static bool first_hold(const struct pace *p)
{
	if (p->cfg.first_hold_ns == 0)
		return false;
	for (uint32_t i = 0; i < p->cfg.max_lanes; i++) {
		const struct lane *l = &p->lanes[i];

		if (l->state == LANE_REQUESTED && pace__lane_demand(l) &&
		    p->now < pace__sat_add(l->started_ns, p->cfg.first_hold_ns))
			return true;
	}
	return false;
}

/* Some source of b takes requests now, lane counts aside: a waiting read
 * may make a read-ahead lane yield to it. */
static bool blob_ready(const struct pace *p, const struct blob *b)
{
	for (uint32_t i = b->first_src; i != PACE_NONE;
	     i = p->sources[i].next) {
		const struct source *s = &p->sources[i];

		if (!s->excluded && p->now >= s->hold_until)
			return true;
	}
	return false;
}

/* A promoted range may start: its reader still reads there (same seek
 * generation, range inside its window) and its source takes requests. */
static bool promote_ok(const struct pace *p, const struct lane *l)
{
	const struct source *s = &p->sources[l->source];
	const struct reader *r;

	if (!pace__reader_live(p, l->reader, l->rgen))
		return false;
	r = &p->readers[l->reader];
	if (l->end > pace__sat_add(r->cursor, r->w) || l->end <= r->cursor)
		return false;
	return !s->excluded && p->now >= s->hold_until &&
	       s->collapsed_until <= p->now;
}

/*
 * The phases of a poll, in order. Each returns false when the poll ends
 * with it: the action array is full (the caller polls again), or nothing
 * after it may start.
 */

/* Promoted queued ranges start first, if still wanted. */
static bool start_promoted(struct pace *p, struct poll *o)
{
	for (uint32_t i = 0; i < p->cfg.max_lanes; i++) {
		struct lane *l = &p->lanes[i];

		if (l->state != LANE_PROMOTED)
			continue;
		if (!promote_ok(p, l)) {
			/* Counted in flight when this poll began. */
			pace__infl_sub(p, l->end - l->frontier);
			l->was_queued = false;
			l->reader = PACE_NONE;
			pace__lane_set(p, l, LANE_IDLE);
			l->start = l->frontier = l->end = 0;
			continue;
		}
		if (o->n == o->cap)
			return false;
		pace__lane_set(p, l, LANE_REQUESTED);
		p->stats.requests++;
		pace__emit(&o->acts[o->n++], PACE_ACT_START, p, l);
	}
	for (uint32_t i = 0; i < p->cfg.max_lanes; i++)
		if (p->lanes[i].state == LANE_YIELDING ||
		    (pace__lane_open(&p->lanes[i]) && p->lanes[i].handover))
			o->yields++;
	return true;
}

/* Stalls: take the range back; the source backs off, unless the stall
 * was its route's (pace_source_set_routed). */
static bool reclaim_stalled(struct pace *p, struct poll *o)
{
	for (uint32_t i = 0; i < p->cfg.max_lanes; i++) {
		struct lane *l = &p->lanes[i];

		if (!pace__lane_open(l) || l->held ||
		    p->now - l->last_progress_ns < p->cfg.stall_ns)
			continue;
		if (o->n == o->cap)
			return false;
		pace__lane_cancel(p, l, true, &o->acts[o->n++]);
		if (!p->sources[l->source].routed)
			pace__source_backoff(p, &p->sources[l->source], 0);
		p->stats.reclaims++;
	}
	return true;
}

/* A seek: the old window's read-ahead lanes stop at the end of the chunk
 * (align) they are in, which a cache between pacefs and the origin can
 * then keep whole; a read that waits for a lane takes one at once
 * (serve_wait). */
static bool yield_old_windows(struct pace *p, struct poll *o)
{
	for (uint32_t i = 0; i < p->cfg.max_lanes; i++) {
		struct lane *l = &p->lanes[i];
		struct reader *r;
		uint64_t chunk_end;

		if (!pace__lane_open(l) || !l->ahead || pace__lane_demand(l) ||
		    l->reader == PACE_NONE)
			continue;
		r = &p->readers[l->reader];
		if (r->gen == l->rgen)
			continue;
		if (l->end > r->cursor && l->frontier < r->cursor + r->w)
			continue; /* still useful for the new window */
		if (pace__caps_stream(p->sources[l->source].caps))
			continue;
		chunk_end = pace__align_up(
			pace__max64(l->frontier, l->start + 1), p->cfg.align);
		if (chunk_end >= l->end)
			continue; /* it ends inside this chunk */
		if (o->n == o->cap)
			return false;
		pace__infl_sub(p, l->end - chunk_end);
		l->end = chunk_end;
		pace__emit(&o->acts[o->n++], PACE_ACT_SET_END, p, l);
		if (l->q) {
			/* Its queued range is of the old window too. */
			pace__infl_sub(p, l->qend - l->qstart);
			l->q = false;
		}
	}
	return true;
}

/* What serve_wait does after a step: go on, look at the read's bytes
 * again, or end the poll (the action array is full). */
enum serve_step {
	SERVE_ON,
	SERVE_AGAIN,
	SERVE_FULL,
};

/* The lane that owns waiting read w's first missing byte (at or after
 * a0), if its open request does, is hurried: cut when it lags its
 * origin's other lanes, taken back when it collapsed or another source
 * would outpace it (SERVE_AGAIN: those bytes are unowned now), or split
 * where the bytes wanted lie far down its range. */
static enum serve_step hurry_owner(struct pace *p, struct poll *o,
				   const struct wait *w, uint64_t a0)
{
	const struct pace_config *c = &p->cfg;
	struct blob *b = &p->blobs[w->blob];
	uint64_t x, oend = 0;
	struct lane *own;
	bool hold = false;

	x = pace__ranges_next_missing(&b->held, a0);
	own = x < w->end ? owner_of(p, w->blob, x, &oend) : NULL;
	if (own && o->n < o->cap &&
	    pace__cut_lagging(p, own, x, &o->acts[o->n], &o->n))
		p->stats.steals++;
	/* Bytes in a queued range come right after that lane's open
	 * request: nothing to hurry. */
	if (!own || oend != own->end)
		return SERVE_ON;
	/* A read waits on a collapsed lane, or on one far slower than
	 * another source would be: take its range back now (received
	 * bytes are kept). */
	if (!pace__caps_stream(p->sources[own->source].caps) &&
	    (own->state == LANE_COLLAPSED ||
	     pace__lane_outpaced(p, own, w, &hold))) {
		struct source *os = &p->sources[own->source];

		if (o->n == o->cap)
			return SERVE_FULL;
		/* A routed source's slow lane is its route's (a proxy
		 * filling a miss): no hold. */
		if (hold && own->state != LANE_COLLAPSED && !os->routed)
			os->collapsed_until = pace__max64(
				os->collapsed_until,
				pace__sat_add(p->now, COLLAPSE_HOLD_NS));
		pace__lane_cancel(p, own, true, &o->acts[o->n++]);
		p->stats.reclaims++;
		return SERVE_AGAIN;
	}
	/* The bytes wanted lie far down a lane's range: split them off
	 * rather than wait for the lane to get there. A sequential reader's
	 * lane brings them in order: only when it is more than two round
	 * trips away from them. */
	if (!pace__caps_stream(p->sources[own->source].caps) &&
	    x >= own->frontier + 2 * c->min_request &&
	    (!pace__wait_sequential(p, w, pace__reader_get(p, w->reader)) ||
	     x - own->frontier > pace__lane_sent(p, own)) &&
	    pace__align_down(x, c->align) > own->frontier &&
	    pace__idle_lane(p) &&
	    pace__pick_source(p, w->blob, true) != PACE_NONE) {
		if (o->n == o->cap)
			return SERVE_FULL;
		pace__infl_sub(p, own->end - pace__align_down(x, c->align));
		own->end = pace__align_down(x, c->align);
		pace__emit(&o->acts[o->n++], PACE_ACT_SET_END, p, own);
		p->stats.steals++;
	}
	return SERVE_ON;
}

/* One waiting read: its missing bytes go to idle lanes, or read-ahead
 * yields a lane to it. */
static bool serve_wait(struct pace *p, struct poll *o, uint32_t wi, bool fair)
{
	const struct pace_config *c = &p->cfg;
	struct wait *w = &p->waits[wi];
	struct blob *b = &p->blobs[w->blob];

	for (;;) {
		uint64_t ge, x, e, want, lim,
			a0 = pace__align_down(w->off, c->align);
		enum serve_step step = hurry_owner(p, o, w, a0);
		uint32_t src;
		struct lane *l;

		if (step == SERVE_FULL)
			return false;
		if (step == SERVE_AGAIN)
			continue;
		x = pace__first_free(p, w->blob, a0, pace__wait_reach(p, w),
				     &ge);
		if (x >= pace__wait_reach(p, w))
			break;
		src = pace__pick_source(p, w->blob, true);
		l = pace__idle_lane(p);
		want = pace__demand_share(p, w, x, src, &lim);
		e = pace__request_end(p, b, x, want, ge, lim);
		if (e < b->size)
			e = pace__budget_fit(p, x, e);
		else if (e - x > budget_room(p))
			e = x; /* the blob's unaligned tail must fit */
		if (src != PACE_NONE && l && e > x) {
			if (fair && pace__split_capped(p, w, 0)) {
				w->capped_tmp = true;
				break;
			}
			if (o->n == o->cap)
				return false;
			pace__lane_start(p, l, w->blob, src, x, e, w->reader,
					 wi, &o->acts[o->n++]);
			if (w->reader != PACE_NONE) {
				p->readers[w->reader].nl_tmp++;
				p->readers[w->reader].nd_tmp++;
			}
			continue;
		}
		/* No source takes a request now (backing off, suspended,
		 * excluded): wait for one. */
		if (src == PACE_NONE && !blob_ready(p, b))
			break;
		/* No lane, its sources at their lane caps, or no room in the
		 * budget: read-ahead yields to the read, and with the budget
		 * short starts nothing new in this poll (the bytes it frees
		 * are the read's). */
		if (src != PACE_NONE && l)
			o->starved = true;
		if (o->yields > 0) {
			o->yields--; /* a lane is already on its way */
			break;
		}
		return pace__take_lanes(p, o, w, x, src == PACE_NONE, fair);
	}
	return true;
}

/* The wait that began first: every wait has the same deadline after its
 * beginning, so it is also the one nearest its deadline. */
static uint32_t oldest_wait(const struct pace *p)
{
	uint32_t best = 0;

	for (uint32_t i = 1; i < p->n_waits; i++)
		if (p->waits[i].used &&
		    (!p->waits[best].used ||
		     p->waits[i].begin_ns < p->waits[best].begin_ns))
			best = i;
	return best;
}

/* Serves the waits in order of their readers' lanes, fewest first, and
 * the oldest first among equals; with `fair` off, only those that
 * pace__split_capped stopped. */
static bool serve_levels(struct pace *p, struct poll *o, bool fair)
{
	uint32_t first = oldest_wait(p), nw = p->n_waits, level = 0;

	for (;;) {
		uint32_t next = UINT32_MAX;

		for (uint32_t k = 0; k < nw; k++) {
			uint32_t wi = (first + k) % nw;
			struct wait *w = &p->waits[wi];

			if (!w->used || (!fair && !w->capped_tmp))
				continue;
			if (w->key_tmp > level && w->key_tmp < next)
				next = w->key_tmp;
			if (w->key_tmp != level)
				continue;
			w->capped_tmp = false;
			if (!serve_wait(p, o, wi, fair))
				return false;
		}
		if (next == UINT32_MAX)
			return true;
		level = next;
	}
}

/* Demand first: the reads of readers holding the fewest lanes first, so
 * that a lane that frees up goes to the reader short of lanes (a reader
 * of another file beside readers of a slow one), and among those the
 * oldest wait first, then the others in slot order: every wait becomes
 * the oldest in its turn, so none starves, however the others come and
 * go. A read held to its reader's share (pace__split_capped) takes what lanes
 * the others left in a second pass. */
static bool serve_waits(struct pace *p, struct poll *o)
{
	pace__count_needs(p);
	return serve_levels(p, o, true) && serve_levels(p, o, false);
}

/* Idle lanes take ranges from busy ones: from collapsed lanes only, or
 * from any whose range will finish last. Never ends the poll. */
static bool steal_idle(struct pace *p, struct poll *o, bool collapsed_only)
{
	for (;;) {
		struct lane *l = pace__idle_lane(p);
		int k;

		if (!l)
			break;
		k = pace__steal(p, l, o->acts + o->n, o->cap - o->n,
				collapsed_only);
		if (k == 0)
			break;
		o->n += (size_t)k;
	}
	return true;
}

/* Read-ahead inside each reader's window: deficit round robin over
 * readers, one request per reader per turn, costed in bytes plus a
 * request's worth for the round trip; idle credit is capped. */
static bool read_ahead_kind(struct pace *p, struct poll *o, bool plan)
{
	const struct pace_config *c = &p->cfg;
	const uint64_t quantum = c->max_request + c->min_request;
	uint32_t served = PACE_NONE;

	for (int round = 0; round < 4 && pace__idle_lane(p); round++) {
		bool work = false;

		for (uint32_t k = 0; k < p->n_readers; k++) {
			uint32_t ri = (p->rr + k) % p->n_readers;
			struct reader *r = &p->readers[ri];
			uint64_t wend, x, ge, e, cost;
			uint32_t src;
			struct lane *l;

			if (!r->used || !r->seen || r->w == 0 ||
			    r->plan != plan)
				continue;
			x = pace__window_gap(p, r, &ge, &wend);
			l = pace__idle_lane(p);
			src = x < wend && l
				      ? pace__pick_source(p, r->blob, false)
				      : PACE_NONE;
			if (src == PACE_NONE) {
				r->deficit = 0;
				continue;
			}
			e = pace__window_end(p, r, src, x, ge, wend);
			if (e == x) {
				r->deficit = 0;
				continue; /* parked until it moves */
			}
			work = true;
			cost = e - x + c->min_request;
			r->deficit =
				pace__min64(r->deficit + quantum, 2 * quantum);
			if (r->deficit < cost)
				continue;
			if (o->n == o->cap)
				return false;
			r->deficit -= cost;
			pace__lane_start(p, l, r->blob, src, x, e, ri,
					 PACE_NONE, &o->acts[o->n++]);
			served = ri;
			if (!pace__idle_lane(p))
				break;
		}
		if (!work)
			break;
	}
	if (served != PACE_NONE)
		p->rr = (served + 1) % p->n_readers;
	return true;
}

/* Read-ahead of paced readers first, then along read plans with the
 * lanes left: a plan's files are bytes an application said it would read
 * later than what a sequential reader reads next. */
static bool read_ahead(struct pace *p, struct poll *o)
{
	if (o->starved || first_hold(p))
		return false;
	if (!p->n_readers)
		return true;
	return read_ahead_kind(p, o, false) && read_ahead_kind(p, o, true);
}

/* Queued ranges: a busy read-ahead lane whose open request ends within
 * twice its source's latency plus QUEUE_LEAD_NS takes the next range of
 * its reader's window, on the same source, so that no round trip separates
 * two requests. A reader keeps no more than its share of the lanes, so
 * chaining never starves another reader of turns. A reader with a read
 * waiting on bytes no lane owns queues nothing: the window lies past
 * that read, and the lane, free at its end, goes to the read first. */
static bool queue_next(struct pace *p, struct poll *o)
{
	const struct pace_config *c = &p->cfg;
	uint32_t share;

	pace__count_lanes(p);
	if (p->nactive == 0)
		return true;
	share = (c->max_lanes + p->nactive - 1) / p->nactive;
	for (uint32_t i = 0; i < c->max_lanes; i++) {
		struct lane *l = &p->lanes[i];
		struct source *s = &p->sources[l->source];
		struct group *g = pace__group(p, s);
		struct reader *r;
		uint64_t rate, lead, wend, x, ge, e;

		if (l->state != LANE_RECEIVING || l->q || l->handover ||
		    pace__caps_stream(s->caps))
			continue;
		if (!pace__reader_live(p, l->reader, l->rgen))
			continue;
		r = &p->readers[l->reader];
		if (r->nl_tmp > share || pace__reader_unowned(p, l->reader))
			continue;
		rate = l->nsamples ? l->rate : g->rate;
		if (!rate || s->excluded || g->no_queue ||
		    p->now < s->hold_until || s->collapsed_until > p->now)
			continue;
		lead = 2 * g->lat_est + QUEUE_LEAD_NS;
		if ((double)(l->end - l->frontier) * (double)SEC >
		    (double)rate * (double)lead)
			continue;
		x = pace__window_gap(p, r, &ge, &wend);
		if (x >= wend)
			continue;
		e = pace__window_end(p, r, l->source, x, ge, wend);
		if (e == x)
			continue; /* parked until the cursor moves */
		if (o->n == o->cap)
			return false;
		l->q = true;
		l->qreader = l->reader;
		l->qrgen = l->rgen;
		l->qstart = x;
		l->qend = e;
		pace__infl_add(p, e - x);
		pace__emit(&o->acts[o->n], PACE_ACT_QUEUE, p, l);
		o->acts[o->n].start = x;
		o->acts[o->n].end = e;
		o->n++;
	}
	return true;
}

size_t pace_poll(struct pace *p, uint64_t now_ns, struct pace_action *acts,
		 size_t cap)
{
	struct poll o = {.acts = acts, .cap = cap};

	if (!p || !acts || cap == 0)
		return 0;
	pace__tick(p, now_ns);
	pace__measure(p);
	p->infl = pace__inflight_sum(p);
	pace__count_lanes(p);
	o.n = pace__streams_behind(p, acts, cap);
	if (start_promoted(p, &o) && reclaim_stalled(p, &o) &&
	    yield_old_windows(p, &o) && serve_waits(p, &o) &&
	    steal_idle(p, &o, true) && read_ahead(p, &o) &&
	    steal_idle(p, &o, false) && pace__fill(p, &o))
		queue_next(p, &o);
	return o.n;
}

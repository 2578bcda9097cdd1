/* poll: pace_poll and its phases: what to start, shorten or cancel now,
 * demand first, then read-ahead inside each reader's window, steals, and
 * the ranges lanes queue behind their open requests. */
#include "pacing/pace.h"
#include "pacing/pace_int.h"

/* One poll's output, and what its phases tell the ones after them. */
struct poll {
	struct pace_action *acts;
	size_t n, cap;
	uint32_t yields; /* lanes already cancelled for a waiting read */
	bool starved;	 /* a waiting read found no lane or no budget: read-
			    ahead starts nothing in this poll */
};

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
 * own nothing. */
uint64_t pace__inflight_sum(const struct pace *p)
{
	uint64_t t = 0;

	for (uint32_t i = 0; i < p->cfg.max_lanes; i++) {
		const struct lane *l = &p->lanes[i];

		if (!pace__lane_open(l))
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

/* Counts the lanes serving each reader (nl_tmp; lanes being handed over
 * serve it no more), the readers reading
 * ahead (nactive) and those with work: a lane or a waiting read (nwork). */
static void count_lanes(struct pace *p)
{
	uint32_t nactive = 0, nwork = 0;

	for (uint32_t i = 0; i < p->n_readers; i++)
		p->readers[i].nl_tmp = 0;
	for (uint32_t i = 0; i < p->cfg.max_lanes; i++) {
		const struct lane *l = &p->lanes[i];

		if (pace__lane_open(l) && !l->handover &&
		    l->reader != PACE_NONE && l->reader < p->n_readers)
			p->readers[l->reader].nl_tmp++;
	}
	for (uint32_t i = 0; i < p->n_waits; i++) {
		const struct wait *w = &p->waits[i];

		/* A waiting read counts its reader as one with work. */
		if (w->used && w->reader != PACE_NONE &&
		    p->readers[w->reader].nl_tmp == 0)
			p->readers[w->reader].nl_tmp = UINT32_MAX;
	}
	for (uint32_t i = 0; i < p->n_readers; i++) {
		struct reader *r = &p->readers[i];

		if (r->used && r->seen && r->w > 0)
			nactive++;
		if (r->nl_tmp != 0)
			nwork++;
		if (r->nl_tmp == UINT32_MAX)
			r->nl_tmp = 0;
	}
	p->nactive = nactive;
	p->nwork = nwork;
}

/* Lanes each reader with work may have: the budget (of the mount, and of
 * an origin) shared among them. */
static uint32_t lane_share(const struct pace *p)
{
	uint32_t n = p->nwork ? p->nwork : 1;
	uint32_t lanes = p->cfg.max_lanes < p->cfg.lanes_per_source
				 ? p->cfg.max_lanes
				 : p->cfg.lanes_per_source;

	return (lanes + n - 1) / n;
}

/* The lane to give a waiting read w when none is idle, among read-ahead
 * lanes not serving bytes of w and not being handed over already. For a
 * read at a cold position (`urgent`), which must overtake read-ahead, the
 * lane whose range lies furthest ahead of its reader's cursor, to be
 * cancelled. A sequential reader's read loses less by waiting a round
 * trip than other readers lose by bytes pulled twice: while its reader
 * has a lane, whose bytes keep coming, it takes none and waits for the
 * next lane to end; a reader with none takes one of a reader holding
 * more than its share of the lanes (or of no reader), else the lane of
 * another reader that ends soonest, handed over (hand_over), not
 * cancelled. */
static struct lane *yield_victim(struct pace *p, const struct wait *w,
				 bool same_blob, bool urgent)
{
	const struct reader *wr = pace__reader_get(p, w->reader);
	bool has_lane = wr && wr->nl_tmp > 0;
	struct lane *best = NULL;
	double best_key = 0;
	uint32_t share = lane_share(p);
	int best_rank = 0;

	for (uint32_t i = 0; i < p->cfg.max_lanes; i++) {
		struct lane *l = &p->lanes[i];
		bool own = l->reader != PACE_NONE && l->reader == w->reader;
		double key;
		int rank;

		if (!pace__lane_open(l) || pace__lane_demand(l) ||
		    l->handover || (same_blob && l->blob != w->blob))
			continue;
		if (l->blob == w->blob && l->frontier < w->end &&
		    l->end > w->off)
			continue;
		if (pace__caps_stream(p->sources[l->source].caps))
			continue; /* a whole-object stream cannot restart */
		if (l->reader == PACE_NONE)
			key = 1e30;
		else if (l->frontier > p->readers[l->reader].cursor)
			key = (double)(l->frontier -
				       p->readers[l->reader].cursor);
		else
			key = 0;
		if (urgent) {
			rank = 0;
		} else if (own || has_lane) {
			continue;
		} else if (l->reader == PACE_NONE ||
			   p->readers[l->reader].nl_tmp > share) {
			rank = 2;
		} else {
			/* Soonest to end first. */
			rank = 1;
			key = -(double)(l->end - l->frontier) /
			      (double)pace__max64(l->rate, 1);
		}
		if (!best || rank > best_rank ||
		    (rank == best_rank && key > best_key)) {
			best = l;
			best_key = key;
			best_rank = rank;
		}
	}
	return best;
}

/* The lane's measured rate, or its group's until it has one. */
static uint64_t lane_rate(const struct pace *p, const struct lane *l)
{
	return l->nsamples ? l->rate : pace__expected_rate(p, l->source);
}

/* Gives lane l, a read-ahead lane of another reader, to a read that
 * waits, without pulling its bytes twice: the lane ends its request (its
 * queued range is not promoted: pace_on_done) and the read takes it then.
 * A closed connection loses what the origin sent past the new end, so
 * the end is lowered only for a request that has more than HANDOVER_NS
 * left at its rate, to what arrives in that time. Writes a SET_END when
 * the end moves (returns 1), else nothing (0). */
static int hand_over(struct pace *p, struct lane *l, struct pace_action *a)
{
	uint64_t rate = lane_rate(p, l);
	uint64_t cut = pace__align_up(
		pace__sat_add(pace__max64(l->frontier, l->start),
			      (uint64_t)((double)rate * (double)HANDOVER_NS /
					 (double)SEC)),
		p->cfg.align);

	l->handover = true;
	if (rate == 0 || cut >= l->end || l->end - cut < p->cfg.min_request)
		return 0;
	pace__infl_sub(p, l->end - cut);
	l->end = cut;
	pace__emit(a, PACE_ACT_SET_END, p, l);
	return 1;
}

/* Lane l serves a read that waits, or a reader that waited at its
 * cursor within its lead. */
static bool reader_short(const struct pace *p, const struct lane *l)
{
	const struct reader *r = pace__reader_get(p, l->reader);

	if (pace__lane_demand(l))
		return true;
	return r && r->last_wait_ns &&
	       p->now - r->last_wait_ns < p->cfg.lead_ns;
}

/* The bytes past lane l's frontier that its origin may have sent already
 * (in flight, in socket buffers): two round trips of its rate, CUT_MIN_NS
 * at least. Lowering its end below them pulls them twice. */
static uint64_t lane_wire(const struct pace *p, const struct lane *l)
{
	const struct group *g = pace__group(p, &p->sources[l->source]);
	uint64_t rate =
		l->nsamples ? l->rate : pace__expected_rate(p, l->source);
	uint64_t t = pace__max64(2 * g->lat_est, CUT_MIN_NS);

	return (uint64_t)((double)rate * (double)t / (double)SEC);
}

/* Steal to equalise: idle lane t takes the tail of the busy range that
 * will finish last (a collapsed lane first), split by the two rates so
 * both end together, past the victim's frontier, never emptying it and
 * never below min_request. Writes SET_END and START. */
static int steal(struct pace *p, struct lane *t, struct pace_action *a,
		 size_t room, bool collapsed_only)
{
	const struct pace_config *c = &p->cfg;
	struct lane *v = NULL;
	double v_eta = 0;
	uint32_t src;
	double rv, rt, lat, rem, k;
	uint64_t split, old_end;

	if (room < 2)
		return 0;
	for (uint32_t i = 0; i < c->max_lanes; i++) {
		struct lane *l = &p->lanes[i];
		bool collapsed = l->state == LANE_COLLAPSED;
		double eta;

		if (!pace__lane_receiving(l) ||
		    pace__caps_stream(p->sources[l->source].caps))
			continue;
		if (l->end - l->frontier < c->min_request + c->align)
			continue;
		/* A lane not measured yet is taken at its group's rate when
		 * its reader is short of bytes (it waits, or waited lately):
		 * its request would hold it back. */
		if (!collapsed &&
		    (collapsed_only ||
		     (l->nsamples == 0 && !(pace__expected_rate(p, l->source) &&
					    reader_short(p, l)))))
			continue;
		/* The tail must still be wanted: inside its reader's window
		 * now, or part of a read that waits. */
		if (!pace__lane_demand(l)) {
			const struct reader *r =
				l->reader != PACE_NONE ? &p->readers[l->reader]
						       : NULL;

			if (!r || !r->used ||
			    l->end > pace__sat_add(r->cursor, r->w))
				continue;
		}
		eta = (double)(l->end - l->frontier) /
		      (double)pace__max64(lane_rate(p, l), 1);
		if (collapsed)
			eta += 1e12; /* always first */
		if (!v || eta > v_eta) {
			v = l;
			v_eta = eta;
		}
	}
	if (!v)
		return 0;
	src = pace__pick_source(p, v->blob, v->state == LANE_COLLAPSED);
	if (src == PACE_NONE)
		return 0;
	rv = (double)pace__max64(lane_rate(p, v), 1);
	rt = (double)pace__expected_rate(p, src);
	if (rt <= 0) {
		/* An untried source: assume it as good as the best known. */
		const struct blob *b = &p->blobs[v->blob];

		rt = rv;
		for (uint32_t i = b->first_src; i != PACE_NONE;
		     i = p->sources[i].next) {
			const struct group *g = pace__group(p, &p->sources[i]);

			if ((double)g->peak > rt)
				rt = (double)g->peak;
		}
	}
	lat = (double)pace__group(p, &p->sources[src])->lat_est / (double)SEC;
	rem = (double)(v->end - v->frontier);
	k = rv * (lat * rt + rem) / (rv + rt);
	if (k >= rem)
		return 0;
	split = pace__align_up(v->frontier + (uint64_t)k, c->align);
	/* Not below what the origin has sent already. */
	split = pace__max64(
		split,
		pace__align_up(pace__sat_add(v->frontier, lane_wire(p, v)),
			       c->align));
	/* The taker's part must outlast its round trip several times over,
	 * or the request costs more than it saves. */
	if (split >= v->end || v->end - split < c->min_request ||
	    (double)(v->end - split) < rt * lat * STEAL_RTTS)
		return 0;
	old_end = v->end;
	v->end = split;
	pace__emit(&a[0], PACE_ACT_SET_END, p, v);
	pace__lane_start(p, t, v->blob, src, split, old_end, v->reader, v->wait,
			 &a[1]);
	p->stats.steals++;
	return 2;
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

		if (!pace__lane_open(l) ||
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

/* Lane l, receiving for a while, holds bytes that waiting read w needs,
 * and another source of the blob takes a lane now and would do better:
 * its own source is in a collapse hold (a lane started there after the
 * collapse never collapses against its own level), the other source's
 * connections are more than SLOW_FACTOR times faster, or l at its rate
 * would miss w's deadline (an untried source is then worth the risk).
 * The other source is the one the read would get were l taken back
 * (l's lane is free for another source of its group then); where that is
 * l's own, the best of the others that has not failed lately, and l's
 * source is then to be passed over as a collapsed one (*hold), so that
 * the range goes to it. */
static bool lane_outpaced(struct pace *p, struct lane *l, const struct wait *w,
			  bool *hold)
{
	struct source *own = &p->sources[l->source];
	struct group *g = pace__group(p, own);
	uint64_t left, deadline;
	uint32_t alt;

	*hold = false;
	if (l->state != LANE_RECEIVING || l->nsamples < COLLAPSE_MIN_SAMPLES)
		return false;
	own->lanes--;
	g->lanes--;
	alt = pace__pick_source(p, w->blob, true);
	if (alt == l->source) {
		own->excluded = true;
		alt = pace__pick_source(p, w->blob, true);
		own->excluded = false;
		*hold = true;
		if (alt != PACE_NONE && p->sources[alt].faults != 0)
			alt = PACE_NONE;
	}
	own->lanes++;
	g->lanes++;
	if (alt == PACE_NONE || p->sources[alt].collapsed_until > p->now)
		return false;
	if (own->collapsed_until > p->now ||
	    (double)pace__expected_rate(p, alt) > (double)l->rate * SLOW_FACTOR)
		return true;
	deadline = pace__sat_add(w->begin_ns, p->cfg.deadline_ns);
	left = deadline > p->now ? deadline - p->now : 0;
	return (double)(pace__min64(w->end, l->end) - l->frontier) *
		       (double)SEC >
	       (double)pace__max64(l->rate, 1) * (double)left;
}

/* Lane l runs at under 1/LAG_FACTOR of the fastest lane of its own group
 * of late (group.fast), both over their requests (pace__lane_recv_rate).
 * A shaping cap or a slow origin slows every lane of a source alike; a
 * source whose fastest lane still runs at a rate beside l is not at its
 * cap: l's connection is slow on its own (a small send buffer that waits
 * on late ACKs, issue 21), and what l has yet to fetch comes sooner from
 * the others. */
static bool lagging_lane(const struct pace *p, const struct lane *l)
{
	const struct group *g = pace__group(p, &p->sources[l->source]);
	uint64_t r = pace__lane_recv_rate(p, l);

	if (l->state != LANE_RECEIVING || r == 0 ||
	    p->now - g->fast_at > FAST_KEEP_NS)
		return false;
	return (double)r * LAG_FACTOR < (double)g->fast;
}

/* A read waits on bytes of lane l (of its open request, x its first
 * missing byte, or of its queued range) and l lags its source's other
 * lanes (lagging_lane): l keeps what is on the wire (lane_wire) and gives
 * back the rest of its open request, which the next lane to free up takes
 * (a waiting read first, then read-ahead), rather than the reader
 * consuming at l's pace while the fast lanes run ahead of it. Its queued
 * range stays its own (the executor may have sent it ahead). Returns
 * whether it wrote a SET_END to a, counted in *n. */
static bool cut_lagging(struct pace *p, struct lane *l, uint64_t x,
			struct pace_action *a, size_t *n)
{
	uint64_t cut;

	if (pace__caps_stream(p->sources[l->source].caps) ||
	    !lagging_lane(p, l))
		return false;
	cut = pace__align_up(
		pace__sat_add(pace__max64(l->frontier, pace__min64(x, l->end)),
			      lane_wire(p, l)),
		p->cfg.align);
	if (cut < l->end && l->end - cut >= p->cfg.min_request) {
		pace__infl_sub(p, l->end - cut);
		l->end = cut;
		pace__emit(a, PACE_ACT_SET_END, p, l);
		(*n)++;
		return true;
	}
	return false;
}

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
 * for it: on a near origin a round trip carries a large read whole. */
static uint64_t split_least(const struct pace *p, uint32_t src)
{
	const struct group *g;
	uint64_t rate;

	if (src == PACE_NONE)
		return p->cfg.min_request;
	g = pace__group(p, &p->sources[src]);
	rate = pace__expected_rate(p, src);
	if (rate == 0)
		rate = g->short_rate;
	return pace__max64(
		pace__align_up((uint64_t)((double)rate * (double)g->lat_est /
					  (double)SEC),
			       p->cfg.align),
		p->cfg.min_request);
}

/* A read of w's reader continues its run, or starts one at the file's
 * start that is too small to be worth splitting over lanes: its window
 * comes with it. */
static bool wait_sequential(const struct pace *p, const struct wait *w,
			    const struct reader *r)
{
	if (!r || r->w == 0 || !r->evident)
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
 * read-ahead request that would follow the read. */
static uint64_t wait_reach(const struct pace *p, const struct wait *w)
{
	const struct reader *r = pace__reader_get(p, w->reader);
	uint64_t wend;

	if (!r)
		return w->end;
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
static uint64_t demand_share(const struct pace *p, const struct wait *w,
			     uint64_t x, uint32_t src, uint64_t *lim)
{
	const struct reader *r = pace__reader_get(p, w->reader);
	uint64_t left = w->end - x, wend, want, lanes, span;
	uint32_t n, share;

	*lim = UINT64_MAX;
	if (wait_sequential(p, w, r)) {
		if (src == PACE_NONE)
			return left;
		wend = pace__align_down(pace__sat_add(r->cursor, r->w),
					p->cfg.align);
		*lim = pace__max64(wend, w->end);
		lanes = pace__min64(p->cfg.max_lanes, p->cfg.lanes_per_source);
		n = (uint32_t)pace__max64(p->nactive, 1);
		share = (uint32_t)pace__max64((lanes + n - 1) / n, 1);
		want = pace__min64(pace__request_want(p, src, r->w),
				   r->w / share);
		return pace__max64(left, want);
	}
	left = wait_reach(p, w) - x;
	/* A large read's pieces (whole chunks still: a cache in front keys
	 * on them) bound the requests; a read alone is one chunk at least. */
	if (wait_reach(p, w) > w->end)
		*lim = pace__align_up(wait_reach(p, w), p->cfg.align);
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
static uint32_t yields_wanted(struct pace *p, const struct wait *w, uint64_t x)
{
	const struct reader *r = pace__reader_get(p, w->reader);
	uint64_t n, least;

	if (wait_sequential(p, w, r))
		return 1;
	least = split_least(p, pace__pick_source(p, w->blob, true));
	n = (wait_reach(p, w) - x + least - 1) / least;
	return (uint32_t)pace__min64(pace__max64(n, 1), p->cfg.max_lanes);
}

/* One waiting read: its missing bytes go to idle lanes, or read-ahead
 * yields a lane to it. */
static bool serve_wait(struct pace *p, struct poll *o, uint32_t wi)
{
	const struct pace_config *c = &p->cfg;
	struct wait *w = &p->waits[wi];
	struct blob *b = &p->blobs[w->blob];

	for (;;) {
		uint64_t ge, x, e, want, lim,
			oend = 0, a0 = pace__align_down(w->off, c->align);
		uint32_t src;
		struct lane *l, *own;
		bool hold = false;

		x = pace__ranges_next_missing(&b->held, a0);
		own = x < w->end ? owner_of(p, w->blob, x, &oend) : NULL;
		if (own && o->n < o->cap &&
		    cut_lagging(p, own, x, &o->acts[o->n], &o->n))
			p->stats.steals++;
		/* Bytes in a queued range come right after that lane's open
		 * request: nothing to hurry. */
		if (own && oend != own->end)
			own = NULL;
		/* A read waits on a collapsed lane, or on one far slower
		 * than another source would be: take its range back now
		 * (received bytes are kept). */
		if (own && !pace__caps_stream(p->sources[own->source].caps) &&
		    (own->state == LANE_COLLAPSED ||
		     lane_outpaced(p, own, w, &hold))) {
			struct source *os = &p->sources[own->source];

			if (o->n == o->cap)
				return false;
			if (hold && own->state != LANE_COLLAPSED)
				os->collapsed_until = pace__max64(
					os->collapsed_until,
					pace__sat_add(p->now,
						      COLLAPSE_HOLD_NS));
			pace__lane_cancel(p, own, true, &o->acts[o->n++]);
			p->stats.reclaims++;
			continue;
		}
		/* The bytes wanted lie far down a lane's range: split them
		 * off rather than wait for the lane to get there. A
		 * sequential reader's lane brings them in order: only when
		 * it is more than two round trips away from them. */
		if (own && !pace__caps_stream(p->sources[own->source].caps) &&
		    x >= own->frontier + 2 * c->min_request &&
		    (!wait_sequential(p, w, pace__reader_get(p, w->reader)) ||
		     x - own->frontier > lane_wire(p, own)) &&
		    pace__align_down(x, c->align) > own->frontier &&
		    pace__idle_lane(p) &&
		    pace__pick_source(p, w->blob, true) != PACE_NONE) {
			if (o->n == o->cap)
				return false;
			pace__infl_sub(
				p, own->end - pace__align_down(x, c->align));
			own->end = pace__align_down(x, c->align);
			pace__emit(&o->acts[o->n++], PACE_ACT_SET_END, p, own);
			p->stats.steals++;
		}
		x = pace__first_free(p, w->blob, a0, wait_reach(p, w), &ge);
		if (x >= wait_reach(p, w))
			break;
		src = pace__pick_source(p, w->blob, true);
		l = pace__idle_lane(p);
		want = demand_share(p, w, x, src, &lim);
		e = pace__request_end(p, b, x, want, ge, lim);
		if (e < b->size)
			e = pace__budget_fit(p, x, e);
		else if (e - x > budget_room(p))
			e = x; /* the blob's unaligned tail must fit */
		if (src != PACE_NONE && l && e > x) {
			if (o->n == o->cap)
				return false;
			pace__lane_start(p, l, w->blob, src, x, e, w->reader,
					 wi, &o->acts[o->n++]);
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
		/* With the blob's sources at their lane caps, only a lane on
		 * the blob frees one for the read. A read at a cold position
		 * takes as many as its split needs, at once; a sequential
		 * reader's read has one handed over. */
		for (uint32_t k = 0, need = yields_wanted(p, w, x); k < need;
		     k++) {
			const struct reader *wr =
				pace__reader_get(p, w->reader);
			bool urgent = !wait_sequential(p, w, wr);

			l = yield_victim(p, w, src == PACE_NONE, urgent);
			if (!l)
				break;
			if (o->n == o->cap)
				return false;
			if (urgent)
				pace__lane_cancel(p, l, false,
						  &o->acts[o->n++]);
			else
				o->n += (size_t)hand_over(p, l, &o->acts[o->n]);
		}
		break;
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

/* Demand first, the oldest wait first, then the others in slot order:
 * every wait becomes the oldest in its turn, so none starves, however the
 * others come and go. */
static bool serve_waits(struct pace *p, struct poll *o)
{
	uint32_t first = oldest_wait(p);

	for (uint32_t k = 0, nw = p->n_waits; k < nw; k++) {
		uint32_t wi = (first + k) % nw;

		if (p->waits[wi].used && !serve_wait(p, o, wi))
			return false;
	}
	return true;
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
		k = steal(p, l, o->acts + o->n, o->cap - o->n, collapsed_only);
		if (k == 0)
			break;
		o->n += (size_t)k;
	}
	return true;
}

/* Read-ahead inside each reader's window: deficit round robin over
 * readers, one request per reader per turn, costed in bytes plus a
 * request's worth for the round trip; idle credit is capped. */
static bool read_ahead(struct pace *p, struct poll *o)
{
	const struct pace_config *c = &p->cfg;
	const uint64_t quantum = c->max_request + c->min_request;
	uint32_t served = PACE_NONE;

	if (o->starved || first_hold(p))
		return false;
	if (!p->n_readers)
		return true;
	for (int round = 0; round < 4 && pace__idle_lane(p); round++) {
		bool work = false;

		for (uint32_t k = 0; k < p->n_readers; k++) {
			uint32_t ri = (p->rr + k) % p->n_readers;
			struct reader *r = &p->readers[ri];
			uint64_t wend, x, ge, e, cost;
			uint32_t src;
			struct lane *l;

			if (!r->used || !r->seen || r->w == 0)
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

/* Queued ranges: a busy read-ahead lane whose open request ends within
 * twice its source's latency plus QUEUE_LEAD_NS takes the next range of
 * its reader's window, on the same source, so that no round trip separates
 * two requests. A reader keeps no more than its share of the lanes, so
 * chaining never starves another reader of turns. */
static bool queue_next(struct pace *p, struct poll *o)
{
	const struct pace_config *c = &p->cfg;
	uint32_t share;

	count_lanes(p);
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
		if (r->nl_tmp > share)
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
	count_lanes(p);
	if (start_promoted(p, &o) && reclaim_stalled(p, &o) &&
	    yield_old_windows(p, &o) && serve_waits(p, &o) &&
	    steal_idle(p, &o, true) && read_ahead(p, &o) &&
	    steal_idle(p, &o, false))
		queue_next(p, &o);
	return o.n;
}

/* cut: when a lane's request is shortened or taken back for a read that
 * waits (poll.c's serve_wait, steal_idle, read_ahead): handing a lane
 * over at the end of what is on the wire, a steal of an idle lane's share
 * of another's range, a lane outpaced by another source, and a slow
 * connection beside fast ones of its own origin. */
#include "pacing/pace.h"
#include "pacing/pace_int.h"

/* The lane's measured rate, or its group's until it has one. */
static uint64_t lane_rate(const struct pace *p, const struct lane *l)
{
	return l->nsamples ? l->rate : pace__expected_rate(p, l->source);
}

/* Gives lane l, a lane of another reader, to a read that waits, without
 * pulling its bytes twice: the lane ends its request (its queued range is
 * not promoted: pace_on_done) and the read takes it then. A closed
 * connection loses what the origin sent past the new end, so the end is
 * lowered only for a request that has more than HANDOVER_NS left at its
 * rate, to what arrives in that time, on a chunk boundary. A lane that
 * trickles (a file its origin sends far slower than a chunk in
 * HANDOVER_NS: a path capped on its own) would hold the read for many
 * times that before it reached the boundary: it ends where what is on
 * its wire ends (pace__lane_wire), off the boundary, within about a round
 * trip. Writes a SET_END when the end moves (returns 1), else nothing
 * (0). */
int pace__hand_over(struct pace *p, struct lane *l, struct pace_action *a)
{
	uint64_t rate = lane_rate(p, l);
	uint64_t from = pace__max64(l->frontier, l->start);
	uint64_t reach =
		(uint64_t)((double)rate * (double)HANDOVER_NS / (double)SEC);
	uint64_t cut = pace__align_up(pace__sat_add(from, reach), p->cfg.align);

	l->handover = true;
	if (rate == 0)
		return 0;
	if (cut - from > 2 * reach) {
		cut = pace__sat_add(from,
				    pace__max64(pace__lane_wire(p, l), 1));
		if (cut >= l->end)
			return 0;
	} else if (cut >= l->end || l->end - cut < p->cfg.min_request) {
		return 0;
	}
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
uint64_t pace__lane_wire(const struct pace *p, const struct lane *l)
{
	const struct group *g = pace__group(p, &p->sources[l->source]);
	uint64_t rate =
		l->nsamples ? l->rate : pace__expected_rate(p, l->source);
	uint64_t t = pace__max64(2 * g->lat_est, CUT_MIN_NS);

	return (uint64_t)((double)rate * (double)t / (double)SEC);
}

/* The same for splitting lane l's range (a steal, a read waiting far down
 * it), where the client may be the slow part: when its group's short
 * whole requests (group.short_rate: what a connection carries once bytes
 * flow, trusted up to twice the bytes they carried) ran more than
 * LAG_FACTOR times faster than its fastest lane of late (group.fast), at
 * their rate. A fast link with the daemon's CPU busy takes bytes far more
 * slowly than its connections bring them: the origin has put the rest of
 * the request in the socket buffers, and on loopback a lane split 128 KiB
 * past its start, for a read waiting there, pulled its whole request
 * twice. A far origin's short requests run at its connections' rate. Not
 * for a hand-over or a lagging lane's cut (pace__lane_wire): there the
 * lane's connection is the slow part (a file its origin caps on its own),
 * and waiting for a trickle's "wire" held a read for seconds. */
uint64_t pace__lane_sent(const struct pace *p, const struct lane *l)
{
	const struct group *g = pace__group(p, &p->sources[l->source]);
	uint64_t t = pace__max64(2 * g->lat_est, CUT_MIN_NS);
	uint64_t own = pace__lane_wire(p, l);
	double conn;

	if ((double)g->short_rate <= (double)g->fast * LAG_FACTOR)
		return own;
	conn = (double)g->short_rate * (double)t / (double)SEC;
	if (conn > 2.0 * (double)g->short_bytes)
		conn = 2.0 * (double)g->short_bytes;
	return pace__max64(own, (uint64_t)conn);
}

/* Steal to equalise: idle lane t takes the tail of the busy range that
 * will finish last (a collapsed lane first), split by the two rates so
 * both end together, past the victim's frontier, never emptying it and
 * never below min_request. Writes SET_END and START. */
int pace__steal(struct pace *p, struct lane *t, struct pace_action *a,
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
	split = pace__max64(split,
			    pace__align_up(pace__sat_add(v->frontier,
							 pace__lane_sent(p, v)),
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
bool pace__lane_outpaced(struct pace *p, struct lane *l, const struct wait *w,
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
 * on late ACKs), and what l has yet to fetch comes sooner from the
 * others. Cut, rather than left: a reader waiting at a slow lane's
 * frontier moved at that lane's pace while the fast lanes filled its
 * window and never went idle for a steal, and a mount of one URL has no
 * other source to take the range back for (a far origin's reader got
 * 24.9 MB/s where 8 curl ranges got 61.4; docs/pacing.md, "Lanes that
 * crawl beside fast ones"). */
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
bool pace__cut_lagging(struct pace *p, struct lane *l, uint64_t x,
		       struct pace_action *a, size_t *n)
{
	uint64_t cut;

	if (pace__caps_stream(p->sources[l->source].caps) ||
	    !lagging_lane(p, l))
		return false;
	cut = pace__align_up(
		pace__sat_add(pace__max64(l->frontier, pace__min64(x, l->end)),
			      pace__lane_wire(p, l)),
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

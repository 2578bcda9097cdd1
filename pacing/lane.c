/* lane: a lane's life, from START to pace_on_done: its states and their
 * one transition function, the bytes it is credited, and how its request
 * ends (faults, throttling, the queued range that takes over). */
#include "pacing/pace.h"
#include "pacing/pace_int.h"

#include <assert.h>
#include <errno.h>
#ifdef PACE_TRACE
#include <stdio.h>
#endif
#include <string.h>

static const char *const lane_state_names[LANE_NSTATES] = {
	[LANE_IDLE] = "idle",
	[LANE_PROMOTED] = "promoted",
	[LANE_REQUESTED] = "requested",
	[LANE_RECEIVING] = "receiving",
	[LANE_COLLAPSED] = "collapsed",
	[LANE_YIELDING] = "yielding",
	[LANE_RECLAIMING] = "reclaiming",
};

void pace__lane_set(struct pace *p, struct lane *l, enum lane_state to)
{
	assert(to < LANE_NSTATES);
#ifdef PACE_TRACE
	fprintf(stderr, "pace: lane %u %s -> %s\n", (unsigned)(l - p->lanes),
		lane_state_names[l->state], lane_state_names[to]);
#endif
	(void)lane_state_names;
	struct source *s = &p->sources[l->source];

	if (l->state == LANE_IDLE && to != LANE_IDLE) {
		s->lanes++;
		pace__group(p, s)->lanes++;
	} else if (l->state != LANE_IDLE && to == LANE_IDLE) {
		s->lanes--;
		pace__group(p, s)->lanes--;
	}
	l->state = to;
}

struct lane *pace__idle_lane(struct pace *p)
{
	for (uint32_t i = 0; i < p->cfg.max_lanes; i++)
		if (p->lanes[i].state == LANE_IDLE)
			return &p->lanes[i];
	return NULL;
}

void pace__emit(struct pace_action *a, enum pace_action_kind k,
		const struct pace *p, const struct lane *l)
{
	a->kind = k;
	a->lane = (uint32_t)(l - p->lanes);
	a->blob = l->blob;
	a->source = l->source;
	a->start = l->start;
	a->end = l->end;
	a->faulted = false;
	a->fill = false;
}

void pace__lane_start(struct pace *p, struct lane *l, uint32_t blob,
		      uint32_t src, uint64_t x, uint64_t e, uint32_t reader,
		      uint32_t wait, struct pace_action *a)
{
	struct blob *b = &p->blobs[blob];
	struct source *s = &p->sources[src];

	if (pace__caps_stream(s->caps)) {
		/* A whole-object stream comes from byte 0 whatever is
		 * asked: it owns every byte from the first it brings that
		 * is missing (the caller skips those before), to the end,
		 * so that a read far ahead waits for it and nothing else
		 * asks those bytes again. */
		x = pace__ranges_next_missing(&b->held, 0);
		e = b->size;
	}
	if (s->caps != PACE_CAPS_FULL)
		b->pinned = src;
	l->blob = blob;
	l->source = src;
	l->reader = reader;
	l->rgen = reader != PACE_NONE ? p->readers[reader].gen : 0;
	l->ahead = wait == PACE_NONE;
	l->wait = wait;
	l->start = x;
	l->frontier = x;
	l->end = e;
	l->last_progress_ns = p->now;
	l->started_ns = p->now;
	l->rate_t0 = p->now;
	l->rate_bytes = 0;
	l->rate = 0;
	l->level = 0;
	l->nsamples = 0;
	l->was_queued = false;
	l->handover = false;
	l->fill = false;
	l->q = false;
	l->held = false;
	pace__lane_set(p, l, LANE_REQUESTED);
	if (!pace__caps_stream(s->caps)) /* not in the budget: poll.c */
		pace__infl_add(p, e - x);
	p->stats.requests++;
	pace__emit(a, PACE_ACT_START, p, l);
}

void pace__lane_cancel(struct pace *p, struct lane *l, bool reclaim,
		       struct pace_action *a)
{
	pace__emit(a, PACE_ACT_CANCEL, p, l);
	a->faulted =
		reclaim && (l->state == LANE_COLLAPSED ||
			    p->now - l->last_progress_ns >= p->cfg.stall_ns);
	if (pace__lane_open(l) &&
	    !pace__caps_stream(p->sources[l->source].caps))
		pace__infl_sub(p, l->end - l->frontier +
					  (l->q ? l->qend - l->qstart : 0));
	l->q = false;
	pace__lane_set(p, l, reclaim ? LANE_RECLAIMING : LANE_YIELDING);
}

int pace_on_data(struct pace *p, uint32_t lane, uint64_t off, uint64_t len,
		 uint64_t now_ns)
{
	struct lane *l;
	struct blob *b;
	uint64_t s, e, added = 0;
	int rc;

	if (!p || lane >= p->cfg.max_lanes)
		return -ENOENT;
	if (len > UINT64_MAX - off)
		return -EINVAL;
	pace__tick(p, now_ns);
	l = &p->lanes[lane];
	/* Late bytes of a cancelled request, or of a promoted range whose
	 * START has not gone out (fetch/ holds those), are not credited. */
	if (l->state != LANE_REQUESTED && !pace__lane_receiving(l))
		return 0;
	s = pace__max64(off, l->start);
	e = pace__min64(off + len, l->end);
	if (s >= e)
		return 0;
	b = &p->blobs[l->blob];
	rc = pace__ranges_add(&b->held, s, e, &added);
	if (rc)
		return rc;
	p->stats.bytes_in += added;
	l->frontier = pace__max64(l->frontier, e);
	l->last_progress_ns = p->now;
	p->sources[l->source].faults = 0;
	p->sources[l->source].served_ns = p->now;
	p->sources[l->source].refused_alone = false;
	if (l->state == LANE_REQUESTED) {
		struct group *g = pace__group(p, &p->sources[l->source]);
		uint64_t lat = p->now - l->started_ns;

		pace__lane_set(p, l, LANE_RECEIVING);
		l->rate_t0 = p->now;
		l->recv_t0 = p->now;
		l->recv_bytes = 0;
		if (!l->was_queued) /* a queued request hides its latency */
			g->lat_est = pace__smooth(g->lat_est, lat);
	} else {
		l->rate_bytes += e - s;
		l->recv_bytes += e - s;
	}
	pace__rate_update(p, l);
	return 0;
}

/* A 429 or 503 on lane l. While other lanes of the source's group are
 * open, it delivered bytes shortly before l's request went out (a transfer
 * that just ended or was cancelled may still count at the origin), or l's
 * request was sent ahead of its predecessor's end, the origin serves some
 * and refuses more: the group's lane cap drops to the lanes still open
 * (at least one), so that a burst of refusals converges on the
 * concurrency the origin accepts within one round trip; no lane that is
 * receiving is stopped, and the cap does not grow back before
 * Retry-After. That grace covers one lone refusal after the source's
 * last byte: a second one means the origin refuses this client now (some
 * refuse every request for the Retry-After they asked, and a retry at
 * once only renews it). Otherwise the origin refuses everything: the
 * source is suspended as Retry-After asks (its backoff at least) and its
 * cap halved. */
static void throttled(struct pace *p, struct lane *l, struct source *s,
		      uint64_t retry_after_ns)
{
	struct group *g = pace__group(p, s);
	uint32_t others = 0, cap;

	/* The server's Retry-After is an input like any other: a hold of
	 * years would leave the source dead until a remount. */
	retry_after_ns = pace__min64(retry_after_ns, p->cfg.retry_after_max_ns);
	for (uint32_t i = 0; i < p->cfg.max_lanes; i++) {
		const struct lane *o = &p->lanes[i];

		if (o != l && pace__lane_open(o) &&
		    p->sources[o->source].group == s->group)
			others++;
	}
	/* A request that was queued went out before its predecessor
	 * ended: the origin refused the overlap, not the source's lane. It
	 * takes no more ranges sent ahead until its cap grows again. */
	if (l->was_queued)
		g->no_queue = true;
	if (others > 0 || l->was_queued ||
	    (s->served_ns != 0 && !s->refused_alone &&
	     pace__sat_add(s->served_ns, SERVED_GRACE_NS) >= l->started_ns)) {
		if (others == 0 && !l->was_queued)
			s->refused_alone = true;
		cap = others;
	} else {
		uint64_t before = s->hold_until;

		pace__source_backoff(p, s, retry_after_ns);
		/* Jitter does not stretch it past the cap either. */
		s->hold_until = pace__max64(
			before,
			pace__min64(s->hold_until,
				    pace__sat_add(p->now,
						  p->cfg.retry_after_max_ns)));
		cap = g->lane_cap / 2;
	}
	if (cap == 0)
		cap = 1;
	if (cap < g->lane_cap) {
		g->lane_cap = cap;
		p->stats.throttle_cuts++;
	}
	g->inc_at = pace__max64(
		g->inc_at,
		pace__max64(pace__sat_add(s->hold_until, AIMD_INC_NS),
			    pace__sat_add(p->now, pace__max64(retry_after_ns,
							      AIMD_INC_NS))));
}

/* A request that ended whole before its first rate window closed still
 * says how fast one connection delivers once bytes flow: the bytes after
 * its first piece over the time they took. Random reads of a chunk or two
 * never last a window, and without this the group's rate stays unknown
 * and a read at a cold position is split as if a round trip carried
 * nothing (split_least). */
static void short_sample(struct lane *l, struct group *g, uint64_t now)
{
	uint64_t dt = now - l->rate_t0, sample;

	if (l->nsamples > 0 || l->rate_bytes == 0 || dt == 0 ||
	    l->state != LANE_RECEIVING)
		return;
	sample = (uint64_t)((double)l->rate_bytes * (double)SEC / (double)dt);
	g->short_rate = pace__smooth(g->short_rate, sample);
	g->short_bytes = pace__smooth(g->short_bytes, l->rate_bytes);
}

/* Adjusts the source for how the lane's request ended. */
static void judge_source(struct pace *p, struct lane *l, struct source *s,
			 enum pace_outcome outcome, uint64_t retry_after_ns)
{
	switch (outcome) {
	case PACE_OUT_OK:
		if (pace__ranges_covers(&p->blobs[l->blob].held, l->start,
					l->end)) {
			struct group *g = pace__group(p, s);

			s->backoff = p->cfg.backoff_ns;
			short_sample(l, g, p->now);
			/* Additive increase after a throttle cut. */
			if (g->lane_cap < p->cfg.lanes_per_source &&
			    p->now >= g->inc_at) {
				g->lane_cap++;
				g->no_queue = false;
				g->inc_at = pace__sat_add(p->now, AIMD_INC_NS);
			}
		} else if (pace__lane_open(l)) {
			pace__source_backoff(p, s, 0); /* a short body */
		}
		break;
	case PACE_OUT_CANCELLED:
		break;
	case PACE_OUT_TRANSIENT:
		if (l->frontier > l->start) {
			/* It broke after delivering: the source works, so
			 * pause briefly without growing the backoff. */
			s->hold_until = pace__max64(
				s->hold_until,
				pace__sat_add(
					p->now,
					pace__jitter(p, p->cfg.backoff_ns)));
		} else {
			if (l->state != LANE_RECLAIMING)
				pace__source_backoff(p, s, 0);
			s->faults++;
			s->fault_ns = p->now;
		}
		break;
	case PACE_OUT_THROTTLED:
		throttled(p, l, s, retry_after_ns);
		break;
	case PACE_OUT_GONE:
	case PACE_OUT_FATAL:
		pace__source_exclude(p, s);
		break;
	case PACE_OUT_LOCAL:
		/* Not the source's fault: neither counted nor grown, but a
		 * pause all the same, so that a failure that repeats (a
		 * transfer that cannot be set up) is not retried in a busy
		 * loop. */
		s->hold_until = pace__max64(
			s->hold_until,
			pace__sat_add(p->now,
				      pace__jitter(p, p->cfg.backoff_ns)));
		break;
	}
}

int pace_on_done(struct pace *p, uint32_t lane, enum pace_outcome outcome,
		 uint64_t retry_after_ns, uint64_t now_ns)
{
	struct lane *l;

	if (!p || lane >= p->cfg.max_lanes)
		return -ENOENT;
	if ((unsigned)outcome > PACE_OUT_LOCAL)
		return -EINVAL;
	pace__tick(p, now_ns);
	l = &p->lanes[lane];
	if (l->state == LANE_IDLE)
		return -EINVAL;
	judge_source(p, l, &p->sources[l->source], outcome, retry_after_ns);
	/* A request that ended whole hands over to its queued range: the lane
	 * stays open, and the next poll emits the START (checked again
	 * there). Any other end drops the queued range with it. */
	if (l->q && !l->handover && outcome == PACE_OUT_OK &&
	    pace__lane_open(l) &&
	    pace__ranges_covers(&p->blobs[l->blob].held, l->start, l->end)) {
		l->q = false;
		l->was_queued = true;
		l->ahead = true;
		l->wait = PACE_NONE;
		l->reader = l->qreader;
		l->rgen = l->qrgen;
		l->start = l->frontier = l->qstart;
		l->end = l->qend;
		l->last_progress_ns = p->now;
		l->started_ns = p->now;
		l->rate_t0 = p->now;
		l->rate_bytes = 0;
		l->recv_t0 = p->now;
		l->recv_bytes = 0;
		pace__lane_set(p, l, LANE_PROMOTED);
		return 0;
	}
	l->q = false;
	l->handover = false;
	/* Bytes not received are simply no longer owned: they are missing
	 * and unowned, so the next poll requests them again. */
	pace__lane_set(p, l, LANE_IDLE);
	l->wait = PACE_NONE;
	l->reader = PACE_NONE;
	l->start = l->frontier = l->end = 0;
	return 0;
}

int pace_lane_info(const struct pace *p, uint32_t lane,
		   struct pace_lane_info *out)
{
	const struct lane *l;

	if (!p || !out)
		return -EINVAL;
	if (lane >= p->cfg.max_lanes)
		return -ENOENT;
	l = &p->lanes[lane];
	memset(out, 0, sizeof(*out));
	out->busy = l->state != LANE_IDLE;
	out->blob = out->busy ? l->blob : PACE_NONE;
	out->source = out->busy ? l->source : PACE_NONE;
	out->start = l->start;
	out->frontier = l->frontier;
	out->end = l->end;
	out->rate = l->rate;
	out->collapsed = l->state == LANE_COLLAPSED;
	out->queued = pace__lane_open(l) && l->q;
	out->qstart = out->queued ? l->qstart : 0;
	out->qend = out->queued ? l->qend : 0;
	out->reader = out->busy ? l->reader : PACE_NONE;
	out->demand = out->busy && pace__lane_demand(l);
	out->progress_ns = l->last_progress_ns;
	out->held = out->busy && l->held;
	return 0;
}

/* source: what the scheduler knows of each source: its rates and
 * saturation, backoff and exclusion, and which source a new request
 * should use. */
#include "pacing/pace.h"
#include "pacing/pace_int.h"

/* xorshift64: a small deterministic generator, seeded by the config. */
static uint64_t rng_next(struct pace *p)
{
	uint64_t x = p->rng;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	p->rng = x;
	return x;
}

/* Sources backing off together do not all come back at the same
 * instant. */
uint64_t pace__jitter(struct pace *p, uint64_t d)
{
	/* In integers: a double of a hold near 2^64 does not convert back. */
	uint64_t span =
		d / 100 * p->cfg.jitter_pct + d % 100 * p->cfg.jitter_pct / 100;

	if (span == 0)
		return d;
	return pace__sat_add(d, rng_next(p) % (span + 1));
}

void pace__source_backoff(struct pace *p, struct source *s, uint64_t at_least)
{
	uint64_t d = pace__jitter(p, pace__max64(s->backoff, at_least));

	s->hold_until = pace__max64(s->hold_until, pace__sat_add(p->now, d));
	s->backoff = pace__min64(s->backoff * 2, p->cfg.backoff_max_ns);
}

void pace__source_exclude(struct pace *p, struct source *s)
{
	if (s->excluded)
		return;
	s->excluded = true;
	p->blobs[s->blob].n_excluded++;
}

bool pace__source_usable(const struct pace *p, const struct source *s)
{
	const struct group *g = pace__group(p, s);

	return s->used && !s->excluded && p->now >= s->hold_until &&
	       g->lanes < p->cfg.lanes_per_source && g->lanes < g->lane_cap;
}

uint64_t pace__lane_recv_rate(const struct pace *p, const struct lane *l)
{
	uint64_t dt = p->now - l->recv_t0;

	if (!pace__lane_receiving(l) || dt < FAST_MIN_NS)
		return 0;
	return (uint64_t)((double)l->recv_bytes * (double)SEC / (double)dt);
}

/* The group's fastest lane of late: a lane's rate over its request,
 * short requests included, so that lanes whose requests end before a
 * rate sample closes are seen too (they are the fast ones). */
static void fast_update(struct pace *p, struct group *g, struct lane *l)
{
	uint64_t r = pace__lane_recv_rate(p, l);

	if (r == 0)
		return;
	if (r >= g->fast || p->now - g->fast_at > FAST_KEEP_NS) {
		g->fast = r;
		g->fast_at = p->now;
	}
}

void pace__rate_update(struct pace *p, struct lane *l)
{
	struct source *s = &p->sources[l->source];
	struct group *g = pace__group(p, s);
	uint64_t dt, sample;

	/* A held stream is read by nobody: no rate (hold.c). */
	if (!pace__lane_receiving(l) || l->held)
		return;
	fast_update(p, g, l);
	dt = p->now - l->rate_t0;
	if (dt < RATE_WINDOW_NS)
		return;
	sample = (uint64_t)((double)l->rate_bytes * (double)SEC / (double)dt);
	l->rate_t0 = p->now;
	l->rate_bytes = 0;
	l->nsamples++;
	l->rate = l->nsamples == 1 ? sample : (l->rate + sample) / 2;
	g->rate = pace__smooth(g->rate, sample);
	s->rate = pace__smooth(s->rate, sample);
	if (l->state == LANE_COLLAPSED)
		return;
	/* A routed source's lanes go through caching proxies, where a slice
	 * the proxy holds comes at the link's speed and one it fills at the
	 * origin's: a fall to a fifth is a miss, not a fault, and another
	 * member would fetch that slice again. Only a stall faults a
	 * route. */
	if (!s->routed && l->nsamples >= COLLAPSE_MIN_SAMPLES && l->level &&
	    l->rate * COLLAPSE_FACTOR < l->level) {
		/* Collapse: the preferred steal victim from now on, and its
		 * source takes no new lane for a while. A range it queued
		 * stays its own (the executor may have sent it ahead); it is
		 * not promoted before the hold ends (promote_ok). */
		pace__lane_set(p, l, LANE_COLLAPSED);
		s->collapsed_until = pace__sat_add(p->now, COLLAPSE_HOLD_NS);
		s->peak = l->rate;
		g->peak = l->rate;
		g->saturated = false;
		return;
	}
	l->level = l->level ? (l->level * 7 + sample) / 8 : sample;
	if (l->nsamples >= 2 && l->level > g->peak)
		g->peak = l->level;
	if (l->nsamples >= 2 && l->level > s->peak)
		s->peak = l->level;
}

/* Lane l runs under 1/TRICKLE_FACTOR of its group's per-connection peak:
 * a file of the origin capped on its own, beside faster ones. */
static bool trickles(const struct group *g, const struct lane *l)
{
	return l->nsamples >= 2 && g->peak &&
	       (double)l->rate * TRICKLE_FACTOR < (double)g->peak;
}

/* Lanes that together give much less than lanes x per-connection rate
 * mean the group's shaping cap is reached. A lane that trickles is left
 * out of the measure and of the lanes that add rate: twelve lanes of a
 * file the origin sends at 8 KB/s each said every lane the origin had
 * added rate, and beside a fast file's they would say the origin is
 * saturated. */
void pace__measure(struct pace *p)
{
	const struct pace_config *c = &p->cfg;

	for (uint32_t i = 0; i < c->max_lanes; i++) {
		struct lane *l = &p->lanes[i];
		struct group *g;

		/* An idle lane's last group too: its trickling lanes are
		 * gone. */
		g = pace__group(p, &p->sources[l->source]);
		g->agg_tmp = 0;
		g->n_tmp = 0;
		g->trickling = 0;
		if (pace__lane_open(l))
			pace__rate_update(p, l);
	}
	for (uint32_t i = 0; i < c->max_lanes; i++) {
		struct lane *l = &p->lanes[i];
		struct group *g;

		if (!pace__lane_open(l))
			continue;
		g = pace__group(p, &p->sources[l->source]);
		if (trickles(g, l)) {
			g->trickling++;
			continue;
		}
		if (l->nsamples < 2 || l->state == LANE_COLLAPSED)
			continue;
		g->agg_tmp += l->rate;
		g->n_tmp++;
	}
	for (uint32_t i = 0; i < c->max_lanes; i++) {
		struct lane *l = &p->lanes[i];
		struct group *g;
		double full;
		bool fast_ok;

		if (!pace__lane_open(l))
			continue;
		g = pace__group(p, &p->sources[l->source]);
		if (g->n_tmp == 0)
			continue;
		full = (double)g->n_tmp * (double)g->peak;
		/* A cap slows every lane; lanes slow beside one at the full
		 * rate are slow connections of a source not at its cap. */
		fast_ok = g->fast && p->now - g->fast_at <= FAST_KEEP_NS &&
			  (double)g->fast * 100 >= (double)g->peak * SAT_PCT;
		if (g->n_tmp >= 2 && !fast_ok &&
		    (double)g->agg_tmp * 100 < full * SAT_PCT) {
			g->cap_est = g->saturated
					     ? (g->cap_est * 3 + g->agg_tmp) / 4
					     : g->agg_tmp;
			g->saturated = true;
		} else if (g->saturated &&
			   (fast_ok ||
			    (double)g->agg_tmp > (double)g->cap_est * 1.1)) {
			g->saturated = false; /* the cap rose */
		}
		/* Its lanes run at full rate (or its fastest does): every
		 * lane it has now adds rate, the young ones too, so that its
		 * lanes grow one at a time as fast as the measured ones keep
		 * their rate. */
		if (fast_ok || (double)g->agg_tmp * 100 >= full * SAT_PCT)
			g->n_ok = g->n_ok > g->lanes - g->trickling
					  ? g->n_ok
					  : g->lanes - g->trickling;
		g->n_tmp = 0; /* once per group */
	}
}

/* Rate another lane on group g would add: per-connection rate against
 * the group's shaping cap once it is known to be saturated. An unknown
 * group is assumed as good as the best known one, so it gets tried. */
static double marginal_gain(const struct group *g, uint64_t best_peak)
{
	double gain =
		(double)(g->peak ? g->peak : pace__max64(best_peak, 1) * 2);
	/* Lanes that trickle take nothing of what the origin gives. */
	uint32_t lanes = g->lanes > g->trickling ? g->lanes - g->trickling : 0;
	double n = lanes, cap = g->saturated ? (double)g->cap_est : 1e30;
	double now, next;

	/* Past the lane count seen at full rate the cap is unknown: probe
	 * one lane at a time, valued at half. */
	if (g->peak && !g->saturated && lanes >= g->n_ok) {
		if (lanes > g->n_ok)
			return 0;
		gain *= 0.5;
	}
	now = n * gain < cap ? n * gain : cap;
	next = (n + 1) * gain < cap ? (n + 1) * gain : cap;
	/* A saturated group keeps one lane beyond its cap's share, up to
	 * the count seen at full rate: it covers the round trip between
	 * one request and the next. */
	if (next - now <= 0 && g->saturated && lanes <= g->n_ok)
		return 1.0;
	return next - now;
}

/* Greedy by marginal gain; a source whose next lane adds nothing gets
 * none, unless the blob has no lane at all or the bytes are urgent. A
 * source far slower than the best one (under 1/SLOW_FACTOR of its
 * per-connection rate) is used only when nothing else serves the blob:
 * its lane would sit on the critical path. */
uint32_t pace__pick_source(struct pace *p, uint32_t blob, bool urgent)
{
	struct blob *b = &p->blobs[blob];
	uint32_t best = PACE_NONE, lanes_on_blob = 0;
	uint64_t best_peak = 0;
	double best_gain = 0;
	bool any_stream = false, any_ranged = false;

	for (uint32_t i = b->first_src; i != PACE_NONE;
	     i = p->sources[i].next) {
		lanes_on_blob += p->sources[i].lanes;
		best_peak = pace__max64(best_peak, pace__expected_rate(p, i));
		if (pace__caps_stream(p->sources[i].caps) &&
		    p->sources[i].lanes)
			any_stream = true;
		if (!pace__caps_stream(p->sources[i].caps) &&
		    pace__source_usable(p, &p->sources[i]))
			any_ranged = true;
	}
	if (b->pinned != PACE_NONE) {
		struct source *s = &p->sources[b->pinned];

		if (pace__caps_stream(s->caps) && lanes_on_blob > 0)
			return PACE_NONE;
		return pace__source_usable(p, s) ? b->pinned : PACE_NONE;
	}
	if (any_stream)
		return PACE_NONE;
	for (int pass = 0; pass < 2 && best == PACE_NONE; pass++) {
		for (uint32_t i = b->first_src; i != PACE_NONE;
		     i = p->sources[i].next) {
			struct source *s = &p->sources[i];
			double g;

			if (!pace__source_usable(p, s))
				continue;
			/* A stream-only source would pin the blob: it
			 * serves only when no source that honours Range
			 * can. */
			if (pace__caps_stream(s->caps) && any_ranged)
				continue;
			/* Pass 0 avoids collapsed sources; pass 1 takes
			 * them when nothing else can serve the blob. */
			const struct group *gr = pace__group(p, s);
			uint64_t se = pace__expected_rate(p, i);

			if (pass == 0 && (s->collapsed_until > p->now ||
					  (se && se * SLOW_FACTOR < best_peak)))
				continue;
			if (pass == 1 && lanes_on_blob > 0)
				continue;
			g = marginal_gain(gr, best_peak);
			if (s->caps != PACE_CAPS_FULL)
				g *= 0.5; /* full sources first */
			if (g <= 0 && lanes_on_blob > 0 && !urgent)
				continue;
			if (best == PACE_NONE || g > best_gain * 1.02 ||
			    (g >= best_gain * 0.98 &&
			     s->lanes < p->sources[best].lanes)) {
				best = i;
				best_gain = g;
			}
		}
	}
	if (best != PACE_NONE && pace__caps_stream(p->sources[best].caps) &&
	    lanes_on_blob > 0)
		return PACE_NONE;
	return best;
}

uint64_t pace__short_rate(const struct group *g)
{
	double cap;

	if (!g->lat_est)
		return 0;
	cap = 2.0 * (double)g->short_bytes * (double)SEC / (double)g->lat_est;
	return (double)g->short_rate > cap ? (uint64_t)cap : g->short_rate;
}

uint64_t pace__expected_rate(const struct pace *p, uint32_t src)
{
	const struct source *s = &p->sources[src];
	const struct group *g = pace__group(p, s);

	if (s->peak || s->rate)
		return s->peak ? s->peak : s->rate;
	return g->peak ? g->peak : g->rate;
}

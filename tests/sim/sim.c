/* sim: a discrete-time simulator that drives the pure scheduler with
 * simulated sources and readers, checks its invariants after every step and
 * prints per-scenario figures. This file runs one scenario: the clock, the
 * invariants and the figures; world.c is what it simulates, scenarios.c
 * what it runs. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/sim/sim_int.h"

/* A run at its time limit is still making progress if bytes arrived in
 * the last this many seconds. */
#define PROGRESS_S 10.0

/* One owner per byte; the scheduler's held bytes match what was sent. */
static int check_invariants(struct sim *s)
{
	const struct pace_config *c = &s->sc->cfg;
	struct pace_lane_info li[MAX_LANES];

	for (uint32_t i = 0; i < c->max_lanes; i++) {
		if (pace_lane_info(s->p, i, &li[i]))
			return sim__fail(s, "lane_info %u", i);
		if (li[i].busy != s->lanes[i].active)
			return sim__fail(s, "lane %u busy mismatch", i);
		if (!li[i].busy)
			continue;
		if (li[i].queued &&
		    (li[i].qstart < li[i].end && li[i].start < li[i].qend))
			return sim__fail(s,
					 "lane %u: queued range overlaps its "
					 "request",
					 i);
		for (uint32_t j = 0; j < i; j++) {
			bool o = false;

			if (!li[j].busy || li[j].blob != li[i].blob)
				continue;
			if (li[i].queued)
				o |= li[i].qstart < li[j].end &&
				     li[j].start < li[i].qend;
			if (li[j].queued)
				o |= li[j].qstart < li[i].end &&
				     li[i].start < li[j].qend;
			if (li[i].queued && li[j].queued)
				o |= li[i].qstart < li[j].qend &&
				     li[j].qstart < li[i].qend;
			if (o)
				return sim__fail(s,
						 "two owners (queued): lanes "
						 "%u,%u",
						 i, j);
		}
		for (uint32_t j = 0; j < i; j++)
			if (li[j].busy && li[j].blob == li[i].blob &&
			    li[i].start < li[j].end && li[j].start < li[i].end)
				return sim__fail(
					s,
					"two owners: lanes %u,%u [%" PRIu64
					",%" PRIu64 ") [%" PRIu64 ",%" PRIu64
					")",
					i, j, li[i].start, li[i].end,
					li[j].start, li[j].end);
	}
	/* The byte budget, counted from the executor's side; a stream, one
	 * request of the whole object that no budget can cut, is not in
	 * it (pacing/README.md). */
	{
		uint64_t infl = 0;

		for (uint32_t i = 0; i < c->max_lanes; i++) {
			const struct sim_lane *l = &s->lanes[i];

			if (!l->active ||
			    pace__caps_stream(s->sc->src[l->src].caps))
				continue;
			infl += l->end - l->pos;
			if (l->q)
				infl += l->qend - l->qstart;
		}
		if (infl > s->fig.inflight_max)
			s->fig.inflight_max = infl;
		if (c->budget_bytes && infl > c->budget_bytes)
			return sim__fail(
				s, "budget: %" PRIu64 " bytes in flight", infl);
	}
	for (int b = 0; b < s->sc->nblob; b++)
		if (pace_held_bytes(s->p, s->blob_id[b]) != s->held[b].total)
			return sim__fail(s,
					 "held mismatch blob %d: %" PRIu64
					 " vs %" PRIu64,
					 b,
					 pace_held_bytes(s->p, s->blob_id[b]),
					 s->held[b].total);
	return 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Runs one scenario; returns 0 when every check held. */
int sim__run(const struct scenario *sc, struct figures *fig, char *err,
	     size_t errlen)
{
	struct sim *s = calloc(1, sizeof(*s));
	const double dt = 0.001;
	uint64_t rng = sc->seed * 2654435761u + 1;
	uint64_t wake = 0;
	double all_t0 = -1, all_t1 = -1;
	uint64_t all_b0[MAX_BLOB] = {0}, all_b1[MAX_BLOB] = {0};
	uint64_t held_before = 0;
	int rc = -1;
	bool bad;

	if (!s)
		return -1;
	s->sc = sc;
	sim__plan_init(s);
	s->waits = calloc(MAX_SAMPLES, sizeof(double));
	if (!s->waits || pace_new(&sc->cfg, &s->p)) {
		sim__fail(s, "pace_new");
		goto out;
	}
	for (int b = 0; b < sc->nblob; b++) {
		if (pace_blob_add(s->p, sc->size[b], &s->blob_id[b])) {
			sim__fail(s, "blob_add %d", b);
			goto out;
		}
		pace__ranges_init(&s->held[b], 1u << 16);
		if (sc->held_hi[b] > sc->held_lo[b]) {
			pace_blob_held(s->p, s->blob_id[b], sc->held_lo[b],
				       sc->held_hi[b]);
			pace__ranges_add(&s->held[b], sc->held_lo[b],
					 sc->held_hi[b], NULL);
		}
	}
	for (int i = 0; i < sc->nsrc; i++)
		if (pace_source_add(s->p, s->blob_id[sc->src[i].blob],
				    sc->src[i].caps, &s->src_id[i]) ||
		    (sc->src[i].group &&
		     pace_source_set_group(s->p, s->src_id[i],
					   (uint32_t)sc->src[i].group - 1))) {
			sim__fail(s, "source_add %d", i);
			goto out;
		}
	s->collapse_detect = -1;
	if (getenv("SIM_TRACE")) {
		fprintf(stderr,
			"lanes %u/src %u align %" PRIu64 "K req %" PRIu64
			"K..%" PRIu64 "K win %" PRIu64 "K..%" PRIu64
			"K stall %.0f dl %.0f\n",
			sc->cfg.max_lanes, sc->cfg.lanes_per_source,
			(uint64_t)(sc->cfg.align / KIB),
			(uint64_t)(sc->cfg.min_request / KIB),
			(uint64_t)(sc->cfg.max_request / KIB),
			(uint64_t)(sc->cfg.window_min / KIB),
			(uint64_t)(sc->cfg.window_max / KIB),
			sc->cfg.stall_ns / 1e9, sc->cfg.deadline_ns / 1e9);
		for (int b = 0; b < sc->nblob; b++)
			fprintf(stderr,
				"blob %d size %" PRIu64 " held %" PRIu64
				"..%" PRIu64 "\n",
				b, sc->size[b], sc->held_lo[b], sc->held_hi[b]);
		for (int i = 0; i < sc->nsrc; i++) {
			const struct src_spec *ss = &sc->src[i];
			fprintf(stderr,
				"src %d blob %d rate %.1f cap %.1f lat %.3f "
				"collapse %.2f stall %.2f+%.2f die %.2f/%d 429 "
				"%.2f-%.2f ra %.2f\n",
				i, ss->blob, ss->conn_rate / 1e6, ss->cap / 1e6,
				ss->latency, ss->collapse_at, ss->stall_at,
				ss->stall_len, ss->die_at, ss->die,
				ss->t429_from, ss->t429_to, ss->retry_after);
		}
		for (int i = 0; i < sc->nrd; i++) {
			const struct rd_spec *r = &sc->rd[i];
			fprintf(stderr,
				"rd %d blob %d kind %d rate %.1f rsize %" PRIu64
				" start %" PRIu64 " n %d seek %.2f->%" PRIu64
				" open %.2f\n",
				i, r->blob, r->kind, r->rate / 1e6, r->rsize,
				r->start, r->nreads, r->seek_at, r->seek_to,
				r->open_at);
		}
	}
	for (long step = 0;; step++) {
		bool event = step == 0;
		bool all_reading = true;

		s->t = step * dt;
		s->now = (uint64_t)step * MS + 1;
		if (s->t > sc->limit) {
			char why[sizeof(s->err)];

			/* A scenario no scheduler could finish passes if
			 * bytes were still arriving: every read already
			 * ended by its deadline, or the checks would have
			 * failed it. */
			if (s->t - s->progress_t < PROGRESS_S &&
			    sim__unmeetable(sc, why, sizeof(why))) {
				snprintf(err, errlen, "%s", why);
				rc = 1;
				goto out;
			}
			sim__fail(s, "not done after %.0f s (liveness)",
				  sc->limit);
			goto out;
		}
		sim__lanes_step(s, dt, &event);
		{
			uint64_t held = 0;

			for (int b = 0; b < sc->nblob; b++)
				held += s->held[b].total;
			if (held > held_before) {
				held_before = held;
				s->progress_t = s->t;
			}
		}
		if (sim__readers_step(s, &rng, &event))
			goto out;
		if (sim__plan_step(s, &event))
			goto out;
		if (sim__all_done(s))
			break;
		if (event || s->now >= wake) {
			if (sim__poll_all(s))
				goto out;
			wake = pace_next_wake(s->p, s->now);
		}
		if (check_invariants(s))
			goto out;
		if (getenv("SIM_TRACE") && step % 250 == 0) {
			int busy = 0;
			uint64_t cur = 0, w = 0;

			for (uint32_t l = 0; l < sc->cfg.max_lanes; l++)
				busy += s->lanes[l].active &&
					s->t >= s->lanes[l].ready_at;
			pace_reader_window(
				s->p,
				s->rd[getenv("SIM_RD")
					      ? (int)strtol(getenv("SIM_RD"),
							    NULL, 10)
					      : 0]
					.id,
				&cur, &w);
			fprintf(stderr,
				"t=%.2f busy=%d cur=%.1fM W=%.1fM held=%.1fM "
				"waiting=%d",
				s->t, busy, cur / 1048576.0, w / 1048576.0,
				s->held[0].total / 1048576.0, s->rd[0].waiting);
			for (uint32_t l = 0; l < sc->cfg.max_lanes; l++) {
				struct pace_lane_info li;

				pace_lane_info(s->p, l, &li);
				fprintf(stderr, " %c%u:%.1f%s",
					li.busy ? 's' : '-',
					li.busy ? li.source : 0, li.rate / 1e6,
					li.collapsed ? "C" : "");
			}
			fprintf(stderr, "\n");
		}
		/* Collapse detection time. */
		if (s->collapse_detect < 0)
			for (int i = 0; i < sc->nsrc; i++) {
				const struct src_spec *ss = &sc->src[i];

				if (ss->collapse_at <= 0 ||
				    s->t < ss->collapse_at)
					continue;
				for (uint32_t l = 0; l < sc->cfg.max_lanes;
				     l++) {
					struct pace_lane_info li;

					pace_lane_info(s->p, l, &li);
					if (li.busy && li.collapsed &&
					    li.source == s->src_id[i])
						s->collapse_detect =
							s->t - ss->collapse_at;
				}
			}
		/* Liveness: someone waits, nobody fetches, nothing is due. */
		{
			bool waiting = false, busy = false;

			for (int i = 0; i < sc->nrd; i++)
				waiting |= s->rd[i].waiting;
			for (uint32_t l = 0; l < sc->cfg.max_lanes; l++)
				busy |= s->lanes[l].active;
			if (waiting && !busy && wake == UINT64_MAX) {
				sim__fail(s, "liveness: a read waits, no lane "
					     "busy, no wake-up");
				goto out;
			}
		}
		for (int i = 0; i < sc->nrd; i++) {
			if (sc->rd[i].kind == RD_SEQ)
				all_reading &= s->rd[i].open && !s->rd[i].done;
			if (s->rd[i].done && s->fig.rd_done[i] == 0)
				s->fig.rd_done[i] = s->t;
		}
		if (all_reading && all_t0 < 0) {
			all_t0 = s->t;
			memcpy(all_b0, s->consumed_by_blob, sizeof(all_b0));
		}
		if (all_reading) {
			all_t1 = s->t;
			memcpy(all_b1, s->consumed_by_blob, sizeof(all_b1));
		}
	}
	{
		struct pace_stats st;
		uint64_t fetched = 0, consumed = 0;

		pace_stats_get(s->p, &st);
		for (int b = 0; b < sc->nblob; b++) {
			fetched += s->held[b].total;
			consumed += s->consumed_by_blob[b];
		}
		for (int i = 0; i < sc->nrd; i++) {
			if (s->rd[i].done && s->fig.rd_done[i] == 0)
				s->fig.rd_done[i] = s->t;
			s->fig.rd_max_wait[i] = s->rd[i].max_wait_after_first;
			if (s->rd[i].max_wait_after_first >
			    s->fig.max_wait_after_first)
				s->fig.max_wait_after_first =
					s->rd[i].max_wait_after_first;
		}
		qsort(s->waits, s->nwaits, sizeof(double), cmp_double);
		s->fig.done = s->t;
		s->fig.ideal = sc->ideal;
		s->fig.overfetch = fetched > consumed ? fetched - consumed : 0;
		for (int b = 0; b < sc->nblob; b++)
			s->fig.sent += s->fetched[b];
		s->fig.pulled = s->fig.sent + pace_inflight(s->p);
		s->fig.consumed = consumed;
		if (s->nwaits) {
			s->fig.p50 = s->waits[s->nwaits / 2];
			s->fig.p99 = s->waits[(s->nwaits * 99) / 100];
			s->fig.max = s->waits[s->nwaits - 1];
		}
		sim__plan_end(s);
		s->fig.requests = st.requests;
		s->fig.steals = st.steals;
		s->fig.reclaims = st.reclaims;
		s->fig.cuts = st.throttle_cuts;
		s->fig.detect = s->collapse_detect;
		if (all_t1 > all_t0)
			for (int b = 0; b < sc->nblob; b++)
				s->fig.bw[b] = (double)(all_b1[b] - all_b0[b]) /
					       (all_t1 - all_t0);
	}
	rc = 0;
out:
	if (s->err[0])
		snprintf(err, errlen, "%s (t=%.3f s)", s->err, s->t);
	*fig = s->fig;
	for (int b = 0; b < sc->nblob; b++)
		pace__ranges_fini(&s->held[b]);
	pace_free(s->p);
	free(s->waits);
	bad = s->err[0] != 0;
	free(s);
	return bad ? -1 : rc;
}

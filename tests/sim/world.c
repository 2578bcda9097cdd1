/* world: the simulated sources, lanes and readers around the scheduler:
 * lanes carry out its actions against sources with their rates, latency
 * and faults, and readers read, wait and report what they consume. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/sim/sim_int.h"

int sim__fail(struct sim *s, const char *fmt, ...)
{
	va_list ap;

	if (s->err[0])
		return -1;
	va_start(ap, fmt);
	vsnprintf(s->err, sizeof(s->err), fmt, ap);
	va_end(ap);
	return -1;
}

static int src_index(const struct sim *s, uint32_t id)
{
	for (int i = 0; i < s->sc->nsrc; i++)
		if (s->src_id[i] == id)
			return i;
	return -1;
}

static int blob_index(const struct sim *s, uint32_t id)
{
	for (int i = 0; i < s->sc->nblob; i++)
		if (s->blob_id[i] == id)
			return i;
	return -1;
}

static bool src_dead(const struct src_spec *ss, double t)
{
	return ss->die_at > 0 && t >= ss->die_at;
}

/* How much faster than its connection's rate a response's burst comes
 * (src_spec.burst). */
#define BURST_FACTOR 5

static double conn_rate(const struct sim *s, int si, int nconn)
{
	const struct src_spec *ss = &s->sc->src[si];
	double r = ss->conn_rate;

	if (ss->cap > 0 && nconn > 0 && r * nconn > ss->cap)
		r = ss->cap / nconn;
	if (ss->collapse_at > 0 && s->t >= ss->collapse_at)
		r *= ss->collapse_frac;
	if (ss->stall_at > 0 && s->t >= ss->stall_at &&
	    s->t < ss->stall_at + ss->stall_len)
		r = 0;
	return r;
}

/* The share of its source's per-connection rate lane i's connection
 * gets: some connections of an origin are slow while others run at the
 * full rate (src_spec.slow_every); a lane's next connection may be
 * either. */
static double lane_frac(const struct src_spec *ss, uint32_t i, unsigned conn)
{
	unsigned k = ss->slow_every > 0 ? (unsigned)ss->slow_every : 0;

	if (k > 0 && (i + conn) % k == k - 1)
		return ss->slow_frac;
	return 1.0;
}

static void lane_end(struct sim *s, uint32_t lane, enum pace_outcome o,
		     uint64_t retry)
{
	/* A cancelled or cut request's connection is closed. */
	if (o == PACE_OUT_CANCELLED || s->lanes[lane].cut)
		s->lanes[lane].conn++;
	s->lanes[lane].cut = false;
	s->lanes[lane].active = false;
	if (o != PACE_OUT_OK)
		s->lanes[lane].q = false; /* the early request dies too */
	pace_on_done(s->p, lane, o, retry, s->now);
}

/* Is [a, e) of blob bi inside some reader's window, or some wait (one
 * that ends near its file's end reaches the end), or speculative fill
 * (`fill`: with speculation on, for an open reader of the blob)? */
static bool allowed(struct sim *s, int bi, uint64_t a, uint64_t e, bool fill)
{
	for (int i = 0; i < s->sc->nrd; i++) {
		struct sim_rd *r = &s->rd[i];
		uint64_t cur, w, size = s->sc->size[bi];
		/* pacing/fill.c: 4 MiB, or 4 min_requests if more. */
		uint64_t near = 4 * s->sc->cfg.min_request > 4 * MIB
					? 4 * s->sc->cfg.min_request
					: 4 * MIB;
		bool tail = s->sc->cfg.fill_max != 0 &&
			    r->off + r->len + near >= size;

		if (r->blob != bi || !r->open)
			continue;
		if (fill && s->sc->cfg.fill_max != 0)
			return true;
		if (r->waiting && (a < r->off + r->len || tail) &&
		    a + s->sc->cfg.align > r->off)
			return true;
		if (pace_reader_window(s->p, r->id, &cur, &w) == 0 &&
		    e <= cur + w)
			return true;
	}
	return sim__plan_allows(s, bi, e);
}

/* The source serves max_conn transfers at once: is another lane of it
 * already past that many? */
static bool over_max_conn(const struct sim *s, int si, uint32_t lane)
{
	int n = 0;

	if (s->sc->src[si].max_conn == 0)
		return false;
	for (uint32_t i = 0; i < s->sc->cfg.max_lanes; i++)
		n += i != lane && s->lanes[i].active && !s->lanes[i].fail &&
		     s->lanes[i].src == (uint32_t)si;
	return n >= s->sc->src[si].max_conn;
}

static int do_actions(struct sim *s, const struct pace_action *a, size_t n)
{
	const struct pace_config *c = &s->sc->cfg;

	for (size_t k = 0; k < n; k++) {
		struct sim_lane *l = &s->lanes[a[k].lane];
		int si = src_index(s, a[k].source);
		int bi = blob_index(s, a[k].blob);
		const struct src_spec *ss;

		if (a[k].lane >= c->max_lanes || si < 0 || bi < 0)
			return sim__fail(s,
					 "action on unknown lane/source/blob");
		ss = &s->sc->src[si];
		switch (a[k].kind) {
		case PACE_ACT_START:
			if (l->active)
				return sim__fail(s, "START on busy lane %u",
						 a[k].lane);
			if (a[k].start >= a[k].end ||
			    a[k].end > s->sc->size[bi])
				return sim__fail(s,
						 "bad range [%" PRIu64
						 ",%" PRIu64 ")",
						 a[k].start, a[k].end);
			if (pace__ranges_count(&s->held[bi], a[k].start,
					       a[k].end))
				return sim__fail(s,
						 "refetch: [%" PRIu64
						 ",%" PRIu64 ") has held bytes",
						 a[k].start, a[k].end);
			if (ss->caps == PACE_CAPS_FULL &&
			    !allowed(s, bi, a[k].start, a[k].end, a[k].fill))
				return sim__fail(s,
						 "window: [%" PRIu64 ",%" PRIu64
						 ") outside every window",
						 a[k].start, a[k].end);
			if (ss->caps == PACE_CAPS_FULL &&
			    a[k].end - a[k].start > c->max_request)
				return sim__fail(s,
						 "request above max_request");
			if (s->seek_pending)
				for (int i = 0; i < s->sc->nrd; i++)
					if (s->rd[i].seeked &&
					    s->rd[i].waiting &&
					    a[k].start <= s->rd[i].off &&
					    a[k].end > s->rd[i].off) {
						s->fig.seek_start_delay =
							s->t - s->seek_t;
						s->seek_pending = false;
					}
			for (int i = 0; i < s->sc->nrd; i++)
				if (s->sc->rd[i].kind == RD_RANDOM &&
				    s->rd[i].blob == bi &&
				    a[k].end - a[k].start > s->fig.max_req) {
					s->fig.max_req = a[k].end - a[k].start;
					if (getenv("SIM_DEBUG"))
						fprintf(stderr,
							"big req %" PRIu64
							" %" PRIu64 " t=%.3f\n",
							a[k].start, a[k].end,
							s->t);
				}
			s->requests++;
			if (getenv("SIM_STARTS"))
				fprintf(stderr,
					"t=%.3f START lane %u blob %u [%" PRIu64
					" +%" PRIu64 "K)\n",
					s->t, a[k].lane, a[k].blob, a[k].start,
					(a[k].end - a[k].start) / 1024);
			{
				bool pre = !s->sc->no_pipeline && l->q &&
					   l->src == (uint32_t)si &&
					   l->qstart == a[k].start &&
					   l->qend == a[k].end;
				double sent = pre ? l->q_t : s->t;
				unsigned conn = l->conn;

				memset(l, 0, sizeof(*l));
				l->conn = conn;
				l->ready_at = sent + ss->latency;
				if (l->ready_at < s->t)
					l->ready_at = s->t;
			}
			l->active = true;
			l->src = (uint32_t)si;
			l->start = a[k].start;
			l->pos = a[k].start;
			l->end = a[k].end;
			if (src_dead(ss, s->t))
				l->fail = ss->die == DIE_GONE
						  ? PACE_OUT_GONE
						  : PACE_OUT_TRANSIENT;
			else if ((s->t >= ss->t429_from &&
				  s->t < ss->t429_to) ||
				 over_max_conn(s, si, a[k].lane) ||
				 s->t < s->refuse_until[si]) {
				l->fail = PACE_OUT_THROTTLED;
				s->fig.n429++;
				l->retry_after =
					(uint64_t)(ss->retry_after * SEC);
				if (ss->hold_refusals)
					s->refuse_until[si] =
						s->t + ss->retry_after;
			}
			break;
		case PACE_ACT_QUEUE:
			if (!l->active)
				return sim__fail(s, "QUEUE on idle lane %u",
						 a[k].lane);
			if (l->src != (uint32_t)si)
				return sim__fail(s, "QUEUE on another source");
			if (l->q)
				return sim__fail(s, "second QUEUE on lane %u",
						 a[k].lane);
			if (a[k].start >= a[k].end ||
			    a[k].end > s->sc->size[bi])
				return sim__fail(s, "bad queued range");
			if (pace__ranges_count(&s->held[bi], a[k].start,
					       a[k].end))
				return sim__fail(s, "refetch: queued range has "
						    "held bytes");
			if (!allowed(s, bi, a[k].start, a[k].end, a[k].fill))
				return sim__fail(s,
						 "window: queued range outside "
						 "every window");
			if (a[k].end - a[k].start > c->max_request)
				return sim__fail(s, "queued range above "
						    "max_request");
			l->q = true;
			l->qstart = a[k].start;
			l->qend = a[k].end;
			l->q_t = s->t;
			break;
		case PACE_ACT_SET_END:
			if (!l->active)
				return sim__fail(s, "SET_END on idle lane");
			if (a[k].end > l->end)
				return sim__fail(s, "SET_END raises the end");
			if (a[k].end < l->pos)
				return sim__fail(s,
						 "SET_END below the frontier");
			if (s->seek_pending && a[k].end < l->end)
				s->fig.yields_on_seek++;
			if (a[k].end < l->end)
				l->cut = true;
			l->end = a[k].end;
			break;
		case PACE_ACT_CANCEL:
			if (!l->active)
				return sim__fail(s, "CANCEL on idle lane");
			if (s->seek_pending)
				s->fig.yields_on_seek++;
			lane_end(s, a[k].lane, PACE_OUT_CANCELLED, 0);
			break;
		}
	}
	return 0;
}

int sim__poll_all(struct sim *s)
{
	struct pace_action a[16];

	for (int guard = 0; guard < 1000; guard++) {
		size_t n = pace_poll(s->p, s->now, a, 16);

		if (do_actions(s, a, n))
			return -1;
		if (n < 16 && n == 0)
			return 0;
	}
	return sim__fail(s, "poll never settles");
}

void sim__lanes_step(struct sim *s, double dt, bool *event)
{
	const struct pace_config *c = &s->sc->cfg;
	int nconn[MAX_SRC] = {0};

	for (uint32_t i = 0; i < c->max_lanes; i++)
		if (s->lanes[i].active && s->t >= s->lanes[i].ready_at &&
		    !s->lanes[i].fail)
			nconn[s->lanes[i].src]++;
	for (uint32_t i = 0; i < c->max_lanes; i++) {
		struct sim_lane *l = &s->lanes[i];
		const struct src_spec *ss;
		uint64_t nb;
		int bi;

		if (!l->active)
			continue;
		ss = &s->sc->src[l->src];
		if (src_dead(ss, s->t) && !l->fail) {
			*event = true;
			lane_end(s, i,
				 ss->die == DIE_GONE ? PACE_OUT_GONE
						     : PACE_OUT_TRANSIENT,
				 0);
			continue;
		}
		if (s->t < l->ready_at)
			continue;
		if (l->fail) {
			*event = true;
			lane_end(s, i, (enum pace_outcome)l->fail,
				 l->retry_after);
			continue;
		}
		l->carry += conn_rate(s, (int)l->src, nconn[l->src]) *
			    lane_frac(ss, i, l->conn) * dt *
			    (l->pos - l->start < ss->burst ? BURST_FACTOR : 1);
		nb = (uint64_t)l->carry;
		if (nb > l->end - l->pos)
			nb = l->end - l->pos;
		/* The burst ends where it ends: the rest comes at the rate. */
		if (l->pos - l->start < ss->burst &&
		    nb > l->start + ss->burst - l->pos) {
			l->carry = 0;
			nb = l->start + ss->burst - l->pos;
		}
		l->carry -= (double)nb;
		bi = ss->blob;
		if (nb) {
			uint64_t added = 0;

			pace__ranges_add(&s->held[bi], l->pos, l->pos + nb,
					 &added);
			s->fetched[bi] += nb;
			pace_on_data(s->p, i, l->pos, nb, s->now);
			l->pos += nb;
			*event = true;
		}
		if (l->pos >= l->end) {
			*event = true;
			lane_end(s, i, PACE_OUT_OK, 0);
		}
	}
}

static void add_wait(struct sim *s, double w)
{
	if (s->nwaits < MAX_SAMPLES)
		s->waits[s->nwaits++] = w;
}

uint64_t sim__rnd64(uint64_t *st)
{
	/* splitmix64 */
	uint64_t z = (*st += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

double sim__rndf(uint64_t *st)
{
	return (double)(sim__rnd64(st) >> 11) / 9007199254740992.0;
}

/* Whether reader r of spec rs has done all its reads. */
static bool rd_finished(const struct rd_spec *rs, const struct sim_rd *r,
			uint64_t size)
{
	switch (rs->kind) {
	case RD_SEQ:
	case RD_LOADER:
		return r->cursor >= size ||
		       (rs->stop_after && r->consumed >= rs->stop_after);
	case RD_SCRIPT:
		return r->step >= rs->nsteps;
	case RD_LOOKUP:
		return r->step == 0 && r->reads >= 3 * rs->nreads;
	case RD_RANDOM:
		break;
	}
	return r->reads >= rs->nreads;
}

/* The next page of a B-tree lookup (SQLite-like, 4 KiB pages): the root,
 * one of a few hundred inner pages spread over the file, a leaf. */
static void lookup_page(struct sim *s, const struct rd_spec *rs,
			struct sim_rd *r, uint64_t *rng, uint64_t size)
{
	uint64_t pages = size / (4 * KIB);

	(void)rs;
	if (r->step == 0) {
		r->off = 0;
	} else if (r->step == 1) {
		uint64_t inner = sim__rnd64(rng) % 300;

		r->off = ((inner * 2654435761u) % pages) * 4 * KIB;
	} else {
		r->off = (sim__rnd64(rng) % pages) * 4 * KIB;
		s->fig.lookups++;
	}
	r->len = 4 * KIB;
	r->step = (r->step + 1) % 3;
}

/* A script's read ended: its time, for the judges of the script. */
static void step_ended(struct sim *s, const struct rd_spec *rs,
		       const struct sim_rd *r)
{
	if (rs->kind == RD_SCRIPT && r->step >= 1 && r->step <= MAX_STEPS)
		s->fig.step_end[r->step - 1] = s->t;
}

int sim__readers_step(struct sim *s, uint64_t *rng, bool *event)
{
	const struct scenario *sc = s->sc;

	for (int i = 0; i < sc->nrd; i++) {
		const struct rd_spec *rs = &sc->rd[i];
		struct sim_rd *r = &s->rd[i];
		uint64_t size;
		int guard = 0;

		if (r->done || s->t < rs->open_at)
			continue;
		if (!r->open) {
			int nload = sc->norder ? sc->norder : sc->nblob;

			/* A loader that pauses does so between files. */
			if (rs->kind == RD_LOADER && rs->pause_len > 0 &&
			    !r->paused && s->next_blob >= rs->pause_after) {
				r->paused = true;
				r->resume_at = s->t + rs->pause_len;
				s->plan.pause_t = s->t;
			}
			if (s->t < r->resume_at)
				continue;
			if (rs->kind != RD_LOADER) {
				r->blob = rs->blob;
			} else if (s->next_blob < nload) {
				r->blob = sc->norder ? sc->order[s->next_blob]
						     : s->next_blob;
				s->next_blob++;
			} else {
				r->done = true;
				continue;
			}
			if (pace_reader_open(s->p, s->blob_id[r->blob], s->now,
					     &r->id))
				return sim__fail(s, "reader_open");
			if (rs->kind == RD_LOADER)
				sim__plan_opened(s, r->blob);
			r->open = true;
			r->cursor = rs->kind == RD_LOADER ? 0 : rs->start;
			r->next_at = s->t;
		}
		size = sc->size[r->blob];
		while (!r->done && guard++ < 64) {
			if (r->waiting) {
				int st = pace_wait_state(s->p, r->wait, s->now);
				double w = s->t - r->wait_t0;

				if (st == -EINPROGRESS) {
					if (w >
					    sc->cfg.deadline_ns / 1e9 + 0.002)
						return sim__fail(
							s, "wait outlived its "
							   "deadline");
					break;
				}
				pace_wait_end(s->p, r->wait);
				r->waiting = false;
				*event = true;
				add_wait(s, w);
				if (rs->kind == RD_RANDOM &&
				    w > s->fig.rand_max_wait)
					s->fig.rand_max_wait = w;
				if (getenv("SIM_WAITS") && w > 0.2)
					fprintf(stderr,
						"rd %d waited %.3f at t=%.3f "
						"off %" PRIu64 "\n",
						i, w, s->t, r->off);
				if (r->reads > 1 && w > r->max_wait_after_first)
					r->max_wait_after_first = w;
				if (st != 0) {
					if (!sc->errors_ok)
						return sim__fail(
							s,
							"read failed %d at "
							"%.3f",
							st, s->t);
					r->failed = true;
					r->done = true;
					break;
				}
				if (r->seek_read) {
					s->fig.seek_read_wait = w;
					r->seek_read = false;
				}
				r->consumed += r->len;
				s->consumed_by_blob[r->blob] += r->len;
				step_ended(s, rs, r);
				r->next_at =
					s->t + (rs->rate > 0 ? (double)r->len /
								       rs->rate
							     : 0);
				if (rs->kind == RD_SEQ || rs->kind == RD_LOADER)
					r->cursor = r->off + r->len;
				if (rd_finished(rs, r, size))
					r->done = true;
				continue;
			}
			if (s->t < r->next_at)
				break;
			/* A read. */
			if (rs->kind == RD_RANDOM) {
				r->off = (sim__rnd64(rng) % size) &
					 ~(4 * KIB - 1);
				r->len = 4 * KIB;
				if (r->off + r->len > size)
					r->len = size - r->off;
			} else if (rs->kind == RD_SCRIPT) {
				r->off = rs->script[r->step].off;
				r->len = rs->script[r->step].len;
				r->step++;
			} else if (rs->kind == RD_LOOKUP) {
				lookup_page(s, rs, r, rng, size);
			} else if (rs->kind == RD_LOADER) {
				r->len = rs->rsize;
				r->off = r->cursor;
				if (r->off + r->len > size)
					r->len = size - r->off;
			} else {
				r->len = rs->rsize;
				if (rs->seek_at > 0 && !r->seeked &&
				    s->t >= rs->seek_at) {
					r->seeked = true;
					r->seek_read = true;
					r->cursor = rs->seek_to;
					s->seek_t = s->t;
					s->seek_pending = true;
					if (rs->seek_len)
						r->len = rs->seek_len;
				}
				r->off = r->cursor;
				if (r->off + r->len > size)
					r->len = size - r->off;
			}
			r->reads++;
			*event = true;
			pace_reader_read(s->p, r->id, r->off, r->len, s->now);
			if (rs->kind != RD_SEQ && rs->kind != RD_LOADER)
				r->next_at = s->t + rs->think;
			if (pace_is_held(s->p, s->blob_id[r->blob], r->off,
					 r->off + r->len)) {
				add_wait(s, 0);
				if (r->seek_read) {
					s->fig.seek_read_wait = 0;
					r->seek_read = false;
				}
				r->consumed += r->len;
				s->consumed_by_blob[r->blob] += r->len;
				step_ended(s, rs, r);
				if (rs->kind == RD_SEQ ||
				    rs->kind == RD_LOADER) {
					r->cursor = r->off + r->len;
					r->next_at =
						s->t +
						(rs->rate > 0 ? (double)r->len /
									rs->rate
							      : 0);
				}
				if (rd_finished(rs, r, size))
					r->done = true;
				if (rs->rate == 0 && (rs->kind == RD_SEQ ||
						      rs->kind == RD_LOADER))
					continue;
				if (rs->kind == RD_SCRIPT ||
				    (rs->kind == RD_LOOKUP && rs->think == 0))
					continue;
				break;
			}
			if (pace_wait_begin(s->p, r->id, r->off, r->len, s->now,
					    &r->wait))
				return sim__fail(s, "wait_begin");
			r->waiting = true;
			r->wait_t0 = s->t;
			break;
		}
		if (r->done && r->open && !r->waiting) {
			if (r->max_wait_after_first >
			    s->fig.max_wait_after_first)
				s->fig.max_wait_after_first =
					r->max_wait_after_first;
			pace_reader_close(s->p, r->id, s->now);
			r->open = false;
			/* A worker whose read failed stops; one that read
			 * its blob whole takes the next. */
			if (rs->kind == RD_LOADER && !r->failed) {
				s->fig.files++;
				r->done = false;
				r->reads = 0;
				r->max_wait_after_first = 0;
			}
		}
	}
	return 0;
}

bool sim__all_done(const struct sim *s)
{
	for (int i = 0; i < s->sc->nrd; i++)
		if (!s->rd[i].done)
			return false;
	return true;
}

/* Bytes of [a, size) that blob b did not hold at the start. */
static uint64_t unheld_from(const struct scenario *sc, int b, uint64_t a)
{
	uint64_t lo = sc->held_lo[b], hi = sc->held_hi[b], n;

	if (a >= sc->size[b])
		return 0;
	n = sc->size[b] - a;
	if (hi > lo) {
		lo = lo > a ? lo : a;
		if (hi > lo)
			n -= hi - lo;
	}
	return n;
}

/* What source ss can send at most, over all its lanes, at time t: the
 * per-connection rate of every lane a source may have, within its shaping
 * cap, cut by its collapse, nothing once dead. Stalls, throttling and
 * round trips only lower it. */
static double most_rate(const struct scenario *sc, const struct src_spec *ss,
			double t)
{
	uint32_t lanes = sc->cfg.lanes_per_source < sc->cfg.max_lanes
				 ? sc->cfg.lanes_per_source
				 : sc->cfg.max_lanes;
	double r = ss->conn_rate * lanes;

	if (src_dead(ss, t))
		return 0;
	if (ss->cap > 0 && r > ss->cap)
		r = ss->cap;
	if (ss->collapse_at > 0 && t >= ss->collapse_at)
		r *= ss->collapse_frac;
	return r;
}

/* What blob b's sources can send at most per second, at their best. */
static double best_rate(const struct scenario *sc, int b)
{
	double r = 0;

	for (int k = 0; k < sc->nsrc; k++)
		if (sc->src[k].blob == b)
			r += most_rate(sc, &sc->src[k], 0);
	return r;
}

bool sim__unmeetable(const struct scenario *sc, char *why, size_t n)
{
	for (int b = 0; b < sc->nblob; b++) {
		double most = 0, need = 0;

		/* A sequential reader reads to the blob's end from its first
		 * offset, or from where it seeks: a seek forward skips bytes
		 * it would read anyway, and a seek back is made unless the
		 * reader was done before it, which the blob's sources at
		 * their best rates could not have made it. */
		for (int i = 0; i < sc->nrd; i++) {
			const struct rd_spec *r = &sc->rd[i];
			uint64_t from = r->start;

			if (r->blob != b || r->kind != RD_SEQ || r->stop_after)
				continue;
			if (r->seek_at > 0 && r->seek_to > from)
				from = r->seek_to;
			else if (r->seek_at > 0 &&
				 best_rate(sc, b) * r->seek_at <
					 (double)unheld_from(sc, b, from))
				from = r->seek_to;
			if ((double)unheld_from(sc, b, from) > need)
				need = (double)unheld_from(sc, b, from);
		}
		/* The rates change only at a collapse or a death: integrate
		 * piecewise over the scenario's time limit. */
		for (int k = 0; k < sc->nsrc; k++) {
			const struct src_spec *ss = &sc->src[k];
			double lo = ss->collapse_at, hi = ss->die_at, t0 = 0;
			double cuts[3];

			if (ss->blob != b)
				continue;
			if (lo <= 0 || (hi > 0 && hi < lo))
				lo = ss->die_at, hi = ss->collapse_at;
			cuts[0] = lo > 0 ? lo : sc->limit;
			cuts[1] = hi > 0 ? hi : sc->limit;
			cuts[2] = sc->limit;
			for (int c = 0; c < 3; c++) {
				double t1 = cuts[c] < sc->limit ? cuts[c]
								: sc->limit;

				if (t1 <= t0)
					continue;
				most += most_rate(sc, ss, t0) * (t1 - t0);
				t0 = t1;
			}
		}
		if (need > most) {
			snprintf(
				why, n,
				"cannot be met: blob %d's readers need %.1f MB "
				"that its sources can send at most %.1f MB of "
				"in %.0f s",
				b, need / MB, most / MB, sc->limit);
			return true;
		}
	}
	return false;
}

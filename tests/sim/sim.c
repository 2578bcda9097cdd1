/* sim: a discrete-time simulator that drives the pure scheduler with
 * simulated sources and readers, checks its invariants after every step and
 * prints per-scenario figures. */
#include "pacing/pace.h"
#include "pacing/pace_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KIB (1024ull)
#define MIB (1024ull * 1024ull)
#define MS (1000000ull)
#define SEC (1000000000ull)
#define MB 1e6 /* rates are in decimal MB/s */

#define MAX_SRC 8
#define MAX_BLOB 4
#define MAX_RD 8
#define MAX_LANES 16
#define MAX_SAMPLES 200000

enum death { DIE_NONE, DIE_GONE, DIE_RESET };

struct src_spec {
	int blob;
	enum pace_caps caps;
	double conn_rate; /* bytes/s per connection */
	double cap;	  /* bytes/s over all connections; 0: none */
	double latency;	  /* seconds to first byte */
	double collapse_at, collapse_frac; /* 0: never */
	double stall_at, stall_len;	   /* connections hang */
	double die_at;			   /* 0: never */
	enum death die;
	double t429_from, t429_to, retry_after;
	int max_conn;	/* serves this many at once, 503 beyond; 0: any */
};

enum rd_kind {
	RD_SEQ,	   /* sequential at `rate`, `rsize` per read */
	RD_RANDOM, /* 4 KiB reads at random offsets */
	RD_SCRIPT, /* the reads of `script`, back to back */
	RD_LOOKUP, /* B-tree lookups: a root, an inner and a leaf page */
};

struct rd_step {
	uint64_t off, len;
};

struct rd_spec {
	int blob;
	enum rd_kind kind;
	double rate;	   /* bytes/s consumed; 0: as fast as it can */
	uint64_t rsize;	   /* bytes per read */
	uint64_t start;	   /* first offset */
	int nreads;	   /* random: reads to do */
	double think;	   /* random: seconds between reads */
	double seek_at;	   /* seq: seek once at this time (0: never) */
	uint64_t seek_to;
	uint64_t seek_len; /* seq: the first read after it; 0: rsize */
	uint64_t stop_after; /* seq: stops after consuming this; 0: the end */
	const struct rd_step *script; /* RD_SCRIPT */
	int nsteps;
	double open_at;	   /* starts reading at this time */
};

struct scenario {
	const char *name;
	struct pace_config cfg;
	int nblob;
	uint64_t size[MAX_BLOB];
	uint64_t held_lo[MAX_BLOB], held_hi[MAX_BLOB]; /* resume */
	int nsrc;
	struct src_spec src[MAX_SRC];
	int nrd;
	struct rd_spec rd[MAX_RD];
	double ideal;	   /* seconds; 0: not reported */
	double limit;	   /* seconds of simulated time before failing */
	bool errors_ok;	   /* waits may fail (sources dead) */
	bool no_pipeline;  /* the executor ignores QUEUE (sends nothing
			      ahead), as an executor may: QUEUE is advisory */
	uint64_t seed;
};

struct sim_lane {
	bool active;
	uint32_t src;	 /* index into scenario sources */
	uint64_t pos, end;
	double ready_at; /* first byte time */
	double carry;
	int fail;	 /* 0, or a pace_outcome to report at ready_at */
	uint64_t retry_after;
	/* A queued range, sent ahead when queued (a pipelining executor):
	 * its first byte comes a latency after q_t, or right after the open
	 * request, whichever is later. */
	bool q;
	uint64_t qstart, qend;
	double q_t;
};

struct sim_rd {
	uint32_t id;
	bool open, waiting, done, failed, seeked;
	uint64_t cursor, off, len;
	uint32_t wait;
	double wait_t0, next_at;
	int reads;
	uint64_t consumed;
	double first_read_end;
	double max_wait_after_first;
	int step;		/* RD_SCRIPT: next step; RD_LOOKUP: page */
	bool seek_read;	/* the read in flight is the first after the seek */
};

struct figures {
	double done, ideal;
	uint64_t overfetch;
	double p50, p99, max;
	uint64_t requests, steals, reclaims;
	double detect;		/* collapse detected after this long */
	double max_wait_after_first;
	double bw[MAX_BLOB];	/* per-blob bytes/s while every sequential
				   reader read */
	uint64_t max_req;	/* largest request of a random reader */
	double seek_start_delay; /* seek to START of the new position */
	int yields_on_seek;	/* lanes cancelled or cut to their chunk's
				   end while a seek waited */
	double rand_max_wait;	/* longest wait of a random reader */
	uint64_t cuts;		/* lane counts halved on 429/503 */
	int n429;		/* requests answered 429 */
	uint64_t inflight_max;	/* most bytes requested, not received */
	uint64_t sent;		/* bytes the executor delivered */
	uint64_t pulled;	/* sent, plus what was still requested at
				   the end */
	uint64_t consumed;
	double seek_read_wait;	/* the first read after the seek */
	int lookups;		/* RD_LOOKUP lookups done */
};

struct sim {
	const struct scenario *sc;
	struct pace *p;
	uint32_t blob_id[MAX_BLOB], src_id[MAX_SRC];
	struct pace__ranges held[MAX_BLOB];
	struct sim_lane lanes[MAX_LANES];
	struct sim_rd rd[MAX_RD];
	double t;
	uint64_t now;
	char err[256];
	double *waits;
	size_t nwaits;
	uint64_t fetched[MAX_BLOB], consumed_by_blob[MAX_BLOB];
	uint64_t requests;
	double seek_t;
	bool seek_pending;
	struct figures fig;
	double collapse_detect;
};

static int fail(struct sim *s, const char *fmt, ...)
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

static void lane_end(struct sim *s, uint32_t lane, enum pace_outcome o,
		     uint64_t retry)
{
	s->lanes[lane].active = false;
	if (o != PACE_OUT_OK)
		s->lanes[lane].q = false; /* the early request dies too */
	pace_on_done(s->p, lane, o, retry, s->now);
}

/* Is [a, e) of blob bi inside some reader's window, or some wait? */
static bool allowed(struct sim *s, int bi, uint64_t a, uint64_t e)
{
	for (int i = 0; i < s->sc->nrd; i++) {
		struct sim_rd *r = &s->rd[i];
		uint64_t cur, w;

		if (s->sc->rd[i].blob != bi || !r->open)
			continue;
		if (r->waiting && a < r->off + r->len &&
		    a + s->sc->cfg.align > r->off)
			return true;
		if (pace_reader_window(s->p, r->id, &cur, &w) == 0 &&
		    e <= cur + w)
			return true;
	}
	return false;
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
			return fail(s, "action on unknown lane/source/blob");
		ss = &s->sc->src[si];
		switch (a[k].kind) {
		case PACE_ACT_START:
			if (l->active)
				return fail(s, "START on busy lane %u",
					    a[k].lane);
			if (a[k].start >= a[k].end ||
			    a[k].end > s->sc->size[bi])
				return fail(s, "bad range [%" PRIu64
					       ",%" PRIu64 ")",
					    a[k].start, a[k].end);
			if (pace__ranges_count(&s->held[bi], a[k].start,
					       a[k].end))
				return fail(s,
					    "refetch: [%" PRIu64 ",%" PRIu64
					    ") has held bytes",
					    a[k].start, a[k].end);
			if (ss->caps == PACE_CAPS_FULL &&
			    !allowed(s, bi, a[k].start, a[k].end))
				return fail(s,
					    "window: [%" PRIu64 ",%" PRIu64
					    ") outside every window",
					    a[k].start, a[k].end);
			if (ss->caps == PACE_CAPS_FULL &&
			    a[k].end - a[k].start > c->max_request)
				return fail(s, "request above max_request");
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
				    s->sc->rd[i].blob == bi &&
				    a[k].end - a[k].start > s->fig.max_req) {
					s->fig.max_req =
						a[k].end - a[k].start;
					if (getenv("SIM_DEBUG"))
						fprintf(stderr, "big req %" PRIu64 " %" PRIu64 " t=%.3f\n", a[k].start, a[k].end, s->t);
				}
			s->requests++;
			if (getenv("SIM_STARTS"))
				fprintf(stderr, "t=%.3f START lane %u [%" PRIu64 " +%" PRIu64 "K)\n", s->t, a[k].lane, a[k].start, (a[k].end - a[k].start) / 1024);
			{
				bool pre = !s->sc->no_pipeline && l->q &&
					   l->src == (uint32_t)si &&
					   l->qstart == a[k].start &&
					   l->qend == a[k].end;
				double sent = pre ? l->q_t : s->t;

				memset(l, 0, sizeof(*l));
				l->ready_at = sent + ss->latency;
				if (l->ready_at < s->t)
					l->ready_at = s->t;
			}
			l->active = true;
			l->src = (uint32_t)si;
			l->pos = a[k].start;
			l->end = a[k].end;
			if (src_dead(ss, s->t))
				l->fail = ss->die == DIE_GONE ? PACE_OUT_GONE
							      : PACE_OUT_TRANSIENT;
			else if ((s->t >= ss->t429_from && s->t < ss->t429_to) ||
				 over_max_conn(s, si, a[k].lane)) {
				l->fail = PACE_OUT_THROTTLED;
				s->fig.n429++;
				l->retry_after =
					(uint64_t)(ss->retry_after * SEC);
			}
			break;
		case PACE_ACT_QUEUE:
			if (!l->active)
				return fail(s, "QUEUE on idle lane %u",
					    a[k].lane);
			if (l->src != (uint32_t)si)
				return fail(s, "QUEUE on another source");
			if (l->q)
				return fail(s, "second QUEUE on lane %u",
					    a[k].lane);
			if (a[k].start >= a[k].end ||
			    a[k].end > s->sc->size[bi])
				return fail(s, "bad queued range");
			if (pace__ranges_count(&s->held[bi], a[k].start,
					       a[k].end))
				return fail(s, "refetch: queued range has "
					       "held bytes");
			if (!allowed(s, bi, a[k].start, a[k].end))
				return fail(s, "window: queued range outside "
					       "every window");
			if (a[k].end - a[k].start > c->max_request)
				return fail(s, "queued range above "
					       "max_request");
			l->q = true;
			l->qstart = a[k].start;
			l->qend = a[k].end;
			l->q_t = s->t;
			break;
		case PACE_ACT_SET_END:
			if (!l->active)
				return fail(s, "SET_END on idle lane");
			if (a[k].end > l->end)
				return fail(s, "SET_END raises the end");
			if (a[k].end < l->pos)
				return fail(s, "SET_END below the frontier");
			if (s->seek_pending && a[k].end < l->end)
				s->fig.yields_on_seek++;
			l->end = a[k].end;
			break;
		case PACE_ACT_CANCEL:
			if (!l->active)
				return fail(s, "CANCEL on idle lane");
			if (s->seek_pending)
				s->fig.yields_on_seek++;
			lane_end(s, a[k].lane, PACE_OUT_CANCELLED, 0);
			break;
		}
	}
	return 0;
}

static int poll_all(struct sim *s)
{
	struct pace_action a[16];

	for (int guard = 0; guard < 1000; guard++) {
		size_t n = pace_poll(s->p, s->now, a, 16);

		if (do_actions(s, a, n))
			return -1;
		if (n < 16 && n == 0)
			return 0;
	}
	return fail(s, "poll never settles");
}

/* One owner per byte; the scheduler's held bytes match what was sent. */
static int check_invariants(struct sim *s)
{
	const struct pace_config *c = &s->sc->cfg;
	struct pace_lane_info li[MAX_LANES];

	for (uint32_t i = 0; i < c->max_lanes; i++) {
		if (pace_lane_info(s->p, i, &li[i]))
			return fail(s, "lane_info %u", i);
		if (li[i].busy != s->lanes[i].active)
			return fail(s, "lane %u busy mismatch", i);
		if (!li[i].busy)
			continue;
		if (li[i].queued &&
		    (li[i].qstart < li[i].end && li[i].start < li[i].qend))
			return fail(s, "lane %u: queued range overlaps its "
				       "request", i);
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
				return fail(s, "two owners (queued): lanes "
					       "%u,%u",
					    i, j);
		}
		for (uint32_t j = 0; j < i; j++)
			if (li[j].busy && li[j].blob == li[i].blob &&
			    li[i].start < li[j].end && li[j].start < li[i].end)
				return fail(s,
					    "two owners: lanes %u,%u [%" PRIu64
					    ",%" PRIu64 ") [%" PRIu64
					    ",%" PRIu64 ")",
					    i, j, li[i].start, li[i].end,
					    li[j].start, li[j].end);
	}
	/* The byte budget, counted from the executor's side. */
	{
		uint64_t infl = 0;

		for (uint32_t i = 0; i < c->max_lanes; i++) {
			const struct sim_lane *l = &s->lanes[i];

			if (!l->active)
				continue;
			infl += l->end - l->pos;
			if (l->q)
				infl += l->qend - l->qstart;
		}
		if (infl > s->fig.inflight_max)
			s->fig.inflight_max = infl;
		if (c->budget_bytes && infl > c->budget_bytes)
			return fail(s, "budget: %" PRIu64 " bytes in flight",
				    infl);
	}
	for (int b = 0; b < s->sc->nblob; b++)
		if (pace_held_bytes(s->p, s->blob_id[b]) != s->held[b].total)
			return fail(s, "held mismatch blob %d: %" PRIu64
				       " vs %" PRIu64,
				    b, pace_held_bytes(s->p, s->blob_id[b]),
				    s->held[b].total);
	return 0;
}

static void lanes_step(struct sim *s, double dt, bool *event)
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
		l->carry += conn_rate(s, (int)l->src, nconn[l->src]) * dt;
		nb = (uint64_t)l->carry;
		if (nb > l->end - l->pos)
			nb = l->end - l->pos;
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

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static void add_wait(struct sim *s, double w)
{
	if (s->nwaits < MAX_SAMPLES)
		s->waits[s->nwaits++] = w;
}

static uint64_t rnd64(uint64_t *st)
{
	/* splitmix64 */
	uint64_t z = (*st += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static double rndf(uint64_t *st)
{
	return (double)(rnd64(st) >> 11) / 9007199254740992.0;
}

/* Whether reader r of spec rs has done all its reads. */
static bool rd_finished(const struct rd_spec *rs, const struct sim_rd *r,
			uint64_t size)
{
	switch (rs->kind) {
	case RD_SEQ:
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
		uint64_t inner = rnd64(rng) % 300;

		r->off = ((inner * 2654435761u) % pages) * 4 * KIB;
	} else {
		r->off = (rnd64(rng) % pages) * 4 * KIB;
		s->fig.lookups++;
	}
	r->len = 4 * KIB;
	r->step = (r->step + 1) % 3;
}

static int readers_step(struct sim *s, uint64_t *rng, bool *event)
{
	const struct scenario *sc = s->sc;

	for (int i = 0; i < sc->nrd; i++) {
		const struct rd_spec *rs = &sc->rd[i];
		struct sim_rd *r = &s->rd[i];
		uint64_t size = sc->size[rs->blob];
		int guard = 0;

		if (r->done || s->t < rs->open_at)
			continue;
		if (!r->open) {
			if (pace_reader_open(s->p, s->blob_id[rs->blob], s->now,
					     &r->id))
				return fail(s, "reader_open");
			r->open = true;
			r->cursor = rs->start;
			r->next_at = s->t;
		}
		while (!r->done && guard++ < 64) {
			if (r->waiting) {
				int st = pace_wait_state(s->p, r->wait, s->now);
				double w = s->t - r->wait_t0;

				if (st == -EINPROGRESS) {
					if (w > sc->cfg.deadline_ns / 1e9 +
							0.002)
						return fail(s,
							    "wait outlived its "
							    "deadline");
					break;
				}
				pace_wait_end(s->p, r->wait);
				r->waiting = false;
				*event = true;
				add_wait(s, w);
				if (rs->kind == RD_RANDOM && w > s->fig.rand_max_wait)
					s->fig.rand_max_wait = w;
				if (getenv("SIM_WAITS") && w > 0.2)
					fprintf(stderr, "rd %d waited %.3f at t=%.3f off %" PRIu64 "\n", i, w, s->t, r->off);
				if (r->reads > 1 && w > r->max_wait_after_first)
					r->max_wait_after_first = w;
				if (st != 0) {
					if (!sc->errors_ok)
						return fail(s,
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
				s->consumed_by_blob[rs->blob] += r->len;
				r->next_at =
					s->t + (rs->rate > 0 ? (double)r->len /
								       rs->rate
							     : 0);
				if (rs->kind == RD_SEQ)
					r->cursor = r->off + r->len;
				if (rd_finished(rs, r, size))
					r->done = true;
				continue;
			}
			if (s->t < r->next_at)
				break;
			/* A read. */
			if (rs->kind == RD_RANDOM) {
				r->off = (rnd64(rng) % size) & ~(4 * KIB - 1);
				r->len = 4 * KIB;
				if (r->off + r->len > size)
					r->len = size - r->off;
			} else if (rs->kind == RD_SCRIPT) {
				r->off = rs->script[r->step].off;
				r->len = rs->script[r->step].len;
				r->step++;
			} else if (rs->kind == RD_LOOKUP) {
				lookup_page(s, rs, r, rng, size);
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
			if (rs->kind != RD_SEQ)
				r->next_at = s->t + rs->think;
			if (pace_is_held(s->p, s->blob_id[rs->blob], r->off,
					 r->off + r->len)) {
				add_wait(s, 0);
				if (r->seek_read) {
					s->fig.seek_read_wait = 0;
					r->seek_read = false;
				}
				r->consumed += r->len;
				s->consumed_by_blob[rs->blob] += r->len;
				if (rs->kind == RD_SEQ) {
					r->cursor = r->off + r->len;
					r->next_at =
						s->t + (rs->rate > 0
								? (double)r->len /
									  rs->rate
								: 0);
				}
				if (rd_finished(rs, r, size))
					r->done = true;
				if (rs->rate == 0 && rs->kind == RD_SEQ)
					continue;
				if (rs->kind == RD_SCRIPT ||
				    (rs->kind == RD_LOOKUP && rs->think == 0))
					continue;
				break;
			}
			if (pace_wait_begin(s->p, r->id, r->off, r->len, s->now,
					    &r->wait))
				return fail(s, "wait_begin");
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
		}
	}
	return 0;
}

static bool all_done(const struct sim *s)
{
	for (int i = 0; i < s->sc->nrd; i++)
		if (!s->rd[i].done)
			return false;
	return true;
}

/* Runs one scenario; returns 0 when every check held. */
static int run(const struct scenario *sc, struct figures *fig, char *err,
	       size_t errlen)
{
	struct sim *s = calloc(1, sizeof(*s));
	const double dt = 0.001;
	uint64_t rng = sc->seed * 2654435761u + 1;
	uint64_t wake = 0;
	double all_t0 = -1, all_t1 = -1;
	uint64_t all_b0[MAX_BLOB] = {0}, all_b1[MAX_BLOB] = {0};
	int rc = -1;
	bool bad;

	if (!s)
		return -1;
	s->sc = sc;
	s->waits = calloc(MAX_SAMPLES, sizeof(double));
	if (!s->waits || pace_new(&sc->cfg, &s->p)) {
		fail(s, "pace_new");
		goto out;
	}
	for (int b = 0; b < sc->nblob; b++) {
		pace_blob_add(s->p, sc->size[b], &s->blob_id[b]);
		pace__ranges_init(&s->held[b], 1u << 16);
		if (sc->held_hi[b] > sc->held_lo[b]) {
			pace_blob_held(s->p, s->blob_id[b], sc->held_lo[b],
				       sc->held_hi[b]);
			pace__ranges_add(&s->held[b], sc->held_lo[b],
					 sc->held_hi[b], NULL);
		}
	}
	for (int i = 0; i < sc->nsrc; i++)
		pace_source_add(s->p, s->blob_id[sc->src[i].blob],
				sc->src[i].caps, &s->src_id[i]);
	s->collapse_detect = -1;
	if (getenv("SIM_TRACE")) {
		fprintf(stderr, "lanes %u/src %u align %" PRIu64 "K req %" PRIu64 "K..%" PRIu64 "K win %" PRIu64 "K..%" PRIu64 "K stall %.0f dl %.0f\n",
			sc->cfg.max_lanes, sc->cfg.lanes_per_source, (uint64_t)(sc->cfg.align / KIB), (uint64_t)(sc->cfg.min_request / KIB), (uint64_t)(sc->cfg.max_request / KIB), (uint64_t)(sc->cfg.window_min / KIB), (uint64_t)(sc->cfg.window_max / KIB), sc->cfg.stall_ns / 1e9, sc->cfg.deadline_ns / 1e9);
		for (int b = 0; b < sc->nblob; b++)
			fprintf(stderr, "blob %d size %" PRIu64 " held %" PRIu64 "..%" PRIu64 "\n", b, sc->size[b], sc->held_lo[b], sc->held_hi[b]);
		for (int i = 0; i < sc->nsrc; i++) {
			const struct src_spec *ss = &sc->src[i];
			fprintf(stderr, "src %d blob %d rate %.1f cap %.1f lat %.3f collapse %.2f stall %.2f+%.2f die %.2f/%d 429 %.2f-%.2f ra %.2f\n", i, ss->blob, ss->conn_rate / 1e6, ss->cap / 1e6, ss->latency, ss->collapse_at, ss->stall_at, ss->stall_len, ss->die_at, ss->die, ss->t429_from, ss->t429_to, ss->retry_after);
		}
		for (int i = 0; i < sc->nrd; i++) {
			const struct rd_spec *r = &sc->rd[i];
			fprintf(stderr, "rd %d blob %d kind %d rate %.1f rsize %" PRIu64 " start %" PRIu64 " n %d seek %.2f->%" PRIu64 " open %.2f\n", i, r->blob, r->kind, r->rate / 1e6, r->rsize, r->start, r->nreads, r->seek_at, r->seek_to, r->open_at);
		}
	}
	for (long step = 0;; step++) {
		bool event = step == 0;
		bool all_reading = true;

		s->t = step * dt;
		s->now = (uint64_t)step * MS + 1;
		if (s->t > sc->limit) {
			fail(s, "not done after %.0f s (liveness)", sc->limit);
			goto out;
		}
		lanes_step(s, dt, &event);
		if (readers_step(s, &rng, &event))
			goto out;
		if (all_done(s))
			break;
		if (event || s->now >= wake) {
			if (poll_all(s))
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
			pace_reader_window(s->p, s->rd[getenv("SIM_RD") ? (int)strtol(getenv("SIM_RD"), NULL, 10) : 0].id, &cur, &w);
			fprintf(stderr, "t=%.2f busy=%d cur=%.1fM W=%.1fM held=%.1fM waiting=%d",
				s->t, busy, cur / 1048576.0, w / 1048576.0,
				s->held[0].total / 1048576.0, s->rd[0].waiting);
			for (uint32_t l = 0; l < sc->cfg.max_lanes; l++) {
				struct pace_lane_info li;

				pace_lane_info(s->p, l, &li);
				fprintf(stderr, " %c%u:%.1f%s", li.busy ? 's' : '-', li.busy ? li.source : 0,
					li.rate / 1e6, li.collapsed ? "C" : "");
			}
			fprintf(stderr, "\n");
		}
		/* Collapse detection time. */
		if (s->collapse_detect < 0)
			for (int i = 0; i < sc->nsrc; i++) {
				const struct src_spec *ss = &sc->src[i];

				if (ss->collapse_at <= 0 || s->t < ss->collapse_at)
					continue;
				for (uint32_t l = 0; l < sc->cfg.max_lanes; l++) {
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
				fail(s, "liveness: a read waits, no lane "
					"busy, no wake-up");
				goto out;
			}
		}
		for (int i = 0; i < sc->nrd; i++)
			if (sc->rd[i].kind == RD_SEQ)
				all_reading &= s->rd[i].open && !s->rd[i].done;
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
		for (int i = 0; i < sc->nrd; i++)
			if (s->rd[i].max_wait_after_first >
			    s->fig.max_wait_after_first)
				s->fig.max_wait_after_first =
					s->rd[i].max_wait_after_first;
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

/* ---- scenarios ---- */

static void base(struct scenario *sc, const char *name)
{
	memset(sc, 0, sizeof(*sc));
	sc->name = name;
	pace_config_default(&sc->cfg);
	sc->cfg.max_blobs = 8;
	sc->cfg.max_sources = 16;
	sc->cfg.max_readers = 16;
	sc->cfg.max_waits = 16;
	sc->limit = 600;
}

static struct src_spec src(int blob, double rate, double cap, double lat)
{
	struct src_spec s;

	memset(&s, 0, sizeof(s));
	s.blob = blob;
	s.caps = PACE_CAPS_FULL;
	s.conn_rate = rate;
	s.cap = cap;
	s.latency = lat;
	return s;
}

static struct rd_spec seq(int blob, double rate, uint64_t rsize)
{
	struct rd_spec r;

	memset(&r, 0, sizeof(r));
	r.blob = blob;
	r.kind = RD_SEQ;
	r.rate = rate;
	r.rsize = rsize;
	return r;
}

struct check {
	const char *what;
	bool ok;
};

static int passed, failed, missed;

/* A row: ok (invariants held and target met), MISS (invariants held, the
 * performance target not met) or FAIL (an invariant broke); MISS and FAIL
 * both fail the run. */
static void row(const char *name, const struct figures *f, bool inv_ok,
		bool target_ok, const char *note)
{
	bool ok = inv_ok && target_ok;
	const char *res = !inv_ok ? "FAIL" : target_ok ? "ok" : "MISS";

	printf("%-22s %7.2f %7.2f %6.3f %9.1f %7.1f %7.1f %7.1f %6" PRIu64
	       " %5" PRIu64 " %4" PRIu64 "  %s %s\n",
	       name, f->done, f->ideal, f->ideal > 0 ? f->done / f->ideal : 0,
	       (double)f->overfetch / MIB, f->p50 * 1e3, f->p99 * 1e3,
	       f->max * 1e3, f->requests, f->steals, f->reclaims, res, note);
	printf("%s %s\n", ok ? "PASS" : "FAIL", name);
	if (inv_ok && !target_ok)
		missed++;
	fflush(stdout);
	if (ok)
		passed++;
	else
		failed++;
}

static void named(const struct scenario *sc,
		  bool (*judge)(const struct scenario *, const struct figures *,
				char *, size_t))
{
	struct figures f;
	char err[512] = "", note[512] = "";
	int rc;
	bool target;

	if (getenv("SIM_ONLY") && strcmp(getenv("SIM_ONLY"), sc->name) != 0)
		return;
	rc = run(sc, &f, err, sizeof(err));
	target = judge(sc, &f, note, sizeof(note));

	row(sc->name, &f, rc == 0, target, rc ? err : note);
}

/* The same scenario with an executor that sends nothing ahead: QUEUE is
 * advisory, so ignoring it costs a round trip per request and nothing
 * more. */
static bool judge_nopipe(const struct scenario *sc, const struct figures *f,
			 char *note, size_t n)
{
	snprintf(note, n, "QUEUE ignored; target <= 1.20 x ideal");
	return f->done <= sc->ideal * 1.20;
}

/* 1: two sources, 8 and 4 MB/s per connection, 4 connections each. */
static bool judge_two_sources(const struct scenario *sc,
			      const struct figures *f, char *note, size_t n)
{
	snprintf(note, n, "target <= 1.10 x ideal");
	return f->done <= sc->ideal * 1.10;
}

static void sc_two_sources(void)
{
	struct scenario sc;

	base(&sc, "two_sources");
	sc.nblob = 1;
	sc.size[0] = 256 * MIB;
	sc.nsrc = 2;
	sc.src[0] = src(0, 8 * MB, 32 * MB, 0.05);
	sc.src[1] = src(0, 4 * MB, 16 * MB, 0.05);
	sc.nrd = 1;
	sc.rd[0] = seq(0, 0, 1 * MIB);
	sc.ideal = (double)sc.size[0] / (48 * MB);
	named(&sc, judge_two_sources);
	sc.name = "two_sources/nopipe";
	sc.no_pipeline = true;
	named(&sc, judge_nopipe);
}

/* 2: one source collapses to 3% mid-transfer. */
static bool judge_collapse(const struct scenario *sc, const struct figures *f,
			   char *note, size_t n)
{
	bool det = f->detect >= 0 && f->detect < sc->cfg.stall_ns / 1e9;

	snprintf(note, n, "detected after %.2f s (stall %.0f s); target <= "
			  "1.15 x ideal",
		 f->detect, sc->cfg.stall_ns / 1e9);
	return det && f->done <= sc->ideal * 1.15;
}

static void sc_collapse(void)
{
	struct scenario sc;
	double t = 2.0, before, after;

	base(&sc, "collapse");
	sc.nblob = 1;
	sc.size[0] = 256 * MIB;
	sc.nsrc = 2;
	sc.src[0] = src(0, 8 * MB, 32 * MB, 0.05);
	sc.src[1] = src(0, 8 * MB, 32 * MB, 0.05);
	sc.src[1].collapse_at = t;
	sc.src[1].collapse_frac = 0.03;
	sc.nrd = 1;
	sc.rd[0] = seq(0, 0, 1 * MIB);
	/* Ideal: full rate until the collapse, then what remains at the
	 * remaining capacity. */
	before = t * 64 * MB;
	after = (double)sc.size[0] - before;
	sc.ideal = t + after / (32 * MB + 0.03 * 32 * MB);
	named(&sc, judge_collapse);
	sc.name = "collapse/nopipe";
	sc.no_pipeline = true;
	named(&sc, judge_nopipe);
}

/* 3: a reader at 2 MB/s with 32 MB/s of capacity. */
static bool judge_slow_reader(const struct scenario *sc,
			      const struct figures *f, char *note, size_t n)
{
	double rtt = sc->src[0].latency +
		     (double)sc->cfg.min_request / sc->src[0].conn_rate;
	bool waits = f->max_wait_after_first <= rtt;
	bool bound = f->overfetch <= sc->cfg.window_max;

	snprintf(note, n, "max wait after first %.1f ms (rtt %.1f ms); "
			  "over-fetch <= W",
		 f->max_wait_after_first * 1e3, rtt * 1e3);
	return waits && bound;
}

static void sc_slow_reader(void)
{
	struct scenario sc;

	base(&sc, "slow_reader");
	sc.nblob = 1;
	sc.size[0] = 64 * MIB;
	sc.nsrc = 1;
	sc.src[0] = src(0, 4 * MB, 32 * MB, 0.05);
	sc.nrd = 1;
	sc.rd[0] = seq(0, 2 * MB, 128 * KIB);
	named(&sc, judge_slow_reader);
}

/* 4: random 4 KiB readers. */
static bool judge_random(const struct scenario *sc, const struct figures *f,
			 char *note, size_t n)
{
	int reads = 0;

	for (int i = 0; i < sc->nrd; i++)
		reads += sc->rd[i].nreads;
	snprintf(note, n, "%d reads, largest request %" PRIu64 " KiB",
		 reads, (uint64_t)(f->max_req / KIB));
	return f->requests <= (uint64_t)reads &&
	       f->max_req <= sc->cfg.min_request;
}

static void sc_random(void)
{
	struct scenario sc;

	base(&sc, "random_4k");
	sc.nblob = 1;
	sc.size[0] = 1024 * MIB;
	sc.nsrc = 1;
	sc.src[0] = src(0, 8 * MB, 0, 0.03);
	sc.nrd = 3;
	for (int i = 0; i < 3; i++) {
		memset(&sc.rd[i], 0, sizeof(sc.rd[i]));
		sc.rd[i].kind = RD_RANDOM;
		sc.rd[i].nreads = 200;
		sc.rd[i].think = 0.002;
	}
	sc.seed = 4;
	named(&sc, judge_random);
}

/* 5: seek. */
static bool judge_seek(const struct scenario *sc, const struct figures *f,
		       char *note, size_t n)
{
	(void)sc;
	snprintf(note, n, "new position requested after %.1f ms, %d lanes "
			  "yielded",
		 f->seek_start_delay * 1e3, f->yields_on_seek);
	return f->seek_start_delay == 0 && f->yields_on_seek > 0;
}

static void sc_seek(void)
{
	struct scenario sc;

	base(&sc, "seek");
	sc.nblob = 1;
	sc.size[0] = 512 * MIB;
	sc.nsrc = 1;
	sc.src[0] = src(0, 4 * MB, 32 * MB, 0.05);
	sc.nrd = 1;
	sc.rd[0] = seq(0, 16 * MB, 256 * KIB);
	sc.rd[0].seek_at = 3.0;
	sc.rd[0].seek_to = 400 * MIB;
	named(&sc, judge_seek);
}

/* 6: two readers of two blobs with equal demand, then a waiting read. */
static bool judge_fair(const struct scenario *sc, const struct figures *f,
		       char *note, size_t n)
{
	double a = f->bw[0], b = f->bw[1];
	double lo = a < b ? a : b, hi = a > b ? a : b;
	double rtt = sc->src[2].latency +
		     (double)sc->cfg.min_request / sc->src[2].conn_rate;
	bool overtakes = f->rand_max_wait <= rtt + 0.01;

	snprintf(note, n, "bw %.1f / %.1f MB/s; random read max wait %.1f ms "
			  "(rtt %.1f ms)",
		 a / MB, b / MB, f->rand_max_wait * 1e3, rtt * 1e3);
	return lo > 0 && hi <= lo * 1.10 && overtakes;
}

static void sc_fair(void)
{
	struct scenario sc;

	base(&sc, "two_blobs_fair");
	sc.cfg.max_lanes = 4;
	sc.nblob = 3;
	sc.size[0] = 128 * MIB;
	sc.size[1] = 128 * MIB;
	sc.size[2] = 256 * MIB;
	sc.nsrc = 3;
	sc.src[0] = src(0, 4 * MB, 0, 0.05);
	sc.src[1] = src(1, 4 * MB, 0, 0.05);
	sc.src[2] = src(2, 4 * MB, 0, 0.05);
	sc.nrd = 3;
	sc.rd[0] = seq(0, 0, 1 * MIB);
	sc.rd[1] = seq(1, 0, 1 * MIB);
	memset(&sc.rd[2], 0, sizeof(sc.rd[2]));
	sc.rd[2].blob = 2;
	sc.rd[2].kind = RD_RANDOM;
	sc.rd[2].nreads = 10;
	sc.rd[2].think = 0.5;
	sc.rd[2].open_at = 1.0;
	sc.seed = 6;
	named(&sc, judge_fair);
}

/* 7: all sources dead. */
static bool judge_dead(const struct scenario *sc, const struct figures *f,
		       char *note, size_t n)
{
	snprintf(note, n, "every read failed by its deadline (%.0f s)",
		 sc->cfg.deadline_ns / 1e9);
	return f->max <= sc->cfg.deadline_ns / 1e9 + 0.002;
}

static void sc_dead(void)
{
	struct scenario sc;

	base(&sc, "all_dead");
	sc.cfg.deadline_ns = 5 * SEC;
	sc.nblob = 1;
	sc.size[0] = 64 * MIB;
	sc.nsrc = 2;
	sc.src[0] = src(0, 4 * MB, 0, 0.05);
	sc.src[1] = src(0, 4 * MB, 0, 0.05);
	sc.src[0].die_at = 0.5;
	sc.src[0].die = DIE_RESET;
	sc.src[1].die_at = 0.7;
	sc.src[1].die = DIE_RESET;
	sc.nrd = 2;
	sc.rd[0] = seq(0, 0, 1 * MIB);
	sc.rd[1] = seq(0, 0, 1 * MIB);
	sc.rd[1].start = 32 * MIB;
	sc.errors_ok = true;
	named(&sc, judge_dead);
}

/* 429 bursts: throttling cuts the source's lanes, and the transfer still
 * completes (run() fails a read that fails). */
static bool judge_throttle(const struct scenario *sc, const struct figures *f,
			   char *note, size_t n)
{
	(void)sc;
	snprintf(note, n, "%" PRIu64 " lane cut(s), %d requests answered 429",
		 f->cuts, f->n429);
	return f->cuts >= 1;
}

static void sc_throttle(void)
{
	struct scenario sc;

	base(&sc, "throttle_429");
	sc.nblob = 1;
	sc.size[0] = 128 * MIB;
	sc.nsrc = 1;
	sc.src[0] = src(0, 8 * MB, 0, 0.03);
	sc.src[0].t429_from = 1.0;
	sc.src[0].t429_to = 3.0;
	sc.src[0].retry_after = 0.5;
	sc.nrd = 1;
	sc.rd[0] = seq(0, 0, 1 * MIB);
	named(&sc, judge_throttle);
}

/* Memory budget: many readers, bytes in flight never above the budget
 * (checked after every step). */
static bool judge_budget(const struct scenario *sc, const struct figures *f,
			 char *note, size_t n)
{
	snprintf(note, n, "max in flight %.1f MiB (budget %.0f MiB)",
		 (double)f->inflight_max / MIB,
		 (double)sc->cfg.budget_bytes / MIB);
	return f->inflight_max <= sc->cfg.budget_bytes;
}

static void sc_budget(void)
{
	struct scenario sc;

	base(&sc, "budget");
	sc.cfg.budget_bytes = 16 * MIB;
	sc.nblob = 3;
	sc.nsrc = 3;
	sc.nrd = 6;
	for (int b = 0; b < 3; b++) {
		sc.size[b] = 64 * MIB;
		sc.src[b] = src(b, 8 * MB, 0, 0.05);
		sc.rd[2 * b] = seq(b, 0, 1 * MIB);
		sc.rd[2 * b + 1] = seq(b, 0, 1 * MIB);
		sc.rd[2 * b + 1].start = 32 * MIB;
	}
	named(&sc, judge_budget);
}

/* ---- pacing that follows the reader. The far origin: 20 ms before the
 * first byte, 8 MB/s per connection, 8 lanes. ---- */

static void far_origin(struct scenario *sc, const char *name, uint64_t size)
{
	base(sc, name);
	sc->cfg.align = 64 * KIB;
	sc->cfg.min_request = 64 * KIB;
	sc->cfg.window_min = 256 * KIB;
	sc->nblob = 1;
	sc->size[0] = size;
	sc->nsrc = 1;
	sc->src[0] = src(0, 8 * MB, 0, 0.02);
}

/* A player: pulled - consumed <= max(4 MiB, lead x rate), and no read
 * after the first waits longer than a round trip and its own transfer. */
static bool judge_player(const struct scenario *sc, const struct figures *f,
			 char *note, size_t n)
{
	double rate = sc->rd[0].rate;
	double lead = (double)sc->cfg.lead_ns / 1e9;
	double allowed = rate * lead > 4 * MIB ? rate * lead : 4 * MIB;
	double over = (double)f->pulled - (double)f->consumed;
	double turn = sc->src[0].latency +
		      (double)sc->rd[0].rsize / sc->src[0].conn_rate + 0.002;

	snprintf(note, n, "pulled - consumed %.1f MiB (<= %.1f); max wait "
			  "after first %.1f ms (<= %.1f)",
		 over / MIB, allowed / MIB, f->max_wait_after_first * 1e3,
		 turn * 1e3);
	return over <= allowed && f->max_wait_after_first <= turn;
}

static void sc_player(const char *name, double rate, double secs)
{
	struct scenario sc;

	far_origin(&sc, name, 256 * MIB);
	sc.nrd = 1;
	sc.rd[0] = seq(0, rate, 256 * KIB);
	sc.rd[0].stop_after = (uint64_t)(rate * secs);
	named(&sc, judge_player);
}

/* A zip member of 1 MiB: the end of central directory, the directory,
 * then the member's header and data, read as the kernel asks for them. */
static const struct rd_step zip_steps[] = {
	{100 * MIB - 4 * KIB, 4 * KIB},
	{100 * MIB - 12 * KIB, 8 * KIB},
	{50 * MIB, 64 * KIB},
	{50 * MIB + 64 * KIB, 128 * KIB},
	{50 * MIB + 192 * KIB, 256 * KIB},
	{50 * MIB + 448 * KIB, 256 * KIB},
	{50 * MIB + 704 * KIB, 256 * KIB},
	{50 * MIB + 960 * KIB, 128 * KIB},
};

static bool judge_zip(const struct scenario *sc, const struct figures *f,
		      char *note, size_t n)
{
	(void)sc;
	snprintf(note, n, "pulled %.2f MiB for a 1 MiB member (<= 1.5)",
		 (double)f->pulled / MIB);
	return f->pulled <= 3 * MIB / 2;
}

static void sc_zip(void)
{
	struct scenario sc;

	far_origin(&sc, "zip_member", 100 * MIB);
	sc.nrd = 1;
	memset(&sc.rd[0], 0, sizeof(sc.rd[0]));
	sc.rd[0].kind = RD_SCRIPT;
	sc.rd[0].script = zip_steps;
	sc.rd[0].nsteps = (int)(sizeof(zip_steps) / sizeof(zip_steps[0]));
	named(&sc, judge_zip);
}

/* SQLite-like point lookups: at most 3 round trips (requests) a lookup. */
static bool judge_lookup(const struct scenario *sc, const struct figures *f,
			 char *note, size_t n)
{
	double per = f->lookups ? (double)f->requests / f->lookups : 1e9;

	(void)sc;
	snprintf(note, n, "%d lookups, %.2f requests each (<= 3)",
		 f->lookups, per);
	return per <= 3.0;
}

static void sc_lookup(void)
{
	struct scenario sc;

	far_origin(&sc, "sqlite_lookups", 300 * MIB);
	sc.nrd = 1;
	memset(&sc.rd[0], 0, sizeof(sc.rd[0]));
	sc.rd[0].kind = RD_LOOKUP;
	sc.rd[0].nreads = 50;
	sc.seed = 12;
	named(&sc, judge_lookup);
}

/* A 1 MiB read at a new position during playback: within twice a round
 * trip plus 1 MiB over every lane's rate. */
static bool judge_seek_play(const struct scenario *sc,
			    const struct figures *f, char *note, size_t n)
{
	double lim = 2 * (sc->src[0].latency +
			  (double)MIB / (sc->cfg.max_lanes * sc->src[0].conn_rate));

	snprintf(note, n, "1 MiB at a new position in %.1f ms (<= %.1f)",
		 f->seek_read_wait * 1e3, lim * 1e3);
	return f->seek_read_wait <= lim;
}

static void sc_seek_play(void)
{
	struct scenario sc;

	far_origin(&sc, "seek_playback", 512 * MIB);
	sc.nrd = 1;
	sc.rd[0] = seq(0, 4 * MB, 256 * KIB);
	sc.rd[0].seek_at = 3.0;
	sc.rd[0].seek_to = 300 * MIB;
	sc.rd[0].seek_len = 1 * MIB;
	sc.rd[0].stop_after = 20 * MB;
	named(&sc, judge_seek_play);
}

/* An origin that serves one transfer at a time, 503 + Retry-After: 1 s
 * beyond: 32 MiB on loopback in 2 s at most. */
static bool judge_one_transfer(const struct scenario *sc,
			       const struct figures *f, char *note, size_t n)
{
	(void)sc;
	snprintf(note, n, "32 MiB in %.2f s (<= 2), %d requests answered 503",
		 f->done, f->n429);
	return f->done <= 2.0;
}

static void sc_one_transfer(void)
{
	struct scenario sc;

	base(&sc, "one_transfer_503");
	sc.cfg.align = 64 * KIB;
	sc.cfg.min_request = 64 * KIB;
	sc.cfg.window_min = 256 * KIB;
	sc.nblob = 1;
	sc.size[0] = 32 * MIB;
	sc.nsrc = 1;
	sc.src[0] = src(0, 300 * MB, 0, 0.0005);
	sc.src[0].max_conn = 1;
	sc.src[0].retry_after = 1.0;
	sc.nrd = 1;
	sc.rd[0] = seq(0, 0, 1 * MIB);
	named(&sc, judge_one_transfer);
}

/* Resume: held bytes are never requested (checked on every START), and
 * every byte that was not held is sent exactly once. */
static bool judge_resume(const struct scenario *sc, const struct figures *f,
			 char *note, size_t n)
{
	uint64_t missing = sc->size[0] - (sc->held_hi[0] - sc->held_lo[0]);

	snprintf(note, n, "sent %" PRIu64 " of %" PRIu64 " missing bytes",
		 f->sent, missing);
	return f->sent == missing;
}

static void sc_resume(void)
{
	struct scenario sc;

	base(&sc, "resume");
	sc.nblob = 1;
	sc.size[0] = 64 * MIB;
	sc.held_lo[0] = 8 * MIB;
	sc.held_hi[0] = 40 * MIB + 12345;
	sc.nsrc = 2;
	sc.src[0] = src(0, 8 * MB, 0, 0.02);
	sc.src[1] = src(0, 2 * MB, 0, 0.08);
	sc.nrd = 1;
	sc.rd[0] = seq(0, 0, 1 * MIB);
	named(&sc, judge_resume);
}

/* ---- randomized ---- */

static void random_scenario(struct scenario *sc, uint64_t seed)
{
	uint64_t st = seed;
	bool any_healthy[MAX_BLOB] = {false};

	base(sc, "random");
	sc->seed = seed;
	sc->cfg.max_lanes = 1 + (uint32_t)(rnd64(&st) % 8);
	sc->cfg.lanes_per_source = 1 + (uint32_t)(rnd64(&st) % 8);
	sc->cfg.align = (rnd64(&st) % 2 ? 64 : 256) * KIB;
	sc->cfg.min_request = sc->cfg.align * (1 + rnd64(&st) % 2);
	sc->cfg.max_request = sc->cfg.min_request * (1 + rnd64(&st) % 16);
	sc->cfg.window_min = sc->cfg.min_request * (1 + rnd64(&st) % 4);
	sc->cfg.window_max = sc->cfg.window_min * (1 + rnd64(&st) % 32);
	sc->cfg.stall_ns = (1 + rnd64(&st) % 3) * SEC;
	/* A read may wait out one stall, a reclaim and a backoff. */
	sc->cfg.deadline_ns = sc->cfg.stall_ns * 4 + (4 + rnd64(&st) % 8) * SEC;
	sc->cfg.backoff_ns = 100 * MS;
	sc->cfg.backoff_max_ns = 2 * SEC;
	sc->cfg.seed = seed;
	/* A budget in one scenario of four, from a stream of its own so
	 * that every seed keeps the scenario it always had. */
	{
		uint64_t bst = seed ^ 0x5bd1e995u;

		if (rnd64(&bst) % 4 == 0 && !getenv("SIM_NOBUDGET"))
			sc->cfg.budget_bytes = sc->cfg.max_request *
					       (1 + rnd64(&bst) % 8);
	}
	sc->nblob = 1 + (int)(rnd64(&st) % 3);
	for (int b = 0; b < sc->nblob; b++) {
		sc->size[b] = 1 + rnd64(&st) % (24 * MIB);
		if (rnd64(&st) % 4 == 0) {
			sc->held_lo[b] = rnd64(&st) % sc->size[b];
			sc->held_hi[b] = sc->held_lo[b] +
					 rnd64(&st) % (sc->size[b] -
						       sc->held_lo[b] + 1);
		}
	}
	sc->nsrc = 0;
	for (int b = 0; b < sc->nblob; b++) {
		int ns = 1 + (int)(rnd64(&st) % 3);

		for (int k = 0; k < ns && sc->nsrc < MAX_SRC; k++) {
			struct src_spec *s = &sc->src[sc->nsrc++];
			int fault = (int)(rnd64(&st) % 8);

			*s = src(b, (0.5 + rndf(&st) * 8) * MB,
				 rnd64(&st) % 2 ? (2 + rndf(&st) * 16) * MB : 0,
				 0.005 + rndf(&st) * 0.1);
			switch (fault) {
			case 0:
				s->collapse_at = rndf(&st) * 3;
				s->collapse_frac = 0.03;
				break;
			case 1:
				s->stall_at = rndf(&st) * 3;
				s->stall_len = rndf(&st) * 4;
				break;
			case 2:
				s->die_at = rndf(&st) * 3;
				s->die = rnd64(&st) % 2 ? DIE_GONE : DIE_RESET;
				break;
			case 3:
				s->t429_from = rndf(&st) * 2;
				s->t429_to = s->t429_from + rndf(&st) * 2;
				s->retry_after = rndf(&st);
				break;
			default:
				break;
			}
			if (fault >= 3)
				any_healthy[b] = true;
		}
	}
	for (int b = 0; b < sc->nblob; b++)
		if (!any_healthy[b])
			sc->errors_ok = true;
	sc->nrd = 1 + (int)(rnd64(&st) % 4);
	for (int i = 0; i < sc->nrd; i++) {
		struct rd_spec *r = &sc->rd[i];
		int b = (int)(rnd64(&st) % (uint64_t)sc->nblob);

		memset(r, 0, sizeof(*r));
		r->blob = b;
		r->open_at = rndf(&st);
		if (rnd64(&st) % 3 == 0) {
			r->kind = RD_RANDOM;
			r->nreads = 1 + (int)(rnd64(&st) % 30);
			r->think = rndf(&st) * 0.2;
		} else {
			r->kind = RD_SEQ;
			r->rate = rnd64(&st) % 2 ? 0 : (0.5 + rndf(&st) * 8) * MB;
			r->rsize = (4 + rnd64(&st) % 1024) * KIB;
			r->start = rnd64(&st) % 2 ? 0 : rnd64(&st) % sc->size[b];
			if (rnd64(&st) % 3 == 0) {
				r->seek_at = rndf(&st) * 3;
				r->seek_to = rnd64(&st) % sc->size[b];
			}
		}
	}
	sc->limit = 300;
}

int main(int argc, char **argv)
{
	int nrandom = 1000;
	uint64_t first = 1;
	int rpass = 0, rfail = 0;

	if (argc > 1)
		nrandom = (int)strtol(argv[1], NULL, 10);
	if (getenv("SIM_ONLY"))
		nrandom = 0; /* one named scenario */
	if (argc > 2)
		first = strtoull(argv[2], NULL, 10);
	printf("%-22s %7s %7s %6s %9s %7s %7s %7s %6s %5s %4s  %s\n",
	       "scenario", "done_s", "ideal_s", "ratio", "over_MiB", "p50_ms",
	       "p99_ms", "max_ms", "reqs", "steal", "recl", "result");
	if (!getenv("SIM_ONLY_RANDOM")) {
		sc_two_sources();
		sc_collapse();
		sc_slow_reader();
		sc_random();
		sc_seek();
		sc_fair();
		sc_dead();
		sc_resume();
		sc_throttle();
		sc_budget();
		sc_player("player_2MBps", 2 * MB, 6);
		sc_player("player_4MBps", 4 * MB, 16);
		sc_zip();
		sc_lookup();
		sc_seek_play();
		sc_one_transfer();
	}
	for (int i = 0; i < nrandom; i++) {
		struct scenario sc;
		struct figures f;
		char err[512] = "";

		random_scenario(&sc, first + (uint64_t)i);
		if (run(&sc, &f, err, sizeof(err)) == 0) {
			rpass++;
		} else {
			rfail++;
			printf("FAIL random seed %" PRIu64 ": %s\n", sc.seed,
			       err);
		}
	}
	printf("%s randomized: %d scenarios, %d failed\n",
	       rfail ? "FAIL" : "PASS", rpass + rfail, rfail);
	if (rfail)
		failed++;
	else
		passed++;
	if (missed)
		printf("%d performance target(s) missed (MISS rows)\n", missed);
	printf("%d passed, %d failed\n", passed, failed);
	return failed == 0 && passed > 0 ? 0 : 1;
}

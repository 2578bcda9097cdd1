/* plans: read plans in the simulator. A plan is the order in which a
 * loader's workers will open files; the files within a window past its
 * cursor get plan readers (pace_reader_plan, read-ahead of the third
 * kind), by the driver's rules in miniature (fs/driver/plan.c): the
 * window is the loader's opens a second over the lead's seconds, none
 * opens while the loader pauses, a plan reader closes when its file is
 * opened or held, and opens outside the window abandon the plan. The
 * named scenarios: a plan followed, followed out of order within its
 * window by four workers, paused, and abandoned. */
#include <stdio.h>
#include <string.h>

#include "tests/sim/sim_int.h"

void sim__plan_init(struct sim *s)
{
	s->plan.pause_t = -1;
	s->plan.rate_t0 = -1;
}

static int plan_ahead(const struct sim *s)
{
	const struct plan_spec *ps = &s->sc->plan;
	double lead = ps->lead > 0 ? ps->lead : s->sc->cfg.lead_ns / 1e9;
	double want = s->plan.rate * lead;

	if (want < ps->ahead_min)
		return ps->ahead_min;
	if (want > ps->ahead_max)
		return ps->ahead_max;
	return (int)want;
}

static bool plan_paused(const struct sim *s)
{
	const struct sim_plan *pl = &s->plan;
	double gap = s->sc->plan.pause;

	if (pl->rate > 0 && 4 / pl->rate > gap)
		gap = 4 / pl->rate;
	return pl->opened > 0 && s->t - pl->last_open > gap;
}

static void reader_close(struct sim *s, int i)
{
	if (!s->plan.open[i])
		return;
	pace_reader_close(s->p, s->plan.reader[i], s->now);
	s->plan.open[i] = false;
}

static uint64_t sent_total(const struct sim *s)
{
	uint64_t n = 0;

	for (int b = 0; b < s->sc->nblob; b++)
		n += s->fetched[b];
	return n;
}

/* Entry i was opened: the cursor moves past the entries opened and
 * those left a window behind; the rate over a second (the first over a
 * quarter). */
static void plan_consume(struct sim *s, int i)
{
	struct sim_plan *pl = &s->plan;
	int ahead = plan_ahead(s);

	pl->done[i] = true;
	pl->opened++;
	pl->misses = 0;
	pl->abandoned = false;
	pl->last_open = s->t;
	while (pl->cursor < s->sc->plan.n &&
	       (pl->done[pl->cursor] || pl->cursor + ahead < i))
		pl->cursor++;
	if (pl->next < pl->cursor)
		pl->next = pl->cursor;
	pl->rate_n++;
	if (pl->rate_t0 < 0) {
		pl->rate_t0 = s->t;
	} else if (s->t - pl->rate_t0 >= 1 ||
		   (pl->rate == 0 && s->t - pl->rate_t0 >= 0.25)) {
		double r = pl->rate_n / (s->t - pl->rate_t0);

		pl->rate = pl->rate > 0 ? (pl->rate + r) / 2 : r;
		pl->rate_t0 = s->t;
		pl->rate_n = 0;
	}
}

void sim__plan_opened(struct sim *s, int b)
{
	const struct plan_spec *ps = &s->sc->plan;
	struct sim_plan *pl = &s->plan;
	int ahead = plan_ahead(s), end, limit;

	if (ps->n == 0)
		return;
	end = pl->next + ahead / 2 + ps->ahead_min;
	if (end > ps->n)
		end = ps->n;
	/* The loader's reader takes over the file's bytes on the wire. */
	for (int i = 0; i < ps->n; i++)
		if (ps->blob[i] == b)
			reader_close(s, i);
	for (int i = pl->cursor; i < end; i++)
		if (ps->blob[i] == b && !pl->done[i]) {
			plan_consume(s, i);
			return;
		}
	pl->misses++;
	if (!pl->abandoned && pl->misses > s->fig.plan_misses)
		s->fig.plan_misses = pl->misses;
	limit = ps->miss_max ? ps->miss_max : 2 * ahead + ps->ahead_min;
	if (pl->abandoned || pl->cursor >= ps->n || pl->misses <= limit)
		return;
	pl->abandoned = true;
	s->fig.plan_abandoned = true;
	s->fig.plan_abandoned_at = pl->cursor;
	for (int i = 0; i < ps->n; i++)
		reader_close(s, i);
}

/* The bytes sent from a second into the loader's pause to its end. */
static void pause_bytes(struct sim *s)
{
	struct sim_plan *pl = &s->plan;
	double len = s->sc->rd[0].pause_len;

	if (pl->pause_t < 0 || len <= 1)
		return;
	if (!pl->pause1 && s->t >= pl->pause_t + 1) {
		pl->pause1 = true;
		pl->sent_pause1 = sent_total(s);
	}
	if (pl->pause1 && !pl->pause_end && s->t >= pl->pause_t + len) {
		pl->pause_end = true;
		s->fig.plan_pause_bytes = sent_total(s) - pl->sent_pause1;
	}
}

int sim__plan_step(struct sim *s, bool *event)
{
	const struct plan_spec *ps = &s->sc->plan;
	struct sim_plan *pl = &s->plan;
	int end;

	if (ps->n == 0)
		return 0;
	pause_bytes(s);
	for (int i = 0; i < ps->n; i++)
		if (pl->open[i] && pace_is_held(s->p, s->blob_id[ps->blob[i]],
						0, s->sc->size[ps->blob[i]]))
			reader_close(s, i);
	if (pl->abandoned || plan_paused(s))
		return 0;
	end = pl->cursor + plan_ahead(s);
	for (; pl->next < ps->n && pl->next < end; pl->next++) {
		int i = pl->next, b = ps->blob[i];

		if (pl->done[i] ||
		    pace_is_held(s->p, s->blob_id[b], 0, s->sc->size[b]))
			continue;
		if (pace_reader_open(s->p, s->blob_id[b], s->now,
				     &pl->reader[i]) ||
		    pace_reader_plan(s->p, pl->reader[i], 0, s->sc->size[b],
				     s->now))
			return sim__fail(s, "plan reader %d", i);
		pl->open[i] = true;
		*event = true;
	}
	return 0;
}

bool sim__plan_allows(struct sim *s, int b, uint64_t e)
{
	const struct plan_spec *ps = &s->sc->plan;

	for (int i = 0; i < ps->n; i++) {
		uint64_t cur, w;

		if (s->plan.open[i] && ps->blob[i] == b &&
		    pace_reader_window(s->p, s->plan.reader[i], &cur, &w) ==
			    0 &&
		    e <= cur + w)
			return true;
	}
	return false;
}

void sim__plan_end(struct sim *s)
{
	const struct plan_spec *ps = &s->sc->plan;

	for (int i = 0; i < ps->n; i++)
		if (!s->plan.done[i] && s->consumed_by_blob[ps->blob[i]] == 0)
			s->fig.plan_unread += s->fetched[ps->blob[i]];
}

/* ---- the named scenarios ---- */

#define FILES 64
#define FILE_SIZE (256 * KIB)

/* A loader of FILES files of FILE_SIZE from the far origin (one group of
 * sources, 8 lanes), `workers` workers reading each file whole as fast as
 * they can, and a plan of every file in the loader's order. */
static void plan_loader(struct scenario *sc, const char *name, int workers)
{
	sim__far_origin(sc, name, FILE_SIZE);
	sc->cfg.max_blobs = MAX_BLOB;
	sc->cfg.max_sources = MAX_SRC;
	sc->cfg.max_readers = MAX_BLOB + MAX_RD;
	sc->nblob = FILES;
	sc->nsrc = FILES;
	for (int b = 0; b < FILES; b++) {
		sc->size[b] = FILE_SIZE;
		sc->src[b] = sim__src(b, 8 * MB, 0, 0.02);
		sc->src[b].group = 1;
	}
	sc->nrd = workers;
	for (int i = 0; i < workers; i++) {
		memset(&sc->rd[i], 0, sizeof(sc->rd[i]));
		sc->rd[i].kind = RD_LOADER;
		sc->rd[i].rsize = 128 * KIB;
	}
	sc->plan.n = FILES;
	for (int i = 0; i < FILES; i++)
		sc->plan.blob[i] = i;
	sc->plan.ahead_min = 16;
	sc->plan.ahead_max = 4096;
	sc->plan.pause = 0.5;
	sc->ideal =
		(double)FILES * FILE_SIZE / (sc->cfg.max_lanes * 8 * MB) + 0.02;
	sc->limit = 60;
}

/* The same loader without the plan, for the judges' comparison. */
static double without_plan(const struct scenario *sc)
{
	static struct scenario bare;
	struct figures f;
	char err[256];

	bare = *sc;
	memset(&bare.plan, 0, sizeof(bare.plan));
	bare.rd[0].pause_len = 0;
	if (sim__run(&bare, &f, err, sizeof(err)) != 0)
		return 0;
	return f.done;
}

/* Every file read, pulled at most 1.02 x what was read, no open missed
 * the plan, and done in at most followed_ratio x the time without the
 * plan (a round trip a file a worker there) and 2 x the lanes' ideal. */
static double followed_ratio;

static bool judge_followed(const struct scenario *sc, const struct figures *f,
			   char *note, size_t n)
{
	double bare = without_plan(sc);
	bool pulled = f->pulled <= f->consumed + f->consumed / 50;

	snprintf(note, n,
		 "%d files in %.2f s (<= %.1f x %.2f without the plan, <= 2 x "
		 "ideal), pulled %.3f x read, misses %d",
		 f->files, f->done, followed_ratio, bare,
		 (double)f->pulled / (double)pace__max64(f->consumed, 1),
		 f->plan_misses);
	return f->files == FILES && pulled && f->plan_misses == 0 &&
	       f->done <= followed_ratio * bare && f->done <= 2 * sc->ideal;
}

/* Paused: from a second into the pause to its end, nothing more is
 * fetched (a file at most), and the loader's files are read whole. */
static bool judge_paused(const struct scenario *sc, const struct figures *f,
			 char *note, size_t n)
{
	bool pulled = f->pulled <= f->consumed + f->consumed / 50;

	snprintf(note, n,
		 "%.0f KiB fetched from 1 s into a %.0f s pause (<= %.0f), "
		 "%d files, pulled %.3f x read",
		 (double)f->plan_pause_bytes / KIB, sc->rd[0].pause_len,
		 (double)FILE_SIZE / KIB, f->files,
		 (double)f->pulled / (double)pace__max64(f->consumed, 1));
	return f->files == FILES && pulled && f->plan_pause_bytes <= FILE_SIZE;
}

/* Abandoned: the loader leaves the plan after 12 files; the plan goes
 * within miss_max opens, having pulled at most one window (ahead_min
 * files, its window's slack half that again) of files never opened. */
static bool judge_abandoned(const struct scenario *sc, const struct figures *f,
			    char *note, size_t n)
{
	uint64_t lim = (uint64_t)(sc->plan.ahead_min * 3 / 2) * FILE_SIZE;

	snprintf(note, n,
		 "abandoned at entry %d after %d misses, %.2f MiB of files "
		 "never opened (<= %.2f), %d files read",
		 f->plan_abandoned_at, f->plan_misses,
		 (double)f->plan_unread / MIB, (double)lim / MIB, f->files);
	return f->plan_abandoned && f->plan_unread <= lim &&
	       f->files == sc->norder;
}

void sim__plans(void)
{
	struct scenario sc;
	uint64_t rng = 5;

	plan_loader(&sc, "plan_followed", 1);
	followed_ratio = 0.3;
	sim__named(&sc, judge_followed);

	/* Four workers, each taking the next file of an order shuffled
	 * within blocks of 8 (a sampler's batches): every open within the
	 * window. */
	plan_loader(&sc, "plan_out_of_order", 4);
	sc.norder = FILES;
	for (int i = 0; i < FILES; i++)
		sc.order[i] = i;
	for (int i = 0; i < FILES; i++) {
		int j = i / 8 * 8 + (int)(sim__rnd64(&rng) % 8),
		    t = sc.order[i];

		sc.order[i] = sc.order[j];
		sc.order[j] = t;
	}
	followed_ratio = 0.6;
	sim__named(&sc, judge_followed);

	plan_loader(&sc, "plan_paused", 1);
	sc.rd[0].pause_after = 16;
	sc.rd[0].pause_len = 3;
	sim__named(&sc, judge_paused);

	/* A plan of the first 40 files; the loader reads 12 of them, then
	 * the 24 files the plan does not name. Abandoned after 4 misses, as
	 * a listing plan is, with a lead of 0.1 s. */
	plan_loader(&sc, "plan_abandoned", 1);
	sc.plan.n = 40;
	sc.plan.miss_max = 4;
	sc.plan.lead = 0.1;
	sc.norder = 36;
	for (int i = 0; i < 12; i++)
		sc.order[i] = i;
	for (int i = 12; i < 36; i++)
		sc.order[i] = 40 + (i - 12);
	sim__named(&sc, judge_abandoned);
}

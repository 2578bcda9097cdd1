/* fill: speculative fill for scattered readers on idle lanes, priced by
 * what a round trip costs: a stride's next run, around recent reads,
 * then the file's ends, then a small file's rest; and what a reader's
 * history says of it. */
#include "pacing/pace.h"
#include "pacing/pace_int.h"

/* A reader with no history is taken to read FILL_PRIOR_USED of every
 * FILL_PRIOR_GOT fetched for it (a half), a prior worth half a MiB of
 * fills: a few unread neighbourhoods teach it that speculation does not
 * pay. */
#define FILL_PRIOR_USED (256 * KIB)
#define FILL_PRIOR_GOT (512 * KIB)
/* Its neighbourhoods: one in FILL_PRIOR_NBS is taken as hit before it
 * has any (nb_chance). */
#define FILL_PRIOR_HITS 1
#define FILL_PRIOR_NBS 2
/* Its history of neighbourhoods is halved once it counts this many. */
#define FILL_NB_KEEP 8

/* A reader that has paid fewer round trips than this is young: a
 * neighbourhood is worth less to it (near_rtts). */
#define FILL_YOUNG_RTTS 4

/* A reader that has not read for this long has stopped: no fill. */
#define FILL_IDLE_NS (1 * SEC)

/* The fill leaves this share (1/n) of an origin's lanes to reads that
 * come, one lane at least. */
#define FILL_RESERVE_DIV 4

/* A stride's gaps may differ by this much (fill.c, stride_next). */
#define FILL_STRIDE_TOL (16 * 1024)

/* A read that ends this close to its file's end (in round trips' worth
 * of the link, a few chunks at least) fetches to the end. */
#define FILL_TAIL_MAX (4 * MIB)

bool pace__fill_on(const struct pace *p)
{
	return p->cfg.fill_max != 0;
}

/* Per-connection rate and round trip of the blob's first source's
 * origin; false while either is unknown. The rate is the source's
 * smoothed one, not its peak; before a rate window closed, the rate of
 * short requests (pace__short_rate); and no more than its group's
 * fastest lane of late showed over a whole request: short requests
 * whose first 400 KiB came at once (an origin's token bucket, full
 * after an idle second) showed 20-55 MB/s on a link of 8 MB/s a
 * connection, and a price seven times too high. */
static bool link_of(const struct pace *p, uint32_t blob, uint64_t *rate,
		    uint64_t *rtt)
{
	const struct blob *b = &p->blobs[blob];
	const struct source *s;
	const struct group *g;
	uint64_t r;

	if (b->first_src == PACE_NONE)
		return false;
	s = &p->sources[b->first_src];
	g = pace__group(p, s);
	r = s->rate ? s->rate : pace__expected_rate(p, b->first_src);
	*rtt = g->lat_est;
	if (!r)
		r = pace__short_rate(g);
	if (g->fast && g->fast < r)
		r = g->fast;
	*rate = r;
	return r && g->lat_est;
}

/* Lanes of the blob's origin free for speculation now: idle, or filling
 * already (the fill gives them back first), within its lane cap. */
static uint32_t lanes_spare(const struct pace *p, uint32_t blob)
{
	const struct blob *b = &p->blobs[blob];
	const struct group *g;
	uint32_t idle = 0, fill = 0, cap, busy;

	if (b->first_src == PACE_NONE)
		return 0;
	g = pace__group(p, &p->sources[b->first_src]);
	for (uint32_t i = 0; i < p->cfg.max_lanes; i++) {
		const struct lane *l = &p->lanes[i];

		idle += l->state == LANE_IDLE;
		fill += pace__lane_open(l) && l->fill;
	}
	cap = pace__min64(g->lane_cap, p->cfg.lanes_per_source);
	busy = g->lanes > fill ? g->lanes - fill : 0;
	cap = cap > busy ? cap - busy : 0;
	return pace__min64(idle + fill, cap);
}

uint64_t pace__fill_price(const struct pace *p, uint32_t blob)
{
	uint64_t rate, rtt;
	double price;

	if (!link_of(p, blob, &rate, &rtt))
		return 0;
	price = (double)rate * (double)rtt / (double)SEC *
		(double)lanes_spare(p, blob);
	return price > (double)UINT64_MAX / 2 ? UINT64_MAX / 2
					      : (uint64_t)price;
}

/* The chance, in [0, 1], that a byte fetched speculatively for r is
 * read: what its own history says, a half before it has any. */
static double chance(const struct reader *r)
{
	return (double)(r->spec_used + FILL_PRIOR_USED) /
	       (double)(r->spec_got + FILL_PRIOR_GOT);
}

/* The chance that a neighbourhood filled around one of r's reads saves
 * it a round trip: of those filled for it, the share a read that began
 * a run of its own landed in later (a half before it has any, a prior
 * of one in two). Counted in bytes, the chance took the run a read
 * began as read from its neighbourhood: a reader reading 800 KiB runs
 * far apart, never near an earlier one, kept a chance near a third. */
static double nb_chance(const struct reader *r)
{
	double w = 1.0 / (double)(1u << pace__min64(r->nb_halved, 16));

	return ((double)r->nb_hit + FILL_PRIOR_HITS * w) /
	       ((double)r->nb_made + FILL_PRIOR_NBS * w);
}

/* Bytes worth fetching at chance c that save `rtts` round trips if
 * read: chance x round trips saved x price, on whole chunks. */
static uint64_t worth_at(const struct pace *p, double c, uint64_t price,
			 double rtts)
{
	double v = c * rtts * (double)price;

	if (v > (double)(UINT64_MAX / 2))
		return UINT64_MAX / 2;
	return pace__align_down((uint64_t)v, p->cfg.align);
}

/* Bytes worth fetching for r that save `rtts` round trips if read, at
 * the chance its history of bytes gives. */
static uint64_t worth(const struct pace *p, const struct reader *r,
		      uint64_t price, double rtts)
{
	double v = chance(r) * rtts * (double)price;

	if (v > (double)(UINT64_MAX / 2))
		return UINT64_MAX / 2;
	return pace__align_down((uint64_t)v, p->cfg.align);
}

/* A read at s lies within a neighbourhood's worth now of one of r's
 * recent reads that had its neighbourhood filled: a hit there is the
 * neighbourhood's, not a file's end's (GDAL reads its header again
 * between windows) nor a stride's. */
static bool near_filled(const struct pace *p, const struct reader *r,
			uint64_t s)
{
	uint64_t nb =
		worth_at(p, nb_chance(r), pace__fill_price(p, r->blob), 1.0);
	uint32_t n = pace__min64(r->nrecent, FILL_RECENT);

	for (uint32_t i = 0; i < n; i++) {
		uint64_t c = r->recent[i];

		if ((r->nb_mask & (1u << i)) &&
		    (s > c ? s - c : c - s) <= nb + p->cfg.align)
			return true;
	}
	return false;
}

/* Reader r read the chunks [s, e). A read in filled bytes saved its
 * round trip whatever its size: it counts the stretch filled around it
 * as read, up to what one neighbourhood is worth now (half of it each
 * side), so that a reader whose reads land at random in a file largely
 * filled cannot talk itself into more. */
static void spec_hit(struct pace *p, struct reader *r, uint64_t s, uint64_t e)
{
	struct blob *b = &p->blobs[r->blob];
	uint64_t half = worth(p, r, pace__fill_price(p, r->blob), 1.0) / 2;
	uint64_t lo = s, hi = e, removed = 0;
	bool hit = false;

	if (!b->spec.cap)
		return;
	for (uint32_t i = 0; i < b->spec.n; i++) {
		if (b->spec.v[i].e <= s || b->spec.v[i].s >= e)
			continue;
		hit = true;
		lo = pace__min64(lo, pace__max64(b->spec.v[i].s,
						 s > half ? s - half : 0));
		hi = pace__max64(hi, pace__min64(b->spec.v[i].e,
						 pace__sat_add(e, half)));
	}
	if (hit && pace__ranges_remove(&b->spec, lo, hi, &removed) == 0)
		r->spec_used += removed;
	r->nb_hit += hit && near_filled(p, r, s);
}

void pace__fill_read(struct pace *p, struct reader *r, uint64_t off,
		     uint64_t len)
{
	struct blob *b = &p->blobs[r->blob];
	uint64_t s, e, removed = 0;

	s = pace__align_down(pace__min64(off, b->size), p->cfg.align);
	e = pace__min64(pace__align_up(pace__sat_add(off, len), p->cfg.align),
			b->size);
	if (e > s && b->unread.cap &&
	    pace__ranges_remove(&b->unread, s, e, &removed) == 0)
		p->stats.fill_read += removed;
	/* A read that goes on with the reader's run (the kernel's next
	 * piece of one read, a tile's second half, or such a piece that
	 * FUSE handed over out of order, up to the kernel's readahead
	 * behind) saved no round trip that the run's own reach would not
	 * have: the fill's bytes there say nothing of its neighbourhoods.
	 * Counted, a reader reading 800 KiB runs far apart learnt that
	 * they paid. Nor is it one of the reads the fill fills around:
	 * around each of a run's pieces, the neighbourhood of its last ran
	 * past the run's end. */
	if (r->seen && off <= r->cursor &&
	    (off >= r->run_start || off + p->cfg.kernel_ahead >= r->cursor))
		return;
	spec_hit(p, r, s, e);
	r->recent[r->nrecent % FILL_RECENT] = off;
	r->nb_mask &= ~(1u << (r->nrecent % FILL_RECENT));
	r->nrecent++;
}

void pace__fill_jump(struct pace *p, struct reader *r)
{
	uint64_t size = p->blobs[r->blob].size, want, end;

	if (!pace__fill_on(p) || (r->spec_end != 0 && !r->spec_fill))
		return; /* a large read's pieces (speculate) */
	want = worth(p, r, pace__fill_price(p, r->blob), 1.0);
	/* A reader that jumped before has runs of its own to go by: its
	 * reach ends where its last run's length from this run's start
	 * does, or at twice what this run has read, if later, so that what
	 * it leaves asked past a run's end is at most that run again (a
	 * tile pair, a band of chunks), not the price. */
	if (r->gen > 0) {
		uint64_t done = r->cursor - r->run_start,
			 runs = pace__reader_runs(r);

		want = pace__min64(
			want, pace__max64(runs > done ? runs - done : 0, done));
	}
	if (want < p->cfg.align)
		return;
	/* Renewed once the cursor is half way there. */
	if (r->spec_end > r->cursor && r->spec_end - r->cursor >= want / 2)
		return;
	end = pace__min64(
		pace__align_up(pace__sat_add(r->cursor, want), p->cfg.align),
		size);
	if (end <= r->cursor)
		return;
	r->spec_end = end;
	r->spec_fill = true;
	r->w = end - r->cursor;
}

uint64_t pace__fill_tail(const struct pace *p, const struct wait *w)
{
	uint64_t size = p->blobs[w->blob].size, near;

	if (!pace__fill_on(p) || w->end >= size)
		return w->end;
	near = pace__max64(
		4 * p->cfg.min_request,
		pace__min64(pace__fill_price(p, w->blob), FILL_TAIL_MAX));
	return size - w->end <= near ? size : w->end;
}

/* Round trips a neighbourhood saves: one, the next read near it, for a
 * reader that has paid FILL_YOUNG_RTTS round trips; a quarter for each
 * before that. A reader that just began may be done soon (a member of
 * an archive: its directory, its header, its bytes). */
static double near_rtts(const struct reader *r)
{
	return r->rtts >= FILL_YOUNG_RTTS ? 1.0
					  : (double)r->rtts / FILL_YOUNG_RTTS;
}

/* What the rest of r's file is worth: each round trip r paid so far
 * stands for one it would pay again, and a byte of the rest is as
 * likely to be read as its history says, or as the share of the file
 * its recent reads span, if more: a reader scattered over a small file
 * reads somewhere in it next. */
static uint64_t rest_worth(const struct pace *p, const struct reader *r,
			   uint64_t price)
{
	uint64_t size = p->blobs[r->blob].size, lo = UINT64_MAX, hi = 0;
	uint32_t n = pace__min64(r->nrecent, FILL_RECENT);
	double c = chance(r), spread, v;

	for (uint32_t i = 0; i < n; i++) {
		lo = pace__min64(lo, r->recent[i]);
		hi = pace__max64(hi, r->recent[i]);
	}
	spread = n > 1 && size ? (double)(hi - lo) / (double)size : 0;
	v = (spread > c ? spread : c) * (double)r->rtts * (double)price;
	return v > (double)(UINT64_MAX / 2) ? UINT64_MAX / 2 : (uint64_t)v;
}

/* The latest of r's last n runs' starts, i back (0: the latest). */
static uint64_t start_back(const struct reader *r, uint32_t i)
{
	return r->starts[(r->nstarts - 1 - i) % FILL_STARTS];
}

/* A run of r's, i back, began d (within FILL_STRIDE_TOL) past an earlier
 * one of its last n; which one back in *j, false when none did. */
static bool start_before(const struct reader *r, uint32_t n, uint32_t i,
			 int64_t d, uint32_t *j)
{
	for (*j = i + 1; *j < n; (*j)++) {
		int64_t e = (int64_t)(start_back(r, i) - start_back(r, *j)) - d;

		if (e >= -FILL_STRIDE_TOL && e <= FILL_STRIDE_TOL)
			return true;
	}
	return false;
}

/* A stride in r's runs: its latest run began d past an earlier one,
 * which began d past another, which began d past a third (within
 * FILL_STRIDE_TOL: an array's compressed chunks differ in length), the
 * four among its last FILL_STARTS. Its next run is then likely d past
 * the latest, as long as the run before it in the stride: [*lo, *hi). A
 * column of an array's chunks, a tile column, the index pages between
 * them (a stride of their own). Three equal gaps, not two: two among
 * eight random reads of a large file came about once in a hundred. False
 * when there is none. */
static bool stride_next(const struct pace *p, const struct reader *r,
			uint64_t *lo, uint64_t *hi)
{
	uint32_t n = pace__min64(r->nstarts, FILL_STARTS);
	uint64_t s0, size = p->blobs[r->blob].size, nx, len;

	if (n < 4)
		return false;
	s0 = start_back(r, 0);
	for (uint32_t i = 1; i < n; i++) {
		int64_t d = (int64_t)(s0 - start_back(r, i));
		uint32_t j, k;

		if (d == 0 || d < -(int64_t)(size / 2) ||
		    d > (int64_t)(size / 2) || !start_before(r, n, i, d, &j) ||
		    !start_before(r, n, j, d, &k))
			continue;
		nx = s0 + (uint64_t)d; /* wraps below 0: past size */
		if (nx >= size)
			return false;
		len = pace__min64(
			pace__max64(r->start_len[(r->nstarts - 1 - i) %
						 FILL_STARTS],
				    p->cfg.align),
			p->cfg.seq_min);
		*lo = pace__align_down(
			nx > FILL_STRIDE_TOL ? nx - FILL_STRIDE_TOL : 0,
			p->cfg.align);
		*hi = pace__min64(pace__sat_add(nx, len + FILL_STRIDE_TOL),
				  size);
		return true;
	}
	return false;
}

/* next_range's range is a stride's next run (not around a recent read,
 * whose slot it gives otherwise, or -1). */
#define FILL_SLOT_STRIDE (-2)

/* The next range to fill for r, its first unowned missing byte in *x and
 * that gap's end (bounded by the region) in *ge: around its recent
 * reads, the latest first, then its file's ends, then the whole file
 * when it is small and the reader's round trips so far make it worth
 * its missing bytes. False when nothing is worth fetching. */
static bool next_range(struct pace *p, const struct reader *r, uint64_t price,
		       bool stride_only, uint64_t *x, uint64_t *ge, int *slot)
{
	const struct blob *b = &p->blobs[r->blob];
	uint64_t nb = worth_at(p, nb_chance(r), price, near_rtts(r)),
		 size = b->size;
	/* Two thirds of a neighbourhood lie past its read: formats are
	 * read forward more often than back (a chain of headers, a record
	 * and the next). */
	uint64_t fwd = pace__align_up(nb * 2 / 3, p->cfg.align),
		 back = nb > fwd ? nb - fwd : 0, half = nb / 2;
	uint32_t n = pace__min64(r->nrecent, FILL_RECENT);
	uint64_t lo[FILL_RECENT * 2 + 3], hi[FILL_RECENT * 2 + 3];
	uint32_t k = 0, nbs = nb >= 2 * p->cfg.align ? 2 * n : 0;
	uint64_t slo, shi, g;

	*slot = -1;
	/* A stride's next run is taken as read for sure (three equal gaps
	 * say so): worth a round trip's price at most. */
	if (stride_next(p, r, &slo, &shi) && shi - slo <= price) {
		*x = pace__first_free(p, r->blob, slo, shi, &g);
		if (*x < shi) {
			*slot = FILL_SLOT_STRIDE;
			*ge = pace__min64(
				g, shi == size
					   ? size
					   : pace__align_up(shi, p->cfg.align));
			return true;
		}
	}
	if (stride_only)
		return false;
	if (nbs) {
		for (uint32_t i = 0; i < n; i++) {
			uint64_t c = pace__align_down(
				pace__min64(r->recent[(r->nrecent - 1 - i) %
						      FILL_RECENT],
					    size),
				p->cfg.align);

			lo[k] = c;
			hi[k++] = pace__min64(pace__sat_add(c, fwd), size);
			lo[k] = c > back ? c - back : 0;
			hi[k++] = c;
		}
		lo[k] = size > half
				? pace__align_down(size - half, p->cfg.align)
				: 0;
		hi[k++] = size;
		lo[k] = 0;
		hi[k++] = pace__min64(half, size);
	}
	if (size <= p->cfg.fill_max &&
	    rest_worth(p, r, price) >= size - b->held.total) {
		lo[k] = 0;
		hi[k++] = size;
	}
	for (uint32_t i = 0; i < k; i++) {
		if (lo[i] >= hi[i])
			continue;
		*x = pace__first_free(p, r->blob, lo[i], hi[i], &g);
		if (*x < hi[i]) {
			/* Two candidates a recent read, the latest first. */
			*slot = i < nbs ? (int)((r->nrecent - 1 - i / 2) %
						FILL_RECENT)
					: -1;
			*ge = pace__min64(
				g,
				hi[i] == size
					? size
					: pace__align_up(hi[i], p->cfg.align));
			return true;
		}
	}
	return false;
}

/* How the fill serves reader ri: FILL_ALL for one open, reading
 * scattered (no window), read lately, with no read waiting on bytes no
 * lane owns; FILL_STRIDE (its stride's next run alone) for such a
 * reader whose run has a reach that is no window yet (a large read's
 * pieces under way): its next run is asked beside them, not a round
 * trip after; FILL_NONE otherwise. */
enum { FILL_NONE, FILL_ALL, FILL_STRIDE };

static int fill_reader(struct pace *p, uint32_t ri)
{
	const struct reader *r = &p->readers[ri];
	const struct blob *b;

	if (!r->used || !r->seen || r->evident || !r->nrecent)
		return FILL_NONE;
	if (p->now - r->last_read_ns >= FILL_IDLE_NS)
		return FILL_NONE;
	b = &p->blobs[r->blob];
	if (b->first_src == PACE_NONE || b->held.total >= b->size)
		return FILL_NONE;
	if (pace__reader_unowned(p, ri))
		return FILL_NONE;
	return r->w != 0 ? FILL_STRIDE : FILL_ALL;
}

/* Starts one fill request for reader ri on an idle lane; false when
 * there is nothing to start for it. */
static bool fill_one(struct pace *p, struct poll *o, uint32_t ri, int how)
{
	const struct pace_config *c = &p->cfg;
	struct reader *r = &p->readers[ri];
	struct blob *b = &p->blobs[r->blob];
	const struct group *g = pace__blob_group(p, r->blob);
	uint64_t price, x, ge, e, rate, rtt, piece;
	uint32_t src, reserve, cap;
	int slot;
	struct lane *l = pace__idle_lane(p);

	if (!l || !g || !link_of(p, r->blob, &rate, &rtt))
		return false;
	cap = pace__min64(g->lane_cap, c->lanes_per_source);
	reserve = pace__max64(cap / FILL_RESERVE_DIV, 1);
	if (g->lanes + reserve >= cap)
		return false;
	price = pace__fill_price(p, r->blob);
	if (!next_range(p, r, price, how == FILL_STRIDE, &x, &ge, &slot))
		return false;
	src = pace__pick_source(p, r->blob, false);
	if (src == PACE_NONE || p->sources[src].caps != PACE_CAPS_FULL)
		return false;
	/* A piece a connection brings in two round trips: its lane is free
	 * again within about one for a read that comes. */
	piece = pace__align_up(
		(uint64_t)((double)rate * (double)rtt * 2.0 / (double)SEC),
		c->align);
	e = pace__request_end(p, b, x, piece, ge, ge);
	e = pace__budget_fit(p, x, e);
	if (e <= x)
		return false;
	pace__lane_start(p, l, r->blob, src, x, e, PACE_NONE, PACE_NONE,
			 &o->acts[o->n]);
	l->fill = true;
	o->acts[o->n++].fill = true;
	/* Counted when asked: a read that comes before the bytes, and
	 * waits on them, used them as much as one after. A fill cancelled
	 * for a waiting read counts whole among the bytes never read. */
	p->stats.fill_bytes += e - x;
	if (b->spec.cap)
		(void)pace__ranges_add(&b->unread, x, e, NULL);
	/* A stride's next run is no neighbourhood: a read there says
	 * nothing of what lies around the reader's reads. */
	if (slot == FILL_SLOT_STRIDE)
		return true;
	r->spec_got += e - x;
	if (slot >= 0 && !(r->nb_mask & (1u << slot))) {
		r->nb_mask |= 1u << slot;
		/* Its last FILL_NB_KEEP or so, the prior halved with
		 * them: a reader's manner changes (an array's header and a
		 * band read to and fro, then a column of chunks far
		 * apart), and with the prior whole a reader that never hit
		 * one kept a chance of a tenth (SQLite's lookups pulled
		 * twice their bytes). */
		if (r->nb_made >= FILL_NB_KEEP) {
			r->nb_made /= 2;
			r->nb_hit /= 2;
			r->nb_halved++;
		}
		r->nb_made++;
	}
	if (b->spec.cap)
		(void)pace__ranges_add(&b->spec, x, e, NULL);
	return true;
}

/* Some reader reading ahead has bytes of its window to ask for that
 * read-ahead left in this poll (its turn's credit ran out): the lanes
 * are its before they are the fill's. A window parked until its cursor
 * moves wants nothing. */
static bool ahead_wanting(struct pace *p)
{
	for (uint32_t i = 0; i < p->n_readers; i++) {
		const struct reader *r = &p->readers[i];
		uint64_t x, ge, wend;
		uint32_t src;

		if (!r->used || !r->seen || r->w == 0 || r->spec_fill)
			continue;
		x = pace__window_gap(p, r, &ge, &wend);
		if (x >= wend)
			continue;
		src = pace__pick_source(p, r->blob, false);
		if (src != PACE_NONE &&
		    pace__window_end(p, r, src, x, ge, wend) > x)
			return true;
	}
	return false;
}

bool pace__fill(struct pace *p, struct poll *o)
{
	bool any = true;

	if (!pace__fill_on(p) || o->starved || ahead_wanting(p))
		return true;
	/* Round robin over readers, a request each per turn. */
	for (int round = 0; any && round < 64; round++) {
		any = false;
		for (uint32_t k = 0; k < p->n_readers; k++) {
			uint32_t ri = (p->rr + k) % p->n_readers;
			int how = fill_reader(p, ri);

			if (how == FILL_NONE)
				continue;
			if (o->n == o->cap)
				return false;
			any |= fill_one(p, o, ri, how);
		}
	}
	return true;
}

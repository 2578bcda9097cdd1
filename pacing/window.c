/* window: each reader's read-ahead window: sequential detection, how the
 * window grows, and the next request inside it. */
#include "pacing/pace.h"
#include "pacing/pace_int.h"

#include <errno.h>
#include <string.h>

/* A window shares the budget with the other readers reading ahead: no
 * larger than twice budget / readers (window_min at least). Twice: the
 * budget counts bytes in flight and a window holds bytes arrived too, and
 * every request is fitted to the budget's room anyway (pace__budget_fit).
 * At one share, eight readers under 32 MiB had 4 MiB windows, refilled a
 * quarter at a time: six requests an 8 MiB shard. */
static uint64_t budget_window(const struct pace *p, uint64_t w)
{
	uint64_t share;

	if (!p->cfg.budget_bytes)
		return w;
	share = 2 * p->cfg.budget_bytes / pace__max64(p->nactive, 1);
	return pace__max64(pace__min64(w, share), p->cfg.window_min);
}

/* Largest useful window for a reader of blob: what the blob's sources can
 * deliver over a request's lifetime plus a round trip, twice over. Unknown
 * rates: window_max. */
static uint64_t window_cap(const struct pace *p, uint32_t blob)
{
	const struct blob *b = &p->blobs[blob];
	uint64_t peak = 0, lat = 0;
	double w;

	for (uint32_t i = b->first_src; i != PACE_NONE;
	     i = p->sources[i].next) {
		const struct source *s = &p->sources[i];
		const struct group *g = pace__group(p, s);

		if (s->excluded)
			continue;
		if (!g->peak)
			return budget_window(p, p->cfg.window_max);
		peak = pace__max64(peak, g->peak);
		lat = pace__max64(lat, g->lat_est);
	}
	if (!peak)
		return budget_window(p, p->cfg.window_max);
	w = 2.0 * (double)peak * p->cfg.max_lanes *
	    (double)(lat + REQUEST_TIME_NS) / (double)SEC;
	if (w > (double)p->cfg.window_max)
		return budget_window(p, p->cfg.window_max);
	return budget_window(p, pace__max64((uint64_t)w, p->cfg.window_min));
}

/* The smallest useful window: what arrives in one round trip on one
 * connection of the blob's best source, so that a reader never waits a
 * round trip it could have hidden; at least min_request. */
static uint64_t window_floor(const struct pace *p, uint32_t blob)
{
	const struct blob *b = &p->blobs[blob];
	uint64_t f = p->cfg.min_request;

	for (uint32_t i = b->first_src; i != PACE_NONE;
	     i = p->sources[i].next) {
		const struct source *s = &p->sources[i];
		const struct group *g = pace__group(p, s);
		double rtt_bytes;

		if (s->excluded || !g->peak)
			continue;
		rtt_bytes = (double)g->peak * (double)g->lat_est / (double)SEC;
		if (rtt_bytes > (double)f)
			f = (uint64_t)rtt_bytes;
	}
	return f;
}

/* The window that keeps r's lead at lead_ns of its consumption, the
 * kernel's readahead counted in: between the floor and the cap. Unknown
 * consumption: the cap (the window then grows as the reader reads). */
static uint64_t window_target(const struct pace *p, const struct reader *r)
{
	uint64_t cap = window_cap(p, r->blob), t;
	double lead;

	if (!r->crate)
		return cap;
	lead = (double)r->crate * (double)p->cfg.lead_ns / (double)SEC;
	t = lead > (double)cap ? cap : (uint64_t)lead;
	t = t > p->cfg.kernel_ahead ? t - p->cfg.kernel_ahead : 0;
	t = pace__max64(t, window_floor(p, r->blob));
	return pace__min64(t, cap);
}

/* A window never grows past eight times what its run has read: a reader
 * that read 1 MiB and stopped (cmp -n, a header) must not leave 64 MiB of
 * requests behind it, however often it waited on the way; eight times, so
 * that a copy's window still grows faster than it reads. A reader whose
 * runs ended short SCATTER_RUNS times reads scattered, and its long runs
 * end too (a band of an array's chunks, a tile row): once, so that what
 * it leaves asked past a run is at most that run again. */
static uint64_t grow_limit(const struct pace *p, const struct reader *r)
{
	uint64_t k = r->short_runs >= SCATTER_RUNS ? 1 : 8;
	uint64_t lim = r->run > UINT64_MAX / k ? UINT64_MAX : k * r->run;

	return pace__max64(p->cfg.window_min, lim);
}

int pace_reader_plan(struct pace *p, uint32_t reader, uint64_t off,
		     uint64_t len, uint64_t now_ns)
{
	struct reader *r = p ? pace__reader_get(p, reader) : NULL;
	uint64_t size;

	if (!r)
		return -ENOENT;
	size = p->blobs[r->blob].size;
	if (r->seen || off > size)
		return -EINVAL;
	pace__tick(p, now_ns);
	/* Seen and evident, so that read-ahead serves it; not from its
	 * start, so that it never counts among the group's whole-file
	 * readers, having read nothing. */
	r->plan = true;
	r->seen = true;
	r->evident = true;
	r->cursor = off;
	r->run_start = off;
	r->w = pace__min64(len, size - off);
	r->had_window = r->w > 0;
	r->last_read_ns = now_ns;
	return 0;
}

void pace__reader_judge(struct pace *p, const struct reader *r)
{
	struct group *g = pace__blob_group(p, r->blob);

	if (!g || !r->seen || !r->from_start || r->gen != 0)
		return;
	if (r->cursor >= p->blobs[r->blob].size)
		g->whole++;
	else
		g->part++;
	if (g->whole + g->part > 64) {
		g->whole /= 2;
		g->part /= 2;
	}
}

/* The window of a reader whose first read is at its file's start, in a
 * group whose readers read files whole: the whole file, up to WHOLE_MAX
 * and the window's cap; 0 otherwise. */
static uint64_t whole_window(const struct pace *p, const struct reader *r)
{
	const struct group *g = pace__blob_group(p, r->blob);
	uint32_t n = g ? g->whole + g->part : 0;

	if (n < WHOLE_MIN || (uint64_t)g->whole * 100 < (uint64_t)n * WHOLE_PCT)
		return 0;
	return pace__min64(pace__min64(p->blobs[r->blob].size, WHOLE_MAX),
			   window_cap(p, r->blob));
}

void pace__window_waited(struct pace *p, struct reader *r)
{
	uint64_t cap = pace__min64(window_cap(p, r->blob), grow_limit(p, r));

	if (r->w < cap)
		r->w = pace__min64(r->w * 4, cap);
	r->grow_run = 0;
	r->last_wait_ns = p->now ? p->now : 1;
}

/* Bytes consumed: the sample closes once it spans CONSUME_WINDOW_NS of
 * wall time, counting what was consumed before this read over the time
 * up to it, so that a pause lowers the rate. */
static void consume(struct pace *p, struct reader *r, uint64_t bytes)
{
	uint64_t dt;

	if (!r->seen) {
		r->rate_t0 = p->now;
	} else {
		dt = p->now - r->rate_t0;
		if (dt >= CONSUME_WINDOW_NS) {
			uint64_t sample = (uint64_t)((double)r->rate_bytes *
						     (double)SEC / (double)dt);

			r->crate = r->crate ? (r->crate + sample) / 2 : sample;
			r->rate_t0 = p->now;
			r->rate_bytes = 0;
		}
	}
	r->rate_bytes += bytes;
	r->last_read_ns = p->now;
}

/* The window a sequential reader opens at: window_min, or, for a reader
 * whose run starts at its file's start, eight times what the run has read
 * (its first read counted: grow_limit's bound) up to seq_min (the run any
 * other reader must show first), so that its second request asks what
 * doubling from window_min reached only requests later: a loader's shard
 * on a fast link grew 256 KiB, 512 KiB, 1 MiB, ... a round trip a step
 * (docs/pacing.md, "A new reader on a fast link"). */
static uint64_t opening(const struct pace *p, const struct reader *r)
{
	uint64_t read = r->cursor - r->run_start;

	if (!r->from_start || r->gen != 0 || read > UINT64_MAX / 8)
		return p->cfg.window_min;
	return pace__max64(p->cfg.window_min,
			   pace__min64(8 * read, p->cfg.seq_min));
}

/* The window of a sequential reader after a read: it opens at
 * window_min once the run is evident, grows by doubling every W/2
 * consumed up to its target, and shrinks to the target when the reader
 * slows or pauses, unless it waited at its cursor within the last lead
 * (its measured rate then understates what it would consume). A lead
 * that fell under a round trip's worth counts as a wait. */
static void window_update(struct pace *p, struct reader *r)
{
	const struct pace_config *c = &p->cfg;
	uint64_t target = window_target(p, r);
	const struct blob *b = &p->blobs[r->blob];
	uint64_t held_lead;

	/* A reach the fill gave the run (pace__fill_jump) is no window: the
	 * window opens as any does, the bytes asked past it stay asked. */
	if (r->w == 0 || r->spec_fill) {
		r->w = pace__min64(opening(p, r), target);
		r->grow_run = 0;
		r->spec_fill = false;
		r->spec_end = 0;
		return;
	}
	held_lead = pace__ranges_next_missing(&b->held, r->cursor) - r->cursor;
	if (r->crate && r->cursor < b->size &&
	    held_lead < window_floor(p, r->blob) / 2) {
		pace__window_waited(p, r);
		return;
	}
	if (r->w > target &&
	    (!r->last_wait_ns || p->now - r->last_wait_ns >= c->lead_ns)) {
		r->w = target;
		r->grow_run = 0;
	} else if (r->w < target && r->grow_run >= r->w / 2) {
		r->w = pace__min64(
			r->w * 2,
			pace__max64(pace__min64(target, grow_limit(p, r)),
				    r->w));
		r->grow_run = 0;
	}
}

uint64_t pace__reader_runs(const struct reader *r)
{
	uint64_t a = r->runs[0], b = r->runs[1], c = r->runs[2];

	if (r->gen < 3) /* fewer than three: the last */
		return r->last_run;
	return pace__max64(pace__min64(a, b),
			   pace__min64(pace__max64(a, b), c));
}

/* r's last three runs were about as long (within a quarter of the
 * longest), two chunks at least: it reads that much at each jump (GDAL's
 * pair of tiles of a window's row, 800 KiB), and its run's pieces are
 * fetched at its first read, not at its first kernel piece, which came
 * after a small read of the tile's start a round trip later. */
static bool runs_steady(const struct pace *p, const struct reader *r)
{
	uint64_t lo = UINT64_MAX, hi = 0;

	if (r->gen < 3)
		return false;
	for (int i = 0; i < 3; i++) {
		lo = pace__min64(lo, r->runs[i]);
		hi = pace__max64(hi, r->runs[i]);
	}
	return lo >= 2 * p->cfg.align && hi - lo <= hi / 4;
}

/* A reader with no window reads a piece of the kernel's (kernel_piece)
 * at a jump, or reads on where such a piece ended: the kernel is handing
 * a large read over one piece a round trip. The bytes up to its run's
 * start plus what it reads at a time (pace__reader_runs; SPEC_DEFAULT
 * for a reader with none) become its window for this run, so that the
 * pieces to come are fetched at once over the lanes (demand_share splits
 * them). A reader whose reads are a piece or less gets nothing more: its
 * runs say so. So does a reader whose runs are steady, at any read at a
 * jump. */
static void speculate(struct pace *p, struct reader *r, uint64_t off,
		      uint64_t len, uint64_t prev_cursor, bool seq)
{
	const struct blob *b = &p->blobs[r->blob];
	uint64_t want;

	if (r->spec_end == 0) {
		if (!p->cfg.kernel_piece)
			return;
		if (seq ? r->last_len != p->cfg.kernel_piece ||
				    off != prev_cursor
			: len != p->cfg.kernel_piece && !runs_steady(p, r))
			return;
		/* The kernel reads a piece past the application's read,
		 * and the reply to the read's last piece waits on it. */
		want = pace__reader_runs(r);
		if (!want)
			want = SPEC_DEFAULT + p->cfg.kernel_piece;
		want = pace__min64(want, p->cfg.seq_min);
		r->spec_end = pace__min64(
			pace__align_up(pace__sat_add(r->run_start, want),
				       p->cfg.align),
			b->size);
	}
	r->w = r->spec_end > r->cursor ? r->spec_end - r->cursor : 0;
}

int pace_reader_read(struct pace *p, uint32_t reader, uint64_t off,
		     uint64_t len, uint64_t now_ns)
{
	struct reader *r = p ? pace__reader_get(p, reader) : NULL;
	uint64_t end, fwd, prev_cursor;
	bool seq;

	if (!r)
		return -ENOENT;
	if (len > UINT64_MAX - off)
		return -EINVAL;
	pace__tick(p, now_ns);
	pace__fill_read(p, r, off, len);
	end = off + len;
	prev_cursor = r->cursor;
	r->had_window = r->w > 0;
	fwd = r->w ? pace__min64(SEQ_FWD, r->w) : 0;
	seq = r->seen && off + SEQ_BACK >= r->cursor && off <= r->cursor + fwd;
	if (!seq) {
		/* A reader that streamed up to its jump (a player's seek)
		 * streams on at the new position. */
		bool streamed =
			r->evident && r->w > 0 && r->run >= p->cfg.seq_min;

		consume(p, r, len);
		/* A jump: a new run starts here. A reader whose first read is
		 * at the file's start is taken as sequential at once (cp,
		 * players, checksums; also when its first read was near the
		 * start and its next one at it, below), and so is one that
		 * streamed: its window reopens at once, at seq_min, the run it
		 * would otherwise have to show first, so that the kernel's
		 * readahead-sized pieces of a large read at the new position
		 * are under way together. Any other run must show it. */
		r->evident = (!r->seen && off == 0) || streamed;
		if (!r->seen)
			r->from_start = off == 0;
		r->last_run = r->seen ? r->cursor - r->run_start : 0;
		r->runs[r->gen % 3] = r->last_run;
		if (r->nstarts)
			r->start_len[(r->nstarts - 1) % FILL_STARTS] =
				r->last_run;
		r->starts[r->nstarts % FILL_STARTS] = off;
		r->start_len[r->nstarts % FILL_STARTS] = 0;
		r->nstarts++;
		if (r->seen && r->last_run < p->cfg.seq_min)
			r->short_runs++;
		r->run_start = off;
		r->spec_end = 0;
		r->spec_fill = false;
		if (r->seen)
			r->gen++;
		r->seen = true;
		r->jumped = true;
		r->cursor = end;
		r->run = 0;
		r->w = streamed ? pace__min64(window_target(p, r),
					      p->cfg.seq_min)
				: 0;
	} else {
		uint64_t adv = end > r->cursor ? end - r->cursor : 0;

		consume(p, r, adv);
		/* A first read near the start, then the start itself: the
		 * kernel's pieces of a read from the start, which FUSE
		 * threads delivered out of order. */
		if (off == 0 && r->gen == 0 && !r->evident) {
			r->evident = true;
			r->from_start = true;
		}
		r->jumped = false;
		r->cursor += adv;
		r->run += adv;
		r->grow_run += adv;
	}
	/* Reads the kernel issued ahead on its own prove nothing of the
	 * application: up to kernel_ahead of the run may be its doing. */
	if (!r->evident &&
	    r->run >= pace__sat_add(p->cfg.seq_min, p->cfg.kernel_ahead))
		r->evident = true;
	if (r->evident)
		window_update(p, r);
	else if (r->w == 0 || r->spec_end != 0)
		speculate(p, r, off, len, prev_cursor, seq);
	if (!r->evident && seq && end > prev_cursor)
		pace__fill_jump(p, r);
	r->last_len = len;
	if (r->from_start && r->gen == 0 && r->run == 0 && r->w > 0)
		r->w = pace__max64(r->w, whole_window(p, r));
	return 0;
}

int pace_read(struct pace *p, uint32_t reader, uint64_t off, uint64_t len,
	      bool wait, uint64_t now_ns, struct pace_read_result *out)
{
	struct reader *r = p ? pace__reader_get(p, reader) : NULL;
	uint64_t before, size;
	int rc;

	if (!r)
		return -ENOENT;
	if (!out)
		return -EINVAL;
	before = r->w ? r->cursor + r->w : 0;
	rc = pace_reader_read(p, reader, off, len, now_ns);
	if (rc)
		return rc;
	out->cursor = r->cursor;
	out->window = r->w;
	out->moved = (r->w ? r->cursor + r->w : 0) != before;
	if (wait)
		return pace_read_step(p, reader, off, len, PACE_NONE, now_ns,
				      &out->step);
	size = p->blobs[r->blob].size;
	out->step = (struct pace_step){
		.what = pace_is_held(p, r->blob, pace__min64(off, size),
				     pace__min64(off + len, size))
				? PACE_DO_COPY
				: PACE_DO_WAIT,
		.wait = PACE_NONE};
	return 0;
}

int pace_reader_window(const struct pace *p, uint32_t reader, uint64_t *cursor,
		       uint64_t *window)
{
	const struct reader *r = p ? pace__reader_get(p, reader) : NULL;

	if (!r)
		return -ENOENT;
	if (cursor)
		*cursor = r->cursor;
	if (window)
		*window = r->w;
	return 0;
}

uint32_t pace_reader_bound(const struct pace *p)
{
	return p ? p->n_readers : 0;
}

int pace_reader_info(const struct pace *p, uint32_t reader, uint64_t now_ns,
		     struct pace_reader_info *out)
{
	const struct reader *r = p ? pace__reader_get(p, reader) : NULL;
	uint64_t covered;

	if (!r || !out)
		return r ? -EINVAL : -ENOENT;
	memset(out, 0, sizeof(*out));
	out->blob = r->blob;
	out->cursor = r->cursor;
	out->rate = r->crate;
	out->window = r->w;
	if (!r->seen)
		out->mode = PACE_READER_NEW;
	else if (r->w == 0)
		out->mode = PACE_READER_RANDOM;
	else if (now_ns - r->last_read_ns >= PAUSE_NS)
		out->mode = PACE_READER_PAUSED;
	else
		out->mode = PACE_READER_SEQUENTIAL;
	covered = pace__covered_from(p, r->blob, r->cursor);
	out->lead = covered - r->cursor;
	if (r->crate)
		out->lead_ms = (uint64_t)((double)out->lead * 1000.0 /
					  (double)r->crate);
	return 0;
}

bool pace__reader_live(const struct pace *p, uint32_t ri, uint32_t gen)
{
	const struct reader *r;

	if (ri == PACE_NONE || ri >= p->n_readers)
		return false;
	r = &p->readers[ri];
	return r->used && r->w > 0 && r->gen == gen;
}

uint64_t pace__window_gap(struct pace *p, const struct reader *r,
			  uint64_t *gap_end, uint64_t *wend)
{
	const struct blob *b = &p->blobs[r->blob];

	*wend = pace__min64(pace__sat_add(r->cursor, r->w), b->size);
	return pace__first_free(p, r->blob,
				pace__align_down(r->cursor, p->cfg.align),
				*wend, gap_end);
}

/* About REQUEST_TIME_NS at the source's rate; before a rate window has
 * measured it, for a reader whose run began at its file's start, at the
 * rate its group's short whole requests showed, as far as it is trusted
 * (pace__short_rate: on a fast link every request is short, and its rate
 * stayed unknown: each request was a quarter of the window, which grew a
 * request at a time); else a quarter of the window. A reader that jumped
 * (a zip member, a header) keeps the quarter: its read-ahead past what
 * it wants is bytes never read. */
uint64_t pace__request_want(const struct pace *p, uint32_t src,
			    const struct reader *r)
{
	uint64_t rate = pace__expected_rate(p, src);

	if (!rate && r->from_start)
		rate = pace__short_rate(pace__group(p, &p->sources[src]));
	/* A plan reader's window is bytes the application will read, set
	 * once: a quarter at a time cost each planned file four round trips
	 * on a lane. */
	if (!rate && r->plan)
		return r->w;
	if (!rate)
		return r->w / 4;
	return (uint64_t)((double)rate * (double)REQUEST_TIME_NS / (double)SEC);
}

uint64_t pace__window_end(struct pace *p, const struct reader *r, uint32_t src,
			  uint64_t x, uint64_t gap_end, uint64_t wend)
{
	const struct pace_config *c = &p->cfg;
	const struct blob *b = &p->blobs[r->blob];
	uint64_t e;

	uint64_t want = pace__request_want(p, src, r);
	/* A request of at least a quarter of the window (or of a full
	 * request): a slow reader's window refills in a few requests, not
	 * one per block its cursor passes. */
	uint64_t quantum = pace__max64(
		c->min_request,
		pace__min64(pace__min64(r->w, want) / 4, c->max_request));

	e = wend == b->size ? wend : pace__align_down(wend, c->align);
	e = pace__request_end(p, b, x, want, gap_end, e);
	e = pace__budget_fit(p, x, e);
	if (e <= x ||
	    (e - x < quantum && e < gap_end && e < b->size && r->w >= quantum))
		return x;
	return e;
}

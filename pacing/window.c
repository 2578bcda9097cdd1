/* window: each reader's read-ahead window: sequential detection, how the
 * window grows, and the next request inside it. */
#include "pacing/pace.h"
#include "pacing/pace_int.h"

#include <errno.h>

/* A window shares the budget with the other readers reading ahead: no
 * larger than budget / readers (window_min at least). */
static uint64_t budget_window(const struct pace *p, uint64_t w)
{
	uint64_t share;

	if (!p->cfg.budget_bytes)
		return w;
	share = p->cfg.budget_bytes / pace__max64(p->nactive, 1);
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

	for (uint32_t i = b->first_src; i != PACE_NONE; i = p->sources[i].next) {
		const struct source *s = &p->sources[i];

		if (s->excluded)
			continue;
		if (!s->peak)
			return budget_window(p, p->cfg.window_max);
		peak = pace__max64(peak, s->peak);
		lat = pace__max64(lat, s->lat_est);
	}
	if (!peak)
		return budget_window(p, p->cfg.window_max);
	w = 2.0 * (double)peak * p->cfg.max_lanes *
	    (double)(lat + REQUEST_TIME_NS) / (double)SEC;
	if (w > (double)p->cfg.window_max)
		return budget_window(p, p->cfg.window_max);
	return budget_window(p, pace__max64((uint64_t)w, p->cfg.window_min));
}

void pace__window_grow(struct pace *p, struct reader *r)
{
	uint64_t cap = window_cap(p, r->blob);

	if (r->w < cap)
		r->w = pace__min64(r->w * 2, cap);
	r->seq_run = 0;
}

int pace_reader_read(struct pace *p, uint32_t reader, uint64_t off,
		     uint64_t len, uint64_t now_ns)
{
	struct reader *r = p ? pace__reader_get(p, reader) : NULL;
	uint64_t end;
	bool seq;

	if (!r)
		return -ENOENT;
	if (len > UINT64_MAX - off)
		return -EINVAL;
	pace__tick(p, now_ns);
	end = off + len;
	if (!r->seen || r->w == 0)
		seq = off == r->cursor;
	else
		seq = off + SEQ_BACK >= r->cursor &&
		      off <= r->cursor + pace__min64(SEQ_FWD, r->w);
	r->seen = true;
	if (!seq) {
		r->gen++;
		r->random = true;
		r->seq_run = 0;
		r->cursor = end;
		r->w = 0;
		return 0;
	}
	if (end > r->cursor) {
		r->seq_run += end - r->cursor;
		r->cursor = end;
	}
	if (r->random || r->w == 0) {
		r->random = false;
		r->w = p->cfg.window_min;
		r->seq_run = 0;
	} else if (r->seq_run >= r->w / 2) {
		pace__window_grow(p, r);
	}
	return 0;
}

int pace_reader_window(const struct pace *p, uint32_t reader,
		       uint64_t *cursor, uint64_t *window)
{
	const struct reader *r = p ? pace__reader_get(p, reader) : NULL;

	if (!r)
		return -ENOENT;
	if (cursor)
		*cursor = r->cursor;
	if (window)
		*window = r->seen ? r->w : 0;
	return 0;
}

bool pace__reader_live(const struct pace *p, uint32_t ri, uint32_t gen)
{
	const struct reader *r;

	if (ri == PACE_NONE || ri >= p->n_readers)
		return false;
	r = &p->readers[ri];
	return r->used && r->seen && r->w > 0 && r->gen == gen;
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

/* Read-ahead request length for a lane on src: about REQUEST_TIME_NS at
 * the source's rate, else a quarter of the window. */
static uint64_t request_want(const struct pace *p, uint32_t src, uint64_t w)
{
	uint64_t r = pace__expected_rate(p, src);

	if (!r)
		return w / 4;
	return (uint64_t)((double)r * (double)REQUEST_TIME_NS / (double)SEC);
}

uint64_t pace__window_end(struct pace *p, const struct reader *r,
			  uint32_t src, uint64_t x, uint64_t gap_end,
			  uint64_t wend)
{
	const struct pace_config *c = &p->cfg;
	const struct blob *b = &p->blobs[r->blob];
	uint64_t e;

	e = wend == b->size ? wend : pace__align_down(wend, c->align);
	e = pace__request_end(p, b, x, request_want(p, src, r->w), gap_end,
			      e);
	e = pace__budget_fit(p, x, e);
	if (e <= x || (e - x < c->min_request && e < gap_end && e < b->size &&
		       r->w >= c->min_request))
		return x;
	return e;
}

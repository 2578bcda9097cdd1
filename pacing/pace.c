/* pace: the consumption-paced scheduler; turns reader demand, cursors and
 * transfer observations into range requests on lanes. Pure: no I/O, no
 * clock, no allocation after pace_new()/pace_blob_add(). */
#include "pacing/pace.h"
#include "pacing/pace_int.h"

#include <assert.h>
#ifdef PACE_TRACE
#include <stdio.h>
#endif
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define KIB (1024ull)
#define MIB (1024ull * 1024ull)
#define SEC (1000000000ull)

/* A rate sample covers at least this long, so that a socket buffer draining
 * in microseconds cannot fake a huge rate. */
#define RATE_WINDOW_NS (200ull * 1000000ull)

/* Sequential tolerance: reordered kernel read-ahead steps back a little,
 * and forward skips of a few MiB still count as sequential. */
#define SEQ_BACK (1 * MIB)
#define SEQ_FWD (4 * MIB)

/* Most intervals a blob's held set may hold, whatever its size. */
#define RANGES_CAP_MAX (1u << 18)

/* Collapse: the short-term rate under 1/COLLAPSE_FACTOR of the lane's own
 * level, after a few samples; the source is avoided for a while. */
#define COLLAPSE_FACTOR 5
#define COLLAPSE_MIN_SAMPLES 3
#define COLLAPSE_HOLD_NS (5 * SEC)

/* A read-ahead request aims to last this long at its source's rate, so a
 * round trip costs a few percent, and lanes finish at similar times. */
#define REQUEST_TIME_NS (1 * SEC)

/* A lane queues its next range once its open request has less than twice
 * the source's latency plus this left: the queued request's first byte
 * can then follow the open one's last without a round trip between. */
#define QUEUE_LEAD_NS (100ull * 1000000ull)

/* Saturation: a source whose lanes together give less than this share of
 * lanes x per-connection rate is at its shaping cap. */
/* Throttling: a source's lane cap grows back by one lane this often while
 * its requests end whole. */
#define AIMD_INC_NS (1 * SEC)

#define SAT_PCT 85
#define SLOW_FACTOR 8

enum lane_state {
	LANE_IDLE,	 /* no request open */
	LANE_BUSY,	 /* request [start, end) open */
	LANE_CANCELLING, /* CANCEL emitted, waiting for pace_on_done */
	LANE_NSTATES
};

static const char *const lane_state_names[LANE_NSTATES] = {
	[LANE_IDLE] = "idle",
	[LANE_BUSY] = "busy",
	[LANE_CANCELLING] = "cancelling",
};

struct lane {
	enum lane_state state;
	uint32_t blob;
	uint32_t source;
	uint32_t reader;   /* whose window it serves; PACE_NONE: none */
	uint32_t rgen;	   /* the reader's seek generation at start */
	bool demand;	   /* started for a waiting read */
	bool ahead;	   /* started as read-ahead (yields on a seek) */
	uint32_t wait;	   /* that read, while it waits; else PACE_NONE */
	bool reclaimed;	   /* cancelled by the stall check */
	uint64_t start;
	uint64_t frontier; /* one past the highest byte credited */
	uint64_t end;
	uint64_t last_progress_ns;
	uint64_t rate_t0;    /* start of the current rate sample */
	uint64_t rate_bytes; /* bytes in the current rate sample */
	uint64_t rate;	     /* smoothed, bytes per second */
	uint64_t level;	     /* slow average: the lane's own level */
	uint64_t started_ns;
	uint32_t nsamples;
	bool got_first;	     /* first byte arrived: rate clock running */
	bool collapsed;	     /* rate fell to a fraction of its level */
	bool promoted;	     /* the request was queued behind another */
	/* At most one queued range [qstart, qend) on the same source, owned
	 * by the lane from PACE_ACT_QUEUE on; it becomes the lane's request
	 * when the open one ends whole. */
	bool q;
	bool restart;	     /* promoted: its START is due in the next poll */
	uint32_t qreader, qrgen;
	uint64_t qstart, qend;
};

struct source {
	bool used;
	bool excluded;
	uint32_t blob;
	uint32_t next; /* next source of the same blob */
	enum pace_caps caps;
	uint32_t lanes;	     /* lanes busy or cancelling on it */
	uint64_t hold_until; /* backoff or Retry-After suspension */
	uint64_t backoff;    /* next backoff length */
	uint64_t rate;	     /* per-connection rate, smoothed */
	uint64_t peak;	     /* per-connection rate it can give, 0: unknown */
	uint64_t cap_est;    /* aggregate rate when saturated */
	bool saturated;	     /* more lanes did not add rate */
	uint32_t n_ok;	     /* most lanes seen running at full rate */
	uint64_t lat_est;    /* time to first byte, smoothed */
	uint64_t collapsed_until;
	uint32_t faults;     /* transient faults since its last byte */
	uint64_t fault_ns;   /* when the last of them happened */
	uint64_t agg_tmp;    /* scratch for pace_poll */
	uint32_t n_tmp;
	uint32_t lane_cap;   /* AIMD: lanes allowed now */
	uint64_t cut_until;  /* no second cut before this (one per hold) */
	uint64_t inc_at;     /* next additive increase */
};

struct blob {
	bool used;
	uint64_t size;
	struct pace__ranges held;
	uint32_t first_src;
	uint32_t n_src;
	uint32_t n_excluded;
	uint32_t pinned; /* the one source of a no-validator blob */
};

struct reader {
	bool used;
	uint32_t blob;
	uint32_t gen;	  /* bumped on every seek */
	bool random;	  /* last move was a seek: no read-ahead */
	bool seen;	  /* has read at least once */
	uint64_t cursor;
	uint64_t w;	  /* window length */
	uint64_t seq_run; /* sequential bytes since W last grew */
	uint64_t deficit; /* deficit round robin credit, bytes */
	uint32_t nl_tmp;  /* scratch for pace_poll: lanes serving it */
};

struct wait {
	bool used;
	uint32_t reader;
	uint32_t blob;
	uint64_t off;
	uint64_t end;
	uint64_t begin_ns;
};

struct pace {
	struct pace_config cfg;
	uint64_t now;
	struct lane *lanes;
	struct source *sources;
	struct blob *blobs;
	struct reader *readers;
	struct wait *waits;
	uint32_t n_sources, n_blobs; /* high-water marks */
	uint32_t n_readers, n_waits;
	uint32_t rr;  /* round-robin start among readers */
	uint32_t wrr; /* round-robin start among waits */
	uint64_t rng; /* xorshift64 state for jitter */
	uint64_t infl; /* pace_poll: bytes in flight, kept as it emits */
	uint32_t nactive; /* readers reading ahead, as of the last poll */
	struct pace_stats stats;
};

static uint64_t min64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

static uint64_t max64(uint64_t a, uint64_t b)
{
	return a > b ? a : b;
}

static uint32_t max32(uint32_t a, uint32_t b)
{
	return a > b ? a : b;
}

static uint64_t align_up(uint64_t x, uint64_t a)
{
	uint64_t r = x % a;

	if (r == 0)
		return x;
	if (x > UINT64_MAX - (a - r))
		return UINT64_MAX;
	return x + (a - r);
}

static uint64_t align_down(uint64_t x, uint64_t a)
{
	return x - x % a;
}

static uint64_t sat_add(uint64_t a, uint64_t b)
{
	return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

static void tick(struct pace *p, uint64_t now_ns)
{
	assert(now_ns >= p->now);
	if (now_ns > p->now)
		p->now = now_ns;
}

/* Every lane state change goes through here. */
static void lane_set(struct pace *p, struct lane *l, enum lane_state to)
{
	assert(to < LANE_NSTATES);
#ifdef PACE_TRACE
	fprintf(stderr, "pace: lane %u %s -> %s\n", (unsigned)(l - p->lanes),
		lane_state_names[l->state], lane_state_names[to]);
#endif
	(void)lane_state_names;
	if (l->state == LANE_IDLE && to != LANE_IDLE)
		p->sources[l->source].lanes++;
	else if (l->state != LANE_IDLE && to == LANE_IDLE)
		p->sources[l->source].lanes--;
	l->state = to;
}

void pace_config_default(struct pace_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->max_blobs = 4096;
	cfg->max_sources = 8192;
	cfg->max_readers = 1024;
	cfg->max_waits = 1024;
	cfg->max_lanes = 8;
	cfg->lanes_per_source = 8;
	cfg->align = 256 * KIB;
	cfg->min_request = 256 * KIB;
	cfg->max_request = 8 * MIB;
	cfg->window_min = 1 * MIB;
	cfg->window_max = 64 * MIB;
	cfg->stall_ns = 10 * SEC;
	cfg->deadline_ns = 60 * SEC;
	cfg->backoff_ns = 200 * 1000000ull;
	cfg->backoff_max_ns = 10 * SEC;
	cfg->down_faults = 4;
	cfg->budget_bytes = 0;
	cfg->jitter_pct = 25;
	cfg->first_hold_ns = 1000000ull;
	cfg->seed = 0x9e3779b97f4a7c15ull;
}

int pace_config_check(const struct pace_config *cfg, const char **field)
{
	const char *bad = NULL;

	if (!cfg)
		bad = "cfg";
	else if (cfg->max_blobs == 0 || cfg->max_blobs >= PACE_NONE)
		bad = "max_blobs";
	else if (cfg->max_sources == 0 || cfg->max_sources >= PACE_NONE)
		bad = "max_sources";
	else if (cfg->max_readers == 0 || cfg->max_readers >= PACE_NONE)
		bad = "max_readers";
	else if (cfg->max_waits == 0 || cfg->max_waits >= PACE_NONE)
		bad = "max_waits";
	else if (cfg->max_lanes == 0 || cfg->max_lanes > 4096)
		bad = "max_lanes";
	else if (cfg->lanes_per_source == 0)
		bad = "lanes_per_source";
	else if (cfg->align == 0 || cfg->align > (1ull << 40))
		bad = "align";
	else if (cfg->min_request == 0 || cfg->min_request % cfg->align)
		bad = "min_request";
	else if (cfg->max_request < cfg->min_request ||
		 cfg->max_request % cfg->align)
		bad = "max_request";
	else if (cfg->window_min == 0)
		bad = "window_min";
	else if (cfg->window_max < cfg->window_min)
		bad = "window_max";
	else if (cfg->stall_ns == 0)
		bad = "stall_ns";
	else if (cfg->deadline_ns == 0)
		bad = "deadline_ns";
	else if (cfg->backoff_ns == 0)
		bad = "backoff_ns";
	else if (cfg->backoff_max_ns < cfg->backoff_ns)
		bad = "backoff_max_ns";
	else if (cfg->down_faults == 0)
		bad = "down_faults";
	else if (cfg->budget_bytes && cfg->budget_bytes < cfg->max_request)
		bad = "budget_bytes";
	else if (cfg->jitter_pct > 100)
		bad = "jitter_pct";
	if (bad) {
		if (field)
			*field = bad;
		return -EINVAL;
	}
	return 0;
}

void pace_free(struct pace *p)
{
	if (!p)
		return;
	for (uint32_t i = 0; i < p->n_blobs; i++)
		if (p->blobs[i].used)
			pace__ranges_fini(&p->blobs[i].held);
	free(p->lanes);
	free(p->sources);
	free(p->blobs);
	free(p->readers);
	free(p->waits);
	free(p);
}

int pace_new(const struct pace_config *cfg, struct pace **out)
{
	struct pace *p;
	int rc = pace_config_check(cfg, NULL);

	if (rc)
		return rc;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->cfg = *cfg;
	p->lanes = calloc(cfg->max_lanes, sizeof(*p->lanes));
	p->sources = calloc(cfg->max_sources, sizeof(*p->sources));
	p->blobs = calloc(cfg->max_blobs, sizeof(*p->blobs));
	p->readers = calloc(cfg->max_readers, sizeof(*p->readers));
	p->waits = calloc(cfg->max_waits, sizeof(*p->waits));
	if (!p->lanes || !p->sources || !p->blobs || !p->readers ||
	    !p->waits) {
		rc = -ENOMEM;
		goto out;
	}
	p->rng = cfg->seed ? cfg->seed : 1;
	for (uint32_t i = 0; i < cfg->max_lanes; i++) {
		p->lanes[i].state = LANE_IDLE;
		p->lanes[i].reader = PACE_NONE;
		p->lanes[i].wait = PACE_NONE;
	}
	*out = p;
	return 0;
out:
	pace_free(p);
	return rc;
}

static struct blob *blob_get(const struct pace *p, uint32_t id)
{
	if (id >= p->n_blobs || !p->blobs[id].used)
		return NULL;
	return &p->blobs[id];
}

static struct reader *reader_get(const struct pace *p, uint32_t id)
{
	if (id >= p->n_readers || !p->readers[id].used)
		return NULL;
	return &p->readers[id];
}

static struct wait *wait_get(const struct pace *p, uint32_t id)
{
	if (id >= p->n_waits || !p->waits[id].used)
		return NULL;
	return &p->waits[id];
}

int pace_blob_add(struct pace *p, uint64_t size, uint32_t *blob_out)
{
	uint32_t id, cap;
	uint64_t blocks;
	struct blob *b;
	int rc;

	if (!p || !blob_out)
		return -EINVAL;
	for (id = 0; id < p->cfg.max_blobs; id++)
		if (!p->blobs[id].used)
			break;
	if (id == p->cfg.max_blobs)
		return -ENOSPC;
	/* Held boundaries fall on request boundaries (aligned) or where a
	 * transfer stopped (at most one per lane), plus resume marks. */
	blocks = size / p->cfg.align + 1;
	cap = (uint32_t)min64(blocks, RANGES_CAP_MAX) + 2 * p->cfg.max_lanes +
	      16;
	b = &p->blobs[id];
	memset(b, 0, sizeof(*b));
	rc = pace__ranges_init(&b->held, cap);
	if (rc)
		return rc;
	b->used = true;
	b->size = size;
	b->first_src = PACE_NONE;
	b->pinned = PACE_NONE;
	if (id >= p->n_blobs)
		p->n_blobs = id + 1;
	*blob_out = id;
	return 0;
}

int pace_blob_held(struct pace *p, uint32_t blob, uint64_t start, uint64_t end)
{
	struct blob *b = p ? blob_get(p, blob) : NULL;

	if (!b)
		return -ENOENT;
	if (start > end || end > b->size)
		return -EINVAL;
	return pace__ranges_add(&b->held, start, end, NULL);
}

int pace_blob_forget(struct pace *p, uint32_t blob, uint64_t start,
		     uint64_t end)
{
	struct blob *b = p ? blob_get(p, blob) : NULL;

	if (!b)
		return -ENOENT;
	if (start > end || end > b->size)
		return -EINVAL;
	return pace__ranges_remove(&b->held, start, end, NULL);
}

bool pace_is_held(const struct pace *p, uint32_t blob, uint64_t start,
		  uint64_t end)
{
	const struct blob *b = p ? blob_get(p, blob) : NULL;

	if (!b || end > b->size)
		return false;
	return pace__ranges_covers(&b->held, start, end);
}

uint64_t pace_held_bytes(const struct pace *p, uint32_t blob)
{
	const struct blob *b = p ? blob_get(p, blob) : NULL;

	return b ? b->held.total : 0;
}

int pace_source_add(struct pace *p, uint32_t blob, enum pace_caps caps,
		    uint32_t *source_out)
{
	struct blob *b = p ? blob_get(p, blob) : NULL;
	struct source *s;
	uint32_t id;

	if (!b)
		return -ENOENT;
	if (!source_out || (unsigned)caps > PACE_CAPS_NO_LENGTH)
		return -EINVAL;
	for (id = 0; id < p->cfg.max_sources; id++)
		if (!p->sources[id].used)
			break;
	if (id == p->cfg.max_sources)
		return -ENOSPC;
	s = &p->sources[id];
	memset(s, 0, sizeof(*s));
	s->used = true;
	s->blob = blob;
	s->caps = caps;
	s->backoff = p->cfg.backoff_ns;
	s->lane_cap = p->cfg.lanes_per_source;
	/* Append, so that sources are tried in the order they were given. */
	s->next = PACE_NONE;
	if (b->first_src == PACE_NONE) {
		b->first_src = id;
	} else {
		uint32_t t = b->first_src;

		while (p->sources[t].next != PACE_NONE)
			t = p->sources[t].next;
		p->sources[t].next = id;
	}
	b->n_src++;
	if (id >= p->n_sources)
		p->n_sources = id + 1;
	*source_out = id;
	return 0;
}

int pace_reader_open(struct pace *p, uint32_t blob, uint64_t now_ns,
		     uint32_t *reader_out)
{
	struct reader *r;
	uint32_t id;

	if (!p || !blob_get(p, blob))
		return -ENOENT;
	if (!reader_out)
		return -EINVAL;
	tick(p, now_ns);
	for (id = 0; id < p->cfg.max_readers; id++)
		if (!p->readers[id].used)
			break;
	if (id == p->cfg.max_readers)
		return -ENOSPC;
	r = &p->readers[id];
	memset(r, 0, sizeof(*r));
	r->used = true;
	r->blob = blob;
	r->w = p->cfg.window_min;
	if (id >= p->n_readers)
		p->n_readers = id + 1;
	*reader_out = id;
	return 0;
}

void pace_reader_close(struct pace *p, uint32_t reader, uint64_t now_ns)
{
	struct reader *r = p ? reader_get(p, reader) : NULL;

	if (!r)
		return;
	tick(p, now_ns);
	for (uint32_t i = 0; i < p->cfg.max_lanes; i++) {
		if (p->lanes[i].reader == reader)
			p->lanes[i].reader = PACE_NONE;
		if (p->lanes[i].q && p->lanes[i].qreader == reader)
			p->lanes[i].qreader = PACE_NONE;
	}
	for (uint32_t i = 0; i < p->n_waits; i++)
		if (p->waits[i].used && p->waits[i].reader == reader)
			p->waits[i].reader = PACE_NONE;
	r->used = false;
}

/* A window shares the budget with the other readers reading ahead: no
 * larger than budget / readers (window_min at least). */
static uint64_t budget_window(const struct pace *p, uint64_t w)
{
	uint64_t share;

	if (!p->cfg.budget_bytes)
		return w;
	share = p->cfg.budget_bytes / max64(p->nactive, 1);
	return max64(min64(w, share), p->cfg.window_min);
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
		peak = max64(peak, s->peak);
		lat = max64(lat, s->lat_est);
	}
	if (!peak)
		return budget_window(p, p->cfg.window_max);
	w = 2.0 * (double)peak * p->cfg.max_lanes *
	    (double)(lat + REQUEST_TIME_NS) / (double)SEC;
	if (w > (double)p->cfg.window_max)
		return budget_window(p, p->cfg.window_max);
	return budget_window(p, max64((uint64_t)w, p->cfg.window_min));
}

static void window_grow(struct pace *p, struct reader *r)
{
	uint64_t cap = window_cap(p, r->blob);

	if (r->w < cap)
		r->w = min64(r->w * 2, cap);
	r->seq_run = 0;
}

int pace_reader_read(struct pace *p, uint32_t reader, uint64_t off,
		     uint64_t len, uint64_t now_ns)
{
	struct reader *r = p ? reader_get(p, reader) : NULL;
	uint64_t end;
	bool seq;

	if (!r)
		return -ENOENT;
	if (len > UINT64_MAX - off)
		return -EINVAL;
	tick(p, now_ns);
	end = off + len;
	if (!r->seen || r->w == 0)
		seq = off == r->cursor;
	else
		seq = off + SEQ_BACK >= r->cursor &&
		      off <= r->cursor + min64(SEQ_FWD, r->w);
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
		window_grow(p, r);
	}
	return 0;
}

int pace_reader_window(const struct pace *p, uint32_t reader,
		       uint64_t *cursor, uint64_t *window)
{
	const struct reader *r = p ? reader_get(p, reader) : NULL;

	if (!r)
		return -ENOENT;
	if (cursor)
		*cursor = r->cursor;
	if (window)
		*window = r->seen ? r->w : 0;
	return 0;
}

int pace_wait_begin(struct pace *p, uint32_t reader, uint64_t off,
		    uint64_t len, uint64_t now_ns, uint32_t *wait_out)
{
	struct reader *r = p ? reader_get(p, reader) : NULL;
	struct wait *w;
	uint32_t id;

	if (!r)
		return -ENOENT;
	if (!wait_out || len > UINT64_MAX - off)
		return -EINVAL;
	tick(p, now_ns);
	for (id = 0; id < p->cfg.max_waits; id++)
		if (!p->waits[id].used)
			break;
	if (id == p->cfg.max_waits)
		return -ENOSPC;
	/* A sequential reader waiting at its cursor outruns its window. */
	if (r->w && !r->random && off + len >= r->cursor &&
	    off <= r->cursor + r->w)
		window_grow(p, r);
	w = &p->waits[id];
	w->used = true;
	w->reader = reader;
	w->blob = r->blob;
	w->off = min64(off, p->blobs[r->blob].size);
	w->end = min64(off + len, p->blobs[r->blob].size);
	w->begin_ns = now_ns;
	if (id >= p->n_waits)
		p->n_waits = id + 1;
	*wait_out = id;
	return 0;
}

static bool blob_dead(const struct blob *b)
{
	return b->n_excluded >= b->n_src;
}

/* True when every source of the blob still in use has failed down_faults
 * times in a row without a byte, the last time after `since`: the origin
 * is down, and a read that waits for it fails now rather than at its
 * deadline. The sources stay in use; a later read tries them again. */
static bool blob_down(const struct pace *p, const struct blob *b,
		      uint64_t since)
{
	for (uint32_t i = b->first_src; i != PACE_NONE;
	     i = p->sources[i].next) {
		const struct source *s = &p->sources[i];

		if (s->excluded)
			continue;
		if (s->faults < p->cfg.down_faults || s->fault_ns < since)
			return false;
	}
	return true;
}

int pace_wait_state(const struct pace *p, uint32_t wait, uint64_t now_ns)
{
	const struct wait *w = p ? wait_get(p, wait) : NULL;
	const struct blob *b;

	if (!w)
		return -ENOENT;
	assert(now_ns >= p->now);
	b = &p->blobs[w->blob];
	if (pace__ranges_covers(&b->held, w->off, w->end))
		return 0;
	if (blob_dead(b) || blob_down(p, b, w->begin_ns))
		return -EIO;
	if (now_ns - w->begin_ns >= p->cfg.deadline_ns)
		return -ETIMEDOUT;
	return -EINPROGRESS;
}

void pace_wait_end(struct pace *p, uint32_t wait)
{
	struct wait *w = p ? wait_get(p, wait) : NULL;

	if (!w)
		return;
	w->used = false;
	for (uint32_t i = 0; i < p->cfg.max_lanes; i++) {
		if (p->lanes[i].wait == wait) {
			p->lanes[i].demand = false;
			p->lanes[i].wait = PACE_NONE;
		}
	}
	while (p->n_waits > 0 && !p->waits[p->n_waits - 1].used)
		p->n_waits--;
}

/* Closes the lane's rate sample once it spans RATE_WINDOW_NS; called on
 * data and from every poll, so a lane that gets nothing is measured too.
 * Time before the first byte is left out (latency, not rate). */
static void rate_update(struct pace *p, struct lane *l)
{
	struct source *s = &p->sources[l->source];
	uint64_t dt, sample;

	if (l->state != LANE_BUSY || !l->got_first)
		return;
	dt = p->now - l->rate_t0;
	if (dt < RATE_WINDOW_NS)
		return;
	sample = (uint64_t)((double)l->rate_bytes * (double)SEC / (double)dt);
	l->rate_t0 = p->now;
	l->rate_bytes = 0;
	l->nsamples++;
	l->rate = l->nsamples == 1 ? sample : (l->rate + sample) / 2;
	s->rate = s->rate ? (s->rate * 3 + sample) / 4 : sample;
	if (l->collapsed)
		return;
	if (l->nsamples >= COLLAPSE_MIN_SAMPLES && l->level &&
	    l->rate * COLLAPSE_FACTOR < l->level) {
		/* Collapse: the preferred steal victim from now on, and its
		 * source takes no new lane for a while. Its queued range is
		 * dropped: it could not start before the hold ends, and a
		 * lane that is not collapsed serves those bytes sooner. */
		l->collapsed = true;
		l->q = false;
		s->collapsed_until = sat_add(p->now, COLLAPSE_HOLD_NS);
		s->peak = l->rate;
		s->saturated = false;
		return;
	}
	l->level = l->level ? (l->level * 7 + sample) / 8 : sample;
	if (l->nsamples >= 2 && l->level > s->peak)
		s->peak = l->level;
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
	tick(p, now_ns);
	l = &p->lanes[lane];
	if (l->state != LANE_BUSY)
		return 0; /* late bytes of a cancelled request */
	s = max64(off, l->start);
	e = min64(off + len, l->end);
	if (s >= e)
		return 0;
	b = &p->blobs[l->blob];
	rc = pace__ranges_add(&b->held, s, e, &added);
	if (rc)
		return rc;
	p->stats.bytes_in += added;
	l->frontier = max64(l->frontier, e);
	l->last_progress_ns = p->now;
	p->sources[l->source].faults = 0;
	if (!l->got_first) {
		struct source *src = &p->sources[l->source];
		uint64_t lat = p->now - l->started_ns;

		l->got_first = true;
		l->rate_t0 = p->now;
		if (!l->promoted) /* a queued request hides its latency */
			src->lat_est = src->lat_est
					       ? (src->lat_est * 3 + lat) / 4
					       : lat;
	} else {
		l->rate_bytes += e - s;
	}
	rate_update(p, l);
	return 0;
}

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

/* d plus up to jitter_pct percent of it, at random: sources backing off
 * together do not all come back at the same instant. */
static uint64_t jitter(struct pace *p, uint64_t d)
{
	uint64_t span = (uint64_t)((double)d * p->cfg.jitter_pct / 100.0);

	if (span == 0)
		return d;
	return sat_add(d, rng_next(p) % (span + 1));
}

/* A fault blamed on the source: back it off exponentially. */
static void source_backoff(struct pace *p, struct source *s, uint64_t at_least)
{
	uint64_t d = jitter(p, max64(s->backoff, at_least));

	s->hold_until = max64(s->hold_until, sat_add(p->now, d));
	s->backoff = min64(s->backoff * 2, p->cfg.backoff_max_ns);
}

static void source_exclude(struct pace *p, struct source *s)
{
	if (s->excluded)
		return;
	s->excluded = true;
	p->blobs[s->blob].n_excluded++;
}

int pace_on_done(struct pace *p, uint32_t lane, enum pace_outcome outcome,
		 uint64_t retry_after_ns, uint64_t now_ns)
{
	struct lane *l;
	struct source *s;

	if (!p || lane >= p->cfg.max_lanes)
		return -ENOENT;
	if ((unsigned)outcome > PACE_OUT_LOCAL)
		return -EINVAL;
	tick(p, now_ns);
	l = &p->lanes[lane];
	if (l->state == LANE_IDLE)
		return -EINVAL;
	s = &p->sources[l->source];
	switch (outcome) {
	case PACE_OUT_OK:
		if (pace__ranges_covers(&p->blobs[l->blob].held, l->start,
					l->end)) {
			s->backoff = p->cfg.backoff_ns;
			/* Additive increase after a throttle cut. */
			if (s->lane_cap < p->cfg.lanes_per_source &&
			    p->now >= s->inc_at) {
				s->lane_cap++;
				s->inc_at = sat_add(p->now, AIMD_INC_NS);
			}
		}
		else if (l->state == LANE_BUSY)
			source_backoff(p, s, 0); /* a short body is a fault */
		break;
	case PACE_OUT_CANCELLED:
		break;
	case PACE_OUT_TRANSIENT:
		if (l->got_first) {
			/* It broke after delivering: the source works, so
			 * pause briefly without growing the backoff; growing
			 * it made a connection reset every 100 KB take 24 s
			 * for 1 MiB. */
			s->hold_until = max64(s->hold_until,
					      sat_add(p->now,
						      jitter(p, p->cfg.backoff_ns)));
		} else {
			if (!l->reclaimed)
				source_backoff(p, s, 0);
			s->faults++;
			s->fault_ns = p->now;
		}
		break;
	case PACE_OUT_THROTTLED:
		/* Multiplicative decrease and backoff, once per hold: the
		 * lanes that were open when the source said "too many" get
		 * the same answer, and must not stretch the hold. */
		if (p->now < s->cut_until) {
			s->hold_until = max64(s->hold_until,
					      sat_add(p->now, retry_after_ns));
		} else {
			source_backoff(p, s, retry_after_ns);
			uint32_t cur = s->lanes < s->lane_cap ? s->lanes
							      : s->lane_cap;

			s->lane_cap = cur / 2 ? cur / 2 : 1;
			s->cut_until = s->hold_until;
			s->inc_at = sat_add(s->hold_until, AIMD_INC_NS);
			p->stats.throttle_cuts++;
		}
		break;
	case PACE_OUT_GONE:
	case PACE_OUT_FATAL:
		source_exclude(p, s);
		break;
	case PACE_OUT_LOCAL:
		break;
	}
	/* A request that ended whole hands over to its queued range: the lane
	 * stays busy, and the next poll emits the START (checked again
	 * there). Any other end drops the queued range with it. */
	if (l->q && outcome == PACE_OUT_OK && l->state == LANE_BUSY &&
	    pace__ranges_covers(&p->blobs[l->blob].held, l->start, l->end)) {
		l->q = false;
		l->restart = true;
		l->promoted = true;
		l->demand = false;
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
		l->got_first = false;
		return 0;
	}
	l->q = false;
	l->restart = false;
	/* Bytes not received are simply no longer owned: they are missing
	 * and unowned, so the next poll requests them again. */
	lane_set(p, l, LANE_IDLE);
	l->demand = false;
	l->wait = PACE_NONE;
	l->reclaimed = false;
	l->reader = PACE_NONE;
	l->start = l->frontier = l->end = 0;
	return 0;
}

/* The lane owning byte x of blob, or NULL; writes the end of the span
 * that owns it (its open request or its queued range) to *oend. */
static struct lane *owner_of(struct pace *p, uint32_t blob, uint64_t x,
			     uint64_t *oend)
{
	for (uint32_t i = 0; i < p->cfg.max_lanes; i++) {
		struct lane *l = &p->lanes[i];

		if (l->state != LANE_BUSY || l->blob != blob)
			continue;
		if (l->start <= x && x < l->end) {
			*oend = l->end;
			return l;
		}
		if (l->q && l->qstart <= x && x < l->qend) {
			*oend = l->qend;
			return l;
		}
	}
	return NULL;
}

/* First missing byte of blob in [a, lim) that no lane owns, or lim when
 * there is none; writes the end of that unowned missing gap (not bounded
 * by lim, only by the blob size) to *gap_end. */
static uint64_t first_free(struct pace *p, uint32_t blob, uint64_t a,
			   uint64_t lim, uint64_t *gap_end)
{
	struct blob *b = &p->blobs[blob];
	uint64_t x = a, e;

	lim = min64(lim, b->size);
	while (x < lim) {
		uint64_t oend;

		x = pace__ranges_next_missing(&b->held, x);
		if (x >= lim)
			break;
		if (!owner_of(p, blob, x, &oend))
			break;
		x = oend;
	}
	if (x >= lim)
		return lim;
	e = min64(pace__ranges_next_present(&b->held, x), b->size);
	for (uint32_t i = 0; i < p->cfg.max_lanes; i++) {
		struct lane *l = &p->lanes[i];

		if (l->state != LANE_BUSY || l->blob != blob)
			continue;
		if (l->start > x && l->start < e)
			e = l->start;
		if (l->q && l->qstart > x && l->qstart < e)
			e = l->qstart;
	}
	*gap_end = e;
	return x;
}

static bool source_usable(const struct pace *p, const struct source *s)
{
	return s->used && !s->excluded && p->now >= s->hold_until &&
	       s->lanes < p->cfg.lanes_per_source && s->lanes < s->lane_cap;
}

static bool caps_stream(enum pace_caps c)
{
	return c == PACE_CAPS_NO_RANGES || c == PACE_CAPS_NO_LENGTH;
}

/* Rate another lane on s would add: per-connection rate against the
 * source's shaping cap once it is known to be saturated. An unknown source
 * is assumed as good as the best known one, so it gets tried. */
static double marginal_gain(const struct source *s, uint64_t best_peak)
{
	double g = (double)(s->peak ? s->peak : max64(best_peak, 1) * 2);
	double n = s->lanes, cap = s->saturated ? (double)s->cap_est : 1e30;

	/* Past the lane count seen at full rate the cap is unknown: probe
	 * one lane at a time, valued at half. */
	if (s->peak && !s->saturated && s->lanes >= s->n_ok) {
		if (s->lanes > s->n_ok)
			return 0;
		g *= 0.5;
	}
	double now = n * g < cap ? n * g : cap;
	double next = (n + 1) * g < cap ? (n + 1) * g : cap;

	/* A saturated source keeps one lane beyond its cap's share, up to
	 * the count seen at full rate: it covers the round trip between
	 * one request and the next. */
	if (next - now <= 0 && s->saturated && s->lanes <= s->n_ok)
		return 1.0;
	return next - now;
}

/* The source a new request on blob should use, or PACE_NONE: greedy by
 * marginal gain; a source whose next lane adds nothing gets none, unless
 * the blob has no lane at all or the bytes are urgent (a waiting read, a
 * collapsed lane's range). A source far slower than the best one (under
 * 1/SLOW_FACTOR of its per-connection rate) is used only when nothing
 * else serves the blob: its lane would sit on the critical path. */
static uint32_t pick_source(struct pace *p, uint32_t blob, bool urgent)
{
	struct blob *b = &p->blobs[blob];
	uint32_t best = PACE_NONE, lanes_on_blob = 0;
	uint64_t best_peak = 0;
	double best_gain = 0;
	bool any_stream = false;

	for (uint32_t i = b->first_src; i != PACE_NONE; i = p->sources[i].next) {
		lanes_on_blob += p->sources[i].lanes;
		best_peak = max64(best_peak, p->sources[i].peak);
		if (caps_stream(p->sources[i].caps) && p->sources[i].lanes)
			any_stream = true;
	}
	if (b->pinned != PACE_NONE) {
		struct source *s = &p->sources[b->pinned];

		if (caps_stream(s->caps) && lanes_on_blob > 0)
			return PACE_NONE;
		return source_usable(p, s) ? b->pinned : PACE_NONE;
	}
	if (any_stream)
		return PACE_NONE;
	for (int pass = 0; pass < 2 && best == PACE_NONE; pass++) {
		for (uint32_t i = b->first_src; i != PACE_NONE;
		     i = p->sources[i].next) {
			struct source *s = &p->sources[i];
			double g;

			if (!source_usable(p, s))
				continue;
			/* Pass 0 avoids collapsed sources; pass 1 takes
			 * them when nothing else can serve the blob. */
			if (pass == 0 && (s->collapsed_until > p->now ||
					  (s->peak && s->peak * SLOW_FACTOR <
							      best_peak)))
				continue;
			if (pass == 1 && lanes_on_blob > 0)
				continue;
			g = marginal_gain(s, best_peak);
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
	if (best != PACE_NONE && caps_stream(p->sources[best].caps) &&
	    lanes_on_blob > 0)
		return PACE_NONE;
	return best;
}

static struct lane *idle_lane(struct pace *p)
{
	for (uint32_t i = 0; i < p->cfg.max_lanes; i++)
		if (p->lanes[i].state == LANE_IDLE)
			return &p->lanes[i];
	return NULL;
}

static void emit(struct pace_action *a, enum pace_action_kind k,
		 const struct pace *p, const struct lane *l)
{
	a->kind = k;
	a->lane = (uint32_t)(l - p->lanes);
	a->blob = l->blob;
	a->source = l->source;
	a->start = l->start;
	a->end = l->end;
}

/* Bytes requested and not yet received: open requests past their frontier
 * and queued ranges. Cancelling lanes own nothing. */
static uint64_t inflight_sum(const struct pace *p)
{
	uint64_t t = 0;

	for (uint32_t i = 0; i < p->cfg.max_lanes; i++) {
		const struct lane *l = &p->lanes[i];

		if (l->state != LANE_BUSY)
			continue;
		t += l->end - l->frontier;
		if (l->q)
			t += l->qend - l->qstart;
	}
	return t;
}

static void infl_add(struct pace *p, uint64_t n)
{
	p->infl += n;
	if (p->infl > p->stats.inflight_max)
		p->stats.inflight_max = p->infl;
}

static void infl_sub(struct pace *p, uint64_t n)
{
	p->infl = p->infl > n ? p->infl - n : 0;
}

/* Room left under budget_bytes (UINT64_MAX without a budget). */
static uint64_t budget_room(const struct pace *p)
{
	if (!p->cfg.budget_bytes)
		return UINT64_MAX;
	return p->cfg.budget_bytes > p->infl ? p->cfg.budget_bytes - p->infl
					     : 0;
}

/* Lowers the end of a request [x, e) to fit the budget, on an aligned
 * byte; returns x when nothing fits. */
static uint64_t budget_fit(const struct pace *p, uint64_t x, uint64_t e)
{
	uint64_t room = budget_room(p), f;

	if (e <= x || e - x <= room)
		return e;
	f = align_down(x + room, p->cfg.align);
	return f > x ? f : x;
}

/* True while a waiting read's request has not had its first byte and was
 * started less than first_hold_ns ago. Read-ahead starts nothing new
 * meanwhile: on a cold start (open, seek) its new connections and
 * transfers would compete with the one the read waits for (on loopback
 * the read's response sat behind read-ahead responses for milliseconds).
 * On a slow origin the hold costs at most first_hold_ns. It holds every
 * blob's read-ahead, not only the read's: holding one blob's alone handed
 * its lanes to the others (the simulator's two_blobs_fair went 9.9 / 6.2
 * MB/s). */
static bool first_hold(const struct pace *p)
{
	if (p->cfg.first_hold_ns == 0)
		return false;
	for (uint32_t i = 0; i < p->cfg.max_lanes; i++) {
		const struct lane *l = &p->lanes[i];

		if (l->state == LANE_BUSY && l->demand && !l->got_first &&
		    p->now < sat_add(l->started_ns, p->cfg.first_hold_ns))
			return true;
	}
	return false;
}

/* Starts [x, e) on lane l from source src; fills one action. */
static void lane_start(struct pace *p, struct lane *l, uint32_t blob,
		       uint32_t src, uint64_t x, uint64_t e, uint32_t reader,
		       uint32_t wait, struct pace_action *a)
{
	struct blob *b = &p->blobs[blob];
	struct source *s = &p->sources[src];

	if (caps_stream(s->caps))
		e = b->size; /* whole-object stream: no end to move */
	if (s->caps != PACE_CAPS_FULL)
		b->pinned = src;
	l->blob = blob;
	l->source = src;
	l->reader = reader;
	l->rgen = reader != PACE_NONE ? p->readers[reader].gen : 0;
	l->demand = wait != PACE_NONE;
	l->ahead = wait == PACE_NONE;
	l->wait = wait;
	l->reclaimed = false;
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
	l->got_first = false;
	l->collapsed = false;
	l->promoted = false;
	l->q = false;
	l->restart = false;
	lane_set(p, l, LANE_BUSY);
	infl_add(p, e - x);
	p->stats.requests++;
	emit(a, PACE_ACT_START, p, l);
}

/* Aborts the lane's request and drops its queued range. */
static void lane_cancel(struct pace *p, struct lane *l, struct pace_action *a)
{
	emit(a, PACE_ACT_CANCEL, p, l);
	if (l->state == LANE_BUSY)
		infl_sub(p, l->end - l->frontier +
				    (l->q ? l->qend - l->qstart : 0));
	l->q = false;
	lane_set(p, l, LANE_CANCELLING);
}

/* End of a request starting at x inside an unowned gap ending at gap_end,
 * wanting about `want` bytes, never past `lim`. Aligned up, clamped to the
 * blob size, the gap and max_request. */
static uint64_t request_end(const struct pace *p, const struct blob *b,
			    uint64_t x, uint64_t want, uint64_t gap_end,
			    uint64_t lim)
{
	const struct pace_config *c = &p->cfg;
	uint64_t e;

	want = min64(max64(want, c->min_request), c->max_request);
	/* Rounded down: from an unaligned start (where a transfer stopped)
	 * the request is a little shorter, never longer, than wanted. */
	e = align_down(sat_add(x, want), c->align);
	if (e <= x)
		e = sat_add(x, want);
	e = min64(e, gap_end);
	e = min64(e, lim);
	e = min64(e, b->size);
	return e;
}

/* The busy read-ahead lane whose range lies furthest ahead of its reader's
 * cursor: the one to yield to the waiting read w. Lanes already serving
 * bytes of w are kept. */
static struct lane *yield_victim(struct pace *p, const struct wait *w,
				 bool same_blob)
{
	struct lane *best = NULL;
	uint64_t best_ahead = 0;

	for (uint32_t i = 0; i < p->cfg.max_lanes; i++) {
		struct lane *l = &p->lanes[i];
		uint64_t ahead;

		if (l->state != LANE_BUSY || l->demand ||
		    (same_blob && l->blob != w->blob))
			continue;
		if (l->blob == w->blob && l->frontier < w->end &&
		    l->end > w->off)
			continue;
		if (caps_stream(p->sources[l->source].caps))
			continue; /* a whole-object stream cannot restart */
		if (l->reader == PACE_NONE)
			ahead = UINT64_MAX;
		else if (l->frontier > p->readers[l->reader].cursor)
			ahead = l->frontier - p->readers[l->reader].cursor;
		else
			ahead = 0;
		if (!best || ahead > best_ahead) {
			best = l;
			best_ahead = ahead;
		}
	}
	return best;
}

/* Per-connection rate a new lane on source src is expected to reach. */
static uint64_t expected_rate(const struct pace *p, uint32_t src)
{
	const struct source *s = &p->sources[src];

	return s->peak ? s->peak : s->rate;
}

/* Read-ahead request length for a lane on src: about REQUEST_TIME_NS at
 * the source's rate, else a quarter of the window. */
static uint64_t request_want(const struct pace *p, uint32_t src, uint64_t w)
{
	uint64_t r = expected_rate(p, src);

	if (!r)
		return w / 4;
	return (uint64_t)((double)r * (double)REQUEST_TIME_NS / (double)SEC);
}

/* Measures every busy lane and updates each source's saturation: lanes
 * that together give much less than lanes x per-connection rate mean the
 * source's shaping cap is reached. */
static void measure(struct pace *p)
{
	const struct pace_config *c = &p->cfg;

	for (uint32_t i = 0; i < c->max_lanes; i++) {
		struct lane *l = &p->lanes[i];

		if (l->state != LANE_BUSY)
			continue;
		rate_update(p, l);
		p->sources[l->source].agg_tmp = 0;
		p->sources[l->source].n_tmp = 0;
	}
	for (uint32_t i = 0; i < c->max_lanes; i++) {
		struct lane *l = &p->lanes[i];

		if (l->state != LANE_BUSY || l->nsamples < 2 || l->collapsed)
			continue;
		p->sources[l->source].agg_tmp += l->rate;
		p->sources[l->source].n_tmp++;
	}
	for (uint32_t i = 0; i < c->max_lanes; i++) {
		struct lane *l = &p->lanes[i];
		struct source *s = &p->sources[l->source];
		double full;

		if (l->state != LANE_BUSY || s->n_tmp == 0)
			continue;
		full = (double)s->n_tmp * (double)s->peak;
		if (s->n_tmp >= 2 && (double)s->agg_tmp * 100 < full * SAT_PCT) {
			s->cap_est = s->saturated
					     ? (s->cap_est * 3 + s->agg_tmp) / 4
					     : s->agg_tmp;
			s->saturated = true;
		} else if (s->saturated &&
			   (double)s->agg_tmp > (double)s->cap_est * 1.1) {
			s->saturated = false; /* the cap rose */
		}
		if ((double)s->agg_tmp * 100 >= full * 95)
			s->n_ok = max32(s->n_ok, s->n_tmp);
		s->n_tmp = 0; /* once per source */
	}
}

/* Steal to equalise: idle lane t takes the tail of the busy range that
 * will finish last (a collapsed lane first), split by the two rates so
 * both end together, past the victim's frontier, never emptying it and
 * never below min_request. Writes SET_END and START. */
static int steal(struct pace *p, struct lane *t, struct pace_action *a,
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
		double eta;

		if (l->state != LANE_BUSY || !l->got_first ||
		    caps_stream(p->sources[l->source].caps))
			continue;
		if (l->end - l->frontier < c->min_request + c->align)
			continue;
		if (!l->collapsed && (l->nsamples == 0 || collapsed_only))
			continue;
		/* The tail must still be wanted: inside its reader's window
		 * now, or part of a read that waits. */
		if (!l->demand) {
			const struct reader *r = l->reader != PACE_NONE
							 ? &p->readers[l->reader]
							 : NULL;

			if (!r || !r->used ||
			    l->end > sat_add(r->cursor, r->w))
				continue;
		}
		eta = (double)(l->end - l->frontier) /
		      (double)max64(l->rate, 1);
		if (l->collapsed)
			eta += 1e12; /* always first */
		if (!v || eta > v_eta) {
			v = l;
			v_eta = eta;
		}
	}
	if (!v)
		return 0;
	src = pick_source(p, v->blob, v->collapsed);
	if (src == PACE_NONE)
		return 0;
	rv = (double)max64(v->rate, 1);
	rt = (double)expected_rate(p, src);
	if (rt <= 0) {
		/* An untried source: assume it as good as the best known. */
		const struct blob *b = &p->blobs[v->blob];

		rt = rv;
		for (uint32_t i = b->first_src; i != PACE_NONE;
		     i = p->sources[i].next)
			if ((double)p->sources[i].peak > rt)
				rt = (double)p->sources[i].peak;
	}
	lat = (double)p->sources[src].lat_est / (double)SEC;
	rem = (double)(v->end - v->frontier);
	k = rv * (lat * rt + rem) / (rv + rt);
	if (k >= rem)
		return 0;
	split = align_up(v->frontier + (uint64_t)k, c->align);
	if (split <= v->frontier)
		split = align_up(v->frontier + 1, c->align);
	if (split >= v->end || v->end - split < c->min_request)
		return 0;
	old_end = v->end;
	v->end = split;
	emit(&a[0], PACE_ACT_SET_END, p, v);
	lane_start(p, t, v->blob, src, split, old_end, v->reader, v->wait,
		   &a[1]);
	p->stats.steals++;
	return 2;
}

/* Some source of b takes requests now, lane counts aside: a waiting read
 * may make a read-ahead lane yield to it. */
static bool blob_ready(const struct pace *p, const struct blob *b)
{
	for (uint32_t i = b->first_src; i != PACE_NONE;
	     i = p->sources[i].next) {
		const struct source *s = &p->sources[i];

		if (!s->excluded && p->now >= s->hold_until)
			return true;
	}
	return false;
}

/* A reader's window as a lane must respect it: [cursor, wend). */
static bool reader_live(const struct pace *p, uint32_t ri, uint32_t gen)
{
	const struct reader *r;

	if (ri == PACE_NONE || ri >= p->n_readers)
		return false;
	r = &p->readers[ri];
	return r->used && r->seen && r->w > 0 && r->gen == gen;
}

/* A promoted range may start: its reader still reads there (same seek
 * generation, range inside its window) and its source takes requests. */
static bool promote_ok(const struct pace *p, const struct lane *l)
{
	const struct source *s = &p->sources[l->source];
	const struct reader *r;

	if (!reader_live(p, l->reader, l->rgen))
		return false;
	r = &p->readers[l->reader];
	if (l->end > sat_add(r->cursor, r->w) || l->end <= r->cursor)
		return false;
	return !s->excluded && p->now >= s->hold_until &&
	       s->collapsed_until <= p->now;
}

/* Queued ranges: a busy read-ahead lane whose open request ends within
 * twice its source's latency plus QUEUE_LEAD_NS takes the next range of
 * its reader's window, on the same source, so that no round trip separates
 * two requests. A reader keeps no more than its share of the lanes, so
 * chaining never starves another reader of turns. */
static size_t queue_next(struct pace *p, struct pace_action *acts, size_t n,
			 size_t cap)
{
	const struct pace_config *c = &p->cfg;
	uint32_t nactive = 0, share;

	for (uint32_t i = 0; i < p->n_readers; i++) {
		struct reader *r = &p->readers[i];

		r->nl_tmp = 0;
		if (r->used && r->seen && r->w > 0)
			nactive++;
	}
	p->nactive = nactive;
	if (nactive == 0)
		return n;
	for (uint32_t i = 0; i < c->max_lanes; i++) {
		const struct lane *l = &p->lanes[i];

		if (l->state == LANE_BUSY && l->reader != PACE_NONE &&
		    l->reader < p->n_readers)
			p->readers[l->reader].nl_tmp++;
	}
	share = (c->max_lanes + nactive - 1) / nactive;
	for (uint32_t i = 0; i < c->max_lanes; i++) {
		struct lane *l = &p->lanes[i];
		struct source *s = &p->sources[l->source];
		struct blob *b;
		struct reader *r;
		uint64_t rate, lead, wend, x, ge, e;

		if (l->state != LANE_BUSY || l->q || l->restart ||
		    l->collapsed || !l->got_first || caps_stream(s->caps))
			continue;
		if (!reader_live(p, l->reader, l->rgen))
			continue;
		r = &p->readers[l->reader];
		if (r->nl_tmp > share)
			continue;
		rate = l->nsamples ? l->rate : s->rate;
		if (!rate || s->excluded || p->now < s->hold_until ||
		    s->collapsed_until > p->now)
			continue;
		lead = 2 * s->lat_est + QUEUE_LEAD_NS;
		if ((double)(l->end - l->frontier) * (double)SEC >
		    (double)rate * (double)lead)
			continue;
		b = &p->blobs[l->blob];
		wend = min64(sat_add(r->cursor, r->w), b->size);
		x = first_free(p, l->blob, align_down(r->cursor, c->align), wend,
			       &ge);
		if (x >= wend)
			continue;
		e = wend == b->size ? wend : align_down(wend, c->align);
		e = request_end(p, b, x, request_want(p, l->source, r->w), ge,
				e);
		e = budget_fit(p, x, e);
		if (e <= x || (e - x < c->min_request && e < ge &&
			       e < b->size && r->w >= c->min_request))
			continue; /* parked until the cursor moves */
		if (n == cap)
			return n;
		l->q = true;
		l->qreader = l->reader;
		l->qrgen = l->rgen;
		l->qstart = x;
		l->qend = e;
		infl_add(p, e - x);
		acts[n].kind = PACE_ACT_QUEUE;
		acts[n].lane = i;
		acts[n].blob = l->blob;
		acts[n].source = l->source;
		acts[n].start = x;
		acts[n].end = e;
		n++;
	}
	return n;
}

size_t pace_poll(struct pace *p, uint64_t now_ns, struct pace_action *acts,
		 size_t cap)
{
	const struct pace_config *c;
	uint32_t yields = 0;
	size_t n = 0;
	bool starved = false;

	if (!p || !acts || cap == 0)
		return 0;
	tick(p, now_ns);
	c = &p->cfg;
	measure(p);
	p->infl = inflight_sum(p);

	/* Promoted queued ranges start first, if still wanted. */
	for (uint32_t i = 0; i < c->max_lanes; i++) {
		struct lane *l = &p->lanes[i];

		if (l->state != LANE_BUSY || !l->restart)
			continue;
		if (!promote_ok(p, l)) {
			l->restart = false;
			l->promoted = false;
			l->reader = PACE_NONE;
			lane_set(p, l, LANE_IDLE);
			l->start = l->frontier = l->end = 0;
			continue;
		}
		if (n == cap)
			return n;
		l->restart = false;
		p->stats.requests++;
		emit(&acts[n++], PACE_ACT_START, p, l);
	}

	for (uint32_t i = 0; i < c->max_lanes; i++) {
		struct lane *l = &p->lanes[i];

		if (l->state == LANE_CANCELLING && !l->reclaimed)
			yields++;
	}

	/* Stalls: take the range back; the source backs off. */
	for (uint32_t i = 0; i < c->max_lanes; i++) {
		struct lane *l = &p->lanes[i];

		if (l->state != LANE_BUSY ||
		    p->now - l->last_progress_ns < c->stall_ns)
			continue;
		if (n == cap)
			return n;
		lane_cancel(p, l, &acts[n++]);
		l->reclaimed = true;
		source_backoff(p, &p->sources[l->source], 0);
		p->stats.reclaims++;
	}

	/* A seek: the old window's lanes yield. */
	for (uint32_t i = 0; i < c->max_lanes; i++) {
		struct lane *l = &p->lanes[i];
		struct reader *r;

		if (l->state != LANE_BUSY || !l->ahead || l->demand ||
		    l->reader == PACE_NONE)
			continue;
		r = &p->readers[l->reader];
		if (r->gen == l->rgen)
			continue;
		if (l->end > r->cursor && l->frontier < r->cursor + r->w)
			continue; /* still useful for the new window */
		if (caps_stream(p->sources[l->source].caps))
			continue;
		if (n == cap)
			return n;
		lane_cancel(p, l, &acts[n++]);
		yields++;
	}

	/* Demand first, waits taking turns so that none starves. */
	for (uint32_t k = 0, nw = p->n_waits; k < nw; k++) {
		uint32_t wi = (p->wrr + k) % nw;
		struct wait *w = &p->waits[wi];
		struct blob *b;

		if (!w->used)
			continue;
		b = &p->blobs[w->blob];
		for (;;) {
			uint64_t ge, x, e, oend = 0,
					   a0 = align_down(w->off, c->align);
			uint32_t src;
			struct lane *l, *o;

			x = pace__ranges_next_missing(&b->held, a0);
			o = x < w->end ? owner_of(p, w->blob, x, &oend) : NULL;
			/* Bytes in a queued range come right after that
			 * lane's open request: nothing to hurry. */
			if (o && oend != o->end)
				o = NULL;
			/* A read waits on a collapsed lane: take its range
			 * back now (received bytes are kept). */
			if (o && o->collapsed &&
			    !caps_stream(p->sources[o->source].caps)) {
				if (n == cap)
					return n;
				lane_cancel(p, o, &acts[n++]);
				o->reclaimed = true;
				p->stats.reclaims++;
				continue;
			}
			/* The bytes wanted lie far down a lane's range: split
			 * them off rather than wait for the lane to get
			 * there. */
			if (o && !caps_stream(p->sources[o->source].caps) &&
			    x >= o->frontier + 2 * c->min_request &&
			    align_down(x, c->align) > o->frontier &&
			    idle_lane(p) &&
			    pick_source(p, w->blob, true) != PACE_NONE) {
				if (n == cap)
					return n;
				infl_sub(p, o->end - align_down(x, c->align));
				o->end = align_down(x, c->align);
				emit(&acts[n++], PACE_ACT_SET_END, p, o);
				p->stats.steals++;
			}
			x = first_free(p, w->blob, a0, w->end, &ge);
			if (x >= w->end)
				break;
			src = pick_source(p, w->blob, true);
			l = idle_lane(p);
			e = request_end(p, b, x, w->end - x, ge, UINT64_MAX);
			if (e < b->size)
				e = budget_fit(p, x, e);
			else if (e - x > budget_room(p))
				e = x; /* the blob's unaligned tail must fit */
			if (src != PACE_NONE && l && e > x) {
				if (n == cap)
					return n;
				lane_start(p, l, w->blob, src, x, e, w->reader,
					   wi, &acts[n++]);
				p->wrr = wi + 1;
				continue;
			}
			if (l && e > x)
				break; /* no source ready: wait for one */
			if (src == PACE_NONE && (l || !blob_ready(p, b)))
				break;
			/* No lane, or no room in the budget: read-ahead
			 * yields to the read, and starts nothing new in this
			 * poll (the bytes it frees are the read's). */
			if (l)
				starved = true;
			if (yields > 0) {
				yields--; /* a lane is already on its way */
				break;
			}
			/* With the blob's sources at their lane caps, only
			 * a lane on the blob frees one for the read. */
			l = yield_victim(p, w, src == PACE_NONE);
			if (!l)
				break;
			if (n == cap)
				return n;
			lane_cancel(p, l, &acts[n++]);
			break;
		}
	}

	/* Collapsed lanes give their ranges up before anyone reads ahead. */
	for (;;) {
		struct lane *l = idle_lane(p);
		int k;

		if (!l)
			break;
		k = steal(p, l, acts + n, cap - n, true);
		if (k == 0)
			break;
		n += (size_t)k;
	}

	/* Read-ahead inside each reader's window: deficit round robin over
	 * readers, one request per reader per turn, costed in bytes plus a
	 * request's worth for the round trip; idle credit is capped. */
	if (starved || first_hold(p))
		return n;
	if (p->n_readers) {
		const uint64_t quantum = c->max_request + c->min_request;
		uint32_t served = PACE_NONE;

		for (int round = 0; round < 4 && idle_lane(p); round++) {
			bool work = false;

			for (uint32_t k = 0; k < p->n_readers; k++) {
				uint32_t ri = (p->rr + k) % p->n_readers;
				struct reader *r = &p->readers[ri];
				struct blob *b;
				uint64_t wend, x, ge, e, cost;
				uint32_t src;
				struct lane *l;

				if (!r->used || !r->seen || r->w == 0)
					continue;
				b = &p->blobs[r->blob];
				wend = min64(sat_add(r->cursor, r->w), b->size);
				x = first_free(p, r->blob,
					       align_down(r->cursor, c->align),
					       wend, &ge);
				l = idle_lane(p);
				src = x < wend && l ? pick_source(p, r->blob,
								  false)
						    : PACE_NONE;
				if (src == PACE_NONE) {
					r->deficit = 0;
					continue;
				}
				/* Requests end on an aligned byte inside the
				 * window, or at the blob end. */
				e = wend == b->size ? wend
						    : align_down(wend, c->align);
				e = request_end(p, b, x,
						request_want(p, src, r->w), ge,
						e);
				e = budget_fit(p, x, e);
				if (e <= x ||
				    (e - x < c->min_request && e < ge &&
				     e < b->size && r->w >= c->min_request)) {
					r->deficit = 0;
					continue; /* parked until it moves */
				}
				work = true;
				cost = e - x + c->min_request;
				r->deficit = min64(r->deficit + quantum,
						   2 * quantum);
				if (r->deficit < cost)
					continue;
				if (n == cap)
					return n;
				r->deficit -= cost;
				lane_start(p, l, r->blob, src, x, e, ri,
					   PACE_NONE, &acts[n++]);
				served = ri;
				if (!idle_lane(p))
					break;
			}
			if (!work)
				break;
		}
		if (served != PACE_NONE)
			p->rr = (served + 1) % p->n_readers;
	}

	/* Idle lanes with nothing in any window steal. */
	for (;;) {
		struct lane *l = idle_lane(p);
		int k;

		if (!l)
			break;
		k = steal(p, l, acts + n, cap - n, false);
		if (k == 0)
			break;
		n += (size_t)k;
	}

	/* Lanes about to finish queue their next range. */
	return queue_next(p, acts, n, cap);
}

uint64_t pace_next_wake(const struct pace *p, uint64_t now_ns)
{
	uint64_t t = UINT64_MAX;

	if (!p)
		return t;
	assert(now_ns >= p->now);
	for (uint32_t i = 0; i < p->cfg.max_lanes; i++) {
		const struct lane *l = &p->lanes[i];

		if (l->state == LANE_BUSY)
			t = min64(t, sat_add(l->last_progress_ns,
					     p->cfg.stall_ns));
		/* The end of a read-ahead hold (first_hold). */
		if (l->state == LANE_BUSY && l->demand && !l->got_first &&
		    now_ns < sat_add(l->started_ns, p->cfg.first_hold_ns))
			t = min64(t, sat_add(l->started_ns,
					     p->cfg.first_hold_ns));
	}
	for (uint32_t i = 0; i < p->n_sources; i++) {
		const struct source *s = &p->sources[i];

		if (s->used && !s->excluded && s->hold_until > now_ns)
			t = min64(t, s->hold_until);
	}
	for (uint32_t i = 0; i < p->n_waits; i++) {
		const struct wait *w = &p->waits[i];

		if (w->used)
			t = min64(t, sat_add(w->begin_ns, p->cfg.deadline_ns));
	}
	return t == UINT64_MAX ? t : max64(t, now_ns);
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
	out->collapsed = l->collapsed;
	out->queued = l->state == LANE_BUSY && l->q;
	out->qstart = out->queued ? l->qstart : 0;
	out->qend = out->queued ? l->qend : 0;
	return 0;
}

int pace_source_exclude(struct pace *p, uint32_t source)
{
	if (!p || source >= p->n_sources || !p->sources[source].used)
		return -ENOENT;
	source_exclude(p, &p->sources[source]);
	return 0;
}

int pace_source_info(const struct pace *p, uint32_t source, uint64_t now_ns,
		     struct pace_source_info *out)
{
	const struct source *s;

	if (!p || !out)
		return -EINVAL;
	if (source >= p->n_sources || !p->sources[source].used)
		return -ENOENT;
	s = &p->sources[source];
	memset(out, 0, sizeof(*out));
	out->excluded = s->excluded;
	out->held_until = s->hold_until > now_ns ? s->hold_until : 0;
	out->down = s->faults >= p->cfg.down_faults;
	out->lanes = s->lanes;
	out->lane_cap = s->lane_cap;
	out->rate = s->rate;
	return 0;
}

uint32_t pace_source_lane_cap(const struct pace *p, uint32_t source)
{
	if (!p || source >= p->n_sources || !p->sources[source].used)
		return 0;
	return p->sources[source].lane_cap;
}

uint64_t pace_inflight(const struct pace *p)
{
	return p ? inflight_sum(p) : 0;
}

void pace_stats_get(const struct pace *p, struct pace_stats *out)
{
	if (!p || !out)
		return;
	*out = p->stats;
}

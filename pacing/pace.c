/* pace: the scheduler's configuration and the objects it is told about:
 * blobs and what of them is held, sources, readers and waiting reads;
 * when it must be polled next. */
#include "pacing/pace.h"
#include "pacing/pace_int.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

uint64_t pace__align_up(uint64_t x, uint64_t a)
{
	uint64_t r = x % a;

	if (r == 0)
		return x;
	if (x > UINT64_MAX - (a - r))
		return UINT64_MAX;
	return x + (a - r);
}

void pace__tick(struct pace *p, uint64_t now_ns)
{
	assert(now_ns >= p->now);
	if (now_ns > p->now)
		p->now = now_ns;
}

void pace_config_default(struct pace_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->max_blobs = 4096;
	cfg->max_sources = 8192;
	cfg->max_groups = 64;
	cfg->max_readers = 1024;
	cfg->max_waits = 1024;
	cfg->max_lanes = 8;
	cfg->lanes_per_source = 8;
	cfg->align = 256 * KIB;
	cfg->min_request = 256 * KIB;
	cfg->max_request = 8 * MIB;
	cfg->window_min = 1 * MIB;
	cfg->window_max = 64 * MIB;
	cfg->lead_ns = 3 * SEC;
	cfg->seq_min = 2 * MIB;
	cfg->kernel_ahead = 0;
	cfg->stall_ns = 10 * SEC;
	cfg->deadline_ns = 60 * SEC;
	cfg->backoff_ns = 200 * 1000000ull;
	cfg->backoff_max_ns = 10 * SEC;
	cfg->down_faults = 4;
	cfg->budget_bytes = 0;
	cfg->retry_after_max_ns = 60 * SEC;
	cfg->jitter_pct = 25;
	cfg->first_hold_ns = 1000000ull;
	cfg->seed = 0x9e3779b97f4a7c15ull;
	cfg->fill_max = 64 * MIB;
}

int pace_config_check(const struct pace_config *cfg, const char **field)
{
	const char *bad = NULL;

	if (!cfg)
		bad = "cfg";
	else if (cfg->max_blobs == 0 || cfg->max_blobs >= PACE_NONE)
		bad = "max_blobs";
	else if (cfg->max_sources == 0 || cfg->max_sources >= PACE_NONE / 2)
		bad = "max_sources";
	else if (cfg->max_groups >= PACE_NONE / 2)
		bad = "max_groups";
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
	else if (cfg->lead_ns == 0)
		bad = "lead_ns";
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
	else if (cfg->retry_after_max_ns == 0)
		bad = "retry_after_max_ns";
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
		if (p->blobs[i].used) {
			pace__ranges_fini(&p->blobs[i].held);
			pace__ranges_fini(&p->blobs[i].spec);
			pace__ranges_fini(&p->blobs[i].unread);
		}
	free(p->lanes);
	free(p->sources);
	free(p->groups);
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
	p->groups = calloc((size_t)cfg->max_sources + cfg->max_groups,
			   sizeof(*p->groups));
	p->blobs = calloc(cfg->max_blobs, sizeof(*p->blobs));
	p->readers = calloc(cfg->max_readers, sizeof(*p->readers));
	p->waits = calloc(cfg->max_waits, sizeof(*p->waits));
	if (!p->lanes || !p->sources || !p->groups || !p->blobs ||
	    !p->readers || !p->waits) {
		rc = -ENOMEM;
		goto out;
	}
	p->rng = cfg->seed ? cfg->seed : 1;
	for (uint32_t i = 0; i < cfg->max_groups; i++)
		p->groups[cfg->max_sources + i].lane_cap =
			cfg->lanes_per_source;
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
	cap = (uint32_t)pace__min64(blocks, RANGES_CAP_MAX) +
	      2 * p->cfg.max_lanes + 16;
	b = &p->blobs[id];
	memset(b, 0, sizeof(*b));
	rc = pace__ranges_init(&b->held, cap);
	if (rc)
		return rc;
	/* The fill's sets of unread bytes (none without the fill): a span
	 * of unread fills sits between two chunks, so a small file needs
	 * few. */
	cap = (uint32_t)pace__min64(blocks / 2 + 2, FILL_SPANS);
	if (pace__fill_on(p) && (pace__ranges_init(&b->spec, cap) != 0 ||
				 pace__ranges_init(&b->unread, cap) != 0)) {
		pace__ranges_fini(&b->spec);
		pace__ranges_fini(&b->held);
		return -ENOMEM;
	}
	b->used = true;
	b->size = size;
	b->first_src = PACE_NONE;
	b->pinned = PACE_NONE;
	if (id >= p->n_blobs)
		p->n_blobs = id + 1;
	*blob_out = id;
	return 0;
}

int pace_blob_set_size(struct pace *p, uint32_t blob, uint64_t size)
{
	struct blob *b = p ? blob_get(p, blob) : NULL;

	if (!b)
		return -ENOENT;
	if (size > b->size)
		return -EINVAL;
	for (uint32_t i = 0; i < p->cfg.max_lanes; i++)
		if (p->lanes[i].state != LANE_IDLE && p->lanes[i].blob == blob)
			return -EBUSY;
	b->size = size;
	return pace__ranges_remove(&b->held, size, UINT64_MAX, NULL);
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
	/* Its own group until it is put in one. */
	s->group = id;
	memset(&p->groups[id], 0, sizeof(p->groups[id]));
	p->groups[id].lane_cap = p->cfg.lanes_per_source;
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
	pace__tick(p, now_ns);
	for (id = 0; id < p->cfg.max_readers; id++)
		if (!p->readers[id].used)
			break;
	if (id == p->cfg.max_readers)
		return -ENOSPC;
	r = &p->readers[id];
	memset(r, 0, sizeof(*r));
	r->used = true;
	r->blob = blob;
	if (id >= p->n_readers)
		p->n_readers = id + 1;
	*reader_out = id;
	return 0;
}

void pace_reader_close(struct pace *p, uint32_t reader, uint64_t now_ns)
{
	struct reader *r = p ? pace__reader_get(p, reader) : NULL;

	if (!r)
		return;
	pace__tick(p, now_ns);
	pace__reader_judge(p, r);
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

int pace_wait_begin(struct pace *p, uint32_t reader, uint64_t off, uint64_t len,
		    uint64_t now_ns, uint32_t *wait_out)
{
	struct reader *r = p ? pace__reader_get(p, reader) : NULL;
	struct wait *w;
	uint32_t id;

	if (!r)
		return -ENOENT;
	if (!wait_out || len > UINT64_MAX - off)
		return -EINVAL;
	pace__tick(p, now_ns);
	for (id = 0; id < p->cfg.max_waits; id++)
		if (!p->waits[id].used)
			break;
	if (id == p->cfg.max_waits)
		return -ENOSPC;
	/* A sequential reader waiting at its cursor outran its window (a
	 * read that opened the window could not have been ahead of it). A
	 * reach that is no window yet (a large read's pieces, the fill's
	 * reach of a jumped reader) keeps its own bounds: grown fourfold,
	 * an 800 KiB run's reach came to 3.5 MiB. */
	if (r->w && r->had_window && r->evident && off + len >= r->cursor &&
	    off <= r->cursor + r->w)
		pace__window_waited(p, r);
	r->rtts++;
	w = &p->waits[id];
	w->used = true;
	w->reader = reader;
	w->blob = r->blob;
	w->off = pace__min64(off, p->blobs[r->blob].size);
	w->end = pace__min64(off + len, p->blobs[r->blob].size);
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
		if (p->lanes[i].wait == wait)
			p->lanes[i].wait = PACE_NONE;
	}
	while (p->n_waits > 0 && !p->waits[p->n_waits - 1].used)
		p->n_waits--;
}

uint64_t pace_next_wake(const struct pace *p, uint64_t now_ns)
{
	uint64_t t = UINT64_MAX;

	if (!p)
		return t;
	assert(now_ns >= p->now);
	for (uint32_t i = 0; i < p->cfg.max_lanes; i++) {
		const struct lane *l = &p->lanes[i];

		if (pace__lane_open(l) && !l->held)
			t = pace__min64(t, pace__sat_add(l->last_progress_ns,
							 p->cfg.stall_ns));
		/* The end of a read-ahead hold (first_hold). */
		if (l->state == LANE_REQUESTED && pace__lane_demand(l) &&
		    now_ns < pace__sat_add(l->started_ns, p->cfg.first_hold_ns))
			t = pace__min64(t, pace__sat_add(l->started_ns,
							 p->cfg.first_hold_ns));
	}
	for (uint32_t i = 0; i < p->n_sources; i++) {
		const struct source *s = &p->sources[i];

		if (s->used && !s->excluded && s->hold_until > now_ns)
			t = pace__min64(t, s->hold_until);
	}
	for (uint32_t i = 0; i < p->n_waits; i++) {
		const struct wait *w = &p->waits[i];

		if (w->used)
			t = pace__min64(t, pace__sat_add(w->begin_ns,
							 p->cfg.deadline_ns));
	}
	return t == UINT64_MAX ? t : pace__max64(t, now_ns);
}

int pace_source_set_routed(struct pace *p, uint32_t source)
{
	if (!p || source >= p->n_sources || !p->sources[source].used)
		return -ENOENT;
	p->sources[source].routed = true;
	return 0;
}

int pace_source_set_group(struct pace *p, uint32_t source, uint32_t group)
{
	struct source *s;

	if (!p || source >= p->n_sources || !p->sources[source].used)
		return -ENOENT;
	if (group >= p->cfg.max_groups)
		return -EINVAL;
	s = &p->sources[source];
	if (s->lanes != 0)
		return -EBUSY;
	s->group = p->cfg.max_sources + group;
	return 0;
}

int pace_source_exclude(struct pace *p, uint32_t source)
{
	if (!p || source >= p->n_sources || !p->sources[source].used)
		return -ENOENT;
	pace__source_exclude(p, &p->sources[source]);
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
	out->lane_cap = pace__group(p, s)->lane_cap;
	out->rate = s->rate ? s->rate : pace__group(p, s)->rate;
	out->routed = s->routed;
	return 0;
}

uint32_t pace_source_lane_cap(const struct pace *p, uint32_t source)
{
	if (!p || source >= p->n_sources || !p->sources[source].used)
		return 0;
	return pace__group(p, &p->sources[source])->lane_cap;
}

uint64_t pace_inflight(const struct pace *p)
{
	return p ? pace__inflight_sum(p) : 0;
}

void pace_stats_get(const struct pace *p, struct pace_stats *out)
{
	if (!p || !out)
		return;
	*out = p->stats;
}

/* test_pacing: unit tests of the pure scheduler and its range set, driven
 * by a hand-advanced clock. */
#include "pacing/pace.h"
#include "pacing/pace_int.h"
#include "tests/t.h"

#include <errno.h>
#include <stdlib.h>

#define KIB (1024ull)
#define MIB (1024ull * 1024ull)
#define MS (1000000ull)
#define SEC (1000000000ull)

/* A small scheduler: 4 KiB blocks, 16 KiB..64 KiB requests. */
static void small_cfg(struct pace_config *c)
{
	pace_config_default(c);
	c->max_lanes = 4;
	c->lanes_per_source = 4;
	c->align = 4 * KIB;
	c->min_request = 16 * KIB;
	c->max_request = 64 * KIB;
	c->window_min = 64 * KIB;
	c->window_max = 1 * MIB;
	c->jitter_pct = 0; /* exact backoffs; test_retry_jitter sets it */
}

struct fix {
	struct pace *p;
	uint32_t blob, src, rd;
	struct pace_action a[64];
	size_t n;
	uint64_t now;
};

static int fix_init(struct fix *f, struct pace_config *c, uint64_t size)
{
	int rc;

	memset(f, 0, sizeof(*f));
	f->now = 1000;
	rc = pace_new(c, &f->p);
	if (rc)
		return rc;
	rc = pace_blob_add(f->p, size, &f->blob);
	if (rc)
		return rc;
	rc = pace_source_add(f->p, f->blob, PACE_CAPS_FULL, &f->src);
	if (rc)
		return rc;
	return pace_reader_open(f->p, f->blob, f->now, &f->rd);
}

static size_t fix_poll(struct fix *f)
{
	f->n = pace_poll(f->p, f->now, f->a, 64);
	return f->n;
}

/* Delivers the whole of a START action and completes it. */
static void fix_serve(struct fix *f, const struct pace_action *a)
{
	pace_on_data(f->p, a->lane, a->start, a->end - a->start, f->now);
	pace_on_done(f->p, a->lane, PACE_OUT_OK, 0, f->now);
}

static void test_ranges_basic(void)
{
	struct pace__ranges r;
	uint64_t added, removed;

	T_EQ_INT(pace__ranges_init(&r, 4), 0);
	T_EQ_INT(pace__ranges_add(&r, 10, 20, &added), 0);
	T_EQ_U64(added, 10);
	T_EQ_INT(pace__ranges_add(&r, 30, 40, &added), 0);
	T_EQ_INT(pace__ranges_add(&r, 15, 35, &added), 0);
	T_EQ_U64(added, 10); /* only 20..30 was new */
	T_EQ_INT(r.n, 1);
	T_EQ_U64(r.total, 30);
	T_ASSERT(pace__ranges_covers(&r, 10, 40));
	T_ASSERT(!pace__ranges_covers(&r, 9, 40));
	T_EQ_U64(pace__ranges_next_missing(&r, 12), 40);
	T_EQ_U64(pace__ranges_next_missing(&r, 5), 5);
	T_EQ_U64(pace__ranges_next_present(&r, 0), 10);
	T_EQ_U64(pace__ranges_next_present(&r, 40), UINT64_MAX);
	T_EQ_INT(pace__ranges_remove(&r, 20, 25, &removed), 0);
	T_EQ_U64(removed, 5);
	T_EQ_INT(r.n, 2);
	T_EQ_U64(pace__ranges_count(&r, 0, 100), 25);
	T_EQ_INT(pace__ranges_add(&r, 40, 41, &added), 0); /* touches */
	T_EQ_INT(r.n, 2);
	T_EQ_INT(pace__ranges_add(&r, 50, 51, NULL), 0);
	T_EQ_INT(pace__ranges_add(&r, 60, 61, NULL), 0);
	T_EQ_INT(pace__ranges_add(&r, 70, 71, NULL), -ENOSPC);
	T_EQ_INT(pace__ranges_remove(&r, 0, 100, &removed), 0);
	T_EQ_U64(removed, 28);
	T_EQ_INT(r.n, 0);
	T_EQ_U64(r.total, 0);
	pace__ranges_fini(&r);
}

static void test_ranges_random(void)
{
	/* Against a byte map. */
	struct pace__ranges r;
	unsigned char map[512];
	unsigned seed = 7;

	memset(map, 0, sizeof(map));
	T_EQ_INT(pace__ranges_init(&r, 512), 0);
	for (int it = 0; it < 5000; it++) {
		uint64_t s, e, d = 0, exp = 0, cnt = 0;

		seed = seed * 1103515245u + 12345u;
		s = (seed >> 8) % 512;
		seed = seed * 1103515245u + 12345u;
		e = s + (seed >> 8) % 40;
		if (e > 512)
			e = 512;
		if (it % 3 == 0) {
			for (uint64_t i = s; i < e; i++) {
				exp += map[i];
				map[i] = 0;
			}
			T_EQ_INT(pace__ranges_remove(&r, s, e, &d), 0);
		} else {
			for (uint64_t i = s; i < e; i++) {
				exp += !map[i];
				map[i] = 1;
			}
			T_EQ_INT(pace__ranges_add(&r, s, e, &d), 0);
		}
		T_EQ_U64(d, exp);
		for (int i = 0; i < 512; i++)
			cnt += map[i];
		T_EQ_U64(r.total, cnt);
		for (uint32_t i = 0; i < r.n; i++) {
			T_ASSERT(r.v[i].s < r.v[i].e);
			if (i)
				T_ASSERT(r.v[i - 1].e < r.v[i].s);
		}
		seed = seed * 1103515245u + 12345u;
		s = (seed >> 8) % 512;
		T_EQ_INT(pace__ranges_covers(&r, s, s + 1), map[s]);
	}
	pace__ranges_fini(&r);
}

static void test_config(void)
{
	struct pace_config c;
	const char *field = NULL;
	struct pace *p = NULL;

	pace_config_default(&c);
	T_EQ_INT(pace_config_check(&c, &field), 0);
	T_EQ_INT(c.max_lanes, 8);
	T_EQ_U64(c.align, 256 * KIB);
	T_EQ_U64(c.window_max, 64 * MIB);
	c.max_lanes = 0;
	T_EQ_INT(pace_config_check(&c, &field), -EINVAL);
	T_EQ_STR(field, "max_lanes");
	T_EQ_INT(pace_new(&c, &p), -EINVAL);
	T_ASSERT(p == NULL);
	pace_config_default(&c);
	c.window_max = c.window_min - 1;
	T_EQ_INT(pace_config_check(&c, &field), -EINVAL);
	T_EQ_STR(field, "window_max");
	pace_config_default(&c);
	c.min_request = c.align + 1;
	T_EQ_INT(pace_config_check(&c, &field), -EINVAL);
	T_EQ_STR(field, "min_request");
	pace_config_default(&c);
	c.backoff_max_ns = 1;
	T_EQ_INT(pace_config_check(&c, &field), -EINVAL);
	T_EQ_STR(field, "backoff_max_ns");
	pace_free(NULL);
}

static void test_demand_first(void)
{
	struct pace_config c;
	struct fix f;
	uint32_t w;

	small_cfg(&c);
	T_EQ_INT(fix_init(&f, &c, 1 * MIB), 0);
	T_EQ_INT(pace_reader_read(f.p, f.rd, 500 * KIB + 100, 1000, f.now), 0);
	T_EQ_INT(pace_wait_begin(f.p, f.rd, 500 * KIB + 100, 1000, f.now, &w),
		 0);
	T_EQ_INT(pace_wait_state(f.p, w, f.now), -EINPROGRESS);
	T_EQ_INT(fix_poll(&f), 1);
	T_EQ_INT(f.a[0].kind, PACE_ACT_START);
	T_EQ_U64(f.a[0].start, 500 * KIB);
	T_EQ_U64(f.a[0].end, 516 * KIB); /* one min_request */
	T_EQ_INT(f.a[0].source, f.src);
	T_EQ_INT(f.a[0].blob, f.blob);
	fix_serve(&f, &f.a[0]);
	T_EQ_INT(pace_wait_state(f.p, w, f.now), 0);
	T_EQ_U64(pace_held_bytes(f.p, f.blob), 16 * KIB);
	pace_wait_end(f.p, w);
	/* A seek: no read-ahead until the reader is sequential again. */
	T_EQ_INT(fix_poll(&f), 0);
	pace_free(f.p);
}

/* pace_read: the read counted, held or a wait begun in one call, and
 * whether the window moved. */
static void test_read_one_call(void)
{
	struct pace_config c;
	struct pace_read_result r;
	struct fix f;
	uint64_t cursor = 0;
	bool moved = false;

	small_cfg(&c);
	T_EQ_INT(fix_init(&f, &c, 4 * MIB), 0);
	/* Missing: a wait begins, as pace_wait_begin's. */
	T_EQ_INT(pace_read(f.p, f.rd, 0, 8 * KIB, true, f.now, &r), 0);
	T_EQ_INT(r.step.what, PACE_DO_WAIT);
	T_ASSERT(r.step.begun);
	T_ASSERT(r.step.wait != PACE_NONE);
	T_EQ_U64(r.cursor, 8 * KIB);
	T_EQ_INT(pace_wait_state(f.p, r.step.wait, f.now), -EINPROGRESS);
	T_EQ_INT(fix_poll(&f), 1);
	fix_serve(&f, &f.a[0]);
	T_EQ_INT(pace_wait_state(f.p, r.step.wait, f.now), 0);
	pace_wait_end(f.p, r.step.wait);
	/* Held: no wait. */
	T_EQ_INT(pace_read(f.p, f.rd, 8 * KIB, 4 * KIB, true, f.now, &r), 0);
	T_EQ_INT(r.step.what, PACE_DO_COPY);
	T_EQ_U64(r.step.wait, PACE_NONE);
	/* Missing, and told not to wait: nothing begun. */
	T_EQ_INT(pace_read(f.p, f.rd, 2 * MIB, 4 * KIB, false, f.now, &r), 0);
	T_EQ_INT(r.step.what, PACE_DO_WAIT);
	T_EQ_U64(r.step.wait, PACE_NONE);
	/* A sequential reader's window moves with its cursor; a read that
	 * changes neither its end nor its length says so. */
	pace_free(f.p);
	T_EQ_INT(fix_init(&f, &c, 4 * MIB), 0);
	for (int i = 0; i < 64; i++, cursor += 16 * KIB) {
		uint64_t before, w0, after, w1;

		T_EQ_INT(pace_reader_window(f.p, f.rd, &before, &w0), 0);
		T_EQ_INT(pace_read(f.p, f.rd, cursor, 16 * KIB, false, f.now,
				   &r),
			 0);
		T_EQ_INT(pace_reader_window(f.p, f.rd, &after, &w1), 0);
		T_EQ_U64(r.cursor, after);
		T_EQ_U64(r.window, w1);
		T_EQ_INT(r.moved,
			 (w0 ? before + w0 : 0) != (w1 ? after + w1 : 0));
		moved |= r.moved;
	}
	T_ASSERT(moved);
	T_EQ_INT(pace_read(f.p, f.rd, 0, 4 * KIB, false, f.now, &r), 0);
	T_EQ_INT(pace_read(f.p, f.rd, 0, 4 * KIB, false, f.now, &r), 0);
	T_ASSERT(!r.moved); /* a re-read behind the cursor */
	T_EQ_INT(pace_read(f.p, 999, 0, 1, true, f.now, &r), -ENOENT);
	pace_free(f.p);
}

/* pace_read_step: one question, one answer. Held bytes: COPY; missing:
 * WAIT on a wait begun once and the same wait while it pends; served:
 * COPY with the wait ended; past the deadline: FAIL -ETIMEDOUT; a read of
 * bytes that failed lately: FAIL without a new wait, until PACE_FAILED_NS
 * passed; a read the caller gave up on (pace_read_failed) likewise. */
static void test_read_step(void)
{
	struct pace_config c;
	struct pace_step st, st2;
	struct fix f;
	uint32_t w;

	small_cfg(&c);
	c.deadline_ns = 5 * SEC;
	T_EQ_INT(fix_init(&f, &c, 4 * MIB), 0);
	/* Missing: a wait begins, once. */
	T_EQ_INT(pace_read_step(f.p, f.rd, 0, 8 * KIB, PACE_NONE, f.now, &st),
		 0);
	T_EQ_INT(st.what, PACE_DO_WAIT);
	T_ASSERT(st.begun);
	T_ASSERT(st.wait != PACE_NONE);
	w = st.wait;
	T_EQ_INT(f.p->n_waits, 1);
	f.now += 10 * MS;
	T_EQ_INT(pace_read_step(f.p, f.rd, 0, 8 * KIB, w, f.now, &st), 0);
	T_EQ_INT(st.what, PACE_DO_WAIT);
	T_ASSERT(!st.begun);
	T_EQ_U64(st.wait, w);
	T_EQ_INT(f.p->n_waits, 1);
	/* Served: COPY, the wait ended. */
	T_ASSERT(fix_poll(&f) >= 1);
	fix_serve(&f, &f.a[0]);
	T_EQ_INT(pace_read_step(f.p, f.rd, 0, 8 * KIB, w, f.now, &st), 0);
	T_EQ_INT(st.what, PACE_DO_COPY);
	T_EQ_U64(st.wait, PACE_NONE);
	T_EQ_INT(pace_wait_state(f.p, w, f.now), -ENOENT);
	/* Held, no wait: COPY, nothing begun. */
	T_EQ_INT(pace_read_step(f.p, f.rd, 4 * KIB, 4 * KIB, PACE_NONE, f.now,
				&st),
		 0);
	T_EQ_INT(st.what, PACE_DO_COPY);
	T_EQ_INT(f.p->n_waits, 0);
	/* Past the deadline: FAIL -ETIMEDOUT, the wait ended. */
	T_EQ_INT(pace_read_step(f.p, f.rd, 2 * MIB, 4 * KIB, PACE_NONE, f.now,
				&st),
		 0);
	T_EQ_INT(st.what, PACE_DO_WAIT);
	w = st.wait;
	f.now += 5 * SEC;
	T_EQ_INT(pace_read_step(f.p, f.rd, 2 * MIB, 4 * KIB, w, f.now, &st), 0);
	T_EQ_INT(st.what, PACE_DO_FAIL);
	T_EQ_INT(st.error, -ETIMEDOUT);
	T_ASSERT(!st.again);
	T_EQ_U64(st.wait, PACE_NONE);
	T_EQ_INT(f.p->n_waits, 0);
	/* Failed lately: an overlapping read fails at once, no wait begun. */
	T_EQ_INT(pace_read_step(f.p, f.rd, 2 * MIB + 2 * KIB, 8 * KIB,
				PACE_NONE, f.now + 500 * MS, &st),
		 0);
	T_EQ_INT(st.what, PACE_DO_FAIL);
	T_EQ_INT(st.error, -EIO);
	T_ASSERT(st.again);
	T_EQ_INT(f.p->n_waits, 0);
	/* Bytes beside it are asked as ever... */
	T_EQ_INT(pace_read_step(f.p, f.rd, 2 * MIB + 4 * KIB, 4 * KIB,
				PACE_NONE, f.now + 500 * MS, &st2),
		 0);
	T_EQ_INT(st2.what, PACE_DO_WAIT);
	pace_wait_end(f.p, st2.wait);
	/* ...and the failed ones once PACE_FAILED_NS passed. */
	f.now += PACE_FAILED_NS;
	T_EQ_INT(pace_read_step(f.p, f.rd, 2 * MIB, 4 * KIB, PACE_NONE, f.now,
				&st),
		 0);
	T_EQ_INT(st.what, PACE_DO_WAIT);
	T_ASSERT(st.begun);
	pace_wait_end(f.p, st.wait);
	/* Given up by the caller: refused as a failed wait's range. */
	T_EQ_INT(pace_read_failed(f.p, f.rd, 3 * MIB, 4 * KIB, f.now), 0);
	T_EQ_INT(pace_read_step(f.p, f.rd, 3 * MIB, 4 * KIB, PACE_NONE, f.now,
				&st),
		 0);
	T_EQ_INT(st.what, PACE_DO_FAIL);
	T_ASSERT(st.again);
	/* pace_read with wait true is the same question, the read counted. */
	{
		struct pace_read_result r;

		T_EQ_INT(
			pace_read(f.p, f.rd, 3 * MIB, 4 * KIB, true, f.now, &r),
			0);
		T_EQ_INT(r.step.what, PACE_DO_FAIL);
		T_ASSERT(r.step.again);
		T_EQ_U64(r.cursor, 3 * MIB + 4 * KIB);
	}
	T_EQ_INT(f.p->n_waits, 0);
	T_EQ_INT(pace_read_step(f.p, 999, 0, 1, PACE_NONE, f.now, &st),
		 -ENOENT);
	T_EQ_INT(pace_read_step(f.p, f.rd, 0, 1, 77, f.now, &st), -ENOENT);
	pace_free(f.p);
}

static void test_readahead_window(void)
{
	struct pace_config c;
	struct fix f;
	uint64_t cursor = 0;
	struct pace_stats st;

	small_cfg(&c);
	T_EQ_INT(fix_init(&f, &c, 4 * MIB), 0);
	/* Reads of 8 KiB from 0: every START lies in [cursor, cursor + W). */
	for (int i = 0; i < 200; i++) {
		uint64_t w_end;

		uint32_t w = PACE_NONE;

		T_EQ_INT(pace_reader_read(f.p, f.rd, cursor, 8 * KIB, f.now),
			 0);
		if (!pace_is_held(f.p, f.blob, cursor, cursor + 8 * KIB))
			T_EQ_INT(pace_wait_begin(f.p, f.rd, cursor, 8 * KIB,
						 f.now, &w),
				 0);
		cursor += 8 * KIB;
		fix_poll(&f);
		w_end = cursor + c.window_max;
		for (size_t k = 0; k < f.n; k++) {
			T_EQ_INT(f.a[k].kind, PACE_ACT_START);
			T_ASSERT(f.a[k].end <= w_end);
			T_ASSERT(f.a[k].end - f.a[k].start <= c.max_request);
			T_ASSERT(f.a[k].end - f.a[k].start >= c.min_request);
			T_ASSERT(f.a[k].start % c.align == 0);
			T_ASSERT(f.a[k].end % c.align == 0);
		}
		for (size_t k = 0; k < f.n; k++)
			fix_serve(&f, &f.a[k]);
		if (w != PACE_NONE) {
			T_EQ_INT(pace_wait_state(f.p, w, f.now), 0);
			pace_wait_end(f.p, w);
		}
		f.now += 10 * MS;
	}
	T_ASSERT(pace_is_held(f.p, f.blob, 0, cursor));
	/* Bounded by consumption. */
	T_ASSERT(pace_held_bytes(f.p, f.blob) <= cursor + c.window_max);
	pace_stats_get(f.p, &st);
	T_EQ_U64(st.bytes_in, pace_held_bytes(f.p, f.blob));
	pace_free(f.p);
}

/* A reader that streamed up to a jump reads ahead at once at the new
 * position (a player's seek); one that had not (a header read, then a
 * jump; a run too short to be evident) shows a run first. */
static void test_jump_after_stream(void)
{
	struct pace_config c;
	struct fix f;
	uint64_t w = 0;

	small_cfg(&c);
	T_EQ_INT(fix_init(&f, &c, 16 * MIB), 0);
	for (uint64_t off = 0; off < 3 * MIB; off += 64 * KIB) {
		T_EQ_INT(pace_reader_read(f.p, f.rd, off, 64 * KIB, f.now), 0);
		f.now += 10 * MS;
	}
	T_EQ_INT(pace_reader_read(f.p, f.rd, 12 * MIB, 64 * KIB, f.now), 0);
	T_EQ_INT(pace_reader_window(f.p, f.rd, NULL, &w), 0);
	T_ASSERT(w > 0);
	T_ASSERT(w <= c.seq_min);
	pace_free(f.p);

	/* A header, then a jump: no window. */
	T_EQ_INT(fix_init(&f, &c, 16 * MIB), 0);
	T_EQ_INT(pace_reader_read(f.p, f.rd, 0, 64 * KIB, f.now), 0);
	T_EQ_INT(pace_reader_read(f.p, f.rd, 12 * MIB, 64 * KIB, f.now), 0);
	T_EQ_INT(pace_reader_window(f.p, f.rd, NULL, &w), 0);
	T_EQ_U64(w, 0);
	pace_free(f.p);

	/* A run after a jump shorter than seq_min, then a jump: no window. */
	T_EQ_INT(fix_init(&f, &c, 16 * MIB), 0);
	for (uint64_t off = 4 * MIB; off < 5 * MIB; off += 64 * KIB)
		T_EQ_INT(pace_reader_read(f.p, f.rd, off, 64 * KIB, f.now), 0);
	T_EQ_INT(pace_reader_read(f.p, f.rd, 12 * MIB, 64 * KIB, f.now), 0);
	T_EQ_INT(pace_reader_window(f.p, f.rd, NULL, &w), 0);
	T_EQ_U64(w, 0);
	pace_free(f.p);
}

static void test_window_first_poll(void)
{
	struct pace_config c;
	struct fix f;
	uint32_t w;

	small_cfg(&c);
	T_EQ_INT(fix_init(&f, &c, 4 * MIB), 0);
	T_EQ_INT(fix_poll(&f), 0); /* no read yet, no read-ahead */
	T_EQ_INT(pace_reader_read(f.p, f.rd, 0, 4 * KIB, f.now), 0);
	T_EQ_INT(pace_wait_begin(f.p, f.rd, 0, 4 * KIB, f.now, &w), 0);
	/* The read's request alone, until its first byte arrives. */
	T_EQ_INT(fix_poll(&f), 1);
	T_EQ_U64(f.a[0].start, 0);
	T_EQ_U64(pace_next_wake(f.p, f.now), f.now + c.first_hold_ns);
	f.now += c.first_hold_ns / 2;
	T_EQ_INT(fix_poll(&f), 0);
	pace_on_data(f.p, f.a[0].lane, 0, 1, f.now);
	fix_poll(&f);
	T_ASSERT(f.n >= 1);
	for (size_t k = 0; k < f.n; k++) {
		T_ASSERT(f.a[k].kind == PACE_ACT_START);
		T_ASSERT(f.a[k].start > 0);
		T_ASSERT(f.a[k].end <= 4 * KIB + 2 * c.window_min);
	}
	pace_free(f.p);
}

/* A read whose request has no first byte holds read-ahead for
 * first_hold_ns only. */
static void test_first_hold_expires(void)
{
	struct pace_config c;
	struct fix f;
	uint32_t w;

	small_cfg(&c);
	T_EQ_INT(fix_init(&f, &c, 4 * MIB), 0);
	T_EQ_INT(pace_reader_read(f.p, f.rd, 0, 4 * KIB, f.now), 0);
	T_EQ_INT(pace_wait_begin(f.p, f.rd, 0, 4 * KIB, f.now, &w), 0);
	T_EQ_INT(fix_poll(&f), 1);
	f.now += c.first_hold_ns - 1;
	T_EQ_INT(fix_poll(&f), 0);
	f.now += 1;
	T_ASSERT(fix_poll(&f) >= 1);
	T_ASSERT(f.a[0].start > 0);
	/* A hold that ended is no reason to wake early. */
	T_ASSERT(pace_next_wake(f.p, f.now) > f.now);
	pace_free(f.p);

	/* 0 turns the hold off: read-ahead starts with the read. */
	small_cfg(&c);
	c.first_hold_ns = 0;
	T_EQ_INT(fix_init(&f, &c, 4 * MIB), 0);
	T_EQ_INT(pace_reader_read(f.p, f.rd, 0, 4 * KIB, f.now), 0);
	T_EQ_INT(pace_wait_begin(f.p, f.rd, 0, 4 * KIB, f.now, &w), 0);
	T_ASSERT(fix_poll(&f) >= 2);
	T_EQ_U64(f.a[0].start, 0);
	pace_free(f.p);
}

static void test_no_refetch_resume(void)
{
	struct pace_config c;
	struct fix f;
	uint32_t w;

	small_cfg(&c);
	T_EQ_INT(fix_init(&f, &c, 1 * MIB), 0);
	T_EQ_INT(pace_blob_held(f.p, f.blob, 0, 40 * KIB), 0);
	T_EQ_INT(pace_blob_held(f.p, f.blob, 48 * KIB, 56 * KIB), 0);
	T_ASSERT(pace_is_held(f.p, f.blob, 4 * KIB, 40 * KIB));
	T_EQ_INT(pace_wait_begin(f.p, f.rd, 0, 64 * KIB, f.now, &w), 0);
	fix_poll(&f);
	T_ASSERT(f.n >= 2);
	for (size_t k = 0; k < f.n; k++) {
		T_ASSERT(pace_held_bytes(f.p, f.blob) == 48 * KIB);
		T_ASSERT(!pace_is_held(f.p, f.blob, f.a[k].start,
				       f.a[k].start + 1));
		for (uint64_t x = f.a[k].start; x < f.a[k].end; x += KIB)
			T_ASSERT(!pace_is_held(f.p, f.blob, x, x + 1));
	}
	T_EQ_U64(f.a[0].start, 40 * KIB);
	T_EQ_U64(f.a[0].end, 48 * KIB);
	T_EQ_U64(f.a[1].start, 56 * KIB);
	for (size_t k = 0; k < f.n; k++)
		fix_serve(&f, &f.a[k]);
	T_EQ_INT(pace_wait_state(f.p, w, f.now), 0);
	T_EQ_INT(pace_blob_forget(f.p, f.blob, 0, 8 * KIB), 0);
	T_ASSERT(!pace_is_held(f.p, f.blob, 0, 64 * KIB));
	T_EQ_INT(pace_wait_state(f.p, w, f.now), -EINPROGRESS);
	pace_free(f.p);
}

static void test_on_data_absolute(void)
{
	struct pace_config c;
	struct fix f;
	uint32_t w;
	struct pace_lane_info li;

	small_cfg(&c);
	T_EQ_INT(fix_init(&f, &c, 1 * MIB), 0);
	T_EQ_INT(pace_wait_begin(f.p, f.rd, 100 * KIB, 16 * KIB, f.now, &w), 0);
	T_EQ_INT(fix_poll(&f), 1);
	T_EQ_U64(f.a[0].start, 100 * KIB);
	T_EQ_U64(f.a[0].end, 116 * KIB);
	/* Bytes outside the lane's range are ignored. */
	T_EQ_INT(pace_on_data(f.p, f.a[0].lane, 90 * KIB, 20 * KIB, f.now), 0);
	T_EQ_U64(pace_held_bytes(f.p, f.blob), 10 * KIB);
	/* Overlapping credits count once. */
	T_EQ_INT(pace_on_data(f.p, f.a[0].lane, 105 * KIB, 10 * KIB, f.now), 0);
	T_EQ_U64(pace_held_bytes(f.p, f.blob), 15 * KIB);
	T_EQ_INT(pace_lane_info(f.p, f.a[0].lane, &li), 0);
	T_ASSERT(li.busy);
	T_EQ_U64(li.frontier, 115 * KIB);
	T_EQ_INT(pace_wait_state(f.p, w, f.now), -EINPROGRESS);
	/* A short body: the hole goes back to the queue. */
	T_EQ_INT(pace_on_done(f.p, f.a[0].lane, PACE_OUT_TRANSIENT, 0, f.now),
		 0);
	T_EQ_INT(fix_poll(&f), 0); /* backing off */
	f.now += c.backoff_ns;
	T_EQ_INT(fix_poll(&f), 1);
	T_EQ_U64(f.a[0].start, 115 * KIB);
	T_EQ_U64(f.a[0].end, 128 * KIB); /* aligned, never above a request */
	fix_serve(&f, &f.a[0]);
	T_EQ_INT(pace_wait_state(f.p, w, f.now), 0);
	T_EQ_INT(pace_lane_info(f.p, 99, &li), -ENOENT);
	pace_free(f.p);
}

static void test_backoff_grows(void)
{
	struct pace_config c;
	struct fix f;
	uint32_t w;
	uint64_t expect = 0;

	small_cfg(&c);
	c.backoff_ns = 100 * MS;
	c.backoff_max_ns = 350 * MS;
	T_EQ_INT(fix_init(&f, &c, 1 * MIB), 0);
	T_EQ_INT(pace_wait_begin(f.p, f.rd, 0, 4 * KIB, f.now, &w), 0);
	for (int i = 0; i < 5; i++) {
		T_EQ_INT(fix_poll(&f), 1);
		T_EQ_INT(pace_on_done(f.p, f.a[0].lane, PACE_OUT_TRANSIENT, 0,
				      f.now),
			 0);
		expect = i == 0 ? 100 * MS : i == 1 ? 200 * MS : 350 * MS;
		T_EQ_U64(pace_next_wake(f.p, f.now), f.now + expect);
		f.now += expect - 1;
		T_EQ_INT(fix_poll(&f), 0);
		f.now += 1;
	}
	pace_free(f.p);
}

static void test_throttled_retry_after(void)
{
	struct pace_config c;
	struct fix f;
	uint32_t w;

	small_cfg(&c);
	T_EQ_INT(fix_init(&f, &c, 1 * MIB), 0);
	T_EQ_INT(pace_wait_begin(f.p, f.rd, 0, 4 * KIB, f.now, &w), 0);
	T_EQ_INT(fix_poll(&f), 1);
	T_EQ_INT(pace_on_done(f.p, f.a[0].lane, PACE_OUT_THROTTLED, 3 * SEC,
			      f.now),
		 0);
	f.now += 3 * SEC - 1;
	T_EQ_INT(fix_poll(&f), 0);
	f.now += 1;
	T_EQ_INT(fix_poll(&f), 1);
	pace_free(f.p);
}

static void test_gone_excludes_then_eio(void)
{
	struct pace_config c;
	struct fix f;
	uint32_t w, s2;

	small_cfg(&c);
	T_EQ_INT(fix_init(&f, &c, 1 * MIB), 0);
	T_EQ_INT(pace_source_add(f.p, f.blob, PACE_CAPS_FULL, &s2), 0);
	T_EQ_INT(pace_wait_begin(f.p, f.rd, 0, 4 * KIB, f.now, &w), 0);
	T_EQ_INT(fix_poll(&f), 1);
	T_EQ_INT(pace_on_done(f.p, f.a[0].lane, PACE_OUT_GONE, 0, f.now), 0);
	T_EQ_INT(pace_wait_state(f.p, w, f.now), -EINPROGRESS);
	T_EQ_INT(fix_poll(&f), 1); /* the other source, at once */
	T_ASSERT(f.a[0].source != f.src);
	T_EQ_INT(pace_on_done(f.p, f.a[0].lane, PACE_OUT_FATAL, 0, f.now), 0);
	T_EQ_INT(pace_wait_state(f.p, w, f.now), -EIO);
	T_EQ_INT(fix_poll(&f), 0);
	pace_free(f.p);
}

/* An origin that refuses every connection fails waiting reads after
 * down_faults tries, long before the deadline; a byte resets the count,
 * and a later read tries again before failing. */
static void test_origin_down_fails_early(void)
{
	struct pace_config c;
	struct fix f;
	uint32_t w;

	small_cfg(&c);
	c.backoff_ns = 100 * MS;
	c.deadline_ns = 60 * SEC;
	T_EQ_INT(fix_init(&f, &c, 1 * MIB), 0);
	T_EQ_INT(pace_wait_begin(f.p, f.rd, 0, 4 * KIB, f.now, &w), 0);
	for (uint32_t i = 0; i < c.down_faults; i++) {
		T_EQ_INT(pace_wait_state(f.p, w, f.now), -EINPROGRESS);
		T_EQ_INT(fix_poll(&f), 1);
		T_EQ_INT(pace_on_done(f.p, f.a[0].lane, PACE_OUT_TRANSIENT, 0,
				      f.now),
			 0);
		f.now = pace_next_wake(f.p, f.now); /* the backoff's end */
	}
	T_EQ_INT(pace_wait_state(f.p, w, f.now), -EIO);
	pace_wait_end(f.p, w);
	/* A new read gives the origin one more try before failing. */
	f.now += 1;
	T_EQ_INT(pace_wait_begin(f.p, f.rd, 0, 4 * KIB, f.now, &w), 0);
	T_EQ_INT(pace_wait_state(f.p, w, f.now), -EINPROGRESS);
	f.now = pace_next_wake(f.p, f.now);
	T_EQ_INT(fix_poll(&f), 1);
	T_EQ_INT(pace_on_done(f.p, f.a[0].lane, PACE_OUT_TRANSIENT, 0, f.now),
		 0);
	T_EQ_INT(pace_wait_state(f.p, w, f.now), -EIO);
	pace_wait_end(f.p, w);
	/* The origin is back: bytes reset the count. */
	T_EQ_INT(pace_wait_begin(f.p, f.rd, 0, 4 * KIB, f.now, &w), 0);
	f.now = pace_next_wake(f.p, f.now);
	T_EQ_INT(fix_poll(&f), 1);
	fix_serve(&f, &f.a[0]);
	T_EQ_INT(pace_wait_state(f.p, w, f.now), 0);
	pace_free(f.p);
}

/* A local failure is never blamed on the source (not counted towards
 * down_faults, the backoff not grown), yet it pauses for one base backoff:
 * a failure that repeats is not retried in a busy loop. */
static void test_local_not_blamed(void)
{
	struct pace_config c;
	struct fix f;
	uint32_t w;

	small_cfg(&c);
	c.backoff_ns = 100 * MS;
	T_EQ_INT(fix_init(&f, &c, 1 * MIB), 0);
	T_EQ_INT(pace_wait_begin(f.p, f.rd, 0, 4 * KIB, f.now, &w), 0);
	for (uint32_t i = 0; i < 3 * c.down_faults; i++) {
		T_EQ_INT(fix_poll(&f), 1);
		T_EQ_INT(pace_on_done(f.p, f.a[0].lane, PACE_OUT_LOCAL, 0,
				      f.now),
			 0);
		T_EQ_INT(pace_wait_state(f.p, w, f.now), -EINPROGRESS);
		T_EQ_U64(pace_next_wake(f.p, f.now), f.now + 100 * MS);
		f.now += 100 * MS - 1;
		T_EQ_INT(fix_poll(&f), 0);
		f.now += 1;
	}
	T_EQ_INT(fix_poll(&f), 1);
	fix_serve(&f, &f.a[0]);
	T_EQ_INT(pace_wait_state(f.p, w, f.now), 0);
	pace_free(f.p);
}

/* Retry-After is the server's to choose: any value, up to 2^64 - 1 ns
 * (what a caller's saturated conversion gives), holds the source no longer
 * than retry_after_max_ns, jitter included, and a second 429 in the same
 * hold does not stretch it either. */
static void test_retry_after_capped(void)
{
	static const uint64_t asks[] = {UINT64_MAX, UINT64_MAX - 1,
					999999999ull * SEC, 61 * SEC};
	struct pace_config c;
	struct fix f;
	uint32_t w;

	for (size_t k = 0; k < sizeof(asks) / sizeof(asks[0]); k++) {
		small_cfg(&c);
		c.jitter_pct = 100;
		c.retry_after_max_ns = 60 * SEC;
		c.deadline_ns = 120 * SEC;
		c.max_lanes = 2;
		c.lanes_per_source = 2;
		T_EQ_INT(fix_init(&f, &c, 1 * MIB), 0);
		pace_reader_read(f.p, f.rd, 0, 4 * KIB, f.now);
		T_EQ_INT(fix_poll(&f), 2); /* read-ahead on both lanes */
		T_EQ_INT(pace_on_done(f.p, f.a[0].lane, PACE_OUT_THROTTLED,
				      asks[k], f.now),
			 0);
		f.now += 1;
		T_EQ_INT(pace_on_done(f.p, f.a[1].lane, PACE_OUT_THROTTLED,
				      asks[k], f.now),
			 0);
		T_EQ_INT(
			pace_wait_begin(f.p, f.rd, 4 * KIB, 4 * KIB, f.now, &w),
			0);
		T_ASSERT(pace_next_wake(f.p, f.now) <= f.now + 60 * SEC);
		f.now += 60 * SEC;
		T_ASSERT(fix_poll(&f) >= 1); /* the source is back */
		for (size_t i = 0; i < f.n; i++)
			if (f.a[i].kind == PACE_ACT_START)
				fix_serve(&f, &f.a[i]);
		T_EQ_INT(pace_wait_state(f.p, w, f.now), 0);
		pace_wait_end(f.p, w);
		pace_free(f.p);
	}
	/* The cap is a setting: 0 is no cap but a mistake. */
	small_cfg(&c);
	c.retry_after_max_ns = 0;
	T_EQ_INT(pace_config_check(&c, NULL), -EINVAL);
}

static void test_deadline(void)
{
	struct pace_config c;
	struct fix f;
	uint32_t w;

	small_cfg(&c);
	c.deadline_ns = 5 * SEC;
	c.stall_ns = 2 * SEC;
	T_EQ_INT(fix_init(&f, &c, 1 * MIB), 0);
	T_EQ_INT(pace_wait_begin(f.p, f.rd, 0, 4 * KIB, f.now, &w), 0);
	T_EQ_INT(fix_poll(&f), 1);
	/* The read-ahead hold ends first, then the stall check is due. */
	T_EQ_U64(pace_next_wake(f.p, f.now), f.now + c.first_hold_ns);
	T_EQ_U64(pace_next_wake(f.p, f.now + c.first_hold_ns), f.now + 2 * SEC);
	f.now += 5 * SEC - 1;
	T_EQ_INT(pace_wait_state(f.p, w, f.now), -EINPROGRESS);
	f.now += 1;
	T_EQ_INT(pace_wait_state(f.p, w, f.now), -ETIMEDOUT);
	pace_wait_end(f.p, w);
	T_EQ_INT(pace_wait_state(f.p, w, f.now), -ENOENT);
	pace_free(f.p);
}

static void test_stall_reclaim(void)
{
	struct pace_config c;
	struct fix f;
	uint32_t w, lane;
	struct pace_stats st;

	small_cfg(&c);
	c.stall_ns = 2 * SEC;
	T_EQ_INT(fix_init(&f, &c, 1 * MIB), 0);
	T_EQ_INT(pace_wait_begin(f.p, f.rd, 0, 16 * KIB, f.now, &w), 0);
	T_EQ_INT(fix_poll(&f), 1);
	lane = f.a[0].lane;
	pace_on_data(f.p, lane, 0, 4 * KIB, f.now);
	f.now += 2 * SEC - 1;
	T_EQ_INT(fix_poll(&f), 0);
	f.now += 1;
	T_EQ_INT(fix_poll(&f), 1);
	T_EQ_INT(f.a[0].kind, PACE_ACT_CANCEL);
	T_EQ_INT(f.a[0].lane, lane);
	T_ASSERT(f.a[0].faulted);
	pace_stats_get(f.p, &st);
	T_EQ_U64(st.reclaims, 1);
	/* Late bytes of the cancelled request are not credited. */
	pace_on_data(f.p, lane, 4 * KIB, 4 * KIB, f.now);
	T_EQ_U64(pace_held_bytes(f.p, f.blob), 4 * KIB);
	T_EQ_INT(pace_on_done(f.p, lane, PACE_OUT_CANCELLED, 0, f.now), 0);
	f.now += c.backoff_ns;
	T_EQ_INT(fix_poll(&f), 1);
	T_EQ_INT(f.a[0].kind, PACE_ACT_START);
	T_EQ_U64(f.a[0].start, 4 * KIB); /* received bytes kept */
	pace_free(f.p);
}

/* A routed source's stall is its route's: the range is taken back as
 * ever, and asked for again at once (by another route), with no backoff. */
static void test_stall_routed(void)
{
	struct pace_config c;
	struct fix f;
	uint32_t w, lane;
	struct pace_source_info si;

	small_cfg(&c);
	c.stall_ns = 2 * SEC;
	T_EQ_INT(fix_init(&f, &c, 1 * MIB), 0);
	T_EQ_INT(pace_source_set_routed(f.p, f.src), 0);
	T_EQ_INT(pace_source_set_routed(f.p, f.src + 1), -ENOENT);
	T_EQ_INT(pace_wait_begin(f.p, f.rd, 0, 16 * KIB, f.now, &w), 0);
	T_EQ_INT(fix_poll(&f), 1);
	lane = f.a[0].lane;
	pace_on_data(f.p, lane, 0, 4 * KIB, f.now);
	f.now += 2 * SEC;
	/* The cancel, and in the same poll the retry on another lane. */
	T_EQ_INT(fix_poll(&f), 2);
	T_EQ_INT(f.a[0].kind, PACE_ACT_CANCEL);
	T_EQ_INT(f.a[0].lane, lane);
	T_ASSERT(f.a[0].faulted);
	T_EQ_INT(f.a[1].kind, PACE_ACT_START);
	T_EQ_U64(f.a[1].start, 4 * KIB);
	T_EQ_INT(pace_source_info(f.p, f.src, f.now, &si), 0);
	T_ASSERT(si.routed);
	T_EQ_U64(si.held_until, 0);
	fix_serve(&f, &f.a[1]);
	T_EQ_INT(pace_on_done(f.p, lane, PACE_OUT_CANCELLED, 0, f.now), 0);
	T_EQ_INT(pace_wait_state(f.p, w, f.now), 0);
	pace_wait_end(f.p, w);
	pace_free(f.p);
}

/* A lane whose rate falls under a fifth of its own level collapses and
 * a read waiting on it takes its range back; a routed source's lane does
 * not (through proxies that is a miss beside hits, not a fault). */
static void test_collapse_routed(void)
{
	for (int routed = 0; routed < 2; routed++) {
		struct pace_config c;
		struct fix f;
		struct pace_lane_info li;
		uint32_t w, lane;
		uint64_t off;
		bool cancelled = false;

		small_cfg(&c);
		c.max_lanes = 1;
		c.lanes_per_source = 1;
		c.max_request = 8 * MIB;
		c.stall_ns = 10 * SEC;
		T_EQ_INT(fix_init(&f, &c, 8 * MIB), 0);
		if (routed)
			T_EQ_INT(pace_source_set_routed(f.p, f.src), 0);
		T_EQ_INT(pace_wait_begin(f.p, f.rd, 0, 8 * MIB, f.now, &w), 0);
		T_EQ_INT(fix_poll(&f), 1);
		lane = f.a[0].lane;
		off = f.a[0].start;
		/* 64 KiB each 10 ms for a second (hits), then 1 KiB each
		 * 100 ms (a miss being filled). */
		for (int i = 0; i < 100; i++) {
			f.now += 10 * MS;
			pace_on_data(f.p, lane, off, 64 * KIB, f.now);
			off += 64 * KIB;
		}
		for (int i = 0; i < 20; i++) {
			f.now += 100 * MS;
			pace_on_data(f.p, lane, off, KIB, f.now);
			off += KIB;
		}
		T_EQ_INT(pace_lane_info(f.p, lane, &li), 0);
		T_EQ_INT(li.collapsed, !routed);
		fix_poll(&f);
		for (size_t i = 0; i < f.n; i++)
			cancelled |= f.a[i].kind == PACE_ACT_CANCEL &&
				     f.a[i].lane == lane;
		T_EQ_INT(cancelled, !routed);
		pace_free(f.p);
	}
}

static void test_demand_yield(void)
{
	struct pace_config c;
	struct fix f;
	uint32_t w, rd2;
	uint64_t cursor = 0;
	size_t starts = 0;

	small_cfg(&c);
	c.max_lanes = 2;
	T_EQ_INT(fix_init(&f, &c, 8 * MIB), 0);
	/* A sequential reader keeps both lanes on read-ahead. */
	pace_reader_read(f.p, f.rd, cursor, 4 * KIB, f.now);
	T_EQ_INT(fix_poll(&f), 2);
	/* Another reader waits far away: the furthest lane yields. */
	T_EQ_INT(pace_reader_open(f.p, f.blob, f.now, &rd2), 0);
	T_EQ_INT(pace_wait_begin(f.p, rd2, 6 * MIB, 4 * KIB, f.now, &w), 0);
	{
		struct pace_action first[2] = {f.a[0], f.a[1]};
		uint32_t far = first[0].start > first[1].start ? first[0].lane
							       : first[1].lane;

		T_EQ_INT(fix_poll(&f), 1);
		T_EQ_INT(f.a[0].kind, PACE_ACT_CANCEL);
		T_EQ_INT(f.a[0].lane, far);
		T_ASSERT(!f.a[0].faulted); /* a yield, not a fault */
		T_EQ_INT(fix_poll(&f), 0); /* only one yield */
		pace_on_done(f.p, far, PACE_OUT_CANCELLED, 0, f.now);
		fix_poll(&f);
		for (size_t k = 0; k < f.n; k++)
			starts += f.a[k].kind == PACE_ACT_START &&
				  f.a[k].start == 6 * MIB;
		T_EQ_U64(starts, 1);
		T_EQ_INT(f.a[0].lane, far);
	}
	pace_free(f.p);
}

static void test_seek_yields(void)
{
	struct pace_config c;
	struct fix f;
	uint64_t cursor = 0;
	uint32_t w;

	small_cfg(&c);
	T_EQ_INT(fix_init(&f, &c, 8 * MIB), 0);
	for (int i = 0; i < 4; i++) {
		pace_reader_read(f.p, f.rd, cursor, 64 * KIB, f.now);
		cursor += 64 * KIB;
		fix_poll(&f);
		for (size_t k = 0; k < f.n; k++)
			fix_serve(&f, &f.a[k]);
	}
	pace_reader_read(f.p, f.rd, cursor, 64 * KIB, f.now);
	T_ASSERT(fix_poll(&f) > 0);
	/* Seek far: every in-flight read-ahead lane stops, at the end of the
	 * chunk it is in (so that a cache on the way keeps it whole) or at
	 * once when the read at the new position needs its lane. */
	{
		struct pace_action old[64];
		bool seen[64] = {false};
		size_t busy = f.n, stopped = 0;

		memcpy(old, f.a, busy * sizeof(old[0]));
		/* Each lane is into its request's first chunk. */
		for (size_t k = 0; k < busy; k++)
			pace_on_data(f.p, old[k].lane, old[k].start, 1 * KIB,
				     f.now);
		pace_reader_read(f.p, f.rd, 7 * MIB, 4 * KIB, f.now);
		T_EQ_INT(
			pace_wait_begin(f.p, f.rd, 7 * MIB, 4 * KIB, f.now, &w),
			0);
		fix_poll(&f);
		for (size_t k = 0; k < f.n; k++) {
			for (size_t j = 0; j < busy; j++) {
				if (f.a[k].lane != old[j].lane ||
				    (f.a[k].kind != PACE_ACT_CANCEL &&
				     f.a[k].kind != PACE_ACT_SET_END))
					continue;
				if (f.a[k].kind == PACE_ACT_SET_END)
					T_EQ_U64(f.a[k].end,
						 old[j].start + c.align);
				stopped += !seen[j];
				seen[j] = true;
			}
		}
		T_EQ_U64(stopped, busy);
	}
	pace_free(f.p);
}

static void test_capacity(void)
{
	struct pace_config c;
	struct pace *p;
	uint32_t b, r, s;

	small_cfg(&c);
	c.max_readers = 1;
	c.max_blobs = 1;
	T_EQ_INT(pace_new(&c, &p), 0);
	T_EQ_INT(pace_blob_add(p, 100, &b), 0);
	T_EQ_INT(pace_blob_add(p, 100, &b), -ENOSPC);
	T_EQ_INT(pace_source_add(p, 7, PACE_CAPS_FULL, &s), -ENOENT);
	T_EQ_INT(pace_reader_open(p, b, 0, &r), 0);
	T_EQ_INT(pace_reader_open(p, b, 0, &r), -ENOSPC);
	T_EQ_INT(pace_reader_read(p, 5, 0, 1, 0), -ENOENT);
	T_EQ_INT(pace_blob_held(p, b, 0, 101), -EINVAL);
	pace_free(p);
}

static void test_blob_end_clamp(void)
{
	struct pace_config c;
	struct fix f;
	uint32_t w;

	small_cfg(&c);
	T_EQ_INT(fix_init(&f, &c, 10 * KIB + 5), 0);
	T_EQ_INT(pace_wait_begin(f.p, f.rd, 9 * KIB, 100 * KIB, f.now, &w), 0);
	T_EQ_INT(fix_poll(&f), 1);
	T_EQ_U64(f.a[0].start, 8 * KIB);
	T_EQ_U64(f.a[0].end, 10 * KIB + 5);
	pace_free(f.p);
}

static void test_no_ranges_single_stream(void)
{
	struct pace_config c;
	struct pace *p;
	uint32_t b, s, r, w;
	struct pace_action a[8];

	small_cfg(&c);
	T_EQ_INT(pace_new(&c, &p), 0);
	T_EQ_INT(pace_blob_add(p, 1 * MIB, &b), 0);
	T_EQ_INT(pace_source_add(p, b, PACE_CAPS_NO_RANGES, &s), 0);
	T_EQ_INT(pace_reader_open(p, b, 0, &r), 0);
	T_EQ_INT(pace_reader_read(p, r, 0, 4 * KIB, 0), 0);
	T_EQ_INT(pace_wait_begin(p, r, 0, 4 * KIB, 0, &w), 0);
	T_EQ_INT(pace_poll(p, 0, a, 8), 1);
	T_EQ_U64(a[0].start, 0);
	T_EQ_U64(a[0].end, 1 * MIB);
	pace_free(p);
}

/* A stream starts at its blob's first missing byte whatever the read
 * asks (the source sends from byte 0), owns the rest, so a far read
 * starts nothing else; restarted after a fault, it starts where the held
 * bytes end. */
static void test_no_ranges_far_read_and_restart(void)
{
	struct pace_config c;
	struct pace *p;
	uint32_t b, s, r, w, w2;
	struct pace_action a[8];
	uint64_t now = 0;

	small_cfg(&c);
	c.backoff_ns = 100 * MS;
	T_EQ_INT(pace_new(&c, &p), 0);
	T_EQ_INT(pace_blob_add(p, 1 * MIB, &b), 0);
	T_EQ_INT(pace_source_add(p, b, PACE_CAPS_NO_RANGES, &s), 0);
	T_EQ_INT(pace_reader_open(p, b, 0, &r), 0);
	T_EQ_INT(pace_reader_read(p, r, 900 * KIB, 4 * KIB, 0), 0);
	T_EQ_INT(pace_wait_begin(p, r, 900 * KIB, 4 * KIB, 0, &w), 0);
	T_EQ_INT(pace_poll(p, 0, a, 8), 1);
	T_EQ_INT(a[0].kind, PACE_ACT_START);
	T_EQ_U64(a[0].start, 0);
	T_EQ_U64(a[0].end, 1 * MIB);
	/* A second far read starts nothing: the stream owns its bytes. */
	T_EQ_INT(pace_wait_begin(p, r, 600 * KIB, 4 * KIB, 0, &w2), 0);
	T_EQ_INT(pace_poll(p, 0, a + 1, 7), 0);
	now += 10 * MS;
	T_EQ_INT(pace_on_data(p, a[0].lane, 0, 256 * KIB, now), 0);
	T_EQ_INT(pace_on_done(p, a[0].lane, PACE_OUT_TRANSIENT, 0, now), 0);
	now += 200 * MS;
	T_EQ_INT(pace_poll(p, now, a, 8) >= 1, 1);
	T_EQ_INT(a[0].kind, PACE_ACT_START);
	T_EQ_U64(a[0].start, 256 * KIB);
	T_EQ_U64(a[0].end, 1 * MIB);
	pace_free(p);
}

/* A stream far ahead of its reader is to be held; held, it is no stall;
 * once the reader comes near it goes on; a read that waits lets it go on
 * at once. */
static void test_stream_hold(void)
{
	struct pace_config c;
	struct pace *p;
	uint32_t b, s, r, w;
	struct pace_action a[8];
	uint64_t now = 0;

	small_cfg(&c);
	c.stall_ns = 2 * SEC;
	T_EQ_INT(pace_new(&c, &p), 0);
	T_EQ_INT(pace_blob_add(p, 64 * MIB, &b), 0);
	T_EQ_INT(pace_source_add(p, b, PACE_CAPS_NO_RANGES, &s), 0);
	T_EQ_INT(pace_reader_open(p, b, 0, &r), 0);
	T_EQ_INT(pace_reader_read(p, r, 0, 4 * KIB, 0), 0);
	T_EQ_INT(pace_wait_begin(p, r, 0, 4 * KIB, 0, &w), 0);
	T_EQ_INT(pace_poll(p, 0, a, 8), 1);
	T_ASSERT(!pace_lane_hold_wanted(p, a[0].lane)); /* a read waits */
	now += 10 * MS;
	T_EQ_INT(pace_on_data(p, a[0].lane, 0, 12 * MIB, now), 0);
	pace_wait_end(p, w);
	T_ASSERT(pace_lane_hold_wanted(p, a[0].lane));
	T_EQ_INT(pace_lane_hold(p, a[0].lane, true, now), 1);
	T_EQ_INT(pace_lane_hold(p, a[0].lane, true, now), 0);
	/* Held past the stall time: no CANCEL. */
	now += 5 * SEC;
	T_EQ_INT(pace_poll(p, now, a + 1, 7), 0);
	/* Its reader comes within half the lead: it goes on. */
	T_EQ_INT(pace_reader_read(p, r, 8 * MIB, 4 * KIB, now), 0);
	T_ASSERT(!pace_lane_hold_wanted(p, a[0].lane));
	T_EQ_INT(pace_lane_hold(p, a[0].lane, false, now), 1);
	pace_free(p);
}

/* Under a cache budget (stream_keep), a stream is held once it runs that
 * far past its slowest reader's cursor, however wide the readers'
 * windows, and goes on under half of it; without one, only the lead past
 * the windows holds it. */
static void test_stream_keep(void)
{
	struct pace_config c;
	struct pace *p;
	uint32_t b, s, r, r2, w;
	struct pace_action a[8];
	uint64_t now = 0;

	small_cfg(&c);
	c.stream_keep = 4 * MIB;
	c.window_max = 64 * MIB;
	T_EQ_INT(pace_new(&c, &p), 0);
	T_EQ_INT(pace_blob_add(p, 64 * MIB, &b), 0);
	T_EQ_INT(pace_source_add(p, b, PACE_CAPS_NO_RANGES, &s), 0);
	T_EQ_INT(pace_reader_open(p, b, 0, &r), 0);
	T_EQ_INT(pace_reader_open(p, b, 0, &r2), 0);
	T_EQ_INT(pace_reader_read(p, r, 0, 4 * KIB, 0), 0);
	T_EQ_INT(pace_wait_begin(p, r, 0, 4 * KIB, 0, &w), 0);
	T_EQ_INT(pace_poll(p, 0, a, 8), 1);
	now += 10 * MS;
	T_EQ_INT(pace_on_data(p, a[0].lane, 0, 3 * MIB, now), 0);
	pace_wait_end(p, w);
	T_ASSERT(!pace_lane_hold_wanted(p, a[0].lane)); /* 3 MiB ahead */
	T_EQ_INT(pace_on_data(p, a[0].lane, 3 * MIB, 2 * MIB, now), 0);
	T_ASSERT(pace_lane_hold_wanted(p, a[0].lane)); /* 5 MiB ahead */
	T_EQ_INT(pace_lane_hold(p, a[0].lane, true, now), 1);
	/* One reader comes on; the other, near 0, keeps it held. */
	T_EQ_INT(pace_reader_read(p, r, 3 * MIB, 4 * KIB, now), 0);
	T_ASSERT(pace_lane_hold_wanted(p, a[0].lane));
	T_EQ_INT(pace_reader_read(p, r2, 2 * MIB, 4 * KIB, now), 0);
	T_ASSERT(pace_lane_hold_wanted(p, a[0].lane)); /* 3 MiB - 4 KiB */
	T_EQ_INT(pace_reader_read(p, r2, 3 * MIB, 4 * KIB, now), 0);
	T_ASSERT(!pace_lane_hold_wanted(p, a[0].lane)); /* under half */
	pace_free(p);
}

/* A read that waits for bytes forgotten behind a running stream (the
 * caller's cache evicted them) has the stream cancelled, not faulted,
 * and a new one started from the first missing byte at once. */
static void test_stream_behind(void)
{
	struct pace_config c;
	struct pace *p;
	uint32_t b, s, r, w;
	struct pace_action a[8];
	uint64_t now = 0;
	uint32_t lane;

	small_cfg(&c);
	T_EQ_INT(pace_new(&c, &p), 0);
	T_EQ_INT(pace_blob_add(p, 64 * MIB, &b), 0);
	T_EQ_INT(pace_source_add(p, b, PACE_CAPS_NO_RANGES, &s), 0);
	T_EQ_INT(pace_reader_open(p, b, 0, &r), 0);
	T_EQ_INT(pace_reader_read(p, r, 0, 4 * KIB, 0), 0);
	T_EQ_INT(pace_wait_begin(p, r, 0, 4 * KIB, 0, &w), 0);
	T_EQ_INT(pace_poll(p, 0, a, 8), 1);
	lane = a[0].lane;
	now += 10 * MS;
	T_EQ_INT(pace_on_data(p, lane, 0, 8 * MIB, now), 0);
	pace_wait_end(p, w);
	/* Bytes held behind the stream: a read of them waits for nothing. */
	T_EQ_INT(pace_blob_forget(p, b, 0, 4 * MIB), 0);
	T_EQ_INT(pace_poll(p, now, a, 8), 0);
	T_EQ_INT(pace_reader_read(p, r, 1 * MIB, 4 * KIB, now), 0);
	T_EQ_INT(pace_wait_begin(p, r, 1 * MIB, 4 * KIB, now, &w), 0);
	T_EQ_INT(pace_poll(p, now, a, 8), 1);
	T_EQ_INT(a[0].kind, PACE_ACT_CANCEL);
	T_EQ_INT(a[0].lane, lane);
	T_ASSERT(!a[0].faulted);
	T_EQ_INT(pace_on_done(p, lane, PACE_OUT_CANCELLED, 0, now), 0);
	T_EQ_INT(pace_poll(p, now, a, 8), 1);
	T_EQ_INT(a[0].kind, PACE_ACT_START);
	T_EQ_U64(a[0].start, 0);
	T_EQ_U64(a[0].end, 64 * MIB);
	pace_free(p);
}

/* Finds the action of kind k in the last poll, or NULL. */
static const struct pace_action *fix_find(const struct fix *f,
					  enum pace_action_kind k)
{
	for (size_t i = 0; i < f->n; i++)
		if (f->a[i].kind == k)
			return &f->a[i];
	return NULL;
}

/* One lane, 256 KiB first read-ahead requests. */
static void queue_cfg(struct pace_config *c)
{
	small_cfg(c);
	c->max_lanes = 1;
	c->lanes_per_source = 1;
	c->max_request = 1 * MIB;
	c->window_min = 1 * MIB;
	c->window_max = 4 * MIB;
}

/* Feeds the START st as 4 KiB after 10 ms (latency), then 64 KiB every
 * 250 ms three times (256 KB/s); returns the next offset. */
static uint64_t queue_feed(struct fix *f, const struct pace_action *st)
{
	uint64_t off = st->start;

	f->now += 10 * MS;
	pace_on_data(f->p, st->lane, off, 4 * KIB, f->now);
	off += 4 * KIB;
	for (int i = 0; i < 3; i++) {
		f->now += 250 * MS;
		pace_on_data(f->p, st->lane, off, 64 * KIB, f->now);
		off += 64 * KIB;
	}
	return off;
}

/* A lane near the end of its request queues the next range of its
 * reader's window on the same source; when the request ends whole the
 * queued range is started on that lane; a fault drops it. */
static void test_queue_next(void)
{
	struct pace_config c;
	struct fix f;
	const struct pace_action *q;
	struct pace_action st, qa;
	struct pace_lane_info li;
	uint64_t off;

	queue_cfg(&c);
	T_EQ_INT(fix_init(&f, &c, 8 * MIB), 0);
	pace_reader_read(f.p, f.rd, 0, 4 * KIB, f.now);
	T_EQ_INT(fix_poll(&f), 1);
	st = f.a[0];
	T_EQ_INT(st.kind, PACE_ACT_START);
	/* Bytes at 1 MB/s for a while: the rate is known, the request not
	 * near its end yet, so nothing is queued. */
	T_EQ_U64(st.end - st.start, 256 * KIB);
	off = queue_feed(&f, &st);
	T_EQ_INT(fix_poll(&f), 0); /* 56 KiB left: 220 ms */
	/* Close to the end: the next range is queued, owned, not started. */
	pace_on_data(f.p, st.lane, off, st.end - off - 16 * KIB, f.now);
	off = st.end - 16 * KIB;
	T_EQ_INT(fix_poll(&f), 1);
	q = fix_find(&f, PACE_ACT_QUEUE);
	T_ASSERT(q != NULL);
	qa = *q;
	T_EQ_INT(qa.lane, st.lane);
	T_EQ_INT(qa.source, st.source);
	T_EQ_U64(qa.start, st.end);
	T_EQ_INT(pace_lane_info(f.p, st.lane, &li), 0);
	T_ASSERT(li.queued);
	T_EQ_U64(li.qstart, qa.start);
	T_EQ_U64(li.qend, qa.end);
	T_EQ_INT(fix_poll(&f), 0); /* one queued range per lane */
	/* The open request ends whole: the queued range starts. */
	pace_on_data(f.p, st.lane, off, st.end - off, f.now);
	T_EQ_INT(pace_on_done(f.p, st.lane, PACE_OUT_OK, 0, f.now), 0);
	T_EQ_INT(fix_poll(&f), 1);
	T_EQ_INT(f.a[0].kind, PACE_ACT_START);
	T_EQ_INT(f.a[0].lane, qa.lane);
	T_EQ_U64(f.a[0].start, qa.start);
	T_EQ_U64(f.a[0].end, qa.end);
	pace_free(f.p);
}

/* A queued range dies with a fault of the open request, and is dropped at
 * promotion when the reader has seeked away. */
static void test_queue_dropped(void)
{
	struct pace_config c;
	struct fix f;
	struct pace_action st;
	struct pace_lane_info li;

	for (int variant = 0; variant < 2; variant++) {
		uint64_t off;

		queue_cfg(&c);
		T_EQ_INT(fix_init(&f, &c, 8 * MIB), 0);
		pace_reader_read(f.p, f.rd, 0, 4 * KIB, f.now);
		T_EQ_INT(fix_poll(&f), 1);
		st = f.a[0];
		off = queue_feed(&f, &st);
		pace_on_data(f.p, st.lane, off, st.end - off - 16 * KIB, f.now);
		T_EQ_INT(fix_poll(&f), 1);
		T_ASSERT(fix_find(&f, PACE_ACT_QUEUE) != NULL);
		if (variant == 0) {
			T_EQ_INT(pace_on_done(f.p, st.lane, PACE_OUT_TRANSIENT,
					      0, f.now),
				 0);
			f.now += 10 * SEC; /* past the backoff */
			T_EQ_INT(fix_poll(&f), 1);
			/* The remainder of the faulted request comes first,
			 * not the dropped queued range. */
			T_EQ_U64(f.a[0].start, st.end - 16 * KIB);
		} else {
			pace_on_data(f.p, st.lane, st.end - 16 * KIB, 16 * KIB,
				     f.now);
			/* A seek far away: the queued range is not wanted. */
			pace_reader_read(f.p, f.rd, 7 * MIB, 4 * KIB, f.now);
			T_EQ_INT(pace_on_done(f.p, st.lane, PACE_OUT_OK, 0,
					      f.now),
				 0);
			T_EQ_INT(fix_poll(&f), 0);
			T_EQ_INT(pace_lane_info(f.p, st.lane, &li), 0);
			T_ASSERT(!li.busy);
		}
		pace_free(f.p);
	}
}

/* Retry jitter: a backoff lasts between d and d + jitter_pct % of d,
 * drawn from the seeded generator: the same seed gives the same holds,
 * another seed other holds. */
static void jitter_holds(uint64_t seed, uint64_t out[4])
{
	struct pace_config c;
	struct fix f;
	uint32_t w;

	small_cfg(&c);
	c.backoff_ns = 100 * MS;
	c.backoff_max_ns = 100 * MS;
	c.jitter_pct = 50;
	c.seed = seed;
	if (fix_init(&f, &c, 1 * MIB))
		return;
	pace_wait_begin(f.p, f.rd, 0, 4 * KIB, f.now, &w);
	for (int i = 0; i < 4; i++) {
		fix_poll(&f);
		pace_on_done(f.p, f.a[0].lane, PACE_OUT_TRANSIENT, 0, f.now);
		out[i] = pace_next_wake(f.p, f.now) - f.now;
		f.now += out[i];
	}
	pace_free(f.p);
}

static void test_retry_jitter(void)
{
	uint64_t a[4] = {0}, b[4] = {0}, c[4] = {0};
	bool differ = false, spread = false;

	jitter_holds(1, a);
	jitter_holds(1, b);
	jitter_holds(2, c);
	for (int i = 0; i < 4; i++) {
		T_ASSERT(a[i] >= 100 * MS && a[i] <= 150 * MS);
		T_EQ_U64(a[i], b[i]);
		differ |= a[i] != c[i];
		spread |= a[i] != a[0];
	}
	T_ASSERT(differ);
	T_ASSERT(spread);
}

/* Throttling: when every open request gets 429, the source is held for
 * Retry-After and comes back with one lane; later requests ending whole
 * add one lane back per second. */
static void test_throttle_aimd(void)
{
	struct pace_config c;
	struct fix f;
	struct pace_stats st;
	uint64_t cur = 0;
	size_t busy;

	small_cfg(&c);
	c.max_lanes = 8;
	c.lanes_per_source = 8;
	c.window_min = 8 * MIB;
	c.window_max = 8 * MIB;
	T_EQ_INT(fix_init(&f, &c, 64 * MIB), 0);
	pace_reader_read(f.p, f.rd, 0, 4 * KIB, f.now);
	T_EQ_INT(fix_poll(&f), 4); /* one request per reader per round */
	T_EQ_INT(fix_poll(&f), 4);
	T_EQ_U64(pace_source_lane_cap(f.p, f.src), 8);
	/* Every open request gets 429 with Retry-After 1 s. */
	for (uint32_t i = 0; i < 8; i++)
		T_EQ_INT(pace_on_done(f.p, i, PACE_OUT_THROTTLED, 1 * SEC,
				      f.now),
			 0);
	T_EQ_U64(pace_source_lane_cap(f.p, f.src), 1);
	pace_stats_get(f.p, &st);
	T_ASSERT(st.throttle_cuts >= 1);
	T_EQ_INT(fix_poll(&f), 0); /* held for Retry-After */
	f.now += 1 * SEC;
	busy = fix_poll(&f);
	busy += fix_poll(&f);
	T_EQ_U64(busy, 1);
	/* Serve them; one lane comes back per second of whole requests. */
	for (int round = 0; round < 6; round++) {
		f.now += 1 * SEC;
		for (uint32_t i = 0; i < 8; i++) {
			struct pace_lane_info li;
			struct pace_action a;

			pace_lane_info(f.p, i, &li);
			if (!li.busy)
				continue;
			a.lane = i;
			a.start = li.frontier;
			a.end = li.end;
			fix_serve(&f, &a);
		}
		cur += 1 * MIB;
		pace_reader_read(f.p, f.rd, cur, 4 * KIB, f.now);
		fix_poll(&f);
		fix_poll(&f);
	}
	T_ASSERT(pace_source_lane_cap(f.p, f.src) > 4);
	T_ASSERT(pace_source_lane_cap(f.p, f.src) <= 8);
	pace_free(f.p);
}

/* An origin that serves one transfer at a time and answers 503 beyond:
 * the refusals bring the lane cap down to the one lane that is served
 * within that round trip, the served lane is never stopped, its next
 * request starts at once (no hold), and the cap stays put until
 * Retry-After has passed. */
static void test_throttle_converges(void)
{
	struct pace_config c;
	struct fix f;
	struct pace_lane_info li;
	struct pace_action a;
	size_t n;

	small_cfg(&c);
	c.max_lanes = 8;
	c.lanes_per_source = 8;
	c.window_min = 8 * MIB;
	c.window_max = 8 * MIB;
	T_EQ_INT(fix_init(&f, &c, 64 * MIB), 0);
	pace_reader_read(f.p, f.rd, 0, 4 * KIB, f.now);
	fix_poll(&f);
	fix_poll(&f);
	/* Lane 0 is served; lanes 1..7 get 503 with Retry-After 1 s. */
	pace_on_data(f.p, 0, 0, 4 * KIB, f.now);
	for (uint32_t i = 1; i < 8; i++)
		T_EQ_INT(pace_on_done(f.p, i, PACE_OUT_THROTTLED, 1 * SEC,
				      f.now),
			 0);
	T_EQ_U64(pace_source_lane_cap(f.p, f.src), 1);
	T_EQ_INT(fix_poll(&f), 0); /* at its cap */
	/* Lane 0 ends whole: the next range starts at once, on one lane. */
	pace_lane_info(f.p, 0, &li);
	a.lane = 0;
	a.start = li.frontier;
	a.end = li.end;
	f.now += 10 * MS;
	fix_serve(&f, &a);
	n = fix_poll(&f);
	T_EQ_U64(n, 1);
	T_EQ_INT(f.a[0].kind, PACE_ACT_START);
	T_EQ_U64(pace_source_lane_cap(f.p, f.src), 1);
	/* Past Retry-After, whole requests raise the cap again. */
	f.now += 2 * SEC;
	pace_lane_info(f.p, f.a[0].lane, &li);
	a.lane = f.a[0].lane;
	a.start = li.frontier;
	a.end = li.end;
	fix_serve(&f, &a);
	T_EQ_U64(pace_source_lane_cap(f.p, f.src), 2);
	pace_free(f.p);
}

/* The byte budget: read-ahead shrinks to fit what is left, and a read
 * that waits makes read-ahead yield when the budget is spent. */
static void test_budget(void)
{
	struct pace_config c;
	struct fix f;
	uint32_t w;
	struct pace_stats st;
	const char *field = NULL;

	small_cfg(&c);
	c.budget_bytes = 32 * KIB;
	T_EQ_INT(pace_config_check(&c, &field), -EINVAL);
	T_EQ_STR(field, "budget_bytes");
	c.budget_bytes = 96 * KIB;
	T_EQ_INT(fix_init(&f, &c, 8 * MIB), 0);
	pace_reader_read(f.p, f.rd, 0, 4 * KIB, f.now);
	fix_poll(&f);
	T_ASSERT(f.n >= 1);
	T_ASSERT(pace_inflight(f.p) <= 96 * KIB);
	/* Fill the budget with read-ahead, then a read waits far away. */
	T_EQ_INT(pace_wait_begin(f.p, f.rd, 6 * MIB, 4 * KIB, f.now, &w), 0);
	fix_poll(&f);
	T_ASSERT(pace_inflight(f.p) <= 96 * KIB);
	for (int i = 0;
	     i < 4 && !pace_is_held(f.p, f.blob, 6 * MIB, 6 * MIB + 4 * KIB);
	     i++) {
		struct pace_action a[64];
		size_t k = f.n;

		memcpy(a, f.a, sizeof(a));
		for (size_t j = 0; j < k; j++) {
			if (a[j].kind == PACE_ACT_CANCEL)
				pace_on_done(f.p, a[j].lane, PACE_OUT_CANCELLED,
					     0, f.now);
			else if (a[j].kind == PACE_ACT_START &&
				 a[j].start >= 6 * MIB)
				fix_serve(&f, &a[j]);
		}
		fix_poll(&f);
		T_ASSERT(pace_inflight(f.p) <= 96 * KIB);
	}
	T_EQ_INT(pace_wait_state(f.p, w, f.now), 0);
	pace_stats_get(f.p, &st);
	T_ASSERT(st.inflight_max <= 96 * KIB);
	pace_free(f.p);
}

/* A 4 MiB read at the file's start, split over 4 lanes of 1 MiB; every
 * 10 ms lane 0 gets slow_len bytes and the others 80 KiB (8 MB/s). Stops
 * at the first poll that emits an action, within 150 ms; *at is when (0:
 * none came). */
static void lagging_run(struct fix *f, uint64_t slow_len, uint64_t *at)
{
	uint64_t fr[4];
	uint32_t w;

	*at = 0;
	T_EQ_INT(pace_wait_begin(f->p, f->rd, 0, 4 * MIB, f->now, &w), 0);
	T_EQ_INT(fix_poll(f), 4);
	for (uint32_t l = 0; l < 4; l++) {
		T_EQ_U64(f->a[l].start, f->a[l].lane * MIB);
		fr[f->a[l].lane] = f->a[l].start;
	}
	f->now += 20 * MS;
	for (int k = 0; k < 15; k++) {
		f->now += 10 * MS;
		for (uint32_t l = 0; l < 4; l++) {
			uint64_t len = l == 0 ? slow_len : 80 * KIB;

			pace_on_data(f->p, l, fr[l], len, f->now);
			fr[l] += len;
		}
		if (fix_poll(f) > 0) {
			*at = f->now;
			return;
		}
	}
}

/* A read that waits on a lane far slower than its source's fastest (a
 * slow connection beside fast ones of its origin: a small send buffer
 * waiting on late ACKs, docs/pacing.md, "Lanes that crawl beside fast
 * ones") cuts it at its frontier, and the rest goes to the next lane
 * that frees up, rather than the reader moving at that lane's pace;
 * lanes at one rate are left alone (a shaping cap slows them all). */
static void test_lagging_cut(void)
{
	struct pace_config c;
	struct fix f;
	uint64_t at, t0;

	small_cfg(&c);
	c.max_request = 1 * MIB;
	c.window_max = 4 * MIB;
	T_EQ_INT(fix_init(&f, &c, 16 * MIB), 0);
	t0 = f.now;
	lagging_run(&f, 12 * KIB, &at);
	T_EQ_INT(f.n, 1);
	T_EQ_INT(f.a[0].kind, PACE_ACT_SET_END);
	T_EQ_INT(f.a[0].lane, 0);
	/* Once lane 0's rate spans FAST_MIN_NS from its first byte. */
	T_EQ_U64(at - t0, 130 * MS);
	T_ASSERT(f.a[0].end >= 11 * 12 * KIB && f.a[0].end < 1 * MIB);
	pace_free(f.p);

	T_EQ_INT(fix_init(&f, &c, 16 * MIB), 0);
	lagging_run(&f, 80 * KIB, &at);
	T_EQ_U64(at, 0);
	pace_free(f.p);
}

/* cold_samples: a read of `len` at 1 MiB, split over the lanes while one
 * connection's rate is unknown; each piece answers in 1 ms, its first
 * 4 KiB then, the rest 10 us later. */
static void cold_samples(struct fix *f, uint64_t len)
{
	uint32_t w;
	size_t n;

	T_EQ_INT(pace_reader_read(f->p, f->rd, 1 * MIB, len, f->now), 0);
	T_EQ_INT(pace_wait_begin(f->p, f->rd, 1 * MIB, len, f->now, &w), 0);
	n = fix_poll(f);
	T_EQ_INT(n, 4); /* a quarter on each lane */
	f->now += 1 * MS;
	for (size_t i = 0; i < n; i++)
		pace_on_data(f->p, f->a[i].lane, f->a[i].start, 4 * KIB,
			     f->now);
	f->now += 10000;
	for (size_t i = 0; i < n; i++) {
		pace_on_data(f->p, f->a[i].lane, f->a[i].start + 4 * KIB,
			     f->a[i].end - f->a[i].start - 4 * KIB, f->now);
		pace_on_done(f->p, f->a[i].lane, PACE_OUT_OK, 0, f->now);
	}
	T_EQ_INT(pace_wait_state(f->p, w, f->now), 0);
	pace_wait_end(f->p, w);
	f->now += 1 * MS;
}

/* A read at a cold position is split over the lanes while one
 * connection's rate is unknown; once short requests have shown that a
 * round trip carries more than the read (a near origin), the next such
 * read is one request, never longer than the read. The short requests'
 * rate is trusted to twice the bytes they carried: requests of 16 KiB
 * that came at once (an origin that sends a response's first bytes at
 * once and paces the rest looks the same) leave a 64 KiB read split. */
static void test_cold_split_short_rate(void)
{
	struct pace_config c;
	struct fix f;
	uint32_t w;

	small_cfg(&c);
	c.fill_max = 0; /* its reads end near the file's end: no tail here */
	T_EQ_INT(fix_init(&f, &c, 4 * MIB), 0);
	cold_samples(&f, 256 * KIB); /* 64 KiB on each lane */
	T_EQ_INT(pace_reader_read(f.p, f.rd, 3 * MIB, 64 * KIB, f.now), 0);
	T_EQ_INT(pace_wait_begin(f.p, f.rd, 3 * MIB, 64 * KIB, f.now, &w), 0);
	T_EQ_INT(fix_poll(&f), 1);
	T_EQ_INT(f.a[0].kind, PACE_ACT_START);
	T_EQ_U64(f.a[0].start, 3 * MIB);
	T_EQ_U64(f.a[0].end, 3 * MIB + 64 * KIB);
	pace_wait_end(f.p, w);
	pace_free(f.p);

	T_EQ_INT(fix_init(&f, &c, 4 * MIB), 0);
	cold_samples(&f, 64 * KIB); /* 16 KiB on each lane */
	T_EQ_INT(pace_reader_read(f.p, f.rd, 3 * MIB, 64 * KIB, f.now), 0);
	T_EQ_INT(pace_wait_begin(f.p, f.rd, 3 * MIB, 64 * KIB, f.now, &w), 0);
	T_EQ_INT(fix_poll(&f), 3); /* 12 KiB measured: 24 KiB pieces */
	T_EQ_U64(f.a[0].end - f.a[0].start, 24 * KIB);
	pace_wait_end(f.p, w);
	pace_free(f.p);
}

/* Lanes are shared between readers, whatever file they read: one reader
 * of a file its origin sends at a trickle holds every lane of the origin
 * with its waiting read; a read of another file of the origin has the
 * lane whose bytes that reader needs last handed over, ended at what is
 * on its wire (not at the chunk boundary seconds away), and takes it
 * when it ends. The slow reader keeps its other lanes. */
static void test_fair_take_back(void)
{
	struct pace_config c;
	struct fix f;
	uint32_t fblob, fsrc, frd, w, w2, victim = PACE_NONE;
	uint64_t vstart = 0, vend = 0, vfront = 0;
	const struct pace_action *a;

	small_cfg(&c);
	c.max_groups = 1;
	T_EQ_INT(fix_init(&f, &c, 4 * MIB), 0);
	T_EQ_INT(pace_blob_add(f.p, 4 * MIB, &fblob), 0);
	T_EQ_INT(pace_source_add(f.p, fblob, PACE_CAPS_FULL, &fsrc), 0);
	T_EQ_INT(pace_source_set_group(f.p, f.src, 0), 0);
	T_EQ_INT(pace_source_set_group(f.p, fsrc, 0), 0);
	T_EQ_INT(pace_reader_open(f.p, fblob, f.now, &frd), 0);
	/* A cold 64 KiB read of the slow file, split over the 4 lanes. */
	T_EQ_INT(pace_reader_read(f.p, f.rd, 1 * MIB, 64 * KIB, f.now), 0);
	T_EQ_INT(pace_wait_begin(f.p, f.rd, 1 * MIB, 64 * KIB, f.now, &w), 0);
	T_EQ_INT(fix_poll(&f), 4);
	/* 800 B/s on each for a second: rates measured, seconds from the
	 * end of their 4 KiB chunk. */
	for (int t = 0; t < 10; t++) {
		f.now += 100 * MS;
		for (size_t i = 0; i < 4; i++)
			pace_on_data(f.p, f.a[i].lane,
				     f.a[i].start + (uint64_t)t * 80, 80,
				     f.now);
	}
	for (size_t i = 0; i < 4; i++)
		if (victim == PACE_NONE || f.a[i].start > vstart) {
			victim = f.a[i].lane;
			vstart = f.a[i].start;
			vend = f.a[i].end;
		}
	vfront = vstart + 800;
	/* A read of the other file: no lane idle, the origin at its cap. */
	T_EQ_INT(pace_reader_read(f.p, frd, 0, 16 * KIB, f.now), 0);
	T_EQ_INT(pace_wait_begin(f.p, frd, 0, 16 * KIB, f.now, &w2), 0);
	T_EQ_INT(fix_poll(&f), 1);
	a = fix_find(&f, PACE_ACT_SET_END);
	T_ASSERT(a != NULL);
	T_EQ_INT(a->lane, victim);
	T_ASSERT(a->end > vfront);
	T_ASSERT(a->end < vfront + 1 * KIB); /* its wire, not the chunk */
	T_ASSERT(a->end < vend);
	/* Once there, the lane goes to the other file's read. */
	pace_on_data(f.p, victim, vfront, a->end - vfront, f.now);
	T_EQ_INT(pace_on_done(f.p, victim, PACE_OUT_OK, 0, f.now), 0);
	T_EQ_INT(fix_poll(&f), 1);
	T_EQ_INT(f.a[0].kind, PACE_ACT_START);
	T_EQ_INT(f.a[0].blob, fblob);
	T_EQ_U64(f.a[0].start, 0);
	pace_wait_end(f.p, w);
	pace_wait_end(f.p, w2);
	pace_free(f.p);
}

/* A lone refusal just after the source's last transfer is retried at
 * once (that transfer may still count at the origin); a second one before
 * a byte comes means the origin refuses this client: the source is held
 * for Retry-After, not asked again at once. */
static void test_throttle_lone_twice(void)
{
	struct pace_config c;
	struct fix f;
	uint32_t lane, w;

	small_cfg(&c);
	c.max_lanes = 1;
	c.lanes_per_source = 1;
	T_EQ_INT(fix_init(&f, &c, 64 * MIB), 0);
	T_EQ_INT(pace_reader_read(f.p, f.rd, 500 * KIB, 4 * KIB, f.now), 0);
	T_EQ_INT(pace_wait_begin(f.p, f.rd, 500 * KIB, 4 * KIB, f.now, &w), 0);
	T_EQ_INT(fix_poll(&f), 1);
	fix_serve(&f, &f.a[0]);
	pace_wait_end(f.p, w);
	f.now += 1 * MS;
	T_EQ_INT(pace_reader_read(f.p, f.rd, 2 * MIB, 4 * KIB, f.now), 0);
	T_EQ_INT(pace_wait_begin(f.p, f.rd, 2 * MIB, 4 * KIB, f.now, &w), 0);
	T_EQ_INT(fix_poll(&f), 1);
	lane = f.a[0].lane;
	T_EQ_INT(pace_on_done(f.p, lane, PACE_OUT_THROTTLED, 1 * SEC, f.now),
		 0);
	f.now += 1 * MS;
	T_EQ_INT(fix_poll(&f), 1); /* retried at once */
	T_EQ_INT(f.a[0].kind, PACE_ACT_START);
	T_EQ_INT(pace_on_done(f.p, f.a[0].lane, PACE_OUT_THROTTLED, 1 * SEC,
			      f.now),
		 0);
	f.now += 1 * MS;
	T_EQ_INT(fix_poll(&f), 0); /* held */
	f.now += 1 * SEC;
	T_EQ_INT(fix_poll(&f), 1);
	T_EQ_INT(f.a[0].kind, PACE_ACT_START);
	pace_wait_end(f.p, w);
	pace_free(f.p);
}

/* A plan reader (pace_reader_plan): its window is set without a read,
 * its bytes come only within it, and only after a paced sequential
 * reader's read-ahead (the third kind of work after the second). */
static void test_plan_reader(void)
{
	struct pace_config c;
	struct fix f;
	uint32_t b2, s2, pr;
	bool seen_plan = false;
	int starts_a = 0;

	small_cfg(&c);
	T_EQ_INT(fix_init(&f, &c, 4 * MIB), 0);
	T_EQ_INT(pace_blob_add(f.p, 256 * KIB, &b2), 0);
	T_EQ_INT(pace_source_add(f.p, b2, PACE_CAPS_FULL, &s2), 0);
	T_EQ_INT(pace_reader_open(f.p, b2, f.now, &pr), 0);
	T_EQ_INT(pace_reader_plan(f.p, pr, 0, 96 * KIB, f.now), 0);
	T_EQ_INT(pace_reader_plan(f.p, pr, 0, 96 * KIB, f.now), -EINVAL);
	/* The sequential reader's window is open from its first read at 0. */
	T_EQ_INT(pace_reader_read(f.p, f.rd, 0, 8 * KIB, f.now), 0);
	fix_poll(&f);
	for (size_t k = 0; k < f.n; k++) {
		T_EQ_INT(f.a[k].kind, PACE_ACT_START);
		if (f.a[k].blob == b2)
			seen_plan = true;
		else
			starts_a++;
		T_ASSERT(f.a[k].blob != f.blob || !seen_plan);
	}
	T_ASSERT(starts_a > 0);
	/* Served to the end, the plan's blob is held within its window and
	 * never past it. */
	for (int i = 0; i < 50; i++) {
		for (size_t k = 0; k < f.n; k++) {
			if (f.a[k].kind != PACE_ACT_START)
				continue;
			if (f.a[k].blob == b2)
				T_ASSERT(f.a[k].end <= 96 * KIB);
			fix_serve(&f, &f.a[k]);
		}
		f.now += 10 * MS;
		fix_poll(&f);
	}
	T_ASSERT(pace_is_held(f.p, b2, 0, 96 * KIB));
	T_EQ_U64(pace_held_bytes(f.p, b2), 96 * KIB);
	pace_reader_close(f.p, pr, f.now);
	pace_free(f.p);
}

static const struct t_case cases[] = {
	{"plan_reader", test_plan_reader},
	{"ranges_basic", test_ranges_basic},
	{"ranges_random", test_ranges_random},
	{"config", test_config},
	{"demand_first", test_demand_first},
	{"read_one_call", test_read_one_call},
	{"read_step", test_read_step},
	{"readahead_window", test_readahead_window},
	{"jump_after_stream", test_jump_after_stream},
	{"window_first_poll", test_window_first_poll},
	{"first_hold_expires", test_first_hold_expires},
	{"no_refetch_resume", test_no_refetch_resume},
	{"on_data_absolute", test_on_data_absolute},
	{"backoff_grows", test_backoff_grows},
	{"throttled_retry_after", test_throttled_retry_after},
	{"gone_excludes_then_eio", test_gone_excludes_then_eio},
	{"origin_down_fails_early", test_origin_down_fails_early},
	{"local_not_blamed", test_local_not_blamed},
	{"retry_after_capped", test_retry_after_capped},
	{"deadline", test_deadline},
	{"stall_reclaim", test_stall_reclaim},
	{"stall_routed", test_stall_routed},
	{"collapse_routed", test_collapse_routed},
	{"demand_yield", test_demand_yield},
	{"seek_yields", test_seek_yields},
	{"capacity", test_capacity},
	{"blob_end_clamp", test_blob_end_clamp},
	{"no_ranges_single_stream", test_no_ranges_single_stream},
	{"no_ranges_far_read_and_restart", test_no_ranges_far_read_and_restart},
	{"stream_hold", test_stream_hold},
	{"stream_keep", test_stream_keep},
	{"stream_behind", test_stream_behind},
	{"queue_next", test_queue_next},
	{"queue_dropped", test_queue_dropped},
	{"retry_jitter", test_retry_jitter},
	{"throttle_aimd", test_throttle_aimd},
	{"throttle_converges", test_throttle_converges},
	{"budget", test_budget},
	{"lagging_cut", test_lagging_cut},
	{"cold_split_short_rate", test_cold_split_short_rate},
	{"throttle_lone_twice", test_throttle_lone_twice},
	{"fair_take_back", test_fair_take_back},
};

int main(int argc, char **argv)
{
	return T_RUN(argc, argv, cases);
}

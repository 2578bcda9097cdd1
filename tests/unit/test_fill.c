/* test_fill: speculative fill and the price of a round trip, driven by a
 * hand-advanced clock and a small link: every lane's bytes come 20 ms
 * after its START at 8 MB/s. */
#include "pacing/pace.h"
#include "pacing/pace_int.h" /* KIB, MIB, SEC */
#include "tests/t.h"

#include <string.h>

#define MS (1000000ull)

#define LANES 16
#define RTT (20 * MS)
#define PER_MS 8000ull /* 8 MB/s */

struct link {
	bool busy;
	uint64_t pos, end, t0;
};

struct fix {
	struct pace *p;
	uint32_t blob;	/* the file read */
	uint32_t other; /* another file of its origin: the link learnt */
	uint64_t now;
	struct link l[LANES];
	uint64_t fill_started; /* bytes of fill STARTs */
	uint64_t fill_starts;  /* fill STARTs */
};

static void cfg_far(struct pace_config *c)
{
	pace_config_default(c);
	c->max_lanes = LANES;
	c->lanes_per_source = LANES;
	c->align = 64 * KIB;
	c->min_request = 64 * KIB;
	c->window_min = 256 * KIB;
	c->kernel_piece = 128 * KIB;
	c->jitter_pct = 0;
}

static int fix_init(struct fix *f, const struct pace_config *c, uint64_t size)
{
	uint32_t src, src2;
	int rc;

	memset(f, 0, sizeof(*f));
	f->now = 1000;
	rc = pace_new(c, &f->p);
	if (rc == 0)
		rc = pace_blob_add(f->p, size, &f->blob);
	if (rc == 0)
		rc = pace_source_add(f->p, f->blob, PACE_CAPS_FULL, &src);
	if (rc == 0)
		rc = pace_blob_add(f->p, 64 * MIB, &f->other);
	if (rc == 0)
		rc = pace_source_add(f->p, f->other, PACE_CAPS_FULL, &src2);
	if (rc == 0)
		rc = pace_source_set_group(f->p, src, 0);
	if (rc == 0)
		rc = pace_source_set_group(f->p, src2, 0);
	return rc;
}

/* One millisecond of the link: the scheduler's actions carried out, then
 * the bytes of every lane that are due. */
static void step(struct fix *f)
{
	struct pace_action a[64];
	size_t n;

	do {
		n = pace_poll(f->p, f->now, a, 64);
		for (size_t i = 0; i < n; i++) {
			struct link *l = &f->l[a[i].lane];

			if (a[i].kind == PACE_ACT_START) {
				*l = (struct link){true, a[i].start, a[i].end,
						   f->now + RTT};
				if (a[i].fill) {
					f->fill_starts++;
					f->fill_started +=
						a[i].end - a[i].start;
				}
			} else if (a[i].kind == PACE_ACT_SET_END) {
				l->end = a[i].end;
			} else if (a[i].kind == PACE_ACT_CANCEL) {
				l->busy = false;
				pace_on_done(f->p, a[i].lane,
					     PACE_OUT_CANCELLED, 0, f->now);
			}
			/* QUEUE is advisory: its START comes later. */
		}
	} while (n == 64);
	f->now += MS;
	for (uint32_t i = 0; i < LANES; i++) {
		struct link *l = &f->l[i];
		uint64_t k;

		if (!l->busy || f->now < l->t0)
			continue;
		k = l->end - l->pos < PER_MS ? l->end - l->pos : PER_MS;
		if (k)
			pace_on_data(f->p, i, l->pos, k, f->now);
		l->pos += k;
		if (l->pos >= l->end) {
			l->busy = false;
			pace_on_done(f->p, i, PACE_OUT_OK, 0, f->now);
		}
	}
}

/* Reader rd reads [off, off + len) and waits for it; the milliseconds it
 * waited (0: every byte was held). */
static uint64_t rd_read(struct fix *f, uint32_t rd, uint64_t off, uint64_t len)
{
	struct pace_read_result r;
	struct pace_step s;
	uint64_t t0 = f->now;

	if (pace_read(f->p, rd, off, len, true, f->now, &r) != 0)
		return UINT64_MAX;
	s = r.step;
	while (s.what == PACE_DO_WAIT) {
		step(f);
		if (pace_read_step(f->p, rd, off, len, s.wait, f->now, &s))
			return UINT64_MAX;
		if (f->now - t0 > 10 * SEC)
			return UINT64_MAX;
	}
	return s.what == PACE_DO_COPY ? (f->now - t0) / MS : UINT64_MAX;
}

static void idle(struct fix *f, uint64_t ms)
{
	for (uint64_t i = 0; i < ms; i++)
		step(f);
}

/* The link's rate and round trip, measured: a reader of another file of
 * the origin streams 4 MiB of it, then closes. */
static void learn_link(struct fix *f)
{
	uint32_t rd;

	T_EQ_INT(pace_reader_open(f->p, f->other, f->now, &rd), 0);
	for (uint64_t off = 0; off < 4 * MIB; off += 256 * KIB)
		T_ASSERT(rd_read(f, rd, off, 256 * KIB) != UINT64_MAX);
	pace_reader_close(f->p, rd, f->now);
	idle(f, 100);
}

/* After a few scattered reads of a small file, reads near them find
 * their bytes held (128 KiB on either side): the fill fetched the
 * neighbourhoods; with speculation off, each waits a round trip. */
static void test_neighbourhood(void)
{
	static const uint64_t first[] = {600 * KIB, 1400 * KIB, 2200 * KIB,
					 3000 * KIB};
	struct pace_config c;

	for (int on = 1; on >= 0; on--) {
		struct fix f;
		uint32_t rd;
		uint64_t waited = 0;

		cfg_far(&c);
		c.fill_max = on ? 64 * MIB : 0;
		T_EQ_INT(fix_init(&f, &c, 4 * MIB), 0);
		learn_link(&f);
		T_EQ_INT(pace_reader_open(f.p, f.blob, f.now, &rd), 0);
		for (int i = 0; i < 4; i++)
			T_ASSERT(rd_read(&f, rd, first[i], 4 * KIB) >= 20);
		idle(&f, 100);
		for (int i = 0; i < 8; i++)
			waited +=
				rd_read(&f, rd,
					first[i / 2] + (i % 2 ? 128 * KIB : 0) -
						(i % 2 ? 0 : 128 * KIB),
					4 * KIB);
		if (on) {
			T_EQ_U64(waited, 0);
			T_ASSERT(f.fill_starts > 0);
		} else {
			T_ASSERT(waited >= 8 * 20);
			T_EQ_U64(f.fill_starts, 0);
		}
		pace_free(f.p);
	}
}

/* A uniformly random reader of a huge file learns that speculation does
 * not pay: 64 random 4 KiB reads of 1 GiB pull at most 16 MiB of it, and
 * the last 32 ask for little. */
static void test_random_learns(void)
{
	struct pace_config c;
	struct pace_stats st1, st2;
	uint64_t x = 88172645463325252ull;
	struct fix f;
	uint32_t rd;

	cfg_far(&c);
	T_EQ_INT(fix_init(&f, &c, 1024 * MIB), 0);
	learn_link(&f);
	T_EQ_INT(pace_reader_open(f.p, f.blob, f.now, &rd), 0);
	for (int i = 0; i < 64; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		if (i == 32)
			pace_stats_get(f.p, &st1);
		T_ASSERT(rd_read(&f, rd, (x % (256 * 1024)) * 4 * KIB,
				 4 * KIB) != UINT64_MAX);
	}
	idle(&f, 1200);
	pace_stats_get(f.p, &st2);
	T_ASSERT(pace_held_bytes(f.p, f.blob) <= 16 * MIB);
	T_ASSERT(st2.fill_bytes - st1.fill_bytes <= 2 * MIB);
	T_ASSERT(st2.fill_read <= st2.fill_bytes);
	pace_free(f.p);
}

/* A cold read of another reader takes its lanes back from the fill at
 * once: 4 MiB in about a round trip plus its bytes over every lane. The
 * scattered reader's gaps differ: at equal gaps its next runs are
 * fetched as a stride's (fill.c), which this does not measure. */
static void test_yields(void)
{
	struct pace_config c;
	struct fix f;
	uint32_t a, b;
	uint64_t ms;

	cfg_far(&c);
	T_EQ_INT(fix_init(&f, &c, 48 * MIB), 0);
	learn_link(&f);
	T_EQ_INT(pace_reader_open(f.p, f.blob, f.now, &a), 0);
	T_EQ_INT(pace_reader_open(f.p, f.blob, f.now, &b), 0);
	for (int i = 0; i < 6; i++)
		T_ASSERT(rd_read(&f, a,
				 (uint64_t)i * 3 * MIB + (i % 3) * 300 * KIB,
				 4 * KIB) != UINT64_MAX);
	T_ASSERT(f.fill_starts > 0);
	ms = rd_read(&f, b, 24 * MIB, 4 * MIB);
	/* 20 ms, then 4 MiB over 16 lanes of 8 MB/s: 33 ms. */
	T_ASSERT(ms <= 2 * 20 + 33 + 20);
	pace_free(f.p);
}

/* The fill stops when its reader stops: a second after its last read no
 * fill starts, though its neighbourhood is not all held. */
static void test_stops(void)
{
	struct pace_config c;
	struct fix f;
	uint32_t rd;
	uint64_t n;

	cfg_far(&c);
	T_EQ_INT(fix_init(&f, &c, 512 * MIB), 0);
	learn_link(&f);
	T_EQ_INT(pace_reader_open(f.p, f.blob, f.now, &rd), 0);
	T_ASSERT(rd_read(&f, rd, 100 * MIB, 4 * KIB) != UINT64_MAX);
	idle(&f, 1000);
	n = f.fill_starts;
	idle(&f, 2000);
	T_EQ_U64(f.fill_starts, n);
	pace_free(f.p);
}

/* A read near a file's end fetches to the end; a reader that jumped and
 * reads on has its next bytes under way at its second read. */
static void test_tail_and_jump(void)
{
	struct pace_config c;
	struct fix f;
	uint32_t rd;
	uint64_t cur, w;

	cfg_far(&c);
	c.fill_max = 1; /* on, no file whole */
	T_EQ_INT(fix_init(&f, &c, 64 * MIB), 0);
	learn_link(&f);
	T_EQ_INT(pace_reader_open(f.p, f.blob, f.now, &rd), 0);
	T_ASSERT(rd_read(&f, rd, 64 * MIB - 200 * KIB, 4 * KIB) != UINT64_MAX);
	idle(&f, 30);
	T_ASSERT(pace_is_held(f.p, f.blob, 64 * MIB - 200 * KIB, 64 * MIB));
	T_ASSERT(rd_read(&f, rd, 20 * MIB, 64 * KIB) != UINT64_MAX);
	T_ASSERT(rd_read(&f, rd, 20 * MIB + 64 * KIB, 64 * KIB) != UINT64_MAX);
	T_EQ_INT(pace_reader_window(f.p, rd, &cur, &w), 0);
	T_ASSERT(w >= c.align);
	idle(&f, 60);
	T_EQ_U64(rd_read(&f, rd, 20 * MIB + 128 * KIB, 64 * KIB), 0);
	pace_free(f.p);
}

static const struct t_case cases[] = {
	{"neighbourhood", test_neighbourhood},
	{"random_learns", test_random_learns},
	{"yields", test_yields},
	{"stops", test_stops},
	{"tail_and_jump", test_tail_and_jump},
};

int main(int argc, char **argv)
{
	return T_RUN(argc, argv, cases);
}

/* streams: the named scenarios of sources that ignore Range
 * (PACE_CAPS_NO_RANGES) or send no length (PACE_CAPS_NO_LENGTH): one
 * whole-object stream each, alone or beside a source that honours Range.
 * The executor sends a stream's START from its start, as a real one sends
 * from byte 0 and drops the held bytes before it: the same bytes credited,
 * a restart's resend not counted. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "tests/sim/sim_int.h"

/* One stream, read sequentially as fast as bytes come: one request, the
 * connection's rate, nothing fetched twice. */
static bool judge_stream_seq(const struct scenario *sc, const struct figures *f,
			     char *note, size_t n)
{
	snprintf(note, n, "target <= 1.05 x ideal, 1 request, no overfetch");
	return f->done <= sc->ideal * 1.05 && f->requests == 1 &&
	       f->overfetch == 0;
}

/* Random reads over a stream: each waits for the stream to pass its
 * bytes; one request in all, the whole done in the stream's time. */
static bool judge_stream_random(const struct scenario *sc,
				const struct figures *f, char *note, size_t n)
{
	snprintf(note, n,
		 "target <= 1.05 x ideal, 1 request, longest wait %.1f s",
		 f->rand_max_wait);
	return f->done <= sc->ideal * 1.05 && f->requests == 1 &&
	       f->rand_max_wait <= sc->ideal * 1.05;
}

/* A stream-only source beside one that honours Range: the ranged one
 * does the work on its lanes, the stream is never started. */
static bool judge_stream_mirror(const struct scenario *sc,
				const struct figures *f, char *note, size_t n)
{
	snprintf(note, n, "target <= 1.20 x the ranged source's ideal");
	return f->done <= sc->ideal * 1.20 && f->overfetch == 0;
}

static void stream_one(const char *name, enum pace_caps caps)
{
	struct scenario sc;

	sim__base(&sc, name);
	sc.nblob = 1;
	sc.size[0] = 64 * MIB;
	sc.nsrc = 1;
	sc.src[0] = sim__src(0, 8 * MB, 0, 0.02);
	sc.src[0].caps = caps;
	sc.nrd = 1;
	sc.rd[0] = sim__seq(0, 0, 128 * KIB);
	sc.ideal = 0.02 + (double)sc.size[0] / (8 * MB);
	sim__named(&sc, judge_stream_seq);
}

static void stream_random(void)
{
	struct scenario sc;

	sim__base(&sc, "stream_random");
	sc.nblob = 1;
	sc.size[0] = 64 * MIB;
	sc.nsrc = 1;
	sc.src[0] = sim__src(0, 8 * MB, 0, 0.02);
	sc.src[0].caps = PACE_CAPS_NO_RANGES;
	sc.nrd = 2;
	for (int i = 0; i < 2; i++) {
		memset(&sc.rd[i], 0, sizeof(sc.rd[i]));
		sc.rd[i].kind = RD_RANDOM;
		sc.rd[i].nreads = 20;
		sc.rd[i].think = 0.002;
	}
	sc.seed = 36;
	sc.ideal = 0.02 + (double)sc.size[0] / (8 * MB);
	sim__named(&sc, judge_stream_random);
}

static void stream_mirror(void)
{
	struct scenario sc;

	sim__base(&sc, "stream_mirror");
	sc.nblob = 1;
	sc.size[0] = 64 * MIB;
	sc.nsrc = 2;
	sc.src[0] = sim__src(0, 8 * MB, 0, 0.02);
	sc.src[0].caps = PACE_CAPS_NO_RANGES;
	sc.src[1] = sim__src(0, 8 * MB, 32 * MB, 0.02);
	sc.nrd = 1;
	sc.rd[0] = sim__seq(0, 0, 128 * KIB);
	sc.ideal = (double)sc.size[0] / (32 * MB);
	sim__named(&sc, judge_stream_mirror);
}

/* A stream beside a ranged file under a byte budget: the stream, which
 * the budget cannot cut, leaves the other file its room. */
static bool judge_stream_budget(const struct scenario *sc,
				const struct figures *f, char *note, size_t n)
{
	snprintf(note, n,
		 "ranged file in %.2f s (<= 1.5 x %.2f); most in flight %.1f "
		 "MiB",
		 f->rd_done[1], sc->ideal, (double)f->inflight_max / MIB);
	return f->rd_done[1] > 0 && f->rd_done[1] <= sc->ideal * 1.5;
}

static void stream_budget(void)
{
	struct scenario sc;

	sim__base(&sc, "stream_budget");
	sc.cfg.budget_bytes = 16 * MIB;
	sc.nblob = 2;
	sc.size[0] = 64 * MIB;
	sc.size[1] = 32 * MIB;
	sc.nsrc = 2;
	sc.src[0] = sim__src(0, 8 * MB, 0, 0.02);
	sc.src[0].caps = PACE_CAPS_NO_RANGES;
	sc.src[1] = sim__src(1, 8 * MB, 32 * MB, 0.02);
	sc.nrd = 2;
	sc.rd[0] = sim__seq(0, 0, 128 * KIB);
	sc.rd[1] = sim__seq(1, 0, 128 * KIB);
	sc.ideal = (double)sc.size[1] / (32 * MB);
	sim__named(&sc, judge_stream_budget);
}

void sim__streams(void)
{
	stream_one("stream_seq", PACE_CAPS_NO_RANGES);
	stream_one("stream_nolength", PACE_CAPS_NO_LENGTH);
	stream_random();
	stream_mirror();
	stream_budget();
}

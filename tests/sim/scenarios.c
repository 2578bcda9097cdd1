/* scenarios: the simulator's named scenarios with the judge of each, the
 * randomized ones, and the table they print. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/sim/sim_int.h"

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
	rc = sim__run(sc, &f, err, sizeof(err));
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

	snprintf(note, n,
		 "detected after %.2f s (stall %.0f s); target <= "
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

	snprintf(note, n,
		 "max wait after first %.1f ms (rtt %.1f ms); "
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
	snprintf(note, n, "%d reads, largest request %" PRIu64 " KiB", reads,
		 (uint64_t)(f->max_req / KIB));
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
	snprintf(note, n,
		 "new position requested after %.1f ms, %d lanes "
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

	snprintf(note, n,
		 "bw %.1f / %.1f MB/s; random read max wait %.1f ms "
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
 * completes (sim__run() fails a read that fails). */
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
	sc->cfg.kernel_piece = 128 * KIB;
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

	snprintf(note, n,
		 "pulled - consumed %.1f MiB (<= %.1f); max wait "
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

/* Speculative fill adds what a round trip of the idle lanes is worth
 * (pacing/fill.c) around the reads and at the file's ends. */
static bool judge_zip(const struct scenario *sc, const struct figures *f,
		      char *note, size_t n)
{
	double lim = 1.5 * MIB;

	if (sc->cfg.fill_max)
		lim += sc->cfg.max_lanes * sc->src[0].conn_rate *
		       sc->src[0].latency;
	snprintf(note, n, "pulled %.2f MiB for a 1 MiB member (<= %.2f)",
		 (double)f->pulled / MIB, lim / MIB);
	return (double)f->pulled <= lim;
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
	snprintf(note, n, "%d lookups, %.2f requests each (<= 3)", f->lookups,
		 per);
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
static bool judge_seek_play(const struct scenario *sc, const struct figures *f,
			    char *note, size_t n)
{
	double lim =
		2 * (sc->src[0].latency +
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

/* The same origin holding its refusals for their Retry-After: a client
 * that retries at once only renews the hold. Converging costs one hold:
 * 32 MiB in 2 s at most, and no more than 50 refusals. */
static bool judge_one_transfer_hold(const struct scenario *sc,
				    const struct figures *f, char *note,
				    size_t n)
{
	(void)sc;
	snprintf(note, n,
		 "32 MiB in %.2f s (<= 2), %d requests answered 503 (<= 50)",
		 f->done, f->n429);
	return f->done <= 2.0 && f->n429 <= 50;
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
	/* The same origin, enforcing its Retry-After: after a 503 it refuses
	 * every request for a second, each refusal starting it again. */
	sc.name = "one_transfer_503/hold";
	sc.src[0].hold_refusals = true;
	named(&sc, judge_one_transfer_hold);
}

/* One reader, cold, of a far origin where one connection in two runs at
 * 15% of the per-connection rate (a small send buffer waiting on late
 * ACKs: docs/pacing.md, "Lanes that crawl beside fast ones", where one
 * reader of a far origin got 24.9 MB/s to 8 curl ranges' 61.4) while
 * the others run at the full rate, and a lane's next connection, after
 * a cut or a cancel, may be either: as fast as 8 whole-rate connections
 * (8 curl ranges), 0.9 x at least. Lanes as a mount's defaults (32, 16
 * per host). */
static bool judge_slow_lanes(const struct scenario *sc, const struct figures *f,
			     char *note, size_t n)
{
	snprintf(note, n, "%.1f MB/s, target >= 0.9 x 8 full connections",
		 (double)sc->size[0] / f->done / MB);
	return f->done * 0.9 <= sc->ideal;
}

static void sc_slow_lanes(void)
{
	struct scenario sc;

	far_origin(&sc, "slow_lanes", 128 * MIB);
	sc.cfg.max_lanes = 32;
	sc.cfg.lanes_per_source = 16;
	sc.src[0].slow_every = 2;
	sc.src[0].slow_frac = 0.15;
	sc.nrd = 1;
	sc.rd[0] = seq(0, 0, 128 * KIB);
	sc.ideal = (double)sc.size[0] / (8 * sc.src[0].conn_rate);
	named(&sc, judge_slow_lanes);
}

/* A new reader reads 1 MiB at three cold positions of a 128 MiB file, one
 * read each; the kernel hands each over as 128 KiB pieces, each asked once
 * the one before it is there. */
#define COLD_PIECES 8
static struct rd_step cold_steps[3 * COLD_PIECES];

static bool judge_cold_1m(const struct scenario *sc, const struct figures *f,
			  char *note, size_t n)
{
	double lim =
		2 * (sc->src[0].latency +
		     (double)MIB / (sc->cfg.max_lanes * sc->src[0].conn_rate));
	double worst = 0, t0 = 0;

	for (int g = 0; g < 3; g++) {
		double t1 = f->step_end[(g + 1) * COLD_PIECES - 1];

		if (t1 - t0 > worst)
			worst = t1 - t0;
		t0 = t1;
	}
	snprintf(note, n,
		 "worst 1 MiB at a cold position %.1f ms (<= %.1f); pulled "
		 "%.2f MiB",
		 worst * 1e3, lim * 1e3, (double)f->pulled / MIB);
	return worst <= lim;
}

/* The three cold reads; burst: the origin's responses start with that
 * many bytes at once (a send buffer written ahead, a token bucket), so
 * that a short request shows many times a connection's rate. */
static void cold_1m(const char *name, uint64_t burst)
{
	static const double at[3] = {0.7, 0.2, 0.9};
	struct scenario sc;

	far_origin(&sc, name, 128 * MIB);
	sc.src[0].burst = burst;
	for (int g = 0; g < 3; g++)
		for (int k = 0; k < COLD_PIECES; k++) {
			uint64_t off =
				(uint64_t)(at[g] * 128 * MIB) & ~(MIB - 1);

			cold_steps[g * COLD_PIECES + k] = (struct rd_step){
				off + (uint64_t)k * 128 * KIB, 128 * KIB};
		}
	sc.nrd = 1;
	memset(&sc.rd[0], 0, sizeof(sc.rd[0]));
	sc.rd[0].kind = RD_SCRIPT;
	sc.rd[0].script = cold_steps;
	sc.rd[0].nsteps = 3 * COLD_PIECES;
	named(&sc, judge_cold_1m);
}

static void sc_cold_1m(void)
{
	cold_1m("cold_1m", 0);
	cold_1m("cold_1m_burst", 256 * KIB);
}

/* ---- one slow file beside others of its origin: an origin that caps
 * one path far below the rest (pacefs-origin's --fault PATH:rate:8K);
 * every file is a source of its own in the origin's group, 16 lanes to
 * the origin, as a mount has them. ---- */

#define SLOW_RATE 8192.0 /* bytes/s a connection of the slow file */

static void slow_origin(struct scenario *sc, const char *name, int nfast)
{
	base(sc, name);
	sc->cfg.max_lanes = 32;
	sc->cfg.lanes_per_source = 16;
	sc->cfg.align = 64 * KIB;
	sc->cfg.min_request = 64 * KIB;
	sc->cfg.window_min = 256 * KIB;
	sc->cfg.kernel_piece = 128 * KIB;
	sc->limit = 300;
	sc->nblob = 1 + nfast;
	sc->size[0] = 64 * MIB;
	sc->nsrc = 1 + nfast;
	sc->src[0] = src(0, SLOW_RATE, 0, 0.001);
	sc->src[0].group = 1;
	for (int b = 1; b <= nfast; b++) {
		sc->size[b] = 16 * MIB;
		sc->src[b] = src(b, 100 * MB, 0, 0.001);
		sc->src[b].group = 1;
	}
}

/* A reader of the slow file at its own offset, reading `rsize` at a time
 * until it has `total`. */
static struct rd_spec slow_rd(int i, uint64_t rsize, uint64_t total)
{
	struct rd_spec r = seq(0, 0, rsize);

	r.start = (uint64_t)i * 4 * MIB + 12345;
	r.stop_after = total;
	return r;
}

/* (a) Four readers of the slow file take every lane it can split their
 * reads over; three readers of fast files of the same origin, opened
 * once they do, read 16 MiB each and must take their lanes back: each
 * done within 2 s (one lane at the fast rate needs 0.17 s; the old
 * scheduler left them waiting for slow lanes to end, chunks at 8 KB/s),
 * while the slow readers keep reading (no read after the first waits
 * more than three times a 1 MiB read over four connections). */
static bool judge_slow_fast(const struct scenario *sc, const struct figures *f,
			    char *note, size_t n)
{
	double worst = 0, slow_wait = 0;
	double slow_lim = 3 * (double)MIB / (4 * SLOW_RATE);
	bool ok = true;

	for (int i = 0; i < sc->nrd; i++) {
		if (sc->rd[i].blob == 0) {
			slow_wait = f->rd_max_wait[i] > slow_wait
					    ? f->rd_max_wait[i]
					    : slow_wait;
			ok &= f->rd_done[i] > 0;
			continue;
		}
		if (f->rd_done[i] == 0 ||
		    f->rd_done[i] - sc->rd[i].open_at > worst)
			worst = f->rd_done[i] == 0
					? 1e9
					: f->rd_done[i] - sc->rd[i].open_at;
	}
	snprintf(note, n,
		 "fast files read in %.2f s at worst (<= 2); slow readers' "
		 "longest wait %.1f s (<= %.0f)",
		 worst, slow_wait, slow_lim);
	return ok && worst <= 2 && slow_wait <= slow_lim;
}

static void sc_slow_fast(void)
{
	struct scenario sc;

	slow_origin(&sc, "slow_beside_fast", 3);
	sc.nrd = 7;
	for (int i = 0; i < 4; i++)
		sc.rd[i] = slow_rd(i, 1 * MIB, 2 * MIB);
	for (int b = 1; b <= 3; b++) {
		sc.rd[3 + b] = seq(b, 0, 128 * KIB);
		sc.rd[3 + b].open_at = 5.0 + b;
	}
	named(&sc, judge_slow_fast);
}

/* (b) Twelve readers of the slow file at their own offsets, 64 KiB a
 * read, hold every lane of the origin; a new reader of another file
 * reads its first 1 MiB as the kernel hands it over (128 KiB pieces, each
 * asked once the one before it is there). Its 1 MiB must come within
 * three round trips plus its size over one lane, plus a round trip a
 * piece, 0.1 s at least (the old scheduler: its read failed at the
 * deadline); every slow reader keeps reading (no read after the first
 * waits more than three 64 KiB reads over one connection). */
#define NEW_PIECES 8
static struct rd_step new_steps[NEW_PIECES];

static bool judge_slow_new(const struct scenario *sc, const struct figures *f,
			   char *note, size_t n)
{
	const struct src_spec *fs = &sc->src[1];
	double rtt = 2 * fs->latency;
	double lim = 3 * rtt + (double)MIB / fs->conn_rate + NEW_PIECES * rtt;
	double took = f->step_end[NEW_PIECES - 1] - sc->rd[12].open_at;
	double slow_wait = 0, slow_lim = 3 * (double)(64 * KIB) / SLOW_RATE;

	if (lim < 0.1)
		lim = 0.1;
	for (int i = 0; i < 12; i++)
		if (f->rd_max_wait[i] > slow_wait)
			slow_wait = f->rd_max_wait[i];
	if (f->step_end[NEW_PIECES - 1] == 0)
		took = 1e9;
	snprintf(note, n,
		 "new reader's 1 MiB in %.1f ms (<= %.1f); slow readers' "
		 "longest wait %.1f s (<= %.0f)",
		 took * 1e3, lim * 1e3, slow_wait, slow_lim);
	return took <= lim && slow_wait <= slow_lim;
}

static void sc_slow_new(void)
{
	struct scenario sc;

	slow_origin(&sc, "slow_new_reader", 1);
	sc.nrd = 13;
	for (int i = 0; i < 12; i++)
		sc.rd[i] = slow_rd(i, 64 * KIB, 256 * KIB);
	for (int k = 0; k < NEW_PIECES; k++)
		new_steps[k] =
			(struct rd_step){(uint64_t)k * 128 * KIB, 128 * KIB};
	memset(&sc.rd[12], 0, sizeof(sc.rd[12]));
	sc.rd[12].blob = 1;
	sc.rd[12].kind = RD_SCRIPT;
	sc.rd[12].script = new_steps;
	sc.rd[12].nsteps = NEW_PIECES;
	sc.rd[12].open_at = 10.0;
	named(&sc, judge_slow_new);
}

/* ---- many readers: a dataset loader's workers, each reading files
 * whole one after another, over one far origin whose files are each a
 * source of their own. ---- */

static void loader(struct scenario *sc, const char *name, int nfiles,
		   uint64_t size, int workers)
{
	far_origin(sc, name, size);
	sc->cfg.max_blobs = MAX_BLOB;
	sc->cfg.max_sources = MAX_SRC;
	sc->nblob = nfiles;
	sc->nsrc = nfiles;
	for (int b = 0; b < nfiles; b++) {
		sc->size[b] = size;
		sc->src[b] = src(b, 8 * MB, 0, 0.02);
		sc->src[b].group = 1; /* one origin */
	}
	sc->nrd = workers;
	for (int i = 0; i < workers; i++) {
		memset(&sc->rd[i], 0, sizeof(sc->rd[i]));
		sc->rd[i].kind = RD_LOADER;
		sc->rd[i].rsize = 128 * KIB;
	}
	/* What the lanes can carry at their per-connection rate, one round
	 * trip to start. */
	sc->ideal =
		(double)nfiles * (double)size / (sc->cfg.max_lanes * 8 * MB) +
		0.02;
}

/* Shards: at most 4 requests a shard, the lanes' rate within 10%. */
static bool judge_loader(const struct scenario *sc, const struct figures *f,
			 char *note, size_t n)
{
	double per = (double)f->requests / sc->nblob;

	snprintf(note, n,
		 "%d files, %.2f requests each (<= 4), %.1f MB/s, pulled "
		 "%.3f x read",
		 f->files, per, (double)f->consumed / f->done / MB,
		 (double)f->pulled / (double)pace__max64(f->consumed, 1));
	return per <= 4 && f->done <= sc->ideal * 1.1 &&
	       f->pulled <= f->consumed + f->consumed / 50;
}

static void sc_loader_shards(void)
{
	struct scenario sc;

	loader(&sc, "loader_shards", 48, 8 * MIB, 8);
	named(&sc, judge_loader);
}

/* The same with a budget of 32 lanes, 16 to the origin: its lanes grow
 * while each adds rate. */
static void sc_loader_grow(void)
{
	struct scenario sc;

	loader(&sc, "loader_shards/16", 48, 8 * MIB, 8);
	sc.cfg.max_lanes = 32;
	sc.cfg.lanes_per_source = 16;
	sc.ideal = 48.0 * 8 * MIB / (16 * 8 * MB) + 0.02;
	named(&sc, judge_loader);
}

/* A loader with the mount's settings: 32 lanes, 16 to the origin, two
 * kernel readahead windows of 128 KiB, 32 MiB in flight at most (a
 * window is at most twice its share of that). reqs_max requests a shard
 * at most, pulled at most 1.02 x, done within slack x the lanes' ideal. */
static double loader_reqs_max, loader_slack;

static bool judge_loader_mount(const struct scenario *sc,
			       const struct figures *f, char *note, size_t n)
{
	double per = (double)f->requests / sc->nblob;

	snprintf(note, n,
		 "%d files, %.2f requests each (<= %.1f), %.1f MB/s (%.2f x "
		 "ideal, <= %.2f), pulled %.3f x read",
		 f->files, per, loader_reqs_max,
		 (double)f->consumed / f->done / MB, f->done / sc->ideal,
		 loader_slack,
		 (double)f->pulled / (double)pace__max64(f->consumed, 1));
	return per <= loader_reqs_max && f->done <= sc->ideal * loader_slack &&
	       f->pulled <= f->consumed + f->consumed / 50;
}

static void loader_mount(struct scenario *sc, const char *name)
{
	loader(sc, name, 48, 8 * MIB, 8);
	sc->cfg.max_lanes = 32;
	sc->cfg.lanes_per_source = 16;
	sc->cfg.kernel_ahead = 256 * KIB;
	sc->cfg.budget_bytes = 32 * MIB;
}

/* The far origin (8 MB/s a connection, 20 ms). Its steals, which even
 * the lanes' ends out, cost about one request a shard: 4.5 at most. */
static void sc_loader_mount(void)
{
	struct scenario sc;

	loader_mount(&sc, "loader_shards/mount");
	sc.ideal = 48.0 * 8 * MIB / (16 * 8 * MB) + 0.02;
	loader_reqs_max = 4.5;
	loader_slack = 1.15;
	named(&sc, judge_loader_mount);
}

/* A fast link (nginx on loopback): a round trip is a millisecond (the
 * simulator's step) and a connection brings 50 MB/s. A new reader must
 * reach the link at once: at most 4 requests a shard. The simulated lanes
 * each add rate, where on loopback the daemon's CPU is the bound: larger
 * requests under the 32 MiB in flight keep fewer of them busy, and the
 * time is within 1.3 x what 16 full lanes would take. */
static void sc_loader_fast(void)
{
	struct scenario sc;

	loader_mount(&sc, "loader_fast");
	for (int b = 0; b < sc.nblob; b++) {
		sc.src[b] = src(b, 50 * MB, 0, 0.001);
		sc.src[b].group = 1;
	}
	sc.ideal = 48.0 * 8 * MIB / (16 * 50 * MB) + 0.001;
	loader_reqs_max = 4;
	loader_slack = 1.3;
	named(&sc, judge_loader_mount);
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
	sc->cfg.max_lanes = 1 + (uint32_t)(sim__rnd64(&st) % 8);
	sc->cfg.lanes_per_source = 1 + (uint32_t)(sim__rnd64(&st) % 8);
	sc->cfg.align = (sim__rnd64(&st) % 2 ? 64 : 256) * KIB;
	sc->cfg.min_request = sc->cfg.align * (1 + sim__rnd64(&st) % 2);
	sc->cfg.max_request = sc->cfg.min_request * (1 + sim__rnd64(&st) % 16);
	sc->cfg.window_min = sc->cfg.min_request * (1 + sim__rnd64(&st) % 4);
	sc->cfg.window_max = sc->cfg.window_min * (1 + sim__rnd64(&st) % 32);
	sc->cfg.stall_ns = (1 + sim__rnd64(&st) % 3) * SEC;
	/* A read may wait out one stall, a reclaim and a backoff. */
	sc->cfg.deadline_ns =
		sc->cfg.stall_ns * 4 + (4 + sim__rnd64(&st) % 8) * SEC;
	sc->cfg.backoff_ns = 100 * MS;
	sc->cfg.backoff_max_ns = 2 * SEC;
	sc->cfg.seed = seed;
	/* A budget in one scenario of four, from a stream of its own so
	 * that every seed keeps the scenario it always had. */
	{
		uint64_t bst = seed ^ 0x5bd1e995u;

		if (sim__rnd64(&bst) % 4 == 0 && !getenv("SIM_NOBUDGET"))
			sc->cfg.budget_bytes = sc->cfg.max_request *
					       (1 + sim__rnd64(&bst) % 8);
	}
	sc->nblob = 1 + (int)(sim__rnd64(&st) % 3);
	for (int b = 0; b < sc->nblob; b++) {
		sc->size[b] = 1 + sim__rnd64(&st) % (24 * MIB);
		if (sim__rnd64(&st) % 4 == 0) {
			sc->held_lo[b] = sim__rnd64(&st) % sc->size[b];
			sc->held_hi[b] = sc->held_lo[b] +
					 sim__rnd64(&st) % (sc->size[b] -
							    sc->held_lo[b] + 1);
		}
	}
	sc->nsrc = 0;
	for (int b = 0; b < sc->nblob; b++) {
		int ns = 1 + (int)(sim__rnd64(&st) % 3);

		for (int k = 0; k < ns && sc->nsrc < MAX_SRC; k++) {
			struct src_spec *s = &sc->src[sc->nsrc++];
			int fault = (int)(sim__rnd64(&st) % 8);

			*s = src(b, (0.5 + sim__rndf(&st) * 8) * MB,
				 sim__rnd64(&st) % 2
					 ? (2 + sim__rndf(&st) * 16) * MB
					 : 0,
				 0.005 + sim__rndf(&st) * 0.1);
			switch (fault) {
			case 0:
				s->collapse_at = sim__rndf(&st) * 3;
				s->collapse_frac = 0.03;
				break;
			case 1:
				s->stall_at = sim__rndf(&st) * 3;
				s->stall_len = sim__rndf(&st) * 4;
				break;
			case 2:
				s->die_at = sim__rndf(&st) * 3;
				s->die = sim__rnd64(&st) % 2 ? DIE_GONE
							     : DIE_RESET;
				break;
			case 3:
				s->t429_from = sim__rndf(&st) * 2;
				s->t429_to = s->t429_from + sim__rndf(&st) * 2;
				s->retry_after = sim__rndf(&st);
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
	/* Groups of sources (one origin's files), in one scenario of four,
	 * from a stream of their own, as the budget. */
	{
		uint64_t gst = seed ^ 0x27d4eb2fu;

		if (sim__rnd64(&gst) % 4 == 0)
			for (int i = 0; i < sc->nsrc; i++)
				sc->src[i].group = (int)(sim__rnd64(&gst) % 3);
	}
	sc->nrd = 1 + (int)(sim__rnd64(&st) % 4);
	for (int i = 0; i < sc->nrd; i++) {
		struct rd_spec *r = &sc->rd[i];
		int b = (int)(sim__rnd64(&st) % (uint64_t)sc->nblob);

		memset(r, 0, sizeof(*r));
		r->blob = b;
		r->open_at = sim__rndf(&st);
		if (sim__rnd64(&st) % 3 == 0) {
			r->kind = RD_RANDOM;
			r->nreads = 1 + (int)(sim__rnd64(&st) % 30);
			r->think = sim__rndf(&st) * 0.2;
		} else {
			r->kind = RD_SEQ;
			r->rate = sim__rnd64(&st) % 2
					  ? 0
					  : (0.5 + sim__rndf(&st) * 8) * MB;
			r->rsize = (4 + sim__rnd64(&st) % 1024) * KIB;
			r->start = sim__rnd64(&st) % 2
					   ? 0
					   : sim__rnd64(&st) % sc->size[b];
			if (sim__rnd64(&st) % 3 == 0) {
				r->seek_at = sim__rndf(&st) * 3;
				r->seek_to = sim__rnd64(&st) % sc->size[b];
			}
		}
	}
	/* The kernel's pieces (a reader reading 128 KiB at a time, which
	 * a kernel_piece of 128 KiB takes for pieces of a larger read), in
	 * one scenario of four, from a stream of their own. */
	{
		uint64_t kst = seed ^ 0x165667b1u;

		if (sim__rnd64(&kst) % 4 == 0) {
			sc->cfg.kernel_piece = 128 * KIB;
			for (int i = 0; i < sc->nrd; i++)
				if (sc->rd[i].kind == RD_SEQ &&
				    sim__rnd64(&kst) % 2)
					sc->rd[i].rsize = 128 * KIB;
		}
	}
	sc->limit = 300;
}

/* For the scenarios of other files (scatter.c, streams.c). */
void sim__far_origin(struct scenario *sc, const char *name, uint64_t size)
{
	far_origin(sc, name, size);
}

void sim__base(struct scenario *sc, const char *name)
{
	base(sc, name);
}

struct src_spec sim__src(int blob, double rate, double cap, double lat)
{
	return src(blob, rate, cap, lat);
}

struct rd_spec sim__seq(int blob, double rate, uint64_t rsize)
{
	return seq(blob, rate, rsize);
}

void sim__named(const struct scenario *sc,
		bool (*judge)(const struct scenario *, const struct figures *,
			      char *, size_t))
{
	named(sc, judge);
}

/* Seeds past the default thousand, run with them as regression cases: a
 * read among others that come and go on one lane (2575), a read whose
 * lane queued read-ahead past it (5871), and scenarios no scheduler can
 * finish (the rest); docs/pacing.md says what each shows. */
static const uint64_t regress_seeds[] = {2575, 5521, 5809, 5871,
					 6770, 7425, 9981};
#define NREGRESS ((int)(sizeof(regress_seeds) / sizeof(regress_seeds[0])))

int main(int argc, char **argv)
{
	int nrandom = 1000;
	uint64_t first = 1;
	int rpass = 0, rfail = 0, runmet = 0;
	bool regress = argc <= 1 && !getenv("SIM_ONLY"); /* the default run */

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
		sc_loader_shards();
		sc_loader_grow();
		sc_loader_mount();
		sc_loader_fast();
		sc_cold_1m();
		sc_slow_lanes();
		sc_slow_fast();
		sc_slow_new();
		sim__scatter();
		sim__streams();
		sim__plans();
	}
	for (int i = 0; i < nrandom + NREGRESS; i++) {
		struct scenario sc;
		struct figures f;
		char err[512] = "";
		int rc;

		if (i >= nrandom && !regress)
			break;
		random_scenario(&sc, i < nrandom ? first + (uint64_t)i
						 : regress_seeds[i - nrandom]);
		rc = sim__run(&sc, &f, err, sizeof(err));
		if (rc == 0) {
			rpass++;
		} else if (rc == 1) {
			rpass++;
			runmet++;
			printf("NOTE random seed %" PRIu64 ": %s\n", sc.seed,
			       err);
		} else {
			rfail++;
			printf("FAIL random seed %" PRIu64 ": %s\n", sc.seed,
			       err);
		}
	}
	/* A bound that excused many runs would hide a scheduler that no
	 * longer finishes: unmeetable scenarios stay rare. */
	if (runmet * 100 > rpass + rfail) {
		printf("FAIL randomized: %d of %d scenarios cannot be met "
		       "(more than 1%%)\n",
		       runmet, rpass + rfail);
		rpass -= runmet;
		rfail += runmet;
	}
	printf("%s randomized: %d scenarios, %d failed, %d cannot be met\n",
	       rfail ? "FAIL" : "PASS", rpass + rfail, rfail, runmet);
	if (rfail)
		failed++;
	else
		passed++;
	if (missed)
		printf("%d performance target(s) missed (MISS rows)\n", missed);
	printf("%d passed, %d failed\n", passed, failed);
	return failed == 0 && passed > 0 ? 0 : 1;
}

/* scatter: named scenarios of readers the scheduler knows little about:
 * scattered reads that cluster, uniformly random reads of a huge file,
 * an array's chunks read a column and here and there, a chain of reads
 * each found by the one before; speculative fill on and off side by
 * side. */
#include <stdio.h>
#include <string.h>

#include "tests/sim/sim_int.h"

/* The far origin (sim__far_origin), one reader. */
static void far(struct scenario *sc, const char *name, uint64_t size)
{
	sim__far_origin(sc, name, size);
	sc->nrd = 1;
	memset(&sc->rd[0], 0, sizeof(sc->rd[0]));
}

/* 32 reads of 16 KiB in four clusters of a 4 MiB file, each within
 * 384 KiB of its cluster's centre, one after the other. */
static struct rd_step cluster_steps[32];

static void cluster_script(void)
{
	uint64_t rng = 7;

	for (int i = 0; i < 32; i++) {
		uint64_t centre = (uint64_t)(i / 8) * MIB + 512 * KIB;
		uint64_t d = sim__rnd64(&rng) % (768 * KIB);

		cluster_steps[i].off =
			(centre - 384 * KIB + d) & ~(4 * KIB - 1);
		cluster_steps[i].len = 16 * KIB;
	}
}

/* A tar-like chain: a 512-byte header, then the next one past its
 * member (16 to 272 KiB): each read is found by the one before. */
static struct rd_step chain_steps[48];

static uint64_t chain_script(void)
{
	uint64_t rng = 11, off = 1 * MIB; /* a reader from the start streams */

	for (int i = 0; i < 48; i++) {
		chain_steps[i].off = off;
		chain_steps[i].len = 512;
		off += 512 + 16 * KIB + (sim__rnd64(&rng) % 16) * 16 * KIB;
	}
	return off;
}

/* A reader of an array's chunks (h5py, GDAL): a column of 32 chunks of
 * 137 KiB, one every 4.4 MiB, an index page of 4 KiB after every other
 * (its own stride), then 16 chunks here and there. Each chunk is read
 * whole, at once. */
#define ARRAY_STEPS (32 + 16 + 16)
static struct rd_step array_steps[ARRAY_STEPS];

static uint64_t array_script(void)
{
	uint64_t rng = 13, stride = 4506 * KIB, chunk = 137 * KIB, size;
	int k = 0;

	size = MIB + 32 * stride + MIB;
	for (int i = 0; i < 32; i++) {
		array_steps[k].off = MIB + (uint64_t)i * stride;
		array_steps[k++].len = chunk;
		if (i % 2 == 1) {
			array_steps[k].off =
				MIB + (uint64_t)i * stride + 3 * MIB + 4 * KIB;
			array_steps[k++].len = 4 * KIB;
		}
	}
	for (int i = 0; i < 16; i++) {
		array_steps[k].off =
			(sim__rnd64(&rng) % (size - chunk)) & ~(4 * KIB - 1);
		array_steps[k++].len = chunk;
	}
	return size;
}

/* The array reader pulls no more than twice what it reads (fetching
 * around each chunk, or the file whole, is what it must not do), and,
 * with fill on, takes no longer than without. */
static bool judge_array(const struct scenario *sc, const struct figures *f,
			char *note, size_t n)
{
	bool on = sc->cfg.fill_max != 0;
	double lim = on ? 2.0 : 3.0;

	snprintf(note, n,
		 "%d chunk reads in %.2f s (<= %.2f), pulled %.2f MiB (<= 2 x "
		 "%.2f)",
		 ARRAY_STEPS, f->done, lim, (double)f->pulled / MIB,
		 (double)f->consumed / MIB);
	return f->done <= lim && f->pulled <= 2 * f->consumed;
}

/* With fill on, a clustered reader's later reads find their bytes: it
 * finishes in under half the time it takes without (1.2 s there: a round
 * trip a read), pulling no more than its file. */
static bool judge_cluster(const struct scenario *sc, const struct figures *f,
			  char *note, size_t n)
{
	bool on = sc->cfg.fill_max != 0;
	double lim = on ? 0.5 : 1.5;

	snprintf(note, n,
		 "32 clustered reads in %.2f s (<= %.2f), pulled %.2f MiB (<= "
		 "4)",
		 f->done, lim, (double)f->pulled / MIB);
	return f->done <= lim && f->pulled <= 4 * MIB;
}

static bool judge_huge(const struct scenario *sc, const struct figures *f,
		       char *note, size_t n)
{
	(void)sc;
	snprintf(note, n, "64 random 4 KiB reads pulled %.2f MiB (<= 16)",
		 (double)f->pulled / MIB);
	return f->pulled <= 16 * MIB;
}

static bool judge_chain(const struct scenario *sc, const struct figures *f,
			char *note, size_t n)
{
	bool on = sc->cfg.fill_max != 0;
	double lim = on ? 0.6 : 2.0;

	snprintf(note, n,
		 "48 headers in %.2f s (<= %.2f), pulled %.2f MiB (<= %.2f)",
		 f->done, lim, (double)f->pulled / MIB,
		 (double)sc->size[0] / MIB);
	return f->done <= lim && f->pulled <= sc->size[0];
}

void sim__scatter(void)
{
	struct scenario sc;
	uint64_t end;

	cluster_script();
	far(&sc, "scatter_cluster", 4 * MIB);
	sc.rd[0].kind = RD_SCRIPT;
	sc.rd[0].script = cluster_steps;
	sc.rd[0].nsteps = 32;
	sim__named(&sc, judge_cluster);
	sc.name = "scatter_cluster/off";
	sc.cfg.fill_max = 0;
	sim__named(&sc, judge_cluster);

	far(&sc, "random_huge", 128 * MIB);
	sc.rd[0].kind = RD_RANDOM;
	sc.rd[0].nreads = 64;
	sc.seed = 9;
	sim__named(&sc, judge_huge);

	end = array_script();
	far(&sc, "array_chunks", end);
	sc.rd[0].kind = RD_SCRIPT;
	sc.rd[0].script = array_steps;
	sc.rd[0].nsteps = ARRAY_STEPS;
	sim__named(&sc, judge_array);
	sc.name = "array_chunks/off";
	sc.cfg.fill_max = 0;
	sim__named(&sc, judge_array);

	end = chain_script();
	far(&sc, "dependent_chain", end + 64 * KIB);
	sc.rd[0].kind = RD_SCRIPT;
	sc.rd[0].script = chain_steps;
	sc.rd[0].nsteps = 48;
	sim__named(&sc, judge_chain);
	sc.name = "dependent_chain/off";
	sc.cfg.fill_max = 0;
	sim__named(&sc, judge_chain);
}

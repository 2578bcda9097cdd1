/* sim_int: what the simulator's files share: the scenario a run is given,
 * the figures it gives back, and the simulated world in between. */
#ifndef SIM_INT_H
#define SIM_INT_H

#include "pacing/pace.h"
#include "pacing/pace_int.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define KIB (1024ull)
#define MIB (1024ull * 1024ull)
#define MS (1000000ull)
#define SEC (1000000000ull)
#define MB 1e6 /* rates are in decimal MB/s */

#define MAX_SRC 72
#define MAX_BLOB 64
#define MAX_RD 16
#define MAX_LANES 64
#define MAX_SAMPLES 200000
#define MAX_STEPS 64

enum death { DIE_NONE, DIE_GONE, DIE_RESET };

struct src_spec {
	int blob;
	enum pace_caps caps;
	double conn_rate; /* bytes/s per connection */
	double cap;	  /* bytes/s over all connections; 0: none */
	double latency;	  /* seconds to first byte */
	double collapse_at, collapse_frac; /* 0: never */
	double stall_at, stall_len;	   /* connections hang */
	double die_at;			   /* 0: never */
	enum death die;
	double t429_from, t429_to, retry_after;
	int max_conn;	/* serves this many at once, 503 beyond; 0: any */
	int slow_every; /* one connection in slow_every runs at slow_frac
			   of conn_rate while it lasts, as connections whose
			   small send buffers wait on late ACKs (lane i's
			   connection k when (i + k) % slow_every is
			   slow_every - 1); 0: none */
	double slow_frac;
	uint64_t burst;	    /* each response's first `burst` bytes come at
			       BURST_FACTOR times conn_rate, the rest at it: an
			       origin that writes ahead into a send buffer or
			       paces with a token bucket; 0: none */
	bool hold_refusals; /* after a 503, refuses every request for its
			       retry_after (each refusal starts it again) */
	int group;	    /* 0: a group of its own; k: the scheduler's group
			       k - 1 (pace_source_set_group) */
};

enum rd_kind {
	RD_SEQ,	   /* sequential at `rate`, `rsize` per read */
	RD_RANDOM, /* 4 KiB reads at random offsets */
	RD_SCRIPT, /* the reads of `script`, back to back */
	RD_LOOKUP, /* B-tree lookups: a root, an inner and a leaf page */
	RD_LOADER, /* a dataset loader's worker: reads blobs whole, one after
		      another, each time the next one no worker took yet
		      (from `blob` on), at `rate`, `rsize` per read */
};

struct rd_step {
	uint64_t off, len;
};

struct rd_spec {
	int blob;
	enum rd_kind kind;
	double rate;	/* bytes/s consumed; 0: as fast as it can */
	uint64_t rsize; /* bytes per read */
	uint64_t start; /* first offset */
	int nreads;	/* random: reads to do */
	double think;	/* random: seconds between reads */
	double seek_at; /* seq: seek once at this time (0: never) */
	uint64_t seek_to;
	uint64_t seek_len;   /* seq: the first read after it; 0: rsize */
	uint64_t stop_after; /* seq: stops after consuming this; 0: the end */
	const struct rd_step *script; /* RD_SCRIPT */
	int nsteps;
	double open_at;	  /* starts reading at this time */
	int pause_after;  /* RD_LOADER: stops for pause_len once this many */
	double pause_len; /* files were taken (0: never) */
};

/* A read plan (plans.c): the files a loader will open, in order, fetched
 * ahead by plan readers (pace_reader_plan) by the rules of the mount's
 * driver (fs/driver/plan.c), in miniature: a window of the loader's
 * opens a second over `lead` seconds, none while it pauses, abandoned
 * after misses. */
struct plan_spec {
	int n; /* entries; 0: no plan */
	int blob[MAX_BLOB];
	int ahead_min, ahead_max; /* files ahead */
	double lead;  /* seconds of opens ahead; 0: the config's lead */
	int miss_max; /* opens outside its window that abandon it; 0: twice
			 its window and ahead_min, as a given plan */
	double pause; /* seconds without an open: paused */
};

struct scenario {
	const char *name;
	struct pace_config cfg;
	int nblob;
	uint64_t size[MAX_BLOB];
	uint64_t held_lo[MAX_BLOB], held_hi[MAX_BLOB]; /* resume */
	int nsrc;
	struct src_spec src[MAX_SRC];
	int nrd;
	struct rd_spec rd[MAX_RD];
	double ideal;	  /* seconds; 0: not reported */
	double limit;	  /* seconds of simulated time before failing */
	bool errors_ok;	  /* waits may fail (sources dead) */
	bool no_pipeline; /* the executor ignores QUEUE (sends nothing
			     ahead), as an executor may: QUEUE is advisory */
	uint64_t seed;
	struct plan_spec plan;
	int order[MAX_BLOB]; /* RD_LOADER: the blobs in the order workers */
	int norder;	     /* take them; 0: 0, 1, 2, ... */
};

struct sim_lane {
	bool active;
	uint32_t src; /* index into scenario sources */
	uint64_t start, pos, end;
	double ready_at; /* first byte time */
	double carry;
	int fail; /* 0, or a pace_outcome to report at ready_at */
	uint64_t retry_after;
	/* A queued range, sent ahead when queued (a pipelining executor):
	 * its first byte comes a latency after q_t, or right after the open
	 * request, whichever is later. */
	bool q;
	uint64_t qstart, qend;
	double q_t;
	/* Its connection: a new one after a CANCEL or a lowered end
	 * (cut: the executor closes the connection when it is reached). */
	unsigned conn;
	bool cut;
};

struct sim_rd {
	uint32_t id;
	int blob; /* the blob it reads now */
	bool open, waiting, done, failed, seeked;
	uint64_t cursor, off, len;
	uint32_t wait;
	double wait_t0, next_at;
	int reads;
	uint64_t consumed;
	double first_read_end;
	double max_wait_after_first;
	int step;	/* RD_SCRIPT: next step; RD_LOOKUP: page */
	bool seek_read; /* the read in flight is the first after the seek */
	bool paused;	/* RD_LOADER: it paused (pause_after) */
	double resume_at;
};

/* A plan's state as it runs (plans.c), by entry. */
struct sim_plan {
	int cursor, next, opened, misses;
	bool done[MAX_BLOB];
	bool open[MAX_BLOB]; /* its plan reader is open */
	uint32_t reader[MAX_BLOB];
	double rate, rate_t0, last_open;
	int rate_n;
	bool abandoned;
	double pause_t;		/* when the loader paused; < 0: not yet */
	uint64_t sent_pause1;	/* bytes sent by a second into the pause */
	bool pause1, pause_end; /* those taken; the figure taken */
};

struct figures {
	double done, ideal;
	uint64_t overfetch;
	double p50, p99, max;
	uint64_t requests, steals, reclaims;
	double detect; /* collapse detected after this long */
	double max_wait_after_first;
	double bw[MAX_BLOB];	 /* per-blob bytes/s while every sequential
				    reader read */
	uint64_t max_req;	 /* largest request of a random reader */
	double seek_start_delay; /* seek to START of the new position */
	int yields_on_seek;	 /* lanes cancelled or cut to their chunk's
				    end while a seek waited */
	double rand_max_wait;	 /* longest wait of a random reader */
	uint64_t cuts;		 /* lane counts halved on 429/503 */
	int n429;		 /* requests answered 429 */
	uint64_t inflight_max;	 /* most bytes requested, not received */
	uint64_t sent;		 /* bytes the executor delivered */
	uint64_t pulled;	 /* sent, plus what was still requested at
				    the end */
	uint64_t consumed;
	double seek_read_wait;	    /* the first read after the seek */
	int lookups;		    /* RD_LOOKUP lookups done */
	int files;		    /* RD_LOADER: blobs read whole */
	double step_end[MAX_STEPS]; /* RD_SCRIPT: when each step's read
				       ended (its bytes held) */
	double rd_done[MAX_RD];	    /* when each reader finished; 0: not */
	double rd_max_wait[MAX_RD]; /* each reader's longest wait after its
				       first read */
	/* A plan's (plans.c): bytes sent from a second into the loader's
	 * pause to its end; whether it was abandoned, and at which entry;
	 * the bytes its plan readers pulled of files the loader never
	 * opened; opens that missed its window, most in a row. */
	uint64_t plan_pause_bytes;
	bool plan_abandoned;
	int plan_abandoned_at;
	uint64_t plan_unread;
	int plan_misses;
};

struct sim {
	const struct scenario *sc;
	struct pace *p;
	uint32_t blob_id[MAX_BLOB], src_id[MAX_SRC];
	struct pace__ranges held[MAX_BLOB];
	struct sim_lane lanes[MAX_LANES];
	struct sim_rd rd[MAX_RD];
	double t;
	uint64_t now;
	double refuse_until[MAX_SRC]; /* hold_refusals: refused until then */
	char err[256];
	double *waits;
	size_t nwaits;
	uint64_t fetched[MAX_BLOB], consumed_by_blob[MAX_BLOB];
	uint64_t requests;
	double seek_t;
	bool seek_pending;
	struct figures fig;
	double collapse_detect;
	double progress_t; /* when the held bytes last grew */
	int next_blob;	   /* RD_LOADER: the next blob no worker took */
	struct sim_plan plan;
};

/* scenarios.c, for the named scenarios of other files: a scenario's
 * defaults, a source, a sequential reader, and a run judged and printed
 * as a row. */
void sim__base(struct scenario *sc, const char *name);
struct src_spec sim__src(int blob, double rate, double cap, double lat);
struct rd_spec sim__seq(int blob, double rate, uint64_t rsize);
/* The far origin of one blob of size bytes: 20 ms before the first
 * byte, 8 MB/s a connection, 8 lanes, the mount's alignment and window. */
void sim__far_origin(struct scenario *sc, const char *name, uint64_t size);
void sim__named(const struct scenario *sc,
		bool (*judge)(const struct scenario *, const struct figures *,
			      char *, size_t));

/* streams.c: sources that ignore Range or send no length. */
void sim__streams(void);

/* world.c */

/* Records the first failure of a run in s->err; returns -1. */
int sim__fail(struct sim *s, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Polls the scheduler and carries out its actions until it has none. */
int sim__poll_all(struct sim *s);
/* Moves every lane's bytes on by dt seconds; *event when anything
 * changed. */
void sim__lanes_step(struct sim *s, double dt, bool *event);
/* Lets every reader read, wait or finish; *event when anything changed. */
int sim__readers_step(struct sim *s, uint64_t *rng, bool *event);
bool sim__all_done(const struct sim *s);
/* splitmix64 and a double in [0, 1) from it: the scenarios' and readers'
 * random streams, the same on every machine. */
uint64_t sim__rnd64(uint64_t *st);
double sim__rndf(uint64_t *st);

/* True, with the reason in why, when no scheduler could meet the
 * scenario: some blob's sequential readers need more bytes than its
 * sources, at their best rates after their faults, send in the time
 * limit. */
bool sim__unmeetable(const struct scenario *sc, char *why, size_t n);

/* sim.c */

/* Runs one scenario; returns 0 when every check held, 1 (the reason in
 * err) when it ran to its time limit with every check held, bytes still
 * arriving, and sim__unmeetable says no scheduler could have finished,
 * else -1 with the reason in err. *fig is filled either way. */
int sim__run(const struct scenario *sc, struct figures *fig, char *err,
	     size_t errlen);

/* scatter.c: scattered and dependent readers, speculative fill */
void sim__scatter(void);

/* plans.c: read plans, their readers of the third kind. */
void sim__plan_init(struct sim *s);
/* A loader's worker opened blob b (its reader is open). */
void sim__plan_opened(struct sim *s, int b);
/* Plan readers retired and opened; *event when any was. */
int sim__plan_step(struct sim *s, bool *event);
/* Whether [.., e) of blob b is inside an open plan reader's window. */
bool sim__plan_allows(struct sim *s, int b, uint64_t e);
/* The plan's figures into s->fig, at the end of a run. */
void sim__plan_end(struct sim *s);
/* The named plan scenarios. */
void sim__plans(void);

#endif

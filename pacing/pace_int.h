/* pace_int: the scheduler's state and the helpers its files share; no
 * other folder includes this header. */
#ifndef PACE_INT_H
#define PACE_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pacing/pace.h"

#define KIB (1024ull)
#define MIB (1024ull * 1024ull)
#define SEC (1000000000ull)

/* A rate sample covers at least this long, so that a socket buffer draining
 * in microseconds cannot fake a huge rate. */
#define RATE_WINDOW_NS (200ull * 1000000ull)

/* Sequential tolerance: reordered kernel read-ahead steps back a little,
 * and, once a window is open, forward skips of a few MiB still count as
 * sequential. */
#define SEQ_BACK (1 * MIB)
#define SEQ_FWD (4 * MIB)

/* A reader's consumption rate is sampled over at least this long. */
#define CONSUME_WINDOW_NS (1 * SEC)

/* A reader that has not read for this long is paused (status). */
#define PAUSE_NS (1 * SEC)

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

/* Whole files: once this many readers of a group's files read from the
 * start, and at least WHOLE_PCT percent of them to the end, a reader
 * starting at a file's start opens its window on the whole file, up to
 * WHOLE_MAX: a loader's file costs a request per lane, not one for each
 * step of a window's growth. */
#define WHOLE_MIN 4
#define WHOLE_PCT 75
#define WHOLE_MAX (16 * MIB)

/* A lane handed over to a waiting read ends its request; one with more
 * than this left at its rate is cut to what arrives in this time. */
#define HANDOVER_NS (500ull * 1000000ull)

/* A connection may hold this much of its rate past its frontier at least
 * (socket buffers on a near origin fill in about this long): its end is
 * never lowered below that. */
#define CUT_MIN_NS (20ull * 1000000ull)

/* A steal takes at least what the taker receives in this many round
 * trips: a smaller part costs its round trip more than it saves. */
#define STEAL_RTTS 4

/* A large read at a cold position: once its second kernel piece comes,
 * the bytes up to its run's start plus the reader's last run (this much
 * and a kernel piece for a reader with none, seq_min at most) are fetched
 * at once, split over the lanes, rather than a piece a round trip. */
#define SPEC_DEFAULT (1 * MIB)

/* A read at a cold position of at least this many min_requests is split
 * over lanes; a smaller one is not worth the extra requests. */
#define SPLIT_MIN 4

/* Throttling: a source's lane cap grows back by one lane this often while
 * its requests end whole. */
#define AIMD_INC_NS (1 * SEC)

/* A 429/503 for a request that went out less than this after the source
 * last delivered a byte refuses concurrency, not the source. */
#define SERVED_GRACE_NS (1 * SEC)

/* Saturation: a source whose lanes together give less than this share of
 * lanes x per-connection rate is at its shaping cap. */
#define SAT_PCT 85
/* A source this many times slower than the best one is a last resort. */
#define SLOW_FACTOR 8
/* A lane this many times slower than its group's per-connection peak
 * trickles: its file is capped on its own (a path the origin sends far
 * slower than the rest), and it says nothing of what the origin gives. */
#define TRICKLE_FACTOR SLOW_FACTOR
/* A lane this many times slower than the fastest lane of its own source
 * is a slow connection, not the source's pace: a read that waits on it
 * has the rest of its range given back (cut.c, lagging_lane). Not 2:
 * with the CPU short (the sanitizers, a loaded machine) lanes read late
 * look that much slower now and then, and each cut may pull again what
 * the origin had sent past it. */
#define LAG_FACTOR 2.5
/* A lane's rate over its request counts once it spans this long (a
 * request shorter than a rate sample gives none: at 8 MB/s a 1 MiB request
 * is 130 ms), and the fastest of its group's is kept this long. */
#define FAST_MIN_NS (100ull * 1000000ull)
#define FAST_KEEP_NS (1 * SEC)

/* Speculative fill: the reads of a scattered reader it fills around. */
#define FILL_RECENT 4
/* A reader whose runs ended short of seq_min this many times reads
 * scattered: its window grows to at most its run (window.c,
 * grow_limit), not eight times. */
#define SCATTER_RUNS 2
/* The runs' starts a reader keeps to find a stride in (fill.c). */
#define FILL_STARTS 8
/* Intervals a blob's set of unread filled bytes may hold. */
#define FILL_SPANS 256

/* ---- the range set (ranges.c) ---- */

/* A set of bytes as sorted, disjoint, non-touching [s, e) intervals, in an
 * array whose capacity is fixed when the set is created. */
struct pace__span {
	uint64_t s;
	uint64_t e;
};

struct pace__ranges {
	struct pace__span *v;
	uint32_t n;
	uint32_t cap;
	uint64_t total; /* bytes in the set */
};

/* Allocates room for cap intervals. Returns 0 or -ENOMEM. */
int pace__ranges_init(struct pace__ranges *r, uint32_t cap);
void pace__ranges_fini(struct pace__ranges *r);

/* Adds [s, e); writes the number of bytes that were not in the set before
 * to *added (may be NULL). Returns 0, or -ENOSPC when the set would need
 * more intervals than its capacity (the set is then unchanged). */
int pace__ranges_add(struct pace__ranges *r, uint64_t s, uint64_t e,
		     uint64_t *added);

/* Removes [s, e); writes the bytes removed to *removed (may be NULL).
 * Returns 0 or -ENOSPC (a split needing one more interval; unchanged). */
int pace__ranges_remove(struct pace__ranges *r, uint64_t s, uint64_t e,
			uint64_t *removed);

/* True when every byte of [s, e) is in the set (true for s >= e). */
bool pace__ranges_covers(const struct pace__ranges *r, uint64_t s, uint64_t e);

/* The first byte >= off that is not in the set. */
uint64_t pace__ranges_next_missing(const struct pace__ranges *r, uint64_t off);

/* The first byte >= off that is in the set, or UINT64_MAX. */
uint64_t pace__ranges_next_present(const struct pace__ranges *r, uint64_t off);

/* Bytes of [s, e) in the set. */
uint64_t pace__ranges_count(const struct pace__ranges *r, uint64_t s,
			    uint64_t e);

/* ---- the scheduler's state ---- */

/*
 * A lane's states. Every change goes through pace__lane_set:
 *
 *   IDLE       -> REQUESTED   START: for a waiting read, read-ahead or a steal
 *   REQUESTED  -> RECEIVING   its first byte arrived
 *   RECEIVING  -> COLLAPSED   its rate fell under 1/COLLAPSE_FACTOR of its
 *                             own level
 *   RECEIVING, -> PROMOTED    the request ended whole and a range was queued
 *   COLLAPSED
 *   PROMOTED   -> REQUESTED   the next poll STARTs the queued range (a new
 *                             request: measured afresh),
 *   PROMOTED   -> IDLE        or finds it no longer wanted
 *   open       -> YIELDING    CANCEL for a seek or a waiting read
 *   open       -> RECLAIMING  CANCEL of a stalled lane, or of a collapsed one
 *                             a read waits on
 *   not IDLE   -> IDLE        pace_on_done
 *
 * "Open" lanes (REQUESTED, RECEIVING, COLLAPSED, PROMOTED) own bytes: their
 * request [start, end) and a queued range. Cancelling ones own nothing and
 * wait for pace_on_done. What a lane serves (a waiting read, a reader's
 * window) is not its state: `wait` and `reader` say it.
 */
enum lane_state {
	LANE_IDLE,	 /* no request */
	LANE_PROMOTED,	 /* its queued range took over when the open request
			    ended whole; the START is due in the next poll */
	LANE_REQUESTED,	 /* START emitted, no byte yet */
	LANE_RECEIVING,	 /* bytes arriving: the rate clock runs */
	LANE_COLLAPSED,	 /* still receiving, but at a fraction of its own
			    level: the preferred steal victim */
	LANE_YIELDING,	 /* CANCEL emitted for a seek or a waiting read */
	LANE_RECLAIMING, /* CANCEL emitted: stalled or collapsed under a
			    read; its source is not backed off again */
	LANE_NSTATES
};

struct lane {
	enum lane_state state;
	uint32_t blob;
	uint32_t source;
	uint32_t reader; /* whose window it serves; PACE_NONE: none */
	uint32_t rgen;	 /* the reader's seek generation at start */
	uint32_t wait;	 /* the read it serves, while it waits; PACE_NONE */
	bool ahead;	 /* started as read-ahead (yields on a seek) */
	bool was_queued; /* the request was queued behind another */
	bool handover;	 /* its end was lowered so that a read of another
			    reader that waits takes the lane when it ends:
			    it is given nothing more */
	bool fill;	 /* speculative fill (fill.c): serves no reader */
	uint64_t start;
	uint64_t frontier; /* one past the highest byte credited */
	uint64_t end;
	uint64_t last_progress_ns;
	uint64_t rate_t0;    /* start of the current rate sample */
	uint64_t rate_bytes; /* bytes in the current rate sample */
	uint64_t rate;	     /* smoothed, bytes per second */
	uint64_t level;	     /* slow average: the lane's own level */
	uint64_t recv_t0;    /* its request's first byte (or promotion) */
	uint64_t recv_bytes; /* bytes of its request since recv_t0 */
	uint64_t started_ns;
	uint32_t nsamples;
	/* At most one queued range [qstart, qend) on the same source, owned
	 * by the lane from PACE_ACT_QUEUE on; it becomes the lane's request
	 * when the open one ends whole. */
	bool q;
	uint32_t qreader, qrgen;
	uint64_t qstart, qend;
	bool held; /* a stream paused ahead of its readers (hold.c): no
		      stall while held */
};

/* What is known of the server behind a group of sources (the files of
 * one origin, as the caller groups them): the rate of its connections,
 * its shaping cap, its round trip and its lanes. Shared, so that a new
 * file starts from what the others measured and the origin's lanes are
 * one budget. A source put in no group is a group of its own (ids below
 * max_sources; named groups above). */
struct group {
	uint32_t lanes;	    /* lanes not idle on its sources */
	uint64_t rate;	    /* per-connection rate, smoothed */
	uint64_t peak;	    /* per-connection rate it can give, 0: unknown */
	uint64_t cap_est;   /* aggregate rate when saturated */
	bool saturated;	    /* more lanes did not add rate */
	uint32_t n_ok;	    /* most lanes seen running at full rate */
	uint32_t trickling; /* of its lanes, those that trickle
			       (pace__measure), as of the last poll */
	uint64_t fast;	    /* fastest lane of late (pace__lane_recv_rate),
			       kept for FAST_KEEP_NS unless a faster one
			       comes; a short request counts too */
	uint64_t fast_at;
	uint64_t lat_est;     /* time to first byte, smoothed */
	uint64_t short_rate;  /* per-connection rate over whole requests too
				 short for a rate window, smoothed; 0: none */
	uint64_t short_bytes; /* the bytes short_rate's samples spanned,
				 smoothed */
	bool no_queue;	      /* refused a request sent ahead: queue nothing
				 until its lane cap grows again */
	uint64_t agg_tmp;     /* scratch for pace__measure */
	uint32_t n_tmp;
	uint32_t need_tmp; /* readers of its files with a read that waits on
			      bytes no lane owns, as counted by the poll */
	uint32_t lane_cap; /* AIMD: lanes allowed now */
	uint64_t inc_at;   /* next additive increase */
	/* Readers of its files that read from the start: how many read to
	 * the end before they closed, how many stopped short (halved
	 * together now and then, so that they follow what readers do now). */
	uint32_t whole, part;
};

struct source {
	bool used;
	bool excluded;
	bool routed; /* several routes: a lane's stall is its route's, not
			the source's, and its lanes never collapse
			(pace_source_set_routed) */
	uint32_t blob;
	uint32_t next;	/* next source of the same blob */
	uint32_t group; /* its server's (pace__group) */
	enum pace_caps caps;
	uint32_t lanes;	     /* lanes not idle on it */
	uint64_t rate;	     /* its own per-connection rate, smoothed, and */
	uint64_t peak;	     /* its best (0: not measured): its group's tell
				what a server gives, these which of a blob's
				sources is the faster */
	uint64_t hold_until; /* backoff or Retry-After suspension */
	uint64_t backoff;    /* next backoff length */
	uint64_t collapsed_until;
	uint32_t faults;    /* transient faults since its last byte */
	uint64_t fault_ns;  /* when the last of them happened */
	uint64_t served_ns; /* when it last delivered a byte */
	bool refused_alone; /* a 429/503 with no other lane of its group
			       open since its last byte */
};

struct blob {
	bool used;
	uint64_t size;
	struct pace__ranges held;
	uint32_t first_src;
	uint32_t n_src;
	uint32_t n_excluded;
	uint32_t pinned; /* the one source of a no-validator blob */
	/* Asked by the fill and not read yet: `spec` as a reader's history
	 * counts them (a read takes the stretch around it), `unread` as
	 * the mount's counters do (a read takes its chunks). */
	struct pace__ranges spec, unread;
};

struct reader {
	bool used;
	uint32_t blob;
	uint32_t gen;	    /* bumped on every jump (a seek) */
	bool seen;	    /* has read at least once */
	bool from_start;    /* its first read was at offset 0 */
	uint64_t run_start; /* where its run began */
	uint64_t last_run;  /* bytes its run before this one read; 0: none */
	uint64_t last_len;  /* its last read's length */
	uint64_t spec_end;  /* a large read's pieces are fetched to here
			       (speculate); 0: none this run */
	bool evident;	    /* this run is sequential enough to read ahead */
	uint64_t cursor;    /* end of the run's furthest read */
	uint64_t run;	    /* bytes read sequentially after the run's first
			       read (a single large read is no evidence) */
	uint64_t w;	    /* window length past the cursor; 0: none */
	bool had_window;    /* read-ahead ran when its last read came */
	bool jumped;	    /* its last read started a new run */
	uint64_t grow_run;  /* sequential bytes since W last grew */
	/* Consumption: bytes over wall time, pauses included. */
	uint64_t crate;	     /* bytes per second, smoothed; 0: unknown */
	uint64_t rate_t0;    /* start of the current sample */
	uint64_t rate_bytes; /* consumed in it */
	uint64_t last_read_ns;
	uint64_t last_wait_ns; /* it last waited at its cursor; 0: never */
	uint64_t deficit;      /* deficit round robin credit, bytes */
	uint32_t nl_tmp;       /* lanes serving it, as counted by the poll */
	uint32_t nd_tmp;       /* of those, lanes serving its waiting reads */
	bool need_tmp;	       /* a read of it waits on bytes no lane owns */
	/* Its history for the fill (fill.c): bytes fetched speculatively
	 * for it, of those it read, round trips it paid (reads that
	 * waited), and where its last reads began. */
	uint64_t spec_got, spec_used;
	uint32_t rtts;
	/* Neighbourhoods filled around its reads, and those a later read
	 * that began a run of its own landed in; which recent reads have
	 * had theirs counted (a bit a slot of `recent`). */
	uint32_t nb_made, nb_hit;
	uint32_t nb_mask;
	uint32_t nb_halved;  /* times its history of them was halved */
	uint32_t short_runs; /* runs ended by a jump short of seq_min */
	bool spec_fill;	     /* spec_end was set by pace__fill_jump */
	uint32_t nrecent;
	uint64_t recent[FILL_RECENT];
	/* The lengths of its last three runs (0: none); where its last
	 * runs began and what each read (the latest: so far), the latest
	 * at (nstarts - 1) % FILL_STARTS. */
	uint64_t runs[3];
	uint64_t starts[FILL_STARTS], start_len[FILL_STARTS];
	uint32_t nstarts;
	bool plan; /* a read plan's: never reads, its window is set once
		      (pace_reader_plan) and served after every other's */
};

struct wait {
	bool used;
	uint32_t reader;
	uint32_t blob;
	uint64_t off;
	uint64_t end;
	uint64_t begin_ns;
	uint32_t key_tmp; /* its reader's lanes when the poll began: reads
			     of readers holding fewer are served first */
	bool capped_tmp;  /* held to its reader's share in this poll */
};

/* Reads that failed lately (ask.c): their wait passed its deadline or no
 * source could serve it, or the caller gave up on them
 * (pace_read_failed). The kernel asks again at once for what a failed
 * readahead covered; without the memory each ask waited a whole deadline
 * more. A ring: the oldest is forgotten first. */
#define PACE_FAILED_MAX 16

struct failed {
	bool used;
	uint32_t blob;
	uint64_t start, end;
	uint64_t at_ns;
};

struct pace {
	struct pace_config cfg;
	uint64_t now;
	struct lane *lanes;
	struct source *sources;
	struct group *groups; /* max_sources + max_groups */
	struct blob *blobs;
	struct reader *readers;
	struct wait *waits;
	uint32_t n_sources, n_blobs; /* high-water marks */
	uint32_t n_readers, n_waits;
	uint32_t rr;	  /* round-robin start among readers */
	uint64_t rng;	  /* xorshift64 state for jitter */
	uint64_t infl;	  /* pace_poll: bytes in flight, kept as it emits */
	uint32_t nactive; /* readers reading ahead, as of the last poll */
	uint32_t nwork;	  /* readers with a lane or a waiting read, as of
			     the last poll */
	struct pace_stats stats;
	struct failed failed[PACE_FAILED_MAX];
	uint32_t failed_next;
};

static inline uint64_t pace__min64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

static inline uint64_t pace__max64(uint64_t a, uint64_t b)
{
	return a > b ? a : b;
}

/* A measure smoothed over its samples: a quarter of the new one, or the
 * first one alone. */
static inline uint64_t pace__smooth(uint64_t old, uint64_t sample)
{
	return old ? (old * 3 + sample) / 4 : sample;
}

static inline uint64_t pace__sat_add(uint64_t a, uint64_t b)
{
	return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

static inline uint64_t pace__align_down(uint64_t x, uint64_t a)
{
	return x - x % a;
}

uint64_t pace__align_up(uint64_t x, uint64_t a);

/* The group of source s: what is known of its server. */
static inline struct group *pace__group(const struct pace *p,
					const struct source *s)
{
	return &p->groups[s->group];
}

/* The group of the blob's first source, or NULL while it has none: the
 * group whose lanes a request for the blob takes, and whose readers'
 * habits a new reader of the blob is taken to share. */
static inline struct group *pace__blob_group(const struct pace *p,
					     uint32_t blob)
{
	const struct blob *b = &p->blobs[blob];

	if (b->first_src == PACE_NONE)
		return NULL;
	return pace__group(p, &p->sources[b->first_src]);
}

/* Reader id, or NULL when it is not open. */
static inline struct reader *pace__reader_get(const struct pace *p, uint32_t id)
{
	if (id >= p->n_readers || !p->readers[id].used)
		return NULL;
	return &p->readers[id];
}

/* Moves the scheduler's clock to now_ns, which must not go backwards. */
void pace__tick(struct pace *p, uint64_t now_ns);

/* ---- lanes (lane.c) ---- */

/* Every lane state change goes through here; it keeps the source's count
 * of lanes not idle (traced with -DPACE_TRACE). */
void pace__lane_set(struct pace *p, struct lane *l, enum lane_state to);

/* The lane owns bytes: an open request, possibly a queued range. */
static inline bool pace__lane_open(const struct lane *l)
{
	return l->state == LANE_PROMOTED || l->state == LANE_REQUESTED ||
	       l->state == LANE_RECEIVING || l->state == LANE_COLLAPSED;
}

/* Its first byte arrived: its rate is being measured. */
static inline bool pace__lane_receiving(const struct lane *l)
{
	return l->state == LANE_RECEIVING || l->state == LANE_COLLAPSED;
}

/* It serves a read that waits. */
static inline bool pace__lane_demand(const struct lane *l)
{
	return l->wait != PACE_NONE;
}

/* Starts [x, e) on lane l from source src for reader (PACE_NONE: none)
 * and wait (PACE_NONE: read-ahead); fills one START action. */
void pace__lane_start(struct pace *p, struct lane *l, uint32_t blob,
		      uint32_t src, uint64_t x, uint64_t e, uint32_t reader,
		      uint32_t wait, struct pace_action *a);

/* Aborts the lane's request and drops its queued range; `reclaim` says
 * it was taken back from a stalled or collapsed lane rather than yielded.
 * Fills one CANCEL action. */
void pace__lane_cancel(struct pace *p, struct lane *l, bool reclaim,
		       struct pace_action *a);

/* Fills action a of kind k with lane l's request; for a QUEUE the caller
 * then sets the queued range's start and end. */
void pace__emit(struct pace_action *a, enum pace_action_kind k,
		const struct pace *p, const struct lane *l);

/* The first idle lane, or NULL. */
struct lane *pace__idle_lane(struct pace *p);

/* ---- streams held and started again (hold.c) ---- */

/* Cancels (a yield) each whole-object stream whose blob has a read
 * waiting for bytes missing before the stream's frontier (evicted behind it
 * by the caller's cache): the stream never comes back to them, and a new
 * one from the first missing byte (the source sends from byte 0) serves
 * the read at once rather than after the stream's end. Fills at most cap
 * CANCEL actions; returns how many. */
size_t pace__streams_behind(struct pace *p, struct pace_action *acts,
			    size_t cap);

/* ---- sources (source.c) ---- */

/* d plus up to jitter_pct percent of it, at random. */
uint64_t pace__jitter(struct pace *p, uint64_t d);

/* A fault blamed on the source: back it off exponentially. */
void pace__source_backoff(struct pace *p, struct source *s, uint64_t at_least);

void pace__source_exclude(struct pace *p, struct source *s);

/* The source's lane counts and rate allow one more lane now. */
bool pace__source_usable(const struct pace *p, const struct source *s);

/* Whole-object streams: no ranges, or no length. */
static inline bool pace__caps_stream(enum pace_caps c)
{
	return c == PACE_CAPS_NO_RANGES || c == PACE_CAPS_NO_LENGTH;
}

/* The source a new request on blob should use, or PACE_NONE; `urgent`
 * bytes (a waiting read, a collapsed lane's range) may take a source
 * whose next lane adds no rate. */
uint32_t pace__pick_source(struct pace *p, uint32_t blob, bool urgent);

/* The per-connection rate g's short whole requests showed, trusted to
 * twice the bytes they carried in a round trip (0 while the round trip
 * is unknown): an origin that sends a response's first tens of KiB at
 * once and paces the rest shows short requests at many times its rate
 * (demand.c's split_least trusts them as far). */
uint64_t pace__short_rate(const struct group *g);

/* Per-connection rate a new lane on source src is expected to reach. */
uint64_t pace__expected_rate(const struct pace *p, uint32_t src);

/* Closes the lane's rate sample once it spans RATE_WINDOW_NS and updates
 * the lane's level, its source's rates and collapse. */
void pace__rate_update(struct pace *p, struct lane *l);

/* Lane l's rate over its request since recv_t0, 0 until that spans
 * FAST_MIN_NS. */
uint64_t pace__lane_recv_rate(const struct pace *p, const struct lane *l);

/* Measures every lane and updates each source's saturation. */
void pace__measure(struct pace *p);

/* ---- windows (window.c) ---- */

/* The first unowned missing byte of reader r's window [cursor, *wend)
 * (aligned down from the cursor), or *wend when there is none; writes the
 * end of that unowned gap to *gap_end. */
uint64_t pace__window_gap(struct pace *p, const struct reader *r,
			  uint64_t *gap_end, uint64_t *wend);

/* The end of the next read-ahead request of reader r's window, starting
 * at x (from pace__window_gap) on source src: about a second of the
 * source's rate, ending on an aligned byte inside the window or at the
 * blob's end, within the byte budget. Returns x when the window is parked:
 * what is left is shorter than min_request and more of it becomes
 * wanted once the cursor moves, so it waits rather than costing a round
 * trip for a sliver. */
uint64_t pace__window_end(struct pace *p, const struct reader *r, uint32_t src,
			  uint64_t x, uint64_t gap_end, uint64_t wend);

/* What r reads at a time: the median of its last three runs' lengths
 * (a run of index pages between two of chunks does not count), or its
 * last run's while it has had fewer; 0: none. */
uint64_t pace__reader_runs(const struct reader *r);

/* The reader exists, reads sequentially and is still in seek generation
 * gen. */
bool pace__reader_live(const struct pace *p, uint32_t ri, uint32_t gen);

/* A reader closes: its group learns whether it read from the start to
 * the end of its file (whole files), or stopped short. */
void pace__reader_judge(struct pace *p, const struct reader *r);

/* The reader waited at its cursor for bytes of its window: the window
 * doubles, up to what its blob's sources can fill, and does not shrink
 * for a lead's time. */
void pace__window_waited(struct pace *p, struct reader *r);

/* ---- requests (poll.c) ---- */

/* First missing byte of blob in [a, lim) that no lane owns, or lim; writes
 * the end of that unowned missing gap to *gap_end. */
uint64_t pace__first_free(struct pace *p, uint32_t blob, uint64_t a,
			  uint64_t lim, uint64_t *gap_end);

/* The first byte at or after off of blob that is neither held nor owned
 * by a lane (its open request or queued range), or the blob's size. */
uint64_t pace__covered_from(const struct pace *p, uint32_t blob, uint64_t off);

/* End of a request starting at x inside an unowned gap ending at
 * gap_end, wanting about `want` bytes, never past `lim`. */
uint64_t pace__request_end(const struct pace *p, const struct blob *b,
			   uint64_t x, uint64_t want, uint64_t gap_end,
			   uint64_t lim);

/* Read-ahead request length for a lane on src of reader r (window.c). */
uint64_t pace__request_want(const struct pace *p, uint32_t src,
			    const struct reader *r);

/* Lowers the end of a request [x, e) to fit the byte budget. */
uint64_t pace__budget_fit(const struct pace *p, uint64_t x, uint64_t e);

/* Bytes requested and not yet received. */
uint64_t pace__inflight_sum(const struct pace *p);
void pace__infl_add(struct pace *p, uint64_t n);
void pace__infl_sub(struct pace *p, uint64_t n);

/* One poll's output, and what its phases tell the ones after them. */
struct poll {
	struct pace_action *acts;
	size_t n, cap;
	uint32_t yields; /* lanes already cancelled for a waiting read */
	bool starved;	 /* a waiting read found no lane or no budget: read-
			    ahead starts nothing in this poll */
};

/* ---- lanes shared between readers (share.c) ---- */

/* Counts the lanes serving each reader (nl_tmp, and nd_tmp for its
 * waiting reads; a lane being handed over serves it no more), the readers
 * reading ahead (p->nactive) and those with work, a lane or a waiting
 * read (p->nwork). */
void pace__count_lanes(struct pace *p);

/* Marks the readers with a waiting read on bytes no lane owns (need_tmp)
 * and counts them per group, and keys each wait by its reader's lanes
 * (key_tmp), after pace__count_lanes. */
void pace__count_needs(struct pace *p);

/* A read of reader `reader` waits on bytes no lane owns now. */
bool pace__reader_unowned(struct pace *p, uint32_t reader);

/* Waiting read w takes no more lanes in this poll: another reader of its
 * origin has a read that waits on bytes no lane owns, and w's reader
 * holds its share of the origin's lanes for its waiting reads already,
 * with `taken` more promised to it. */
bool pace__split_capped(struct pace *p, const struct wait *w, uint32_t taken);

/* No lane is idle for waiting read w, x its first unowned byte (or its
 * blob's sources are at their lane caps: `capped`): read-ahead yields
 * lanes to it, or a reader holding more than its share hands one over;
 * `fair` stops at w's reader's share (pace__split_capped). Returns false
 * when o's action array is full. */
bool pace__take_lanes(struct pace *p, struct poll *o, struct wait *w,
		      uint64_t x, bool capped, bool fair);

/* ---- a waiting read's requests (demand.c) ---- */

/* A read of w's reader continues its run (or starts a small one at the
 * file's start): its window comes with it. */
bool pace__wait_sequential(const struct pace *p, const struct wait *w,
			   const struct reader *r);

/* The end of what waiting read w asks: its own end, or that of the large
 * read or reopened window it belongs to. */
uint64_t pace__wait_reach(const struct pace *p, const struct wait *w);

/* How much of waiting read w, from x on, one request on source src takes,
 * ending by *lim. */
uint64_t pace__demand_share(const struct pace *p, const struct wait *w,
			    uint64_t x, uint32_t src, uint64_t *lim);

/* Lanes read-ahead should yield to waiting read w when none is idle. */
uint32_t pace__yields_wanted(struct pace *p, const struct wait *w, uint64_t x);

/* ---- speculative fill (fill.c) ---- */

/* Speculation is on (fill_max not 0). */
bool pace__fill_on(const struct pace *p);

/* What a round trip costs on the blob's origin, in bytes: what its idle
 * lanes (and those filling) move in one, rate x round trip x lanes; 0
 * while the rate or the round trip is not measured. */
uint64_t pace__fill_price(const struct pace *p, uint32_t blob);

/* Reader r reads [off, off + len), before its run and cursor are moved:
 * filled chunks it reads count as read; unless the read goes on with
 * its run, they count for its history and the read is one of its recent
 * ones. */
void pace__fill_read(struct pace *p, struct reader *r, uint64_t off,
		     uint64_t len);

/* Reader r jumped and reads on sequentially where it landed, with no
 * window yet: its reads to come are fetched ahead (spec_end, its window
 * until its run is evident) as far as the price of a round trip says
 * they are worth, and that reach follows its cursor. */
void pace__fill_jump(struct pace *p, struct reader *r);

/* Where a waiting read's bytes end when it ends near its file's end:
 * the file's end; otherwise w->end. */
uint64_t pace__fill_tail(const struct pace *p, const struct wait *w);

/* The fill phase of a poll: idle lanes of origins with lanes to spare
 * fetch what scattered readers are likely to read next. Returns false
 * when o's action array is full. */
bool pace__fill(struct pace *p, struct poll *o);

/* ---- shortening and taking back lanes (cut.c) ---- */

/* Bytes the origin may have sent past lane l's frontier already. */
uint64_t pace__lane_wire(const struct pace *p, const struct lane *l);
/* The same for splitting l's range: at its group's short requests' rate
 * where the client, not the connection, is the slow part. */
uint64_t pace__lane_sent(const struct pace *p, const struct lane *l);

/* Hands lane l over to a waiting read at the end of what is on its wire;
 * returns the actions written to a. */
int pace__hand_over(struct pace *p, struct lane *l, struct pace_action *a);

/* Idle lane t takes the tail of the busy range that will finish last (a
 * collapsed one first), at most room actions into a; returns how many. */
int pace__steal(struct pace *p, struct lane *t, struct pace_action *a,
		size_t room, bool collapsed_only);

/* Lane l, which w waits on, is far slower than another source would be
 * (*hold: pass l's source over as a collapsed one). */
bool pace__lane_outpaced(struct pace *p, struct lane *l, const struct wait *w,
			 bool *hold);

/* Cuts lane l, which a read waits on at x, when it lags its origin's
 * fastest lane; whether it wrote a SET_END to a, counted in *n. */
bool pace__cut_lagging(struct pace *p, struct lane *l, uint64_t x,
		       struct pace_action *a, size_t *n);

#endif

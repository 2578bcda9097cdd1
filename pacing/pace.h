/* pacing: the pure scheduler that decides which byte ranges to request, on
 * which lane and when, from what readers consume. */
#ifndef PACE_H
#define PACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Contract.
 *
 * The scheduler is a pure state machine: no I/O, no threads, no clock, no
 * allocation after pace_new() and pace_blob_add(). Every call that observes
 * time takes `now_ns` (a monotonic clock read once by the caller per event);
 * time never goes backwards (asserted). It is not thread-safe: the caller
 * serialises all calls on one instance with its own lock.
 *
 * Ids are small integers handed out by the scheduler: blobs, sources and
 * readers from their *_add/open calls, lanes 0 .. max_lanes-1.
 *
 * Functions return 0 or a negative errno: -EINVAL for a bad argument or
 * configuration, -ENOSPC when a configured capacity is exhausted, -ENOENT for
 * an unknown id.
 */

#define PACE_NONE UINT32_MAX

struct pace;

/* How a source serves its blob; probed by the caller, never assumed. */
enum pace_caps {
	PACE_CAPS_FULL,		/* ranges honoured, strong validator */
	PACE_CAPS_NO_VALIDATOR, /* ranges honoured, no validator: one source */
	PACE_CAPS_NO_RANGES,	/* ranges ignored: whole-object stream */
	PACE_CAPS_NO_LENGTH,	/* length unknown: one stream */
};

/* How a lane's transfer ended, as reported by pace_on_done(). */
enum pace_outcome {
	PACE_OUT_OK,	    /* the requested range arrived whole */
	PACE_OUT_CANCELLED, /* ended after a PACE_ACT_CANCEL */
	PACE_OUT_TRANSIENT, /* 5xx, reset, short body, timeout: retry, back off
			     */
	PACE_OUT_THROTTLED, /* 429/503: suspend the source until retry_after */
	PACE_OUT_GONE,	    /* 403/404/410: exclude the source */
	PACE_OUT_FATAL,	    /* validator, size or content mismatch: exclude */
	PACE_OUT_LOCAL,	    /* a local error, never blamed on the source */
};

enum pace_action_kind {
	PACE_ACT_START,	  /* open a range request [start, end) on lane */
	PACE_ACT_SET_END, /* the lane's open request now ends at `end` */
	PACE_ACT_CANCEL,  /* abort the lane's request and drop its queued
			     range; expect pace_on_done */
	PACE_ACT_QUEUE,	  /* the lane's next range [start, end), same
			     source, queued behind its open request */
};

/*
 * Queued ranges. A lane holds at most one open request and at most one
 * queued range. PACE_ACT_QUEUE names the range the lane fetches next; the
 * lane owns it from then on. When the open request ends with PACE_OUT_OK
 * (every byte arrived), the queued range becomes the lane's request and the
 * next pace_poll() emits it as a PACE_ACT_START for that lane, or, should
 * it no longer be wanted (a seek, a closed reader, a source backing off),
 * emits nothing and the lane is idle. Any other end (a fault, a CANCEL)
 * drops the queued range without a START.
 *
 * QUEUE is advisory: an executor that cannot send a request ahead may
 * ignore it and run the START when it comes. One that can (HTTP/1.1
 * pipelining, a second stream) sends it at once, so that its first byte
 * follows the open request's last; it then treats a START of exactly that
 * lane and range as already under way, and abandons the early request when
 * the next poll brings no such START.
 */

struct pace_action {
	enum pace_action_kind kind;
	uint32_t lane;
	uint32_t blob;
	uint32_t source;
	uint64_t start;
	uint64_t end;
	bool faulted; /* CANCEL only: the lane stalled or collapsed (its
			 source's or its route's fault), not a yield */
	bool fill;    /* START only: speculative fill, bytes no reader asked
			 for (the lowest kind of work; it yields first) */
};

struct pace_config {
	uint32_t max_blobs;	   /* capacity: blobs */
	uint32_t max_sources;	   /* capacity: sources over all blobs */
	uint32_t max_groups;	   /* capacity: named groups of sources
				      (pace_source_set_group) */
	uint32_t max_readers;	   /* capacity: open readers */
	uint32_t max_waits;	   /* capacity: reads waiting at once */
	uint32_t max_lanes;	   /* global lane budget (-o lanes=N) */
	uint32_t lanes_per_source; /* cap on the lanes of one source, or of
				      one group of sources together */
	uint64_t align;		   /* requests start and end on multiples of
				      this (the cache block), blob end aside */
	uint64_t min_request;	   /* smallest read-ahead request, bytes */
	uint64_t max_request;	   /* largest single request, bytes */
	uint64_t window_min;   /* the window a reader's read-ahead opens with */
	uint64_t window_max;   /* cap on any reader's window */
	uint64_t lead_ns;      /* a sequential reader's lead (bytes held or
				  in flight past its cursor, the kernel's
				  readahead included) aims at this many
				  seconds of its consumption */
	uint64_t seq_min;      /* bytes a reader reads sequentially after a
				  jump before its read-ahead opens, beyond
				  what the kernel may have read ahead (a run
				  from the file's start opens it at once) */
	uint64_t kernel_ahead; /* bytes the kernel reads ahead of the
				  application: part of every lead */
	uint64_t kernel_piece; /* the kernel hands a large read over in
				  pieces of this size (its readahead),
				  each asked once the one before it is
				  there; 0: unknown */
	uint64_t stall_ns;     /* no progress this long: reclaim the lane */
	uint64_t deadline_ns;  /* a waiting read fails after this long */
	uint64_t backoff_ns;   /* first backoff after a transient fault */
	uint64_t backoff_max_ns;
	uint32_t down_faults;  /* this many faults in a row without a byte on
				  every source fail waiting reads at once */
	uint64_t budget_bytes; /* global cap on bytes requested and not yet
				  received (open requests and queued ranges);
				  read-ahead shrinks to fit, demand yields
				  read-ahead; 0: none, else >= max_request */
	uint64_t retry_after_max_ns; /* the longest hold a 429/503 gets,
					whatever its Retry-After asks: a
					server cannot suspend a source for
					longer */
	uint32_t jitter_pct;	/* backoffs and Retry-After holds last up to
				   this many percent longer, at random */
	uint64_t first_hold_ns; /* read-ahead of a blob waits up to this long
				   while a waiting read's request has not
				   had its first byte; 0: no wait */
	uint64_t seed;		/* seeds that randomness (deterministic) */
	uint64_t fill_max;	/* speculative fill for scattered readers, on
				   idle lanes: a file up to this size may be
				   filled whole (neighbourhoods and ends for
				   any); 0 turns speculation off (a metered
				   link) */
	uint64_t stream_keep;	/* a whole-object stream is held too once
				   its frontier is this many bytes past its
				   slowest reader's cursor (no reader: past
				   byte 0), going on under half of it: what
				   the caller's cache keeps ahead of a reader
				   without evicting it (a budget); 0: no
				   such limit */
};

/* Defaults suitable for a mount; the caller may override fields. */
void pace_config_default(struct pace_config *cfg);

/* Checks every field; on error writes the offending field's name to
 * *field (a static string) and returns -EINVAL. */
int pace_config_check(const struct pace_config *cfg, const char **field);

/* Creates a scheduler. Writes *out only on success. Errors: -EINVAL (bad
 * configuration), -ENOMEM. */
int pace_new(const struct pace_config *cfg, struct pace **out);

/* Frees p and everything it holds; pace_free(NULL) is a no-op. */
void pace_free(struct pace *p);

/* Adds a blob of `size` bytes; allocates its range sets. */
int pace_blob_add(struct pace *p, uint64_t size, uint32_t *blob_out);

/* Lowers blob's size to `size`: the length of a blob added with a size it
 * could not exceed (a source that sends no length), learnt when its
 * stream ended. Nothing is asked past it from then on; the waits past it
 * are the caller's to end. -EINVAL if size is above the blob's, -EBUSY
 * while a lane of the blob is open (call it after that lane's
 * pace_on_done), -ENOENT for an unknown blob. */
int pace_blob_set_size(struct pace *p, uint32_t blob, uint64_t size);

/* Marks [start, end) of blob as held (resume from the cache): such bytes are
 * never requested. */
int pace_blob_held(struct pace *p, uint32_t blob, uint64_t start, uint64_t end);

/* Marks [start, end) as no longer held (evicted or dropped); bytes may be
 * requested again. Ranges in flight are not affected. */
int pace_blob_forget(struct pace *p, uint32_t blob, uint64_t start,
		     uint64_t end);

/* True when every byte of [start, end) of blob is held. */
bool pace_is_held(const struct pace *p, uint32_t blob, uint64_t start,
		  uint64_t end);

/* Bytes of blob held. */
uint64_t pace_held_bytes(const struct pace *p, uint32_t blob);

/* Adds a source (a URL) for blob with the given capabilities. */
int pace_source_add(struct pace *p, uint32_t blob, enum pace_caps caps,
		    uint32_t *source_out);

/* Opens a reader stream (one open file handle) on blob. */
int pace_reader_open(struct pace *p, uint32_t blob, uint64_t now_ns,
		     uint32_t *reader_out);

/* Makes reader, just opened and not read, a read plan's: a file the
 * application said it will read next, [off, off + len) of it. Its window is
 * set to that range at once, with no evidence, and never moves; its bytes are
 * read-ahead of the third kind (pacing/README.md, "How lanes are
 * shared"): fetched only when no paced sequential reader has a request to
 * make, and yielded to waiting reads as any read-ahead. Close it
 * (pace_reader_close) once the application opens the file or the plan
 * goes. Returns 0, -ENOENT (unknown reader) or -EINVAL (it has read). */
int pace_reader_plan(struct pace *p, uint32_t reader, uint64_t off,
		     uint64_t len, uint64_t now_ns);

/* Closes a reader; its window no longer drives read-ahead. */
void pace_reader_close(struct pace *p, uint32_t reader, uint64_t now_ns);

/* Reports that reader read [off, off + len): moves its cursor to off + len,
 * updates sequential detection and its window. Call for every read,
 * whether the bytes were held or not. */
int pace_reader_read(struct pace *p, uint32_t reader, uint64_t off,
		     uint64_t len, uint64_t now_ns);

/* What a read is to do, as pace_read_step() and pace_read() answer. */
enum pace_do {
	PACE_DO_COPY, /* every byte asked is held: copy them (a wait passed
			 in was served and has ended) */
	PACE_DO_WAIT, /* some are not: wait on `wait`, pending, and pass it
			 to the next pace_read_step() */
	PACE_DO_FAIL, /* give up with `error`; no wait is left open */
};

struct pace_step {
	enum pace_do what;
	uint32_t wait; /* WAIT: the wait (pace_wait_*); else PACE_NONE */
	bool begun;    /* WAIT: this call began it: demand for the caller to
			  wake whoever runs pace_poll() */
	int error;     /* FAIL: -ETIMEDOUT (its deadline passed) or -EIO (no
			  source can serve it, or `again`) */
	bool again;    /* FAIL: refused because a read of these bytes failed
			  lately; no wait was begun */
};

/* A failed read is remembered this long: a read overlapping its bytes
 * is refused (PACE_DO_FAIL, again) without a new wait. The kernel asks
 * again at once for what a failed readahead covered; without the memory
 * each ask waited a whole deadline more. A later read tries again. */
#define PACE_FAILED_NS (1000ull * 1000000ull)

/* What a read by reader of [off, off + len) of its blob is to do now, in
 * one call; the caller acts on the answer and, after a WAIT, asks again
 * when woken (bytes arrived, a transfer ended, or a second passed).
 *
 * `wait` is the wait the previous answer gave, or PACE_NONE. While it is
 * pending the answer is WAIT, the same wait. When it failed (-ETIMEDOUT:
 * deadline_ns passed; -EIO: every source excluded or down) the answer is
 * FAIL with that error: the wait is ended and its range remembered as
 * failed. When it was served it is ended and [off, off + len) is asked
 * anew, as with no wait: COPY when every byte is held; FAIL -EIO (again)
 * when a read overlapping them failed less than PACE_FAILED_NS ago;
 * otherwise a wait begins for them (pace_wait_begin(): demand) and the
 * answer is WAIT (begun), or FAIL when no source can serve it now.
 *
 * The range asked may differ from the wait's: a caller with a layer of
 * its own over held bytes (the engine's block digests) asks for the bytes
 * it needs next. Returns 0 with *out written, or -ENOENT (unknown reader
 * or wait), -EINVAL, -ENOSPC (max_waits waits already), *out unwritten. */
int pace_read_step(struct pace *p, uint32_t reader, uint64_t off, uint64_t len,
		   uint32_t wait, uint64_t now_ns, struct pace_step *out);

/* The caller gave up on reader's read of [off, off + len) by itself (its
 * own deadline passed while the bytes were held but not yet usable to
 * it): it is remembered as a failed wait's range is. Returns 0, -ENOENT
 * or -EINVAL. */
int pace_read_failed(struct pace *p, uint32_t reader, uint64_t off,
		     uint64_t len, uint64_t now_ns);

/* What pace_read() found. */
struct pace_read_result {
	struct pace_step step; /* what the read is to do */
	bool moved;	 /* the window's end moved (or it opened or closed):
			    read-ahead may have room now */
	uint64_t cursor; /* as pace_reader_window() after the read */
	uint64_t window;
};

/* A read's first question, in one call: pace_reader_read() for [off, off
 * + len), then, when `wait` is true, pace_read_step() for those bytes
 * with no wait yet. A caller that does not wait (wait false) gets COPY
 * when every byte is held and otherwise WAIT with out->step.wait ==
 * PACE_NONE: nothing begun, nothing refused. Errors as those calls'; the
 * read is counted even when its step fails. */
int pace_read(struct pace *p, uint32_t reader, uint64_t off, uint64_t len,
	      bool wait, uint64_t now_ns, struct pace_read_result *out);

/* Writes the reader's cursor and current read-ahead window length W (its
 * window is [cursor, cursor + W); W is 0 while the reader is random). For
 * tests and status. */
int pace_reader_window(const struct pace *p, uint32_t reader, uint64_t *cursor,
		       uint64_t *window);

/* A reader as seen from outside (status output). */
enum pace_reader_mode {
	PACE_READER_NEW,	/* has not read yet */
	PACE_READER_RANDOM,	/* its reads jump: no read-ahead */
	PACE_READER_SEQUENTIAL, /* reads ahead inside its window */
	PACE_READER_PAUSED,	/* sequential, but has not read for a while */
};

struct pace_reader_info {
	uint32_t blob;
	enum pace_reader_mode mode;
	uint64_t cursor;
	uint64_t rate;	  /* consumption, bytes per second; 0: not known */
	uint64_t window;  /* W: its read-ahead reaches cursor + W */
	uint64_t lead;	  /* bytes held or in flight from the cursor on */
	uint64_t lead_ms; /* lead at its consumption rate; 0: not known */
};

int pace_reader_info(const struct pace *p, uint32_t reader, uint64_t now_ns,
		     struct pace_reader_info *out);

/* Every open reader's id is below this (for listing them). */
uint32_t pace_reader_bound(const struct pace *p);

/* Registers a read of [off, off + len) by reader that waits for missing
 * bytes: demand, the most urgent work. Writes a wait id for pace_wait_*. */
int pace_wait_begin(struct pace *p, uint32_t reader, uint64_t off, uint64_t len,
		    uint64_t now_ns, uint32_t *wait_out);

/* State of a waiting read: 0 when all its bytes are held, -EINPROGRESS
 * while pending, -ETIMEDOUT past the deadline, -EIO when no source can
 * serve it any more. */
int pace_wait_state(const struct pace *p, uint32_t wait, uint64_t now_ns);

/* Ends a wait (served, failed or interrupted) and frees its slot. */
void pace_wait_end(struct pace *p, uint32_t wait);

/* Bytes [off, off + len) of blob arrived on lane (credited by absolute
 * offset; bytes outside the lane's current range are ignored). */
int pace_on_data(struct pace *p, uint32_t lane, uint64_t off, uint64_t len,
		 uint64_t now_ns);

/* The lane's request ended with `outcome`; for PACE_OUT_THROTTLED,
 * retry_after_ns is how long the source asked to be left alone (0: unknown;
 * any value: the hold is capped at retry_after_max_ns). Bytes not received
 * go back to the queue. */
int pace_on_done(struct pace *p, uint32_t lane, enum pace_outcome outcome,
		 uint64_t retry_after_ns, uint64_t now_ns);

/* Advances the state machine and writes up to cap actions for the caller to
 * execute, in order. Returns the number written; call again while it
 * returns cap. */
size_t pace_poll(struct pace *p, uint64_t now_ns, struct pace_action *acts,
		 size_t cap);

/* The time at which pace_poll() must run again even if nothing else
 * happens (stall check, backoff end, wait deadline); UINT64_MAX: none. */
uint64_t pace_next_wake(const struct pace *p, uint64_t now_ns);

/* A lane as seen from outside (status output). */
struct pace_lane_info {
	bool busy;
	uint32_t blob;
	uint32_t source;
	uint64_t start;	   /* first byte of the current request */
	uint64_t frontier; /* next byte expected */
	uint64_t end;	   /* one past the last byte requested */
	uint64_t rate;	   /* bytes per second, windowed */
	bool collapsed;	   /* rate fell to a fraction of its own level */
	bool queued;	   /* a queued range [qstart, qend) follows */
	uint64_t qstart;
	uint64_t qend;
	uint32_t reader;      /* the reader it serves; PACE_NONE: none */
	bool demand;	      /* it serves a read that waits */
	uint64_t progress_ns; /* its last byte, or its start: what a stall
				 (stall_ns without progress) counts from */
	bool held;	      /* a stream held ahead of its readers */
};

int pace_lane_info(const struct pace *p, uint32_t lane,
		   struct pace_lane_info *out);

/* Streams held ahead of their readers (hold.c). A whole-object stream
 * cannot be asked for less, but it can stop being read: the caller stops
 * reading its connection (the server's window then holds it) while
 * pace_lane_hold_wanted says so, and tells the scheduler with
 * pace_lane_hold, so that a held lane is no stall and its rate is not
 * measured across the pause. */

/* How far a stream runs ahead of the end of the furthest window of its
 * blob's readers before it is held; it goes on under half of it. */
#define PACE_STREAM_LEAD (8ull << 20)

/* Whether the lane, a stream, is to be held now: no read of its blob
 * waits, and its frontier is PACE_STREAM_LEAD past every reader's window
 * (no reader: past byte 0), or stream_keep (when set) past the slowest
 * reader's cursor; held already, still half of that. False for any other
 * lane. */
bool pace_lane_hold_wanted(const struct pace *p, uint32_t lane);

/* Holds the lane (hold) or lets it go on (the stall clock and its rate
 * sample start again at now_ns). Returns 1 when that changed its state,
 * 0 when it was so already, -ENOENT for an idle or unknown lane. */
int pace_lane_hold(struct pace *p, uint32_t lane, bool hold, uint64_t now_ns);

/* Lanes the source's group may use now: lanes_per_source, halved on
 * every 429/503 (at most once per hold) and raised by one per second of
 * requests that end whole (additive increase, multiplicative decrease).
 * 0 for an unknown source. */
uint32_t pace_source_lane_cap(const struct pace *p, uint32_t source);

/* Bytes requested and not yet received over all lanes, queued ranges
 * included; never above budget_bytes when one is set. */
uint64_t pace_inflight(const struct pace *p);

/* The source is reached by several routes (a proxy list with more than
 * one member): a lane that stalls then faults its route, not the source.
 * The lane's range is taken back as ever, and the caller sends the retry
 * by another route; the source takes no backoff, and keeps the rate it
 * measured, so that its other lanes run on. Its lanes never collapse: a
 * caching proxy's misses are slower than its hits, which is no fault. */
int pace_source_set_routed(struct pace *p, uint32_t source);

/* Puts the source in group `group` (below max_groups): the sources of
 * one server (the files of one origin). A group shares what is measured
 * of its server (per-connection rate, shaping cap, round trip, the lanes
 * that add rate) and one lane budget (lanes_per_source, cut on 429/503),
 * so that a new file of a known origin is paced at once by what the
 * others learnt, and many files read at once do not multiply the
 * connections to one origin. Call it before the source's first lane
 * (-EBUSY after); a source in no group is a group of its own. */
int pace_source_set_group(struct pace *p, uint32_t source, uint32_t group);

/* Excludes a source for good (it served bytes that failed their digest):
 * no new request goes to it; its open requests run to their end. */
int pace_source_exclude(struct pace *p, uint32_t source);

/* A source as seen from outside (status output). */
struct pace_source_info {
	bool excluded;	     /* 403/404/410 or a mismatch: never used again */
	bool down;	     /* down_faults transient faults in a row */
	uint64_t held_until; /* backed off or suspended until then; 0: not */
	uint32_t lanes;	     /* lanes on it now */
	uint32_t lane_cap;   /* lanes its group may have now (cut on 429/503) */
	uint64_t rate;	     /* per-connection rate, bytes per second (its
				group's until it has one) */
	bool routed;	     /* pace_source_set_routed */
};

int pace_source_info(const struct pace *p, uint32_t source, uint64_t now_ns,
		     struct pace_source_info *out);

/* Totals for tests and status. */
struct pace_stats {
	uint64_t requests;	/* range requests started */
	uint64_t bytes_in;	/* bytes credited */
	uint64_t steals;	/* ranges split off a busy lane */
	uint64_t reclaims;	/* ranges taken back from stalled lanes */
	uint64_t throttle_cuts; /* a source's lane count halved on 429/503 */
	uint64_t inflight_max;	/* most bytes requested and not received */
	uint64_t fill_bytes;	/* bytes asked speculatively (fill) */
	uint64_t fill_read;	/* of those, bytes read since (whole chunks);
				   fill_bytes - fill_read: never read */
};

void pace_stats_get(const struct pace *p, struct pace_stats *out);

#endif

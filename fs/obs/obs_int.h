/* obs_int: what the files of fs/obs/ share beneath obs.h: the appender
 * its documents are written with (obs/text.c), the log's rate limit and
 * JSON lines (obs/log.c, obs/logjson.c), the metrics' families, samples
 * and writers (obs/metrics.c), the endpoint's connections
 * (obs/metricsconn.c). No file outside fs/obs/ includes it
 * but the unit tests. */
#ifndef FS_OBS_INT_H
#define FS_OBS_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <time.h>

#include "cache/cache.h"
#include "fetch/fetch.h"
#include "fs/base.h"
#include "fs/engine/engine.h"
#include "fs/obs/obs.h"

/* ---- the appender (obs/text.c) ---- */

/* A text being written: p holds len bytes and a NUL in cap. With limit
 * 0, p is the caller's buffer of cap bytes and never grows; else p is
 * malloc()ed (the caller frees it) and grows to at most limit bytes.
 * failed: a piece did not fit, or memory ran out; what follows is
 * dropped and the text is not to be used. */
struct obs_text {
	char *p;
	size_t len, cap, limit;
	bool failed;
};

/* Appends a printf-formatted piece, growing p as limit allows. */
void obs__text_add(struct obs_text *t, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Appends s as esc writes it (fs__json_escape, obs__prom_escape: both
 * return the length the whole needs, as snprintf does). */
void obs__text_add_escaped(struct obs_text *t, const char *s,
			   size_t (*esc)(const char *, char *, size_t));

/* ---- the log's lines and rate limit ---- */

/* obs/logjson.c. Writes one log line as a JSON object into buf
 * (cap bytes, at least 64; NUL-terminated, no newline): "time" (UTC, ms),
 * "level", "message", and those of f that are set: "blob", "source"
 * (without userinfo), "range" ("START-END", inclusive), "status",
 * "error_class". A line too long for buf loses the end of its strings,
 * never its shape. Returns its length. */
size_t obs__log_json(char *buf, size_t cap, const struct timespec *when,
		     const char *level, const char *msg,
		     const struct fs_log_fields *f);

/* A line's kind for the rate limit: where it is written and what it is
 * about, not its text, so that lines naming a thousand files or offsets
 * of one failure are one kind. A hash of its format fmt (each conversion
 * one mark) when that has at least OBS_LOG_SITE_LETTERS letters of its
 * own; else (a site that hands a whole line: "%s", or an adapter's
 * "WORD: %s" such as "cache: %s") of its text msg with
 * each run of digits one mark and each URL its authority alone; and of
 * its source: the authority of source's URL, else of the first URL msg
 * names. So "%s: cannot open: %s" about 500 files of one origin is one
 * kind, and about another origin another. fmt and source may be NULL. */
uint64_t obs__log_key(const char *fmt, const char *source, const char *msg);

/* A format with fewer letters of its own ("%s", "%s: %s") says nothing of
 * what its lines are about: they are kept apart by their text. */
#define OBS_LOG_SITE_LETTERS 4

/* Lines of one kind logged per window; the rest are counted. */
#define OBS_LOG_BURST 5
#define OBS_LOG_WINDOW_NS (10 * 1000000000ull)
#define OBS_LOG_KINDS 32

/* Lines left out of one kind, reported when its window ends. */
struct obs_log_report {
	uint32_t suppressed;
	int level;
	char sample[120]; /* the last line left out, cut */
};

/* The rate limit's state: the kinds seen lately (the oldest window makes
 * room for a new kind, and its count is then lost). */
struct obs_log_limit {
	struct {
		bool used;
		uint64_t key;
		uint64_t since; /* the window's start */
		uint32_t logged;
		struct obs_log_report left_out;
	} kind[OBS_LOG_KINDS];
};

/* Admits a line of kind key (text msg) at now_ns: true for the first
 * OBS_LOG_BURST lines of a kind in each OBS_LOG_WINDOW_NS; a later one is
 * counted (msg kept as the sample) and false. Pure; the caller locks. */
bool obs__log_admit(struct obs_log_limit *l, uint64_t key, int level,
		    const char *msg, uint64_t now_ns);

/* Takes one kind whose window has ended with lines left out: fills *r and
 * clears the count. False when there is none. Call it before each line (in
 * a loop) so that a storm that stopped is still reported. */
bool obs__log_take_report(struct obs_log_limit *l, uint64_t now_ns,
			  struct obs_log_report *r);

/* ---- the metrics ---- */

/* A metric as Prometheus names it; obs__metric_families lists every one
 * pacefs exports, ended by a NULL name (the man page documents each). */
struct obs_metric_family {
	const char *name;
	const char *type; /* "counter", "gauge", "histogram" */
	const char *help;
};

extern const struct obs_metric_family obs__metric_families[];

/* What the walk reads besides the driver's own counters, gathered once
 * per scrape: the engine's counters (one short hold of its lock), the
 * cache's stats (a read transaction), the proxy list. */
struct obs_metrics_now {
	bool has_engine;
	struct engine_counters engine;
	bool has_cache;
	struct cache_stats cache;
	struct fetch_proxies *proxies; /* borrowed; NULL: none */
};

/* What v shows of the engine, the cache and the proxies, read once. */
void obs__metrics_now(const struct obs_view *v, struct obs_metrics_now *now);

/* One sample: a family's series (its name and suffix: "", "_bucket",
 * "_sum", "_count") with its labels beyond the mount's, and its value. */
#define OBS_SAMPLE_LABELS 3
struct obs_sample {
	const struct obs_metric_family *family;
	const char *suffix;
	const char *key[OBS_SAMPLE_LABELS];
	const char *value[OBS_SAMPLE_LABELS]; /* valid for the call */
	unsigned nlabels;
	uint64_t u;
	bool real; /* the value is d (seconds), not u */
	double d;
};

/* Calls fn with every sample, a family's together and in one order every
 * time; only request series that have counted something. Reads the
 * counters once each. */
void obs__metrics_walk(struct obs_metrics *mx,
		       const struct obs_metrics_now *now,
		       void (*fn)(void *ctx, const struct obs_sample *s),
		       void *ctx);

/* Prometheus's text exposition format (version 0.0.4) of every sample
 * into a new buffer (*out, free() it; *len bytes, NUL-terminated). 0,
 * -ENOMEM. */
int obs__metrics_text(struct obs_metrics *mx, const struct obs_metrics_now *now,
		      char **out, size_t *len);

/* The same samples as a JSON array of {"name", "labels", "value"} (the
 * mount's labels left out), at most limit bytes: what `pacefs status`
 * shows. 0, -ERANGE (longer), -ENOMEM. */
int obs__metrics_json(struct obs_metrics *mx, const struct obs_metrics_now *now,
		      size_t limit, char **out, size_t *len);

/* Writes s as a label value of the text format into out (cap bytes,
 * NUL-terminated when cap > 0): '\\', '"' and newline escaped, bytes that
 * are not UTF-8 as U+FFFD. Returns the length the whole needs. */
size_t obs__prom_escape(const char *s, char *out, size_t cap);

/* obs/metrics_opt.c. Splits ADDR:PORT into host (the brackets of an IPv6
 * address removed) and port; false with the reason in why. */
bool obs__metrics_addr_split(const char *spec, char *host, size_t cap,
			     char *port, size_t pcap, const char **why);

/* The connections the endpoint keeps (obs/metricsconn.c), a table
 * of OBS_MCONN_SLOTS that one thread (the endpoint's) uses. A connection
 * must deliver its request within OBS_MCONN_REQUEST_MS of its accept and
 * be done within OBS_MCONN_LIFE_MS; an address keeps at most
 * OBS_MCONN_PER_ADDR of the OBS_MCONN_MAX open, and a new connection makes
 * room by the close of the oldest (of its address, else of all; one
 * waiting for its request first), never by its own refusal. The slots
 * beyond OBS_MCONN_MAX hold the connections closed but not yet reaped. */
#define OBS_MCONN_MAX 128
#define OBS_MCONN_PER_ADDR 64
#define OBS_MCONN_SLOTS (2 * OBS_MCONN_MAX)
#define OBS_MCONN_REQUEST_MS 1000
#define OBS_MCONN_LIFE_MS 10000

struct obs_mconns;
struct obs_mconn;

enum obs_mconn_reason {
	OBS_MCONN_NO_REQUEST, /* no whole request by its deadline */
	OBS_MCONN_TOO_LONG,   /* not done by its deadline */
	OBS_MCONN_FOR_ROOM,   /* the oldest, closed for a new one */
};

/* A connection the table closed, for the log. */
struct obs_mconn_closed {
	enum obs_mconn_reason reason;
	int family; /* AF_INET or AF_INET6 */
	unsigned char ip[16];
	uint64_t age_ms;
};

/* An empty table; on_close (may be NULL) hears of every connection the
 * table closes. 0 or -ENOMEM. obs__mconns_free(NULL) does nothing; the
 * table closes no descriptor. */
int obs__mconns_new(void (*on_close)(void *ctx,
				     const struct obs_mconn_closed *why),
		    void *ctx, struct obs_mconns **out);
void obs__mconns_free(struct obs_mconns *t);

/* A connection from addr is about to be accepted: closes the one that
 * must go to make room for it, if any. */
void obs__mconns_admit(struct obs_mconns *t, const struct sockaddr *addr,
		       uint64_t now_ms);

/* Socket fd (not taken) from addr was accepted at now_ms: its entry,
 * valid until obs__mconns_gone. NULL when every slot is taken: the socket
 * has been shut down. */
struct obs_mconn *obs__mconns_add(struct obs_mconns *t, int fd,
				  const struct sockaddr *addr, uint64_t now_ms);

/* c's request has arrived whole: its second deadline runs. NULL: nothing. */
void obs__mconns_asked(struct obs_mconn *c);

/* c's socket is about to be closed: its slot is free. NULL: nothing. */
void obs__mconns_gone(struct obs_mconns *t, struct obs_mconn *c);

/* Shuts down every connection past its deadline (shutdown(2): its owner
 * reads the end and closes it). Returns the milliseconds until the next
 * deadline, -1 when no connection is open. */
int obs__mconns_sweep(struct obs_mconns *t, uint64_t now_ms);

#endif

/* metrics_int: the mount's metrics (fs/driver/metrics.c: the counters the
 * driver keeps, the walk over every sample, its Prometheus and JSON
 * writers), the checks of their options (fs/driver/metrics_opt.c) and
 * their endpoint (fs/driver/metricsd.c); only fs/driver/ includes it
 * (and the unit tests). */
#ifndef FS_METRICS_INT_H
#define FS_METRICS_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "cache/cache.h"
#include "fetch/fetch.h"
#include "fs/engine/engine.h"

struct fs_mount;
struct fs_metrics;

/* A metric as Prometheus names it; fs__metric_families lists every one
 * pacefs exports, ended by a NULL name (the man page documents each). */
struct fs_metric_family {
	const char *name;
	const char *type; /* "counter", "gauge", "histogram" */
	const char *help;
};

extern const struct fs_metric_family fs__metric_families[];

/* The metrics of one mount; every series carries mount="MOUNTPOINT" and
 * the labels of -o metrics_label= ("K=V", checked by
 * fs__metrics_label_check). Its counters are atomics: any thread adds to
 * them without a lock. 0 or -ENOMEM. fs__metrics_free(NULL) does
 * nothing. */
int fs__metrics_new(const char *mountpoint, char *const *labels,
		    unsigned nlabels, struct fs_metrics **out);
void fs__metrics_free(struct fs_metrics *mx);

/* fetch_config.on_request (ctx: the metrics): counts a request by its
 * source's host (the first 32 hosts by name, the rest as "other"), its
 * route and its status class; a lane's first byte into its histogram.
 * Allocates nothing; a new host takes a mutex once. */
void fs__metrics_on_request(void *ctx, const struct fetch_request_info *r);

/* A FUSE read took ns from its request to its reply; failed: it was
 * answered with an error. */
void fs__metrics_read(struct fs_metrics *mx, uint64_t ns, bool failed);

/* What the walk reads besides the driver's own counters, gathered once
 * per scrape: the engine's counters (one short hold of its lock), the
 * cache's stats (a read transaction), the proxy list. */
struct fs_metrics_now {
	bool has_engine;
	struct fs_engine_counters engine;
	bool has_cache;
	struct cache_stats cache;
	struct fetch_proxies *proxies; /* borrowed; NULL: none */
};

void fs__metrics_now(const struct fs_mount *m, struct fs_metrics_now *now);

/* One sample: a family's series (its name and suffix: "", "_bucket",
 * "_sum", "_count") with its labels beyond the mount's, and its value. */
#define FS_SAMPLE_LABELS 3
struct fs_sample {
	const struct fs_metric_family *family;
	const char *suffix;
	const char *key[FS_SAMPLE_LABELS];
	const char *value[FS_SAMPLE_LABELS]; /* valid for the call */
	unsigned nlabels;
	uint64_t u;
	bool real; /* the value is d (seconds), not u */
	double d;
};

/* Calls fn with every sample, a family's together and in one order every
 * time; only request series that have counted something. Reads the
 * counters once each. */
void fs__metrics_walk(struct fs_metrics *mx, const struct fs_metrics_now *now,
		      void (*fn)(void *ctx, const struct fs_sample *s),
		      void *ctx);

/* Prometheus's text exposition format (version 0.0.4) of every sample
 * into a new buffer (*out, free() it; *len bytes, NUL-terminated). 0,
 * -ENOMEM. */
int fs__metrics_text(struct fs_metrics *mx, const struct fs_metrics_now *now,
		     char **out, size_t *len);

/* The same samples as a JSON array of {"name", "labels", "value"} (the
 * mount's labels left out), at most limit bytes: what `pacefs status`
 * shows. 0, -ERANGE (longer), -ENOMEM. */
int fs__metrics_json(struct fs_metrics *mx, const struct fs_metrics_now *now,
		     size_t limit, char **out, size_t *len);

/* Writes s as a label value of the text format into out (cap bytes,
 * NUL-terminated when cap > 0): '\\', '"' and newline escaped, bytes that
 * are not UTF-8 as U+FFFD. Returns the length the whole needs. */
size_t fs__prom_escape(const char *s, char *out, size_t cap);

/* Checks the value of -o metrics_label=K=V: K a label name (letters,
 * digits, '_', not first a digit, not "__" first) that pacefs does not
 * set itself nor prev (the labels given before) names, V UTF-8 of at most
 * 256 bytes. 0 or -EINVAL with one line naming the option in err. */
int fs__metrics_label_check(const char *kv, char *const *prev, unsigned nprev,
			    char *err, size_t errlen);

/* Checks the syntax of -o metrics=ADDR:PORT (an IPv4 address, an IPv6
 * address in brackets, or a name; a port from 1 to 65535). 0 or -EINVAL
 * with one line naming the option in err. */
int fs__metrics_addr_check(const char *spec, char *err, size_t errlen);

/* Splits ADDR:PORT into host (the brackets of an IPv6 address removed)
 * and port; false with the reason in why. */
bool fs__metrics_addr_split(const char *spec, char *host, size_t cap,
			    char *port, size_t pcap, const char **why);

/* Resolves spec (as checked) and listens on it: the socket (close on
 * exec, non-blocking) in *fd, or -errno with one line naming the option
 * and the address in err (a name that does not resolve, an address in
 * use or not this machine's). Before the daemon forks, so that the
 * terminal hears of it; the socket survives the fork. */
int fs__metrics_listen(const char *spec, int *fd, char *err, size_t errlen);

/* The connections the endpoint keeps (fs/driver/metricsconn.c), a table
 * of FS_MCONN_SLOTS that one thread (the endpoint's) uses. A connection
 * must deliver its request within FS_MCONN_REQUEST_MS of its accept and
 * be done within FS_MCONN_LIFE_MS; an address keeps at most
 * FS_MCONN_PER_ADDR of the FS_MCONN_MAX open, and a new connection makes
 * room by the close of the oldest (of its address, else of all; one
 * waiting for its request first), never by its own refusal. The slots
 * beyond FS_MCONN_MAX hold the connections closed but not yet reaped. */
#define FS_MCONN_MAX 128
#define FS_MCONN_PER_ADDR 64
#define FS_MCONN_SLOTS (2 * FS_MCONN_MAX)
#define FS_MCONN_REQUEST_MS 1000
#define FS_MCONN_LIFE_MS 10000

struct fs_mconns;
struct fs_mconn;

enum fs_mconn_reason {
	FS_MCONN_NO_REQUEST, /* no whole request by its deadline */
	FS_MCONN_TOO_LONG,   /* not done by its deadline */
	FS_MCONN_FOR_ROOM,   /* the oldest, closed for a new one */
};

/* A connection the table closed, for the log. */
struct fs_mconn_closed {
	enum fs_mconn_reason reason;
	int family; /* AF_INET or AF_INET6 */
	unsigned char ip[16];
	uint64_t age_ms;
};

/* An empty table; on_close (may be NULL) hears of every connection the
 * table closes. 0 or -ENOMEM. fs__mconns_free(NULL) does nothing; the
 * table closes no descriptor. */
int fs__mconns_new(void (*on_close)(void *ctx,
				    const struct fs_mconn_closed *why),
		   void *ctx, struct fs_mconns **out);
void fs__mconns_free(struct fs_mconns *t);

/* A connection from addr is about to be accepted: closes the one that
 * must go to make room for it, if any. */
void fs__mconns_admit(struct fs_mconns *t, const struct sockaddr *addr,
		      uint64_t now_ms);

/* Socket fd (not taken) from addr was accepted at now_ms: its entry,
 * valid until fs__mconns_gone. NULL when every slot is taken: the socket
 * has been shut down. */
struct fs_mconn *fs__mconns_add(struct fs_mconns *t, int fd,
				const struct sockaddr *addr, uint64_t now_ms);

/* c's request has arrived whole: its second deadline runs. NULL: nothing. */
void fs__mconns_asked(struct fs_mconn *c);

/* c's socket is about to be closed: its slot is free. NULL: nothing. */
void fs__mconns_gone(struct fs_mconns *t, struct fs_mconn *c);

/* Shuts down every connection past its deadline (shutdown(2): its owner
 * reads the end and closes it). Returns the milliseconds until the next
 * deadline, -1 when no connection is open. */
int fs__mconns_sweep(struct fs_mconns *t, uint64_t now_ms);

/* The endpoint: an HTTP server (libmicrohttpd, run by a thread of its
 * own) on listening socket fd (taken) that answers GET /metrics with
 * fs__metrics_text of mount m, whose engine must be running, one request
 * a connection; its connections are kept as fs__mconns_admit says. 0 or
 * a negative errno (fd is closed). */
struct fs_metricsd;
int fs__metricsd_start(int fd, struct fs_metrics *mx, struct fs_mount *m,
		       struct fs_metricsd **out);

/* Stops the server: its thread ends at once, whatever its connections
 * are doing (a scrape under way is finished first), then every
 * connection is closed; before the engine is freed. NULL: nothing. */
void fs__metricsd_stop(struct fs_metricsd *d);

#endif

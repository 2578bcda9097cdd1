/* obs: what an operator sees of pacefs: the process's log (text or JSON
 * lines, escaped, rate-limited), the mount's metrics and their endpoint,
 * and the status document. The driver and the command line use it; it
 * uses the engine, the tree, cache/ and fetch/ to read a mount's state,
 * never the driver (a mount is seen through struct obs_view) nor FUSE.
 * Only fs/ includes this. */
#ifndef FS_OBS_H
#define FS_OBS_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cache/cache.h"
#include "fetch/fetch.h"
#include "fs/base.h"

struct engine;
struct tree_ns;
struct obs_metrics;

/* ---- the log (obs/log.c, obs/logjson.c) ---- */

/* Sends log lines to stderr (foreground) or syslog (daemon). Every line is
 * escaped (fs__escape): servers choose much of what is logged (names,
 * ETags, reasons). Lines of one call site and source (obs__log_key) are
 * rate-limited (obs__log_admit), debug lines aside, so that a fault that
 * repeats, or names a new file each time, cannot flood the log.
 * Thread-safe. */
void obs_log_init(bool to_stderr, enum fs_log_level level);

/* Lines as JSON objects (-o log_format=json: obs__log_json) rather than
 * text; before the first line. */
void obs_log_format_json(bool json);

/* The process's log: one line per call, to stderr in the foreground and
 * to syslog when daemonized, every URL's userinfo removed, every byte a
 * server chose escaped, repeated lines rate-limited. The engine and the
 * credentials reach it through the log hooks of their configurations
 * (obs_log_hook). Thread-safe. */
void obs_log(enum fs_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void obs_vlog(enum fs_log_level level, const char *fmt, va_list ap)
	__attribute__((format(printf, 2, 0)));
/* The same for a line about what f names (NULL: nothing): its fields
 * stand on their own in a JSON log (-o log_format=json). */
void obs_vlog_about(enum fs_log_level level, const struct fs_log_fields *f,
		    const char *fmt, va_list ap)
	__attribute__((format(printf, 3, 0)));

/* The cache's log callback (cache_config.log). */
void obs_log_cache(void *ctx, enum cache_log_level level, const char *msg);
/* The log hook of the engine (engine_config.log) and of the
 * credentials (auth_creds_config.log): their lines as obs_log's. */
void obs_log_hook(void *ctx, enum fs_log_level level, const char *fmt,
		  va_list ap) __attribute__((format(printf, 3, 0)));
/* The engine's log_fields hook: its lines with their fields. */
void obs_log_fields_hook(void *ctx, enum fs_log_level level,
			 const struct fs_log_fields *f, const char *fmt,
			 va_list ap) __attribute__((format(printf, 4, 0)));

/* vsnprintf into buf with every URL's userinfo removed (removed before a
 * long line is cut): what every log line and terminal line goes through.
 * fetch_text_vformat_redacted is the one implementation. */
void obs_format_shown(char *buf, size_t cap, const char *fmt, va_list ap);

/* ---- what obs reads of a running mount ---- */

/* The parts of a mount the status document and a scrape read, borrowed
 * from the driver: valid while the mount serves (the engine from its
 * start until it is freed). NULL where the mount has none. */
struct obs_view {
	struct tree_ns *ns; /* the status document's files */
	struct engine *engine;
	struct cache *cache;
	struct fetch_proxies *proxies;
	struct obs_metrics *metrics;
	/* The read plans as a JSON array into buf (length or -ERANGE);
	 * NULL: none. */
	int (*plans_json)(void *arg, char *buf, size_t cap);
	void *plans_arg;
};

/* ---- the metrics (obs/metrics.c, obs/metrics_opt.c, obs/metricsd.c) ---- */

/* The metrics of one mount; every series carries mount="MOUNTPOINT" and
 * the labels of -o metrics_label= ("K=V", checked by
 * obs_metrics_label_check). Its counters are atomics: any thread adds to
 * them without a lock. 0 or -ENOMEM. obs_metrics_free(NULL) does
 * nothing. */
int obs_metrics_new(const char *mountpoint, char *const *labels,
		    unsigned nlabels, struct obs_metrics **out);
void obs_metrics_free(struct obs_metrics *mx);

/* fetch_config.on_request (ctx: the metrics): counts a request by its
 * source's host (the first 32 hosts by name, the rest as "other"), its
 * route and its status class; a lane's first byte into its histogram.
 * Allocates nothing; a new host takes a mutex once. */
void obs_metrics_on_request(void *ctx, const struct fetch_request_info *r);

/* A FUSE read took ns from its request to its reply; failed: it was
 * answered with an error. */
void obs_metrics_read(struct obs_metrics *mx, uint64_t ns, bool failed);

/* Checks the value of -o metrics_label=K=V: K a label name (letters,
 * digits, '_', not first a digit, not "__" first) that pacefs does not
 * set itself nor prev (the labels given before) names, V UTF-8 of at most
 * 256 bytes. 0 or -EINVAL with one line naming the option in err. */
int obs_metrics_label_check(const char *kv, char *const *prev, unsigned nprev,
			    char *err, size_t errlen);

/* Checks the syntax of -o metrics=ADDR:PORT (an IPv4 address, an IPv6
 * address in brackets, or a name; a port from 1 to 65535). 0 or -EINVAL
 * with one line naming the option in err. */
int obs_metrics_addr_check(const char *spec, char *err, size_t errlen);

/* Resolves spec (as checked) and listens on it: the socket (close on
 * exec, non-blocking) in *fd, or -errno with one line naming the option
 * and the address in err (a name that does not resolve, an address in
 * use or not this machine's). Before the daemon forks, so that the
 * terminal hears of it; the socket survives the fork. */
int obs_metrics_listen(const char *spec, int *fd, char *err, size_t errlen);

/* The endpoint: an HTTP server (libmicrohttpd, run by a thread of its
 * own) on listening socket fd (taken) that answers GET /metrics with
 * obs__metrics_text of the mount v shows (copied; its engine must be
 * running), one request a connection; its connections are kept as
 * obs__mconns_admit says. 0 or a negative errno (fd is closed). */
struct obs_metricsd;
int obs_metricsd_start(int fd, struct obs_metrics *mx, const struct obs_view *v,
		       struct obs_metricsd **out);

/* Stops the server: its thread ends at once, whatever its connections
 * are doing (a scrape under way is finished first), then every
 * connection is closed; before the engine is freed. NULL: nothing. */
void obs_metricsd_stop(struct obs_metricsd *d);

/* ---- the status document (obs/status.c) ---- */

/* The largest status document: an extended attribute's value limit. */
#define OBS_STATUS_MAX 65536

/* The state of the mount v shows as one JSON document (for `pacefs
 * status`, through the root's user.pacefs.status attribute): its length,
 * or -ERANGE when cap is too small. The files in use take at most half
 * of cap; those past it are counted in "files_left_out". Takes the
 * namespace's lock and the engine's. */
int obs_status_json(const struct obs_view *v, char *buf, size_t cap);

#endif

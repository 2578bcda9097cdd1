/* log_int: the log's internals (fs/driver/log.c: its escaping and its
 * rate limit) and the small helpers the driver's commands share; only
 * fs/driver/ includes it (and the log's tests). */
#ifndef FS_LOG_INT_H
#define FS_LOG_INT_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "fs/base.h"

/* Sends log lines to stderr (foreground) or syslog (daemon). Every line is
 * escaped (fs__escape): servers choose much of what is logged (names,
 * ETags, reasons). Lines of one call site and source (fs__log_key) are
 * rate-limited (fs__log_admit), debug lines aside, so that a fault that
 * repeats, or names a new file each time, cannot flood the log.
 * Thread-safe. */
void fs__log_init(bool to_stderr, enum fs_log_level level);

/* Lines as JSON objects (-o log_format=json: fs__log_json) rather than
 * text; before the first line. */
void fs__log_format_json(bool json);

/* fs/driver/logjson.c. Writes one log line as a JSON object into buf
 * (cap bytes, at least 64; NUL-terminated, no newline): "time" (UTC, ms),
 * "level", "message", and those of f that are set: "blob", "source"
 * (without userinfo), "range" ("START-END", inclusive), "status",
 * "error_class". A line too long for buf loses the end of its strings,
 * never its shape. Returns its length. */
size_t fs__log_json(char *buf, size_t cap, const struct timespec *when,
		    const char *level, const char *msg,
		    const struct fs_log_fields *f);
/* vsnprintf into buf with every URL's userinfo removed (removed before a
 * long line is cut): what every log line and terminal line goes through. */
void fs__format_shown(char *buf, size_t cap, const char *fmt, va_list ap);

/* A line's kind for the rate limit: where it is written and what it is
 * about, not its text, so that lines naming a thousand files or offsets
 * of one failure are one kind. A hash of its format fmt (each conversion
 * one mark) when that has at least FS_LOG_SITE_LETTERS letters of its
 * own; else (a site that hands a whole line: "%s", or an adapter's
 * "WORD: %s" such as "cache: %s") of its text msg with
 * each run of digits one mark and each URL its authority alone; and of
 * its source: the authority of source's URL, else of the first URL msg
 * names. So "%s: cannot open: %s" about 500 files of one origin is one
 * kind, and about another origin another. fmt and source may be NULL. */
uint64_t fs__log_key(const char *fmt, const char *source, const char *msg);

/* A format with fewer letters of its own ("%s", "%s: %s") says nothing of
 * what its lines are about: they are kept apart by their text. */
#define FS_LOG_SITE_LETTERS 4

/* Lines of one kind logged per window; the rest are counted. */
#define FS_LOG_BURST 5
#define FS_LOG_WINDOW_NS (10 * 1000000000ull)
#define FS_LOG_KINDS 32

/* Lines left out of one kind, reported when its window ends. */
struct fs_log_report {
	uint32_t suppressed;
	int level;
	char sample[120]; /* the last line left out, cut */
};

/* The rate limit's state: the kinds seen lately (the oldest window makes
 * room for a new kind, and its count is then lost). */
struct fs_log_limit {
	struct {
		bool used;
		uint64_t key;
		uint64_t since; /* the window's start */
		uint32_t logged;
		struct fs_log_report left_out;
	} kind[FS_LOG_KINDS];
};

/* Admits a line of kind key (text msg) at now_ns: true for the first
 * FS_LOG_BURST lines of a kind in each FS_LOG_WINDOW_NS; a later one is
 * counted (msg kept as the sample) and false. Pure; the caller locks. */
bool fs__log_admit(struct fs_log_limit *l, uint64_t key, int level,
		   const char *msg, uint64_t now_ns);

/* Takes one kind whose window has ended with lines left out: fills *r and
 * clears the count. False when there is none. Call it before each line (in
 * a loop) so that a storm that stopped is still reported. */
bool fs__log_take_report(struct fs_log_limit *l, uint64_t now_ns,
			 struct fs_log_report *r);

/* The default cache directory, a new string: /var/cache/pacefs for root,
 * else $XDG_CACHE_HOME/pacefs, else $HOME/.cache/pacefs, else the
 * account's home (getpwuid) + /.cache/pacefs; never a shared, guessable
 * path. NULL with the reason in err when there is none. */
char *fs__default_cache_dir(char *err, size_t errlen);

/* Writes n bytes as "512 B", "1.5 KiB", "12.0 MiB", ...; returns buf. */
const char *fs__human_size(uint64_t n, char *buf, size_t cap);

#endif

/* log: one line per event, to stderr in the foreground and to syslog when
 * daemonized, with the step, the source and the reason in the text; and
 * the small helpers every command of fs/ shares. */
#include <inttypes.h>
#include <limits.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <syslog.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <fuse_log.h>
#include <string.h>

#include "fs/fs_int.h"

static bool log_stderr = true;
static enum fs_log_level log_level = FS_LOG_INFO;

/* libfuse's messages ("fuse: unknown option(s): ...") take our path, so
 * that the terminal sees one pacefs line and the daemon's go to syslog.
 * libfuse builds one line from several calls: collect up to the newline. */
static void log_fuse(enum fuse_log_level level, const char *fmt, va_list ap)
{
	static _Thread_local char line[1024];
	static _Thread_local size_t used;
	const char *text = line;

	vsnprintf(line + used, sizeof(line) - used, fmt, ap);
	used = strlen(line);
	if (used == 0 || (line[used - 1] != '\n' && used < sizeof(line) - 1))
		return;
	while (used > 0 && line[used - 1] == '\n')
		line[--used] = '\0';
	if (strncmp(text, "fuse: ", 6) == 0)
		text += 6;
	fs__log(level <= FUSE_LOG_ERR	    ? FS_LOG_ERR
		: level == FUSE_LOG_WARNING ? FS_LOG_WARN
		: level == FUSE_LOG_DEBUG   ? FS_LOG_DEBUG
					    : FS_LOG_INFO,
		"%s", text);
	used = 0;
	line[0] = '\0';
}

void fs__log_init(bool to_stderr, enum fs_log_level level)
{
	log_stderr = to_stderr;
	log_level = level;
	if (!to_stderr)
		openlog("pacefs", LOG_PID, LOG_DAEMON);
	fuse_set_log_func(log_fuse);
}

void fs__log(enum fs_log_level level, const char *fmt, ...)
{
	static const char *const names[] = {"error", "warning", "info",
					    "debug"};
	static const int prio[] = {LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG};
	char msg[1024];
	va_list ap;

	if (level > log_level)
		return;
	va_start(ap, fmt);
	fs__format_shown(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (log_stderr)
		fprintf(stderr, "pacefs: %s: %s\n", names[level], msg);
	else
		syslog(prio[level], "%s", msg);
}

void fs__format_shown(char *buf, size_t cap, const char *fmt, va_list ap)
{
	va_list again;
	char *whole;
	int n;

	va_copy(again, ap);
	n = vsnprintf(buf, cap, fmt, ap);
	/* Redacted before it is cut, so that a cut inside a long userinfo
	 * never leaves part of it behind. */
	if (n >= 0 && (size_t)n >= cap &&
	    (whole = malloc((size_t)n + 1)) != NULL) {
		vsnprintf(whole, (size_t)n + 1, fmt, again);
		fetch_text_redact(whole);
		snprintf(buf, cap, "%s", whole);
		free(whole);
	} else if (n >= 0 && (size_t)n >= cap) {
		snprintf(buf, cap, "(a line too long to show)");
	} else {
		fetch_text_redact(buf);
	}
	va_end(again);
}

void fs__log_cache(void *ctx, enum cache_log_level level, const char *msg)
{
	(void)ctx;
	fs__log(level == CACHE_LOG_ERR	  ? FS_LOG_ERR
		: level == CACHE_LOG_WARN ? FS_LOG_WARN
					  : FS_LOG_INFO,
		"cache: %s", msg);
}

void fs__log_fetch(void *ctx, enum fetch_log_level level, const char *msg)
{
	(void)ctx;
	fs__log((enum fs_log_level)level, "fetch: %s", msg);
}

uint64_t fs__now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

char *fs__default_cache_dir(char *err, size_t errlen)
{
	const char *xdg = getenv("XDG_CACHE_HOME");
	const char *home = getenv("HOME");
	struct passwd pw, *res = NULL;
	char buf[PATH_MAX], pwbuf[4096];
	char *dir;

	if (geteuid() == 0)
		return strdup("/var/cache/pacefs");
	/* Without HOME, the account's own home: a fixed path under /var/tmp
	 * would let another user create it first and feed this one. */
	if ((home == NULL || home[0] != '/') &&
	    getpwuid_r(geteuid(), &pw, pwbuf, sizeof(pwbuf), &res) == 0 &&
	    res != NULL && pw.pw_dir != NULL && pw.pw_dir[0] == '/' &&
	    pw.pw_dir[1] != '\0')
		home = pw.pw_dir;
	else if (home != NULL && home[0] != '/')
		home = NULL;
	if (xdg != NULL && xdg[0] == '/')
		snprintf(buf, sizeof(buf), "%s/pacefs", xdg);
	else if (home != NULL && home[0] == '/')
		snprintf(buf, sizeof(buf), "%s/.cache/pacefs", home);
	else {
		snprintf(err, errlen,
			 "no cache directory: neither XDG_CACHE_HOME nor HOME "
			 "is set and uid %lu has no home directory; use -o "
			 "cache_dir=DIR",
			 (unsigned long)geteuid());
		return NULL;
	}
	dir = strdup(buf);
	if (dir == NULL)
		snprintf(err, errlen, "out of memory");
	return dir;
}

const char *fs__human_size(uint64_t n, char *buf, size_t cap)
{
	static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
	double v = (double)n;
	int u = 0;

	while (v >= 1024 && u < 5) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, cap, "%" PRIu64 " B", n);
	else
		snprintf(buf, cap, "%.1f %s", v, unit[u]);
	return buf;
}

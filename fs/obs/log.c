/* log: one line per event, to stderr in the foreground and to syslog when
 * daemonized, with the step, the source and the reason in the text (or,
 * with -o log_format=json, one JSON object with them as fields), every
 * byte a server chose escaped and repeated lines rate-limited. */
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <syslog.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fs/obs/obs.h"
#include "fs/obs/obs_int.h"

static bool log_stderr = true;
static bool log_json;
static enum fs_log_level log_level = FS_LOG_INFO;
static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static struct obs_log_limit log_limit; /* guarded by log_mu */

#define FNV_START 0xcbf29ce484222325ull
#define FNV_STEP(h, c) (((h) ^ (unsigned char)(c)) * 0x100000001b3ull)

/* The length of the conversion at fmt (its '%' included): flags, width,
 * precision and length up to the conversion's letter. */
static size_t conversion_len(const char *fmt)
{
	size_t n = 1;

	if (fmt[n] == '%')
		return 2;
	while (fmt[n] != '\0' && strchr("diouxXeEfFgGaAcspnm", fmt[n]) == NULL)
		n++;
	return fmt[n] != '\0' ? n + 1 : n;
}

/* The letters of fmt outside its conversions: how much of its lines
 * their call site writes rather than its arguments. */
static size_t fixed_letters(const char *fmt)
{
	size_t n = 0;

	for (const char *p = fmt; *p != '\0';) {
		if (*p == '%') {
			p += conversion_len(p);
			continue;
		}
		n += (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z');
		p++;
	}
	return n;
}

/* True for an adapter's format, "WORD: %s" ("cache: %s", "fetch: %s"):
 * the line is another module's, handed whole. */
static bool handed_whole(const char *fmt)
{
	const char *p = fmt;

	while ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z'))
		p++;
	return p > fmt && strcmp(p, ": %s") == 0;
}

/* The length of the authority at a (just past a URL's "://"). */
static size_t authority_len(const char *a)
{
	return strcspn(a, "/?# \t\r\n\"'");
}

/* Where the authority of the first URL in text is: [*at, *at + return). */
static size_t first_authority(const char *text, const char **at)
{
	const char *p = text != NULL ? strstr(text, "://") : NULL;

	if (p == NULL)
		return 0;
	*at = p + 3;
	return authority_len(*at);
}

uint64_t obs__log_key(const char *fmt, const char *source, const char *msg)
{
	uint64_t h = FNV_START;
	const char *auth = NULL;
	size_t alen;
	bool in_digits = false;

	if (fmt != NULL && fixed_letters(fmt) >= OBS_LOG_SITE_LETTERS &&
	    !handed_whole(fmt)) {
		/* The call site: its text, each conversion one mark. */
		for (const char *p = fmt; *p != '\0';) {
			if (*p == '%' && p[1] != '%') {
				h = FNV_STEP(h, '%');
				p += conversion_len(p);
				continue;
			}
			h = FNV_STEP(h, *p);
			p += *p == '%' ? 2 : 1;
		}
	} else {
		/* A line its site hands whole ("%s"): its text, each run of
		 * digits one mark, each URL its authority alone. */
		for (const char *p = msg; *p != '\0'; p++) {
			bool digit = *p >= '0' && *p <= '9';

			if (p[0] == ':' && p[1] == '/' && p[2] == '/') {
				const char *a = p + 3;
				size_t n = authority_len(a);

				for (size_t i = 0; i < n; i++)
					h = FNV_STEP(h, a[i]);
				p = a + n + strcspn(a + n, " \t\r\n\"'") - 1;
				in_digits = false;
				continue;
			}
			if (digit && in_digits)
				continue;
			in_digits = digit;
			h = FNV_STEP(h, digit ? '#' : *p);
		}
	}
	/* The source: the line's own, else the first URL it names. */
	alen = first_authority(source, &auth);
	if (alen == 0)
		alen = first_authority(msg, &auth);
	h = FNV_STEP(h, '\n');
	for (size_t i = 0; i < alen; i++)
		h = FNV_STEP(h, auth[i]);
	return h;
}

bool obs__log_admit(struct obs_log_limit *l, uint64_t key, int level,
		    const char *msg, uint64_t now_ns)
{
	size_t slot = OBS_LOG_KINDS, oldest = 0;

	for (size_t i = 0; i < OBS_LOG_KINDS; i++) {
		if (l->kind[i].used && l->kind[i].key == key) {
			slot = i;
			break;
		}
		if (!l->kind[i].used ||
		    (l->kind[oldest].used &&
		     l->kind[i].since < l->kind[oldest].since))
			oldest = i;
	}
	if (slot == OBS_LOG_KINDS ||
	    now_ns - l->kind[slot].since >= OBS_LOG_WINDOW_NS) {
		/* A new kind, or a new window of one. */
		if (slot == OBS_LOG_KINDS)
			slot = oldest;
		memset(&l->kind[slot], 0, sizeof(l->kind[slot]));
		l->kind[slot].used = true;
		l->kind[slot].key = key;
		l->kind[slot].since = now_ns;
	}
	if (l->kind[slot].logged < OBS_LOG_BURST) {
		l->kind[slot].logged++;
		return true;
	}
	l->kind[slot].left_out.suppressed++;
	l->kind[slot].left_out.level = level;
	snprintf(l->kind[slot].left_out.sample,
		 sizeof(l->kind[slot].left_out.sample), "%s", msg);
	return false;
}

bool obs__log_take_report(struct obs_log_limit *l, uint64_t now_ns,
			  struct obs_log_report *r)
{
	for (size_t i = 0; i < OBS_LOG_KINDS; i++) {
		if (!l->kind[i].used || l->kind[i].left_out.suppressed == 0 ||
		    now_ns - l->kind[i].since < OBS_LOG_WINDOW_NS)
			continue;
		*r = l->kind[i].left_out;
		l->kind[i].left_out.suppressed = 0;
		return true;
	}
	return false;
}

void obs_log_init(bool to_stderr, enum fs_log_level level)
{
	log_stderr = to_stderr;
	log_level = level;
	if (!to_stderr)
		openlog("pacefs", LOG_PID, LOG_DAEMON);
}

void obs_log_format_json(bool json)
{
	log_json = json;
}

/* Writes one escaped line: text, or a JSON object with f's fields. Caller
 * holds log_mu. */
static void log_line(enum fs_log_level level, const char *msg,
		     const struct fs_log_fields *f)
{
	static const char *const names[] = {"error", "warning", "info",
					    "debug"};
	static const int prio[] = {LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG};
	char safe[8 * 1024]; /* every byte of msg escaped still fits */

	if (log_json) {
		struct timespec now;

		clock_gettime(CLOCK_REALTIME, &now);
		obs__log_json(safe, sizeof(safe), &now, names[level], msg, f);
		if (log_stderr)
			fprintf(stderr, "%s\n", safe);
		else
			syslog(prio[level], "%s", safe);
		return;
	}
	fs__escape(msg, safe, sizeof(safe));
	if (log_stderr)
		fprintf(stderr, "pacefs: %s: %s\n", names[level], safe);
	else
		syslog(prio[level], "%s", safe);
}

void obs_vlog(enum fs_log_level level, const char *fmt, va_list ap)
{
	obs_vlog_about(level, NULL, fmt, ap);
}

void obs_vlog_about(enum fs_log_level level, const struct fs_log_fields *f,
		    const char *fmt, va_list ap)
{
	char msg[1024];
	struct obs_log_report r;
	uint64_t now;

	if (level > log_level)
		return;
	obs_format_shown(msg, sizeof(msg), fmt, ap);
	pthread_mutex_lock(&log_mu);
	now = fs__now_ns(); /* under the lock: windows never go backwards */
	while (obs__log_take_report(&log_limit, now, &r)) {
		char line[256];

		snprintf(line, sizeof(line),
			 "%" PRIu32 " similar lines left out in %llu s; the "
			 "last: %s",
			 r.suppressed, OBS_LOG_WINDOW_NS / 1000000000ull,
			 r.sample);
		log_line((enum fs_log_level)r.level, line, NULL);
	}
	if (level == FS_LOG_DEBUG ||
	    obs__log_admit(&log_limit,
			   obs__log_key(fmt, f != NULL ? f->source : NULL, msg),
			   (int)level, msg, now))
		log_line(level, msg, f);
	pthread_mutex_unlock(&log_mu);
}

void obs_log(enum fs_log_level level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	obs_vlog(level, fmt, ap);
	va_end(ap);
}

void obs_format_shown(char *buf, size_t cap, const char *fmt, va_list ap)
{
	fetch_text_vformat_redacted(buf, cap, fmt, ap);
}

void obs_log_cache(void *ctx, enum cache_log_level level, const char *msg)
{
	(void)ctx;
	obs_log(level == CACHE_LOG_ERR	  ? FS_LOG_ERR
		: level == CACHE_LOG_WARN ? FS_LOG_WARN
					  : FS_LOG_INFO,
		"cache: %s", msg);
}

void obs_log_hook(void *ctx, enum fs_log_level level, const char *fmt,
		  va_list ap)
{
	(void)ctx;
	obs_vlog(level, fmt, ap);
}

void obs_log_fields_hook(void *ctx, enum fs_log_level level,
			 const struct fs_log_fields *f, const char *fmt,
			 va_list ap)
{
	(void)ctx;
	obs_vlog_about(level, f, fmt, ap);
}

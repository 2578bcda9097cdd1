/* logjson: a log line as one JSON object on one line, for a collector
 * (-o log_format=json): its time, level and message, and what it is about
 * as fields of their own (file, source, range, status, error class). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fetch/fetch.h"
#include "fs/obs/obs_int.h"

/* What is left for a field: the closing brace and newline are kept. */
#define TAIL 3

struct line {
	char *buf;
	size_t cap, used;
};

static void put_raw(struct line *l, const char *s)
{
	size_t n = strlen(s);

	if (l->used + n + TAIL < l->cap) {
		memcpy(l->buf + l->used, s, n);
		l->used += n;
	}
}

/* ,"key":"value" with value escaped; a value cut to fit stays whole
 * escapes and sequences. */
static void put_str(struct line *l, const char *key, const char *value)
{
	char head[40];
	size_t room, n;

	snprintf(head, sizeof(head), ",\"%s\":\"", key);
	if (l->used + strlen(head) + 2 + TAIL >= l->cap)
		return;
	put_raw(l, head);
	room = l->cap - l->used - 1 - TAIL;
	n = fs__json_escape(value, l->buf + l->used, room);
	/* Cut: up to where the escape stopped. */
	l->used += n < room ? n : strlen(l->buf + l->used);
	put_raw(l, "\"");
}

size_t obs__log_json(char *buf, size_t cap, const struct timespec *when,
		     const char *level, const char *msg,
		     const struct fs_log_fields *f)
{
	struct line l = {.buf = buf, .cap = cap};
	char stamp[64], num[64];
	struct tm tm;

	gmtime_r(&when->tv_sec, &tm);
	strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(num, sizeof(num), ".%03ldZ", when->tv_nsec / 1000000);
	buf[0] = '\0';
	put_raw(&l, "{\"time\":\"");
	put_raw(&l, stamp);
	put_raw(&l, num);
	put_raw(&l, "\"");
	put_str(&l, "level", level);
	put_str(&l, "message", msg);
	if (f != NULL && f->blob != NULL)
		put_str(&l, "blob", f->blob);
	if (f != NULL && f->source != NULL) {
		/* Never its userinfo, whatever the line says of it. */
		char *shown = fetch_url_redacted(f->source);

		if (shown != NULL)
			put_str(&l, "source", shown);
		free(shown);
	}
	if (f != NULL && f->end > f->start) {
		snprintf(num, sizeof(num), "%" PRIu64 "-%" PRIu64, f->start,
			 f->end - 1);
		put_str(&l, "range", num);
	}
	if (f != NULL && f->status != 0) {
		snprintf(num, sizeof(num), ",\"status\":%ld", f->status);
		put_raw(&l, num);
	}
	if (f != NULL && f->error != NULL)
		put_str(&l, "error_class", f->error);
	memcpy(buf + l.used, "}", 2);
	return l.used + 1;
}

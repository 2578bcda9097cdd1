/* opts: the pacefs command line: the table of our -o options, the
 * positional URL and mountpoint, what is passed through to libfuse, and
 * the values options share (file names, sizes). */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <strings.h>

#include <fuse_lowlevel.h>
#include <fuse_opt.h>

#include "cache/cache.h"
#include "fetch/fetch.h"
#include "fs/auth/auth.h"
#include "fs/base.h"
#include "fs/cli/cli_int.h"
#include "fs/obs/obs.h"
#include "fs/fs.h"

_Static_assert(FS_CHUNK_MIN == CACHE_BLOCK_SIZE,
	       "the smallest chunk is a cache block");

/* What libfuse's parser tells apart before the table has a say: the
 * command's own flags, and libfuse's "-o debug", which pacefs takes as
 * -d, and a positional "-". Every other -o option reaches opt_proc as
 * FUSE_OPT_KEY_OPT. */
enum {
	KEY_HELP,
	KEY_VERSION,
	KEY_FOREGROUND,
	KEY_DEBUG,
	KEY_DASH,
};

static const struct fuse_opt opt_spec[] = {
	FUSE_OPT_KEY("-h", KEY_HELP),
	FUSE_OPT_KEY("--help", KEY_HELP),
	FUSE_OPT_KEY("-V", KEY_VERSION),
	FUSE_OPT_KEY("--version", KEY_VERSION),
	FUSE_OPT_KEY("-f", KEY_FOREGROUND),
	FUSE_OPT_KEY("-d", KEY_DEBUG),
	FUSE_OPT_KEY("debug", KEY_DEBUG),
	/* A URL of "-" (read elsewhere: cli__url_read), not an option. */
	FUSE_OPT_KEY("-", KEY_DASH),
	FUSE_OPT_END,
};

struct parse_state {
	struct fs_opts *o;
	char *err;
	size_t errlen;
};

/* How an option's value is read, and the type of the field it sets. */
enum opt_kind {
	KIND_FLAG,   /* "name" alone: a bool, set */
	KIND_STRING, /* "name=V": a char *, the last V given, not empty */
	KIND_LIST,   /* "name=V", repeatable: appended to a char ** and its
			unsigned count, V not empty */
	KIND_UINT,   /* "name=N": an unsigned, lo <= N <= hi */
	KIND_MS,     /* "name=S": seconds, three decimals at most, into an
			unsigned count of ms, lo <= ms <= hi */
	KIND_SIZE,   /* "name=SIZE": a uint64_t (fs_parse_size), lo to hi,
			a power of two when pow2 */
	KIND_CHOICE, /* "name=W": an int, W's index in choices */
	KIND_OTHER,  /* "name=V": its check reads it and sets its fields */
};

/* One -o option: the parser reads it by its kind, --help prints its
 * form and help, and a test holds the man page's and the README's lists
 * to the table's (fs_opts_form). */
struct opt_def {
	const char *name;
	enum opt_kind kind;
	size_t field; /* offset of the field of struct fs_opts it sets */
	size_t count; /* KIND_LIST: offset of the list's count */
	uint64_t lo, hi;
	bool pow2;
	const char *const *choices; /* KIND_CHOICE: NULL-ended */
	const char *why;	    /* KIND_SIZE: said after its least size */
	/* Checks V after the kind's own checks and before it is stored
	 * (KIND_OTHER: reads it); returns 0 or a negative errno with the
	 * line in s->err. */
	int (*check)(struct parse_state *s, const char *v);
	const char *arg;  /* the value's name in --help and the man page */
	const char *help; /* --help's text; '\n' starts an indented line */
};

/* The offset of struct fs_opts's field f, which must be of type t: a
 * row whose kind does not match its field's type matches no association
 * of the _Generic, and does not compile. */
#define FIELD(f, t)                                                            \
	(offsetof(struct fs_opts, f) +                                         \
	 0 * _Generic(((struct fs_opts *)0)->f, t : 1))

#define OPT_FLAG(n, f, h)                                                      \
	{                                                                      \
		.name = n, .kind = KIND_FLAG, .field = FIELD(f, bool),         \
		.help = h                                                      \
	}
#define OPT_STRING(n, f, chk, a, h)                                            \
	{                                                                      \
		.name = n, .kind = KIND_STRING, .field = FIELD(f, char *),     \
		.check = chk, .arg = a, .help = h                              \
	}
#define OPT_LIST(n, f, cnt, chk, a, h)                                         \
	{                                                                      \
		.name = n, .kind = KIND_LIST, .field = FIELD(f, char **),      \
		.count = FIELD(cnt, unsigned), .check = chk, .arg = a,         \
		.help = h                                                      \
	}
#define OPT_UINT(n, f, l, u, a, h)                                             \
	{                                                                      \
		.name = n, .kind = KIND_UINT, .field = FIELD(f, unsigned),     \
		.lo = l, .hi = u, .arg = a, .help = h                          \
	}
#define OPT_MS(n, f, l, u, a, h)                                               \
	{                                                                      \
		.name = n, .kind = KIND_MS, .field = FIELD(f, unsigned),       \
		.lo = l, .hi = u, .arg = a, .help = h                          \
	}
#define OPT_SIZE(n, f, l, u, p2, y, a, h)                                      \
	{                                                                      \
		.name = n, .kind = KIND_SIZE, .field = FIELD(f, uint64_t),     \
		.lo = l, .hi = u, .pow2 = p2, .why = y, .arg = a, .help = h    \
	}
#define OPT_CHOICE(n, f, c, a, h)                                              \
	{                                                                      \
		.name = n, .kind = KIND_CHOICE, .field = FIELD(f, int),        \
		.choices = c, .arg = a, .help = h                              \
	}
#define OPT_OTHER(n, rd, a, h)                                                 \
	{                                                                      \
		.name = n, .kind = KIND_OTHER, .check = rd, .arg = a,          \
		.help = h                                                      \
	}

/* Kept for a year at most: a longer TTL or cache time is a typo. */
#define YEAR_S (86400u * 365u)

static const char *const log_levels[] = {"error", "warning", "info", "debug",
					 NULL};
static const char *const log_formats[] = {"text", "json", NULL};
/* In enum cache_sync's order. */
static const char *const sync_modes[] = {"full", "meta", "none", NULL};
static const char *const on_off[] = {"on", "off", NULL};
_Static_assert(CACHE_SYNC_FULL == 0 && CACHE_SYNC_META == 1 &&
		       CACHE_SYNC_NONE == 2,
	       "-o cache_sync= stores its word's index");

static int check_header(struct parse_state *s, const char *h);
static int check_header_file(struct parse_state *s, const char *path);
static int check_proxy(struct parse_state *s, const char *v);
static int read_speculate(struct parse_state *s, const char *v);
static int read_sha256(struct parse_state *s, const char *v);
static int read_revalidate(struct parse_state *s, const char *v);
static int check_metrics(struct parse_state *s, const char *v);
static int check_metrics_label(struct parse_state *s, const char *v);

/* In --help's order, which is the man page's. */
static const struct opt_def opt_table[] = {
	OPT_STRING("cache_dir", cache_dir, NULL, "DIR",
		   "cache directory (default: $XDG_CACHE_HOME/pacefs,\n"
		   "else ~/.cache/pacefs; /var/cache/pacefs for root)"),
	OPT_FLAG("cache_shared", cache_shared,
		 "accept a cache directory that another user owns\n"
		 "or group/others may write (shared on purpose)"),
	OPT_STRING("name", name, NULL, "NAME",
		   "file name (default: the URL's last path segment)"),
	OPT_UINT("lanes", lanes, 1, 256, "N",
		 "connections of the whole mount (default: 32)"),
	OPT_UINT("host_lanes", host_lanes, 1, 256, "N",
		 "connections to one origin (default: 16)"),
	OPT_UINT("connect_timeout", connect_timeout_s, 1, 3600, "SECS",
		 "connect timeout in seconds (default: 10)"),
	OPT_UINT("read_timeout", read_timeout_s, 1, 86400, "SECS",
		 "a blocked read fails with EIO after SECS seconds,\n"
		 "and a lookup or readdir waiting on a listing\n"
		 "(default: 60)"),
	OPT_UINT("stall_timeout", stall_timeout_s, 1, 3600, "SECS",
		 "a transfer with no byte for SECS seconds is\n"
		 "retried (default: 10)"),
	OPT_MS("readahead", readahead_ms, 100, 600000, "SECS",
	       "a sequential reader's lead: SECS seconds of\n"
	       "what it consumes (default: 3)"),
	/* A request is never cut to fit: the cap holds the largest. */
	OPT_SIZE("inflight_max", inflight_max, FS_INFLIGHT_MIN, UINT64_MAX,
		 false, "the largest request", "SIZE",
		 "bytes requested and not yet received, at most\n"
		 "(8M or more; default: 32M)"),
	OPT_UINT("retry_after_max", retry_after_max_s, 1, 86400, "SECS",
		 "a 429 or 503 holds its source at most SECS\n"
		 "seconds, whatever Retry-After asks (default: 60)"),
	OPT_STRING("url_file", url_file, NULL, "FILE",
		   "the URL (and mirrors, one a line) from FILE\n"
		   "(mode 0600), for a URL argument of '-'"),
	OPT_FLAG("show_signatures", show_signatures,
		 "show signed query values (X-Amz-Signature,\n"
		 "token, ...) in logs, status and attributes"),
	OPT_LIST("mirror", mirrors, nmirrors, NULL, "URL",
		 "another source of the blob (repeatable)"),
	OPT_LIST("header", headers, nheaders, check_header, "\"Name: value\"",
		 "a request header (repeatable)"),
	OPT_LIST("header_file", header_files, nheader_files, check_header_file,
		 "FILE", "request headers from a file (mode 0600)"),
	OPT_STRING("auth_command", auth_command, NULL, "CMD",
		   "a command printing headers or S3 credential JSON"),
	OPT_STRING("endpoint", endpoint, NULL, "URL",
		   "S3: the server (http(s)://host[:port])"),
	OPT_STRING("region", region, NULL, "R", "S3: the bucket's region"),
	OPT_STRING("s3_addressing", s3_addressing, NULL, "path|virtual",
		   "S3: BUCKET in the path or in the host name"),
	OPT_FLAG("creds_readable", creds_readable,
		 "accept a credentials file others may read"),
	OPT_STRING("cafile", cafile, NULL, "FILE",
		   "trust these CAs for HTTPS instead of the system's"),
	/* Whole cache blocks, and a power of two so that a cache in front
	 * of the origin (nginx's slice) can key on them. */
	OPT_SIZE("chunk", chunk, FS_CHUNK_MIN, FS_CHUNK_MAX, true, NULL, "SIZE",
		 "requests cover whole chunks (64K-8M; 64K)"),
	OPT_STRING("proxy", proxy, check_proxy, "LIST",
		   "proxies, \"A|B;C;DIRECT\": groups tried in order,\n"
		   "members sharing the load"),
	OPT_UINT("proxy_reset", proxy_reset_s, 1, 86400, "SECS",
		 "a failed proxy is asked again after SECS (300)"),
	OPT_FLAG("creds_via_proxy", creds_via_proxy,
		 "send an http:// origin's credentials (userinfo,\n"
		 "headers, a signed query) through the proxy"),
	OPT_FLAG("insecure", insecure, "do not verify TLS certificates"),
	OPT_SIZE("cache_size", cache_size, 0, UINT64_MAX, false, NULL, "SIZE",
		 "cache budget, least recently used out (K/M/G/T)"),
	OPT_CHOICE("cache_sync", cache_sync, sync_modes, "MODE",
		   "meta (default), full or none"),
	OPT_OTHER("revalidate", read_revalidate, "POLICY",
		  "always (default), never, or SECONDS since the\n"
		  "origin last confirmed a file"),
	OPT_OTHER("speculate", read_speculate, "SIZE|off",
		  "scattered readers' likely next bytes are fetched\n"
		  "on idle lanes, a file up to SIZE whole (default:\n"
		  "64M); off: no speculative byte (a metered link)"),
	OPT_CHOICE("listahead", listahead, on_off, "on|off",
		   "a process that opens a directory's files in\n"
		   "its listing's order has the next ones fetched\n"
		   "ahead, as a read plan's (default: on)"),
	OPT_OTHER("sha256", read_sha256, "HEX",
		  "the blob's SHA-256, checked once it is all held"),
	OPT_UINT("listing_ttl", listing_ttl_s, 0, YEAR_S, "SECS",
		 "re-read directory indexes after SECS seconds (60)"),
	OPT_UINT("attr_timeout", attr_timeout_s, 0, YEAR_S, "SECS",
		 "kernel caching of attributes (default: 60)"),
	OPT_UINT("entry_timeout", entry_timeout_s, 0, YEAR_S, "SECS",
		 "kernel caching of names (default: 60)"),
	OPT_CHOICE("log_level", log_level, log_levels, "LEVEL",
		   "error, warning, info or debug (default: info)"),
	OPT_CHOICE("log_format", log_format, log_formats, "FORMAT",
		   "text (default) or json, one object a line"),
	OPT_STRING("metrics", metrics, check_metrics, "ADDR:PORT",
		   "serve Prometheus metrics at\nhttp://ADDR:PORT/metrics"),
	OPT_LIST("metrics_label", metrics_labels, nmetrics_labels,
		 check_metrics_label, "NAME=VALUE",
		 "a label on every series (repeatable)"),
};

#define NOPTS (sizeof(opt_table) / sizeof(opt_table[0]))

/* A size as the options write it: 64K, 8M. */
static const char *size_name(uint64_t v, char *buf, size_t cap)
{
	static const char units[] = "TGMK";

	for (int i = 0; i < 4; i++) {
		uint64_t unit = 1ull << (10 * (4 - i));

		if (v >= unit && v % unit == 0) {
			snprintf(buf, cap, "%" PRIu64 "%c", v / unit, units[i]);
			return buf;
		}
	}
	snprintf(buf, cap, "%" PRIu64, v);
	return buf;
}

/* Seconds with at most three decimals ("2.5") into ms, lo <= ms <= hi. */
static bool read_ms(const char *v, uint64_t lo, uint64_t hi, uint64_t *out)
{
	const char *p = v;
	uint64_t ms = 0;
	int whole = 0, frac = 0;

	for (; *p >= '0' && *p <= '9' && ms <= hi; p++, whole++)
		ms = ms * 10 + (uint64_t)(*p - '0');
	ms *= 1000;
	if (*p == '.')
		for (p++; *p >= '0' && *p <= '9' && frac < 3; p++, frac++)
			ms += (uint64_t)(*p - '0') * (frac == 0	  ? 100
						      : frac == 1 ? 10
								  : 1);
	if (whole == 0 || *p != '\0' || ms < lo || ms > hi)
		return false;
	*out = ms;
	return true;
}

/* A whole number, lo <= N <= hi. */
static bool read_uint(const char *v, uint64_t lo, uint64_t hi, uint64_t *out)
{
	char *end;
	unsigned long long n;

	errno = 0;
	n = strtoull(v, &end, 10);
	if (v[0] == '\0' || *end != '\0' || errno != 0 || n < lo || n > hi)
		return false;
	*out = n;
	return true;
}

/* The index of v in names (NULL-ended), or -1 with them all in all. */
static int read_choice(const char *v, const char *const *names, char *all,
		       size_t cap)
{
	size_t used = 0;

	all[0] = '\0';
	for (int i = 0; names[i] != NULL; i++) {
		if (strcmp(v, names[i]) == 0)
			return i;
		used += (size_t)snprintf(all + used, cap - used, "%s%s",
					 i ? ", " : "", names[i]);
	}
	return -1;
}

/* The refusal of a number or a size, naming what it should be. */
static int refuse_value(struct parse_state *s, const struct opt_def *d,
			const char *v)
{
	char lo[32], hi[32];

	switch (d->kind) {
	case KIND_UINT:
		return fs__errf(s->err, s->errlen, -EINVAL,
				"option %s: '%s' is not a whole number from "
				"%" PRIu64 " to %" PRIu64,
				d->name, v, d->lo, d->hi);
	case KIND_MS:
		return fs__errf(s->err, s->errlen, -EINVAL,
				"option %s: '%s' is not a number of seconds "
				"from %" PRIu64 ".%03" PRIu64 " to %" PRIu64
				" (e.g. 2.5)",
				d->name, v, d->lo / 1000, d->lo % 1000,
				d->hi / 1000);
	default:
		break;
	}
	if (d->pow2)
		return fs__errf(s->err, s->errlen, -EINVAL,
				"option %s: '%s' is not a power of two from "
				"%s to %s",
				d->name, v, size_name(d->lo, lo, sizeof(lo)),
				size_name(d->hi, hi, sizeof(hi)));
	if (d->lo > 0)
		return fs__errf(s->err, s->errlen, -EINVAL,
				"option %s: '%s' is not a size of at least "
				"%s%s%s%s",
				d->name, v, size_name(d->lo, lo, sizeof(lo)),
				d->why ? " (" : "", d->why ? d->why : "",
				d->why ? ")" : "");
	return fs__errf(s->err, s->errlen, -EINVAL,
			"option %s: '%s' is not a size (a number with an "
			"optional K, M, G or T)",
			d->name, v);
}

/* Appends a copy of v to the list at field, its count at count. */
static int append(char ***list, unsigned *n, const char *v)
{
	char **grown = realloc(*list, (*n + 1) * sizeof(**list));

	if (grown == NULL)
		return -ENOMEM;
	*list = grown;
	grown[*n] = strdup(v);
	if (grown[*n] == NULL)
		return -ENOMEM;
	(*n)++;
	return 0;
}

/* A string or a list's value, once checked. */
static int store_string(struct parse_state *s, const struct opt_def *d,
			const char *v)
{
	char *field = (char *)s->o + d->field;
	int rc = 0;

	if (v[0] == '\0')
		return fs__errf(s->err, s->errlen, -EINVAL,
				"option %s: empty value", d->name);
	if (d->check != NULL) {
		rc = d->check(s, v);
		if (rc != 0)
			return rc;
	}
	if (d->kind == KIND_LIST) {
		rc = append((char ***)(void *)field,
			    (unsigned *)(void *)((char *)s->o + d->count), v);
	} else {
		char *copy = strdup(v);

		free(*(char **)(void *)field);
		*(char **)(void *)field = copy;
		rc = copy != NULL ? 0 : -ENOMEM;
	}
	if (rc != 0)
		return fs__errf(s->err, s->errlen, rc, "out of memory");
	return 0;
}

/* Reads "name=V" (or a flag's "name") into the field its row names. */
static int read_option(struct parse_state *s, const struct opt_def *d,
		       const char *v)
{
	void *field = (char *)s->o + d->field;
	char all[128];
	uint64_t n;
	int i;

	switch (d->kind) {
	case KIND_FLAG:
		*(bool *)field = true;
		return 0;
	case KIND_STRING:
	case KIND_LIST:
		return store_string(s, d, v);
	case KIND_UINT:
		if (!read_uint(v, d->lo, d->hi, &n))
			return refuse_value(s, d, v);
		*(unsigned *)field = (unsigned)n;
		return 0;
	case KIND_MS:
		if (!read_ms(v, d->lo, d->hi, &n))
			return refuse_value(s, d, v);
		*(unsigned *)field = (unsigned)n;
		return 0;
	case KIND_SIZE:
		if (fs_parse_size(v, &n) != 0 || n < d->lo || n > d->hi ||
		    (d->pow2 && (n & (n - 1)) != 0))
			return refuse_value(s, d, v);
		*(uint64_t *)field = n;
		return 0;
	case KIND_CHOICE:
		i = read_choice(v, d->choices, all, sizeof(all));
		if (i < 0)
			return fs__errf(s->err, s->errlen, -EINVAL,
					"option %s: '%s' is not one of %s",
					d->name, v, all);
		*(int *)field = i;
		return 0;
	case KIND_OTHER:
		return d->check(s, v);
	}
	return -EINVAL;
}

/* A header must be "Name: value" on one line, with a token for a name,
 * and none of those pacefs sets. */
static int check_header(struct parse_state *s, const char *h)
{
	const char *colon = strchr(h, ':');

	if (auth_header_check(h, strlen(h)) != 0)
		return fs__errf(s->err, s->errlen, -EINVAL,
				"option header: '%.*s...' is not 'Name: "
				"value' on one line",
				(int)(colon != NULL ? colon - h : 20), h);
	if (auth_header_owned(h, strlen(h)) != NULL)
		return fs__errf(s->err, s->errlen, -EINVAL,
				"option header: pacefs sets %s itself",
				auth_header_owned(h, strlen(h)));
	return 0;
}

/* Checks the file that "header_file=PATH" names; the mount reads it
 * (fs/auth/creds.c), and again whenever it changes. */
static int check_header_file(struct parse_state *s, const char *path)
{
	char **list = NULL, why[512];
	unsigned n = 0;

	if (auth_headers_load(path, geteuid(), &list, &n, why, sizeof(why)) !=
	    0)
		return fs__errf(s->err, s->errlen, -EINVAL,
				"option header_file: %s", why);
	auth_headers_free(list, n);
	return 0;
}

/* Refused here, with the part that is wrong; driver/prepare.c builds the list
 * the requests use. */
static int check_proxy(struct parse_state *s, const char *v)
{
	struct fetch_proxies *list = NULL;
	char why[256];

	if (fetch_proxies_new(v, 0, &list, why, sizeof(why)) != 0)
		return fs__errf(s->err, s->errlen, -EINVAL, "%s", why);
	fetch_proxies_free(list);
	return 0;
}

static int read_sha256(struct parse_state *s, const char *v)
{
	size_t at;
	int rc = fs__unhex(v, strlen(v), s->o->sha256, 32, &at);

	if (rc == -EINVAL)
		return fs__errf(s->err, s->errlen, -EINVAL,
				"option sha256: expected 64 hex digits, got "
				"%zu characters",
				strlen(v));
	if (rc != 0)
		return fs__errf(s->err, s->errlen, -EINVAL,
				"option sha256: '%c' is not a hex digit",
				v[at]);
	s->o->has_sha256 = true;
	return 0;
}

/* off (0), or the size up to which a file may be filled whole. */
static int read_speculate(struct parse_state *s, const char *v)
{
	uint64_t n;

	if (strcmp(v, "off") == 0)
		n = 0;
	else if (fs_parse_size(v, &n) != 0)
		return fs__errf(s->err, s->errlen, -EINVAL,
				"option speculate: '%s' is not off or a size",
				v);
	s->o->speculate = n;
	return 0;
}

/* always, never, or the seconds a confirmed record is trusted. */
static int read_revalidate(struct parse_state *s, const char *v)
{
	uint64_t secs;

	if (strcmp(v, "always") == 0)
		s->o->revalidate_s = -1;
	else if (strcmp(v, "never") == 0)
		s->o->revalidate_s = INT64_MAX;
	else if (read_uint(v, 0, UINT32_MAX, &secs))
		s->o->revalidate_s = (int64_t)secs;
	else
		return fs__errf(s->err, s->errlen, -EINVAL,
				"option revalidate: '%s' is not always, never "
				"or a number of seconds",
				v);
	return 0;
}

/* obs/metrics_opt.c says what is wrong, naming the
 * option. */
static int check_metrics(struct parse_state *s, const char *v)
{
	return obs_metrics_addr_check(v, s->err, s->errlen);
}

static int check_metrics_label(struct parse_state *s, const char *v)
{
	return obs_metrics_label_check(v, s->o->metrics_labels,
				       s->o->nmetrics_labels, s->err,
				       s->errlen);
}

/* The row of the -o option arg ("name=V" or a flag's "name"), or NULL
 * when it is none of ours: "name=V" for a flag, or "name" alone for a
 * value, is libfuse's to take or refuse, as an unknown name is. */
static const struct opt_def *find_option(const char *arg, const char **v)
{
	const char *eq = strchr(arg, '=');
	size_t len = eq != NULL ? (size_t)(eq - arg) : strlen(arg);

	for (size_t i = 0; i < NOPTS; i++) {
		const struct opt_def *d = &opt_table[i];

		if (strlen(d->name) != len || strncmp(d->name, arg, len) != 0)
			continue;
		if ((d->kind == KIND_FLAG) != (eq == NULL))
			return NULL;
		*v = eq != NULL ? eq + 1 : "";
		return d;
	}
	return NULL;
}

/* A positional argument: the URL, then the mountpoint. */
static int positional(struct parse_state *s, const char *arg)
{
	char **slot = s->o->url == NULL ? &s->o->url : &s->o->mountpoint;

	if (*slot != NULL)
		return fs__errf(s->err, s->errlen, -EINVAL,
				"unexpected argument '%s' (usage: pacefs "
				"[options] URL MOUNTPOINT)",
				arg);
	*slot = strdup(arg);
	return *slot != NULL ? 0 : -ENOMEM;
}

/* libfuse's callback: 0 consumed, 1 left for libfuse, -1 refused (the
 * line in s->err, but for an allocation that failed). */
static int opt_proc(void *data, const char *arg, int key,
		    struct fuse_args *outargs)
{
	struct parse_state *s = data;
	const struct opt_def *d;
	const char *v = NULL;

	(void)outargs;
	switch (key) {
	case KEY_HELP:
		s->o->show_help = true;
		return 0;
	case KEY_VERSION:
		s->o->show_version = true;
		return 0;
	case KEY_FOREGROUND:
		s->o->foreground = true;
		return 0;
	case KEY_DEBUG:
		s->o->debug = true;
		s->o->foreground = true;
		s->o->log_level = 3;
		return 0;
	case FUSE_OPT_KEY_NONOPT:
	case KEY_DASH:
		return positional(s, arg) == 0 ? 0 : -1;
	default:
		d = find_option(arg, &v);
		if (d == NULL)
			return 1;
		return read_option(s, d, v) == 0 ? 0 : -1;
	}
}

int fs_opts_parse(int argc, char **argv, struct fs_opts *out, char *err,
		  size_t errlen)
{
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	struct parse_state s = {.o = out, .err = err, .errlen = errlen};

	memset(out, 0, sizeof(*out));
	out->lanes = FS_LANES;
	out->host_lanes = FS_HOST_LANES;
	out->connect_timeout_s = 10;
	out->read_timeout_s = 60;
	out->stall_timeout_s = 10;
	out->retry_after_max_s = 60;
	out->readahead_ms = FS_READAHEAD_MS;
	out->chunk = FS_CHUNK_MIN;
	out->inflight_max = FS_INFLIGHT_DEFAULT;
	out->speculate = FS_SPECULATE_DEFAULT;
	out->proxy_reset_s = FETCH_PROXY_RESET_MS / 1000;
	out->listing_ttl_s = 60;
	out->log_level = 2; /* info */
	out->revalidate_s = -1;
	out->attr_timeout_s = 60;
	out->entry_timeout_s = 60;
	/* Integrity on power loss at one fsync per commit: see the Sync mode
	 * section of cache/README.md. */
	out->cache_sync = CACHE_SYNC_META;
	err[0] = '\0';
	if (fuse_opt_parse(&args, &s, opt_spec, opt_proc) != 0) {
		if (err[0] == '\0')
			fs__errf(err, errlen, -EINVAL,
				 "cannot parse the options");
		goto fail;
	}
	/* With url_file the URL argument may be left out. */
	if (out->url_file != NULL && out->url != NULL &&
	    out->mountpoint == NULL) {
		out->mountpoint = out->url;
		out->url = strdup("-");
		if (out->url == NULL) {
			fs__errf(err, errlen, -EINVAL, "out of memory");
			goto fail;
		}
	}
	if (!out->show_help && !out->show_version &&
	    (out->url == NULL || out->mountpoint == NULL)) {
		fs__errf(err, errlen, -EINVAL,
			 "missing %s (usage: pacefs [options] URL MOUNTPOINT)",
			 out->url == NULL ? "URL and MOUNTPOINT"
					  : "MOUNTPOINT");
		goto fail;
	}
	if (!out->show_help && !out->show_version &&
	    cli__url_read(out, err, errlen) != 0)
		goto fail;
	out->fuse_args = args;
	return 0;
fail:
	fuse_opt_free_args(&args);
	fs_opts_free(out);
	return -EINVAL;
}

const char *fs_opts_form(size_t i, char *buf, size_t cap)
{
	if (i >= NOPTS)
		return NULL;
	if (opt_table[i].kind == KIND_FLAG)
		snprintf(buf, cap, "%s", opt_table[i].name);
	else
		snprintf(buf, cap, "%s=%s", opt_table[i].name,
			 opt_table[i].arg);
	return buf;
}

/* Where --help's text starts, past "-o name=ARG". */
#define HELP_COL 30

/* One row of --help: "-o name=ARG", then its help from HELP_COL, each
 * further line of it under the first; a long form gets a line alone. */
static void usage_row(const struct opt_def *d)
{
	char form[64];
	const char *h = d->help;
	int used;

	fs_opts_form((size_t)(d - opt_table), form, sizeof(form));
	used = printf("    -o %s", form);
	for (;;) {
		size_t n = strcspn(h, "\n");

		if (used >= HELP_COL) {
			printf("\n");
			used = 0;
		}
		printf("%*s%.*s\n", HELP_COL - used, "", (int)n, h);
		used = 0;
		if (h[n] == '\0')
			break;
		h += n + 1;
	}
}

void fs_opts_usage(void)
{
	printf("usage: pacefs [options] URL MOUNTPOINT\n"
	       "       pacefs [options] - MOUNTPOINT (the URL from -o "
	       "url_file= or stdin)\n"
	       "       pacefs [options] MANIFEST.json MOUNTPOINT\n"
	       "       pacefs [options] URL/ MOUNTPOINT\n"
	       "       pacefs [options] s3://BUCKET/KEY|s3://BUCKET/PREFIX/ "
	       "MOUNTPOINT\n"
	       "       pacefs status [-w] [--json] MOUNTPOINT\n"
	       "       pacefs cache ls|stat|verify|evict|gc [--cache-dir DIR]\n"
	       "       pacefs prefetch PATH...\n"
	       "       pacefs plan [--name NAME] [-0] MOUNTPOINT [LIST|-]\n"
	       "       pacefs plan --clear [--name NAME] MOUNTPOINT\n"
	       "\n"
	       "Mounts the HTTP(S) blob at URL read-only as MOUNTPOINT/NAME; "
	       "or\n"
	       "the files a manifest lists; or, for a URL ending in '/', the\n"
	       "tree its HTML directory index (nginx, Apache) shows.\n"
	       "Unmount with: fusermount3 -u MOUNTPOINT\n"
	       "\n"
	       "options:\n"
	       "    -h, --help                print this help and exit\n"
	       "    -V, --version             print the version and exit\n"
	       "    -f                        stay in the foreground\n"
	       "    -d                        debug log (implies -f)\n");
	for (size_t i = 0; i < NOPTS; i++)
		usage_row(&opt_table[i]);
	printf("\n"
	       "libfuse options (-o allow_other, ...) are passed through; "
	       "see mount.fuse3(8).\n");
}

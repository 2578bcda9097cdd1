/* opts: the pacefs command line: our -o options, the positional URL and
 * mountpoint, and what is passed through to libfuse. */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
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
#include "fs/driver/metrics_int.h"
#include "fs/fs.h"

_Static_assert(FS_CHUNK_MIN == CACHE_BLOCK_SIZE,
	       "the smallest chunk is a cache block");

enum {
	KEY_HELP,
	KEY_VERSION,
	KEY_FOREGROUND,
	KEY_DEBUG,
	KEY_CACHE_DIR,
	KEY_NAME,
	KEY_LANES,
	KEY_HOST_LANES,
	KEY_CONNECT_TIMEOUT,
	KEY_READ_TIMEOUT,
	KEY_STALL_TIMEOUT,
	KEY_LISTING_TTL,
	KEY_LOG_LEVEL,
	KEY_SHA256,
	KEY_REVALIDATE,
	KEY_CACHE_SIZE,
	KEY_CACHE_SYNC,
	KEY_ATTR_TIMEOUT,
	KEY_ENTRY_TIMEOUT,
	KEY_MIRROR,
	KEY_HEADER,
	KEY_HEADER_FILE,
	KEY_CAFILE,
	KEY_PROXY,
	KEY_INSECURE,
	KEY_CACHE_SHARED,
	KEY_RETRY_AFTER_MAX,
	KEY_READAHEAD,
	KEY_ENDPOINT,
	KEY_REGION,
	KEY_S3_ADDRESSING,
	KEY_AUTH_COMMAND,
	KEY_CREDS_READABLE,
	KEY_CHUNK,
	KEY_INFLIGHT_MAX,
	KEY_PROXY_RESET,
	KEY_METRICS,
	KEY_METRICS_LABEL,
	KEY_LOG_FORMAT,
};

static const struct fuse_opt opt_spec[] = {
	FUSE_OPT_KEY("-h", KEY_HELP),
	FUSE_OPT_KEY("--help", KEY_HELP),
	FUSE_OPT_KEY("-V", KEY_VERSION),
	FUSE_OPT_KEY("--version", KEY_VERSION),
	FUSE_OPT_KEY("-f", KEY_FOREGROUND),
	FUSE_OPT_KEY("-d", KEY_DEBUG),
	FUSE_OPT_KEY("debug", KEY_DEBUG),
	FUSE_OPT_KEY("cache_dir=", KEY_CACHE_DIR),
	FUSE_OPT_KEY("name=", KEY_NAME),
	FUSE_OPT_KEY("lanes=", KEY_LANES),
	FUSE_OPT_KEY("host_lanes=", KEY_HOST_LANES),
	FUSE_OPT_KEY("connect_timeout=", KEY_CONNECT_TIMEOUT),
	FUSE_OPT_KEY("read_timeout=", KEY_READ_TIMEOUT),
	FUSE_OPT_KEY("stall_timeout=", KEY_STALL_TIMEOUT),
	FUSE_OPT_KEY("retry_after_max=", KEY_RETRY_AFTER_MAX),
	FUSE_OPT_KEY("readahead=", KEY_READAHEAD),
	FUSE_OPT_KEY("chunk=", KEY_CHUNK),
	FUSE_OPT_KEY("inflight_max=", KEY_INFLIGHT_MAX),
	FUSE_OPT_KEY("proxy_reset=", KEY_PROXY_RESET),
	FUSE_OPT_KEY("listing_ttl=", KEY_LISTING_TTL),
	FUSE_OPT_KEY("log_level=", KEY_LOG_LEVEL),
	FUSE_OPT_KEY("sha256=", KEY_SHA256),
	FUSE_OPT_KEY("revalidate=", KEY_REVALIDATE),
	FUSE_OPT_KEY("cache_size=", KEY_CACHE_SIZE),
	FUSE_OPT_KEY("cache_sync=", KEY_CACHE_SYNC),
	FUSE_OPT_KEY("attr_timeout=", KEY_ATTR_TIMEOUT),
	FUSE_OPT_KEY("entry_timeout=", KEY_ENTRY_TIMEOUT),
	FUSE_OPT_KEY("mirror=", KEY_MIRROR),
	FUSE_OPT_KEY("header=", KEY_HEADER),
	FUSE_OPT_KEY("header_file=", KEY_HEADER_FILE),
	FUSE_OPT_KEY("cafile=", KEY_CAFILE),
	FUSE_OPT_KEY("proxy=", KEY_PROXY),
	FUSE_OPT_KEY("insecure", KEY_INSECURE),
	FUSE_OPT_KEY("cache_shared", KEY_CACHE_SHARED),
	FUSE_OPT_KEY("endpoint=", KEY_ENDPOINT),
	FUSE_OPT_KEY("region=", KEY_REGION),
	FUSE_OPT_KEY("s3_addressing=", KEY_S3_ADDRESSING),
	FUSE_OPT_KEY("auth_command=", KEY_AUTH_COMMAND),
	FUSE_OPT_KEY("creds_readable", KEY_CREDS_READABLE),
	FUSE_OPT_KEY("metrics=", KEY_METRICS),
	FUSE_OPT_KEY("metrics_label=", KEY_METRICS_LABEL),
	FUSE_OPT_KEY("log_format=", KEY_LOG_FORMAT),
	FUSE_OPT_END,
};

struct parse_state {
	struct fs_opts *o;
	char *err;
	size_t errlen;
	int rc;
};

static int parse_error(struct parse_state *s, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static int parse_error(struct parse_state *s, const char *fmt, ...)
{
	va_list ap;

	if (s->rc == 0) {
		va_start(ap, fmt);
		vsnprintf(s->err, s->errlen, fmt, ap);
		va_end(ap);
		s->rc = -EINVAL;
	}
	return -1;
}

/* Parses "key=S", seconds with at most three decimals, lo_ms <= S * 1000 <=
 * hi_ms, into *out_ms. */
static int parse_ms(struct parse_state *s, const char *arg, unsigned lo_ms,
		    unsigned hi_ms, unsigned *out_ms)
{
	const char *eq = strchr(arg, '='), *p = eq + 1;
	uint64_t ms = 0;
	int whole = 0, frac = 0;

	for (; *p >= '0' && *p <= '9' && ms <= hi_ms; p++, whole++)
		ms = ms * 10 + (uint64_t)(*p - '0');
	ms *= 1000;
	if (*p == '.')
		for (p++; *p >= '0' && *p <= '9' && frac < 3; p++, frac++)
			ms += (uint64_t)(*p - '0') *
			      (frac == 0 ? 100 : frac == 1 ? 10 : 1);
	if (whole == 0 || *p != '\0' || ms < lo_ms || ms > hi_ms)
		return parse_error(s,
				   "option %.*s: '%s' is not a number of "
				   "seconds from %u.%03u to %u (e.g. 2.5)",
				   (int)(eq - arg), arg, eq + 1, lo_ms / 1000,
				   lo_ms % 1000, hi_ms / 1000);
	*out_ms = (unsigned)ms;
	return 0;
}

/* Parses "key=N" with lo <= N <= hi into *out. */
static int parse_uint(struct parse_state *s, const char *arg, unsigned lo,
		      unsigned hi, unsigned *out)
{
	const char *eq = strchr(arg, '=');
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(eq + 1, &end, 10);
	if (eq[1] == '\0' || *end != '\0' || errno != 0 || v < lo || v > hi)
		return parse_error(s,
				   "option %.*s: '%s' is not a whole number "
				   "from %u to %u",
				   (int)(eq - arg), arg, eq + 1, lo, hi);
	*out = (unsigned)v;
	return 0;
}

/* Sets *out to the index of NAME=VALUE's value in names (NULL-ended), or
 * refuses it naming them all. */
static int parse_choice(struct parse_state *s, const char *arg,
			const char *const *names, int *out)
{
	const char *eq = strchr(arg, '=');
	char all[128] = "";
	size_t used = 0;

	for (int i = 0; names[i] != NULL; i++) {
		if (strcmp(eq + 1, names[i]) == 0) {
			*out = i;
			return 0;
		}
		used += (size_t)snprintf(all + used, sizeof(all) - used, "%s%s",
					 i ? ", " : "", names[i]);
	}
	return parse_error(s, "option %.*s: '%s' is not one of %s",
			   (int)(eq - arg), arg, eq + 1, all);
}

static int set_string(struct parse_state *s, const char *arg, char **field)
{
	const char *eq = strchr(arg, '=');

	if (eq[1] == '\0')
		return parse_error(s, "option %.*s: empty value",
				   (int)(eq - arg), arg);
	free(*field);
	*field = strdup(eq + 1);
	if (*field == NULL)
		return parse_error(s, "out of memory");
	return 0;
}

/* Appends the value of "key=value" to a list of strings. */
static int add_string(struct parse_state *s, const char *arg, char ***list,
		      unsigned *n)
{
	char **grown;
	char *v = NULL;

	if (set_string(s, arg, &v) != 0)
		return -1;
	grown = realloc(*list, (*n + 1) * sizeof(**list));
	if (grown == NULL) {
		free(v);
		return parse_error(s, "out of memory");
	}
	grown[(*n)++] = v;
	*list = grown;
	return 0;
}

/* A header must be "Name: value" on one line, with a token for a name. */
static int check_header(struct parse_state *s, const char *h)
{
	const char *colon = strchr(h, ':');

	if (fs__header_check(h, strlen(h)) != 0)
		return parse_error(s,
				   "option header: '%.*s...' is not 'Name: "
				   "value' on one line",
				   (int)(colon != NULL ? colon - h : 20), h);
	if (fs__header_owned(h, strlen(h)) != NULL)
		return parse_error(s, "option header: pacefs sets %s itself",
				   fs__header_owned(h, strlen(h)));
	return 0;
}

/* -o metrics=, -o metrics_label=, -o log_format=: what operators run
 * the mount with (fs/driver/metrics.c and metricsd.c check them). */
static int set_operating(struct parse_state *s, int key, const char *arg)
{
	static const char *const formats[] = {"text", "json", NULL};
	struct fs_opts *o = s->o;
	const char *v = strchr(arg, '=') + 1;
	char why[512];

	switch (key) {
	case KEY_METRICS:
		if (fs__metrics_addr_check(v, why, sizeof(why)) != 0)
			return parse_error(s, "%s", why);
		return set_string(s, arg, &o->metrics);
	case KEY_METRICS_LABEL:
		if (fs__metrics_label_check(v, o->metrics_labels,
					    o->nmetrics_labels, why,
					    sizeof(why)) != 0)
			return parse_error(s, "%s", why);
		return add_string(s, arg, &o->metrics_labels,
				  &o->nmetrics_labels);
	default:
		return parse_choice(s, arg, formats, &o->log_format);
	}
}

/* Checks the file that "header_file=PATH" names and keeps its path: the
 * mount reads it (fs/auth/creds.c), and again whenever it changes. */
static int add_header_file(struct parse_state *s, const char *arg)
{
	struct fs_opts *o = s->o;
	const char *path = strchr(arg, '=') + 1;
	char **list = NULL, why[512];
	unsigned n = 0;

	if (fs__headers_load(path, geteuid(), &list, &n, why, sizeof(why)) != 0)
		return parse_error(s, "option header_file: %s", why);
	fs__headers_free(list, n);
	return add_string(s, arg, &o->header_files, &o->nheader_files);
}

static int opt_proc(void *data, const char *arg, int key,
		    struct fuse_args *outargs)
{
	struct parse_state *s = data;
	struct fs_opts *o = s->o;

	(void)outargs;
	switch (key) {
	case KEY_HELP:
		o->show_help = true;
		return 0;
	case KEY_VERSION:
		o->show_version = true;
		return 0;
	case KEY_FOREGROUND:
		o->foreground = true;
		return 0;
	case KEY_DEBUG:
		o->debug = true;
		o->foreground = true;
		o->log_level = 3;
		return 0;
	case KEY_CACHE_DIR:
		return set_string(s, arg, &o->cache_dir);
	case KEY_NAME:
		return set_string(s, arg, &o->name);
	case KEY_LANES:
		return parse_uint(s, arg, 1, 256, &o->lanes);
	case KEY_HOST_LANES:
		return parse_uint(s, arg, 1, 256, &o->host_lanes);
	case KEY_CONNECT_TIMEOUT:
		return parse_uint(s, arg, 1, 3600, &o->connect_timeout_s);
	case KEY_READ_TIMEOUT:
		return parse_uint(s, arg, 1, 86400, &o->read_timeout_s);
	case KEY_STALL_TIMEOUT:
		return parse_uint(s, arg, 1, 3600, &o->stall_timeout_s);
	case KEY_RETRY_AFTER_MAX:
		return parse_uint(s, arg, 1, 86400, &o->retry_after_max_s);
	case KEY_READAHEAD:
		return parse_ms(s, arg, 100, 600000, &o->readahead_ms);
	case KEY_LOG_LEVEL: {
		static const char *const levels[] = {"error", "warning", "info",
						     "debug", NULL};

		return parse_choice(s, arg, levels, &o->log_level);
	}
	case KEY_SHA256: {
		const char *v = strchr(arg, '=') + 1;

		if (strlen(v) != 64)
			return parse_error(s,
					   "option sha256: expected 64 hex "
					   "digits, got %zu characters",
					   strlen(v));
		for (int i = 0; i < 32; i++) {
			int hi = fs__hexval(v[2 * i]), lo = fs__hexval(v[2 * i + 1]);

			if (hi < 0 || lo < 0)
				return parse_error(s,
						   "option sha256: '%c' is "
						   "not a hex digit",
						   hi < 0 ? v[2 * i]
							  : v[2 * i + 1]);
			o->sha256[i] = (uint8_t)(hi * 16 + lo);
		}
		o->has_sha256 = true;
		return 0;
	}
	case KEY_REVALIDATE: {
		const char *v = strchr(arg, '=') + 1;
		unsigned secs;

		if (strcmp(v, "always") == 0) {
			o->revalidate_s = -1;
			return 0;
		}
		if (strcmp(v, "never") == 0) {
			o->revalidate_s = INT64_MAX;
			return 0;
		}
		if (parse_uint(s, arg, 0, UINT32_MAX, &secs) != 0) {
			s->rc = 0; /* say it with the choices */
			return parse_error(s,
					   "option revalidate: '%s' is not "
					   "always, never or a number of "
					   "seconds",
					   v);
		}
		o->revalidate_s = secs;
		return 0;
	}
	case KEY_CHUNK: {
		const char *v = strchr(arg, '=') + 1;

		/* Whole cache blocks, and a power of two so that a cache in
		 * front of the origin (nginx's slice) can key on them. */
		if (fs_parse_size(v, &o->chunk) != 0 ||
		    o->chunk < FS_CHUNK_MIN || o->chunk > FS_CHUNK_MAX ||
		    (o->chunk & (o->chunk - 1)) != 0)
			return parse_error(s,
					   "option chunk: '%s' is not a power "
					   "of two from 64K to 8M",
					   v);
		return 0;
	}
	case KEY_INFLIGHT_MAX: {
		const char *v = strchr(arg, '=') + 1;

		/* A request is never cut to fit: the cap holds one. */
		if (fs_parse_size(v, &o->inflight_max) != 0 ||
		    o->inflight_max < FS_INFLIGHT_MIN)
			return parse_error(s,
					   "option inflight_max: '%s' is not a "
					   "size of at least 8M (the largest "
					   "request)",
					   v);
		return 0;
	}
	case KEY_CACHE_SIZE:
		if (fs_parse_size(strchr(arg, '=') + 1, &o->cache_size) != 0)
			return parse_error(s,
					   "option cache_size: '%s' is not a "
					   "size (a number with an optional "
					   "K, M, G or T)",
					   strchr(arg, '=') + 1);
		return 0;
	case KEY_CACHE_SYNC: {
		static const char *const modes[] = {"full", "meta", "none",
						    NULL};

		return parse_choice(s, arg, modes, &o->cache_sync);
	}
	case KEY_LISTING_TTL:
		return parse_uint(s, arg, 0, 86400 * 365, &o->listing_ttl_s);
	case KEY_ATTR_TIMEOUT:
		return parse_uint(s, arg, 0, 86400 * 365, &o->attr_timeout_s);
	case KEY_ENTRY_TIMEOUT:
		return parse_uint(s, arg, 0, 86400 * 365, &o->entry_timeout_s);
	case KEY_MIRROR:
		return add_string(s, arg, &o->mirrors, &o->nmirrors);
	case KEY_HEADER:
		if (add_string(s, arg, &o->headers, &o->nheaders) != 0)
			return -1;
		return check_header(s, o->headers[o->nheaders - 1]);
	case KEY_HEADER_FILE:
		return add_header_file(s, arg);
	case KEY_ENDPOINT:
		return set_string(s, arg, &o->endpoint);
	case KEY_REGION:
		return set_string(s, arg, &o->region);
	case KEY_S3_ADDRESSING:
		return set_string(s, arg, &o->s3_addressing);
	case KEY_AUTH_COMMAND:
		return set_string(s, arg, &o->auth_command);
	case KEY_CREDS_READABLE:
		o->creds_readable = true;
		return 0;
	case KEY_CAFILE:
		return set_string(s, arg, &o->cafile);
	case KEY_PROXY: {
		struct fetch_proxies *list = NULL;
		char why[256];

		if (set_string(s, arg, &o->proxy) != 0)
			return -1;
		/* Refused here, with the part that is wrong; mount.c builds
		 * the list the requests use. */
		if (fetch_proxies_new(o->proxy, 0, &list, why, sizeof(why)) !=
		    0)
			return parse_error(s, "%s", why);
		fetch_proxies_free(list);
		return 0;
	}
	case KEY_PROXY_RESET:
		return parse_uint(s, arg, 1, 86400, &o->proxy_reset_s);
	case KEY_INSECURE:
		o->insecure = true;
		return 0;
	case KEY_METRICS:
	case KEY_METRICS_LABEL:
	case KEY_LOG_FORMAT:
		return set_operating(s, key, arg);
	case KEY_CACHE_SHARED:
		o->cache_shared = true;
		return 0;
	case FUSE_OPT_KEY_NONOPT:
		if (o->url == NULL) {
			o->url = strdup(arg);
			return o->url != NULL ? 0 : -1;
		}
		if (o->mountpoint == NULL) {
			o->mountpoint = strdup(arg);
			return o->mountpoint != NULL ? 0 : -1;
		}
		return parse_error(s,
				   "unexpected argument '%s' (usage: "
				   "pacefs [options] URL MOUNTPOINT)",
				   arg);
	default:
		/* Anything else is libfuse's to accept or refuse. */
		return 1;
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
		if (s.rc == 0)
			snprintf(err, errlen, "cannot parse the options");
		goto fail;
	}
	if (!out->show_help && !out->show_version &&
	    (out->url == NULL || out->mountpoint == NULL)) {
		snprintf(err, errlen,
			 "missing %s (usage: pacefs [options] URL MOUNTPOINT)",
			 out->url == NULL ? "URL and MOUNTPOINT"
					  : "MOUNTPOINT");
		goto fail;
	}
	out->fuse_args = args;
	return 0;
fail:
	fuse_opt_free_args(&args);
	fs_opts_free(out);
	return -EINVAL;
}

/* Masks the userinfo of the URL at u with '*', its '@' kept. */
static void mask_userinfo(char *u)
{
	size_t start, end;

	if (fetch_url_userinfo(u, &start, &end))
		memset(u + start, '*', end - start - 1);
}

/* Masks the credentials ("user:password@") of each proxy in the proxy
 * list [list, end): "A|B;C", entries with or without a scheme. */
static void mask_proxies(char *list, const char *end)
{
	char *entry = list;

	while (entry < end) {
		char *stop = entry, *at = NULL, *from = entry;

		while (stop < end && *stop != '|' && *stop != ';') {
			if (*stop == '@')
				at = stop;
			stop++;
		}
		for (char *q = entry; at != NULL && q + 2 < at; q++)
			if (q[0] == ':' && q[1] == '/' && q[2] == '/') {
				from = q + 3;
				break;
			}
		if (at != NULL)
			memset(from, '*', (size_t)(at - from));
		entry = stop + 1;
	}
}

/* Masks the secrets of one -o list: header values, mirrors' userinfo,
 * proxies' credentials.
 * Items end at a ',' that no backslash escapes, as libfuse reads them. */
static void scrub_optlist(char *list)
{
	char *item = list;

	while (*item != '\0') {
		char *end = item;

		while (*end != '\0' && *end != ',') {
			if (*end == '\\' && end[1] != '\0')
				end++;
			end++;
		}
		if (strncmp(item, "header=", 7) == 0) {
			char *v =
				memchr(item + 7, ':', (size_t)(end - item - 7));

			v = v != NULL ? v + 1 : item + 7;
			memset(v, '*', (size_t)(end - v));
		} else if (strncmp(item, "proxy=", 6) == 0) {
			mask_proxies(item + 6, end);
		} else if (strncmp(item, "mirror=", 7) == 0) {
			char saved = *end;

			*end = '\0';
			mask_userinfo(item + 7);
			*end = saved;
		}
		item = *end == ',' ? end + 1 : end;
	}
}

void fs_opts_scrub_argv(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "-o") == 0 && i + 1 < argc)
			scrub_optlist(argv[++i]);
		else if (strncmp(argv[i], "-o", 2) == 0)
			scrub_optlist(argv[i] + 2);
		else if (strncmp(argv[i], "http://", 7) == 0 ||
			 strncmp(argv[i], "https://", 8) == 0)
			mask_userinfo(argv[i]);
	}
}

void fs_opts_free(struct fs_opts *o)
{
	fuse_opt_free_args(&o->fuse_args);
	free(o->url);
	free(o->mountpoint);
	free(o->cache_dir);
	free(o->name);
	for (unsigned i = 0; i < o->nmirrors; i++)
		free(o->mirrors[i]);
	free(o->mirrors);
	fs__headers_free(o->headers, o->nheaders);
	for (unsigned i = 0; i < o->nheader_files; i++)
		free(o->header_files[i]);
	free(o->header_files);
	free(o->auth_command);
	free(o->endpoint);
	free(o->region);
	free(o->s3_addressing);
	free(o->cafile);
	free(o->proxy);
	free(o->metrics);
	for (unsigned i = 0; i < o->nmetrics_labels; i++)
		free(o->metrics_labels[i]);
	free(o->metrics_labels);
	memset(o, 0, sizeof(*o));
}


int fs_name_check(const char *name, char *err, size_t errlen)
{
	if (name[0] == '\0' || strcmp(name, ".") == 0 ||
	    strcmp(name, "..") == 0 || strchr(name, '/') != NULL) {
		snprintf(err, errlen,
			 "'%s' is not a usable file name (empty, '.', '..' "
			 "or containing '/')",
			 name);
		return -EINVAL;
	}
	if (strlen(name) > NAME_MAX) {
		snprintf(err, errlen, "file name longer than %d bytes",
			 NAME_MAX);
		return -EINVAL;
	}
	return 0;
}

int fs_name_from_url(const char *url, char *out, size_t cap, char *err,
		     size_t errlen)
{
	const char *p = strstr(url, "://");
	const char *path, *stop, *seg;
	size_t n = 0;

	p = p != NULL ? p + 3 : url;
	path = strchr(p, '/');
	if (path == NULL)
		path = p + strlen(p);
	stop = path + strcspn(path, "?#");
	seg = stop;
	while (seg > path && seg[-1] != '/')
		seg--;
	for (const char *c = seg; c < stop; c++) {
		char ch = *c;

		if (ch == '%' && c + 2 < stop && fs__hexval(c[1]) >= 0 &&
		    fs__hexval(c[2]) >= 0) {
			ch = (char)(fs__hexval(c[1]) * 16 + fs__hexval(c[2]));
			c += 2;
			if (ch == '\0') {
				snprintf(err, errlen,
					 "URL %s: its last path segment "
					 "decodes to a NUL byte; use "
					 "-o name=NAME",
					 url);
				return -EINVAL;
			}
		}
		if (n + 1 >= cap) {
			snprintf(err, errlen,
				 "URL %s: its last path segment is too long "
				 "for a file name; use -o name=NAME",
				 url);
			return -EINVAL;
		}
		out[n++] = ch;
	}
	out[n] = '\0';
	if (fs_name_check(out, err, errlen) != 0) {
		snprintf(err, errlen,
			 "URL %s: cannot derive a file name from its last "
			 "path segment; use -o name=NAME",
			 url);
		return -EINVAL;
	}
	return 0;
}

int fs_parse_size(const char *v, uint64_t *out)
{
	uint64_t n = 0, mult = 1;
	const char *p = v;

	if (*p < '0' || *p > '9')
		return -EINVAL;
	for (; *p >= '0' && *p <= '9'; p++) {
		if (n > (UINT64_MAX - 9) / 10)
			return -EINVAL;
		n = n * 10 + (uint64_t)(*p - '0');
	}
	switch (*p) {
	case 'k':
	case 'K':
		mult = 1ull << 10;
		break;
	case 'm':
	case 'M':
		mult = 1ull << 20;
		break;
	case 'g':
	case 'G':
		mult = 1ull << 30;
		break;
	case 't':
	case 'T':
		mult = 1ull << 40;
		break;
	case '\0':
		break;
	default:
		return -EINVAL;
	}
	if (*p != '\0' && strcmp(p + 1, "") != 0 && strcmp(p + 1, "B") != 0 &&
	    strcmp(p + 1, "iB") != 0)
		return -EINVAL;
	if (n > UINT64_MAX / mult)
		return -EINVAL;
	*out = n * mult;
	return 0;
}

void fs_opts_usage(void)
{
	printf("usage: pacefs [options] URL MOUNTPOINT\n"
	       "       pacefs [options] MANIFEST.json MOUNTPOINT\n"
	       "       pacefs [options] URL/ MOUNTPOINT\n"
	       "       pacefs [options] s3://BUCKET/KEY|s3://BUCKET/PREFIX/ "
	       "MOUNTPOINT\n"
	       "       pacefs status [-w] [--json] MOUNTPOINT\n"
	       "       pacefs cache ls|stat|verify|evict|gc [--cache-dir DIR]\n"
	       "       pacefs prefetch PATH...\n"
	       "\n"
	       "Mounts the HTTP(S) blob at URL read-only as MOUNTPOINT/NAME; "
	       "or\n"
	       "the files a manifest lists; or, for a URL ending in '/', the\n"
	       "tree its HTML directory index (nginx, Apache) shows.\n"
	       "Unmount with: fusermount3 -u MOUNTPOINT\n"
	       "\n"
	       "options:\n"
	       "    -h, --help             print this help and exit\n"
	       "    -V, --version          print the version and exit\n"
	       "    -f                     stay in the foreground\n"
	       "    -d                     debug log (implies -f)\n"
	       "    -o cache_dir=DIR       cache directory (default: "
	       "$XDG_CACHE_HOME/pacefs,\n"
	       "                           else ~/.cache/pacefs; "
	       "/var/cache/pacefs for root)\n"
	       "    -o cache_shared        accept a cache directory that "
	       "another user owns\n"
	       "                           or group/others may write "
	       "(shared on purpose)\n"
	       "    -o name=NAME           file name (default: the URL's "
	       "last path segment)\n"
	       "    -o lanes=N             connections of the whole mount "
	       "(default: 32)\n"
	       "    -o host_lanes=N        connections to one origin "
	       "(default: 16)\n"
	       "    -o readahead=S         a sequential reader's lead: S "
	       "seconds of\n"
	       "                           what it consumes (default: 3)\n"
	       "    -o inflight_max=SIZE   bytes requested and not yet "
	       "received, at most\n"
	       "                           (8M or more; default: no cap but "
	       "the lanes')\n"
	       "    -o connect_timeout=S   connect timeout in seconds "
	       "(default: 10)\n"
	       "    -o read_timeout=S      a blocked read fails with EIO "
	       "after S seconds,\n"
	       "                           and a lookup or readdir waiting "
	       "on a listing\n"
	       "                           (default: 60)\n"
	       "    -o stall_timeout=S     a transfer with no byte for S "
	       "seconds "
	       "is retried\n"
	       "                           (default: 10)\n"
	       "    -o retry_after_max=S   a 429 or 503 holds its source at "
	       "most "
	       "S seconds,\n"
	       "                           whatever Retry-After asks (default: "
	       "60)\n"
	       "    -o mirror=URL          another source of the blob "
	       "(repeatable)\n"
	       "    -o header=\"N: v\"     a request header (repeatable)\n"
	       "    -o header_file=FILE    request headers from a file "
	       "(mode 0600)\n"
	       "    -o auth_command=CMD    a command printing headers or an "
	       "S3 credential JSON\n"
	       "    -o endpoint=URL, -o region=R, -o s3_addressing=path|virtual"
	       "   S3\n"
	       "    -o creds_readable      accept a credentials file others "
	       "may read\n"
	       "    -o cafile=FILE, -o insecure   TLS\n"
	       "    -o proxy=\"A|B;C;DIRECT\"  proxies: groups tried in order, "
	       "members\n"
	       "                           sharing the load (-o proxy_reset=S: "
	       "300)\n"
	       "    -o chunk=SIZE          requests cover whole chunks "
	       "(64K-8M; 64K)\n"
	       "    -o sha256=HEX          the blob's SHA-256, checked once it "
	       "is all held\n"
	       "    -o cache_size=SIZE     cache budget, least recently used "
	       "out (K/M/G/T)\n"
	       "    -o cache_sync=M        meta (default), full or none\n"
	       "    -o revalidate=R        always (default), never, or SECONDS "
	       "since the\n"
	       "                           origin last confirmed a file\n"
	       "    -o listing_ttl=S       re-read directory indexes after S "
	       "seconds (60)\n"
	       "    -o log_level=L         error, warning, info or debug "
	       "(default: info)\n"
	       "    -o log_format=F        text (default) or json, one object "
	       "a line\n"
	       "    -o metrics=ADDR:PORT   serve Prometheus metrics at "
	       "http://ADDR:PORT/metrics\n"
	       "    -o metrics_label=K=V   a label on every series "
	       "(repeatable)\n"
	       "    -o attr_timeout=S, -o entry_timeout=S   kernel caching of "
	       "attributes\n"
	       "                           and names (default: 60)\n"
	       "\n"
	       "libfuse options (-o allow_other, ...) are passed through; "
	       "see mount.fuse3(8).\n");
}

/* status: the mount's state as JSON (served as the root's user.pacefs.status
 * attribute) and `pacefs status MOUNTPOINT`, which renders it. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <jansson.h>

#include "fs/driver/driver_int.h"
#include "fs/obs/log_int.h"
#include "fs/obs/metrics_int.h"
#include "fs/engine/engine.h"
#include "fs/tree/tree.h"
#include "fs/fs.h"

/* Appends to a bounded buffer; remembers overflow. */
struct out {
	char *buf;
	size_t cap;
	size_t used;
	bool full;
};

static void put(struct out *o, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void put(struct out *o, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (o->full)
		return;
	va_start(ap, fmt);
	n = vsnprintf(o->buf + o->used, o->cap - o->used, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= o->cap - o->used)
		o->full = true;
	else
		o->used += (size_t)n;
}

/* Writes s as a JSON string. Names and URLs come from servers and
 * manifests: fs__json_escape makes sure the document always parses and
 * holds no raw control byte. */
static void put_str(struct out *o, const char *s)
{
	size_t n;

	put(o, "\"");
	if (o->full)
		return;
	n = fs__json_escape(s, o->buf + o->used, o->cap - o->used);
	if (n >= o->cap - o->used)
		o->full = true;
	else
		o->used += n;
	put(o, "\"");
}

/* Writes url as a JSON string, without its userinfo: status is readable
 * by whoever may read the mount's root. */
static void put_url(struct out *o, const char *url)
{
	char *shown = fetch_url_redacted(url);

	if (shown == NULL)
		o->full = true; /* out of memory: the caller says so */
	else
		put_str(o, shown);
	free(shown);
}

/* Status lists at most this many entries of a kind: the document holds
 * 64 KiB. */
#define FS_STATUS_ITEMS 512

static void put_lanes(struct out *o, const struct fs_engine_view *v)
{
	for (uint32_t i = 0; i < v->nlanes; i++) {
		const struct fs_lane_view *l = &v->lanes[i];

		put(o, "%s{\"lane\":%u,\"file\":", i ? "," : "", l->lane);
		put_str(o, l->file);
		put(o, ",\"source\":");
		if (l->source != NULL)
			put_url(o, l->source);
		else
			put(o, "null");
		put(o,
		    ",\"start\":%" PRIu64 ",\"frontier\":%" PRIu64
		    ",\"end\":%" PRIu64 ",\"rate\":%" PRIu64
		    ",\"collapsed\":%s,\"demand\":%s",
		    l->info.start, l->info.frontier, l->info.end, l->info.rate,
		    l->info.collapsed ? "true" : "false",
		    l->info.demand ? "true" : "false");
		if (l->info.reader != PACE_NONE)
			put(o, ",\"reader\":%" PRIu32, l->info.reader);
		put(o, "}");
	}
}

static void put_readers(struct out *o, const struct fs_engine_view *v)
{
	for (uint32_t i = 0; i < v->nreaders; i++) {
		const struct fs_reader_view *r = &v->readers[i];

		put(o, "%s{\"reader\":%" PRIu32 ",\"file\":", i ? "," : "",
		    r->reader);
		put_str(o, r->file);
		put(o,
		    ",\"mode\":\"%s\",\"cursor\":%" PRIu64 ",\"rate\":%" PRIu64
		    ",\"window\":%" PRIu64 ",\"lead\":%" PRIu64
		    ",\"lead_ms\":%" PRIu64 "}",
		    r->mode, r->info.cursor, r->info.rate, r->info.window,
		    r->info.lead, r->info.lead_ms);
	}
}

static void put_sources(struct out *o, const struct fs_engine_view *v)
{
	for (uint32_t i = 0; i < v->nsources; i++) {
		put(o, "%s{\"url\":", i ? "," : "");
		put_url(o, v->sources[i].url);
		put(o, ",\"state\":\"%s\",\"lanes\":%u,\"rate\":%" PRIu64 "}",
		    v->sources[i].state, v->sources[i].lanes,
		    v->sources[i].rate);
	}
}

static void put_proxies(struct out *o, struct fetch_proxies *proxies)
{
	static const char *const states[] = {
		[FETCH_PROXY_OK] = "ok",
		[FETCH_PROXY_FAILED] = "failed",
		[FETCH_PROXY_EXCLUDED] = "excluded",
	};
	struct fetch_proxy_info pi;

	for (uint32_t i = 0; fetch_proxies_info(proxies, i,
						fs__now_ns() / 1000000u,
						&pi) == 0;
	     i++) {
		put(o, "%s{\"proxy\":", i ? "," : "");
		put_str(o, pi.name);
		put(o,
		    ",\"group\":%" PRIu32 ",\"state\":\"%s\",\"retry_in_ms\":%" PRIu64
		    ",\"requests\":%" PRIu64 ",\"failures\":%" PRIu64
		    ",\"bytes\":%" PRIu64 ",\"hits\":%" PRIu64
		    ",\"misses\":%" PRIu64 ",\"bad_answers\":%" PRIu64 "}",
		    pi.group, states[pi.state], pi.retry_in_ms, pi.requests,
		    pi.failures, pi.bytes, pi.hits, pi.misses, pi.bad);
	}
}

/* The engine's lanes, readers and sources into *v (arrays of
 * FS_STATUS_ITEMS each); false when memory ran out. */
static bool engine_view(struct fs_engine *e, struct fs_engine_view *v)
{
	*v = (struct fs_engine_view){
		.lanes = calloc(FS_STATUS_ITEMS, sizeof(*v->lanes)),
		.readers = calloc(FS_STATUS_ITEMS, sizeof(*v->readers)),
		.sources = calloc(FS_STATUS_ITEMS, sizeof(*v->sources)),
		.cap_lanes = FS_STATUS_ITEMS,
		.cap_readers = FS_STATUS_ITEMS,
		.cap_sources = FS_STATUS_ITEMS,
	};
	if (v->lanes == NULL || v->readers == NULL || v->sources == NULL)
		return false;
	fs__engine_view(e, v);
	return true;
}

/* The samples the metrics endpoint exports (fs__metrics_walk), the last
 * member: where the rest left too little room for them all, it says so
 * rather than fail the document. */
static void put_metrics(struct out *o, struct fs_mount *m)
{
	struct fs_metrics_now now;
	size_t room = o->cap - o->used, len;
	char *json = NULL;

	if (m->metrics == NULL || o->full || room < 64)
		return;
	fs__metrics_now(m, &now);
	if (fs__metrics_json(m->metrics, &now, room - 64, &json, &len) == 0)
		put(o, ",\"metrics\":%s", json);
	else
		put(o, ",\"metrics_left_out\":true");
	free(json);
}

int fs__status_json(struct fs_mount *m, char *buf, size_t cap)
{
	struct fs_engine *e = m->engine;
	struct out o = {.buf = buf, .cap = cap};
	struct fs_engine_view v;
	struct cache_stats cs;
	char path[PATH_MAX];
	bool first = true;

	put(&o, "{\"version\":1,\"files\":[");
	pthread_mutex_lock(&m->ns->mu);
	for (uint32_t i = 0; i < m->ns->n; i++) {
		const struct fs_node *n = m->ns->nodes[i];

		/* Files in use only: the attribute holds 64 KiB at most. */
		if (n->is_dir || n->gone || n->blob == FS_NO_BLOB)
			continue;
		fs__ns_path(m->ns, i, path, sizeof(path));
		put(&o, "%s{\"path\":", first ? "" : ",");
		put_str(&o, path);
		put(&o, ",\"size\":%" PRIu64 ",\"held\":%" PRIu64 ",\"state\":",
		    n->size, fs__engine_held(e, n->blob));
		put_str(&o, fs__engine_state(e, n->blob));
		put(&o, ",\"urls\":[");
		for (uint32_t u = 0; u < n->nurls; u++) {
			put(&o, "%s", u ? "," : "");
			put_url(&o, n->urls[u]);
		}
		put(&o, "]}");
		first = false;
	}
	pthread_mutex_unlock(&m->ns->mu);
	if (!engine_view(e, &v))
		o.full = true; /* out of memory: the caller says so */
	put(&o, "],\"lanes\":[");
	put_lanes(&o, &v);
	put(&o, "],\"readers\":[");
	put_readers(&o, &v);
	put(&o, "],\"sources\":[");
	put_sources(&o, &v);
	free(v.lanes);
	free(v.readers);
	free(v.sources);
	put(&o, "],\"proxies\":[");
	put_proxies(&o, m->fetch.proxies);
	put(&o, "]");
	if (cache_stats_get(m->cache, &cs) == 0)
		put(&o,
		    ",\"cache\":{\"blobs\":%" PRIu64 ",\"bytes\":%" PRIu64
		    ",\"file_size\":%" PRIu64 "}",
		    cs.blobs, cs.bytes, cs.file_size);
	put_metrics(&o, m);
	put(&o, "}");
	return o.full ? -ERANGE : (int)o.used;
}

/* A string member of v as the terminal may show it: decoded from JSON, a
 * name holds whatever bytes its server chose, escape sequences included. */
static const char *shown(json_t *v, const char *key, char *buf, size_t cap)
{
	const char *s = json_string_value(json_object_get(v, key));

	return fs__escape(s != NULL ? s : "", buf, cap);
}

/* An integer member of v in bytes, as people read it. */
static const char *human(json_t *v, const char *key, char *buf, size_t cap)
{
	return fs__human_size((uint64_t)json_integer_value(
				      json_object_get(v, key)),
			      buf, cap);
}

/* A file in use: its fill bar, bytes held and state. */
static void render_file(json_t *v)
{
	uint64_t size =
		(uint64_t)json_integer_value(json_object_get(v, "size"));
	uint64_t held =
		(uint64_t)json_integer_value(json_object_get(v, "held"));
	double pct = size ? 100.0 * (double)held / (double)size : 100;
	char bar[31], hs[32], hh[32], path[PATH_MAX * 4], state[64];
	int fill = (int)(pct * 30 / 100);

	for (int k = 0; k < 30; k++)
		bar[k] = k < fill ? '#' : '.';
	bar[30] = '\0';
	fs__human_size(size, hs, sizeof(hs));
	fs__human_size(held, hh, sizeof(hh));
	printf("%-40s [%s] %5.1f%%  %s of %s  %s\n",
	       shown(v, "path", path, sizeof(path)), bar, pct, hh, hs,
	       shown(v, "state", state, sizeof(state)));
}

/* A reader: its file, its mode, where it reads, how fast, its window and
 * lead. */
static void render_reader(json_t *v)
{
	char file[PATH_MAX * 4], mode[32], cur[32], rate[32], win[32], lead[32];
	uint64_t lead_ms =
		(uint64_t)json_integer_value(json_object_get(v, "lead_ms"));

	human(v, "cursor", cur, sizeof(cur));
	human(v, "rate", rate, sizeof(rate));
	human(v, "window", win, sizeof(win));
	human(v, "lead", lead, sizeof(lead));
	printf("  reader %lld  %-30s %-10s at %s, reading %s/s, window "
	       "%s, lead %s",
	       json_integer_value(json_object_get(v, "reader")),
	       shown(v, "file", file, sizeof(file)),
	       shown(v, "mode", mode, sizeof(mode)), cur, rate, win, lead);
	if (lead_ms > 0)
		printf(" (%" PRIu64 ".%01" PRIu64 " s)", lead_ms / 1000,
		       lead_ms % 1000 / 100);
	printf("\n");
}

/* A lane's transfer: its range, rate, source and the reader it serves. */
static void render_lane(json_t *v)
{
	char rate[32], file[PATH_MAX * 4], source[8192], who[48];
	json_t *reader = json_object_get(v, "reader");

	human(v, "rate", rate, sizeof(rate));
	if (json_is_true(json_object_get(v, "demand")))
		snprintf(who, sizeof(who), "a waiting read");
	else if (reader != NULL)
		snprintf(who, sizeof(who), "reader %" JSON_INTEGER_FORMAT,
			 json_integer_value(reader));
	else
		snprintf(who, sizeof(who), "no reader");
	printf("  lane %2lld  %-30s %s/s  %" JSON_INTEGER_FORMAT
	       "-%" JSON_INTEGER_FORMAT "%s  for %s\n    from %s\n",
	       json_integer_value(json_object_get(v, "lane")),
	       shown(v, "file", file, sizeof(file)), rate,
	       json_integer_value(json_object_get(v, "frontier")),
	       json_integer_value(json_object_get(v, "end")),
	       json_is_true(json_object_get(v, "collapsed")) ? "  (collapsing)"
							     : "",
	       who, shown(v, "source", source, sizeof(source)));
}

/* A source: its state, lanes and rate per lane. */
static void render_source(json_t *v)
{
	char rate[32], url[8192], state[64];

	human(v, "rate", rate, sizeof(rate));
	printf("source %s: %s, %" JSON_INTEGER_FORMAT " lanes, %s/s per lane\n",
	       shown(v, "url", url, sizeof(url)),
	       shown(v, "state", state, sizeof(state)),
	       json_integer_value(json_object_get(v, "lanes")), rate);
}

/* A proxy: its state, requests, failures, bytes and hit ratio. */
static void render_proxy(json_t *v)
{
	char name[1024], state[64], bytes[32], ratio[32];
	json_int_t hits = json_integer_value(json_object_get(v, "hits"));
	json_int_t misses = json_integer_value(json_object_get(v, "misses"));
	json_int_t retry =
		json_integer_value(json_object_get(v, "retry_in_ms"));

	human(v, "bytes", bytes, sizeof(bytes));
	if (hits + misses > 0)
		snprintf(ratio, sizeof(ratio), "%.0f%%",
			 100.0 * (double)hits / (double)(hits + misses));
	else
		snprintf(ratio, sizeof(ratio), "unknown");
	printf("proxy %s (group %" JSON_INTEGER_FORMAT "): %s",
	       shown(v, "proxy", name, sizeof(name)),
	       json_integer_value(json_object_get(v, "group")),
	       shown(v, "state", state, sizeof(state)));
	if (retry > 0)
		printf(" (retried in %" JSON_INTEGER_FORMAT " s)",
		       (retry + 999) / 1000);
	printf(", %" JSON_INTEGER_FORMAT " requests, %" JSON_INTEGER_FORMAT
	       " failures, %" JSON_INTEGER_FORMAT " bad answers, %s, "
	       "hit ratio %s (%" JSON_INTEGER_FORMAT
	       " hits, %" JSON_INTEGER_FORMAT " misses)\n",
	       json_integer_value(json_object_get(v, "requests")),
	       json_integer_value(json_object_get(v, "failures")),
	       json_integer_value(json_object_get(v, "bad_answers")), bytes,
	       ratio, hits, misses);
}

/* The cache's totals. */
static void render_cache(json_t *cache)
{
	char bytes[32], disk[32];

	human(cache, "bytes", bytes, sizeof(bytes));
	human(cache, "file_size", disk, sizeof(disk));
	printf("cache: %" JSON_INTEGER_FORMAT " blobs, %s held, %s on disk\n",
	       json_integer_value(json_object_get(cache, "blobs")), bytes,
	       disk);
}

/* The sum of the values of samples named name whose label key (NULL:
 * any) is value. */
static double metric_sum(json_t *metrics, const char *name, const char *key,
			 const char *value)
{
	double sum = 0;
	size_t i;
	json_t *v;

	json_array_foreach(metrics, i, v)
	{
		const char *got = json_string_value(json_object_get(
			json_object_get(v, "labels"), key != NULL ? key : ""));
		const char *is = json_string_value(json_object_get(v, "name"));

		if (is != NULL && strcmp(is, name) == 0 &&
		    (key == NULL || (got != NULL && strcmp(got, value) == 0)))
			sum += json_number_value(json_object_get(v, "value"));
	}
	return sum;
}

/* The counters, in two lines: the reads, where their bytes came from;
 * the requests and what went wrong. */
static void render_metrics(json_t *m)
{
	char net[32], mem[32], cache[32], got[32];

	fs__human_size((uint64_t)metric_sum(m, "pacefs_read_bytes_total",
					    "from", "network"),
		       net, sizeof(net));
	fs__human_size((uint64_t)metric_sum(m, "pacefs_read_bytes_total",
					    "from", "memory"),
		       mem, sizeof(mem));
	fs__human_size((uint64_t)metric_sum(m, "pacefs_read_bytes_total",
					    "from", "cache"),
		       cache, sizeof(cache));
	fs__human_size((uint64_t)metric_sum(m,
					    "pacefs_http_response_bytes_total",
					    NULL, NULL),
		       got, sizeof(got));
	printf("reads: %.0f (%.0f waited, %.0f failed), answered with %s "
	       "from the network, %s from memory, %s from the cache\n",
	       metric_sum(m, "pacefs_read_duration_seconds_count", NULL, NULL),
	       metric_sum(m, "pacefs_cache_misses_total", NULL, NULL),
	       metric_sum(m, "pacefs_read_errors_total", NULL, NULL), net, mem,
	       cache);
	printf("requests: %.0f (%.0f answered 2xx), %s received; %.0f "
	       "transfer faults, %.0f retries\n",
	       metric_sum(m, "pacefs_http_requests_total", NULL, NULL),
	       metric_sum(m, "pacefs_http_requests_total", "status", "2xx"),
	       got, metric_sum(m, "pacefs_transfer_faults_total", NULL, NULL),
	       metric_sum(m, "pacefs_transfer_retries_total", NULL, NULL));
}

/* The status document as people read it: one section per array, in the
 * order a cold read meets them. */
static void render(json_t *root)
{
	json_t *cache = json_object_get(root, "cache");
	size_t i;
	json_t *v;

	json_array_foreach(json_object_get(root, "files"), i, v)
	{
		render_file(v);
	}
	json_array_foreach(json_object_get(root, "readers"), i, v)
	{
		render_reader(v);
	}
	json_array_foreach(json_object_get(root, "lanes"), i, v)
	{
		render_lane(v);
	}
	json_array_foreach(json_object_get(root, "sources"), i, v)
	{
		render_source(v);
	}
	json_array_foreach(json_object_get(root, "proxies"), i, v)
	{
		render_proxy(v);
	}
	if (cache != NULL)
		render_cache(cache);
	if (json_object_get(root, "metrics") != NULL)
		render_metrics(json_object_get(root, "metrics"));
}

int fs_status_command(int argc, char **argv)
{
	const char *mnt = NULL;
	bool watch = false, as_json = false;
	char *buf;
	ssize_t n;

	for (int i = 2; i < argc; i++) {
		if (strcmp(argv[i], "-w") == 0 ||
		    strcmp(argv[i], "--watch") == 0)
			watch = true;
		else if (strcmp(argv[i], "--json") == 0)
			as_json = true;
		else if (argv[i][0] != '-' && mnt == NULL)
			mnt = argv[i];
		else {
			fprintf(stderr,
				"pacefs: status: unexpected argument '%s' "
				"(usage: pacefs status [-w] [--json] "
				"MOUNTPOINT)\n",
				argv[i]);
			return 1;
		}
	}
	if (mnt == NULL) {
		fprintf(stderr, "pacefs: status: usage: pacefs status [-w] "
				"[--json] MOUNTPOINT\n");
		return 1;
	}
	buf = malloc(FS_STATUS_MAX);
	if (buf == NULL)
		return 1;
	for (;;) {
		json_error_t jerr;
		json_t *root;

		n = getxattr(mnt, "user.pacefs.status", buf, FS_STATUS_MAX - 1);
		if (n < 0) {
			fprintf(stderr, "pacefs: status: %s: %s\n", mnt,
				errno == ENODATA || errno == ENOTSUP
					? "not a pacefs mount"
					: strerror(errno));
			free(buf);
			return 1;
		}
		buf[n] = '\0';
		if (watch)
			printf("\033[H\033[J");
		if (as_json) {
			printf("%s\n", buf);
		} else {
			root = json_loads(buf, 0, &jerr);
			if (root == NULL) {
				fprintf(stderr,
					"pacefs: status: %s: bad status: %s\n",
					mnt, jerr.text);
				free(buf);
				return 1;
			}
			render(root);
			json_decref(root);
		}
		fflush(stdout);
		if (!watch)
			break;
		sleep(1);
	}
	free(buf);
	return 0;
}

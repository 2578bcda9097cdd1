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

#include "fs/fs_int.h"

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
 * manifests: control characters (C0, DEL, C1) are \u escapes, and a byte
 * that is not well-formed UTF-8 is U+FFFD, so the document always parses
 * and holds no raw control byte. */
static void put_str(struct out *o, const char *s)
{
	put(o, "\"");
	while (*s) {
		unsigned char c = (unsigned char)*s;
		uint32_t cp = c;
		size_t n = c < 0x80 ? 1 : fs__utf8_seq(s, &cp);

		if (c == '"' || c == '\\') {
			put(o, "\\%c", c);
		} else if (n == 0) {
			put(o, "\\ufffd");
			n = 1;
		} else if (cp < 0x20 || (cp >= 0x7f && cp <= 0x9f)) {
			put(o, "\\u%04x", (unsigned)cp);
		} else {
			put(o, "%.*s", (int)n, s);
		}
		s += n;
	}
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

int fs__status_json(struct fs_mount *m, char *buf, size_t cap)
{
	struct fs_engine *e = m->engine;
	struct out o = {.buf = buf, .cap = cap};
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
	put(&o, "],\"lanes\":[");
	first = true;
	pthread_mutex_lock(&e->mu);
	for (uint32_t l = 0;; l++) {
		struct pace_lane_info li;
		const struct fs_blob *b;

		if (pace_lane_info(e->pace, l, &li) != 0)
			break;
		if (!li.busy || li.blob >= e->nblobs)
			continue;
		b = &e->blobs[li.blob];
		put(&o, "%s{\"lane\":%u,\"file\":", first ? "" : ",", l);
		put_str(&o, b->name);
		put(&o, ",\"source\":");
		for (uint32_t s = 0; s < b->nsources; s++)
			if (b->sources[s].pace_id == li.source)
				put_url(&o, b->sources[s].url);
		put(&o,
		    ",\"start\":%" PRIu64 ",\"frontier\":%" PRIu64
		    ",\"end\":%" PRIu64 ",\"rate\":%" PRIu64
		    ",\"collapsed\":%s,\"demand\":%s",
		    li.start, li.frontier, li.end, li.rate,
		    li.collapsed ? "true" : "false",
		    li.demand ? "true" : "false");
		if (li.reader != PACE_NONE)
			put(&o, ",\"reader\":%" PRIu32, li.reader);
		put(&o, "}");
		first = false;
	}
	put(&o, "],\"readers\":[");
	first = true;
	for (uint32_t r = 0; r < pace_reader_bound(e->pace); r++) {
		static const char *const modes[] = {
			[PACE_READER_NEW] = "new",
			[PACE_READER_RANDOM] = "random",
			[PACE_READER_SEQUENTIAL] = "sequential",
			[PACE_READER_PAUSED] = "paused",
		};
		struct pace_reader_info ri;

		if (pace_reader_info(e->pace, r, fs__now_ns(), &ri) != 0 ||
		    ri.blob >= e->nblobs)
			continue;
		put(&o, "%s{\"reader\":%" PRIu32 ",\"file\":",
		    first ? "" : ",", r);
		put_str(&o, e->blobs[ri.blob].name);
		put(&o,
		    ",\"mode\":\"%s\",\"cursor\":%" PRIu64 ",\"rate\":%" PRIu64
		    ",\"window\":%" PRIu64 ",\"lead\":%" PRIu64
		    ",\"lead_ms\":%" PRIu64 "}",
		    modes[ri.mode], ri.cursor, ri.rate, ri.window, ri.lead,
		    ri.lead_ms);
		first = false;
	}
	put(&o, "],\"sources\":[");
	first = true;
	for (uint32_t bi = 0; bi < e->nblobs; bi++) {
		const struct fs_blob *b = &e->blobs[bi];

		for (uint32_t si = 0; si < b->nsources; si++) {
			struct pace_source_info psi;
			uint64_t now = fs__now_ns();

			if (pace_source_info(e->pace, b->sources[si].pace_id,
					     now, &psi) != 0)
				continue;
			put(&o, "%s{\"url\":", first ? "" : ",");
			put_url(&o, b->sources[si].url);
			put(&o,
			    ",\"state\":\"%s\",\"lanes\":%u,\"rate\":%" PRIu64
			    "}",
			    psi.excluded	   ? "excluded"
			    : psi.down		   ? "down"
			    : psi.held_until > now ? "backing off"
						   : "ok",
			    psi.lanes, psi.rate);
			first = false;
		}
	}
	pthread_mutex_unlock(&e->mu);
	put(&o, "],\"proxies\":[");
	for (uint32_t i = 0;; i++) {
		static const char *const states[] = {
			[FETCH_PROXY_OK] = "ok",
			[FETCH_PROXY_FAILED] = "failed",
			[FETCH_PROXY_EXCLUDED] = "excluded",
		};
		struct fetch_proxy_info pi;

		if (fetch_proxies_info(m->fetch.proxies, i,
				       fs__now_ns() / 1000000u, &pi) != 0)
			break;
		put(&o, "%s{\"proxy\":", i ? "," : "");
		put_str(&o, pi.name);
		put(&o,
		    ",\"group\":%" PRIu32 ",\"state\":\"%s\",\"retry_in_ms\":%" PRIu64
		    ",\"requests\":%" PRIu64 ",\"failures\":%" PRIu64
		    ",\"bytes\":%" PRIu64 ",\"hits\":%" PRIu64
		    ",\"misses\":%" PRIu64 "}",
		    pi.group, states[pi.state], pi.retry_in_ms, pi.requests,
		    pi.failures, pi.bytes, pi.hits, pi.misses);
	}
	put(&o, "]");
	if (cache_stats_get(m->cache, &cs) == 0)
		put(&o,
		    ",\"cache\":{\"blobs\":%" PRIu64 ",\"bytes\":%" PRIu64
		    ",\"file_size\":%" PRIu64 "}",
		    cs.blobs, cs.bytes, cs.file_size);
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

static void render(json_t *root)
{
	json_t *files = json_object_get(root, "files");
	json_t *lanes = json_object_get(root, "lanes");
	json_t *cache = json_object_get(root, "cache");
	size_t i;
	json_t *v;

	json_array_foreach(files, i, v)
	{
		uint64_t size = (uint64_t)json_integer_value(
			json_object_get(v, "size"));
		uint64_t held = (uint64_t)json_integer_value(
			json_object_get(v, "held"));
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
	json_array_foreach(json_object_get(root, "readers"), i, v)
	{
		char file[PATH_MAX * 4], mode[32], cur[32], rate[32], win[32],
			lead[32];
		uint64_t lead_ms = (uint64_t)json_integer_value(
			json_object_get(v, "lead_ms"));

		fs__human_size((uint64_t)json_integer_value(
				       json_object_get(v, "cursor")),
			       cur, sizeof(cur));
		fs__human_size((uint64_t)json_integer_value(
				       json_object_get(v, "rate")),
			       rate, sizeof(rate));
		fs__human_size((uint64_t)json_integer_value(
				       json_object_get(v, "window")),
			       win, sizeof(win));
		fs__human_size((uint64_t)json_integer_value(
				       json_object_get(v, "lead")),
			       lead, sizeof(lead));
		printf("  reader %lld  %-30s %-10s at %s, reading %s/s, window "
		       "%s, lead %s",
		       json_integer_value(json_object_get(v, "reader")),
		       shown(v, "file", file, sizeof(file)),
		       shown(v, "mode", mode, sizeof(mode)), cur, rate, win,
		       lead);
		if (lead_ms > 0)
			printf(" (%" PRIu64 ".%01" PRIu64 " s)", lead_ms / 1000,
			       lead_ms % 1000 / 100);
		printf("\n");
	}
	json_array_foreach(lanes, i, v)
	{
		char rate[32], file[PATH_MAX * 4], source[8192], who[48];
		json_t *reader = json_object_get(v, "reader");

		fs__human_size((uint64_t)json_integer_value(
				       json_object_get(v, "rate")),
			       rate, sizeof(rate));
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
		       json_is_true(json_object_get(v, "collapsed"))
			       ? "  (collapsing)"
			       : "",
		       who, shown(v, "source", source, sizeof(source)));
	}
	json_array_foreach(json_object_get(root, "sources"), i, v)
	{
		char rate[32], url[8192], state[64];

		fs__human_size((uint64_t)json_integer_value(
				       json_object_get(v, "rate")),
			       rate, sizeof(rate));
		printf("source %s: %s, %" JSON_INTEGER_FORMAT
		       " lanes, %s/s per lane\n",
		       shown(v, "url", url, sizeof(url)),
		       shown(v, "state", state, sizeof(state)),
		       json_integer_value(json_object_get(v, "lanes")), rate);
	}
	json_array_foreach(json_object_get(root, "proxies"), i, v)
	{
		char name[1024], state[64], bytes[32], ratio[32];
		json_int_t hits = json_integer_value(json_object_get(v, "hits"));
		json_int_t misses =
			json_integer_value(json_object_get(v, "misses"));
		json_int_t retry =
			json_integer_value(json_object_get(v, "retry_in_ms"));

		fs__human_size((uint64_t)json_integer_value(
				       json_object_get(v, "bytes")),
			       bytes, sizeof(bytes));
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
		       " failures, %s, hit ratio %s (%" JSON_INTEGER_FORMAT
		       " hits, %" JSON_INTEGER_FORMAT " misses)\n",
		       json_integer_value(json_object_get(v, "requests")),
		       json_integer_value(json_object_get(v, "failures")),
		       bytes, ratio, hits, misses);
	}
	if (cache != NULL) {
		char bytes[32], disk[32];

		fs__human_size((uint64_t)json_integer_value(
				       json_object_get(cache, "bytes")),
			       bytes, sizeof(bytes));
		fs__human_size((uint64_t)json_integer_value(
				       json_object_get(cache, "file_size")),
			       disk, sizeof(disk));
		printf("cache: %" JSON_INTEGER_FORMAT
		       " blobs, %s held, %s on disk\n",
		       json_integer_value(json_object_get(cache, "blobs")),
		       bytes, disk);
	}
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

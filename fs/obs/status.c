/* status: the mount's state as one JSON document, served as the root's
 * user.pacefs.status attribute (cli/statuscmd.c renders it). */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fs/engine/engine.h"
#include "fs/obs/obs.h"
#include "fs/obs/obs_int.h"
#include "fs/tree/tree.h"

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
#define OBS_STATUS_ITEMS 512

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

	for (uint32_t i = 0;
	     fetch_proxies_info(proxies, i, fs__now_ns() / 1000000u, &pi) == 0;
	     i++) {
		put(o, "%s{\"proxy\":", i ? "," : "");
		put_str(o, pi.name);
		put(o,
		    ",\"group\":%" PRIu32
		    ",\"state\":\"%s\",\"retry_in_ms\":%" PRIu64
		    ",\"requests\":%" PRIu64 ",\"failures\":%" PRIu64
		    ",\"bytes\":%" PRIu64 ",\"hits\":%" PRIu64
		    ",\"misses\":%" PRIu64 ",\"bad_answers\":%" PRIu64 "}",
		    pi.group, states[pi.state], pi.retry_in_ms, pi.requests,
		    pi.failures, pi.bytes, pi.hits, pi.misses, pi.bad);
	}
}

/* The engine's lanes, readers and sources into *v (arrays of
 * OBS_STATUS_ITEMS each); false when memory ran out. */
static bool engine_view(struct fs_engine *e, struct fs_engine_view *v)
{
	*v = (struct fs_engine_view){
		.lanes = calloc(OBS_STATUS_ITEMS, sizeof(*v->lanes)),
		.readers = calloc(OBS_STATUS_ITEMS, sizeof(*v->readers)),
		.sources = calloc(OBS_STATUS_ITEMS, sizeof(*v->sources)),
		.cap_lanes = OBS_STATUS_ITEMS,
		.cap_readers = OBS_STATUS_ITEMS,
		.cap_sources = OBS_STATUS_ITEMS,
	};
	if (v->lanes == NULL || v->readers == NULL || v->sources == NULL)
		return false;
	fs__engine_view(e, v);
	return true;
}

/* The samples the metrics endpoint exports (obs__metrics_walk), the last
 * member: where the rest left too little room for them all, it says so
 * rather than fail the document. */
static void put_metrics(struct out *o, const struct obs_view *m)
{
	struct obs_metrics_now now;
	size_t room = o->cap - o->used, len;
	char *json = NULL;

	if (m->metrics == NULL || o->full || room < 64)
		return;
	obs__metrics_now(m, &now);
	if (obs__metrics_json(m->metrics, &now, room - 64, &json, &len) == 0)
		put(o, ",\"metrics\":%s", json);
	else
		put(o, ",\"metrics_left_out\":true");
	free(json);
}

int obs_status_json(const struct obs_view *m, char *buf, size_t cap)
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
		const struct tree_node *n = m->ns->nodes[i];

		/* Files in use only: the attribute holds 64 KiB at most. */
		if (n->is_dir || n->gone || n->blob == TREE_NO_BLOB)
			continue;
		tree_ns_path(m->ns, i, path, sizeof(path));
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
	put_proxies(&o, m->proxies);
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

/* status: the mount's state as one JSON document, served as the root's
 * user.pacefs.status attribute (cli/statuscmd.c renders it). */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fs/engine/engine.h"
#include "fs/obs/obs.h"
#include "fs/obs/obs_int.h"
#include "fs/tree/tree.h"

/* Writes s as a JSON string. Names and URLs come from servers and
 * manifests: fs__json_escape makes sure the document always parses and
 * holds no raw control byte. */
static void put_str(struct obs_text *o, const char *s)
{
	obs__text_add(o, "\"");
	obs__text_add_escaped(o, s, fs__json_escape);
	obs__text_add(o, "\"");
}

/* Writes url as a JSON string, without its userinfo: status is readable
 * by whoever may read the mount's root. */
static void put_url(struct obs_text *o, const char *url)
{
	char *shown = fetch_url_redacted(url);

	if (shown == NULL)
		o->failed = true; /* out of memory: the caller says so */
	else
		put_str(o, shown);
	free(shown);
}

/* The stream of a file whose every source ignores Range: where it is,
 * how fast, the earliest read that waits for it and how long it has to
 * go, and its restarts from byte 0. Nothing for any other file. */
static void put_stream(struct obs_text *o, struct engine *e, uint32_t b)
{
	struct engine_stream_view sv;

	if (engine_stream(e, b, &sv) != 0)
		return;
	obs__text_add(
		o,
		",\"stream\":{\"running\":%s,\"held\":%s,\"frontier\":%" PRIu64
		",\"rate\":%" PRIu64 ",\"restarts\":%" PRIu64,
		sv.running ? "true" : "false", sv.held ? "true" : "false",
		sv.frontier, sv.rate, sv.restarts);
	if (sv.wait_off != UINT64_MAX)
		obs__text_add(o, ",\"waiting_read\":%" PRIu64, sv.wait_off);
	if (sv.eta_ms != UINT64_MAX)
		obs__text_add(o, ",\"wait_ms\":%" PRIu64, sv.eta_ms);
	obs__text_add(o, "}");
}

/* Status lists at most this many entries of a kind: the document holds
 * 64 KiB. */
#define OBS_STATUS_ITEMS 512

/* Whether the item written since mark ends within bound. One that does
 * not is taken back whole: a list past its share of the document is cut
 * and its items counted ("files_left_out", ...), never the document. */
static bool item_fits(struct obs_text *o, size_t mark, size_t bound)
{
	if (o->len == mark || (!o->failed && o->len <= bound))
		return true; /* nothing written (a failure before), or it fits
			      */
	o->len = mark;
	o->failed = false;
	return false;
}

/* ",\"NAME_left_out\":N" after a list that was cut. */
static void put_left_out(struct obs_text *o, const char *name, uint64_t n)
{
	if (n > 0)
		obs__text_add(o, ",\"%s_left_out\":%" PRIu64, name, n);
}

/* The lists below write their items while they end within bound and
 * return how many they left out. */
static uint32_t put_lanes(struct obs_text *o, const struct engine_view *v,
			  size_t bound)
{
	for (uint32_t i = 0; i < v->nlanes; i++) {
		const struct engine_lane_view *l = &v->lanes[i];
		size_t mark = o->len;

		obs__text_add(o, "%s{\"lane\":%u,\"file\":", i ? "," : "",
			      l->lane);
		put_str(o, l->file);
		obs__text_add(o, ",\"source\":");
		if (l->source != NULL)
			put_url(o, l->source);
		else
			obs__text_add(o, "null");
		obs__text_add(o,
			      ",\"start\":%" PRIu64 ",\"frontier\":%" PRIu64
			      ",\"end\":%" PRIu64 ",\"rate\":%" PRIu64
			      ",\"collapsed\":%s,\"demand\":%s",
			      l->info.start, l->info.frontier, l->info.end,
			      l->info.rate,
			      l->info.collapsed ? "true" : "false",
			      l->info.demand ? "true" : "false");
		if (l->info.reader != PACE_NONE)
			obs__text_add(o, ",\"reader\":%" PRIu32,
				      l->info.reader);
		obs__text_add(o, "}");
		if (!item_fits(o, mark, bound))
			return v->nlanes - i;
	}
	return 0;
}

static uint32_t put_readers(struct obs_text *o, const struct engine_view *v,
			    size_t bound)
{
	for (uint32_t i = 0; i < v->nreaders; i++) {
		const struct engine_reader_view *r = &v->readers[i];
		size_t mark = o->len;

		obs__text_add(o, "%s{\"reader\":%" PRIu32 ",\"file\":",
			      i ? "," : "", r->reader);
		put_str(o, r->file);
		obs__text_add(o,
			      ",\"mode\":\"%s\",\"cursor\":%" PRIu64
			      ",\"rate\":%" PRIu64 ",\"window\":%" PRIu64
			      ",\"lead\":%" PRIu64 ",\"lead_ms\":%" PRIu64 "}",
			      r->mode, r->info.cursor, r->info.rate,
			      r->info.window, r->info.lead, r->info.lead_ms);
		if (!item_fits(o, mark, bound))
			return v->nreaders - i;
	}
	return 0;
}

static uint32_t put_sources(struct obs_text *o, const struct engine_view *v,
			    size_t bound)
{
	for (uint32_t i = 0; i < v->nsources; i++) {
		size_t mark = o->len;

		obs__text_add(o, "%s{\"url\":", i ? "," : "");
		put_url(o, v->sources[i].url);
		obs__text_add(o,
			      ",\"state\":\"%s\",\"lanes\":%u,\"rate\":%" PRIu64
			      "}",
			      v->sources[i].state, v->sources[i].lanes,
			      v->sources[i].rate);
		if (!item_fits(o, mark, bound))
			return v->nsources - i;
	}
	return 0;
}

static void put_proxies(struct obs_text *o, struct fetch_proxies *proxies)
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
		obs__text_add(o, "%s{\"proxy\":", i ? "," : "");
		put_str(o, pi.name);
		obs__text_add(
			o,
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
static bool view_take(struct engine *e, struct engine_view *v)
{
	*v = (struct engine_view){
		.lanes = calloc(OBS_STATUS_ITEMS, sizeof(*v->lanes)),
		.readers = calloc(OBS_STATUS_ITEMS, sizeof(*v->readers)),
		.sources = calloc(OBS_STATUS_ITEMS, sizeof(*v->sources)),
		.cap_lanes = OBS_STATUS_ITEMS,
		.cap_readers = OBS_STATUS_ITEMS,
		.cap_sources = OBS_STATUS_ITEMS,
	};
	if (v->lanes == NULL || v->readers == NULL || v->sources == NULL)
		return false;
	engine_view(e, v);
	return true;
}

/* The samples the metrics endpoint exports (obs__metrics_walk), the last
 * member: where the rest left too little room for them all, it says so
 * rather than fail the document. */
static void put_metrics(struct obs_text *o, const struct obs_view *m)
{
	struct obs_metrics_now now;
	size_t room = o->cap - o->len, len;
	char *json = NULL;

	if (m->metrics == NULL || o->failed || room < 64)
		return;
	obs__metrics_now(m, &now);
	if (obs__metrics_json(m->metrics, &now, room - 64, &json, &len) == 0)
		obs__text_add(o, ",\"metrics\":%s", json);
	else
		obs__text_add(o, ",\"metrics_left_out\":true");
	free(json);
}

/* The read plans, as their owner writes them (driver/planahead.c),
 * within what the document has left but the metrics' least; when they do
 * not fit, "plans_left_out" says so (the root's user.pacefs.plans holds
 * them alone). */
static void put_plans(struct obs_text *o, const struct obs_view *m)
{
	size_t room = o->cap - o->len;
	char *buf;
	int n = -ERANGE;

	if (m->plans_json == NULL || o->failed)
		return;
	buf = room > 128 ? malloc(room - 64) : NULL;
	if (buf != NULL)
		n = m->plans_json(m->plans_arg, buf, room - 64);
	if (n >= 0 && (size_t)n + 16 < room - 64)
		obs__text_add(o, ",\"plans\":%s", buf);
	else
		obs__text_add(o, ",\"plans_left_out\":true");
	free(buf);
}

int obs_status_json(const struct obs_view *m, char *buf, size_t cap)
{
	/* Written into the caller's buffer (limit 0: it never grows). */
	struct engine *e = m->engine;
	struct obs_text o = {.p = buf, .cap = cap};
	struct engine_view v;
	struct cache_stats cs;
	struct tree_usage tu;
	char path[PATH_MAX];
	bool first = true;
	uint64_t left_out = 0;

	obs__text_add(&o, "{\"version\":1,\"files\":[");
	pthread_mutex_lock(&m->ns->mu);
	tree_ns_usage(m->ns, &tu);
	for (uint32_t i = 0; i < m->ns->n; i++) {
		const struct tree_node *n = tree_ns_get(m->ns, i);
		size_t mark = o.len;

		/* Files in use only, within half of the document: the
		 * attribute holds 64 KiB, and the lanes, readers, cache and
		 * plans after them say more than the thousandth file. */
		if (n->is_dir || n->gone || n->blob == TREE_NO_BLOB)
			continue;
		if (left_out > 0) {
			left_out++;
			continue;
		}
		tree_ns_path(m->ns, i, path, sizeof(path));
		obs__text_add(&o, "%s{\"path\":", first ? "" : ",");
		put_str(&o, path);
		obs__text_add(&o,
			      ",\"size\":%" PRIu64 ",\"held\":%" PRIu64
			      ",\"state\":",
			      n->size, engine_held(e, n->blob));
		put_str(&o, engine_state(e, n->blob));
		obs__text_add(&o, ",\"urls\":[");
		for (uint32_t u = 0; u < tree_node_nurls(n); u++) {
			char *url = tree_ns_url(m->ns, i, u);

			obs__text_add(&o, "%s", u ? "," : "");
			put_url(&o, url != NULL ? url : "");
			free(url);
		}
		obs__text_add(&o, "]");
		put_stream(&o, e, n->blob);
		obs__text_add(&o, "}");
		if (!item_fits(&o, mark, cap / 2)) {
			left_out++;
			continue;
		}
		first = false;
	}
	pthread_mutex_unlock(&m->ns->mu);
	if (!view_take(e, &v))
		o.failed = true; /* out of memory: the caller says so */
	obs__text_add(&o, "]");
	put_left_out(&o, "files", left_out);
	/* Each list within its share: what follows the sources (proxies,
	 * tree, cache, plans; the metrics take what is left) has a quarter. */
	obs__text_add(&o, ",\"lanes\":[");
	left_out = put_lanes(&o, &v, cap / 8 * 5);
	obs__text_add(&o, "]");
	put_left_out(&o, "lanes", left_out);
	obs__text_add(&o, ",\"readers\":[");
	left_out = put_readers(&o, &v, cap / 16 * 11);
	obs__text_add(&o, "]");
	put_left_out(&o, "readers", left_out);
	obs__text_add(&o, ",\"sources\":[");
	left_out = put_sources(&o, &v, cap / 4 * 3);
	obs__text_add(&o, "]");
	put_left_out(&o, "sources", left_out);
	free(v.lanes);
	free(v.readers);
	free(v.sources);
	obs__text_add(&o, ",\"proxies\":[");
	put_proxies(&o, m->proxies);
	obs__text_add(&o, "]");
	obs__text_add(&o,
		      ",\"tree\":{\"files\":%" PRIu64 ",\"dirs\":%" PRIu64
		      ",\"bytes\":%" PRIu64 "}",
		      tu.files, tu.dirs, tu.bytes);
	if (cache_stats_get(m->cache, &cs) == 0)
		obs__text_add(&o,
			      ",\"cache\":{\"blobs\":%" PRIu64
			      ",\"bytes\":%" PRIu64 ",\"file_size\":%" PRIu64
			      "}",
			      cs.blobs, cs.bytes, cs.file_size);
	put_plans(&o, m);
	put_metrics(&o, m);
	obs__text_add(&o, "}");
	return o.failed ? -ERANGE : (int)o.len;
}

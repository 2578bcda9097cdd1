/* metrics: the mount's numbers as one list of samples: what the engine
 * counted, the requests by source, proxy and status class, the reads'
 * latency and the transfers' first bytes as histograms, the proxies and
 * the cache. The endpoint (metricsd.c) writes them in Prometheus's text
 * format and `pacefs status` as JSON, from the same walk, so the two never
 * disagree. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fs/engine/engine.h"
#include "fs/obs/obs.h"
#include "fs/obs/obs_int.h"

/* Histogram bounds, the same for the reads and the first bytes: from a
 * read served from memory (tens of µs) to a read_timeout (60 s). */
#define HIST_BOUNDS 18
static const uint64_t bound_ns[HIST_BOUNDS] = {
	100000,	     250000,	  500000,      1000000,	   2500000,
	5000000,     10000000,	  25000000,    50000000,   100000000,
	250000000,   500000000,	  1000000000,  2500000000, 5000000000,
	10000000000, 30000000000, 60000000000,
};
static const char *const bound_le[HIST_BOUNDS] = {
	"0.0001", "0.00025", "0.0005", "0.001", "0.0025", "0.005",
	"0.01",	  "0.025",   "0.05",   "0.1",	"0.25",	  "0.5",
	"1",	  "2.5",     "5",      "10",	"30",	  "60",
};

/* Status classes of a request's answer. */
enum { ST_NONE, ST_1XX, ST_2XX, ST_3XX, ST_4XX, ST_5XX, ST_N };
static const char *const status_names[ST_N] = {"none", "1xx", "2xx",
					       "3xx",  "4xx", "5xx"};

/* Hosts with a label of their own; requests to others count as "other",
 * so that a manifest of a thousand hosts cannot make a thousand series. */
#define SOURCES_MAX 32
#define HOST_MAX 256
/* Routes: each entry of -o proxy=, and no list (the last). */
#define ROUTES (FETCH_PROXIES_MAX + 1)

struct hist {
	_Atomic uint64_t n[HIST_BOUNDS + 1]; /* per bucket; the last: above
						every bound */
	_Atomic uint64_t sum_ns;
};

struct obs_metrics {
	char *labels;	    /* mount="...",k="v": what every series carries */
	pthread_mutex_t mu; /* adding a host */
	char hosts[SOURCES_MAX][HOST_MAX];
	_Atomic uint32_t nhosts; /* hosts[0, nhosts) are written */
	_Atomic uint64_t requests[SOURCES_MAX + 1][ROUTES][ST_N];
	_Atomic uint64_t bytes[SOURCES_MAX + 1][ROUTES][ST_N];
	_Atomic uint64_t read_errors;
	struct hist reads, first_bytes;
};

enum family {
	F_READ_BYTES,
	F_HITS,
	F_MISSES,
	F_READ_ERRORS,
	F_READ_SECONDS,
	F_READERS,
	F_REQUESTS,
	F_RESPONSE_BYTES,
	F_FIRST_BYTE,
	F_FAULTS,
	F_RETRIES,
	F_STREAM_RESTARTS,
	F_REFUSED,
	F_DIGEST,
	F_LANES,
	F_LANES_BUSY,
	F_INFLIGHT,
	F_SPEC_BYTES,
	F_SPEC_READ,
	F_CACHE_BYTES,
	F_CACHE_BUDGET,
	F_EVICTIONS,
	F_PROXY_UP,
	F_PROXY_REQUESTS,
	F_PROXY_FAILURES,
	F_PROXY_BAD,
	F_PROXY_BYTES,
	F_PROXY_HITS,
	F_PROXY_MISSES,
	F_BUILD,
	F_N,
};

const struct obs_metric_family obs__metric_families[] = {
	[F_READ_BYTES] = {"pacefs_read_bytes_total", "counter",
			  "Bytes the mount answered reads with, by where they "
			  "came from (the kernel's page cache answers reads "
			  "that never reach pacefs)."},
	[F_HITS] = {"pacefs_cache_hits_total", "counter",
		    "Reads whose bytes were all held, in memory or in the "
		    "cache, when they came."},
	[F_MISSES] = {"pacefs_cache_misses_total", "counter",
		      "Reads that waited for bytes from the network."},
	[F_READ_ERRORS] = {"pacefs_read_errors_total", "counter",
			   "Reads answered with an error (EIO, EINTR)."},
	[F_READ_SECONDS] = {"pacefs_read_duration_seconds", "histogram",
			    "Time from a FUSE read request to its reply."},
	[F_READERS] = {"pacefs_readers", "gauge",
		       "Open files (readers) of the mount."},
	[F_REQUESTS] = {"pacefs_http_requests_total", "counter",
			"HTTP requests sent (each redirect hop and proxy "
			"tried; probes and listings too), by source host, "
			"proxy and status class."},
	[F_RESPONSE_BYTES] = {"pacefs_http_response_bytes_total", "counter",
			      "Response body bytes received, by source host, "
			      "proxy and status class."},
	[F_FIRST_BYTE] = {"pacefs_first_byte_seconds", "histogram",
			  "Time from a range request's start to the first "
			  "byte of its response."},
	[F_FAULTS] = {"pacefs_transfer_faults_total", "counter",
		      "Range transfers that failed, by class, and lanes taken "
		      "back because they stalled (class stalled)."},
	[F_RETRIES] = {"pacefs_transfer_retries_total", "counter",
		       "Ranges taken back to be asked again: after a transient "
		       "fault, a throttle or a stall."},
	[F_STREAM_RESTARTS] = {"pacefs_stream_restarts_total", "counter",
			       "Streams of sources that ignore Range started "
			       "again from byte 0 over bytes held or streamed "
			       "before (a lost connection, bytes evicted "
			       "behind the stream)."},
	[F_REFUSED] = {"pacefs_credential_refusals_total", "counter",
		       "Range transfers refused for their credentials."},
	[F_DIGEST] = {"pacefs_digest_failures_total", "counter",
		      "Bytes that failed their SHA-256: block digests (scope "
		      "block) and whole files (scope blob)."},
	[F_LANES] = {"pacefs_lanes", "gauge",
		     "Parallel range transfers the mount may run (-o lanes=)."},
	[F_LANES_BUSY] = {"pacefs_lanes_busy", "gauge",
			  "Lanes with a transfer now."},
	[F_INFLIGHT] = {"pacefs_inflight_bytes", "gauge",
			"Bytes requested and not yet received."},
	[F_SPEC_BYTES] = {"pacefs_speculative_bytes_total", "counter",
			  "Bytes asked speculatively for scattered readers "
			  "(-o speculate=)."},
	[F_SPEC_READ] = {"pacefs_speculative_read_bytes_total", "counter",
			 "Of the bytes asked speculatively, those read since; "
			 "the rest were never read."},
	[F_CACHE_BYTES] = {"pacefs_cache_bytes", "gauge",
			   "Block bytes the cache holds (every file of the "
			   "cache directory)."},
	[F_CACHE_BUDGET] = {"pacefs_cache_budget_bytes", "gauge",
			    "The cache's budget (-o cache_size=); 0: none."},
	[F_EVICTIONS] = {"pacefs_cache_evictions_total", "counter",
			 "Cache blocks (64 KiB) this mount evicted to keep the "
			 "budget."},
	[F_PROXY_UP] = {"pacefs_proxy_up", "gauge",
			"1 when a proxy of -o proxy= is used, 0 while it is "
			"left out (failed, or excluded for wrong bytes)."},
	[F_PROXY_REQUESTS] = {"pacefs_proxy_requests_total", "counter",
			      "Requests sent through a proxy, retries "
			      "included."},
	[F_PROXY_FAILURES] = {"pacefs_proxy_failures_total", "counter",
			      "Requests a proxy failed or answered wrongly."},
	[F_PROXY_BAD] = {"pacefs_proxy_bad_answers_total", "counter",
			 "Answers of a proxy refused as no origin gives them."},
	[F_PROXY_BYTES] = {"pacefs_proxy_response_bytes_total", "counter",
			   "Range response body bytes through a proxy."},
	[F_PROXY_HITS] = {"pacefs_proxy_cache_hits_total", "counter",
			  "Responses a proxy said came from its cache "
			  "(X-Cache, Age)."},
	[F_PROXY_MISSES] = {"pacefs_proxy_cache_misses_total", "counter",
			    "Responses a proxy said it fetched."},
	[F_BUILD] = {"pacefs_build_info", "gauge",
		     "1, with pacefs's version as a label."},
	{NULL, NULL, NULL},
};

int obs_metrics_new(const char *mountpoint, char *const *labels,
		    unsigned nlabels, struct obs_metrics **out)
{
	struct obs_metrics *mx = calloc(1, sizeof(*mx));
	size_t cap = 16 + 6 * strlen(mountpoint), used;

	for (unsigned i = 0; i < nlabels; i++)
		cap += 8 + 6 * strlen(labels[i]);
	if (mx == NULL || (mx->labels = malloc(cap)) == NULL) {
		free(mx);
		return -ENOMEM;
	}
	used = (size_t)snprintf(mx->labels, cap, "mount=\"");
	used += obs__prom_escape(mountpoint, mx->labels + used, cap - used);
	for (unsigned i = 0; i < nlabels; i++) {
		const char *eq = strchr(labels[i], '=');

		used += (size_t)snprintf(mx->labels + used, cap - used,
					 "\",%.*s=\"", (int)(eq - labels[i]),
					 labels[i]);
		used += obs__prom_escape(eq + 1, mx->labels + used, cap - used);
	}
	snprintf(mx->labels + used, cap - used, "\"");
	pthread_mutex_init(&mx->mu, NULL);
	*out = mx;
	return 0;
}

void obs_metrics_free(struct obs_metrics *mx)
{
	if (mx == NULL)
		return;
	pthread_mutex_destroy(&mx->mu);
	free(mx->labels);
	free(mx);
}

size_t obs__prom_escape(const char *s, char *out, size_t cap)
{
	size_t o = 0;

	while (*s != '\0') {
		uint32_t cp;
		size_t n = (unsigned char)*s < 0x80 ? 1 : fs__utf8_seq(s, &cp);
		const char *w = s;

		if (*s == '\\' || *s == '"' || *s == '\n') {
			w = *s == '\\' ? "\\\\" : *s == '"' ? "\\\"" : "\\n";
			n = 1;
		} else if (n == 0) {
			w = "\xef\xbf\xbd"; /* U+FFFD: the format is UTF-8 */
			n = 1;
		}
		if (w == s) {
			if (o + n < cap)
				memcpy(out + o, s, n);
			o += n;
		} else {
			if (o + strlen(w) < cap)
				memcpy(out + o, w, strlen(w));
			o += strlen(w);
		}
		s += n;
	}
	if (cap > 0)
		out[o < cap ? o : cap - 1] = '\0';
	return o;
}

/* ---- counting ---- */

static void observe(struct hist *h, uint64_t ns)
{
	int i = 0;

	while (i < HIST_BOUNDS && ns > bound_ns[i])
		i++;
	atomic_fetch_add_explicit(&h->n[i], 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&h->sum_ns, ns, memory_order_relaxed);
}

/* The host of url ("host:port" as written, lowercase, without userinfo)
 * into host. */
static void url_host(const char *url, char *host, size_t cap)
{
	const char *p = strstr(url, "://"), *end, *at;
	size_t n = 0;

	p = p != NULL ? p + 3 : url;
	end = p + strcspn(p, "/?#");
	at = memchr(p, '@', (size_t)(end - p));
	while (at != NULL) {
		p = at + 1;
		at = memchr(p, '@', (size_t)(end - p));
	}
	for (; p < end && n + 1 < cap; p++)
		host[n++] = *p >= 'A' && *p <= 'Z' ? (char)(*p + 32) : *p;
	host[n] = '\0';
}

/* The index of url's host in the table, adding it if there is room;
 * SOURCES_MAX ("other") when there is none. Lock-free for a known host:
 * hosts are written once, before nhosts publishes them. */
static uint32_t source_index(struct obs_metrics *mx, const char *url)
{
	char host[HOST_MAX];
	uint32_t n, i;

	url_host(url, host, sizeof(host));
	n = atomic_load_explicit(&mx->nhosts, memory_order_acquire);
	for (i = 0; i < n; i++)
		if (strcmp(mx->hosts[i], host) == 0)
			return i;
	pthread_mutex_lock(&mx->mu);
	n = atomic_load_explicit(&mx->nhosts, memory_order_relaxed);
	for (i = 0; i < n && strcmp(mx->hosts[i], host) != 0; i++)
		;
	if (i == n && n < SOURCES_MAX) {
		snprintf(mx->hosts[n], HOST_MAX, "%s", host);
		atomic_store_explicit(&mx->nhosts, n + 1, memory_order_release);
	} else if (i == n) {
		i = SOURCES_MAX;
	}
	pthread_mutex_unlock(&mx->mu);
	return i;
}

void obs_metrics_on_request(void *ctx, const struct fetch_request_info *r)
{
	struct obs_metrics *mx = ctx;
	uint32_t src = source_index(mx, r->url);
	int route = r->proxy >= 0 && r->proxy < FETCH_PROXIES_MAX ? r->proxy
								  : ROUTES - 1;
	int st = r->status >= 100 && r->status < 600 ? (int)(r->status / 100)
						     : ST_NONE;

	atomic_fetch_add_explicit(&mx->requests[src][route][st], 1,
				  memory_order_relaxed);
	atomic_fetch_add_explicit(&mx->bytes[src][route][st], r->bytes,
				  memory_order_relaxed);
	if (r->lane && r->first_byte_us > 0)
		observe(&mx->first_bytes, r->first_byte_us * 1000u);
}

void obs_metrics_read(struct obs_metrics *mx, uint64_t ns, bool failed)
{
	observe(&mx->reads, ns);
	if (failed)
		atomic_fetch_add_explicit(&mx->read_errors, 1,
					  memory_order_relaxed);
}

void obs__metrics_now(const struct obs_view *m, struct obs_metrics_now *now)
{
	memset(now, 0, sizeof(*now));
	if (m->engine != NULL) {
		engine_counters(m->engine, &now->engine);
		now->has_engine = true;
	}
	if (m->cache != NULL && cache_stats_get(m->cache, &now->cache) == 0)
		now->has_cache = true;
	now->proxies = m->proxies;
}

/* ---- the walk ---- */

struct walk {
	struct obs_metrics *mx;
	void (*fn)(void *ctx, const struct obs_sample *s);
	void *ctx;
};

/* One sample of family f with n labels of its own (key, value pairs). */
static void emit(struct walk *w, enum family f, const char *suffix, uint64_t u,
		 const double *d, unsigned n, ...)
{
	struct obs_sample s = {.family = &obs__metric_families[f],
			       .suffix = suffix,
			       .u = u,
			       .real = d != NULL,
			       .d = d != NULL ? *d : 0};
	va_list ap;

	va_start(ap, n);
	for (; s.nlabels < n && s.nlabels < OBS_SAMPLE_LABELS; s.nlabels++) {
		s.key[s.nlabels] = va_arg(ap, const char *);
		s.value[s.nlabels] = va_arg(ap, const char *);
	}
	va_end(ap);
	w->fn(w->ctx, &s);
}

static void walk_hist(struct walk *w, enum family f, struct hist *h)
{
	uint64_t total = 0;
	double sum;

	for (int i = 0; i <= HIST_BOUNDS; i++) {
		total += atomic_load_explicit(&h->n[i], memory_order_relaxed);
		emit(w, f, "_bucket", total, NULL, 1, "le",
		     i < HIST_BOUNDS ? bound_le[i] : "+Inf");
	}
	sum = (double)atomic_load_explicit(&h->sum_ns, memory_order_relaxed) /
	      1e9;
	emit(w, f, "_sum", 0, &sum, 0);
	emit(w, f, "_count", total, NULL, 0);
}

/* The requests and their bytes, by host, route and class: the series
 * that have counted something. */
static void walk_requests(struct walk *w, enum family f,
			  _Atomic uint64_t (*v)[ROUTES][ST_N],
			  const struct fetch_proxy_info *pi, uint32_t npi)
{
	struct obs_metrics *mx = w->mx;
	uint32_t nhosts =
		atomic_load_explicit(&mx->nhosts, memory_order_acquire);

	for (uint32_t s = 0; s <= SOURCES_MAX; s++) {
		if (s >= nhosts && s < SOURCES_MAX)
			continue;
		for (uint32_t r = 0; r < ROUTES; r++)
			for (int st = 0; st < ST_N; st++) {
				uint64_t n = atomic_load_explicit(
					&v[s][r][st], memory_order_relaxed);

				if (n == 0 && f == F_REQUESTS)
					continue;
				if (f == F_RESPONSE_BYTES &&
				    atomic_load_explicit(
					    &mx->requests[s][r][st],
					    memory_order_relaxed) == 0)
					continue;
				emit(w, f, "", n, NULL, 3, "source",
				     s < SOURCES_MAX ? mx->hosts[s] : "other",
				     "proxy", r < npi ? pi[r].name : "DIRECT",
				     "status", status_names[st]);
			}
	}
}

static void walk_proxies(struct walk *w, const struct fetch_proxy_info *pi,
			 uint32_t n)
{
	for (enum family f = F_PROXY_UP; f <= F_PROXY_MISSES; f++)
		for (uint32_t i = 0; i < n; i++) {
			const struct fetch_proxy_info *p = &pi[i];
			uint64_t v = f == F_PROXY_UP
					     ? p->state == FETCH_PROXY_OK
				     : f == F_PROXY_REQUESTS ? p->requests
				     : f == F_PROXY_FAILURES ? p->failures
				     : f == F_PROXY_BAD	     ? p->bad
				     : f == F_PROXY_BYTES    ? p->bytes
				     : f == F_PROXY_HITS     ? p->hits
							     : p->misses;

			emit(w, f, "", v, NULL, 1, "proxy", p->name);
		}
}

static void walk_engine(struct walk *w, const struct engine_counters *c)
{
	for (int i = 0; i < ENGINE_FROM_N; i++)
		emit(w, F_READ_BYTES, "", c->read_bytes[i], NULL, 1, "from",
		     engine_read_from_names[i]);
	emit(w, F_HITS, "", c->hits, NULL, 0);
	emit(w, F_MISSES, "", c->misses, NULL, 0);
}

void obs__metrics_walk(struct obs_metrics *mx,
		       const struct obs_metrics_now *now,
		       void (*fn)(void *ctx, const struct obs_sample *s),
		       void *ctx)
{
	struct walk w = {.mx = mx, .fn = fn, .ctx = ctx};
	const struct engine_counters *c = &now->engine;
	struct fetch_proxy_info pi[FETCH_PROXIES_MAX];
	uint32_t npi = 0;

	while (npi < FETCH_PROXIES_MAX &&
	       fetch_proxies_info(now->proxies, npi, fs__now_ns() / 1000000u,
				  &pi[npi]) == 0)
		npi++;
	if (now->has_engine)
		walk_engine(&w, c);
	emit(&w, F_READ_ERRORS, "", atomic_load(&mx->read_errors), NULL, 0);
	walk_hist(&w, F_READ_SECONDS, &mx->reads);
	walk_requests(&w, F_REQUESTS, mx->requests, pi, npi);
	walk_requests(&w, F_RESPONSE_BYTES, mx->bytes, pi, npi);
	walk_hist(&w, F_FIRST_BYTE, &mx->first_bytes);
	if (now->has_engine) {
		emit(&w, F_READERS, "", c->readers, NULL, 0);
		for (int i = 0; i < ENGINE_FAULT_N; i++)
			emit(&w, F_FAULTS, "", c->faults[i], NULL, 1, "class",
			     engine_fault_names[i]);
		emit(&w, F_RETRIES, "", c->retries, NULL, 0);
		emit(&w, F_STREAM_RESTARTS, "", c->stream_restarts, NULL, 0);
		emit(&w, F_REFUSED, "", c->refused, NULL, 0);
		emit(&w, F_DIGEST, "", c->digest_units, NULL, 1, "scope",
		     "block");
		emit(&w, F_DIGEST, "", c->digest_blobs, NULL, 1, "scope",
		     "blob");
		emit(&w, F_LANES, "", c->lanes, NULL, 0);
		emit(&w, F_LANES_BUSY, "", c->lanes_busy, NULL, 0);
		emit(&w, F_INFLIGHT, "", c->inflight, NULL, 0);
		emit(&w, F_SPEC_BYTES, "", c->spec_bytes, NULL, 0);
		emit(&w, F_SPEC_READ, "", c->spec_read, NULL, 0);
	}
	if (now->has_cache) {
		emit(&w, F_CACHE_BYTES, "", now->cache.bytes, NULL, 0);
		emit(&w, F_CACHE_BUDGET, "", now->cache.budget, NULL, 0);
		emit(&w, F_EVICTIONS, "", now->cache.evicted, NULL, 0);
	}
	walk_proxies(&w, pi, npi);
	emit(&w, F_BUILD, "", 1, NULL, 1, "version", PACEFS_VERSION);
}

/* ---- writers ---- */

/* A document being written (obs/text.c's appender, growing up to its
 * limit), and where the Prometheus text stands. */
struct writer {
	struct obs_text t;
	const struct obs_metric_family *last;
	const char *labels;
};

static void add_value(struct obs_text *t, const struct obs_sample *s)
{
	if (s->real)
		obs__text_add(t, "%.9g", s->d);
	else
		obs__text_add(t, "%" PRIu64, s->u);
}

static void text_sample(void *ctx, const struct obs_sample *s)
{
	struct writer *w = ctx;
	struct obs_text *t = &w->t;

	if (s->family != w->last) {
		obs__text_add(t, "# HELP %s %s\n# TYPE %s %s\n",
			      s->family->name, s->family->help, s->family->name,
			      s->family->type);
		w->last = s->family;
	}
	obs__text_add(t, "%s%s{%s", s->family->name, s->suffix, w->labels);
	for (unsigned i = 0; i < s->nlabels; i++) {
		obs__text_add(t, ",%s=\"", s->key[i]);
		obs__text_add_escaped(t, s->value[i], obs__prom_escape);
		obs__text_add(t, "\"");
	}
	obs__text_add(t, "} ");
	add_value(t, s);
	obs__text_add(t, "\n");
}

static void json_sample(void *ctx, const struct obs_sample *s)
{
	struct writer *w = ctx;
	struct obs_text *t = &w->t;

	obs__text_add(t, "%s{\"name\":\"%s%s\",\"labels\":{",
		      t->len > 1 ? "," : "", s->family->name, s->suffix);
	for (unsigned i = 0; i < s->nlabels; i++) {
		obs__text_add(t, "%s\"%s\":\"", i ? "," : "", s->key[i]);
		obs__text_add_escaped(t, s->value[i], fs__json_escape);
		obs__text_add(t, "\"");
	}
	obs__text_add(t, "},\"value\":");
	add_value(t, s);
	obs__text_add(t, "}");
}

static int write_all(struct obs_metrics *mx, const struct obs_metrics_now *now,
		     bool json, size_t limit, char **out, size_t *len)
{
	struct writer w = {.t = {.cap = 16384, .limit = limit},
			   .labels = mx->labels};
	struct obs_text *t = &w.t;

	t->p = malloc(t->cap);
	if (t->p == NULL)
		return -ENOMEM;
	t->p[0] = '\0';
	if (json)
		obs__text_add(t, "[");
	obs__metrics_walk(mx, now, json ? json_sample : text_sample, &w);
	if (json)
		obs__text_add(t, "]");
	if (t->failed || t->len >= limit) {
		free(t->p);
		return t->failed && t->cap * 2 <= limit ? -ENOMEM : -ERANGE;
	}
	*out = t->p;
	*len = t->len;
	return 0;
}

int obs__metrics_text(struct obs_metrics *mx, const struct obs_metrics_now *now,
		      char **out, size_t *len)
{
	return write_all(mx, now, false, 64u << 20, out, len);
}

int obs__metrics_json(struct obs_metrics *mx, const struct obs_metrics_now *now,
		      size_t limit, char **out, size_t *len)
{
	return write_all(mx, now, true, limit, out, len);
}

/* statuscmd: `pacefs status [-w] [--json] MOUNTPOINT`: reads the mount's
 * status document (obs/status.c) from its root's user.pacefs.status
 * attribute and renders it, or prints it as it is. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <jansson.h>

#include "fs/base.h"
#include "fs/cli/cli.h"
#include "fs/cli/cli_int.h"
#include "fs/obs/obs.h"

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
	return cli__human_size(
		(uint64_t)json_integer_value(json_object_get(v, key)), buf,
		cap);
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
	cli__human_size(size, hs, sizeof(hs));
	cli__human_size(held, hh, sizeof(hh));
	printf("%-40s [%s] %5.1f%%  %s of %s  %s\n",
	       shown(v, "path", path, sizeof(path)), bar, pct, hh, hs,
	       shown(v, "state", state, sizeof(state)));
}

/* A file's stream (a source that ignores Range): where it is, how fast,
 * the earliest read waiting for it and the time it has to go, its
 * restarts from byte 0. */
static void render_stream(json_t *st)
{
	char at[32], rate[32], wait[32];
	json_t *w = json_object_get(st, "waiting_read");
	json_t *ms = json_object_get(st, "wait_ms");

	human(st, "frontier", at, sizeof(at));
	human(st, "rate", rate, sizeof(rate));
	if (json_is_true(json_object_get(st, "held")))
		printf("  stream (the source ignores Range) held ahead of its "
		       "readers at %s",
		       at);
	else
		printf("  stream (the source ignores Range) %s at %s, %s/s",
		       json_is_true(json_object_get(st, "running")) ? "running"
								    : "stopped",
		       at, rate);
	if (w != NULL) {
		human(st, "waiting_read", wait, sizeof(wait));
		printf("; a read at %s waits for it", wait);
		if (ms != NULL)
			printf(", about %.1f s to go",
			       (double)json_integer_value(ms) / 1000.0);
	}
	printf("; %" JSON_INTEGER_FORMAT " restarts from byte 0\n",
	       json_integer_value(json_object_get(st, "restarts")));
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

/* The tree's entries and memory. */
static void render_tree(json_t *tree)
{
	char bytes[32];

	human(tree, "bytes", bytes, sizeof(bytes));
	printf("tree: %" JSON_INTEGER_FORMAT " files, %" JSON_INTEGER_FORMAT
	       " directories, %s of memory\n",
	       json_integer_value(json_object_get(tree, "files")),
	       json_integer_value(json_object_get(tree, "dirs")), bytes);
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
	double spec, unread;

	cli__human_size((uint64_t)metric_sum(m, "pacefs_read_bytes_total",
					     "from", "network"),
			net, sizeof(net));
	cli__human_size((uint64_t)metric_sum(m, "pacefs_read_bytes_total",
					     "from", "memory"),
			mem, sizeof(mem));
	cli__human_size((uint64_t)metric_sum(m, "pacefs_read_bytes_total",
					     "from", "cache"),
			cache, sizeof(cache));
	cli__human_size((uint64_t)metric_sum(m,
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
	spec = metric_sum(m, "pacefs_speculative_bytes_total", NULL, NULL);
	unread = spec - metric_sum(m, "pacefs_speculative_read_bytes_total",
				   NULL, NULL);
	cli__human_size((uint64_t)spec, got, sizeof(got));
	cli__human_size((uint64_t)(unread > 0 ? unread : 0), net, sizeof(net));
	printf("speculation: %s asked, %s never read\n", got, net);
}

/* A read plan: its name and owner, its cursor, what is held ahead; a
 * listing plan (a directory read in its listing's order) says whose. */
static void render_plan(json_t *v)
{
	char name[256], state[64], bytes[32], at[PATH_MAX * 4];
	char kind[32], dir[PATH_MAX * 4];
	uint64_t ms =
		(uint64_t)json_integer_value(json_object_get(v, "ahead_ms"));

	human(v, "ahead_bytes", bytes, sizeof(bytes));
	shown(v, "cursor_path", at, sizeof(at));
	if (strcmp(shown(v, "kind", kind, sizeof(kind)), "listing") == 0)
		printf("listing order of %s, process %lld: ",
		       shown(v, "dir", dir, sizeof(dir)),
		       json_integer_value(json_object_get(v, "pid")));
	printf("plan %s (uid %lld): %s, at %lld of %lld%s%s%s, %lld files (%s) "
	       "ahead, %" PRIu64 ".%01" PRIu64 " s at %.1f files/s, window "
	       "%lld files\n",
	       shown(v, "name", name, sizeof(name)),
	       json_integer_value(json_object_get(v, "uid")),
	       shown(v, "state", state, sizeof(state)),
	       json_integer_value(json_object_get(v, "cursor")),
	       json_integer_value(json_object_get(v, "length")),
	       at[0] ? " (" : "", at, at[0] ? ")" : "",
	       json_integer_value(json_object_get(v, "ahead_files")), bytes,
	       ms / 1000, ms % 1000 / 100,
	       (double)json_integer_value(json_object_get(v, "rate_milli")) /
		       1000.0,
	       json_integer_value(json_object_get(v, "window")));
	if (json_integer_value(json_object_get(v, "unread_files")) > 0)
		printf("  %lld files it passed unopened had been fetched ahead "
		       "(%s)\n",
		       json_integer_value(json_object_get(v, "unread_files")),
		       human(v, "unread_bytes", bytes, sizeof(bytes)));
}

/* A list the document cut to fit its attribute: how many it left out. */
static void left_out(json_t *root, const char *list, const char *what)
{
	char key[32];
	json_t *n;

	snprintf(key, sizeof(key), "%s_left_out", list);
	n = json_object_get(root, key);
	if (n != NULL)
		printf("(and %" JSON_INTEGER_FORMAT " more %s, not shown)\n",
		       json_integer_value(n), what);
}

/* The status document as people read it: one section per array, in the
 * order a cold read meets them. */
static void render(json_t *root)
{
	json_t *cache = json_object_get(root, "cache");
	json_t *tree = json_object_get(root, "tree");
	size_t i;
	json_t *v;

	json_array_foreach(json_object_get(root, "plans"), i, v)
	{
		render_plan(v);
	}
	json_array_foreach(json_object_get(root, "files"), i, v)
	{
		render_file(v);
		if (json_object_get(v, "stream") != NULL)
			render_stream(json_object_get(v, "stream"));
	}
	left_out(root, "files", "files in use");
	json_array_foreach(json_object_get(root, "readers"), i, v)
	{
		render_reader(v);
	}
	left_out(root, "readers", "readers");
	json_array_foreach(json_object_get(root, "lanes"), i, v)
	{
		render_lane(v);
	}
	left_out(root, "lanes", "lanes");
	json_array_foreach(json_object_get(root, "sources"), i, v)
	{
		render_source(v);
	}
	left_out(root, "sources", "sources");
	json_array_foreach(json_object_get(root, "proxies"), i, v)
	{
		render_proxy(v);
	}
	if (tree != NULL)
		render_tree(tree);
	if (cache != NULL)
		render_cache(cache);
	if (json_object_get(root, "metrics") != NULL)
		render_metrics(json_object_get(root, "metrics"));
}

/* The root's user.pacefs.plans, the mount's read plans alone, into buf
 * (OBS_STATUS_MAX bytes), NUL-terminated: its length, or -1 with errno. */
static ssize_t plans_read(const char *mnt, char *buf)
{
	ssize_t n = getxattr(mnt, "user.pacefs.plans", buf, OBS_STATUS_MAX - 1);

	if (n >= 0)
		buf[n] = '\0';
	return n;
}

/* The plans for a status document that had no room for them, read into
 * buf (OBS_STATUS_MAX bytes): an array, empty when the attribute cannot be
 * read. */
static json_t *plans_of(const char *mnt, char *buf)
{
	json_t *plans =
		plans_read(mnt, buf) >= 0 ? json_loads(buf, 0, NULL) : NULL;

	if (json_is_array(plans))
		return plans;
	json_decref(plans);
	return json_array();
}

/* The status document of a mount with many files in use is over what
 * an attribute holds: its plans, at least, are shown (from the root's
 * user.pacefs.plans), and a line says what is not. buf holds
 * OBS_STATUS_MAX. */
static bool plans_only(const char *mnt, bool as_json, char *buf)
{
	json_t *plans;
	size_t i;
	json_t *v;

	if (plans_read(mnt, buf) < 0)
		return false;
	if (as_json) {
		printf("{\"version\":1,\"plans\":%s}\n", buf);
		return true;
	}
	plans = json_loads(buf, 0, NULL);
	json_array_foreach(plans, i, v)
	{
		render_plan(v);
	}
	json_decref(plans);
	printf("(more files in use than the status attribute holds: only "
	       "the plans are shown)\n");
	return true;
}

int cli_status_command(int argc, char **argv)
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
	buf = malloc(OBS_STATUS_MAX);
	if (buf == NULL)
		return 1;
	for (;;) {
		json_error_t jerr;
		json_t *root;

		n = getxattr(mnt, "user.pacefs.status", buf,
			     OBS_STATUS_MAX - 1);
		if (n < 0 && errno == ERANGE && plans_only(mnt, as_json, buf))
			n = -2;
		if (n == -2 && watch) {
			sleep(1);
			continue;
		}
		if (n == -2)
			break;
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
			if (json_object_get(root, "plans_left_out") != NULL)
				json_object_set_new(root, "plans",
						    plans_of(mnt, buf));
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

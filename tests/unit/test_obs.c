/* test_obs: what an operator sees, from obs/'s insides (obs_int.h): the
 * log's JSON lines and its rate limit by kind, the metrics' samples in
 * their two formats and their documentation in the man page, and the
 * metrics endpoint's connections on a hand-driven clock. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <jansson.h>

#include "fs/obs/obs.h"
#include "fs/obs/obs_int.h"
#include "tests/t.h"

/* The man page is read from the source tree, from any working
 * directory. */
#ifndef PACEFS_SRCDIR
#define PACEFS_SRCDIR "."
#endif

/* A JSON log line is one object with the time, level and message, and
 * the fields that are set; a source's userinfo never shows; a line too
 * long for its buffer still parses. */
static void log_json_line(void)
{
	struct timespec t = {.tv_sec = 1700000000, .tv_nsec = 123456789};
	struct fs_log_fields f = {.blob = "d\"isk.img",
				  .source = "https://u:s3cret@h:8443/d?x=1",
				  .start = 65536,
				  .end = 131072,
				  .status = 503,
				  .error = "throttled"};
	char buf[8192], msg[6000];
	json_error_t jerr;
	json_t *o;

	T_ASSERT(obs__log_json(buf, sizeof(buf), &t, "warning", "lane 1: \x1b",
			       &f) == strlen(buf));
	T_ASSERT(strchr(buf, '\n') == NULL && strstr(buf, "s3cret") == NULL);
	o = json_loads(buf, 0, &jerr);
	T_ASSERT(o != NULL);
	T_EQ_STR(json_string_value(json_object_get(o, "time")),
		 "2023-11-14T22:13:20.123Z");
	T_EQ_STR(json_string_value(json_object_get(o, "level")), "warning");
	T_EQ_STR(json_string_value(json_object_get(o, "message")),
		 "lane 1: \x1b");
	T_EQ_STR(json_string_value(json_object_get(o, "blob")), "d\"isk.img");
	T_EQ_STR(json_string_value(json_object_get(o, "source")),
		 "https://h:8443/d?x=1");
	T_EQ_STR(json_string_value(json_object_get(o, "range")),
		 "65536-131071");
	T_EQ_INT(json_integer_value(json_object_get(o, "status")), 503);
	T_EQ_STR(json_string_value(json_object_get(o, "error_class")),
		 "throttled");
	json_decref(o);
	/* No fields: none shown. */
	obs__log_json(buf, sizeof(buf), &t, "info", "mounted", NULL);
	T_ASSERT(strstr(buf, "blob") == NULL && strstr(buf, "range") == NULL);
	/* Too long: cut, and still one object. */
	memset(msg, '\x01', sizeof(msg) - 1);
	msg[sizeof(msg) - 1] = '\0';
	obs__log_json(buf, 512, &t, "error", msg, &f);
	T_ASSERT(strlen(buf) < 512);
	o = json_loads(buf, 0, &jerr);
	T_ASSERT(o != NULL);
	json_decref(o);
}

/* Lines of one call site about one source are one kind, whatever files
 * or numbers they name; a storm of them is logged OBS_LOG_BURST times per
 * window, and the rest are counted and reported once the window ends. */
static void log_rate_limit(void)
{
	static const char site[] = "%s: cannot open: GET %s: HTTP %d";
	static struct obs_log_limit l;
	struct obs_log_report r;
	uint64_t now = 1000;
	uint64_t key = obs__log_key(site, NULL, "a: http://h:80/a: HTTP 403");
	int logged = 0;
	char line[64];

	/* Another file of the origin: the same kind; of another origin or
	 * at another site: another. */
	T_EQ_U64(obs__log_key(site, NULL, "zq/x: GET http://h:80/zq/x: 500"),
		 key);
	T_ASSERT(obs__log_key(site, NULL, "a: GET http://g:80/a: 403") != key);
	T_ASSERT(obs__log_key("%s: cannot add its blob: %s", NULL,
			      "a: GET http://h:80/a: 403") != key);
	/* The source a line is about counts before the URLs it names. */
	T_EQ_U64(obs__log_key(site, "http://h:80/b", "a: GET http://x/a: 1"),
		 key);
	/* A line handed whole ("%s") is its text, numbers and URLs' paths
	 * aside. */
	T_EQ_U64(
		obs__log_key("%s", NULL, "lane 3: GET http://h:80/f: boom"),
		obs__log_key("%s", NULL, "lane 12: GET http://h:80/g?x: boom"));
	T_ASSERT(obs__log_key("%s", NULL, "lane 3: http://h:80/f: boom") !=
		 obs__log_key("%s", NULL, "lane 3: http://h:80/f: bang"));
	/* So is an adapter's ("cache: %s"): the line is another module's. */
	T_ASSERT(obs__log_key("cache: %s", NULL, "cache: block 5: bad") !=
		 obs__log_key("cache: %s", NULL, "cache: flush failed"));
	for (int i = 0; i < 1000; i++) {
		snprintf(line, sizeof(line), "f%c%c: GET http://h:80/: 403",
			 'a' + i % 26, 'a' + i / 26 % 26);
		logged += obs__log_admit(&l, obs__log_key(site, NULL, line), 1,
					 line, now);
		now += 1000000; /* 1000 lines a second */
	}
	T_EQ_INT(logged, OBS_LOG_BURST);
	/* Another kind is not held back by the storm. */
	T_ASSERT(obs__log_admit(&l,
				obs__log_key("mounted %s", NULL, "mounted x"),
				2, "mounted x", now));
	T_ASSERT(!obs__log_take_report(&l, now, &r)); /* window still open */
	now = 1000 + OBS_LOG_WINDOW_NS;
	T_ASSERT(obs__log_take_report(&l, now, &r));
	T_EQ_INT(r.suppressed, 1000 - OBS_LOG_BURST);
	T_EQ_INT(r.level, 1);
	T_EQ_STR(r.sample, "flm: GET http://h:80/: 403");
	T_ASSERT(!obs__log_take_report(&l, now, &r)); /* reported once */
	/* A new window logs again. */
	T_ASSERT(obs__log_admit(&l, key, 1, "a: http://h:80/a: HTTP 403", now));
	/* More kinds than slots: each new kind is still logged. */
	for (int i = 0; i < 3 * OBS_LOG_KINDS; i++) {
		snprintf(line, sizeof(line), "kind %c%c", 'a' + i % 26,
			 'a' + i / 26);
		T_ASSERT(obs__log_admit(&l, obs__log_key("%s", NULL, line), 1,
					line, now));
	}
}

/* What fetch tells of each request, counted by host, route and class; a
 * host past the table's room counts as "other". */
static void count_requests(struct obs_metrics *mx)
{
	struct fetch_request_info r = {.url = "http://User:pw@Origin:8080/a",
				       .proxy = -1,
				       .status = 206,
				       .bytes = 1000,
				       .first_byte_us = 1500,
				       .lane = true};
	char url[64];

	obs_metrics_on_request(mx, &r);
	r.url = "http://origin:8080/b?x";
	r.status = 0;
	r.bytes = 0;
	obs_metrics_on_request(mx, &r);
	for (int i = 0; i < 40; i++) {
		snprintf(url, sizeof(url), "https://h%d.example/f", i);
		r.url = url;
		r.status = 503;
		obs_metrics_on_request(mx, &r);
	}
	obs_metrics_read(mx, 2000000, false);
	obs_metrics_read(mx, 90000000000ull, true);
}

/* The text format: every family's HELP and TYPE once, before its samples;
 * the mount's labels on every series, escaped; histograms cumulative up
 * to +Inf with a sum and a count; bounded hosts. */
static void metrics_text(void)
{
	char *labels[] = {"site=ly\"on"};
	struct obs_metrics_now now = {.has_engine = true};
	struct obs_metrics *mx = NULL;
	char *text = NULL;
	size_t len;
	int families = 0;

	now.engine.read_bytes[ENGINE_FROM_NETWORK] = 4096;
	now.engine.lanes = 8;
	T_EQ_INT(obs_metrics_new("/mnt/a\"b\nc", labels, 1, &mx), 0);
	count_requests(mx);
	T_EQ_INT(obs__metrics_text(mx, &now, &text, &len), 0);
	T_EQ_U64(len, strlen(text));
	for (char *p = text, *end; *p != '\0'; p = end + 1) {
		end = strchr(p, '\n');
		T_ASSERT(end != NULL);
		*end = '\0';
		if (strncmp(p, "# TYPE ", 7) == 0)
			families++;
		else if (p[0] != '#' && strstr(p, "{mount=\"/mnt/a\\\"b\\nc\","
						  "site=\"ly\\\"on\"") == NULL)
			T_FAIL("no mount labels: %s", p);
	}
	free(text);
	T_ASSERT(families >= 15);
	T_EQ_INT(obs__metrics_text(mx, &now, &text, &len), 0);
	T_ASSERT(strstr(text, "pacefs_read_bytes_total{mount=") != NULL);
	T_ASSERT(strstr(text, ",from=\"network\"} 4096\n") != NULL);
	T_ASSERT(strstr(text, ",source=\"origin:8080\",proxy=\"DIRECT\","
			      "status=\"2xx\"} 1\n") != NULL);
	T_ASSERT(strstr(text, ",source=\"origin:8080\",proxy=\"DIRECT\","
			      "status=\"none\"} 1\n") != NULL);
	T_ASSERT(strstr(text, "pw") == NULL);
	T_ASSERT(strstr(text, ",source=\"h31.example\"") == NULL);
	T_ASSERT(strstr(text, ",source=\"other\",proxy=\"DIRECT\","
			      "status=\"5xx\"} 9\n") != NULL);
	T_ASSERT(strstr(text, "pacefs_read_duration_seconds_bucket{") != NULL);
	T_ASSERT(strstr(text, ",le=\"0.0025\"} 1\n") != NULL);
	T_ASSERT(strstr(text, ",le=\"60\"} 1\n") != NULL);
	T_ASSERT(strstr(text, ",le=\"+Inf\"} 2\n") != NULL);
	T_ASSERT(strstr(text, "_seconds_sum{mount=\"/mnt/a\\\"b\\nc\","
			      "site=\"ly\\\"on\"} 90.002\n") != NULL);
	T_ASSERT(strstr(text, "pacefs_read_errors_total{mount=") != NULL);
	free(text);
	obs_metrics_free(mx);
}

/* Status shows the same samples: as JSON, and refused rather than cut
 * when they do not fit. */
static void metrics_json(void)
{
	struct obs_metrics_now now = {.has_engine = true};
	struct obs_metrics *mx = NULL;
	json_error_t jerr;
	char *json = NULL;
	json_t *a;
	size_t len;

	T_EQ_INT(obs_metrics_new("/m", NULL, 0, &mx), 0);
	count_requests(mx);
	T_EQ_INT(obs__metrics_json(mx, &now, 1 << 20, &json, &len), 0);
	a = json_loads(json, 0, &jerr);
	free(json);
	T_ASSERT(json_is_array(a) && json_array_size(a) > 40);
	T_EQ_STR(json_string_value(
			 json_object_get(json_array_get(a, 0), "name")),
		 "pacefs_read_bytes_total");
	json_decref(a);
	T_EQ_INT(obs__metrics_json(mx, &now, 1000, &json, &len), -ERANGE);
	obs_metrics_free(mx);
}

/* Every metric is in the man page: its name, type and meaning are the
 * contract operators alert on. */
static void metrics_documented(void)
{
	char path[512], *man;
	FILE *f;
	long n;

	snprintf(path, sizeof(path), "%s/docs/pacefs.1", PACEFS_SRCDIR);
	f = fopen(path, "r");
	T_ASSERT(f != NULL);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	man = calloc(1, (size_t)n + 1);
	T_ASSERT(man != NULL && fread(man, 1, (size_t)n, f) == (size_t)n);
	fclose(f);
	for (int i = 0; obs__metric_families[i].name != NULL; i++) {
		char want[160];
		const char *name = obs__metric_families[i].name;

		/* ".B NAME" and its type first on the line after. */
		snprintf(want, sizeof(want), ".B %s\n%s", name,
			 obs__metric_families[i].type);
		if (strstr(man, want) == NULL)
			T_FAIL("docs/pacefs.1 does not document %s (%s)", name,
			       obs__metric_families[i].type);
	}
	free(man);
}

/* The metrics endpoint's connections, on a hand-driven clock: socket
 * pairs stand for them, and a connection the table closed reads as ended
 * at its peer. */
struct mconn_pair {
	int ours, peer;
	struct obs_mconn *c;
};

static struct obs_mconn_closed mconn_last;
static unsigned mconn_closes;

static void mconn_heard(void *ctx, const struct obs_mconn_closed *why)
{
	(void)ctx;
	mconn_last = *why;
	mconn_closes++;
}

static struct sockaddr_in mconn_addr(unsigned char last)
{
	struct sockaddr_in a = {.sin_family = AF_INET};

	a.sin_addr.s_addr = htonl(0x0a000000u | last); /* 10.0.0.last */
	return a;
}

static int mconn_open(struct obs_mconns *t, struct mconn_pair *p,
		      unsigned char last, uint64_t now_ms)
{
	struct sockaddr_in a = mconn_addr(last);
	int sv[2];

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
		return -errno;
	p->ours = sv[0];
	p->peer = sv[1];
	obs__mconns_admit(t, (struct sockaddr *)&a, now_ms);
	p->c = obs__mconns_add(t, p->ours, (struct sockaddr *)&a, now_ms);
	return p->c != NULL ? 0 : -ENOSPC;
}

/* Whether the table shut p's connection down: its peer reads the end. */
static bool mconn_ended(const struct mconn_pair *p)
{
	char b;

	return recv(p->peer, &b, 1, MSG_DONTWAIT) == 0;
}

static void mconn_close_all(struct mconn_pair *p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		close(p[i].ours);
		close(p[i].peer);
	}
}

static void metrics_conn_deadlines(void)
{
	struct mconn_pair p[2];
	struct obs_mconns *t;

	T_EQ_INT(obs__mconns_new(mconn_heard, NULL, &t), 0);
	mconn_closes = 0;
	T_EQ_INT(obs__mconns_sweep(t, 0), -1);
	T_EQ_INT(mconn_open(t, &p[0], 1, 1000), 0);
	T_EQ_INT(mconn_open(t, &p[1], 1, 1000), 0);
	obs__mconns_asked(p[1].c);
	/* A byte a second is no request: the first deadline is the accept's. */
	T_EQ_INT(obs__mconns_sweep(t, 1999), 1);
	T_ASSERT(!mconn_ended(&p[0]));
	T_EQ_INT(obs__mconns_sweep(t, 2000), 9000);
	T_ASSERT(mconn_ended(&p[0]));
	T_EQ_INT(mconn_last.reason, OBS_MCONN_NO_REQUEST);
	T_EQ_U64(mconn_last.age_ms, 1000);
	/* Asked: it has until 10 s after its accept to be done. */
	T_ASSERT(!mconn_ended(&p[1]));
	T_EQ_INT(obs__mconns_sweep(t, 10999), 1);
	T_EQ_INT(obs__mconns_sweep(t, 11000), -1);
	T_ASSERT(mconn_ended(&p[1]));
	T_EQ_INT(mconn_last.reason, OBS_MCONN_TOO_LONG);
	T_EQ_INT(mconn_closes, 2);
	obs__mconns_gone(t, p[0].c);
	obs__mconns_gone(t, p[1].c);
	obs__mconns_free(t);
	mconn_close_all(p, 2);
}

static void metrics_conn_room(void)
{
	static struct mconn_pair p[OBS_MCONN_MAX + 2];
	struct obs_mconns *t;
	size_t n = 0;

	T_EQ_INT(obs__mconns_new(mconn_heard, NULL, &t), 0);
	mconn_closes = 0;
	/* One address at its share, its oldest asked: a newcomer of that
	 * address closes its oldest still waiting. */
	for (; n < OBS_MCONN_PER_ADDR; n++)
		T_EQ_INT(mconn_open(t, &p[n], 1, 100 + n), 0);
	obs__mconns_asked(p[0].c);
	T_EQ_INT(mconn_closes, 0);
	T_EQ_INT(mconn_open(t, &p[n++], 1, 500), 0);
	T_EQ_INT(mconn_closes, 1);
	T_ASSERT(!mconn_ended(&p[0]));
	T_ASSERT(mconn_ended(&p[1]));
	T_EQ_INT(mconn_last.reason, OBS_MCONN_FOR_ROOM);
	obs__mconns_gone(t, p[1].c);
	/* Others fill the endpoint and close nothing of it until it is full;
	 * then the oldest waiting of all goes, of whichever address. */
	for (unsigned char a = 2; n < OBS_MCONN_MAX + 1; n++, a++)
		T_EQ_INT(mconn_open(t, &p[n], a, 600), 0);
	T_EQ_INT(mconn_closes, 1);
	T_EQ_INT(mconn_open(t, &p[n++], 200, 700), 0);
	T_EQ_INT(mconn_closes, 2);
	T_ASSERT(mconn_ended(&p[2]));
	T_ASSERT(!mconn_ended(&p[3]));
	T_EQ_INT(mconn_last.ip[3], 1);
	obs__mconns_free(t);
	mconn_close_all(p, n);
}

static const struct t_case cases[] = {
	{"log_rate_limit", log_rate_limit},
	{"log_json_line", log_json_line},
	{"metrics_text", metrics_text},
	{"metrics_json", metrics_json},
	{"metrics_documented", metrics_documented},
	{"metrics_conn_deadlines", metrics_conn_deadlines},
	{"metrics_conn_room", metrics_conn_room},
};

int main(int argc, char **argv)
{
	return T_RUN(argc, argv, cases);
}

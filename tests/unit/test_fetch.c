/* test_fetch: the HTTP header parsers and the status classification that
 * decide whether a range response's bytes may be used. */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fetch/fetch.h"
#include "fetch/fetch_int.h"
#include "tests/t.h"

static void content_range_ok(void)
{
	uint64_t s, e, t;

	T_EQ_INT(fetch_parse_content_range("bytes 0-0/1", &s, &e, &t), 0);
	T_EQ_U64(s, 0);
	T_EQ_U64(e, 0);
	T_EQ_U64(t, 1);
	T_EQ_INT(fetch_parse_content_range(" bytes 100-199/67121209\r\n", &s,
					   &e, &t),
		 0);
	T_EQ_U64(s, 100);
	T_EQ_U64(e, 199);
	T_EQ_U64(t, 67121209);
	T_EQ_INT(fetch_parse_content_range("BYTES 5-9/*", &s, &e, &t), 0);
	T_EQ_U64(t, UINT64_MAX);
	T_EQ_INT(fetch_parse_content_range("bytes */4096", &s, &e, &t), 0);
	T_EQ_U64(s, UINT64_MAX);
	T_EQ_U64(t, 4096);
}

static void content_range_bad(void)
{
	static const char *const bad[] = {
		"",
		"bytes",
		"bytes 5-4/10",			  /* end before start */
		"bytes 0-10/10",		  /* end past the total */
		"bytes 0-9",			  /* no total */
		"bytes */*",			  /* says nothing */
		"bytes -1-5/10",		  /* negative */
		"items 0-9/10",			  /* wrong unit */
		"bytes 0-9/10 trailing",	  /* junk */
		"bytes 0-99999999999999999999/1", /* overflow */
		/* 2^64-1 is the "*" marker, never a value */
		"bytes 18446744073709551615-18446744073709551615/"
		"18446744073709551615",
		"bytes */18446744073709551615",
	};
	uint64_t s, e, t;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (fetch_parse_content_range(bad[i], &s, &e, &t) != -EINVAL)
			T_FAIL("accepted \"%s\"", bad[i]);
	}
}

static void retry_after(void)
{
	uint64_t ms = 0;

	T_EQ_INT(fetch_parse_retry_after("120", 0, &ms), 0);
	T_EQ_U64(ms, 120000);
	/* 2015-10-21 07:28:00 GMT is 1445412480. */
	T_EQ_INT(fetch_parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT",
					 1445412470, &ms),
		 0);
	T_EQ_U64(ms, 10000);
	T_EQ_INT(fetch_parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT",
					 1445412490, &ms),
		 0);
	T_EQ_U64(ms, 0);
	/* A server's number, however large, saturates: never a wrapped,
	 * short delay. */
	T_EQ_INT(fetch_parse_retry_after("999999999", 0, &ms), 0);
	T_EQ_U64(ms, 999999999000ull);
	T_EQ_INT(fetch_parse_retry_after("18446744073709551615", 0, &ms), 0);
	T_EQ_U64(ms, UINT64_MAX / 1000 * 1000);
	T_EQ_INT(fetch_parse_retry_after("99999999999999999999999", 0, &ms), 0);
	T_EQ_U64(ms, UINT64_MAX / 1000 * 1000);
	T_EQ_INT(fetch_parse_retry_after("Fri, 31 Dec 9999 23:59:59 GMT", 0,
					 &ms),
		 0);
	T_EQ_U64(ms, 253402300799000ull);
	T_EQ_INT(fetch_parse_retry_after("soon", 0, &ms), -EINVAL);
	T_EQ_INT(fetch_parse_retry_after("12x", 0, &ms), -EINVAL);
}

/* A Content-Length is a size a file can have, or an error (never wrapped
 * to a small number, as the probe's hand-made loop did with 2^64). */
static void content_length(void)
{
	uint64_t n = 1;

	T_EQ_INT(fetch_parse_content_length("0", &n), 0);
	T_EQ_U64(n, 0);
	T_EQ_INT(fetch_parse_content_length(" 1049575 \r\n", &n), 0);
	T_EQ_U64(n, 1049575);
	T_EQ_INT(fetch_parse_content_length("9223372036854775807", &n), 0);
	T_EQ_U64(n, FETCH_SIZE_MAX);
	T_EQ_INT(fetch_parse_content_length("9223372036854775808", &n), -EFBIG);
	T_EQ_INT(fetch_parse_content_length("18446744073709551615", &n),
		 -EFBIG);
	T_EQ_INT(fetch_parse_content_length("18446744073709551616", &n),
		 -EINVAL);
	T_EQ_INT(fetch_parse_content_length("", &n), -EINVAL);
	T_EQ_INT(fetch_parse_content_length("-1", &n), -EINVAL);
	T_EQ_INT(fetch_parse_content_length("12, 12", &n), -EINVAL);
	T_EQ_INT(fetch_parse_content_length("0x10", &n), -EINVAL);
}

/* Only identity leaves the bytes as stored (and chunked, for the
 * transfer, which curl undoes). */
static void coding(void)
{
	T_ASSERT(fetch_coding_is_identity("", false));
	T_ASSERT(fetch_coding_is_identity("identity", false));
	T_ASSERT(fetch_coding_is_identity(" IDENTITY ,identity\r\n", false));
	T_ASSERT(!fetch_coding_is_identity("gzip", false));
	T_ASSERT(!fetch_coding_is_identity("identity, gzip", false));
	T_ASSERT(!fetch_coding_is_identity("x-gzip", false));
	T_ASSERT(!fetch_coding_is_identity("identity;q=1", false));
	T_ASSERT(!fetch_coding_is_identity("chunked", false));
	T_ASSERT(fetch_coding_is_identity("chunked", true));
	T_ASSERT(!fetch_coding_is_identity("gzip, chunked", true));
	T_ASSERT(!fetch_coding_is_identity("br", true));
}

static void classify(void)
{
	T_EQ_INT(fetch_classify_status(429), FETCH_THROTTLED);
	T_EQ_INT(fetch_classify_status(503), FETCH_THROTTLED);
	T_EQ_INT(fetch_classify_status(500), FETCH_TRANSIENT);
	T_EQ_INT(fetch_classify_status(502), FETCH_TRANSIENT);
	T_EQ_INT(fetch_classify_status(404), FETCH_GONE);
	T_EQ_INT(fetch_classify_status(403), FETCH_GONE);
	T_EQ_INT(fetch_classify_status(410), FETCH_GONE);
	/* A 200 to a range request is never a 206. */
	T_EQ_INT(fetch_classify_status(200), FETCH_FATAL);
	T_EQ_INT(fetch_classify_status(416), FETCH_FATAL);
}

static void url_redacted(void)
{
	static const char *const cases[][2] = {
		{"http://user:pw@h.example/a", "http://h.example/a"},
		{"https://u:p@ss@h:8443/x?y=a@b", "https://h:8443/x?y=a@b"},
		{"http://h.example/a@b", "http://h.example/a@b"},
		{"http://h.example?q=u:p@x", "http://h.example?q=u:p@x"},
		{"http://tok@h", "http://h"},
		{"not a url", "not a url"},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *r = fetch_url_redacted(cases[i][0]);

		T_ASSERT(r != NULL);
		if (strcmp(r, cases[i][1]) != 0)
			T_FAIL("\"%s\" -> \"%s\", want \"%s\"", cases[i][0], r,
			       cases[i][1]);
		T_EQ_INT(fetch_url_has_userinfo(cases[i][0]),
			 strcmp(cases[i][0], cases[i][1]) != 0);
		free(r);
	}
}

/* A presigned URL's signature and token are shown masked, names kept;
 * a query cut short is masked into a prefix of the whole one's mask. */
static void url_signed(void)
{
	static const char *const cases[][2] = {
		{"https://b.s3.amazonaws.com/k?X-Amz-Algorithm=AWS4&"
		 "X-Amz-Credential=AKIA%2F2024&X-Amz-Signature=abcdef0123&"
		 "X-Amz-Security-Token=FwoG%2Bxyz#frag",
		 "https://b.s3.amazonaws.com/k?X-Amz-Algorithm=AWS4&"
		 "X-Amz-Credential=***&X-Amz-Signature=***&"
		 "X-Amz-Security-Token=***#frag"},
		{"http://u:p@h/a?sig=xyz1&sv=2022&access_token=t0k",
		 "http://h/a?sig=***&sv=2022&access_token=***"},
		{"http://h/a?Signature=ab&Key-Pair-Id=K1&api_key=&token",
		 "http://h/a?Signature=**&Key-Pair-Id=K1&api_key=&token"},
		{"http://h/a?prefix=x&signatures=1&monkey=2",
		 "http://h/a?prefix=x&signatures=1&monkey=2"},
		{"http://h/a#sig=frag", "http://h/a#sig=frag"},
	};
	char buf[64], *m;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *r = fetch_url_redacted(cases[i][0]);

		T_ASSERT(r != NULL);
		T_EQ_STR(r, cases[i][1]);
		T_EQ_INT(fetch_url_signed(cases[i][0]),
			 strstr(cases[i][1], "=*") != NULL);
		free(r);
	}
	fetch__url_shown("http://h/a?X-Amz-Signature=0123456789abcdef", buf,
			 30);
	T_EQ_STR(buf, "http://h/a?X-Amz-Signature=**");
	/* argv keeps its length. */
	m = strdup("http://h/a?x=1&token=secret&y=2");
	fetch_url_mask_signed(m);
	T_EQ_STR(m, "http://h/a?x=1&token=******&y=2");
	free(m);
	/* The identity stores them masked whatever is shown. */
	fetch_url_show_signatures(true);
	m = fetch_url_redacted("http://h/a?sig=xyz1");
	T_EQ_STR(m, "http://h/a?sig=xyz1");
	free(m);
	m = fetch_url_masked("http://h/a?sig=xyz1");
	T_EQ_STR(m, "http://h/a?sig=***");
	free(m);
	fetch_url_show_signatures(false);
}

static void url_origin(void)
{
	char *o = NULL;

	T_EQ_INT(fetch_url_origin("HTTP://Host.Example/a/b?c", &o), 0);
	T_EQ_STR(o, "http://host.example:80");
	free(o);
	T_ASSERT(fetch_url_same_origin("https://h/a", "https://H:443/b"));
	T_ASSERT(!fetch_url_same_origin("https://h/a", "http://h/a"));
	T_ASSERT(!fetch_url_same_origin("http://h/a", "http://h:8080/a"));
	T_ASSERT(!fetch_url_same_origin("http://h/a", "http://h.evil/a"));
	T_ASSERT(!fetch_url_same_origin("http://h/a", "no url"));
	T_EQ_INT(fetch_url_origin("no url", &o), -EINVAL);
}

static void text_redact(void)
{
	static const char *const cases[][2] = {
		{"lane 1: GET http://u:pw@h/a bytes 0-9",
		 "lane 1: GET http://h/a bytes 0-9"},
		{"'https://a:b@h' and http://c@d:1/x?e@f then ftp://g@h",
		 "'https://h' and http://d:1/x?e@f then ftp://h"},
		{"http://u:p@ss:w@h:8/", "http://h:8/"},
		{"no url, a@b and :// alone", "no url, a@b and :// alone"},
		{"http://h:8080 refused: user@example",
		 "http://h:8080 refused: user@example"},
		{"GET http://h/f?a=1&X-Amz-Signature=beef: HTTP 403, "
		 "\"http://h/g?token=abcd\" (http://h/x?sig=12345)",
		 "GET http://h/f?a=1&X-Amz-Signature=***: HTTP 403, "
		 "\"http://h/g?token=***\" (http://h/x?sig=***)"},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char buf[128];

		snprintf(buf, sizeof(buf), "%s", cases[i][0]);
		fetch_text_redact(buf);
		T_EQ_STR(buf, cases[i][1]);
	}
}

/* A line too long keeps its start and its end (the reason), marked, and
 * never splits a UTF-8 sequence. */
static void text_fit(void)
{
	char whole[3000], buf[256];
	size_t n = 0;

	n += (size_t)snprintf(whole, sizeof(whole), "lane 0: http://h/");
	while (n < 2000) {
		whole[n++] = '\xc3'; /* U+00E9, two bytes */
		whole[n++] = '\xa9';
	}
	snprintf(whole + n, sizeof(whole) - n, "?x: HTTP 404");
	fetch_text_fit(buf, sizeof(buf), whole);
	T_ASSERT(strlen(buf) < sizeof(buf));
	T_ASSERT(strncmp(buf, "lane 0: http://h/", 17) == 0);
	T_ASSERT(strstr(buf, " bytes left out ...] ") != NULL);
	T_ASSERT(strlen(buf) > 12 &&
		 strcmp(buf + strlen(buf) - 12, "?x: HTTP 404") == 0);
	/* Cut at sequence boundaries: the bytes before the mark end a
	 * sequence, those after it start one. */
	for (const char *p = buf; *p != '\0'; p++) {
		if ((unsigned char)*p == 0xc3)
			T_EQ_INT((unsigned char)p[1], 0xa9);
		if ((unsigned char)*p == 0xa9)
			T_EQ_INT((unsigned char)p[-1], 0xc3);
	}
}

static void fmt_redacted(char *buf, size_t cap, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void fmt_redacted(char *buf, size_t cap, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fetch_text_vformat_redacted(buf, cap, fmt, ap);
	va_end(ap);
}

/* A log line is redacted whole, then cut: a userinfo longer than the
 * buffer leaves nothing of itself, and a signed value is masked. */
static void text_redacted(void)
{
	char pass[1001], path[2001], buf[256];

	memset(pass, 'p', sizeof(pass) - 1);
	pass[sizeof(pass) - 1] = '\0';
	memset(path, 'a', sizeof(path) - 1);
	path[sizeof(path) - 1] = '\0';
	fmt_redacted(buf, sizeof(buf), "probe %s: HTTP %d",
		     "http://u:pw@h/x?X-Amz-Signature=abcdef", 403);
	T_EQ_STR(buf, "probe http://h/x?X-Amz-Signature=***: HTTP 403");
	fmt_redacted(buf, sizeof(buf), "probe http://u:%s@h/x: HTTP 404", pass);
	T_EQ_STR(buf, "probe http://h/x: HTTP 404");
	fmt_redacted(buf, sizeof(buf), "probe http://u:%s@h/%s: HTTP 404", pass,
		     path);
	T_ASSERT(strlen(buf) < sizeof(buf));
	T_ASSERT(strncmp(buf, "probe http://h/aaa", 18) == 0);
	T_ASSERT(strstr(buf, "pp") == NULL);
	T_ASSERT(strstr(buf, " bytes left out ...] ") != NULL);
	T_ASSERT(strcmp(buf + strlen(buf) - 10, ": HTTP 404") == 0);
}

/* The error-line helper returns the errno it is given, the line cut in
 * its middle as fetch_text_vformat cuts it. */
static void text_errf(void)
{
	char path[2001], buf[200];

	memset(path, 'a', sizeof(path) - 1);
	path[sizeof(path) - 1] = '\0';
	T_EQ_INT(fetch_text_errf(buf, sizeof(buf), -EIO, "%s: HTTP %d",
				 "http://h/x", 404),
		 -EIO);
	T_EQ_STR(buf, "http://h/x: HTTP 404");
	T_EQ_INT(fetch_text_errf(buf, sizeof(buf), -ENOENT,
				 "http://h/%s: HTTP 404", path),
		 -ENOENT);
	T_ASSERT(strlen(buf) < sizeof(buf));
	T_ASSERT(strncmp(buf, "http://h/aaa", 12) == 0);
	T_ASSERT(strstr(buf, " bytes left out ...] ") != NULL);
	T_ASSERT(strcmp(buf + strlen(buf) - 10, ": HTTP 404") == 0);
}

static void url_shown(void)
{
	char buf[16];

	/* A cut never leaves part of a userinfo, however long. */
	fetch__url_shown("http://user:a-very-long-password@h/x", buf,
			 sizeof(buf));
	T_EQ_STR(buf, "http://h/x");
	fetch__url_shown("http://h/a/very/long/path", buf, sizeof(buf));
	T_EQ_STR(buf, "http://h/a/very");
}

static void url_hop(void)
{
	static const char *const cases[][3] = {
		/* start, redirect target, next hop */
		{"http://u:p@h/a", "http://h/b", "http://u:p@h/b"},
		{"http://u:p@h/a", "http://h:81/b", "http://h:81/b"},
		{"http://u:p@h/a", "https://h/b", "https://h/b"},
		{"http://u:p@h/a", "http://cdn/b?sig=1", "http://cdn/b?sig=1"},
		/* A target's own userinfo is never taken. */
		{"http://h/a", "http://x:y@cdn/b", "http://cdn/b"},
		{"http://u:p@h/a", "http://x:y@h/b", "http://u:p@h/b"},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *next = NULL;

		T_EQ_INT(fetch__url_hop(cases[i][0], cases[i][1], &next), 0);
		T_EQ_STR(next, cases[i][2]);
		free(next);
	}
}

static void sends_headers(void)
{
	const char *const headers[] = {"X-Token: t"};
	const char *const origins[] = {"https://h.example:443",
				       "http://m:8080"};
	struct fetch_config cfg = {.headers = headers, .nheaders = 1};

	/* No origin given: the headers go nowhere. */
	T_ASSERT(!fetch__sends_headers(&cfg, "https://h.example/a"));
	cfg.header_origins = origins;
	cfg.nheader_origins = 2;
	T_ASSERT(fetch__sends_headers(&cfg, "https://H.example:443/a?b"));
	T_ASSERT(fetch__sends_headers(&cfg, "https://u:p@h.example/a"));
	T_ASSERT(fetch__sends_headers(&cfg, "http://m:8080/x"));
	T_ASSERT(!fetch__sends_headers(&cfg, "http://h.example/a"));
	T_ASSERT(!fetch__sends_headers(&cfg, "https://h.example:8443/a"));
	T_ASSERT(!fetch__sends_headers(&cfg, "https://h.example.evil/a"));
	T_ASSERT(!fetch__sends_headers(&cfg, "http://m/x"));
	cfg.nheaders = 0;
	T_ASSERT(!fetch__sends_headers(&cfg, "https://h.example/a"));
}

/* A group's stripes: each member owns one stripe in every round of as
 * many stripes as it has members, whatever the members' names; a member
 * that fails gives its stripes to the others and no other stripe moves;
 * its own come back when it answers. */
static void proxy_stripes(void)
{
	struct fetch_proxies *list = NULL;
	char err[256];
	int owner[240];

	T_EQ_INT(fetch_proxies_new("http://p1:40001|http://p2:40002|"
				   "http://p3:40003",
				   1000, &list, err, sizeof(err)),
		 0);
	for (uint64_t r = 0; r < 80; r++) {
		int seen[3] = {0, 0, 0};

		for (uint64_t j = 0; j < 3; j++) {
			int i = fetch__proxy_choose(list, "http://o/f",
						    3 * r + j, 0, 0);

			T_ASSERT(i >= 0 && i < 3);
			seen[i]++;
			owner[3 * r + j] = i;
		}
		T_ASSERT(seen[0] == 1 && seen[1] == 1 && seen[2] == 1);
	}
	fetch__proxy_failed(list, 1, 100);
	for (uint64_t c = 0; c < 240; c++) {
		int i = fetch__proxy_choose(list, "http://o/f", c, 100, 0);

		if (owner[c] == 1)
			T_ASSERT(i == 0 || i == 2);
		else
			T_EQ_INT(i, owner[c]);
	}
	fetch__proxy_answered(list, 1, 0);
	for (uint64_t c = 0; c < 240; c++)
		T_EQ_INT(fetch__proxy_choose(list, "http://o/f", c, 200, 0),
			 owner[c]);
	fetch_proxies_free(list);
}

/* The proxy list: groups tried in order, a URL's chunk always on the
 * same member of a group and chunks spread over its members, failures left
 * out until the reset interval passes, exclusion for good. */
static void proxy_choice(void)
{
	struct fetch_proxies *list = NULL;
	struct fetch_proxy_info pi;
	char err[256];
	int count[3] = {0, 0, 0};
	int a, b;

	T_EQ_INT(fetch_proxies_new(" http://a:3128 | http://u:pw@b:3128 ;"
				   "DIRECT",
				   1000, &list, err, sizeof(err)),
		 0);
	T_EQ_INT(fetch_proxies_count(list), 3);
	T_EQ_INT(fetch_proxies_info(list, 1, 0, &pi), 0);
	T_EQ_STR(pi.name, "http://b:3128");
	T_EQ_INT(pi.group, 1);
	T_EQ_INT(fetch_proxies_info(list, 2, 0, &pi), 0);
	T_EQ_STR(pi.name, "DIRECT");
	T_EQ_INT(pi.group, 2);
	T_EQ_INT(fetch_proxies_info(list, 3, 0, &pi), -ENOENT);
	T_ASSERT(fetch__proxy_is_direct(list, 2));
	T_EQ_STR(fetch__proxy_url(list, 2), "");
	T_EQ_STR(fetch__proxy_url(list, 1), "http://u:pw@b:3128");
	/* The same chunk, the same proxy; chunks spread over the group. */
	for (uint64_t c = 0; c < 1000; c++) {
		int i = fetch__proxy_choose(list, "http://o/f", c, 0, 0);

		T_ASSERT(i == 0 || i == 1);
		T_EQ_INT(fetch__proxy_choose(list, "http://o/f", c, 5, 0), i);
		count[i]++;
	}
	T_ASSERT(count[0] > 400 && count[1] > 400);
	/* A failed member's chunks go to the other; the tried ones are left
	 * out; past the group, DIRECT. */
	a = fetch__proxy_choose(list, "http://o/f", 7, 0, 0);
	b = 1 - a;
	fetch__proxy_failed(list, a, 100);
	T_EQ_INT(fetch__proxy_choose(list, "http://o/f", 7, 100, 0), b);
	T_EQ_INT(fetch__proxy_choose(list, "http://o/f", 7, 100, 1u << b), 2);
	T_EQ_INT(fetch_proxies_info(list, (uint32_t)a, 600, &pi), 0);
	T_EQ_INT(pi.state, FETCH_PROXY_FAILED);
	T_EQ_U64(pi.retry_in_ms, 500);
	T_EQ_U64(pi.failures, 1);
	/* After the reset interval it is asked again. */
	T_EQ_INT(fetch__proxy_choose(list, "http://o/f", 7, 1100, 0), a);
	/* Both failed: the next group. */
	fetch__proxy_failed(list, a, 2000);
	fetch__proxy_failed(list, b, 2001);
	T_EQ_INT(fetch__proxy_choose(list, "http://o/f", 7, 2002, 0), 2);
	/* An answer ends a failure at once. */
	fetch__proxy_answered(list, b, 1);
	fetch__proxy_answered(list, b, -1);
	fetch__proxy_answered(list, b, 0);
	T_EQ_INT(fetch_proxies_info(list, (uint32_t)b, 2002, &pi), 0);
	T_EQ_INT(pi.state, FETCH_PROXY_OK);
	T_EQ_U64(pi.hits, 1);
	T_EQ_U64(pi.misses, 1);
	T_EQ_U64(pi.bad, 0);
	/* A wrong answer is a failure, and counted as a bad one. */
	fetch__proxy_bad(list, b, 3000);
	T_EQ_INT(fetch_proxies_info(list, (uint32_t)b, 3000, &pi), 0);
	T_EQ_INT(pi.state, FETCH_PROXY_FAILED);
	T_EQ_U64(pi.failures, 2);
	T_EQ_U64(pi.bad, 1);
	T_EQ_INT(fetch__proxy_choose(list, "http://o/f", 7, 3000, 1u << a), 2);
	fetch__proxy_answered(list, b, 0);
	/* Excluded for good (bytes failing a digest: a bad answer once);
	 * DIRECT never is. */
	T_EQ_INT(fetch_proxies_exclude(list, b), 1);
	T_EQ_INT(fetch_proxies_exclude(list, b), 0);
	T_EQ_INT(fetch_proxies_info(list, (uint32_t)b, 3000, &pi), 0);
	T_EQ_U64(pi.failures, 3);
	T_EQ_U64(pi.bad, 2);
	T_EQ_INT(fetch_proxies_exclude(list, 2), 0);
	T_EQ_INT(fetch__proxy_choose(list, "http://o/f", 7, 9000, 0), a);
	fetch_proxies_exclude(list, a);
	T_EQ_INT(fetch__proxy_choose(list, "http://o/f", 7, 9000, 0), 2);
	T_EQ_INT(fetch__proxy_choose(list, "http://o/f", 7, 9000, 1u << 2),
		 -ENOENT);
	fetch_proxies_free(list);

	/* Every proxy failed lately, no DIRECT: the one that failed longest
	 * ago is asked rather than none. */
	T_EQ_INT(fetch_proxies_new("http://a:1;http://b:2", 1000, &list, err,
				   sizeof(err)),
		 0);
	T_EQ_INT(fetch__proxy_choose(list, "http://o/f", 0, 0, 0), 0);
	fetch__proxy_failed(list, 1, 10);
	fetch__proxy_failed(list, 0, 20);
	T_EQ_INT(fetch__proxy_choose(list, "http://o/f", 0, 30, 0), 1);
	T_EQ_INT(fetch__proxy_choose(list, "http://o/f", 0, 30, 2u), 0);
	fetch_proxies_free(list);
	fetch_proxies_free(NULL);
}

static void proxy_parse_errors(void)
{
	static const struct {
		const char *spec, *says;
	} bad[] = {
		{"", "empty"},
		{";http://a:1", "group 1 is empty (nothing before ';')"},
		{"http://a:1; ;DIRECT", "group 2 is empty"},
		{"http://a:1| |http://b:2",
		 "group 1 ('http://a:1| |http://b:2'): "
		 "an empty proxy after '|'"},
		{"DIRECT|http://a:1", "DIRECT must be alone in its group"},
		{"http://a:1;direct;DIRECT", "'DIRECT' is listed twice"},
		{"gopher://a:1", "scheme 'gopher' is not http"},
		{"http://a:1/", NULL},
		{"http://[::1]:3128", NULL},
		{"http://[zz]:3128", "a bad IPv6 address"},
		{"http://a:1?x", "no path"},
		{"http://a:65536", "the port is not 1-65535"},
		{"http://a:", "the port is not 1-65535"},
		{"http://a\x01b:1", "a blank or control byte"},
		{"http://a!b:1", "'!' in the host"},
		{"http://user:hunter2@:1", "'http://:1': no host"},
		{"user:hunter2@a:1|user:hunter2@a:1", "'a:1' is listed twice"},
	};
	char err[256], many[512] = "";
	struct fetch_proxies *list = NULL;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int rc = fetch_proxies_new(bad[i].spec, 1000, &list, err,
					   sizeof(err));

		if (bad[i].says == NULL) {
			T_EQ_INT(rc, 0);
			fetch_proxies_free(list);
			list = NULL;
			continue;
		}
		T_EQ_INT(rc, -EINVAL);
		if (strncmp(err, "option proxy: ", 14) != 0 ||
		    strstr(err, bad[i].says) == NULL ||
		    strstr(err, "hunter2") != NULL)
			T_FAIL("'%s': %s", bad[i].spec, err);
	}
	for (int i = 0; i < 17; i++)
		snprintf(many + strlen(many), sizeof(many) - strlen(many),
			 "%shttp://p%d:1", i ? "|" : "", i);
	T_EQ_INT(fetch_proxies_new(many, 1000, &list, err, sizeof(err)),
		 -EINVAL);
	T_ASSERT(strstr(err, "more than 16 proxies (at 'http://p16:1')") !=
		 NULL);
}

static void x_cache(void)
{
	T_EQ_INT(fetch_parse_x_cache("HIT", NULL), 1);
	T_EQ_INT(fetch_parse_x_cache("HIT from squid.example:3128", NULL), 1);
	T_EQ_INT(fetch_parse_x_cache(" TCP_MEM_HIT", NULL), 1);
	T_EQ_INT(fetch_parse_x_cache("hit-fresh", NULL), 1);
	T_EQ_INT(fetch_parse_x_cache("STALE", NULL), 1);
	T_EQ_INT(fetch_parse_x_cache("REVALIDATED", NULL), 1);
	T_EQ_INT(fetch_parse_x_cache("MISS", NULL), -1);
	T_EQ_INT(fetch_parse_x_cache("MISS from squid, HIT from edge", NULL),
		 -1);
	T_EQ_INT(fetch_parse_x_cache("EXPIRED", NULL), -1);
	T_EQ_INT(fetch_parse_x_cache("BYPASS", "12"), -1);
	T_EQ_INT(fetch_parse_x_cache("", "12"), 0);
	T_EQ_INT(fetch_parse_x_cache(NULL, "12"), 1);
	T_EQ_INT(fetch_parse_x_cache(NULL, " 0\r\n"), -1);
	T_EQ_INT(fetch_parse_x_cache(NULL, "soon"), 0);
	T_EQ_INT(fetch_parse_x_cache(NULL, NULL), 0);
}

/* The slot's diagram (fetch_int.h), arrow by arrow, written down again
 * here so that a slip in either copy shows. */
static const struct {
	enum slot_state from, to;
} slot_arrows[] = {
	{SLOT_IDLE, SLOT_SENT},	     {SLOT_IDLE, SLOT_REFUSED},
	{SLOT_IDLE, SLOT_AHEAD},     {SLOT_AHEAD, SLOT_HELD},
	{SLOT_AHEAD, SLOT_SENT},     {SLOT_HELD, SLOT_SENT},
	{SLOT_HELD, SLOT_AHEAD},     {SLOT_SENT, SLOT_RECEIVING},
	{SLOT_RECEIVING, SLOT_SENT}, {SLOT_SENT, SLOT_AUTH_WAIT},
	{SLOT_AUTH_WAIT, SLOT_SENT}, {SLOT_AHEAD, SLOT_IDLE},
	{SLOT_HELD, SLOT_IDLE},	     {SLOT_SENT, SLOT_IDLE},
	{SLOT_RECEIVING, SLOT_IDLE}, {SLOT_AUTH_WAIT, SLOT_IDLE},
	{SLOT_REFUSED, SLOT_IDLE},   {SLOT_DRAINING, SLOT_IDLE},
	{SLOT_SENT, SLOT_DRAINING},  {SLOT_RECEIVING, SLOT_DRAINING},
};

/* The last line the slot logged, and its level. */
static char slot_logged[512];
static int slot_logged_level = -1;

static void slot_log(void *ctx, enum fetch_log_level level, const char *msg)
{
	(void)ctx;
	slot_logged_level = (int)level;
	snprintf(slot_logged, sizeof(slot_logged), "%s", msg);
}

static bool slot_arrow_drawn(enum slot_state from, enum slot_state to)
{
	for (size_t i = 0; i < sizeof(slot_arrows) / sizeof(slot_arrows[0]);
	     i++)
		if (slot_arrows[i].from == from && slot_arrows[i].to == to)
			return true;
	return false;
}

static void slot_diagram(void)
{
	for (int from = 0; from < SLOT_NSTATES; from++)
		for (int to = 0; to < SLOT_NSTATES; to++) {
			if (from == to)
				continue;
			if (fetch__slot_drawn(from, to) !=
			    slot_arrow_drawn(from, to))
				T_FAIL("%d -> %d: drawn %d, expected %d", from,
				       to, fetch__slot_drawn(from, to),
				       slot_arrow_drawn(from, to));
		}
	T_ASSERT(!fetch__slot_drawn(SLOT_NSTATES, SLOT_IDLE));
	T_ASSERT(!fetch__slot_drawn(SLOT_IDLE, SLOT_NSTATES));
}

/* Every drawn arrow moves the slot and logs "from -> to" at debug level;
 * staying put logs nothing. */
static void slot_set_drawn(void)
{
	struct fetch f = {.hooks = {.log = slot_log}};
	struct fetch_slot s = {.f = &f, .id = 3};

	for (size_t i = 0; i < sizeof(slot_arrows) / sizeof(slot_arrows[0]);
	     i++) {
		s.state = slot_arrows[i].from;
		slot_logged[0] = '\0';
		slot_logged_level = -1;
		T_EQ_INT(fetch__slot_set(&s, slot_arrows[i].to), 0);
		T_EQ_INT(s.state, slot_arrows[i].to);
		T_EQ_INT(slot_logged_level, FETCH_LOG_DEBUG);
		T_ASSERT(strncmp(slot_logged, "lane 3: transfer ", 17) == 0);
		T_ASSERT(strstr(slot_logged, " -> ") != NULL);
	}
	s.state = SLOT_AHEAD;
	fetch__slot_set(&s, SLOT_HELD);
	T_EQ_STR(slot_logged, "lane 3: transfer ahead -> held");
	slot_logged[0] = '\0';
	T_EQ_INT(fetch__slot_set(&s, SLOT_HELD), 0);
	T_EQ_INT(s.state, SLOT_HELD);
	T_EQ_STR(slot_logged, "");
}

/* An arrow the diagram does not draw is a bug: refused with an error
 * line in a release build; in a strict build (PACEFS_STRICT, the
 * sanitizer builds) the process aborts, seen here in a child. */
static void slot_set_undrawn(void)
{
	struct fetch f = {.hooks = {.log = slot_log}};
	struct fetch_slot s = {.f = &f, .id = 1, .state = SLOT_IDLE};
#ifdef PACEFS_STRICT
	int status = 0;
	pid_t pid;

	fflush(NULL);
	pid = fork();
	T_ASSERT(pid >= 0);
	if (pid == 0) {
		fetch__slot_set(&s, SLOT_RECEIVING);
		_exit(0);
	}
	T_EQ_INT(waitpid(pid, &status, 0), pid);
	T_ASSERT(WIFSIGNALED(status));
	T_EQ_INT(WTERMSIG(status), SIGABRT);
	T_EQ_INT(s.state, SLOT_IDLE);
#else
	T_EQ_INT(fetch__slot_set(&s, SLOT_RECEIVING), -EINVAL);
	T_EQ_INT(s.state, SLOT_IDLE);
	T_EQ_INT(slot_logged_level, FETCH_LOG_ERR);
	T_EQ_STR(slot_logged, "bug: lane 1: transfer idle -> receiving is not "
			      "in the slot's diagram; refused");
	s.state = SLOT_DRAINING;
	T_EQ_INT(fetch__slot_set(&s, SLOT_SENT), -EINVAL);
	T_EQ_INT(s.state, SLOT_DRAINING);
#endif
}

static const struct t_case cases[] = {
	{"slot_diagram", slot_diagram},
	{"slot_set_drawn", slot_set_drawn},
	{"slot_set_undrawn", slot_set_undrawn},
	{"proxy_choice", proxy_choice},
	{"proxy_stripes", proxy_stripes},
	{"proxy_parse_errors", proxy_parse_errors},
	{"x_cache", x_cache},
	{"text_redact", text_redact},
	{"text_fit", text_fit},
	{"text_redacted", text_redacted},
	{"text_errf", text_errf},
	{"url_shown", url_shown},
	{"url_hop", url_hop},
	{"sends_headers", sends_headers},
	{"content_range_ok", content_range_ok},
	{"content_range_bad", content_range_bad},
	{"retry_after", retry_after},
	{"content_length", content_length},
	{"coding", coding},
	{"classify", classify},
	{"url_redacted", url_redacted},
	{"url_signed", url_signed},
	{"url_origin", url_origin},
};

int main(int argc, char **argv)
{
	return T_RUN(argc, argv, cases);
}

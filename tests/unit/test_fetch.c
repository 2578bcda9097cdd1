/* test_fetch: the HTTP header parsers and the status classification that
 * decide whether a range response's bytes may be used. */
#include <errno.h>
#include <stdint.h>

#include "fetch/fetch.h"
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
	T_EQ_INT(fetch_parse_retry_after("soon", 0, &ms), -EINVAL);
	T_EQ_INT(fetch_parse_retry_after("12x", 0, &ms), -EINVAL);
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

static const struct t_case cases[] = {
	{"content_range_ok", content_range_ok},
	{"content_range_bad", content_range_bad},
	{"retry_after", retry_after},
	{"classify", classify},
};

int main(int argc, char **argv)
{
	return T_RUN(argc, argv, cases);
}

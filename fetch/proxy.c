/* proxy: the proxy list of -o proxy="A|B;C;DIRECT": its parser, the choice
 * of a proxy for each request (a hash of URL and stripe inside a group,
 * failover from group to group), failures and their reset, and each
 * proxy's counters for pacefs status. */
#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <curl/curl.h>

#include "fetch/fetch.h"
#include "fetch/fetch_int.h"

struct proxy {
	char *url;   /* as given; "" for DIRECT (what CURLOPT_PROXY takes) */
	char *shown; /* without userinfo, for status and logs */
	uint32_t group;
	uint64_t hash; /* of the URL as given: the same on every machine */
	/* guarded by fetch_proxies.mu */
	uint64_t failed_until_ms; /* 0: not failed */
	uint64_t failed_at_ms;
	bool excluded; /* wrong bytes: never used again */
	uint64_t requests, failures, bytes, hits, misses;
	uint64_t bad; /* answers refused: wrong for the request, or bytes
			 failing their digest */
};

struct fetch_proxies {
	pthread_mutex_t mu;
	uint64_t reset_ms;
	uint32_t n;
	uint32_t ngroups;
	struct proxy p[FETCH_PROXIES_MAX];
};

/* Entry p takes no request now: excluded, or failed within its reset
 * interval. Called with the list's lock held. */
static bool proxy_down(const struct proxy *p, uint64_t now_ms)
{
	return p->excluded || p->failed_until_ms > now_ms;
}

/* FNV-1a, then a finalizer: stable across machines and builds, so that
 * every mount of a fleet sends a chunk to the same proxy. */
static uint64_t hash_bytes(const char *s, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (size_t i = 0; i < n; i++) {
		h ^= (unsigned char)s[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

static uint64_t mix(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	x ^= x >> 31;
	return x;
}

/* The entry [s, s + n) as an error may show it: one line, cut, and
 * without what precedes an '@' in it (a proxy's credentials). */
static void entry_shown(const char *s, size_t n, char *buf, size_t cap)
{
	const char *at = NULL, *scheme = NULL;
	size_t o = 0;

	for (size_t i = 0; i < n; i++) {
		if (s[i] == '@')
			at = s + i;
		if (scheme == NULL && i + 2 < n && s[i] == ':' &&
		    s[i + 1] == '/' && s[i + 2] == '/')
			scheme = s + i + 3;
	}
	for (size_t i = 0; i < n && o + 4 < cap; i++) {
		const char *c = s + i;

		/* The userinfo: from the scheme's end (or the start) to the
		 * last '@', which goes too. */
		if (at != NULL && c <= at &&
		    c >= (scheme != NULL && scheme <= at ? scheme : s))
			continue;
		if (o >= 80) {
			memcpy(buf + o, "...", 3);
			o += 3;
			break;
		}
		buf[o++] = (unsigned char)*c < ' ' || (unsigned char)*c >= 0x7f
				   ? '?'
				   : *c;
	}
	buf[o] = '\0';
}

static bool is_host_char(char c)
{
	return isalnum((unsigned char)c) || c == '.' || c == '-' || c == '_' ||
	       c == '~' || c == '%';
}

/* Checks one proxy [s, s + n): [scheme://][user[:password]@]host[:port][/]
 * with a scheme curl takes for a proxy. Writes why not into why. */
static bool proxy_valid(const char *s, size_t n, char *why, size_t cap)
{
	static const char *const schemes[] = {"http",	 "https",  "socks4",
					      "socks4a", "socks5", "socks5h"};
	const char *p = s, *end = s + n, *host, *at;
	bool ok = false;

	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] <= ' ' || (unsigned char)s[i] >= 0x7f) {
			snprintf(why, cap, "a blank or control byte");
			return false;
		}
	for (const char *q = s; q + 2 < end; q++) {
		if (q[0] == ':' && q[1] == '/' && q[2] == '/') {
			for (size_t i = 0;
			     i < sizeof(schemes) / sizeof(*schemes); i++)
				ok |= strlen(schemes[i]) == (size_t)(q - s) &&
				      strncasecmp(s, schemes[i],
						  (size_t)(q - s)) == 0;
			if (!ok) {
				snprintf(why, cap,
					 "scheme '%.*s' is not http, https, "
					 "socks4, socks4a, socks5 or socks5h",
					 (int)(q - s) > 20 ? 20 : (int)(q - s),
					 s);
				return false;
			}
			p = q + 3;
			break;
		}
		if (!isalnum((unsigned char)q[0]) && q[0] != '+' &&
		    q[0] != '-' && q[0] != '.')
			break;
	}
	if (end > p && end[-1] == '/')
		end--;
	if (memchr(p, '/', (size_t)(end - p)) != NULL ||
	    memchr(p, '?', (size_t)(end - p)) != NULL ||
	    memchr(p, '#', (size_t)(end - p)) != NULL) {
		snprintf(why, cap, "a proxy has no path");
		return false;
	}
	at = NULL;
	for (const char *q = p; q < end; q++)
		if (*q == '@')
			at = q;
	host = at != NULL ? at + 1 : p;
	if (host < end && *host == '[') {
		const char *close = memchr(host, ']', (size_t)(end - host));

		if (close == NULL || close == host + 1) {
			snprintf(why, cap, "a bad IPv6 address");
			return false;
		}
		for (const char *q = host + 1; q < close; q++)
			if (!isxdigit((unsigned char)*q) && *q != ':' &&
			    *q != '.') {
				snprintf(why, cap, "a bad IPv6 address");
				return false;
			}
		p = close + 1;
	} else {
		p = host;
		while (p < end && is_host_char(*p))
			p++;
		if (p == host) {
			snprintf(why, cap, "no host");
			return false;
		}
	}
	if (p < end && *p == ':') {
		unsigned long port = 0;
		const char *d = ++p;

		while (p < end && isdigit((unsigned char)*p) && port <= 65535)
			port = port * 10 + (unsigned long)(*p++ - '0');
		if (p == d || p != end || port == 0 || port > 65535) {
			snprintf(why, cap, "the port is not 1-65535");
			return false;
		}
	}
	if (p != end) {
		snprintf(why, cap, "'%c' in the host", *p);
		return false;
	}
	return true;
}

static bool is_direct(const char *s, size_t n)
{
	return n == 6 && strncasecmp(s, "DIRECT", 6) == 0;
}

void fetch_proxies_free(struct fetch_proxies *list)
{
	if (list == NULL)
		return;
	for (uint32_t i = 0; i < list->n; i++) {
		free(list->p[i].url);
		free(list->p[i].shown);
	}
	pthread_mutex_destroy(&list->mu);
	free(list);
}

/* Adds the entry [s, s + n) of group g. */
static int entry_add(struct fetch_proxies *list, const char *s, size_t n,
		     uint32_t g, char *err, size_t errlen)
{
	struct proxy *p;
	char shown[128], why[96];

	entry_shown(s, n, shown, sizeof(shown));
	if (!is_direct(s, n) && !proxy_valid(s, n, why, sizeof(why)))
		return fetch_text_errf(err, errlen, -EINVAL,
				       "option proxy: '%s': %s", shown, why);
	for (uint32_t i = 0; i < list->n; i++)
		if (strlen(list->p[i].url) == (is_direct(s, n) ? 0 : n) &&
		    (is_direct(s, n) || strncasecmp(list->p[i].url, s, n) == 0))
			return fetch_text_errf(
				err, errlen, -EINVAL,
				"option proxy: '%s' is listed twice", shown);
	if (list->n == FETCH_PROXIES_MAX)
		return fetch_text_errf(
			err, errlen, -EINVAL,
			"option proxy: more than %d proxies (at '%s')",
			FETCH_PROXIES_MAX, shown);
	p = &list->p[list->n];
	p->url = is_direct(s, n) ? strdup("") : strndup(s, n);
	if (p->url == NULL)
		return fetch_text_errf(err, errlen, -ENOMEM, "out of memory");
	p->shown =
		is_direct(s, n) ? strdup("DIRECT") : fetch_url_redacted(p->url);
	if (p->shown == NULL) {
		free(p->url);
		p->url = NULL;
		return fetch_text_errf(err, errlen, -ENOMEM, "out of memory");
	}
	if (strstr(p->url, "://") == NULL && strchr(p->shown, '@') != NULL) {
		/* No scheme: fetch_url_redacted does not see the userinfo. */
		const char *a = strrchr(p->shown, '@');

		memmove(p->shown, a + 1, strlen(a + 1) + 1);
	}
	p->group = g;
	p->hash = mix(hash_bytes(s, n));
	list->n++;
	return 0;
}

int fetch_proxies_new(const char *spec, uint64_t reset_ms,
		      struct fetch_proxies **out, char *err, size_t errlen)
{
	struct fetch_proxies *list;
	const char *g = spec;
	uint32_t group = 0;
	int rc = 0;

	if (spec == NULL || spec[0] == '\0')
		return fetch_text_errf(err, errlen, -EINVAL,
				       "option proxy: empty");
	if (strlen(spec) > FETCH_PROXY_SPEC_MAX)
		return fetch_text_errf(err, errlen, -EINVAL,
				       "option proxy: longer than %d bytes",
				       FETCH_PROXY_SPEC_MAX);
	list = calloc(1, sizeof(*list));
	if (list == NULL)
		return fetch_text_errf(err, errlen, -ENOMEM, "out of memory");
	pthread_mutex_init(&list->mu, NULL);
	list->reset_ms = reset_ms;
	for (;; group++) {
		size_t glen = strcspn(g, ";");
		const char *m = g;
		uint32_t members = 0;
		bool direct = false;
		char gshown[128];

		entry_shown(g, glen, gshown, sizeof(gshown));
		if (glen == 0 || strspn(g, " \t") == glen) {
			rc = fetch_text_errf(
				err, errlen, -EINVAL,
				"option proxy: group %u is empty (nothing "
				"%s ';')",
				group + 1, group == 0 ? "before" : "after");
			goto out;
		}
		for (;;) {
			size_t mlen = strcspn(m, "|;");
			const char *s = m;
			size_t n = mlen;

			while (n > 0 && (*s == ' ' || *s == '\t')) {
				s++;
				n--;
			}
			while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t'))
				n--;
			if (n == 0) {
				rc = fetch_text_errf(
					err, errlen, -EINVAL,
					"option proxy: group %u ('%s'): an "
					"empty proxy %s '|'",
					group + 1, gshown,
					members == 0 ? "before" : "after");
				goto out;
			}
			direct |= is_direct(s, n);
			rc = entry_add(list, s, n, group, err, errlen);
			if (rc != 0)
				goto out;
			members++;
			if (m[mlen] != '|')
				break;
			m += mlen + 1;
		}
		if (direct && members > 1) {
			rc = fetch_text_errf(
				err, errlen, -EINVAL,
				"option proxy: group %u ('%s'): DIRECT must "
				"be alone in its group",
				group + 1, gshown);
			goto out;
		}
		if (g[glen] == '\0')
			break;
		g += glen + 1;
	}
	list->ngroups = group + 1;
	*out = list;
	return 0;
out:
	fetch_proxies_free(list);
	return rc;
}

uint32_t fetch_proxies_count(const struct fetch_proxies *list)
{
	return list != NULL ? list->n : 0;
}

/* The member of group g that owns stripe `stripe` of the URL hashed to
 * url_hash: in each round of k stripes (k, the group's members), the
 * members ranked by their rendezvous score for the round take its stripes
 * in rank order, so that each member owns exactly one stripe a round (an
 * even share of any blob, not one that varies with the proxies' names)
 * and every machine agrees on the owner. -1: the group is empty. Called
 * with the list's lock held. */
static int group_owner(const struct fetch_proxies *list, uint32_t g,
		       uint64_t url_hash, uint64_t stripe)
{
	uint32_t idx[FETCH_PROXIES_MAX];
	uint64_t score[FETCH_PROXIES_MAX];
	uint32_t k = 0, rank;
	uint64_t round_key;

	for (uint32_t i = 0; i < list->n; i++)
		if (list->p[i].group == g)
			idx[k++] = i;
	if (k == 0)
		return -1;
	round_key = mix(url_hash ^ mix(stripe / k + 1) ^ 0x9e3779b97f4a7c15ull);
	for (uint32_t j = 0; j < k; j++)
		score[j] = mix(round_key ^ list->p[idx[j]].hash);
	/* The member of rank stripe % k: the one with that many members
	 * scoring higher (ties broken by index). */
	rank = (uint32_t)(stripe % k);
	for (uint32_t j = 0; j < k; j++) {
		uint32_t above = 0;

		for (uint32_t o = 0; o < k; o++)
			above += score[o] > score[j] ||
				 (score[o] == score[j] && o < j);
		if (above == rank)
			return (int)idx[j];
	}
	return (int)idx[0];
}

int fetch__proxy_choose(struct fetch_proxies *list, const char *url,
			uint64_t stripe, uint64_t now_ms, uint32_t tried)
{
	uint64_t url_hash = hash_bytes(url, strlen(url));
	uint64_t key = mix(url_hash ^ mix(stripe + 1));
	int best = -1;
	uint64_t best_score = 0;

	pthread_mutex_lock(&list->mu);
	/* The first group with a member that works; inside it, the stripe's
	 * owner, or when it is down (or failed this request) the working
	 * member that scores highest for this URL and stripe (rendezvous
	 * hashing: a failed member's stripes spread over the others, the
	 * others' stay where they are, and its own come back to it when it
	 * answers again). */
	for (uint32_t g = 0; g < list->ngroups && best < 0; g++) {
		int owner = group_owner(list, g, url_hash, stripe);

		if (owner >= 0 && (tried & (1u << owner)) == 0 &&
		    !proxy_down(&list->p[owner], now_ms)) {
			best = owner;
			break;
		}
		for (uint32_t i = 0; i < list->n; i++) {
			const struct proxy *p = &list->p[i];
			uint64_t score = mix(key ^ p->hash);

			if (p->group != g || (tried & (1u << i)) != 0 ||
			    proxy_down(p, now_ms))
				continue;
			if (best < 0 || score > best_score) {
				best = (int)i;
				best_score = score;
			}
		}
	}
	/* Every one failed lately: the one that failed longest ago, rather
	 * than no request at all (the origin may have been what failed). */
	if (best < 0)
		for (uint32_t i = 0; i < list->n; i++) {
			const struct proxy *p = &list->p[i];

			if (p->excluded || (tried & (1u << i)) != 0)
				continue;
			if (best < 0 ||
			    p->failed_at_ms < list->p[best].failed_at_ms)
				best = (int)i;
		}
	pthread_mutex_unlock(&list->mu);
	return best >= 0 ? best : -ENOENT;
}

const char *fetch__proxy_url(const struct fetch_proxies *list, int i)
{
	return list->p[i].url;
}

const char *fetch__proxy_shown(const struct fetch_proxies *list, int i)
{
	return list->p[i].shown;
}

bool fetch__proxy_is_direct(const struct fetch_proxies *list, int i)
{
	return list->p[i].url[0] == '\0';
}

bool fetch__proxy_down(struct fetch_proxies *list, int i, uint64_t now_ms)
{
	bool down;

	pthread_mutex_lock(&list->mu);
	down = proxy_down(&list->p[i], now_ms);
	pthread_mutex_unlock(&list->mu);
	return down;
}

void fetch__proxy_failed(struct fetch_proxies *list, int i, uint64_t now_ms)
{
	pthread_mutex_lock(&list->mu);
	list->p[i].failures++;
	list->p[i].failed_at_ms = now_ms;
	list->p[i].failed_until_ms = now_ms + list->reset_ms;
	if (list->p[i].failed_until_ms == 0)
		list->p[i].failed_until_ms = 1;
	pthread_mutex_unlock(&list->mu);
}

void fetch__proxy_bad(struct fetch_proxies *list, int i, uint64_t now_ms)
{
	pthread_mutex_lock(&list->mu);
	list->p[i].bad++;
	pthread_mutex_unlock(&list->mu);
	fetch__proxy_failed(list, i, now_ms);
}

void fetch__proxy_request(struct fetch_proxies *list, int i)
{
	pthread_mutex_lock(&list->mu);
	list->p[i].requests++;
	pthread_mutex_unlock(&list->mu);
}

void fetch__proxy_answered(struct fetch_proxies *list, int i, int cache)
{
	pthread_mutex_lock(&list->mu);
	/* It answered: whatever failed before works again. */
	list->p[i].failed_until_ms = 0;
	if (cache > 0)
		list->p[i].hits++;
	else if (cache < 0)
		list->p[i].misses++;
	pthread_mutex_unlock(&list->mu);
}

void fetch__proxy_bytes(struct fetch_proxies *list, int i, uint64_t n)
{
	pthread_mutex_lock(&list->mu);
	list->p[i].bytes += n;
	pthread_mutex_unlock(&list->mu);
}

void fetch_proxies_fail(struct fetch_proxies *list, int i)
{
	if (list == NULL || i < 0 || (uint32_t)i >= list->n ||
	    fetch__proxy_is_direct(list, i))
		return;
	fetch__proxy_failed(list, i, fetch__now_ms());
}

int fetch_proxies_exclude(struct fetch_proxies *list, int i)
{
	bool first;

	if (list == NULL || i < 0 || (uint32_t)i >= list->n ||
	    fetch__proxy_is_direct(list, i))
		return 0;
	pthread_mutex_lock(&list->mu);
	first = !list->p[i].excluded;
	list->p[i].excluded = true;
	if (first) {
		/* Bytes failing their digest are a wrong answer too. */
		list->p[i].failures++;
		list->p[i].bad++;
	}
	pthread_mutex_unlock(&list->mu);
	return first ? 1 : 0;
}

int fetch_proxies_info(struct fetch_proxies *list, uint32_t i, uint64_t now_ms,
		       struct fetch_proxy_info *out)
{
	const struct proxy *p;

	if (list == NULL || i >= list->n)
		return -ENOENT;
	p = &list->p[i];
	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&list->mu);
	out->name = p->shown;
	out->group = p->group + 1;
	out->state = p->excluded		   ? FETCH_PROXY_EXCLUDED
		     : p->failed_until_ms > now_ms ? FETCH_PROXY_FAILED
						   : FETCH_PROXY_OK;
	out->retry_in_ms = out->state == FETCH_PROXY_FAILED
				   ? p->failed_until_ms - now_ms
				   : 0;
	out->requests = p->requests;
	out->failures = p->failures;
	out->bytes = p->bytes;
	out->hits = p->hits;
	out->misses = p->misses;
	out->bad = p->bad;
	pthread_mutex_unlock(&list->mu);
	return 0;
}

bool fetch__proxy_fault(CURL *easy, CURLcode cc)
{
	long status = 0, connect = 0;
	struct curl_header *h = NULL;

	switch (cc) {
	case CURLE_COULDNT_RESOLVE_PROXY:
	case CURLE_COULDNT_CONNECT:
	case CURLE_OPERATION_TIMEDOUT:
	case CURLE_SEND_ERROR:
	case CURLE_RECV_ERROR:
	case CURLE_GOT_NOTHING:
	case CURLE_PARTIAL_FILE:
	case CURLE_SSL_CONNECT_ERROR:
	case CURLE_PROXY:
		/* Not reached, or the connection to it broke: a reset mid-body
		 * as much as a refused connect. */
		return true;
	default:
		break;
	}
	curl_easy_getinfo(easy, CURLINFO_HTTP_CONNECTCODE, &connect);
	if (connect >= 300)
		return true; /* it refused the tunnel to an https origin */
	curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
	/* A gateway error is the proxy's own; a 503 too unless it carries a
	 * Retry-After, which is an origin's throttling passed through. */
	if (status == 502 || status == 504)
		return true;
	if (status == 503)
		return curl_easy_header(easy, "Retry-After", 0, CURLH_HEADER,
					-1, &h) != CURLHE_OK;
	return false;
}

int fetch__proxy_cache_status(CURL *easy)
{
	struct curl_header *h = NULL;
	char buf[64];

	if (curl_easy_header(easy, "X-Cache", 0, CURLH_HEADER, -1, &h) ==
	    CURLHE_OK) {
		fetch__header_value(h->value, strlen(h->value), buf,
				    sizeof(buf));
		return fetch_parse_x_cache(buf, NULL);
	}
	if (curl_easy_header(easy, "Age", 0, CURLH_HEADER, -1, &h) ==
	    CURLHE_OK) {
		fetch__header_value(h->value, strlen(h->value), buf,
				    sizeof(buf));
		return fetch_parse_x_cache(NULL, buf);
	}
	return 0;
}

uint64_t fetch__now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* auth: credentials that change while a mount lives: the current set (an
 * S3 key for curl's SigV4 signer, a session token, request headers), handed
 * to each request by reference, replaced whole when new ones come, and the
 * rule that a request refused for its credentials is tried once more with
 * newer ones. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <curl/curl.h>

#include "fetch/fetch.h"
#include "fetch/fetch_int.h"

/* A GET has no body: its payload hash is that of nothing, which S3 wants
 * in this header (curl 7.88 signs what the header says). */
#define FETCH__EMPTY_SHA256                                                    \
	"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

struct fetch_auth {
	pthread_mutex_t mu;
	pthread_cond_t cv;	 /* a new set came */
	struct fetch__cref *cur; /* guarded by mu */
	uint64_t gen;		 /* guarded by mu: bumped by each set */
	char region[64];	 /* "": no SigV4 */
	void (*on_expired)(void *ctx, uint64_t gen);
	void *ctx;
};

static void wipe_free(char *s)
{
	if (s == NULL)
		return;
	explicit_bzero(s, strlen(s));
	free(s);
}

static void cref_free(struct fetch__cref *r)
{
	struct curl_slist *h;

	if (r == NULL)
		return;
	/* They were secrets: do not leave them in freed memory. */
	for (h = r->headers; h != NULL; h = h->next)
		explicit_bzero(h->data, strlen(h->data));
	curl_slist_free_all(r->headers);
	wipe_free(r->id);
	wipe_free(r->secret);
	free(r);
}

int fetch_auth_new(const char *region, struct fetch_auth **out)
{
	struct fetch_auth *a = calloc(1, sizeof(*a));
	pthread_condattr_t ca;

	if (a == NULL)
		return -ENOMEM;
	if (region != NULL && strlen(region) >= sizeof(a->region)) {
		free(a);
		return -EINVAL;
	}
	snprintf(a->region, sizeof(a->region), "%s",
		 region != NULL ? region : "");
	pthread_mutex_init(&a->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&a->cv, &ca);
	pthread_condattr_destroy(&ca);
	*out = a;
	return 0;
}

void fetch_auth_free(struct fetch_auth *a)
{
	if (a == NULL)
		return;
	fetch__auth_put(a->cur);
	pthread_cond_destroy(&a->cv);
	pthread_mutex_destroy(&a->mu);
	free(a);
}

void fetch_auth_on_expired(struct fetch_auth *a,
			   void (*cb)(void *ctx, uint64_t gen), void *ctx)
{
	pthread_mutex_lock(&a->mu);
	a->on_expired = cb;
	a->ctx = ctx;
	pthread_mutex_unlock(&a->mu);
}

/* Appends "name: value" to *list; false when memory ran out. */
static bool list_add(struct curl_slist **list, const char *name,
		     const char *value)
{
	size_t len = strlen(name) + strlen(value) + 3;
	char *line = malloc(len);
	struct curl_slist *grown;

	if (line == NULL)
		return false;
	snprintf(line, len, "%s: %s", name, value);
	grown = curl_slist_append(*list, line);
	explicit_bzero(line, len);
	free(line);
	if (grown == NULL)
		return false;
	*list = grown;
	return true;
}

uint64_t fetch_auth_set(struct fetch_auth *a, const struct fetch_cred *c)
{
	struct fetch__cref *r = calloc(1, sizeof(*r)), *old;
	bool ok = r != NULL;
	uint64_t gen = 0;

	for (size_t i = 0; ok && i < c->nheaders; i++) {
		struct curl_slist *grown =
			curl_slist_append(r->headers, c->headers[i]);

		ok = grown != NULL;
		if (ok)
			r->headers = grown;
	}
	if (ok && a->region[0] != '\0' && c->s3_id != NULL &&
	    c->s3_secret != NULL) {
		r->id = strdup(c->s3_id);
		r->secret = strdup(c->s3_secret);
		snprintf(r->sigv4, sizeof(r->sigv4), "aws:amz:%s:s3",
			 a->region);
		ok = r->id != NULL && r->secret != NULL &&
		     list_add(&r->headers, "x-amz-content-sha256",
			      FETCH__EMPTY_SHA256) &&
		     (c->s3_token == NULL ||
		      list_add(&r->headers, "x-amz-security-token",
			       c->s3_token));
	}
	if (!ok) {
		cref_free(r);
		return 0;
	}
	atomic_init(&r->refs, 1);
	pthread_mutex_lock(&a->mu);
	old = a->cur;
	r->gen = ++a->gen;
	gen = r->gen;
	a->cur = r;
	pthread_cond_broadcast(&a->cv);
	pthread_mutex_unlock(&a->mu);
	fetch__auth_put(old);
	return gen;
}

struct fetch__cref *fetch__auth_get(struct fetch_auth *a)
{
	struct fetch__cref *r;

	if (a == NULL)
		return NULL;
	pthread_mutex_lock(&a->mu);
	r = a->cur;
	if (r != NULL)
		atomic_fetch_add(&r->refs, 1);
	pthread_mutex_unlock(&a->mu);
	return r;
}

void fetch__auth_put(struct fetch__cref *r)
{
	if (r != NULL && atomic_fetch_sub(&r->refs, 1) == 1)
		cref_free(r);
}

uint64_t fetch_auth_gen(struct fetch_auth *a)
{
	uint64_t gen;

	pthread_mutex_lock(&a->mu);
	gen = a->gen;
	pthread_mutex_unlock(&a->mu);
	return gen;
}

void fetch_auth_again(struct fetch_auth *a)
{
	pthread_mutex_lock(&a->mu);
	a->gen++;
	pthread_cond_broadcast(&a->cv);
	pthread_mutex_unlock(&a->mu);
}

void fetch__auth_expired(struct fetch_auth *a, uint64_t gen)
{
	void (*cb)(void *, uint64_t);
	void *ctx;

	pthread_mutex_lock(&a->mu);
	cb = a->on_expired;
	ctx = a->ctx;
	pthread_mutex_unlock(&a->mu);
	if (cb != NULL)
		cb(ctx, gen);
}

/* CLOCK_MONOTONIC now + ms, as a condition's wait takes it. */
static struct timespec mono_after(long ms)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	return ts;
}

bool fetch__auth_wait(const struct fetch_config *cfg, uint64_t gen,
		      long timeout_ms)
{
	struct fetch_auth *a = cfg->auth;
	struct timespec until = mono_after(timeout_ms);
	bool newer;

	pthread_mutex_lock(&a->mu);
	/* In slices: nothing signals the condition when the mount ends, and
	 * the command that gives new credentials may never finish. */
	while (a->gen <= gen) {
		struct timespec slice = mono_after(FETCH__STOP_POLL_MS);
		bool last = until.tv_sec < slice.tv_sec ||
			    (until.tv_sec == slice.tv_sec &&
			     until.tv_nsec <= slice.tv_nsec);

		if (pthread_cond_timedwait(&a->cv, &a->mu,
					   last ? &until : &slice) ==
			    ETIMEDOUT &&
		    last)
			break;
		if (cfg->stop != NULL && cfg->stop(cfg->stop_arg))
			break;
	}
	newer = a->gen > gen;
	pthread_mutex_unlock(&a->mu);
	return newer;
}

CURLcode fetch__auth_apply(CURL *easy, const struct fetch__cref *r,
			   bool allowed)
{
	CURLcode rc = CURLE_OK;

	/* A key signs only for the origins it was given for; a hop
	 * elsewhere gets no signature. */
	if (r != NULL && r->sigv4[0] != '\0' && allowed) {
		rc |= curl_easy_setopt(easy, CURLOPT_AWS_SIGV4, r->sigv4);
		rc |= curl_easy_setopt(easy, CURLOPT_USERNAME, r->id);
		rc |= curl_easy_setopt(easy, CURLOPT_PASSWORD, r->secret);
	} else if (r != NULL && r->sigv4[0] != '\0') {
		rc |= curl_easy_setopt(easy, CURLOPT_AWS_SIGV4, NULL);
		rc |= curl_easy_setopt(easy, CURLOPT_USERNAME, NULL);
		rc |= curl_easy_setopt(easy, CURLOPT_PASSWORD, NULL);
	}
	return rc;
}

bool fetch__auth_refused(long status, const char *body)
{
	static const char *const codes[] = {"<Code>ExpiredToken</Code>",
					    "<Code>InvalidToken</Code>",
					    "<Code>TokenRefreshRequired</Code>",
					    "<Code>RequestExpired</Code>"};

	if (status == 401 || status == 403)
		return true;
	for (size_t i = 0; status == 400 && body != NULL &&
			   i < sizeof(codes) / sizeof(codes[0]);
	     i++)
		if (strstr(body, codes[i]) != NULL)
			return true;
	return false;
}

/* fault: the --fault rules: their kinds, how a rule is parsed from the
 * command line, and which rule a request path matches; and --fault-mix,
 * a seeded random draw of a fault for each request. */
#include <errno.h>
#include <fnmatch.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "contrib/origin/origin_int.h"

/* Per kind: its name on the command line and how many ':' arguments it
 * takes at least and at most. */
static const struct {
	const char *name;
	int min_args;
	int max_args;
} fault_kinds[FAULT_KIND_COUNT] = {
	[FAULT_STALL] = {"stall", 1, 1},
	[FAULT_RESET] = {"reset", 1, 1},
	[FAULT_STATUS] = {"status", 1, 4},
	[FAULT_BURST] = {"burst", 2, 2},
	[FAULT_NORANGE] = {"norange", 0, 0},
	[FAULT_BADRANGE] = {"badrange", 0, 0},
	[FAULT_SHORT] = {"short", 1, 1},
	[FAULT_ETAG_CHANGE] = {"etag-change", 1, 1},
	[FAULT_CONTENT_CHANGE] = {"content-change", 1, 1},
	[FAULT_SLOWFIRST] = {"slowfirst", 1, 1},
	[FAULT_REFUSE] = {"refuse", 0, 0},
	[FAULT_RATE] = {"rate", 1, 1},
	/* A redirect's one argument is the rest of the rule. */
	[FAULT_REDIRECT] = {"redirect", 1, 1},
	[FAULT_BIGHEADER] = {"bigheader", 1, 2},
	[FAULT_ENCODING] = {"encoding", 1, 2},
	[FAULT_TOTAL] = {"total", 1, 1},
	[FAULT_CLEN] = {"clen", 1, 1},
	[FAULT_ETAG] = {"etag", 1, 2},
	[FAULT_CORRUPT] = {"corrupt", 1, 1},
	[FAULT_MUTE] = {"mute", 0, 0},
	[FAULT_CHUNKED] = {"chunked", 0, 0},
};

/* Parses "GLOB:KIND[:ARG[:ARG]]"; the kind is found at the first ':' that
 * is followed by a known kind name, so globs may hold ':' themselves. */
int origin__fault_parse(const char *spec, struct fault *f)
{
	const char *p, *args = NULL, *a[4];
	size_t alen[4];
	int kind = -1, nargs = 0, i, rc = -EINVAL;
	uint64_t v;

	for (p = strchr(spec, ':'); p && kind < 0; p = strchr(p + 1, ':')) {
		for (i = 0; i < FAULT_KIND_COUNT; i++) {
			size_t n = strlen(fault_kinds[i].name);

			if (strncmp(p + 1, fault_kinds[i].name, n) == 0 &&
			    (p[1 + n] == ':' || p[1 + n] == '\0')) {
				kind = i;
				args = p[1 + n] ? p + 2 + n : NULL;
				break;
			}
		}
		if (kind >= 0)
			break;
	}
	if (kind < 0 || p == spec)
		goto out;
	/* A redirect's prefix is a URL: its colons are its own. */
	while (args && kind == FAULT_REDIRECT && nargs == 0) {
		a[nargs] = args;
		alen[nargs] = strlen(args);
		nargs++;
		args = NULL;
	}
	while (args) {
		const char *colon = strchr(args, ':');

		if (nargs == 4)
			goto out;
		a[nargs] = args;
		alen[nargs] = colon ? (size_t)(colon - args) : strlen(args);
		nargs++;
		args = colon ? colon + 1 : NULL;
	}
	if (nargs < fault_kinds[kind].min_args ||
	    nargs > fault_kinds[kind].max_args)
		goto out;
	memset(f, 0, sizeof(*f));
	f->kind = (enum fault_kind)kind;
	f->retry_after = -1;
	atomic_init(&f->hits, 0);
	switch (f->kind) {
	case FAULT_STATUS:
	case FAULT_BURST:
		rc = origin__parse_u64(a[0], alen[0], &v);
		if (rc < 0 || v < 100 || v > 599) {
			rc = -EINVAL;
			goto out;
		}
		f->code = (int)v;
		if (nargs >= 3) {
			rc = origin__parse_u64(a[2], alen[2], &f->skip);
			if (rc < 0)
				goto out;
		}
		if (nargs == 4) {
			rc = origin__parse_u64(a[3], alen[3], &f->count);
			if (rc < 0 || f->count == 0) {
				rc = -EINVAL;
				goto out;
			}
		}
		if (nargs >= 2) {
			rc = origin__parse_u64(a[1], alen[1], &v);
			if (rc < 0 || v > LONG_MAX) {
				rc = -EINVAL;
				goto out;
			}
			if (f->kind == FAULT_STATUS)
				f->retry_after = (long)v;
			else
				f->n = v;
		}
		break;
	case FAULT_STALL:
	case FAULT_RESET:
	case FAULT_SHORT:
	case FAULT_RATE:
		rc = origin__parse_size(a[0], alen[0], &f->n);
		if (rc < 0)
			goto out;
		if (f->kind == FAULT_RATE && f->n == 0) {
			rc = -EINVAL;
			goto out;
		}
		break;
	case FAULT_ETAG_CHANGE:
	case FAULT_CONTENT_CHANGE:
	case FAULT_CORRUPT:
	case FAULT_SLOWFIRST:
		rc = origin__parse_u64(a[0], alen[0], &f->n);
		if (rc < 0)
			goto out;
		break;
	case FAULT_REDIRECT:
		if (alen[0] == 0 || strpbrk(a[0], " \t\r\n") != NULL) {
			rc = -EINVAL;
			goto out;
		}
		f->location = strndup(a[0], alen[0]);
		if (!f->location) {
			rc = -ENOMEM;
			goto out;
		}
		break;
	case FAULT_BIGHEADER:
		rc = origin__parse_size(a[0], alen[0], &f->n);
		if (rc < 0 || f->n > ((uint64_t)64 << 20)) {
			rc = -EINVAL;
			goto out;
		}
		break;
	case FAULT_TOTAL:
	case FAULT_CLEN:
		if (alen[0] == 0 || alen[0] > 40 ||
		    strspn(a[0], "0123456789") < alen[0]) {
			rc = -EINVAL;
			goto out;
		}
		break;
	case FAULT_ENCODING:
	case FAULT_ETAG:
		/* Any byte a header line can hold, control bytes included. */
		if (alen[0] == 0 || memchr(a[0], '\r', alen[0]) ||
		    memchr(a[0], '\n', alen[0])) {
			rc = -EINVAL;
			goto out;
		}
		break;
	default:
		break;
	}
	if (f->kind == FAULT_BIGHEADER || f->kind == FAULT_ENCODING ||
	    f->kind == FAULT_ETAG) {
		if (nargs == 2) {
			rc = origin__parse_u64(a[1], alen[1], &f->skip);
			if (rc < 0)
				goto out;
		}
	}
	if (f->kind == FAULT_TOTAL || f->kind == FAULT_CLEN ||
	    f->kind == FAULT_ENCODING || f->kind == FAULT_ETAG) {
		f->text = strndup(a[0], alen[0]);
		if (!f->text) {
			rc = -ENOMEM;
			goto out;
		}
	}
	f->glob = strndup(spec, (size_t)(p - spec));
	if (!f->glob) {
		rc = -ENOMEM;
		goto out;
	}
	rc = 0;
out:
	return rc;
}

struct fault *origin__fault_match(struct server *srv, const char *path)
{
	size_t i;

	for (i = 0; i < srv->nfaults; i++) {
		if (fnmatch(srv->faults[i].glob, path, 0) == 0)
			return &srv->faults[i];
	}
	return NULL;
}

/* A kind's name, as on the command line and in the request log. */
const char *origin__fault_name(enum fault_kind kind)
{
	return fault_kinds[kind].name;
}

/* splitmix64: a good 64-bit mix of a counter, so that each draw is a pure
 * function of the seed and the request's number. */
static uint64_t mix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

int origin__fault_mix_parse(struct server *srv, const char *spec)
{
	const char *colon = strchr(spec, ':'), *kinds = NULL;
	size_t n = colon ? (size_t)(colon - spec) : strlen(spec);
	uint64_t v = 10;

	if (origin__parse_u64(spec, n, &srv->mix_seed) < 0)
		return -EINVAL;
	if (colon) {
		kinds = strchr(colon + 1, ':');
		n = kinds ? (size_t)(kinds - colon - 1) : strlen(colon + 1);
		if (origin__parse_u64(colon + 1, n, &v) < 0 || v == 0 ||
		    v > 100)
			return -EINVAL;
	}
	if (kinds && strcmp(kinds + 1, "verdicts") != 0)
		return -EINVAL;
	srv->mix_percent = (unsigned)v;
	srv->mix_verdicts = kinds != NULL;
	srv->mix = true;
	atomic_init(&srv->mix_draws, 0);
	atomic_init(&srv->mix_burst, 0);
	return 0;
}

/* The kinds a mix draws: every one that leaves the bytes a client takes
 * true, and that a client may retry: the transient ones first, then (with
 * ":verdicts") norange and badrange, the answers a client rightly takes as
 * a verdict on the file or the source (a 200 to a range asked with
 * If-Range says the file changed; a wrong Content-Range, a broken
 * source), so that only a proxy, whose bad answer must not be taken for
 * the origin's, should draw them. etag-change and content-change say the
 * file changed, and redirect, bigheader, encoding, total, clen and etag
 * are answers a client refuses: none is drawn. */
static const enum fault_kind mix_kinds[] = {
	FAULT_STALL,	FAULT_RESET,	 FAULT_STATUS, FAULT_BURST,
	FAULT_SHORT,	FAULT_SLOWFIRST, FAULT_RATE,   FAULT_REFUSE,
	FAULT_BADRANGE, FAULT_NORANGE, /* verdicts: last */
};
#define MIX_VERDICTS 2

struct fault *origin__fault_draw(struct server *srv, struct fault *out)
{
	uint64_t n = atomic_fetch_add(&srv->mix_draws, 1);
	uint64_t r = mix64(srv->mix_seed ^ mix64(n));
	unsigned left = atomic_load(&srv->mix_burst);
	size_t nk = sizeof(mix_kinds) / sizeof(mix_kinds[0]) -
		    (srv->mix_verdicts ? 0 : MIX_VERDICTS);

	memset(out, 0, sizeof(*out));
	out->retry_after = -1;
	atomic_init(&out->hits, 1); /* applies at once: no SKIP */
	/* A burst answers the next requests too, whatever they ask. */
	while (left > 0) {
		if (atomic_compare_exchange_weak(&srv->mix_burst, &left,
						 left - 1)) {
			out->kind = FAULT_BURST;
			out->code = 500;
			out->n = 1;
			return out;
		}
	}
	if (r % 100 >= srv->mix_percent)
		return NULL;
	r /= 100;
	out->kind = mix_kinds[r % nk];
	r /= nk;
	switch (out->kind) {
	case FAULT_STALL:
		out->n = r % (32 * 1024);
		break;
	case FAULT_RESET:
	case FAULT_SHORT:
		out->n = r % (64 * 1024);
		break;
	case FAULT_STATUS:
		/* 503 with Retry-After, as a busy origin; 500 without. */
		out->code = r % 2 ? 503 : 500;
		out->retry_after = out->code == 503 ? (long)(r / 2 % 2) : -1;
		break;
	case FAULT_BURST:
		out->code = 500;
		out->n = 1;
		/* Two or three 500s in a row: a client that counts a
		 * source down after four faults in a row is not pushed
		 * there by one burst alone. */
		atomic_fetch_add(&srv->mix_burst, (unsigned)(1 + r % 2));
		break;
	case FAULT_SLOWFIRST:
		out->n = 100 + r % 1400; /* milliseconds */
		break;
	case FAULT_RATE:
		out->n = (256 * 1024) + r % (2 * 1024 * 1024);
		break;
	default:
		break;
	}
	return out;
}

/* probe: learns what a file's URLs serve before its first read: probes
 * each, keeps the sources that agree, and reconciles them with what the
 * cache holds. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fs/driver/driver_int.h"
#include "fs/obs/obs.h"
#include "fs/engine/engine.h"

void driver__learned_free(struct driver_learned *l)
{
	for (uint32_t i = 0; l->sources != NULL && i < l->nsources; i++) {
		free(l->sources[i].url);
		free(l->sources[i].validator);
	}
	free(l->sources);
	memset(l, 0, sizeof(*l));
}

/* Probes one URL into sources[*n] when it answers; *kind says how it
 * failed otherwise. A revalidation (the cache holds a record: has the file
 * changed?) asks the origin past any cache on the way. With first > 1 the
 * probe asks the first `first` bytes, which go to *body (owned: see
 * fetch_probe_free) when body is not NULL. *no_length: the URL ignores
 * Range and sends no length (*size 0, unknown). */
static int probe_one(const struct fetch_config *fc, const char *url,
		     bool revalidation, size_t first, struct engine_source *s,
		     uint64_t *size, bool *no_length, int64_t *mtime,
		     struct fetch_probe *body, enum fetch_probe_error *kind,
		     char *err, size_t errlen)
{
	struct fetch_probe pr;
	int rc = fetch_probe(fc, url, revalidation, first, &pr, kind, err,
			     errlen);

	if (pr.proxy_note[0] != '\0')
		obs_log(FS_LOG_WARN, "%s: %s", url, pr.proxy_note);
	if (rc != 0)
		return pr.status == 404 || pr.status == 410 ? -ENOENT : rc;
	/* Redirects that stayed on the URL's origin are pinned: later
	 * requests go straight to where they led. One that crossed to
	 * another origin (a CDN's presigned URL, which expires) is asked
	 * again by every request, from the URL the user gave with its
	 * credentials, and followed without them. */
	s->url = strdup(fetch_url_same_origin(url, pr.final_url) ? pr.final_url
								 : url);
	if (body != NULL) {
		body->body = pr.body;
		body->nbody = pr.nbody;
		pr.body = NULL;
	}
	fetch_probe_free(&pr);
	if (pr.etag[0] != '\0' && !pr.etag_weak)
		s->validator = strdup(pr.etag);
	else if (pr.last_modified[0] != '\0')
		s->validator = strdup(pr.last_modified);
	*size = pr.size;
	*no_length = pr.no_length;
	*mtime = pr.mtime;
	s->stream = !pr.ranges;
	if (s->stream)
		obs_log(FS_LOG_DEBUG,
			"%s ignores Range requests: its %" PRIu64
			" bytes are read as one stream from the start",
			url, pr.size);
	return s->url != NULL ? 0 : -ENOMEM;
}

/* Uses the cache's record without asking the origin: the validator was
 * confirmed recently enough for the revalidation policy. Only the first
 * URL is used, pinned to the stored validator. */
static int learn_from_record(const struct driver_learn_args *a,
			     const struct cache_blob_record *rec,
			     struct driver_learned *out, char *err,
			     size_t errlen)
{
	out->sources[0].url = strdup(a->urls[0]);
	out->sources[0].validator =
		rec->validator[0] != '\0' ? strdup(rec->validator) : NULL;
	out->sources[0].if_match = a->object_store;
	out->nsources = 1;
	out->size = rec->size;
	out->mtime = -1;
	if (out->sources[0].url == NULL) {
		driver__learned_free(out);
		return fs__errf(err, errlen, -ENOMEM, "out of memory");
	}
	return 0;
}

/* Writes the blob's record: its size and the first URL's validator; the
 * time the origin confirmed it (kept when it did not answer); its digest,
 * and whether the held bytes matched it (kept while the blob is the
 * same). */
static int put_record(struct cache *cache, const struct cache_id *id,
		      const struct driver_learn_args *a,
		      const struct driver_learned *l, const char *validator,
		      bool confirmed, const struct cache_blob_record *old,
		      bool same)
{
	struct cache_blob_record rec;

	memset(&rec, 0, sizeof(rec));
	rec.size = l->size;
	snprintf(rec.validator, sizeof(rec.validator), "%s", validator);
	rec.last_access = (uint64_t)time(NULL);
	rec.validated_at = confirmed ? (uint64_t)time(NULL)
			   : same    ? old->validated_at
				     : 0;
	/* A source that ignores Range is never taken from the record
	 * without a probe (learn_from_record): the record does not say that
	 * its bytes come as a stream, and a range request to it would be
	 * answered with the whole object. */
	if (l->nsources > 0 && l->sources[0].stream)
		rec.validated_at = 0;
	if (a->sha256 != NULL) {
		rec.has_sha256 = true;
		memcpy(rec.sha256, a->sha256, sizeof(rec.sha256));
		rec.verified = same && old->has_sha256 && old->verified &&
			       memcmp(old->sha256, a->sha256, 32) == 0;
	} else if (same) {
		rec.has_sha256 = old->has_sha256;
		rec.verified = old->verified;
		memcpy(rec.sha256, old->sha256, sizeof(rec.sha256));
	}
	/* The record's copy is for `pacefs cache ls` only (the id is made
	 * from the whole identity): one too long to store says so. */
	if (strlen(a->identity) < sizeof(rec.identity))
		snprintf(rec.identity, sizeof(rec.identity), "%s", a->identity);
	else
		snprintf(rec.identity, sizeof(rec.identity),
			 "%.*s... (%zu bytes)", (int)sizeof(rec.identity) - 64,
			 a->identity, strlen(a->identity));
	return cache_blob_put(cache, id, &rec);
}

/* What probing a file's URLs found. */
struct probed {
	const char *ref_url; /* the first source kept; NULL: none */
	bool primary_ok;     /* the first URL is among the sources kept */
	bool unreachable;    /* a source could not be reached */
	bool missing;	     /* every source answered 404 or 410 */
	char first_err[1024];
	struct fetch_probe first; /* the first URL's first bytes (body) */
};

/* Probes each URL of a into out->sources, keeping those that answer with
 * the size the manifest or listing gives, or else the first's; a mirror
 * that disagrees is logged and left out. */
static void probe_sources(const struct fetch_config *fc,
			  const struct driver_learn_args *a, bool revalidation,
			  struct driver_learned *out, struct probed *p)
{
	const char *const *urls = a->urls;
	enum fetch_probe_error kind;
	char perr[1024];

	for (uint32_t i = 0; i < a->nurls; i++) {
		struct engine_source *s = &out->sources[out->nsources];
		uint64_t size;
		int64_t mtime;
		bool no_length = false;
		int rc;

		rc = probe_one(fc, urls[i], revalidation, i == 0 ? a->first : 0,
			       s, &size, &no_length, &mtime,
			       i == 0 ? &p->first : NULL, &kind, perr,
			       sizeof(perr));
		/* No length and no Range: a stream whose end is its size.
		 * The manifest's size stands for it; a file of one URL waits
		 * for the end (open-ended: engine_blob_set_open); beside other
		 * URLs, whose sizes must agree, it cannot serve. */
		if (rc == 0 && no_length && a->has_size) {
			size = a->size;
		} else if (rc == 0 && no_length && a->nurls == 1) {
			out->open_ended = true; /* its stream says */
		} else if (rc == 0 && no_length) {
			rc = fs__errf(perr, sizeof(perr), -EIO,
				      "%s: the server ignores Range requests "
				      "and sends no length (chunked); beside "
				      "other URLs pacefs needs the file's "
				      "size: give it in a manifest's \"size\"",
				      urls[i]);
			kind = FETCH_PROBE_UNSUITABLE;
		}
		s->if_match = a->object_store;
		p->missing &= rc == -ENOENT;
		if (rc != 0) {
			free(s->url);
			free(s->validator);
			memset(s, 0, sizeof(*s));
			if (p->first_err[0] == '\0')
				snprintf(p->first_err, sizeof(p->first_err),
					 "%s", perr);
			p->unreachable |= kind == FETCH_PROBE_UNREACHABLE;
			if (a->nurls > 1)
				obs_log(FS_LOG_WARN, "source not used: %s",
					perr);
			continue;
		}
		if (a->has_size && size != a->size) {
			snprintf(perr, sizeof(perr),
				 "%s serves %" PRIu64 " bytes, not the %" PRIu64
				 " the manifest or listing gives",
				 urls[i], size, a->size);
			obs_log(FS_LOG_WARN, "source not used: %s", perr);
			if (p->first_err[0] == '\0')
				snprintf(p->first_err, sizeof(p->first_err),
					 "%s", perr);
		} else if (p->ref_url != NULL && size != out->size) {
			obs_log(FS_LOG_WARN,
				"mirror %s not used: its size %" PRIu64
				" differs from %" PRIu64 " at %s",
				urls[i], size, out->size, p->ref_url);
		} else {
			if (p->ref_url == NULL) {
				p->ref_url = urls[i];
				out->size = size;
				out->mtime = mtime;
			}
			p->primary_ok |= i == 0;
			out->nsources++;
			continue;
		}
		free(s->url);
		free(s->validator);
		memset(s, 0, sizeof(*s));
	}
}

/* Pins the blob's validator and writes its record, first dropping the
 * cached bytes of a version the sources no longer serve. rec is the
 * cache's record, when have_rec. */
static int reconcile(struct cache *cache, const struct cache_id *id,
		     const struct driver_learn_args *a, bool have_rec,
		     const struct cache_blob_record *rec,
		     struct driver_learned *out, bool primary_ok, char *err,
		     size_t errlen)
{
	const char *validator;
	bool same, keep;
	int rc;

	/* The first URL's validator is the blob's; a mirror's differs by
	 * nature (each server makes its own ETag) and is pinned per source. */
	if (primary_ok)
		validator = out->sources[0].validator != NULL
				    ? out->sources[0].validator
				    : "";
	else
		validator = have_rec ? rec->validator : "";
	same = have_rec && rec->size == out->size &&
	       (!primary_ok || strcmp(rec->validator, validator) == 0);
	/* Under a content identity every held block matched the digests it
	 * names: another validator (another URL naming the same content, or
	 * a new version, whose blocks will fail their digests) only pins the
	 * sources anew. */
	keep = have_rec && a->content && rec->size == out->size;
	if (have_rec && !same && !keep) {
		obs_log(FS_LOG_INFO,
			"%s changed on the origin (size %" PRIu64 " -> %" PRIu64
			", validator '%s' -> '%s'): dropping its cached bytes",
			a->urls[0], rec->size, out->size, rec->validator,
			validator);
		rc = cache_blob_drop(cache, id);
		if (rc != 0)
			return fs__errf(err, errlen, rc,
					"cannot drop the stale cached bytes "
					"of %s: %s",
					a->urls[0], strerror(-rc));
	}
	rc = put_record(cache, id, a, out, validator, primary_ok, rec,
			same || keep);
	if (rc != 0)
		return fs__errf(err, errlen, rc,
				"cannot write the cache record of %s: %s",
				a->urls[0], strerror(-rc));
	return 0;
}

/* Puts the whole of a small file that its probe brought (first->body,
 * from the first URL, whose validator is the blob's) into the cache as
 * its block 0: its length, which the blob is readied with as held
 * (engine_blob_ready's queued), so that the file's first read is
 * served without a request; 0 when there is none. Not waiting for the
 * commit: a read finds the block in the writer's queue. A failure only
 * costs that request. */
static uint64_t keep_first(struct cache *cache, const struct cache_id *id,
			   const char *url, uint64_t size,
			   const struct fetch_probe *first)
{
	int rc;

	if (first->body == NULL || size == 0 || first->nbody != size ||
	    size > CACHE_BLOCK_SIZE)
		return 0;
	rc = cache_block_put(cache, id, 0, first->body, first->nbody);
	if (rc == 0)
		return size;
	obs_log(FS_LOG_WARN,
		"%s: the bytes its probe brought could not be stored (%s); "
		"its first read asks them again",
		url, strerror(-rc));
	return 0;
}

int driver__learn(const struct fetch_config *fc, struct cache *cache,
		  const struct driver_learn_args *a, struct driver_learned *out,
		  char *err, size_t errlen)
{
	struct cache_blob_record rec;
	struct cache_id id;
	struct probed p = {.missing = true};
	bool have_rec;
	int rc;

	memset(out, 0, sizeof(*out));
	out->sources = calloc(a->nurls, sizeof(*out->sources));
	if (out->sources == NULL)
		return fs__errf(err, errlen, -ENOMEM, "out of memory");
	cache_id_from_string(a->identity, &id);
	have_rec = cache_blob_get(cache, &id, &rec) == 0;
	/* A content identity's record may hold the validator of another URL
	 * naming the same content, which this one's requests must not carry:
	 * its sources are always probed. */
	if (have_rec && !a->content && a->revalidate_s >= 0 &&
	    rec.validated_at != 0 &&
	    (uint64_t)time(NULL) <
		    rec.validated_at + (uint64_t)a->revalidate_s &&
	    (!a->has_size || rec.size == a->size))
		return learn_from_record(a, &rec, out, err, errlen);
	probe_sources(fc, a, have_rec, out, &p);
	/* Of unknown length, but a stream of it ended before: the record
	 * has its size, which the same validator confirms. */
	if (out->open_ended && have_rec && rec.size > 0 &&
	    out->sources[0].validator != NULL &&
	    strcmp(rec.validator, out->sources[0].validator) == 0) {
		out->size = rec.size;
		out->open_ended = false;
	}
	if (p.ref_url == NULL) {
		fetch_probe_free(&p.first);
		if (!p.unreachable || !have_rec) {
			driver__learned_free(out);
			return fs__errf(err, errlen, p.missing ? -ENOENT : -EIO,
					"%s", p.first_err);
		}
		/* The origin is down: serve what the cache holds. */
		obs_log(FS_LOG_WARN,
			"origin unreachable (%s); serving what the cache holds",
			p.first_err);
		rc = learn_from_record(a, &rec, out, err, errlen);
		if (rc == 0)
			out->offline = true;
		return rc;
	}
	rc = reconcile(cache, &id, a, have_rec, &rec, out, p.primary_ok, err,
		       errlen);
	if (rc == 0 && p.primary_ok)
		out->queued =
			keep_first(cache, &id, a->urls[0], out->size, &p.first);
	fetch_probe_free(&p.first);
	if (rc != 0)
		driver__learned_free(out);
	return rc;
}

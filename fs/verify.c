/* verify: checks fetched bytes against the digests a manifest (or
 * -o sha256) gives: each block before it goes to the cache, and the whole
 * blob once every byte is held. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "fs/fs_int.h"

/* Bytes hashed per copy in a whole-blob check. */
#define FS_VERIFY_CHUNK (1024u * 1024u)

static void hex(const uint8_t *d, char *out)
{
	for (int i = 0; i < 32; i++)
		snprintf(out + 2 * i, 3, "%02x", d[i]);
}

/* The URL of the scheduler's source `id`, for log lines. */
static const char *source_url(const struct fs_engine *e, uint32_t id)
{
	const struct fs_blob *b;

	if (id >= e->nsource_map)
		return "(unknown source)";
	b = &e->blobs[e->source_of_pace[id]];
	for (uint32_t i = 0; i < b->nsources; i++)
		if (b->sources[i].pace_id == id)
			return b->sources[i].url;
	return "(unknown source)";
}

/* The name of proxy entry i, for log lines. */
static const char *proxy_name(const struct fs_engine *e, int i)
{
	struct fetch_proxy_info pi;

	if (fetch_proxies_info(e->proxies, (uint32_t)i, 0, &pi) != 0)
		return "(unknown proxy)";
	return pi.name;
}

void fs__verify_recheck_note(struct fs_engine *e, uint32_t b, uint64_t start,
			     uint64_t end)
{
	struct fs_recheck *r =
		&e->recheck[e->recheck_next++ % FS_RECHECK_MAX];

	r->blob = b;
	r->start = start;
	r->end = end;
}

bool fs__verify_recheck(const struct fs_engine *e, uint32_t b, uint64_t start,
			uint64_t end)
{
	for (uint32_t i = 0; i < FS_RECHECK_MAX; i++) {
		const struct fs_recheck *r = &e->recheck[i];

		if (r->end != 0 && r->blob == b && start < r->end &&
		    r->start < end)
			return true;
	}
	return false;
}

void fs__verify_blame(struct fs_engine *e, uint32_t b, const struct fs_part *p)
{
	uint64_t start = p->index * CACHE_BLOCK_SIZE;
	uint64_t end = start + CACHE_BLOCK_SIZE;

	if (end > e->blobs[b].size)
		end = e->blobs[b].size;
	/* A cache's copy may be what is wrong: the source is not blamed for
	 * what a proxy served, and the proxy, which may hold more such
	 * copies, is not asked again. */
	if (p->proxy >= 0 && !p->proxy_mixed)
		fetch_proxies_exclude(e->proxies, p->proxy);
	else if (!p->mixed)
		pace_source_exclude(e->pace, p->source);
	fs__verify_recheck_note(e, b, start, end);
}

bool fs__verify_part(struct fs_engine *e, uint32_t b, const struct fs_part *p)
{
	const struct fs_blob *blob = &e->blobs[b];
	uint64_t start = p->index * CACHE_BLOCK_SIZE;
	uint64_t end = start + CACHE_BLOCK_SIZE;

	if (blob->ndblocks == 0)
		return true;
	if (end > blob->size)
		end = blob->size;
	/* Digest blocks divide the cache block (manifests may use any power
	 * of two from 4 KiB; larger ones are covered by the whole-blob
	 * check only). */
	if (blob->dblock > CACHE_BLOCK_SIZE)
		return true;
	for (uint64_t off = start; off < end; off += blob->dblock) {
		uint64_t k = off / blob->dblock;
		uint64_t len = end - off < blob->dblock ? end - off
							 : blob->dblock;
		uint8_t got[32];
		char want_hex[65], got_hex[65];

		if (k >= blob->ndblocks)
			break;
		EVP_Digest(p->data + (off - start), len, got, NULL,
			   EVP_sha256(), NULL);
		if (memcmp(got, blob->dblocks[k], 32) == 0)
			continue;
		hex(blob->dblocks[k], want_hex);
		hex(got, got_hex);
		fs__log(FS_LOG_ERR,
			"%s: block %" PRIu64 " (bytes %" PRIu64 "-%" PRIu64
			") from %s%s%s has SHA-256 %s, not %s: %s",
			blob->name, k, off, off + len - 1,
			p->mixed ? "several sources" : source_url(e, p->source),
			p->proxy >= 0 && !p->proxy_mixed ? " through proxy "
							 : "",
			p->proxy >= 0 && !p->proxy_mixed
				? proxy_name(e, p->proxy)
				: "",
			got_hex, want_hex,
			p->proxy >= 0 && !p->proxy_mixed
				? "the proxy is excluded and the bytes "
				  "fetched again past any cache"
			: p->mixed ? "its bytes are fetched again"
				   : "the source is excluded and the bytes "
				     "fetched again");
		return false;
	}
	return true;
}

struct verify_job {
	struct fs_engine *e;
	uint32_t b;
};

/* Hashes the blob as held; 0, -EAGAIN (a block went away: try later) or
 * -ECANCELED (the engine stops). */
static int hash_blob(struct fs_engine *e, uint32_t b, uint8_t out[32])
{
	struct fs_blob *blob = &e->blobs[b];
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	char *buf = malloc(FS_VERIFY_CHUNK);
	int rc = -ENOMEM;

	if (ctx == NULL || buf == NULL ||
	    EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1)
		goto out;
	for (uint64_t off = 0; off < blob->size; off += FS_VERIFY_CHUNK) {
		size_t len = blob->size - off < FS_VERIFY_CHUNK
				     ? (size_t)(blob->size - off)
				     : FS_VERIFY_CHUNK;
		bool stopping;

		pthread_mutex_lock(&e->mu);
		stopping = e->stopping;
		pthread_mutex_unlock(&e->mu);
		if (stopping) {
			rc = -ECANCELED;
			goto out;
		}
		rc = fs__engine_copy_held(e, b, off, len, buf);
		if (rc != 0)
			goto out;
		EVP_DigestUpdate(ctx, buf, len);
	}
	EVP_DigestFinal_ex(ctx, out, NULL);
	rc = 0;
out:
	EVP_MD_CTX_free(ctx);
	free(buf);
	return rc;
}

static void *verify_main(void *arg)
{
	struct verify_job *j = arg;
	struct fs_engine *e = j->e;
	struct fs_blob *blob = &e->blobs[j->b];
	char got_hex[65], want_hex[65];
	uint8_t got[32];
	bool drop = false;
	int rc;

	free(j);
	rc = hash_blob(e, blob->pace_id, got);
	pthread_mutex_lock(&e->mu);
	if (rc != 0) {
		blob->verify = FS_VERIFY_NONE; /* tried again when complete */
	} else if (memcmp(got, blob->sha256, 32) == 0) {
		blob->verify = FS_VERIFY_OK;
		fs__log(FS_LOG_INFO, "%s: SHA-256 verified", blob->name);
	} else {
		hex(got, got_hex);
		hex(blob->sha256, want_hex);
		blob->verify_failures++;
		blob->verify = blob->verify_failures >= 2 ? FS_VERIFY_FAILED
							  : FS_VERIFY_NONE;
		fs__log(FS_LOG_ERR,
			"%s: SHA-256 of the whole blob is %s, not %s: %s",
			blob->name, got_hex, want_hex,
			blob->verify == FS_VERIFY_FAILED
				? "again; its reads fail with EIO"
				: "its bytes are dropped and fetched again");
		/* Forget every byte, in memory, in the cache and in the
		 * kernel's page cache (they were served before the check). */
		pace_blob_forget(e->pace, blob->pace_id, 0, blob->size);
		fs__verify_recheck_note(e, blob->pace_id, 0, blob->size);
		fs__inval_queue(e, blob->pace_id, 0, blob->size);
		for (uint32_t i = 0; i < e->nparts; i++)
			if (e->parts[i].state == FS_PART_DONE &&
			    e->parts[i].blob == blob->pace_id)
				e->parts[i].state = FS_PART_FREE;
		drop = true;
	}
	pthread_mutex_unlock(&e->mu);
	if (rc == 0)
		cache_blob_mark_verified(e->cache, &blob->id, blob->sha256,
					 !drop);
	if (drop) {
		rc = cache_blob_drop(e->cache, &blob->id);
		if (rc != 0)
			fs__log(FS_LOG_ERR, "%s: cannot drop its bytes: %s",
				blob->name, strerror(-rc));
	}
	pthread_mutex_lock(&e->mu);
	e->verifiers--;
	pthread_cond_broadcast(&e->cv);
	pthread_mutex_unlock(&e->mu);
	return NULL;
}

void fs__verify_start(struct fs_engine *e, uint32_t b)
{
	struct fs_blob *blob = &e->blobs[b];
	struct verify_job *j;
	pthread_attr_t attr;
	pthread_t t;

	if (!blob->has_sha256 || blob->verify != FS_VERIFY_NONE ||
	    e->stopping || pace_held_bytes(e->pace, b) != blob->size)
		return;
	j = malloc(sizeof(*j));
	if (j == NULL)
		return;
	j->e = e;
	j->b = b;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&t, &attr, verify_main, j) == 0) {
		blob->verify = FS_VERIFY_RUNNING;
		e->verifiers++;
	} else {
		free(j);
	}
	pthread_attr_destroy(&attr);
}

/* wholecheck: the whole-blob check: once every byte of a blob with a SHA-256
 * (-o sha256, or a manifest's) is held, a thread of its own hashes it
 * through the engine; a mismatch drops its bytes everywhere, and a second
 * one fails its reads. Block digests are the cache's to check. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "fs/engine/engine_int.h"

/* Bytes hashed per copy. */
#define ENGINE_VERIFY_CHUNK (1024u * 1024u)

struct verify_job {
	struct engine *e;
	uint32_t b;
};

/* Hashes the blob as held; 0, -EAGAIN (a block went away: try later) or
 * -ECANCELED (the engine stops). */
static int hash_blob(struct engine *e, uint32_t b, uint64_t size,
		     uint8_t out[32])
{
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	char *buf = malloc(ENGINE_VERIFY_CHUNK);
	int rc = -ENOMEM;

	if (ctx == NULL || buf == NULL ||
	    EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1)
		goto out;
	for (uint64_t off = 0; off < size; off += ENGINE_VERIFY_CHUNK) {
		size_t len = size - off < ENGINE_VERIFY_CHUNK
				     ? (size_t)(size - off)
				     : ENGINE_VERIFY_CHUNK;

		if (engine__stopping(e)) {
			rc = -ECANCELED;
			goto out;
		}
		rc = engine__copy_held(e, b, off, len, buf);
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

static void check_blob(struct engine *e, uint32_t b)
{
	const char *name = engine__blob_name(e, b);
	uint64_t size;
	const uint8_t *want = engine__blob_sha256(e, b, &size);
	struct cache *cache = engine__cache(e);
	const struct cache_id *id = engine__blob_id(e, b);
	char got_hex[65], want_hex[65], proxies[512];
	enum engine_verify v;
	uint32_t blamed = 0;
	uint8_t got[32];
	int rc;

	rc = hash_blob(e, b, size, got);
	if (rc == 0 && memcmp(got, want, 32) != 0)
		rc = -EBADMSG;
	if (rc == 0 || rc == -EBADMSG)
		cache_blob_mark_verified(cache, id, want, rc == 0);
	/* Bytes that came through a proxy are that proxy's answer, not the
	 * origin's: the proxies are excluded and the blob fetched again by
	 * the routes left, and only wrong bytes that came without a proxy
	 * (or from the cache) count towards EIO. */
	if (rc == -EBADMSG)
		blamed = engine__blame_routes(e, b, proxies, sizeof(proxies));
	/* In memory, in the cache and in the kernel's page cache (they were
	 * served before the check); before the check's state changes, so
	 * that no second check starts on bytes still held. */
	if (rc == -EBADMSG)
		engine__drop(e, b, 0, size, ENGINE_DROP_WRONG);
	v = engine__verify_result(e, b, blamed > 0 ? -EAGAIN : rc);
	if (rc == 0)
		engine__log(e, FS_LOG_INFO, "%s: SHA-256 verified", name);
	else if (rc == -EBADMSG && blamed > 0)
		engine__log(e, FS_LOG_ERR,
			    "%s: SHA-256 of the whole blob is %s, not %s, "
			    "with bytes through proxy %s: excluded; its bytes "
			    "are dropped and fetched again through the other "
			    "routes",
			    name, fs__hex(got, 32, got_hex),
			    fs__hex(want, 32, want_hex), proxies);
	else if (rc == -EBADMSG)
		engine__log(
			e, FS_LOG_ERR,
			"%s: SHA-256 of the whole blob is %s, not %s: %s", name,
			fs__hex(got, 32, got_hex), fs__hex(want, 32, want_hex),
			v == ENGINE_VERIFY_FAILED
				? "again; its reads fail with EIO"
				: "its bytes are dropped and fetched again");
}

static void *verify_main(void *arg)
{
	struct verify_job *j = arg;
	struct engine *e = j->e;
	uint32_t b = j->b;

	free(j);
	check_blob(e, b);
	engine__verify_exit(e);
	return NULL;
}

void engine__verify_spawn(struct engine *e, uint32_t b)
{
	struct verify_job *j = malloc(sizeof(*j));
	pthread_attr_t attr;
	pthread_t t;
	int rc = -ENOMEM;

	if (j != NULL) {
		j->e = e;
		j->b = b;
		pthread_attr_init(&attr);
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		rc = -pthread_create(&t, &attr, verify_main, j);
		pthread_attr_destroy(&attr);
	}
	if (rc != 0) {
		free(j);
		engine__verify_result(e, b, rc);
		engine__verify_exit(e);
	}
}

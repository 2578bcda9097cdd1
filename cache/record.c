/* record: blob ids and records (their encoding, reads, writes and partial
 * updates), the list of blobs, and the whole-cache figures. */
#include "cache/cache_int.h"

#include <errno.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define CACHE__RECORD_VERSION 2u
/* version(1) size(8) last_access(8) validator_len(2) validator, then in
 * version 2: validated_at(8) flags(1) [sha256(32)] identity_len(2)
 * identity */
#define CACHE__RECORD_HDR 19u
#define CACHE__RECORD_MAX                                                      \
	(CACHE__RECORD_HDR + CACHE_VALIDATOR_MAX + 8 + 1 + CACHE_SHA256_LEN +  \
	 2 + CACHE_IDENTITY_MAX)
#define CACHE__REC_VERIFIED 1u
#define CACHE__REC_SHA256 2u

/* ---- ids ---- */

void cache_id_to_hex(const struct cache_id *id, char out[2 * CACHE_ID_LEN + 1])
{
	static const char hex[] = "0123456789abcdef";

	for (int i = 0; i < CACHE_ID_LEN; i++) {
		out[2 * i] = hex[id->b[i] >> 4];
		out[2 * i + 1] = hex[id->b[i] & 15];
	}
	out[2 * CACHE_ID_LEN] = '\0';
}

void cache_id_from_string(const char *identity, struct cache_id *out)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int md_len = 0;

	/* Fails only when OpenSSL cannot allocate; a made-up id could mix two
	 * blobs' bytes, which is worse than stopping. */
	if (EVP_Digest(identity, strlen(identity), md, &md_len, EVP_sha256(),
		       NULL) != 1 ||
	    md_len < CACHE_ID_LEN) {
		fprintf(stderr, "pacefs: cache: SHA-256 failed\n");
		abort();
	}
	memcpy(out->b, md, CACHE_ID_LEN);
}

/* ---- encoding ---- */

/* Decodes a stored record (version 1 or 2). Returns 0 or MDB_CORRUPTED. */
static int cache__record_decode(const MDB_val *v, struct cache_blob_record *out)
{
	const unsigned char *p = v->mv_data;
	size_t len = v->mv_size, vlen, at;

	if (len < CACHE__RECORD_HDR || (p[0] != 1 && p[0] != 2))
		return MDB_CORRUPTED;
	vlen = (size_t)p[17] << 8 | p[18];
	if (vlen >= CACHE_VALIDATOR_MAX || CACHE__RECORD_HDR + vlen > len)
		return MDB_CORRUPTED;
	memset(out, 0, sizeof(*out));
	out->size = cache__be64_get(p + 1);
	out->last_access = cache__be64_get(p + 9);
	memcpy(out->validator, p + CACHE__RECORD_HDR, vlen);
	if (p[0] == 1)
		return 0;
	at = CACHE__RECORD_HDR + vlen;
	if (at + 8 + 1 + 2 > len)
		return MDB_CORRUPTED;
	out->validated_at = cache__be64_get(p + at);
	unsigned flags = p[at + 8];
	at += 9;
	out->verified = flags & CACHE__REC_VERIFIED;
	out->has_sha256 = flags & CACHE__REC_SHA256;
	if (out->has_sha256) {
		if (at + CACHE_SHA256_LEN + 2 > len)
			return MDB_CORRUPTED;
		memcpy(out->sha256, p + at, CACHE_SHA256_LEN);
		at += CACHE_SHA256_LEN;
	}
	size_t ilen = (size_t)p[at] << 8 | p[at + 1];
	at += 2;
	if (ilen >= CACHE_IDENTITY_MAX || at + ilen > len)
		return MDB_CORRUPTED;
	memcpy(out->identity, p + at, ilen);
	return 0;
}

/* Encodes rec as a version 2 record into buf (CACHE__RECORD_MAX bytes).
 * Returns the length, or 0 when a string is not terminated. */
static size_t cache__record_encode(const struct cache_blob_record *rec,
				   unsigned char *buf)
{
	size_t vlen = strnlen(rec->validator, CACHE_VALIDATOR_MAX);
	size_t ilen = strnlen(rec->identity, CACHE_IDENTITY_MAX);
	size_t at;

	if (vlen == CACHE_VALIDATOR_MAX || ilen == CACHE_IDENTITY_MAX)
		return 0;
	buf[0] = CACHE__RECORD_VERSION;
	cache__be64_put(buf + 1, rec->size);
	cache__be64_put(buf + 9, rec->last_access);
	buf[17] = (unsigned char)(vlen >> 8);
	buf[18] = (unsigned char)vlen;
	memcpy(buf + CACHE__RECORD_HDR, rec->validator, vlen);
	at = CACHE__RECORD_HDR + vlen;
	cache__be64_put(buf + at, rec->validated_at);
	buf[at + 8] =
		(unsigned char)((rec->verified ? CACHE__REC_VERIFIED : 0) |
				(rec->has_sha256 ? CACHE__REC_SHA256 : 0));
	at += 9;
	if (rec->has_sha256) {
		memcpy(buf + at, rec->sha256, CACHE_SHA256_LEN);
		at += CACHE_SHA256_LEN;
	}
	buf[at] = (unsigned char)(ilen >> 8);
	buf[at + 1] = (unsigned char)ilen;
	memcpy(buf + at + 2, rec->identity, ilen);
	return at + 2 + ilen;
}

/* ---- partial updates, inside the writer's or a remover's transaction ---- */

/* Rewrites the stored record of id in txn through fn (a no-op without a
 * record). fn patches the raw record in buf (len bytes, room for
 * CACHE__RECORD_MAX) and returns whether it changed it. */
static int
cache__record_patch(struct cache *c, MDB_txn *txn, const struct cache_id *id,
		    bool (*fn)(unsigned char *buf, size_t len, uint64_t arg),
		    uint64_t arg)
{
	unsigned char buf[CACHE__RECORD_MAX];
	MDB_val k = {.mv_size = CACHE_ID_LEN, .mv_data = (void *)id->b}, v;
	int rc;

	rc = mdb_get(txn, c->dbi_blobs, &k, &v);
	if (rc == MDB_NOTFOUND)
		return 0;
	if (rc)
		return rc;
	if (v.mv_size < CACHE__RECORD_HDR || v.mv_size > sizeof(buf))
		return 0; /* cache_blob_get reports a bad record */
	memcpy(buf, v.mv_data, v.mv_size);
	if (!fn(buf, v.mv_size, arg))
		return 0;
	v.mv_data = buf;
	return mdb_put(txn, c->dbi_blobs, &k, &v, 0);
}

/* Moves the record's last_access (seconds) on to arg. */
static bool cache__rec_touch(unsigned char *buf, size_t len, uint64_t arg)
{
	(void)len;
	if (cache__be64_get(buf + 9) >= arg)
		return false;
	cache__be64_put(buf + 9, arg);
	return true;
}

/* Clears the verified flag of a version 2 record. */
static bool cache__rec_unverify(unsigned char *buf, size_t len, uint64_t arg)
{
	size_t vlen = (size_t)buf[17] << 8 | buf[18];
	size_t at = CACHE__RECORD_HDR + vlen + 8;

	(void)arg;
	if (buf[0] != 2 || at >= len || !(buf[at] & CACHE__REC_VERIFIED))
		return false;
	buf[at] &= (unsigned char)~CACHE__REC_VERIFIED;
	return true;
}

int cache__record_touch(struct cache *c, MDB_txn *txn,
			const struct cache_id *id, uint64_t secs)
{
	return cache__record_patch(c, txn, id, cache__rec_touch, secs);
}

int cache__record_unverify(struct cache *c, MDB_txn *txn,
			   const struct cache_id *id)
{
	return cache__record_patch(c, txn, id, cache__rec_unverify, 0);
}

/* ---- reads and writes ---- */

int cache_blob_get(struct cache *c, const struct cache_id *id,
		   struct cache_blob_record *out)
{
	MDB_txn *txn = NULL;
	MDB_val k = {.mv_size = CACHE_ID_LEN}, v;
	int rc;

	if (!c || !id || !out)
		return -EINVAL;
	k.mv_data = (void *)id->b;
	rc = cache__rtxn_get(c, &txn);
	if (rc)
		goto out;
	rc = mdb_get(txn, c->dbi_blobs, &k, &v);
	if (rc == MDB_NOTFOUND) {
		cache__rtxn_put(c, txn);
		return -ENOENT;
	}
	if (rc)
		goto out;
	rc = cache__record_decode(&v, out);
out:
	if (txn)
		cache__rtxn_put(c, txn);
	if (rc) {
		cache__log(c, CACHE_LOG_ERR, "%s: read blob record: %s", c->dir,
			   mdb_strerror(rc));
		return cache__errno(rc);
	}
	return 0;
}

int cache_blob_put(struct cache *c, const struct cache_id *id,
		   const struct cache_blob_record *rec)
{
	unsigned char *buf;
	int rc;

	if (!c || !id || !rec)
		return -EINVAL;
	buf = malloc(CACHE__RECORD_MAX);
	if (!buf)
		return -ENOMEM;
	MDB_val v = {.mv_size = cache__record_encode(rec, buf), .mv_data = buf};
	if (v.mv_size == 0) {
		free(buf);
		return -EINVAL; /* not terminated */
	}
	rc = cache__put_alone(c, c->dbi_blobs, id, &v, "write blob record");
	free(buf);
	return rc;
}

int cache__record_set_verified(struct cache *c, const struct cache_id *id,
			       const uint8_t *sha256, bool ok)
{
	struct cache_blob_record *rec = malloc(sizeof(*rec));
	unsigned char *buf = malloc(CACHE__RECORD_MAX);
	MDB_val k = {.mv_size = CACHE_ID_LEN, .mv_data = (void *)id->b}, v;
	MDB_txn *txn = NULL;
	int rc = ENOMEM;

	if (!rec || !buf)
		goto out;
	/* Read and rewrite in one transaction: no other writer interleaves. */
	rc = mdb_txn_begin(c->env, NULL, 0, &txn);
	if (rc)
		goto out;
	rc = mdb_get(txn, c->dbi_blobs, &k, &v);
	if (rc)
		goto out;
	rc = cache__record_decode(&v, rec);
	if (rc)
		goto out;
	rec->verified = ok;
	if (ok) {
		rec->has_sha256 = true;
		memcpy(rec->sha256, sha256, CACHE_SHA256_LEN);
	}
	v.mv_size = cache__record_encode(rec, buf);
	v.mv_data = buf;
	rc = mdb_put(txn, c->dbi_blobs, &k, &v, 0);
out:
	rc = cache__txn_end(txn, rc);
	free(rec);
	free(buf);
	return rc;
}

int cache_blob_mark_verified(struct cache *c, const struct cache_id *id,
			     const uint8_t *sha256, bool ok)
{
	int rc;

	if (!c || !id || (ok && !sha256))
		return -EINVAL;
	rc = cache__record_set_verified(c, id, sha256, ok);
	if (rc == MDB_NOTFOUND)
		return -ENOENT;
	if (rc) {
		cache__log(c, CACHE_LOG_ERR, "%s: mark verified: %s", c->dir,
			   mdb_strerror(rc));
		return cache__errno(rc);
	}
	return 0;
}

/* ---- listing and figures ---- */

struct cache__ids {
	struct cache_id *v;
	size_t n, cap;
};

static int cache__ids_one(void *ctx, const MDB_val *k, const MDB_val *v)
{
	struct cache__ids *l = ctx;

	(void)v;
	if (k->mv_size != CACHE_ID_LEN)
		return 0;
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 64;
		struct cache_id *p = realloc(l->v, cap * sizeof(*p));

		if (!p)
			return ENOMEM;
		l->v = p;
		l->cap = cap;
	}
	memcpy(l->v[l->n++].b, k->mv_data, CACHE_ID_LEN);
	return 0;
}

int cache__ids_of(struct cache *c, MDB_dbi dbi, const char *what,
		  struct cache_id **ids, size_t *n)
{
	struct cache__ids l = {0};
	MDB_txn *txn = NULL;
	int rc, stopped = 0;

	if (!c || !ids || !n)
		return -EINVAL;
	rc = cache__rtxn_get(c, &txn);
	if (rc == 0) {
		rc = cache__db_walk(txn, dbi, NULL, cache__ids_one, &l,
				    &stopped);
		cache__rtxn_put(c, txn);
	}
	if (rc == 0)
		rc = stopped;
	if (rc) {
		free(l.v);
		cache__log(c, CACHE_LOG_ERR, "%s: list %s: %s", c->dir, what,
			   mdb_strerror(rc));
		return cache__errno(rc);
	}
	*ids = l.v;
	*n = l.n;
	return 0;
}

int cache_blob_ids(struct cache *c, struct cache_id **ids, size_t *n)
{
	return cache__ids_of(c, c ? c->dbi_blobs : 0, "blobs", ids, n);
}

/* Adds the length of every well-formed extent (a malformed one, which the
 * blob's checks name, counts 0). */
static int cache__bytes_one(void *ctx, const MDB_val *k, const MDB_val *v)
{
	if (k->mv_size == CACHE__EXTENT_KEY_LEN && v->mv_size == 8)
		*(uint64_t *)ctx +=
			cache__be64_get(v->mv_data) - cache__key_n(k);
	return 0;
}

/* The figures that come from the databases, in txn. MDB code. */
static int cache__stats_db(struct cache *c, MDB_txn *txn,
			   struct cache_stats *out)
{
	MDB_stat st;
	int rc, stopped;

	rc = mdb_stat(txn, c->dbi_blobs, &st);
	if (rc)
		return rc;
	out->blobs = st.ms_entries;
	rc = mdb_stat(txn, c->dbi_blocks, &st);
	if (rc)
		return rc;
	out->blocks = st.ms_entries;
	/* Held bytes from the extents of every blob: few per blob, so cheap
	 * to sum. */
	rc = cache__db_walk(txn, c->dbi_extents, NULL, cache__bytes_one,
			    &out->bytes, &stopped);
	if (rc)
		return rc;
	if (!out->budget) {
		MDB_val bk = {.mv_size = 6, .mv_data = "budget"}, bv;

		if (mdb_get(txn, c->dbi_meta, &bk, &bv) == 0 && bv.mv_size == 8)
			out->budget = cache__be64_get(bv.mv_data);
	}
	return 0;
}

int cache_stats_get(struct cache *c, struct cache_stats *out)
{
	MDB_txn *txn = NULL;
	MDB_envinfo info;
	struct stat fst;
	char *path = NULL;
	int rc;

	if (!c || !out)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	out->format = CACHE__FORMAT;
	out->block_size = CACHE_BLOCK_SIZE;
	out->budget = c->budget;
	out->evicted = cache__writer_evicted(c);
	rc = cache__rtxn_get(c, &txn);
	if (rc)
		goto out;
	rc = cache__stats_db(c, txn, out);
	cache__rtxn_put(c, txn);
	if (rc)
		goto out;
	rc = mdb_env_info(c->env, &info);
	if (rc)
		goto out;
	out->map_size = info.me_mapsize;
	size_t plen = strlen(c->dir) + sizeof("/data.mdb");
	path = malloc(plen);
	if (!path) {
		rc = ENOMEM;
		goto out;
	}
	snprintf(path, plen, "%s/data.mdb", c->dir);
	if (stat(path, &fst) == 0)
		out->file_size = (uint64_t)fst.st_blocks * 512u;
out:
	free(path);
	if (rc) {
		cache__log(c, CACHE_LOG_ERR, "%s: stats: %s", c->dir,
			   mdb_strerror(rc));
		return cache__errno(rc);
	}
	return 0;
}

/* regions: the byte ranges a blob's first reader needed at open (headers,
 * indexes, footers), remembered beside the blob and outliving its blocks,
 * so that a later open whose bytes are gone asks for them all at once. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cache/cache_int.h"

/* The value: version (1), validator length (2) and validator, count (2),
 * then per region start (8) and end (8), all big-endian. */
#define REGIONS_VERSION 1u
#define REGIONS_VALUE_MAX                                                      \
	(1 + 2 + CACHE_VALIDATOR_MAX + 2 + 16 * CACHE_REGIONS_MAX)

static size_t encode(const char *validator, const struct cache_region *r,
		     size_t n, unsigned char *p)
{
	size_t vlen = strlen(validator), o = 0;

	p[o++] = REGIONS_VERSION;
	p[o++] = (unsigned char)(vlen >> 8);
	p[o++] = (unsigned char)vlen;
	memcpy(p + o, validator, vlen);
	o += vlen;
	p[o++] = (unsigned char)(n >> 8);
	p[o++] = (unsigned char)n;
	for (size_t i = 0; i < n; i++) {
		cache__be64_put(p + o, r[i].start);
		cache__be64_put(p + o + 8, r[i].end);
		o += 16;
	}
	return o;
}

/* Decodes v; false when it is not a value encode() could have made. */
static bool decode(const MDB_val *v, struct cache_regions *out)
{
	const unsigned char *p = v->mv_data;
	size_t len = v->mv_size, vlen, n, o = 3;

	if (len < 5 || p[0] != REGIONS_VERSION)
		return false;
	vlen = (size_t)p[1] << 8 | p[2];
	if (vlen >= CACHE_VALIDATOR_MAX || len < o + vlen + 2)
		return false;
	memcpy(out->validator, p + o, vlen);
	out->validator[vlen] = '\0';
	o += vlen;
	n = (size_t)p[o] << 8 | p[o + 1];
	o += 2;
	if (n > CACHE_REGIONS_MAX || len != o + 16 * n)
		return false;
	for (size_t i = 0; i < n; i++, o += 16) {
		out->r[i].start = cache__be64_get(p + o);
		out->r[i].end = cache__be64_get(p + o + 8);
		if (out->r[i].start >= out->r[i].end)
			return false;
	}
	out->n = n;
	return true;
}

int cache_regions_put(struct cache *c, const struct cache_id *id,
		      const struct cache_regions *rg)
{
	unsigned char *buf;
	int rc;

	if (!c || !id || !rg || rg->n == 0 || rg->n > CACHE_REGIONS_MAX ||
	    memchr(rg->validator, '\0', CACHE_VALIDATOR_MAX) == NULL)
		return -EINVAL;
	for (size_t i = 0; i < rg->n; i++)
		if (rg->r[i].start >= rg->r[i].end)
			return -EINVAL;
	buf = malloc(REGIONS_VALUE_MAX);
	if (!buf)
		return -ENOMEM;
	MDB_val v = {.mv_size = encode(rg->validator, rg->r, rg->n, buf),
		     .mv_data = buf};
	rc = cache__put_alone(c, c->dbi_regions, id, &v, "remember regions");
	free(buf);
	return rc;
}

int cache_regions_get(struct cache *c, const struct cache_id *id,
		      struct cache_regions *out)
{
	MDB_val k = {.mv_size = CACHE_ID_LEN}, v;
	MDB_txn *txn = NULL;
	char hex[2 * CACHE_ID_LEN + 1];
	int rc;

	if (!c || !id || !out)
		return -EINVAL;
	k.mv_data = (void *)id->b;
	rc = cache__rtxn_get(c, &txn);
	if (rc) {
		cache__log(c, CACHE_LOG_ERR, "%s: read regions: %s", c->dir,
			   mdb_strerror(rc));
		return cache__errno(rc);
	}
	rc = mdb_get(txn, c->dbi_regions, &k, &v);
	if (rc == 0 && !decode(&v, out))
		rc = MDB_CORRUPTED;
	cache__rtxn_put(c, txn);
	if (rc == MDB_NOTFOUND)
		return -ENOENT;
	if (rc == MDB_CORRUPTED) {
		/* Only a hint: a damaged one is forgotten, never fatal. */
		cache_id_to_hex(id, hex);
		cache__log(c, CACHE_LOG_WARN,
			   "%s: regions of blob %s are damaged: dropped",
			   c->dir, hex);
		cache_regions_drop(c, id);
		return -ENOENT;
	}
	if (rc) {
		cache__log(c, CACHE_LOG_ERR, "%s: read regions: %s", c->dir,
			   mdb_strerror(rc));
		return cache__errno(rc);
	}
	return 0;
}

int cache_regions_drop(struct cache *c, const struct cache_id *id)
{
	MDB_val k = {.mv_size = CACHE_ID_LEN};
	MDB_txn *txn = NULL;
	const char *step = "begin";
	int rc;

	if (!c || !id)
		return -EINVAL;
	k.mv_data = (void *)id->b;
	rc = mdb_txn_begin(c->env, NULL, 0, &txn);
	if (rc == 0) {
		step = "delete";
		rc = mdb_del(txn, c->dbi_regions, &k, NULL);
		if (rc == MDB_NOTFOUND) {
			mdb_txn_abort(txn);
			return -ENOENT;
		}
	}
	return cache__txn_finish(c, txn, rc, "drop regions", step);
}

int cache_regions_ids(struct cache *c, struct cache_id **ids, size_t *n)
{
	return cache__ids_of(c, c ? c->dbi_regions : 0, "regions", ids, n);
}

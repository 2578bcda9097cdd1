/* blocksum: the checksum stored after every block in LMDB, which a read
 * from the cache checks before a byte is served. */
#include "cache/cache_int.h"

#include <xxhash.h>

/* The key's bytes seed the hash: a value that LMDB hands back under
 * another key (a damaged branch page, a flipped index) fails. */
static XXH64_hash_t cache__sum(const struct cache_id *id, uint64_t index,
			       const void *data, size_t len)
{
	unsigned char key[CACHE_ID_LEN + 8];

	for (int i = 0; i < CACHE_ID_LEN; i++)
		key[i] = id->b[i];
	for (int i = 7; i >= 0; i--) {
		key[CACHE_ID_LEN + i] = (unsigned char)(index & 0xff);
		index >>= 8;
	}
	return XXH3_64bits_withSeed(data, len, XXH3_64bits(key, sizeof(key)));
}

void cache__sum_put(const struct cache_id *id, uint64_t index,
		    const void *data, size_t len,
		    unsigned char out[CACHE__SUM_LEN])
{
	XXH64_hash_t h = cache__sum(id, index, data, len);

	for (int i = CACHE__SUM_LEN - 1; i >= 0; i--) {
		out[i] = (unsigned char)(h & 0xff);
		h >>= 8;
	}
}

bool cache__sum_ok(const struct cache_id *id, uint64_t index, const void *data,
		   size_t len, const unsigned char trailer[CACHE__SUM_LEN])
{
	unsigned char want[CACHE__SUM_LEN];

	cache__sum_put(id, index, data, len, want);
	for (unsigned i = 0; i < CACHE__SUM_LEN; i++)
		if (want[i] != trailer[i])
			return false;
	return true;
}

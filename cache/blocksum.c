/* blocksum: the checksums stored after every block in LMDB, one per 4 KiB
 * chunk, which a read from the cache checks before a byte is served. */
#include "cache/cache_int.h"

#include <xxhash.h>
#if defined(__x86_64__) || defined(__i386__)
/* libxxhash's AVX2 variant where the CPU has it: faster than its SSE2
 * baseline (docs/cache-notes.md). */
#include <xxh_x86dispatch.h>
#endif

size_t cache__sum_chunks(size_t len)
{
	return (len + CACHE__SUM_CHUNK - 1) / CACHE__SUM_CHUNK;
}

size_t cache__sum_value_len(size_t len)
{
	return len + CACHE__SUM_LEN * cache__sum_chunks(len);
}

bool cache__sum_block_len(size_t vlen, size_t *len)
{
	/* n chunks give a value of (n-1) * 4104 + 9 to n * 4104 bytes. */
	size_t n = (vlen + CACHE__SUM_CHUNK + CACHE__SUM_LEN - 1) /
		   (CACHE__SUM_CHUNK + CACHE__SUM_LEN);

	if (vlen <= CACHE__SUM_LEN * n)
		return false;
	*len = vlen - CACHE__SUM_LEN * n;
	return *len <= CACHE_BLOCK_SIZE && cache__sum_chunks(*len) == n;
}

uint64_t cache__sum_seed(const struct cache_id *id, uint64_t index)
{
	unsigned char key[CACHE_ID_LEN + 8];

	for (int i = 0; i < CACHE_ID_LEN; i++)
		key[i] = id->b[i];
	for (int i = 7; i >= 0; i--) {
		key[CACHE_ID_LEN + i] = (unsigned char)(index & 0xff);
		index >>= 8;
	}
	return XXH3_64bits(key, sizeof(key));
}

/* The checksum of chunk `chunk` (n bytes at p) of the block seeded by
 * seed: a chunk moved to another block or place in it fails. */
static uint64_t cache__sum_one(uint64_t seed, size_t chunk, const void *p,
			       size_t n)
{
	return XXH3_64bits_withSeed(p, n, seed + chunk);
}

void cache__sum_put(uint64_t seed, const void *data, size_t len,
		    unsigned char *out)
{
	const unsigned char *p = data;

	for (size_t c = 0, off = 0; off < len; c++, off += CACHE__SUM_CHUNK) {
		size_t n = len - off < CACHE__SUM_CHUNK ? len - off
							: CACHE__SUM_CHUNK;
		uint64_t h = cache__sum_one(seed, c, p + off, n);

		for (int i = CACHE__SUM_LEN - 1; i >= 0; i--) {
			out[c * CACHE__SUM_LEN + (size_t)i] =
				(unsigned char)(h & 0xff);
			h >>= 8;
		}
	}
}

bool cache__sum_ok(uint64_t seed, size_t first, const void *data, size_t len,
		   const unsigned char *sums)
{
	const unsigned char *p = data;

	for (size_t c = 0, off = 0; off < len; c++, off += CACHE__SUM_CHUNK) {
		size_t n = len - off < CACHE__SUM_CHUNK ? len - off
							: CACHE__SUM_CHUNK;
		uint64_t h = cache__sum_one(seed, first + c, p + off, n);
		uint64_t want = 0;

		for (unsigned i = 0; i < CACHE__SUM_LEN; i++)
			want = want << 8 | sums[c * CACHE__SUM_LEN + i];
		if (h != want)
			return false;
	}
	return true;
}

/* buf: block buffers shared by reference, so that a block's bytes are
 * written once, where they arrive, and queued and committed from there. */
#include "cache/cache_int.h"

#include <stdatomic.h>
#include <stdlib.h>

struct cache_buf {
	atomic_int refs;
	/* Aligned for the copies and hashes that read it whole. */
	_Alignas(64) unsigned char data[];
};

struct cache_buf *cache_buf_new(void)
{
	struct cache_buf *b = malloc(sizeof(*b) + CACHE_BLOCK_SIZE);

	if (b)
		atomic_init(&b->refs, 1);
	return b;
}

unsigned char *cache_buf_data(struct cache_buf *b)
{
	return b->data;
}

struct cache_buf *cache_buf_ref(struct cache_buf *b)
{
	atomic_fetch_add_explicit(&b->refs, 1, memory_order_relaxed);
	return b;
}

void cache_buf_unref(struct cache_buf *b)
{
	/* Release, so that the last owner's free sees every use of the
	 * bytes; acquire on the way to free. */
	if (b &&
	    atomic_fetch_sub_explicit(&b->refs, 1, memory_order_acq_rel) == 1)
		free(b);
}

bool cache_buf_shared(const struct cache_buf *b)
{
	return atomic_load_explicit(&b->refs, memory_order_acquire) > 1;
}

/* openend: blobs of unknown length, whose only sources send no length (a
 * chunked stream that ignores Range): their size is a ceiling until the
 * stream ends, and where it ends is their size. */
#include <inttypes.h>
#include <string.h>

#include "fs/engine/engine_int.h"

void engine_blob_set_open(struct engine *e, uint32_t i)
{
	pthread_mutex_lock(&e->mu);
	e->blobs[i].open_ended = true;
	pthread_mutex_unlock(&e->mu);
}

bool engine_blob_size(struct engine *e, uint32_t i, uint64_t *size)
{
	bool open;

	pthread_mutex_lock(&e->mu);
	open = e->blobs[i].open_ended;
	*size = open ? 0 : e->blobs[i].size;
	pthread_mutex_unlock(&e->mu);
	return open;
}

void engine__open_ended(struct engine *e, uint32_t b, uint64_t length,
			struct engine_block **last)
{
	struct engine_blob *blob = &e->blobs[b];
	struct engine_block *p;
	uint64_t index = length / CACHE_BLOCK_SIZE;
	int rc;

	*last = NULL;
	if (!blob->open_ended || length > blob->size)
		return;
	rc = pace_blob_set_size(e->pace, b, length);
	if (rc != 0) {
		engine__log(e, FS_LOG_ERR,
			    "%s: its stream ended at %" PRIu64
			    " bytes, which the scheduler refused (%s)",
			    blob->name, length, strerror(-rc));
		return;
	}
	blob->size = length;
	blob->open_ended = false;
	engine__log(e, FS_LOG_INFO,
		    "%s: its stream ended: %" PRIu64 " bytes, its size now",
		    blob->name, length);
	/* The short last block is whole now that the blob ends in it. */
	p = length % CACHE_BLOCK_SIZE != 0
		    ? engine__block_find(&e->blocks, b, index)
		    : NULL;
	if (p != NULL && p->state == ENGINE_BLOCK_FILLING &&
	    p->filled == length - index * CACHE_BLOCK_SIZE &&
	    engine__block_set(&e->blocks, p, ENGINE_BLOCK_HANDING))
		*last = p;
	/* The kernel's attributes (size 0) and pages go: stat says the
	 * size from now on. */
	engine__pages_inval(e, b, blob->name, blob->ino, 0, length);
	engine__wake_blob(e, b);
}

void engine__open_stored(struct engine *e, uint32_t b,
			 struct engine_block *last)
{
	struct engine_blob *blob = &e->blobs[b];
	struct cache_blob_record rec;
	uint64_t size;

	if (last != NULL)
		engine__block_stored(
			e, last,
			cache_block_put_buf(
				e->cache, &blob->id, last->index, last->buf,
				blob->size - last->index * CACHE_BLOCK_SIZE));
	pthread_mutex_lock(&e->mu);
	size = blob->open_ended ? 0 : blob->size;
	pthread_mutex_unlock(&e->mu);
	/* The record's size is what the next mount takes for the blob's,
	 * its validator confirming it (driver__learn). */
	if (size != 0 && cache_blob_get(e->cache, &blob->id, &rec) == 0 &&
	    rec.size != size) {
		rec.size = size;
		cache_blob_put(e->cache, &blob->id, &rec);
	}
}

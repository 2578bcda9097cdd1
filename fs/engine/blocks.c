/* blocks: the engine's blocks in memory: found by (blob, index) in O(1)
 * through a hash, made from a free list or by reusing the least recently
 * used whole block, filled and counted until whole. Every function runs
 * under the engine's lock. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "fs/engine/engine_int.h"

static uint32_t bucket_of(const struct engine_blocks *bs, uint32_t blob,
			  uint64_t index)
{
	uint64_t h = (index ^ ((uint64_t)blob << 40)) * 0x9e3779b97f4a7c15ull;

	return (uint32_t)(h >> 32) & (bs->nbuckets - 1);
}

int engine__blocks_init(struct engine_blocks *bs, struct engine *e, uint32_t n)
{
	bs->e = e;
	bs->v = calloc(n, sizeof(*bs->v));
	bs->n = n;
	bs->nbuckets = 1;
	while (bs->nbuckets < 2 * n)
		bs->nbuckets *= 2;
	bs->buckets = malloc(bs->nbuckets * sizeof(*bs->buckets));
	if (bs->v == NULL || bs->buckets == NULL)
		return -ENOMEM;
	for (uint32_t i = 0; i < bs->nbuckets; i++)
		bs->buckets[i] = ENGINE_NO_BLOCK;
	/* Every slot starts on the free list, in order. */
	for (uint32_t i = 0; i < n; i++) {
		bs->v[i].next = i + 1 < n ? i + 1 : ENGINE_NO_BLOCK;
		bs->v[i].prev = ENGINE_NO_BLOCK;
		bs->v[i].hnext = ENGINE_NO_BLOCK;
	}
	bs->free_head = n > 0 ? 0 : ENGINE_NO_BLOCK;
	bs->lru_head = bs->lru_tail = ENGINE_NO_BLOCK;
	return 0;
}

void engine__blocks_fini(struct engine_blocks *bs)
{
	for (uint32_t i = 0; bs->v != NULL && i < bs->n; i++)
		cache_buf_unref(bs->v[i].buf);
	free(bs->v);
	free(bs->buckets);
}

static const char *const block_state_names[] = {
	[ENGINE_BLOCK_FREE] = "free",
	[ENGINE_BLOCK_FILLING] = "filling",
	[ENGINE_BLOCK_HANDING] = "handing",
	[ENGINE_BLOCK_DONE] = "done",
};

/* The diagram of engine_int.h, the changes it draws. */
static const bool block_drawn[][4] = {
	[ENGINE_BLOCK_FREE] = {[ENGINE_BLOCK_FILLING] = true},
	[ENGINE_BLOCK_FILLING] = {[ENGINE_BLOCK_HANDING] = true},
	[ENGINE_BLOCK_HANDING] =
		{[ENGINE_BLOCK_DONE] = true, [ENGINE_BLOCK_FREE] = true},
	[ENGINE_BLOCK_DONE] =
		{[ENGINE_BLOCK_FILLING] = true, [ENGINE_BLOCK_FREE] = true},
};

bool engine__block_set(struct engine_blocks *bs, struct engine_block *p,
		       enum engine_block_state to)
{
	const struct engine *e = bs->e;
	const char *name = e->blobs != NULL && p->blob < e->max_blobs &&
					   e->blobs[p->blob].name != NULL
				   ? e->blobs[p->blob].name
				   : "?";

	if (!block_drawn[p->state][to]) {
		engine__bug(e, "%s: block %" PRIu64 ": %s -> %s not drawn",
			    name, p->index, block_state_names[p->state],
			    block_state_names[to]);
		return false;
	}
	engine__log(e, FS_LOG_DEBUG, "%s: block %" PRIu64 ": %s -> %s", name,
		    p->index, block_state_names[p->state],
		    block_state_names[to]);
	p->state = to;
	return true;
}

static uint32_t slot_of(const struct engine_blocks *bs,
			const struct engine_block *p)
{
	return (uint32_t)(p - bs->v);
}

struct engine_block *engine__block_find(struct engine_blocks *bs, uint32_t blob,
					uint64_t index)
{
	for (uint32_t i = bs->buckets[bucket_of(bs, blob, index)];
	     i != ENGINE_NO_BLOCK; i = bs->v[i].hnext) {
		struct engine_block *p = &bs->v[i];

		if (p->blob == blob && p->index == index)
			return p;
	}
	return NULL;
}

static void hash_remove(struct engine_blocks *bs, struct engine_block *p)
{
	uint32_t *at = &bs->buckets[bucket_of(bs, p->blob, p->index)];
	uint32_t slot = slot_of(bs, p);

	while (*at != slot)
		at = &bs->v[*at].hnext;
	*at = p->hnext;
	p->hnext = ENGINE_NO_BLOCK;
}

static void lru_remove(struct engine_blocks *bs, struct engine_block *p)
{
	if (p->prev != ENGINE_NO_BLOCK)
		bs->v[p->prev].next = p->next;
	else
		bs->lru_head = p->next;
	if (p->next != ENGINE_NO_BLOCK)
		bs->v[p->next].prev = p->prev;
	else
		bs->lru_tail = p->prev;
	p->prev = p->next = ENGINE_NO_BLOCK;
}

static void lru_append(struct engine_blocks *bs, struct engine_block *p)
{
	uint32_t slot = slot_of(bs, p);

	p->prev = bs->lru_tail;
	p->next = ENGINE_NO_BLOCK;
	if (bs->lru_tail != ENGINE_NO_BLOCK)
		bs->v[bs->lru_tail].next = slot;
	else
		bs->lru_head = slot;
	bs->lru_tail = slot;
}

void engine__block_free(struct engine_blocks *bs, struct engine_block *p)
{
	bool whole_kept = p->state == ENGINE_BLOCK_DONE;

	if (p->state == ENGINE_BLOCK_FREE ||
	    !engine__block_set(bs, p, ENGINE_BLOCK_FREE))
		return;
	if (whole_kept)
		lru_remove(bs, p);
	hash_remove(bs, p);
	p->next = bs->free_head;
	bs->free_head = slot_of(bs, p);
}

/* Gives p a buffer that nobody else holds, for bytes about to arrive: the
 * one it has unless the cache's queue or a reply still holds it. false:
 * out of memory (p unchanged). */
static bool own_buffer(struct engine_block *p)
{
	struct cache_buf *nb;

	if (p->buf != NULL && !cache_buf_shared(p->buf))
		return true;
	nb = cache_buf_new();
	if (nb == NULL)
		return false;
	cache_buf_unref(p->buf);
	p->buf = nb;
	p->data = cache_buf_data(nb);
	return true;
}

/* Block p, now FILLING, begins again from no bytes. */
static void start_filling(struct engine_block *p)
{
	p->lost = false;
	p->filled = 0;
	p->source = PACE_NONE;
	p->mixed = false;
	p->proxy = -1;
	p->proxy_mixed = false;
}

struct engine_block *engine__block_get(struct engine *e, uint32_t blob,
				       uint64_t index)
{
	struct engine_blocks *bs = &e->blocks;
	struct engine_block *p = engine__block_find(bs, blob, index);
	uint32_t slot;

	if (p != NULL) {
		if (p->state == ENGINE_BLOCK_DONE) {
			if (!own_buffer(p) ||
			    !engine__block_set(bs, p, ENGINE_BLOCK_FILLING))
				return NULL;
			lru_remove(bs, p); /* fetched again */
			start_filling(p);
		}
		return p;
	}
	if (bs->free_head != ENGINE_NO_BLOCK) {
		slot = bs->free_head;
		p = &bs->v[slot];
		if (!own_buffer(p) ||
		    !engine__block_set(bs, p, ENGINE_BLOCK_FILLING))
			return NULL;
		bs->free_head = p->next;
	} else if (bs->lru_head != ENGINE_NO_BLOCK) {
		slot = bs->lru_head;
		p = &bs->v[slot];
		if (!own_buffer(p))
			return NULL;
		/* Memory held the only copy of a block the cache lost. */
		if (p->lost)
			engine__drop_locked(
				e, p->blob, p->index * CACHE_BLOCK_SIZE,
				engine__block_end(&e->blobs[p->blob], p->index),
				ENGINE_DROP_GONE);
		if (!engine__block_set(bs, p, ENGINE_BLOCK_FILLING))
			return NULL;
		lru_remove(bs, p);
		hash_remove(bs, p);
	} else {
		return NULL;
	}
	start_filling(p);
	p->blob = blob;
	p->index = index;
	p->prev = p->next = ENGINE_NO_BLOCK;
	p->hnext = bs->buckets[bucket_of(bs, blob, index)];
	bs->buckets[bucket_of(bs, blob, index)] = slot;
	return p;
}

void engine__block_write(struct engine_block *p, uint64_t off,
			 const uint8_t *src, size_t len, uint32_t source,
			 int proxy)
{
	memcpy(p->data + (off - p->index * CACHE_BLOCK_SIZE), src, len);
	p->mixed |= p->source != source && p->source != PACE_NONE;
	p->proxy_mixed |= p->proxy != proxy && p->source != PACE_NONE;
	p->source = source;
	p->proxy = proxy;
}

bool engine__block_credit(const struct engine_blob *b, struct engine_block *p,
			  uint64_t n)
{
	if (p->state != ENGINE_BLOCK_FILLING)
		return false;
	p->filled += (uint32_t)n;
	return p->filled ==
	       engine__block_end(b, p->index) - p->index * CACHE_BLOCK_SIZE;
}

void engine__blocks_widen(struct engine_blocks *bs,
			  const struct engine_blob *blob, uint32_t b,
			  uint64_t *start, uint64_t *end)
{
	const struct engine_block *p;

	p = engine__block_find(bs, b, *start / CACHE_BLOCK_SIZE);
	if (p != NULL && p->state == ENGINE_BLOCK_FILLING)
		*start = p->index * CACHE_BLOCK_SIZE;
	if (*end == 0 || *end >= blob->size)
		return;
	p = engine__block_find(bs, b, (*end - 1) / CACHE_BLOCK_SIZE);
	if (p != NULL && p->state == ENGINE_BLOCK_FILLING)
		*end = engine__block_end(blob, p->index);
}

void engine__blocks_forget(struct engine_blocks *bs,
			   const struct engine_blob *blob, uint32_t b,
			   uint64_t start, uint64_t end, enum engine_drop why)
{
	for (uint32_t i = 0; i < bs->n; i++) {
		struct engine_block *p = &bs->v[i];

		if (p->state == ENGINE_BLOCK_FREE || p->blob != b ||
		    p->index * CACHE_BLOCK_SIZE >= end ||
		    engine__block_end(blob, p->index) <= start)
			continue;
		if (p->state == ENGINE_BLOCK_FILLING)
			p->filled = 0;
		else if (p->state == ENGINE_BLOCK_DONE &&
			 why != ENGINE_DROP_GONE)
			engine__block_free(bs, p);
	}
}

void engine__block_done(struct engine_blocks *bs, struct engine_block *p,
			bool lost)
{
	if (!engine__block_set(bs, p, ENGINE_BLOCK_DONE))
		return;
	p->lost |= lost;
	lru_append(bs, p);
}

void engine__block_touch(struct engine_blocks *bs, struct engine_block *p)
{
	if (p->state != ENGINE_BLOCK_DONE || slot_of(bs, p) == bs->lru_tail)
		return;
	lru_remove(bs, p);
	lru_append(bs, p);
}

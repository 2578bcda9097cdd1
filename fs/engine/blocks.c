/* parts: the engine's blocks in memory: found by (blob, index) in O(1)
 * through a hash, made from a free list or by reusing the least recently
 * used whole block. Every function runs under the engine's lock. */
#include <errno.h>
#include <stdlib.h>

#include "fs/engine/engine_int.h"

static uint32_t bucket_of(const struct fs_parts *ps, uint32_t blob,
			  uint64_t index)
{
	uint64_t h = (index ^ ((uint64_t)blob << 40)) * 0x9e3779b97f4a7c15ull;

	return (uint32_t)(h >> 32) & (ps->nbuckets - 1);
}

int fs__parts_init(struct fs_parts *ps, uint32_t n)
{
	ps->v = calloc(n, sizeof(*ps->v));
	ps->n = n;
	ps->nbuckets = 1;
	while (ps->nbuckets < 2 * n)
		ps->nbuckets *= 2;
	ps->buckets = malloc(ps->nbuckets * sizeof(*ps->buckets));
	if (ps->v == NULL || ps->buckets == NULL)
		return -ENOMEM;
	for (uint32_t i = 0; i < ps->nbuckets; i++)
		ps->buckets[i] = FS_NO_PART;
	/* Every slot starts on the free list, in order. */
	for (uint32_t i = 0; i < n; i++) {
		ps->v[i].next = i + 1 < n ? i + 1 : FS_NO_PART;
		ps->v[i].prev = FS_NO_PART;
		ps->v[i].hnext = FS_NO_PART;
	}
	ps->free_head = n > 0 ? 0 : FS_NO_PART;
	ps->lru_head = ps->lru_tail = FS_NO_PART;
	return 0;
}

void fs__parts_fini(struct fs_parts *ps)
{
	for (uint32_t i = 0; ps->v != NULL && i < ps->n; i++)
		cache_buf_unref(ps->v[i].buf);
	free(ps->v);
	free(ps->buckets);
}

static uint32_t slot_of(const struct fs_parts *ps, const struct fs_part *p)
{
	return (uint32_t)(p - ps->v);
}

struct fs_part *fs__part_find(struct fs_parts *ps, uint32_t blob,
			      uint64_t index)
{
	for (uint32_t i = ps->buckets[bucket_of(ps, blob, index)];
	     i != FS_NO_PART; i = ps->v[i].hnext) {
		struct fs_part *p = &ps->v[i];

		if (p->blob == blob && p->index == index)
			return p;
	}
	return NULL;
}

static void hash_remove(struct fs_parts *ps, struct fs_part *p)
{
	uint32_t *at = &ps->buckets[bucket_of(ps, p->blob, p->index)];
	uint32_t slot = slot_of(ps, p);

	while (*at != slot)
		at = &ps->v[*at].hnext;
	*at = p->hnext;
	p->hnext = FS_NO_PART;
}

static void lru_remove(struct fs_parts *ps, struct fs_part *p)
{
	if (p->prev != FS_NO_PART)
		ps->v[p->prev].next = p->next;
	else
		ps->lru_head = p->next;
	if (p->next != FS_NO_PART)
		ps->v[p->next].prev = p->prev;
	else
		ps->lru_tail = p->prev;
	p->prev = p->next = FS_NO_PART;
}

static void lru_append(struct fs_parts *ps, struct fs_part *p)
{
	uint32_t slot = slot_of(ps, p);

	p->prev = ps->lru_tail;
	p->next = FS_NO_PART;
	if (ps->lru_tail != FS_NO_PART)
		ps->v[ps->lru_tail].next = slot;
	else
		ps->lru_head = slot;
	ps->lru_tail = slot;
}

/* Takes p out of the hash and its list: it is about to be refilled or
 * freed. */
static void unlink_part(struct fs_parts *ps, struct fs_part *p)
{
	if (p->state == FS_PART_DONE)
		lru_remove(ps, p);
	hash_remove(ps, p);
}

void fs__part_free(struct fs_parts *ps, struct fs_part *p)
{
	if (p->state == FS_PART_FREE)
		return;
	unlink_part(ps, p);
	p->state = FS_PART_FREE;
	p->next = ps->free_head;
	ps->free_head = slot_of(ps, p);
}

/* Gives p a buffer that nobody else holds, for bytes about to arrive: the
 * one it has unless the cache's queue or a reply still holds it. false:
 * out of memory (p unchanged). */
static bool own_buffer(struct fs_part *p)
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

static void start_filling(struct fs_part *p)
{
	p->state = FS_PART_FILLING;
	p->lost = false;
	p->source = PACE_NONE;
	p->mixed = false;
	p->proxy = -1;
	p->proxy_mixed = false;
}

struct fs_part *fs__part_get(struct fs_engine *e, uint32_t blob,
			     uint64_t index)
{
	struct fs_parts *ps = &e->parts;
	struct fs_part *p = fs__part_find(ps, blob, index);
	uint32_t slot;

	if (p != NULL) {
		if (p->state == FS_PART_DONE) {
			if (!own_buffer(p))
				return NULL;
			lru_remove(ps, p); /* fetched again */
			start_filling(p);
		}
		return p;
	}
	if (ps->free_head != FS_NO_PART) {
		slot = ps->free_head;
		p = &ps->v[slot];
		if (!own_buffer(p))
			return NULL;
		ps->free_head = p->next;
	} else if (ps->lru_head != FS_NO_PART) {
		slot = ps->lru_head;
		p = &ps->v[slot];
		if (!own_buffer(p))
			return NULL;
		/* Memory held the only copy of a block the cache lost. */
		if (p->lost)
			fs__drop_locked(e, p->blob,
					p->index * CACHE_BLOCK_SIZE,
					fs__block_end(&e->blobs[p->blob],
						      p->index),
					FS_DROP_GONE);
		unlink_part(ps, p);
	} else {
		return NULL;
	}
	start_filling(p);
	p->blob = blob;
	p->index = index;
	p->prev = p->next = FS_NO_PART;
	p->hnext = ps->buckets[bucket_of(ps, blob, index)];
	ps->buckets[bucket_of(ps, blob, index)] = slot;
	return p;
}

void fs__part_done(struct fs_parts *ps, struct fs_part *p, bool lost)
{
	if (p->state != FS_PART_HANDING)
		return;
	p->state = FS_PART_DONE;
	p->lost |= lost;
	lru_append(ps, p);
}

void fs__part_touch(struct fs_parts *ps, struct fs_part *p)
{
	if (p->state != FS_PART_DONE || slot_of(ps, p) == ps->lru_tail)
		return;
	lru_remove(ps, p);
	lru_append(ps, p);
}

/* usage: what the tree holds in memory, for `pacefs status`. */
#include <malloc.h>

#include "fs/tree/tree.h"

/* The allocator's figure for p: its chunk's usable bytes plus the header
 * glibc keeps before it, so that many small blocks count what they cost
 * (a 120-byte file record takes a 128-byte chunk). */
static uint64_t chunk(const void *p)
{
	return p == NULL ? 0 : (uint64_t)malloc_usable_size((void *)p) + 8;
}

/* What node n holds beside its record and its name. */
static uint64_t parts_bytes(const struct tree_node *n)
{
	uint64_t b = 0;

	if (n->is_dir) {
		const struct tree_dir *d = n->dir;

		return chunk(d) + chunk(d->children) + chunk(d->index) +
		       chunk(d->list_url);
	}
	if (n->file == NULL)
		return 0;
	b = chunk(n->file) + chunk(n->file->urls) + chunk(n->file->dblocks) +
	    chunk(n->file->regions) + chunk(n->file->etag) +
	    chunk(n->file->identity);
	for (uint32_t i = 0; i < n->file->nurls; i++)
		b += chunk(n->file->urls[i]);
	return b;
}

void tree_ns_usage(struct tree_ns *ns, struct tree_usage *u)
{
	u->files = u->dirs = 0;
	/* The slabs' records in use (the rest of a slab is mapped but not
	 * touched), every chunk of names but the last's unused end. */
	u->bytes =
		chunk(ns) + chunk(ns->slabs) + chunk(ns->arenas) +
		(uint64_t)ns->n * sizeof(struct tree_node) +
		(ns->narenas > 0 ? (uint64_t)(ns->narenas - 1) * TREE_NS_ARENA +
					   ns->arena_used
				 : 0);
	for (uint32_t k = 0; k < ns->nprefixes; k++)
		u->bytes += chunk(ns->prefixes[k]);
	for (uint32_t i = 0; i < ns->n; i++) {
		const struct tree_node *n = tree_ns_get(ns, i);

		if (n->gone)
			; /* kept for its inode number, counted in bytes */
		else if (n->is_dir)
			u->dirs++;
		else
			u->files++;
		u->bytes += parts_bytes(n);
	}
}

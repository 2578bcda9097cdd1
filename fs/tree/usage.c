/* usage: what the tree holds in memory, for `pacefs status`. */
#include <malloc.h>

#include "fs/tree/tree.h"

/* The allocator's figure for p: its chunk's usable bytes plus the header
 * glibc keeps before it, so that many small blocks count what they cost
 * (an 18-byte name takes a 32-byte chunk). */
static uint64_t chunk(const void *p)
{
	return p == NULL ? 0 : (uint64_t)malloc_usable_size((void *)p) + 8;
}

static uint64_t node_bytes(const struct tree_node *n)
{
	uint64_t b = chunk(n) + chunk(n->name) + chunk(n->children) +
		     chunk(n->index) + chunk(n->list_url) + chunk(n->dblocks) +
		     chunk(n->etag) + chunk(n->identity) + chunk(n->urls) +
		     chunk(n->regions);

	for (uint32_t i = 0; i < n->nurls; i++)
		b += chunk(n->urls[i]);
	return b;
}

void tree_ns_usage(struct tree_ns *ns, struct tree_usage *u)
{
	u->files = u->dirs = 0;
	u->bytes = chunk(ns) + chunk(ns->nodes);
	for (uint32_t i = 0; i < ns->n; i++) {
		const struct tree_node *n = ns->nodes[i];

		if (n->gone)
			; /* kept for its inode number, counted in bytes */
		else if (n->is_dir)
			u->dirs++;
		else
			u->files++;
		u->bytes += node_bytes(n);
	}
}

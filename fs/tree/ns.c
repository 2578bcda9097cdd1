/* ns: the mount's namespace: a tree of directories and files, each node
 * an inode (node i is inode i + 1; the root is node 0), each directory's
 * children found by name in O(1). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "fs/tree/ns_int.h"
#include "fs/tree/tree.h"

#define SLAB (1u << TREE_NS_SLAB_SHIFT)
/* A chunk of the names' arena. */
#define ARENA_CHUNK TREE_NS_ARENA

const struct tree_file tree_file_none;

static uint64_t rotl(uint64_t x, int b)
{
	return (x << b) | (x >> (64 - b));
}

static void sipround(uint64_t v[4])
{
	v[0] += v[1];
	v[1] = rotl(v[1], 13) ^ v[0];
	v[0] = rotl(v[0], 32);
	v[2] += v[3];
	v[3] = rotl(v[3], 16) ^ v[2];
	v[0] += v[3];
	v[3] = rotl(v[3], 21) ^ v[0];
	v[2] += v[1];
	v[1] = rotl(v[1], 17) ^ v[2];
	v[2] = rotl(v[2], 32);
}

/* SipHash-2-4 of name under key: names are the server's choice, and a
 * keyed hash is what keeps them from all landing in one slot. */
static uint64_t name_hash(const uint64_t key[2], const char *name)
{
	const unsigned char *p = (const unsigned char *)name;
	size_t len = strlen(name);
	uint64_t v[4] = {
		key[0] ^ 0x736f6d6570736575ull, key[1] ^ 0x646f72616e646f6dull,
		key[0] ^ 0x6c7967656e657261ull, key[1] ^ 0x7465646279746573ull};
	uint64_t last = (uint64_t)len << 56;
	size_t i = 0;

	for (; i + 8 <= len; i += 8) {
		uint64_t m = 0;

		for (int b = 0; b < 8; b++)
			m |= (uint64_t)p[i + (size_t)b] << (8 * b);
		v[3] ^= m;
		sipround(v);
		sipround(v);
		v[0] ^= m;
	}
	for (int b = 0; i < len; i++, b++)
		last |= (uint64_t)p[i] << (8 * b);
	v[3] ^= last;
	sipround(v);
	sipround(v);
	v[0] ^= last;
	v[2] ^= 0xff;
	for (int r = 0; r < 4; r++)
		sipround(v);
	return v[0] ^ v[1] ^ v[2] ^ v[3];
}

/* Puts child id into d's table (which has a free slot). */
static void index_put(struct tree_ns *ns, struct tree_dir *d, uint32_t id)
{
	uint32_t mask = d->nindex - 1;
	uint32_t s =
		(uint32_t)name_hash(ns->key, tree_ns_get(ns, id)->name) & mask;

	while (d->index[s] != TREE_NO_NODE)
		s = (s + 1) & mask;
	d->index[s] = id;
}

/* Gives d a table of nslots (a power of two) holding its children. */
static int index_build(struct tree_ns *ns, struct tree_dir *d, uint32_t nslots)
{
	uint32_t *table = malloc((size_t)nslots * sizeof(*table));

	if (table == NULL)
		return -ENOMEM;
	memset(table, 0xff, (size_t)nslots * sizeof(*table)); /* TREE_NO_NODE */
	free(d->index);
	d->index = table;
	d->nindex = nslots;
	for (uint32_t i = 0; i < d->nchildren; i++)
		index_put(ns, d, d->children[i]);
	return 0;
}

/* Frees what node n holds beside its record and its name. */
static void node_parts_free(struct tree_node *n)
{
	if (n->is_dir && n->dir != NULL) {
		free(n->dir->children);
		free(n->dir->index);
		free(n->dir->list_url);
		free(n->dir);
	} else if (!n->is_dir && n->file != NULL) {
		struct tree_file *f = n->file;

		for (uint32_t i = 0; i < f->nurls; i++)
			free(f->urls[i]);
		free(f->urls);
		free(f->dblocks);
		free(f->regions);
		free(f->etag);
		free(f->identity);
		free(f);
	}
	n->dir = NULL;
}

void tree_node_free(struct tree_node *n)
{
	if (n == NULL)
		return;
	node_parts_free(n);
	free((char *)n->name);
	free(n);
}

struct tree_file *tree_node_file(struct tree_node *n)
{
	if (n->is_dir)
		return NULL;
	if (n->file == NULL)
		n->file = calloc(1, sizeof(*n->file));
	return n->file;
}

/* A fresh anonymous mapping of len bytes (zeroed), or NULL. */
static void *map(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

/* Makes room for `total` nodes: a slab mapped for each 2^SHIFT more. */
static int room(struct tree_ns *ns, uint64_t total)
{
	/* Whole slabs below TREE_NO_NODE: cap never wraps. */
	if (total > (uint64_t)TREE_NO_NODE - SLAB)
		return -ENOSPC;
	while (ns->cap < total) {
		struct tree_node **grown =
			realloc(ns->slabs, (ns->nslabs + 1) * sizeof(*grown));
		struct tree_node *slab;

		if (grown == NULL)
			return -ENOMEM;
		ns->slabs = grown;
		slab = map((size_t)SLAB * sizeof(*slab));
		if (slab == NULL)
			return -ENOMEM;
		ns->slabs[ns->nslabs++] = slab;
		ns->cap += SLAB;
	}
	return 0;
}

/* A copy of name in the names' arena; NULL when memory ran out (or the
 * name is longer than a chunk, which no source's limits allow). */
static const char *arena_put(struct tree_ns *ns, const char *name)
{
	size_t len = strlen(name) + 1;
	char *at;

	if (len > ARENA_CHUNK)
		return NULL;
	if (ns->narenas == 0 || ARENA_CHUNK - ns->arena_used < len) {
		char **grown =
			realloc(ns->arenas, (ns->narenas + 1) * sizeof(*grown));
		char *chunk;

		if (grown == NULL)
			return NULL;
		ns->arenas = grown;
		chunk = map(ARENA_CHUNK);
		if (chunk == NULL)
			return NULL;
		ns->arenas[ns->narenas++] = chunk;
		ns->arena_used = 0;
	}
	at = ns->arenas[ns->narenas - 1] + ns->arena_used;
	memcpy(at, name, len);
	ns->arena_used += len;
	return at;
}

/* A fresh key for the name tables. */
static void new_key(struct tree_ns *ns)
{
	if (getrandom(ns->key, sizeof(ns->key), GRND_NONBLOCK) !=
	    (ssize_t)sizeof(ns->key)) {
		/* No entropy yet (early boot): a key no server can know
		 * beforehand is enough. */
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		ns->key[0] = (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ull ^
			     (uint64_t)getpid();
		ns->key[1] = (uint64_t)ts.tv_sec ^ (uint64_t)(uintptr_t)ns;
	}
}

/* Frees what the namespace holds but its lock and conditions. */
static void ns_release(struct tree_ns *ns)
{
	for (uint32_t i = 0; i < ns->n; i++)
		node_parts_free(tree_ns_get(ns, i));
	for (uint32_t i = 0; i < ns->nslabs; i++)
		munmap(ns->slabs[i], (size_t)SLAB * sizeof(struct tree_node));
	for (uint32_t i = 0; i < ns->narenas; i++)
		munmap(ns->arenas[i], ARENA_CHUNK);
	for (uint32_t i = 0; i < ns->nprefixes; i++)
		free(ns->prefixes[i]);
	free(ns->slabs);
	free(ns->arenas);
	free(ns);
}

int tree_ns_new(struct tree_ns **out)
{
	struct tree_ns *ns = calloc(1, sizeof(*ns));
	struct tree_node *root;
	pthread_condattr_t ca;

	if (ns == NULL)
		return -ENOMEM;
	if (room(ns, 1) != 0)
		goto fail;
	ns->n = 1;
	root = tree_ns_get(ns, 0);
	root->is_dir = true;
	root->dir = calloc(1, sizeof(*root->dir));
	root->name = arena_put(ns, "");
	if (root->dir == NULL || root->name == NULL)
		goto fail;
	root->parent = 0;
	root->mode = 0555;
	root->mtime = -1;
	root->blob = TREE_NO_BLOB;
	new_key(ns);
	pthread_mutex_init(&ns->mu, NULL);
	/* Waits for a listing or a probe to end by a deadline on
	 * fs__now_ns's clock. */
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&ns->listed, &ca);
	pthread_cond_init(&ns->probed, &ca);
	pthread_condattr_destroy(&ca);
	*out = ns;
	return 0;
fail:
	ns_release(ns);
	return -ENOMEM;
}

void tree_ns_free(struct tree_ns *ns)
{
	if (ns == NULL)
		return;
	pthread_cond_destroy(&ns->listed);
	pthread_cond_destroy(&ns->probed);
	pthread_mutex_destroy(&ns->mu);
	ns_release(ns);
}

uint32_t tree_ns_child(struct tree_ns *ns, uint32_t dir, const char *name)
{
	const struct tree_node *dn = tree_ns_get(ns, dir);
	const struct tree_dir *d;

	if (dn == NULL || !dn->is_dir)
		return TREE_NO_NODE;
	d = dn->dir;
	if (d->index != NULL) {
		uint32_t mask = d->nindex - 1;
		uint32_t s = (uint32_t)name_hash(ns->key, name) & mask;

		for (; d->index[s] != TREE_NO_NODE; s = (s + 1) & mask)
			if (strcmp(tree_ns_get(ns, d->index[s])->name, name) ==
			    0)
				return d->index[s];
		return TREE_NO_NODE;
	}
	for (uint32_t i = 0; i < d->nchildren; i++) {
		const struct tree_node *c = tree_ns_get(ns, d->children[i]);

		if (strcmp(c->name, name) == 0)
			return d->children[i];
	}
	return TREE_NO_NODE;
}

/* Grows an array of uint32_t to hold one more. */
static int grow_u32(uint32_t **a, uint32_t n, uint32_t *cap)
{
	uint32_t *grown;
	uint32_t ncap;

	if (n < *cap)
		return 0;
	ncap = *cap ? *cap * 2 : 8;
	grown = realloc(*a, ncap * sizeof(**a));
	if (grown == NULL)
		return -ENOMEM;
	*a = grown;
	*cap = ncap;
	return 0;
}

int tree_ns_reserve(struct tree_ns *ns, uint32_t dir, uint32_t total)
{
	struct tree_node *dn = tree_ns_get(ns, dir);
	struct tree_dir *d;
	uint64_t slots = 4 * TREE_NS_INDEX_MIN;
	int rc;

	if (dn == NULL || !dn->is_dir)
		return -ENOTDIR;
	d = dn->dir;
	if (total <= d->nchildren)
		return 0;
	rc = room(ns, (uint64_t)ns->n + (total - d->nchildren));
	if (rc != 0)
		return rc;
	if (total > d->cap_children) {
		uint32_t *grown =
			realloc(d->children, (size_t)total * sizeof(*grown));

		if (grown == NULL)
			return -ENOMEM;
		d->children = grown;
		d->cap_children = total;
	}
	if (total < TREE_NS_INDEX_MIN)
		return 0;
	/* tree_ns_add keeps it at most half full: no rebuild up to total. */
	while (slots < 2 * ((uint64_t)total + 1))
		slots *= 2;
	if (slots > UINT32_MAX)
		return -ENOSPC;
	if (d->index != NULL && slots <= d->nindex)
		return 0;
	return index_build(ns, d, (uint32_t)slots);
}

struct tree_node *tree_node_new(const char *name, bool is_dir)
{
	struct tree_node *n = calloc(1, sizeof(*n));

	if (n == NULL)
		return NULL;
	n->name = strdup(name);
	if (is_dir)
		n->dir = calloc(1, sizeof(*n->dir));
	n->is_dir = is_dir;
	if (n->name == NULL || (is_dir && n->dir == NULL)) {
		tree_node_free(n);
		return NULL;
	}
	n->mode = is_dir ? 0555 : 0444;
	n->mtime = -1;
	n->blob = TREE_NO_BLOB;
	return n;
}

/* Makes a copy of n a child of dir, its name in the arena: what
 * tree_ns_link does but free n. */
static int link_copy(struct tree_ns *ns, uint32_t dir,
		     const struct tree_node *n, uint32_t *out)
{
	struct tree_node *dn = tree_ns_get(ns, dir);
	struct tree_node *slot;
	struct tree_dir *d;
	const char *name;
	uint32_t id = ns->n;
	int rc;

	if (dn == NULL || !dn->is_dir)
		return -ENOTDIR;
	d = dn->dir;
	if (tree_ns_child(ns, dir, n->name) != TREE_NO_NODE)
		return -EEXIST;
	rc = room(ns, (uint64_t)ns->n + 1); /* -ENOSPC: no inode numbers */
	if (rc != 0)
		return rc;
	if (grow_u32(&d->children, d->nchildren, &d->cap_children) != 0)
		return -ENOMEM;
	/* The table stays at most half full: twice the slots when the next
	 * child would pass that. */
	if (d->nchildren + 1 >= TREE_NS_INDEX_MIN &&
	    (d->index == NULL || (d->nchildren + 1) * 2 > d->nindex) &&
	    index_build(ns, d,
			d->index == NULL ? 4 * TREE_NS_INDEX_MIN
					 : d->nindex * 2) != 0)
		return -ENOMEM;
	name = arena_put(ns, n->name);
	if (name == NULL)
		return -ENOMEM;
	slot = &ns->slabs[id >> TREE_NS_SLAB_SHIFT][id & (SLAB - 1)];
	*slot = *n;
	slot->name = name;
	slot->parent = dir;
	ns->n++;
	d->children[d->nchildren++] = id;
	if (d->index != NULL)
		index_put(ns, d, id);
	tree__ns_url_compact(ns, id);
	*out = id;
	return 0;
}

int tree_ns_link(struct tree_ns *ns, uint32_t dir, struct tree_node *n,
		 uint32_t *out)
{
	int rc = link_copy(ns, dir, n, out);

	if (rc == 0) {
		free((char *)n->name);
		free(n);
	}
	return rc;
}

int tree_ns_add(struct tree_ns *ns, uint32_t dir, const char *name, bool is_dir,
		uint32_t *out)
{
	/* Built in place: no allocation but a directory's fields. */
	struct tree_node n = {.name = name,
			      .is_dir = is_dir,
			      .mode = is_dir ? 0555 : 0444,
			      .mtime = -1,
			      .blob = TREE_NO_BLOB};
	int rc;

	if (is_dir && (n.dir = calloc(1, sizeof(*n.dir))) == NULL)
		return -ENOMEM;
	rc = link_copy(ns, dir, &n, out);
	if (rc != 0)
		free(n.dir);
	return rc;
}

/* Adds the file called leaf (a path's last component) to dir. */
static int add_leaf(struct tree_ns *ns, uint32_t dir, const char *leaf,
		    uint32_t *out)
{
	size_t len = strlen(leaf);

	if (len == 0 || len > NAME_MAX)
		return -EINVAL;
	return tree_ns_add(ns, dir, leaf, false, out); /* or -EEXIST */
}

int tree_ns_add_path(struct tree_ns *ns, const char *path, uint32_t *out)
{
	char part[NAME_MAX + 1];
	const char *p = path, *last = strrchr(path, '/');
	size_t dlen = last != NULL ? (size_t)(last - path) + 1 : 0;
	uint32_t dir = 0;
	int rc;

	/* A manifest lists a directory's files together: the directory of
	 * the last path added is found again without a lookup of each of
	 * its components (directories are never removed nor renamed). */
	if (dlen > 0 && dlen == ns->last_dir_len &&
	    memcmp(path, ns->last_dir, dlen) == 0)
		return add_leaf(ns, ns->last_dir_id, last + 1, out);
	for (;;) {
		const char *slash = strchr(p, '/');
		size_t len = slash != NULL ? (size_t)(slash - p) : strlen(p);
		uint32_t child;

		if (slash == NULL) {
			if (dlen < sizeof(ns->last_dir)) {
				memcpy(ns->last_dir, path, dlen);
				ns->last_dir_len = dlen;
				ns->last_dir_id = dir;
			}
			return add_leaf(ns, dir, p, out);
		}
		if (len == 0 || len > NAME_MAX)
			return -EINVAL;
		memcpy(part, p, len);
		part[len] = '\0';
		child = tree_ns_child(ns, dir, part);
		if (child == TREE_NO_NODE) {
			rc = tree_ns_add(ns, dir, part, true, &child);
			if (rc != 0)
				return rc;
		} else if (!tree_ns_get(ns, child)->is_dir) {
			return -ENOTDIR;
		}
		dir = child;
		p = slash + 1;
	}
}

void tree_ns_path(struct tree_ns *ns, uint32_t i, char *buf, size_t cap)
{
	uint32_t chain[256];
	size_t depth = 0, used = 0;

	buf[0] = '\0';
	while (i != 0 && i < ns->n && depth < sizeof(chain) / sizeof(*chain)) {
		chain[depth++] = i;
		i = tree_ns_get(ns, i)->parent;
	}
	while (depth > 0 && used < cap) {
		const char *name = tree_ns_get(ns, chain[--depth])->name;

		used += (size_t)snprintf(buf + used, cap - used, "%s%s",
					 used ? "/" : "", name);
	}
}

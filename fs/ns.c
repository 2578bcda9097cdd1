/* ns: the mount's namespace: a tree of directories and files, each node
 * an inode (node i is inode i + 1; the root is node 0). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fs/fs_int.h"

#define FS_NS_FIRST_CAP 64

static void node_free(struct fs_node *n)
{
	if (n == NULL)
		return;
	free(n->name);
	free(n->children);
	free(n->list_url);
	free(n->dblocks);
	for (uint32_t i = 0; i < n->nurls; i++)
		free(n->urls[i]);
	free(n->urls);
	free(n);
}

int fs__ns_new(struct fs_ns **out)
{
	struct fs_ns *ns = calloc(1, sizeof(*ns));
	struct fs_node *root = calloc(1, sizeof(*root));

	if (ns == NULL || root == NULL)
		goto fail;
	ns->nodes = calloc(FS_NS_FIRST_CAP, sizeof(*ns->nodes));
	root->name = strdup("");
	if (ns->nodes == NULL || root->name == NULL)
		goto fail;
	pthread_mutex_init(&ns->mu, NULL);
	ns->cap = FS_NS_FIRST_CAP;
	root->is_dir = true;
	root->parent = 0;
	root->mode = 0555;
	root->mtime = -1;
	root->blob = FS_NO_BLOB;
	ns->nodes[0] = root;
	ns->n = 1;
	*out = ns;
	return 0;
fail:
	if (ns != NULL)
		free(ns->nodes);
	free(ns);
	node_free(root);
	return -ENOMEM;
}

void fs__ns_free(struct fs_ns *ns)
{
	if (ns == NULL)
		return;
	for (uint32_t i = 0; i < ns->n; i++)
		node_free(ns->nodes[i]);
	free(ns->nodes);
	pthread_mutex_destroy(&ns->mu);
	free(ns);
}

struct fs_node *fs__ns_get(struct fs_ns *ns, uint32_t i)
{
	return i < ns->n ? ns->nodes[i] : NULL;
}

uint32_t fs__ns_child(struct fs_ns *ns, uint32_t dir, const char *name)
{
	const struct fs_node *d = fs__ns_get(ns, dir);

	if (d == NULL || !d->is_dir)
		return FS_NO_NODE;
	for (uint32_t i = 0; i < d->nchildren; i++) {
		const struct fs_node *c = ns->nodes[d->children[i]];

		if (strcmp(c->name, name) == 0)
			return d->children[i];
	}
	return FS_NO_NODE;
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

int fs__ns_add(struct fs_ns *ns, uint32_t dir, const char *name, bool is_dir,
	       uint32_t *out)
{
	struct fs_node *d = fs__ns_get(ns, dir);
	struct fs_node *n;
	uint32_t id = ns->n;

	if (d == NULL || !d->is_dir)
		return -ENOTDIR;
	if (fs__ns_child(ns, dir, name) != FS_NO_NODE)
		return -EEXIST;
	if (ns->n == ns->cap) {
		struct fs_node **grown =
			realloc(ns->nodes, ns->cap * 2 * sizeof(*ns->nodes));

		if (grown == NULL)
			return -ENOMEM;
		ns->nodes = grown;
		ns->cap *= 2;
	}
	if (grow_u32(&d->children, d->nchildren, &d->cap_children) != 0)
		return -ENOMEM;
	n = calloc(1, sizeof(*n));
	if (n == NULL)
		return -ENOMEM;
	n->name = strdup(name);
	if (n->name == NULL) {
		free(n);
		return -ENOMEM;
	}
	n->parent = dir;
	n->is_dir = is_dir;
	n->mode = is_dir ? 0555 : 0444;
	n->mtime = -1;
	n->blob = FS_NO_BLOB;
	ns->nodes[id] = n;
	ns->n++;
	d->children[d->nchildren++] = id;
	*out = id;
	return 0;
}

int fs__ns_add_path(struct fs_ns *ns, const char *path, uint32_t *out)
{
	char part[NAME_MAX + 1];
	const char *p = path;
	uint32_t dir = 0;
	int rc;

	for (;;) {
		const char *slash = strchr(p, '/');
		size_t len = slash != NULL ? (size_t)(slash - p) : strlen(p);
		uint32_t child;

		if (len == 0 || len > NAME_MAX)
			return -EINVAL;
		memcpy(part, p, len);
		part[len] = '\0';
		child = fs__ns_child(ns, dir, part);
		if (slash == NULL) {
			if (child != FS_NO_NODE)
				return -EEXIST;
			return fs__ns_add(ns, dir, part, false, out);
		}
		if (child == FS_NO_NODE) {
			rc = fs__ns_add(ns, dir, part, true, &child);
			if (rc != 0)
				return rc;
		} else if (!ns->nodes[child]->is_dir) {
			return -ENOTDIR;
		}
		dir = child;
		p = slash + 1;
	}
}

void fs__ns_path(struct fs_ns *ns, uint32_t i, char *buf, size_t cap)
{
	uint32_t chain[256];
	size_t depth = 0, used = 0;

	buf[0] = '\0';
	while (i != 0 && i < ns->n && depth < sizeof(chain) / sizeof(*chain)) {
		chain[depth++] = i;
		i = ns->nodes[i]->parent;
	}
	while (depth > 0 && used < cap) {
		const char *name = ns->nodes[chain[--depth]]->name;

		used += (size_t)snprintf(buf + used, cap - used, "%s%s",
					 used ? "/" : "", name);
	}
}

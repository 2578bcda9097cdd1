/* ns_int: what the namespace's files (ns.c, nsurl.c) share; no file
 * outside fs/tree/ includes it. */
#ifndef FS_TREE_NS_INT_H
#define FS_TREE_NS_INT_H

#include <stdint.h>

struct tree_ns;

/* Keeps node i's one stored URL as a prefix's number when it is that
 * prefix followed by the node's own path (nsurl.c); leaves it as it is
 * otherwise. Caller holds ns->mu. */
void tree__ns_url_compact(struct tree_ns *ns, uint32_t i);

#endif

/* nsurl: a file's URLs. Most manifests and indexes give each file one
 * URL that is a prefix shared by all (the origin and a folder) followed
 * by the file's own path, percent-encoded: such a URL is kept as the
 * prefix's number (a byte of the node) and composed again when the file
 * is opened; any other URL is stored as it is. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fs/tree/ns_int.h"
#include "fs/tree/tree.h"

/* The longest own path composed: every byte of a whole path escaped. */
#define OWN_MAX (3 * TREE_MANIFEST_PATH_MAX)

static bool unreserved(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' ||
	       c == '~';
}

/* Writes node i's path from the root into buf, each name percent-encoded
 * as an index's links and S3's keys are (the unreserved characters as
 * they are, every other byte as %XX), joined by '/'; no terminator. Its
 * length, or 0 when it is the root, deeper than 256 or longer than
 * cap. */
static size_t own_path(struct tree_ns *ns, uint32_t i, char *buf, size_t cap)
{
	static const char hex[] = "0123456789ABCDEF";
	uint32_t chain[256];
	size_t depth = 0, used = 0;

	while (i != 0 && depth < sizeof(chain) / sizeof(*chain)) {
		chain[depth++] = i;
		i = tree_ns_get(ns, i)->parent;
	}
	if (i != 0 || depth == 0)
		return 0;
	while (depth > 0) {
		const unsigned char *p =
			(const unsigned char *)tree_ns_get(ns, chain[--depth])
				->name;

		if (used > 0) {
			if (used == cap)
				return 0;
			buf[used++] = '/';
		}
		for (; *p != '\0'; p++) {
			if (cap - used < 3)
				return 0;
			if (unreserved(*p)) {
				buf[used++] = (char)*p;
			} else {
				buf[used++] = '%';
				buf[used++] = hex[*p >> 4];
				buf[used++] = hex[*p & 15];
			}
		}
	}
	return used;
}

/* The number of url's prefix when url is a prefix followed by node i's
 * own path (the prefix added to the table when new and there is room);
 * -1 otherwise. */
static int prefix_of(struct tree_ns *ns, uint32_t i, const char *url)
{
	char own[OWN_MAX];
	size_t ulen = strlen(url), olen = own_path(ns, i, own, sizeof(own));
	size_t plen = ulen - olen;
	char *p;

	if (olen == 0 || olen >= ulen || memcmp(url + plen, own, olen) != 0)
		return -1;
	if (ns->last_prefix < ns->nprefixes &&
	    strncmp(ns->prefixes[ns->last_prefix], url, plen) == 0 &&
	    ns->prefixes[ns->last_prefix][plen] == '\0')
		return (int)ns->last_prefix;
	for (uint32_t k = 0; k < ns->nprefixes; k++)
		if (strncmp(ns->prefixes[k], url, plen) == 0 &&
		    ns->prefixes[k][plen] == '\0')
			return (int)(ns->last_prefix = k);
	if (ns->nprefixes == TREE_NS_PREFIXES ||
	    (p = strndup(url, plen)) == NULL)
		return -1;
	ns->prefixes[ns->nprefixes] = p;
	return (int)(ns->last_prefix = ns->nprefixes++);
}

/* Whether f holds nothing (its URLs taken out). */
static bool file_empty(const struct tree_file *f)
{
	return f->nurls == 0 && !f->has_sha256 && f->dblock == 0 &&
	       f->dblocks == NULL && f->regions == NULL && f->etag == NULL &&
	       f->identity == NULL;
}

void tree__ns_url_compact(struct tree_ns *ns, uint32_t i)
{
	struct tree_node *n = tree_ns_get(ns, i);
	struct tree_file *f;
	int k;

	if (n == NULL || n->is_dir || n->file == NULL || n->file->nurls != 1)
		return;
	f = n->file;
	k = prefix_of(ns, i, f->urls[0]);
	if (k < 0)
		return;
	n->url_own = true;
	n->url_prefix = (uint8_t)k;
	free(f->urls[0]);
	free(f->urls);
	f->urls = NULL;
	f->nurls = 0;
	if (file_empty(f)) {
		free(f);
		n->file = NULL;
	}
}

uint32_t tree_node_nurls(const struct tree_node *n)
{
	if (n->is_dir)
		return 0;
	return n->url_own ? 1 : tree_file_of(n)->nurls;
}

char *tree_ns_url(struct tree_ns *ns, uint32_t i, uint32_t k)
{
	struct tree_node *n = tree_ns_get(ns, i);
	const char *prefix;
	size_t plen, olen;
	char *url;

	if (n == NULL || k >= tree_node_nurls(n))
		return NULL;
	if (!n->url_own)
		return strdup(n->file->urls[k]);
	prefix = ns->prefixes[n->url_prefix];
	plen = strlen(prefix);
	url = malloc(plen + OWN_MAX + 1);
	if (url == NULL)
		return NULL;
	memcpy(url, prefix, plen);
	olen = own_path(ns, i, url + plen, OWN_MAX);
	url[plen + olen] = '\0';
	return url;
}

static void urls_free(char **urls, uint32_t nurls)
{
	for (uint32_t u = 0; u < nurls; u++)
		free(urls[u]);
	free(urls);
}

int tree_ns_set_urls(struct tree_ns *ns, uint32_t i, char **urls,
		     uint32_t nurls)
{
	struct tree_node *n = tree_ns_get(ns, i);
	struct tree_file *f;
	int k = -1;

	if (n == NULL || n->is_dir) {
		urls_free(urls, nurls);
		return -EINVAL;
	}
	if (nurls == 1)
		k = prefix_of(ns, i, urls[0]);
	f = k < 0 && nurls > 0 ? tree_node_file(n) : n->file;
	if (k < 0 && nurls > 0 && f == NULL) {
		urls_free(urls, nurls);
		return -ENOMEM;
	}
	if (f != NULL) {
		urls_free(f->urls, f->nurls);
		f->urls = NULL;
		f->nurls = 0;
	}
	n->url_own = k >= 0;
	n->url_prefix = k >= 0 ? (uint8_t)k : 0;
	if (k >= 0 || nurls == 0) {
		urls_free(urls, nurls);
		return 0;
	}
	f->urls = urls;
	f->nurls = nurls;
	return 0;
}

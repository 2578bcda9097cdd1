/* node: what a file or directory of the mount needs before it is used: a
 * file's blob, probed on first use; a directory-index page, read on first
 * use and again when older than the listing TTL. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <fuse_lowlevel.h>
#include <openssl/evp.h>

#include "fs/driver/driver_int.h"
#include "fs/engine/engine.h"
#include "fs/obs/obs.h"
#include "fs/tree/tree.h"
#include "fs/auth/auth.h"

/* The largest directory-index page read. */
#define DRIVER_LISTING_MAX (64u * 1024u * 1024u)

/* Entries merged per hold of the namespace's lock: a page of a million
 * names is merged in holds of about half a millisecond, so that every
 * other operation of the mount waits that long behind it, not seconds. */
#define DRIVER_LIST_BATCH 1024u

/* True once the session ends (SIGTERM, an unmount, the connection
 * gone): a request under way stops, so that the loop's worker threads
 * can be joined, and so do the probers joined after the loop. The flag
 * first: once the loop returned, libfuse says the session is not exited,
 * and the session may be freed. */
static bool mount_stopping(void *arg)
{
	struct driver_mount *m = arg;

	return atomic_load(&m->ended) ||
	       (m->se != NULL && fuse_session_exited(m->se) != 0);
}

void driver__mount_end(struct driver_mount *m)
{
	atomic_store(&m->ended, true);
}

void driver__mount_bound(const struct driver_mount *m, uint64_t deadline_ns,
			 struct fetch_config *out)
{
	*out = m->fetch;
	out->deadline_ms = deadline_ns == 0 ? 0 : deadline_ns / 1000000u;
	if (deadline_ns != 0 && out->deadline_ms == 0)
		out->deadline_ms = 1;
	out->stop = mount_stopping;
	out->stop_arg = (void *)m;
}

void driver__mount_view(const struct driver_mount *m, struct obs_view *out)
{
	*out = (struct obs_view){
		.ns = m->ns,
		.engine = m->engine,
		.cache = m->cache,
		.proxies = m->fetch.proxies,
		.metrics = m->metrics,
		.plans_json =
			m->plans != NULL ? driver__plan_status_json : NULL,
		.plans_arg = m->plans};
}

/* deadline_ns (fs__now_ns's clock, CLOCK_MONOTONIC) as the waits take
 * it. */
static struct timespec monotonic_ts(uint64_t deadline_ns)
{
	struct timespec ts = {.tv_sec = (time_t)(deadline_ns / 1000000000u),
			      .tv_nsec = (long)(deadline_ns % 1000000000u)};

	return ts;
}

bool driver__file_has_content_identity(const struct tree_node *n)
{
	/* The cache checks every block against digest blocks that divide
	 * it before it stores it; a larger digest block is checked only once
	 * all of its cache blocks are stored, so the first of them are
	 * cached unchecked. */
	const struct tree_file *f = tree_file_of(n);

	return f->ndblocks > 0 && f->dblock > 0 &&
	       f->dblock <= CACHE_BLOCK_SIZE &&
	       CACHE_BLOCK_SIZE % f->dblock == 0;
}

/* "sha256:H block_sha256:BS:D" (without "sha256:H " when the entry gives
 * no whole-file digest), D the SHA-256 of the block digests, 32 bytes
 * each, in order. Every block stored under it was checked against that
 * list before it was cached, so the bytes it holds are the ones the list
 * names, whichever source sent them. A whole-file digest alone binds
 * nothing until the file is complete: such entries keep their source's
 * identity. A new string; NULL when memory ran out. */
static char *content_identity(const struct tree_file *f)
{
	size_t cap = sizeof("sha256: block_sha256::") + 64 + 10 + 64;
	uint8_t list[32];
	char h[65], d[65];
	char *buf = malloc(cap);

	if (buf == NULL)
		return NULL;
	EVP_Digest(f->dblocks, (size_t)f->ndblocks * sizeof(f->dblocks[0]),
		   list, NULL, EVP_sha256(), NULL);
	fs__hex(list, 32, d);
	if (f->has_sha256) {
		fs__hex(f->sha256, 32, h);
		snprintf(buf, cap, "sha256:%s block_sha256:%" PRIu32 ":%s", h,
			 f->dblock, d);
	} else {
		snprintf(buf, cap, "block_sha256:%" PRIu32 ":%s", f->dblock, d);
	}
	return buf;
}

char *driver__file_identity(const struct tree_node *n, const char *const *urls,
			    uint32_t nurls)
{
	const struct tree_file *f = tree_file_of(n);

	if (f->identity != NULL)
		return strdup(f->identity);
	if (driver__file_has_content_identity(n))
		return content_identity(f);
	return auth_sources_identity(urls, nurls);
}

/* Copies what probing node i needs out of the namespace, so that the
 * probe runs without its lock. */
struct node_copy {
	char **urls;
	uint32_t nurls;
	bool has_size;
	uint64_t size;
	uint32_t blob;
	char name[PATH_MAX]; /* the path in the mount, for logs */
	char *identity;
	bool content;	   /* the identity names the content */
	bool object_store; /* listed by an object store */
	struct cache_id id;
	const uint8_t *sha256; /* the node's, immutable; NULL: none */
	uint32_t dblock;
	const uint8_t (*dblocks)[32];
	uint32_t ndblocks;
	const uint64_t (*regions)[2]; /* the node's, immutable */
	uint32_t nregions;
};

static void node_copy_free(struct node_copy *c)
{
	for (uint32_t i = 0; c->urls != NULL && i < c->nurls; i++)
		free(c->urls[i]);
	free(c->urls);
	free(c->identity);
}

static int node_copy(struct driver_mount *m, uint32_t i, struct node_copy *c)
{
	const struct tree_file *f;
	struct tree_node *n;
	int rc = 0;

	memset(c, 0, sizeof(*c));
	pthread_mutex_lock(&m->ns->mu);
	n = tree_ns_get(m->ns, i);
	if (n == NULL || n->is_dir || tree_node_nurls(n) == 0) {
		rc = n != NULL && n->is_dir ? -EISDIR : -ENOENT;
		goto out;
	}
	f = tree_file_of(n);
	c->urls = calloc(tree_node_nurls(n), sizeof(*c->urls));
	if (c->urls == NULL) {
		rc = -ENOMEM;
		goto out;
	}
	for (c->nurls = 0; c->nurls < tree_node_nurls(n); c->nurls++) {
		c->urls[c->nurls] = tree_ns_url(m->ns, i, c->nurls);
		if (c->urls[c->nurls] == NULL) {
			rc = -ENOMEM;
			goto out;
		}
	}
	c->has_size = n->has_size;
	c->size = n->size;
	c->blob = n->blob;
	tree_ns_path(m->ns, i, c->name, sizeof(c->name));
	c->sha256 = f->has_sha256 ? f->sha256 : NULL;
	c->dblock = f->dblock;
	c->dblocks = (const uint8_t(*)[32])f->dblocks;
	c->ndblocks = f->ndblocks;
	c->regions = (const uint64_t(*)[2])f->regions;
	c->nregions = f->nregions;
	c->identity = driver__file_identity(n, (const char *const *)c->urls,
					    c->nurls);
	c->content = driver__file_has_content_identity(n);
	c->object_store = f->etag != NULL;
	if (c->identity == NULL) {
		rc = -ENOMEM;
		goto out;
	}
	cache_id_from_string(c->identity, &c->id);
out:
	pthread_mutex_unlock(&m->ns->mu);
	if (rc != 0)
		node_copy_free(c);
	return rc;
}

/* Claims the probe of node i: waits while another thread probes it (by
 * the request's deadline), then marks it as probed by this one. 0, or
 * -EIO (logged) when the other probe was still under way at the
 * deadline. */
static int probe_claim(struct driver_mount *m, uint32_t i, const char *name,
		       const struct timespec *until)
{
	struct tree_ns *ns = m->ns;
	int rc = 0;

	pthread_mutex_lock(&ns->mu);
	while (tree_ns_get(ns, i)->probing && rc == 0)
		rc = pthread_cond_timedwait(&ns->probed, &ns->mu, until);
	if (tree_ns_get(ns, i)->probing) {
		pthread_mutex_unlock(&ns->mu);
		obs_log(FS_LOG_ERR,
			"%s: cannot open: its probe by another request was "
			"still under way at the deadline (-o read_timeout=)",
			name);
		return -EIO;
	}
	tree_ns_get(ns, i)->probing = true;
	pthread_mutex_unlock(&ns->mu);
	return 0;
}

/* Ends this thread's probe of node i: the blob it readied (TREE_NO_BLOB:
 * none) and the size it learned become the node's, and the threads
 * waiting to open it go on. */
static void probe_release(struct driver_mount *m, uint32_t i, uint32_t blob,
			  const struct driver_learned *l)
{
	struct tree_node *n;

	pthread_mutex_lock(&m->ns->mu);
	n = tree_ns_get(m->ns, i);
	if (blob != TREE_NO_BLOB) {
		n->blob = blob;
		n->has_size = true;
		n->size = l->size;
		if (n->mtime < 0)
			n->mtime = l->mtime;
	}
	n->probing = false;
	pthread_cond_broadcast(&m->ns->probed);
	pthread_mutex_unlock(&m->ns->mu);
}

/* Gives the engine the regions the manifest names for c's blob, as
 * [start, end) ranges. */
static int node_regions(struct driver_mount *m, const struct node_copy *c)
{
	struct cache_region r[TREE_MANIFEST_REGIONS_MAX];
	uint32_t n = c->nregions < TREE_MANIFEST_REGIONS_MAX
			     ? c->nregions
			     : TREE_MANIFEST_REGIONS_MAX;

	if (n == 0)
		return 0;
	for (uint32_t i = 0; i < n; i++)
		r[i] = (struct cache_region){
			c->regions[i][0], c->regions[i][0] + c->regions[i][1]};
	return engine_blob_regions(m->engine, c->blob, r, n);
}

/* Probes the file of c and readies its blob (c->blob, added when it has
 * none); what the probe learned in *l. */
static int node_learn(struct driver_mount *m, struct node_copy *c,
		      uint64_t deadline_ns, struct driver_learned *l)
{
	struct driver_learn_args args = {
		.identity = c->identity,
		.urls = (const char *const *)c->urls,
		.nurls = c->nurls,
		/* An object's listed size may be older than the object. */
		.has_size = c->has_size && !c->object_store,
		.size = c->size,
		.sha256 = c->sha256,
		.revalidate_s = m->revalidate_s,
		.content = c->content,
		.object_store = c->object_store,
	};
	struct fetch_config fc;
	char err[1024];
	int rc;

	/* A small file the listing sized, whose bytes no digest checks:
	 * its probe brings it whole, one round trip for the file. */
	if (args.has_size && c->sha256 == NULL && c->ndblocks == 0 &&
	    c->size <= CACHE_BLOCK_SIZE)
		args.first = (size_t)c->size;
	driver__mount_bound(m, deadline_ns, &fc);
	rc = driver__learn(&fc, m->cache, &args, l, err, sizeof(err));
	if (rc != 0) {
		/* A key deleted since it was listed is gone, not broken; a
		 * probe the mount's end stopped is no fault of the file's. */
		obs_log(rc == -ENOENT || mount_stopping(m) ? FS_LOG_INFO
							   : FS_LOG_ERR,
			"%s: cannot open: %s", c->name, err);
		return rc == -ENOENT ? -ENOENT : -EIO;
	}
	if (c->blob == TREE_NO_BLOB) {
		rc = engine_blob_add(m->engine, c->name,
				     l->open_ended ? ENGINE_SIZE_OPEN : l->size,
				     &c->id, &c->blob);
		if (rc == 0 && l->open_ended)
			engine_blob_set_open(m->engine, c->blob);
		if (rc == 0)
			rc = engine_blob_digests(m->engine, c->blob, c->sha256,
						 c->dblock, c->dblocks,
						 c->ndblocks);
		if (rc == 0)
			rc = node_regions(m, c);
		if (rc != 0) {
			obs_log(FS_LOG_ERR, "%s: cannot add its blob: %s",
				c->name, strerror(-rc));
			return rc;
		}
	}
	rc = engine_blob_ready(m->engine, c->blob, l->sources, l->nsources,
			       l->queued);
	if (rc != 0)
		obs_log(FS_LOG_ERR, "%s: cannot start its transfers: %s",
			c->name, strerror(-rc));
	return rc;
}

int driver__file_ready(struct driver_mount *m, uint32_t i, uint64_t deadline_ns)
{
	struct node_copy c;
	struct driver_learned l = {0};
	const struct tree_node *n;
	struct timespec until = monotonic_ts(deadline_ns);
	uint32_t blob;
	int rc;

	/* Every open asks: a file ready already needs no copy (nor the hash
	 * over its block digests that its identity takes). */
	pthread_mutex_lock(&m->ns->mu);
	n = tree_ns_get(m->ns, i);
	blob = n != NULL ? n->blob : TREE_NO_BLOB;
	pthread_mutex_unlock(&m->ns->mu);
	if (blob != TREE_NO_BLOB && engine_blob_is_ready(m->engine, blob))
		return 0;
	rc = node_copy(m, i, &c);
	if (rc != 0)
		return rc;
	/* Files are probed in parallel (each probe is a round trip, which
	 * the opens of a loader's workers pay together), a file never twice
	 * at once: its other opens wait for its probe, by their deadline. */
	rc = probe_claim(m, i, c.name, &until);
	if (rc != 0)
		goto out;
	pthread_mutex_lock(&m->ns->mu);
	c.blob = tree_ns_get(m->ns, i)->blob;
	pthread_mutex_unlock(&m->ns->mu);
	if (c.blob != TREE_NO_BLOB && engine_blob_is_ready(m->engine, c.blob))
		blob = TREE_NO_BLOB; /* readied while this open waited */
	else if ((rc = node_learn(m, &c, deadline_ns, &l)) == 0)
		blob = c.blob;
	else
		blob = TREE_NO_BLOB;
	probe_release(m, i, blob, &l);
	driver__learned_free(&l);
out:
	node_copy_free(&c);
	return rc;
}

/* Resolves name, a relative href of the page at base, as a browser does:
 * base up to the last '/' of its path (its query dropped), then name
 * percent-encoding all but RFC 3986's unreserved characters, and a '/' for
 * a directory. */
static char *child_url(const char *base, const char *name, bool is_dir)
{
	const char *path = strstr(base, "://");
	size_t blen = strcspn(base, "?#"), n;
	char *url;

	path = path != NULL ? path + 3 + strcspn(path + 3, "/?#") : base;
	while (blen > (size_t)(path - base) && base[blen - 1] != '/')
		blen--;
	url = malloc(blen + strlen(name) * 3 + 3);
	if (url == NULL)
		return NULL;
	memcpy(url, base, blen);
	n = blen;
	if (n == 0 || url[n - 1] != '/')
		url[n++] = '/'; /* "http://h" lists as "http://h/" */
	for (const unsigned char *p = (const unsigned char *)name; *p; p++) {
		if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		    (*p >= '0' && *p <= '9') || *p == '-' || *p == '.' ||
		    *p == '_' || *p == '~')
			url[n++] = (char)*p;
		else
			n += (size_t)snprintf(url + n, 4, "%%%02X", *p);
	}
	if (is_dir)
		url[n++] = '/';
	url[n] = '\0';
	return url;
}

/* A node for a listed entry, built outside the lock: most of a merge's
 * work is allocation, and none of it needs the namespace. NULL when
 * memory ran out. */
static struct tree_node *entry_node(const char *base,
				    const struct tree_index_entry *ent)
{
	struct tree_node *n = tree_node_new(ent->name, ent->is_dir);
	char *url = n == NULL ? NULL
		    : ent->url != NULL
			    ? strdup(ent->url)
			    : child_url(base, ent->name, ent->is_dir);
	struct tree_file *f;

	if (url == NULL)
		goto fail;
	if (ent->is_dir) {
		n->dir->list_url = url;
		url = NULL;
	} else if ((f = tree_node_file(n)) == NULL ||
		   (f->urls = calloc(1, sizeof(*f->urls))) == NULL) {
		goto fail_url;
	} else {
		f->urls[0] = url;
		f->nurls = 1;
		url = NULL;
		/* A size the page states exactly is taken; a probe confirms
		 * it at the first open. */
		n->has_size = ent->has_size;
		n->size = ent->size;
		if (ent->etag != NULL && (f->etag = strdup(ent->etag)) == NULL)
			goto fail;
		if (ent->identity != NULL &&
		    (f->identity = strdup(ent->identity)) == NULL)
			goto fail;
	}
	if (ent->has_mtime)
		n->mtime = ent->mtime;
	return n;
fail_url:
	free(url);
fail:
	tree_node_free(n);
	return NULL;
}

/* Adds or refreshes one listed entry under directory d, as seen by the
 * merge of generation gen: a new name links *fresh (which the tree then
 * owns: *fresh becomes NULL). Caller holds ns->mu. */
static int merge_entry(struct tree_ns *ns, uint32_t d, uint32_t gen,
		       const struct tree_index_entry *ent,
		       struct tree_node **fresh)
{
	uint32_t c = tree_ns_child(ns, d, ent->name);
	struct tree_node *n;
	int rc;

	if (c == TREE_NO_NODE) {
		(*fresh)->seen_gen = gen;
		rc = tree_ns_link(ns, d, *fresh, &c);
		if (rc == 0)
			*fresh = NULL;
		return rc;
	}
	n = tree_ns_get(ns, c);
	if (n->is_dir != ent->is_dir)
		return 0; /* a file became a directory: keep what we have */
	n->gone = false;
	n->seen_gen = gen;
	if (ent->has_mtime)
		n->mtime = ent->mtime;
	return 0;
}

/* Merges a parsed page into directory d in batches of DRIVER_LIST_BATCH
 * entries: each batch's nodes are built outside the lock, then linked in
 * one short hold of it, and the thread yields before the next, so that an
 * operation waiting for the lock gets it. Then it marks what the page no
 * longer lists as gone: a node the page still lists is never gone in
 * between. Caller holds the directory's listing (d->listing). */
static int merge_page(struct driver_mount *m, uint32_t d, const char *base,
		      const struct tree_index_entry *ents, uint32_t nents)
{
	struct tree_ns *ns = m->ns;
	struct tree_node *batch[DRIVER_LIST_BATCH];
	uint32_t gen, done = 0;
	int rc;

	pthread_mutex_lock(&ns->mu);
	gen = ++tree_ns_get(ns, d)->dir->list_gen;
	rc = tree_ns_reserve(ns, d, nents);
	pthread_mutex_unlock(&ns->mu);
	while (rc == 0 && done < nents) {
		uint32_t n = nents - done > DRIVER_LIST_BATCH
				     ? DRIVER_LIST_BATCH
				     : nents - done;
		uint32_t built = 0, i;

		for (; built < n; built++) {
			batch[built] = entry_node(base, &ents[done + built]);
			if (batch[built] == NULL) {
				rc = -ENOMEM;
				break;
			}
		}
		pthread_mutex_lock(&ns->mu);
		for (i = 0; i < built && rc == 0; i++)
			rc = merge_entry(ns, d, gen, &ents[done + i],
					 &batch[i]);
		pthread_mutex_unlock(&ns->mu);
		/* The names that were there already: their nodes were not
		 * needed. */
		for (i = 0; i < built; i++)
			tree_node_free(batch[i]);
		done += n;
		sched_yield();
	}
	/* Only a whole page says what is gone. */
	for (uint32_t i = 0, more = rc == 0; more;) {
		pthread_mutex_lock(&ns->mu);
		for (uint32_t end = i + DRIVER_LIST_BATCH;
		     i < end && i < tree_ns_get(ns, d)->dir->nchildren; i++) {
			struct tree_node *c = tree_ns_get(
				ns, tree_ns_get(ns, d)->dir->children[i]);

			c->gone = c->seen_gen != gen;
		}
		more = i < tree_ns_get(ns, d)->dir->nchildren;
		pthread_mutex_unlock(&ns->mu);
	}
	return rc;
}

int driver__dir_list(struct driver_mount *m, uint32_t d, bool fresh,
		     uint64_t deadline_ns)
{
	struct tree_ns *ns = m->ns;
	struct tree_index_entry *ents = NULL;
	struct timespec until = monotonic_ts(deadline_ns);
	struct fetch_config fc;
	uint32_t nents = 0;
	char *url = NULL, *page = NULL, *final = NULL, err[1024];
	uint64_t now;
	bool merged = false;
	size_t len;
	int rc = 0;

	pthread_mutex_lock(&ns->mu);
	/* One thread reads a directory's page at a time. The others wait
	 * for its result rather than read the page again, or, for a lookup
	 * when there is a listing already, use that one (a refresh only adds
	 * and drops names): a name is found at once during a refresh. The
	 * wait ends at this request's own deadline. */
	while (tree_ns_get(ns, d)->dir->listing &&
	       (fresh || tree_ns_get(ns, d)->dir->listed_ns == 0) && rc == 0)
		rc = pthread_cond_timedwait(&ns->listed, &ns->mu, &until);
	if (rc != 0 && tree_ns_get(ns, d)->dir->listing &&
	    (fresh || tree_ns_get(ns, d)->dir->listed_ns == 0)) {
		char path[PATH_MAX];

		tree_ns_path(ns, d, path, sizeof(path));
		pthread_mutex_unlock(&ns->mu);
		obs_log(FS_LOG_ERR,
			"cannot list /%s: its listing by another request was "
			"still under way at the deadline (-o read_timeout=)",
			path);
		return -EIO;
	}
	rc = 0;
	if (tree_ns_get(ns, d)->dir->listing) {
		pthread_mutex_unlock(&ns->mu);
		return 0;
	}
	now = fs__now_ns(); /* after the wait: the other's listing is fresh */
	if (tree_ns_get(ns, d)->dir->list_url != NULL &&
	    (tree_ns_get(ns, d)->dir->listed_ns == 0 ||
	     now - tree_ns_get(ns, d)->dir->listed_ns > m->listing_ttl_ns)) {
		url = strdup(tree_ns_get(ns, d)->dir->list_url);
		tree_ns_get(ns, d)->dir->listing = url != NULL;
	}
	pthread_mutex_unlock(&ns->mu);
	if (url == NULL)
		return 0; /* fresh, or not an index */
	driver__mount_bound(m, deadline_ns, &fc);
	if (m->s3 != NULL) {
		err[0] = '\0';
		rc = tree_s3_list(m->s3, &fc, m->creds, url, false, &ents,
				  &nents, err, sizeof(err));
		if (rc == 0 && err[0] != '\0')
			obs_log(FS_LOG_WARN, "%s", err);
		final = rc == 0 ? strdup(url) : NULL;
		if (rc == 0 && final == NULL)
			rc = -ENOMEM;
	} else {
		rc = fetch_get(&fc, url, DRIVER_LISTING_MAX, &page, &len,
			       &final, err, sizeof(err));
		if (rc == 0)
			rc = tree_dirindex_parse(page, len, &ents, &nents, err,
						 sizeof(err));
	}
	if (rc != 0) {
		obs_log(mount_stopping(m) ? FS_LOG_INFO : FS_LOG_ERR,
			"cannot list %s: %s", url, err);
		goto out;
	}
	free(page); /* parsed: up to 64 MiB that the merge does not need */
	page = NULL;
	/* Links are relative to where the page came from, after its
	 * redirects. */
	rc = merge_page(m, d, final, ents, nents);
	if (rc != 0)
		obs_log(FS_LOG_ERR, "cannot list %s: %s", url, strerror(-rc));
	merged = true;
out:
	pthread_mutex_lock(&ns->mu);
	/* A page that could not be read is asked again at the next use. */
	if (merged)
		tree_ns_get(ns, d)->dir->listed_ns = now;
	tree_ns_get(ns, d)->dir->listing = false;
	pthread_cond_broadcast(&ns->listed);
	pthread_mutex_unlock(&ns->mu);
	tree_dirindex_free(ents, nents);
	free(page);
	free(final);
	free(url);
	return rc != 0 ? -EIO : 0;
}

/* serve: the daemon's part of the mount: the cache opened again, the
 * engine started with its log and inval hooks, the tree built from what
 * the parent learned, then libfuse's loop until an unmount or a signal,
 * and the end of the mount told to everything that waits on the
 * network. */
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include <fuse_lowlevel.h>

#include "fs/auth/auth.h"
#include "fs/driver/driver_int.h"
#include "fs/engine/engine.h"
#include "fs/fs.h"
#include "fs/obs/obs.h"
#include "fs/tree/tree.h"

/* Adds a manifest's entry to the namespace: the node takes its URLs,
 * digests and regions (the entry keeps its path). Caller holds ns->mu. */
static int manifest_node(struct tree_ns *ns, struct tree_manifest_entry *me)
{
	struct tree_node *n;
	uint32_t node;
	int rc = tree_ns_add_path(ns, me->path, &node);

	if (rc != 0)
		return rc;
	n = tree_ns_get(ns, node);
	n->has_size = me->has_size;
	n->size = me->size;
	if (me->has_mode)
		n->mode = (uint16_t)me->mode;
	if (me->has_mtime)
		n->mtime = me->mtime;
	if (me->has_sha256 || me->block_sha256 != NULL || me->regions != NULL) {
		struct tree_file *f = tree_node_file(n);

		if (f == NULL)
			return -ENOMEM;
		f->has_sha256 = me->has_sha256;
		memcpy(f->sha256, me->sha256, sizeof(f->sha256));
		f->dblock = me->block_size;
		f->dblocks = me->block_sha256;
		f->ndblocks = me->nblocks;
		me->block_sha256 = NULL;
		me->nblocks = 0;
		f->regions = me->regions;
		f->nregions = me->nregions;
		me->regions = NULL;
		me->nregions = 0;
	}
	rc = tree_ns_set_urls(ns, node, me->urls, me->nurls);
	me->urls = NULL;
	me->nurls = 0;
	return rc;
}

/* Fills the namespace from what prepare() found. Caller holds ns->mu. */
static int build_tree(struct driver_mount *m, const struct fs_opts *o,
		      struct driver_prepared *p)
{
	struct tree_ns *ns = m->ns;
	uint32_t node;
	int rc;

	switch (p->kind) {
	case DRIVER_MOUNT_URL: {
		struct tree_node *n;
		struct tree_file *f;
		struct cache_id id;
		char **urls;

		cache_id_from_string(p->identity, &id);
		rc = tree_ns_add(ns, 0, p->name, false, &node);
		if (rc != 0)
			return rc;
		n = tree_ns_get(ns, node);
		urls = calloc(p->nurls, sizeof(*urls));
		if (urls == NULL)
			return -ENOMEM;
		for (uint32_t i = 0; i < p->nurls && rc == 0; i++)
			if ((urls[i] = strdup(p->urls[i])) == NULL)
				rc = -ENOMEM;
		if (rc != 0) {
			for (uint32_t i = 0; i < p->nurls; i++)
				free(urls[i]);
			free(urls);
			return rc;
		}
		rc = tree_ns_set_urls(ns, node, urls, p->nurls);
		if (rc != 0)
			return rc;
		n->has_size = true;
		n->size = p->learned.size;
		n->mtime = p->learned.mtime;
		if (o->has_sha256) {
			if ((f = tree_node_file(n)) == NULL)
				return -ENOMEM;
			f->has_sha256 = true;
			memcpy(f->sha256, o->sha256, sizeof(f->sha256));
		}
		rc = engine_blob_add(m->engine, p->name,
				     p->learned.open_ended ? ENGINE_SIZE_OPEN
							   : n->size,
				     &id, &n->blob);
		if (rc == 0 && p->learned.open_ended)
			engine_blob_set_open(m->engine, n->blob);
		if (rc == 0)
			rc = engine_blob_digests(
				m->engine, n->blob,
				o->has_sha256 ? o->sha256 : NULL, 0, NULL, 0);
		if (rc == 0)
			rc = engine_blob_ready(
				m->engine, n->blob, p->learned.sources,
				p->learned.nsources, p->learned.queued);
		return rc;
	}
	case DRIVER_MOUNT_MANIFEST:
		for (uint32_t i = 0; i < p->manifest.nfiles; i++) {
			rc = manifest_node(ns, &p->manifest.files[i]);
			if (rc != 0)
				return rc;
		}
		return 0;
	case DRIVER_MOUNT_INDEX:
		tree_ns_get(ns, 0)->dir->list_url =
			p->s3.bucket != NULL
				? tree_s3_dir_url(&p->s3, p->s3.path)
				: strdup(o->url);
		return tree_ns_get(ns, 0)->dir->list_url != NULL ? 0 : -ENOMEM;
	}
	return 0;
}

/* The engine's inval hook: queues for the thread that tells the kernel. */
static void queue_inval(void *ctx, uint32_t b, const char *name, uint64_t ino,
			uint64_t start, uint64_t end)
{
	driver__inval_queue(ctx, b, name, ino, start, end);
}

/* The URLs a manifest lists, all its files': the most sources the engine
 * can have, since a file's blob is readied once, with at most its URLs
 * (driver__learn). The engine's and the scheduler's tables are
 * allocated for that many at the mount (245 B a source), so the bound
 * is the exact one rather than TREE_MANIFEST_URLS_MAX a file
 * (docs/fs-notes.md, "What a tree entry costs"). */
static uint32_t manifest_urls(const struct driver_prepared *p)
{
	uint64_t n = 0;

	for (uint32_t i = 0; i < p->manifest.nfiles; i++)
		n += p->manifest.files[i].nurls;
	return n == 0 ? 1 : n > UINT32_MAX ? UINT32_MAX : (uint32_t)n;
}

/* The engine's configuration from the options and what the parent
 * learned; its inval_ctx is set once the invalidator exists. */
static void engine_config(const struct fs_opts *o, const struct driver_mount *m,
			  const struct driver_prepared *p,
			  struct engine_config *out)
{
	struct engine_config ec;

	memset(&ec, 0, sizeof(ec));
	ec.lanes = o->lanes;
	ec.host_lanes = o->host_lanes;
	ec.read_timeout_s = o->read_timeout_s;
	ec.stall_timeout_s = o->stall_timeout_s;
	ec.retry_after_max_s = o->retry_after_max_s;
	ec.readahead_ms = o->readahead_ms;
	ec.chunk = o->chunk;
	ec.inflight_max = o->inflight_max;
	ec.speculate = o->speculate;
	ec.kernel_ahead = m->kernel_ahead;
	ec.creds_change = auth_creds_changeable(p->creds);
	ec.fetch = m->fetch;
	ec.max_blobs = p->kind == DRIVER_MOUNT_MANIFEST ? p->manifest.nfiles
		       : p->kind == DRIVER_MOUNT_URL	? 1
						     : DRIVER_INDEX_MAX_FILES;
	ec.max_sources = p->kind == DRIVER_MOUNT_URL ? p->nurls
			 : p->kind == DRIVER_MOUNT_MANIFEST
				 ? manifest_urls(p)
				 : DRIVER_INDEX_MAX_FILES;
	if (ec.max_blobs == 0)
		ec.max_blobs = 1;
	ec.log = obs_log_hook;
	ec.log_fields = obs_log_fields_hook;
	ec.inval = queue_inval;
	*out = ec;
}

/* In the daemon, before the session serves: opens the cache, starts the
 * engine (with the log and inval hooks), the credentials' thread and the
 * sizes' probers, and builds the tree. 0, a negative errno (logged), or
 * 1 when the cache did not open (driver__open_cache). */
static int start_engine(const struct fs_opts *o, struct driver_mount *m,
			struct driver_prepared *p)
{
	struct engine_config ec;
	int rc;

	/* Blocks (64 KiB) and reads (1 MiB) are allocated and freed at a
	 * high rate: keep them on the heap rather than in fresh mappings,
	 * whose page faults cost a cold read CPU (docs/fs-notes.md). */
	mallopt(M_MMAP_THRESHOLD, 8 * 1024 * 1024);
	mallopt(M_TRIM_THRESHOLD, 128 * 1024 * 1024);
	rc = driver__open_cache(o, false, &m->engine, &m->cache);
	if (rc != 0)
		return rc;
	engine_config(o, m, p, &ec);
	rc = driver__inval_new(ec.max_blobs, &m->inval);
	ec.inval_ctx = m->inval;
	if (rc == 0)
		rc = engine_new(&ec, m->cache, &m->engine);
	if (rc == 0 && p->creds != NULL)
		rc = auth_creds_start(p->creds);
	if (rc != 0) {
		obs_log(FS_LOG_ERR, "cannot start: %s", strerror(-rc));
		return rc;
	}
	pthread_mutex_lock(&m->ns->mu);
	rc = build_tree(m, o, p);
	pthread_mutex_unlock(&m->ns->mu);
	/* The tree has taken what it keeps of the manifest (digests, the
	 * URLs that are not a prefix and the path); the rest, the entries,
	 * their paths and URLs, 250 B an entry, goes now rather than at the
	 * unmount, and its pages back to the kernel: the trim threshold
	 * above keeps glibc from doing it, and the tree's nodes and names
	 * are in mappings of their own, so most of the heap is free. */
	if (p->kind == DRIVER_MOUNT_MANIFEST) {
		tree_manifest_free(&p->manifest);
		malloc_trim(0);
	}
	/* As many probers as the origin may have connections. */
	if (rc == 0)
		rc = driver__sizes_new(m, o->host_lanes, &m->sizes);
	if (rc == 0)
		rc = engine_start(m->engine);
	if (rc == 0)
		rc = driver__plan_set_new(m, o->readahead_ms, o->host_lanes,
					  o->listahead == 0, &m->plans);
	if (rc == 0) {
		rc = driver__plan_listen(m->plans, m->allow_other);
		/* Without the socket the mount serves; plans are refused. */
		if (rc != 0)
			obs_log(FS_LOG_WARN,
				"no control socket for read plans: %s",
				strerror(-rc));
		rc = 0;
	}
	if (rc != 0) {
		obs_log(FS_LOG_ERR, "cannot start: %s", strerror(-rc));
		return rc;
	}
	obs_log(FS_LOG_INFO, "mounted %s on %s", o->url, o->mountpoint);
	return 0;
}

/* After the mount is live and the process is a daemon: opens the cache,
 * starts the engine, builds the tree and serves until unmounted or
 * signalled (start_engine, then libfuse's loop). Returns 0 (an unmount,
 * or a signal libfuse handles); else what start_engine returned or a
 * negative errno (logged). */
int driver__serve(struct fs_opts *o, struct fuse_session *se,
		  struct driver_mount *m, struct driver_prepared *p,
		  struct driver_exit_guard *g, int *metrics_fd)
{
	struct fuse_loop_config *lc;
	struct obs_metricsd *metricsd = NULL;
	int rc;

	rc = start_engine(o, m, p);
	if (rc != 0)
		return rc;
	lc = fuse_loop_cfg_create();
	if (lc == NULL)
		return -ENOMEM;
	fuse_loop_cfg_set_clone_fd(lc, 1);
	fuse_loop_cfg_set_max_threads(lc, DRIVER_THREADS);
	rc = driver__inval_start(m->inval, se);
	if (rc != 0) {
		obs_log(FS_LOG_ERR, "cannot start: %s", strerror(-rc));
		fuse_loop_cfg_destroy(lc);
		return rc;
	}
	rc = driver__exit_guard_start(g, se, m->engine);
	if (rc == 0 && *metrics_fd >= 0) {
		/* The socket was bound before the fork; it is the server's. */
		struct obs_view v;

		driver__mount_view(m, &v);
		rc = obs_metricsd_start(*metrics_fd, m->metrics, &v, &metricsd);
		*metrics_fd = -1;
		if (rc == 0)
			obs_log(FS_LOG_INFO, "metrics at http://%s/metrics",
				o->metrics);
	}
	if (rc != 0) {
		obs_log(FS_LOG_ERR, "cannot start: %s", strerror(-rc));
		driver__inval_stop(m->inval);
		fuse_loop_cfg_destroy(lc);
		return rc;
	}
	rc = fuse_session_loop_mt(se, lc);
	/* The session has ended, and libfuse no longer says so: first the
	 * mount's own flag, which every probe, listing and wait for
	 * credentials still under way observes, and the guard, which bounds
	 * the teardown from here (waking the reads it has not woken). */
	driver__mount_end(m);
	driver__exit_guard_ended(g);
	driver__sizes_free(m->sizes);
	m->sizes = NULL;
	driver__plan_set_free(m->plans);
	m->plans = NULL;
	/* Before the engine goes: a scrape reads it. */
	obs_metricsd_stop(metricsd);
	/* A signal libfuse handles (TERM, INT, HUP) ends the session as an
	 * unmount does: a clean end, not a failure. */
	if (rc > 0) {
		obs_log(FS_LOG_INFO, "unmounting %s on %s", o->mountpoint,
			rc == SIGTERM  ? "SIGTERM"
			: rc == SIGHUP ? "SIGHUP"
			: rc == SIGINT ? "SIGINT"
				       : "a signal");
		rc = 0;
	}
	driver__inval_stop(m->inval); /* the session is destroyed next */
	fuse_loop_cfg_destroy(lc);
	return rc;
}

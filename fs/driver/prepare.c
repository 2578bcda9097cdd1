/* prepare: everything the mount needs before libfuse mounts it, in the
 * parent, so that an error is one line on the terminal: libcurl, the
 * fetch configuration and credentials, the origins the headers may go
 * to, the proxies, the cache (opened once to check it, then closed: an
 * LMDB environment must not cross the fork), the source's probe, manifest
 * or first listing, and the namespace. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fs/auth/auth.h"
#include "fs/cli/cli.h"
#include "fs/driver/driver_int.h"
#include "fs/engine/engine.h"
#include "fs/fs.h"
#include "fs/obs/obs.h"
#include "fs/tree/tree.h"

/* Keeps the cache's last message, so that the terminal gets one line. */
static void keep_message(void *ctx, enum cache_log_level level, const char *msg)
{
	(void)level;
	snprintf(ctx, 512, "%s", msg);
}

/* Opens the cache. On the terminal (`quiet`) a failure is one line with
 * the cache's own detail; in the daemon the detail goes to the log. */
int driver__open_cache(const struct fs_opts *o, bool quiet,
		       struct engine **engine, struct cache **out)
{
	const char *dir = o->cache_dir;
	char detail[512] = "";
	struct cache_config cc = {.dir = dir,
				  .shared = o->cache_shared,
				  .sync = (enum cache_sync)o->cache_sync,
				  .budget_bytes = o->cache_size,
				  .log = obs_log_cache,
				  .on_lost = engine_on_lost,
				  .lost_ctx = engine,
				  .on_evicted = engine_on_evicted,
				  .evicted_ctx = engine};
	int rc;

	if (quiet) {
		cc.log = keep_message;
		cc.log_ctx = detail;
	}
	rc = cache_open(&cc, out);
	if (rc == 0)
		return 0;
	if (detail[0] != '\0')
		return driver__fail("cache_dir: %s", detail);
	return driver__fail("cache_dir %s: %s", dir,
			    rc == -EPROTO
				    ? "written by an incompatible version of "
				      "pacefs"
				    : strerror(-rc));
}

/* Makes cache_dir absolute; it exists once the cache has been opened. */
static int absolute_cache_dir(char **dir)
{
	char *abs = realpath(*dir, NULL);

	if (abs == NULL)
		return driver__fail("cache_dir %s: %s", *dir, strerror(errno));
	free(*dir);
	*dir = abs;
	return 0;
}

static void fetch_config_from(const struct fs_opts *o, struct fetch_config *f)
{
	memset(f, 0, sizeof(*f));
	f->max_lanes = o->lanes;
	f->connect_timeout_ms = (long)o->connect_timeout_s * 1000;
	f->cafile = o->cafile;
	f->insecure = o->insecure;
	f->chunk = o->chunk;
	f->headers = (const char *const *)o->headers;
	f->nheaders = o->nheaders;
}

void driver__prepared_free(struct driver_prepared *p)
{
	if (p->s3.bucket != NULL && p->urls != NULL)
		free(p->urls[0]); /* the object's URL, made here */
	free(p->urls);
	free(p->identity);
	for (size_t i = 0; i < p->norigins; i++)
		free(p->origins[i]);
	free(p->origins);
	driver__learned_free(&p->learned);
	tree_manifest_free(&p->manifest);
	tree_s3_free(&p->s3);
	auth_creds_free(p->creds);
	fetch_auth_free(p->auth);
}

/* Credentials that change: an s3:// source, header files, a command. */
static int make_creds(const struct fs_opts *o, struct driver_prepared *p,
		      struct fetch_config *fc)
{
	struct auth_creds_config cc = {.s3 = p->s3.bucket != NULL,
				       .readable_ok = o->creds_readable,
				       .auth_command = o->auth_command,
				       .header_files = o->header_files,
				       .nheader_files = o->nheader_files,
				       .headers = o->headers,
				       .nheaders = o->nheaders,
				       .uid = geteuid(),
				       .timeout_s = o->read_timeout_s,
				       .log = obs_log_hook};
	char err[1024];
	int rc;

	if (!cc.s3 && o->nheader_files == 0 && o->auth_command == NULL)
		return 0;
	rc = fetch_auth_new(cc.s3 ? p->s3.region : NULL, &p->auth);
	if (rc != 0)
		return driver__fail("out of memory");
	rc = auth_creds_new(&cc, p->auth, &p->creds, err, sizeof(err));
	if (rc != 0)
		return driver__fail("%s", err);
	fc->auth = p->auth;
	return 0;
}

/* Adds url's origin to the ones the configured headers may go to, once. */
static int add_origin(struct driver_prepared *p, const char *url)
{
	char *o = NULL, **grown;
	int rc = fetch_url_origin(url, &o);

	if (rc != 0)
		return rc == -ENOMEM
			       ? driver__fail("out of memory")
			       : driver__fail("URL '%s': curl cannot parse it",
					      url);
	for (size_t i = 0; i < p->norigins; i++)
		if (strcmp(p->origins[i], o) == 0) {
			free(o);
			return 0;
		}
	grown = realloc(p->origins, (p->norigins + 1) * sizeof(*grown));
	if (grown == NULL) {
		free(o);
		return driver__fail("out of memory");
	}
	p->origins = grown;
	p->origins[p->norigins++] = o;
	return 0;
}

/* The configured headers go to the origins of the URLs the user named (the
 * URL, its mirrors, a manifest's URLs, the index's URL) and to no other:
 * not to where a redirect leads, nor to a link an index page points to
 * elsewhere. */
static int header_origins(const struct fs_opts *o, struct fetch_config *fc,
			  struct driver_prepared *p)
{
	if (o->nheaders == 0 && p->auth == NULL)
		return 0;
	if (p->s3.bucket != NULL) {
		char *u = tree_s3_origin_url(&p->s3);
		int rc = u != NULL ? add_origin(p, u)
				   : driver__fail("out of memory");

		free(u);
		if (rc != 0)
			return 1;
	} else if (p->kind != DRIVER_MOUNT_MANIFEST &&
		   add_origin(p, o->url) != 0) {
		return 1;
	}
	for (unsigned i = 0; i < o->nmirrors; i++)
		if (add_origin(p, o->mirrors[i]) != 0)
			return 1;
	for (uint32_t i = 0;
	     p->kind == DRIVER_MOUNT_MANIFEST && i < p->manifest.nfiles; i++)
		for (uint32_t u = 0; u < p->manifest.files[i].nurls; u++)
			if (add_origin(p, p->manifest.files[i].urls[u]) != 0)
				return 1;
	fc->header_origins = (const char *const *)p->origins;
	fc->nheader_origins = p->norigins;
	return 0;
}

/* An s3://BUCKET/KEY source: its object's URL, probed signed; a failure
 * is explained by what the bucket says. */
static int prepare_s3_object(const struct fs_opts *o, struct fetch_config *fc,
			     struct cache *cache, struct driver_prepared *p)
{
	struct driver_learn_args args;
	char err[1024];
	int rc;

	p->urls[0] = tree_s3_object_url(&p->s3, p->s3.path);
	p->nurls = 1;
	p->identity = tree_s3_identity(&p->s3, p->s3.path);
	if (p->urls[0] == NULL || p->identity == NULL)
		return driver__fail("out of memory");
	memset(&args, 0, sizeof(args));
	args.identity = p->identity;
	args.urls = (const char *const *)p->urls;
	args.nurls = 1;
	args.sha256 = o->has_sha256 ? o->sha256 : NULL;
	args.revalidate_s = o->revalidate_s;
	args.object_store = true;
	rc = driver__learn(fc, cache, &args, &p->learned, err, sizeof(err));
	if (rc != 0 && strstr(err, ": HTTP ") != NULL)
		tree_s3_explain(&p->s3, fc, p->creds, p->s3.path, err,
				sizeof(err));
	return rc != 0 ? driver__fail("%s", err) : 0;
}

/* Before the mount, on the terminal: probe the URL, read the manifest, or
 * read the top directory index, so that a bad source is one line and exit
 * status 1 with nothing mounted. */
static int prepare(const struct fs_opts *o, struct fetch_config *fc,
		   struct cache *cache, struct driver_prepared *p)
{
	struct tree_index_entry *ents = NULL;
	struct driver_learn_args args;
	struct fetch_config b;
	char err[1024], *page = NULL;
	uint32_t nents = 0;
	size_t len;
	int rc;

	if (p->kind == DRIVER_MOUNT_MANIFEST) {
		rc = tree_manifest_load(o->url, &p->manifest, err, sizeof(err));
		if (rc != 0)
			return driver__fail("%s", err);
	}
	if (header_origins(o, fc, p) != 0)
		return 1;
	if (p->s3.bucket == NULL &&
	    cli_proxy_clear_check(
		    o, p->kind == DRIVER_MOUNT_MANIFEST ? &p->manifest : NULL,
		    fc->proxies, err, sizeof(err)) != 0)
		return driver__fail("%s", err);
	/* The mount's own first requests are bounded as a request's are:
	 * by read_timeout (a listing that never ends, a probe that never
	 * answers). */
	b = *fc;
	b.deadline_ms =
		(fs__now_ns() + (uint64_t)o->read_timeout_s * 1000000000u) /
		1000000u;
	fc = &b;
	switch (p->kind) {
	case DRIVER_MOUNT_URL:
		p->urls = calloc(o->nmirrors + 2, sizeof(*p->urls));
		if (p->urls == NULL)
			return driver__fail("out of memory");
		p->urls[0] = o->url;
		if (p->s3.bucket != NULL)
			return prepare_s3_object(o, fc, cache, p);
		for (unsigned i = 0; i < o->nmirrors; i++)
			p->urls[i + 1] = o->mirrors[i];
		p->nurls = o->nmirrors + 1;
		p->identity = auth_sources_identity(
			(const char *const *)p->urls, p->nurls);
		if (p->identity == NULL)
			return driver__fail("out of memory");
		memset(&args, 0, sizeof(args));
		args.identity = p->identity;
		args.urls = (const char *const *)p->urls;
		args.nurls = p->nurls;
		args.sha256 = o->has_sha256 ? o->sha256 : NULL;
		args.revalidate_s = o->revalidate_s;
		rc = driver__learn(fc, cache, &args, &p->learned, err,
				   sizeof(err));
		return rc != 0 ? driver__fail("%s", err) : 0;
	case DRIVER_MOUNT_MANIFEST:
		return 0; /* loaded above */
	case DRIVER_MOUNT_INDEX:
		if (p->s3.bucket != NULL) {
			char *dir = tree_s3_dir_url(&p->s3, p->s3.path);

			rc = dir == NULL
				     ? -ENOMEM
				     : tree_s3_list(&p->s3, fc, p->creds, dir,
						    true, &ents, &nents, err,
						    sizeof(err));
			free(dir);
			tree_dirindex_free(ents, nents);
			return rc != 0 ? driver__fail("%s", err) : 0;
		}
		rc = fetch_get(fc, o->url, 64u << 20, &page, &len, NULL, err,
			       sizeof(err));
		if (rc == 0)
			rc = tree_dirindex_parse(page, len, &ents, &nents, err,
						 sizeof(err));
		free(page);
		tree_dirindex_free(ents, nents);
		return rc != 0 ? driver__fail("%s", err) : 0;
	}
	return 0;
}

/* Everything the mount needs before libfuse mounts it, checked here in
 * the parent so that an error is one line on the terminal: libcurl, the
 * fetch configuration and credentials, the proxies, the cache, the
 * source's probe or listing (prepare) and the namespace. Returns 0, or 1
 * with the line written; what it made is m's and p's to free. */
int driver__prepare_mount(struct fs_opts *o, struct driver_mount *m,
			  struct driver_prepared *p)
{
	struct cache *cache = NULL;
	char err[1024];
	int rc;

	if (fetch_global_init() != 0)
		return driver__fail("cannot initialise libcurl");
	if (o->insecure)
		obs_log(FS_LOG_WARN, "insecure: TLS certificates and host "
				     "names are not verified");
	/* Before the first request: the probe is counted too. */
	if (obs_metrics_new(o->mountpoint, o->metrics_labels,
			    o->nmetrics_labels, &m->metrics) != 0)
		return driver__fail("out of memory");
	fetch_config_from(o, &m->fetch);
	m->fetch.on_request = obs_metrics_on_request;
	m->fetch.request_ctx = m->metrics;
	if (make_creds(o, p, &m->fetch) != 0)
		return 1;
	m->s3 = p->s3.bucket != NULL ? &p->s3 : NULL;
	m->creds = p->creds;
	/* A key is a name: "a/../x" is that object, not "x". */
	m->fetch.path_as_is = m->s3 != NULL;
	m->read_timeout_ns = (uint64_t)o->read_timeout_s * 1000000000u;
	if (o->proxy != NULL &&
	    fetch_proxies_new(o->proxy, (uint64_t)o->proxy_reset_s * 1000u,
			      &m->fetch.proxies, err, sizeof(err)) != 0)
		return driver__fail("%s", err);
	/* Open the cache once here to report problems on the terminal; the
	 * daemon reopens it, as an LMDB environment must not cross fork. */
	if (driver__open_cache(o, true, &m->engine, &cache) != 0 ||
	    absolute_cache_dir(&o->cache_dir) != 0)
		return 1;
	rc = prepare(o, &m->fetch, cache, p);
	cache_close(cache);
	if (rc != 0)
		return 1;
	if (tree_ns_new(&m->ns) != 0)
		return driver__fail("out of memory");
	m->uid = getuid();
	m->gid = getgid();
	clock_gettime(CLOCK_REALTIME, &m->mtime);
	m->attr_timeout = o->attr_timeout_s;
	m->entry_timeout = o->entry_timeout_s;
	m->listing_ttl_ns = (uint64_t)o->listing_ttl_s * 1000000000u;
	m->revalidate_s = o->revalidate_s;
	return 0;
}

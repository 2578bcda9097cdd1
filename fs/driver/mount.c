/* mount: the pacefs command: check every input, probe the origin (or read
 * the manifest, or the top directory index), mount, daemonize and serve
 * until unmounted. Every failure before the mount is one line on stderr
 * and exit status 1, with nothing left mounted. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <fuse_lowlevel.h>

#include "fs/driver/cachecmd_int.h"
#include "fs/driver/driver_int.h"
#include "fs/driver/log_int.h"
#include "fs/driver/metrics_int.h"
#include "fs/engine/engine.h"
#include "fs/tree/tree.h"
#include "fs/auth/auth.h"
#include "fs/fs.h"

static int fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static int fail(const char *fmt, ...)
{
	char line[2048], safe[4 * 2048]; /* escaped, every byte fits */
	va_list ap;

	va_start(ap, fmt);
	fs__format_shown(line, sizeof(line), fmt, ap);
	va_end(ap);
	/* The reason may quote what a server sent. */
	fprintf(stderr, "pacefs: %s\n", fs__escape(line, safe, sizeof(safe)));
	return 1;
}

static int check_url(const char *url)
{
	if (strncmp(url, "http://", 7) != 0 && strncmp(url, "https://", 8) != 0)
		return fail("URL '%s': not an http:// or https:// URL", url);
	if (url[url[4] == 's' ? 8 : 7] == '\0' ||
	    url[url[4] == 's' ? 8 : 7] == '/')
		return fail("URL '%s': no host", url);
	return 0;
}

/* Checks the mountpoint and replaces it by its absolute path (the daemon
 * changes directory to /). */
static int check_mountpoint(char **mp)
{
	struct stat st;
	char *abs;

	if (stat(*mp, &st) != 0)
		return fail("mountpoint %s: %s", *mp, strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return fail("mountpoint %s: %s", *mp, strerror(ENOTDIR));
	abs = realpath(*mp, NULL);
	if (abs == NULL)
		return fail("mountpoint %s: %s", *mp, strerror(errno));
	free(*mp);
	*mp = abs;
	return 0;
}

/* Keeps the cache's last message, so that the terminal gets one line. */
static void keep_message(void *ctx, enum cache_log_level level, const char *msg)
{
	(void)level;
	snprintf(ctx, 512, "%s", msg);
}

/* Opens the cache. On the terminal (`quiet`) a failure is one line with
 * the cache's own detail; in the daemon the detail goes to the log. */
static int open_cache(const struct fs_opts *o, bool quiet,
		      struct fs_engine **engine, struct cache **out)
{
	const char *dir = o->cache_dir;
	char detail[512] = "";
	struct cache_config cc = {.dir = dir,
				  .shared = o->cache_shared,
				  .sync = (enum cache_sync)o->cache_sync,
				  .budget_bytes = o->cache_size,
				  .log = fs__log_cache,
				  .on_lost = fs__engine_on_lost,
				  .lost_ctx = engine,
				  .on_evicted = fs__engine_on_evicted,
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
		return fail("cache_dir: %s", detail);
	return fail("cache_dir %s: %s", dir,
		    rc == -EPROTO ? "written by an incompatible version of "
				    "pacefs"
				  : strerror(-rc));
}

/* Makes cache_dir absolute; it exists once the cache has been opened. */
static int absolute_cache_dir(char **dir)
{
	char *abs = realpath(*dir, NULL);

	if (abs == NULL)
		return fail("cache_dir %s: %s", *dir, strerror(errno));
	free(*dir);
	*dir = abs;
	return 0;
}

/* Sets the readahead of the mount's backing device to FS_KERNEL_AHEAD so
 * that the kernel sends large reads (needs root; failure only costs speed)
 * and returns the readahead the kernel will use, in bytes: what it reads
 * ahead of an application is part of that reader's lead. */
static uint64_t set_read_ahead(const char *mountpoint)
{
	FILE *mi = fopen("/proc/self/mountinfo", "r");
	char line[4096], path[PATH_MAX], dev[64] = "";
	unsigned maj, min, kb = 0;

	if (mi == NULL)
		return FS_KERNEL_AHEAD;
	while (fgets(line, sizeof(line), mi) != NULL) {
		char mnt[PATH_MAX];

		if (sscanf(line, "%*u %*u %u:%u %*s %4095s", &maj, &min, mnt) ==
			    3 &&
		    strcmp(mnt, mountpoint) == 0)
			snprintf(dev, sizeof(dev), "%u:%u", maj, min);
	}
	fclose(mi);
	if (dev[0] == '\0')
		return FS_KERNEL_AHEAD;
	snprintf(path, sizeof(path), "/sys/class/bdi/%s/read_ahead_kb", dev);
	mi = fopen(path, "w");
	if (mi == NULL) {
		fs__log(FS_LOG_DEBUG, "cannot set %s: %s", path,
			strerror(errno));
	} else {
		fprintf(mi, "%u\n", FS_KERNEL_AHEAD / 1024);
		fclose(mi);
	}
	/* The kernel takes the smaller of this and what FUSE_INIT says
	 * (FS_KERNEL_AHEAD as well). */
	mi = fopen(path, "r");
	if (mi == NULL || fscanf(mi, "%u", &kb) != 1)
		kb = FS_KERNEL_AHEAD / 1024;
	if (mi != NULL)
		fclose(mi);
	return (uint64_t)kb * 1024 < FS_KERNEL_AHEAD ? (uint64_t)kb * 1024
						     : FS_KERNEL_AHEAD;
}

/* Adds an -o option for libfuse. */
static int add_fuse_opt(struct fuse_args *args, const char *opt)
{
	if (fuse_opt_add_arg(args, "-o") != 0 ||
	    fuse_opt_add_arg(args, opt) != 0)
		return -ENOMEM;
	return 0;
}

/* How the first argument names what to mount. */
enum mount_kind {
	MOUNT_URL,	/* one blob */
	MOUNT_MANIFEST, /* a local JSON manifest */
	MOUNT_INDEX,	/* a URL ending in '/': its directory index */
};

static enum mount_kind kind_of(const char *source)
{
	size_t n = strlen(source);

	/* s3://BUCKET/KEY is one object; a bucket or a PREFIX/ a tree. */
	if (strncmp(source, "s3://", 5) == 0)
		return n > 0 && source[n - 1] != '/' && strchr(source + 5, '/')
			       ? MOUNT_URL
			       : MOUNT_INDEX;

	if (strncmp(source, "http://", 7) != 0 &&
	    strncmp(source, "https://", 8) != 0)
		return MOUNT_MANIFEST;
	return n > 0 && source[n - 1] == '/' ? MOUNT_INDEX : MOUNT_URL;
}

/* Where the region fs__creds_region finds comes from, in its order, for
 * the line that refuses it. */
static void region_source(const char *opt, char *out, size_t cap)
{
	const char *cfg = getenv("AWS_CONFIG_FILE"), *home = getenv("HOME");
	const char *prof = getenv("AWS_PROFILE");

	if (opt != NULL && opt[0] != '\0')
		snprintf(out, cap, "option region");
	else if (getenv("AWS_REGION") != NULL && getenv("AWS_REGION")[0])
		snprintf(out, cap, "AWS_REGION");
	else if (getenv("AWS_DEFAULT_REGION") != NULL &&
		 getenv("AWS_DEFAULT_REGION")[0])
		snprintf(out, cap, "AWS_DEFAULT_REGION");
	else if (cfg != NULL && cfg[0] != '\0')
		snprintf(out, cap, "region of profile '%s' in %s",
			 prof != NULL && prof[0] ? prof : "default", cfg);
	else
		snprintf(out, cap, "region of profile '%s' in %s/.aws/config",
			 prof != NULL && prof[0] ? prof : "default",
			 home != NULL ? home : "~");
}

/* Checks what the command line names before anything is done: the URLs,
 * the mountpoint, the file name, the cache directory. */
static int check_inputs(struct fs_opts *o, enum mount_kind kind,
			struct fs_s3 *s3, char *name, size_t cap)
{
	char err[1024], region[256], from[4200];
	bool is_s3 = strncmp(o->url, "s3://", 5) == 0;

	if (is_s3) {
		fs__creds_region(o->region, region, sizeof(region));
		region_source(o->region, from, sizeof(from));
		if (fs__s3_parse(o->url, o->endpoint, region, from,
				 o->s3_addressing, s3, err, sizeof(err)) != 0)
			return fail("%s", err);
		if (o->nmirrors > 0)
			return fail("option mirror: not for an s3:// source");
	} else if (o->endpoint != NULL || o->region != NULL ||
		   o->s3_addressing != NULL) {
		return fail("option %s: only for an s3:// source",
			    o->endpoint != NULL ? "endpoint"
			    : o->region != NULL ? "region"
						: "s3_addressing");
	}
	if (!is_s3 && kind != MOUNT_MANIFEST && check_url(o->url) != 0)
		return 1;
	if (kind == MOUNT_MANIFEST && access(o->url, R_OK) != 0)
		return fail("%s: %s (not an http:// or https:// URL, nor a "
			    "readable manifest)",
			    o->url, strerror(errno));
	if (kind != MOUNT_URL &&
	    (o->name != NULL || o->nmirrors > 0 || o->has_sha256))
		return fail("option %s: only for a single URL; a manifest "
			    "names its files, their mirrors and digests",
			    o->name != NULL   ? "name"
			    : o->nmirrors > 0 ? "mirror"
					      : "sha256");
	for (unsigned i = 0; i < o->nmirrors; i++)
		if (check_url(o->mirrors[i]) != 0)
			return 1;
	if (check_mountpoint(&o->mountpoint) != 0)
		return 1;
	if (kind == MOUNT_URL && o->name != NULL) {
		if (fs_name_check(o->name, err, sizeof(err)) != 0)
			return fail("option name: %s", err);
		snprintf(name, cap, "%s", o->name);
	} else if (kind == MOUNT_URL && is_s3) {
		/* A key's last segment, as it is: keys are not encoded. */
		const char *last = strrchr(s3->path, '/');

		snprintf(name, cap, "%s", last != NULL ? last + 1 : s3->path);
		if (fs_name_check(name, err, sizeof(err)) != 0)
			return fail("URL %s: cannot derive a file name from "
				    "its key; use -o name=NAME",
				    o->url);
	} else if (kind == MOUNT_URL &&
		   fs_name_from_url(o->url, name, cap, err, sizeof(err)) != 0) {
		return fail("%s", err);
	}
	if (o->cafile != NULL && access(o->cafile, R_OK) != 0)
		return fail("option cafile: %s: %s", o->cafile,
			    strerror(errno));
	if (o->cache_dir == NULL &&
	    (o->cache_dir = fs__default_cache_dir(err, sizeof(err))) == NULL)
		return fail("%s", err);
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

/* What the parent learned before mounting, for the daemon to build on. */
struct prepared {
	enum mount_kind kind;
	char name[NAME_MAX + 1]; /* MOUNT_URL */
	char *identity;		 /* MOUNT_URL: fs__url_identity */
	char **origins;		 /* where the headers may go */
	size_t norigins;
	char **urls; /* MOUNT_URL: the URL, then mirrors */
	uint32_t nurls;
	struct fs_learned learned;   /* MOUNT_URL */
	struct fs_manifest manifest; /* MOUNT_MANIFEST */
	struct fs_s3 s3;	 /* an s3:// source: bucket == NULL if not */
	struct fetch_auth *auth; /* credentials that change, or NULL */
	struct fs_creds *creds;
};

static void prepared_free(struct prepared *p)
{
	if (p->s3.bucket != NULL && p->urls != NULL)
		free(p->urls[0]); /* the object's URL, made here */
	free(p->urls);
	free(p->identity);
	for (size_t i = 0; i < p->norigins; i++)
		free(p->origins[i]);
	free(p->origins);
	fs__learned_free(&p->learned);
	fs__manifest_free(&p->manifest);
	fs__s3_free(&p->s3);
	fs__creds_free(p->creds);
	fetch_auth_free(p->auth);
}

/* Credentials that change: an s3:// source, header files, a command. */
static int make_creds(const struct fs_opts *o, struct prepared *p,
		      struct fetch_config *fc)
{
	struct fs_creds_config cc = {.s3 = p->s3.bucket != NULL,
				     .readable_ok = o->creds_readable,
				     .auth_command = o->auth_command,
				     .header_files = o->header_files,
				     .nheader_files = o->nheader_files,
				     .headers = o->headers,
				     .nheaders = o->nheaders,
				     .uid = geteuid(),
				     .timeout_s = o->read_timeout_s,
				     .log = fs__log_hook};
	char err[1024];
	int rc;

	if (!cc.s3 && o->nheader_files == 0 && o->auth_command == NULL)
		return 0;
	rc = fetch_auth_new(cc.s3 ? p->s3.region : NULL, &p->auth);
	if (rc != 0)
		return fail("out of memory");
	rc = fs__creds_new(&cc, p->auth, &p->creds, err, sizeof(err));
	if (rc != 0)
		return fail("%s", err);
	fc->auth = p->auth;
	return 0;
}

/* Adds url's origin to the ones the configured headers may go to, once. */
static int add_origin(struct prepared *p, const char *url)
{
	char *o = NULL, **grown;
	int rc = fetch_url_origin(url, &o);

	if (rc != 0)
		return rc == -ENOMEM
			       ? fail("out of memory")
			       : fail("URL '%s': curl cannot parse it", url);
	for (size_t i = 0; i < p->norigins; i++)
		if (strcmp(p->origins[i], o) == 0) {
			free(o);
			return 0;
		}
	grown = realloc(p->origins, (p->norigins + 1) * sizeof(*grown));
	if (grown == NULL) {
		free(o);
		return fail("out of memory");
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
			  struct prepared *p)
{
	if (o->nheaders == 0 && p->auth == NULL)
		return 0;
	if (p->s3.bucket != NULL) {
		char *u = fs__s3_origin_url(&p->s3);
		int rc = u != NULL ? add_origin(p, u) : fail("out of memory");

		free(u);
		if (rc != 0)
			return 1;
	} else if (p->kind != MOUNT_MANIFEST && add_origin(p, o->url) != 0) {
		return 1;
	}
	for (unsigned i = 0; i < o->nmirrors; i++)
		if (add_origin(p, o->mirrors[i]) != 0)
			return 1;
	for (uint32_t i = 0;
	     p->kind == MOUNT_MANIFEST && i < p->manifest.nfiles; i++)
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
			     struct cache *cache, struct prepared *p)
{
	struct fs_learn_args args;
	char err[1024];
	int rc;

	p->urls[0] = fs__s3_object_url(&p->s3, p->s3.path);
	p->nurls = 1;
	p->identity = fs__s3_identity(&p->s3, p->s3.path);
	if (p->urls[0] == NULL || p->identity == NULL)
		return fail("out of memory");
	memset(&args, 0, sizeof(args));
	args.identity = p->identity;
	args.urls = (const char *const *)p->urls;
	args.nurls = 1;
	args.sha256 = o->has_sha256 ? o->sha256 : NULL;
	args.revalidate_s = o->revalidate_s;
	args.object_store = true;
	rc = fs__learn(fc, cache, &args, &p->learned, err, sizeof(err));
	if (rc != 0 && strstr(err, ": HTTP ") != NULL)
		fs__s3_explain(&p->s3, fc, p->creds, p->s3.path, err,
			       sizeof(err));
	return rc != 0 ? fail("%s", err) : 0;
}

/* Before the mount, on the terminal: probe the URL, read the manifest, or
 * read the top directory index, so that a bad source is one line and exit
 * status 1 with nothing mounted. */
static int prepare(const struct fs_opts *o, struct fetch_config *fc,
		   struct cache *cache, struct prepared *p)
{
	struct fs_index_entry *ents = NULL;
	struct fs_learn_args args;
	struct fetch_config b;
	char err[1024], *page = NULL;
	uint32_t nents = 0;
	size_t len;
	int rc;

	if (p->kind == MOUNT_MANIFEST) {
		rc = fs__manifest_load(o->url, &p->manifest, err, sizeof(err));
		if (rc != 0)
			return fail("%s", err);
	}
	if (header_origins(o, fc, p) != 0)
		return 1;
	/* The mount's own first requests are bounded as a request's are:
	 * by read_timeout (a listing that never ends, a probe that never
	 * answers). */
	b = *fc;
	b.deadline_ms =
		(fs__now_ns() + (uint64_t)o->read_timeout_s * 1000000000u) /
		1000000u;
	fc = &b;
	switch (p->kind) {
	case MOUNT_URL:
		p->urls = calloc(o->nmirrors + 2, sizeof(*p->urls));
		if (p->urls == NULL)
			return fail("out of memory");
		p->urls[0] = o->url;
		if (p->s3.bucket != NULL)
			return prepare_s3_object(o, fc, cache, p);
		for (unsigned i = 0; i < o->nmirrors; i++)
			p->urls[i + 1] = o->mirrors[i];
		p->nurls = o->nmirrors + 1;
		p->identity = fs__sources_identity((const char *const *)p->urls,
						   p->nurls);
		if (p->identity == NULL)
			return fail("out of memory");
		memset(&args, 0, sizeof(args));
		args.identity = p->identity;
		args.urls = (const char *const *)p->urls;
		args.nurls = p->nurls;
		args.sha256 = o->has_sha256 ? o->sha256 : NULL;
		args.revalidate_s = o->revalidate_s;
		rc = fs__learn(fc, cache, &args, &p->learned, err, sizeof(err));
		return rc != 0 ? fail("%s", err) : 0;
	case MOUNT_MANIFEST:
		return 0; /* loaded above */
	case MOUNT_INDEX:
		if (p->s3.bucket != NULL) {
			char *dir = fs__s3_dir_url(&p->s3, p->s3.path);

			rc = dir == NULL ? -ENOMEM
					 : fs__s3_list(&p->s3, fc, p->creds,
						       dir, true, &ents, &nents,
						       err, sizeof(err));
			free(dir);
			fs__dirindex_free(ents, nents);
			return rc != 0 ? fail("%s", err) : 0;
		}
		rc = fetch_get(fc, o->url, 64u << 20, &page, &len, NULL, err,
			       sizeof(err));
		if (rc == 0)
			rc = fs__dirindex_parse(page, len, &ents, &nents, err,
						sizeof(err));
		free(page);
		fs__dirindex_free(ents, nents);
		return rc != 0 ? fail("%s", err) : 0;
	}
	return 0;
}

/* Fills the namespace from what prepare() found. Caller holds ns->mu. */
static int build_tree(struct fs_mount *m, const struct fs_opts *o,
		      struct prepared *p)
{
	struct fs_ns *ns = m->ns;
	uint32_t node;
	int rc;

	switch (p->kind) {
	case MOUNT_URL: {
		struct fs_node *n;
		struct cache_id id;

		cache_id_from_string(p->identity, &id);
		rc = fs__ns_add(ns, 0, p->name, false, &node);
		if (rc != 0)
			return rc;
		n = ns->nodes[node];
		n->urls = calloc(p->nurls, sizeof(*n->urls));
		if (n->urls == NULL)
			return -ENOMEM;
		for (; n->nurls < p->nurls; n->nurls++)
			if ((n->urls[n->nurls] = strdup(p->urls[n->nurls])) ==
			    NULL)
				return -ENOMEM;
		n->has_size = true;
		n->size = p->learned.size;
		n->mtime = p->learned.mtime;
		n->has_sha256 = o->has_sha256;
		memcpy(n->sha256, o->sha256, sizeof(n->sha256));
		rc = fs__engine_blob_add(m->engine, p->name, n->size, &id,
					 &n->blob);
		if (rc == 0)
			rc = fs__engine_blob_digests(
				m->engine, n->blob,
				o->has_sha256 ? o->sha256 : NULL, 0, NULL, 0);
		if (rc == 0)
			rc = fs__engine_blob_ready(
				m->engine, n->blob, p->learned.sources,
				p->learned.nsources, p->learned.queued);
		return rc;
	}
	case MOUNT_MANIFEST:
		for (uint32_t i = 0; i < p->manifest.nfiles; i++) {
			struct fs_manifest_entry *me = &p->manifest.files[i];
			struct fs_node *n;

			rc = fs__ns_add_path(ns, me->path, &node);
			if (rc != 0)
				return rc;
			n = ns->nodes[node];
			/* The node takes the entry's URLs. */
			n->urls = me->urls;
			n->nurls = me->nurls;
			me->urls = NULL;
			me->nurls = 0;
			n->has_size = me->has_size;
			n->size = me->size;
			n->has_sha256 = me->has_sha256;
			memcpy(n->sha256, me->sha256, sizeof(n->sha256));
			n->dblock = me->block_size;
			n->dblocks = me->block_sha256;
			n->ndblocks = me->nblocks;
			me->block_sha256 = NULL;
			me->nblocks = 0;
			if (me->has_mode)
				n->mode = me->mode;
			if (me->has_mtime)
				n->mtime = me->mtime;
		}
		return 0;
	case MOUNT_INDEX:
		ns->nodes[0]->list_url =
			p->s3.bucket != NULL
				? fs__s3_dir_url(&p->s3, p->s3.path)
				: strdup(o->url);
		return ns->nodes[0]->list_url != NULL ? 0 : -ENOMEM;
	}
	return 0;
}

/* The engine's inval hook: queues for the thread that tells the kernel. */
static void queue_inval(void *ctx, uint32_t b, const char *name, uint64_t ino,
			uint64_t start, uint64_t end)
{
	fs__inval_queue(ctx, b, name, ino, start, end);
}

/* After the mount is live and the process is a daemon: opens the cache,
 * starts the engine, builds the tree and serves until unmounted or
 * signalled. */
static int serve(struct fs_opts *o, struct fuse_session *se, struct fs_mount *m,
		 struct prepared *p, struct fs_exit_guard *g, int *metrics_fd)
{
	struct fs_engine_config ec;
	struct fuse_loop_config *lc;
	struct fs_metricsd *metricsd = NULL;
	int rc;

	/* Blocks (64 KiB) and reads (1 MiB) are allocated and freed at a
	 * high rate: keep them on the heap rather than in fresh mappings,
	 * whose page faults cost a cold read CPU (docs/fs-notes.md). */
	mallopt(M_MMAP_THRESHOLD, 8 * 1024 * 1024);
	mallopt(M_TRIM_THRESHOLD, 128 * 1024 * 1024);
	rc = open_cache(o, false, &m->engine, &m->cache);
	if (rc != 0)
		return rc;
	memset(&ec, 0, sizeof(ec));
	ec.lanes = o->lanes;
	ec.host_lanes = o->host_lanes;
	ec.read_timeout_s = o->read_timeout_s;
	ec.stall_timeout_s = o->stall_timeout_s;
	ec.retry_after_max_s = o->retry_after_max_s;
	ec.readahead_ms = o->readahead_ms;
	ec.chunk = o->chunk;
	ec.inflight_max = o->inflight_max;
	ec.kernel_ahead = m->kernel_ahead;
	ec.creds_change = fs__creds_changeable(p->creds);
	ec.fetch = m->fetch;
	ec.max_blobs = p->kind == MOUNT_MANIFEST ? p->manifest.nfiles
		       : p->kind == MOUNT_URL	 ? 1
						 : FS_INDEX_MAX_FILES;
	ec.max_sources = p->kind == MOUNT_URL ? p->nurls
			 : p->kind == MOUNT_MANIFEST
				 ? p->manifest.nfiles * FS_MANIFEST_URLS_MAX
				 : FS_INDEX_MAX_FILES;
	if (ec.max_blobs == 0)
		ec.max_blobs = 1;
	ec.log = fs__log_hook;
	ec.log_fields = fs__log_fields_hook;
	ec.inval = queue_inval;
	rc = fs__inval_new(ec.max_blobs, &m->inval);
	ec.inval_ctx = m->inval;
	if (rc == 0)
		rc = fs__engine_new(&ec, m->cache, &m->engine);
	if (rc == 0 && p->creds != NULL)
		rc = fs__creds_start(p->creds);
	if (rc != 0) {
		fs__log(FS_LOG_ERR, "cannot start: %s", strerror(-rc));
		return rc;
	}
	pthread_mutex_lock(&m->ns->mu);
	rc = build_tree(m, o, p);
	pthread_mutex_unlock(&m->ns->mu);
	/* As many probers as the origin may have connections. */
	if (rc == 0)
		rc = fs__sizes_new(m, o->host_lanes, &m->sizes);
	if (rc == 0)
		rc = fs__engine_start(m->engine);
	if (rc != 0) {
		fs__log(FS_LOG_ERR, "cannot start: %s", strerror(-rc));
		return rc;
	}
	fs__log(FS_LOG_INFO, "mounted %s on %s", o->url, o->mountpoint);
	lc = fuse_loop_cfg_create();
	if (lc == NULL)
		return -ENOMEM;
	fuse_loop_cfg_set_clone_fd(lc, 1);
	fuse_loop_cfg_set_max_threads(lc, FS_THREADS);
	rc = fs__inval_start(m->inval, se);
	if (rc != 0) {
		fs__log(FS_LOG_ERR, "cannot start: %s", strerror(-rc));
		fuse_loop_cfg_destroy(lc);
		return rc;
	}
	rc = fs__exit_guard_start(g, se, m->engine);
	if (rc == 0 && *metrics_fd >= 0) {
		/* The socket was bound before the fork; it is the server's. */
		rc = fs__metricsd_start(*metrics_fd, m->metrics, m, &metricsd);
		*metrics_fd = -1;
		if (rc == 0)
			fs__log(FS_LOG_INFO, "metrics at http://%s/metrics",
				o->metrics);
	}
	if (rc != 0) {
		fs__log(FS_LOG_ERR, "cannot start: %s", strerror(-rc));
		fs__inval_stop(m->inval);
		fuse_loop_cfg_destroy(lc);
		return rc;
	}
	rc = fuse_session_loop_mt(se, lc);
	/* The session has ended: a probe under way stops. */
	fs__sizes_free(m->sizes);
	m->sizes = NULL;
	/* Before the engine goes: a scrape reads it. */
	fs__metricsd_stop(metricsd);
	fs__exit_guard_ended(g);
	/* A signal libfuse handles (TERM, INT, HUP) ends the session as an
	 * unmount does: a clean end, not a failure. */
	if (rc > 0) {
		fs__log(FS_LOG_INFO, "unmounting %s on %s", o->mountpoint,
			rc == SIGTERM  ? "SIGTERM"
			: rc == SIGHUP ? "SIGHUP"
			: rc == SIGINT ? "SIGINT"
				       : "a signal");
		rc = 0;
	}
	fs__inval_stop(m->inval); /* the session is destroyed next */
	fuse_loop_cfg_destroy(lc);
	return rc;
}

/* Everything the mount needs before libfuse mounts it, checked here in
 * the parent so that an error is one line on the terminal: libcurl, the
 * fetch configuration and credentials, the proxies, the cache, the
 * source's probe or listing (prepare) and the namespace. Returns 0, or 1
 * with the line written; what it made is m's and p's to free. */
static int prepare_mount(struct fs_opts *o, struct fs_mount *m,
			 struct prepared *p)
{
	struct cache *cache = NULL;
	char err[1024];
	int rc;

	if (fetch_global_init() != 0)
		return fail("cannot initialise libcurl");
	if (o->insecure)
		fs__log(FS_LOG_WARN, "insecure: TLS certificates and host "
				     "names are not verified");
	/* Before the first request: the probe is counted too. */
	if (fs__metrics_new(o->mountpoint, o->metrics_labels,
			    o->nmetrics_labels, &m->metrics) != 0)
		return fail("out of memory");
	fetch_config_from(o, &m->fetch);
	m->fetch.on_request = fs__metrics_on_request;
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
		return fail("%s", err);
	/* Open the cache once here to report problems on the terminal; the
	 * daemon reopens it, as an LMDB environment must not cross fork. */
	if (open_cache(o, true, &m->engine, &cache) != 0 ||
	    absolute_cache_dir(&o->cache_dir) != 0)
		return 1;
	rc = prepare(o, &m->fetch, cache, p);
	cache_close(cache);
	if (rc != 0)
		return 1;
	if (fs__ns_new(&m->ns) != 0)
		return fail("out of memory");
	m->uid = getuid();
	m->gid = getgid();
	clock_gettime(CLOCK_REALTIME, &m->mtime);
	m->attr_timeout = o->attr_timeout_s;
	m->entry_timeout = o->entry_timeout_s;
	m->listing_ttl_ns = (uint64_t)o->listing_ttl_s * 1000000000u;
	m->revalidate_s = o->revalidate_s;
	return 0;
}

/* pacefs status, cache and prefetch; -1 when argv names none of them. */
static int subcommand(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "status") == 0)
		return fs_status_command(argc, argv);
	if (argc > 1 && strcmp(argv[1], "cache") == 0)
		return fs_cache_command(argc, argv);
	if (argc > 1 && strcmp(argv[1], "prefetch") == 0)
		return fs_prefetch_command(argc, argv);
	return -1;
}

int fs_main(int argc, char **argv)
{
	struct fs_opts o;
	struct fuse_session *se = NULL;
	struct fs_mount m;
	struct prepared p;
	struct fs_exit_guard guard;
	char err[1024];
	int status = subcommand(argc, argv), metrics_fd = -1;

	if (status >= 0)
		return status;
	status = 1;
	if (fs_opts_parse(argc, argv, &o, err, sizeof(err)) != 0) {
		fs_opts_scrub_argv(argc, argv);
		return fail("%s", err);
	}
	/* Before anything slow (the probe), and before the daemon forks
	 * with a copy of this memory. */
	fs_opts_scrub_argv(argc, argv);
	memset(&m, 0, sizeof(m));
	memset(&p, 0, sizeof(p));
	memset(&guard, 0, sizeof(guard));
	if (o.show_help || o.show_version) {
		if (o.show_help)
			fs_opts_usage();
		else
			printf("pacefs %s (libfuse %s, %s)\n", PACEFS_VERSION,
			       fuse_pkgversion(), fetch_version());
		status = 0;
		goto out_opts;
	}
	fs__log_format_json(o.log_format == 1);
	fs__log_init(true, (enum fs_log_level)o.log_level);
	p.kind = kind_of(o.url);
	if (check_inputs(&o, p.kind, &p.s3, p.name, sizeof(p.name)) != 0)
		goto out_prepared;

	/* libfuse refuses unknown options here, before anything is done. */
	if (add_fuse_opt(&o.fuse_args, "ro,subtype=pacefs,fsname=pacefs") !=
		    0 ||
	    (o.debug && fuse_opt_add_arg(&o.fuse_args, "-d") != 0)) {
		fail("out of memory");
		goto out_opts;
	}
	se = fuse_session_new(&o.fuse_args, &fs__ops, sizeof(fs__ops), &m);
	if (se == NULL)
		goto out_opts; /* libfuse said which option, on stderr */
	m.se = se;
	if (prepare_mount(&o, &m, &p) != 0)
		goto out_session;
	/* Bound here, so that a bad or busy address is a line on the
	 * terminal and nothing is mounted; the daemon serves it. */
	if (o.metrics != NULL &&
	    fs__metrics_listen(o.metrics, &metrics_fd, err, sizeof(err)) != 0) {
		fail("%s", err);
		goto out_session;
	}

	if (fuse_set_signal_handlers(se) != 0) {
		fail("cannot install signal handlers");
		goto out_session;
	}
	if (fuse_session_mount(se, o.mountpoint) != 0) {
		fail("cannot mount on %s (see the line above)", o.mountpoint);
		goto out_signals;
	}
	m.kernel_ahead = set_read_ahead(o.mountpoint);
	if (fuse_daemonize(o.foreground) != 0) {
		fail("cannot daemonize");
	} else {
		if (!o.foreground)
			fs__log_init(false, (enum fs_log_level)o.log_level);
		status =
			serve(&o, se, &m, &p, &guard, &metrics_fd) == 0 ? 0 : 1;
	}
	fs__exit_guard_unmount(&guard, se);
out_signals:
	fuse_remove_signal_handlers(se);
out_session:
	fuse_session_destroy(se);
	fs__exit_guard_forget_engine(&guard);
	fs__sizes_free(m.sizes);   /* when serve() ended before its loop */
	fs__engine_free(m.engine); /* flushes the cache: nothing is queued */
	m.engine = NULL;	   /* after this, as on_lost reads it */
	fs__inval_free(m.inval);   /* the engine queued into it until freed */
	cache_close(m.cache);
	fs__ns_free(m.ns);
	fetch_proxies_free(m.fetch.proxies); /* after the engine's requests */
	fs__exit_guard_stop(&guard);
	if (metrics_fd >= 0)
		close(metrics_fd);
out_prepared:
	prepared_free(&p);
out_opts:
	fs__metrics_free(m.metrics); /* the fetch hook's, until here */
	fs_opts_free(&o);
	return status;
}

/* mount: the pacefs command: check every input, probe the origin, mount,
 * daemonize and serve until unmounted. Every failure before the mount is
 * one line on stderr and exit status 1, with nothing left mounted. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <malloc.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <fuse_lowlevel.h>

#include "fs/fs_int.h"

/* The readahead the mount's bdi gets: the kernel then asks for large reads
 * (up to 1 MiB each) instead of 128 KiB ones. */
#define FS_READ_AHEAD_KB 1024

static int fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static int fail(const char *fmt, ...)
{
	va_list ap;

	fputs("pacefs: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return 1;
}

static void usage(void)
{
	printf("usage: pacefs [options] URL MOUNTPOINT\n"
	       "\n"
	       "Mounts the HTTP(S) blob at URL read-only as MOUNTPOINT/NAME.\n"
	       "Unmount with: fusermount3 -u MOUNTPOINT\n"
	       "\n"
	       "options:\n"
	       "    -h, --help             print this help and exit\n"
	       "    -V, --version          print the version and exit\n"
	       "    -f                     stay in the foreground\n"
	       "    -d                     debug log (implies -f)\n"
	       "    -o cache_dir=DIR       cache directory (default: "
	       "$XDG_CACHE_HOME/pacefs,\n"
	       "                           or /var/cache/pacefs for root)\n"
	       "    -o name=NAME           file name (default: the URL's "
	       "last path segment)\n"
	       "    -o lanes=N             parallel transfers (default: 8)\n"
	       "    -o connect_timeout=S   connect timeout in seconds "
	       "(default: 10)\n"
	       "    -o read_timeout=S      a blocked read fails with EIO "
	       "after S seconds\n"
	       "                           (default: 60)\n"
	       "    -o stall_timeout=S     a transfer with no byte for S seconds "
	       "is retried\n"
	       "                           (default: 10)\n"
	       "\n"
	       "libfuse options (-o allow_other, ...) are passed through; "
	       "see mount.fuse3(8).\n");
}

/* The default cache directory, as a new string. */
static char *default_cache_dir(void)
{
	const char *xdg = getenv("XDG_CACHE_HOME");
	const char *home = getenv("HOME");
	char buf[PATH_MAX];

	if (geteuid() == 0)
		return strdup("/var/cache/pacefs");
	if (xdg != NULL && xdg[0] == '/')
		snprintf(buf, sizeof(buf), "%s/pacefs", xdg);
	else if (home != NULL && home[0] == '/')
		snprintf(buf, sizeof(buf), "%s/.cache/pacefs", home);
	else
		return strdup("/var/tmp/pacefs");
	return strdup(buf);
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
static int open_cache(const char *dir, bool quiet, struct fs_engine **engine,
		      struct cache **out)
{
	char detail[512] = "";
	struct cache_config cc = {.dir = dir,
				  .log = fs__log_cache,
				  .on_lost = fs__engine_on_lost,
				  .lost_ctx = engine};
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

/* What the mount learned about one source of its blob before going live. */
struct source_facts {
	const char *url; /* as configured; borrowed from the options */
	char *final_url; /* after redirects */
	char *validator; /* strong ETag, else Last-Modified; NULL: none */
	uint64_t size;
	int64_t mtime;
	bool usable;
};

static void source_facts_free(struct source_facts *sf, uint32_t n)
{
	for (uint32_t i = 0; sf != NULL && i < n; i++) {
		free(sf[i].final_url);
		free(sf[i].validator);
	}
	free(sf);
}

static int probe_source(const struct fetch_config *fc, struct source_facts *sf,
			enum fetch_probe_error *kind, char *err, size_t errlen)
{
	struct fetch_probe pr;
	int rc = fetch_probe(fc, sf->url, &pr, kind, err, errlen);

	if (rc != 0)
		return rc;
	sf->final_url = strdup(pr.final_url);
	if (pr.etag[0] != '\0' && !pr.etag_weak)
		sf->validator = strdup(pr.etag);
	else if (pr.last_modified[0] != '\0')
		sf->validator = strdup(pr.last_modified);
	sf->size = pr.size;
	sf->mtime = pr.mtime;
	sf->usable = sf->final_url != NULL;
	return sf->usable ? 0 : -ENOMEM;
}

/* Probes every source and reconciles them with what the cache holds.
 * Mirrors must agree with the first usable source on the size; one that
 * does not is left out with a log line, never adopted. A blob whose
 * primary URL shows a new validator is dropped from the cache. When no
 * source can be reached but the cache has the blob, the mount serves what
 * the cache holds. */
static int learn_blob(const struct fs_opts *o, const struct fetch_config *fc,
		      struct cache *cache, const struct cache_id *id,
		      struct source_facts *src, uint32_t nsrc,
		      uint64_t *size_out, int64_t *mtime_out)
{
	struct cache_blob_record rec;
	enum fetch_probe_error kind;
	char err[1024], first_err[1024] = "";
	bool have_rec, unreachable = false;
	const struct source_facts *ref = NULL;
	const char *validator;
	int rc;

	have_rec = cache_blob_get(cache, id, &rec) == 0;
	for (uint32_t i = 0; i < nsrc; i++) {
		rc = probe_source(fc, &src[i], &kind, err, sizeof(err));
		if (rc != 0) {
			if (first_err[0] == '\0')
				snprintf(first_err, sizeof(first_err), "%s",
					 err);
			unreachable |= kind == FETCH_PROBE_UNREACHABLE;
			if (nsrc > 1)
				fs__log(FS_LOG_WARN, "source not used: %s",
					err);
			continue;
		}
		if (ref == NULL) {
			ref = &src[i];
		} else if (src[i].size != ref->size) {
			fs__log(FS_LOG_WARN,
				"mirror %s not used: its size %" PRIu64
				" differs from %" PRIu64 " at %s",
				src[i].url, src[i].size, ref->size, ref->url);
			src[i].usable = false;
		}
	}
	if (ref == NULL) {
		if (!unreachable || !have_rec)
			return fail("%s", first_err);
		fs__log(FS_LOG_WARN,
			"origin unreachable (%s); serving what the cache "
			"holds",
			first_err);
		src[0].final_url = strdup(src[0].url);
		src[0].validator =
			rec.validator[0] != '\0' ? strdup(rec.validator) : NULL;
		src[0].usable = src[0].final_url != NULL;
		*size_out = rec.size;
		*mtime_out = -1;
		return src[0].usable ? 0 : fail("out of memory");
	}
	*size_out = ref->size;
	*mtime_out = ref->mtime;
	/* The primary URL's validator is the blob's; a mirror's differs by
	 * nature (each server makes its own ETag) and is pinned per source. */
	validator = src[0].usable ? (src[0].validator ? src[0].validator : "")
				  : (have_rec ? rec.validator : "");
	if (have_rec && (rec.size != ref->size ||
			 (src[0].usable && strcmp(rec.validator, validator)))) {
		fs__log(FS_LOG_INFO,
			"%s changed on the origin (size %" PRIu64 " -> %" PRIu64
			", validator '%s' -> '%s'): dropping its cached bytes",
			o->url, rec.size, ref->size, rec.validator, validator);
		rc = cache_blob_drop(cache, id);
		if (rc != 0)
			return fail("cache_dir %s: cannot drop stale bytes: %s",
				    o->cache_dir, strerror(-rc));
	}
	{
		struct cache_blob_record nrec;

		memset(&nrec, 0, sizeof(nrec));
		nrec.size = ref->size;
		snprintf(nrec.validator, sizeof(nrec.validator), "%s",
			 validator);
		nrec.last_access = (uint64_t)time(NULL);
		rc = cache_blob_put(cache, id, &nrec);
	}
	if (rc != 0)
		return fail("cache_dir %s: cannot write the blob record: %s",
			    o->cache_dir, strerror(-rc));
	return 0;
}

/* Raises the readahead of the mount's backing device so that the kernel
 * sends large reads. Needs root; failure only costs speed. */
static void raise_read_ahead(const char *mountpoint)
{
	FILE *mi = fopen("/proc/self/mountinfo", "r");
	char line[4096], path[PATH_MAX], dev[64] = "";
	unsigned maj, min;

	if (mi == NULL)
		return;
	while (fgets(line, sizeof(line), mi) != NULL) {
		char mnt[PATH_MAX];

		if (sscanf(line, "%*u %*u %u:%u %*s %4095s", &maj, &min, mnt) ==
			    3 &&
		    strcmp(mnt, mountpoint) == 0)
			snprintf(dev, sizeof(dev), "%u:%u", maj, min);
	}
	fclose(mi);
	if (dev[0] == '\0')
		return;
	snprintf(path, sizeof(path), "/sys/class/bdi/%s/read_ahead_kb", dev);
	mi = fopen(path, "w");
	if (mi == NULL) {
		fs__log(FS_LOG_DEBUG, "cannot raise %s: %s", path,
			strerror(errno));
		return;
	}
	fprintf(mi, "%d\n", FS_READ_AHEAD_KB);
	fclose(mi);
}

/* Builds the one-blob table the engine takes from the usable sources,
 * moving their strings into it. */
static int make_blobs(const char *name, const struct cache_id *id,
		      uint64_t size, struct source_facts *src, uint32_t nsrc,
		      struct fs_blob **out)
{
	struct fs_blob *b = calloc(1, sizeof(*b));

	if (b == NULL)
		return -ENOMEM;
	b->sources = calloc(nsrc, sizeof(*b->sources));
	b->name = strdup(name);
	if (b->sources == NULL || b->name == NULL) {
		free(b->sources);
		free(b->name);
		free(b);
		return -ENOMEM;
	}
	b->size = size;
	b->id = *id;
	for (uint32_t i = 0; i < nsrc; i++) {
		struct fs_source *s = &b->sources[b->nsources];

		if (!src[i].usable)
			continue;
		s->url = src[i].final_url;
		s->validator = src[i].validator;
		src[i].final_url = NULL;
		src[i].validator = NULL;
		b->nsources++;
	}
	*out = b;
	return 0;
}

/* Adds an -o option for libfuse. */
static int add_fuse_opt(struct fuse_args *args, const char *opt)
{
	if (fuse_opt_add_arg(args, "-o") != 0 ||
	    fuse_opt_add_arg(args, opt) != 0)
		return -ENOMEM;
	return 0;
}

/* Checks what the command line names before anything is done: the URLs,
 * the mountpoint, the file name, the cache directory. */
static int check_inputs(struct fs_opts *o, char *name, size_t cap)
{
	char err[1024];

	if (check_url(o->url) != 0)
		return 1;
	for (unsigned i = 0; i < o->nmirrors; i++)
		if (check_url(o->mirrors[i]) != 0)
			return 1;
	if (check_mountpoint(&o->mountpoint) != 0)
		return 1;
	if (o->name != NULL) {
		if (fs_name_check(o->name, err, sizeof(err)) != 0)
			return fail("option name: %s", err);
		snprintf(name, cap, "%s", o->name);
	} else if (fs_name_from_url(o->url, name, cap, err, sizeof(err)) != 0) {
		return fail("%s", err);
	}
	if (o->cafile != NULL && access(o->cafile, R_OK) != 0)
		return fail("option cafile: %s: %s", o->cafile,
			    strerror(errno));
	if (o->cache_dir == NULL &&
	    (o->cache_dir = default_cache_dir()) == NULL)
		return fail("out of memory");
	return 0;
}

static void engine_config_from(const struct fs_opts *o,
			       struct fs_engine_config *ec)
{
	memset(ec, 0, sizeof(*ec));
	ec->lanes = o->lanes;
	ec->read_timeout_s = o->read_timeout_s;
	ec->stall_timeout_s = o->stall_timeout_s;
	ec->fetch.max_lanes = o->lanes;
	ec->fetch.connect_timeout_ms = (long)o->connect_timeout_s * 1000;
	ec->fetch.cafile = o->cafile;
	ec->fetch.insecure = o->insecure;
	ec->fetch.proxy = o->proxy;
	ec->fetch.headers = (const char *const *)o->headers;
	ec->fetch.nheaders = o->nheaders;
}

/* The configured sources: the URL, then each mirror. */
static struct source_facts *sources_from(const struct fs_opts *o, uint32_t *n)
{
	struct source_facts *src = calloc(o->nmirrors + 1, sizeof(*src));

	if (src == NULL)
		return NULL;
	src[0].url = o->url;
	for (unsigned i = 0; i < o->nmirrors; i++)
		src[i + 1].url = o->mirrors[i];
	*n = o->nmirrors + 1;
	return src;
}

/* After the mount is live and the process is a daemon: opens the cache,
 * starts the engine and serves until unmounted or signalled. Takes
 * ownership of blobs. */
static int serve(struct fs_opts *o, struct fuse_session *se, struct fs_mount *m,
		 const struct fs_engine_config *ec, struct fs_blob *blobs,
		 struct cache **cache)
{
	struct fuse_loop_config *lc;
	int rc;

	/* Blocks (256 KiB) and reads (1 MiB) are allocated and freed at a
	 * high rate: keep them on the heap rather than in fresh mappings,
	 * whose page faults cost a tenth of a cold read's CPU. */
	mallopt(M_MMAP_THRESHOLD, 8 * 1024 * 1024);
	mallopt(M_TRIM_THRESHOLD, 128 * 1024 * 1024);
	rc = open_cache(o->cache_dir, false, &m->engine, cache);
	if (rc != 0)
		goto out;
	rc = fs__engine_new(ec, *cache, blobs, 1, &m->engine);
	if (rc != 0) {
		fs__log(FS_LOG_ERR, "cannot start: %s", strerror(-rc));
		goto out;
	}
	blobs = NULL; /* the engine's now */
	rc = fs__engine_start(m->engine);
	if (rc != 0) {
		fs__log(FS_LOG_ERR, "cannot start the transfer thread: %s",
			strerror(-rc));
		goto out;
	}
	fs__log(FS_LOG_INFO,
		"mounted %s (%" PRIu64 " bytes, %u source%s) on %s/%s", o->url,
		m->engine->blobs[0].size, m->engine->blobs[0].nsources,
		m->engine->blobs[0].nsources == 1 ? "" : "s", o->mountpoint,
		m->engine->blobs[0].name);
	lc = fuse_loop_cfg_create();
	if (lc == NULL) {
		rc = -ENOMEM;
		goto out;
	}
	fuse_loop_cfg_set_clone_fd(lc, 1);
	fuse_loop_cfg_set_max_threads(lc, 64);
	rc = fuse_session_loop_mt(se, lc);
	fuse_loop_cfg_destroy(lc);
out:
	fs__blobs_free(blobs, 1);
	return rc;
}

int fs_main(int argc, char **argv)
{
	struct fs_opts o;
	struct fuse_session *se = NULL;
	struct cache *cache = NULL;
	struct fs_mount m;
	struct fs_engine_config ec;
	struct source_facts *src = NULL;
	struct fs_blob *blobs = NULL;
	struct cache_id id;
	char name[NAME_MAX + 1], err[1024];
	char identity[PATH_MAX + 16];
	uint64_t size = 0;
	int64_t mtime = -1;
	uint32_t nsrc = 0;
	int status = 1, rc;

	if (fs_opts_parse(argc, argv, &o, err, sizeof(err)) != 0)
		return fail("%s", err);
	memset(&m, 0, sizeof(m));
	if (o.show_help || o.show_version) {
		if (o.show_help)
			usage();
		else
			printf("pacefs %s (libfuse %s, %s)\n", PACEFS_VERSION,
			       fuse_pkgversion(), fetch_version());
		status = 0;
		goto out_opts;
	}
	fs__log_init(true, o.debug ? FS_LOG_DEBUG : FS_LOG_INFO);
	if (check_inputs(&o, name, sizeof(name)) != 0)
		goto out_opts;

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

	if (fetch_global_init() != 0) {
		fail("cannot initialise libcurl");
		goto out_session;
	}
	if (o.insecure)
		fs__log(FS_LOG_WARN, "insecure: TLS certificates and host "
				     "names are not verified");
	/* Open the cache once here to report problems on the terminal; the
	 * daemon reopens it, as an LMDB environment must not cross fork. */
	if (open_cache(o.cache_dir, true, &m.engine, &cache) != 0 ||
	    absolute_cache_dir(&o.cache_dir) != 0)
		goto out_session;
	snprintf(identity, sizeof(identity), "url:%s", o.url);
	cache_id_from_string(identity, &id);
	engine_config_from(&o, &ec);
	src = sources_from(&o, &nsrc);
	rc = src == NULL ? fail("out of memory")
			 : learn_blob(&o, &ec.fetch, cache, &id, src, nsrc,
				      &size, &mtime);
	cache_close(cache);
	cache = NULL;
	if (rc != 0)
		goto out_session;
	if (make_blobs(name, &id, size, src, nsrc, &blobs) != 0) {
		fail("out of memory");
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
	raise_read_ahead(o.mountpoint);
	if (fuse_daemonize(o.foreground) != 0) {
		fail("cannot daemonize");
	} else {
		if (!o.foreground)
			fs__log_init(false,
				     o.debug ? FS_LOG_DEBUG : FS_LOG_INFO);
		m.uid = getuid();
		m.gid = getgid();
		if (mtime >= 0)
			m.mtime.tv_sec = (time_t)mtime;
		else
			clock_gettime(CLOCK_REALTIME, &m.mtime);
		m.attr_timeout = 3600;
		m.entry_timeout = 3600;
		status = serve(&o, se, &m, &ec, blobs, &cache) == 0 ? 0 : 1;
		blobs = NULL;
	}
	fuse_session_unmount(se);
out_signals:
	fuse_remove_signal_handlers(se);
out_session:
	fuse_session_destroy(se);
	fs__engine_free(m.engine); /* flushes the cache: nothing is queued */
	m.engine = NULL;	   /* after this, as on_lost reads it */
	cache_close(cache);
	fs__blobs_free(blobs, 1);
	source_facts_free(src, nsrc);
out_opts:
	fs_opts_free(&o);
	return status;
}

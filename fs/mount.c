/* mount: the pacefs command: check every input, probe the origin, mount,
 * daemonize and serve until unmounted. Every failure before the mount is
 * one line on stderr and exit status 1, with nothing left mounted. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
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

/* What the mount learned about its one blob before going live. */
struct blob_facts {
	char *final_url;
	char *validator; /* NULL: none */
	uint64_t size;
	int64_t mtime;
};

/* Probes the URL and reconciles it with what the cache holds: a blob that
 * changed on the origin is dropped from the cache; an origin that cannot
 * be reached is replaced by the cached record, if there is one. */
static int learn_blob(const struct fs_opts *o, const struct fetch_config *fc,
		      struct cache *cache, const struct cache_id *id,
		      struct blob_facts *out)
{
	struct fetch_probe pr;
	enum fetch_probe_error kind;
	struct cache_blob_record rec;
	char err[1024];
	bool have_rec;
	int rc;

	have_rec = cache_blob_get(cache, id, &rec) == 0;
	rc = fetch_probe(fc, o->url, &pr, &kind, err, sizeof(err));
	if (rc != 0) {
		if (kind != FETCH_PROBE_UNREACHABLE || !have_rec)
			return fail("%s", err);
		fs__log(FS_LOG_WARN,
			"origin unreachable (%s); serving what the cache "
			"holds",
			err);
		out->final_url = strdup(o->url);
		out->validator =
		    rec.validator[0] != '\0' ? strdup(rec.validator) : NULL;
		out->size = rec.size;
		out->mtime = -1;
		return out->final_url == NULL ? fail("out of memory") : 0;
	}
	out->final_url = strdup(pr.final_url);
	if (pr.etag[0] != '\0' && !pr.etag_weak)
		out->validator = strdup(pr.etag);
	else if (pr.last_modified[0] != '\0')
		out->validator = strdup(pr.last_modified);
	out->size = pr.size;
	out->mtime = pr.mtime;
	if (out->final_url == NULL)
		return fail("out of memory");
	if (have_rec &&
	    (rec.size != out->size ||
	     strcmp(rec.validator,
		    out->validator != NULL ? out->validator : "") != 0)) {
		fs__log(FS_LOG_INFO,
			"%s changed on the origin (size %" PRIu64 " -> %" PRIu64
			", validator '%s' -> '%s'): dropping its cached bytes",
			o->url, rec.size, out->size, rec.validator,
			out->validator != NULL ? out->validator : "");
		rc = cache_blob_drop(cache, id);
		if (rc != 0)
			return fail("cache_dir %s: cannot drop stale bytes: %s",
				    o->cache_dir, strerror(-rc));
		have_rec = false;
	}
	memset(&rec, 0, sizeof(rec));
	rec.size = out->size;
	snprintf(rec.validator, sizeof(rec.validator), "%s",
		 out->validator != NULL ? out->validator : "");
	rec.last_access = (uint64_t)time(NULL);
	rc = cache_blob_put(cache, id, &rec);
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

/* Builds the one-blob table the engine takes. */
static int make_blobs(const char *name, const struct cache_id *id,
		      struct blob_facts *facts, struct fs_blob **out)
{
	struct fs_blob *b = calloc(1, sizeof(*b));

	if (b == NULL)
		return -ENOMEM;
	b->sources = calloc(1, sizeof(*b->sources));
	b->name = strdup(name);
	if (b->sources == NULL || b->name == NULL) {
		free(b->sources);
		free(b->name);
		free(b);
		return -ENOMEM;
	}
	b->size = facts->size;
	b->id = *id;
	b->nsources = 1;
	b->sources[0].url = facts->final_url;
	b->sources[0].validator = facts->validator;
	facts->final_url = NULL;
	facts->validator = NULL;
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

int fs_main(int argc, char **argv)
{
	struct fs_opts o;
	struct fuse_session *se = NULL;
	struct fuse_loop_config *lc = NULL;
	struct cache *cache = NULL;
	struct fs_engine *engine = NULL;
	struct fs_mount m;
	struct fs_engine_config ec;
	struct blob_facts facts = {0};
	struct fs_blob *blobs = NULL;
	struct cache_id id;
	char name[NAME_MAX + 1], err[1024];
	char identity[PATH_MAX + 16];
	bool mounted = false;
	int status = 1, rc;

	if (fs_opts_parse(argc, argv, &o, err, sizeof(err)) != 0)
		return fail("%s", err);
	if (o.show_help) {
		usage();
		status = 0;
		goto out_opts;
	}
	if (o.show_version) {
		printf("pacefs %s (libfuse %s, %s)\n", PACEFS_VERSION,
		       fuse_pkgversion(), fetch_version());
		status = 0;
		goto out_opts;
	}
	fs__log_init(true, o.debug ? FS_LOG_DEBUG : FS_LOG_INFO);
	if (check_url(o.url) != 0 || check_mountpoint(&o.mountpoint) != 0)
		goto out_opts;
	if (o.name != NULL) {
		if (fs_name_check(o.name, err, sizeof(err)) != 0) {
			fail("option name: %s", err);
			goto out_opts;
		}
		snprintf(name, sizeof(name), "%s", o.name);
	} else if (fs_name_from_url(o.url, name, sizeof(name), err,
				    sizeof(err)) != 0) {
		fail("%s", err);
		goto out_opts;
	}
	if (o.cache_dir == NULL && (o.cache_dir = default_cache_dir()) == NULL)
		goto out_opts;

	/* libfuse refuses unknown options here, before anything is done. */
	if (add_fuse_opt(&o.fuse_args, "ro,subtype=pacefs,fsname=pacefs") !=
		0 ||
	    (o.debug && fuse_opt_add_arg(&o.fuse_args, "-d") != 0)) {
		fail("out of memory");
		goto out_opts;
	}
	memset(&m, 0, sizeof(m));
	se = fuse_session_new(&o.fuse_args, &fs__ops, sizeof(fs__ops), &m);
	if (se == NULL)
		goto out_opts; /* libfuse said which option, on stderr */

	if (fetch_global_init() != 0) {
		fail("cannot initialise libcurl");
		goto out_session;
	}
	/* Open the cache once here to report problems on the terminal; the
	 * daemon reopens it, as an LMDB environment must not cross fork. */
	if (open_cache(o.cache_dir, true, &engine, &cache) != 0 ||
	    absolute_cache_dir(&o.cache_dir) != 0)
		goto out_session;
	snprintf(identity, sizeof(identity), "url:%s", o.url);
	cache_id_from_string(identity, &id);
	memset(&ec, 0, sizeof(ec));
	ec.lanes = o.lanes;
	ec.read_timeout_s = o.read_timeout_s;
	ec.fetch.max_lanes = o.lanes;
	ec.fetch.connect_timeout_ms = (long)o.connect_timeout_s * 1000;
	rc = learn_blob(&o, &ec.fetch, cache, &id, &facts);
	cache_close(cache);
	cache = NULL;
	if (rc != 0)
		goto out_session;

	if (fuse_set_signal_handlers(se) != 0) {
		fail("cannot install signal handlers");
		goto out_session;
	}
	if (fuse_session_mount(se, o.mountpoint) != 0) {
		fail("cannot mount on %s (see the line above)", o.mountpoint);
		goto out_signals;
	}
	mounted = true;
	raise_read_ahead(o.mountpoint);
	if (fuse_daemonize(o.foreground) != 0) {
		fail("cannot daemonize");
		goto out_unmount;
	}
	if (!o.foreground)
		fs__log_init(false, o.debug ? FS_LOG_DEBUG : FS_LOG_INFO);

	rc = open_cache(o.cache_dir, false, &engine, &cache);
	if (rc != 0)
		goto out_unmount;
	rc = make_blobs(name, &id, &facts, &blobs);
	if (rc == 0)
		rc = fs__engine_new(&ec, cache, blobs, 1, &engine);
	if (rc != 0) {
		fs__log(FS_LOG_ERR, "cannot start: %s", strerror(-rc));
		goto out_unmount;
	}
	blobs = NULL;
	m.engine = engine;
	m.uid = getuid();
	m.gid = getgid();
	if (facts.mtime >= 0)
		m.mtime.tv_sec = (time_t)facts.mtime;
	else
		clock_gettime(CLOCK_REALTIME, &m.mtime);
	m.attr_timeout = 3600;
	m.entry_timeout = 3600;
	rc = fs__engine_start(engine);
	if (rc != 0) {
		fs__log(FS_LOG_ERR, "cannot start the transfer thread: %s",
			strerror(-rc));
		goto out_unmount;
	}
	fs__log(FS_LOG_INFO, "mounted %s (%" PRIu64 " bytes) on %s/%s", o.url,
		engine->blobs[0].size, o.mountpoint, name);

	lc = fuse_loop_cfg_create();
	if (lc == NULL)
		goto out_unmount;
	fuse_loop_cfg_set_clone_fd(lc, 1);
	fuse_loop_cfg_set_max_threads(lc, 64);
	rc = fuse_session_loop_mt(se, lc);
	status = rc == 0 ? 0 : 1;
	fuse_loop_cfg_destroy(lc);
out_unmount:
	if (mounted)
		fuse_session_unmount(se);
out_signals:
	fuse_remove_signal_handlers(se);
out_session:
	fuse_session_destroy(se);
	fs__engine_free(engine); /* flushes the cache: nothing is queued */
	engine = NULL;		 /* after this, as on_lost reads it */
	cache_close(cache);
	free(blobs);
	free(facts.final_url);
	free(facts.validator);
out_opts:
	fs_opts_free(&o);
	return status;
}

/* mount: the pacefs command: the commands that need no mount, the
 * options, then the mount's life in its order: the checks and the
 * source's probe in the parent (check.c, prepare.c), libfuse's mount,
 * the daemon, serving until unmounted (serve.c), the teardown. Every
 * failure before the mount is one line on stderr and exit status 1, with
 * nothing left mounted. */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <fuse_lowlevel.h>

#include "fs/cli/cli.h"
#include "fs/driver/driver_int.h"
#include "fs/engine/engine.h"
#include "fs/fs.h"
#include "fs/obs/obs.h"
#include "fs/tree/tree.h"

/* libfuse's messages ("fuse: unknown option(s): ...") take our path, so
 * that the terminal sees one pacefs line and the daemon's go to syslog.
 * libfuse builds one line from several calls: collect up to the newline. */
static void log_fuse(enum fuse_log_level level, const char *fmt, va_list ap)
{
	static _Thread_local char line[1024];
	static _Thread_local size_t used;
	const char *text = line;

	vsnprintf(line + used, sizeof(line) - used, fmt, ap);
	used = strlen(line);
	if (used == 0 || (line[used - 1] != '\n' && used < sizeof(line) - 1))
		return;
	while (used > 0 && line[used - 1] == '\n')
		line[--used] = '\0';
	if (strncmp(text, "fuse: ", 6) == 0)
		text += 6;
	obs_log(level <= FUSE_LOG_ERR	    ? FS_LOG_ERR
		: level == FUSE_LOG_WARNING ? FS_LOG_WARN
		: level == FUSE_LOG_DEBUG   ? FS_LOG_DEBUG
					    : FS_LOG_INFO,
		"%s", text);
	used = 0;
	line[0] = '\0';
}

/* The log from here on (obs/log.c), libfuse's lines included. */
static void log_start(bool to_stderr, enum fs_log_level level)
{
	obs_log_init(to_stderr, level);
	fuse_set_log_func(log_fuse);
}

/* Sets the readahead of the mount's backing device to DRIVER_KERNEL_AHEAD so
 * that the kernel sends large reads (needs root; failure only costs speed)
 * and returns the readahead the kernel will use, in bytes: what it reads
 * ahead of an application is part of that reader's lead. */
static uint64_t set_read_ahead(const char *mountpoint)
{
	FILE *mi = fopen("/proc/self/mountinfo", "r");
	char line[4096], path[PATH_MAX], dev[64] = "";
	unsigned maj, min, kb = 0;

	if (mi == NULL)
		return DRIVER_KERNEL_AHEAD;
	while (fgets(line, sizeof(line), mi) != NULL) {
		char mnt[PATH_MAX];

		if (sscanf(line, "%*u %*u %u:%u %*s %4095s", &maj, &min, mnt) ==
			    3 &&
		    strcmp(mnt, mountpoint) == 0)
			snprintf(dev, sizeof(dev), "%u:%u", maj, min);
	}
	fclose(mi);
	if (dev[0] == '\0')
		return DRIVER_KERNEL_AHEAD;
	snprintf(path, sizeof(path), "/sys/class/bdi/%s/read_ahead_kb", dev);
	mi = fopen(path, "w");
	if (mi == NULL) {
		obs_log(FS_LOG_DEBUG, "cannot set %s: %s", path,
			strerror(errno));
	} else {
		fprintf(mi, "%u\n", DRIVER_KERNEL_AHEAD / 1024);
		fclose(mi);
	}
	/* The kernel takes the smaller of this and what FUSE_INIT says
	 * (DRIVER_KERNEL_AHEAD as well). */
	mi = fopen(path, "r");
	if (mi == NULL || fscanf(mi, "%u", &kb) != 1)
		kb = DRIVER_KERNEL_AHEAD / 1024;
	if (mi != NULL)
		fclose(mi);
	return (uint64_t)kb * 1024 < DRIVER_KERNEL_AHEAD ? (uint64_t)kb * 1024
							 : DRIVER_KERNEL_AHEAD;
}

/* Adds an -o option for libfuse. */
static int add_fuse_opt(struct fuse_args *args, const char *opt)
{
	if (fuse_opt_add_arg(args, "-o") != 0 ||
	    fuse_opt_add_arg(args, opt) != 0)
		return -ENOMEM;
	return 0;
}

/* pacefs status, cache and prefetch; -1 when argv names none of them. */
static int subcommand(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "status") == 0)
		return cli_status_command(argc, argv);
	if (argc > 1 && strcmp(argv[1], "cache") == 0)
		return cli_cache_command(argc, argv);
	if (argc > 1 && strcmp(argv[1], "prefetch") == 0)
		return cli_prefetch_command(argc, argv);
	if (argc > 1 && strcmp(argv[1], "plan") == 0)
		return cli_plan_command(argc, argv);
	return -1;
}

/* What the mount made, freed in the order its parts use each other: the
 * engine before the invalidator it queues into and the cache it writes,
 * the proxies after the engine's requests. After the session is
 * destroyed; m's metrics stay (the fetch hook's, until the caller ends). */
static void mount_free(struct driver_mount *m, struct driver_exit_guard *g,
		       int metrics_fd)
{
	driver__exit_guard_forget_engine(g);
	driver__sizes_free(m->sizes); /* when serve ended before its loop */
	engine_free(m->engine);	      /* flushes the cache: nothing is queued */
	m->engine = NULL;	      /* after this, as on_lost reads it */
	driver__inval_free(
		m->inval); /* the engine queued into it until freed */
	cache_close(m->cache);
	tree_ns_free(m->ns);
	fetch_proxies_free(m->fetch.proxies); /* after the engine's requests */
	driver__exit_guard_stop(g);
	if (metrics_fd >= 0)
		close(metrics_fd);
}

/* The mount itself, once the options are parsed: the checks and the
 * source's probe in the parent, libfuse's mount, the daemon, serving
 * until unmounted, the teardown. Returns the exit status. */
static int mount_and_serve(struct fs_opts *o)
{
	struct fuse_session *se = NULL;
	struct driver_mount m;
	struct driver_prepared p;
	struct driver_exit_guard guard;
	char err[1024];
	int status = 1, metrics_fd = -1;

	memset(&m, 0, sizeof(m));
	memset(&p, 0, sizeof(p));
	memset(&guard, 0, sizeof(guard));
	obs_log_format_json(o->log_format == 1);
	log_start(true, (enum fs_log_level)o->log_level);
	p.kind = driver__mount_kind_of(o->url);
	if (driver__check_inputs(o, p.kind, &p.s3, p.name, sizeof(p.name)) != 0)
		goto out_prepared;

	/* libfuse refuses unknown options here, before anything is done. */
	if (add_fuse_opt(&o->fuse_args, "ro,subtype=pacefs,fsname=pacefs") !=
		    0 ||
	    (o->debug && fuse_opt_add_arg(&o->fuse_args, "-d") != 0)) {
		driver__fail("out of memory");
		goto out_metrics;
	}
	/* libfuse takes its mount options out of the arguments. */
	for (int k = 0; k < o->fuse_args.argc; k++)
		if (strstr(o->fuse_args.argv[k], "allow_other") != NULL)
			m.allow_other = true;
	se = fuse_session_new(&o->fuse_args, &driver__ops, sizeof(driver__ops),
			      &m);
	if (se == NULL)
		goto out_metrics; /* libfuse said which option, on stderr */
	m.se = se;
	if (driver__prepare_mount(o, &m, &p) != 0)
		goto out_session;
	/* Bound here, so that a bad or busy address is a line on the
	 * terminal and nothing is mounted; the daemon serves it. */
	if (o->metrics != NULL && obs_metrics_listen(o->metrics, &metrics_fd,
						     err, sizeof(err)) != 0) {
		driver__fail("%s", err);
		goto out_session;
	}

	if (fuse_set_signal_handlers(se) != 0) {
		driver__fail("cannot install signal handlers");
		goto out_session;
	}
	if (fuse_session_mount(se, o->mountpoint) != 0) {
		driver__fail("cannot mount on %s (see the line above)",
			     o->mountpoint);
		goto out_signals;
	}
	m.kernel_ahead = set_read_ahead(o->mountpoint);
	if (fuse_daemonize(o->foreground) != 0) {
		driver__fail("cannot daemonize");
	} else {
		if (!o->foreground)
			log_start(false, (enum fs_log_level)o->log_level);
		status = driver__serve(o, se, &m, &p, &guard, &metrics_fd) == 0
				 ? 0
				 : 1;
	}
	driver__exit_guard_unmount(&guard, se);
out_signals:
	fuse_remove_signal_handlers(se);
out_session:
	fuse_session_destroy(se);
	mount_free(&m, &guard, metrics_fd);
out_prepared:
	driver__prepared_free(&p);
out_metrics:
	obs_metrics_free(m.metrics); /* the fetch hook's, until here */
	return status;
}

int fs_main(int argc, char **argv)
{
	struct fs_opts o;
	char err[1024];
	int status = subcommand(argc, argv);

	if (status >= 0)
		return status;
	if (fs_opts_parse(argc, argv, &o, err, sizeof(err)) != 0) {
		fs_opts_scrub_argv(argc, argv);
		return driver__fail("%s", err);
	}
	/* Before anything slow (the probe), and before the daemon forks
	 * with a copy of this memory. */
	fs_opts_scrub_argv(argc, argv);
	fetch_url_show_signatures(o.show_signatures);
	if (o.show_help) {
		fs_opts_usage();
		status = 0;
	} else if (o.show_version) {
		printf("pacefs %s (libfuse %s, %s)\n", PACEFS_VERSION,
		       fuse_pkgversion(), fetch_version());
		status = 0;
	} else {
		status = mount_and_serve(&o);
	}
	fs_opts_free(&o);
	return status;
}

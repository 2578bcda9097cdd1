/* check: what the command line names, checked before anything is done:
 * the URLs (or the manifest's path), the S3 source's bucket, region and
 * endpoint, the mountpoint, the file's name, the CA file and the cache
 * directory; and the one line on the terminal that a failure is. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs/auth/auth.h"
#include "fs/cli/cli.h"
#include "fs/driver/driver_int.h"
#include "fs/fs.h"
#include "fs/obs/obs.h"
#include "fs/tree/tree.h"

int driver__fail(const char *fmt, ...)
{
	char line[2048], safe[4 * 2048]; /* escaped, every byte fits */
	va_list ap;

	va_start(ap, fmt);
	obs_format_shown(line, sizeof(line), fmt, ap);
	va_end(ap);
	/* The reason may quote what a server sent. */
	fprintf(stderr, "pacefs: %s\n", fs__escape(line, safe, sizeof(safe)));
	return 1;
}

static int check_url(const char *url)
{
	if (strncmp(url, "http://", 7) != 0 && strncmp(url, "https://", 8) != 0)
		return driver__fail("URL '%s': not an http:// or https:// URL",
				    url);
	if (url[url[4] == 's' ? 8 : 7] == '\0' ||
	    url[url[4] == 's' ? 8 : 7] == '/')
		return driver__fail("URL '%s': no host", url);
	return 0;
}

/* Checks the mountpoint and replaces it by its absolute path (the daemon
 * changes directory to /). */
static int check_mountpoint(char **mp)
{
	struct stat st;
	char *abs;

	if (stat(*mp, &st) != 0)
		return driver__fail("mountpoint %s: %s", *mp, strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return driver__fail("mountpoint %s: %s", *mp,
				    strerror(ENOTDIR));
	abs = realpath(*mp, NULL);
	if (abs == NULL)
		return driver__fail("mountpoint %s: %s", *mp, strerror(errno));
	free(*mp);
	*mp = abs;
	return 0;
}

enum driver_mount_kind driver__mount_kind_of(const char *source)
{
	size_t n = strlen(source);

	/* s3://BUCKET/KEY is one object; a bucket or a PREFIX/ a tree. */
	if (strncmp(source, "s3://", 5) == 0)
		return n > 0 && source[n - 1] != '/' && strchr(source + 5, '/')
			       ? DRIVER_MOUNT_URL
			       : DRIVER_MOUNT_INDEX;

	if (strncmp(source, "http://", 7) != 0 &&
	    strncmp(source, "https://", 8) != 0)
		return DRIVER_MOUNT_MANIFEST;
	return n > 0 && source[n - 1] == '/' ? DRIVER_MOUNT_INDEX
					     : DRIVER_MOUNT_URL;
}

/* Where the region auth_creds_region finds comes from, in its order, for
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
int driver__check_inputs(struct fs_opts *o, enum driver_mount_kind kind,
			 struct tree_s3 *s3, char *name, size_t cap)
{
	char err[1024], region[256], from[4200];
	bool is_s3 = strncmp(o->url, "s3://", 5) == 0;

	if (is_s3) {
		auth_creds_region(o->region, region, sizeof(region));
		region_source(o->region, from, sizeof(from));
		if (tree_s3_parse(o->url, o->endpoint, region, from,
				  o->s3_addressing, s3, err, sizeof(err)) != 0)
			return driver__fail("%s", err);
		if (o->nmirrors > 0)
			return driver__fail(
				"option mirror: not for an s3:// source");
	} else if (o->endpoint != NULL || o->region != NULL ||
		   o->s3_addressing != NULL) {
		return driver__fail("option %s: only for an s3:// source",
				    o->endpoint != NULL ? "endpoint"
				    : o->region != NULL ? "region"
							: "s3_addressing");
	}
	if (!is_s3 && kind != DRIVER_MOUNT_MANIFEST && check_url(o->url) != 0)
		return 1;
	if (kind == DRIVER_MOUNT_MANIFEST && access(o->url, R_OK) != 0)
		return driver__fail(
			"%s: %s (not an http:// or https:// URL, nor a "
			"readable manifest)",
			o->url, strerror(errno));
	if (kind != DRIVER_MOUNT_URL &&
	    (o->name != NULL || o->nmirrors > 0 || o->has_sha256))
		return driver__fail(
			"option %s: only for a single URL; a manifest "
			"names its files, their mirrors and digests",
			o->name != NULL	  ? "name"
			: o->nmirrors > 0 ? "mirror"
					  : "sha256");
	for (unsigned i = 0; i < o->nmirrors; i++)
		if (check_url(o->mirrors[i]) != 0)
			return 1;
	if (check_mountpoint(&o->mountpoint) != 0)
		return 1;
	if (kind == DRIVER_MOUNT_URL && o->name != NULL) {
		if (fs_name_check(o->name, err, sizeof(err)) != 0)
			return driver__fail("option name: %s", err);
		snprintf(name, cap, "%s", o->name);
	} else if (kind == DRIVER_MOUNT_URL && is_s3) {
		/* A key's last segment, as it is: keys are not encoded. */
		const char *last = strrchr(s3->path, '/');

		snprintf(name, cap, "%s", last != NULL ? last + 1 : s3->path);
		if (fs_name_check(name, err, sizeof(err)) != 0)
			return driver__fail(
				"URL %s: cannot derive a file name from "
				"its key; use -o name=NAME",
				o->url);
	} else if (kind == DRIVER_MOUNT_URL &&
		   fs_name_from_url(o->url, name, cap, err, sizeof(err)) != 0) {
		return driver__fail("%s", err);
	}
	if (o->cafile != NULL && access(o->cafile, R_OK) != 0)
		return driver__fail("option cafile: %s: %s", o->cafile,
				    strerror(errno));
	if (o->cache_dir == NULL &&
	    (o->cache_dir = cli_default_cache_dir(err, sizeof(err))) == NULL)
		return driver__fail("%s", err);
	return 0;
}

/* values: the values the command line reads and shows beside its option
 * table: a file name (given, or derived from a URL), a size as written
 * and as people read it, the default cache directory; and the options'
 * strings freed (fs_opts_free). */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <fuse_opt.h>

#include "fs/auth/auth.h"
#include "fs/base.h"
#include "fs/cli/cli.h"
#include "fs/cli/cli_int.h"
#include "fs/fs.h"

int fs_name_check(const char *name, char *err, size_t errlen)
{
	if (name[0] == '\0' || strcmp(name, ".") == 0 ||
	    strcmp(name, "..") == 0 || strchr(name, '/') != NULL) {
		return fs__errf(
			err, errlen, -EINVAL,
			"'%s' is not a usable file name (empty, '.', '..' "
			"or containing '/')",
			name);
	}
	if (strlen(name) > NAME_MAX) {
		return fs__errf(err, errlen, -EINVAL,
				"file name longer than %d bytes", NAME_MAX);
	}
	return 0;
}

int fs_name_from_url(const char *url, char *out, size_t cap, char *err,
		     size_t errlen)
{
	const char *p = strstr(url, "://");
	const char *path, *stop, *seg;
	size_t n;
	int rc;

	p = p != NULL ? p + 3 : url;
	path = strchr(p, '/');
	if (path == NULL)
		path = p + strlen(p);
	stop = path + strcspn(path, "?#");
	seg = stop;
	while (seg > path && seg[-1] != '/')
		seg--;
	rc = fs__pct_decode(seg, (size_t)(stop - seg), 0, out, cap, &n);
	if (rc == -EINVAL)
		return fs__errf(err, errlen, -EINVAL,
				"URL %s: its last path segment decodes to a "
				"NUL byte; use -o name=NAME",
				url);
	if (rc != 0)
		return fs__errf(err, errlen, -EINVAL,
				"URL %s: its last path segment is too long for "
				"a file name; use -o name=NAME",
				url);
	if (fs_name_check(out, err, errlen) != 0) {
		return fs__errf(
			err, errlen, -EINVAL,
			"URL %s: cannot derive a file name from its last "
			"path segment; use -o name=NAME",
			url);
	}
	return 0;
}

int fs_parse_size(const char *v, uint64_t *out)
{
	uint64_t n = 0, mult = 1;
	const char *p = v;

	if (*p < '0' || *p > '9')
		return -EINVAL;
	for (; *p >= '0' && *p <= '9'; p++) {
		if (n > (UINT64_MAX - 9) / 10)
			return -EINVAL;
		n = n * 10 + (uint64_t)(*p - '0');
	}
	switch (*p) {
	case 'k':
	case 'K':
		mult = 1ull << 10;
		break;
	case 'm':
	case 'M':
		mult = 1ull << 20;
		break;
	case 'g':
	case 'G':
		mult = 1ull << 30;
		break;
	case 't':
	case 'T':
		mult = 1ull << 40;
		break;
	case '\0':
		break;
	default:
		return -EINVAL;
	}
	if (*p != '\0' && strcmp(p + 1, "") != 0 && strcmp(p + 1, "B") != 0 &&
	    strcmp(p + 1, "iB") != 0)
		return -EINVAL;
	if (n > UINT64_MAX / mult)
		return -EINVAL;
	*out = n * mult;
	return 0;
}

char *cli_default_cache_dir(char *err, size_t errlen)
{
	const char *xdg = getenv("XDG_CACHE_HOME");
	const char *home = getenv("HOME");
	struct passwd pw, *res = NULL;
	char buf[PATH_MAX], pwbuf[4096];
	char *dir;

	if (geteuid() == 0)
		return strdup("/var/cache/pacefs");
	/* Without HOME, the account's own home: a fixed path under /var/tmp
	 * would let another user create it first and feed this one. */
	if ((home == NULL || home[0] != '/') &&
	    getpwuid_r(geteuid(), &pw, pwbuf, sizeof(pwbuf), &res) == 0 &&
	    res != NULL && pw.pw_dir != NULL && pw.pw_dir[0] == '/' &&
	    pw.pw_dir[1] != '\0')
		home = pw.pw_dir;
	else if (home != NULL && home[0] != '/')
		home = NULL;
	if (xdg != NULL && xdg[0] == '/')
		snprintf(buf, sizeof(buf), "%s/pacefs", xdg);
	else if (home != NULL && home[0] == '/')
		snprintf(buf, sizeof(buf), "%s/.cache/pacefs", home);
	else {
		fs__errf(err, errlen, -ENOENT,
			 "no cache directory: neither XDG_CACHE_HOME nor HOME "
			 "is set and uid %lu has no home directory; use -o "
			 "cache_dir=DIR",
			 (unsigned long)geteuid());
		return NULL;
	}
	dir = strdup(buf);
	if (dir == NULL)
		fs__errf(err, errlen, -ENOMEM, "out of memory");
	return dir;
}

const char *cli__human_size(uint64_t n, char *buf, size_t cap)
{
	static const char *const unit[] = {"B",	  "KiB", "MiB",
					   "GiB", "TiB", "PiB"};
	double v = (double)n;
	int u = 0;

	while (v >= 1024 && u < 5) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, cap, "%" PRIu64 " B", n);
	else
		snprintf(buf, cap, "%.1f %s", v, unit[u]);
	return buf;
}

void fs_opts_free(struct fs_opts *o)
{
	fuse_opt_free_args(&o->fuse_args);
	free(o->url);
	free(o->url_file);
	free(o->mountpoint);
	free(o->cache_dir);
	free(o->name);
	for (unsigned i = 0; i < o->nmirrors; i++)
		free(o->mirrors[i]);
	free(o->mirrors);
	auth_headers_free(o->headers, o->nheaders);
	for (unsigned i = 0; i < o->nheader_files; i++)
		free(o->header_files[i]);
	free(o->header_files);
	free(o->auth_command);
	free(o->endpoint);
	free(o->region);
	free(o->s3_addressing);
	free(o->cafile);
	free(o->proxy);
	free(o->metrics);
	for (unsigned i = 0; i < o->nmetrics_labels; i++)
		free(o->metrics_labels[i]);
	free(o->metrics_labels);
	memset(o, 0, sizeof(*o));
}

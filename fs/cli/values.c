/* values: what the command line reads and shows besides its options:
 * the default cache directory, a size as people read it. */
#include <inttypes.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fs/cli/cli.h"
#include "fs/cli/cli_int.h"

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
		snprintf(err, errlen,
			 "no cache directory: neither XDG_CACHE_HOME nor HOME "
			 "is set and uid %lu has no home directory; use -o "
			 "cache_dir=DIR",
			 (unsigned long)geteuid());
		return NULL;
	}
	dir = strdup(buf);
	if (dir == NULL)
		snprintf(err, errlen, "out of memory");
	return dir;
}

const char *cli__human_size(uint64_t n, char *buf, size_t cap)
{
	static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
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

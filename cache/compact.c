/* compact: `pacefs cache gc`: rewrites the environment without its free
 * pages, under an exclusive lock that keeps every other process out. */
#include "cache/cache_int.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static uint64_t cache__file_size(const char *dir)
{
	char path[PATH_MAX];
	struct stat st;

	snprintf(path, sizeof(path), "%s/data.mdb", dir);
	return stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
}

/* Logs that step of the compaction failed with rc; returns rc. */
static int compact_fail(struct cache *c, const char *step, int rc)
{
	cache__log(c, CACHE_LOG_ERR, "%s: compact: %s: %s", c->dir, step,
		   strerror(-rc));
	return rc;
}

/* Every process with the environment open holds a shared fcntl lock on
 * byte 0 of lock.mdb; turning ours into an exclusive one succeeds only
 * when no other process has it open, and makes a process that opens it
 * meanwhile wait in mdb_env_open until we are done. Writes the lock
 * file's descriptor to *fd (-1 when it did not open; the caller closes
 * it, after closing the environment). Returns 0, -EBUSY with the process
 * that holds it logged, or a negative errno, logged. */
static int lock_alone(struct cache *c, int *fd)
{
	char lockpath[PATH_MAX];
	struct flock fl = {.l_type = F_WRLCK,
			   .l_whence = SEEK_SET,
			   .l_start = 0,
			   .l_len = 1};
	struct flock who;

	snprintf(lockpath, sizeof(lockpath), "%s/lock.mdb", c->dir);
	*fd = open(lockpath, O_RDWR | O_CLOEXEC);
	if (*fd < 0)
		return compact_fail(c, "lock", -errno);
	if (fcntl(*fd, F_SETLK, &fl) == 0)
		return 0;
	who = fl;
	if (fcntl(*fd, F_GETLK, &who) == 0 && who.l_type != F_UNLCK)
		cache__log(c, CACHE_LOG_ERR,
			   "%s: in use by another process (pid %ld, "
			   "perhaps a mount); unmount it first",
			   c->dir, (long)who.l_pid);
	else
		cache__log(c, CACHE_LOG_ERR,
			   "%s: in use by another process; unmount "
			   "it first",
			   c->dir);
	return -EBUSY;
}

/* Copies the environment without its free pages into compact.tmp/,
 * syncs the copy and renames it over data.mdb: a crash leaves the old
 * file or the new one whole, and a failed step leaves no copy behind.
 * Returns 0 or a negative errno, *step naming the step that failed. */
static int copy_swap(struct cache *c, const char **step)
{
	char tmp[PATH_MAX], from[PATH_MAX], to[PATH_MAX];
	int cfd, rc;

	snprintf(tmp, sizeof(tmp), "%s/compact.tmp", c->dir);
	snprintf(from, sizeof(from), "%s/compact.tmp/data.mdb", c->dir);
	snprintf(to, sizeof(to), "%s/data.mdb", c->dir);
	*step = "copy";
	unlink(from);
	rmdir(tmp);
	if (mkdir(tmp, 0700) != 0)
		return -errno;
	rc = mdb_env_copy2(c->env, tmp, MDB_CP_COMPACT);
	if (rc) {
		rc = cache__errno(rc);
		goto out;
	}
	*step = "fsync";
	cfd = open(from, O_RDONLY | O_CLOEXEC);
	if (cfd < 0 || fsync(cfd) != 0) {
		rc = -errno;
		if (cfd >= 0)
			close(cfd);
		goto out;
	}
	close(cfd);
	*step = "swap";
	if (rename(from, to) != 0)
		rc = -errno;
out:
	if (rc)
		unlink(from);
	rmdir(tmp);
	return rc;
}

int cache_compact(const struct cache_config *cfg, uint64_t *before,
		  uint64_t *after)
{
	struct cache *c = NULL;
	const char *step = "copy";
	int fd = -1, rc;

	if (!cfg || !cfg->dir || !before || !after)
		return -EINVAL;
	rc = cache_open(cfg, &c);
	if (rc)
		return rc;
	rc = lock_alone(c, &fd);
	if (rc)
		goto out;
	rc = cache_flush(c);
	if (rc) {
		compact_fail(c, "flush", rc);
		goto out;
	}
	/* The copy follows every overflow value's page count: check their
	 * headers first (cache_open does not read them). */
	rc = cache__file_check(c, true);
	if (rc)
		goto out;
	*before = cache__file_size(c->dir);
	rc = copy_swap(c, &step);
	if (rc) {
		compact_fail(c, step, rc);
		goto out;
	}
	*after = cache__file_size(c->dir);
out:
	/* Closing the environment closes its lock file, which drops every
	 * fcntl lock of this process on it, ours included. */
	cache_close(c);
	if (fd >= 0)
		close(fd);
	return rc;
}

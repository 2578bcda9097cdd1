/* dirmode: the cache directory must belong to the user who opens it, as
 * ssh's StrictModes demands of ~/.ssh: bytes another user can write into
 * it would be served as the blob's. */
#include "cache/cache_int.h"

#include <errno.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* "uid 65534 (nobody)" */
static void dm_owner(uid_t uid, char *buf, size_t cap)
{
	struct passwd pw, *res = NULL;
	char tmp[1024];

	if (getpwuid_r(uid, &pw, tmp, sizeof(tmp), &res) == 0 && res)
		snprintf(buf, cap, "uid %lu (%s)", (unsigned long)uid,
			 pw.pw_name);
	else
		snprintf(buf, cap, "uid %lu", (unsigned long)uid);
}

/* Checks one path; is_dir: a directory (symlinks to one are followed),
 * else a regular file (a symlink is refused: LMDB would follow it). */
static int dm_check(const char *path, bool is_dir, bool shared, char *msg,
		    size_t msglen)
{
	struct stat st;
	char owner[64], me[64];
	uid_t euid = geteuid();

	if ((is_dir ? stat(path, &st) : lstat(path, &st)) != 0) {
		int err = errno;

		if (err == ENOENT && !is_dir)
			return 0; /* LMDB creates it, 0600 */
		snprintf(msg, msglen, "%s: %s", path, strerror(err));
		return -err;
	}
	if (is_dir ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode)) {
		snprintf(msg, msglen, "%s: not a %s; refused", path,
			 is_dir ? "directory" : "regular file");
		return is_dir ? -ENOTDIR : -EPERM;
	}
	if (shared ||
	    (st.st_uid == euid && !(st.st_mode & (S_IWGRP | S_IWOTH))))
		return 0;
	dm_owner(st.st_uid, owner, sizeof(owner));
	dm_owner(euid, me, sizeof(me));
	snprintf(msg, msglen,
		 "%s is owned by %s with mode %04o; refused: a cache must be "
		 "owned by the user who opens it (%s) and not writable by "
		 "group or others, who could plant bytes in it. Fix its owner "
		 "or mode, or accept a deliberately shared cache with "
		 "-o cache_shared (pacefs cache: --cache-shared)",
		 path, owner, (unsigned)(st.st_mode & 07777), me);
	return -EPERM;
}

int cache__dir_check(const char *dir, bool shared, char *msg, size_t msglen)
{
	static const char *const files[] = {"data.mdb", "lock.mdb"};
	char path[PATH_MAX];
	int rc;

	rc = dm_check(dir, true, shared, msg, msglen);
	for (size_t i = 0; rc == 0 && i < sizeof(files) / sizeof(files[0]);
	     i++) {
		if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir,
				     files[i]) >= sizeof(path)) {
			snprintf(msg, msglen, "%s: path too long", dir);
			return -ENAMETOOLONG;
		}
		rc = dm_check(path, false, shared, msg, msglen);
	}
	return rc;
}

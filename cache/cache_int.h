/* cache_int: what the files of cache/ share and nothing outside includes:
 * the block checksum, the structural check of data.mdb and the ownership
 * check of the cache directory. */
#ifndef CACHE_INT_H
#define CACHE_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <lmdb.h>

#include "cache/cache.h"

/* ---- block checksum (blocksum.c) ---- */

/* Every stored block value is the block's bytes followed by this many
 * bytes: the big-endian XXH3-64 of the bytes, seeded by the block's key
 * (id, index), so that bytes moved under another key fail too. */
#define CACHE__SUM_LEN 8u

/* Writes the trailer of block (id, index) holding data[0..len) to out. */
void cache__sum_put(const struct cache_id *id, uint64_t index,
		    const void *data, size_t len,
		    unsigned char out[CACHE__SUM_LEN]);

/* Whether trailer matches data[0..len) of block (id, index). */
bool cache__sum_ok(const struct cache_id *id, uint64_t index, const void *data,
		   size_t len, const unsigned char trailer[CACHE__SUM_LEN]);

/* ---- structural check of data.mdb (envcheck.c) ---- */

/* Checks the snapshot of the environment that txn (a read transaction of
 * env, whose data file is open as fd) sees, reading pages with pread, never
 * through the map, so that no damage can fault: the file holds every page
 * the snapshot uses; every branch, leaf and overflow page of every database
 * (the free list and the main database included) has a sound header, lies
 * inside the file, is used once, and its nodes fit in it; keys ascend;
 * entry and page counts match the database records; tree depth is bounded.
 * Returns 0 (sound), -EPROTO (damaged: why in msg, one line), or a
 * negative errno from reading the file. */
int cache__env_check(int fd, MDB_env *env, MDB_txn *txn, char *msg,
		     size_t msglen);

/* ---- ownership of the cache directory (dirmode.c) ---- */

/* Refuses, like ssh's StrictModes, a cache directory or a data.mdb or
 * lock.mdb in it that is not owned by the effective uid, is writable by
 * group or others, or (the files) is not a regular file. With shared, only
 * the type is checked. Missing files are fine (LMDB creates them 0600).
 * Returns 0, or -EPERM with one line naming the path, its owner and mode
 * in msg, or a negative errno from lstat/stat (the step in msg). */
int cache__dir_check(const char *dir, bool shared, char *msg, size_t msglen);

#endif

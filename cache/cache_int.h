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

/* ---- block checksums (blocksum.c) ---- */

/* Every stored block value is the block's bytes followed by a checksum of
 * each CACHE__SUM_CHUNK bytes of them (the last chunk may be shorter): the
 * big-endian XXH3-64 of the chunk, seeded by the block's key (id, index)
 * plus the chunk's number, so that bytes moved under another key or to
 * another place fail too. Per chunk, a small read checks only what it
 * reads. */
#define CACHE__SUM_CHUNK 4096u
#define CACHE__SUM_LEN 8u

/* The number of chunks of a block of len bytes. */
size_t cache__sum_chunks(size_t len);

/* The size of the stored value of a block of len bytes. */
size_t cache__sum_value_len(size_t len);

/* The block length of a stored value of vlen bytes; false when no block
 * length gives that value size (a damaged value). */
bool cache__sum_block_len(size_t vlen, size_t *len);

/* The seed of block (id, index), for the two functions below. */
uint64_t cache__sum_seed(const struct cache_id *id, uint64_t index);

/* Writes the checksums of the len bytes of a block to out (8 bytes per
 * chunk). */
void cache__sum_put(uint64_t seed, const void *data, size_t len,
		    unsigned char *out);

/* Whether the len bytes at data, which start at chunk `first` of the block
 * and end at a chunk boundary or at the block's end, match the checksums
 * at sums (8 bytes per chunk, from chunk `first` on). */
bool cache__sum_ok(uint64_t seed, size_t first, const void *data, size_t len,
		   const unsigned char *sums);

/* ---- structural check of data.mdb (envcheck.c) ---- */

/* Checks the snapshot of the environment that txn (a read transaction of
 * env, whose data file is open as fd) sees, reading pages with pread, never
 * through the map, so that no damage can fault: the file holds every page
 * the snapshot uses; every branch and leaf page of every database (the
 * free list and the main database included) has a sound header, lies
 * inside the file, is used once, and its nodes fit in it; every overflow
 * value's pages lie inside the file and are used once (with deep, the
 * header of its first page is read and checked too: one scattered read
 * per value); keys ascend; entry and page counts match the database
 * records; tree depth is bounded. Returns 0 (sound), -EPROTO (damaged: why
 * in msg, one line), or a negative errno from reading the file. */
int cache__env_check(int fd, MDB_env *env, MDB_txn *txn, bool deep, char *msg,
		     size_t msglen);

/* The same walk without LMDB (the fuzz target's entry): pages of psize
 * bytes, the snapshot of the meta page whose txnid is txnid (-EAGAIN when
 * neither meta page has it). */
int cache__file_walk(int fd, size_t psize, uint64_t txnid, bool deep, char *msg,
		     size_t msglen);

/* Before LMDB frees the overflow pages of a value (a delete, or a put over
 * it), it trusts the page count in their first page's header: checks that
 * header (read from fd, else from the map) for the value LMDB returned at
 * `value` (vsize bytes) inside the map at `map` (map_len bytes, pages of
 * psize bytes). Returns 0 (sound; or an inline value, or one outside the
 * map: a page of the current write transaction), -EPROTO. */
int cache__ov_ok(int fd, const unsigned char *map, size_t map_len, size_t psize,
		 const void *value, size_t vsize);

/* ---- ownership of the cache directory (dirmode.c) ---- */

/* Refuses, like ssh's StrictModes, a cache directory or a data.mdb or
 * lock.mdb in it that is not owned by the effective uid, is writable by
 * group or others, or (the files) is not a regular file. With shared, only
 * the type is checked. Missing files are fine (LMDB creates them 0600).
 * Returns 0, or -EPERM with one line naming the path, its owner and mode
 * in msg, or a negative errno from lstat/stat (the step in msg). */
int cache__dir_check(const char *dir, bool shared, char *msg, size_t msglen);

#endif

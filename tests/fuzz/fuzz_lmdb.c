/* fuzz_lmdb: the structural walk of a cache's data.mdb (cache__file_walk,
 * cache/envcheck.c) on any file: it must end, never read out of bounds,
 * and refuse with one non-empty line. The page size and the snapshot are
 * taken from the input's meta pages, as LMDB would. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cache/cache_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A native size_t at byte off of data, or 0 past its end. */
static uint64_t word_at(const uint8_t *data, size_t size, size_t off)
{
	size_t v = 0;

	if (off + sizeof(v) <= size)
		memcpy(&v, data + off, sizeof(v));
	return v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* LMDB's meta page: header (16), magic, version, address, map size
	 * (24), then the free list's record whose first u32 is the page
	 * size, ..., and the txnid at byte 144. */
	uint32_t psize = 4096;
	uint64_t t0, t1;
	char msg[512];
	int fd, rc;

	if (size >= 44)
		memcpy(&psize, data + 40, sizeof(psize));
	if (psize != 512 && psize != 1024 && psize != 2048)
		psize = 4096;
	t0 = word_at(data, size, 144);
	t1 = word_at(data, size, psize + 144);
	fd = memfd_create("fuzz_lmdb", MFD_CLOEXEC);
	if (fd < 0)
		return 0;
	if (size && write(fd, data, size) != (ssize_t)size) {
		close(fd);
		return 0;
	}
	for (int deep = 0; deep < 2; deep++) {
		rc = cache__file_walk(fd, psize, t0 > t1 ? t0 : t1, deep, msg,
				      sizeof(msg));
		if (rc != 0 && rc != -EPROTO && rc != -EAGAIN && rc != -ENOMEM)
			abort();
		if (rc == -EPROTO && (msg[0] == '\0' || strchr(msg, '\n')))
			abort();
	}
	close(fd);
	return 0;
}

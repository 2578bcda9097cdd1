/* bench: measures the cache's write and read throughput for the block size
 * it is built with (make cache-bench builds 64K, 256K and 1M variants). */
#include "cache/cache.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define READ_SIZE (1u << 20) /* a FUSE read with max_pages=256 */

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int rm_one(const char *path, const struct stat *st, int flag,
		  struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static void quiet_log(void *ctx, enum cache_log_level level, const char *msg)
{
	(void)ctx;
	if (level == CACHE_LOG_ERR)
		fprintf(stderr, "cache: %s\n", msg);
}

/* Drops the page cache so that the next read comes from the disk; needs
 * root. Returns false when it cannot. */
static bool drop_caches(void)
{
	int fd;
	bool ok;

	sync();
	fd = open("/proc/sys/vm/drop_caches", O_WRONLY);
	if (fd < 0)
		return false;
	ok = write(fd, "3\n", 2) == 2;
	close(fd);
	return ok;
}

struct reader {
	struct cache *c;
	struct cache_id id;
	uint64_t size;
	int part, nparts;
	unsigned char *buf;
	int err;
};

/* Reads this reader's share of the blob in READ_SIZE reads, each split
 * into per-block cache_block_read() calls as fs/ does. */
static void *read_seq(void *arg)
{
	struct reader *r = arg;
	uint64_t share = r->size / (uint64_t)r->nparts;
	uint64_t from = share * (uint64_t)r->part, to = from + share;

	for (uint64_t off = from; off < to; off += READ_SIZE) {
		for (uint64_t pos = off; pos < off + READ_SIZE && pos < to;) {
			uint64_t index = pos / CACHE_BLOCK_SIZE;
			size_t boff = (size_t)(pos % CACHE_BLOCK_SIZE);
			size_t want = CACHE_BLOCK_SIZE - boff;
			if (want > off + READ_SIZE - pos)
				want = (size_t)(off + READ_SIZE - pos);
			long got = cache_block_read(r->c, &r->id, index, boff,
						    r->buf + (pos - off), want);
			if (got != (long)want) {
				r->err = got < 0 ? (int)got : -EIO;
				return NULL;
			}
			pos += want;
		}
	}
	return NULL;
}

static double read_all(struct cache *c, const struct cache_id *id,
		       uint64_t size, int threads)
{
	pthread_t th[16];
	struct reader r[16];
	double t0 = now_s();

	for (int i = 0; i < threads; i++) {
		r[i] = (struct reader){.c = c,
				       .id = *id,
				       .size = size,
				       .part = i,
				       .nparts = threads,
				       .buf = malloc(READ_SIZE)};
		pthread_create(&th[i], NULL, read_seq, &r[i]);
	}
	for (int i = 0; i < threads; i++) {
		pthread_join(th[i], NULL);
		free(r[i].buf);
		if (r[i].err) {
			fprintf(stderr, "read failed: %s\n",
				strerror(-r[i].err));
			exit(1);
		}
	}
	return (double)size / (now_s() - t0) / 1e6;
}

/* Random 4 KiB reads (a seeking reader: zip directory, parquet footer). */
static double read_random(struct cache *c, const struct cache_id *id,
			  uint64_t size, int n)
{
	unsigned char buf[4096];
	unsigned seed = 1;
	double t0 = now_s();

	for (int i = 0; i < n; i++) {
		uint64_t off = ((uint64_t)rand_r(&seed) << 16 ^
				(uint64_t)rand_r(&seed)) %
			       (size - sizeof(buf));
		off &= ~(uint64_t)4095;
		long got = cache_block_read(c, id, off / CACHE_BLOCK_SIZE,
					    (size_t)(off % CACHE_BLOCK_SIZE),
					    buf, sizeof(buf));
		if (got <= 0) {
			fprintf(stderr, "random read failed\n");
			exit(1);
		}
	}
	return n / (now_s() - t0);
}

int main(int argc, char **argv)
{
	uint64_t mib = argc > 1 ? strtoull(argv[1], NULL, 10) : 1024;
	char dir[] = "/var/tmp/pacefs-bench-XXXXXX";
	struct cache_config cfg = {.dir = dir, .log = quiet_log};
	struct cache *c = NULL;
	struct cache_id id;
	struct cache_stats st;
	uint64_t size = mib << 20, nblocks = size / CACHE_BLOCK_SIZE;
	unsigned char *data = malloc(CACHE_BLOCK_SIZE);
	double t0, wr, rd1, rd4, rnd, cold = -1;

	if (argc > 2)
		snprintf(dir, sizeof(dir), "%s", argv[2]);
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	for (size_t i = 0; i < CACHE_BLOCK_SIZE; i++)
		data[i] = (unsigned char)(i * 2654435761u >> 13);
	cache_id_from_string("bench", &id);
	if (cache_open(&cfg, &c) != 0)
		return 1;

	t0 = now_s();
	for (uint64_t i = 0; i < nblocks; i++) {
		memcpy(data, &i, sizeof(i)); /* no two blocks alike */
		if (cache_block_put(c, &id, i, data, CACHE_BLOCK_SIZE) != 0)
			return 1;
	}
	if (cache_flush(c) != 0)
		return 1;
	wr = (double)size / (now_s() - t0) / 1e6;

	rd1 = read_all(c, &id, size, 1);
	rd1 = read_all(c, &id, size, 1);
	rd4 = read_all(c, &id, size, 4);
	rnd = read_random(c, &id, size, 200000);
	cache_stats_get(c, &st);
	cache_close(c);
	c = NULL;

	if (drop_caches()) {
		if (cache_open(&cfg, &c) != 0)
			return 1;
		cold = read_all(c, &id, size, 1);
		cache_close(c);
	}

	printf("block %4u KiB  %" PRIu64 " MiB  write %6.0f MB/s  "
	       "read warm 1 thr %6.0f MB/s, 4 thr %6.0f MB/s  "
	       "cold %6.0f MB/s  random 4K %7.0f /s  disk/bytes %.4f\n",
	       CACHE_BLOCK_SIZE / 1024, mib, wr, rd1, rd4, cold, rnd,
	       (double)st.file_size / (double)size);
	nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	free(data);
	return 0;
}

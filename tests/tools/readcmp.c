/* readcmp: compares a file read through a pacefs mount (A) against its source
 * (B) by sequential, seeded random and block-straddling reads. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define READCMP_SEQ_BUF (128 * 1024)
#define READCMP_MAXLEN (1024 * 1024 + 4099)

enum mode { MODE_SEQ, MODE_RANDOM, MODE_STRADDLE };

struct side {
	const char *path;
	int fd;
	uint64_t size;
	unsigned char *buf;
};

static void usage(void)
{
	fprintf(stderr,
		"usage: readcmp seq A B [bufsize]\n"
		"       readcmp random A B COUNT SEED [maxlen]\n"
		"       readcmp straddle A B BLOCK\n"
		"A is read through the mount, B is the source; exit 0 when "
		"equal, 1 on a mismatch or read error, 2 on bad usage.\n"
		"READCMP_DONTNEED=1 drops A's page cache before reading.\n");
}

/* Parses a decimal unsigned number; returns 0 or -EINVAL. */
static int parse_u64(const char *s, uint64_t *out)
{
	char *end = NULL;
	unsigned long long v;

	if (s[0] == '\0' || s[0] == '-')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno != 0 || *end != '\0')
		return -EINVAL;
	*out = v;
	return 0;
}

/* Opens one side and records its size; returns 0 or -errno. */
static int side_open(struct side *s, const char *path, size_t bufsize)
{
	struct stat st;

	s->path = path;
	s->buf = NULL;
	s->fd = open(path, O_RDONLY);
	if (s->fd < 0) {
		fprintf(stderr, "readcmp: open %s: %s\n", path,
			strerror(errno));
		return -errno;
	}
	if (fstat(s->fd, &st) != 0) {
		fprintf(stderr, "readcmp: stat %s: %s\n", path,
			strerror(errno));
		return -errno;
	}
	s->size = (uint64_t)st.st_size;
	s->buf = malloc(bufsize > 0 ? bufsize : 1);
	if (s->buf == NULL) {
		fprintf(stderr, "readcmp: out of memory\n");
		return -ENOMEM;
	}
	return 0;
}

static void side_close(struct side *s)
{
	if (s->fd >= 0)
		close(s->fd);
	free(s->buf);
}

/* Reads up to len bytes with as many read() calls as it takes, stopping at
 * EOF; returns the byte count or -1 with errno set. */
static ssize_t read_full(int fd, unsigned char *buf, size_t len)
{
	size_t got = 0;

	while (got < len) {
		ssize_t n = read(fd, buf + got, len - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		if (n == 0)
			break;
		got += (size_t)n;
	}
	return (ssize_t)got;
}

/* Reports the first differing byte of two equal-length buffers that start at
 * file offset off; returns 0 when they are equal, 1 otherwise. */
static int compare(const struct side *a, const struct side *b, uint64_t off,
		   size_t len, const char *what)
{
	size_t i;

	if (memcmp(a->buf, b->buf, len) == 0)
		return 0;
	for (i = 0; i < len && a->buf[i] == b->buf[i]; i++)
		;
	printf("readcmp: %s: first difference at offset %" PRIu64
	       ": %s has 0x%02x, %s has 0x%02x\n",
	       what, off + i, a->path, a->buf[i], b->path, b->buf[i]);
	return 1;
}

static int check_sizes(const struct side *a, const struct side *b)
{
	if (a->size == b->size)
		return 0;
	printf("readcmp: size differs: %s is %" PRIu64 " bytes, %s is %" PRIu64
	       " bytes\n",
	       a->path, a->size, b->path, b->size);
	return 1;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* seq also says how long its longest read of A took: a mount that lost
 * a proxy or a source mid-read must not make a reader wait. */
static int run_seq(struct side *a, struct side *b, size_t bufsize)
{
	uint64_t off = 0;
	double longest = 0;

	if (check_sizes(a, b) != 0)
		return 1;
	for (;;) {
		double t0 = now_s();
		ssize_t na = read_full(a->fd, a->buf, bufsize);
		ssize_t nb;

		if (now_s() - t0 > longest)
			longest = now_s() - t0;

		if (na < 0) {
			printf("readcmp: seq: read %s at %" PRIu64 ": %s\n",
			       a->path, off, strerror(errno));
			return 1;
		}
		nb = read_full(b->fd, b->buf, bufsize);
		if (nb < 0) {
			printf("readcmp: seq: read %s at %" PRIu64 ": %s\n",
			       b->path, off, strerror(errno));
			return 1;
		}
		if (compare(a, b, off, (size_t)(na < nb ? na : nb), "seq"))
			return 1;
		if (na != nb) {
			printf("readcmp: seq: EOF differs: %s ends at %" PRIu64
			       ", %s at %" PRIu64 "\n",
			       a->path, off + (uint64_t)na, b->path,
			       off + (uint64_t)nb);
			return 1;
		}
		off += (uint64_t)na;
		if ((size_t)na < bufsize)
			break;
	}
	if (off != b->size) {
		printf("readcmp: seq: read %" PRIu64
		       " bytes but size is %" PRIu64 "\n",
		       off, b->size);
		return 1;
	}
	printf("readcmp: seq: %" PRIu64 " bytes equal, longest read %.3f s\n",
	       off, longest);
	return 0;
}

/* Does one pread of [off, off+len) on both sides and compares the return
 * values and bytes; returns 0 when equal, 1 otherwise. Adds the bytes
 * compared to *bytes when bytes is not NULL. */
static int pread_cmp(struct side *a, struct side *b, uint64_t off, size_t len,
		     const char *what, uint64_t *bytes)
{
	ssize_t na, nb;

	na = pread(a->fd, a->buf, len, (off_t)off);
	if (na < 0) {
		printf("readcmp: %s: pread %s [%" PRIu64 ", +%zu): %s\n", what,
		       a->path, off, len, strerror(errno));
		return 1;
	}
	nb = pread(b->fd, b->buf, len, (off_t)off);
	if (nb < 0) {
		printf("readcmp: %s: pread %s [%" PRIu64 ", +%zu): %s\n", what,
		       b->path, off, len, strerror(errno));
		return 1;
	}
	if (na != nb) {
		printf("readcmp: %s: pread [%" PRIu64 ", +%zu) returned %zd "
		       "on %s but %zd on %s\n",
		       what, off, len, na, a->path, nb, b->path);
		return 1;
	}
	if (bytes != NULL)
		*bytes += (uint64_t)na;
	return compare(a, b, off, (size_t)na, what);
}

/* splitmix64: a small seeded generator, so a failing seed replays exactly. */
static uint64_t rng_next(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static uint64_t rng_below(uint64_t *state, uint64_t n)
{
	return n == 0 ? 0 : rng_next(state) % n;
}

static int run_random(struct side *a, struct side *b, uint64_t count,
		      uint64_t seed, size_t maxlen)
{
	uint64_t state = seed;
	uint64_t size = b->size;
	uint64_t bytes = 0;
	uint64_t i;

	if (check_sizes(a, b) != 0)
		return 1;
	for (i = 0; i < count; i++) {
		uint64_t kind = rng_below(&state, 10);
		uint64_t off;
		size_t len;

		/* Mostly offsets inside the file; some near its end, some
		 * past it, some zero-length reads. */
		if (kind < 6)
			off = rng_below(&state, size + 1);
		else if (kind < 8)
			off = size -
			      rng_below(&state, size < 8192 ? size + 1 : 8192);
		else
			off = size + rng_below(&state, 4096);
		if (rng_below(&state, 16) == 0)
			len = 0;
		else if (rng_below(&state, 2) == 0)
			len = 1 + (size_t)rng_below(&state, 8192 < maxlen
								    ? 8192
								    : maxlen);
		else
			len = 1 + (size_t)rng_below(&state, maxlen);
		if (pread_cmp(a, b, off, len, "random", &bytes) != 0) {
			printf("readcmp: random: read %" PRIu64 " of %" PRIu64
			       " (seed %" PRIu64 ")\n",
			       i + 1, count, seed);
			return 1;
		}
	}
	printf("readcmp: random: %" PRIu64 " preads equal, %" PRIu64
	       " bytes (seed %" PRIu64 ")\n",
	       count, bytes, seed);
	return 0;
}

/* Reads around the boundary at bound: for each pair of distances, the range
 * [bound - before, bound + after), clipped at offset 0. */
static int straddle_one(struct side *a, struct side *b, uint64_t bound,
			uint64_t block, uint64_t *reads)
{
	const uint64_t dist[] = {0,	1,	   7,	  4096,
				 65536, block / 2, block, block + 1};
	size_t nd = sizeof(dist) / sizeof(dist[0]);
	size_t i, j;

	for (i = 0; i < nd; i++) {
		for (j = 0; j < nd; j++) {
			uint64_t before = dist[i] > bound ? bound : dist[i];
			uint64_t len = before + dist[j];

			if (len == 0)
				continue;
			(*reads)++;
			if (pread_cmp(a, b, bound - before, (size_t)len,
				      "straddle", NULL) != 0) {
				printf("readcmp: straddle: around boundary "
				       "%" PRIu64 " (block %" PRIu64 ")\n",
				       bound, block);
				return 1;
			}
		}
	}
	return 0;
}

static int run_straddle(struct side *a, struct side *b, uint64_t block)
{
	uint64_t last = b->size / block; /* last multiple inside or at EOF */
	uint64_t picks[] = {1,	      2,    3,	     last / 2, last / 2 + 1,
			    last - 1, last, last + 1};
	size_t npicks = sizeof(picks) / sizeof(picks[0]);
	uint64_t reads = 0;
	size_t i, j;

	if (check_sizes(a, b) != 0)
		return 1;
	/* Also the file's own end: reads that cross EOF. */
	if (straddle_one(a, b, b->size, block, &reads) != 0)
		return 1;
	for (i = 0; i < npicks; i++) {
		/* last - 1 wraps when last is 0; repeats add nothing. */
		if (picks[i] == 0 || picks[i] > last + 1)
			continue;
		for (j = 0; j < i && picks[j] != picks[i]; j++)
			;
		if (j < i)
			continue;
		if (straddle_one(a, b, picks[i] * block, block, &reads) != 0)
			return 1;
	}
	printf("readcmp: straddle: %" PRIu64 " preads equal (block %" PRIu64
	       ")\n",
	       reads, block);
	return 0;
}

int main(int argc, char **argv)
{
	struct side a = {.fd = -1}, b = {.fd = -1};
	uint64_t n1 = 0, n2 = 0, n3 = 0;
	enum mode mode;
	size_t bufsize;
	int rc = 2;

	if (argc < 4) {
		usage();
		return 2;
	}
	if (strcmp(argv[1], "seq") == 0 && argc <= 5) {
		n1 = READCMP_SEQ_BUF;
		if (argc == 5 && (parse_u64(argv[4], &n1) != 0 || n1 == 0)) {
			usage();
			return 2;
		}
		bufsize = (size_t)n1;
		mode = MODE_SEQ;
	} else if (strcmp(argv[1], "random") == 0 && (argc == 6 || argc == 7)) {
		n3 = READCMP_MAXLEN;
		if (parse_u64(argv[4], &n1) != 0 ||
		    parse_u64(argv[5], &n2) != 0 ||
		    (argc == 7 && (parse_u64(argv[6], &n3) != 0 || n3 == 0))) {
			usage();
			return 2;
		}
		bufsize = (size_t)n3;
		mode = MODE_RANDOM;
	} else if (strcmp(argv[1], "straddle") == 0 && argc == 5) {
		if (parse_u64(argv[4], &n1) != 0 || n1 == 0) {
			usage();
			return 2;
		}
		bufsize = READCMP_MAXLEN + 2 * (size_t)n1;
		mode = MODE_STRADDLE;
	} else {
		usage();
		return 2;
	}

	rc = 1;
	if (side_open(&a, argv[2], bufsize) != 0 ||
	    side_open(&b, argv[3], bufsize) != 0)
		goto out;
	/* The mount keeps its page cache across opens; a load test that
	 * wants every read to reach pacefs drops A's pages first. */
	if (getenv("READCMP_DONTNEED") != NULL)
		posix_fadvise(a.fd, 0, 0, POSIX_FADV_DONTNEED);
	switch (mode) {
	case MODE_SEQ:
		rc = run_seq(&a, &b, bufsize);
		break;
	case MODE_RANDOM:
		rc = run_random(&a, &b, n1, n2, (size_t)n3);
		break;
	case MODE_STRADDLE:
		rc = run_straddle(&a, &b, n1);
		break;
	}
out:
	side_close(&a);
	side_close(&b);
	return rc;
}

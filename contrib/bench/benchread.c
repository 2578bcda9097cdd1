/* benchread: the benchmark's file generator and reader; every byte it reads
 * is checked against the generator's formula, and it prints its timings as
 * one line of key=value pairs (or "failed: REASON" and exit status 1). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define KIB ((uint64_t)1024)
#define MIB (KIB * KIB)
#define NS_PER_SEC 1000000000.0

static uint64_t splitmix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* Word i of a file (bytes 8i..8i+7, little-endian), the seed being the
 * FNV-1a hash of the file's base name: any mount, any name-preserving
 * origin, any offset can be checked without the source. An odd multiplier
 * and a xorshift are both one-to-one, so no two words of a file are equal
 * and a block served at the wrong offset never passes. One multiply a
 * word, so that the checker keeps up with reads from the page cache. */
static uint64_t word_at(uint64_t seed, uint64_t i)
{
	uint64_t x = (seed + i) * 0x9e3779b97f4a7c15ull;

	return x ^ (x >> 29);
}

static uint64_t name_seed(const char *path)
{
	const char *base = strrchr(path, '/');
	uint64_t h = 0xcbf29ce484222325ull;

	for (base = base ? base + 1 : path; *base; base++) {
		h ^= (unsigned char)*base;
		h *= 0x100000001b3ull;
	}
	return h;
}

/* Writes the expected bytes [off, off + len) into dst. */
static void expect_fill(unsigned char *dst, uint64_t seed, uint64_t off,
			size_t len)
{
	size_t i = 0;

	while (i < len) {
		uint64_t pos = off + i, w = word_at(seed, pos / 8);
		unsigned b = (unsigned)(pos % 8);

		if (b == 0 && len - i >= 8) {
			for (b = 0; b < 8; b++)
				dst[i + b] = (unsigned char)(w >> (8 * b));
			i += 8;
			continue;
		}
		dst[i++] = (unsigned char)(w >> (8 * b));
	}
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / NS_PER_SEC;
}

static void sleep_until(double t)
{
	double d = t - now_s();
	struct timespec ts;

	if (d <= 0)
		return;
	ts.tv_sec = (time_t)d;
	ts.tv_nsec = (long)((d - (double)ts.tv_sec) * NS_PER_SEC);
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static void fail(const char *fmt, ...)
	__attribute__((noreturn, format(printf, 1, 2)));

static void fail(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs("failed: ", stdout);
	vprintf(fmt, ap);
	fputc('\n', stdout);
	va_end(ap);
	exit(1);
}

static uint64_t parse_u64(const char *s, const char *what)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s)
		fail("bad %s: %s", what, s);
	switch (*end) {
	case 'K':
		v *= KIB;
		end++;
		break;
	case 'M':
		v *= MIB;
		end++;
		break;
	case '\0':
		break;
	default:
		fail("bad %s: %s", what, s);
	}
	if (*end)
		fail("bad %s: %s", what, s);
	return (uint64_t)v;
}

struct reader {
	const char *path;
	int fd;
	uint64_t seed;
	uint64_t size;
	unsigned char *buf, *want;
	size_t cap;
};

static void reader_open(struct reader *r, const char *path, size_t cap)
{
	struct stat st;

	r->path = path;
	r->seed = name_seed(path);
	r->fd = open(path, O_RDONLY);
	if (r->fd < 0)
		fail("open %s: %s", path, strerror(errno));
	if (fstat(r->fd, &st) < 0)
		fail("fstat %s: %s", path, strerror(errno));
	r->size = (uint64_t)st.st_size;
	r->cap = cap;
	r->buf = malloc(cap);
	r->want = malloc(cap);
	if (!r->buf || !r->want)
		fail("out of memory");
}

/* Reads len bytes at off (fewer at the end of the file), checks them and
 * returns the seconds the reads took. */
static double reader_pread(struct reader *r, uint64_t off, size_t len)
{
	size_t got = 0;
	double t0 = now_s(), t1;
	ssize_t n;

	if (off + len > r->size)
		len = (size_t)(r->size - off);
	while (got < len) {
		n = pread(r->fd, r->buf + got, len - got, (off_t)(off + got));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			fail("read %s at %" PRIu64 ": %s", r->path, off + got,
			     strerror(errno));
		if (n == 0)
			fail("read %s at %" PRIu64 ": unexpected end of file",
			     r->path, off + got);
		got += (size_t)n;
	}
	t1 = now_s();
	if (off % 8 == 0 && len % 8 == 0) {
		/* The common case, word by word without a second buffer;
		 * differences are OR-ed over the whole read rather than tested
		 * per word, so that the loop has no early exit and runs at
		 * several GB/s (the checker must not be what a warm read
		 * through the page cache measures). A mismatch is located
		 * below. */
		uint64_t w, diff = 0;

		for (uint64_t i = 0; i < len / 8; i++) {
			memcpy(&w, r->buf + 8 * i, 8);
			diff |= w ^ word_at(r->seed, off / 8 + i);
		}
		if (diff == 0)
			return t1 - t0;
	}
	expect_fill(r->want, r->seed, off, len);
	if (memcmp(r->buf, r->want, len) != 0) {
		size_t i;

		for (i = 0; i < len && r->buf[i] == r->want[i]; i++)
			;
		fail("content mismatch in %s at offset %" PRIu64, r->path,
		     off + i);
	}
	return t1 - t0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Nearest-rank percentile of sorted v[0..n). */
static double pct(const double *v, size_t n, double p)
{
	size_t k = (size_t)(p / 100.0 * (double)n + 0.999999);

	if (k < 1)
		k = 1;
	if (k > n)
		k = n;
	return v[k - 1];
}

static uint64_t rng_state;

static uint64_t rng_next(void)
{
	rng_state += 1;
	return splitmix64(rng_state * 0x2545f4914f6cdd1dull);
}

/* Writes SIZE bytes of PATH's generated content. */
static void gen_file(const char *path, uint64_t size)
{
	uint64_t seed = name_seed(path), off;
	size_t chunk = 4 * MIB;
	unsigned char *buf = malloc(chunk);
	FILE *fp = fopen(path, "wb");

	if (!buf || !fp)
		fail("gen %s: %s", path, strerror(errno));
	for (off = 0; off < size; off += chunk) {
		size_t n = size - off < chunk ? (size_t)(size - off) : chunk;

		expect_fill(buf, seed, off, n);
		if (fwrite(buf, 1, n, fp) != n)
			fail("write %s: %s", path, strerror(errno));
	}
	if (fclose(fp) != 0)
		fail("close %s: %s", path, strerror(errno));
	free(buf);
}

/* gen FILE SIZE: writes the file's generated content. */
static int cmd_gen(char **argv)
{
	uint64_t size = parse_u64(argv[1], "size");

	gen_file(argv[0], size);
	printf("ok bytes=%" PRIu64 "\n", size);
	return 0;
}

/* seq FILE [BS]: reads the whole file in BS reads (1 MiB), from open to the
 * last byte; prints bytes, seconds, rate and the first read's latency. */
static int cmd_seq(char **argv, int argc)
{
	size_t bs = argc > 1 ? (size_t)parse_u64(argv[1], "block size") : MIB;
	struct reader r;
	double t0 = now_s(), first = 0, dt;
	uint64_t off;

	reader_open(&r, argv[0], bs);
	for (off = 0; off < r.size; off += bs) {
		dt = reader_pread(&r, off, bs);
		if (off == 0)
			first = now_s() - t0;
	}
	dt = now_s() - t0;
	printf("ok bytes=%" PRIu64 " secs=%.6f mbps=%.2f first=%.6f\n", r.size,
	       dt, (double)r.size / dt / 1e6, first);
	return 0;
}

/* first FILE: open plus the first 4 KiB read, in seconds. */
static int cmd_first(char **argv)
{
	struct reader r;
	double t0 = now_s(), dt;

	reader_open(&r, argv[0], 4 * KIB);
	reader_pread(&r, 0, 4 * KIB);
	dt = now_s() - t0;
	printf("ok secs=%.6f\n", dt);
	return 0;
}

/* positions FILE: a new reader's 1 MiB pread at 70 %, 20 % and 90 % of
 * the file (4 KiB-aligned), one call each, the file opened beforehand
 * (untimed); prints each read's seconds and the slowest. */
static int cmd_positions(char **argv)
{
	static const unsigned pct_at[] = {70, 20, 90};
	struct reader r;
	double lat[3], worst = 0;

	reader_open(&r, argv[0], MIB);
	if (r.size < MIB)
		fail("positions: %s is under 1 MiB", argv[0]);
	for (int i = 0; i < 3; i++) {
		uint64_t at = r.size / 100 * pct_at[i] / (4 * KIB) * (4 * KIB);

		if (at + MIB > r.size)
			at = (r.size - MIB) / (4 * KIB) * (4 * KIB);
		lat[i] = reader_pread(&r, at, MIB);
		worst = lat[i] > worst ? lat[i] : worst;
	}
	printf("ok at70=%.6f at20=%.6f at90=%.6f worst=%.6f\n", lat[0], lat[1],
	       lat[2], worst);
	return 0;
}

/* random FILE N SEED: N 4 KiB reads at seeded 4 KiB-aligned offsets, the
 * file opened beforehand (untimed); prints latency percentiles. */
static int cmd_random(char **argv)
{
	uint64_t n = parse_u64(argv[1], "count"), i, blocks;
	struct reader r;
	double *lat;

	rng_state = parse_u64(argv[2], "seed");
	reader_open(&r, argv[0], 4 * KIB);
	blocks = r.size / (4 * KIB);
	lat = calloc(n ? n : 1, sizeof(*lat));
	if (!lat || blocks == 0 || n == 0)
		fail("random: nothing to read");
	for (i = 0; i < n; i++)
		lat[i] = reader_pread(&r, (rng_next() % blocks) * 4 * KIB,
				      4 * KIB);
	qsort(lat, n, sizeof(*lat), cmp_double);
	printf("ok reads=%" PRIu64 " p50=%.6f p95=%.6f max=%.6f bytes=%" PRIu64
	       "\n",
	       n, pct(lat, n, 50), pct(lat, n, 95), lat[n - 1], n * 4 * KIB);
	return 0;
}

/* random2 A B N SEED: the random reads of `random` on two files (the same
 * bytes through two mounts, both open), each offset read from both in
 * turn, the first of the two alternating: both see the machine's load of
 * the same moments, so that a shared machine's noise cancels out of their
 * ratio. Prints each side's percentiles and the sum of its latencies. */
static int cmd_random2(char **argv)
{
	uint64_t n = parse_u64(argv[2], "count"), i, blocks;
	struct reader r[2];
	double *lat[2], sum[2] = {0, 0};

	rng_state = parse_u64(argv[3], "seed");
	reader_open(&r[0], argv[0], 4 * KIB);
	reader_open(&r[1], argv[1], 4 * KIB);
	if (r[0].size != r[1].size || r[0].seed != r[1].seed)
		fail("random2: %s and %s are not the same file", argv[0],
		     argv[1]);
	blocks = r[0].size / (4 * KIB);
	lat[0] = calloc(n ? n : 1, sizeof(double));
	lat[1] = calloc(n ? n : 1, sizeof(double));
	if (!lat[0] || !lat[1] || blocks == 0 || n == 0)
		fail("random2: nothing to read");
	for (i = 0; i < n; i++) {
		uint64_t off = (rng_next() % blocks) * 4 * KIB;

		for (int k = 0; k < 2; k++) {
			int j = (int)(i % 2) ^ k;

			lat[j][i] = reader_pread(&r[j], off, 4 * KIB);
			sum[j] += lat[j][i];
		}
	}
	printf("ok reads=%" PRIu64, n);
	for (int j = 0; j < 2; j++) {
		qsort(lat[j], n, sizeof(double), cmp_double);
		printf(" %c_p50=%.6f %c_p95=%.6f %c_secs=%.6f", 'a' + j,
		       pct(lat[j], n, 50), 'a' + j, pct(lat[j], n, 95), 'a' + j,
		       sum[j]);
	}
	printf("\n");
	return 0;
}

/* Plays [off, off + bytes) at RATE bytes/s: a first read of FIRST_BS
 * bytes (a player filling its buffer at a new position), then BS reads;
 * read i is due its own bytes' worth of time after read i-1 was due, or at
 * once when late (a player that stalled does not burst to catch up).
 * Returns the worst wait after the first read, and the first read's wait
 * in *first. */
static double play(struct reader *r, uint64_t off, uint64_t bytes, size_t bs,
		   size_t first_bs, double rate, double *first, double *stalled)
{
	double period = (double)bs / rate, due = 0, worst = 0, w;
	uint64_t end = off + bytes < r->size ? off + bytes : r->size, pos;
	size_t len;

	for (pos = off; pos < end; pos += len) {
		len = pos == off ? first_bs : bs;
		if (pos > off) {
			sleep_until(due);
			if (now_s() > due + 0.001)
				due = now_s();
		}
		w = reader_pread(r, pos, len);
		if (pos == off) {
			*first = w;
			due = now_s() + (double)len / rate;
			continue;
		}
		if (w > worst)
			worst = w;
		if (w > period)
			*stalled += w - period;
		due += period;
	}
	return worst;
}

/* player FILE RATE BYTES BS: plays the first BYTES at RATE. */
static int cmd_player(char **argv)
{
	double rate = (double)parse_u64(argv[1], "rate");
	uint64_t bytes = parse_u64(argv[2], "bytes");
	size_t bs = (size_t)parse_u64(argv[3], "block size");
	double t0, first = 0, stalled = 0, worst;
	struct reader r;

	reader_open(&r, argv[0], bs);
	if (bytes > r.size)
		bytes = r.size;
	t0 = now_s();
	worst = play(&r, 0, bytes, bs, bs, rate, &first, &stalled);
	printf("ok consumed=%" PRIu64
	       " secs=%.6f first=%.6f worst=%.6f stalled=%.6f\n",
	       bytes, now_s() - t0, first, worst, stalled);
	return 0;
}

/* seek FILE RATE NSEEK PLAY BS SEED [JUMP_BS]: plays PLAY bytes at the
 * start, then NSEEK times jumps to a seeded BS-aligned position and plays
 * PLAY bytes there, the first read at each new position being JUMP_BS bytes
 * (BS); prints the latency of that first read. */
static int cmd_seek(char **argv, int argc)
{
	double rate = (double)parse_u64(argv[1], "rate");
	uint64_t nseek = parse_u64(argv[2], "seek count");
	uint64_t bytes = parse_u64(argv[3], "play bytes"), i, slots;
	size_t bs = (size_t)parse_u64(argv[4], "block size");
	size_t jump_bs =
		argc > 6 ? (size_t)parse_u64(argv[6], "jump size") : bs;
	double first = 0, stalled = 0, worst = 0, w, *lat;
	struct reader r;

	rng_state = parse_u64(argv[5], "seed");
	if (jump_bs == 0 || bs == 0)
		fail("seek: zero read size");
	reader_open(&r, argv[0], jump_bs > bs ? jump_bs : bs);
	lat = calloc(nseek ? nseek : 1, sizeof(*lat));
	slots = r.size > bytes ? (r.size - bytes) / bs : 0;
	if (!lat || nseek == 0 || slots == 0)
		fail("seek: file too small");
	play(&r, 0, bytes, bs, bs, rate, &first, &stalled);
	for (i = 0; i < nseek; i++) {
		uint64_t pos = (rng_next() % slots) * bs;

		w = play(&r, pos, bytes, bs, jump_bs, rate, &lat[i], &stalled);
		if (w > worst)
			worst = w;
	}
	qsort(lat, nseek, sizeof(*lat), cmp_double);
	printf("ok seeks=%" PRIu64
	       " p50=%.6f max=%.6f worst_after=%.6f stalled=%.6f\n",
	       nseek, pct(lat, nseek, 50), lat[nseek - 1], worst, stalled);
	return 0;
}

static void reader_close(struct reader *r)
{
	close(r->fd);
	free(r->buf);
	free(r->want);
}

/* The non-empty lines of the file LIST (a path a line), *n of them, at
 * least one. */
static char **read_list(const char *list, size_t *n)
{
	FILE *fp = fopen(list, "r");
	char **paths = NULL, line[4096];
	size_t cap = 0;

	if (!fp)
		fail("open %s: %s", list, strerror(errno));
	*n = 0;
	while (fgets(line, sizeof(line), fp)) {
		line[strcspn(line, "\n")] = '\0';
		if (!line[0])
			continue;
		if (*n == cap) {
			cap = cap ? 2 * cap : 256;
			paths = realloc(paths, cap * sizeof(*paths));
			if (!paths)
				fail("out of memory");
		}
		paths[*n] = strdup(line);
		if (!paths[(*n)++])
			fail("out of memory");
	}
	fclose(fp);
	if (*n == 0)
		fail("%s: no files", list);
	return paths;
}

static void free_list(char **paths, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(paths[i]);
	free(paths);
}

/* 0..n-1 in the order a Fisher-Yates shuffle seeded by SEED gives: the
 * loader's order, which `order` prints so that curl takes the same. */
static size_t *shuffled(size_t n, uint64_t seed)
{
	size_t *order = malloc(n * sizeof(*order));

	if (!order)
		fail("out of memory");
	rng_state = seed;
	for (size_t i = 0; i < n; i++)
		order[i] = i;
	for (size_t i = n - 1; i > 0; i--) {
		size_t j = (size_t)(rng_next() % (i + 1)), t = order[i];

		order[i] = order[j];
		order[j] = t;
	}
	return order;
}

/* What the workers of a loader share: the next file to take, and each
 * file's seconds from open to its last byte. */
struct loader_shared {
	uint64_t next;
	uint64_t bytes;
	double secs[];
};

/* One worker: takes the next file of the shuffled order until none is
 * left, and reads it whole. */
static void loader_work(struct loader_shared *sh, char **paths,
			const size_t *order, size_t n, size_t bs)
{
	for (;;) {
		uint64_t k = __atomic_fetch_add(&sh->next, 1, __ATOMIC_RELAXED);
		struct reader r;
		double t0;

		if (k >= n)
			break;
		t0 = now_s();
		reader_open(&r, paths[order[k]], bs);
		for (uint64_t off = 0; off < r.size; off += bs)
			reader_pread(&r, off, bs);
		sh->secs[k] = now_s() - t0;
		__atomic_fetch_add(&sh->bytes, r.size, __ATOMIC_RELAXED);
		reader_close(&r);
	}
}

/* loader LIST WORKERS SEED [BS]: as a dataset loader's workers, WORKERS
 * processes take the files LIST names (a path a line) in one shuffled
 * order, each the next one not yet taken, and read each whole in BS reads
 * (1 MiB); prints files, bytes, seconds, files and MB per second and the
 * median and slowest file (open to last byte). */
static int cmd_loader(char **argv, int argc)
{
	uint64_t workers = parse_u64(argv[1], "workers");
	size_t bs = argc > 3 ? (size_t)parse_u64(argv[3], "block size") : MIB;
	char **paths;
	size_t n, *order;
	struct loader_shared *sh;
	size_t shlen;
	double t0, dt;
	int bad = 0;

	paths = read_list(argv[0], &n);
	if (workers == 0 || workers > 1024)
		fail("loader: workers not in 1-1024");
	order = shuffled(n, parse_u64(argv[2], "seed"));
	shlen = sizeof(*sh) + n * sizeof(double);
	sh = mmap(NULL, shlen, PROT_READ | PROT_WRITE,
		  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		fail("mmap: %s", strerror(errno));
	t0 = now_s();
	for (uint64_t w = 0; w < workers; w++) {
		pid_t pid = fork();

		if (pid < 0)
			fail("fork: %s", strerror(errno));
		if (pid == 0) {
			loader_work(sh, paths, order, n, bs);
			_exit(0);
		}
	}
	for (uint64_t w = 0; w < workers; w++) {
		int st;

		if (wait(&st) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
			bad = 1;
	}
	dt = now_s() - t0;
	if (bad)
		fail("a loader worker failed");
	qsort(sh->secs, n, sizeof(double), cmp_double);
	printf("ok files=%zu bytes=%" PRIu64 " secs=%.6f files_per_s=%.2f "
	       "mbps=%.2f p50=%.6f max=%.6f\n",
	       n, sh->bytes, dt, (double)n / dt, (double)sh->bytes / dt / 1e6,
	       pct(sh->secs, n, 50), sh->secs[n - 1]);
	munmap(sh, shlen);
	free(order);
	free_list(paths, n);
	return 0;
}

/* genlist LIST SIZE: gen for every file LIST names (a path a line), in one
 * process: the loader's sets are thousands of files. */
static int cmd_genlist(char **argv)
{
	uint64_t size = parse_u64(argv[1], "size");
	size_t n;
	char **paths = read_list(argv[0], &n);

	for (size_t i = 0; i < n; i++)
		gen_file(paths[i], size);
	printf("ok files=%zu bytes=%" PRIu64 "\n", n, n * size);
	free_list(paths, n);
	return 0;
}

/* order LIST SEED: LIST's lines in the order `loader LIST N SEED` takes
 * them, so that the benchmark's curl limit reads the files in that order. */
static int cmd_order(char **argv)
{
	size_t n, *order;
	char **paths = read_list(argv[0], &n);

	order = shuffled(n, parse_u64(argv[1], "seed"));
	for (size_t i = 0; i < n; i++)
		printf("%s\n", paths[order[i]]);
	free(order);
	free_list(paths, n);
	return 0;
}

static void usage(void)
{
	fputs("usage: benchread gen FILE SIZE\n"
	      "       benchread genlist LIST SIZE\n"
	      "       benchread seq FILE [BS]\n"
	      "       benchread first FILE\n"
	      "       benchread positions FILE\n"
	      "       benchread random FILE N SEED\n"
	      "       benchread random2 FILE_A FILE_B N SEED\n"
	      "       benchread player FILE RATE BYTES BS\n"
	      "       benchread seek FILE RATE NSEEK PLAY_BYTES BS SEED "
	      "[JUMP_BS]\n"
	      "       benchread loader LIST WORKERS SEED [BS]\n"
	      "       benchread order LIST SEED\n"
	      "sizes take K or M (powers of 1024)\n",
	      stderr);
	exit(2);
}

int main(int argc, char **argv)
{
	const char *cmd;

	if (argc < 3)
		usage();
	cmd = argv[1];
	argv += 2;
	argc -= 2;
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (strcmp(cmd, "gen") == 0 && argc == 2)
		return cmd_gen(argv);
	if (strcmp(cmd, "genlist") == 0 && argc == 2)
		return cmd_genlist(argv);
	if (strcmp(cmd, "seq") == 0 && argc <= 2)
		return cmd_seq(argv, argc);
	if (strcmp(cmd, "first") == 0 && argc == 1)
		return cmd_first(argv);
	if (strcmp(cmd, "positions") == 0 && argc == 1)
		return cmd_positions(argv);
	if (strcmp(cmd, "random") == 0 && argc == 3)
		return cmd_random(argv);
	if (strcmp(cmd, "random2") == 0 && argc == 4)
		return cmd_random2(argv);
	if (strcmp(cmd, "player") == 0 && argc == 4)
		return cmd_player(argv);
	if (strcmp(cmd, "loader") == 0 && (argc == 3 || argc == 4))
		return cmd_loader(argv, argc);
	if (strcmp(cmd, "order") == 0 && argc == 2)
		return cmd_order(argv);
	if (strcmp(cmd, "seek") == 0 && (argc == 6 || argc == 7))
		return cmd_seek(argv, argc);
	usage();
	return 2;
}

/* soakread: the soak's readers: THREADS threads reading files through a
 * mount for SECONDS, seeded random and sequential preads, every byte
 * compared with the file it came from and every read's wait timed, and
 * one closing summary of reads, bytes, wrong bytes, errors and waits past
 * the deadline. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define SOAK_FILES_MAX 64
#define SOAK_THREADS_MAX 256
#define SOAK_LEN_MAX (1024 * 1024)
#define SOAK_REPORT_MAX 5 /* wrong or late reads listed, each kind */
#define SOAK_ERRNO_MAX 160

struct file {
	const char *mnt;    /* path through the mount */
	const char *oracle; /* the origin's own file */
	int ofd;
	uint64_t size;
};

static struct file files[SOAK_FILES_MAX];
static unsigned nfiles;
static uint64_t end_ns, deadline_ns, seed;
static atomic_ullong n_reads, n_bytes, n_wrong, n_errors, n_late, n_opens;
static atomic_ullong n_short; /* true bytes, fewer than asked */
static atomic_ullong n_errno[SOAK_ERRNO_MAX];
static atomic_ullong max_wait_ns;
static pthread_mutex_t report_mu = PTHREAD_MUTEX_INITIALIZER;
static unsigned reported_wrong, reported_late; /* guarded by report_mu */

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* xorshift64*: each thread's own stream, from the seed and its number. */
static uint64_t rnd(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 0x2545f4914f6cdd1dull;
}

static int parse_u64(const char *s, uint64_t *out)
{
	char *end = NULL;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0')
		return -EINVAL;
	*out = v;
	return 0;
}

static void count_errno(int e)
{
	atomic_fetch_add(&n_errors, 1);
	atomic_fetch_add(&n_errno[e > 0 && e < SOAK_ERRNO_MAX ? e : 0], 1);
}

static void note_wait(uint64_t waited, const struct file *f, uint64_t off,
		      size_t len)
{
	unsigned long long prev = atomic_load(&max_wait_ns);

	while (waited > prev &&
	       !atomic_compare_exchange_weak(&max_wait_ns, &prev, waited))
		;
	if (waited <= deadline_ns)
		return;
	atomic_fetch_add(&n_late, 1);
	pthread_mutex_lock(&report_mu);
	if (reported_late++ < SOAK_REPORT_MAX)
		printf("soakread: LATE %s at %" PRIu64 " (%zu bytes): %.1f s\n",
		       f->mnt, off, len, (double)waited / 1e9);
	pthread_mutex_unlock(&report_mu);
}

/* One read of [off, off + len) of f through fd, compared with the oracle;
 * returns false when fd should be reopened. */
static bool read_one(struct file *f, int fd, uint64_t off, size_t len,
		     unsigned char *got, unsigned char *want)
{
	size_t expect = off >= f->size	      ? 0
			: f->size - off < len ? (size_t)(f->size - off)
					      : len;
	uint64_t t0, waited;
	ssize_t n;
	int e;

	/* The kernel's copy is dropped, so that the read reaches pacefs. */
	posix_fadvise(fd, (off_t)off, (off_t)len, POSIX_FADV_DONTNEED);
	t0 = now_ns();
	n = pread(fd, got, len, (off_t)off);
	e = errno;

	waited = now_ns() - t0;
	atomic_fetch_add(&n_reads, 1);
	note_wait(waited, f, off, len);
	if (n < 0) {
		count_errno(e);
		return false;
	}
	if (pread(f->ofd, want, expect, (off_t)off) != (ssize_t)expect) {
		fprintf(stderr, "soakread: %s: cannot read the oracle\n",
			f->oracle);
		exit(2);
	}
	/* Fewer bytes, all true: the kernel split the read and a later
	 * part failed. An error, not a wrong byte. */
	if ((size_t)n < expect && memcmp(got, want, (size_t)n) == 0) {
		atomic_fetch_add(&n_short, 1);
		count_errno(EIO);
		return false;
	}
	if ((size_t)n != expect || memcmp(got, want, expect) != 0) {
		size_t i = 0;

		while (i < (size_t)n && i < expect && got[i] == want[i])
			i++;
		atomic_fetch_add(&n_wrong, 1);
		pthread_mutex_lock(&report_mu);
		if (reported_wrong++ < SOAK_REPORT_MAX)
			printf("soakread: WRONG %s at %" PRIu64
			       " (%zu bytes): got %zd bytes, want %zu, first "
			       "difference at +%zu\n",
			       f->mnt, off, len, n, expect, i);
		pthread_mutex_unlock(&report_mu);
		return false;
	}
	atomic_fetch_add(&n_bytes, (unsigned long long)n);
	return true;
}

static void *reader(void *arg)
{
	uint64_t s = seed * 0x9e3779b97f4a7c15ull + (uintptr_t)arg + 1;
	unsigned char *got = malloc(SOAK_LEN_MAX), *want = malloc(SOAK_LEN_MAX);
	int fds[SOAK_FILES_MAX];
	uint64_t pos[SOAK_FILES_MAX] = {0};

	if (!got || !want) {
		fprintf(stderr, "soakread: out of memory\n");
		exit(2);
	}
	for (unsigned i = 0; i < nfiles; i++)
		fds[i] = -1;
	while (now_ns() < end_ns) {
		unsigned i = (unsigned)(rnd(&s) % nfiles);
		struct file *f = &files[i];
		uint64_t r = rnd(&s), off;
		size_t len;

		if (fds[i] < 0) {
			uint64_t t0 = now_ns();

			fds[i] = open(f->mnt, O_RDONLY);
			atomic_fetch_add(&n_opens, 1);
			note_wait(now_ns() - t0, f, 0, 0);
			if (fds[i] < 0) {
				count_errno(errno);
				usleep(100 * 1000);
				continue;
			}
		}
		/* Three reads in four at random, the rest where this thread
		 * left the file (a sequential reader), wrapping at its end. */
		len = 1 + (size_t)((r >> 8) % SOAK_LEN_MAX);
		if (r % 4 != 0) {
			off = (r >> 32) % f->size;
		} else {
			off = pos[i] >= f->size ? 0 : pos[i];
			len = 128 * 1024;
		}
		pos[i] = off + len;
		if (!read_one(f, fds[i], off, len, got, want)) {
			close(fds[i]);
			fds[i] = -1;
		}
		/* Now and then a file is closed, so that opens go on too. */
		if (fds[i] >= 0 && rnd(&s) % 64 == 0) {
			close(fds[i]);
			fds[i] = -1;
		}
	}
	for (unsigned i = 0; i < nfiles; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	free(got);
	free(want);
	return NULL;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: soakread THREADS SECONDS DEADLINE_MS SEED "
		"MOUNTPATH=ORIGINPATH...\n"
		"Reads every MOUNTPATH from THREADS threads for SECONDS, "
		"comparing each read with ORIGINPATH;\n"
		"a read (or open) waiting longer than DEADLINE_MS is late. "
		"Exit 0 with no wrong byte, no\n"
		"error and no late read, 1 otherwise, 2 on bad usage.\n");
}

int main(int argc, char **argv)
{
	pthread_t th[SOAK_THREADS_MAX];
	uint64_t threads, secs, dl_ms;
	struct stat st;

	if (argc < 6 || parse_u64(argv[1], &threads) < 0 || threads == 0 ||
	    threads > SOAK_THREADS_MAX || parse_u64(argv[2], &secs) < 0 ||
	    parse_u64(argv[3], &dl_ms) < 0 || parse_u64(argv[4], &seed) < 0 ||
	    argc - 5 > SOAK_FILES_MAX) {
		usage();
		return 2;
	}
	for (int a = 5; a < argc; a++) {
		char *eq = strchr(argv[a], '=');
		struct file *f = &files[nfiles];

		if (!eq) {
			usage();
			return 2;
		}
		*eq = '\0';
		f->mnt = argv[a];
		f->oracle = eq + 1;
		f->ofd = open(f->oracle, O_RDONLY);
		if (f->ofd < 0 || fstat(f->ofd, &st) < 0 || st.st_size == 0) {
			fprintf(stderr, "soakread: %s: %s\n", f->oracle,
				f->ofd < 0 ? strerror(errno) : "empty");
			return 2;
		}
		f->size = (uint64_t)st.st_size;
		nfiles++;
	}
	deadline_ns = dl_ms * 1000000u;
	end_ns = now_ns() + secs * 1000000000u;
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (uint64_t t = 0; t < threads; t++)
		if (pthread_create(&th[t], NULL, reader,
				   (void *)(uintptr_t)t) != 0) {
			fprintf(stderr, "soakread: cannot start a thread\n");
			return 2;
		}
	for (uint64_t t = 0; t < threads; t++)
		pthread_join(th[t], NULL);
	printf("soakread: reads=%llu opens=%llu bytes=%llu wrong=%llu "
	       "errors=%llu short=%llu late=%llu max_wait_ms=%llu\n",
	       (unsigned long long)n_reads, (unsigned long long)n_opens,
	       (unsigned long long)n_bytes, (unsigned long long)n_wrong,
	       (unsigned long long)n_errors, (unsigned long long)n_short,
	       (unsigned long long)n_late,
	       (unsigned long long)(max_wait_ns / 1000000u));
	for (int e = 0; e < SOAK_ERRNO_MAX; e++)
		if (n_errno[e] > 0)
			printf("soakread: error %s: %llu\n",
			       e ? strerror(e) : "other",
			       (unsigned long long)n_errno[e]);
	return n_wrong || n_errors || n_late ? 1 : 0;
}

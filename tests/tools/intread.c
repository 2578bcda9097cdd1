/* intread: reads a file with O_DIRECT and interrupts the read with a
 * signal after a delay, to show whether a blocked read on a FUSE mount
 * ends with EINTR. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void on_alarm(int sig)
{
	(void)sig;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* usage: intread FILE SECONDS — prints "EINTR after T s" and exits 0 when
 * the read was interrupted, else prints what happened and exits 1. */
int main(int argc, char **argv)
{
	struct sigaction sa;
	void *buf = NULL;
	double start;
	ssize_t n;
	int fd = -1;
	int rc = 1;

	if (argc != 3) {
		fprintf(stderr, "usage: intread FILE SECONDS\n");
		return 2;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_alarm; /* no SA_RESTART: the read must end */
	sigaction(SIGALRM, &sa, NULL);
	fd = open(argv[1], O_RDONLY | O_DIRECT);
	if (fd < 0 || posix_memalign(&buf, 4096, 1 << 20) != 0) {
		perror(argv[1]);
		buf = NULL;
		rc = 2;
		goto out;
	}
	start = now_s();
	alarm((unsigned)strtoul(argv[2], NULL, 10));
	n = read(fd, buf, 1 << 20);
	if (n < 0 && errno == EINTR) {
		printf("EINTR after %.1f s\n", now_s() - start);
		rc = 0;
		goto out;
	}
	printf("read returned %zd (%s) after %.1f s\n", n,
	       n < 0 ? strerror(errno) : "no error", now_s() - start);
out:
	/* Freed, so that a sanitizer build's leak check passes. */
	free(buf);
	if (fd >= 0)
		close(fd);
	return rc;
}

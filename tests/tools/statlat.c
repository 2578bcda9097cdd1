/* statlat: stats a path in a loop until a stop file appears, and prints the
 * slowest stat, to show how long a mount's operations wait behind work
 * such as merging a large directory listing. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static long long now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* usage: statlat PATH STOPFILE — stats PATH about every millisecond until
 * STOPFILE exists, then prints "max_us N count N" and exits 0 (1 when a
 * stat failed). */
int main(int argc, char **argv)
{
	long long worst = 0, count = 0;
	struct stat st;
	int failed = 0;

	if (argc != 3) {
		fprintf(stderr, "usage: statlat PATH STOPFILE\n");
		return 2;
	}
	while (access(argv[2], F_OK) != 0) {
		long long t0 = now_us(), took;

		if (stat(argv[1], &st) != 0)
			failed = 1;
		took = now_us() - t0;
		if (took > worst)
			worst = took;
		count++;
		usleep(1000);
	}
	printf("max_us %lld count %lld\n", worst, count);
	return failed;
}

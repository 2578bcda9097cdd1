/* lockcount: an LD_PRELOAD library that counts pthread_mutex_lock calls
 * per mutex, to count the locks one operation of a running mount takes:
 * SIGUSR1 clears the counts and starts counting, SIGUSR2 writes them to
 * $LOCKCOUNT_OUT (one line per mutex: its address, its count and where it
 * was first taken, as object+offset for addr2line) and stops. Built on
 * request: make build/tests/lockcount.so (docs/fs-notes.md uses it). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SLOTS 4096

static _Atomic(uintptr_t) keys[SLOTS];
static _Atomic unsigned long counts[SLOTS];
static void *callers[SLOTS];
static atomic_int counting;
static int (*real_lock)(pthread_mutex_t *);

static void dump(int sig)
{
	const char *path = getenv("LOCKCOUNT_OUT");
	unsigned long total = 0;
	FILE *f;

	(void)sig;
	atomic_store(&counting, 0);
	f = fopen(path != NULL ? path : "/tmp/lockcount.txt", "w");
	if (f == NULL)
		return;
	for (int i = 0; i < SLOTS; i++) {
		const char *obj = "?";
		uintptr_t off = 0;
		Dl_info di;

		if (keys[i] == 0 || counts[i] == 0)
			continue;
		if (callers[i] != NULL && dladdr(callers[i], &di) != 0) {
			obj = strrchr(di.dli_fname, '/') != NULL
				      ? strrchr(di.dli_fname, '/') + 1
				      : di.dli_fname;
			off = (uintptr_t)callers[i] - (uintptr_t)di.dli_fbase;
		}
		fprintf(f, "%lx %lu %s+0x%lx\n", (unsigned long)keys[i],
			counts[i], obj, (unsigned long)off);
		total += counts[i];
	}
	fprintf(f, "total %lu\n", total);
	fclose(f);
}

static void start(int sig)
{
	(void)sig;
	for (int i = 0; i < SLOTS; i++) {
		counts[i] = 0;
		callers[i] = NULL;
	}
	atomic_store(&counting, 1);
}

__attribute__((constructor)) static void init(void)
{
	real_lock = (int (*)(pthread_mutex_t *))dlsym(RTLD_NEXT,
						      "pthread_mutex_lock");
	signal(SIGUSR1, start);
	signal(SIGUSR2, dump);
}

/* Counts m in an open-addressing table of mutex addresses. */
static void count(pthread_mutex_t *m, void *caller)
{
	uintptr_t k = (uintptr_t)m;
	unsigned h = (unsigned)((k >> 4) * 2654435761u) % SLOTS;

	for (int n = 0; n < SLOTS; n++, h = (h + 1) % SLOTS) {
		uintptr_t cur = atomic_load(&keys[h]);

		if (cur == 0 &&
		    (atomic_compare_exchange_strong(&keys[h], &cur, k) ||
		     cur == k))
			cur = k;
		if (cur != k)
			continue;
		if (callers[h] == NULL)
			callers[h] = caller;
		atomic_fetch_add(&counts[h], 1);
		return;
	}
}

int pthread_mutex_lock(pthread_mutex_t *m)
{
	if (real_lock == NULL)
		init();
	if (atomic_load(&counting))
		count(m, __builtin_return_address(0));
	return real_lock(m);
}

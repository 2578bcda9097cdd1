/* t: a tiny test runner: a registration table, assertions that print both
 * values, and running one test by name. */
#ifndef T_H
#define T_H

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

struct t_case {
	const char *name;
	void (*fn)(void);
};

/* Failures in the running case; set by the assertion macros. */
static int t_fails;

#define T_FAIL(...)                                                            \
	do {                                                                   \
		fprintf(stderr, "  %s:%d: ", __FILE__, __LINE__);              \
		fprintf(stderr, __VA_ARGS__);                                  \
		fputc('\n', stderr);                                           \
		t_fails++;                                                     \
	} while (0)

#define T_ASSERT(cond)                                                         \
	do {                                                                   \
		if (!(cond)) {                                                 \
			T_FAIL("assertion failed: %s", #cond);                 \
			return;                                                \
		}                                                              \
	} while (0)

#define T_EQ_INT(a, b)                                                         \
	do {                                                                   \
		long long t_a_ = (long long)(a), t_b_ = (long long)(b);        \
		if (t_a_ != t_b_) {                                            \
			T_FAIL("%s == %s: %lld != %lld", #a, #b, t_a_, t_b_);  \
			return;                                                \
		}                                                              \
	} while (0)

#define T_EQ_U64(a, b)                                                         \
	do {                                                                   \
		uint64_t t_a_ = (uint64_t)(a), t_b_ = (uint64_t)(b);           \
		if (t_a_ != t_b_) {                                            \
			T_FAIL("%s == %s: %" PRIu64 " != %" PRIu64, #a, #b,    \
			       t_a_, t_b_);                                    \
			return;                                                \
		}                                                              \
	} while (0)

#define T_EQ_STR(a, b)                                                         \
	do {                                                                   \
		const char *t_a_ = (a), *t_b_ = (b);                           \
		if (strcmp(t_a_, t_b_) != 0) {                                 \
			T_FAIL("%s == %s: \"%s\" != \"%s\"", #a, #b, t_a_,     \
			       t_b_);                                          \
			return;                                                \
		}                                                              \
	} while (0)

#define T_EQ_MEM(a, b, n)                                                      \
	do {                                                                   \
		if (memcmp((a), (b), (n)) != 0) {                              \
			T_FAIL("%s and %s differ in their first %zu bytes",    \
			       #a, #b, (size_t)(n));                           \
			return;                                                \
		}                                                              \
	} while (0)

/* Runs every case, or only the one named by argv[1]. Prints one line per
 * case and a closing "N passed, N failed" line; returns the exit status. */
static int t_main(int argc, char **argv, const struct t_case *cases, size_t n)
{
	int passed = 0, failed = 0;

	for (size_t i = 0; i < n; i++) {
		if (argc > 1 && strcmp(argv[1], cases[i].name) != 0)
			continue;
		t_fails = 0;
		cases[i].fn();
		if (t_fails == 0) {
			printf("PASS %s\n", cases[i].name);
			passed++;
		} else {
			printf("FAIL %s\n", cases[i].name);
			failed++;
		}
		fflush(stdout);
	}
	printf("%d passed, %d failed\n", passed, failed);
	/* Now: LeakSanitizer ends the process at exit without flushing
	 * stdio, and the runner needs this line to count the cases. */
	fflush(stdout);
	return failed == 0 && passed > 0 ? 0 : 1;
}

#define T_RUN(argc, argv, cases)                                               \
	t_main((argc), (argv), (cases), sizeof(cases) / sizeof((cases)[0]))

#endif

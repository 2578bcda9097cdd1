/* test_blocks: the engine's blocks in memory and its drops of held bytes,
 * from its insides (engine_int.h), on an engine that is never started: no
 * transfer runs. Linked with the engine's objects and the modules it
 * joins alone, as test_engine is. */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cache/cache.h"
#include "fetch/fetch.h"
#include "fs/engine/engine_int.h"
#include "tests/t.h"

/* An engine over a cache in a fresh directory, with one blob of `size`
 * bytes (index 0), not started: no transfer runs. Its log goes nowhere. */
static int engine_fixture(char *dir, struct cache **c, struct engine **e,
			  uint64_t size)
{
	struct cache_config cc = {.dir = dir, .sync = CACHE_SYNC_NONE};
	struct engine_config ec = {.max_blobs = 1,
				   .max_sources = 1,
				   .lanes = 1,
				   .read_timeout_s = 5,
				   .stall_timeout_s = 5,
				   .fetch = {.max_lanes = 1}};
	struct cache_id id;
	uint32_t b;
	int rc;

	if (mkdtemp(dir) == NULL)
		return -errno;
	cc.dir = dir;
	rc = fetch_global_init();
	if (rc == 0)
		rc = cache_open(&cc, c);
	if (rc == 0)
		rc = engine_new(&ec, *c, e);
	cache_id_from_string("url:http://h/f", &id);
	if (rc == 0)
		rc = engine_blob_add(*e, "f", size, &id, &b);
	return rc;
}

static void engine_fixture_free(char *dir, struct cache *c, struct engine *e)
{
	char cmd[128];

	engine_free(e);
	cache_close(c);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "cannot remove %s\n", dir);
}

/* A drop that would split a held range when the scheduler's range set is
 * full forgets from its start to the blob's end instead: never an error
 * left unhandled with the bytes still counted as held. */
static void engine_drop_full_ranges(void)
{
	char dir[] = "/tmp/pacefs-test-drop.XXXXXX";
	uint64_t size = 64 * CACHE_BLOCK_SIZE, k = 0;
	struct engine *e = NULL;
	struct cache *c = NULL;

	T_EQ_INT(engine_fixture(dir, &c, &e, size), 0);
	/* Ranges of 3 bytes, 4 apart, until the set is full. */
	while (pace_blob_held(e->pace, 0, 4 * k, 4 * k + 3) == 0)
		k++;
	T_ASSERT(k > 10);
	T_EQ_U64(engine_held(e, 0), 3 * k);
	/* A drop inside one range splits it: it does not fit. */
	T_EQ_INT(engine__drop(e, 0, 41, 42, ENGINE_DROP_GONE), 0);
	T_EQ_U64(engine_held(e, 0), 31); /* 10 whole ranges, and 40 */
	T_ASSERT(pace_is_held(e->pace, 0, 36, 39));
	T_ASSERT(pace_is_held(e->pace, 0, 40, 41));
	T_ASSERT(!pace_is_held(e->pace, 0, 44, 45));
	/* Wrong bytes leave the cache too (none stored here: no error). */
	T_EQ_INT(engine__drop(e, 0, 0, CACHE_BLOCK_SIZE, ENGINE_DROP_WRONG), 0);
	T_EQ_U64(engine_held(e, 0), 0);
	engine_fixture_free(dir, c, e);
}

/* Blocks in memory: found by (blob, index), whole ones reused least
 * recently used first, and a reused block the cache lost stops being
 * held. */
static void engine_blocks_lru(void)
{
	char dir[] = "/tmp/pacefs-test-blocks.XXXXXX";
	struct engine *e = NULL;
	struct cache *c = NULL;
	struct engine_block *p;
	uint32_t n;

	T_EQ_INT(engine_fixture(dir, &c, &e, 1024 * CACHE_BLOCK_SIZE), 0);
	n = e->blocks.n;
	T_ASSERT(n < 1000);
	for (uint32_t i = 0; i < n; i++) {
		p = engine__block_get(e, 0, i);
		T_ASSERT(p != NULL);
		T_EQ_INT(p->state, ENGINE_BLOCK_FILLING);
		T_ASSERT(
			engine__block_set(&e->blocks, p, ENGINE_BLOCK_HANDING));
		engine__block_done(&e->blocks, p, i == 2);
	}
	T_ASSERT(engine__block_find(&e->blocks, 0, n) == NULL);
	T_ASSERT(engine__block_find(&e->blocks, 0, 5)->index == 5);
	engine__block_touch(&e->blocks, engine__block_find(&e->blocks, 0, 0));
	/* Full: the least recently used whole block (1) is reused. */
	p = engine__block_get(e, 0, 1000);
	T_ASSERT(p != NULL && p->index == 1000);
	T_ASSERT(engine__block_find(&e->blocks, 0, 1) == NULL);
	T_ASSERT(engine__block_find(&e->blocks, 0, 0) != NULL);
	/* Then 2, which the cache lost: its bytes are no longer held. */
	T_EQ_INT(pace_blob_held(e->pace, 0, 2 * CACHE_BLOCK_SIZE,
				3 * CACHE_BLOCK_SIZE),
		 0);
	p = engine__block_get(e, 0, 1001);
	T_ASSERT(p != NULL && engine__block_find(&e->blocks, 0, 2) == NULL);
	T_EQ_U64(engine_held(e, 0), 0);
	/* A block being filled is found again, not remade. */
	T_ASSERT(engine__block_get(e, 0, 1001) == p);
	/* Whole and refused by its digest: back to the free list. */
	T_ASSERT(engine__block_set(&e->blocks, p, ENGINE_BLOCK_HANDING));
	engine__block_free(&e->blocks, p);
	T_ASSERT(engine__block_find(&e->blocks, 0, 1001) == NULL);
	T_ASSERT(engine__block_get(e, 0, 1002) == p); /* from the free list */
	engine_fixture_free(dir, c, e);
}

/* A block filling counts what it is credited: whole at its size (the
 * blob's last block at what is left), and from none again after a drop
 * into it, which takes all of it from the scheduler too. */
static void engine_block_count(void)
{
	char dir[] = "/tmp/pacefs-test-count.XXXXXX";
	struct engine *e = NULL;
	struct cache *c = NULL;
	struct engine_block *p, *last;

	T_EQ_INT(engine_fixture(dir, &c, &e, 2 * CACHE_BLOCK_SIZE + 100), 0);
	p = engine__block_get(e, 0, 0);
	T_ASSERT(p != NULL);
	T_EQ_INT(pace_blob_held(e->pace, 0, 0, 1000), 0);
	T_ASSERT(!engine__block_credit(&e->blobs[0], p, 1000));
	T_EQ_INT(engine__drop(e, 0, 10, 20, ENGINE_DROP_GONE), 0);
	T_EQ_U64(p->filled, 0);
	T_ASSERT(!pace_is_held(e->pace, 0, 0, 10));
	T_EQ_INT(pace_blob_held(e->pace, 0, 0, CACHE_BLOCK_SIZE), 0);
	T_ASSERT(engine__block_credit(&e->blobs[0], p, CACHE_BLOCK_SIZE));
	last = engine__block_get(e, 0, 2);
	T_ASSERT(last != NULL);
	T_ASSERT(engine__block_credit(&e->blobs[0], last, 100));
	engine_fixture_free(dir, c, e);
}

/* The last line the engine logged, for the diagram's tests. */
static char logged[512];

static void log_keep(void *ctx, enum fs_log_level level, const char *fmt,
		     va_list ap)
{
	(void)ctx;
	if (level == FS_LOG_ERR)
		vsnprintf(logged, sizeof(logged), fmt, ap);
}

/* Whether set() on a change its diagram does not draw is refused: logged
 * as a bug and the state left as it was; in a strict build (the
 * sanitizer build) it aborts instead, which a child shows. */
static bool undrawn_refused(bool (*set)(struct engine *e, void *x, int to),
			    struct engine *e, void *x, int to, const char *line)
{
#ifdef PACEFS_STRICT
	int status;
	pid_t pid = fork();

	(void)line;
	if (pid == 0) {
		set(e, x, to);
		_exit(0);
	}
	return pid > 0 && waitpid(pid, &status, 0) == pid &&
	       WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT;
#else
	logged[0] = '\0';
	if (set(e, x, to))
		return false;
	if (strcmp(logged, line) != 0) {
		fprintf(stderr, "logged \"%s\", wanted \"%s\"\n", logged, line);
		return false;
	}
	return true;
#endif
}

static bool block_set(struct engine *e, void *x, int to)
{
	return engine__block_set(&e->blocks, x, (enum engine_block_state)to);
}

static bool blob_set(struct engine *e, void *x, int to)
{
	(void)x;
	return engine__blob_set(e, 0, (enum engine_blob_state)to);
}

/* A block and a blob change state as their diagrams (engine_int.h) draw,
 * and a change they do not draw is a bug, refused. */
static void engine_state_diagrams(void)
{
	char dir[] = "/tmp/pacefs-test-diagram.XXXXXX";
	struct engine *e = NULL;
	struct cache *c = NULL;
	struct engine_block *p;

	T_EQ_INT(engine_fixture(dir, &c, &e, 4 * CACHE_BLOCK_SIZE), 0);
	e->log = log_keep;
	p = engine__block_get(e, 0, 1); /* FREE -> FILLING */
	T_ASSERT(p != NULL);
	T_EQ_INT(p->state, ENGINE_BLOCK_FILLING);
	T_ASSERT(undrawn_refused(block_set, e, p, ENGINE_BLOCK_DONE,
				 "bug: f: block 1: filling -> done not drawn"));
	T_EQ_INT(p->state, ENGINE_BLOCK_FILLING);
	T_ASSERT(engine__block_set(&e->blocks, p, ENGINE_BLOCK_HANDING));
	T_ASSERT(undrawn_refused(
		block_set, e, p, ENGINE_BLOCK_FILLING,
		"bug: f: block 1: handing -> filling not drawn"));
	engine__block_done(&e->blocks, p, false); /* HANDING -> DONE */
	T_EQ_INT(p->state, ENGINE_BLOCK_DONE);
	T_ASSERT(undrawn_refused(block_set, e, p, ENGINE_BLOCK_HANDING,
				 "bug: f: block 1: done -> handing not drawn"));
	T_ASSERT(engine__block_get(e, 0, 1) == p); /* DONE -> FILLING */
	T_EQ_INT(p->state, ENGINE_BLOCK_FILLING);

	T_ASSERT(undrawn_refused(blob_set, e, NULL, ENGINE_BLOB_CHANGED,
				 "bug: f: blob: added -> changed not drawn"));
	T_EQ_INT(e->blobs[0].state, ENGINE_BLOB_ADDED);
	T_ASSERT(engine__blob_set(e, 0, ENGINE_BLOB_READY));
	T_ASSERT(undrawn_refused(blob_set, e, NULL, ENGINE_BLOB_DROPPED,
				 "bug: f: blob: ready -> dropped not drawn"));
	T_ASSERT(engine__blob_set(e, 0, ENGINE_BLOB_CHANGED));
	T_ASSERT(engine__blob_set(e, 0, ENGINE_BLOB_DROPPED));
	T_EQ_INT(e->blobs[0].state, ENGINE_BLOB_DROPPED);
	e->log = NULL;
	engine_fixture_free(dir, c, e);
}

static const struct t_case cases[] = {
	{"engine_drop_full_ranges", engine_drop_full_ranges},
	{"engine_block_count", engine_block_count},
	{"engine_blocks_lru", engine_blocks_lru},
	{"engine_state_diagrams", engine_state_diagrams},
};

int main(int argc, char **argv)
{
	return T_RUN(argc, argv, cases);
}

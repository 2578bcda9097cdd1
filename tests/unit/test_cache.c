/* test_cache: unit tests of the LMDB cache: persistence, records, blocks
 * through the queue and LMDB, extent merging, drop, format refusal, bad
 * directories, back-pressure, ENOSPC, concurrent and cross-process use,
 * the byte budget, LRU eviction and pins, digests and verification,
 * compaction; and the crash test's checker (--check-against). */
#include "cache/cache.h"

#include <errno.h>
#include <ftw.h>
#include <lmdb.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/t.h"

#define BS CACHE_BLOCK_SIZE

/* ---- fixtures ---- */

struct logcap {
	pthread_mutex_t mu;
	int n;
	char last[1024];
};

static struct logcap logcap = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void log_fn(void *ctx, enum cache_log_level level, const char *msg)
{
	struct logcap *l = ctx;

	(void)level;
	pthread_mutex_lock(&l->mu);
	l->n++;
	snprintf(l->last, sizeof(l->last), "%s", msg);
	pthread_mutex_unlock(&l->mu);
	if (getenv("T_VERBOSE"))
		fprintf(stderr, "  log: %s\n", msg);
}

static char tmpdir[64];
static const char *self_path; /* argv[0], to start a second process */

static void tmp_make(void)
{
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/pacefs-cache-XXXXXX");
	if (!mkdtemp(tmpdir)) {
		perror("mkdtemp");
		exit(2);
	}
}

static int rm_one(const char *path, const struct stat *st, int flag,
		  struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static void tmp_remove(void)
{
	nftw(tmpdir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static struct cache_config cfg_for(const char *dir)
{
	struct cache_config cfg = {
		.dir = dir, .log = log_fn, .log_ctx = &logcap};
	return cfg;
}

static int open_at(const char *dir, struct cache **out)
{
	struct cache_config cfg = cfg_for(dir);
	return cache_open(&cfg, out);
}

/* Byte j of block `index` of the blob seeded `seed`. */
static void fill(unsigned char *buf, size_t len, uint64_t index, int seed)
{
	for (size_t j = 0; j < len; j++)
		buf[j] = (unsigned char)(index * 31u + j * 7u + (j >> 8) +
					 (unsigned)seed);
}

#define EXT_LIST_MAX 4096

struct ext_list {
	int n;
	uint64_t s[EXT_LIST_MAX], e[EXT_LIST_MAX];
};

static int collect(void *ctx, uint64_t start, uint64_t end)
{
	struct ext_list *l = ctx;

	if (l->n < EXT_LIST_MAX) {
		l->s[l->n] = start;
		l->e[l->n] = end;
	}
	l->n++;
	return 0;
}

static int extents_of(struct cache *c, const struct cache_id *id,
		      struct ext_list *l)
{
	memset(l, 0, sizeof(*l));
	return cache_extents_each(c, id, collect, l);
}

/* ---- cases ---- */

static void test_id(void)
{
	/* SHA-256("abc") starts ba7816bf 8f01cfea 414140de 5dae2223. */
	static const uint8_t want[16] = {0xba, 0x78, 0x16, 0xbf, 0x8f, 0x01,
					 0xcf, 0xea, 0x41, 0x41, 0x40, 0xde,
					 0x5d, 0xae, 0x22, 0x23};
	struct cache_id a, b;

	cache_id_from_string("abc", &a);
	T_EQ_MEM(a.b, want, 16);
	cache_id_from_string("url:https://example.com/a", &a);
	cache_id_from_string("url:https://example.com/b", &b);
	T_ASSERT(memcmp(a.b, b.b, CACHE_ID_LEN) != 0);
}

static void test_open_reopen(void)
{
	char dir[128];
	struct cache *c = NULL;
	struct stat st;

	tmp_make();
	snprintf(dir, sizeof(dir), "%s/a/b", tmpdir);
	T_EQ_INT(open_at(dir, &c), 0);
	T_ASSERT(c != NULL);
	T_EQ_INT(stat(dir, &st), 0);
	T_EQ_INT(st.st_mode & 0777, 0700);
	cache_close(c);
	c = NULL;
	T_EQ_INT(open_at(dir, &c), 0);
	struct cache_stats s;
	T_EQ_INT(cache_stats_get(c, &s), 0);
	T_EQ_U64(s.blobs, 0);
	T_EQ_U64(s.blocks, 0);
	T_ASSERT(s.map_size >= (1ull << 30));
	cache_close(c);
	cache_close(NULL);
	tmp_remove();
}

static void test_record(void)
{
	struct cache *c = NULL;
	struct cache_id id;
	struct cache_blob_record r = {.size = 123456789012ull,
				      .last_access = 1700000000},
				 got;

	tmp_make();
	cache_id_from_string("url:rec", &id);
	T_EQ_INT(open_at(tmpdir, &c), 0);
	T_EQ_INT(cache_blob_get(c, &id, &got), -ENOENT);
	snprintf(r.validator, sizeof(r.validator), "\"etag-1\"");
	T_EQ_INT(cache_blob_put(c, &id, &r), 0);
	memset(&got, 0xaa, sizeof(got));
	T_EQ_INT(cache_blob_get(c, &id, &got), 0);
	T_EQ_U64(got.size, r.size);
	T_EQ_U64(got.last_access, r.last_access);
	T_EQ_STR(got.validator, "\"etag-1\"");

	/* Overwrite, with an empty validator and one of the maximal length. */
	r.validator[0] = '\0';
	T_EQ_INT(cache_blob_put(c, &id, &r), 0);
	T_EQ_INT(cache_blob_get(c, &id, &got), 0);
	T_EQ_STR(got.validator, "");
	memset(r.validator, 'v', CACHE_VALIDATOR_MAX - 1);
	r.validator[CACHE_VALIDATOR_MAX - 1] = '\0';
	T_EQ_INT(cache_blob_put(c, &id, &r), 0);
	memset(r.validator, 'v', CACHE_VALIDATOR_MAX); /* unterminated */
	T_EQ_INT(cache_blob_put(c, &id, &r), -EINVAL);
	cache_close(c);
	c = NULL;

	T_EQ_INT(open_at(tmpdir, &c), 0);
	T_EQ_INT(cache_blob_get(c, &id, &got), 0);
	T_EQ_INT(strlen(got.validator), CACHE_VALIDATOR_MAX - 1);
	T_EQ_INT(cache_blob_drop(c, &id), 0);
	T_EQ_INT(cache_blob_get(c, &id, &got), -ENOENT);
	T_EQ_INT(cache_blob_drop(c, &id), 0); /* idempotent */
	cache_close(c);
	tmp_remove();
}

static void test_blocks(void)
{
	struct cache *c = NULL;
	struct cache_id id;
	unsigned char *want = malloc(BS), *got = malloc(BS);

	tmp_make();
	cache_id_from_string("url:blocks", &id);
	T_EQ_INT(open_at(tmpdir, &c), 0);
	for (uint64_t i = 0; i < 8; i++) {
		fill(want, BS, i, 1);
		T_EQ_INT(cache_block_put(c, &id, i, want, BS), 0);
		/* Readable at once, from the queue or LMDB. */
		memset(got, 0, BS);
		T_EQ_INT(cache_block_read(c, &id, i, 0, got, BS), BS);
		T_EQ_MEM(got, want, BS);
	}
	T_EQ_INT(cache_flush(c), 0);
	for (uint64_t i = 0; i < 8; i++) {
		fill(want, BS, i, 1);
		memset(got, 0, BS);
		T_EQ_INT(cache_block_read(c, &id, i, 0, got, BS), BS);
		T_EQ_MEM(got, want, BS);
		/* A slice from the middle, and past the end of the block. */
		T_EQ_INT(cache_block_read(c, &id, i, 1000, got, 5000), 5000);
		T_EQ_MEM(got, want + 1000, 5000);
		T_EQ_INT(cache_block_read(c, &id, i, BS - 10, got, 100), 10);
		T_EQ_MEM(got, want + BS - 10, 10);
		T_EQ_INT(cache_block_read(c, &id, i, BS, got, 100), 0);
	}
	T_EQ_INT(cache_block_read(c, &id, 8, 0, got, BS), -ENOENT);
	struct cache_id other;
	cache_id_from_string("url:other", &other);
	T_EQ_INT(cache_block_read(c, &other, 0, 0, got, BS), -ENOENT);
	T_EQ_INT(cache_block_put(c, &id, 9, want, 0), -EINVAL);
	T_EQ_INT(cache_block_put(c, &id, 9, want, BS + 1), -EINVAL);

	/* A re-put of a block replaces its bytes. */
	fill(want, BS, 3, 2);
	T_EQ_INT(cache_block_put(c, &id, 3, want, BS), 0);
	T_EQ_INT(cache_block_read(c, &id, 3, 0, got, BS), BS);
	T_EQ_MEM(got, want, BS);
	T_EQ_INT(cache_flush(c), 0);
	T_EQ_INT(cache_block_read(c, &id, 3, 0, got, BS), BS);
	T_EQ_MEM(got, want, BS);

	struct cache_stats s;
	T_EQ_INT(cache_stats_get(c, &s), 0);
	T_EQ_U64(s.blocks, 8);
	T_EQ_U64(s.bytes, 8ull * BS);
	T_ASSERT(s.file_size >= 8ull * BS);
	cache_close(c);
	free(want);
	free(got);
	tmp_remove();
}

static void test_short_last_block(void)
{
	struct cache *c = NULL;
	struct cache_id id;
	unsigned char want[1000], got[2000];
	struct ext_list l;

	tmp_make();
	cache_id_from_string("url:short", &id);
	T_EQ_INT(open_at(tmpdir, &c), 0);
	fill(want, sizeof(want), 3, 0);
	T_EQ_INT(cache_block_put(c, &id, 3, want, sizeof(want)), 0);
	T_EQ_INT(cache_block_read(c, &id, 3, 0, got, sizeof(got)), 1000);
	T_EQ_MEM(got, want, 1000);
	T_EQ_INT(cache_flush(c), 0);
	T_EQ_INT(cache_block_read(c, &id, 3, 0, got, sizeof(got)), 1000);
	T_EQ_MEM(got, want, 1000);
	T_EQ_INT(cache_block_read(c, &id, 3, 990, got, sizeof(got)), 10);
	T_EQ_INT(extents_of(c, &id, &l), 0);
	T_EQ_INT(l.n, 1);
	T_EQ_U64(l.s[0], 3ull * BS);
	T_EQ_U64(l.e[0], 3ull * BS + 1000);
	cache_close(c);
	tmp_remove();
}

static int put_block(struct cache *c, const struct cache_id *id, uint64_t i,
		     size_t len)
{
	static unsigned char buf[BS];

	fill(buf, len, i, 0);
	return cache_block_put(c, id, i, buf, len);
}

static void test_extents_merge(void)
{
	struct cache *c = NULL;
	struct cache_id id, nb;
	struct ext_list l;

	tmp_make();
	cache_id_from_string("url:ext", &id);
	cache_id_from_string("url:neighbour", &nb);
	T_EQ_INT(open_at(tmpdir, &c), 0);

	/* A neighbour blob's extents around ours must never merge in. */
	T_EQ_INT(put_block(c, &nb, 0, BS), 0);
	T_EQ_INT(put_block(c, &nb, 100, BS), 0);

	/* Out of order within one batch: 5, 3, 4 -> [3, 6). */
	T_EQ_INT(put_block(c, &id, 5, BS), 0);
	T_EQ_INT(put_block(c, &id, 3, BS), 0);
	T_EQ_INT(put_block(c, &id, 4, BS), 0);
	T_EQ_INT(cache_flush(c), 0);
	T_EQ_INT(extents_of(c, &id, &l), 0);
	T_EQ_INT(l.n, 1);
	T_EQ_U64(l.s[0], 3ull * BS);
	T_EQ_U64(l.e[0], 6ull * BS);

	/* Adjacent below across batches, a separate one, then its neighbour
	 * below: [0,1) [3,6) [8,9) then 7 -> [7,9). */
	T_EQ_INT(put_block(c, &id, 0, BS), 0);
	T_EQ_INT(cache_flush(c), 0);
	T_EQ_INT(put_block(c, &id, 8, BS), 0);
	T_EQ_INT(cache_flush(c), 0);
	T_EQ_INT(put_block(c, &id, 7, BS), 0);
	T_EQ_INT(cache_flush(c), 0);
	T_EQ_INT(extents_of(c, &id, &l), 0);
	T_EQ_INT(l.n, 3);
	T_EQ_U64(l.s[0], 0);
	T_EQ_U64(l.e[0], 1ull * BS);
	T_EQ_U64(l.s[1], 3ull * BS);
	T_EQ_U64(l.e[1], 6ull * BS);
	T_EQ_U64(l.s[2], 7ull * BS);
	T_EQ_U64(l.e[2], 9ull * BS);

	/* Overlapping: a re-put inside an extent changes nothing; a short
	 * block then the full one grows [10, 10+100) to [10, 11). */
	T_EQ_INT(put_block(c, &id, 4, BS), 0);
	T_EQ_INT(put_block(c, &id, 10, 100), 0);
	T_EQ_INT(cache_flush(c), 0);
	T_EQ_INT(extents_of(c, &id, &l), 0);
	T_EQ_INT(l.n, 4);
	T_EQ_U64(l.s[3], 10ull * BS);
	T_EQ_U64(l.e[3], 10ull * BS + 100);
	T_EQ_INT(put_block(c, &id, 10, BS), 0);
	T_EQ_INT(cache_flush(c), 0);
	T_EQ_INT(extents_of(c, &id, &l), 0);
	T_EQ_INT(l.n, 4);
	T_EQ_U64(l.e[3], 11ull * BS);

	/* Bridging: 1, 2, 6, 9 join everything into [0, 11). */
	T_EQ_INT(put_block(c, &id, 6, BS), 0);
	T_EQ_INT(put_block(c, &id, 2, BS), 0);
	T_EQ_INT(put_block(c, &id, 9, BS), 0);
	T_EQ_INT(put_block(c, &id, 1, BS), 0);
	T_EQ_INT(cache_flush(c), 0);
	T_EQ_INT(extents_of(c, &id, &l), 0);
	T_EQ_INT(l.n, 1);
	T_EQ_U64(l.s[0], 0);
	T_EQ_U64(l.e[0], 11ull * BS);

	T_EQ_INT(extents_of(c, &nb, &l), 0);
	T_EQ_INT(l.n, 2);
	T_EQ_U64(l.s[0], 0);
	T_EQ_U64(l.e[0], 1ull * BS);
	T_EQ_U64(l.s[1], 100ull * BS);

	/* Reopen: the same extents. */
	cache_close(c);
	c = NULL;
	T_EQ_INT(open_at(tmpdir, &c), 0);
	T_EQ_INT(extents_of(c, &id, &l), 0);
	T_EQ_INT(l.n, 1);
	T_EQ_U64(l.s[0], 0);
	T_EQ_U64(l.e[0], 11ull * BS);
	T_EQ_INT(extents_of(c, &nb, &l), 0);
	T_EQ_INT(l.n, 2);
	cache_close(c);
	tmp_remove();
}

static int stop_at_second(void *ctx, uint64_t start, uint64_t end)
{
	int *n = ctx;

	(void)start;
	(void)end;
	return ++*n == 2 ? 42 : 0;
}

static void test_extents_stop(void)
{
	struct cache *c = NULL;
	struct cache_id id;
	int n = 0;

	tmp_make();
	cache_id_from_string("url:stop", &id);
	T_EQ_INT(open_at(tmpdir, &c), 0);
	for (uint64_t i = 0; i < 6; i += 2)
		T_EQ_INT(put_block(c, &id, i, BS), 0);
	T_EQ_INT(cache_flush(c), 0);
	T_EQ_INT(cache_extents_each(c, &id, stop_at_second, &n), 42);
	T_EQ_INT(n, 2);
	cache_close(c);
	tmp_remove();
}

static void test_drop(void)
{
	struct cache *c = NULL;
	struct cache_id id, keep;
	struct cache_blob_record r = {.size = 10ull * BS};
	struct ext_list l;
	unsigned char *got = malloc(BS);

	tmp_make();
	cache_id_from_string("url:drop", &id);
	cache_id_from_string("url:keep", &keep);
	T_EQ_INT(open_at(tmpdir, &c), 0);
	T_EQ_INT(cache_blob_put(c, &id, &r), 0);
	T_EQ_INT(cache_blob_put(c, &keep, &r), 0);
	for (uint64_t i = 0; i < 4; i++) {
		T_EQ_INT(put_block(c, &id, i, BS), 0);
		T_EQ_INT(put_block(c, &keep, i, BS), 0);
	}
	T_EQ_INT(cache_flush(c), 0);
	/* Some committed, some still queued (perhaps). */
	for (uint64_t i = 4; i < 10; i++)
		T_EQ_INT(put_block(c, &id, i, BS), 0);
	T_EQ_INT(cache_blob_drop(c, &id), 0);
	for (uint64_t i = 0; i < 10; i++)
		T_EQ_INT(cache_block_read(c, &id, i, 0, got, BS), -ENOENT);
	T_EQ_INT(cache_flush(c), 0);
	for (uint64_t i = 0; i < 10; i++)
		T_EQ_INT(cache_block_read(c, &id, i, 0, got, BS), -ENOENT);
	T_EQ_INT(extents_of(c, &id, &l), 0);
	T_EQ_INT(l.n, 0);
	struct cache_blob_record g;
	T_EQ_INT(cache_blob_get(c, &id, &g), -ENOENT);

	/* The other blob is untouched. */
	T_EQ_INT(cache_blob_get(c, &keep, &g), 0);
	T_EQ_INT(extents_of(c, &keep, &l), 0);
	T_EQ_INT(l.n, 1);
	T_EQ_U64(l.e[0], 4ull * BS);
	T_EQ_INT(cache_block_read(c, &keep, 3, 0, got, BS), BS);
	struct cache_stats s;
	T_EQ_INT(cache_stats_get(c, &s), 0);
	T_EQ_U64(s.blobs, 1);
	T_EQ_U64(s.blocks, 4);
	T_EQ_U64(s.bytes, 4ull * BS);
	cache_close(c);
	free(got);
	tmp_remove();
}

/* Writes meta entry `name` = x into the environment at dir with raw LMDB. */
static int raw_meta_put(const char *dir, const char *name, uint32_t x)
{
	MDB_env *env = NULL;
	MDB_txn *txn = NULL;
	MDB_dbi dbi;
	unsigned char b[4] = {(unsigned char)(x >> 24),
			      (unsigned char)(x >> 16), (unsigned char)(x >> 8),
			      (unsigned char)x};
	MDB_val k = {.mv_size = strlen(name), .mv_data = (void *)name};
	MDB_val v = {.mv_size = 4, .mv_data = b};
	int rc;

	rc = mdb_env_create(&env);
	if (rc == 0)
		rc = mdb_env_set_maxdbs(env, 6);
	/* Small: the test's own map may not fit twice under valgrind. */
	if (rc == 0)
		rc = mdb_env_set_mapsize(env, 64u << 20);
	if (rc == 0)
		rc = mdb_env_open(env, dir, 0, 0600);
	if (rc == 0)
		rc = mdb_txn_begin(env, NULL, 0, &txn);
	if (rc == 0)
		rc = mdb_dbi_open(txn, "meta", 0, &dbi);
	if (rc == 0)
		rc = mdb_put(txn, dbi, &k, &v, 0);
	if (rc == 0) {
		rc = mdb_txn_commit(txn);
		txn = NULL;
	}
	if (txn)
		mdb_txn_abort(txn);
	mdb_env_close(env);
	return rc;
}

static void test_format_refused(void)
{
	struct cache *c = NULL;

	tmp_make();
	T_EQ_INT(open_at(tmpdir, &c), 0);
	cache_close(c);
	c = NULL;
	T_EQ_INT(raw_meta_put(tmpdir, "format", 99), 0);
	T_EQ_INT(open_at(tmpdir, &c), -EPROTO);
	T_ASSERT(c == NULL);
	T_ASSERT(strstr(logcap.last, "version 99") != NULL);
	T_ASSERT(strstr(logcap.last, "version 3") != NULL);
	T_ASSERT(strstr(logcap.last, tmpdir) != NULL);

	/* Back to a known format, but another block size: refused too. */
	T_EQ_INT(raw_meta_put(tmpdir, "format", 3), 0);
	T_EQ_INT(raw_meta_put(tmpdir, "block_size", 4096), 0);
	T_EQ_INT(open_at(tmpdir, &c), -EPROTO);
	T_ASSERT(strstr(logcap.last, "block size 4096") != NULL);
	T_EQ_INT(raw_meta_put(tmpdir, "block_size", BS), 0);
	T_EQ_INT(open_at(tmpdir, &c), 0);
	cache_close(c);

	/* Not an LMDB file at all. */
	char path[128];
	snprintf(path, sizeof(path), "%s/data.mdb", tmpdir);
	FILE *f = fopen(path, "w");
	T_ASSERT(f != NULL);
	for (int i = 0; i < 8192; i++)
		fputc('x', f);
	fclose(f);
	c = NULL;
	T_EQ_INT(open_at(tmpdir, &c), -EPROTO);
	T_ASSERT(c == NULL);
	tmp_remove();
}

static void test_bad_dir(void)
{
	struct cache *c = NULL;
	char file[128], dir[160];

	tmp_make();
	snprintf(file, sizeof(file), "%s/plain", tmpdir);
	FILE *f = fopen(file, "w");
	T_ASSERT(f != NULL);
	fclose(f);

	/* The path itself a regular file, and a path under one. */
	T_EQ_INT(open_at(file, &c), -ENOTDIR);
	T_ASSERT(strstr(logcap.last, file) != NULL);
	snprintf(dir, sizeof(dir), "%s/sub", file);
	T_EQ_INT(open_at(dir, &c), -ENOTDIR);
	T_ASSERT(strstr(logcap.last, dir) != NULL);
	T_ASSERT(c == NULL);

	struct cache_config cfg = {.dir = ""};
	T_EQ_INT(cache_open(&cfg, &c), -EINVAL);
	T_EQ_INT(cache_open(NULL, &c), -EINVAL);

	/* A read-only directory (permissions do not stop root). */
	if (geteuid() != 0) {
		snprintf(dir, sizeof(dir), "%s/ro", tmpdir);
		T_EQ_INT(mkdir(dir, 0500), 0);
		T_EQ_INT(open_at(dir, &c), -EACCES);
		T_ASSERT(strstr(logcap.last, dir) != NULL);
		snprintf(dir, sizeof(dir), "%s/ro/sub", tmpdir);
		T_EQ_INT(open_at(dir, &c), -EACCES);
		T_ASSERT(strstr(logcap.last, dir) != NULL);
	}
	tmp_remove();
}

/* Back-pressure: a queue bound far below the data still admits and
 * delivers every block. */
static void test_backpressure(void)
{
	struct cache_config cfg;
	struct cache *c = NULL;
	struct cache_id id;
	unsigned char *want = malloc(BS), *got = malloc(BS);

	tmp_make();
	cfg = cfg_for(tmpdir);
	cfg.queue_bytes = 3 * BS;
	cache_id_from_string("url:bp", &id);
	T_EQ_INT(cache_open(&cfg, &c), 0);
	for (uint64_t i = 0; i < 40; i++)
		T_EQ_INT(put_block(c, &id, i, BS), 0);
	T_EQ_INT(cache_flush(c), 0);
	for (uint64_t i = 0; i < 40; i++) {
		fill(want, BS, i, 0);
		T_EQ_INT(cache_block_read(c, &id, i, 0, got, BS), BS);
		T_EQ_MEM(got, want, BS);
	}
	cache_close(c);
	free(want);
	free(got);
	tmp_remove();
}

/* A map far too small: commits fail with -ENOSPC, nothing is claimed that
 * is not there, and the cache opens again afterwards. */
static int check_claimed(void *ctx, uint64_t start, uint64_t end)
{
	struct cache *c = ((void **)ctx)[0];
	const struct cache_id *id = ((void **)ctx)[1];
	static unsigned char got[BS], want[BS];

	for (uint64_t i = start / BS; i * BS < end; i++) {
		fill(want, BS, i, 0);
		if (cache_block_read(c, id, i, 0, got, BS) != BS ||
		    memcmp(got, want, BS) != 0)
			return -1;
	}
	return 0;
}

struct lost {
	pthread_mutex_t mu;
	int n, err;
	uint64_t last_index;
	struct cache_id id;
};

static void on_lost(void *ctx, const struct cache_id *id, uint64_t index,
		    int err)
{
	struct lost *l = ctx;

	pthread_mutex_lock(&l->mu);
	l->n++;
	l->err = err;
	l->last_index = index;
	l->id = *id;
	pthread_mutex_unlock(&l->mu);
}

static void test_map_full(void)
{
	struct cache_config cfg;
	struct cache *c = NULL;
	struct cache_id id;
	struct lost lost = {.mu = PTHREAD_MUTEX_INITIALIZER};
	int rc = 0, i;

	tmp_make();
	cfg = cfg_for(tmpdir);
	cfg.map_size = 4u << 20;
	cfg.on_lost = on_lost;
	cfg.lost_ctx = &lost;
	cache_id_from_string("url:full", &id);
	T_EQ_INT(cache_open(&cfg, &c), 0);
	for (i = 0; i < 64 && rc == 0; i++) {
		T_EQ_INT(put_block(c, &id, (uint64_t)i, BS), 0);
		rc = cache_flush(c);
	}
	T_EQ_INT(rc, -ENOSPC);
	T_ASSERT(i > 1);
	/* The lost block was reported before the flush returned, and reads
	 * of it miss. */
	pthread_mutex_lock(&lost.mu);
	int lost_n = lost.n, lost_err = lost.err;
	uint64_t lost_index = lost.last_index;
	bool lost_same = memcmp(lost.id.b, id.b, CACHE_ID_LEN) == 0;
	pthread_mutex_unlock(&lost.mu);
	T_EQ_INT(lost_n, 1);
	T_EQ_INT(lost_err, -ENOSPC);
	T_EQ_U64(lost_index, (uint64_t)(i - 1));
	T_ASSERT(lost_same);
	static unsigned char got[BS];
	T_EQ_INT(cache_block_read(c, &id, lost_index, 0, got, BS), -ENOENT);
	void *ctx[2] = {c, &id};
	T_EQ_INT(cache_extents_each(c, &id, check_claimed, ctx), 0);
	T_EQ_INT(cache_flush(c), 0); /* the error was reported once */
	/* Dropping frees room for more, once LMDB may reuse the pages: not
	 * by the transaction right after the one that freed them. */
	T_EQ_INT(cache_blob_drop(c, &id), 0);
	struct cache_blob_record r = {.size = 1};
	T_EQ_INT(cache_blob_put(c, &id, &r), 0);
	T_EQ_INT(put_block(c, &id, 0, BS), 0);
	T_EQ_INT(cache_flush(c), 0);
	cache_close(c);
	c = NULL;
	T_EQ_INT(cache_open(&cfg, &c), 0);
	ctx[0] = c;
	T_EQ_INT(cache_extents_each(c, &id, check_claimed, ctx), 0);
	cache_close(c);
	tmp_remove();
}

/* Concurrent readers while a writer streams blocks in: every block a
 * reader sees holds exactly the bytes that were put. */
#define CONC_BLOCKS 96
#define CONC_READERS 4

struct conc {
	struct cache *c;
	struct cache_id id;
	pthread_mutex_t mu;
	uint64_t published; /* guarded by mu */
	bool done;	    /* guarded by mu */
	int bad, reads;	    /* guarded by mu */
};

static void *conc_reader(void *arg)
{
	struct conc *k = arg;
	unsigned char *got = malloc(BS), *want = malloc(BS);
	unsigned seed = (unsigned)(uintptr_t)&seed;
	int bad = 0, reads = 0;

	for (;;) {
		pthread_mutex_lock(&k->mu);
		uint64_t n = k->published;
		bool done = k->done;
		pthread_mutex_unlock(&k->mu);
		if (n > 0) {
			uint64_t i = (uint64_t)rand_r(&seed) % n;
			size_t off = (size_t)rand_r(&seed) % BS;
			long r =
				cache_block_read(k->c, &k->id, i, off, got, BS);
			fill(want, BS, i, 5);
			if (r != (long)(BS - off) ||
			    memcmp(got, want + off, BS - off) != 0)
				bad++;
			reads++;
		}
		if (done)
			break;
	}
	pthread_mutex_lock(&k->mu);
	k->bad += bad;
	k->reads += reads;
	pthread_mutex_unlock(&k->mu);
	free(got);
	free(want);
	return NULL;
}

static void test_concurrent(void)
{
	struct cache_config cfg;
	struct conc k = {.mu = PTHREAD_MUTEX_INITIALIZER};
	pthread_t th[CONC_READERS];
	unsigned char *buf = malloc(BS);

	tmp_make();
	cfg = cfg_for(tmpdir);
	cfg.queue_bytes = 8 * BS; /* forces reads from both places */
	cache_id_from_string("url:conc", &k.id);
	T_EQ_INT(cache_open(&cfg, &k.c), 0);
	for (int t = 0; t < CONC_READERS; t++)
		T_EQ_INT(pthread_create(&th[t], NULL, conc_reader, &k), 0);
	for (uint64_t i = 0; i < CONC_BLOCKS; i++) {
		fill(buf, BS, i, 5);
		T_EQ_INT(cache_block_put(k.c, &k.id, i, buf, BS), 0);
		pthread_mutex_lock(&k.mu);
		k.published = i + 1;
		pthread_mutex_unlock(&k.mu);
		if (i % 32 == 31)
			T_EQ_INT(cache_flush(k.c), 0);
	}
	T_EQ_INT(cache_flush(k.c), 0);
	pthread_mutex_lock(&k.mu);
	k.done = true;
	pthread_mutex_unlock(&k.mu);
	for (int t = 0; t < CONC_READERS; t++)
		pthread_join(th[t], NULL);
	T_EQ_INT(k.bad, 0);
	T_ASSERT(k.reads > 0);
	struct ext_list l;
	T_EQ_INT(extents_of(k.c, &k.id, &l), 0);
	T_EQ_INT(l.n, 1);
	T_EQ_U64(l.e[0], (uint64_t)CONC_BLOCKS * BS);
	cache_close(k.c);
	free(buf);
	tmp_remove();
}

/* Two processes on one cache directory: a child writes while the parent
 * holds the cache open, and the parent sees the child's commits. */
static void test_two_processes(void)
{
	struct cache *c = NULL;
	struct cache_id id;
	struct ext_list l;
	unsigned char *got = malloc(BS), *want = malloc(BS);
	int status = 0;

	tmp_make();
	cache_id_from_string("url:procs", &id);
	T_EQ_INT(open_at(tmpdir, &c), 0);
	T_EQ_INT(put_block(c, &id, 0, BS), 0);
	T_EQ_INT(cache_flush(c), 0);

	fflush(NULL);
	pid_t pid = fork();
	T_ASSERT(pid >= 0);
	if (pid == 0) {
		/* A fresh process image, not a copy holding our environment. */
		execl(self_path, self_path, "--child-writer", tmpdir,
		      (char *)NULL);
		_exit(127);
	}
	/* Meanwhile this process writes too. */
	for (uint64_t i = 10; i < 16; i++)
		T_EQ_INT(put_block(c, &id, i, BS), 0);
	T_EQ_INT(waitpid(pid, &status, 0), pid);
	T_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	T_EQ_INT(cache_flush(c), 0);
	T_EQ_INT(extents_of(c, &id, &l), 0);
	T_EQ_INT(l.n, 2);
	T_EQ_U64(l.s[0], 0);
	T_EQ_U64(l.e[0], 6ull * BS);
	T_EQ_U64(l.s[1], 10ull * BS);
	T_EQ_U64(l.e[1], 16ull * BS);
	fill(want, BS, 5, 0);
	T_EQ_INT(cache_block_read(c, &id, 5, 0, got, BS), BS);
	T_EQ_MEM(got, want, BS);
	cache_close(c);
	free(got);
	free(want);
	tmp_remove();
}

/* The other process of test_two_processes: writes blocks 1..5. */
static int child_writer(const char *dir)
{
	struct cache *c = NULL;
	struct cache_id id;
	int ok;

	cache_id_from_string("url:procs", &id);
	ok = open_at(dir, &c) == 0;
	for (uint64_t i = 1; ok && i < 6; i++)
		ok = put_block(c, &id, i, BS) == 0;
	ok = ok && cache_flush(c) == 0;
	cache_close(c);
	return ok ? 0 : 1;
}

/* The victim of test_kill9: streams blocks of url:kill9 until killed. */
static int child_stream(const char *dir)
{
	struct cache *c = NULL;
	struct cache_id id;

	cache_id_from_string("url:kill9", &id);
	if (open_at(dir, &c) != 0)
		return 1;
	for (uint64_t i = 0;; i++) {
		if (put_block(c, &id, i % 4096, BS) != 0)
			return 1;
		if (i % 16 == 15)
			cache_flush(c);
	}
}

/* The victim of test_kill9_budget: streams blocks of url:kill9 into a
 * cache with a budget of 32 blocks until killed, reading some back. */
static int child_stream_budget(const char *dir)
{
	struct cache_config cfg = cfg_for(dir);
	struct cache *c = NULL;
	struct cache_id id;
	static unsigned char got[BS];

	cfg.budget_bytes = 32ull * BS;
	cache_id_from_string("url:kill9", &id);
	if (cache_open(&cfg, &c) != 0)
		return 1;
	for (uint64_t i = 0;; i++) {
		if (put_block(c, &id, i % 4096, BS) != 0)
			return 1;
		cache_block_read(c, &id, (i * 7) % (i + 1), 0, got, BS);
		if (i % 16 == 15)
			cache_flush(c);
	}
}

/* kill -9 while eviction runs: the extents still claim only stored bytes,
 * and the budget holds within a batch. */
static void test_kill9_budget(void)
{
	struct cache *c = NULL;
	struct cache_id id;
	struct cache_stats s;
	uint64_t unc = 1;
	int status = 0;

	tmp_make();
	cache_id_from_string("url:kill9", &id);
	fflush(NULL);
	pid_t pid = fork();
	T_ASSERT(pid >= 0);
	if (pid == 0) {
		execl(self_path, self_path, "--child-stream-budget", tmpdir,
		      (char *)NULL);
		_exit(127);
	}
	usleep(400 * 1000);
	T_EQ_INT(kill(pid, SIGKILL), 0);
	T_EQ_INT(waitpid(pid, &status, 0), pid);
	T_ASSERT(WIFSIGNALED(status));

	T_EQ_INT(open_at(tmpdir, &c), 0);
	void *ctx[2] = {c, &id};
	T_EQ_INT(cache_extents_each(c, &id, check_claimed, ctx), 0);
	T_EQ_INT(cache_blob_check(c, &id, &unc), 0);
	T_EQ_U64(unc, 0);
	T_EQ_INT(cache_stats_get(c, &s), 0);
	T_ASSERT(s.blocks > 0);
	T_ASSERT(s.blocks <= 32 + 64);
	cache_close(c);
	tmp_remove();
}

/* kill -9 in the middle of commits: whatever the extents claim is there,
 * byte for byte, and the cache opens and writes again. */
static void test_kill9(void)
{
	struct cache *c = NULL;
	struct cache_id id;
	struct ext_list l;
	int status = 0;

	tmp_make();
	cache_id_from_string("url:kill9", &id);
	fflush(NULL);
	pid_t pid = fork();
	T_ASSERT(pid >= 0);
	if (pid == 0) {
		execl(self_path, self_path, "--child-stream", tmpdir,
		      (char *)NULL);
		_exit(127);
	}
	usleep(300 * 1000);
	T_EQ_INT(kill(pid, SIGKILL), 0);
	T_EQ_INT(waitpid(pid, &status, 0), pid);
	T_ASSERT(WIFSIGNALED(status));

	T_EQ_INT(open_at(tmpdir, &c), 0);
	T_EQ_INT(extents_of(c, &id, &l), 0);
	T_ASSERT(l.n >= 1);
	void *ctx[2] = {c, &id};
	T_EQ_INT(cache_extents_each(c, &id, check_claimed, ctx), 0);
	T_EQ_INT(put_block(c, &id, 5000, BS), 0);
	T_EQ_INT(cache_flush(c), 0);
	cache_close(c);
	tmp_remove();
}

/* ---- budget, eviction, pins ---- */

#define EV_MAX 256

struct evicted {
	pthread_mutex_t mu;
	int n;
	struct cache_id id[EV_MAX];
	uint64_t index[EV_MAX];
};

static void on_evicted(void *ctx, const struct cache_id *id, uint64_t index)
{
	struct evicted *ev = ctx;

	pthread_mutex_lock(&ev->mu);
	if (ev->n < EV_MAX) {
		ev->id[ev->n] = *id;
		ev->index[ev->n] = index;
	}
	ev->n++;
	pthread_mutex_unlock(&ev->mu);
}

/* Whether ev holds (id, index). */
static bool was_evicted(struct evicted *ev, const struct cache_id *id,
			uint64_t index)
{
	bool found = false;

	pthread_mutex_lock(&ev->mu);
	for (int i = 0; i < ev->n && i < EV_MAX; i++)
		found |= ev->index[i] == index &&
			 memcmp(ev->id[i].b, id->b, CACHE_ID_LEN) == 0;
	pthread_mutex_unlock(&ev->mu);
	return found;
}

static int open_budget(const char *dir, uint64_t blocks, struct evicted *ev,
		       struct cache **out)
{
	struct cache_config cfg = cfg_for(dir);

	cfg.budget_bytes = blocks * BS;
	cfg.on_evicted = on_evicted;
	cfg.evicted_ctx = ev;
	return cache_open(&cfg, out);
}

static bool held(struct cache *c, const struct cache_id *id, uint64_t i)
{
	static unsigned char got[BS];

	return cache_block_read(c, id, i, 0, got, BS) > 0;
}

/* Whether the extents claim block i, without reading it (a read would
 * make it recently used). */
static bool claimed(struct cache *c, const struct cache_id *id, uint64_t i)
{
	struct ext_list l;

	if (extents_of(c, id, &l) != 0)
		return false;
	for (int x = 0; x < l.n && x < 64; x++)
		if (l.s[x] <= i * BS && (i + 1) * BS <= l.e[x])
			return true;
	return false;
}

/* The least recently used blocks go first, reads count as use, the
 * evicted blocks are reported and cut from the extents in the same
 * commit. */
static void test_budget_lru(void)
{
	struct evicted ev = {.mu = PTHREAD_MUTEX_INITIALIZER};
	struct cache *c = NULL;
	struct cache_id a, b;
	struct ext_list l;
	struct cache_stats s;
	static unsigned char got[BS];

	tmp_make();
	cache_id_from_string("url:lru-a", &a);
	cache_id_from_string("url:lru-b", &b);
	T_EQ_INT(open_budget(tmpdir, 8, &ev, &c), 0);
	for (uint64_t i = 0; i < 8; i++)
		T_EQ_INT(put_block(c, &a, i, BS), 0);
	T_EQ_INT(cache_flush(c), 0);
	T_EQ_INT(ev.n, 0);
	/* Read blocks 0-3: they become more recent than 4-7. */
	for (uint64_t i = 0; i < 4; i++)
		T_EQ_INT(cache_block_read(c, &a, i, 0, got, BS), BS);
	for (uint64_t i = 0; i < 4; i++)
		T_EQ_INT(put_block(c, &b, i, BS), 0);
	T_EQ_INT(cache_flush(c), 0);
	T_EQ_INT(ev.n, 4);
	for (uint64_t i = 0; i < 8; i++) {
		T_EQ_INT(held(c, &a, i), i < 4);
		T_EQ_INT(was_evicted(&ev, &a, i), i >= 4);
	}
	for (uint64_t i = 0; i < 4; i++)
		T_ASSERT(held(c, &b, i));
	T_EQ_INT(extents_of(c, &a, &l), 0);
	T_EQ_INT(l.n, 1);
	T_EQ_U64(l.s[0], 0);
	T_EQ_U64(l.e[0], 4ull * BS);
	T_EQ_INT(cache_stats_get(c, &s), 0);
	T_EQ_U64(s.blocks, 8);
	T_EQ_U64(s.bytes, 8ull * BS);
	T_EQ_U64(s.budget, 8ull * BS);
	T_EQ_U64(s.evicted, 4);
	T_EQ_INT(s.format, 3);
	T_EQ_INT(s.block_size, BS);
	cache_close(c);

	/* The budget is recorded for `pacefs cache stat`. */
	c = NULL;
	T_EQ_INT(open_at(tmpdir, &c), 0);
	T_EQ_INT(cache_stats_get(c, &s), 0);
	T_EQ_U64(s.budget, 8ull * BS);
	cache_close(c);
	tmp_remove();
}

/* Reads are persisted (at close here) and order eviction in a later
 * process. */
static void test_budget_reads_persist(void)
{
	struct evicted ev = {.mu = PTHREAD_MUTEX_INITIALIZER};
	struct cache *c = NULL;
	struct cache_id a, b;
	static unsigned char got[BS];

	tmp_make();
	cache_id_from_string("url:persist-a", &a);
	cache_id_from_string("url:persist-b", &b);
	T_EQ_INT(open_at(tmpdir, &c), 0);
	for (uint64_t i = 0; i < 4; i++)
		T_EQ_INT(put_block(c, &a, i, BS), 0);
	cache_close(c);
	c = NULL;
	T_EQ_INT(open_at(tmpdir, &c), 0);
	T_EQ_INT(cache_block_read(c, &a, 2, 0, got, BS), BS);
	cache_close(c);
	c = NULL;
	T_EQ_INT(open_budget(tmpdir, 3, &ev, &c), 0);
	T_EQ_INT(put_block(c, &b, 0, BS), 0);
	T_EQ_INT(cache_flush(c), 0);
	T_EQ_INT(ev.n, 2);
	T_ASSERT(held(c, &a, 2));
	T_ASSERT(held(c, &b, 0));
	T_EQ_INT(held(c, &a, 0) + held(c, &a, 1) + held(c, &a, 3), 1);
	cache_close(c);
	tmp_remove();
}

/* Pinned blocks are skipped, whatever their age; a cleared pin frees
 * them. */
static void test_pins(void)
{
	struct evicted ev = {.mu = PTHREAD_MUTEX_INITIALIZER};
	struct cache *c = NULL;
	struct cache_id a, b;

	tmp_make();
	cache_id_from_string("url:pin-a", &a);
	cache_id_from_string("url:pin-b", &b);
	T_EQ_INT(open_budget(tmpdir, 4, &ev, &c), 0);
	for (uint64_t i = 0; i < 4; i++)
		T_EQ_INT(put_block(c, &a, i, BS), 0);
	T_EQ_INT(cache_flush(c), 0);
	/* Slot 7 pins bytes of blocks 0 and 1; slot 8 another range that
	 * slot 8 then moves away. */
	T_EQ_INT(cache_pin_set(c, &a, 7, 100, BS + 1), 0);
	T_EQ_INT(cache_pin_set(c, &a, 8, 2 * BS, 3 * BS), 0);
	T_EQ_INT(cache_pin_set(c, &a, 8, 10 * BS, 11 * BS), 0);
	T_EQ_INT(put_block(c, &b, 0, BS), 0);
	T_EQ_INT(put_block(c, &b, 1, BS), 0);
	T_EQ_INT(cache_flush(c), 0);
	T_ASSERT(claimed(c, &a, 0));
	T_ASSERT(claimed(c, &a, 1));
	T_ASSERT(!claimed(c, &a, 2));
	T_ASSERT(!claimed(c, &a, 3));
	/* The oldest unpinned block goes next: b's block 0. */
	T_EQ_INT(put_block(c, &b, 2, BS), 0);
	T_EQ_INT(cache_flush(c), 0);
	T_ASSERT(claimed(c, &a, 0));
	T_ASSERT(claimed(c, &a, 1));
	T_ASSERT(!claimed(c, &b, 0));
	/* Everything older is pinned: the budget gives way. */
	T_EQ_INT(cache_pin_set(c, &b, 9, 0, 10 * BS), 0);
	T_EQ_INT(put_block(c, &b, 4, BS), 0);
	T_EQ_INT(cache_flush(c), 0);
	struct cache_stats s;
	T_EQ_INT(cache_stats_get(c, &s), 0);
	T_EQ_U64(s.blocks, 5);
	/* Unpinned, a's blocks go. */
	T_EQ_INT(cache_pin_set(c, &a, 7, 0, 0), 0);
	T_EQ_INT(put_block(c, &b, 5, BS), 0);
	T_EQ_INT(cache_flush(c), 0);
	T_ASSERT(!claimed(c, &a, 0));
	T_ASSERT(!claimed(c, &a, 1));
	T_ASSERT(claimed(c, &b, 5));
	T_EQ_INT(cache_stats_get(c, &s), 0);
	T_EQ_U64(s.blocks, 4);
	T_EQ_INT(cache_pin_set(c, NULL, 1, 0, 1), -EINVAL);
	cache_close(c);
	tmp_remove();
}

/* Streaming far more than the budget: after every flush the blocks fit
 * the budget plus at most one batch, and every extent is backed by its
 * blocks with the right bytes. */
static void test_budget_stream(void)
{
	struct evicted ev = {.mu = PTHREAD_MUTEX_INITIALIZER};
	struct cache *c = NULL;
	struct cache_id id;
	struct cache_stats s;
	uint64_t unc = 1, bytes = 0;

	tmp_make();
	cache_id_from_string("url:stream", &id);
	T_EQ_INT(open_budget(tmpdir, 16, &ev, &c), 0);
	for (uint64_t i = 0; i < 120; i++) {
		T_EQ_INT(put_block(c, &id, i, BS), 0);
		if (i % 8 == 7) {
			T_EQ_INT(cache_flush(c), 0);
			T_EQ_INT(cache_stats_get(c, &s), 0);
			T_ASSERT(s.blocks <= 16);
		}
	}
	T_EQ_INT(cache_flush(c), 0);
	T_EQ_INT(cache_stats_get(c, &s), 0);
	T_EQ_U64(s.blocks, 16);
	T_EQ_U64(s.bytes, 16ull * BS);
	T_EQ_INT(ev.n, 120 - 16);
	void *ctx[2] = {c, &id};
	T_EQ_INT(cache_extents_each(c, &id, check_claimed, ctx), 0);
	T_EQ_INT(cache_blob_check(c, &id, &unc), 0);
	T_EQ_U64(unc, 0);
	T_EQ_INT(cache_blob_held(c, &id, &bytes), 0);
	T_EQ_U64(bytes, 16ull * BS);
	/* The newest stayed. */
	for (uint64_t i = 104; i < 120; i++)
		T_ASSERT(held(c, &id, i));
	cache_close(c);
	tmp_remove();
}

/* cache_blocks_evict: queued and committed blocks go, the extent splits,
 * the verified flag is cleared. */
static void test_blocks_evict(void)
{
	struct cache *c = NULL;
	struct cache_id id;
	struct ext_list l;
	static struct cache_blob_record r, g;

	tmp_make();
	cache_id_from_string("url:evict", &id);
	T_EQ_INT(open_at(tmpdir, &c), 0);
	r.size = 10ull * BS;
	r.verified = true;
	T_EQ_INT(cache_blob_put(c, &id, &r), 0);
	for (uint64_t i = 0; i < 8; i++)
		T_EQ_INT(put_block(c, &id, i, BS), 0);
	T_EQ_INT(cache_flush(c), 0);
	T_EQ_INT(put_block(c, &id, 8, BS), 0);
	T_EQ_INT(cache_blocks_evict(c, &id, 3, 2), 0);
	T_EQ_INT(cache_blocks_evict(c, &id, 8, 5), 0); /* queued, and absent */
	T_EQ_INT(cache_flush(c), 0);
	T_EQ_INT(extents_of(c, &id, &l), 0);
	T_EQ_INT(l.n, 2);
	T_EQ_U64(l.s[0], 0);
	T_EQ_U64(l.e[0], 3ull * BS);
	T_EQ_U64(l.s[1], 5ull * BS);
	T_EQ_U64(l.e[1], 8ull * BS);
	T_ASSERT(!held(c, &id, 3));
	T_ASSERT(!held(c, &id, 8));
	T_EQ_INT(cache_blob_get(c, &id, &g), 0);
	T_ASSERT(!g.verified);
	cache_close(c);
	tmp_remove();
}

/* A full map turns into eviction: after the first -ENOSPC, later commits
 * make room and succeed. */
static void test_map_pressure(void)
{
	struct cache_config cfg;
	struct evicted ev = {.mu = PTHREAD_MUTEX_INITIALIZER};
	struct cache *c = NULL;
	struct cache_id id;
	int rc = 0, i, ok_after = 0;

	tmp_make();
	cfg = cfg_for(tmpdir);
	cfg.map_size = 16ull * BS; /* room for about a dozen blocks */
	cfg.on_evicted = on_evicted;
	cfg.evicted_ctx = &ev;
	cache_id_from_string("url:pressure", &id);
	T_EQ_INT(cache_open(&cfg, &c), 0);
	for (i = 0; i < 64 && rc == 0; i++) {
		T_EQ_INT(put_block(c, &id, (uint64_t)i, BS), 0);
		rc = cache_flush(c);
	}
	T_EQ_INT(rc, -ENOSPC);
	for (int j = 0; j < 40; j++) {
		T_EQ_INT(put_block(c, &id, (uint64_t)(i + j), BS), 0);
		if (cache_flush(c) == 0)
			ok_after++;
	}
	if (getenv("T_VERBOSE"))
		fprintf(stderr, "ok_after %d evicted %d\n", ok_after, ev.n);
	T_ASSERT(ok_after >= 10);
	T_ASSERT(ev.n > 0);
	void *ctx[2] = {c, &id};
	T_EQ_INT(cache_extents_each(c, &id, check_claimed, ctx), 0);
	cache_close(c);
	tmp_remove();
}

/* ---- integrity ---- */

static void sha256_of(const void *p, size_t n, uint8_t out[32]);

/* Per-block digests smaller than a cache block: a bad block is refused
 * before it is queued; a good one goes in. */
static void test_digests_small(void)
{
	struct cache *c = NULL;
	struct cache_id id;
	const uint32_t dbs = BS / 4;
	const uint64_t size = 3ull * BS + 1000;
	const uint64_t n = (size + dbs - 1) / dbs;
	uint8_t(*d)[32] = calloc(n, 32);
	unsigned char *buf = malloc(BS);

	tmp_make();
	cache_id_from_string("url:dg-small", &id);
	T_EQ_INT(open_at(tmpdir, &c), 0);
	for (uint64_t i = 0; i < 4; i++) {
		size_t len = i < 3 ? BS : 1000;

		fill(buf, len, i, 0);
		for (size_t off = 0; off < len; off += dbs)
			sha256_of(buf + off, len - off < dbs ? len - off : dbs,
				  d[(i * BS + off) / dbs]);
	}
	T_EQ_INT(cache_blob_digests_set(c, &id, size, 1000, d, n), -EINVAL);
	T_EQ_INT(cache_blob_digests_set(c, &id, size, dbs, d, n - 1), -EINVAL);
	T_EQ_INT(cache_blob_digests_set(c, &id, size, BS / 2 * 3, d, 2),
		 -EINVAL);
	T_EQ_INT(cache_blob_digests_set(c, &id, size, dbs, d, n), 0);
	T_EQ_INT(put_block(c, &id, 0, BS), 0);
	T_EQ_INT(put_block(c, &id, 3, 1000), 0);
	fill(buf, BS, 1, 0);
	buf[BS - 1] ^= 1; /* the last digest block of block 1 */
	T_EQ_INT(cache_block_put(c, &id, 1, buf, BS), -EBADMSG);
	T_ASSERT(strstr(logcap.last, "does not match") != NULL);
	T_ASSERT(!held(c, &id, 1));
	T_EQ_INT(put_block(c, &id, 1, BS), 0);
	/* Removing the digests: anything goes again. */
	T_EQ_INT(cache_blob_digests_set(c, &id, 0, 0, NULL, 0), 0);
	T_EQ_INT(cache_block_put(c, &id, 2, buf, BS), 0);
	T_EQ_INT(cache_flush(c), 0);
	cache_close(c);
	free(d);
	free(buf);
	tmp_remove();
}

/* Digest blocks of two cache blocks: checked when the put completes one. */
static void test_digests_large(void)
{
	struct cache *c = NULL;
	struct cache_id id;
	const uint64_t size = 5ull * BS; /* digest blocks: 2, 2, 1 */
	uint8_t d[3][32];
	unsigned char *buf = malloc(2 * BS);

	tmp_make();
	cache_id_from_string("url:dg-large", &id);
	T_EQ_INT(open_at(tmpdir, &c), 0);
	for (uint64_t g = 0; g < 3; g++) {
		uint64_t nb = g < 2 ? 2 : 1;

		for (uint64_t j = 0; j < nb; j++)
			fill(buf + j * BS, BS, g * 2 + j, 0);
		sha256_of(buf, nb * BS, d[g]);
	}
	T_EQ_INT(cache_blob_digests_set(c, &id, size, 2 * BS, d, 3), 0);
	/* Block 1 first: its group is incomplete, so it is taken. */
	T_EQ_INT(put_block(c, &id, 1, BS), 0);
	fill(buf, BS, 0, 0);
	buf[5] ^= 0x80;
	T_EQ_INT(cache_block_put(c, &id, 0, buf, BS), -EBADMSG);
	T_EQ_INT(put_block(c, &id, 0, BS), 0);
	T_EQ_INT(cache_flush(c), 0);
	/* Group 1 completed by a committed member, group 2 of one block. */
	T_EQ_INT(put_block(c, &id, 2, BS), 0);
	T_EQ_INT(cache_flush(c), 0);
	fill(buf, BS, 3, 0);
	buf[0] ^= 1;
	T_EQ_INT(cache_block_put(c, &id, 3, buf, BS), -EBADMSG);
	T_EQ_INT(put_block(c, &id, 3, BS), 0);
	T_EQ_INT(put_block(c, &id, 4, BS), 0);
	T_EQ_INT(cache_flush(c), 0);
	cache_close(c);
	free(buf);
	tmp_remove();
}

static void sha256_blob(uint64_t size, uint8_t out[32])
{
	unsigned char *all = malloc(size);

	for (uint64_t i = 0; i * BS < size; i++) {
		size_t len = size - i * BS < BS ? size - i * BS : BS;
		fill(all + i * BS, len, i, 0);
	}
	sha256_of(all, size, out);
	free(all);
}

/* Whole-blob verification: OK sets verified, a mismatch clears it and
 * names the bad blocks when block digests are registered. */
static void test_verify(void)
{
	struct cache *c = NULL;
	struct cache_id id, none;
	static struct cache_blob_record r, g;
	const uint64_t size = 4ull * BS + 777;
	uint8_t want[32], wrong[32], d[5][32];
	uint64_t bad[8];
	size_t nbad = 99;
	unsigned char *buf = malloc(BS);

	tmp_make();
	cache_id_from_string("url:verify", &id);
	cache_id_from_string("url:verify-none", &none);
	T_EQ_INT(open_at(tmpdir, &c), 0);
	sha256_blob(size, want);
	memcpy(wrong, want, 32);
	wrong[0] ^= 1;
	r.size = size;
	snprintf(r.identity, sizeof(r.identity), "url:verify");
	T_EQ_INT(cache_blob_put(c, &id, &r), 0);
	T_EQ_INT(cache_blob_verify(c, &none, want, NULL, 0, NULL), -ENOENT);
	T_EQ_INT(cache_blob_verify(c, &id, NULL, NULL, 0, NULL), -ENOENT);
	for (uint64_t i = 0; i < 4; i++)
		T_EQ_INT(put_block(c, &id, i, BS), 0);
	T_EQ_INT(cache_flush(c), 0);
	T_EQ_INT(cache_blob_verify(c, &id, want, NULL, 0, NULL), -ENODATA);
	T_EQ_INT(put_block(c, &id, 4, 777), 0);
	T_EQ_INT(cache_flush(c), 0);
	T_EQ_INT(cache_blob_verify(c, &id, want, bad, 8, &nbad), 0);
	T_EQ_INT(nbad, 0);
	T_EQ_INT(cache_blob_get(c, &id, &g), 0);
	T_ASSERT(g.verified);
	T_ASSERT(g.has_sha256);
	T_EQ_MEM(g.sha256, want, 32);
	T_EQ_STR(g.identity, "url:verify");
	/* The stored digest is used when none is given. */
	T_EQ_INT(cache_blob_verify(c, &id, NULL, NULL, 0, NULL), 0);
	T_EQ_INT(cache_blob_verify(c, &id, wrong, bad, 8, &nbad), -EBADMSG);
	T_EQ_INT(nbad, 0); /* no block digests: culprits unknown */
	T_EQ_INT(cache_blob_get(c, &id, &g), 0);
	T_ASSERT(!g.verified);
	T_EQ_MEM(g.sha256, want, 32); /* a failed check keeps the digest */

	/* Replace block 2 with other bytes, register the right block
	 * digests: the whole check fails and names block 2. */
	for (uint64_t i = 0; i < 5; i++) {
		size_t len = i < 4 ? BS : 777;
		fill(buf, len, i, 0);
		sha256_of(buf, len, d[i]);
	}
	fill(buf, BS, 2, 9);
	T_EQ_INT(cache_block_put(c, &id, 2, buf, BS), 0);
	T_EQ_INT(cache_flush(c), 0);
	T_EQ_INT(cache_blob_digests_set(c, &id, size, BS, d, 5), 0);
	T_EQ_INT(cache_blob_verify(c, &id, NULL, bad, 8, &nbad), -EBADMSG);
	T_EQ_INT(nbad, 1);
	T_EQ_U64(bad[0], 2);
	T_EQ_INT(cache_blocks_evict(c, &id, 2, 1), 0);
	T_EQ_INT(put_block(c, &id, 2, BS), 0);
	T_EQ_INT(cache_flush(c), 0);
	T_EQ_INT(cache_blob_verify(c, &id, NULL, bad, 8, &nbad), 0);

	/* A check made by the caller, recorded without a re-read. */
	T_EQ_INT(cache_blob_mark_verified(c, &id, NULL, false), 0);
	T_EQ_INT(cache_blob_get(c, &id, &g), 0);
	T_ASSERT(!g.verified && g.has_sha256);
	T_EQ_INT(cache_blob_mark_verified(c, &id, wrong, true), 0);
	T_EQ_INT(cache_blob_get(c, &id, &g), 0);
	T_ASSERT(g.verified);
	T_EQ_MEM(g.sha256, wrong, 32);
	T_EQ_STR(g.identity, "url:verify");
	T_EQ_INT(cache_blob_mark_verified(c, &none, want, true), -ENOENT);
	T_EQ_INT(cache_blob_mark_verified(c, &id, NULL, true), -EINVAL);
	cache_close(c);
	free(buf);
	tmp_remove();
}

/* Version 2 records round-trip every field; cache_blob_ids lists them. */
static void test_record_v2(void)
{
	struct cache *c = NULL;
	struct cache_id a, b;
	static struct cache_blob_record r, g;
	struct cache_id *ids = NULL;
	size_t n = 0;

	tmp_make();
	cache_id_from_string("url:v2-a", &a);
	cache_id_from_string("url:v2-b", &b);
	T_EQ_INT(open_at(tmpdir, &c), 0);
	r.size = 42;
	r.last_access = 1700000000;
	r.validated_at = 1700000123;
	r.has_sha256 = true;
	r.verified = true;
	for (int i = 0; i < 32; i++)
		r.sha256[i] = (uint8_t)i;
	snprintf(r.validator, sizeof(r.validator), "\"e\"");
	memset(r.identity, 'u', CACHE_IDENTITY_MAX - 1);
	T_EQ_INT(cache_blob_put(c, &a, &r), 0);
	T_EQ_INT(cache_blob_get(c, &a, &g), 0);
	T_EQ_U64(g.size, 42);
	T_EQ_U64(g.validated_at, 1700000123);
	T_ASSERT(g.has_sha256 && g.verified);
	T_EQ_MEM(g.sha256, r.sha256, 32);
	T_EQ_STR(g.validator, "\"e\"");
	T_EQ_INT(strlen(g.identity), CACHE_IDENTITY_MAX - 1);
	memset(r.identity, 'u', CACHE_IDENTITY_MAX);
	T_EQ_INT(cache_blob_put(c, &b, &r), -EINVAL);
	memset(&r, 0, sizeof(r));
	T_EQ_INT(cache_blob_put(c, &b, &r), 0);
	T_EQ_INT(cache_blob_get(c, &b, &g), 0);
	T_ASSERT(!g.has_sha256 && !g.verified && g.identity[0] == '\0');
	T_EQ_INT(cache_blob_ids(c, &ids, &n), 0);
	T_EQ_INT(n, 2);
	T_ASSERT((memcmp(ids[0].b, a.b, 16) == 0 &&
		  memcmp(ids[1].b, b.b, 16) == 0) ||
		 (memcmp(ids[0].b, b.b, 16) == 0 &&
		  memcmp(ids[1].b, a.b, 16) == 0));
	free(ids);
	char hex[33];
	cache_id_to_hex(&a, hex);
	T_EQ_INT(strlen(hex), 32);
	cache_close(c);
	tmp_remove();
}

/* Raw LMDB surgery on a closed cache: runs fn(env, txn, ctx). */
static int raw_edit(const char *dir, int (*fn)(MDB_txn *txn, void *ctx),
		    void *ctx)
{
	MDB_env *env = NULL;
	MDB_txn *txn = NULL;
	int rc;

	rc = mdb_env_create(&env);
	if (rc == 0)
		rc = mdb_env_set_maxdbs(env, 16);
	if (rc == 0)
		rc = mdb_env_set_mapsize(env, 64u << 20);
	if (rc == 0)
		rc = mdb_env_open(env, dir, 0, 0600);
	if (rc == 0)
		rc = mdb_txn_begin(env, NULL, 0, &txn);
	if (rc == 0)
		rc = fn(txn, ctx);
	if (rc == 0) {
		rc = mdb_txn_commit(txn);
		txn = NULL;
	}
	if (txn)
		mdb_txn_abort(txn);
	mdb_env_close(env);
	return rc;
}

/* A directory, data.mdb or lock.mdb another user owns or may write is
 * refused (-EPERM, one line naming it), unless the cache is shared on
 * purpose; a symlinked data.mdb is refused either way. */
static void test_dir_owner(void)
{
	struct cache_config cfg;
	struct cache *c = NULL;
	char path[192], other[192];

	tmp_make();
	cfg = cfg_for(tmpdir);
	T_EQ_INT(open_at(tmpdir, &c), 0);
	cache_close(c);
	c = NULL;
	T_EQ_INT(chmod(tmpdir, 0770), 0);
	T_EQ_INT(open_at(tmpdir, &c), -EPERM);
	T_ASSERT(strstr(logcap.last, "mode 0770") != NULL);
	cfg.shared = true;
	T_EQ_INT(cache_open(&cfg, &c), 0);
	cache_close(c);
	c = NULL;
	T_EQ_INT(chmod(tmpdir, 0700), 0);
	snprintf(path, sizeof(path), "%s/lock.mdb", tmpdir);
	T_EQ_INT(chmod(path, 0622), 0);
	T_EQ_INT(open_at(tmpdir, &c), -EPERM);
	T_ASSERT(strstr(logcap.last, path) != NULL);
	T_EQ_INT(chmod(path, 0600), 0);
	if (geteuid() == 0) {
		snprintf(path, sizeof(path), "%s/data.mdb", tmpdir);
		T_EQ_INT(chown(path, 65534, 65534), 0);
		T_EQ_INT(open_at(tmpdir, &c), -EPERM);
		T_ASSERT(strstr(logcap.last, "uid 65534") != NULL);
		T_EQ_INT(chown(path, 0, 0), 0);
	}
	/* A symlink: LMDB would open what it points to. */
	snprintf(path, sizeof(path), "%s/data.mdb", tmpdir);
	snprintf(other, sizeof(other), "%s/elsewhere", tmpdir);
	T_EQ_INT(rename(path, other), 0);
	T_EQ_INT(symlink(other, path), 0);
	T_EQ_INT(cache_open(&cfg, &c), -EPERM);
	T_ASSERT(strstr(logcap.last, "not a regular file") != NULL);
	T_EQ_INT(unlink(path), 0);
	T_EQ_INT(rename(other, path), 0);
	T_EQ_INT(open_at(tmpdir, &c), 0);
	cache_close(c);
	tmp_remove();
}

/* Formats 1 and 2 stored blocks without checksums: refused, untouched,
 * with one line that says what to do. */
static void test_old_format_refused(void)
{
	struct cache *c = NULL;
	struct cache_id a;

	tmp_make();
	cache_id_from_string("url:old", &a);
	T_EQ_INT(open_at(tmpdir, &c), 0);
	T_EQ_INT(put_block(c, &a, 0, BS), 0);
	cache_close(c);
	c = NULL;
	for (uint32_t f = 1; f <= 2; f++) {
		T_EQ_INT(raw_meta_put(tmpdir, "format", f), 0);
		T_EQ_INT(open_at(tmpdir, &c), -EPROTO);
		T_ASSERT(c == NULL);
		T_ASSERT(strstr(logcap.last, "no block checksums") != NULL);
		T_ASSERT(strstr(logcap.last, "remove") != NULL);
		T_ASSERT(strstr(logcap.last, tmpdir) != NULL);
	}
	tmp_remove();
}

/* Edits the stored value of one block: flips byte `at` of it, or swaps
 * it with block `other`'s. */
struct block_edit {
	struct cache_id id;
	uint64_t index, other;
	size_t at;
	bool swap;
};

static int edit_block(MDB_txn *txn, void *ctx)
{
	const struct block_edit *be = ctx;
	unsigned char key[24], key2[24];
	static unsigned char copy[BS + 512], copy2[BS + 512];
	MDB_val k = {.mv_size = 24, .mv_data = key}, v;
	MDB_val k2 = {.mv_size = 24, .mv_data = key2}, v2;
	MDB_dbi dbi;
	int rc;

	memcpy(key, be->id.b, 16);
	memcpy(key2, be->id.b, 16);
	for (int i = 0; i < 8; i++) {
		key[16 + i] = (unsigned char)(be->index >> (56 - 8 * i));
		key2[16 + i] = (unsigned char)(be->other >> (56 - 8 * i));
	}
	rc = mdb_dbi_open(txn, "blocks", 0, &dbi);
	if (rc == 0)
		rc = mdb_get(txn, dbi, &k, &v);
	if (rc)
		return rc;
	memcpy(copy, v.mv_data, v.mv_size);
	v.mv_data = copy;
	if (!be->swap) {
		copy[be->at] ^= 0x01;
		return mdb_put(txn, dbi, &k, &v, 0);
	}
	rc = mdb_get(txn, dbi, &k2, &v2);
	if (rc)
		return rc;
	memcpy(copy2, v2.mv_data, v2.mv_size);
	v2.mv_data = copy2;
	rc = mdb_put(txn, dbi, &k, &v2, 0);
	if (rc == 0)
		rc = mdb_put(txn, dbi, &k2, &v, 0);
	return rc;
}

/* A block whose bytes changed on disk is never served: the read drops it
 * (once, logged with the blob and block) and says it is not held. */
static void test_sum_bad_block(void)
{
	struct cache *c = NULL;
	struct block_edit be = {.index = 2, .at = 1000};
	static unsigned char got[BS], want[BS];
	uint64_t held_bytes = 0;
	int n;

	tmp_make();
	cache_id_from_string("url:sum", &be.id);
	T_EQ_INT(open_at(tmpdir, &c), 0);
	for (uint64_t i = 0; i < 6; i++)
		T_EQ_INT(put_block(c, &be.id, i, i == 5 ? 100 : BS), 0);
	cache_close(c);
	c = NULL;
	T_EQ_INT(raw_edit(tmpdir, edit_block, &be), 0);
	be.index = 5; /* the short last block's checksum */
	be.at = 100 + 3;
	T_EQ_INT(raw_edit(tmpdir, edit_block, &be), 0);
	T_EQ_INT(open_at(tmpdir, &c), 0);
	fill(want, BS, 1, 0);
	T_EQ_INT(cache_block_read(c, &be.id, 1, 0, got, BS), BS);
	T_ASSERT(memcmp(got, want, BS) == 0);
	n = logcap.n;
	/* Checksums are per 4 KiB chunk: a read of another chunk of the
	 * block is checked and served... */
	fill(want, BS, 2, 0);
	T_EQ_INT(cache_block_read(c, &be.id, 2, 60000, got, 10), 10);
	T_ASSERT(memcmp(got, want + 60000, 10) == 0);
	T_EQ_INT(cache_block_read(c, &be.id, 2, 8192, got, 4096), 4096);
	T_ASSERT(memcmp(got, want + 8192, 4096) == 0);
	T_EQ_INT(logcap.n, n);
	/* ...one that touches the flipped chunk drops the whole block. */
	T_EQ_INT(cache_block_read(c, &be.id, 2, 900, got, 200), -ENOENT);
	T_ASSERT(strstr(logcap.last, "checksum mismatch") != NULL);
	T_ASSERT(strstr(logcap.last, "block 2") != NULL);
	T_EQ_INT(logcap.n, n + 1);
	T_EQ_INT(cache_block_read(c, &be.id, 2, 0, got, BS), -ENOENT);
	T_EQ_INT(logcap.n, n + 1); /* dropped once, logged once */
	T_EQ_INT(cache_block_read(c, &be.id, 5, 0, got, BS), -ENOENT);
	T_EQ_INT(cache_blob_held(c, &be.id, &held_bytes), 0);
	T_EQ_U64(held_bytes, 4ull * BS);
	/* Put again, it is served. */
	T_EQ_INT(put_block(c, &be.id, 2, BS), 0);
	T_EQ_INT(cache_flush(c), 0);
	fill(want, BS, 2, 0);
	T_EQ_INT(cache_block_read(c, &be.id, 2, 0, got, BS), BS);
	T_ASSERT(memcmp(got, want, BS) == 0);
	cache_close(c);
	c = NULL;

	/* Two blocks' values swapped: each sound, under the other's key. */
	be.index = 0;
	be.other = 1;
	be.swap = true;
	T_EQ_INT(raw_edit(tmpdir, edit_block, &be), 0);
	T_EQ_INT(open_at(tmpdir, &c), 0);
	T_EQ_INT(cache_block_read(c, &be.id, 0, 0, got, BS), -ENOENT);
	T_EQ_INT(cache_block_read(c, &be.id, 1, 0, got, BS), -ENOENT);
	cache_close(c);
	tmp_remove();
}

/* cache_blob_sums_check finds every bad block, drops it, lists it. */
static void test_sums_check(void)
{
	struct cache *c = NULL;
	struct block_edit be = {.at = 7};
	uint64_t nblocks = 0, bad[4] = {0};
	size_t nbad = 9;

	tmp_make();
	cache_id_from_string("url:sums", &be.id);
	T_EQ_INT(open_at(tmpdir, &c), 0);
	for (uint64_t i = 0; i < 8; i++)
		T_EQ_INT(put_block(c, &be.id, i, BS), 0);
	cache_close(c);
	c = NULL;
	be.index = 3;
	T_EQ_INT(raw_edit(tmpdir, edit_block, &be), 0);
	be.index = 6;
	be.at = BS + 2; /* the checksum itself */
	T_EQ_INT(raw_edit(tmpdir, edit_block, &be), 0);
	T_EQ_INT(open_at(tmpdir, &c), 0);
	T_EQ_INT(cache_blob_sums_check(c, &be.id, &nblocks, bad, 4, &nbad), 0);
	T_EQ_U64(nblocks, 8);
	T_EQ_INT((int)nbad, 2);
	T_EQ_U64(bad[0], 3);
	T_EQ_U64(bad[1], 6);
	T_ASSERT(!held(c, &be.id, 3));
	T_ASSERT(held(c, &be.id, 4));
	T_EQ_INT(cache_blob_sums_check(c, &be.id, &nblocks, bad, 4, &nbad), 0);
	T_EQ_U64(nblocks, 6);
	T_EQ_INT((int)nbad, 0);
	cache_close(c);
	tmp_remove();
}

/* cache_block_put_buf queues the caller's buffer itself: the caller's
 * reference stays good, the bytes are readable at once and after the
 * commit, and the last reference frees it (the sanitizer build checks). */
static void test_put_buf(void)
{
	struct cache *c = NULL;
	struct cache_id id;
	static unsigned char want[BS], got[BS];
	struct cache_buf *b = cache_buf_new();

	T_ASSERT(b != NULL);
	T_ASSERT(!cache_buf_shared(b));
	tmp_make();
	cache_id_from_string("url:putbuf", &id);
	T_EQ_INT(open_at(tmpdir, &c), 0);
	fill(want, BS, 4, 3);
	memcpy(cache_buf_data(b), want, BS);
	T_EQ_INT(cache_block_put_buf(c, &id, 4, b, BS), 0);
	T_EQ_INT(cache_block_read(c, &id, 4, 0, got, BS), BS);
	T_EQ_MEM(got, want, BS);
	T_EQ_INT(cache_block_put_buf(c, &id, 5, b, 100), 0);
	T_EQ_INT(cache_block_put_buf(c, &id, 6, b, 0), -EINVAL);
	T_EQ_INT(cache_block_put_buf(c, &id, 6, NULL, BS), -EINVAL);
	T_EQ_INT(cache_flush(c), 0);
	/* Committed: the queue let go of it. */
	T_ASSERT(!cache_buf_shared(b));
	T_EQ_INT(cache_block_read(c, &id, 4, 0, got, BS), BS);
	T_EQ_MEM(got, want, BS);
	T_EQ_INT(cache_block_read(c, &id, 5, 0, got, BS), 100);
	T_EQ_MEM(got, want, 100);
	cache_buf_unref(b);
	cache_buf_unref(NULL);
	cache_close(c);
	tmp_remove();
}

/* What a serve callback saw: each piece's bytes, read from where the
 * cache said they are; and, for the eviction case, what it did meanwhile. */
struct serve_seen {
	struct cache *c;
	const struct cache_id *id;
	unsigned char bytes[4 * BS];
	size_t len;
	int nfd, nmem, calls;
	bool evict; /* evict and rewrite block 1 before reading */
	int evict_rc, put_rc, flush_rc;
};

static int serve_fn(void *ctx, struct cache_piece *p, size_t n)
{
	struct serve_seen *s = ctx;
	static unsigned char other[BS];

	s->calls++;
	if (s->evict) {
		/* Dropped and stored again with other bytes, committed, while
		 * this reply holds the old ones. */
		for (int k = 0; k < 3; k++) {
			/* Three times: LMDB would reuse freed pages from the
			 * second commit after the one that freed them. */
			s->evict_rc |= cache_blocks_evict(s->c, s->id, 1, 1);
			fill(other, BS, 1, 99);
			s->put_rc |= cache_block_put(s->c, s->id, 1, other, BS);
			s->flush_rc |= cache_flush(s->c);
		}
	}
	s->len = 0;
	for (size_t i = 0; i < n; i++) {
		if (p[i].mem) {
			memcpy(s->bytes + s->len, p[i].mem, p[i].len);
			s->nmem++;
		} else {
			if (pread(p[i].fd, s->bytes + s->len, p[i].len,
				  (off_t)p[i].pos) != (ssize_t)p[i].len)
				return 77;
			s->nfd++;
		}
		s->len += p[i].len;
	}
	return 5;
}

/* Pieces of blocks 0..3 of blob "url:serve", [start, start + len). */
static size_t serve_pieces(struct cache_piece *p, unsigned char *buf,
			   uint64_t start, size_t len)
{
	size_t n = 0;

	for (uint64_t pos = start; pos < start + len; n++) {
		uint64_t index = pos / BS, stop = (index + 1) * BS;

		if (stop > start + len)
			stop = start + len;
		p[n] = (struct cache_piece){.index = index,
					    .off = pos % BS,
					    .len = stop - pos,
					    .buf = buf + (pos - start),
					    .fd = -1};
		pos = stop;
	}
	return n;
}

/* cache_blocks_serve: committed blocks stay in the data file (their
 * checksums checked), queued ones and those the caller holds come from
 * memory; a missing or damaged block ends it before the callback; bytes
 * handed to the callback do not change under it, also when their block is
 * evicted and stored again meanwhile. */
static void test_serve(void)
{
	struct cache *c = NULL;
	struct block_edit be = {.index = 2, .at = 5000};
	static unsigned char want[4 * BS], buf[4 * BS], mine[BS];
	struct serve_seen s;
	struct cache_piece p[8];
	uint64_t missing = 0;
	size_t n;

	tmp_make();
	cache_id_from_string("url:serve", &be.id);
	T_EQ_INT(open_at(tmpdir, &c), 0);
	for (uint64_t i = 0; i < 4; i++) {
		fill(want + i * BS, i == 3 ? 3000 : BS, i, 0);
		T_EQ_INT(put_block(c, &be.id, i, i == 3 ? 3000 : BS), 0);
	}
	T_EQ_INT(cache_flush(c), 0);
	/* Block 1 queued again (same bytes), block 0 the caller's own. */
	T_EQ_INT(put_block(c, &be.id, 1, BS), 0);
	memcpy(mine, want, BS);

	/* With fds: 100 bytes into block 0 up to 1000 into the short last. */
	memset(&s, 0, sizeof(s));
	n = serve_pieces(p, buf, 100, 3 * BS - 100 + 1000);
	T_EQ_INT((int)n, 4);
	p[0].mem = mine + 100;
	T_EQ_INT(cache_blocks_serve(c, &be.id, p, n, true, serve_fn, &s,
				    &missing),
		 5);
	T_EQ_INT(s.calls, 1);
	T_EQ_U64(s.len, 3 * BS - 100 + 1000);
	T_EQ_MEM(s.bytes, want + 100, s.len);
	T_ASSERT(p[0].mem == mine + 100);
	T_ASSERT(s.nfd >= 2); /* blocks 2 and 3 at least; 1 may be queued */
	T_ASSERT(p[2].mem == NULL && p[2].fd >= 0);
	/* Without: every piece copied into its buf. */
	T_EQ_INT(cache_flush(c), 0);
	memset(&s, 0, sizeof(s));
	memset(buf, 0, sizeof(buf));
	n = serve_pieces(p, buf, 0, 3 * BS + 3000);
	T_EQ_INT(cache_blocks_serve(c, &be.id, p, n, false, serve_fn, &s,
				    &missing),
		 5);
	T_EQ_INT(s.nfd, 0);
	T_EQ_MEM(buf, want, 3 * BS + 3000);
	T_EQ_MEM(s.bytes, want, 3 * BS + 3000);

	/* Evicted and stored again while the callback runs: the bytes it
	 * was given are the old ones. */
	memset(&s, 0, sizeof(s));
	s.c = c;
	s.id = &be.id;
	s.evict = true;
	n = serve_pieces(p, buf, 0, 2 * BS);
	T_EQ_INT(cache_blocks_serve(c, &be.id, p, n, true, serve_fn, &s,
				    &missing),
		 5);
	T_EQ_INT(s.evict_rc, 0);
	T_EQ_INT(s.put_rc, 0);
	T_EQ_INT(s.flush_rc, 0);
	T_ASSERT(p[1].mem == NULL);
	T_EQ_MEM(s.bytes, want, 2 * BS);
	/* The block read now is the new one. */
	fill(want + BS, BS, 1, 99);
	T_EQ_INT(cache_block_read(c, &be.id, 1, 0, buf, BS), BS);
	T_EQ_MEM(buf, want + BS, BS);

	/* A block not held: -ENOENT and which, before the callback. */
	memset(&s, 0, sizeof(s));
	n = serve_pieces(p, buf, 3 * BS, 2000);
	p[0].index = 7;
	T_EQ_INT(cache_blocks_serve(c, &be.id, p, n, true, serve_fn, &s,
				    &missing),
		 -ENOENT);
	T_EQ_U64(missing, 7);
	T_EQ_INT(s.calls, 0);
	/* Asking past a block's end is refused. */
	n = serve_pieces(p, buf, 3 * BS, 4000);
	T_EQ_INT(cache_blocks_serve(c, &be.id, p, n, true, serve_fn, &s,
				    &missing),
		 -EIO);
	T_EQ_U64(missing, 3);
	T_EQ_INT(s.calls, 0);
	cache_close(c);
	c = NULL;

	/* A damaged chunk: never handed out, the block dropped. */
	T_EQ_INT(raw_edit(tmpdir, edit_block, &be), 0);
	T_EQ_INT(open_at(tmpdir, &c), 0);
	memset(&s, 0, sizeof(s));
	n = serve_pieces(p, buf, 2 * BS, 8192);
	T_EQ_INT(cache_blocks_serve(c, &be.id, p, n, true, serve_fn, &s,
				    &missing),
		 -ENOENT);
	T_EQ_U64(missing, 2);
	T_EQ_INT(s.calls, 0);
	T_ASSERT(strstr(logcap.last, "checksum mismatch") != NULL);
	T_ASSERT(!held(c, &be.id, 2));
	T_EQ_INT(cache_blocks_serve(c, &be.id, p, 0, true, serve_fn, &s,
				    &missing),
		 5);
	cache_close(c);
	tmp_remove();
}

static char data_path[160];

static void data_path_set(void)
{
	snprintf(data_path, sizeof(data_path), "%s/data.mdb", tmpdir);
}

/* A cache in tmpdir with blocks 0 to n - 1 of the blob `name` (bytes by
 * fill, seed 0), closed. */
static void closed_with_blocks(const char *name, struct cache_id *id,
			       uint64_t n)
{
	struct cache *c = NULL;

	cache_id_from_string(name, id);
	T_EQ_INT(open_at(tmpdir, &c), 0);
	for (uint64_t i = 0; c && i < n; i++)
		T_EQ_INT(put_block(c, id, i, BS), 0);
	if (c)
		cache_close(c);
}

/* Blocks 0 to n - 1 read back with the bytes closed_with_blocks put. */
static void blocks_read_back(struct cache *c, const struct cache_id *id,
			     uint64_t n)
{
	unsigned char *want = malloc(BS), *got = malloc(BS);

	for (uint64_t i = 0; i < n; i++) {
		fill(want, BS, i, 0);
		T_EQ_INT(cache_block_read(c, id, i, 0, got, BS), BS);
		T_EQ_MEM(got, want, BS);
	}
	free(want);
	free(got);
}

/* A data.mdb cut short (at a page boundary, at half) is refused at open
 * with one line, before anything reads the missing pages. */
static void test_truncated(void)
{
	struct cache *c = NULL;
	struct cache_id id;
	struct stat st;
	off_t cuts[2];

	tmp_make();
	data_path_set();
	closed_with_blocks("url:trunc", &id, 32);
	T_EQ_INT(stat(data_path, &st), 0);
	cuts[0] = st.st_size - 4096;
	cuts[1] = st.st_size / 2 + 123;
	for (int i = 0; i < 2; i++) {
		T_EQ_INT(truncate(data_path, cuts[i]), 0);
		T_EQ_INT(open_at(tmpdir, &c), -EPROTO);
		T_ASSERT(c == NULL);
		T_ASSERT(strstr(logcap.last, "truncated") != NULL);
		T_ASSERT(strstr(logcap.last, "data.mdb") != NULL);
	}
	tmp_remove();
}

static int raw_put(MDB_txn *txn, MDB_dbi dbi, const char *key, size_t len)
{
	static unsigned char v[1 << 20];
	MDB_val k = {.mv_size = strlen(key), .mv_data = (void *)key};
	MDB_val d = {.mv_size = len, .mv_data = v};

	return mdb_put(txn, dbi, &k, &d, 0);
}

static int raw_del(MDB_txn *txn, MDB_dbi dbi, const char *key)
{
	MDB_val k = {.mv_size = strlen(key), .mv_data = (void *)key};

	return mdb_del(txn, dbi, &k, NULL);
}

/* One step of raw_free_past_end, in its own transaction: 0 puts eight
 * overflow values, 1 deletes them (136 pages to the free list), 2 puts a
 * small value (a page from the free list), 3 does too and then puts and
 * deletes a value larger than any free run, on new pages at the end. */
struct free_step {
	int step;
};

static int free_step(MDB_txn *txn, void *ctx)
{
	const struct free_step *fs = ctx;
	MDB_dbi dbi;
	char key[8];
	int rc = mdb_dbi_open(txn, "scratch", MDB_CREATE, &dbi);

	for (int i = 0; rc == 0 && fs->step < 2 && i < 8; i++) {
		snprintf(key, sizeof(key), "v%d", i);
		rc = fs->step == 0 ? raw_put(txn, dbi, key, 65536)
				   : raw_del(txn, dbi, key);
	}
	if (rc == 0 && fs->step >= 2)
		rc = raw_put(txn, dbi, fs->step == 2 ? "s" : "t", 100);
	if (rc == 0 && fs->step == 3)
		rc = raw_put(txn, dbi, "big", 1 << 20);
	if (rc == 0 && fs->step == 3)
		rc = raw_del(txn, dbi, "big");
	return rc;
}

static int last_page(MDB_txn *txn, void *ctx)
{
	MDB_envinfo info;
	int rc = mdb_env_info(mdb_txn_env(txn), &info);

	*(uint64_t *)ctx = info.me_last_pgno;
	return rc;
}

/* Leaves dir's data.mdb shorter than the pages its meta page counts, the
 * way LMDB does without any damage: a transaction that holds free pages
 * from the free list (so that LMDB returns freed pages to it) puts a
 * value on new overflow pages at the end of the file and deletes it; the
 * pages go back to the free list unwritten, and the commit counts them.
 * Returns 0 when the file ends short, else -1. */
static int raw_free_past_end(const char *dir)
{
	struct stat st;
	uint64_t last = 0;
	int rc = 0;

	for (int step = 0; rc == 0 && step < 4; step++)
		rc = raw_edit(dir, free_step, &(struct free_step){step});
	if (rc == 0)
		rc = raw_edit(dir, last_page, &last);
	if (rc || stat(data_path, &st) != 0)
		return -1;
	return (uint64_t)st.st_size < (last + 1) * 4096 ? 0 : -1;
}

/* A data.mdb that ends before the last page its meta page counts, where
 * the missing pages are free (LMDB's own doing, no damage), opens, and
 * its blocks read back. */
static void test_free_past_end(void)
{
	struct cache *c = NULL;
	struct cache_id id;

	tmp_make();
	data_path_set();
	closed_with_blocks("url:tail", &id, 8);
	T_EQ_INT(raw_free_past_end(tmpdir), 0);
	T_EQ_INT(open_at(tmpdir, &c), 0);
	if (c) {
		blocks_read_back(c, &id, 8);
		/* Commits after it write the free pages they reuse. */
		for (uint64_t i = 8; i < 64; i++)
			T_EQ_INT(put_block(c, &id, i, BS), 0);
		cache_close(c);
		c = NULL;
	}
	T_EQ_INT(open_at(tmpdir, &c), 0);
	if (c) {
		blocks_read_back(c, &id, 64);
		cache_close(c);
	}
	tmp_remove();
}

/* A garbled overflow header (the page count LMDB trusts when it frees a
 * value's pages): the open does not read them, reads do not need them,
 * but nothing frees those pages (an eviction fails cleanly) and gc, whose
 * copy follows them, refuses the file. */
static void test_overflow_header(void)
{
	struct cache *c = NULL;
	struct cache_config cfg;
	struct cache_id id;
	static unsigned char got[BS];
	uint64_t before = 0, after = 0, p, nov = 0;
	FILE *f;

	tmp_make();
	data_path_set();
	cfg = cfg_for(tmpdir);
	cache_id_from_string("url:ovhdr", &id);
	T_EQ_INT(open_at(tmpdir, &c), 0);
	for (uint64_t i = 0; i < 8; i++)
		T_EQ_INT(put_block(c, &id, i, BS), 0);
	cache_close(c);
	c = NULL;
	f = fopen(data_path, "r+b");
	T_ASSERT(f != NULL);
	for (p = 2;; p++) {
		unsigned char hdr[16];
		uint64_t pgno;
		uint16_t flags;
		uint32_t pages = 1000000;

		if (fseek(f, (long)(p * 4096), SEEK_SET) != 0 ||
		    fread(hdr, 1, sizeof(hdr), f) != sizeof(hdr))
			break;
		memcpy(&pgno, hdr, 8);
		memcpy(&flags, hdr + 10, 2);
		if (pgno != p || flags != 4)
			continue;
		T_EQ_INT(fseek(f, (long)(p * 4096 + 12), SEEK_SET), 0);
		T_EQ_INT((int)fwrite(&pages, 4, 1, f), 1);
		nov++;
	}
	fclose(f);
	T_ASSERT(nov >= 8);
	T_EQ_INT(open_at(tmpdir, &c), 0);
	for (uint64_t i = 0; i < 8; i++)
		T_EQ_INT(cache_block_read(c, &id, i, 0, got, BS), BS);
	T_EQ_INT(cache_blocks_evict(c, &id, 0, 8), -EIO);
	T_ASSERT(strstr(logcap.last, "evict blocks") != NULL);
	T_EQ_INT(cache_blob_drop(c, &id), -EIO);
	cache_close(c);
	c = NULL;
	T_EQ_INT(cache_compact(&cfg, &before, &after), -EPROTO);
	T_ASSERT(strstr(logcap.last, "bad header") != NULL);
	tmp_remove();
}

/* Leaf nodes whose data size grew into their neighbours (one flipped bit
 * each): LMDB would move bytes outside the page when it deletes such a
 * node, so the open refuses the file, naming the page. Every such page
 * is damaged, since old copies of live pages stay in the file. */
static void test_node_overlap(void)
{
	struct cache *c = NULL;
	struct cache_id id;
	unsigned char pg[4096];
	uint64_t p;
	bool grown = false;
	FILE *f;

	tmp_make();
	data_path_set();
	cache_id_from_string("url:overlap", &id);
	T_EQ_INT(open_at(tmpdir, &c), 0);
	for (uint64_t i = 0; i < 8; i++)
		T_EQ_INT(put_block(c, &id, i, BS), 0);
	cache_close(c);
	c = NULL;
	f = fopen(data_path, "r+b");
	T_ASSERT(f != NULL);
	for (p = 2; fseek(f, (long)(p * 4096), SEEK_SET) == 0 &&
		    fread(pg, 1, sizeof(pg), f) == sizeof(pg);
	     p++) {
		uint64_t pgno;
		uint16_t flags, lower, at, nflags, dsize;

		memcpy(&pgno, pg, 8);
		memcpy(&flags, pg + 10, 2);
		memcpy(&lower, pg + 12, 2);
		if (pgno != p || flags != 2 || lower < 16 + 2 * 2)
			continue;
		/* The node lowest in the page: room below the page's end. */
		at = 4096;
		for (uint16_t i = 16; i < lower; i += 2) {
			uint16_t o;

			memcpy(&o, pg + i, 2);
			at = o < at ? o : at;
		}
		memcpy(&dsize, pg + at, 2);
		memcpy(&nflags, pg + at + 4, 2);
		if (nflags != 0 ||
		    dsize != 0) /* an empty value: any size fits */
			continue;
		dsize = 64;
		T_EQ_INT(fseek(f, (long)(p * 4096 + at), SEEK_SET), 0);
		T_EQ_INT((int)fwrite(&dsize, 2, 1, f), 1);
		grown = true;
	}
	fclose(f);
	T_ASSERT(grown);
	T_EQ_INT(open_at(tmpdir, &c), -EPROTO);
	T_ASSERT(strstr(logcap.last, "nodes overlap") != NULL);
	tmp_remove();
}

/* One damaged file, in a child: the open refuses it, or every read gives
 * the block's own bytes or a miss, and writes work or fail cleanly. */
static int damaged_child(uint64_t nblocks, const struct cache_id *id)
{
	struct cache *c = NULL;
	static unsigned char got[BS], want[BS];
	uint64_t bad[4], nb;
	size_t nbad;

	if (open_at(tmpdir, &c) != 0)
		return 0; /* refused */
	for (uint64_t i = 0; i < nblocks; i++) {
		long n = cache_block_read(c, id, i, 0, got, BS);

		fill(want, BS, i, 0);
		if (n >= 0 && (n != BS || memcmp(got, want, BS) != 0))
			return 3; /* wrong bytes served */
	}
	(void)cache_blob_sums_check(c, id, &nb, bad, 4, &nbad);
	(void)put_block(c, id, nblocks, BS);
	(void)cache_blocks_evict(c, id, 0, 2);
	(void)cache_flush(c);
	cache_close(c);
	return 0;
}

/* Damaged B-tree pages (a flipped bit, a garbled word or run of bytes)
 * never crash and never serve wrong bytes. Each case runs in a child so
 * that a fault shows as a signal. T_ROUNDS and T_SEED vary the run. */
static void test_damaged_btree(void)
{
	struct cache *c = NULL;
	struct cache_id id;
	struct stat st;
	unsigned char *orig, *dam;
	uint64_t pages[256], npages = 0;
	/* Enough blocks for branch pages in the blocks, access and lru
	 * databases; the file is rewritten each round. */
	const uint64_t nblocks = 150;
	int rounds = getenv("T_ROUNDS") ? atoi(getenv("T_ROUNDS")) : 200;
	size_t size;

	tmp_make();
	data_path_set();
	cache_id_from_string("url:btree", &id);
	T_EQ_INT(open_at(tmpdir, &c), 0);
	for (uint64_t i = 0; i < nblocks; i++)
		T_EQ_INT(put_block(c, &id, i, BS), 0);
	T_EQ_INT(cache_flush(c), 0);
	T_EQ_INT(cache_blocks_evict(c, &id, 10, 5), 0); /* a free list */
	cache_close(c);
	c = NULL;
	T_EQ_INT(stat(data_path, &st), 0);
	size = (size_t)st.st_size;
	orig = malloc(size);
	dam = malloc(size);
	T_ASSERT(orig && dam);
	FILE *f = fopen(data_path, "rb");
	T_ASSERT(f && fread(orig, 1, size, f) == size);
	fclose(f);
	/* Branch and leaf pages: their header names them (LMDB's layout). */
	for (uint64_t p = 2; p < size / 4096 && npages < 256; p++) {
		uint64_t pgno;
		uint16_t flags;

		memcpy(&pgno, orig + p * 4096, 8);
		memcpy(&flags, orig + p * 4096 + 10, 2);
		if (pgno == p && (flags == 1 || flags == 2))
			pages[npages++] = p;
	}
	T_ASSERT(npages >= 4);
	srand(getenv("T_SEED") ? (unsigned)atoi(getenv("T_SEED")) : 5u);
	for (int round = 0; round < rounds; round++) {
		uint64_t p = pages[(uint64_t)rand() % npages];
		size_t at = (size_t)rand() % 4096;
		pid_t pid;
		int status = 0;

		uint16_t lower, upper;

		memcpy(dam, orig, size);
		memcpy(&lower, orig + p * 4096 + 12, 2);
		memcpy(&upper, orig + p * 4096 + 14, 2);
		/* Within what the page uses: header, pointers, nodes. */
		if (at >= lower && at < upper && upper < 4096)
			at = upper + at % (4096u - upper);
		if (round % 4 == 0) /* a whole word garbled */
			for (size_t j = 0;
			     j < 8 && (at & ~(size_t)7) + j < 4096; j++)
				dam[p * 4096 + (at & ~(size_t)7) + j] =
					(unsigned char)rand();
		else if (round % 4 == 1) /* a run of garbage */
			for (size_t j = at; j < at + 64 && j < 4096; j++)
				dam[p * 4096 + j] = (unsigned char)rand();
		else
			dam[p * 4096 + at] ^=
				(unsigned char)(1u << (rand() % 8));
		f = fopen(data_path, "wb");
		T_ASSERT(f && fwrite(dam, 1, size, f) == size);
		fclose(f);
		pid = fork();
		if (pid == 0)
			_exit(damaged_child(nblocks, &id));
		T_ASSERT(pid > 0);
		T_EQ_INT(waitpid(pid, &status, 0), pid);
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
			fprintf(stderr, "  page %llu byte %zu: %s %d\n",
				(unsigned long long)p, at,
				WIFSIGNALED(status) ? "signal" : "exit",
				WIFSIGNALED(status) ? WTERMSIG(status)
						    : WEXITSTATUS(status));
			T_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
			break;
		}
	}
	free(orig);
	free(dam);
	tmp_remove();
}

/* Deletes block 1 of the blob behind the extents (a broken cache). */
static int del_block1(MDB_txn *txn, void *ctx)
{
	const struct cache_id *id = ctx;
	unsigned char key[24];
	MDB_val k = {.mv_size = 24, .mv_data = key};
	MDB_dbi dbi;
	int rc;

	memcpy(key, id->b, 16);
	memset(key + 16, 0, 8);
	key[23] = 1;
	rc = mdb_dbi_open(txn, "blocks", 0, &dbi);
	if (rc == 0)
		rc = mdb_del(txn, dbi, &k, NULL);
	return rc;
}

static void test_check(void)
{
	struct cache *c = NULL;
	struct cache_id id;
	uint64_t unc = 99;

	tmp_make();
	cache_id_from_string("url:check", &id);
	T_EQ_INT(open_at(tmpdir, &c), 0);
	for (uint64_t i = 0; i < 3; i++)
		T_EQ_INT(put_block(c, &id, i, BS), 0);
	T_EQ_INT(put_block(c, &id, 3, 10), 0);
	T_EQ_INT(cache_flush(c), 0);
	T_EQ_INT(cache_blob_check(c, &id, &unc), 0);
	T_EQ_U64(unc, 0);
	cache_close(c);
	c = NULL;
	T_EQ_INT(raw_edit(tmpdir, del_block1, &id), 0);
	T_EQ_INT(open_at(tmpdir, &c), 0);
	T_EQ_INT(cache_blob_check(c, &id, &unc), 0);
	T_EQ_U64(unc, 1);
	cache_close(c);
	tmp_remove();
}

/* Writes a 3-byte value as the extent of the blob that starts at 0. */
static int bad_extent(MDB_txn *txn, void *ctx)
{
	const struct cache_id *id = ctx;
	unsigned char key[24];
	MDB_val k = {.mv_size = 24, .mv_data = key};
	MDB_val v = {.mv_size = 3, .mv_data = "bad"};
	MDB_dbi dbi;
	int rc;

	memcpy(key, id->b, 16);
	memset(key + 16, 0, 8);
	rc = mdb_dbi_open(txn, "extents", 0, &dbi);
	if (rc == 0)
		rc = mdb_put(txn, dbi, &k, &v, 0);
	return rc;
}

/* A malformed extent is damage, the same to every walk of the blob's
 * extents: an error that names the blob and the extent, never an empty
 * range; other blobs are unaffected, and a drop clears it. */
static void test_extent_malformed(void)
{
	struct cache *c = NULL;
	struct cache_id id, other;
	struct ext_list l;
	char hex[2 * CACHE_ID_LEN + 1];
	uint64_t unc = 99, bytes = 99;

	tmp_make();
	cache_id_from_string("url:bad-extent", &id);
	cache_id_from_string("url:bad-extent-other", &other);
	cache_id_to_hex(&id, hex);
	T_EQ_INT(open_at(tmpdir, &c), 0);
	for (uint64_t i = 0; i < 3; i++) {
		T_EQ_INT(put_block(c, &id, i, BS), 0);
		T_EQ_INT(put_block(c, &other, i, BS), 0);
	}
	T_EQ_INT(cache_flush(c), 0);
	cache_close(c);
	c = NULL;
	T_EQ_INT(raw_edit(tmpdir, bad_extent, &id), 0);
	T_EQ_INT(open_at(tmpdir, &c), 0);

	T_EQ_INT(extents_of(c, &id, &l), -EIO);
	T_ASSERT(strstr(logcap.last, hex) != NULL);
	T_ASSERT(strstr(logcap.last, "extent at byte 0 is malformed") != NULL);
	logcap.last[0] = '\0';
	T_EQ_INT(cache_blob_check(c, &id, &unc), -EIO);
	T_EQ_U64(unc, 99);
	T_ASSERT(strstr(logcap.last, hex) != NULL);
	T_ASSERT(strstr(logcap.last, "extent at byte 0 is malformed") != NULL);
	T_EQ_INT(cache_blob_held(c, &id, &bytes), -EIO);

	T_EQ_INT(extents_of(c, &other, &l), 0);
	T_EQ_INT(l.n, 1);
	T_EQ_INT(cache_blob_check(c, &other, &unc), 0);
	T_EQ_U64(unc, 0);

	T_EQ_INT(cache_blob_drop(c, &id), 0);
	T_EQ_INT(extents_of(c, &id, &l), 0);
	T_EQ_INT(l.n, 0);
	T_EQ_INT(cache_blob_check(c, &id, &unc), 0);
	T_EQ_U64(unc, 0);
	cache_close(c);
	tmp_remove();
}

/* Byte j of the test blob of the digest cases: fill's bytes, so that
 * put_block puts them. */
static unsigned char *blob_bytes(uint64_t size)
{
	unsigned char *all = malloc(size);

	for (uint64_t i = 0; i * BS < size; i++)
		fill(all + i * BS, size - i * BS < BS ? size - i * BS : BS, i,
		     0);
	return all;
}

/* The digests of a blob of size bytes in blocks of dbs. */
static uint8_t (*digests_of(const unsigned char *all, uint64_t size,
			    uint32_t dbs))[32]
{
	uint64_t n = (size + dbs - 1) / dbs;
	uint8_t(*d)[32] = calloc(n, 32);

	for (uint64_t j = 0; j < n; j++)
		sha256_of(all + j * dbs,
			  size - j * dbs < dbs ? size - j * dbs : dbs, d[j]);
	return d;
}

/* Puts block i of the digest case: its true bytes, or with one flipped. */
static int dg_put(struct cache *c, const struct cache_id *id,
		  const unsigned char *all, uint64_t size, uint64_t i,
		  bool flip)
{
	static unsigned char buf[BS];
	size_t len = size - i * BS < BS ? size - i * BS : BS;

	memcpy(buf, all + i * BS, len);
	if (flip)
		buf[len - 1] ^= 0x40;
	return cache_block_put(c, id, i, buf, len);
}

/* Per-block digests of every size a manifest may give, smaller than,
 * equal to and larger than a cache block, each with a short last block:
 * a block that is not one of the blob's is refused; a bad block is
 * refused by the put that completes its digest block (its own, or with
 * large digest blocks the group's last to arrive, whose other blocks the
 * caller then evicts); the good bytes go in and verify. */
static void test_digests_sizes(void)
{
	static const struct {
		uint32_t dbs;
		uint64_t size;
		uint64_t victim; /* the block put with a flipped byte */
	} cases[] = {
		{4096, 3ull * BS + 5000, 1},   {4096, 3ull * BS + 5000, 3},
		{BS / 4, 3ull * BS + 1000, 3}, {BS, 4ull * BS + 777, 2},
		{BS, 4ull * BS + 777, 4},      {2 * BS, 5ull * BS, 3},
		{2 * BS, 4ull * BS + 100, 4},  {4 * BS, 6ull * BS + 3000, 2},
		{4 * BS, 6ull * BS + 3000, 6}, {4 * BS, 6ull * BS + 3000, 0},
	};
	struct cache *c = NULL;

	tmp_make();
	T_EQ_INT(open_at(tmpdir, &c), 0);
	for (size_t t = 0; t < sizeof(cases) / sizeof(cases[0]); t++) {
		const uint32_t dbs = cases[t].dbs;
		const uint64_t size = cases[t].size, v = cases[t].victim;
		const uint64_t nb = (size + BS - 1) / BS;
		const uint64_t k = dbs > BS ? dbs / BS : 1;
		const uint64_t gfirst = v / k * k;
		const uint64_t gn = nb - gfirst < k ? nb - gfirst : k;
		unsigned char *all = blob_bytes(size);
		uint8_t(*d)[32] = digests_of(all, size, dbs);
		static struct cache_blob_record r;
		struct cache_id id;
		char name[64];
		uint64_t bad[8];
		size_t nbad = 99;

		snprintf(name, sizeof(name), "url:dg-%zu", t);
		cache_id_from_string(name, &id);
		T_EQ_INT(cache_blob_digests_set(c, &id, size, dbs, d,
						(size + dbs - 1) / dbs),
			 0);
		memset(&r, 0, sizeof(r));
		r.size = size;
		T_EQ_INT(cache_blob_put(c, &id, &r), 0);

		/* Not a block of the blob: another length, past its end. */
		T_EQ_INT(put_block(c, &id, 0, BS - 1), -EBADMSG);
		T_EQ_INT(put_block(c, &id, nb, BS), -EBADMSG);
		if (size % BS)
			T_EQ_INT(put_block(c, &id, nb - 1, BS), -EBADMSG);
		T_ASSERT(!held(c, &id, 0) && !held(c, &id, nb - 1));

		/* Every block, last first, the victim bad, half committed. */
		for (uint64_t i = nb; i-- > 0;) {
			bool refused = k == 1 ? i == v : i == gfirst;

			T_EQ_INT(dg_put(c, &id, all, size, i, i == v),
				 refused ? -EBADMSG : 0);
			if (refused)
				T_ASSERT(strstr(logcap.last,
						"does not match") != NULL);
			if (i == nb / 2)
				T_EQ_INT(cache_flush(c), 0);
		}
		/* What the caller does: evict the rest of the digest block,
		 * put it again from a good source. */
		T_EQ_INT(cache_blocks_evict(c, &id, gfirst, gn), 0);
		for (uint64_t i = gfirst; i < gfirst + gn; i++)
			T_EQ_INT(dg_put(c, &id, all, size, i, false), 0);
		T_EQ_INT(cache_flush(c), 0);
		uint8_t whole[32];
		sha256_of(all, size, whole);
		T_EQ_INT(cache_blob_verify(c, &id, whole, bad, 8, &nbad), 0);
		T_EQ_INT(nbad, 0);

		/* Bad bytes stored while no digests were registered: the
		 * whole check names the cache blocks of their digest
		 * block. */
		T_EQ_INT(cache_blob_digests_set(c, &id, 0, 0, NULL, 0), 0);
		T_EQ_INT(dg_put(c, &id, all, size, v, true), 0);
		T_EQ_INT(cache_flush(c), 0);
		T_EQ_INT(cache_blob_digests_set(c, &id, size, dbs, d,
						(size + dbs - 1) / dbs),
			 0);
		T_EQ_INT(cache_blob_verify(c, &id, whole, bad, 8, &nbad),
			 -EBADMSG);
		T_EQ_INT(nbad, gn);
		for (size_t j = 0; j < nbad; j++)
			T_EQ_U64(bad[j], gfirst + j);
		free(d);
		free(all);
	}
	cache_close(c);
	tmp_remove();
}

struct dg_racer {
	struct cache *c;
	struct cache_id id;
	const unsigned char *all;
	uint64_t size, groups;
	int odd; /* puts blocks 2g + odd, the odd ones with a flipped byte */
	pthread_barrier_t *bar;
	uint64_t refused, errors;
};

static void *dg_race(void *arg)
{
	struct dg_racer *r = arg;

	for (uint64_t g = 0; g < r->groups; g++) {
		pthread_barrier_wait(r->bar);
		int rc = dg_put(r->c, &r->id, r->all, r->size,
				2 * g + (uint64_t)r->odd, r->odd);
		if (rc == -EBADMSG)
			r->refused++;
		else if (rc != 0)
			r->errors++;
	}
	return NULL;
}

/* Two threads put the two cache blocks of each digest block at the same
 * moment, one of them bad: whichever completes the digest block finds
 * it, every time (two puts never both find it incomplete). */
static void test_digests_race(void)
{
	struct cache *c = NULL;
	const uint64_t groups = 48, size = 2 * groups * BS;
	unsigned char *all = blob_bytes(size);
	uint8_t(*d)[32] = digests_of(all, size, 2 * BS);
	pthread_barrier_t bar;
	struct dg_racer r[2];
	pthread_t th[2];

	tmp_make();
	T_EQ_INT(open_at(tmpdir, &c), 0);
	pthread_barrier_init(&bar, NULL, 2);
	for (int i = 0; i < 2; i++) {
		memset(&r[i], 0, sizeof(r[i]));
		r[i].c = c;
		cache_id_from_string("url:dg-race", &r[i].id);
		r[i].all = all;
		r[i].size = size;
		r[i].groups = groups;
		r[i].odd = i;
		r[i].bar = &bar;
	}
	T_EQ_INT(cache_blob_digests_set(c, &r[0].id, size, 2 * BS, d, groups),
		 0);
	for (int i = 0; i < 2; i++)
		T_EQ_INT(pthread_create(&th[i], NULL, dg_race, &r[i]), 0);
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	T_EQ_U64(r[0].errors + r[1].errors, 0);
	T_EQ_U64(r[0].refused + r[1].refused, groups);
	T_EQ_INT(cache_flush(c), 0);
	pthread_barrier_destroy(&bar);
	cache_close(c);
	free(d);
	free(all);
	tmp_remove();
}

static void test_compact(void)
{
	struct cache_config cfg;
	struct cache *c = NULL;
	struct cache_id a, b;
	uint64_t before = 0, after = 0;
	int status = 0;

	tmp_make();
	cfg = cfg_for(tmpdir);
	cache_id_from_string("url:compact-a", &a);
	cache_id_from_string("url:compact-b", &b);
	T_EQ_INT(open_at(tmpdir, &c), 0);
	for (uint64_t i = 0; i < 40; i++)
		T_EQ_INT(put_block(c, &a, i, BS), 0);
	for (uint64_t i = 0; i < 4; i++)
		T_EQ_INT(put_block(c, &b, i, BS), 0);
	T_EQ_INT(cache_flush(c), 0);
	T_EQ_INT(cache_blob_drop(c, &a), 0);
	cache_close(c);
	c = NULL;

	/* Another process holding it open: refused. */
	fflush(NULL);
	pid_t pid = fork();
	T_ASSERT(pid >= 0);
	if (pid == 0) {
		execl(self_path, self_path, "--child-hold", tmpdir,
		      (char *)NULL);
		_exit(127);
	}
	char flag[128];
	snprintf(flag, sizeof(flag), "%s/held", tmpdir);
	for (int i = 0; i < 200 && access(flag, F_OK) != 0; i++)
		usleep(20 * 1000);
	T_EQ_INT(cache_compact(&cfg, &before, &after), -EBUSY);
	T_ASSERT(strstr(logcap.last, "in use") != NULL);
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);

	T_EQ_INT(cache_compact(&cfg, &before, &after), 0);
	T_ASSERT(after < before);
	T_ASSERT(after < 20ull * BS);
	T_EQ_INT(open_at(tmpdir, &c), 0);
	void *ctx[2] = {c, &b};
	T_EQ_INT(cache_extents_each(c, &b, check_claimed, ctx), 0);
	T_ASSERT(held(c, &b, 3));
	T_EQ_INT(put_block(c, &a, 0, BS), 0);
	T_EQ_INT(cache_flush(c), 0);
	cache_close(c);
	tmp_remove();
}

/* The other process of test_compact: holds the cache open until killed. */
static int child_hold(const char *dir)
{
	struct cache *c = NULL;
	char flag[128];

	if (open_at(dir, &c) != 0)
		return 1;
	snprintf(flag, sizeof(flag), "%s/held", dir);
	FILE *f = fopen(flag, "w");
	if (f)
		fclose(f);
	for (;;)
		pause();
}

#include <openssl/evp.h>

static void sha256_of(const void *p, size_t n, uint8_t out[32])
{
	unsigned int len = 0;

	EVP_Digest(p, n, out, &len, EVP_sha256(), NULL);
}

/* The crash test's checker (tests/mount/crash.sh): every byte the cache
 * at DIR claims for IDENTITY equals FILE's, and every extent is stored;
 * prints the held byte count, then one "extent START END" line each.
 * Exit 0 when sound, 1 on a mismatch, 2 when it cannot check. */
static int check_against(const char *dir, const char *identity,
			 const char *file)
{
	struct cache *c = NULL;
	struct cache_id id;
	struct ext_list l;
	unsigned char *got = malloc(BS), *want = malloc(BS);
	uint64_t total = 0, unc = 0;
	int bad = 0;
	FILE *f = fopen(file, "rb");

	if (!got || !want || !f || open_at(dir, &c) != 0)
		return 2;
	cache_id_from_string(identity, &id);
	memset(&l, 0, sizeof(l));
	if (cache_extents_each(c, &id, collect, &l) != 0 || l.n > EXT_LIST_MAX)
		return 2;
	for (int x = 0; x < l.n; x++) {
		for (uint64_t pos = l.s[x]; pos < l.e[x];) {
			uint64_t i = pos / BS;
			size_t off = (size_t)(pos - i * BS);
			size_t n = BS - off;

			if (n > l.e[x] - pos)
				n = (size_t)(l.e[x] - pos);
			long r = cache_block_read(c, &id, i, off, got, n);
			if (fseeko(f, (off_t)pos, SEEK_SET) != 0 ||
			    fread(want, 1, n, f) != n || r != (long)n ||
			    memcmp(got, want, n) != 0) {
				fprintf(stderr, "mismatch at %llu (%ld)\n",
					(unsigned long long)pos, r);
				bad++;
				break;
			}
			pos += n;
			total += n;
		}
	}
	if (cache_blob_check(c, &id, &unc) != 0 || unc != 0)
		bad++;
	printf("%llu bytes in %d extents\n", (unsigned long long)total, l.n);
	for (int x = 0; x < l.n; x++)
		printf("extent %llu %llu\n", (unsigned long long)l.s[x],
		       (unsigned long long)l.e[x]);
	cache_close(c);
	fclose(f);
	free(got);
	free(want);
	return bad ? 1 : 0;
}

/* Remembered regions outlive the blob's blocks and record, are read
 * back as put under their validator, replaced whole, listed, dropped;
 * bad ones are refused; they survive a reopen. */
static void test_regions(void)
{
	struct cache *c = NULL;
	struct cache_id id, other, *ids = NULL;
	struct cache_blob_record rec = {.size = 100ull * BS};
	struct cache_regions rg = {.n = 3}, got, bad = {.n = 1};
	size_t n = 0;

	tmp_make();
	cache_id_from_string("url:regions", &id);
	cache_id_from_string("url:regions-other", &other);
	snprintf(rg.validator, sizeof(rg.validator), "\"etag-1\"");
	rg.r[0] = (struct cache_region){0, 4096};
	rg.r[1] = (struct cache_region){50 * BS, 52 * BS};
	rg.r[2] = (struct cache_region){100 * BS - 100, 100 * BS};
	T_EQ_INT(open_at(tmpdir, &c), 0);
	T_EQ_INT(cache_regions_get(c, &id, &got), -ENOENT);
	T_EQ_INT(cache_regions_drop(c, &id), -ENOENT);
	T_EQ_INT(cache_blob_put(c, &id, &rec), 0);
	T_EQ_INT(put_block(c, &id, 0, BS), 0);
	T_EQ_INT(cache_regions_put(c, &id, &rg), 0);
	/* Refused: an empty region, none at all, too many. */
	bad.r[0] = (struct cache_region){10, 10};
	T_EQ_INT(cache_regions_put(c, &other, &bad), -EINVAL);
	bad.n = 0;
	T_EQ_INT(cache_regions_put(c, &other, &bad), -EINVAL);
	bad.n = CACHE_REGIONS_MAX + 1;
	T_EQ_INT(cache_regions_put(c, &other, &bad), -EINVAL);
	/* The blob's bytes and record go; its regions stay. */
	T_EQ_INT(cache_flush(c), 0);
	T_EQ_INT(cache_blob_drop(c, &id), 0);
	T_EQ_INT(cache_regions_get(c, &id, &got), 0);
	T_EQ_STR(got.validator, "\"etag-1\"");
	T_EQ_U64(got.n, 3);
	for (size_t i = 0; i < 3; i++) {
		T_EQ_U64(got.r[i].start, rg.r[i].start);
		T_EQ_U64(got.r[i].end, rg.r[i].end);
	}
	T_EQ_INT(cache_regions_get(c, &other, &got), -ENOENT);
	cache_close(c);
	c = NULL;
	/* Across a reopen; a put replaces them whole. */
	T_EQ_INT(open_at(tmpdir, &c), 0);
	T_EQ_INT(cache_regions_get(c, &id, &got), 0);
	T_EQ_U64(got.n, 3);
	rg.n = 1;
	rg.validator[0] = '\0';
	T_EQ_INT(cache_regions_put(c, &id, &rg), 0);
	T_EQ_INT(cache_regions_put(c, &other, &rg), 0);
	T_EQ_INT(cache_regions_get(c, &id, &got), 0);
	T_EQ_U64(got.n, 1);
	T_EQ_STR(got.validator, "");
	T_EQ_INT(cache_regions_ids(c, &ids, &n), 0);
	T_EQ_U64(n, 2);
	free(ids);
	T_EQ_INT(cache_regions_drop(c, &id), 0);
	T_EQ_INT(cache_regions_get(c, &id, &got), -ENOENT);
	T_EQ_INT(cache_regions_get(c, &other, &got), 0);
	T_EQ_INT(cache_regions_ids(c, &ids, &n), 0);
	T_EQ_U64(n, 1);
	T_ASSERT(memcmp(ids[0].b, other.b, CACHE_ID_LEN) == 0);
	free(ids);
	cache_close(c);
	tmp_remove();
}

static const struct t_case cases[] = {
	{"id", test_id},
	{"open_reopen", test_open_reopen},
	{"record", test_record},
	{"blocks", test_blocks},
	{"short_last_block", test_short_last_block},
	{"extents_merge", test_extents_merge},
	{"extents_stop", test_extents_stop},
	{"drop", test_drop},
	{"format_refused", test_format_refused},
	{"bad_dir", test_bad_dir},
	{"backpressure", test_backpressure},
	{"map_full", test_map_full},
	{"concurrent", test_concurrent},
	{"two_processes", test_two_processes},
	{"kill9", test_kill9},
	{"budget_lru", test_budget_lru},
	{"budget_reads_persist", test_budget_reads_persist},
	{"pins", test_pins},
	{"budget_stream", test_budget_stream},
	{"blocks_evict", test_blocks_evict},
	{"map_pressure", test_map_pressure},
	{"digests_small", test_digests_small},
	{"digests_large", test_digests_large},
	{"verify", test_verify},
	{"record_v2", test_record_v2},
	{"dir_owner", test_dir_owner},
	{"old_format_refused", test_old_format_refused},
	{"sum_bad_block", test_sum_bad_block},
	{"sums_check", test_sums_check},
	{"truncated", test_truncated},
	{"free_past_end", test_free_past_end},
	{"damaged_btree", test_damaged_btree},
	{"node_overlap", test_node_overlap},
	{"overflow_header", test_overflow_header},
	{"check", test_check},
	{"extent_malformed", test_extent_malformed},
	{"digests_sizes", test_digests_sizes},
	{"digests_race", test_digests_race},
	{"compact", test_compact},
	{"kill9_budget", test_kill9_budget},
	{"put_buf", test_put_buf},
	{"serve", test_serve},
	{"regions", test_regions},
};

int main(int argc, char **argv)
{
	self_path = argv[0];
	if (argc == 3 && strcmp(argv[1], "--child-writer") == 0)
		return child_writer(argv[2]);
	if (argc == 3 && strcmp(argv[1], "--child-stream") == 0)
		return child_stream(argv[2]);
	if (argc == 3 && strcmp(argv[1], "--child-stream-budget") == 0)
		return child_stream_budget(argv[2]);
	if (argc == 3 && strcmp(argv[1], "--child-hold") == 0)
		return child_hold(argv[2]);
	/* test_cache --damage-extent DIR IDENTITY (tests/mount/corrupt.sh):
	 * the blob's extent at byte 0 gets a malformed value. */
	if (argc == 4 && strcmp(argv[1], "--damage-extent") == 0) {
		struct cache_id id;

		cache_id_from_string(argv[3], &id);
		return raw_edit(argv[2], bad_extent, &id) == 0 ? 0 : 1;
	}
	/* test_cache --check-against DIR IDENTITY FILE (tests/mount/crash.sh)
	 */
	if (argc == 5 && strcmp(argv[1], "--check-against") == 0)
		return check_against(argv[2], argv[3], argv[4]);
	return T_RUN(argc, argv, cases);
}

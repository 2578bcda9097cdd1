/* test_cache: unit tests of the LMDB cache: persistence, records, blocks
 * through the queue and LMDB, extent merging, drop, format refusal, bad
 * directories, back-pressure, ENOSPC, concurrent and cross-process use. */
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

struct ext_list {
	int n;
	uint64_t s[64], e[64];
};

static int collect(void *ctx, uint64_t start, uint64_t end)
{
	struct ext_list *l = ctx;

	if (l->n < 64) {
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
	unsigned char b[4] = {(unsigned char)(x >> 24), (unsigned char)(x >> 16),
			      (unsigned char)(x >> 8), (unsigned char)x};
	MDB_val k = {.mv_size = strlen(name), .mv_data = (void *)name};
	MDB_val v = {.mv_size = 4, .mv_data = b};
	int rc;

	rc = mdb_env_create(&env);
	if (rc == 0)
		rc = mdb_env_set_maxdbs(env, 4);
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
	T_ASSERT(strstr(logcap.last, "version 1") != NULL);
	T_ASSERT(strstr(logcap.last, tmpdir) != NULL);

	/* Back to a known format, but another block size: refused too. */
	T_EQ_INT(raw_meta_put(tmpdir, "format", 1), 0);
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
			long r = cache_block_read(k->c, &k->id, i, off, got,
						  BS);
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
};

int main(int argc, char **argv)
{
	self_path = argv[0];
	if (argc == 3 && strcmp(argv[1], "--child-writer") == 0)
		return child_writer(argv[2]);
	if (argc == 3 && strcmp(argv[1], "--child-stream") == 0)
		return child_stream(argv[2]);
	return T_RUN(argc, argv, cases);
}

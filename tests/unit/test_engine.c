/* test_engine: the engine without a mount: it drives pacing, fetch against
 * a pacefs-origin this test starts on loopback, and a real cache in a
 * temporary folder, through engine.h alone, and compares the bytes a read
 * gets with the file the origin serves. Linked with the engine's objects
 * and the three modules it joins, no driver, tree, auth or libfuse. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cache/cache.h"
#include "fetch/fetch.h"
#include "fs/engine/engine.h"
#include "tests/t.h"

/* Not a multiple of a block: the last block is short. */
#define BLOB_SIZE (3u * 1024u * 1024u + 4321u)

struct origin {
	pid_t pid;
	char url[128];
};

/* The bytes of the blob: a fixed xorshift sequence. */
static void fill(unsigned char *p, size_t n)
{
	uint64_t x = 0x9e3779b97f4a7c15ull;

	for (size_t i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		p[i] = (unsigned char)x;
	}
}

static int write_file(const char *path, const void *p, size_t n)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	ssize_t w;

	if (fd < 0)
		return -errno;
	w = write(fd, p, n);
	close(fd);
	return w == (ssize_t)n ? 0 : -EIO;
}

/* pacefs-origin beside this binary's folder ($BUILD/tests/..), or
 * $PACEFS_ORIGIN. */
static int origin_path(char *out, size_t cap)
{
	const char *env = getenv("PACEFS_ORIGIN");
	char self[PATH_MAX];
	ssize_t n;
	char *slash;

	if (env != NULL) {
		snprintf(out, cap, "%s", env);
		return 0;
	}
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n < 0)
		return -errno;
	self[n] = '\0';
	slash = strrchr(self, '/');
	if (slash == NULL)
		return -ENOENT;
	*slash = '\0';
	if (snprintf(out, cap, "%s/../pacefs-origin", self) >= (int)cap)
		return -ENAMETOOLONG;
	return access(out, X_OK) == 0 ? 0 : -ENOENT;
}

/* Starts pacefs-origin over root on a free loopback port; its URL for
 * name into o->url. */
static int origin_start(const char *root, const char *dir, const char *name,
			struct origin *o)
{
	char bin[PATH_MAX], port_file[160], buf[16] = "";
	struct timespec pause = {0, 20 * 1000000};
	int rc = origin_path(bin, sizeof(bin));

	if (rc != 0) {
		fprintf(stderr, "pacefs-origin not found (run make)\n");
		return rc;
	}
	snprintf(port_file, sizeof(port_file), "%s/origin.port", dir);
	o->pid = fork();
	if (o->pid < 0)
		return -errno;
	if (o->pid == 0) {
		int null = open("/dev/null", O_WRONLY);

		if (null >= 0)
			dup2(null, STDOUT_FILENO); /* its "listening on" line */
		execl(bin, bin, "--root", root, "--port-file", port_file,
		      "--quiet", (char *)NULL);
		_exit(127);
	}
	for (int i = 0; i < 250; i++) {
		FILE *f = fopen(port_file, "r");

		if (f != NULL) {
			if (fgets(buf, sizeof(buf), f) == NULL)
				buf[0] = '\0';
			fclose(f);
		}
		if (buf[0] >= '0' && buf[0] <= '9') {
			buf[strcspn(buf, "\r\n")] = '\0';
			snprintf(o->url, sizeof(o->url),
				 "http://127.0.0.1:%s/%s", buf, name);
			return 0;
		}
		if (waitpid(o->pid, NULL, WNOHANG) == o->pid)
			break;
		nanosleep(&pause, NULL);
	}
	fprintf(stderr, "pacefs-origin did not start\n");
	return -EIO;
}

static void origin_stop(struct origin *o)
{
	if (o->pid <= 0)
		return;
	kill(o->pid, SIGKILL);
	waitpid(o->pid, NULL, 0);
	o->pid = 0;
}

static void log_hook(void *ctx, enum fs_log_level level, const char *fmt,
		     va_list ap)
{
	(void)ctx;
	if (level > FS_LOG_WARN)
		return;
	fputs("test_engine: engine: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
}

/* What fetch's on_request hook heard: requests, 206s, body bytes. */
struct heard {
	uint64_t requests, partial, bytes, lanes;
};

static void on_request(void *ctx, const struct fetch_request_info *r)
{
	struct heard *h = ctx;

	h->requests++;
	h->partial += r->status == 206;
	h->bytes += r->bytes;
	h->lanes += r->lane;
}

/* The reply: the pieces, in order, copied into out. */
struct got {
	unsigned char *out;
	size_t n, cap;
	unsigned replies; /* a read is answered once, success or not */
};

static int take_reply(void *ctx, struct cache_piece *p, size_t n, int err)
{
	struct got *g = ctx;

	g->replies++;
	if (err != 0)
		return 0; /* engine_read returns it too */

	for (size_t i = 0; i < n; i++) {
		if (g->n + p[i].len > g->cap)
			return -EOVERFLOW;
		if (p[i].mem != NULL)
			memcpy(g->out + g->n, p[i].mem, p[i].len);
		else if (pread(p[i].fd, g->out + g->n, p[i].len,
			       (off_t)p[i].pos) != (ssize_t)p[i].len)
			return -EIO;
		g->n += p[i].len;
	}
	return 0;
}

static bool never_cancelled(void *arg)
{
	(void)arg;
	return false;
}

/* An engine over cache with the blob at url (index 0), ready and started:
 * what the driver's open does, without its probe's record. */
static int engine_up(struct cache *cache, const char *url, const char *etag,
		     struct heard *heard, struct engine **out)
{
	struct engine_config ec = {
		.max_blobs = 1,
		.max_sources = 1,
		.lanes = 2,
		.read_timeout_s = 20,
		.stall_timeout_s = 10,
		.retry_after_max_s = 60,
		.readahead_ms = 3000,
		.chunk = CACHE_BLOCK_SIZE,
		.kernel_ahead = 128 * 1024,
		.fetch = {.max_lanes = 2,
			  .connect_timeout_ms = 5000,
			  .chunk = CACHE_BLOCK_SIZE,
			  .on_request = on_request,
			  .request_ctx = heard},
		.log = log_hook,
	};
	struct engine_source src = {0};
	struct cache_id id;
	char ident[256];
	uint32_t b;
	int rc;

	snprintf(ident, sizeof(ident), "url:%s", url);
	cache_id_from_string(ident, &id);
	rc = engine_new(&ec, cache, out);
	if (rc != 0)
		return rc;
	src.url = strdup(url);
	src.validator = etag != NULL ? strdup(etag) : NULL;
	rc = engine_blob_add(*out, "f.bin", BLOB_SIZE, &id, &b);
	if (rc == 0 && b != 0)
		rc = -EINVAL;
	if (rc == 0)
		rc = engine_blob_ready(*out, b, &src, 1, 0);
	if (rc == 0)
		rc = engine_start(*out);
	free(src.url); /* NULL once moved in */
	free(src.validator);
	return rc;
}

/* Reads [off, off + len) of blob 0 through a new reader; the byte count
 * or a negative errno; the bytes into g. -EPROTO when the engine did not
 * answer the read exactly once. */
static long read_some(struct engine *e, uint64_t off, size_t len, struct got *g)
{
	struct engine_read_reply rr = {
		.reply = take_reply, .ctx = g, .cancelled = never_cancelled};
	char *buf = malloc(len);
	uint32_t reader;
	bool keep;
	long n;
	int rc;

	if (buf == NULL)
		return -ENOMEM;
	g->n = 0;
	g->replies = 0;
	rc = engine_open(e, 0, 2, &reader, &keep);
	if (rc != 0) {
		free(buf);
		return rc;
	}
	n = engine_read(e, 0, reader, off, len, buf, &rr);
	engine_close(e, 0, reader);
	free(buf);
	return g->replies == 1 ? n : -EPROTO;
}

/* What engine_cold_read sets up, and frees whatever its checks left. */
struct fixture {
	char dir[64];
	struct origin o;
	unsigned char *want;
	struct got g;
	struct cache *cache;
	struct engine *e;
	struct heard heard;
};

/* The checks; an assertion returns early and leaves the freeing to the
 * caller. */
static void cold_read_checks(struct fixture *f)
{
	char www[128], path[160], cdir[128];
	struct cache_config cc = {.sync = CACHE_SYNC_NONE};
	struct fetch_config fc = {.max_lanes = 1,
				  .connect_timeout_ms = 5000,
				  .on_request = on_request,
				  .request_ctx = &f->heard};
	struct engine_counters c;
	struct fetch_probe pr;
	enum fetch_probe_error kind;
	char err[512], etag[256] = "";
	const uint64_t off = 1000000, tail = BLOB_SIZE - 4321;
	const size_t len = 300000;

	T_ASSERT(f->want != NULL && f->g.out != NULL);
	T_ASSERT(mkdtemp(f->dir) != NULL);
	snprintf(www, sizeof(www), "%s/www", f->dir);
	snprintf(path, sizeof(path), "%s/f.bin", www);
	snprintf(cdir, sizeof(cdir), "%s/cache", f->dir);
	T_EQ_INT(mkdir(www, 0755), 0);
	fill(f->want, BLOB_SIZE);
	T_EQ_INT(write_file(path, f->want, BLOB_SIZE), 0);
	T_EQ_INT(fetch_global_init(), 0);
	T_EQ_INT(origin_start(www, f->dir, "f.bin", &f->o), 0);
	/* The validator, as the driver's probe finds it. */
	T_EQ_INT(fetch_probe(&fc, f->o.url, false, 0, &pr, &kind, err,
			     sizeof(err)),
		 0);
	T_EQ_U64(pr.size, BLOB_SIZE);
	if (pr.etag[0] != '\0' && !pr.etag_weak)
		snprintf(etag, sizeof(etag), "%s", pr.etag);
	fetch_probe_free(&pr);
	/* The probe: one request of one byte. */
	T_EQ_U64(f->heard.requests, 1);
	T_EQ_U64(f->heard.partial, 1);
	T_EQ_U64(f->heard.lanes, 0);

	cc.dir = cdir;
	T_EQ_INT(cache_open(&cc, &f->cache), 0);
	T_EQ_INT(engine_up(f->cache, f->o.url, etag[0] ? etag : NULL, &f->heard,
			   &f->e),
		 0);
	T_EQ_U64(engine_held(f->e, 0), 0);
	T_EQ_INT(read_some(f->e, off, len, &f->g), (long)len);
	T_EQ_U64(f->g.n, len);
	T_EQ_MEM(f->g.out, f->want + off, len);
	/* The last, short block; a read past the end gets what there is. */
	T_EQ_INT(read_some(f->e, tail, 65536, &f->g), 4321);
	T_EQ_MEM(f->g.out, f->want + tail, 4321);
	T_ASSERT(engine_held(f->e, 0) >= len + 4321);
	/* Counted: two reads that waited, every byte of them from the
	 * network; lanes' requests told to on_request, each a 206. */
	engine_counters(f->e, &c);
	T_EQ_U64(c.misses, 2);
	T_EQ_U64(c.hits, 0);
	T_EQ_U64(c.read_bytes[ENGINE_FROM_NETWORK], len + 4321);
	T_EQ_U64(c.read_bytes[ENGINE_FROM_MEMORY] +
			 c.read_bytes[ENGINE_FROM_CACHE],
		 0);
	T_EQ_U64(c.readers, 0);
	T_EQ_U64(c.lanes, 2);
	T_EQ_U64(c.faults[ENGINE_FAULT_TRANSIENT] + c.retries, 0);
	T_ASSERT(f->heard.lanes >= 2);
	T_EQ_U64(f->heard.partial, f->heard.requests);
	T_ASSERT(f->heard.bytes >= 1 + len + 4321);
	engine_free(f->e); /* flushes the cache */
	f->e = NULL;

	/* The origin gone, the held bytes come from the cache alone. */
	origin_stop(&f->o);
	T_EQ_INT(engine_up(f->cache, f->o.url, etag[0] ? etag : NULL, &f->heard,
			   &f->e),
		 0);
	T_ASSERT(engine_held(f->e, 0) >= len + 4321);
	T_EQ_INT(read_some(f->e, off, len, &f->g), (long)len);
	T_EQ_MEM(f->g.out, f->want + off, len);
	/* A hit, from the cache's file: this engine's memory is new. */
	engine_counters(f->e, &c);
	T_EQ_U64(c.hits, 1);
	T_EQ_U64(c.misses, 0);
	T_EQ_U64(c.read_bytes[ENGINE_FROM_CACHE], len);
}

/* A cold read fetches its bytes from the origin and gets them right; the
 * cache then holds them, so a second engine over it serves the same read
 * with the origin gone. */
static void engine_cold_read(void)
{
	struct fixture f = {.dir = "/tmp/pacefs-test-engine.XXXXXX",
			    .want = malloc(BLOB_SIZE),
			    .g = {.out = malloc(BLOB_SIZE), .cap = BLOB_SIZE}};
	char cmd[128];

	cold_read_checks(&f);
	engine_free(f.e);
	origin_stop(&f.o);
	cache_close(f.cache);
	if (strchr(f.dir, 'X') == NULL) {
		snprintf(cmd, sizeof(cmd), "rm -rf %s", f.dir);
		if (system(cmd) != 0)
			fprintf(stderr, "cannot remove %s\n", f.dir);
	}
	free(f.want);
	free(f.g.out);
}

/* Reads [a, a + len) and then [b, b + len) of blob 0 through one reader,
 * comparing them with want; 0 or a negative errno. */
static int read_two(struct engine *e, uint64_t a, uint64_t b, size_t len,
		    const unsigned char *want, struct got *g)
{
	struct engine_read_reply rr = {
		.reply = take_reply, .ctx = g, .cancelled = never_cancelled};
	char *buf = malloc(len);
	uint64_t at[2] = {a, b};
	uint32_t reader;
	bool keep;
	int rc;

	if (buf == NULL)
		return -ENOMEM;
	rc = engine_open(e, 0, 2, &reader, &keep);
	if (rc != 0) {
		free(buf);
		return rc;
	}
	for (int i = 0; rc == 0 && i < 2; i++) {
		g->n = 0;
		if (engine_read(e, 0, reader, at[i], len, buf, &rr) !=
			    (long)len ||
		    memcmp(g->out, want + at[i], len) != 0)
			rc = -EIO;
	}
	engine_close(e, 0, reader);
	free(buf);
	return rc;
}

/* The regions checks; an assertion returns early, the caller frees. */
static void regions_checks(struct fixture *f)
{
	char www[128], path[160], cdir[128], etag[256] = "\"e1\"";
	struct cache_config cc = {.sync = CACHE_SYNC_NONE};
	struct cache_regions rg;
	struct engine_counters c;
	struct cache_id id;
	char ident[256];
	uint32_t reader;
	bool keep;
	const uint64_t far = 2u * 1024u * 1024u + 100;

	T_ASSERT(f->want != NULL && f->g.out != NULL);
	T_ASSERT(mkdtemp(f->dir) != NULL);
	snprintf(www, sizeof(www), "%s/www", f->dir);
	snprintf(path, sizeof(path), "%s/f.bin", www);
	snprintf(cdir, sizeof(cdir), "%s/cache", f->dir);
	T_EQ_INT(mkdir(www, 0755), 0);
	fill(f->want, BLOB_SIZE);
	T_EQ_INT(write_file(path, f->want, BLOB_SIZE), 0);
	T_EQ_INT(fetch_global_init(), 0);
	T_EQ_INT(origin_start(www, f->dir, "f.bin", &f->o), 0);
	cc.dir = cdir;
	T_EQ_INT(cache_open(&cc, &f->cache), 0);
	snprintf(ident, sizeof(ident), "url:%s", f->o.url);
	cache_id_from_string(ident, &id);

	/* The first open reads two places: remembered at its close, under
	 * the blob's validator (none here). */
	T_EQ_INT(engine_up(f->cache, f->o.url, NULL, &f->heard, &f->e), 0);
	T_EQ_INT(read_two(f->e, 0, far, 4096, f->want, &f->g), 0);
	engine_free(f->e);
	f->e = NULL;
	T_EQ_INT(cache_regions_get(f->cache, &id, &rg), 0);
	T_EQ_STR(rg.validator, "");
	T_EQ_U64(rg.n, 2);
	T_ASSERT(rg.r[0].start == 0 && rg.r[0].end >= 4096);
	T_ASSERT(rg.r[1].start <= far && rg.r[1].end >= far + 4096);

	/* Evicted, then opened again: both regions arrive with no read. */
	T_EQ_INT(cache_blob_drop(f->cache, &id), 0);
	f->heard = (struct heard){0};
	T_EQ_INT(engine_up(f->cache, f->o.url, NULL, &f->heard, &f->e), 0);
	T_EQ_U64(engine_held(f->e, 0), 0);
	T_EQ_INT(engine_open(f->e, 0, 2, &reader, &keep), 0);
	/* A request is heard of when it ends, which may be after its
	 * bytes are held (slowly under valgrind): wait for both. */
	for (int i = 0; i < 500 && (engine_held(f->e, 0) < 2 * 4096 ||
				    f->heard.requests < 2);
	     i++)
		usleep(10000);
	T_ASSERT(engine_held(f->e, 0) >= 2 * 4096);
	T_ASSERT(f->heard.requests >= 2);
	engine_close(f->e, 0, reader);
	T_EQ_INT(read_two(f->e, 0, far, 4096, f->want, &f->g), 0);
	engine_counters(f->e, &c);
	T_EQ_U64(c.misses, 0);
	T_EQ_U64(c.hits, 2);
	engine_free(f->e);
	f->e = NULL;

	/* Another validator (the engine's word for the version; no request
	 * is made to compare it): dropped when the blob is readied, nothing
	 * asked at open. */
	f->heard = (struct heard){0};
	T_EQ_INT(cache_blob_drop(f->cache, &id), 0);
	T_EQ_INT(engine_up(f->cache, f->o.url, etag, &f->heard, &f->e), 0);
	T_EQ_INT(cache_regions_get(f->cache, &id, &rg), -ENOENT);
	T_EQ_INT(engine_open(f->e, 0, 2, &reader, &keep), 0);
	usleep(200000);
	T_EQ_U64(f->heard.requests, 0);
	engine_close(f->e, 0, reader);
}

/* The regions a file's first open read are remembered in the cache with
 * its validator and asked at a later open when evicted, before any read;
 * recorded under another validator they are dropped. */
static void engine_regions(void)
{
	struct fixture f = {.dir = "/tmp/pacefs-test-engine.XXXXXX",
			    .want = malloc(BLOB_SIZE),
			    .g = {.out = malloc(BLOB_SIZE), .cap = BLOB_SIZE}};
	char cmd[128];

	regions_checks(&f);
	engine_free(f.e);
	origin_stop(&f.o);
	cache_close(f.cache);
	if (strchr(f.dir, 'X') == NULL) {
		snprintf(cmd, sizeof(cmd), "rm -rf %s", f.dir);
		if (system(cmd) != 0)
			fprintf(stderr, "cannot remove %s\n", f.dir);
	}
	free(f.want);
	free(f.g.out);
}

static const struct t_case cases[] = {
	{"engine_cold_read", engine_cold_read},
	{"engine_regions", engine_regions},
};

int main(int argc, char **argv)
{
	return T_RUN(argc, argv, cases);
}

/* cachecmd: `pacefs cache ls|stat|verify|evict|gc|regions` to inspect and tend
 * a cache directory, and `pacefs prefetch` to pull files of a mount into it. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cache/cache.h"
#include "fetch/fetch.h"
#include "fs/base.h"
#include "fs/cli/cli.h"
#include "fs/cli/cli_int.h"
#include "fs/auth/auth.h"

#define PREFETCH_CHUNK (1024u * 1024u)
#define ID_SHOWN 12 /* hex digits of an id that ls shows */

static void cache_usage(FILE *f)
{
	fprintf(f,
		"usage: pacefs cache COMMAND [--cache-dir DIR] "
		"[--cache-shared] "
		"[ARGS]\n"
		"\n"
		"  ls               one line per blob: id, size, bytes held, "
		"last access,\n"
		"                   V when verified, identity (the URL)\n"
		"  stat             totals: blobs, blocks, bytes, budget, file "
		"and map size\n"
		"  verify [BLOB...] check every stored block against its "
		"checksum (a\n"
		"                   damaged one is dropped: a mount fetches "
		"it again), that\n"
		"                   every held extent is stored, and the "
		"SHA-256 of complete\n"
		"                   blobs that have one (exit 1 on any "
		"fault)\n"
		"  evict BLOB...|--all\n"
		"                   drop blobs (BLOB: a URL, an identity or "
		"an id prefix);\n"
		"                   their remembered regions stay\n"
		"  gc               compact the cache file (only when no "
		"mount uses it)\n"
		"  regions [clear BLOB...|--all]\n"
		"                   the byte ranges each file's first reader "
		"needed at open,\n"
		"                   asked together when it is opened with "
		"them evicted;\n"
		"                   clear forgets them\n"
		"\n"
		"DIR defaults to the mount's default: $XDG_CACHE_HOME/pacefs, "
		"else\n"
		"~/.cache/pacefs; /var/cache/pacefs for root. A cache "
		"directory "
		"not owned\n"
		"by you, or writable by group or others, is refused; "
		"--cache-shared accepts\n"
		"one that is shared on purpose (as -o cache_shared does for "
		"a mount).\n");
}

/* ctx: a bool set once something was said, so that a failed open is
 * one line, the cache's own. The cache keeps ctx for its life: it points
 * to a static. */
static bool cache_said;

static void log_stderr(void *ctx, enum cache_log_level level, const char *msg)
{
	if (level != CACHE_LOG_INFO) {
		fprintf(stderr, "pacefs: cache: %s\n", msg);
		if (ctx)
			*(bool *)ctx = true;
	}
}

/* True when dir holds a cache; else says so on stderr. The commands
 * never create one where the user mistyped a path. */
static bool cache_exists(const char *dir)
{
	char path[PATH_MAX];
	struct stat st;

	snprintf(path, sizeof(path), "%s/data.mdb", dir);
	if (stat(path, &st) == 0)
		return true;
	fprintf(stderr, "pacefs: cache: %s: no cache there (%s)\n", dir,
		strerror(errno));
	return false;
}

static int open_existing(const char *dir, bool shared, struct cache **out)
{
	struct cache_config cfg = {.dir = dir,
				   .log = log_stderr,
				   .log_ctx = &cache_said,
				   .shared = shared};
	int rc;

	if (!cache_exists(dir))
		return 1;
	cache_said = false;
	rc = cache_open(&cfg, out);
	if (rc != 0 && !cache_said)
		fprintf(stderr, "pacefs: cache: %s: cannot open: %s\n", dir,
			strerror(-rc));
	if (rc != 0)
		return 1;
	return 0;
}

/* One blob as the commands see it. */
struct blob_info {
	struct cache_id id;
	char hex[2 * CACHE_ID_LEN + 1];
	struct cache_blob_record rec;
	uint64_t held;
};

static int blob_info(struct cache *c, const struct cache_id *id,
		     struct blob_info *bi)
{
	int rc;

	bi->id = *id;
	cache_id_to_hex(id, bi->hex);
	rc = cache_blob_get(c, id, &bi->rec);
	if (rc == 0)
		rc = cache_blob_held(c, id, &bi->held);
	return rc;
}

/* The identity as shown (rewritten in place): the URL of a "url:" one,
 * whose digest of credentials becomes "(with userinfo)" (or "(signed)");
 * any userinfo a record of an older pacefs stored is removed, and its
 * signed values masked. */
static const char *shown_identity(struct blob_info *bi)
{
	char *id = bi->rec.identity, *nl = strchr(id, '\n');
	static const char with[] = " (with userinfo)";
	static const char signed_[] = " (signed)";

	if (id[0] == '\0')
		return "(identity not recorded)";
	if (nl != NULL) {
		bool creds = strncmp(nl + 1, AUTH_IDENTITY_USERINFO,
				     strlen(AUTH_IDENTITY_USERINFO)) == 0;
		bool sig = strncmp(nl + 1, AUTH_IDENTITY_SIGNED,
				   strlen(AUTH_IDENTITY_SIGNED)) == 0;

		*nl = '\0';
		/* The digest was longer than the words that replace it. */
		if (creds)
			memcpy(nl, with, sizeof(with));
		else if (sig)
			memcpy(nl, signed_, sizeof(signed_));
	}
	fetch_text_redact(id);
	if (strncmp(id, "url:", 4) == 0)
		return id + 4;
	return id;
}

static int cmd_ls(struct cache *c)
{
	struct cache_id *ids = NULL;
	struct blob_info *bi = malloc(sizeof(*bi));
	size_t n = 0;
	int rc, status = 0;

	rc = bi ? cache_blob_ids(c, &ids, &n) : -ENOMEM;
	if (rc != 0) {
		fprintf(stderr, "pacefs: cache: ls: %s\n", strerror(-rc));
		free(bi);
		return 1;
	}
	printf("%-*s %10s %10s %6s  %-16s %s  %s\n", ID_SHOWN, "ID", "SIZE",
	       "HELD", "HELD%", "LAST ACCESS", "V", "IDENTITY");
	for (size_t i = 0; i < n; i++) {
		char size[32], held[32], when[32] = "-";
		double pct;

		if (blob_info(c, &ids[i], bi) != 0) {
			status = 1;
			continue;
		}
		pct = bi->rec.size
			      ? 100.0 * (double)bi->held / (double)bi->rec.size
			      : 100.0;
		if (bi->rec.last_access) {
			time_t t = (time_t)bi->rec.last_access;
			struct tm tm;

			if (localtime_r(&t, &tm))
				strftime(when, sizeof(when), "%Y-%m-%d %H:%M",
					 &tm);
		}
		printf("%-*.*s %10s %10s %5.1f%%  %-16s %s  %s\n", ID_SHOWN,
		       ID_SHOWN, bi->hex,
		       cli__human_size(bi->rec.size, size, sizeof(size)),
		       cli__human_size(bi->held, held, sizeof(held)), pct, when,
		       bi->rec.verified ? "V" : "-", shown_identity(bi));
	}
	free(ids);
	free(bi);
	return status;
}

static int cmd_stat(struct cache *c, const char *dir)
{
	struct cache_stats s;
	char a[32], b[32], d[32], e[32];
	int rc = cache_stats_get(c, &s);

	if (rc != 0) {
		fprintf(stderr, "pacefs: cache: stat: %s\n", strerror(-rc));
		return 1;
	}
	printf("cache directory: %s\n", dir);
	printf("format version:  %" PRIu32 "\n", s.format);
	printf("block size:      %s\n",
	       cli__human_size(s.block_size, a, sizeof(a)));
	printf("blobs:           %" PRIu64 "\n", s.blobs);
	printf("blocks:          %" PRIu64 "\n", s.blocks);
	printf("bytes held:      %s (%" PRIu64 " bytes)\n",
	       cli__human_size(s.bytes, a, sizeof(a)), s.bytes);
	if (s.budget)
		printf("budget:          %s (%.1f%% used; blocks count "
		       "whole)\n",
		       cli__human_size(s.budget, b, sizeof(b)),
		       100.0 * (double)s.blocks * s.block_size /
			       (double)s.budget);
	else
		printf("budget:          none (-o cache_size sets one)\n");
	printf("file on disk:    %s\n",
	       cli__human_size(s.file_size, d, sizeof(d)));
	printf("map size:        %s (address space, not disk)\n",
	       cli__human_size(s.map_size, e, sizeof(e)));
	return 0;
}

static bool is_hex_prefix(const char *s)
{
	size_t n = strlen(s);

	if (n < 4 || n > 2 * CACHE_ID_LEN)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') ||
		      (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return true;
}

/* Resolves BLOB (a URL, an identity string, or an id prefix of at least 4
 * hex digits) to the id of a stored blob. Returns 0, or 1 with a message. */
int cli__cache_resolve(const struct cache_id *ids, size_t n, const char *arg,
		       struct cache_id *out)
{
	char hex[2 * CACHE_ID_LEN + 1];
	struct cache_id id;
	size_t found = 0;

	if (is_hex_prefix(arg)) {
		for (size_t i = 0; i < n; i++) {
			cache_id_to_hex(&ids[i], hex);
			if (strncmp(hex, arg, strlen(arg)) == 0) {
				*out = ids[i];
				found++;
			}
		}
		if (found == 1)
			return 0;
		if (found > 1) {
			fprintf(stderr,
				"pacefs: cache: %s: matches %zu blobs; give "
				"more digits\n",
				arg, found);
			return 1;
		}
	}
	/* A URL is stored under its identity (auth_url_identity); anything
	 * else as given. */
	if (strncmp(arg, "http://", 7) == 0 ||
	    strncmp(arg, "https://", 8) == 0) {
		char *s = auth_url_identity(arg);

		if (s == NULL)
			return 1;
		cache_id_from_string(s, &id);
		free(s);
	} else {
		cache_id_from_string(arg, &id);
	}
	for (size_t i = 0; i < n; i++) {
		if (memcmp(ids[i].b, id.b, CACHE_ID_LEN) == 0) {
			*out = id;
			return 0;
		}
	}
	{
		char *shown = fetch_url_redacted(arg);

		fprintf(stderr,
			"pacefs: cache: %s: no such blob in the cache\n",
			shown != NULL ? shown : "?");
		free(shown);
	}
	return 1;
}

/* Checks one blob of the cache and prints its line: its blocks'
 * checksums (the cache drops a block that fails), its structure, and its
 * SHA-256 when it is whole and has one (counted in *checked). Returns 0,
 * or 1 when it is damaged, broken, mismatched or could not be checked. */
static int verify_one(struct cache *c, const struct cache_id *id,
		      struct blob_info *bi, int *checked)
{
	uint64_t uncovered = 0, bad[16], nblocks = 0;
	size_t nbad = 0;
	char held[32], size[32];
	int rc;

	rc = blob_info(c, id, bi);
	if (rc != 0) {
		/* The cache said what it could not read, on stderr:
		 * a malformed extent is named there. */
		printf("%.*s: %s: %s\n", ID_SHOWN, bi->hex,
		       rc == -EIO ? "BROKEN: its record or extent map "
				    "is damaged"
				  : "not checked",
		       strerror(-rc));
		return 1;
	}
	/* Before the blob's line: the cache logs each block it drops. */
	fflush(stdout);
	rc = cache_blob_sums_check(c, id, &nblocks, bad, 16, &nbad);
	fflush(stderr);
	printf("%.*s %s: ", ID_SHOWN, bi->hex, shown_identity(bi));
	if (rc != 0) {
		printf("not checked: %s\n", strerror(-rc));
		return 1;
	}
	if (nbad != 0) {
		printf("DAMAGED: %zu of %" PRIu64
		       " blocks failed their checksum and were "
		       "dropped (a mount fetches them again): ",
		       nbad, nblocks);
		for (size_t j = 0; j < nbad && j < 16; j++)
			printf("%s%" PRIu64, j ? "," : "blocks ", bad[j]);
		printf("%s\n", nbad > 16 ? ",..." : "");
		return 1;
	}
	rc = cache_blob_check(c, id, &uncovered);
	if (rc != 0 || uncovered != 0) {
		printf("BROKEN: %" PRIu64
		       " held blocks are missing or short%s\n",
		       uncovered, rc ? " (check failed)" : "");
		return 1;
	}
	if (!bi->rec.has_sha256) {
		printf("%" PRIu64 " blocks and structure OK; no "
		       "SHA-256 to check against\n",
		       nblocks);
		return 0;
	}
	if (bi->held != bi->rec.size) {
		printf("%" PRIu64 " blocks and structure OK; "
		       "incomplete (%s of %s held), no SHA-256 "
		       "check\n",
		       nblocks, cli__human_size(bi->held, held, sizeof(held)),
		       cli__human_size(bi->rec.size, size, sizeof(size)));
		return 0;
	}
	rc = cache_blob_verify(c, id, NULL, bad, 16, &nbad);
	(*checked)++;
	if (rc == 0) {
		printf("OK\n");
		return 0;
	}
	if (rc == -EBADMSG) {
		printf("MISMATCH");
		for (size_t j = 0; j < nbad; j++)
			printf("%s%" PRIu64, j ? "," : " (bad blocks ", bad[j]);
		printf("%s\n", nbad ? ")" : "");
		return 1;
	}
	printf("not checked: %s\n", strerror(-rc));
	return 1;
}

static int cmd_verify(struct cache *c, char **args, int nargs)
{
	struct cache_id *ids = NULL, *todo = NULL;
	struct blob_info *bi = malloc(sizeof(*bi));
	size_t n = 0, ntodo = 0;
	int rc, status = 0, checked = 0;

	rc = bi ? cache_blob_ids(c, &ids, &n) : -ENOMEM;
	if (rc != 0) {
		fprintf(stderr, "pacefs: cache: verify: %s\n", strerror(-rc));
		free(bi);
		return 1;
	}
	if (nargs > 0) {
		todo = calloc((size_t)nargs, sizeof(*todo));
		for (int i = 0; todo && i < nargs; i++) {
			struct cache_id *t = &todo[ntodo];

			if (cli__cache_resolve(ids, n, args[i], t) != 0)
				status = 1;
			else
				ntodo++;
		}
	} else {
		todo = ids;
		ntodo = n;
	}
	for (size_t i = 0; todo && i < ntodo; i++)
		if (verify_one(c, &todo[i], bi, &checked) != 0)
			status = 1;
	if (todo != ids)
		free(todo);
	free(ids);
	free(bi);
	if (n == 0)
		printf("no blobs in the cache\n");
	return status;
}

static int cmd_evict(struct cache *c, char **args, int nargs)
{
	struct cache_id *ids = NULL;
	size_t n = 0;
	bool all = false;
	int rc, status = 0;

	for (int i = 0; i < nargs; i++)
		all |= strcmp(args[i], "--all") == 0;
	if (nargs == 0 || (all && nargs > 1)) {
		fprintf(stderr, "pacefs: cache: usage: pacefs cache evict "
				"BLOB...|--all\n");
		return 2;
	}
	rc = cache_blob_ids(c, &ids, &n);
	if (rc != 0) {
		fprintf(stderr, "pacefs: cache: evict: %s\n", strerror(-rc));
		return 1;
	}
	for (size_t i = 0; all && i < n; i++) {
		rc = cache_blob_drop(c, &ids[i]);
		status |= rc != 0;
	}
	if (all)
		printf("dropped %zu blobs\n", n);
	for (int i = 0; !all && i < nargs; i++) {
		struct cache_id id;
		char hex[2 * CACHE_ID_LEN + 1];

		if (cli__cache_resolve(ids, n, args[i], &id) != 0) {
			status = 1;
			continue;
		}
		rc = cache_blob_drop(c, &id);
		cache_id_to_hex(&id, hex);
		fetch_text_redact(args[i]); /* shown below */
		if (rc != 0) {
			fprintf(stderr, "pacefs: cache: evict %s: %s\n",
				args[i], strerror(-rc));
			status = 1;
		} else {
			printf("dropped %.*s (%s)\n", ID_SHOWN, hex, args[i]);
		}
	}
	free(ids);
	return status;
}

static int cmd_gc(const char *dir, bool shared)
{
	struct cache_config cfg = {.dir = dir,
				   .log = log_stderr,
				   .log_ctx = &cache_said,
				   .shared = shared};
	uint64_t before = 0, after = 0;
	char a[32], b[32];
	int rc;

	if (!cache_exists(dir))
		return 1;
	cache_said = false;
	rc = cache_compact(&cfg, &before, &after);
	if (rc == -EBUSY) {
		fprintf(stderr, "pacefs: cache: gc: refused: the cache is "
				"open in another process; unmount its "
				"mounts and try again\n");
		return 1;
	}
	if (rc != 0) {
		if (!cache_said)
			fprintf(stderr, "pacefs: cache: gc: %s\n",
				strerror(-rc));
		return 1;
	}
	printf("compacted %s/data.mdb: %s -> %s\n", dir,
	       cli__human_size(before, a, sizeof(a)),
	       cli__human_size(after, b, sizeof(b)));
	return 0;
}

int cli_cache_command(int argc, char **argv)
{
	char *dir = NULL, **args;
	const char *sub = NULL;
	struct cache *c = NULL;
	bool shared = false;
	int nargs = 0, status = 2;

	args = calloc((size_t)argc + 1, sizeof(*args));
	if (args == NULL)
		return 1;
	for (int i = 2; i < argc; i++) {
		if (strcmp(argv[i], "-h") == 0 ||
		    strcmp(argv[i], "--help") == 0) {
			cache_usage(stdout);
			status = 0;
			goto out;
		} else if (strcmp(argv[i], "--cache-dir") == 0 &&
			   i + 1 < argc) {
			free(dir);
			dir = strdup(argv[++i]);
		} else if (strncmp(argv[i], "--cache-dir=", 12) == 0) {
			free(dir);
			dir = strdup(argv[i] + 12);
		} else if (strcmp(argv[i], "--cache-shared") == 0) {
			shared = true;
		} else if (sub == NULL) {
			sub = argv[i];
		} else {
			args[nargs++] = argv[i];
		}
	}
	if (sub == NULL) {
		cache_usage(stderr);
		goto out;
	}
	if (dir == NULL) {
		char err[256];

		dir = cli_default_cache_dir(err, sizeof(err));
		if (dir == NULL) {
			fprintf(stderr,
				"pacefs: cache: %s (or --cache-dir "
				"DIR)\n",
				err);
			status = 1;
			goto out;
		}
	}
	if (strcmp(sub, "gc") == 0) {
		status = nargs ? 2 : cmd_gc(dir, shared);
		if (nargs)
			cache_usage(stderr);
		goto out;
	}
	if (strcmp(sub, "ls") != 0 && strcmp(sub, "stat") != 0 &&
	    strcmp(sub, "verify") != 0 && strcmp(sub, "evict") != 0 &&
	    strcmp(sub, "regions") != 0) {
		fprintf(stderr, "pacefs: cache: unknown command '%s'\n", sub);
		cache_usage(stderr);
		goto out;
	}
	if ((strcmp(sub, "ls") == 0 || strcmp(sub, "stat") == 0) && nargs) {
		fprintf(stderr, "pacefs: cache: %s: unexpected argument '%s'\n",
			sub, args[0]);
		goto out;
	}
	status = 1;
	if (open_existing(dir, shared, &c) != 0)
		goto out;
	if (strcmp(sub, "ls") == 0)
		status = cmd_ls(c);
	else if (strcmp(sub, "stat") == 0)
		status = cmd_stat(c, dir);
	else if (strcmp(sub, "verify") == 0)
		status = cmd_verify(c, args, nargs);
	else if (strcmp(sub, "regions") == 0)
		status = cli__cache_regions(c, args, nargs);
	else
		status = cmd_evict(c, args, nargs);
	cache_close(c);
out:
	free(args);
	free(dir);
	return status;
}

/* ---- prefetch ---- */

/* Seconds on the one monotonic clock (fs__now_ns), for the progress
 * line's rate. */
static double now_s(void)
{
	return (double)fs__now_ns() / 1e9;
}

static void progress(const char *path, uint64_t done, uint64_t size,
		     double secs)
{
	char a[32], b[32], r[32], eta[32] = "--:--";
	double rate = secs > 0 ? (double)done / secs : 0;
	int width = 30, fill;

	if (rate > 0 && size > done) {
		uint64_t left = (uint64_t)((double)(size - done) / rate);
		snprintf(eta, sizeof(eta), "%" PRIu64 ":%02" PRIu64, left / 60,
			 left % 60);
	} else if (size <= done) {
		snprintf(eta, sizeof(eta), "0:00");
	}
	fill = size ? (int)((double)width * (double)done / (double)size)
		    : width;
	fprintf(stderr, "\r%.40s [", path);
	for (int i = 0; i < width; i++)
		fputc(i < fill ? '#' : '.', stderr);
	fprintf(stderr, "] %s / %s  %s/s  ETA %s \033[K",
		cli__human_size(done, a, sizeof(a)),
		cli__human_size(size, b, sizeof(b)),
		cli__human_size((uint64_t)rate, r, sizeof(r)), eta);
	fflush(stderr);
}

static int prefetch_one(const char *path, char *buf, bool tty)
{
	struct stat st;
	uint64_t done = 0, size;
	double start = now_s(), last = 0;
	char a[32], r[32];
	int fd, status = 0;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) != 0) {
		fprintf(stderr, "pacefs: prefetch: %s: %s\n", path,
			strerror(errno));
		if (fd >= 0)
			close(fd);
		return 1;
	}
	if (!S_ISREG(st.st_mode)) {
		fprintf(stderr, "pacefs: prefetch: %s: not a regular file\n",
			path);
		close(fd);
		return 1;
	}
	size = (uint64_t)st.st_size;
	while (done < size) {
		ssize_t n = pread(fd, buf, PREFETCH_CHUNK, (off_t)done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			if (tty)
				fputc('\n', stderr);
			fprintf(stderr,
				"pacefs: prefetch: %s: read at byte %" PRIu64
				" failed: %s\n",
				path, done,
				n == 0 ? "unexpected end of file"
				       : strerror(errno));
			status = 1;
			break;
		}
		done += (uint64_t)n;
		double t = now_s();
		if (tty && (t - last >= 0.2 || done == size)) {
			progress(path, done, size, t - start);
			last = t;
		}
	}
	close(fd);
	if (tty)
		fputc('\n', stderr);
	if (status == 0) {
		double secs = now_s() - start;

		printf("%s: %s in %.1f s (%s/s)\n", path,
		       cli__human_size(done, a, sizeof(a)), secs,
		       cli__human_size(secs > 0
					       ? (uint64_t)((double)done / secs)
					       : done,
				       r, sizeof(r)));
		fflush(stdout);
	}
	return status;
}

int cli_prefetch_command(int argc, char **argv)
{
	bool tty = isatty(STDERR_FILENO);
	char *buf;
	int status = 0;

	for (int i = 2; i < argc; i++) {
		if (strcmp(argv[i], "-h") == 0 ||
		    strcmp(argv[i], "--help") == 0) {
			printf("usage: pacefs prefetch PATH...\n"
			       "Reads each file (inside a pacefs mount) to "
			       "its end, so that its bytes land in\n"
			       "the cache; a progress bar goes to stderr "
			       "when it is a terminal.\n");
			return 0;
		}
	}
	if (argc < 3) {
		fprintf(stderr, "pacefs: prefetch: usage: pacefs prefetch "
				"PATH...\n");
		return 2;
	}
	buf = malloc(PREFETCH_CHUNK);
	if (buf == NULL)
		return 1;
	for (int i = 2; i < argc; i++)
		status |= prefetch_one(argv[i], buf, tty);
	free(buf);
	return status;
}

/* manifest: a pacefs manifest (JSON, docs/manifest.md) read and parsed
 * into a flat list of files: the document's top level, each entry parsed
 * on its own (tree/mentry.c), then the paths checked together (none
 * twice, no file under a file), naming the entry and field of any
 * error. A manifest of the plain shape is parsed an entry at a time
 * (tree/mstream.c); this file's whole-document parse takes any other,
 * and says what is wrong with any that fails. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "fs/base.h"
#include "fs/tree/parse_int.h"
#include "fs/tree/tree.h"

static const char *const top_fields[] = {"version", "files"};

/* Bytes past which a manifest the streaming parse found malformed is not
 * parsed again whole to name its error: the streaming parse's own line
 * stands (the first bad entry, or a syntax error inside one, with its
 * line and column). Below it, the whole parse decides which of several
 * errors is named, as it always did. */
#define MANIFEST_WHOLE_MAX ((size_t)16 << 20)

/* The whole document (parse_whole) lives in mappings of its own (jansson's
 * allocations bumped through them, its frees no-ops), unmapped at once when the
 * parse ends. Freed into the heap instead, a large document's memory stayed
 * resident in its free lists, where the daemon's large tables were then
 * carved out of it and zeroed, and freeing it object by object took a
 * walk of the whole document (docs/fs-notes.md, "What a tree entry
 * costs"). Under AddressSanitizer jansson keeps malloc, so that a read
 * past a string is still caught. */
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MJSON_ARENA 0
#endif
#endif
#if !defined(MJSON_ARENA) && defined(__SANITIZE_ADDRESS__)
#define MJSON_ARENA 0
#endif
#ifndef MJSON_ARENA
#define MJSON_ARENA 1
#endif

#define MJSON_CHUNK ((size_t)64 << 20)
#define MJSON_ALIGN ((size_t)16)

struct mjson_chunk {
	struct mjson_chunk *next;
	size_t size, used; /* bytes, the header's included */
};

#define MJSON_HEAD                                                             \
	((sizeof(struct mjson_chunk) + MJSON_ALIGN - 1) & ~(MJSON_ALIGN - 1))

/* The chunks of the document being parsed on this thread; NULL: jansson
 * allocates with malloc, as it does for every other caller. */
static _Thread_local struct mjson_chunk **mjson_cur;
static pthread_once_t mjson_once = PTHREAD_ONCE_INIT;

static void *mjson_malloc(size_t n)
{
	struct mjson_chunk **head = mjson_cur, *c;
	size_t size;

	if (head == NULL)
		return malloc(n);
	if (n > SIZE_MAX / 2)
		return NULL;
	n = (n + MJSON_ALIGN - 1) & ~(MJSON_ALIGN - 1);
	c = *head;
	if (c != NULL && c->size - c->used >= n) {
		c->used += n;
		return (char *)c + c->used - n;
	}
	size = n + MJSON_HEAD > MJSON_CHUNK ? n + MJSON_HEAD : MJSON_CHUNK;
	c = mmap(NULL, size, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (c == MAP_FAILED)
		return NULL;
	c->size = size;
	c->used = MJSON_HEAD + n;
	if (size > MJSON_CHUNK && *head != NULL) {
		/* A value of its own: the current chunk stays the one
		 * allocations are bumped through. */
		c->next = (*head)->next;
		(*head)->next = c;
	} else {
		c->next = *head;
		*head = c;
	}
	return (char *)c + MJSON_HEAD;
}

/* A pointer of the document is dropped with its chunk; any other (jansson
 * used elsewhere on this thread meanwhile) is malloc's. */
static void mjson_free(void *p)
{
	struct mjson_chunk **head = mjson_cur;

	if (p == NULL)
		return;
	for (struct mjson_chunk *c = head != NULL ? *head : NULL; c != NULL;
	     c = c->next)
		if ((char *)p >= (char *)c && (char *)p < (char *)c + c->size)
			return;
	free(p);
}

/* Both behave as malloc and free for every document but the manifest's. */
static void mjson_init(void)
{
	if (MJSON_ARENA)
		json_set_alloc_funcs(mjson_malloc, mjson_free);
}

/* Unmaps the document's chunks. */
static void mjson_drop(struct mjson_chunk *c)
{
	while (c != NULL) {
		struct mjson_chunk *next = c->next;

		munmap(c, c->size);
		c = next;
	}
}

struct pkey {
	const char *path;
	uint32_t idx;
};

/* The byte's rank with '/' below every other byte, so that a path sorts
 * right before the paths under it. */
static unsigned rank(unsigned char ch)
{
	return ch == '\0' ? 0 : ch == '/' ? 1 : ch + 1u;
}

static int pkey_cmp(const void *a, const void *b)
{
	const struct pkey *x = a, *y = b;
	const unsigned char *p = (const unsigned char *)x->path;
	const unsigned char *q = (const unsigned char *)y->path;

	while (*p != '\0' && *p == *q) {
		p++;
		q++;
	}
	if (*p != *q)
		return rank(*p) < rank(*q) ? -1 : 1;
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* Rejects a path listed twice and a file that another path uses as a
 * directory. After sorting with pkey_cmp a path's duplicates and the
 * paths under it directly follow it, so checking neighbours suffices; of
 * all conflicts the one whose later entry comes first is reported. */
int tree__manifest_check(struct tree_mctx *c, const struct tree_manifest *m)
{
	struct pkey *k = malloc(m->nfiles * sizeof(*k));
	uint32_t best = UINT32_MAX, bi = 0;
	char q1[200], q2[200];
	int rc = 0;

	if (k == NULL)
		return tree__moom(c);
	for (uint32_t i = 0; i < m->nfiles; i++) {
		k[i].path = m->files[i].path;
		k[i].idx = i;
	}
	/* Manifests are mostly written in order (a listing, a generator's
	 * loops): one pass finds whether the sort has anything to do. */
	for (uint32_t i = 0; i + 1 < m->nfiles; i++)
		if (pkey_cmp(&k[i], &k[i + 1]) > 0) {
			qsort(k, m->nfiles, sizeof(*k), pkey_cmp);
			break;
		}
	for (uint32_t i = 0; i + 1 < m->nfiles; i++) {
		const char *a = k[i].path, *b = k[i + 1].path;
		size_t la = strlen(a);
		uint32_t later =
			k[i].idx > k[i + 1].idx ? k[i].idx : k[i + 1].idx;

		if ((strcmp(a, b) == 0 ||
		     (strncmp(a, b, la) == 0 && b[la] == '/')) &&
		    later < best) {
			best = later;
			bi = i;
		}
	}
	if (best != UINT32_MAX) {
		struct pkey a = k[bi], b = k[bi + 1];

		c->index = best;
		tree__mquote(a.path, strlen(a.path), q1, sizeof(q1));
		tree__mquote(b.path, strlen(b.path), q2, sizeof(q2));
		if (strcmp(a.path, b.path) == 0)
			rc = tree__mfail(c, "path",
					 "%s duplicates files[%" PRIu32
					 "].path",
					 q1, a.idx);
		else if (b.idx == best)
			rc = tree__mfail(
				c, "path",
				"%s puts a file under %s, which files[%" PRIu32
				"].path names as a file",
				q2, q1, a.idx);
		else
			rc = tree__mfail(c, "path",
					 "%s is a file, but files[%" PRIu32
					 "].path %s makes it a directory",
					 q1, b.idx, q2);
	}
	free(k);
	return rc;
}

static void entry_free(struct tree_manifest_entry *e)
{
	free(e->path);
	for (uint32_t i = 0; i < e->nurls; i++)
		free(e->urls[i]);
	free(e->urls);
	free(e->block_sha256);
	free(e->regions);
}

void tree_manifest_free(struct tree_manifest *m)
{
	if (m == NULL)
		return;
	for (uint32_t i = 0; i < m->nfiles; i++)
		entry_free(&m->files[i]);
	free(m->files);
	m->files = NULL;
	m->nfiles = 0;
}

/* Checks the document's top level (an object of version 1 and a files
 * array of 1 to UINT32_MAX entries, nothing else) and finds the array. */
static int top_check(struct tree_mctx *c, json_t *root, json_t **files)
{
	const char *key;
	json_t *v;
	size_t n;

	if (!json_is_object(root))
		return tree__mfail_top(c, "manifest",
				       "expected a JSON object, got %s",
				       tree__json_type(root));
	json_object_foreach(root, key, v)
	{
		char q[100];

		if (!tree__mknown(key, top_fields,
				  sizeof(top_fields) / sizeof(top_fields[0])))
			return tree__mfail_top(
				c, "manifest",
				"unknown field %s; known are version, files",
				tree__mquote(key, strlen(key), q, sizeof(q)));
	}
	v = json_object_get(root, "version");
	if (v == NULL)
		return tree__mfail_top(c, "version",
				       "missing; this format is 1");
	if (json_is_integer(v) && json_integer_value(v) != 1)
		return tree__mfail_top(c, "version",
				       "expected 1, got %" JSON_INTEGER_FORMAT,
				       json_integer_value(v));
	if (!json_is_integer(v))
		return tree__mfail_top(c, "version", "expected 1, got %s",
				       tree__json_type(v));
	*files = json_object_get(root, "files");
	if (*files == NULL)
		return tree__mfail_top(c, "files", "missing");
	if (!json_is_array(*files))
		return tree__mfail_top(c, "files", "expected an array, got %s",
				       tree__json_type(*files));
	n = json_array_size(*files);
	if (n == 0)
		return tree__mfail_top(c, "files",
				       "expected at least one entry");
	if (n > UINT32_MAX)
		return tree__mfail_top(c, "files", "has %zu entries, too many",
				       n);
	return 0;
}

int tree__manifest_parse_whole(const char *text, size_t len,
			       struct tree_manifest *out, char *err,
			       size_t errlen)
{
	struct tree_mctx c = {.err = err, .errlen = errlen};
	struct tree_manifest m = {0};
	struct mjson_chunk *chunks = NULL;
	json_error_t jerr;
	json_t *root, *files = NULL;
	size_t n;
	int rc;

	pthread_once(&mjson_once, mjson_init);
	if (MJSON_ARENA)
		mjson_cur = &chunks;
	root = json_loadb(text, len,
			  JSON_REJECT_DUPLICATES | JSON_DECODE_ANY |
				  JSON_ALLOW_NUL,
			  &jerr);
	if (root == NULL) {
		mjson_cur = NULL;
		mjson_drop(chunks);
		if (json_error_code(&jerr) == json_error_out_of_memory)
			return tree__moom(&c);
		fs__errf(err, errlen, -EINVAL, "line %d, column %d: %s",
			 jerr.line, jerr.column, jerr.text);
		/* jansson quotes the input near the error as it is: keep
		 * the message on one line. */
		for (char *p = err; errlen > 0 && *p != '\0'; p++)
			if ((unsigned char)*p < 0x20 || *p == 0x7f)
				*p = '?';
		return -EINVAL;
	}
	rc = top_check(&c, root, &files);
	if (rc != 0)
		goto out;
	n = json_array_size(files);
	m.files = calloc(n, sizeof(*m.files));
	if (m.files == NULL) {
		rc = tree__moom(&c);
		goto out;
	}
	/* Each entry parsed on its own, then the paths checked together. */
	for (size_t i = 0; i < n; i++) {
		c.index = (uint32_t)i;
		m.nfiles = (uint32_t)(i + 1);
		rc = tree__mentry_parse(&c, json_array_get(files, i),
					&m.files[i]);
		if (rc != 0)
			goto out;
	}
	rc = tree__manifest_check(&c, &m);
out:
	mjson_cur = NULL;
	if (chunks != NULL)
		mjson_drop(chunks); /* the document, all at once */
	else
		json_decref(root);
	if (rc != 0)
		tree_manifest_free(&m);
	else
		*out = m;
	return rc;
}

/* tree_manifest_parse, of a mapped file's text when mapped. */
static int parse(const char *text, size_t len, bool mapped,
		 struct tree_manifest *out, char *err, size_t errlen)
{
	struct tree_manifest m = {0};
	int rc = tree__manifest_stream(text, len, mapped, &m, err, errlen);

	if (rc == 0) {
		*out = m;
		return 0;
	}
	tree_manifest_free(&m);
	if (rc == -ENOMEM)
		return rc;
	/* A large manifest's first bad entry, as the streaming parse named
	 * it: parsed again whole, it would take about ten bytes of memory
	 * for each of its own. */
	if (len > MANIFEST_WHOLE_MAX && errlen > 0 && err[0] != '\0')
		return -EINVAL;
	return tree__manifest_parse_whole(text, len, out, err, errlen);
}

int tree_manifest_parse(const char *text, size_t len, struct tree_manifest *out,
			char *err, size_t errlen)
{
	return parse(text, len, false, out, err, errlen);
}

/* Reads what fd gives (a pipe, a character device) into *buf, up to the
 * limit. 0, or a negative errno with the line in err. */
static int read_all(int fd, const char *path, char **buf, size_t *len,
		    char *err, size_t errlen)
{
	size_t cap = 0;
	int rc;

	for (*len = 0;;) {
		ssize_t got;

		if (*len == cap) {
			/* One byte past the limit tells a file that is
			 * too large from one that just fits. */
			size_t ncap = cap == 0 ? 65536 : cap * 2;
			char *nbuf;

			if (ncap > TREE_MANIFEST_FILE_MAX + 1u)
				ncap = TREE_MANIFEST_FILE_MAX + 1u;
			nbuf = realloc(*buf, ncap + 1);
			if (nbuf == NULL)
				return fs__errf(err, errlen, -ENOMEM,
						"%s: out of memory", path);
			*buf = nbuf;
			cap = ncap;
		}
		got = read(fd, *buf + *len, cap - *len);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0) {
			rc = -errno;
			return fs__errf(err, errlen, rc, "%s: cannot read: %s",
					path, strerror(-rc));
		}
		if (got == 0)
			return 0;
		*len += (size_t)got;
		if (*len > TREE_MANIFEST_FILE_MAX)
			return fs__errf(
				err, errlen, -EFBIG,
				"%s: larger than %llu bytes, the most "
				"a manifest may have",
				path,
				(unsigned long long)TREE_MANIFEST_FILE_MAX);
	}
}

int tree_manifest_load(const char *path, struct tree_manifest *out, char *err,
		       size_t errlen)
{
	char msg[512];
	char *buf = NULL;
	void *map = NULL;
	size_t len = 0;
	struct stat st;
	bool reg;
	int fd, rc = 0;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		rc = -errno;
		return fs__errf(err, errlen, rc, "%s: cannot open: %s", path,
				strerror(-rc));
	}
	reg = fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
	if (reg && (uint64_t)st.st_size > TREE_MANIFEST_FILE_MAX) {
		rc = fs__errf(err, errlen, -EFBIG,
			      "%s: larger than %llu bytes, the most a "
			      "manifest may have",
			      path, (unsigned long long)TREE_MANIFEST_FILE_MAX);
		goto out;
	}
	/* A regular file is mapped: its bytes are the page cache's, read
	 * once in order, never copied into the heap. */
	if (reg && st.st_size > 0) {
		len = (size_t)st.st_size;
		map = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
		if (map == MAP_FAILED)
			map = NULL;
		else
			(void)madvise(map, len, MADV_SEQUENTIAL);
	}
	if (map == NULL)
		rc = read_all(fd, path, &buf, &len, err, errlen);
	if (rc != 0)
		goto out;
	rc = parse(map != NULL ? map : buf, len, map != NULL, out, msg,
		   sizeof(msg));
	if (rc != 0)
		fs__errf(err, errlen, rc, "%s: %s", path, msg);
out:
	if (map != NULL)
		munmap(map, len);
	free(buf);
	close(fd);
	return rc;
}

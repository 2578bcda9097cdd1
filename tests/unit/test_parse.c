/* test_parse: the manifest parser (every rule and the entry and field each
 * error names), the directory-index parser (real nginx pages, Apache
 * pages in its three forms, and hostile HTML) and the S3 XML reader (no
 * DTD, text children only, a key with a NUL). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fs/auth/auth.h"
#include "fs/tree/parse_int.h"
#include "fs/tree/tree.h"
#include "tests/t.h"

#ifndef PACEFS_SRCDIR
#define PACEFS_SRCDIR "."
#endif

#define HEX64 "0123456789abcdef0123456789ABCDEF0123456789abcdef0123456789abcdef"
#define ZERO64                                                                 \
	"0000000000000000000000000000000000000000000000000000000000000000"

/* A manifest whose files[0] is good and files[1] is ENTRY. */
#define WITH(entry)                                                            \
	"{\"version\":1,\"files\":[{\"path\":\"ok\",\"urls\":[\"http://h/"     \
	"ok\"]}," entry "]}"

/* Parses json, which must fail with -EINVAL and exactly the error msg. */
#define BAD(json, msg)                                                         \
	do {                                                                   \
		char e_[512] = "";                                             \
		struct tree_manifest m_;                                       \
		int rc_ = tree_manifest_parse((json), strlen(json), &m_, e_,   \
					      sizeof(e_));                     \
		if (rc_ == 0)                                                  \
			tree_manifest_free(&m_);                               \
		T_EQ_INT(rc_, -EINVAL);                                        \
		T_EQ_STR(e_, (msg));                                           \
	} while (0)

/* As BAD, but only the error's start is compared. */
#define BAD_PREFIX(json, msg)                                                  \
	do {                                                                   \
		char e_[512] = "";                                             \
		struct tree_manifest m_;                                       \
		int rc_ = tree_manifest_parse((json), strlen(json), &m_, e_,   \
					      sizeof(e_));                     \
		if (rc_ == 0)                                                  \
			tree_manifest_free(&m_);                               \
		T_EQ_INT(rc_, -EINVAL);                                        \
		if (strncmp(e_, (msg), strlen(msg)) != 0)                      \
			T_FAIL("error \"%s\" does not start with \"%s\"", e_,  \
			       (msg));                                         \
	} while (0)

#define GOOD(json, m)                                                          \
	do {                                                                   \
		char e_[512] = "";                                             \
		int rc_ = tree_manifest_parse((json), strlen(json), (m), e_,   \
					      sizeof(e_));                     \
		if (rc_ != 0)                                                  \
			T_FAIL("rejected: %s", e_);                            \
		T_EQ_INT(rc_, 0);                                              \
	} while (0)

static void manifest_minimal(void)
{
	struct tree_manifest m;
	const struct tree_manifest_entry *e;

	GOOD("{\"version\":1,\"files\":[{\"path\":\"a.bin\",\"urls\":"
	     "[\"https://h/a.bin\"]}]}",
	     &m);
	T_EQ_INT(m.nfiles, 1);
	e = &m.files[0];
	T_EQ_STR(e->path, "a.bin");
	T_EQ_INT(e->nurls, 1);
	T_EQ_STR(e->urls[0], "https://h/a.bin");
	T_ASSERT(!e->has_size && !e->has_sha256 && !e->has_mode &&
		 !e->has_mtime);
	T_EQ_INT(e->block_size, 0);
	T_ASSERT(e->block_sha256 == NULL);
	T_EQ_INT(e->nblocks, 0);
	tree_manifest_free(&m);
	T_ASSERT(m.files == NULL && m.nfiles == 0);
	tree_manifest_free(&m);
	tree_manifest_free(NULL);
}

static void manifest_full(void)
{
	static const char json[] =
		"{\n \"files\": [\n  {\"mtime\": \"2026-11-29T23:48:00Z\", "
		"\"mode\": \"0444\", \"path\": \"dir/sub/name.bin\",\n"
		"   \"urls\": [\"https://a/x\", \"HTTP://b:8080/x?y=1\"],\n"
		"   \"size\": 10000, \"sha256\": \"" HEX64 "\",\n"
		"   \"block_size\": 4096, \"block_sha256\": [\"" ZERO64
		"\", \"" HEX64 "\", \"" ZERO64 "\"]},\n"
		"  {\"path\": \"dir/other\", \"urls\": [\"http://c/o\"], "
		"\"mode\": 292, \"mtime\": -1, \"size\": 0,"
		" \"block_size\": 67108864, \"block_sha256\": []}\n"
		" ],\n \"version\": 1\n}\n";
	static const uint8_t want[32] = {
		0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef,
		0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef,
		0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef,
		0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef};
	static const uint8_t zero[32] = {0};
	struct tree_manifest m;
	const struct tree_manifest_entry *e;

	GOOD(json, &m);
	T_EQ_INT(m.nfiles, 2);
	e = &m.files[0];
	T_EQ_STR(e->path, "dir/sub/name.bin");
	T_EQ_INT(e->nurls, 2);
	T_EQ_STR(e->urls[1], "HTTP://b:8080/x?y=1");
	T_ASSERT(e->has_size);
	T_EQ_U64(e->size, 10000);
	T_ASSERT(e->has_sha256);
	T_EQ_MEM(e->sha256, want, 32);
	T_EQ_INT(e->block_size, 4096);
	T_EQ_INT(e->nblocks, 3);
	T_EQ_MEM(e->block_sha256[0], zero, 32);
	T_EQ_MEM(e->block_sha256[1], want, 32);
	T_EQ_MEM(e->block_sha256[2], zero, 32);
	T_ASSERT(e->has_mode);
	T_EQ_INT(e->mode, 0444);
	T_ASSERT(e->has_mtime);
	T_EQ_INT(e->mtime, 1795996080);
	e = &m.files[1];
	T_EQ_INT(e->mode, 0444);
	T_EQ_INT(e->mtime, -1);
	T_ASSERT(e->has_size);
	T_EQ_U64(e->size, 0);
	T_EQ_INT(e->block_size, 64 << 20);
	T_EQ_INT(e->nblocks, 0);
	T_ASSERT(e->block_sha256 == NULL);
	tree_manifest_free(&m);
}

static void manifest_json_syntax(void)
{
	BAD_PREFIX("{\"version\": 1,\n \"files\": [\n  {\"path\": \"a\" "
		   "\"urls\": []}]}",
		   "line 3, column ");
	BAD_PREFIX("", "line 1, column 0: ");
	BAD_PREFIX("{\"version\":1,\"version\":1,\"files\":[]}", "line 1, ");
	BAD_PREFIX("{\"version\":1} trailing", "line 1, ");
	BAD_PREFIX("{\"version\":99999999999999999999999}", "line 1, ");
	BAD_PREFIX("{\"version\":1,\"files\":[{\"path\":\"\xff\"}]}",
		   "line 1, ");
}

/* The plain shape is parsed an entry at a time, whatever the order of
 * its two keys and its whitespace; any other shape, and any error, is
 * left to the whole-document parse (1), whose line is what the caller
 * gets. */
static void manifest_stream(void)
{
	static const char *const plain[] = {
		"{\"version\":1,\"files\":[{\"path\":\"a\",\"urls\":["
		"\"http://h/a\"],\"size\":3},{\"path\":\"b/c\",\"urls\":"
		"[\"http://h/{\\\"]}\"]}]}",
		" {\n \"files\" : [ {\"urls\":[\"http://h/a\"],\"path\":\"a\"} "
		"] ,\r\n\t\"version\" : 1 } \n",
	};
	static const char *const other[] = {
		"{\"version\":1,\"files\":[]}",
		"{\"files\":[{\"path\":\"a\",\"urls\":[\"http://h/a\"]}]}",
		"{\"version\":1,\"files\":[{\"path\":\"a\",\"urls\":["
		"\"http://h/a\"]}],\"x\":0}",
		"{\"version\":1.0,\"files\":[{\"path\":\"a\",\"urls\":["
		"\"http://h/a\"]}]}",
		"{\"version\":1,\"files\":[{\"path\":\"a\",\"urls\":["
		"\"http://h/a\"]} {\"path\":\"b\",\"urls\":[\"http://h/b\"]}]}",
		"{\"version\":1,\"files\":[{\"path\":\"a\",\"urls\":["
		"\"http://h/a\"]}]} x",
		"{\"version\":1,\"files\":[{\"path\":\"a\",\"urls\":["
		"\"http://h/a\"]},{\"path\":\"a\",\"urls\":[\"http://h/b\"]}]}",
		"{\"version\":1,\"files\":[{\"path\":\"a\",\"urls\":["
		"\"http://h/a\"],\"size\":-1}]}",
		"{\"version\":1,\"files\":[{\"path\":\"a\",\"urls\":["
		"\"http://h/a\"],\"path\":\"b\"}]}",
		"{\"vers\\u0000ion\":1,\"files\":[{\"path\":\"a\",\"urls\":["
		"\"http://h/a\"]}]}",
	};
	struct tree_manifest m = {0};
	char e[512];

	for (size_t i = 0; i < sizeof(plain) / sizeof(plain[0]); i++) {
		T_EQ_INT(tree__manifest_stream(plain[i], strlen(plain[i]),
					       false, &m, e, sizeof(e)),
			 0);
		T_ASSERT(m.nfiles >= 1);
		T_EQ_STR(m.files[0].path, "a");
		T_EQ_STR(m.files[0].urls[0], "http://h/a");
		if (m.nfiles == 2)
			T_EQ_STR(m.files[1].urls[0], "http://h/{\"]}");
		tree_manifest_free(&m);
	}
	for (size_t i = 0; i < sizeof(other) / sizeof(other[0]); i++) {
		T_EQ_INT(tree__manifest_stream(other[i], strlen(other[i]),
					       false, &m, e, sizeof(e)),
			 1);
		tree_manifest_free(&m);
	}
	BAD("{\"version\":1,\"files\":[{\"path\":\"a\",\"urls\":["
	    "\"http://h/a\"]},{\"path\":\"b\",\"urls\":[\"http://h/b\"],"
	    "\"size\":-3}]}",
	    "files[1].size: must not be negative, got -3");
}

/* A manifest of n entries, "d/fI" each with a URL holding a '/' and a
 * quote escaped, entry bad (n: none) with a negative size. */
static char *many_entries(size_t n, size_t bad)
{
	size_t cap = 64 + n * 80, used = 0;
	char *j = malloc(cap);

	used += (size_t)snprintf(j, cap, "{\"version\":1,\"files\":[");
	for (size_t i = 0; i < n; i++)
		used += (size_t)snprintf(
			j + used, cap - used,
			"%s{\"path\":\"d/f%zu\",\"urls\":[\"http://h/"
			"\\\"%zu\"],"
			"\"size\":%d}",
			i ? "," : "", i, i, i == bad ? -1 : 7);
	snprintf(j + used, cap - used, "]}");
	return j;
}

/* An array long enough to be parsed in two halves, by two threads: every
 * entry in its place, and an error in the second half named as the
 * whole-document parse names it. */
static void manifest_stream_halves(void)
{
	const size_t n = 70001;
	struct tree_manifest m = {0};
	char e[512], *j = many_entries(n, n);
	char want[64];

	T_EQ_INT(tree__manifest_stream(j, strlen(j), false, &m, e, sizeof(e)),
		 0);
	T_EQ_INT(m.nfiles, n);
	for (size_t i = 0; i < n; i += n / 7) {
		char path[32], url[32];

		snprintf(path, sizeof(path), "d/f%zu", i);
		snprintf(url, sizeof(url), "http://h/\"%zu", i);
		T_EQ_STR(m.files[i].path, path);
		T_EQ_STR(m.files[i].urls[0], url);
		T_EQ_U64(m.files[i].size, 7);
	}
	T_EQ_STR(m.files[n - 1].path, "d/f70000");
	T_EQ_STR(m.files[n / 2].path, "d/f35000");
	tree_manifest_free(&m);
	free(j);
	j = many_entries(n, 69000);
	T_EQ_INT(tree__manifest_stream(j, strlen(j), false, &m, e, sizeof(e)),
		 1);
	tree_manifest_free(&m);
	snprintf(want, sizeof(want),
		 "files[69000].size: must not be negative, got -1");
	BAD(j, want);
	free(j);
}

/* Entries read without jansson (tree/mfast.c) and those left to it, in
 * one array: each as the whole-document parse makes it. */
static void manifest_fast_shapes(void)
{
	static const char *const ents[] = {
		"{\"path\":\"a/b\",\"urls\":[\"http://h/a/b\"],\"size\":0}",
		" { \"size\" : 123456789012345678 ,\r\n\"urls\":[ "
		"\"https://h/x\" , "
		"\"HTTP://m/x\" ],\t\"path\":\"c\" } ",
		"{\"urls\":[\"http://h/d\"],\"path\":\"d\"}",
		"{\"path\":\"e\\u00e9\",\"urls\":[\"http://h/e\"]}",
		"{\"path\":\"f\",\"urls\":[\"http://h/"
		"f\"],\"size\":1234567890123456789}",
		"{\"path\":\"h\",\"urls\":[\"http://h/h\"],\"mode\":420}",
		"{\"path\":\"i\xc3\xa9\",\"urls\":[\"http://h/i\"],\"size\":7}",
		"{\"path\":\"j\",\"urls\":[\"http://h/j\\/k\"],\"size\":-0}",
	};
	char j[2048], e[512];
	size_t used = 0;
	struct tree_manifest a = {0}, b = {0};

	used += (size_t)snprintf(j, sizeof(j), "{\"version\":1,\"files\":[");
	for (size_t i = 0; i < sizeof(ents) / sizeof(ents[0]); i++)
		used += (size_t)snprintf(j + used, sizeof(j) - used, "%s%s",
					 i ? "," : "", ents[i]);
	snprintf(j + used, sizeof(j) - used, "]}");
	T_EQ_INT(tree__manifest_stream(j, strlen(j), false, &a, e, sizeof(e)),
		 0);
	T_EQ_INT(tree__manifest_parse_whole(j, strlen(j), &b, e, sizeof(e)), 0);
	T_EQ_INT(a.nfiles, b.nfiles);
	for (uint32_t i = 0; i < a.nfiles && i < b.nfiles; i++) {
		T_EQ_STR(a.files[i].path, b.files[i].path);
		T_EQ_INT(a.files[i].nurls, b.files[i].nurls);
		for (uint32_t u = 0; u < a.files[i].nurls; u++)
			T_EQ_STR(a.files[i].urls[u], b.files[i].urls[u]);
		T_EQ_INT(a.files[i].has_size, b.files[i].has_size);
		T_EQ_U64(a.files[i].size, b.files[i].size);
		T_EQ_INT(a.files[i].has_mode, b.files[i].has_mode);
	}
	T_EQ_U64(a.files[1].size, 123456789012345678ull);
	T_EQ_STR(a.files[7].urls[0], "http://h/j/k");
	tree_manifest_free(&a);
	tree_manifest_free(&b);
	/* Broken rules in the common shape: the whole parse's lines. */
	BAD("{\"version\":1,\"files\":[{\"path\":\"a\",\"urls\":["
	    "\"http://h/a\"],\"size\":2e3}]}",
	    "files[0].size: expected an integer, got a real number");
	BAD("{\"version\":1,\"files\":[{\"path\":\"a/../b\",\"urls\":["
	    "\"http://h/a\"],\"size\":1}]}",
	    "files[0].path: \"a/../b\" has a \"..\" component");
	BAD("{\"version\":1,\"files\":[{\"path\":\"a\",\"urls\":["
	    "\"http://h/a\",\"http://h/a\"],\"size\":1}]}",
	    "files[0].urls[1]: duplicates urls[0]");
	BAD("{\"version\":1,\"files\":[{\"path\":\"a\",\"urls\":["
	    "\"http://h/a\"],\"size\":1,\"size\":2}]}",
	    "line 1, column 71: duplicate object key near '\"size\"'");
}

static void manifest_top_level(void)
{
	BAD("[1]", "manifest: expected a JSON object, got an array");
	BAD("\"x\"", "manifest: expected a JSON object, got a string");
	BAD("{\"version\":1,\"files\":[],\"comment\":\"x\"}",
	    "manifest: unknown field \"comment\"; known are version, files");
	BAD("{\"files\":[]}", "version: missing; this format is 1");
	BAD("{\"version\":2,\"files\":[]}", "version: expected 1, got 2");
	BAD("{\"version\":\"1\",\"files\":[]}",
	    "version: expected 1, got a string");
	BAD("{\"version\":1.0,\"files\":[]}",
	    "version: expected 1, got a real number");
	BAD("{\"version\":1}", "files: missing");
	BAD("{\"version\":1,\"files\":{}}",
	    "files: expected an array, got an object");
	BAD("{\"version\":1,\"files\":[]}",
	    "files: expected at least one entry");
}

static void manifest_entry_shape(void)
{
	BAD(WITH("\"x\""), "files[1]: expected an object, got a string");
	BAD(WITH("null"), "files[1]: expected an object, got null");
	BAD(WITH("{\"path\":\"b\",\"urls\":[\"http://h/b\"],\"sha265\":\"\"}"),
	    "files[1]: unknown field \"sha265\"; known are path, urls, size, "
	    "sha256, block_size, block_sha256, mode, mtime, regions");
	BAD(WITH("{\"urls\":[\"http://h/b\"]}"), "files[1].path: missing");
	BAD(WITH("{\"path\":\"b\"}"), "files[1].urls: missing");
}

static void manifest_path_rules(void)
{
	char big[6000], json[7000];

	BAD(WITH("{\"path\":7,\"urls\":[\"http://h/b\"]}"),
	    "files[1].path: expected a string, got an integer");
	BAD(WITH("{\"path\":\"\",\"urls\":[\"http://h/b\"]}"),
	    "files[1].path: is empty");
	BAD(WITH("{\"path\":\"/etc/passwd\",\"urls\":[\"http://h/b\"]}"),
	    "files[1].path: \"/etc/passwd\" is absolute; paths are relative "
	    "to the mount's root");
	BAD(WITH("{\"path\":\"a//b\",\"urls\":[\"http://h/b\"]}"),
	    "files[1].path: \"a//b\" has an empty component");
	BAD(WITH("{\"path\":\"a/\",\"urls\":[\"http://h/b\"]}"),
	    "files[1].path: \"a/\" has an empty component");
	BAD(WITH("{\"path\":\".\",\"urls\":[\"http://h/b\"]}"),
	    "files[1].path: \".\" has a \".\" component");
	BAD(WITH("{\"path\":\"a/./b\",\"urls\":[\"http://h/b\"]}"),
	    "files[1].path: \"a/./b\" has a \".\" component");
	BAD(WITH("{\"path\":\"a/../b\",\"urls\":[\"http://h/b\"]}"),
	    "files[1].path: \"a/../b\" has a \"..\" component");
	BAD(WITH("{\"path\":\"..\",\"urls\":[\"http://h/b\"]}"),
	    "files[1].path: \"..\" has a \"..\" component");
	BAD(WITH("{\"path\":\"a\\u0000b\",\"urls\":[\"http://h/b\"]}"),
	    "files[1].path: \"a\\x00b\" contains a NUL byte");
	/* Names that only look special are fine. */
	{
		struct tree_manifest m;

		GOOD(WITH("{\"path\":\"...\\\\ "
			  "x/.hidden/..a/\\u00fc\",\"urls\":"
			  "[\"http://h/b\"]}"),
		     &m);
		T_EQ_STR(m.files[1].path, "...\\ x/.hidden/..a/\xc3\xbc");
		tree_manifest_free(&m);
	}
	/* 255-byte components and a 4096-byte path are the limits. */
	memset(big, 'n', 255);
	big[255] = '\0';
	snprintf(json, sizeof(json),
		 WITH("{\"path\":\"%s\",\"urls\":"
		      "[\"http://h/b\"]}"),
		 big);
	{
		struct tree_manifest m;

		GOOD(json, &m);
		tree_manifest_free(&m);
	}
	big[255] = 'n';
	big[256] = '\0';
	snprintf(json, sizeof(json),
		 WITH("{\"path\":\"d/%s\",\"urls\":"
		      "[\"http://h/b\"]}"),
		 big);
	BAD_PREFIX(json, "files[1].path: \"d/nnnnn");
	T_ASSERT(strstr(json, "nnn") != NULL);
	{
		char e[512];
		struct tree_manifest m;

		T_EQ_INT(tree_manifest_parse(json, strlen(json), &m, e,
					     sizeof(e)),
			 -EINVAL);
		T_ASSERT(strstr(e, "...\" has a component of 256 bytes, over "
				   "255") != NULL);
	}
	/* Components of 200 bytes between slashes, 4096 bytes in all. */
	for (int i = 0; i < 4096; i++)
		big[i] = i % 201 == 200 ? '/' : 'p';
	big[4096] = '\0';
	snprintf(json, sizeof(json),
		 WITH("{\"path\":\"%s\",\"urls\":"
		      "[\"http://h/b\"]}"),
		 big);
	{
		struct tree_manifest m;

		GOOD(json, &m);
		T_EQ_INT(strlen(m.files[1].path), 4096);
		tree_manifest_free(&m);
	}
	snprintf(json, sizeof(json),
		 WITH("{\"path\":\"%sq\",\"urls\":"
		      "[\"http://h/b\"]}"),
		 big);
	{
		char e[512];
		struct tree_manifest m;

		T_EQ_INT(tree_manifest_parse(json, strlen(json), &m, e,
					     sizeof(e)),
			 -EINVAL);
		T_ASSERT(strncmp(e, "files[1].path: ", 15) == 0);
		T_ASSERT(strstr(e, "is 4097 bytes long, over 4096") != NULL);
	}
}

static void manifest_duplicates(void)
{
	BAD("{\"version\":1,\"files\":["
	    "{\"path\":\"a\",\"urls\":[\"http://h/1\"]},"
	    "{\"path\":\"b\",\"urls\":[\"http://h/2\"]},"
	    "{\"path\":\"a\",\"urls\":[\"http://h/3\"]},"
	    "{\"path\":\"a\",\"urls\":[\"http://h/4\"]}]}",
	    "files[2].path: \"a\" duplicates files[0].path");
	/* The conflict whose later entry comes first is the one reported. */
	BAD("{\"version\":1,\"files\":["
	    "{\"path\":\"z\",\"urls\":[\"http://h/1\"]},"
	    "{\"path\":\"y\",\"urls\":[\"http://h/2\"]},"
	    "{\"path\":\"y\",\"urls\":[\"http://h/3\"]},"
	    "{\"path\":\"z\",\"urls\":[\"http://h/4\"]}]}",
	    "files[2].path: \"y\" duplicates files[1].path");
}

static void manifest_file_and_directory(void)
{
	struct tree_manifest m;

	BAD("{\"version\":1,\"files\":["
	    "{\"path\":\"d\",\"urls\":[\"http://h/1\"]},"
	    "{\"path\":\"d/e/f\",\"urls\":[\"http://h/2\"]}]}",
	    "files[1].path: \"d/e/f\" puts a file under \"d\", which "
	    "files[0].path names as a file");
	BAD("{\"version\":1,\"files\":["
	    "{\"path\":\"x/y\",\"urls\":[\"http://h/1\"]},"
	    "{\"path\":\"x\",\"urls\":[\"http://h/2\"]}]}",
	    "files[1].path: \"x\" is a file, but files[0].path \"x/y\" makes "
	    "it a directory");
	/* Bytes below '/' ("a b", "a-b") sort between "a" and "a/c" in
	 * plain byte order; the check must still see the conflict. */
	BAD("{\"version\":1,\"files\":["
	    "{\"path\":\"a b\",\"urls\":[\"http://h/1\"]},"
	    "{\"path\":\"a-b\",\"urls\":[\"http://h/1\"]},"
	    "{\"path\":\"a\",\"urls\":[\"http://h/2\"]},"
	    "{\"path\":\"a/c\",\"urls\":[\"http://h/3\"]}]}",
	    "files[3].path: \"a/c\" puts a file under \"a\", which "
	    "files[2].path names as a file");
	/* Shared directories and look-alike names are fine. */
	GOOD("{\"version\":1,\"files\":["
	     "{\"path\":\"a/b\",\"urls\":[\"http://h/1\"]},"
	     "{\"path\":\"a/c/d\",\"urls\":[\"http://h/2\"]},"
	     "{\"path\":\"ab\",\"urls\":[\"http://h/3\"]},"
	     "{\"path\":\"a/bc\",\"urls\":[\"http://h/4\"]},"
	     "{\"path\":\"a.b\",\"urls\":[\"http://h/5\"]}]}",
	     &m);
	T_EQ_INT(m.nfiles, 5);
	T_EQ_STR(m.files[4].path, "a.b");
	tree_manifest_free(&m);
}

static void manifest_urls(void)
{
	char json[8192];
	size_t o;

	BAD(WITH("{\"path\":\"b\",\"urls\":\"http://h/b\"}"),
	    "files[1].urls: expected an array of URLs, got a string");
	BAD(WITH("{\"path\":\"b\",\"urls\":[]}"),
	    "files[1].urls: expected at least one URL, got none");
	BAD(WITH("{\"path\":\"b\",\"urls\":[\"http://h/b\",3]}"),
	    "files[1].urls[1]: expected a URL string, got an integer");
	BAD(WITH("{\"path\":\"b\",\"urls\":[\"ftp://h/b\"]}"),
	    "files[1].urls[0]: \"ftp://h/b\" is not an http:// or https:// "
	    "URL");
	BAD(WITH("{\"path\":\"b\",\"urls\":[\"/local/b\"]}"),
	    "files[1].urls[0]: \"/local/b\" is not an http:// or https:// "
	    "URL");
	BAD(WITH("{\"path\":\"b\",\"urls\":[\"https:///b\"]}"),
	    "files[1].urls[0]: \"https:///b\" has no host");
	BAD(WITH("{\"path\":\"b\",\"urls\":[\"http://\"]}"),
	    "files[1].urls[0]: \"http://\" has no host");
	BAD(WITH("{\"path\":\"b\",\"urls\":[\"http://h/a b\"]}"),
	    "files[1].urls[0]: \"http://h/a b\" has a space or control byte "
	    "at position 10; percent-encode it");
	BAD(WITH("{\"path\":\"b\",\"urls\":[\"http://h/\\u0000\"]}"),
	    "files[1].urls[0]: \"http://h/\\x00\" has a space or control byte "
	    "at position 9; percent-encode it");
	BAD(WITH("{\"path\":\"b\",\"urls\":[\"http://h/b\",\"http://g/b\","
		 "\"http://h/b\"]}"),
	    "files[1].urls[2]: duplicates urls[0]");
	o = (size_t)snprintf(json, sizeof(json),
			     "{\"version\":1,\"files\":[{\"path\":\"b\","
			     "\"urls\":[");
	for (int i = 0; i < 65; i++)
		o += (size_t)snprintf(json + o, sizeof(json) - o,
				      "%s\"http://h%d/b\"", i ? "," : "", i);
	snprintf(json + o, sizeof(json) - o, "]}]}");
	BAD(json, "files[0].urls: has 65 URLs, over 64");
}

static void manifest_size(void)
{
	BAD(WITH("{\"path\":\"b\",\"urls\":[\"http://h/b\"],\"size\":-1}"),
	    "files[1].size: must not be negative, got -1");
	BAD(WITH("{\"path\":\"b\",\"urls\":[\"http://h/b\"],\"size\":\"9\"}"),
	    "files[1].size: expected an integer, got a string");
	BAD(WITH("{\"path\":\"b\",\"urls\":[\"http://h/b\"],\"size\":1.5}"),
	    "files[1].size: expected an integer, got a real number");
}

/* regions: [offset, length] pairs, checked against size, at most 32. */
static void manifest_regions(void)
{
	struct tree_manifest m;
	char big[2048];
	size_t o;

	BAD(WITH("{\"path\":\"b\",\"urls\":[\"http://h/b\"],\"regions\":3}"),
	    "files[1].regions: expected an array of [offset, length], got an "
	    "integer");
	BAD(WITH("{\"path\":\"b\",\"urls\":[\"http://h/b\"],"
		 "\"regions\":[[0,10],[5]]}"),
	    "files[1].regions[1]: expected [offset, length], two integers");
	BAD(WITH("{\"path\":\"b\",\"urls\":[\"http://h/b\"],"
		 "\"regions\":[[0,0]]}"),
	    "files[1].regions[0]: expected an offset >= 0 and a length > 0");
	BAD(WITH("{\"path\":\"b\",\"urls\":[\"http://h/b\"],\"size\":100,"
		 "\"regions\":[[0,10],[96,5]]}"),
	    "files[1].regions[1]: ends at 101, past size 100");
	o = (size_t)snprintf(big, sizeof(big), "%s",
			     "{\"version\":1,\"files\":[{\"path\":\"b\","
			     "\"urls\":[\"http://h/b\"],\"regions\":[");
	for (int i = 0; i < 33; i++)
		o += (size_t)snprintf(big + o, sizeof(big) - o, "%s[%d,1]",
				      i ? "," : "", i);
	snprintf(big + o, sizeof(big) - o, "]}]}");
	BAD(big, "files[0].regions: at most 32, got 33");
	GOOD(WITH("{\"path\":\"b\",\"urls\":[\"http://h/b\"],\"size\":100,"
		  "\"regions\":[[0,10],[90,10]]}"),
	     &m);
	T_EQ_U64(m.files[1].nregions, 2);
	T_EQ_U64(m.files[1].regions[1][0], 90);
	T_EQ_U64(m.files[1].regions[1][1], 10);
	T_EQ_U64(m.files[0].nregions, 0);
	tree_manifest_free(&m);
}

static void manifest_sha256(void)
{
	struct tree_manifest m;

	BAD(WITH("{\"path\":\"b\",\"urls\":[\"http://h/"
		 "b\"],\"sha256\":\"" ZERO64 "0\"}"),
	    "files[1].sha256: expected 64 hex digits, got 65");
	BAD(WITH("{\"path\":\"b\",\"urls\":[\"http://h/b\"],\"sha256\":"
		 "\"0123456789abcdef0123456789abcdef0123456789abcdef0123456789"
		 "abcde\"}"),
	    "files[1].sha256: expected 64 hex digits, got 63");
	BAD(WITH("{\"path\":\"b\",\"urls\":[\"http://h/b\"],\"sha256\":"
		 "\"0123456789abcdefg123456789abcdef0123456789abcdef0123456789"
		 "abcdef\"}"),
	    "files[1].sha256: expected 64 hex digits, got \"g\" at position "
	    "16");
	BAD(WITH("{\"path\":\"b\",\"urls\":[\"http://h/b\"],\"sha256\":[]}"),
	    "files[1].sha256: expected a string of 64 hex digits, got an "
	    "array");
	GOOD(WITH("{\"path\":\"b\",\"urls\":[\"http://h/b\"],\"sha256\":"
		  "\"ABCDEF0123456789abcdef0123456789ABCDEF0123456789abcdef0123"
		  "4"
		  "56789\"}"),
	     &m);
	T_EQ_INT(m.files[1].sha256[0], 0xab);
	T_EQ_INT(m.files[1].sha256[31], 0x89);
	tree_manifest_free(&m);
}

static void manifest_blocks(void)
{
	struct tree_manifest m;

	BAD(WITH("{\"path\":\"b\",\"urls\":[\"http://h/b\"],\"block_size\":"
		 "5000}"),
	    "files[1].block_size: expected a power of two from 4096 to "
	    "67108864, got 5000");
	BAD(WITH("{\"path\":\"b\",\"urls\":[\"http://h/b\"],\"block_size\":"
		 "2048}"),
	    "files[1].block_size: expected a power of two from 4096 to "
	    "67108864, got 2048");
	BAD(WITH("{\"path\":\"b\",\"urls\":[\"http://h/b\"],\"block_size\":"
		 "134217728}"),
	    "files[1].block_size: expected a power of two from 4096 to "
	    "67108864, got 134217728");
	BAD(WITH("{\"path\":\"b\",\"urls\":[\"http://h/b\"],\"block_size\":"
		 "-4096}"),
	    "files[1].block_size: expected a power of two from 4096 to "
	    "67108864, got -4096");
	BAD(WITH("{\"path\":\"b\",\"urls\":[\"http://h/b\"],\"block_size\":"
		 "\"4096\"}"),
	    "files[1].block_size: expected an integer, got a string");
	BAD(WITH("{\"path\":\"b\",\"urls\":[\"http://h/b\"],\"size\":1,"
		 "\"block_sha256\":[\"" ZERO64 "\"]}"),
	    "files[1].block_sha256: needs block_size");
	BAD(WITH("{\"path\":\"b\",\"urls\":[\"http://h/b\"],\"block_size\":"
		 "4096,\"block_sha256\":[\"" ZERO64 "\"]}"),
	    "files[1].block_sha256: needs size");
	BAD(WITH("{\"path\":\"b\",\"urls\":[\"http://h/b\"],\"size\":10000,"
		 "\"block_size\":4096,\"block_sha256\":[\"" ZERO64
		 "\",\"" ZERO64 "\"]}"),
	    "files[1].block_sha256: expected 3 digests (size 10000 in blocks "
	    "of 4096), got 2");
	BAD(WITH("{\"path\":\"b\",\"urls\":[\"http://h/b\"],\"size\":8192,"
		 "\"block_size\":4096,\"block_sha256\":[\"" ZERO64
		 "\",\"abc\"]}"),
	    "files[1].block_sha256[1]: expected 64 hex digits, got 3");
	BAD(WITH("{\"path\":\"b\",\"urls\":[\"http://h/b\"],\"size\":8192,"
		 "\"block_size\":4096,\"block_sha256\":\"" ZERO64 "\"}"),
	    "files[1].block_sha256: expected an array of digests, got a "
	    "string");
	/* An exact multiple has no short last block. */
	GOOD(WITH("{\"path\":\"b\",\"urls\":[\"http://h/b\"],\"size\":8192,"
		  "\"block_size\":4096,\"block_sha256\":[\"" ZERO64
		  "\",\"" HEX64 "\"]}"),
	     &m);
	T_EQ_INT(m.files[1].nblocks, 2);
	T_EQ_INT(m.files[1].block_sha256[1][0], 0x01);
	tree_manifest_free(&m);
	/* block_size alone is a hint and is kept. */
	GOOD(WITH("{\"path\":\"b\",\"urls\":[\"http://h/b\"],\"block_size\":"
		  "1048576}"),
	     &m);
	T_EQ_INT(m.files[1].block_size, 1048576);
	tree_manifest_free(&m);
}

static void manifest_mode(void)
{
	struct tree_manifest m;

	GOOD(WITH("{\"path\":\"b\",\"urls\":[\"http://h/"
		  "b\"],\"mode\":\"644\"}"),
	     &m);
	T_EQ_INT(m.files[1].mode, 0644);
	tree_manifest_free(&m);
	GOOD(WITH("{\"path\":\"b\",\"urls\":[\"http://h/b\"],\"mode\":"
		  "\"07555\"}"),
	     &m);
	T_EQ_INT(m.files[1].mode, 07555);
	tree_manifest_free(&m);
	BAD(WITH("{\"path\":\"b\",\"urls\":[\"http://h/b\"],\"mode\":"
		 "\"0o444\"}"),
	    "files[1].mode: \"0o444\" is not an octal number like \"0444\"");
	BAD(WITH("{\"path\":\"b\",\"urls\":[\"http://h/b\"],\"mode\":\"\"}"),
	    "files[1].mode: \"\" is not an octal number like \"0444\"");
	BAD(WITH("{\"path\":\"b\",\"urls\":[\"http://h/b\"],\"mode\":"
		 "\"0100644\"}"),
	    "files[1].mode: 0100644 has bits outside 07777; give permission "
	    "bits only");
	BAD(WITH("{\"path\":\"b\",\"urls\":[\"http://h/b\"],\"mode\":4096}"),
	    "files[1].mode: 010000 has bits outside 07777; give permission "
	    "bits only");
	BAD(WITH("{\"path\":\"b\",\"urls\":[\"http://h/b\"],\"mode\":-1}"),
	    "files[1].mode: must not be negative, got -1");
	BAD(WITH("{\"path\":\"b\",\"urls\":[\"http://h/b\"],\"mode\":true}"),
	    "files[1].mode: expected an octal string like \"0444\" or an "
	    "integer, got a boolean");
}

static void manifest_mtime(void)
{
	static const struct {
		const char *s;
		int64_t want;
	} good[] = {
		{"2026-11-29T23:48:00Z", 1795996080},
		{"2026-11-29t23:48:00z", 1795996080},
		{"2026-11-29 23:48:00.999Z", 1795996080},
		{"2026-11-30T00:48:00+01:00", 1795996080},
		{"2026-11-29T18:18:00-05:30", 1795996080},
		{"2024-02-29T07:05:00Z", 1709190300},
		{"1969-12-31T23:59:59Z", -1},
		{"2000-03-01T00:00:00Z", 951868800},
	};
	static const char *const bad[] = {
		"2026-13-01T00:00:00Z",
		"2026-02-29T00:00:00Z",
		"2026-11-29T24:00:00Z",
		"2026-11-29T23:48:00",
		"2026-11-29T23:48Z",
		"2026-11-29",
		"yesterday",
		"2026-11-29T23:48:00.Z",
		"2026-11-29T23:48:00+1:00",
		"2026-11-29T23:48:00Zjunk",
	};
	char json[512], want[256];

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		struct tree_manifest m;

		snprintf(json, sizeof(json),
			 WITH("{\"path\":\"b\",\"urls\":[\"http://h/b\"],"
			      "\"mtime\":\"%s\"}"),
			 good[i].s);
		GOOD(json, &m);
		T_ASSERT(m.files[1].has_mtime);
		T_EQ_INT(m.files[1].mtime, good[i].want);
		tree_manifest_free(&m);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(json, sizeof(json),
			 WITH("{\"path\":\"b\",\"urls\":[\"http://h/b\"],"
			      "\"mtime\":\"%s\"}"),
			 bad[i]);
		snprintf(want, sizeof(want),
			 "files[1].mtime: \"%s\" is not an RFC 3339 date-time "
			 "like \"2026-11-29T23:48:00Z\"",
			 bad[i]);
		BAD(json, want);
	}
	BAD(WITH("{\"path\":\"b\",\"urls\":[\"http://h/b\"],\"mtime\":1.5}"),
	    "files[1].mtime: expected seconds since the epoch or an RFC 3339 "
	    "string, got a real number");
}

/* An error deep in a long list names the right entry. */
static void manifest_error_index(void)
{
	char json[4096];
	size_t o = (size_t)snprintf(json, sizeof(json),
				    "{\"version\":1,\"files\":[");

	for (int i = 0; i < 12; i++)
		o += (size_t)snprintf(json + o, sizeof(json) - o,
				      "%s{\"path\":\"f%d\",\"urls\":[\"http://"
				      "h/%d\"]%s}",
				      i ? "," : "", i, i,
				      i == 7 ? ",\"size\":-5" : "");
	snprintf(json + o, sizeof(json) - o, "]}");
	BAD(json, "files[7].size: must not be negative, got -5");
}

/* Writes text into a fresh temporary file; returns its path (static). */
static const char *temp_file(const char *text)
{
	static char path[64];
	int fd;

	snprintf(path, sizeof(path), "/tmp/test_parse.XXXXXX");
	fd = mkstemp(path);
	if (fd < 0)
		return NULL;
	if (write(fd, text, strlen(text)) != (ssize_t)strlen(text)) {
		close(fd);
		return NULL;
	}
	close(fd);
	return path;
}

static void manifest_load(void)
{
	struct tree_manifest m;
	char err[512], want[600];
	const char *path;
	int rc;

	path = temp_file("{\"version\":1,\"files\":[{\"path\":\"a\",\"urls\":"
			 "[\"http://h/a\"],\"size\":3}]}");
	T_ASSERT(path != NULL);
	rc = tree_manifest_load(path, &m, err, sizeof(err));
	unlink(path);
	T_EQ_INT(rc, 0);
	T_EQ_U64(m.files[0].size, 3);
	tree_manifest_free(&m);

	path = temp_file("{\"version\":1,\"files\":[{\"path\":\"a\",\"urls\":"
			 "[\"http://h/a\"],\"size\":-3}]}");
	T_ASSERT(path != NULL);
	rc = tree_manifest_load(path, &m, err, sizeof(err));
	snprintf(want, sizeof(want),
		 "%s: files[0].size: must not be negative, got -3", path);
	unlink(path);
	T_EQ_INT(rc, -EINVAL);
	T_EQ_STR(err, want);

	path = temp_file("{\n\"version\":1,\n\"files\":[\n}");
	T_ASSERT(path != NULL);
	rc = tree_manifest_load(path, &m, err, sizeof(err));
	snprintf(want, sizeof(want), "%s: line 4, column ", path);
	unlink(path);
	T_EQ_INT(rc, -EINVAL);
	T_ASSERT(strncmp(err, want, strlen(want)) == 0);

	rc = tree_manifest_load("/nonexistent/m.json", &m, err, sizeof(err));
	T_EQ_INT(rc, -ENOENT);
	T_EQ_STR(err, "/nonexistent/m.json: cannot open: No such file or "
		      "directory");
	rc = tree_manifest_load("/", &m, err, sizeof(err));
	T_EQ_INT(rc, -EISDIR);
	T_ASSERT(strncmp(err, "/: cannot read: ", 16) == 0);
}

/* A mapped manifest larger than the parse's release step (16 MiB): its
 * pages given back behind the walk and the parse; a wrong entry, or a
 * syntax error inside one, named by the streaming parse itself (no whole
 * parse again past 16 MiB) as the whole-document parse names it. */
static void manifest_load_large(void)
{
	const size_t n = 400000;
	struct tree_manifest m;
	char err[512], want[600], *j;
	const char *path;
	int rc;

	/* Three manifests of 20 MB and more, parsed whole and in pieces:
	 * minutes under valgrind (tests/valgrind.sh sets T_VALGRIND), where
	 * the sanitizer build runs them in seconds with the same checks of
	 * memory; the same paths on small manifests run under both. */
	if (getenv("T_VALGRIND") != NULL)
		return;

	j = many_entries(n, n);
	T_ASSERT(strlen(j) > (size_t)20 << 20); /* past the release step */
	path = temp_file(j);
	free(j);
	T_ASSERT(path != NULL);
	rc = tree_manifest_load(path, &m, err, sizeof(err));
	unlink(path);
	T_EQ_INT(rc, 0);
	T_EQ_INT(m.nfiles, n);
	T_EQ_STR(m.files[n - 1].path, "d/f399999");
	T_EQ_STR(m.files[n / 2].urls[0], "http://h/\"200000");
	tree_manifest_free(&m);

	j = many_entries(n, n - 2);
	path = temp_file(j);
	free(j);
	T_ASSERT(path != NULL);
	rc = tree_manifest_load(path, &m, err, sizeof(err));
	snprintf(want, sizeof(want),
		 "%s: files[399998].size: must not be negative, got -1", path);
	unlink(path);
	T_EQ_INT(rc, -EINVAL);
	T_EQ_STR(err, want);

	/* A value missing inside an entry near the end, the entries on
	 * lines of their own and a two-byte character on the bad one's
	 * line: the same line, column and words. */
	j = malloc(64 + n * 64);
	T_ASSERT(j != NULL);
	{
		size_t used = (size_t)sprintf(j, "{\"version\":1,\"files\":[");

		for (size_t i = 0; i < n; i++)
			used += (size_t)sprintf(
				j + used,
				"%s\n{\"path\":\"d/%s%zu\",\"urls\":["
				"\"http://h/%zu\"],\"size\":%s}",
				i ? "," : "", i == n - 3 ? "\xc3\xa9" : "f", i,
				i, i == n - 3 ? "" : "7");
		sprintf(j + used, "]}");
	}
	T_EQ_INT(tree__manifest_parse_whole(j, strlen(j), &m, want,
					    sizeof(want)),
		 -EINVAL);
	/* Entry n - 3 is on line n - 1; its column counts characters. */
	T_EQ_STR(want, "line 399999, column 55: unexpected token near '}'");
	memset(&m, 0, sizeof(m));
	T_EQ_INT(tree__manifest_stream(j, strlen(j), false, &m, err,
				       sizeof(err)),
		 1);
	tree_manifest_free(&m);
	T_EQ_STR(err, want);
	path = temp_file(j);
	free(j);
	T_ASSERT(path != NULL);
	rc = tree_manifest_load(path, &m, err, sizeof(err));
	T_EQ_INT(rc, -EINVAL);
	T_ASSERT(strlen(err) > strlen(path) + 2);
	T_EQ_STR(err + strlen(path) + 2, want);
	unlink(path);
}

/* The example in docs/manifest.md parses, so the docs cannot rot. */
static void manifest_doc_example(void)
{
	static char text[65536];
	struct tree_manifest m;
	char err[512];
	const char *start, *end;
	size_t len;
	FILE *f = fopen(PACEFS_SRCDIR "/docs/manifest.md", "r");

	T_ASSERT(f != NULL);
	len = fread(text, 1, sizeof(text) - 1, f);
	fclose(f);
	text[len] = '\0';
	start = strstr(text, "```json\n");
	T_ASSERT(start != NULL);
	start += 8;
	end = strstr(start, "```");
	T_ASSERT(end != NULL);
	T_EQ_INT(tree_manifest_parse(start, (size_t)(end - start), &m, err,
				     sizeof(err)),
		 0);
	T_EQ_INT(m.nfiles, 3);
	T_EQ_STR(m.files[0].path, "images/debian-12.7.0-amd64-netinst.iso");
	T_EQ_INT(m.files[0].nurls, 2);
	T_EQ_INT(m.files[0].mode, 0444);
	T_EQ_INT(m.files[1].nblocks, 3);
	T_EQ_INT(m.files[1].mtime, 1795996080);
	tree_manifest_free(&m);
}

/* Bytes that are not a manifest are refused, never a crash; the buffer
 * need not end in NUL. */
static void manifest_garbage(void)
{
	static const char *const inputs[] = {
		"\x00\x01\x02",
		"{",
		"}",
		"nul",
		"[[[[[[[[[[[[[[[[[[[[",
		"{\"version\":1,\"files\":[{\"path\":\"a\",\"urls\":[\"http://"
		"h\"]",
		"{\"version\":1,\"files\":[1,2,3]}",
		"{\"v\":[{\"path\":\"a&\\\n0b\"}]}",
	};
	char err[512];

	for (size_t i = 0; i < sizeof(inputs) / sizeof(inputs[0]); i++) {
		size_t len = strlen(inputs[i]) + (i == 0 ? 3 : 0);
		char *copy = malloc(len > 0 ? len : 1);
		struct tree_manifest m;

		T_ASSERT(copy != NULL);
		memcpy(copy, inputs[i], len);
		T_EQ_INT(tree_manifest_parse(copy, len, &m, err, sizeof(err)),
			 -EINVAL);
		T_ASSERT(strchr(err, '\n') == NULL);
		free(copy);
	}
	/* A tiny err buffer is still written safely. */
	{
		char small[8];
		struct tree_manifest m;

		T_EQ_INT(tree_manifest_parse("[]", 2, &m, small, sizeof(small)),
			 -EINVAL);
		T_EQ_STR(small, "manifes");
	}
}

/* --- directory indexes -------------------------------------------------- */

struct want_entry {
	const char *name;
	bool is_dir;
	int64_t size;  /* -1: no exact size */
	int64_t mtime; /* 0: none */
};

static char *read_fixture(const char *name, size_t *len)
{
	char path[512];
	char *buf;
	long n;
	FILE *f;

	snprintf(path, sizeof(path), "%s/tests/data/%s", PACEFS_SRCDIR, name);
	f = fopen(path, "rb");
	if (f == NULL)
		return NULL;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	/* Exactly the file's bytes, no NUL after them: a read past the end
	 * shows under valgrind and ASan. */
	buf = malloc(n > 0 ? (size_t)n : 1);
	if (buf != NULL && fread(buf, 1, (size_t)n, f) != (size_t)n) {
		free(buf);
		buf = NULL;
	}
	fclose(f);
	*len = (size_t)n;
	return buf;
}

/* Checks e[0..n) against want (in order); returns false after a T_FAIL. */
static bool same_entries(const struct tree_index_entry *e, uint32_t n,
			 const struct want_entry *want, size_t nwant)
{
	if (n != nwant) {
		T_FAIL("%u entries, want %zu", n, nwant);
		for (uint32_t i = 0; i < n; i++)
			fprintf(stderr, "    got \"%s\"\n", e[i].name);
		return false;
	}
	for (size_t i = 0; i < nwant; i++) {
		const struct want_entry *w = &want[i];

		if (strcmp(e[i].name, w->name) != 0 ||
		    e[i].is_dir != w->is_dir ||
		    e[i].has_size != (w->size >= 0) ||
		    (w->size >= 0 && e[i].size != (uint64_t)w->size) ||
		    e[i].has_mtime != (w->mtime != 0) ||
		    (w->mtime != 0 && e[i].mtime != w->mtime)) {
			T_FAIL("entry %zu: got \"%s\" dir %d size %d/%llu "
			       "mtime %d/%lld; want \"%s\" dir %d size %lld "
			       "mtime %lld",
			       i, e[i].name, e[i].is_dir, e[i].has_size,
			       (unsigned long long)e[i].size, e[i].has_mtime,
			       (long long)e[i].mtime, w->name, w->is_dir,
			       (long long)w->size, (long long)w->mtime);
			return false;
		}
	}
	return true;
}

#define T1 1795996080 /* 2026-11-29 23:48 UTC */
#define T2 1709190300 /* 2024-02-29 07:05 UTC */
#define LONGNAME                                                               \
	"a-very-long-file-name-that-nginx-truncates-in-the-listing.tar.gz"

/* Runs the parser on a fixture and compares with want. */
static bool check_fixture(const char *name, const struct want_entry *want,
			  size_t nwant)
{
	struct tree_index_entry *e = NULL;
	uint32_t n = 0;
	char err[256];
	size_t len;
	char *html = read_fixture(name, &len);
	bool ok;

	if (html == NULL) {
		T_FAIL("cannot read tests/data/%s", name);
		return false;
	}
	if (tree_dirindex_parse(html, len, &e, &n, err, sizeof(err)) != 0) {
		T_FAIL("%s: %s", name, err);
		free(html);
		return false;
	}
	ok = same_entries(e, n, want, nwant);
	tree_dirindex_free(e, n);
	free(html);
	return ok;
}

static void dirindex_nginx(void)
{
	static const struct want_entry want[] = {
		{"another dir", true, -1, T1},
		{"subdir", true, -1, T2},
		{"\xc3\xbcn\xc3\xaf dir", true, -1, T1},
		{"#hash?q", false, 13, T1},
		{"100%.dat", false, 0, T1},
		{LONGNAME, false, 14, T1},
		{"a:colon.txt", false, 10, T1},
		{"amp&name<gt>", false, 12, T1},
		{"big.img", false, 3000000, T2},
		{"plain.bin", false, 6, T1},
		{"quote\"name", false, 11, T1},
		{"with space.txt", false, 1234, T1},
		{"\xc3\xbcn\xc3\xaf"
		 "c\xc3\xb8"
		 "d\xc3\xa9.txt",
		 false, 4096, T1},
	};

	T_ASSERT(check_fixture("nginx-autoindex.html", want,
			       sizeof(want) / sizeof(want[0])));
}

/* autoindex_exact_size off: "3M" is not an exact size, "1234" is. */
static void dirindex_nginx_human(void)
{
	static const struct want_entry want[] = {
		{"another dir", true, -1, T1},
		{"subdir", true, -1, T2},
		{"\xc3\xbcn\xc3\xaf dir", true, -1, T1},
		{"#hash?q", false, 13, T1},
		{"100%.dat", false, 0, T1},
		{LONGNAME, false, 14, T1},
		{"a:colon.txt", false, 10, T1},
		{"amp&name<gt>", false, 12, T1},
		{"big.img", false, -1, T2},
		{"plain.bin", false, 6, T1},
		{"quote\"name", false, 11, T1},
		{"with space.txt", false, 1234, T1},
		{"\xc3\xbcn\xc3\xaf"
		 "c\xc3\xb8"
		 "d\xc3\xa9.txt",
		 false, 4096, T1},
	};

	T_ASSERT(check_fixture("nginx-autoindex-human.html", want,
			       sizeof(want) / sizeof(want[0])));
}

static void dirindex_nginx_empty(void)
{
	struct tree_index_entry *e = (struct tree_index_entry *)&e;
	uint32_t n = 7;
	char err[256];
	size_t len;
	char *html = read_fixture("nginx-autoindex-empty.html", &len);

	T_ASSERT(html != NULL);
	T_EQ_INT(tree_dirindex_parse(html, len, &e, &n, err, sizeof(err)), 0);
	T_EQ_INT(n, 0);
	T_ASSERT(e == NULL);
	free(html);
	T_EQ_INT(tree_dirindex_parse("", 0, &e, &n, err, sizeof(err)), 0);
	T_EQ_INT(n, 0);
	tree_dirindex_free(NULL, 0);
}

/* Apache prints bytes below 973 exactly and larger sizes as "1.2K". */
static const struct want_entry apache_want[] = {
	{"#hash?q", false, 13, T1},
	{"100%.dat", false, 0, T1},
	{"a:colon.txt", false, 10, T1},
	{LONGNAME, false, 14, T1},
	{"amp&name<gt>", false, 12, T1},
	{"another dir", true, -1, T1},
	{"big.img", false, -1, T2},
	{"plain.bin", false, 6, T1},
	{"quote\"name", false, 11, T1},
	{"subdir", true, -1, T2},
	{"with space.txt", false, -1, T1},
	{"\xc3\xbcn\xc3\xaf dir", true, -1, T1},
	{"\xc3\xbcn\xc3\xaf"
	 "c\xc3\xb8"
	 "d\xc3\xa9.txt",
	 false, -1, T1},
};

static void dirindex_apache_table(void)
{
	T_ASSERT(check_fixture("apache-table.html", apache_want,
			       sizeof(apache_want) / sizeof(apache_want[0])));
}

/* The preformatted form with IconsAreLinks: each name is linked twice. */
static void dirindex_apache_fancy(void)
{
	T_ASSERT(check_fixture("apache-fancy.html", apache_want,
			       sizeof(apache_want) / sizeof(apache_want[0])));
}

/* Without FancyIndexing: names and kinds only. */
static void dirindex_apache_plain(void)
{
	struct want_entry want[sizeof(apache_want) / sizeof(apache_want[0])];

	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		want[i] = apache_want[i];
		want[i].size = -1;
		want[i].mtime = 0;
	}
	T_ASSERT(check_fixture("apache-plain.html", want,
			       sizeof(want) / sizeof(want[0])));
}

/* Parses html (as a buffer of exactly its length) and compares. */
static bool check_html(const char *html, const struct want_entry *want,
		       size_t nwant)
{
	struct tree_index_entry *e = NULL;
	uint32_t n = 0;
	char err[256];
	size_t len = strlen(html);
	char *copy = malloc(len > 0 ? len : 1);
	bool ok;

	if (copy == NULL)
		return false;
	memcpy(copy, html, len);
	if (tree_dirindex_parse(copy, len, &e, &n, err, sizeof(err)) != 0) {
		T_FAIL("%s", err);
		free(copy);
		return false;
	}
	ok = same_entries(e, n, want, nwant);
	tree_dirindex_free(e, n);
	free(copy);
	return ok;
}

static void dirindex_skips_links(void)
{
	static const char html[] =
		"<a href=\"../\">up</a><a href=\"/\">root</a>"
		"<a href=\"/pub/\">Parent Directory</a>"
		"<a href=\"http://other.example/x\">x</a>"
		"<a href=\"https://h/dir/file\">f</a>"
		"<a href=\"//h/x\">x</a><a href=\"?C=N;O=D\">Name</a>"
		"<a href=\"#top\">top</a><a href=\"mailto:a@b\">mail</a>"
		"<a href=\"javascript:void(0)\">js</a>"
		"<a href=\"a/b\">ab</a><a href=\"a/b/\">ab/</a>"
		"<a href=\"./\">.</a><a href=\".\">.</a><a href=\"..\">..</a>"
		"<a href=\"%2e%2e/\">..</a><a href=\"%2E\">.</a>"
		"<a href=\"a%2Fb\">a/b</a><a href=\"%00x\">nul</a>"
		"<a href=\"x?y\">q</a><a href=\"x#y\">f</a>"
		"<a href=\"\">empty</a><a>no href</a><a name=\"n\">anchor</a>"
		"<a href=\"./c:d\">c:d</a>\n"
		"<a href=\"ok\">ok</a>\n"
		"<a href=\"dir/\">dir/</a>\n"
		"<a href=\"./dot-slash\">dot-slash</a>\n";
	static const struct want_entry want[] = {
		{"c:d", false, -1, 0},
		{"ok", false, -1, 0},
		{"dir", true, -1, 0},
		{"dot-slash", false, -1, 0},
	};

	T_ASSERT(check_html(html, want, sizeof(want) / sizeof(want[0])));
}

static void dirindex_attribute_forms(void)
{
	static const char html[] =
		"<A HREF=\"Upper\">u</A> 01-Jan-2020 00:00 5\n"
		"<a class=x href='single'>s</a>\n"
		"<a href=unquoted>u</a>\n"
		"<a\n  title=\"t\"\n  href = \"spaced\" >s</a>\n"
		"<a href=\"amp&amp;b&#x41;&#66;&lt;\">e</a>\n"
		/* Bad references stay literal, and the '#' makes a fragment. */
		"<a href=\"bad&#0;ent&#xZZ;&bogus;\">e</a>\n"
		"<a href=\"&bogus;\">e</a>\n"
		"<a href=\"%zz%4\">p</a>\n"
		/* An href is a URL path: '+' is itself. */
		"<a href=\"a+b%2B\">p</a>\n"
		"<a href=\"first\" href=\"second\">two</a>\n"
		"<!-- <a href=\"hidden\">hidden</a> -->\n"
		"<abbr href=\"notalink\">x</abbr>\n"
		"<area href=\"area\">\n";
	static const struct want_entry want[] = {
		{"Upper", false, 5, 1577836800}, {"single", false, -1, 0},
		{"unquoted", false, -1, 0},	 {"spaced", false, -1, 0},
		{"amp&bAB<", false, -1, 0},	 {"&bogus;", false, -1, 0},
		{"%zz%4", false, -1, 0},	 {"a+b+", false, -1, 0},
		{"first", false, -1, 0},
	};

	T_ASSERT(check_html(html, want, sizeof(want) / sizeof(want[0])));
}

static void dirindex_columns(void)
{
	static const char html[] =
		"<a href=\"secs\">s</a> 2026-11-29 23:48:59 77\n"
		"<a href=\"human\">h</a> 29-nov-2026 23:48 12K\n"
		"<a href=\"dash\">d</a> 29-Nov-2026 23:48 -\n"
		"<a href=\"baddate\">b</a> 29-Feb-2023 10:00 5\n"
		"<a href=\"badtime\">b</a> 29-Nov-2026 25:00 5\n"
		"<a href=\"nodate\">n</a> 1234\n"
		"<a href=\"huge\">h</a> 2026-11-29 23:48 99999999999999999999\n"
		"<a href=\"d/\">d</a> 2026-11-29 23:48 4096\n"
		"<a href=\"nextline\">n</a>\n2026-11-29 23:48 5\n"
		"<a href=\"old\">o</a> 1969-12-31 23:59 5\n";
	static const struct want_entry want[] = {
		{"secs", false, 77, 1795996139}, {"human", false, -1, T1},
		{"dash", false, -1, T1},	 {"baddate", false, -1, 0},
		{"badtime", false, -1, 0},	 {"nodate", false, -1, 0},
		{"huge", false, -1, T1},	 {"d", true, -1, T1},
		{"nextline", false, -1, 0},	 {"old", false, 5, -60},
	};
	struct tree_index_entry *e = NULL;
	uint32_t n = 0;
	char err[256];
	static const char max[] =
		"<a href=\"max\">m</a> 2026-11-29 23:48 9223372036854775807\n"
		"<a href=\"over\">o</a> 2026-11-29 23:48 9223372036854775808\n"
		"<a href=\"u64\">u</a> 2026-11-29 23:48 18446744073709551615";

	T_ASSERT(check_html(html, want, sizeof(want) / sizeof(want[0])));
	/* The largest off_t is a size; past it, no file's size: unknown,
	 * for the probe to tell (a stat would show it negative). */
	T_EQ_INT(
		tree_dirindex_parse(max, strlen(max), &e, &n, err, sizeof(err)),
		0);
	T_EQ_INT(n, 3);
	T_ASSERT(e[0].has_size);
	T_EQ_U64(e[0].size, INT64_MAX);
	T_ASSERT(!e[1].has_size);
	T_ASSERT(!e[2].has_size);
	tree_dirindex_free(e, n);
}

static void dirindex_duplicates(void)
{
	static const char html[] = "<a href=\"x\"><img></a> <a "
				   "href=\"x\">x</a> 2026-11-29 23:48 9\n"
				   "<a href=\"y\">y</a> 2026-11-29 23:48 1\n"
				   "<a href=\"x\">x</a> 2024-02-29 07:05 2\n"
				   "<a href=\"y/\">y/</a> 2024-02-29 07:05 -\n"
				   "<a href=\"z/\">z</a>\n<a "
				   "href=\"./z/\">z</a> 2024-02-29 07:05 -\n";
	static const struct want_entry want[] = {
		{"x", false, 9, T1},
		{"y", false, 1, T1},
		{"z", true, -1, T2},
	};

	T_ASSERT(check_html(html, want, sizeof(want) / sizeof(want[0])));
}

/* Truncated and broken markup, binary bytes, NULs, huge names: any input
 * gives a list, never a crash or a read past the end. */
static void dirindex_hostile(void)
{
	static const char *const inputs[] = {
		"<",
		"<a",
		"<a ",
		"<a href",
		"<a href=",
		"<a href=\"",
		"<a href=\"x",
		"<a href=\"x\"",
		"<a href='x'>x</a",
		"<a href=x>x</a> 2026-11-2",
		"<a href=x>x</a> 2026-11-29 23:4",
		"<a href=x>x</a> 29-Nov-2026 23:48 12",
		"<a href=x>x</a> &",
		"<a href=x>x</a> &nbsp",
		"<a href=x>x</a> <td",
		"<!--",
		"<!-- <a href=x>",
		"<a href=\"&#",
		"<a href=\"&#x10FFFF;&#x110000;&#xD800;&#99999999999;\">",
		"<a =x href=y>",
		"<a href==x>",
		"<a/href=x>",
		"<a\x00href=x>",
		"\xff\xfe<\xa0"
		"a href=x>",
	};
	struct tree_index_entry *e;
	uint32_t n;
	char err[256];
	char *big;

	for (size_t i = 0; i < sizeof(inputs) / sizeof(inputs[0]); i++) {
		size_t len = strlen(inputs[i]);
		char *copy = malloc(len > 0 ? len : 1);

		T_ASSERT(copy != NULL);
		memcpy(copy, inputs[i], len);
		/* Every prefix too: each cut is a possible end of input. */
		for (size_t cut = 0; cut <= len; cut++) {
			e = NULL;
			n = 0;
			T_EQ_INT(tree_dirindex_parse(copy, cut, &e, &n, err,
						     sizeof(err)),
				 0);
			for (uint32_t k = 0; k < n; k++)
				T_ASSERT(e[k].name[0] != '\0' &&
					 strchr(e[k].name, '/') == NULL);
			tree_dirindex_free(e, n);
		}
		free(copy);
	}
	/* A 256-byte name is not a file name; 255 bytes is. */
	big = malloc(1 << 20);
	T_ASSERT(big != NULL);
	memcpy(big, "<a href=\"", 9);
	memset(big + 9, 'n', 256);
	memcpy(big + 9 + 256, "\">x</a>\n<a href=\"", 17);
	memset(big + 9 + 256 + 17, 'm', 255);
	memcpy(big + 9 + 256 + 17 + 255, "\">", 2);
	T_EQ_INT(tree_dirindex_parse(big, 9 + 256 + 17 + 255 + 2, &e, &n, err,
				     sizeof(err)),
		 0);
	T_EQ_INT(n, 1);
	T_EQ_INT(strlen(e[0].name), 255);
	tree_dirindex_free(e, n);
	/* A megabyte of one unclosed tag and one of '<' stay linear. */
	memcpy(big, "<a href=\"", 9);
	memset(big + 9, 'x', (1 << 20) - 9);
	T_EQ_INT(tree_dirindex_parse(big, 1 << 20, &e, &n, err, sizeof(err)),
		 0);
	T_EQ_INT(n, 0);
	memset(big, '<', 1 << 20);
	T_EQ_INT(tree_dirindex_parse(big, 1 << 20, &e, &n, err, sizeof(err)),
		 0);
	T_EQ_INT(n, 0);
	free(big);
}

/* Many entries, each on its own line, all kept in order. */
static void dirindex_many(void)
{
	size_t cap = 40000 * 64, o = 0;
	char *html = malloc(cap);
	struct tree_index_entry *e = NULL;
	uint32_t n = 0;
	char err[256];

	T_ASSERT(html != NULL);
	for (int i = 0; i < 40000; i++)
		o += (size_t)snprintf(html + o, cap - o,
				      "<a href=\"f%05d\">f</a> "
				      "29-Nov-2026 23:48 %d\n",
				      i, i);
	T_EQ_INT(tree_dirindex_parse(html, o, &e, &n, err, sizeof(err)), 0);
	free(html);
	T_EQ_INT(n, 40000);
	T_EQ_STR(e[0].name, "f00000");
	T_EQ_STR(e[39999].name, "f39999");
	T_EQ_U64(e[12345].size, 12345);
	tree_dirindex_free(e, n);
}

static void headers_parse(void)
{
	static const char text[] = "# a comment\n\nX-Token: s3cret\r\n"
				   "Authorization:Bearer a b\n#\nEmpty:";
	char **h = NULL, err[256];
	unsigned n = 0;

	T_EQ_INT(auth_headers_parse(text, sizeof(text) - 1, &h, &n, err,
				    sizeof(err)),
		 0);
	T_EQ_INT(n, 3);
	T_EQ_STR(h[0], "X-Token: s3cret");
	T_EQ_STR(h[1], "Authorization:Bearer a b");
	T_EQ_STR(h[2], "Empty:");
	auth_headers_free(h, n);
	T_EQ_INT(auth_headers_parse("", 0, &h, &n, err, sizeof(err)), 0);
	T_EQ_INT(n, 0);
	auth_headers_free(h, n);
}

static void headers_parse_refused(void)
{
	static const char *const bad[][2] = {
		{"X-A: 1\n: no name\n", "line 2"},
		{"X-A: 1\n\nName with space: v\n", "line 3"},
		{" X-Folded: v\n", "line 1"},
		{"X-A: v\x01x\n", "line 1"},
		{"no colon secret\n", "line 1"},
		{"X-A: 1\rX-B: 2\n", "line 1"},
	};
	char **h = (char **)1, err[256];
	unsigned n = 7;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		T_EQ_INT(auth_headers_parse(bad[i][0], strlen(bad[i][0]), &h,
					    &n, err, sizeof(err)),
			 -EINVAL);
		if (strncmp(err, bad[i][1], strlen(bad[i][1])) != 0 ||
		    strstr(err, "secret") != NULL || strchr(err, '\n'))
			T_FAIL("case %zu: error '%s'", i, err);
	}
	/* Untouched on failure. */
	T_ASSERT(h == (char **)1 && n == 7);
	T_EQ_INT(auth_header_check("X-A: a\tb", 8), 0);
	T_EQ_INT(auth_header_check("X-A: a\nb", 8), -EINVAL);
	T_EQ_INT(auth_header_check("X-A", 3), -EINVAL);
}

/* The headers pacefs sets itself, in any case, from a header file; a
 * name that only starts like one is not one. */
static void headers_owned(void)
{
	static const char *const bad[][2] = {
		{"X-A: 1\nrange: bytes=0-1\n",
		 "line 2: pacefs sets Range itself"},
		{"IF-RANGE: \"e\"\n", "line 1: pacefs sets If-Range itself"},
		{"Accept-Encoding: gzip\n",
		 "line 1: pacefs sets Accept-Encoding itself"},
		{"\n#\nHost: x\n", "line 3: pacefs sets Host itself"},
	};
	char **h = NULL, err[256];
	unsigned n = 0;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		T_EQ_INT(auth_headers_parse(bad[i][0], strlen(bad[i][0]), &h,
					    &n, err, sizeof(err)),
			 -EINVAL);
		T_EQ_STR(err, bad[i][1]);
	}
	T_ASSERT(auth_header_owned("Ranges: x", 9) == NULL);
	T_ASSERT(auth_header_owned("X-Host: x", 9) == NULL);
	T_EQ_STR(auth_header_owned("host:x", 6), "Host");
	T_EQ_INT(auth_token_check("abc+/="), 0);
	T_EQ_INT(auth_token_check(NULL), 0);
	T_EQ_INT(auth_token_check("tok\r\nX-B: 1"), '\r');
	T_EQ_INT(auth_token_check("a\tb"), '\t');
	T_EQ_INT(auth_token_check("a\x7f"), 0x7f);
}

/* The owner and mode rule, and that its message says what is allowed. */
static void file_check(void)
{
	static const struct {
		mode_t mode;
		uid_t uid;
		enum auth_file_kind kind;
		bool readable_ok;
		const char *want; /* NULL: accepted */
	} cases[] = {
		{0600, 7, AUTH_FILE_HEADERS, false, NULL},
		{0602, 7, AUTH_FILE_HEADERS, false,
		 "f: mode 0602 lets others write to it; refused. chmod go-w "
		 "it"},
		{0620, 7, AUTH_FILE_SECRETS, true,
		 "f: mode 0620 lets group write to it; refused. chmod go-w it"},
		{0666, 7, AUTH_FILE_COMMAND, true,
		 "f: mode 0666 lets group and others write to it and read it; "
		 "refused. chmod go-w it"},
		{0644, 7, AUTH_FILE_COMMAND, false, NULL},
		{0644, 7, AUTH_FILE_SECRETS, true, NULL},
		{0640, 7, AUTH_FILE_SECRETS, false,
		 "f: mode 0640 lets group read its secrets; chmod 600 it (or "
		 "mount with -o creds_readable)"},
		{0604, 7, AUTH_FILE_HEADERS, true,
		 "f: mode 0604 lets others read its secrets; chmod 600 it"},
		{0600, 8, AUTH_FILE_COMMAND, false,
		 "f: owned by uid 8, not by the user who mounts (uid 7); "
		 "refused: its owner could change what it holds. chown it"},
	};
	char err[256];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct stat st = {.st_mode = S_IFREG | cases[i].mode,
				  .st_uid = cases[i].uid};
		int rc;

		err[0] = '\0';
		rc = auth_file_check("f", &st, 7, cases[i].kind,
				     cases[i].readable_ok, err, sizeof(err));
		T_EQ_INT(rc, cases[i].want == NULL ? 0 : -EACCES);
		if (cases[i].want != NULL)
			T_EQ_STR(err, cases[i].want);
	}
}

/* A ListObjectsV2 page around body (Contents and the like). */
#define S3PAGE(body)                                                           \
	"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<ListBucketResult>"       \
	"<EncodingType>url</EncodingType><IsTruncated>false</"                 \
	"IsTruncated>" body "</ListBucketResult>"

static void s3xml_dtd_refused(void)
{
	static const char page[] =
		"<?xml version=\"1.0\"?>\n<!DOCTYPE ListBucketResult [<!ENTITY "
		"e \"xxxxxxxx\">]><ListBucketResult><Contents><Key>&e;&e;</Key>"
		"<Size>1</Size></Contents></ListBucketResult>";
	static const char error[] =
		"<?xml version=\"1.0\"?>\n<!DOCTYPE Error [<!ENTITY e \"x\">]>"
		"<Error><Code>&e;</Code></Error>";
	char err[256] = "", code[64], msg[64], region[64];
	struct tree_s3_page p;

	T_EQ_INT(tree__s3_page_parse(page, sizeof(page) - 1, &p, err,
				     sizeof(err)),
		 -EINVAL);
	T_ASSERT(strstr(err, "DTD") != NULL);
	T_EQ_INT(tree__s3_error_parse(error, sizeof(error) - 1, code,
				      sizeof(code), msg, sizeof(msg), region,
				      sizeof(region)),
		 -EPROTO);
	T_EQ_STR(code, "");
}

static void s3xml_text_children(void)
{
	static const char page[] =
		S3PAGE("<Contents><Key>d/a<!-- x -->b&amp;c</Key><Size>7</Size>"
		       "</Contents>");
	char err[256] = "";
	struct tree_s3_page p;

	T_EQ_INT(tree__s3_page_parse(page, sizeof(page) - 1, &p, err,
				     sizeof(err)),
		 0);
	T_EQ_INT(p.n, 1);
	T_EQ_STR(p.items[0].key, "d/ab&c");
	T_EQ_INT(p.items[0].size, 7);
	tree__s3_page_free(&p);
}

static void s3xml_nul_key(void)
{
	static const char page[] = S3PAGE(
		"<Contents><Key>d/bad%00key</Key><Size>1</Size></Contents>"
		"<Contents><Key>d/go+od</Key><Size>2</Size></Contents>");
	char err[256] = "";
	struct tree_s3_page p;

	T_EQ_INT(tree__s3_page_parse(page, sizeof(page) - 1, &p, err,
				     sizeof(err)),
		 0);
	T_EQ_INT(p.n, 2);
	T_ASSERT(p.items[0].no_name);
	T_EQ_STR(p.items[0].key, "d/bad%00key");
	T_ASSERT(!p.items[1].no_name);
	T_EQ_STR(p.items[1].key, "d/go od");
	tree__s3_page_free(&p);
}

static const struct t_case cases[] = {
	{"s3xml_dtd_refused", s3xml_dtd_refused},
	{"s3xml_text_children", s3xml_text_children},
	{"s3xml_nul_key", s3xml_nul_key},
	{"headers_parse", headers_parse},
	{"headers_parse_refused", headers_parse_refused},
	{"headers_owned", headers_owned},
	{"file_check", file_check},
	{"manifest_minimal", manifest_minimal},
	{"manifest_full", manifest_full},
	{"manifest_json_syntax", manifest_json_syntax},
	{"manifest_stream", manifest_stream},
	{"manifest_stream_halves", manifest_stream_halves},
	{"manifest_fast_shapes", manifest_fast_shapes},
	{"manifest_load_large", manifest_load_large},
	{"manifest_top_level", manifest_top_level},
	{"manifest_entry_shape", manifest_entry_shape},
	{"manifest_path_rules", manifest_path_rules},
	{"manifest_duplicates", manifest_duplicates},
	{"manifest_file_and_directory", manifest_file_and_directory},
	{"manifest_urls", manifest_urls},
	{"manifest_size", manifest_size},
	{"manifest_regions", manifest_regions},
	{"manifest_sha256", manifest_sha256},
	{"manifest_blocks", manifest_blocks},
	{"manifest_mode", manifest_mode},
	{"manifest_mtime", manifest_mtime},
	{"manifest_error_index", manifest_error_index},
	{"manifest_load", manifest_load},
	{"manifest_doc_example", manifest_doc_example},
	{"manifest_garbage", manifest_garbage},
	{"dirindex_nginx", dirindex_nginx},
	{"dirindex_nginx_human", dirindex_nginx_human},
	{"dirindex_nginx_empty", dirindex_nginx_empty},
	{"dirindex_apache_table", dirindex_apache_table},
	{"dirindex_apache_fancy", dirindex_apache_fancy},
	{"dirindex_apache_plain", dirindex_apache_plain},
	{"dirindex_skips_links", dirindex_skips_links},
	{"dirindex_attribute_forms", dirindex_attribute_forms},
	{"dirindex_columns", dirindex_columns},
	{"dirindex_duplicates", dirindex_duplicates},
	{"dirindex_hostile", dirindex_hostile},
	{"dirindex_many", dirindex_many},
};

int main(int argc, char **argv)
{
	return T_RUN(argc, argv, cases);
}

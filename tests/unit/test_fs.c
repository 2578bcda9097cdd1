/* test_fs: the driver and the faces of the rooms beneath it: the command
 * line (options, their errors, the file name derived from a URL, what argv
 * keeps once parsed, header files), the cache identities of a URL and of a
 * manifest's file, the escapers, the namespace and S3's names. Of the
 * rooms' private headers it includes the driver's alone; obs/'s insides
 * are test_obs's, the engine's blocks test_blocks's. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>
#include <openssl/evp.h>

#include "fs/driver/driver_int.h"
#include "fs/obs/obs.h"
#include "fs/tree/tree.h"
#include "fs/auth/auth.h"
#include "fs/fs.h"
#include "tests/t.h"

/* The man page and the README are read from the source tree, from any
 * working directory. */
#ifndef PACEFS_SRCDIR
#define PACEFS_SRCDIR "."
#endif

static int parse(struct fs_opts *o, char *err, size_t errlen, int argc,
		 char **argv)
{
	return fs_opts_parse(argc, argv, o, err, errlen);
}

static void opts_defaults(void)
{
	char *argv[] = {"pacefs", "http://h/x.img", "/mnt", NULL};
	struct fs_opts o;
	char err[256];

	T_EQ_INT(parse(&o, err, sizeof(err), 3, argv), 0);
	T_EQ_STR(o.url, "http://h/x.img");
	T_EQ_STR(o.mountpoint, "/mnt");
	T_EQ_INT(o.lanes, 32);
	T_EQ_INT(o.host_lanes, 16);
	T_EQ_INT(o.read_timeout_s, 60);
	T_EQ_INT(o.connect_timeout_s, 10);
	T_EQ_INT(o.retry_after_max_s, 60);
	T_EQ_INT(o.readahead_ms, 3000);
	T_ASSERT(!o.foreground);
	T_ASSERT(o.cache_dir == NULL);
	fs_opts_free(&o);
}

static void opts_ours_and_fuse(void)
{
	char *argv[] = {
		"pacefs",     "-f",
		"-o",	      "cache_dir=/c,lanes=3,allow_other,name=n.bin",
		"-o",	      "read_timeout=5",
		"http://h/x", "/m",
		NULL};
	struct fs_opts o;
	char err[256];
	bool kept = false;

	T_EQ_INT(parse(&o, err, sizeof(err), 8, argv), 0);
	T_ASSERT(o.foreground);
	T_EQ_STR(o.cache_dir, "/c");
	T_EQ_STR(o.name, "n.bin");
	T_EQ_INT(o.lanes, 3);
	T_EQ_INT(o.read_timeout_s, 5);
	/* libfuse's options are left for libfuse. */
	for (int i = 0; i < o.fuse_args.argc; i++)
		if (strstr(o.fuse_args.argv[i], "allow_other") != NULL)
			kept = true;
	T_ASSERT(kept);
	fs_opts_free(&o);
}

static void opts_errors_name_the_option(void)
{
	char *bad_lanes[] = {"pacefs", "-o", "lanes=0", "http://h/x", "/m"};
	char *bad_num[] = {"pacefs", "-o", "read_timeout=abc", "http://h/x",
			   "/m"};
	char *bad_cap[] = {"pacefs", "-o", "retry_after_max=0", "http://h/x",
			   "/m"};
	char *own_hdr[] = {"pacefs", "-o", "header=accept-encoding: gzip",
			   "http://h/x", "/m"};
	char *no_mp[] = {"pacefs", "http://h/x"};
	char *extra[] = {"pacefs", "http://h/x", "/m", "/other"};
	char *bad_lead[] = {"readahead=",	"readahead=0",
			    "readahead=0.09",	"readahead=601",
			    "readahead=2.5s",	"readahead=.5",
			    "readahead=1.2345", "readahead=-1"};
	struct {
		char *arg;
		unsigned ms;
	} good_lead[] = {{"readahead=2.5", 2500},
			 {"readahead=0.1", 100},
			 {"readahead=600", 600000},
			 {"readahead=3.125", 3125}};
	struct fs_opts o;
	char err[256];

	T_EQ_INT(parse(&o, err, sizeof(err), 5, bad_lanes), -EINVAL);
	T_ASSERT(strstr(err, "lanes") != NULL);
	T_EQ_INT(parse(&o, err, sizeof(err), 5, bad_num), -EINVAL);
	T_ASSERT(strstr(err, "read_timeout") != NULL);
	T_ASSERT(strstr(err, "abc") != NULL);
	T_EQ_INT(parse(&o, err, sizeof(err), 5, bad_cap), -EINVAL);
	T_ASSERT(strstr(err, "retry_after_max") != NULL);
	T_EQ_INT(parse(&o, err, sizeof(err), 5, own_hdr), -EINVAL);
	T_ASSERT(strstr(err, "sets Accept-Encoding itself") != NULL);
	for (size_t i = 0; i < sizeof(bad_lead) / sizeof(bad_lead[0]); i++) {
		char *argv[] = {"pacefs", "-o", bad_lead[i], "http://h/x",
				"/m"};

		T_EQ_INT(parse(&o, err, sizeof(err), 5, argv), -EINVAL);
		T_ASSERT(strstr(err, "readahead") != NULL);
	}
	for (size_t i = 0; i < sizeof(good_lead) / sizeof(good_lead[0]); i++) {
		char *argv[] = {"pacefs", "-o", good_lead[i].arg, "http://h/x",
				"/m"};

		T_EQ_INT(parse(&o, err, sizeof(err), 5, argv), 0);
		T_EQ_INT(o.readahead_ms, good_lead[i].ms);
		fs_opts_free(&o);
	}
	T_EQ_INT(parse(&o, err, sizeof(err), 2, no_mp), -EINVAL);
	T_ASSERT(strstr(err, "MOUNTPOINT") != NULL);
	T_EQ_INT(parse(&o, err, sizeof(err), 4, extra), -EINVAL);
	T_ASSERT(strstr(err, "/other") != NULL);
}

/* -o chunk=: a power of two from 64K to 8M; -o inflight_max=: 8M or more;
 * -o proxy=: refused with the part that is wrong, credentials left out. */
static void opts_chunk_and_proxy(void)
{
	static const char *const bad_chunk[] = {"chunk=48K", "chunk=3M",
						"chunk=16M", "chunk=abc",
						"chunk=32K", "chunk="};
	static const struct {
		const char *arg, *says;
	} bad_proxy[] = {
		{"proxy=", "empty"},
		{"proxy=http://a:3128|", "empty proxy after '|'"},
		{"proxy=|http://a:3128", "empty proxy before '|'"},
		{"proxy=http://a:3128;;DIRECT", "group 2 is empty"},
		{"proxy=http://a:3128;", "group 2 is empty"},
		{"proxy=http://a:3128|DIRECT", "DIRECT must be alone"},
		{"proxy=ftp://a:21", "scheme 'ftp'"},
		{"proxy=http://a:0", "'http://a:0': the port"},
		{"proxy=http://a:99999", "the port"},
		{"proxy=http://a:3128/path", "no path"},
		{"proxy=http://:3128", "no host"},
		{"proxy=http://a b:3128", "blank"},
		{"proxy=http://u:secret@a:3128|http://u:secret@a:3128",
		 "'http://a:3128' is listed twice"},
		{"proxy=http://u:secret@a:3128;http://b:x", "'http://b:x'"},
	};
	char arg[64];
	struct fs_opts o;
	char err[256];

	{
		char *argv[] = {"pacefs", "-o", "chunk=1M", "http://h/x", "/m"};

		T_EQ_INT(parse(&o, err, sizeof(err), 5, argv), 0);
		T_EQ_U64(o.chunk, 1024 * 1024);
		fs_opts_free(&o);
	}
	{
		char *argv[] = {"pacefs", "http://h/x", "/m"};

		T_EQ_INT(parse(&o, err, sizeof(err), 3, argv), 0);
		T_EQ_U64(o.chunk, 64 * 1024);
		T_ASSERT(o.proxy == NULL);
		T_EQ_INT(o.proxy_reset_s, 300);
		fs_opts_free(&o);
	}
	{
		char *argv[] = {"pacefs", "-o", "inflight_max=16M",
				"http://h/x", "/m"};

		T_EQ_INT(parse(&o, err, sizeof(err), 5, argv), 0);
		T_EQ_U64(o.inflight_max, 16 * 1024 * 1024);
		fs_opts_free(&o);
	}
	{
		char *argv[] = {"pacefs", "-o", "inflight_max=4M", "http://h/x",
				"/m"};

		T_EQ_INT(parse(&o, err, sizeof(err), 5, argv), -EINVAL);
		T_ASSERT(strstr(err, "option inflight_max: '4M'") != NULL);
	}
	for (size_t i = 0; i < sizeof(bad_chunk) / sizeof(bad_chunk[0]); i++) {
		char *argv[] = {"pacefs", "-o", arg, "http://h/x", "/m"};

		snprintf(arg, sizeof(arg), "%s", bad_chunk[i]);
		T_EQ_INT(parse(&o, err, sizeof(err), 5, argv), -EINVAL);
		if (strstr(err, "option chunk") == NULL)
			T_FAIL("%s: %s", bad_chunk[i], err);
	}
	{
		char *argv[] = {"pacefs", "-o",
				"proxy=http://a:3128|b:3128;socks5h://c:1080;"
				"DIRECT,proxy_reset=30",
				"http://h/x", "/m"};

		T_EQ_INT(parse(&o, err, sizeof(err), 5, argv), 0);
		T_EQ_STR(o.proxy,
			 "http://a:3128|b:3128;socks5h://c:1080;DIRECT");
		T_EQ_INT(o.proxy_reset_s, 30);
		fs_opts_free(&o);
	}
	for (size_t i = 0; i < sizeof(bad_proxy) / sizeof(bad_proxy[0]); i++) {
		char *argv[] = {"pacefs", "-o", arg, "http://h/x", "/m"};

		snprintf(arg, sizeof(arg), "%s", bad_proxy[i].arg);
		T_EQ_INT(parse(&o, err, sizeof(err), 5, argv), -EINVAL);
		if (strstr(err, "option proxy") == NULL ||
		    strstr(err, bad_proxy[i].says) == NULL ||
		    strstr(err, "secret") != NULL || strchr(err, '\n') != NULL)
			T_FAIL("%s: %s", bad_proxy[i].arg, err);
	}
}

/* -o speculate=: a size, or off (0); 64M when not given; anything else
 * refused naming the option. */
static void opts_speculate(void)
{
	static const struct {
		const char *arg;
		uint64_t want;
	} good[] = {{"speculate=off", 0},
		    {"speculate=0", 0},
		    {"speculate=16M", 16ull * 1024 * 1024}};
	char arg[64], err[256];
	struct fs_opts o;

	{
		char *argv[] = {"pacefs", "http://h/x", "/m"};

		T_EQ_INT(parse(&o, err, sizeof(err), 3, argv), 0);
		T_EQ_U64(o.speculate, 64ull * 1024 * 1024);
		fs_opts_free(&o);
	}
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		char *argv[] = {"pacefs", "-o", arg, "http://h/x", "/m"};

		snprintf(arg, sizeof(arg), "%s", good[i].arg);
		T_EQ_INT(parse(&o, err, sizeof(err), 5, argv), 0);
		T_EQ_U64(o.speculate, good[i].want);
		fs_opts_free(&o);
	}
	{
		char *argv[] = {"pacefs", "-o", "speculate=never", "http://h/x",
				"/m"};

		T_EQ_INT(parse(&o, err, sizeof(err), 5, argv), -EINVAL);
		T_ASSERT(strstr(err, "option speculate: 'never'") != NULL);
	}
}

/* -o sha256=: 64 hex digits of either case, refused naming the count or
 * the first byte that is no digit. */
static void opts_sha256(void)
{
	char good[] = "sha256=00112233445566778899AABBCCDDEEFF"
		      "00112233445566778899aabbccddeeff";
	char short_[] = "sha256=0011", bad[sizeof(good)];
	struct fs_opts o;
	char err[256];

	{
		char *argv[] = {"pacefs", "-o", good, "http://h/x", "/m"};

		T_EQ_INT(parse(&o, err, sizeof(err), 5, argv), 0);
		T_ASSERT(o.has_sha256);
		T_EQ_INT(o.sha256[0], 0x00);
		T_EQ_INT(o.sha256[10], 0xaa);
		T_EQ_INT(o.sha256[31], 0xff);
		fs_opts_free(&o);
	}
	{
		char *argv[] = {"pacefs", "-o", short_, "http://h/x", "/m"};

		T_EQ_INT(parse(&o, err, sizeof(err), 5, argv), -EINVAL);
		T_EQ_STR(err, "option sha256: expected 64 hex digits, got 4 "
			      "characters");
	}
	memcpy(bad, good, sizeof(good));
	bad[7 + 41] = 'g';
	{
		char *argv[] = {"pacefs", "-o", bad, "http://h/x", "/m"};

		T_EQ_INT(parse(&o, err, sizeof(err), 5, argv), -EINVAL);
		T_EQ_STR(err, "option sha256: 'g' is not a hex digit");
	}
}

/* The -o options a document lists: "name=ARG", or a flag's name. */
struct doc_forms {
	char form[64][64];
	size_t n;
};

/* Renders a man(7) font macro line (".B", ".BI", ".BR", ...) as a reader
 * sees it: its arguments, quoted or not, joined (with a space by .B and
 * .I, without by the alternating macros), escapes undone. */
static void troff_render(const char *l, char *out, size_t cap)
{
	bool alternating = l[2] != ' ' && l[2] != '\0';
	size_t o = 0;
	int args = 0;

	l += strcspn(l, " ");
	while (*l != '\0' && o + 1 < cap) {
		bool quoted;

		l += strspn(l, " ");
		if (*l == '\0')
			break;
		if (args++ > 0 && !alternating)
			out[o++] = ' ';
		quoted = *l == '"';
		l += quoted;
		while (*l != '\0' && (quoted ? *l != '"' : *l != ' ') &&
		       o + 1 < cap) {
			if (l[0] == '\\' && l[1] == '-') {
				out[o++] = '-';
				l += 2;
			} else if (strncmp(l, "\\(dq", 4) == 0) {
				out[o++] = '"';
				l += 4;
			} else if (l[0] == '\\' && l[1] == 'f' &&
				   l[2] != '\0') {
				l += 3;
			} else if (l[0] == '\\' && l[1] == '&') {
				l += 2;
			} else if (l[0] == '\\' && l[1] != '\0') {
				out[o++] = l[1] == 'e' ? '\\' : l[1];
				l += 2;
			} else {
				out[o++] = *l++;
			}
		}
		l += quoted && *l == '"';
	}
	out[o] = '\0';
}

static void doc_forms_add(struct doc_forms *f, const char *form, size_t len)
{
	if (f->n < sizeof(f->form) / sizeof(f->form[0]))
		snprintf(f->form[f->n++], sizeof(f->form[0]), "%.*s", (int)len,
			 form);
}

/* The tags of docs/pacefs.1's OPTIONS section (the line after each .TP),
 * split at ", ": every "-o ..." but libfuse's placeholder. */
static int man_forms(struct doc_forms *f)
{
	FILE *man = fopen(PACEFS_SRCDIR "/docs/pacefs.1", "r");
	char line[512], shown[512];
	bool in = false, tag = false;

	if (man == NULL)
		return -errno;
	f->n = 0;
	while (fgets(line, sizeof(line), man) != NULL) {
		line[strcspn(line, "\n")] = '\0';
		if (strncmp(line, ".SH ", 4) == 0)
			in = strcmp(line, ".SH OPTIONS") == 0;
		if (!in)
			continue;
		if (tag && line[0] == '.' && line[1] != 'T') {
			troff_render(line, shown, sizeof(shown));
			for (char *p = shown; p != NULL;) {
				char *next = strstr(p, ", ");
				size_t len = next != NULL ? (size_t)(next - p)
							  : strlen(p);

				if (strncmp(p, "-o ", 3) == 0 &&
				    strncmp(p, "-o fuse_option", len) != 0)
					doc_forms_add(f, p + 3, len - 3);
				p = next != NULL ? next + 2 : NULL;
			}
		}
		tag = strcmp(line, ".TP") == 0;
	}
	fclose(man);
	return 0;
}

static bool has_form(const struct doc_forms *f, const char *form)
{
	for (size_t i = 0; i < f->n; i++)
		if (strcmp(f->form[i], form) == 0)
			return true;
	return false;
}

/* Fails for each form of the table that doc lacks, and for each of
 * doc's that the table lacks: an option documented otherwise than the
 * parser takes it fails both ways. */
static void forms_agree(const struct doc_forms *table,
			const struct doc_forms *doc, const char *where)
{
	for (size_t i = 0; i < table->n; i++)
		if (!has_form(doc, table->form[i]))
			T_FAIL("-o %s is the parser's; %s has no entry for it",
			       table->form[i], where);
	for (size_t i = 0; i < doc->n; i++)
		if (!has_form(table, doc->form[i]))
			T_FAIL("%s lists -o %s; the parser's table has no such "
			       "option, or writes it otherwise",
			       where, doc->form[i]);
}

/* docs/pacefs.1 lists each -o option of the parser's table, with the
 * table's form and value name, and no other: --help prints the table, so
 * the two cannot drift apart unnoticed. */
static void man_lists_the_options(void)
{
	struct doc_forms man, table = {.n = 0};
	char form[64];

	T_EQ_INT(man_forms(&man), 0);
	for (size_t i = 0; fs_opts_form(i, form, sizeof(form)) != NULL; i++)
		doc_forms_add(&table, form, strlen(form));
	T_ASSERT(table.n > 30);
	forms_agree(&table, &man, "docs/pacefs.1's OPTIONS");
}

/* README.md's option table names each -o option of the parser's, as a
 * flag or with a value alike, and no other (its value names are its
 * own: S for SECS). */
static void readme_lists_the_options(void)
{
	FILE *readme = fopen(PACEFS_SRCDIR "/README.md", "r");
	struct doc_forms doc = {.n = 0}, table = {.n = 0};
	char line[2048], form[64];
	bool in = false;

	T_ASSERT(readme != NULL);
	while (fgets(line, sizeof(line), readme) != NULL) {
		char *cell_end;

		if (strncmp(line, "#", 1) == 0)
			in = strcmp(line, "### Options\n") == 0;
		if (!in || strncmp(line, "| `-o ", 6) != 0)
			continue;
		cell_end = strstr(line + 1, " |");
		for (char *p = line;
		     cell_end != NULL && (p = strstr(p, "`-o ")) != NULL &&
		     p < cell_end;
		     p += 4) {
			size_t len = strcspn(p + 4, "=`");

			doc_forms_add(&doc, p + 4,
				      len + (p[4 + len] == '=' ? 1 : 0));
		}
	}
	fclose(readme);
	for (size_t i = 0; fs_opts_form(i, form, sizeof(form)) != NULL; i++)
		doc_forms_add(&table, form,
			      strcspn(form, "=") + (strchr(form, '=') ? 1 : 0));
	forms_agree(&table, &doc, "README.md's Options table");
}

static void name_from_url(void)
{
	char name[256], err[256];

	T_EQ_INT(fs_name_from_url("http://h/a/b/disk.img", name, sizeof(name),
				  err, sizeof(err)),
		 0);
	T_EQ_STR(name, "disk.img");
	T_EQ_INT(fs_name_from_url("https://h:8443/x/a%20b%25c.bin?sig=1#f",
				  name, sizeof(name), err, sizeof(err)),
		 0);
	T_EQ_STR(name, "a b%c.bin");
	/* A path's '+' is itself. */
	T_EQ_INT(fs_name_from_url("http://h/a+b%2B.img", name, sizeof(name),
				  err, sizeof(err)),
		 0);
	T_EQ_STR(name, "a+b+.img");
	/* A bad escape is kept as it is. */
	T_EQ_INT(fs_name_from_url("http://h/100%zz", name, sizeof(name), err,
				  sizeof(err)),
		 0);
	T_EQ_STR(name, "100%zz");
}

/* One percent-decoder for a URL's last segment, an index's href and S3's
 * encoding-type=url: each rule, with and without FS_PCT_PLUS. */
static void pct_decode_rules(void)
{
	static const struct {
		const char *in;
		size_t len; /* 0: strlen(in) */
		unsigned flags;
		size_t cap;
		int rc;
		const char *out;
	} cases[] = {
		{"a%20b%2Fc", 0, 0, 64, 0, "a b/c"},
		{"%4a%4A", 0, 0, 64, 0, "JJ"},
		/* '+' is itself in a URL path, a space in S3's encoding;
		 * "%2B" is '+' in both. */
		{"a+b%2B", 0, 0, 64, 0, "a+b+"},
		{"a+b%2B", 0, FS_PCT_PLUS, 64, 0, "a b+"},
		/* A '%' without two hex digits inside the range stays. */
		{"100%zz%4g%", 0, 0, 64, 0, "100%zz%4g%"},
		{"%4", 0, 0, 64, 0, "%4"},
		{"ab%41", 4, 0, 64, 0, "ab%4"},
		/* No NUL, escaped or not. */
		{"a%00b", 0, 0, 64, -EINVAL, NULL},
		{"a\0b", 3, FS_PCT_PLUS, 64, -EINVAL, NULL},
		/* cap counts the NUL; the first fault met is the one said. */
		{"abc", 0, 0, 4, 0, "abc"},
		{"abcd", 0, 0, 4, -ENAMETOOLONG, NULL},
		{"%41%42%43", 0, 0, 4, 0, "ABC"},
		{"ab%00cd", 0, 0, 3, -EINVAL, NULL},
		{"abc%00", 0, 0, 3, -ENAMETOOLONG, NULL},
		{"", 0, 0, 1, 0, ""},
	};
	char out[64], inplace[] = "k%2Fa+b%zz";
	size_t n;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		size_t len = cases[i].len ? cases[i].len : strlen(cases[i].in);
		int rc = fs__pct_decode(cases[i].in, len, cases[i].flags, out,
					cases[i].cap, &n);

		if (rc != cases[i].rc)
			T_FAIL("\"%s\": %d, not %d", cases[i].in, rc,
			       cases[i].rc);
		else if (rc == 0 && (strcmp(out, cases[i].out) != 0 ||
				     n != strlen(cases[i].out)))
			T_FAIL("\"%s\": \"%s\" (%zu), not \"%s\"", cases[i].in,
			       out, n, cases[i].out);
	}
	/* In place, as S3 keys are decoded. */
	T_EQ_INT(fs__pct_decode(inplace, strlen(inplace), FS_PCT_PLUS, inplace,
				sizeof(inplace), &n),
		 0);
	T_EQ_STR(inplace, "k/a b%zz");
	T_EQ_INT(n, 8);
}

/* One decoder of hex digests: the manifest's sha256 and -o sha256=. */
static void unhex_rules(void)
{
	uint8_t out[4] = {9, 9, 9, 9}, want[4] = {0x01, 0xab, 0xcd, 0xef};
	size_t at = 99;

	T_EQ_INT(fs__unhex("01abCDef", 8, out, 4, &at), 0);
	T_EQ_MEM(out, want, 4);
	memset(out, 9, sizeof(out));
	T_EQ_INT(fs__unhex("01abCDe", 7, out, 4, &at), -EINVAL);
	T_EQ_INT(fs__unhex("01abCDef0", 9, out, 4, &at), -EINVAL);
	T_EQ_INT(fs__unhex("01xbCDeg", 8, out, 4, &at), -EILSEQ);
	T_EQ_INT(at, 2);
	T_EQ_INT(fs__unhex("01ab CDe", 8, out, 4, &at), -EILSEQ);
	T_EQ_INT(at, 4);
	/* out is written only on success. */
	T_EQ_INT(out[0], 9);
}

static void name_from_url_refused(void)
{
	static const char *const bad[] = {
		"http://h/",	  "http://h",	       "http://h/dir/",
		"http://h/..",	  "http://h/a/%2E%2E", "http://h/a%2Fb",
		"http://h/a%00b",
	};
	char name[256], err[256];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (fs_name_from_url(bad[i], name, sizeof(name), err,
				     sizeof(err)) != -EINVAL) {
			T_FAIL("accepted %s as \"%s\"", bad[i], name);
			continue;
		}
		if (strstr(err, "name=") == NULL)
			T_FAIL("error for %s does not point to -o name=: %s",
			       bad[i], err);
	}
}

/* A file of 3 digest blocks of dblock bytes, each digest filled with
 * `fill`, and the whole-file digest all 0xab when has_sha256. */
static void identity_node(struct tree_node *n, struct tree_file *f,
			  uint8_t (*d)[32], bool has_sha256, uint32_t dblock,
			  uint8_t fill)
{
	memset(n, 0, sizeof(*n));
	memset(f, 0, sizeof(*f));
	n->file = f;
	n->has_size = true;
	n->size = 3 * (uint64_t)dblock - 10;
	f->has_sha256 = has_sha256;
	memset(f->sha256, 0xab, sizeof(f->sha256));
	memset(d, fill, 3 * sizeof(*d));
	f->dblock = dblock;
	f->dblocks = d;
	f->ndblocks = 3;
}

static void identity_forms(void)
{
	const char *urls[] = {"http://h/f.bin"};
	uint8_t d[3][32], list[32];
	struct tree_node n;
	struct tree_file f;
	char *got, want[512], dhex[65];

	for (int i = 0; i < 32; i++)
		snprintf(want + 2 * i, 3, "%02x", 0xab);
	/* The whole-file digest alone: the source's identity. */
	identity_node(&n, &f, d, true, 65536, 1);
	f.dblocks = NULL;
	f.ndblocks = 0;
	f.dblock = 0;
	T_ASSERT(!driver__file_has_content_identity(&n));
	got = driver__file_identity(&n, urls, 1);
	T_EQ_STR(got, "url:http://h/f.bin");
	free(got);

	/* Block digests checked before caching: the content's. */
	identity_node(&n, &f, d, true, 65536, 1);
	EVP_Digest(d, sizeof(d), list, NULL, EVP_sha256(), NULL);
	for (int i = 0; i < 32; i++)
		snprintf(dhex + 2 * i, 3, "%02x", list[i]);
	T_ASSERT(driver__file_has_content_identity(&n));
	got = driver__file_identity(&n, urls, 1);
	snprintf(want + 64, sizeof(want) - 64, " block_sha256:65536:%s", dhex);
	T_EQ_STR(got + 7, want);
	T_ASSERT(strncmp(got, "sha256:", 7) == 0);
	free(got);

	/* Without a whole-file digest, and with small blocks. */
	identity_node(&n, &f, d, false, 4096, 1);
	got = driver__file_identity(&n, urls, 1);
	snprintf(want, sizeof(want), "block_sha256:4096:%s", dhex);
	T_EQ_STR(got, want);
	free(got);

	/* Other block digests, the same whole-file digest: another identity,
	 * so blocks checked against one list never serve the other. */
	identity_node(&n, &f, d, true, 65536, 2);
	got = driver__file_identity(&n, urls, 1);
	T_ASSERT(strstr(got, dhex) == NULL);
	T_ASSERT(strncmp(got, "sha256:abab", 11) == 0);
	free(got);

	/* Digest blocks larger than a cache block are checked only with the
	 * whole file: the source's identity. */
	identity_node(&n, &f, d, true, 2 * CACHE_BLOCK_SIZE, 1);
	T_ASSERT(!driver__file_has_content_identity(&n));
	got = driver__file_identity(&n, urls, 1);
	T_EQ_STR(got, "url:http://h/f.bin");
	free(got);
}

static void argv_scrubbed(void)
{
	char a1[] = "-o", a2[] = "lanes=2,header=X-Key: k1\\,k2,mirror=http://"
				 "u:p@m/x,header=Bad,proxy=http://u:p@a:1|"
				 "b:2;v:w@c:3";
	char a3[] = "-oheader=Authorization: Bearer abc",
	     a4[] = "http://u:pw@h/f";
	char a5[] = "/mnt", a0[] = "pacefs";
	char a6[] = "https://b/k?X-Amz-Signature=beef&x=1",
	     a7[] = "-omirror=http://m/k?sig=abc,lanes=2";
	char *argv[] = {a0, a1, a2, a3, a4, a6, a7, a5, NULL};

	fs_opts_scrub_argv(8, argv);
	T_EQ_STR(a6, "https://b/k?X-Amz-Signature=****&x=1");
	T_EQ_STR(a7, "-omirror=http://m/k?sig=***,lanes=2");
	T_EQ_STR(a1, "-o");
	T_EQ_STR(a2, "lanes=2,header=X-Key:*******,mirror=http://***@m/x,"
		     "header=***,proxy=http://***@a:1|b:2;***@c:3");
	T_EQ_STR(a3, "-oheader=Authorization:***********");
	T_EQ_STR(a4, "http://****@h/f");
	T_EQ_STR(a5, "/mnt");
}

/* Writes text to a new file of the given mode; returns its path. */
static const char *header_file(const char *text, mode_t mode)
{
	static char path[] = "/tmp/pacefs-test-headers-XXXXXX";
	int fd;

	snprintf(path, sizeof(path), "/tmp/pacefs-test-headers-XXXXXX");
	fd = mkstemp(path);
	if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text))
		T_FAIL("cannot write %s", path);
	fchmod(fd, mode);
	close(fd);
	return path;
}

static void opts_header_file(void)
{
	const char *path = header_file(
		"# tokens\n\nX-Token: s3cret\r\nX-Other: 2\n", 0600);
	char opt[128], err[512];
	char *argv[] = {"pacefs",      "-o",	     opt,    "-o",
			"header=A: b", "http://h/x", "/mnt", NULL};
	struct fs_opts o;

	snprintf(opt, sizeof(opt), "header_file=%s", path);
	/* Checked when parsed, kept by path: the mount reads it (and again
	 * when it changes); -o header= stays apart. */
	T_EQ_INT(parse(&o, err, sizeof(err), 7, argv), 0);
	T_EQ_INT(o.nheader_files, 1);
	T_EQ_STR(o.header_files[0], path);
	T_EQ_INT(o.nheaders, 1);
	T_EQ_STR(o.headers[0], "A: b");
	fs_opts_free(&o);
	unlink(path);

	/* Others may read it: refused, naming the file and the mode. */
	path = header_file("X-Token: s3cret\n", 0640);
	snprintf(opt, sizeof(opt), "header_file=%s", path);
	T_EQ_INT(parse(&o, err, sizeof(err), 7, argv), -EINVAL);
	if (strstr(err, path) == NULL || strstr(err, "0640") == NULL ||
	    strstr(err, "option header_file") == NULL)
		T_FAIL("error '%s'", err);
	unlink(path);

	/* A bad line: its number, never its value. */
	path = header_file("X-Token: s3cret\nno colon s3cret\n", 0600);
	snprintf(opt, sizeof(opt), "header_file=%s", path);
	T_EQ_INT(parse(&o, err, sizeof(err), 7, argv), -EINVAL);
	if (strstr(err, "line 2") == NULL || strstr(err, "s3cret") != NULL)
		T_FAIL("error '%s'", err);
	unlink(path);

	snprintf(opt, sizeof(opt), "header_file=/nonexistent/h");
	T_EQ_INT(parse(&o, err, sizeof(err), 7, argv), -EINVAL);
	T_ASSERT(strstr(err, "/nonexistent/h") != NULL);
}

/* A blob's identity names its set of sources: the first URL alone keeps
 * its identity, mirrors change it whatever their order, and no userinfo
 * of a mirror shows. */
static void sources_identity(void)
{
	const char *one[] = {"http://h/a"};
	const char *ab[] = {"http://h/a", "http://m1/a", "http://u:pw@m2/a"};
	const char *ba[] = {"http://h/a", "http://u:pw@m2/a", "http://m1/a"};
	const char *other[] = {"http://h/a", "http://m1/a"};
	char *s1 = auth_sources_identity(one, 1);
	char *s2 = auth_sources_identity(ab, 3);
	char *s3 = auth_sources_identity(ba, 3);
	char *s4 = auth_sources_identity(other, 2);

	T_ASSERT(s1 != NULL && s2 != NULL && s3 != NULL && s4 != NULL);
	T_EQ_STR(s1, "url:http://h/a");
	T_ASSERT(strncmp(s2, "url:http://h/a\n" AUTH_IDENTITY_MIRRORS,
			 15 + strlen(AUTH_IDENTITY_MIRRORS)) == 0);
	T_EQ_STR(s2, s3);
	T_ASSERT(strcmp(s2, s4) != 0);
	T_ASSERT(strstr(s2, "pw") == NULL && strstr(s2, "m2") == NULL);
	free(s1);
	free(s2);
	free(s3);
	free(s4);
}

/* A presigned URL's identity stores neither its signature nor its token,
 * and keeps two signatures apart. */
static void signed_identity(void)
{
	char *s1 = auth_url_identity("http://h/a?X-Amz-Signature=s1&x=1");
	char *s2 = auth_url_identity("http://h/a?X-Amz-Signature=s2&x=1");
	const char *want =
		"url:http://h/a?X-Amz-Signature=**&x=1\n" AUTH_IDENTITY_SIGNED;

	T_ASSERT(s1 != NULL && s2 != NULL);
	T_ASSERT(strncmp(s1, want, strlen(want)) == 0);
	T_ASSERT(strcmp(s1, s2) != 0);
	free(s1);
	free(s2);
}

static void url_identity(void)
{
	char *plain = auth_url_identity("http://h/a?x=1");
	char *u1 = auth_url_identity("http://u:p1@h/a?x=1");
	char *u2 = auth_url_identity("http://u:p2@h/a?x=1");
	char *long1, *long2, *url = malloc(20000);

	/* Without userinfo: as it always was (caches keep their ids). */
	T_EQ_STR(plain, "url:http://h/a?x=1");
	/* With: no credential in it, and two credentials kept apart. */
	T_ASSERT(strstr(u1, "p1") == NULL && strstr(u1, "u:") == NULL);
	T_ASSERT(strncmp(u1, "url:http://h/a?x=1\n" AUTH_IDENTITY_USERINFO,
			 19 + strlen(AUTH_IDENTITY_USERINFO)) == 0);
	T_ASSERT(strcmp(u1, u2) != 0);
	/* Never cut: URLs that differ after 10,000 bytes differ. */
	memcpy(url, "http://h/?", 10);
	memset(url + 10, 'x', 19000);
	memcpy(url + 19010, "&f=a", 5);
	long1 = auth_url_identity(url);
	url[19013] = 'b';
	long2 = auth_url_identity(url);
	T_EQ_INT((int)strlen(long1), 4 + 19014);
	T_ASSERT(strcmp(long1, long2) != 0);
	free(plain);
	free(u1);
	free(u2);
	free(long1);
	free(long2);
	free(url);
}

/* Whatever a server puts in a name or a header, the log shows no byte a
 * terminal would act on: C0 controls, DEL, C1 controls (also as UTF-8)
 * and bytes that are not UTF-8 become \xNN; printable UTF-8 stays. */
static void log_escape(void)
{
	static const struct {
		const char *in, *out;
	} cases[] = {
		{"plain name.bin", "plain name.bin"},
		{"a\x1b[31mred\x1b[0m", "a\\x1b[31mred\\x1b[0m"},
		{"line\nbreak\r\ttab", "line\\x0abreak\\x0d\\x09tab"},
		{"del\x7f", "del\\x7f"},
		{"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80",
		 "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"},
		{"c1 \xc2\x9b csi", "c1 \\xc2\\x9b csi"},
		{"raw \x9b csi", "raw \\x9b csi"},
		{"latin1 \xe9t\xe9", "latin1 \\xe9t\\xe9"},
		{"cut \xe2\x82", "cut \\xe2\\x82"},
		{"overlong \xc0\xaf", "overlong \\xc0\\xaf"},
		{"surrogate \xed\xa0\x80", "surrogate \\xed\\xa0\\x80"},
	};
	char out[128];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		T_EQ_STR(fs__escape(cases[i].in, out, sizeof(out)),
			 cases[i].out);
	/* Cut when full, never in the middle of an escape. */
	T_EQ_STR(fs__escape("ab\x1b", out, 5), "ab");
	T_EQ_STR(fs__escape("abcdef", out, 4), "abc");
}

/* JSON strings hold any bytes a server chose and still parse: quotes and
 * backslashes escaped, controls as \u, bytes that are not UTF-8 as
 * \ufffd; cut only at whole escapes and sequences, with the length the
 * whole needs returned. */
static void json_escape(void)
{
	static const struct {
		const char *in, *out;
	} cases[] = {
		{"plain", "plain"},
		{"q\"b\\", "q\\\"b\\\\"},
		{"a\x1b[0m\n", "a\\u001b[0m\\u000a"},
		{"c1 \xc2\x9b del\x7f", "c1 \\u009b del\\u007f"},
		{"caf\xc3\xa9 \xf0\x9f\x98\x80",
		 "caf\xc3\xa9 \xf0\x9f\x98\x80"},
		{"latin1 \xe9", "latin1 \\ufffd"},
	};
	char out[64];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		T_EQ_U64(fs__json_escape(cases[i].in, out, sizeof(out)),
			 strlen(cases[i].out));
		T_EQ_STR(out, cases[i].out);
	}
	T_EQ_U64(fs__json_escape("ab\x01", out, 5), 8);
	T_EQ_STR(out, "ab");
	T_EQ_U64(fs__json_escape("ab\xc3\xa9", out, 4), 4);
	T_EQ_STR(out, "ab");
	T_EQ_U64(fs__json_escape("abc", NULL, 0), 3);
}

/* The mount's options for operators: each refused with one line that
 * names it. */
static void opts_metrics_and_log(void)
{
	char *good[] = {"pacefs", "-o",
			"metrics=127.0.0.1:9101,metrics_label=site=lyon,"
			"metrics_label=rack=b7,log_format=json",
			"http://h/x", "/m"};
	static const struct {
		const char *opt, *err;
	} bad[] = {
		{"metrics=127.0.0.1", "option metrics: '127.0.0.1' is not"},
		{"metrics=:9101", "option metrics:"},
		{"metrics=h:0", "option metrics: 'h:0' has no port"},
		{"metrics=h:70000", "no port from 1 to 65535"},
		{"metrics=::1:9101", "without brackets"},
		{"metrics_label=1x=a", "option metrics_label: '1x=a'"},
		{"metrics_label=novalue", "option metrics_label:"},
		{"metrics_label=__x=a", "option metrics_label:"},
		{"metrics_label=mount=a", "sets the label 'mount' itself"},
		{"metrics_label=a=\xff", "the value of 'a' is not UTF-8"},
		{"metrics_label=a=1,metrics_label=a=2", "'a' is given twice"},
		{"log_format=xml", "option log_format: 'xml' is not one of"},
	};
	struct fs_opts o;
	char err[512];

	T_EQ_INT(parse(&o, err, sizeof(err), 5, good), 0);
	T_EQ_STR(o.metrics, "127.0.0.1:9101");
	T_EQ_INT(o.nmetrics_labels, 2);
	T_EQ_STR(o.metrics_labels[1], "rack=b7");
	T_EQ_INT(o.log_format, 1);
	fs_opts_free(&o);
	T_EQ_INT(obs_metrics_addr_check("[::1]:9101", err, sizeof(err)), 0);
	T_EQ_INT(obs_metrics_addr_check("localhost:1", err, sizeof(err)), 0);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char opt[128];
		char *argv[] = {"pacefs", "-o", opt, "http://h/x", "/m"};

		snprintf(opt, sizeof(opt), "%s", bad[i].opt);
		if (parse(&o, err, sizeof(err), 5, argv) != -EINVAL ||
		    strstr(err, bad[i].err) == NULL || strchr(err, '\n'))
			T_FAIL("%s: '%s'", bad[i].opt, err);
	}
}

/* A directory finds each of many children by name (through its table once
 * it has TREE_NS_INDEX_MIN), refuses a second of one name, and paths build
 * their directories once. */
/* One URL for a file: a new array of it (the tree takes both). */
static char **one_url(const char *u)
{
	char **v = calloc(1, sizeof(*v));

	v[0] = strdup(u);
	return v;
}

/* A file's URLs as given come back from tree_ns_url byte for byte: a
 * prefix followed by its own path, percent-encoded as an index or S3
 * encodes it, kept as the prefix's number (no record of its own); any
 * other URL, mirrors, and URLs past the table's 255 prefixes stored as
 * they are. */
static void ns_urls(void)
{
	static const struct {
		const char *path, *url;
		bool own;
	} cases[] = {
		{"a/b.bin", "http://h:8080/root/a/b.bin", true},
		{"a/c d.bin", "http://h:8080/root/a/c%20d.bin", true},
		{"a/\xc3\xa9~_-.x", "https://h/a/%C3%A9~_-.x", true},
		{"a/e.bin", "http://h:8080/root/a/e.bin?sig=1", false},
		{"a/f d.bin", "http://h/a/f%20D.bin", false},
		{"a/g d.bin", "http://h/a/g d.bin", false},
		{"a/h.bin", "http://other/h.bin", false},
		{"x.bin", "http://h:8080/root/x.bin", true},
	};
	struct tree_ns *ns;
	char **two, path[64], url[96];
	uint32_t id;

	T_EQ_INT(tree_ns_new(&ns), 0);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *got;

		T_EQ_INT(tree_ns_add_path(ns, cases[i].path, &id), 0);
		T_EQ_INT(tree_ns_set_urls(ns, id, one_url(cases[i].url), 1), 0);
		T_EQ_INT(tree_node_nurls(tree_ns_get(ns, id)), 1);
		T_EQ_INT(tree_ns_get(ns, id)->url_own, cases[i].own);
		T_ASSERT(!cases[i].own || tree_ns_get(ns, id)->file == NULL);
		got = tree_ns_url(ns, id, 0);
		T_EQ_STR(got, cases[i].url);
		free(got);
		T_ASSERT(tree_ns_url(ns, id, 1) == NULL);
	}
	/* Mirrors: stored, in order. */
	T_EQ_INT(tree_ns_add_path(ns, "m.bin", &id), 0);
	two = calloc(2, sizeof(*two));
	two[0] = strdup("http://h:8080/root/m.bin");
	two[1] = strdup("http://mirror/m.bin");
	T_EQ_INT(tree_ns_set_urls(ns, id, two, 2), 0);
	T_EQ_INT(tree_node_nurls(tree_ns_get(ns, id)), 2);
	for (uint32_t u = 0; u < 2; u++) {
		char *got = tree_ns_url(ns, id, u);

		T_EQ_STR(got, u == 0 ? "http://h:8080/root/m.bin"
				     : "http://mirror/m.bin");
		free(got);
	}
	/* 300 origins: the first 255 prefixes kept, then URLs stored. */
	for (int i = 0; i < 300; i++) {
		char *got;

		snprintf(path, sizeof(path), "p/f%d", i);
		snprintf(url, sizeof(url), "http://h%d/p/f%d", i, i);
		T_EQ_INT(tree_ns_add_path(ns, path, &id), 0);
		T_EQ_INT(tree_ns_set_urls(ns, id, one_url(url), 1), 0);
		got = tree_ns_url(ns, id, 0);
		T_EQ_STR(got, url);
		free(got);
	}
	T_EQ_INT(ns->nprefixes, TREE_NS_PREFIXES);
	/* A directory has none. */
	T_EQ_INT(tree_node_nurls(tree_ns_get(ns, tree_ns_child(ns, 0, "a"))),
		 0);
	tree_ns_free(ns);
}

static void ns_many_children(void)
{
	struct tree_ns *ns;
	uint32_t id, dir, first = 0;
	char name[32];

	T_EQ_INT(tree_ns_new(&ns), 0);
	T_EQ_INT(tree_ns_add(ns, 0, "d", true, &dir), 0);
	for (uint32_t i = 0; i < 20000; i++) {
		snprintf(name, sizeof(name), "f%05u.bin", i);
		T_EQ_INT(tree_ns_add(ns, dir, name, false, &id), 0);
		if (i == 0)
			first = id;
		/* Every name added so far, old and new, stays found. */
		if (i % 997 == 0 || i == TREE_NS_INDEX_MIN - 1 ||
		    i == TREE_NS_INDEX_MIN) {
			T_EQ_U64(tree_ns_child(ns, dir, "f00000.bin"), first);
			T_EQ_U64(tree_ns_child(ns, dir, name), id);
		}
	}
	for (uint32_t i = 0; i < 20000; i++) {
		snprintf(name, sizeof(name), "f%05u.bin", i);
		id = tree_ns_child(ns, dir, name);
		T_ASSERT(id != TREE_NO_NODE);
		T_EQ_STR(tree_ns_get(ns, id)->name, name);
	}
	T_EQ_U64(tree_ns_child(ns, dir, "f20000.bin"), TREE_NO_NODE);
	T_EQ_U64(tree_ns_child(ns, dir, ""), TREE_NO_NODE);
	T_EQ_INT(tree_ns_add(ns, dir, "f12345.bin", false, &id), -EEXIST);
	T_EQ_INT(tree_ns_add_path(ns, "d/f00001.bin/x", &id), -ENOTDIR);
	for (uint32_t i = 0; i < 100; i++) {
		snprintf(name, sizeof(name), "a/b/c%u", i);
		T_EQ_INT(tree_ns_add_path(ns, name, &id), 0);
	}
	dir = tree_ns_child(ns, tree_ns_child(ns, 0, "a"), "b");
	T_EQ_INT(tree_ns_get(ns, dir)->dir->nchildren, 100);
	T_ASSERT(tree_ns_child(ns, dir, "c99") != TREE_NO_NODE);
	tree_ns_free(ns);
}

/* Region, endpoint and bucket go into URLs: only what botocore allows. */
static void s3_names(void)
{
	static const struct {
		const char *url, *endpoint, *region, *addressing;
		int rc;
		const char *err; /* a part of the line */
	} cases[] = {
		{"s3://bkt/", NULL, "eu-west-1", NULL, 0, NULL},
		{"s3://bkt/", NULL, "localhost:1#", NULL, -EINVAL,
		 "AWS_REGION: 'localhost:1#' is no region"},
		{"s3://bkt/", NULL, "-eu", NULL, -EINVAL, "is no region"},
		{"s3://bkt/", NULL, "eu.west", NULL, -EINVAL, "is no region"},
		{"s3://bkt/", "http://127.0.0.1:9000", "us-east-1", NULL, 0,
		 NULL},
		{"s3://bkt/", "http://[::1]:9000/", "us-east-1", NULL, 0, NULL},
		{"s3://bkt/", "http://h:9000?x", "us-east-1", NULL, -EINVAL,
		 "option endpoint"},
		{"s3://bkt/", "http://h:9000#x", "us-east-1", NULL, -EINVAL,
		 "option endpoint"},
		{"s3://bkt/", "http://u@h", "us-east-1", NULL, -EINVAL,
		 "option endpoint"},
		{"s3://bkt/", "http://h:99999", "us-east-1", NULL, -EINVAL,
		 "option endpoint"},
		{"s3://bkt/", "http://h%2e", "us-east-1", NULL, -EINVAL,
		 "option endpoint"},
		{"s3://Legacy_B/", "http://h", "us-east-1", NULL, 0, NULL},
		{"s3://Legacy_B/", "http://h", "us-east-1", "virtual", -EINVAL,
		 "cannot go into a host name"},
		{"s3://Legacy_B/", NULL, "us-east-1", NULL, -EINVAL,
		 "cannot go into a host name"},
		{"s3://b#x/", "http://h", "us-east-1", NULL, -EINVAL,
		 "is no bucket name"},
		{"s3://192.168.0.1/", NULL, "us-east-1", NULL, -EINVAL,
		 "cannot go into a host name"},
		{"s3://a..b/", NULL, "us-east-1", NULL, -EINVAL,
		 "cannot go into a host name"},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct tree_s3 s;
		char err[512] = "";
		int rc = tree_s3_parse(cases[i].url, cases[i].endpoint,
				       cases[i].region, "AWS_REGION",
				       cases[i].addressing, &s, err,
				       sizeof(err));

		if (rc != cases[i].rc ||
		    (cases[i].err != NULL && strstr(err, cases[i].err) == NULL))
			T_FAIL("case %zu: %d '%s'", i, rc, err);
		if (rc == 0)
			tree_s3_free(&s);
	}
}

static const struct t_case cases[] = {
	{"s3_names", s3_names},
	{"identity_forms", identity_forms},
	{"argv_scrubbed", argv_scrubbed},
	{"signed_identity", signed_identity},
	{"opts_header_file", opts_header_file},
	{"url_identity", url_identity},
	{"sources_identity", sources_identity},
	{"opts_defaults", opts_defaults},
	{"opts_ours_and_fuse", opts_ours_and_fuse},
	{"opts_errors_name_the_option", opts_errors_name_the_option},
	{"opts_chunk_and_proxy", opts_chunk_and_proxy},
	{"opts_sha256", opts_sha256},
	{"opts_speculate", opts_speculate},
	{"man_lists_the_options", man_lists_the_options},
	{"readme_lists_the_options", readme_lists_the_options},
	{"name_from_url", name_from_url},
	{"name_from_url_refused", name_from_url_refused},
	{"pct_decode_rules", pct_decode_rules},
	{"unhex_rules", unhex_rules},
	{"log_escape", log_escape},
	{"json_escape", json_escape},
	{"opts_metrics_and_log", opts_metrics_and_log},
	{"ns_many_children", ns_many_children},
	{"ns_urls", ns_urls},
};

int main(int argc, char **argv)
{
	return T_RUN(argc, argv, cases);
}

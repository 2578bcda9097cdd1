/* parse_int: the pure parsers of fs/ (manifests and HTML directory
 * indexes); no other folder includes this. */
#ifndef FS_PARSE_INT_H
#define FS_PARSE_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The value of a hex digit, or -1. */
static inline int fs__hexval(char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	if (ch >= 'A' && ch <= 'F')
		return ch - 'A' + 10;
	return -1;
}

/* Days from 1970-01-01 to y-m-d in the proleptic Gregorian calendar
 * (m 1..12, d 1..31); the civil-date algorithm both parsers share. */
static inline int64_t fs__days_from_civil(int64_t y, unsigned m, unsigned d)
{
	int64_t era, yoe, doy, doe;

	y -= m <= 2;
	era = (y >= 0 ? y : y - 399) / 400;
	yoe = y - era * 400;
	doy = (153 * (int64_t)(m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
	doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + doe - 719468;
}

/* Days in month m (1..12) of year y. */
static inline unsigned fs__month_days(int64_t y, unsigned m)
{
	static const unsigned char days[12] = {31, 28, 31, 30, 31, 30,
					       31, 31, 30, 31, 30, 31};
	bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;

	return m == 2 && leap ? 29 : days[m - 1];
}

/* Request headers (fs/headers.c). */
#define FS_HEADERS_MAX 64	 /* headers one file may give */
#define FS_HEADER_FILE_MAX 65536 /* bytes of a header file */

/* 0 when the len bytes at h are one header, "Name: value": a token for a
 * name, a colon, a value without control characters but tab; else
 * -EINVAL. */
int fs__header_check(const char *h, size_t len);

/* Parses the lines of a header file, len bytes (need not be
 * NUL-terminated): "Name: value" each, blank lines and lines starting with
 * '#' skipped, a CR before a line end dropped. Returns 0 with *out (*n
 * strings; free with fs__headers_free), or -EINVAL with one line naming
 * the line number (never the value) in err, or -ENOMEM. Thread-safe. */
int fs__headers_parse(const char *text, size_t len, char ***out, unsigned *n,
		      char *err, size_t errlen);

/* Reads and parses the header file at path, which must be a regular file
 * owned by uid that neither group nor others may read or write. Errors:
 * -EACCES (owner, mode), -EFBIG, -EINVAL, an errno of open; one line
 * starting with the path in err. */
int fs__headers_load(const char *path, uid_t uid, char ***out, unsigned *n,
		     char *err, size_t errlen);

/* Frees n headers, wiping them first; NULL is a no-op. */
void fs__headers_free(char **list, unsigned n);

/* Limits a manifest is checked against; see docs/manifest.md. */
#define FS_MANIFEST_PATH_MAX 4096	  /* bytes in a whole path */
#define FS_MANIFEST_NAME_MAX 255	  /* bytes in one path component */
#define FS_MANIFEST_URLS_MAX 64		  /* urls of one entry */
#define FS_MANIFEST_URL_MAX 8192	  /* bytes in one URL */
#define FS_MANIFEST_BLOCK_MIN 4096u	  /* smallest block_size */
#define FS_MANIFEST_BLOCK_MAX (64u << 20) /* largest block_size */
#define FS_MANIFEST_FILE_MAX (256u << 20) /* bytes fs__manifest_load reads */

/* One file of a manifest. Everything is owned by the manifest. */
struct fs_manifest_entry {
	char *path;  /* relative, checked: no empty, "." or ".."
			component, no NUL */
	char **urls; /* http:// or https://, at least one */
	uint32_t nurls;
	bool has_size;
	uint64_t size;
	bool has_sha256;
	uint8_t sha256[32];
	uint32_t block_size;	     /* 0 when absent */
	uint8_t (*block_sha256)[32]; /* nblocks digests, or NULL */
	uint32_t nblocks;	     /* ceil(size / block_size) when present */
	bool has_mode;
	uint32_t mode; /* permission bits only (& 07777) */
	bool has_mtime;
	int64_t mtime; /* seconds since the epoch, UTC */
};

/* A parsed manifest: the files in the order the manifest lists them, with
 * unique paths of which none is a directory of another. */
struct fs_manifest {
	struct fs_manifest_entry *files;
	uint32_t nfiles;
};

/* Parses and checks a manifest of len bytes (need not be NUL-terminated).
 * Returns 0 and fills *out, which the caller frees with fs__manifest_free;
 * or returns -EINVAL (bad JSON or a broken rule) or -ENOMEM, writes one
 * line into err naming the entry index and the field ("files[3].sha256:
 * expected 64 hex digits, got 63") or, for JSON syntax, the line and
 * column, and leaves *out untouched. Thread-safe. */
int fs__manifest_parse(const char *text, size_t len, struct fs_manifest *out,
		       char *err, size_t errlen);

/* Reads the file at path (at most FS_MANIFEST_FILE_MAX bytes) and parses
 * it as fs__manifest_parse does. Errors are as there, or the negative
 * errno of open or read (-EFBIG when too large); the line in err starts
 * with the path. */
int fs__manifest_load(const char *path, struct fs_manifest *out, char *err,
		      size_t errlen);

/* Frees what the manifest owns and zeroes it; NULL is a no-op. */
void fs__manifest_free(struct fs_manifest *m);

/* Most entries one index page may list, and the longest name kept. */
#define FS_DIRINDEX_MAX 1048576u
#define FS_DIRINDEX_NAME_MAX 255

/* One entry of an HTML directory index. */
struct fs_index_entry {
	char *name; /* percent-decoded, never "", ".", "..", nor holding '/'
		       or NUL; no trailing slash */
	bool is_dir;
	bool has_size; /* false for "-", for human sizes like "1.2M" and for
			  numbers over INT64_MAX */
	uint64_t size;
	bool has_mtime;
	int64_t mtime; /* the listed time read as UTC, seconds */
	/* An object store's listing (fs/s3.c) says more; NULL otherwise. */
	char *url;	/* where the entry is (a file's URL, a directory's
			   listing), instead of an href of the page */
	char *etag;	/* its validator, as listed */
	char *identity; /* its cache identity */
};

/* Parses an nginx autoindex or Apache mod_autoindex page (fancy table,
 * fancy preformatted and plain list forms) of len bytes, which need not be
 * NUL-terminated. Names come from relative hrefs of the same directory
 * level; everything else (parent, sort links, absolute URLs, fragments,
 * other schemes) is skipped, and a name listed twice is kept once, in the
 * order of first appearance. Any input is accepted: a page without
 * entries gives n == 0 (and *out NULL). Returns 0, or -ENOMEM or -E2BIG
 * (more than FS_DIRINDEX_MAX entries) with one line in err and *out, *n
 * untouched. The caller frees *out with fs__dirindex_free. Thread-safe. */
int fs__dirindex_parse(const char *html, size_t len,
		       struct fs_index_entry **out, uint32_t *n, char *err,
		       size_t errlen);

/* Frees n entries and their names; NULL is a no-op. */
void fs__dirindex_free(struct fs_index_entry *e, uint32_t n);

/* S3 (fs/s3xml.c, libxml2). One entry of a ListObjectsV2 page. */
struct fs_s3_item {
	char *key;     /* decoded (encoding-type=url undone) */
	bool is_prefix; /* a CommonPrefixes entry: a directory */
	uint64_t size;
	bool has_mtime;
	int64_t mtime; /* LastModified, seconds since the epoch */
	char *etag;    /* as listed, quotes kept; NULL for a prefix */
};

/* A parsed ListObjectsV2 page. */
struct fs_s3_page {
	struct fs_s3_item *items;
	uint32_t n;
	bool truncated;
	char *next_token; /* NextContinuationToken; NULL when none */
};

/* Most entries one page may list (S3 sends at most 1000). */
#define FS_S3_PAGE_MAX 100000u

/* Parses a ListObjectsV2 answer of len bytes (libxml2; no entity is
 * expanded, nothing is fetched). Keys are decoded when the page says
 * EncodingType url ('+' a space, %XX a byte). Returns 0 with *out (free
 * with fs__s3_page_free), or -EINVAL (not such a document, a key that
 * decodes to a NUL, a size that is no number) or -ENOMEM with one line in
 * err. Thread-safe. */
int fs__s3_page_parse(const char *xml, size_t len, struct fs_s3_page *out,
		      char *err, size_t errlen);
void fs__s3_page_free(struct fs_s3_page *p);

/* Reads an S3 error document: its Code, Message and Region (empty when
 * absent), each cut to its buffer. -EINVAL when it is no <Error>. */
int fs__s3_error_parse(const char *xml, size_t len, char *code,
		       size_t codelen, char *message, size_t msglen,
		       char *region, size_t regionlen);

/* An AWS profile as ~/.aws/credentials and ~/.aws/config give it
 * (fs/awsconf.c). Strings are owned; NULL when absent. */
struct fs_aws_profile {
	char *access_key_id;
	char *secret_access_key;
	char *session_token;
	char *region;
	char *credential_process;
};

/* Reads profile `name` from the INI text of len bytes: in a credentials
 * file its section is [NAME]; in a config file (config true) [profile
 * NAME], or [default] for "default". Keys are case-insensitive, values
 * trimmed; '#' and ';' start comments. Fills what the section holds (a
 * later key wins) into *out, whose fields the caller frees with
 * fs__aws_profile_free (they may be set already: a field the text gives
 * replaces it). Returns 1 when the section is there, 0 when not, -ENOMEM.
 * Thread-safe. */
int fs__aws_profile_parse(const char *text, size_t len, const char *name,
			  bool config, struct fs_aws_profile *out);
void fs__aws_profile_free(struct fs_aws_profile *p);

#endif

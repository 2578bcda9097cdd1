/* auth: a mount's credentials (the AWS key, header files, an auth
 * command) and what keeps them out of sight: the request headers'
 * parser and the cache identities of URLs with userinfo. What the rest of
 * fs/ may ask of creds.c, headers.c and identity.c. */
#ifndef FS_AUTH_H
#define FS_AUTH_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "fs/base.h"

/* Credentials (fs/auth/creds.c): the sources of a mount's credentials and the
 * thread that keeps them current in a fetch_auth. */
struct auth_creds;
struct fetch_auth;

struct auth_creds_config {
	bool s3;		  /* find an AWS key (none is no error) */
	bool readable_ok;	  /* -o creds_readable */
	const char *auth_command; /* -o auth_command=, or NULL */
	char **header_files;	  /* -o header_file= */
	unsigned nheader_files;
	char **headers; /* -o header=, sent first */
	unsigned nheaders;
	uid_t uid;	    /* who must own a header file */
	unsigned timeout_s; /* the most a command may run (-o read_timeout=) */
	/* Where the thread's log lines go (obs/'s obs_log_hook); NULL:
	 * nowhere. Called without the object's lock. */
	void (*log)(void *ctx, enum fs_log_level level, const char *fmt,
		    va_list ap);
	void *log_ctx;
};

/* Loads every source once and hands the set to auth; one line in err
 * naming the source when one fails (a header file, the command and why:
 * its status, its deadline, an Expiration past or within a minute; a
 * file that is not a regular file, is another user's, or that others may
 * write, or read when it holds a secret; a key or token with a control
 * byte). Commands run with descriptors 0-2 only, for at most
 * cfg->timeout_s, and are killed with what they started. Strings of cfg
 * are borrowed for the object's life. */
int auth_creds_new(const struct auth_creds_config *cfg, struct fetch_auth *auth,
		   struct auth_creds **out, char *err, size_t errlen);

/* Starts the thread that reads the sources again: a file that changed
 * (checked every second), a command's credentials that are about to
 * expire, and at once when an origin refuses the current set. */
int auth_creds_start(struct auth_creds *c);

/* Stops the thread, killing a command it runs; before the fetch_auth is
 * freed. NULL: no-op. */
void auth_creds_free(struct auth_creds *c);

/* True when the credentials can change while the mount lives (a header
 * file, a command, AWS files watched): a refusal by an origin is then
 * a wait for new ones, not a verdict on the source. */
bool auth_creds_changeable(const struct auth_creds *c);

/* Where the AWS key came from, for error lines ("profile 'x' in FILE"),
 * copied into buf (cap bytes): buf, or NULL when none was found.
 * Thread-safe (a reload may change it). */
const char *auth_creds_source(const struct auth_creds *c, char *buf,
			      size_t cap);

/* The region: opt (-o region=), else AWS_REGION, AWS_DEFAULT_REGION, the
 * profile's region in the config file, else us-east-1. */
void auth_creds_region(const char *opt, char *out, size_t cap);

/* What follows a newline in the identity of a URL with userinfo, in that
 * of a URL with a signed query (and no userinfo), and in that of a URL
 * with mirrors. */
#define AUTH_IDENTITY_USERINFO "userinfo-sha256:"
#define AUTH_IDENTITY_SIGNED "signed-sha256:"
#define AUTH_IDENTITY_MIRRORS "mirrors-sha256:"

/* fs/auth/identity.c. The cache identity of url, whole (never cut): "url:" +
 * url when it has neither userinfo nor a signed query
 * (fetch_url_signed); else "url:" + url without its userinfo and with its
 * signed values masked (fetch_url_masked) + "\n" AUTH_IDENTITY_USERINFO
 * (or AUTH_IDENTITY_SIGNED when it has no userinfo) + the hex SHA-256 of the
 * whole URL, so that no credential is stored and two never share bytes. A
 * new string (free() it); NULL when memory ran out. */
char *auth_url_identity(const char *url);

/* The cache identity of a blob served by urls[0..n): the first URL's
 * (auth_url_identity), and with mirrors "\n" AUTH_IDENTITY_MIRRORS + the hex
 * SHA-256 of the other URLs, sorted, so that bytes a set of sources
 * served are never found by a mount of other sources. A new string (free()
 * it); NULL when memory ran out. */
char *auth_sources_identity(const char *const *urls, uint32_t n);

/* Request headers (fs/auth/headers.c). */
#define AUTH_HEADERS_MAX 64	   /* headers one file may give */
#define AUTH_HEADER_FILE_MAX 65536 /* bytes of a header file */

/* 0 when the len bytes at h are one header, "Name: value": a token for a
 * name, a colon, a value without control characters but tab; else
 * -EINVAL. */
int auth_header_check(const char *h, size_t len);

/* Parses the lines of a header file, len bytes (need not be
 * NUL-terminated): "Name: value" each, blank lines and lines starting with
 * '#' skipped, a CR before a line end dropped. Returns 0 with *out (*n
 * strings; free with auth_headers_free), or -EINVAL with one line naming
 * the line number (never the value) in err, or -ENOMEM. Thread-safe. */
int auth_headers_parse(const char *text, size_t len, char ***out, unsigned *n,
		       char *err, size_t errlen);

/* Reads and parses the header file at path, which must be a regular file
 * owned by uid that neither group nor others may read or write. Errors:
 * -EACCES (owner, mode), -EFBIG, -EINVAL, an errno of open; one line
 * starting with the path in err. */
int auth_headers_load(const char *path, uid_t uid, char ***out, unsigned *n,
		      char *err, size_t errlen);

/* The header pacefs sets itself ("Range", "If-Range", "Accept-Encoding",
 * "Host") that the header line at h (len bytes) would set, or NULL. Every
 * path a header comes by refuses these: -o header=, a header file, the
 * output of -o auth_command=. */
const char *auth_header_owned(const char *h, size_t len);

/* 0 when v (a key, a secret, a session token) holds no control byte,
 * else the first one: a CR or LF there would add a header to every
 * request. NULL is 0. */
int auth_token_check(const char *v);

/* What a file of credentials holds, for auth_file_check. */
enum auth_file_kind {
	AUTH_FILE_HEADERS, /* a header file: private, no override */
	AUTH_FILE_SECRETS, /* keys or a token: private unless readable_ok */
	AUTH_FILE_COMMAND, /* a command pacefs runs (credential_process):
			    others may read it */
};

/* The rule for a file pacefs takes secrets or commands from, st being
 * what fstat said of it: owned by uid, writable by neither group nor
 * others (whatever readable_ok says: who writes it chooses what is sent
 * and run), and for secrets readable by neither unless kind is
 * AUTH_FILE_SECRETS and readable_ok. Returns 0, or -EACCES with one line
 * in err naming the path, its mode or owner, who may do what, and the
 * fix. */
int auth_file_check(const char *path, const struct stat *st, uid_t uid,
		    enum auth_file_kind kind, bool readable_ok, char *err,
		    size_t errlen);

/* Frees n headers, wiping them first; NULL is a no-op. */
void auth_headers_free(char **list, unsigned n);

#endif

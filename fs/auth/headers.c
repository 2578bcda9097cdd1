/* headers: request headers as the user gives them: one -o header= value,
 * or the lines of a -o header_file= (which keeps secrets out of the
 * command line), checked before any is sent. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs/auth/auth.h"

/* RFC 9110's token characters, of which a field name is made. */
static bool is_tchar(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9') || strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

int auth_header_check(const char *h, size_t len)
{
	size_t i = 0;

	while (i < len && h[i] != '\0' && is_tchar(h[i]))
		i++;
	if (i == 0 || i == len || h[i] != ':')
		return -EINVAL;
	/* A value holds visible characters, blanks and tabs: a line end
	 * would start another header, a NUL would cut it. */
	for (i++; i < len; i++) {
		unsigned char c = (unsigned char)h[i];

		if ((c < 0x20 && c != '\t') || c == 0x7f)
			return -EINVAL;
	}
	return 0;
}

const char *auth_header_owned(const char *h, size_t len)
{
	/* A range, its validator, the bytes as stored (another
	 * Accept-Encoding would get every range refused) and the host a
	 * URL names: a header line that set one would replace pacefs's. */
	static const char *const owned[] = {"Range", "If-Range",
					    "Accept-Encoding", "Host"};
	const char *colon = memchr(h, ':', len);

	for (size_t i = 0;
	     colon != NULL && i < sizeof(owned) / sizeof(owned[0]); i++)
		if ((size_t)(colon - h) == strlen(owned[i]) &&
		    strncasecmp(h, owned[i], strlen(owned[i])) == 0)
			return owned[i];
	return NULL;
}

int auth_token_check(const char *v)
{
	for (size_t i = 0; v != NULL && v[i] != '\0'; i++) {
		unsigned char c = (unsigned char)v[i];

		/* A line end in a value would start another header. */
		if (c < 0x20 || c == 0x7f)
			return c;
	}
	return 0;
}

int auth_file_check(const char *path, const struct stat *st, uid_t uid,
		    enum auth_file_kind kind, bool readable_ok, char *err,
		    size_t errlen)
{
	mode_t m = st->st_mode;
	const char *who;

	if (st->st_uid != uid) {
		return fs__errf(
			err, errlen, -EACCES,
			"%s: owned by uid %u, not by the user who mounts "
			"(uid %u); refused: its owner could change what it "
			"holds. chown it",
			path, (unsigned)st->st_uid, (unsigned)uid);
	}
	/* Others who may write it choose the secrets pacefs sends and the
	 * commands it runs: no option accepts that. */
	if ((m & (S_IWGRP | S_IWOTH)) != 0) {
		who = (m & S_IWGRP) && (m & S_IWOTH) ? "group and others"
		      : (m & S_IWGRP)		     ? "group"
						     : "others";
		return fs__errf(err, errlen, -EACCES,
				"%s: mode %04o lets %s write to it%s; refused. "
				"chmod go-w it",
				path, (unsigned)(m & 07777), who,
				(m & (S_IRGRP | S_IROTH)) ? " and read it"
							  : "");
	}
	if (kind == AUTH_FILE_COMMAND || (m & 077) == 0 ||
	    (kind == AUTH_FILE_SECRETS && readable_ok))
		return 0;
	who = (m & 070) && (m & 07) ? "group and others"
	      : (m & 070)	    ? "group"
				    : "others";
	return fs__errf(err, errlen, -EACCES,
			"%s: mode %04o lets %s %s its secrets; "
			"chmod 600 it%s",
			path, (unsigned)(m & 07777), who,
			(m & (S_IRGRP | S_IROTH)) ? "read" : "execute",
			kind == AUTH_FILE_SECRETS
				? " (or mount with -o creds_readable)"
				: "");
}

void auth_headers_free(char **list, unsigned n)
{
	for (unsigned i = 0; list != NULL && i < n; i++) {
		/* They were secrets: do not leave them in freed memory. */
		explicit_bzero(list[i], strlen(list[i]));
		free(list[i]);
	}
	free(list);
}

int auth_headers_parse(const char *text, size_t len, char ***out, unsigned *n,
		       char *err, size_t errlen)
{
	char **list = NULL;
	unsigned count = 0, line = 0;
	size_t at = 0;
	int rc = 0;

	while (at < len) {
		const char *s = text + at;
		const char *nl = memchr(s, '\n', len - at);
		size_t l = nl != NULL ? (size_t)(nl - s) : len - at;
		char **grown;

		at += l + (nl != NULL);
		line++;
		if (l > 0 && s[l - 1] == '\r')
			l--;
		if (l == 0 || s[0] == '#')
			continue;
		if (auth_header_check(s, l) != 0) {
			/* The value is never quoted back: it is a secret. */
			rc = fs__errf(err, errlen, -EINVAL,
				      "line %u: not 'Name: value' (a name of "
				      "letters, digits and !#$%%&'*+-.^_`|~, a "
				      "colon, then a value without control "
				      "characters)",
				      line);
			goto out;
		}
		if (auth_header_owned(s, l) != NULL) {
			rc = fs__errf(err, errlen, -EINVAL,
				      "line %u: pacefs sets %s itself", line,
				      auth_header_owned(s, l));
			goto out;
		}
		if (count == AUTH_HEADERS_MAX) {
			rc = fs__errf(err, errlen, -EINVAL,
				      "line %u: more than %d headers", line,
				      AUTH_HEADERS_MAX);
			goto out;
		}
		grown = realloc(list, (count + 1) * sizeof(*list));
		if (grown == NULL) {
			rc = -ENOMEM;
			goto out;
		}
		list = grown;
		list[count] = strndup(s, l);
		if (list[count] == NULL) {
			rc = -ENOMEM;
			goto out;
		}
		count++;
	}
out:
	if (rc == -ENOMEM)
		fs__errf(err, errlen, rc, "out of memory");
	if (rc != 0) {
		auth_headers_free(list, count);
		return rc;
	}
	*out = list;
	*n = count;
	return 0;
}

int auth_headers_load(const char *path, uid_t uid, char ***out, unsigned *n,
		      char *err, size_t errlen)
{
	char *text = NULL, why[256] = "";
	struct stat st;
	ssize_t got;
	int fd, rc;

	/* Non-blocking: a FIFO put there would hold the open for ever. */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0) {
		rc = -errno;
		return fs__errf(err, errlen, rc, "%s: %s", path, strerror(-rc));
	}
	if (fstat(fd, &st) != 0) {
		rc = -errno;
		fs__errf(err, errlen, rc, "%s: %s", path, strerror(-rc));
		goto out;
	}
	rc = -EACCES;
	if (!S_ISREG(st.st_mode)) {
		fs__errf(err, errlen, rc, "%s: not a regular file", path);
		goto out;
	}
	/* Secrets in a file others can read, or replace, are no secrets. */
	rc = auth_file_check(path, &st, uid, AUTH_FILE_HEADERS, false, err,
			     errlen);
	if (rc != 0)
		goto out;
	if (st.st_size > AUTH_HEADER_FILE_MAX) {
		rc = -EFBIG;
		fs__errf(err, errlen, rc, "%s: larger than %d bytes", path,
			 AUTH_HEADER_FILE_MAX);
		goto out;
	}
	text = malloc((size_t)st.st_size + 1);
	if (text == NULL) {
		rc = -ENOMEM;
		fs__errf(err, errlen, rc, "%s: out of memory", path);
		goto out;
	}
	got = read(fd, text, (size_t)st.st_size + 1);
	if (got < 0 || got > st.st_size) {
		rc = got < 0 ? -errno : -EFBIG;
		fs__errf(err, errlen, rc, "%s: %s", path,
			 got < 0 ? strerror(errno) : "it grew while read");
		goto out;
	}
	rc = auth_headers_parse(text, (size_t)got, out, n, why, sizeof(why));
	if (rc != 0)
		fs__errf(err, errlen, rc, "%s: %s", path, why);
	explicit_bzero(text, (size_t)got);
out:
	free(text);
	close(fd);
	return rc;
}

/* urlfile: a URL that is no argument. A presigned URL is a credential,
 * and an argument is in /proc/PID/cmdline for every local user to read
 * until it is parsed and masked: given as "-", the URL (and its mirrors)
 * comes from -o url_file= or standard input instead, and never is one. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs/auth/auth.h"
#include "fs/base.h"
#include "fs/cli/cli_int.h"
#include "fs/fs.h"

/* The most a URL file or standard input may hold. */
#define URL_TEXT_MAX 65536

/* Reads all of fd (at most URL_TEXT_MAX bytes) into a new string. */
static int read_all(int fd, char **out, size_t *len)
{
	char *text = malloc(URL_TEXT_MAX + 1);
	size_t used = 0;
	ssize_t got;
	int rc = 0;

	if (text == NULL)
		return -ENOMEM;
	while (used <= URL_TEXT_MAX) {
		got = read(fd, text + used, URL_TEXT_MAX + 1 - used);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0) {
			rc = -errno;
			goto out;
		}
		if (got == 0)
			break;
		used += (size_t)got;
	}
	if (used > URL_TEXT_MAX) {
		rc = -EFBIG;
		goto out;
	}
	text[used] = '\0';
	*out = text;
	*len = used;
	text = NULL;
out:
	if (text != NULL) {
		explicit_bzero(text, used);
		free(text);
	}
	return rc;
}

/* Opens the url_file at path, checked as a file of secrets is: the
 * user's, and neither readable nor writable by others. */
static int open_checked(const char *path, int *fd, char *err, size_t errlen)
{
	struct stat st;
	int rc;

	/* Non-blocking: a FIFO put there would hold the open for ever. */
	*fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (*fd < 0)
		return fs__errf(err, errlen, -errno, "option url_file: %s: %s",
				path, strerror(errno));
	if (fstat(*fd, &st) != 0) {
		rc = fs__errf(err, errlen, -errno, "option url_file: %s: %s",
			      path, strerror(errno));
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		rc = fs__errf(err, errlen, -EACCES,
			      "option url_file: %s: not a regular file", path);
		goto out;
	}
	rc = auth_file_check(path, &st, geteuid(), AUTH_FILE_HEADERS, false,
			     err, errlen);
	if (rc != 0) {
		char why[1024];

		snprintf(why, sizeof(why), "%s", err);
		rc = fs__errf(err, errlen, rc, "option url_file: %s", why);
	}
out:
	if (rc != 0) {
		close(*fd);
		*fd = -1;
	}
	return rc;
}

/* Takes the lines of text: the first URL is o->url, the others mirrors.
 * Blank lines and lines starting with '#' are left out. */
static int take_lines(struct fs_opts *o, char *text, const char *from,
		      char *err, size_t errlen)
{
	char *line = text, **grown;

	while (*line != '\0') {
		size_t n = strcspn(line, "\r\n");
		char *next = line + n + (line[n] != '\0');
		char *copy;

		line[n] = '\0';
		while (*line == ' ' || *line == '\t')
			line++;
		if (*line == '\0' || *line == '#') {
			line = next;
			continue;
		}
		copy = strdup(line);
		if (copy == NULL)
			return fs__errf(err, errlen, -ENOMEM, "out of memory");
		if (o->url == NULL) {
			o->url = copy;
		} else {
			grown = realloc(o->mirrors,
					(o->nmirrors + 1) * sizeof(*grown));
			if (grown == NULL) {
				free(copy);
				return fs__errf(err, errlen, -ENOMEM,
						"out of memory");
			}
			o->mirrors = grown;
			o->mirrors[o->nmirrors++] = copy;
		}
		line = next;
	}
	if (o->url == NULL)
		return fs__errf(err, errlen, -EINVAL, "%s: no URL in it", from);
	return 0;
}

int cli__url_read(struct fs_opts *o, char *err, size_t errlen)
{
	char from[PATH_MAX + 32], *text = NULL;
	size_t len = 0;
	int fd = STDIN_FILENO, rc;

	if (o->url == NULL || strcmp(o->url, "-") != 0) {
		if (o->url_file == NULL)
			return 0;
		return fs__errf(err, errlen, -EINVAL,
				"option url_file: the URL argument must be "
				"'-' (or left out), not '%s'",
				o->url);
	}
	if (o->url_file != NULL)
		snprintf(from, sizeof(from), "option url_file: %s",
			 o->url_file);
	else
		snprintf(from, sizeof(from), "standard input");
	if (o->url_file != NULL) {
		rc = open_checked(o->url_file, &fd, err, errlen);
		if (rc != 0)
			return rc;
	}
	rc = read_all(fd, &text, &len);
	if (fd != STDIN_FILENO)
		close(fd);
	if (rc != 0)
		return fs__errf(err, errlen, rc, "%s: %s", from,
				rc == -EFBIG ? "larger than 64 KiB"
					     : strerror(-rc));
	free(o->url);
	o->url = NULL;
	rc = take_lines(o, text, from, err, errlen);
	explicit_bzero(text, len);
	free(text);
	return rc;
}

/* listing: --autoindex, an nginx-style HTML listing of a directory. */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "contrib/origin/origin_int.h"

/* A growing text buffer for listings; on allocation failure it sets oom and
 * stops growing. */
struct text {
	char *buf;
	size_t len, cap;
	bool oom;
};

static void text_add(struct text *t, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void text_add(struct text *t, const char *fmt, ...)
{
	va_list ap;
	size_t want;
	char *nb;
	int n;

	for (;;) {
		if (t->oom)
			return;
		va_start(ap, fmt);
		n = vsnprintf(t->buf ? t->buf + t->len : NULL,
			      t->buf ? t->cap - t->len : 0, fmt, ap);
		va_end(ap);
		if (n < 0) {
			t->oom = true;
			return;
		}
		if (t->buf && (size_t)n < t->cap - t->len) {
			t->len += (size_t)n;
			return;
		}
		want = t->cap ? t->cap * 2 : 4096;
		while (want < t->len + (size_t)n + 1)
			want *= 2;
		nb = realloc(t->buf, want);
		if (!nb) {
			t->oom = true;
			return;
		}
		t->buf = nb;
		t->cap = want;
	}
}

/* Appends name percent-encoded for an href (unreserved bytes kept). */
static void text_add_href(struct text *t, const char *name)
{
	const unsigned char *p;

	for (p = (const unsigned char *)name; *p; p++) {
		if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		    (*p >= '0' && *p <= '9') || strchr("-._~", *p))
			text_add(t, "%c", *p);
		else
			text_add(t, "%%%02X", *p);
	}
}

/* Appends name with HTML's special characters escaped. */
static void text_add_html(struct text *t, const char *name)
{
	const char *p;

	for (p = name; *p; p++) {
		switch (*p) {
		case '<':
			text_add(t, "&lt;");
			break;
		case '>':
			text_add(t, "&gt;");
			break;
		case '&':
			text_add(t, "&amp;");
			break;
		case '"':
			text_add(t, "&quot;");
			break;
		default:
			text_add(t, "%c", *p);
		}
	}
}

static int dirent_filter(const struct dirent *d)
{
	return d->d_name[0] != '.';
}

/* size as nginx's autoindex_exact_size off writes it: bytes below 1 KiB,
 * else whole K, M or G (rounded down), into buf. */
static const char *human_size(uint64_t size, char *buf, size_t cap)
{
	static const char unit[] = "KMG";
	int u = -1;

	while (size >= 1024 && u < 2) {
		size /= 1024;
		u++;
	}
	if (u < 0)
		snprintf(buf, cap, "%" PRIu64, size);
	else
		snprintf(buf, cap, "%" PRIu64 "%c", size, unit[u]);
	return buf;
}

/* Builds an nginx-autoindex-style HTML listing of the directory that path
 * (ending in '/') names under the root, so that clients which list by
 * scraping links (rclone's http backend, httpdirfs) see the same page as
 * from nginx. Returns 0 with the page in *t (the caller frees t->buf),
 * -ENOENT for a missing directory or one outside the root, or -ENOMEM. */
static int listing_build(struct server *srv, const char *path, struct text *t)
{
	char full[PATH_MAX], real[PATH_MAX], entry[PATH_MAX * 2];
	struct dirent **names = NULL;
	struct stat st;
	struct tm tm;
	char when[32], hs[24];
	int n, i, count = 0, rc;

	n = snprintf(full, sizeof(full), "%s%s", srv->root, path);
	if (n < 0 || (size_t)n >= sizeof(full) || !realpath(full, real)) {
		rc = -ENOENT;
		goto out;
	}
	if (strncmp(real, srv->root, srv->root_len) != 0 ||
	    (real[srv->root_len] != '/' && real[srv->root_len] != '\0' &&
	     srv->root_len > 1) ||
	    stat(real, &st) < 0 || !S_ISDIR(st.st_mode)) {
		rc = -ENOENT;
		goto out;
	}
	count = scandir(real, &names, dirent_filter, alphasort);
	if (count < 0) {
		count = 0;
		rc = -ENOENT;
		goto out;
	}
	text_add(t, "<html>\r\n<head><title>Index of ");
	text_add_html(t, path);
	text_add(t, "</title></head>\r\n<body>\r\n<h1>Index of ");
	text_add_html(t, path);
	text_add(t, "</h1><hr><pre><a href=\"../\">../</a>\r\n");
	for (i = 0; i < count; i++) {
		bool dir;

		n = snprintf(entry, sizeof(entry), "%s/%s", real,
			     names[i]->d_name);
		if (n < 0 || (size_t)n >= sizeof(entry) || stat(entry, &st) < 0)
			continue;
		dir = S_ISDIR(st.st_mode);
		if (!dir && !S_ISREG(st.st_mode))
			continue;
		gmtime_r(&st.st_mtim.tv_sec, &tm);
		if (strftime(when, sizeof(when), "%d-%b-%Y %H:%M", &tm) == 0)
			when[0] = '\0';
		text_add(t, "<a href=\"");
		text_add_href(t, names[i]->d_name);
		text_add(t, "%s\">", dir ? "/" : "");
		text_add_html(t, names[i]->d_name);
		if (dir)
			text_add(t, "/</a> %s %19s\r\n", when, "-");
		else if (srv->autoindex_human)
			text_add(t, "</a> %s %19s\r\n", when,
				 human_size((uint64_t)st.st_size, hs,
					    sizeof(hs)));
		else
			text_add(t, "</a> %s %19" PRIu64 "\r\n", when,
				 (uint64_t)st.st_size);
	}
	text_add(t, "</pre><hr></body>\r\n</html>\r\n");
	rc = t->oom ? -ENOMEM : 0;
out:
	for (i = 0; i < count; i++)
		free(names[i]);
	free(names);
	return rc;
}

/* Answers a GET or HEAD of a directory path with its listing (200), or
 * 404 when there is no such directory. */
int origin__send_listing(struct conn *c, const struct request *rq,
			 const struct fault *f, bool closing, int *status,
			 uint64_t *sent, enum after *after,
			 const char **applied)
{
	struct text t = {0};
	struct head h;
	size_t body;
	int rc;

	rc = listing_build(c->srv, rq->path, &t);
	if (rc < 0) {
		*status = rc == -ENOMEM ? 500 : 404;
		rc = origin__send_status(c, rq, *status, -1, NULL, closing,
					 sent);
		goto out;
	}
	*status = 200;
	origin__head_start(&h, 200);
	origin__head_add(&h,
			 "Content-Type: text/html\r\nContent-Length: %zu\r\n",
			 t.len);
	origin__head_end(&h, closing);
	rc = origin__head_send(c, &h, strcmp(rq->method, "HEAD") != 0);
	if (rc < 0 || strcmp(rq->method, "HEAD") == 0)
		goto out;
	body = t.len;
	if (f != NULL && f->kind == FAULT_STALL && f->n < body) {
		body = (size_t)f->n;
		*after = AFTER_STALL;
		*applied = "stall";
	}
	rc = origin__send_all(c->fd, t.buf, body, 0);
	if (rc == 0)
		*sent = body;
out:
	free(t.buf);
	return rc;
}

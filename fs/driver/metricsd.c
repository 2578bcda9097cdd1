/* metricsd: the metrics endpoint of -o metrics=ADDR:PORT: its address
 * checked at the command line, its socket bound before the daemon forks
 * (so that an address in use is a line on the terminal), and the HTTP
 * server (libmicrohttpd, one thread) that answers GET /metrics. */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <microhttpd.h>

#include "fs/driver/driver_int.h"
#include "fs/driver/metrics_int.h"

struct fs_metricsd {
	struct MHD_Daemon *d;
	struct fs_metrics *mx;
	struct fs_mount *m;
};

/* A socket listening on ai, or -errno. */
static int listen_on(const struct addrinfo *ai)
{
	int fd = socket(ai->ai_family,
			ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
			ai->ai_protocol);
	int one = 1, rc;

	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (ai->ai_family == AF_INET6)
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
	if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, 16) != 0) {
		rc = -errno;
		close(fd);
		return rc;
	}
	return fd;
}

int fs__metrics_listen(const char *spec, int *fd, char *err, size_t errlen)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_NUMERICSERV};
	struct addrinfo *res = NULL;
	char host[256], port[8];
	const char *why;
	int rc;

	if (!fs__metrics_addr_split(spec, host, sizeof(host), port,
				    sizeof(port), &why)) {
		snprintf(err, errlen, "option metrics: '%s' %s", spec, why);
		return -EINVAL;
	}
	rc = getaddrinfo(host, port, &hints, &res);
	if (rc != 0) {
		snprintf(err, errlen, "option metrics: cannot resolve '%s': %s",
			 host, gai_strerror(rc));
		return -EINVAL;
	}
	/* The first address that takes it: a name may have several. */
	rc = -EADDRNOTAVAIL;
	for (const struct addrinfo *ai = res; ai != NULL; ai = ai->ai_next) {
		rc = listen_on(ai);
		if (rc >= 0)
			break;
	}
	freeaddrinfo(res);
	if (rc < 0) {
		snprintf(err, errlen, "option metrics: cannot listen on %s: %s",
			 spec, strerror(-rc));
		return rc;
	}
	*fd = rc;
	return 0;
}

/* libmicrohttpd's messages, into the mount's log. */
static void log_mhd(void *cls, const char *fmt, va_list ap)
{
	char line[512];
	size_t n;

	(void)cls;
	vsnprintf(line, sizeof(line), fmt, ap);
	n = strlen(line);
	while (n > 0 && line[n - 1] == '\n')
		line[--n] = '\0';
	fs__log(FS_LOG_WARN, "metrics endpoint: %s", line);
}

static enum MHD_Result reply(struct MHD_Connection *c, unsigned status,
			     char *body, size_t len, bool owned)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(
		len, body,
		owned ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
	enum MHD_Result ret;

	if (r == NULL) {
		if (owned)
			free(body);
		return MHD_NO;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
				status == MHD_HTTP_OK
					? "text/plain; version=0.0.4; "
					  "charset=utf-8"
					: "text/plain; charset=utf-8");
	if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
		MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
	ret = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result answer(void *cls, struct MHD_Connection *c,
			      const char *url, const char *method,
			      const char *version, const char *upload,
			      size_t *upload_size, void **con_cls)
{
	static char not_found[] = "pacefs: the metrics are at /metrics\n";
	static char not_allowed[] = "pacefs: GET /metrics\n";
	struct fs_metricsd *d = cls;
	struct fs_metrics_now now;
	char *text;
	size_t len;

	(void)version;
	(void)upload;
	(void)upload_size;
	(void)con_cls;
	if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)
		return reply(c, MHD_HTTP_METHOD_NOT_ALLOWED, not_allowed,
			     strlen(not_allowed), false);
	if (strcmp(url, "/metrics") != 0)
		return reply(c, MHD_HTTP_NOT_FOUND, not_found,
			     strlen(not_found), false);
	fs__metrics_now(d->m, &now);
	if (fs__metrics_text(d->mx, &now, &text, &len) != 0)
		return MHD_NO; /* out of memory: the connection is closed */
	return reply(c, MHD_HTTP_OK, text, len, true);
}

int fs__metricsd_start(int fd, struct fs_metrics *mx, struct fs_mount *m,
		       struct fs_metricsd **out)
{
	struct fs_metricsd *d = calloc(1, sizeof(*d));

	if (d == NULL) {
		close(fd);
		return -ENOMEM;
	}
	d->mx = mx;
	d->m = m;
	/* One thread, a few connections, a bounded wait per connection: a
	 * scraper, not a public server. */
	d->d = MHD_start_daemon(
		MHD_USE_AUTO_INTERNAL_THREAD | MHD_USE_ERROR_LOG, 0, NULL, NULL,
		answer, d, MHD_OPTION_EXTERNAL_LOGGER, log_mhd, NULL,
		MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_CONNECTION_LIMIT,
		(unsigned)16, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)10,
		MHD_OPTION_END);
	if (d->d == NULL) {
		close(fd);
		free(d);
		return -EIO;
	}
	*out = d;
	return 0;
}

void fs__metricsd_stop(struct fs_metricsd *d)
{
	if (d == NULL)
		return;
	MHD_stop_daemon(d->d); /* closes the listening socket */
	free(d);
}

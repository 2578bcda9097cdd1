/* metricsd: the metrics endpoint of -o metrics=ADDR:PORT: its address
 * checked at the command line, its socket bound before the daemon forks
 * (so that an address in use is a line on the terminal), and the HTTP
 * server (libmicrohttpd, run by one thread of ours) that answers GET
 * /metrics, its connections kept as metricsconn.c says. */
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <microhttpd.h>

#include "fs/obs/obs.h"
#include "fs/obs/obs_int.h"

struct obs_metricsd {
	struct MHD_Daemon *d;
	struct obs_metrics *mx;
	struct obs_view m;	  /* a copy: its pointers are the mount's */
	struct obs_mconns *conns; /* the server thread's alone */
	int stop_fd;		  /* an eventfd: written once, to stop */
	pthread_t thread;
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
	/* A backlog as deep as the connections kept: a burst of connects
	 * that fills it would cost a scraper a SYN retransmit (1 s). */
	if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 ||
	    listen(fd, OBS_MCONN_MAX) != 0) {
		rc = -errno;
		close(fd);
		return rc;
	}
	return fd;
}

/* Who can reach an endpoint bound to a: NULL for loopback alone. */
static const char *reach(const struct sockaddr *a)
{
	static const unsigned char v4any[4], v6any[16];

	if (a->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)a;

		if ((ntohl(in->sin_addr.s_addr) >> 24) == 127)
			return NULL;
		if (memcmp(&in->sin_addr, v4any, 4) == 0)
			return "listens on every interface: any host that "
			       "reaches this machine on that port";
	} else if (a->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)a;

		if (IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr))
			return NULL;
		if (memcmp(&in6->sin6_addr, v6any, 16) == 0)
			return "listens on every interface: any host that "
			       "reaches this machine on that port";
	}
	return "is not a loopback address: any host that reaches it";
}

int obs_metrics_listen(const char *spec, int *fd, char *err, size_t errlen)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_NUMERICSERV};
	struct addrinfo *res = NULL;
	char host[256], port[8];
	const char *why;
	int rc;

	if (!obs__metrics_addr_split(spec, host, sizeof(host), port,
				     sizeof(port), &why)) {
		return fs__errf(err, errlen, -EINVAL, "option metrics: '%s' %s",
				spec, why);
	}
	rc = getaddrinfo(host, port, &hints, &res);
	if (rc != 0) {
		return fs__errf(err, errlen, -EINVAL,
				"option metrics: cannot resolve '%s': %s", host,
				gai_strerror(rc));
	}
	/* The first address that takes it: a name may have several. */
	rc = -EADDRNOTAVAIL;
	for (const struct addrinfo *ai = res; ai != NULL; ai = ai->ai_next) {
		rc = listen_on(ai);
		if (rc >= 0) {
			/* Said at mount, on the terminal: the endpoint has no
			 * authentication. */
			why = reach(ai->ai_addr);
			if (why != NULL)
				obs_log(FS_LOG_WARN,
					"option metrics: %s %s can read "
					"the mount's metrics (no "
					"authentication)",
					spec, why);
			break;
		}
	}
	freeaddrinfo(res);
	if (rc < 0) {
		return fs__errf(err, errlen, rc,
				"option metrics: cannot listen on %s: %s", spec,
				strerror(-rc));
	}
	*fd = rc;
	return 0;
}

/* libmicrohttpd's messages, into the mount's log. A connection closed
 * mid-request is no fault of the mount's, and libmicrohttpd says the same
 * of one that metricsconn.c closed, which log_closed reports: those are
 * debug lines. */
static void log_mhd(void *cls, const char *fmt, va_list ap)
{
	static const char *const client_ends[] = {"incomplete request",
						  "when reading request"};
	enum fs_log_level level = FS_LOG_WARN;
	char line[512];
	size_t n;

	(void)cls;
	vsnprintf(line, sizeof(line), fmt, ap);
	n = strlen(line);
	while (n > 0 && line[n - 1] == '\n')
		line[--n] = '\0';
	for (size_t i = 0; i < sizeof(client_ends) / sizeof(client_ends[0]);
	     i++)
		if (strstr(line, client_ends[i]) != NULL)
			level = FS_LOG_DEBUG;
	obs_log(level, "metrics endpoint: %s", line);
}

/* A connection the table closed, into the log (its rate limit takes a
 * storm of them). */
static void log_closed(void *ctx, const struct obs_mconn_closed *why)
{
	char ip[INET6_ADDRSTRLEN] = "?";

	(void)ctx;
	inet_ntop(why->family, why->ip, ip, sizeof(ip));
	if (why->reason == OBS_MCONN_FOR_ROOM)
		obs_log(FS_LOG_WARN,
			"metrics endpoint: closed a connection from %s for a "
			"new one (the oldest of its address, or of all)",
			ip);
	else
		obs_log(FS_LOG_WARN,
			"metrics endpoint: closed a connection from %s that %s "
			"within %u s",
			ip,
			why->reason == OBS_MCONN_NO_REQUEST
				? "sent no whole request"
				: "was not done",
			(why->reason == OBS_MCONN_NO_REQUEST
				 ? OBS_MCONN_REQUEST_MS
				 : OBS_MCONN_LIFE_MS) /
				1000u);
}

static uint64_t now_ms(void)
{
	return fs__now_ns() / 1000000u;
}

/* MHD_OPTION_NOTIFY_CONNECTION and the accept policy: the table's view of
 * libmicrohttpd's connections. */
static enum MHD_Result on_accept(void *cls, const struct sockaddr *addr,
				 socklen_t len)
{
	struct obs_metricsd *d = cls;

	(void)len;
	obs__mconns_admit(d->conns, addr, now_ms());
	return MHD_YES;
}

static void on_connection(void *cls, struct MHD_Connection *c,
			  void **socket_context,
			  enum MHD_ConnectionNotificationCode code)
{
	struct obs_metricsd *d = cls;
	const union MHD_ConnectionInfo *fd, *addr;

	if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
		obs__mconns_gone(d->conns, *socket_context);
		*socket_context = NULL;
		return;
	}
	fd = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
	addr = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	*socket_context =
		fd == NULL || addr == NULL
			? NULL
			: obs__mconns_add(d->conns, fd->connect_fd,
					  addr->client_addr, now_ms());
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
	/* One request a connection: its deadlines count from its accept. */
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
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
	struct obs_metricsd *d = cls;
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	struct obs_metrics_now now;
	char *text;
	size_t len;

	(void)version;
	(void)upload;
	(void)upload_size;
	(void)con_cls;
	if (ci != NULL)
		obs__mconns_asked(ci->socket_context);
	if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)
		return reply(c, MHD_HTTP_METHOD_NOT_ALLOWED, not_allowed,
			     strlen(not_allowed), false);
	if (strcmp(url, "/metrics") != 0)
		return reply(c, MHD_HTTP_NOT_FOUND, not_found,
			     strlen(not_found), false);
	obs__metrics_now(&d->m, &now);
	if (obs__metrics_text(d->mx, &now, &text, &len) != 0)
		return MHD_NO; /* out of memory: the connection is closed */
	return reply(c, MHD_HTTP_OK, text, len, true);
}

/* The server's thread: libmicrohttpd's events, and the table's
 * deadlines, until stop_fd is written. */
static void *serve_main(void *arg)
{
	struct obs_metricsd *d = arg;
	const union MHD_DaemonInfo *ep =
		MHD_get_daemon_info(d->d, MHD_DAEMON_INFO_EPOLL_FD);
	struct pollfd p[2] = {{.fd = ep->epoll_fd, .events = POLLIN},
			      {.fd = d->stop_fd, .events = POLLIN}};

	for (;;) {
		MHD_UNSIGNED_LONG_LONG mhd_ms;
		int wait_ms = obs__mconns_sweep(d->conns, now_ms());

		if (MHD_get_timeout(d->d, &mhd_ms) == MHD_YES &&
		    (wait_ms < 0 || mhd_ms < (MHD_UNSIGNED_LONG_LONG)wait_ms))
			wait_ms = mhd_ms > INT_MAX ? INT_MAX : (int)mhd_ms;
		if (poll(p, 2, wait_ms) < 0 && errno != EINTR) {
			obs_log(FS_LOG_ERR, "metrics endpoint: stopped: %s",
				strerror(errno));
			break;
		}
		if (p[1].revents != 0)
			break;
		MHD_run(d->d);
	}
	return NULL;
}

int obs_metricsd_start(int fd, struct obs_metrics *mx, const struct obs_view *m,
		       struct obs_metricsd **out)
{
	struct obs_metricsd *d = calloc(1, sizeof(*d));
	int rc;

	if (d == NULL) {
		close(fd);
		return -ENOMEM;
	}
	d->mx = mx;
	d->m = *m;
	d->stop_fd = eventfd(0, EFD_CLOEXEC);
	if (d->stop_fd < 0) {
		rc = -errno;
		close(fd);
		goto out;
	}
	rc = obs__mconns_new(log_closed, d, &d->conns);
	if (rc != 0) {
		close(fd);
		goto out;
	}
	/* Run by our thread, so that the table's deadlines are kept between
	 * libmicrohttpd's events by the thread that owns its connections.
	 * Its own limit is above the table's: the table decides which
	 * connection goes, and never the newest by a refusal. */
	d->d = MHD_start_daemon(MHD_USE_EPOLL | MHD_USE_ERROR_LOG, 0, on_accept,
				d, answer, d, MHD_OPTION_EXTERNAL_LOGGER,
				log_mhd, NULL, MHD_OPTION_LISTEN_SOCKET, fd,
				MHD_OPTION_NOTIFY_CONNECTION, on_connection, d,
				MHD_OPTION_CONNECTION_LIMIT,
				(unsigned)OBS_MCONN_SLOTS, MHD_OPTION_END);
	if (d->d == NULL) {
		close(fd);
		rc = -EIO;
		goto out;
	}
	if (MHD_get_daemon_info(d->d, MHD_DAEMON_INFO_EPOLL_FD) == NULL) {
		rc = -EIO;
		goto out;
	}
	rc = -pthread_create(&d->thread, NULL, serve_main, d);
out:
	if (rc != 0) {
		if (d->d != NULL)
			MHD_stop_daemon(d->d); /* closes the listening socket */
		obs__mconns_free(d->conns);
		if (d->stop_fd >= 0)
			close(d->stop_fd);
		free(d);
		return rc;
	}
	*out = d;
	return 0;
}

void obs_metricsd_stop(struct obs_metricsd *d)
{
	uint64_t one = 1;

	if (d == NULL)
		return;
	if (write(d->stop_fd, &one, sizeof(one)) != sizeof(one))
		obs_log(FS_LOG_ERR, "metrics endpoint: cannot stop: %s",
			strerror(errno));
	else
		pthread_join(d->thread, NULL);
	/* Closes the listening socket and every connection, the table told
	 * of each. */
	MHD_stop_daemon(d->d);
	obs__mconns_free(d->conns);
	close(d->stop_fd);
	free(d);
}

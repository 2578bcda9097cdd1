/* conn: one thread per connection: it reads request heads, has each
 * served, and closes, stalls or resets the connection as the answer
 * asks. */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "contrib/origin/origin_int.h"

/* Reads until a whole head is in c->head; returns 0 with its length in
 * *head_len, -ENOTCONN when the client closed between requests,
 * -EMSGSIZE when the head is too large, or another negative errno. */
static int read_head(struct conn *c, size_t *head_len)
{
	char *end;
	ssize_t n;

	for (;;) {
		c->head[c->have] = '\0';
		end = strstr(c->head, "\r\n\r\n");
		if (end) {
			*head_len = (size_t)(end - c->head) + 4;
			return 0;
		}
		if (c->have >= ORIGIN_HEAD_MAX)
			return -EMSGSIZE;
		n = recv(c->fd, c->head + c->have, ORIGIN_HEAD_MAX - c->have,
			 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return c->have == 0 ? -ENOTCONN : -ECONNRESET;
		c->have += (size_t)n;
	}
}

/* Waits, without a bound, until the client closes the connection. */
static void wait_client_close(int fd)
{
	char scratch[4096];
	ssize_t n;

	do {
		n = recv(fd, scratch, sizeof(scratch), 0);
	} while (n > 0 || (n < 0 && errno == EINTR));
}

/* Waits (bounded) until the peer has acknowledged everything sent, so that
 * a reset does not discard bytes the fault promised to deliver. */
static void drain_sent(int fd)
{
	int pending, i;

	for (i = 0; i < ORIGIN_DRAIN_MS; i++) {
		if (ioctl(fd, TIOCOUTQ, &pending) < 0 || pending == 0)
			break;
		origin__sleep_ns(NS_PER_MS);
	}
}

/* Answers a request head that could not be read whole (431) or parsed
 * (400) with status, and logs it with no method or target; the connection
 * then closes. */
static void refuse_request(struct conn *c, struct request *rq, int status)
{
	memset(rq, 0, sizeof(*rq));
	rq->method = "-";
	origin__send_status(c, rq, status, -1, NULL, true, &(uint64_t){0});
	origin__log_request(c->srv, rq, status, 0, NULL);
}

static void *conn_main(void *arg)
{
	struct conn *c = arg;
	struct request rq;
	enum after after = AFTER_CLOSE;
	size_t head_len = 0;
	int rc;

	for (;;) {
		rc = read_head(c, &head_len);
		if (rc == -EMSGSIZE) {
			refuse_request(c, &rq, 431);
			after = AFTER_CLOSE;
			break;
		}
		if (rc < 0) {
			if (rc != -ENOTCONN && rc != -EAGAIN &&
			    rc != -ECONNRESET)
				origin__warn_conn(c, "reading a request: %s",
						  strerror(-rc));
			after = AFTER_CLOSE;
			break;
		}
		c->head[head_len - 2] = '\0';
		rc = origin__request_parse(c->srv, c->head, &rq);
		if (rc < 0) {
			refuse_request(c, &rq, 400);
			after = AFTER_CLOSE;
			break;
		}
		rc = origin__serve(c, &rq, &after);
		if (rc < 0 && rc != -EPIPE && rc != -ECONNRESET)
			origin__warn_conn(c, "%s %s: %s", rq.method, rq.target,
					  strerror(-rc));
		if (after != AFTER_KEEP)
			break;
		/* Keep whatever the client sent after this head. */
		memmove(c->head, c->head + head_len, c->have - head_len);
		c->have -= head_len;
	}
	if (after == AFTER_STALL) {
		wait_client_close(c->fd);
	} else if (after == AFTER_RESET) {
		struct linger lg = {.l_onoff = 1, .l_linger = 0};

		drain_sent(c->fd);
		setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	}
	close(c->fd);
	free(c->buf);
	free(c);
	return NULL;
}

int origin__conn_start(struct server *srv, int fd)
{
	struct timeval tv = {.tv_sec = ORIGIN_IDLE_SECS};
	pthread_attr_t attr;
	pthread_t tid;
	struct conn *c;
	int one = 1, rc;

	c = calloc(1, sizeof(*c));
	if (!c) {
		rc = -ENOMEM;
		goto out;
	}
	c->buf = malloc(ORIGIN_CHUNK_MAX);
	if (!c->buf) {
		rc = -ENOMEM;
		goto out;
	}
	c->srv = srv;
	c->fd = fd;
	if (srv->slow_every &&
	    (atomic_fetch_add(&srv->conns, 1) + 1) % srv->slow_every == 0)
		c->slow = true;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (srv->sndbuf) {
		/* A small send buffer, as some servers set or inherit: every
		 * write then waits on the client's acknowledgements. */
		int sndbuf = (int)srv->sndbuf;

		setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));
	}
	rc = -pthread_attr_init(&attr);
	if (rc < 0)
		goto out;
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 256 * 1024);
	rc = -pthread_create(&tid, &attr, conn_main, c);
	pthread_attr_destroy(&attr);
	if (rc < 0)
		goto out;
	c = NULL;
out:
	if (c) {
		free(c->buf);
		free(c);
		close(fd);
	}
	return rc;
}

/* metricsconn: which connections the metrics endpoint keeps. Every
 * connection must deliver its request within a deadline from its accept
 * and be done within another, whatever it sends meanwhile; one address
 * holds at most a share of the connections; and a new connection is never
 * refused for want of room: the oldest connection of its address (when
 * the address holds its share) or of all (when the endpoint is full) is
 * closed instead, one still waiting for its request first. A slow client
 * so costs its own connections, never a scraper's. */
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "fs/obs/obs_int.h"

struct obs_mconn {
	int fd; /* -1: a free slot */
	int family;
	unsigned char ip[16];
	uint64_t since_ms; /* accepted */
	bool asked;	   /* its request has arrived whole */
	bool closing;	   /* shut down; libmicrohttpd has yet to see it */
};

struct obs_mconns {
	struct obs_mconn slot[OBS_MCONN_SLOTS];
	void (*on_close)(void *ctx, const struct obs_mconn_closed *why);
	void *ctx;
};

int obs__mconns_new(void (*on_close)(void *ctx,
				     const struct obs_mconn_closed *why),
		    void *ctx, struct obs_mconns **out)
{
	struct obs_mconns *t = calloc(1, sizeof(*t));

	if (t == NULL)
		return -ENOMEM;
	for (size_t i = 0; i < OBS_MCONN_SLOTS; i++)
		t->slot[i].fd = -1;
	t->on_close = on_close;
	t->ctx = ctx;
	*out = t;
	return 0;
}

void obs__mconns_free(struct obs_mconns *t)
{
	free(t);
}

/* The address of a, as the table keeps it: the family and the IP alone
 * (another port of the same host is the same client). */
static void addr_key(const struct sockaddr *a, int *family,
		     unsigned char ip[16])
{
	memset(ip, 0, 16);
	*family = a->sa_family;
	if (a->sa_family == AF_INET)
		memcpy(ip, &((const struct sockaddr_in *)a)->sin_addr, 4);
	else if (a->sa_family == AF_INET6)
		memcpy(ip, &((const struct sockaddr_in6 *)a)->sin6_addr, 16);
}

static bool same_addr(const struct obs_mconn *c, int family,
		      const unsigned char ip[16])
{
	return c->family == family && memcmp(c->ip, ip, 16) == 0;
}

static bool live(const struct obs_mconn *c)
{
	return c->fd >= 0 && !c->closing;
}

/* Shuts c's socket down: libmicrohttpd reads its end and closes it (then
 * obs__mconns_gone frees the slot), so the descriptor stays its to close. */
static void close_conn(struct obs_mconns *t, struct obs_mconn *c,
		       enum obs_mconn_reason reason, uint64_t now_ms)
{
	struct obs_mconn_closed why = {.reason = reason,
				       .family = c->family,
				       .age_ms = now_ms - c->since_ms};

	memcpy(why.ip, c->ip, sizeof(why.ip));
	shutdown(c->fd, SHUT_RDWR);
	c->closing = true;
	if (t->on_close != NULL)
		t->on_close(t->ctx, &why);
}

/* The connection to close for room: the oldest still waiting for its
 * request, else the oldest; of the address given (family != AF_UNSPEC) or
 * of all. NULL: none is open. */
static struct obs_mconn *victim(struct obs_mconns *t, int family,
				const unsigned char ip[16])
{
	struct obs_mconn *best = NULL;

	for (size_t i = 0; i < OBS_MCONN_SLOTS; i++) {
		struct obs_mconn *c = &t->slot[i];

		if (!live(c) ||
		    (family != AF_UNSPEC && !same_addr(c, family, ip)))
			continue;
		if (best == NULL || (!c->asked && best->asked) ||
		    (c->asked == best->asked && c->since_ms < best->since_ms))
			best = c;
	}
	return best;
}

void obs__mconns_admit(struct obs_mconns *t, const struct sockaddr *addr,
		       uint64_t now_ms)
{
	unsigned char ip[16];
	unsigned all = 0, mine = 0;
	struct obs_mconn *c = NULL;
	int family;

	addr_key(addr, &family, ip);
	for (size_t i = 0; i < OBS_MCONN_SLOTS; i++) {
		if (!live(&t->slot[i]))
			continue;
		all++;
		mine += same_addr(&t->slot[i], family, ip);
	}
	if (mine >= OBS_MCONN_PER_ADDR)
		c = victim(t, family, ip);
	else if (all >= OBS_MCONN_MAX)
		c = victim(t, AF_UNSPEC, ip);
	if (c != NULL)
		close_conn(t, c, OBS_MCONN_FOR_ROOM, now_ms);
}

struct obs_mconn *obs__mconns_add(struct obs_mconns *t, int fd,
				  const struct sockaddr *addr, uint64_t now_ms)
{
	for (size_t i = 0; i < OBS_MCONN_SLOTS; i++) {
		struct obs_mconn *c = &t->slot[i];

		if (c->fd >= 0)
			continue;
		memset(c, 0, sizeof(*c));
		c->fd = fd;
		addr_key(addr, &c->family, c->ip);
		c->since_ms = now_ms;
		return c;
	}
	/* Every slot taken, closing ones too: this one is not kept. */
	shutdown(fd, SHUT_RDWR);
	return NULL;
}

void obs__mconns_asked(struct obs_mconn *c)
{
	if (c != NULL)
		c->asked = true;
}

void obs__mconns_gone(struct obs_mconns *t, struct obs_mconn *c)
{
	(void)t;
	if (c != NULL)
		c->fd = -1;
}

int obs__mconns_sweep(struct obs_mconns *t, uint64_t now_ms)
{
	uint64_t next = UINT64_MAX;

	for (size_t i = 0; i < OBS_MCONN_SLOTS; i++) {
		struct obs_mconn *c = &t->slot[i];
		uint64_t due;

		if (!live(c))
			continue;
		due = c->since_ms +
		      (c->asked ? OBS_MCONN_LIFE_MS : OBS_MCONN_REQUEST_MS);
		if (now_ms >= due) {
			close_conn(t, c,
				   c->asked ? OBS_MCONN_TOO_LONG
					    : OBS_MCONN_NO_REQUEST,
				   now_ms);
			continue;
		}
		if (due < next)
			next = due;
	}
	return next == UINT64_MAX ? -1 : (int)(next - now_ms);
}

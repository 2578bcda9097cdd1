/* ack: acknowledging at once what a lane's connection received, so that an
 * origin with a small send buffer is not paced by the delayed-ACK timer.
 *
 * A sender can have no more unacknowledged bytes out than its send buffer
 * holds. When that is about one segment (a small SO_SNDBUF; on loopback a
 * segment is 64 KiB), the receiving kernel, which answers every second
 * full segment at once and a lone one only when its delayed-ACK timer
 * fires, holds each ACK for that timer, and the connection moves a segment
 * per timer: a few MB/s, however fast both ends are. Asking for a quick ACK
 * (TCP_QUICKACK) sends the one pending at once; the kernel turns it off by
 * itself, so it is asked again after every read.
 *
 * curl does not say which socket a transfer is on while it runs
 * (CURLINFO_ACTIVESOCKET names the last connection a transfer left), so
 * the lanes' easy handles report every socket curl opens and closes
 * (CURLOPT_SOCKOPTFUNCTION, CURLOPT_CLOSESOCKETFUNCTION), and a slot finds
 * its own by the local and remote ports curl reports. Everything here
 * runs on the event thread, or in fetch_free once it has ended. */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <curl/curl.h>

#include "fetch/fetch.h"
#include "fetch/fetch_int.h"

/* The local (or, peer, the remote) port of fd, or 0 when it has none yet
 * (not connected). */
static unsigned port_of(curl_socket_t fd, bool peer)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);

	if ((peer ? getpeername(fd, (struct sockaddr *)&ss, &len)
		  : getsockname(fd, (struct sockaddr *)&ss, &len)) < 0)
		return 0;
	if (ss.ss_family == AF_INET)
		return ntohs(((struct sockaddr_in *)&ss)->sin_port);
	if (ss.ss_family == AF_INET6)
		return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
	return 0;
}

static int on_sockopt(void *arg, curl_socket_t fd, curlsocktype purpose)
{
	struct fetch_acks *a = arg;

	if (purpose != CURLSOCKTYPE_IPCXN)
		return CURL_SOCKOPT_OK;
	/* A socket curl closed without the callback (one that never made a
	 * connection) left its number to this one. */
	for (uint32_t i = 0; i < a->n; i++) {
		if (a->v[i].fd == fd) {
			a->v[i] = a->v[--a->n];
			break;
		}
	}
	/* A full table only means no quick ACKs on that connection. */
	if (a->n < a->cap) {
		a->v[a->n].fd = fd;
		a->v[a->n].port = 0;
		a->v[a->n].peer = 0;
		a->n++;
	}
	return CURL_SOCKOPT_OK;
}

static int on_close(void *arg, curl_socket_t fd)
{
	struct fetch_acks *a = arg;

	for (uint32_t i = 0; i < a->n; i++) {
		if (a->v[i].fd == fd) {
			a->v[i] = a->v[--a->n];
			break;
		}
	}
	return close(fd);
}

int fetch__acks_init(struct fetch_acks *a, uint32_t cap)
{
	a->v = calloc(cap, sizeof(*a->v));
	if (a->v == NULL)
		return -ENOMEM;
	a->cap = cap;
	a->n = 0;
	return 0;
}

void fetch__acks_free(struct fetch_acks *a)
{
	free(a->v);
	a->v = NULL;
	a->cap = a->n = 0;
}

void fetch__acks_setup(struct fetch_acks *a, CURL *easy)
{
	curl_easy_setopt(easy, CURLOPT_SOCKOPTFUNCTION, on_sockopt);
	curl_easy_setopt(easy, CURLOPT_SOCKOPTDATA, a);
	curl_easy_setopt(easy, CURLOPT_CLOSESOCKETFUNCTION, on_close);
	curl_easy_setopt(easy, CURLOPT_CLOSESOCKETDATA, a);
}

curl_socket_t fetch__acks_find(struct fetch_acks *a, CURL *easy)
{
	long port = 0, peer = 0;

	if (curl_easy_getinfo(easy, CURLINFO_LOCAL_PORT, &port) != CURLE_OK ||
	    curl_easy_getinfo(easy, CURLINFO_PRIMARY_PORT, &peer) != CURLE_OK ||
	    port <= 0 || peer <= 0)
		return CURL_SOCKET_BAD;
	for (uint32_t i = 0; i < a->n; i++) {
		/* A socket's ports are known once it connected: asked until
		 * then. */
		if (a->v[i].port == 0 || a->v[i].peer == 0) {
			a->v[i].port = port_of(a->v[i].fd, false);
			a->v[i].peer = port_of(a->v[i].fd, true);
		}
		/* Two connections to two hosts on one port may share a
		 * local port: the wrong one only gets an early ACK. */
		if (a->v[i].port == (unsigned)port &&
		    a->v[i].peer == (unsigned)peer)
			return a->v[i].fd;
	}
	return CURL_SOCKET_BAD;
}

void fetch__ack_now(curl_socket_t fd)
{
#ifdef TCP_QUICKACK
	int one = 1;

	if (fd != CURL_SOCKET_BAD)
		(void)setsockopt(fd, IPPROTO_TCP, TCP_QUICKACK, &one,
				 sizeof(one));
#else
	(void)fd;
#endif
}

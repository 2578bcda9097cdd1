/* pacefs-origin: a small range-capable HTTP/1.1 test origin that serves one
 * directory on loopback, with a per-connection rate cap, added latency and
 * per-path fault injection, one thread per connection. This file starts it:
 * the options, the listening socket, the signals and the accept loop. */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "contrib/origin/origin_int.h"

static volatile sig_atomic_t stop_signal;

static void on_signal(int sig)
{
	stop_signal = sig;
}

/* Parses "HOST:PORT", "[V6]:PORT" or "PORT" into a loopback address;
 * returns 0, -EINVAL for bad syntax, or -EPERM for a non-loopback host. */
static int listen_parse(const char *s, struct sockaddr_storage *ss,
			socklen_t *sslen)
{
	char host[64];
	const char *colon, *h = "127.0.0.1";
	struct sockaddr_in *in4 = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
	uint64_t port;
	size_t hl;

	memset(ss, 0, sizeof(*ss));
	colon = strrchr(s, ':');
	if (colon) {
		hl = (size_t)(colon - s);
		if (hl >= 2 && s[0] == '[' && s[hl - 1] == ']') {
			s++;
			hl -= 2;
		}
		if (hl == 0 || hl >= sizeof(host))
			return -EINVAL;
		memcpy(host, s, hl);
		host[hl] = '\0';
		h = host;
		if (strcmp(h, "localhost") == 0)
			h = "127.0.0.1";
		s = colon + 1;
	}
	if (origin__parse_u64(s, strlen(s), &port) < 0 || port > 65535)
		return -EINVAL;
	if (inet_pton(AF_INET, h, &in4->sin_addr) == 1) {
		in4->sin_family = AF_INET;
		in4->sin_port = htons((uint16_t)port);
		*sslen = sizeof(*in4);
		if ((ntohl(in4->sin_addr.s_addr) >> 24) != 127)
			return -EPERM;
		return 0;
	}
	if (inet_pton(AF_INET6, h, &in6->sin6_addr) == 1) {
		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons((uint16_t)port);
		*sslen = sizeof(*in6);
		if (!IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr))
			return -EPERM;
		return 0;
	}
	return -EINVAL;
}

/* Binds and listens; returns the socket or a negative errno. */
static int listen_open(const struct sockaddr_storage *ss, socklen_t sslen)
{
	int fd, one = 1, rc;

	fd = socket(ss->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (const struct sockaddr *)ss, sslen) < 0 ||
	    listen(fd, 128) < 0) {
		rc = -errno;
		close(fd);
		return rc;
	}
	return fd;
}

/* Writes the port through a temporary file and rename, so that a reader
 * never sees it half written. */
static int port_file_write(const char *path, unsigned port)
{
	char tmp[PATH_MAX];
	FILE *fp;
	int n, rc = 0;

	n = snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	if (n < 0 || (size_t)n >= sizeof(tmp))
		return -ENAMETOOLONG;
	fp = fopen(tmp, "w");
	if (!fp)
		return -errno;
	if (fprintf(fp, "%u\n", port) < 0)
		rc = -EIO;
	if (fclose(fp) != 0 && rc == 0)
		rc = -errno;
	if (rc == 0 && rename(tmp, path) < 0)
		rc = -errno;
	if (rc < 0)
		unlink(tmp);
	return rc;
}

static void usage(FILE *fp)
{
	fputs("usage: pacefs-origin --root DIR [--listen 127.0.0.1:PORT]\n"
	      "         [--port-file FILE] [--rate BYTES_PER_SEC[K|M|G]]\n"
	      "         [--latency MS] [--sndbuf BYTES] [--write-chunk BYTES]\n"
	      "         [--slow-conns EVERY:BYTES_PER_SEC] "
	      "[--uplink BYTES_PER_SEC]\n"
	      "         [--fault GLOB:KIND[:ARG]]...\n"
	      "         [--fault-mix SEED[:PERCENT[:verdicts]]]\n"
	      "         [--log FILE] [--log-header NAME]... [--quiet] "
	      "[--autoindex[=human]]\n"
	      "         [--max-transfers N [--retry-after SECS "
	      "[--hold-retry-after]]]\n"
	      "         [--one-at-a-time MS [--retry-after SECS]]\n"
	      "         [--require-header FILE]\n"
	      "         [--s3 [--s3-region R] [--s3-keys FILE] "
	      "[--s3-anonymous]\n"
	      "               [--s3-max-keys N] [--s3-verifier PATH]\n"
	      "               [--s3-hostile MODE[,MODE]...]...]\n"
	      "fault kinds: stall:N reset:N status:CODE[:RETRY_AFTER] "
	      "burst:CODE:K norange\n"
	      "  badrange short:N etag-change:N content-change:N "
	      "slowfirst:MS refuse mute rate:BYTES redirect:URL_PREFIX "
	      "corrupt:N chunked\n",
	      fp);
}

static void die(const char *fmt, ...)
	__attribute__((noreturn, format(printf, 1, 2)));

static void die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs("pacefs-origin: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(2);
}

static struct server server = {.log_mu = PTHREAD_MUTEX_INITIALIZER,
			       .require_mu = PTHREAD_MUTEX_INITIALIZER,
			       .uplink_mu = PTHREAD_MUTEX_INITIALIZER,
			       .retry_after = -1};

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"root", required_argument, NULL, 'r'},
		{"listen", required_argument, NULL, 'l'},
		{"port-file", required_argument, NULL, 'p'},
		{"rate", required_argument, NULL, 'R'},
		{"latency", required_argument, NULL, 'L'},
		{"sndbuf", required_argument, NULL, 'B'},
		{"write-chunk", required_argument, NULL, 'C'},
		{"slow-conns", required_argument, NULL, 'W'},
		{"uplink", required_argument, NULL, 'U'},
		{"fault", required_argument, NULL, 'f'},
		{"fault-mix", required_argument, NULL, 'm'},
		{"log", required_argument, NULL, 'g'},
		{"log-header", required_argument, NULL, 'H'},
		{"max-transfers", required_argument, NULL, 'M'},
		{"retry-after", required_argument, NULL, 'A'},
		{"hold-retry-after", no_argument, NULL, 'O'},
		{"one-at-a-time", required_argument, NULL, 'T'},
		{"require-header", required_argument, NULL, 'Q'},
		{"quiet", no_argument, NULL, 'q'},
		{"autoindex", optional_argument, NULL, 'a'},
		{"s3", no_argument, NULL, 's'},
		{"s3-region", required_argument, NULL, 'G'},
		{"s3-keys", required_argument, NULL, 'K'},
		{"s3-verifier", required_argument, NULL, 'V'},
		{"s3-anonymous", no_argument, NULL, 'N'},
		{"s3-max-keys", required_argument, NULL, 'X'},
		{"s3-hostile", required_argument, NULL, 'Y'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	const char *root = NULL, *listen_at = "127.0.0.1:0", *port_file = NULL;
	const char *log_path = NULL;
	struct s3_config s3c = {.region = "us-east-1",
				.verifier = ORIGIN_S3VERIFY,
				.max_keys = 1000};
	bool s3 = false;
	struct sockaddr_storage ss;
	socklen_t sslen = sizeof(ss);
	struct sigaction sa;
	sigset_t block, old;
	struct stat st;
	char addr[INET6_ADDRSTRLEN];
	unsigned port;
	int opt, lfd, fd, rc;

	for (;;) {
		opt = getopt_long(argc, argv, "", opts, NULL);
		if (opt == -1)
			break;
		switch (opt) {
		case 'r':
			root = optarg;
			break;
		case 'l':
			listen_at = optarg;
			break;
		case 'p':
			port_file = optarg;
			break;
		case 'R':
			if (origin__parse_size(optarg, strlen(optarg),
					       &server.rate) < 0)
				die("--rate %s: want bytes per second, e.g. 8M",
				    optarg);
			break;
		case 'L':
			if (origin__parse_u64(optarg, strlen(optarg),
					      &server.latency_ms) < 0 ||
			    server.latency_ms > 3600 * 1000)
				die("--latency %s: want milliseconds", optarg);
			break;
		case 'B':
			if (origin__parse_size(optarg, strlen(optarg),
					       &server.sndbuf) < 0 ||
			    server.sndbuf == 0 || server.sndbuf > INT_MAX / 2)
				die("--sndbuf %s: want bytes, e.g. 32K",
				    optarg);
			break;
		case 'C':
			if (origin__parse_size(optarg, strlen(optarg),
					       &server.write_chunk) < 0 ||
			    server.write_chunk == 0 ||
			    server.write_chunk > ORIGIN_CHUNK_MAX)
				die("--write-chunk %s: want 1 to 64K bytes",
				    optarg);
			break;
		case 'W': {
			const char *colon = strchr(optarg, ':');

			if (!colon ||
			    origin__parse_u64(optarg, (size_t)(colon - optarg),
					      &server.slow_every) < 0 ||
			    server.slow_every == 0 ||
			    origin__parse_size(colon + 1, strlen(colon + 1),
					       &server.slow_rate) < 0 ||
			    server.slow_rate == 0)
				die("--slow-conns %s: want EVERY:BYTES_PER_SEC",
				    optarg);
			break;
		}
		case 'U':
			if (origin__parse_size(optarg, strlen(optarg),
					       &server.uplink) < 0)
				die("--uplink %s: want bytes per second, e.g. "
				    "32M",
				    optarg);
			break;
		case 'f': {
			struct fault *nf;

			nf = realloc(server.faults,
				     (server.nfaults + 1) * sizeof(*nf));
			if (!nf)
				die("out of memory");
			server.faults = nf;
			if (origin__fault_parse(optarg, &nf[server.nfaults]) <
			    0)
				die("--fault %s: want GLOB:KIND[:ARG], see "
				    "--help",
				    optarg);
			server.nfaults++;
			break;
		}
		case 'm':
			if (origin__fault_mix_parse(&server, optarg) < 0)
				die("--fault-mix %s: want "
				    "SEED[:PERCENT[:verdicts]], "
				    "PERCENT 1 to 100",
				    optarg);
			break;
		case 'g':
			log_path = optarg;
			break;
		case 'H': {
			char **nh;

			if (server.nlog_headers == ORIGIN_LOG_HEADERS_MAX)
				die("--log-header: at most %d",
				    ORIGIN_LOG_HEADERS_MAX);
			nh = realloc(server.log_headers,
				     (server.nlog_headers + 1) * sizeof(*nh));
			if (!nh)
				die("out of memory");
			server.log_headers = nh;
			nh[server.nlog_headers++] = optarg;
			break;
		}
		case 'M':
			if (origin__parse_u64(optarg, strlen(optarg),
					      &server.max_transfers) < 0 ||
			    server.max_transfers == 0)
				die("--max-transfers %s: want a number of "
				    "transfers, at least 1",
				    optarg);
			break;
		case 'A': {
			uint64_t secs;

			if (origin__parse_u64(optarg, strlen(optarg), &secs) <
				    0 ||
			    secs > 86400)
				die("--retry-after %s: want seconds", optarg);
			server.retry_after = (int64_t)secs;
			break;
		}
		case 'O':
			server.hold_retry_after = true;
			break;
		case 'T':
			if (origin__parse_u64(optarg, strlen(optarg),
					      &server.refuse_ms) < 0 ||
			    server.refuse_ms > 60000)
				die("--one-at-a-time %s: want the refusal's "
				    "delay in ms",
				    optarg);
			server.one_at_a_time = true;
			break;
		case 'Q':
			server.require_path = optarg;
			break;
		case 'q':
			server.quiet = true;
			break;
		case 'a':
			server.autoindex = true;
			if (optarg != NULL && strcmp(optarg, "human") != 0)
				die("--autoindex=%s: want human or nothing",
				    optarg);
			server.autoindex_human = optarg != NULL;
			break;
		case 's':
			s3 = true;
			break;
		case 'G':
			s3c.region = optarg;
			break;
		case 'K':
			s3c.keys_path = optarg;
			break;
		case 'V':
			s3c.verifier = optarg;
			break;
		case 'N':
			s3c.anonymous = true;
			break;
		case 'X': {
			uint64_t n;

			if (origin__parse_u64(optarg, strlen(optarg), &n) < 0 ||
			    n == 0 || n > 1000)
				die("--s3-max-keys %s: want 1 to 1000", optarg);
			s3c.max_keys = (unsigned)n;
			break;
		}
		case 'Y': {
			char why[256];

			if (s3_hostile_parse(optarg, &s3c, why, sizeof(why)) !=
			    0)
				die("--s3-hostile %s: %s", optarg, why);
			break;
		}
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc || !root) {
		usage(stderr);
		return 2;
	}
	if (!realpath(root, server.root) || stat(server.root, &st) < 0 ||
	    !S_ISDIR(st.st_mode))
		die("--root %s: not a directory", root);
	server.root_len = strlen(server.root);
	if (server.root_len == 1)
		server.root_len = 0; /* "/": joined paths start with '/' */
	if (s3) {
		char why[512];

		s3c.root = server.root;
		if (s3_origin_new(&s3c, &server.s3, why, sizeof(why)) != 0)
			die("%s", why);
	}
	rc = listen_parse(listen_at, &ss, &sslen);
	if (rc == -EPERM)
		die("--listen %s: only loopback addresses (127.0.0.0/8, ::1)",
		    listen_at);
	if (rc < 0)
		die("--listen %s: want 127.0.0.1:PORT or [::1]:PORT",
		    listen_at);
	if (log_path) {
		server.log = fopen(log_path, "a");
		if (!server.log)
			die("--log %s: %s", log_path, strerror(errno));
	} else if (!server.quiet) {
		server.log = stderr;
	}

	/* Only the accept loop takes SIGINT and SIGTERM, inside ppoll;
	 * connection threads inherit the blocked mask. */
	signal(SIGPIPE, SIG_IGN);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigemptyset(&block);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &block, &old);
	sigdelset(&old, SIGINT);
	sigdelset(&old, SIGTERM);

	lfd = listen_open(&ss, sslen);
	if (lfd < 0) {
		fprintf(stderr, "pacefs-origin: --listen %s: %s\n", listen_at,
			strerror(-lfd));
		return 1;
	}
	sslen = sizeof(ss);
	if (getsockname(lfd, (struct sockaddr *)&ss, &sslen) < 0) {
		perror("pacefs-origin: getsockname");
		return 1;
	}
	if (ss.ss_family == AF_INET) {
		struct sockaddr_in *in4 = (struct sockaddr_in *)&ss;

		inet_ntop(AF_INET, &in4->sin_addr, addr, sizeof(addr));
		port = ntohs(in4->sin_port);
		printf("listening on %s:%u\n", addr, port);
	} else {
		struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;

		inet_ntop(AF_INET6, &in6->sin6_addr, addr, sizeof(addr));
		port = ntohs(in6->sin6_port);
		printf("listening on [%s]:%u\n", addr, port);
	}
	fflush(stdout);
	if (port_file) {
		rc = port_file_write(port_file, port);
		if (rc < 0) {
			fprintf(stderr, "pacefs-origin: --port-file %s: %s\n",
				port_file, strerror(-rc));
			return 1;
		}
	}

	while (!stop_signal) {
		struct pollfd pfd = {.fd = lfd, .events = POLLIN};

		rc = ppoll(&pfd, 1, NULL, &old);
		if (rc < 0) {
			if (errno == EINTR)
				continue;
			perror("pacefs-origin: poll");
			break;
		}
		fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0) {
			/* Out of descriptors or an aborted handshake: the
			 * listener stays up. */
			if (errno != EINTR && errno != ECONNABORTED &&
			    errno != EAGAIN)
				origin__sleep_ns(10 * NS_PER_MS);
			continue;
		}
		rc = origin__conn_start(&server, fd);
		if (rc < 0 && !server.quiet)
			fprintf(stderr, "pacefs-origin: connection: %s\n",
				strerror(-rc));
	}
	close(lfd);
	pthread_mutex_lock(&server.log_mu);
	if (server.log && server.log != stderr)
		fclose(server.log);
	server.log = NULL;
	pthread_mutex_unlock(&server.log_mu);
	if (!server.quiet)
		fprintf(stderr, "pacefs-origin: exiting on %s\n",
			stop_signal == SIGINT ? "SIGINT" : "SIGTERM");
	return 0;
}

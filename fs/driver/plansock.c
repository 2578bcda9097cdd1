/* plansock: the control socket through which `pacefs plan` and the Python
 * module set and clear read plans. An abstract Unix socket the daemon
 * binds under a random name, found through the root's
 * user.pacefs.control attribute (which only a user who may read the mount
 * can read); the peer's uid comes from SO_PEERCRED, and it may set a plan
 * when it may read the mount: the mount's owner, root, or anyone under
 * allow_other. A plan streams in (a 1.3 M-entry list is ~60 MB): its
 * paths are resolved to node numbers as they arrive. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "fs/driver/driver_int.h"
#include "fs/driver/plan_int.h"
#include "fs/engine/engine.h"
#include "fs/obs/obs.h"
#include "fs/tree/tree.h"

#define ENTRY_MAX (PATH_MAX + 48) /* a path, a tab, OFFSET+LENGTH */
#define MISSING_SHOWN 5
#define CONN_TIMEOUT_S 30

/* A connection's request as it is read. */
struct conn {
	struct driver_plans *s;
	int fd;
	uid_t uid;
	char sep; /* '\n' or '\0' */
	struct driver_plan *p;
	uint64_t missing;
	uint64_t entries; /* of the plan installed */
	char shown[MISSING_SHOWN][256];
	char err[512];
};

static bool name_ok(const char *name)
{
	size_t n = strlen(name);

	if (n == 0 || n > DRIVER_PLAN_NAME_MAX)
		return false;
	for (size_t k = 0; k < n; k++) {
		char c = name[k];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '.' || c == '_' ||
		      c == '-'))
			return false;
	}
	return true;
}

/* Node of path (relative to the mount's root), a file; TREE_NO_NODE when
 * there is none. Directories on the way are listed as a lookup lists
 * them. */
static uint32_t resolve(struct driver_mount *m, char *path)
{
	uint32_t node = 0;
	uint64_t deadline = fs__now_ns() + m->read_timeout_ns;
	char *c = path;

	while (c != NULL) {
		char *slash = strchr(c, '/');

		if (slash != NULL)
			*slash = '\0';
		if (c[0] != '\0' && strcmp(c, ".") != 0) {
			if (driver__dir_list(m, node, false, deadline) != 0)
				return TREE_NO_NODE;
			pthread_mutex_lock(&m->ns->mu);
			node = tree_ns_child(m->ns, node, c);
			pthread_mutex_unlock(&m->ns->mu);
			if (node == TREE_NO_NODE)
				return TREE_NO_NODE;
		}
		c = slash != NULL ? slash + 1 : NULL;
	}
	pthread_mutex_lock(&m->ns->mu);
	if (node == 0 || tree_ns_get(m->ns, node)->is_dir)
		node = TREE_NO_NODE;
	pthread_mutex_unlock(&m->ns->mu);
	return node;
}

/* "OFFSET+LENGTH" after a tab: the entry's range. */
static int parse_range(const char *s, struct driver_plan_range *r)
{
	char *end;
	unsigned long long off, len;

	errno = 0;
	off = strtoull(s, &end, 10);
	if (errno || end == s || *end != '+')
		return -EINVAL;
	s = end + 1;
	len = strtoull(s, &end, 10);
	if (errno || end == s || *end != '\0')
		return -EINVAL;
	r->off = off;
	r->len = len;
	return 0;
}

static int plan_grow(struct driver_plan *p, bool range)
{
	if (p->n == p->cap) {
		uint64_t cap = p->cap ? p->cap * 2 : 4096;
		uint32_t *n = realloc(p->nodes, cap * sizeof(*n));

		if (n == NULL)
			return -ENOMEM;
		p->nodes = n;
		if (p->ranges != NULL) {
			struct driver_plan_range *r =
				realloc(p->ranges, cap * sizeof(*r));

			if (r == NULL)
				return -ENOMEM;
			p->ranges = r;
		}
		p->cap = cap;
	}
	if (range && p->ranges == NULL) {
		p->ranges = calloc(p->cap, sizeof(*p->ranges));
		if (p->ranges == NULL)
			return -ENOMEM;
	}
	return 0;
}

/* One entry of the list: resolved and appended, or counted missing. */
static int conn_entry(struct conn *c, char *e)
{
	struct driver_plan_range r = {0, 0};
	char *tab = strchr(e, '\t');
	uint32_t node;
	int rc;

	if (e[0] == '\0')
		return 0;
	if (tab != NULL) {
		*tab = '\0';
		if (parse_range(tab + 1, &r) != 0) {
			snprintf(c->err, sizeof(c->err),
				 "entry %" PRIu64
				 ": a range is OFFSET+LENGTH in bytes",
				 c->p->n + c->missing + 1);
			return -EINVAL;
		}
	}
	if (c->missing < MISSING_SHOWN)
		snprintf(c->shown[c->missing], sizeof(c->shown[0]), "%s", e);
	node = resolve(c->s->m, e);
	if (node == TREE_NO_NODE) {
		c->missing++;
		return 0;
	}
	if (c->p->n >= DRIVER_PLAN_ENTRIES_MAX) {
		snprintf(c->err, sizeof(c->err),
			 "a plan holds %llu entries at most",
			 (unsigned long long)DRIVER_PLAN_ENTRIES_MAX);
		return -E2BIG;
	}
	rc = plan_grow(c->p, tab != NULL);
	if (rc != 0)
		return rc;
	c->p->nodes[c->p->n] = node;
	if (c->p->ranges != NULL)
		c->p->ranges[c->p->n] = r;
	c->p->n++;
	return 0;
}

/* Reads the list to its end, an entry at a time. */
static int conn_list(struct conn *c, char *buf, size_t cap)
{
	size_t have = 0;

	for (;;) {
		ssize_t got = recv(c->fd, buf + have, cap - have, 0);
		size_t start = 0;

		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0) {
			snprintf(c->err, sizeof(c->err), "reading the list: %s",
				 strerror(errno));
			return -errno;
		}
		if (got == 0) {
			buf[have] = '\0';
			return have ? conn_entry(c, buf) : 0;
		}
		have += (size_t)got;
		for (size_t k = 0; k < have; k++) {
			int rc;

			if (buf[k] != c->sep)
				continue;
			buf[k] = '\0';
			rc = conn_entry(c, buf + start);
			if (rc != 0)
				return rc;
			start = k + 1;
		}
		memmove(buf, buf + start, have - start);
		have -= start;
		if (have >= cap - 1) {
			snprintf(c->err, sizeof(c->err),
				 "an entry longer than %d bytes", ENTRY_MAX);
			return -ENAMETOOLONG;
		}
	}
}

/* The request's first line: "pacefs-plan 1 set|clear nl|nul NAME". */
static int conn_header(struct conn *c, char *op, size_t opcap)
{
	char line[256], sep[8], name[DRIVER_PLAN_NAME_MAX + 2];
	size_t k = 0;

	while (k < sizeof(line) - 1) {
		ssize_t got = recv(c->fd, line + k, 1, 0);

		if (got <= 0 || line[k] == '\n')
			break;
		k++;
	}
	line[k] = '\0';
	if (sscanf(line, "pacefs-plan 1 %7s %7s %64s", op, sep, name) != 3 ||
	    (strcmp(op, "set") != 0 && strcmp(op, "clear") != 0) ||
	    (strcmp(sep, "nl") != 0 && strcmp(sep, "nul") != 0)) {
		snprintf(c->err, sizeof(c->err), "not a plan request");
		return -EPROTO;
	}
	(void)opcap;
	if (!name_ok(name)) {
		snprintf(c->err, sizeof(c->err),
			 "a plan's name is 1 to %d of [A-Za-z0-9._-]",
			 DRIVER_PLAN_NAME_MAX);
		return -EINVAL;
	}
	c->sep = strcmp(sep, "nul") == 0 ? '\0' : '\n';
	snprintf(c->p->name, sizeof(c->p->name), "%s", name);
	return 0;
}

/* What the peer is told: "ok ..." or "error: ...", and the paths missing. */
static void conn_answer(struct conn *c, int rc, bool set)
{
	char out[2048];
	size_t used = 0;

	if (rc != 0)
		used = (size_t)snprintf(out, sizeof(out), "error: %s\n",
					c->err[0] ? c->err : strerror(-rc));
	else if (set)
		used = (size_t)snprintf(out, sizeof(out),
					"ok %" PRIu64 " entries, %" PRIu64
					" missing\n",
					c->entries, c->missing);
	else
		used = (size_t)snprintf(out, sizeof(out), "ok cleared\n");
	for (uint64_t k = 0;
	     k < c->missing && k < MISSING_SHOWN && used < sizeof(out); k++)
		used += (size_t)snprintf(out + used, sizeof(out) - used,
					 "missing: %s\n", c->shown[k]);
	if (used > sizeof(out))
		used = sizeof(out);
	(void)!send(c->fd, out, used, MSG_NOSIGNAL);
}

/* One request, whole: the header, the list, the plan installed. */
static int conn_serve(struct conn *c, bool *set)
{
	char op[8], name[DRIVER_PLAN_NAME_MAX + 1];
	uid_t owner;
	char *buf = NULL;
	int rc;

	rc = conn_header(c, op, sizeof(op));
	if (rc != 0)
		return rc;
	*set = strcmp(op, "set") == 0;
	/* Refused before the list is read (a 1.3 M-entry list is ~60 MB);
	 * the install checks again, should another request come between. */
	if (driver__plan_owner(c->s, c->p->name, &owner) && owner != c->uid) {
		snprintf(c->err, sizeof(c->err),
			 "plan '%s' was set by uid %u: only that user may "
			 "replace or clear it",
			 c->p->name, (unsigned)owner);
		return -EPERM;
	}
	c->p->uid = c->uid;
	c->p->set_ns = fs__now_ns();
	if (*set) {
		buf = malloc(ENTRY_MAX + 65536);
		if (buf == NULL)
			return -ENOMEM;
		rc = conn_list(c, buf, ENTRY_MAX + 65536);
		free(buf);
		if (rc != 0)
			return rc;
		if (c->p->n == 0) {
			snprintf(c->err, sizeof(c->err),
				 "no path of the plan is a file of the mount "
				 "(%" PRIu64 " missing)",
				 c->missing);
			return -ENOENT;
		}
		c->p->done = calloc((size_t)(c->p->n / 8 + 1), 1);
		if (c->p->done == NULL)
			return -ENOMEM;
	}
	/* Once installed the plan is the mount's (a clear's is freed at
	 * once, a set's may be replaced by another request): what the log
	 * and the answer say is taken before. */
	snprintf(name, sizeof(name), "%s", c->p->name);
	c->entries = c->p->n;
	rc = driver__plan_install(c->s, c->p, c->err, sizeof(c->err));
	if (rc == 0) {
		c->p = NULL;
		obs_log(FS_LOG_INFO,
			"plan '%s' %s by uid %u: %" PRIu64 " entries, %" PRIu64
			" missing",
			name, *set ? "set" : "cleared", (unsigned)c->uid,
			c->entries, c->missing);
	}
	return rc;
}

static void conn_forget(struct driver_plans *s, int fd)
{
	pthread_mutex_lock(&s->mu);
	for (uint32_t k = 0; k < DRIVER_PLAN_CONNS; k++)
		if (s->conn_fds[k] == fd)
			s->conn_fds[k] = -1;
	s->nconns--;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
}

static void *conn_thread(void *arg)
{
	struct conn *c = arg;
	struct driver_plans *s = c->s;
	bool set = false;
	int rc;

	c->p = calloc(1, sizeof(*c->p));
	rc = c->p != NULL ? conn_serve(c, &set) : -ENOMEM;
	conn_answer(c, rc, set);
	if (c->p != NULL && rc != 0)
		driver__plan_free(c->p);
	conn_forget(s, c->fd);
	close(c->fd);
	free(c);
	return NULL;
}

/* Whether uid may set a plan: whether it may read the mount. Without
 * allow_other the kernel lets the mount's owner alone in; with it,
 * everyone (the mount's modes give every user read and search). */
static bool may_read(const struct driver_plans *s, uid_t uid)
{
	return uid == 0 || uid == s->m->uid || s->allow_other;
}

static void accept_one(struct driver_plans *s, int fd)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);
	struct timeval tv = {.tv_sec = CONN_TIMEOUT_S};
	struct conn *c = NULL;
	pthread_t t;
	int slot = -1;

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 ||
	    !may_read(s, cred.uid)) {
		static const char no[] =
			"error: this user may not read the mount\n";

		(void)!send(fd, no, sizeof(no) - 1, MSG_NOSIGNAL);
		close(fd);
		return;
	}
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	pthread_mutex_lock(&s->mu);
	for (int k = 0; k < DRIVER_PLAN_CONNS && !s->stop; k++)
		if (s->conn_fds[k] < 0) {
			slot = k;
			s->conn_fds[k] = fd;
			s->nconns++;
			break;
		}
	pthread_mutex_unlock(&s->mu);
	c = slot >= 0 ? calloc(1, sizeof(*c)) : NULL;
	if (c != NULL) {
		c->s = s;
		c->fd = fd;
		c->uid = cred.uid;
		if (pthread_create(&t, NULL, conn_thread, c) == 0) {
			pthread_detach(t);
			return;
		}
		free(c);
	}
	if (slot >= 0)
		conn_forget(s, fd);
	(void)!send(fd, "error: busy\n", 12, MSG_NOSIGNAL);
	close(fd);
}

static void *acceptor(void *arg)
{
	struct driver_plans *s = arg;

	for (;;) {
		int fd = accept4(s->listen_fd, NULL, NULL, SOCK_CLOEXEC);
		bool stop;

		pthread_mutex_lock(&s->mu);
		stop = s->stop;
		pthread_mutex_unlock(&s->mu);
		if (stop) {
			if (fd >= 0)
				close(fd);
			return NULL;
		}
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED ||
			    errno == EMFILE || errno == ENFILE)
				continue;
			return NULL;
		}
		accept_one(s, fd);
	}
}

int driver__plan_listen(struct driver_plans *s, bool allow_other)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	uint8_t rnd[12];
	char hex[25];
	size_t nl;
	int fd;

	s->allow_other = allow_other;
	for (int k = 0; k < DRIVER_PLAN_CONNS; k++)
		s->conn_fds[k] = -1;
	if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
		return -EIO;
	fs__hex(rnd, sizeof(rnd), hex);
	snprintf(s->sock_name, sizeof(s->sock_name), "@pacefs/%ld/%s",
		 (long)getpid(), hex);
	nl = strlen(s->sock_name);
	/* Abstract: nothing on disk to clean up or to race for. */
	memcpy(a.sun_path + 1, s->sock_name + 1, nl - 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (bind(fd, (struct sockaddr *)&a,
		 (socklen_t)(offsetof(struct sockaddr_un, sun_path) + nl)) !=
		    0 ||
	    listen(fd, 16) != 0) {
		int rc = -errno;

		close(fd);
		return rc;
	}
	s->listen_fd = fd;
	if (pthread_create(&s->acceptor, NULL, acceptor, s) != 0) {
		close(fd);
		s->listen_fd = -1;
		return -EAGAIN;
	}
	s->accepting = true;
	return 0;
}

void driver__plan_set_free(struct driver_plans *s)
{
	struct driver_plan_hint *open;
	uint32_t nopen = 0;

	if (s == NULL)
		return;
	pthread_mutex_lock(&s->mu);
	s->stop = true;
	for (int k = 0; k < DRIVER_PLAN_CONNS; k++)
		if (s->conn_fds[k] >= 0)
			shutdown(s->conn_fds[k], SHUT_RDWR);
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	if (s->accepting) {
		shutdown(s->listen_fd, SHUT_RDWR);
		pthread_join(s->acceptor, NULL);
	}
	if (s->listen_fd >= 0)
		close(s->listen_fd);
	/* s->stop is set: nthreads moves no more. */
	for (uint32_t k = 0; k < s->nthreads; k++)
		pthread_join(s->threads[k], NULL);
	pthread_mutex_lock(&s->mu);
	while (s->nconns > 0)
		pthread_cond_wait(&s->cv, &s->mu);
	pthread_mutex_unlock(&s->mu);
	open = calloc(DRIVER_PLAN_HINTS, sizeof(*open));
	for (uint32_t k = 0; k < DRIVER_PLAN_HINTS; k++)
		if (s->hints[k].state == DRIVER_HINT_OPEN && open != NULL)
			open[nopen++] = s->hints[k];
	for (uint32_t k = 0; k < nopen; k++)
		engine_close(s->m->engine, open[k].blob, open[k].reader);
	free(open);
	for (uint32_t k = 0; k < DRIVER_PLAN_SLOTS; k++)
		driver__plan_free(s->plans[k]);
	pthread_mutex_destroy(&s->mu);
	pthread_cond_destroy(&s->cv);
	free(s);
}

const char *driver__plan_socket(const struct driver_plans *s)
{
	return s != NULL ? s->sock_name : "";
}

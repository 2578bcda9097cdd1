/* fs: the FUSE low-level operations of a pacefs mount: a read-only tree of
 * directories and remote files, each open file a reader stream. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/uio.h>
#include <unistd.h>

#include <fuse_lowlevel.h>

#include "fs/driver/driver_int.h"
#include "fs/engine/engine.h"
#include "fs/obs/obs.h"
#include "fs/tree/tree.h"

/* Inode i + 1 is node i; FUSE_ROOT_ID (1) is the root, node 0. */
#define NODE_OF(ino) ((uint32_t)((ino)-1))
#define INO_OF(node) ((fuse_ino_t)(node) + 1)

/* A file handle carries the blob in its high half, the reader in its low. */
#define FH_MAKE(blob, reader) (((uint64_t)(blob) << 32) | (reader))
#define FH_BLOB(fh) ((uint32_t)((fh) >> 32))
#define FH_READER(fh) ((uint32_t)((fh)&0xffffffffu))

#define XATTR_PREFIX "user.pacefs."

/* Fills st from node i; false when there is no such node. Caller holds
 * ns->mu. */
static bool node_attr(const struct driver_mount *m, uint32_t i, struct stat *st)
{
	const struct tree_node *n = tree_ns_get(m->ns, i);

	if (n == NULL || n->gone)
		return false;
	memset(st, 0, sizeof(*st));
	st->st_ino = INO_OF(i);
	st->st_uid = m->uid;
	st->st_gid = m->gid;
	st->st_mtim = m->mtime;
	if (n->mtime >= 0) {
		st->st_mtim.tv_sec = (time_t)n->mtime;
		st->st_mtim.tv_nsec = 0;
	}
	st->st_ctim = st->st_mtim;
	st->st_atim = st->st_mtim;
	st->st_blksize = CACHE_BLOCK_SIZE;
	if (n->is_dir) {
		st->st_mode = S_IFDIR | (n->mode & 0555);
		st->st_nlink = 2;
		return true;
	}
	st->st_mode = S_IFREG | (n->mode & 0555);
	st->st_nlink = 1;
	st->st_size = (off_t)n->size;
	/* Of unknown length: 0 until its stream ends, then its size. */
	if (n->size == 0 && n->blob != TREE_NO_BLOB) {
		uint64_t size;

		if (!engine_blob_size(m->engine, n->blob, &size))
			st->st_size = (off_t)size;
	}
	st->st_blocks = (blkcnt_t)((st->st_size + 511) / 512);
	return true;
}

/* When a request that waits on the network must be answered: a read's
 * deadline (-o read_timeout=) from its start, whatever it waits for. */
static uint64_t req_deadline(const struct driver_mount *m)
{
	return fs__now_ns() + m->read_timeout_ns;
}

/* Makes sure node i's size is known (probing the file if the manifest or
 * listing did not give it). */
static int node_sized(struct driver_mount *m, uint32_t i, uint64_t deadline_ns)
{
	bool need;

	pthread_mutex_lock(&m->ns->mu);
	need = !tree_ns_get(m->ns, i)->is_dir &&
	       !tree_ns_get(m->ns, i)->has_size;
	pthread_mutex_unlock(&m->ns->mu);
	return need ? driver__file_ready(m, i, deadline_ns) : 0;
}

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
	struct driver_mount *m = userdata;

	/* The kernel sends reads as large as its readahead; what it reads
	 * ahead counts in each reader's lead, and pacing decides what is
	 * fetched. */
	conn->max_readahead = DRIVER_KERNEL_AHEAD;
	conn->max_background = DRIVER_BACKGROUND;
	conn->congestion_threshold = DRIVER_CONGESTION;
	/* Bytes read from the cache's file go to the kernel as its pages
	 * (fuse_reply_data over the file): one copy fewer (README.md). */
	m->splice = (conn->capable & FUSE_CAP_SPLICE_WRITE) != 0;
	if (m->splice)
		conn->want |= FUSE_CAP_SPLICE_WRITE;
	if (conn->capable & FUSE_CAP_ASYNC_READ)
		conn->want |= FUSE_CAP_ASYNC_READ;
	conn->want &= ~(unsigned)FUSE_CAP_ATOMIC_O_TRUNC;
	/* With asynchronous direct I/O the kernel waits for a synchronous
	 * O_DIRECT read uninterruptibly, so a signal never reaches a read
	 * that waits on the network: keep such reads synchronous. */
	conn->want &= ~(unsigned)FUSE_CAP_ASYNC_DIO;
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct driver_mount *m = fuse_req_userdata(req);
	struct fuse_entry_param ep;
	uint64_t deadline = req_deadline(m);
	uint32_t child;
	bool is_dir;
	int rc;

	rc = driver__dir_list(m, NODE_OF(parent), false, deadline);
	if (rc != 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	pthread_mutex_lock(&m->ns->mu);
	child = tree_ns_child(m->ns, NODE_OF(parent), name);
	is_dir = child != TREE_NO_NODE && tree_ns_get(m->ns, child)->is_dir;
	pthread_mutex_unlock(&m->ns->mu);
	if (child == TREE_NO_NODE) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	rc = is_dir ? 0 : node_sized(m, child, deadline);
	if (rc != 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	memset(&ep, 0, sizeof(ep));
	ep.ino = INO_OF(child);
	ep.attr_timeout = m->attr_timeout;
	ep.entry_timeout = m->entry_timeout;
	pthread_mutex_lock(&m->ns->mu);
	rc = node_attr(m, child, &ep.attr) ? 0 : -ENOENT;
	pthread_mutex_unlock(&m->ns->mu);
	if (rc != 0)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_entry(req, &ep);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	struct driver_mount *m = fuse_req_userdata(req);
	struct stat st;
	bool found;

	(void)fi;
	pthread_mutex_lock(&m->ns->mu);
	found = node_attr(m, NODE_OF(ino), &st);
	pthread_mutex_unlock(&m->ns->mu);
	if (!found)
		fuse_reply_err(req, ENOENT);
	else
		fuse_reply_attr(req, &st, m->attr_timeout);
}

static void op_opendir(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	struct driver_mount *m = fuse_req_userdata(req);
	const struct tree_node *n;
	int err = 0;

	pthread_mutex_lock(&m->ns->mu);
	n = tree_ns_get(m->ns, NODE_OF(ino));
	if (n == NULL)
		err = ENOENT;
	else if (!n->is_dir)
		err = ENOTDIR;
	pthread_mutex_unlock(&m->ns->mu);
	if (err != 0) {
		fuse_reply_err(req, err);
		return;
	}
	fuse_reply_open(req, fi);
}

/* Appends one entry to a readdir reply buffer; returns false when full. */
static bool add_entry(fuse_req_t req, char *buf, size_t size, size_t *used,
		      const char *name, fuse_ino_t ino, mode_t mode, off_t next)
{
	struct stat st = {.st_ino = ino, .st_mode = mode};
	size_t need = fuse_add_direntry(req, NULL, 0, name, NULL, 0);

	if (*used + need > size)
		return false;
	fuse_add_direntry(req, buf + *used, size - *used, name, &st, next);
	*used += need;
	return true;
}

/* As add_entry, with child's attributes when they are known without the
 * network (a directory, a file whose size the listing or manifest gave):
 * the kernel then needs no lookup of it, which was most of an `ls -l`
 * of a large directory. Any other entry goes without them (node 0: the
 * kernel looks it up, and the lookup probes it). Caller holds ns->mu. */
static bool add_entry_plus(fuse_req_t req, const struct driver_mount *m,
			   char *buf, size_t size, size_t *used,
			   const char *name, const struct tree_node *c,
			   uint32_t child, off_t next)
{
	struct fuse_entry_param ep;
	size_t need = fuse_add_direntry_plus(req, NULL, 0, name, NULL, 0);

	if (*used + need > size)
		return false;
	memset(&ep, 0, sizeof(ep));
	if (c != NULL && (c->is_dir || c->has_size) &&
	    node_attr(m, child, &ep.attr)) {
		ep.ino = INO_OF(child);
		ep.attr_timeout = m->attr_timeout;
		ep.entry_timeout = m->entry_timeout;
	} else {
		ep.attr.st_ino = INO_OF(child);
		ep.attr.st_mode = c == NULL || c->is_dir ? S_IFDIR : S_IFREG;
	}
	fuse_add_direntry_plus(req, buf + *used, size - *used, name, &ep, next);
	*used += need;
	return true;
}

static const struct tree_dir no_children;

/* readdir and readdirplus: offsets 0 ".", 1 "..", 2 + i the i-th child;
 * a child gone from its re-read listing is left out. */
static void dir_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		     bool plus)
{
	struct driver_mount *m = fuse_req_userdata(req);
	const struct tree_node *dn;
	const struct tree_dir *d;
	size_t used = 0;
	char *buf;
	int rc;

	if (off == 0) {
		rc = driver__dir_list(m, NODE_OF(ino), true, req_deadline(m));
		if (rc != 0) {
			fuse_reply_err(req, -rc);
			return;
		}
		/* ls -l stats every entry next: the sizes the index did
		 * not give are probed in parallel now. A failure here only
		 * leaves them to the stats. */
		if (m->sizes != NULL)
			(void)driver__sizes_queue(m->sizes, NODE_OF(ino));
	}
	buf = malloc(size);
	if (buf == NULL) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	pthread_mutex_lock(&m->ns->mu);
	dn = tree_ns_get(m->ns, NODE_OF(ino));
	d = dn == NULL ? NULL : dn->is_dir ? dn->dir : &no_children;
	for (off_t i = off; d != NULL && i < (off_t)d->nchildren + 2; i++) {
		const struct tree_node *c = NULL;
		uint32_t node = NODE_OF(ino);
		const char *name = ".";
		bool added;

		if (i == 1) {
			name = "..";
			node = dn->parent;
		} else if (i > 1) {
			node = d->children[i - 2];
			c = tree_ns_get(m->ns, node);
			if (c->gone)
				continue;
			name = c->name;
		}
		/* "." and ".." go without attributes: the kernel has them. */
		added = plus ? add_entry_plus(req, m, buf, size, &used, name, c,
					      node, i + 1)
			     : add_entry(req, buf, size, &used, name,
					 INO_OF(node),
					 c == NULL || c->is_dir ? S_IFDIR
								: S_IFREG,
					 i + 1);
		if (!added)
			break;
	}
	pthread_mutex_unlock(&m->ns->mu);
	if (d == NULL)
		fuse_reply_err(req, ENOENT);
	else
		fuse_reply_buf(req, buf, used);
	free(buf);
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	(void)fi;
	dir_read(req, ino, size, off, false);
}

static void op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size,
			   off_t off, struct fuse_file_info *fi)
{
	(void)fi;
	dir_read(req, ino, size, off, true);
}

/* The blob of file node i once it is ready, or TREE_NO_BLOB. */
static uint32_t node_blob(struct driver_mount *m, uint32_t i)
{
	uint32_t blob;

	pthread_mutex_lock(&m->ns->mu);
	blob = i < m->ns->n ? tree_ns_get(m->ns, i)->blob : TREE_NO_BLOB;
	pthread_mutex_unlock(&m->ns->mu);
	return blob;
}

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct driver_mount *m = fuse_req_userdata(req);
	uint32_t reader, blob;
	uint64_t size;
	bool keep_cache;
	int rc;

	if ((fi->flags & O_ACCMODE) != O_RDONLY) {
		fuse_reply_err(req, EROFS);
		return;
	}
	rc = driver__file_ready(m, NODE_OF(ino), req_deadline(m));
	if (rc != 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	blob = node_blob(m, NODE_OF(ino));
	rc = engine_open(m->engine, blob, ino, &reader, &keep_cache);
	if (rc != 0) {
		fuse_reply_err(req, rc == -ENOSPC ? EMFILE : -rc);
		return;
	}
	driver__plan_opened(m->plans, NODE_OF(ino), fuse_req_ctx(req)->pid,
			    fuse_req_ctx(req)->uid);
	fi->fh = FH_MAKE(blob, reader);
	/* The blob is pinned to its validator: cached pages stay true, but
	 * for bytes dropped as wrong or stale since the last open. */
	fi->keep_cache = keep_cache;
	/* Of unknown length (size 0 for now): read to its end as /proc
	 * files are, past the size the kernel knows. */
	fi->direct_io = engine_blob_size(m->engine, blob, &size);
	fuse_reply_open(req, fi);
}

/* Each FUSE worker thread keeps its read buffer, freed when the thread
 * ends: a fresh 1 MiB allocation per read is a fresh mapping, and its page
 * faults cost a cold read CPU (docs/fs-notes.md). */
struct read_buf {
	size_t size;
	char data[];
};

static pthread_key_t read_buf_key;
static pthread_once_t read_buf_once = PTHREAD_ONCE_INIT;

static void read_buf_key_make(void)
{
	pthread_key_create(&read_buf_key, free);
}

static char *thread_read_buf(size_t size)
{
	struct read_buf *rb;

	pthread_once(&read_buf_once, read_buf_key_make);
	rb = pthread_getspecific(read_buf_key);
	if (rb != NULL && rb->size >= size)
		return rb->data;
	free(rb);
	pthread_setspecific(read_buf_key, NULL);
	rb = malloc(sizeof(*rb) + size);
	if (rb == NULL)
		return NULL;
	rb->size = size;
	pthread_setspecific(read_buf_key, rb);
	return rb->data;
}

/* The kernel interrupted a request (a signal to the reader): wake the
 * waiting reads so that the interrupted one sees it. */
static void on_interrupt(fuse_req_t req, void *data)
{
	(void)req;
	engine_wake_readers(data);
}

/* Interrupted by the reader, or the session ended (unmounted or
 * signalled): nobody waits for the answer any more, and libfuse joins this
 * thread before the daemon can exit. */
static bool req_interrupted(void *req)
{
	struct driver_mount *m = fuse_req_userdata(req);

	return fuse_req_interrupted(req) != 0 ||
	       (m->se != NULL && fuse_session_exited(m->se));
}

/* libfuse 3.14 splices a reply only when its last file piece is at least
 * two pages (it looks at that piece's size alone), and otherwise copies
 * the whole reply through a buffer it allocates. */
#define DRIVER_SPLICE_MIN (2 * 4096u)

/* The one place a read is answered (op_read's own refusals and the
 * engine's answer, engine_read_reply): err, a negative errno, with
 * fuse_reply_err; else its pieces, from memory with one writev, or through
 * a pipe that takes the cache file's pages by reference (the engine calls
 * this under the cache's read transaction, which keeps them as they are).
 * Returns 0: the request is answered (a failure to send is libfuse's to
 * log). */
static int read_reply(void *ctx, struct cache_piece *p, size_t n, int err)
{
	fuse_req_t req = ctx;
	union {
		struct fuse_bufvec v;
		char room[sizeof(struct fuse_bufvec) +
			  ENGINE_REPLY_PIECES * sizeof(struct fuse_buf)];
	} bv;
	struct iovec iov[ENGINE_REPLY_PIECES];
	struct fuse_buf *bufs;
	size_t last = n;

	if (err != 0) {
		fuse_reply_err(req, -err);
		return 0;
	}
	if (n > ENGINE_REPLY_PIECES) {
		fuse_reply_err(req, EIO);
		return 0;
	}
	for (size_t i = 0; i < n; i++)
		if (p[i].mem == NULL)
			last = i;
	/* A short last file piece is read here, so that the rest splices. */
	if (last < n && p[last].len < DRIVER_SPLICE_MIN) {
		ssize_t got = pread(p[last].fd, p[last].buf, p[last].len,
				    (off_t)p[last].pos);

		if (got != (ssize_t)p[last].len) {
			fuse_reply_err(req, EIO);
			return 0;
		}
		p[last].mem = p[last].buf;
		last = n;
		for (size_t i = 0; i < n; i++)
			if (p[i].mem == NULL)
				last = i;
	}
	if (last == n) {
		for (size_t i = 0; i < n; i++) {
			iov[i].iov_base = (void *)p[i].mem;
			iov[i].iov_len = p[i].len;
		}
		fuse_reply_iov(req, iov, (int)n);
		return 0;
	}
	memset(&bv, 0, sizeof(bv));
	bv.v.count = n;
	/* fuse_bufvec ends in buf[1] and is made longer (bv.room): its
	 * buffers are reached through a pointer, not by indexing buf. */
	bufs = bv.v.buf;
	for (size_t i = 0; i < n; i++) {
		struct fuse_buf *fb = bufs + i;

		fb->size = p[i].len;
		if (p[i].mem != NULL) {
			fb->mem = (void *)p[i].mem;
		} else {
			fb->flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
			fb->fd = p[i].fd;
			fb->pos = (off_t)p[i].pos;
		}
	}
	fuse_reply_data(req, &bv.v, 0);
	return 0;
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct driver_mount *m = fuse_req_userdata(req);
	struct engine_read_reply rr = {
		.reply = read_reply,
		.ctx = req,
		.fds = m->splice,
		.cancelled = req_interrupted,
		.arg = req,
	};
	uint64_t start = fs__now_ns();
	char *buf;
	long n;

	(void)ino;
	if (off < 0) {
		read_reply(req, NULL, 0, -EINVAL);
		return;
	}
	buf = thread_read_buf(size ? size : 1);
	if (buf == NULL) {
		read_reply(req, NULL, 0, -ENOMEM);
		return;
	}
	fuse_req_interrupt_func(req, on_interrupt, m->engine);
	/* Answered through read_reply, once, whatever the outcome. */
	n = engine_read(m->engine, FH_BLOB(fi->fh), FH_READER(fi->fh),
			(uint64_t)off, size, buf, &rr);
	if (m->metrics != NULL)
		obs_metrics_read(m->metrics, fs__now_ns() - start, n < 0);
}

static void op_release(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	struct driver_mount *m = fuse_req_userdata(req);

	(void)ino;
	engine_close(m->engine, FH_BLOB(fi->fh), FH_READER(fi->fh));
	fuse_reply_err(req, 0);
}

static void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct driver_mount *m = fuse_req_userdata(req);
	struct statvfs sv;
	uint64_t total = 0;
	uint32_t files;

	(void)ino;
	pthread_mutex_lock(&m->ns->mu);
	files = m->ns->n;
	for (uint32_t i = 0; i < m->ns->n; i++)
		if (!tree_ns_get(m->ns, i)->is_dir)
			total += tree_ns_get(m->ns, i)->size;
	pthread_mutex_unlock(&m->ns->mu);
	memset(&sv, 0, sizeof(sv));
	sv.f_bsize = CACHE_BLOCK_SIZE;
	sv.f_frsize = 4096;
	sv.f_blocks = (fsblkcnt_t)((total + 4095) / 4096);
	sv.f_files = files;
	sv.f_namemax = 255;
	sv.f_flag = ST_RDONLY;
	fuse_reply_statfs(req, &sv);
}

/* Renders the value of extended attribute `name` of node i into buf (cap
 * bytes, NUL-terminated); returns its length or -ENODATA. */
static int xattr_value(struct driver_mount *m, uint32_t i, const char *name,
		       char *buf, size_t cap)
{
	struct tree_node *n;
	uint32_t blob;
	int len = -ENODATA;

	if (strncmp(name, XATTR_PREFIX, strlen(XATTR_PREFIX)) != 0)
		return -ENODATA;
	name += strlen(XATTR_PREFIX);
	if (i == 0 && strcmp(name, "status") == 0) {
		struct obs_view v;

		driver__mount_view(m, &v);
		return obs_status_json(&v, buf, cap);
	}
	if (i == 0 && strcmp(name, "plans") == 0 && m->plans != NULL)
		return driver__plan_status_json(m->plans, buf, cap);
	if (i == 0 && strcmp(name, "control") == 0 &&
	    driver__plan_socket(m->plans)[0] != '\0')
		return snprintf(buf, cap, "%s", driver__plan_socket(m->plans));
	pthread_mutex_lock(&m->ns->mu);
	n = tree_ns_get(m->ns, i);
	blob = n != NULL ? n->blob : TREE_NO_BLOB;
	if (n == NULL || n->is_dir) {
		len = -ENODATA;
	} else if (strcmp(name, "url") == 0) {
		size_t used = 0;

		/* Without userinfo: with allow_other, every user reads
		 * this. */
		buf[0] = '\0';
		for (uint32_t u = 0; u < tree_node_nurls(n) && used < cap;
		     u++) {
			char *url = tree_ns_url(m->ns, i, u);
			char *shown =
				url != NULL ? fetch_url_redacted(url) : NULL;

			free(url);
			if (shown == NULL) {
				len = -ENOMEM;
				break;
			}
			used += (size_t)snprintf(buf + used, cap - used, "%s%s",
						 u ? "\n" : "", shown);
			free(shown);
		}
		if (len != -ENOMEM)
			len = (int)strlen(buf);
	} else if (strcmp(name, "size") == 0 && n->has_size) {
		len = snprintf(buf, cap, "%" PRIu64, n->size);
	} else if (strcmp(name, "sha256") == 0 && tree_file_of(n)->has_sha256) {
		if (cap > 64) {
			fs__hex(tree_file_of(n)->sha256, 32, buf);
			len = 64;
		}
	}
	pthread_mutex_unlock(&m->ns->mu);
	if (n == NULL || n->is_dir || len >= 0)
		return len;
	if (strcmp(name, "cached") == 0)
		len = snprintf(buf, cap, "%" PRIu64,
			       blob == TREE_NO_BLOB
				       ? 0
				       : engine_held(m->engine, blob));
	else if (strcmp(name, "etag") == 0 && blob != TREE_NO_BLOB)
		len = engine_validator(m->engine, blob, buf, cap);
	else if (strcmp(name, "state") == 0)
		len = snprintf(buf, cap, "%s",
			       blob == TREE_NO_BLOB
				       ? "remote"
				       : engine_state(m->engine, blob));
	return len;
}

static const char *const xattr_names[] = {"url",  "size",   "cached",
					  "etag", "sha256", "state"};

static void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
			size_t size)
{
	struct driver_mount *m = fuse_req_userdata(req);
	char buf[OBS_STATUS_MAX];
	int len = xattr_value(m, NODE_OF(ino), name, buf, sizeof(buf));

	if (len < 0)
		fuse_reply_err(req, -len);
	else if (size == 0)
		fuse_reply_xattr(req, (size_t)len);
	else if ((size_t)len > size)
		fuse_reply_err(req, ERANGE);
	else
		fuse_reply_buf(req, buf, (size_t)len);
}

static void op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	struct driver_mount *m = fuse_req_userdata(req);
	char names[512], value[OBS_STATUS_MAX];
	size_t used = 0;

	for (size_t k = 0; k < sizeof(xattr_names) / sizeof(xattr_names[0]);
	     k++) {
		char full[64];

		snprintf(full, sizeof(full), XATTR_PREFIX "%s", xattr_names[k]);
		if (xattr_value(m, NODE_OF(ino), full, value, sizeof(value)) <
		    0)
			continue;
		memcpy(names + used, full, strlen(full) + 1);
		used += strlen(full) + 1;
	}
	if (ino == FUSE_ROOT_ID) {
		static const char status[] = XATTR_PREFIX "status";
		static const char plans[] =
			XATTR_PREFIX "plans\0" XATTR_PREFIX "control";

		memcpy(names + used, status, sizeof(status));
		used += sizeof(status);
		if (driver__plan_socket(m->plans)[0] != '\0') {
			memcpy(names + used, plans, sizeof(plans));
			used += sizeof(plans);
		}
	}
	if (size == 0)
		fuse_reply_xattr(req, used);
	else if (used > size)
		fuse_reply_err(req, ERANGE);
	else
		fuse_reply_buf(req, names, used);
}

const struct fuse_lowlevel_ops driver__ops = {
	.init = op_init,
	.lookup = op_lookup,
	.getattr = op_getattr,
	.opendir = op_opendir,
	.readdir = op_readdir,
	.readdirplus = op_readdirplus,
	.open = op_open,
	.read = op_read,
	.release = op_release,
	.statfs = op_statfs,
	.getxattr = op_getxattr,
	.listxattr = op_listxattr,
};

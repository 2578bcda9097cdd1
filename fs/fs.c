/* fs: the FUSE low-level operations of a pacefs mount: a read-only root
 * directory holding the mounted blobs. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include "fs/fs_int.h"

#define FS_ROOT_INO FUSE_ROOT_ID
#define FS_FIRST_INO 2

/* The blob behind an inode, or NULL. */
static const struct fs_blob *blob_of(const struct fs_mount *m, fuse_ino_t ino)
{
	const struct fs_engine *e = m->engine;

	if (ino < FS_FIRST_INO || ino - FS_FIRST_INO >= e->nblobs)
		return NULL;
	return &e->blobs[ino - FS_FIRST_INO];
}

static void fill_attr(const struct fs_mount *m, fuse_ino_t ino, struct stat *st)
{
	const struct fs_blob *b = blob_of(m, ino);

	memset(st, 0, sizeof(*st));
	st->st_ino = ino;
	st->st_uid = m->uid;
	st->st_gid = m->gid;
	st->st_mtim = m->mtime;
	st->st_ctim = m->mtime;
	st->st_atim = m->mtime;
	st->st_blksize = CACHE_BLOCK_SIZE;
	if (b == NULL) {
		st->st_mode = S_IFDIR | 0555;
		st->st_nlink = 2;
		return;
	}
	st->st_mode = S_IFREG | 0444;
	st->st_nlink = 1;
	st->st_size = (off_t)b->size;
	st->st_blocks = (blkcnt_t)((b->size + 511) / 512);
}

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
	(void)userdata;
	/* Let the kernel send big reads and read ahead as far as it may;
	 * pacing decides what is actually fetched. */
	conn->max_readahead = 16u * 1024u * 1024u;
	if (conn->capable & FUSE_CAP_ASYNC_READ)
		conn->want |= FUSE_CAP_ASYNC_READ;
	conn->want &= ~(unsigned)FUSE_CAP_ATOMIC_O_TRUNC;
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	const struct fs_mount *m = fuse_req_userdata(req);
	const struct fs_engine *e = m->engine;
	struct fuse_entry_param ep;

	if (parent != FS_ROOT_INO) {
		fuse_reply_err(req, ENOTDIR);
		return;
	}
	for (uint32_t i = 0; i < e->nblobs; i++) {
		if (strcmp(e->blobs[i].name, name) != 0)
			continue;
		memset(&ep, 0, sizeof(ep));
		ep.ino = FS_FIRST_INO + i;
		ep.attr_timeout = m->attr_timeout;
		ep.entry_timeout = m->entry_timeout;
		fill_attr(m, ep.ino, &ep.attr);
		fuse_reply_entry(req, &ep);
		return;
	}
	fuse_reply_err(req, ENOENT);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	const struct fs_mount *m = fuse_req_userdata(req);
	struct stat st;

	(void)fi;
	if (ino != FS_ROOT_INO && blob_of(m, ino) == NULL) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	fill_attr(m, ino, &st);
	fuse_reply_attr(req, &st, m->attr_timeout);
}

static void op_opendir(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	if (ino != FS_ROOT_INO) {
		fuse_reply_err(req, ENOTDIR);
		return;
	}
	fi->cache_readdir = 1;
	fi->keep_cache = 1;
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

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	const struct fs_mount *m = fuse_req_userdata(req);
	const struct fs_engine *e = m->engine;
	char *buf;
	size_t used = 0;

	(void)fi;
	if (ino != FS_ROOT_INO) {
		fuse_reply_err(req, ENOTDIR);
		return;
	}
	buf = malloc(size);
	if (buf == NULL) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	/* Offsets: 0 ".", 1 "..", 2 + i the i-th blob. */
	for (off_t i = off; i < (off_t)e->nblobs + 2; i++) {
		const char *name = i == 0 ? "." : i == 1 ? ".." : NULL;
		fuse_ino_t child = i < 2 ? FS_ROOT_INO
					 : (fuse_ino_t)(FS_FIRST_INO + i - 2);
		mode_t mode = i < 2 ? S_IFDIR : S_IFREG;

		if (name == NULL)
			name = e->blobs[i - 2].name;
		if (!add_entry(req, buf, size, &used, name, child, mode, i + 1))
			break;
	}
	fuse_reply_buf(req, buf, used);
	free(buf);
}

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	const struct fs_mount *m = fuse_req_userdata(req);
	uint32_t reader;
	int rc;

	if (blob_of(m, ino) == NULL) {
		fuse_reply_err(req, ino == FS_ROOT_INO ? EISDIR : ENOENT);
		return;
	}
	if ((fi->flags & O_ACCMODE) != O_RDONLY) {
		fuse_reply_err(req, EROFS);
		return;
	}
	rc = fs__engine_open(m->engine, (uint32_t)(ino - FS_FIRST_INO),
			     &reader);
	if (rc != 0) {
		fuse_reply_err(req, rc == -ENOSPC ? EMFILE : -rc);
		return;
	}
	fi->fh = reader;
	/* The blob is pinned to its validator: cached pages stay true. */
	fi->keep_cache = 1;
	fuse_reply_open(req, fi);
}

/* Each FUSE worker thread keeps its read buffer, freed when the thread
 * ends: a fresh 1 MiB allocation per read costs page faults that showed as
 * a tenth of a cold read's CPU. */
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

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	const struct fs_mount *m = fuse_req_userdata(req);
	char *buf;
	long n;

	if (blob_of(m, ino) == NULL || off < 0) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	buf = thread_read_buf(size ? size : 1);
	if (buf == NULL) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	n = fs__engine_read(m->engine, (uint32_t)(ino - FS_FIRST_INO),
			    (uint32_t)fi->fh, (uint64_t)off, size, buf);
	if (n < 0)
		fuse_reply_err(req, (int)-n);
	else
		fuse_reply_buf(req, buf, (size_t)n);
}

static void op_release(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	const struct fs_mount *m = fuse_req_userdata(req);

	if (blob_of(m, ino) != NULL)
		fs__engine_close(m->engine, (uint32_t)fi->fh);
	fuse_reply_err(req, 0);
}

static void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	const struct fs_mount *m = fuse_req_userdata(req);
	const struct fs_engine *e = m->engine;
	struct statvfs sv;
	uint64_t total = 0;

	(void)ino;
	for (uint32_t i = 0; i < e->nblobs; i++)
		total += e->blobs[i].size;
	memset(&sv, 0, sizeof(sv));
	sv.f_bsize = CACHE_BLOCK_SIZE;
	sv.f_frsize = 4096;
	sv.f_blocks = (fsblkcnt_t)((total + 4095) / 4096);
	sv.f_files = e->nblobs + 1;
	sv.f_namemax = 255;
	sv.f_flag = ST_RDONLY;
	fuse_reply_statfs(req, &sv);
}

const struct fuse_lowlevel_ops fs__ops = {
	.init = op_init,
	.lookup = op_lookup,
	.getattr = op_getattr,
	.opendir = op_opendir,
	.readdir = op_readdir,
	.open = op_open,
	.read = op_read,
	.release = op_release,
	.statfs = op_statfs,
};

/* inval: drops the kernel's cached pages of bytes the mount dropped as
 * wrong or stale, so that a re-read asks the mount again instead of
 * getting them from the page cache. */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "fs/fs_int.h"

void fs__inval_queue(struct fs_engine *e, uint32_t b, uint64_t start,
		     uint64_t end)
{
	struct fs_blob *blob = &e->blobs[b];

	blob->pages_stale = true;
	if (start >= end)
		return;
	if (blob->inval_end > blob->inval_start) {
		/* One range per blob: the hull of what is pending. */
		if (start < blob->inval_start)
			blob->inval_start = start;
		if (end > blob->inval_end)
			blob->inval_end = end;
		return;
	}
	blob->inval_start = start;
	blob->inval_end = end;
	e->inval_pending++;
	pthread_cond_signal(&e->inval_cv);
}

/* Takes the next pending range into *b, *start, *end; false when none.
 * Caller holds e->mu. */
static bool inval_take(struct fs_engine *e, uint32_t *b, uint64_t *start,
		       uint64_t *end)
{
	for (uint32_t i = 0; e->inval_pending > 0 && i < e->nblobs; i++) {
		struct fs_blob *blob = &e->blobs[i];

		if (blob->inval_end <= blob->inval_start)
			continue;
		*b = i;
		*start = blob->inval_start;
		*end = blob->inval_end;
		blob->inval_start = blob->inval_end = 0;
		e->inval_pending--;
		return true;
	}
	return false;
}

/* The kernel waits, in the notification, for the reads in flight over
 * those pages (they hold the pages locked): it is sent from this thread,
 * never from a FUSE operation (which may be such a read) nor under the
 * engine's lock (which such a read takes). */
static void *inval_main(void *arg)
{
	struct fs_engine *e = arg;
	uint64_t start, end, ino;
	uint32_t b;
	int rc;

	pthread_mutex_lock(&e->mu);
	for (;;) {
		while (!e->inval_stop && !inval_take(e, &b, &start, &end))
			pthread_cond_wait(&e->inval_cv, &e->mu);
		if (e->inval_stop)
			break;
		ino = e->blobs[b].ino;
		pthread_mutex_unlock(&e->mu);
		/* No open yet: the kernel holds no page of it. */
		rc = ino == 0 ? 0
			      : fuse_lowlevel_notify_inval_inode(
					e->se, (fuse_ino_t)ino, (off_t)start,
					(off_t)(end - start));
		if (rc == 0 || rc == -ENOENT)
			fs__log(FS_LOG_DEBUG,
				"%s: the kernel's pages of bytes %" PRIu64
				"-%" PRIu64 " are dropped",
				e->blobs[b].name, start, end - 1);
		else
			fs__log(FS_LOG_WARN,
				"%s: cannot drop the kernel's pages of bytes "
				"%" PRIu64 "-%" PRIu64
				" (%s); the next open drops them",
				e->blobs[b].name, start, end - 1,
				strerror(-rc));
		pthread_mutex_lock(&e->mu);
	}
	pthread_mutex_unlock(&e->mu);
	return NULL;
}

int fs__inval_start(struct fs_engine *e, struct fuse_session *se)
{
	int rc;

	pthread_mutex_lock(&e->mu);
	e->se = se;
	e->inval_stop = false;
	pthread_mutex_unlock(&e->mu);
	rc = -pthread_create(&e->inval_thread, NULL, inval_main, e);
	if (rc == 0)
		e->inval_running = true;
	return rc;
}

void fs__inval_stop(struct fs_engine *e)
{
	if (e == NULL || !e->inval_running)
		return;
	pthread_mutex_lock(&e->mu);
	e->inval_stop = true;
	pthread_cond_signal(&e->inval_cv);
	pthread_mutex_unlock(&e->mu);
	pthread_join(e->inval_thread, NULL);
	e->inval_running = false;
	e->se = NULL;
}

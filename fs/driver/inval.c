/* inval: drops the kernel's cached pages of bytes the mount dropped as
 * wrong or stale, so that a re-read asks the mount again instead of
 * getting them from the page cache. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <fuse_lowlevel.h>

#include "fs/driver/driver_int.h"
#include "fs/obs/obs.h"

/* One blob's pending range; empty (start == end): none. */
struct inval_range {
	uint64_t start, end;
	uint64_t ino;
	const char *name;
};

struct driver_inval {
	pthread_mutex_t mu;
	pthread_cond_t cv;     /* a range queued, or stop */
	struct inval_range *r; /* per blob; guarded by mu */
	uint32_t n;
	uint32_t pending;	 /* blobs with a range queued; guarded by mu */
	struct fuse_session *se; /* while the thread runs */
	pthread_t thread;
	bool running;
	bool stop; /* guarded by mu */
};

int driver__inval_new(uint32_t max_blobs, struct driver_inval **out)
{
	struct driver_inval *v = calloc(1, sizeof(*v));

	if (v == NULL)
		return -ENOMEM;
	v->r = calloc(max_blobs ? max_blobs : 1, sizeof(*v->r));
	if (v->r == NULL) {
		free(v);
		return -ENOMEM;
	}
	v->n = max_blobs;
	pthread_mutex_init(&v->mu, NULL);
	pthread_cond_init(&v->cv, NULL);
	*out = v;
	return 0;
}

void driver__inval_free(struct driver_inval *v)
{
	if (v == NULL)
		return;
	driver__inval_stop(v);
	pthread_cond_destroy(&v->cv);
	pthread_mutex_destroy(&v->mu);
	free(v->r);
	free(v);
}

void driver__inval_queue(struct driver_inval *v, uint32_t b, const char *name,
			 uint64_t ino, uint64_t start, uint64_t end)
{
	struct inval_range *r;

	if (b >= v->n || start >= end)
		return;
	pthread_mutex_lock(&v->mu);
	r = &v->r[b];
	r->name = name;
	r->ino = ino;
	if (r->end > r->start) {
		/* One range per blob: the hull of what is pending. */
		if (start < r->start)
			r->start = start;
		if (end > r->end)
			r->end = end;
	} else {
		r->start = start;
		r->end = end;
		v->pending++;
		pthread_cond_signal(&v->cv);
	}
	pthread_mutex_unlock(&v->mu);
}

/* Takes the next pending range into *out; false when none. Caller holds
 * v->mu. */
static bool inval_take(struct driver_inval *v, struct inval_range *out)
{
	for (uint32_t i = 0; v->pending > 0 && i < v->n; i++) {
		struct inval_range *r = &v->r[i];

		if (r->end <= r->start)
			continue;
		*out = *r;
		r->start = r->end = 0;
		v->pending--;
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
	struct driver_inval *v = arg;
	struct inval_range r;
	int rc;

	pthread_mutex_lock(&v->mu);
	for (;;) {
		while (!v->stop && !inval_take(v, &r))
			pthread_cond_wait(&v->cv, &v->mu);
		if (v->stop)
			break;
		pthread_mutex_unlock(&v->mu);
		/* No open yet: the kernel holds no page of it. */
		rc = r.ino == 0
			     ? 0
			     : fuse_lowlevel_notify_inval_inode(
				       v->se, (fuse_ino_t)r.ino, (off_t)r.start,
				       (off_t)(r.end - r.start));
		if (rc == 0 || rc == -ENOENT)
			obs_log(FS_LOG_DEBUG,
				"%s: the kernel's pages of bytes %" PRIu64
				"-%" PRIu64 " are dropped",
				r.name, r.start, r.end - 1);
		else
			obs_log(FS_LOG_WARN,
				"%s: cannot drop the kernel's pages of bytes "
				"%" PRIu64 "-%" PRIu64
				" (%s); the next open drops them",
				r.name, r.start, r.end - 1, strerror(-rc));
		pthread_mutex_lock(&v->mu);
	}
	pthread_mutex_unlock(&v->mu);
	return NULL;
}

int driver__inval_start(struct driver_inval *v, struct fuse_session *se)
{
	int rc;

	pthread_mutex_lock(&v->mu);
	v->se = se;
	v->stop = false;
	pthread_mutex_unlock(&v->mu);
	rc = -pthread_create(&v->thread, NULL, inval_main, v);
	if (rc == 0)
		v->running = true;
	return rc;
}

void driver__inval_stop(struct driver_inval *v)
{
	if (v == NULL || !v->running)
		return;
	pthread_mutex_lock(&v->mu);
	v->stop = true;
	pthread_cond_signal(&v->cv);
	pthread_mutex_unlock(&v->mu);
	pthread_join(v->thread, NULL);
	v->running = false;
	v->se = NULL;
}

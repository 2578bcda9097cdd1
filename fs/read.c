/* read: the engine's read path: a reader's read told to the scheduler and
 * checked against what is held in one call, the wait for missing (or not
 * yet checked) bytes, and the copy: from memory under the lock, from the
 * cache without it. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "fs/engine_int.h"

/* Blocks one hold of the lock leaves to the cache; a read of more takes
 * another hold. */
#define FS_MISS_MAX 64

/* The blocks of a read that memory did not have. */
struct misses {
	uint64_t idx[FS_MISS_MAX];
	uint32_t n;
};

int fs__engine_open(struct fs_engine *e, uint32_t b, uint64_t ino,
		    uint32_t *reader_out, bool *keep_cache)
{
	struct fs_blob *blob = &e->blobs[b];
	int rc;

	pthread_mutex_lock(&e->mu);
	rc = pace_reader_open(e->pace, b, fs__now_ns(), reader_out);
	if (rc == 0) {
		blob->ino = ino;
		/* The kernel's pages were right when it read them unless
		 * bytes were dropped since: then this open drops them all,
		 * should an invalidation not have reached them. */
		*keep_cache = !blob->pages_stale;
		blob->pages_stale = false;
	}
	pthread_mutex_unlock(&e->mu);
	return rc;
}

void fs__engine_close(struct fs_engine *e, uint32_t b, uint32_t reader)
{
	pthread_mutex_lock(&e->mu);
	pace_reader_close(e->pace, reader, fs__now_ns());
	pthread_mutex_unlock(&e->mu);
	cache_pin_set(e->cache, &e->blobs[b].id, reader, 0, 0);
}

void fs__engine_wake_readers(struct fs_engine *e)
{
	pthread_mutex_lock(&e->mu);
	pthread_cond_broadcast(&e->cv);
	pthread_mutex_unlock(&e->mu);
}

/* True when a read of [off, end) of blob b failed less than FS_FAILED_NS
 * ago. Caller holds e->mu. */
static bool failed_lately(const struct fs_engine *e, uint32_t b, uint64_t off,
			  uint64_t end, uint64_t now)
{
	for (uint32_t i = 0; i < FS_FAILED_MAX; i++) {
		const struct fs_failed *f = &e->failed[i];

		if (f->at_ns != 0 && f->blob == b && off < f->end &&
		    f->start < end && now - f->at_ns < FS_FAILED_NS)
			return true;
	}
	return false;
}

/* Remembers that a read of [off, end) of blob b failed, and says why.
 * Returns -EIO for it. Caller holds e->mu. */
static int failed(struct fs_engine *e, uint32_t b, uint64_t off, uint64_t end,
		  uint64_t now, int why)
{
	struct fs_failed *f = &e->failed[e->failed_next++ % FS_FAILED_MAX];

	if (why == -ETIMEDOUT)
		fs__log(FS_LOG_ERR,
			"%s: read of bytes %" PRIu64 "-%" PRIu64
			" timed out after %" PRIu64 " s",
			e->blobs[b].name, off, end - 1,
			e->read_timeout_ns / 1000000000u);
	else
		fs__log(FS_LOG_ERR,
			"%s: read of bytes %" PRIu64 "-%" PRIu64
			" failed: no source can serve it",
			e->blobs[b].name, off, end - 1);
	f->blob = b;
	f->start = off;
	f->end = end;
	f->at_ns = now;
	return -EIO;
}

/* A read of bytes whose read just failed fails at once: the application
 * sees one read_timeout, not one for the kernel's readahead and another
 * for its retry. Caller holds e->mu. */
static int failed_again(struct fs_engine *e, uint32_t b, uint64_t off,
			uint64_t end)
{
	fs__log(FS_LOG_DEBUG,
		"%s: read of bytes %" PRIu64 "-%" PRIu64
		" fails: a read of them just failed",
		e->blobs[b].name, off, end - 1);
	return -EIO;
}

/* Begins a wait for [start, end) of blob b by reader when some of it is
 * not held: *w gets the wait, or PACE_NONE when all is held. Caller holds
 * e->mu. */
static int wait_begin(struct fs_engine *e, uint32_t b, uint32_t reader,
		      uint64_t start, uint64_t end, uint64_t now, uint32_t *w)
{
	int rc;

	*w = PACE_NONE;
	if (pace_is_held(e->pace, b, start, end))
		return 0;
	if (failed_lately(e, b, start, end, now))
		return failed_again(e, b, start, end);
	rc = pace_wait_begin(e->pace, reader, start, end - start, now, w);
	if (rc == 0)
		fetch_wake(e->fetch); /* demand: the most urgent work */
	return rc;
}

/* Waits until [off, end) of blob b is held and, with block digests,
 * checked: w is the wait already begun for it (PACE_NONE: none). Ends
 * with -EINTR when the caller's cancelled() says the read was
 * interrupted, -EIO when the blob changed, at the deadline or when no
 * source can serve it. Caller holds e->mu. */
static int wait_ready(struct fs_engine *e, uint32_t b, uint32_t reader,
		      uint64_t off, uint64_t end, uint32_t w, uint64_t now,
		      bool (*cancelled)(void *), void *arg)
{
	struct fs_blob *blob = &e->blobs[b];
	uint64_t deadline = now + e->read_timeout_ns, us, ue;
	int rc = 0;

	for (;;) {
		bool pending = false;

		if (w != PACE_NONE) {
			rc = pace_wait_state(e->pace, w, now);
			pending = rc == -EINPROGRESS && !blob->changed &&
				  !(cancelled != NULL && cancelled(arg));
		}
		if (w != PACE_NONE && !pending) {
			pace_wait_end(e->pace, w);
			w = PACE_NONE;
			if (rc == -EINPROGRESS && !blob->changed)
				return -EINTR;
			if (blob->changed)
				return -EIO; /* logged once, where it was seen */
			if (rc != 0)
				return failed(e, b, off, end, now, rc);
		}
		if (!pending) {
			/* Held. A unit whose block digests are not checked
			 * yet is waited for whole: held, then checked as it
			 * is stored. */
			if (!fs__blob_unchecked(blob, off, end, &us, &ue))
				return 0;
			if (!pace_is_held(e->pace, b, us, ue)) {
				rc = wait_begin(e, b, reader, us, ue, now, &w);
				if (rc != 0)
					return rc;
				continue;
			}
			if (blob->changed)
				return -EIO;
			if (cancelled != NULL && cancelled(arg))
				return -EINTR;
			if (now >= deadline)
				return failed(e, b, off, end, now, -ETIMEDOUT);
		}
		uint64_t until = now + 1000000000u;
		struct timespec ts = {
			.tv_sec = (time_t)(until / 1000000000u),
			.tv_nsec = (long)(until % 1000000000u),
		};

		pthread_cond_timedwait(&e->cv, &e->mu, &ts);
		now = fs__now_ns();
	}
}

/* Copies what memory holds of [off, end) of blob b to buf + (off - base),
 * noting the other blocks in *m; returns where it stopped (end, or the
 * first block that did not fit in *m). Caller holds e->mu. */
static uint64_t copy_memory(struct fs_engine *e, uint32_t b, uint64_t base,
			    uint64_t off, uint64_t end, char *buf,
			    struct misses *m)
{
	const struct fs_blob *blob = &e->blobs[b];
	uint64_t pos = off;

	m->n = 0;
	while (pos < end) {
		uint64_t index = pos / CACHE_BLOCK_SIZE;
		uint64_t stop = fs__block_end(blob, index);
		struct fs_part *p = fs__part_find(&e->parts, b, index);

		if (stop > end)
			stop = end;
		if (p != NULL) {
			memcpy(buf + (pos - base),
			       p->data + (pos - index * CACHE_BLOCK_SIZE),
			       stop - pos);
			fs__part_touch(&e->parts, p);
		} else if (m->n < FS_MISS_MAX) {
			m->idx[m->n++] = index;
		} else {
			break;
		}
		pos = stop;
	}
	return pos;
}

/* Copies the blocks in *m, clipped to [off, end), from the cache to
 * buf + (their offset - base); -EAGAIN when one has left the cache (it
 * is then no longer held). */
static int copy_misses(struct fs_engine *e, uint32_t b, uint64_t base,
		       uint64_t off, uint64_t end, char *buf,
		       const struct misses *m)
{
	const struct fs_blob *blob = &e->blobs[b];

	for (uint32_t i = 0; i < m->n; i++) {
		uint64_t bstart = m->idx[i] * CACHE_BLOCK_SIZE;
		uint64_t pos = bstart > off ? bstart : off;
		uint64_t stop = fs__block_end(blob, m->idx[i]);
		long got;

		if (stop > end)
			stop = end;
		got = cache_block_read(e->cache, &blob->id, m->idx[i],
				       pos - bstart, buf + (pos - base),
				       stop - pos);
		if (got == -ENOENT) {
			/* Gone since it was held (a failed commit, an
			 * eviction by another process): fetch it again. */
			fs__engine_drop(e, b, bstart,
					fs__block_end(blob, m->idx[i]),
					FS_DROP_GONE);
			return -EAGAIN;
		}
		if (got < 0 || (uint64_t)got != stop - pos) {
			fs__log(FS_LOG_ERR,
				"%s: block %" PRIu64
				" is held but cannot be read from the cache: %s",
				blob->name, m->idx[i],
				got < 0 ? strerror((int)-got) : "short block");
			return -EIO;
		}
	}
	return 0;
}

int fs__engine_copy_held(struct fs_engine *e, uint32_t b, uint64_t off,
			 size_t len, char *buf)
{
	uint64_t pos = off, end = off + len, stop;
	struct misses m;
	int rc = 0;

	while (rc == 0 && pos < end) {
		pthread_mutex_lock(&e->mu);
		stop = copy_memory(e, b, off, pos, end, buf, &m);
		pthread_mutex_unlock(&e->mu);
		rc = copy_misses(e, b, off, pos, stop, buf, &m);
		pos = stop;
	}
	return rc;
}

/* The first read of a blob that changed on the origin drops its cached
 * bytes, from a reader's thread (never the transfer thread, which must
 * not commit). Returns -EIO for the read that asked. */
static int drop_changed(struct fs_engine *e, uint32_t b)
{
	struct fs_blob *blob = &e->blobs[b];
	bool first;

	pthread_mutex_lock(&e->mu);
	first = !blob->dropped;
	blob->dropped = true;
	pthread_mutex_unlock(&e->mu);
	if (first)
		fs__engine_drop(e, b, 0, blob->size, FS_DROP_STALE);
	return -EIO;
}

/* One try of a read of [off, end): under one hold of the lock, the
 * scheduler hears of it (the first try) and says whether it is held, the
 * read waits if it must, and memory's blocks are copied; then the rest
 * comes from the cache. -EAGAIN when a block left the cache meanwhile. */
static int read_once(struct fs_engine *e, uint32_t b, uint32_t reader,
		     uint64_t off, uint64_t end, char *buf, bool first,
		     bool (*cancelled)(void *), void *arg)
{
	struct fs_blob *blob = &e->blobs[b];
	struct pace_read_result r = {.wait = PACE_NONE};
	uint64_t now, stop = off;
	struct misses m;
	int rc;

	pthread_mutex_lock(&e->mu);
	if (blob->changed) {
		pthread_mutex_unlock(&e->mu);
		return drop_changed(e, b);
	}
	if (blob->verify == FS_VERIFY_FAILED) {
		pthread_mutex_unlock(&e->mu);
		return -EIO; /* logged when the check failed */
	}
	now = fs__now_ns();
	if (first) {
		rc = pace_read(e->pace, reader, off, end - off,
			       !failed_lately(e, b, off, end, now), now, &r);
		if (rc == 0 && !r.held && r.wait == PACE_NONE)
			rc = failed_again(e, b, off, end);
		if (rc == 0 && r.wait != PACE_NONE) {
			fetch_wake(e->fetch); /* demand */
			/* The reader's window is not evicted while it reads
			 * there, nor while it waits. */
			cache_pin_set(e->cache, &blob->id, reader, off,
				      r.cursor + r.window);
		}
	} else {
		rc = wait_begin(e, b, reader, off, end, now, &r.wait);
	}
	if (rc == 0)
		rc = wait_ready(e, b, reader, off, end, r.wait, now, cancelled,
				arg);
	if (rc == 0)
		stop = copy_memory(e, b, off, off, end, buf, &m);
	pthread_mutex_unlock(&e->mu);
	if (first && r.wait == PACE_NONE) {
		cache_pin_set(e->cache, &blob->id, reader, off,
			      r.cursor + r.window);
		/* Read-ahead may start where the window gained room. */
		if (r.moved)
			fetch_wake(e->fetch);
	}
	if (rc != 0)
		return rc;
	rc = copy_misses(e, b, off, off, stop, buf, &m);
	if (rc == 0 && stop < end)
		rc = fs__engine_copy_held(e, b, stop, (size_t)(end - stop),
					  buf + (stop - off));
	return rc;
}

long fs__engine_read(struct fs_engine *e, uint32_t b, uint32_t reader,
		     uint64_t off, size_t len, char *buf,
		     bool (*cancelled)(void *), void *arg)
{
	const struct fs_blob *blob = &e->blobs[b];
	uint64_t end;
	int rc = -EAGAIN;

	if (off >= blob->size || len == 0)
		return 0;
	end = blob->size - off < len ? blob->size : off + len;
	/* A block the cache lost after it was held is no longer held once
	 * found missing, and fetched again. */
	for (int tries = 0; tries < 3 && rc == -EAGAIN; tries++)
		rc = read_once(e, b, reader, off, end, buf, tries == 0,
			       cancelled, arg);
	return rc != 0 ? (rc == -EAGAIN ? -EIO : rc) : (long)(end - off);
}

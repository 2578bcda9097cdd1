/* reads: the engine's read path: a reader's read told to the scheduler and
 * checked against what is held in one call, the wait for missing (or not
 * yet checked) bytes, and the copy: from memory under the lock, from the
 * cache without it. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "fs/engine/engine_int.h"

/* The pieces of (part of) a read, in order: bytes of whole blocks memory
 * holds, by reference to their buffers; bytes of blocks still filling,
 * copied; and bytes the cache is to find. */
struct pieces {
	struct cache_piece p[ENGINE_REPLY_PIECES];
	struct cache_buf *ref[ENGINE_REPLY_PIECES]; /* the buffer p[i].mem is
						 in, or NULL */
	uint32_t n;
	bool cached;	    /* some piece is the cache's to find */
	uint64_t in_memory; /* bytes of pieces memory held */
};

/* A read's answer under way: the caller's reply, and whether it was
 * made (it is made once: the pieces, else the error). */
struct answer {
	const struct engine_read_reply *rr;
	bool replied;
	bool save_regions; /* the blob's record of regions ended */
};

/* The cache's (and memory's) pieces of a read that succeeded, to the
 * caller's reply. */
static int answer_pieces(void *ctx, struct cache_piece *p, size_t n)
{
	struct answer *a = ctx;

	a->replied = true;
	return a->rr->reply(a->rr->ctx, p, n, 0);
}

int engine_open(struct engine *e, uint32_t b, uint64_t ino,
		uint32_t *reader_out, bool *keep_cache)
{
	struct engine_blob *blob = &e->blobs[b];
	uint64_t now;
	bool asked = false;
	int rc;

	pthread_mutex_lock(&e->mu);
	now = fs__now_ns();
	rc = pace_reader_open(e->pace, b, now, reader_out);
	if (rc == 0) {
		/* Its remembered regions not held are asked now, before
		 * the application's reads arrive. */
		asked = engine__regions_open(e, b, *reader_out, now);
		blob->ino = ino;
		/* The kernel's pages were right when it read them unless
		 * bytes were dropped since: then this open drops them all,
		 * should an invalidation not have reached them. */
		*keep_cache = !blob->pages_stale;
		blob->pages_stale = false;
		engine__count(&e->stats.readers, 1);
	}
	pthread_mutex_unlock(&e->mu);
	if (asked)
		fetch_wake(e->fetch); /* demand */
	if (rc == 0)
		engine__stream_budget_note(e, b);
	return rc;
}

int engine_plan_open(struct engine *e, uint32_t b, uint64_t off, uint64_t len,
		     uint32_t *reader_out)
{
	uint64_t now;
	uint32_t r;
	int rc;

	/* The clock is read under the lock: the scheduler's time only goes
	 * forward, and another thread may tick it between a read before
	 * the lock and the lock. */
	pthread_mutex_lock(&e->mu);
	now = fs__now_ns();
	rc = pace_reader_open(e->pace, b, now, &r);
	if (rc == 0) {
		rc = pace_reader_plan(e->pace, r, off, len, now);
		if (rc != 0)
			pace_reader_close(e->pace, r, now);
	}
	pthread_mutex_unlock(&e->mu);
	if (rc != 0)
		return rc;
	engine__count(&e->stats.readers, 1);
	/* Bytes fetched ahead wait for their reader: the cache keeps them
	 * until the plan's reader closes, once the application opened the
	 * file (and its own reads pin what they wait for). */
	cache_pin_set(e->cache, &e->blobs[b].id, r, off, off + len);
	fetch_wake(e->fetch);
	*reader_out = r;
	return 0;
}

void engine_close(struct engine *e, uint32_t b, uint32_t reader)
{
	bool save;

	pthread_mutex_lock(&e->mu);
	pace_reader_close(e->pace, reader, fs__now_ns());
	save = engine__regions_close(e, b);
	pthread_mutex_unlock(&e->mu);
	if (save)
		engine__regions_save(e, b);
	atomic_fetch_sub_explicit(&e->stats.readers, 1, memory_order_relaxed);
	cache_pin_set(e->cache, &e->blobs[b].id, reader, 0, 0);
}

void engine_wake_readers(struct engine *e)
{
	pthread_mutex_lock(&e->mu);
	engine__wake_all(e);
	pthread_mutex_unlock(&e->mu);
}

void engine__wake_range(struct engine *e, uint32_t b, uint64_t start,
			uint64_t end)
{
	for (struct engine_waiter *w = e->waiters; w != NULL; w = w->next)
		if (w->blob == b && start < w->end && w->start < end &&
		    pace_is_held(e->pace, b, w->start, w->end))
			pthread_cond_signal(&w->cv);
}

void engine__wake_blob(struct engine *e, uint32_t b)
{
	for (struct engine_waiter *w = e->waiters; w != NULL; w = w->next)
		if (w->blob == b)
			pthread_cond_signal(&w->cv);
}

void engine__wake_all(struct engine *e)
{
	for (struct engine_waiter *w = e->waiters; w != NULL; w = w->next)
		pthread_cond_signal(&w->cv);
}

/* Logs why a read of [off, end) of blob b failed (pacing remembered it)
 * and returns -EIO for it. Caller holds e->mu. */
static int failed(struct engine *e, uint32_t b, uint64_t off, uint64_t end,
		  int why)
{
	struct fs_log_fields lf = {.blob = e->blobs[b].name,
				   .start = off,
				   .end = end,
				   .error = why == -ETIMEDOUT ? "timeout"
							      : "unavailable"};

	if (why == -ETIMEDOUT)
		engine__log_about(e, FS_LOG_ERR, &lf,
				  "%s: read of bytes %" PRIu64 "-%" PRIu64
				  " timed out after %" PRIu64 " s",
				  e->blobs[b].name, off, end - 1,
				  e->read_timeout_ns / 1000000000u);
	else
		engine__log_about(e, FS_LOG_ERR, &lf,
				  "%s: read of bytes %" PRIu64 "-%" PRIu64
				  " failed: no source can serve it",
				  e->blobs[b].name, off, end - 1);
	return -EIO;
}

/* Acts on pacing's FAIL for [from, to) of a read of [off, end) of blob b:
 * refused at once when a read of those bytes just failed (the application
 * sees one read_timeout, not one for the kernel's readahead and another
 * for its retry), else failed now. Returns -EIO. Caller holds e->mu. */
static int act_fail(struct engine *e, uint32_t b, uint64_t off, uint64_t end,
		    uint64_t from, uint64_t to, const struct pace_step *st)
{
	if (!st->again)
		return failed(e, b, off, end, st->error);
	engine__log(e, FS_LOG_DEBUG,
		    "%s: read of bytes %" PRIu64 "-%" PRIu64
		    " fails: a read of them just failed",
		    e->blobs[b].name, from, to - 1);
	return -EIO;
}

/* Sleeps on the waiter's condition for a second at most: until its
 * bytes arrive, its blob's state changes or the read is interrupted (the
 * second bounds a deadline's lateness). Caller holds e->mu. */
static uint64_t sleep_a_while(struct engine *e, struct engine_waiter *wt,
			      uint64_t now)
{
	uint64_t until = now + 1000000000u;
	struct timespec ts = {
		.tv_sec = (time_t)(until / 1000000000u),
		.tv_nsec = (long)(until % 1000000000u),
	};

	pthread_cond_timedwait(&wt->cv, &e->mu, &ts);
	e->wakeups++;
	return fs__now_ns();
}

/* Links waiter wt for [start, end) of blob b, on a condition of its own
 * (CLOCK_MONOTONIC, as the deadlines). Caller holds e->mu. */
static void waiter_link(struct engine *e, struct engine_waiter *wt, uint32_t b,
			uint64_t start, uint64_t end)
{
	pthread_condattr_t ca;

	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&wt->cv, &ca);
	pthread_condattr_destroy(&ca);
	wt->blob = b;
	wt->start = start;
	wt->end = end;
	wt->prev = NULL;
	wt->next = e->waiters;
	if (e->waiters != NULL)
		e->waiters->prev = wt;
	e->waiters = wt;
	e->waits++;
}

static void waiter_unlink(struct engine *e, struct engine_waiter *wt)
{
	if (wt->prev != NULL)
		wt->prev->next = wt->next;
	else
		e->waiters = wt->next;
	if (wt->next != NULL)
		wt->next->prev = wt->prev;
	pthread_cond_destroy(&wt->cv);
}

/* Asks pacing what a read of [off, end) of blob b by reader is to do,
 * about the bytes it needs next: the first unit not checked yet (the
 * engine's digest layer), else the read's. w is the wait the last answer
 * gave. Writes the range asked in [*from, *to). Caller holds e->mu. */
static int ask(struct engine *e, uint32_t b, uint32_t reader, uint64_t off,
	       uint64_t end, uint32_t w, uint64_t now, uint64_t *from,
	       uint64_t *to, struct pace_step *st)
{
	if (!engine__unchecked(e, b, off, end, from, to)) {
		*from = off;
		*to = end;
	}
	return pace_read_step(e->pace, reader, *from, *to - *from, w, now, st);
}

/* Acts on pacing's answers for a read of [off, end) of blob b until its
 * bytes can be copied: st is the answer about [off, end), asked at now.
 * COPY with every unit checked (or no block digests) is done; COPY of a
 * range other than the first unit not checked asks about that unit; COPY
 * of that unit waits for its check (the engine's own deadline bounds it);
 * WAIT sleeps on the waiter's condition and asks again; FAIL fails. Ends
 * with -EINTR when the caller's cancelled() says the read was
 * interrupted, -EIO when the blob changed, at the deadline or when no
 * source can serve it. Caller holds e->mu. */
static int wait_loop(struct engine *e, struct engine_waiter *wt, uint32_t b,
		     uint32_t reader, uint64_t off, uint64_t end,
		     struct pace_step st, uint64_t now,
		     bool (*cancelled)(void *), void *arg)
{
	const struct engine_blob *blob = &e->blobs[b];
	uint64_t deadline = now + e->read_timeout_ns, from = off, to = end;
	uint64_t f, t;
	bool asked_wait = false; /* st answers a wait passed in */
	int rc;

	for (;;) {
		/* A stream of unknown length ended short of the read: asked
		 * again within the size now known (engine_read). */
		if (end > blob->size) {
			if (st.what == PACE_DO_WAIT)
				pace_wait_end(e->pace, st.wait);
			return -EAGAIN;
		}
		if (asked_wait && engine__blob_changed(blob)) {
			if (st.what == PACE_DO_WAIT)
				pace_wait_end(e->pace, st.wait);
			return -EIO; /* logged once, where it was seen */
		}
		switch (st.what) {
		case PACE_DO_FAIL:
			return act_fail(e, b, off, end, from, to, &st);
		case PACE_DO_WAIT:
			if (st.begun) {
				fetch_wake(e->fetch); /* demand */
				wt->start = from;
				wt->end = to;
			}
			engine__stream_note(e, b, from);
			break;
		case PACE_DO_COPY:
			if (!engine__unchecked(e, b, off, end, &f, &t))
				return 0;
			if (f != from || t != to) {
				/* Held, but a unit not checked yet is read
				 * whole: held, then checked as it is
				 * stored. */
				rc = ask(e, b, reader, off, end, PACE_NONE, now,
					 &from, &to, &st);
				if (rc != 0)
					return rc;
				asked_wait = false;
				continue;
			}
			break; /* held, its check to come */
		}
		if (engine__blob_changed(blob) ||
		    (cancelled != NULL && cancelled(arg))) {
			if (st.what == PACE_DO_WAIT)
				pace_wait_end(e->pace, st.wait);
			return engine__blob_changed(blob) ? -EIO : -EINTR;
		}
		if (st.what == PACE_DO_COPY && now >= deadline) {
			pace_read_failed(e->pace, reader, off, end - off, now);
			return failed(e, b, off, end, -ETIMEDOUT);
		}
		now = sleep_a_while(e, wt, now);
		rc = ask(e, b, reader, off, end,
			 st.what == PACE_DO_WAIT ? st.wait : PACE_NONE, now,
			 &from, &to, &st);
		if (rc != 0)
			return rc;
		asked_wait = true;
	}
}

/* wait_loop with a waiter of its own linked while it runs; st is
 * pacing's answer about [off, end), asked at now. */
static int wait_ready(struct engine *e, uint32_t b, uint32_t reader,
		      uint64_t off, uint64_t end, const struct pace_step *st,
		      uint64_t now, bool (*cancelled)(void *), void *arg)
{
	struct engine_waiter wt;
	uint64_t from, to;
	int rc;

	/* Held and checked already (most reads): no waiter to set up. */
	if (st->what == PACE_DO_COPY &&
	    !engine__unchecked(e, b, off, end, &from, &to))
		return 0;
	if (st->what == PACE_DO_FAIL && st->again)
		return act_fail(e, b, off, end, off, end, st);
	waiter_link(e, &wt, b, off, end);
	rc = wait_loop(e, &wt, b, reader, off, end, *st, now, cancelled, arg);
	waiter_unlink(e, &wt);
	return rc;
}

/* Gathers the pieces of [pos, end) of blob b into *ps, buf + (pos - base)
 * being where a piece's bytes go when they are copied; returns where it
 * stopped (end, or where ENGINE_REPLY_PIECES pieces were gathered). A whole
 * block in memory is referenced, not copied: its bytes do not change
 * while it is shared. Caller holds e->mu. */
static uint64_t gather(struct engine *e, uint32_t b, uint64_t base,
		       uint64_t pos, uint64_t end, char *buf, struct pieces *ps)
{
	const struct engine_blob *blob = &e->blobs[b];

	ps->n = 0;
	ps->cached = false;
	ps->in_memory = 0;
	while (pos < end && ps->n < ENGINE_REPLY_PIECES) {
		uint64_t index = pos / CACHE_BLOCK_SIZE;
		uint64_t stop = engine__block_end(blob, index);
		struct engine_block *p =
			engine__block_find(&e->blocks, b, index);
		struct cache_piece *c = &ps->p[ps->n];

		if (stop > end)
			stop = end;
		*c = (struct cache_piece){
			.index = index,
			.off = pos - index * CACHE_BLOCK_SIZE,
			.len = stop - pos,
			.buf = buf + (pos - base),
			.fd = -1,
		};
		ps->ref[ps->n] = NULL;
		if (p != NULL && p->state != ENGINE_BLOCK_FILLING) {
			c->mem = p->data + c->off;
			ps->ref[ps->n] = cache_buf_ref(p->buf);
			engine__block_touch(&e->blocks, p);
			ps->in_memory += c->len;
		} else if (p != NULL) {
			memcpy(c->buf, p->data + c->off, c->len);
			c->mem = c->buf;
			ps->in_memory += c->len;
		} else {
			ps->cached = true;
		}
		ps->n++;
		pos = stop;
	}
	return pos;
}

static void pieces_release(struct pieces *ps)
{
	for (uint32_t i = 0; i < ps->n; i++)
		cache_buf_unref(ps->ref[i]);
	ps->n = 0;
}

/* A reply made of copies: every piece's bytes into its buf. */
static int pieces_copy(void *ctx, struct cache_piece *p, size_t n)
{
	(void)ctx;
	for (size_t i = 0; i < n; i++)
		if (p[i].mem != p[i].buf)
			memcpy(p[i].buf, p[i].mem, p[i].len);
	return 0;
}

/* Has the cache find the pieces memory did not hold, then calls fn with
 * all of them (fds: the cache's may stay in its file); returns fn's value
 * (which must not be negative), or, without calling it, -EAGAIN when a
 * block has left the cache (it is then no longer held), another negative
 * errno (logged) when one cannot be read. */
static int serve(struct engine *e, uint32_t b, struct pieces *ps, bool fds,
		 int (*fn)(void *ctx, struct cache_piece *p, size_t n),
		 void *ctx)
{
	const struct engine_blob *blob = &e->blobs[b];
	uint64_t missing = 0;
	int rc;

	if (!ps->cached)
		return fn(ctx, ps->p, ps->n);
	rc = cache_blocks_serve(e->cache, &blob->id, ps->p, ps->n, fds, fn, ctx,
				&missing);
	if (rc == -ENOENT) {
		/* Gone since it was held (a failed commit, an eviction by
		 * another process, a failed checksum): fetch it again. */
		engine__drop(e, b, missing * CACHE_BLOCK_SIZE,
			     engine__block_end(blob, missing),
			     ENGINE_DROP_GONE);
		return -EAGAIN;
	}
	if (rc < 0)
		engine__log(e, FS_LOG_ERR,
			    "%s: block %" PRIu64
			    " is held but cannot be read from the cache: %s",
			    blob->name, missing, strerror(-rc));
	return rc;
}

int engine__copy_held(struct engine *e, uint32_t b, uint64_t off, size_t len,
		      char *buf)
{
	uint64_t pos = off, end = off + len, stop;
	struct pieces ps;
	int rc = 0;

	while (rc == 0 && pos < end) {
		pthread_mutex_lock(&e->mu);
		stop = gather(e, b, off, pos, end, buf, &ps);
		pthread_mutex_unlock(&e->mu);
		rc = serve(e, b, &ps, false, pieces_copy, NULL);
		pieces_release(&ps);
		pos = stop;
	}
	return rc;
}

/* The first read of a blob that changed on the origin drops its cached
 * bytes, from a reader's thread (never the transfer thread, which must
 * not commit). Returns -EIO for the read that asked. */
static int drop_changed(struct engine *e, uint32_t b)
{
	struct engine_blob *blob = &e->blobs[b];
	bool first;

	pthread_mutex_lock(&e->mu);
	first = blob->state == ENGINE_BLOB_CHANGED &&
		engine__blob_set(e, b, ENGINE_BLOB_DROPPED);
	pthread_mutex_unlock(&e->mu);
	if (first)
		engine__drop(e, b, 0, blob->size, ENGINE_DROP_STALE);
	return -EIO;
}

/* Counts a read answered with len bytes (rc 0), of which in_memory
 * came from memory, the rest from the cache, unless it waited for a
 * transfer; returns rc. */
static int counted(struct engine *e, int rc, bool waited, uint64_t in_memory,
		   uint64_t len)
{
	struct engine_stats *s = &e->stats;

	if (rc != 0)
		return rc;
	if (waited) {
		engine__count(&s->misses, 1);
		engine__count(&s->read_bytes[ENGINE_FROM_NETWORK], len);
		return 0;
	}
	engine__count(&s->hits, 1);
	engine__count(&s->read_bytes[ENGINE_FROM_MEMORY], in_memory);
	engine__count(&s->read_bytes[ENGINE_FROM_CACHE], len - in_memory);
	return 0;
}

/* One try of a read of [off, end): under one hold of the lock, the
 * scheduler hears of it (the first try) and says whether it is held, the
 * read waits if it must, and the pieces memory holds are gathered; then the
 * cache finds the others and the reply is made. -EAGAIN when a block left
 * the cache meanwhile (no reply made). */
static int read_once(struct engine *e, uint32_t b, uint32_t reader,
		     uint64_t off, uint64_t end, char *buf, bool first,
		     struct answer *a)
{
	const struct engine_read_reply *rr = a->rr;
	struct engine_blob *blob = &e->blobs[b];
	struct pace_read_result r = {.step.wait = PACE_NONE};
	uint64_t now, stop = off;
	struct cache_piece whole;
	struct pieces ps = {.n = 0};
	bool waited;
	int rc;

	pthread_mutex_lock(&e->mu);
	if (engine__blob_changed(blob)) {
		pthread_mutex_unlock(&e->mu);
		return drop_changed(e, b);
	}
	if (blob->verify == ENGINE_VERIFY_FAILED) {
		pthread_mutex_unlock(&e->mu);
		return -EIO; /* logged when the check failed */
	}
	now = fs__now_ns();
	/* The one question of a try, about the read's bytes: the first try's
	 * also tells the scheduler of the read. */
	if (first) {
		a->save_regions = engine__regions_read(e, b, off, end, now);
		rc = pace_read(e->pace, reader, off, end - off, true, now, &r);
	} else
		rc = pace_read_step(e->pace, reader, off, end - off, PACE_NONE,
				    now, &r.step);
	waited = rc == 0 && r.step.what == PACE_DO_WAIT;
	/* The reader's window is not evicted while it reads there, nor
	 * while it waits. */
	if (first && waited)
		cache_pin_set(e->cache, &blob->id, reader, off,
			      r.cursor + r.window);
	if (rc == 0)
		rc = wait_ready(e, b, reader, off, end, &r.step, now,
				rr->cancelled, rr->arg);
	if (rc == 0)
		stop = gather(e, b, off, off, end, buf, &ps);
	pthread_mutex_unlock(&e->mu);
	if (first && !waited) {
		cache_pin_set(e->cache, &blob->id, reader, off,
			      r.cursor + r.window);
		/* Read-ahead may start where the window gained room. */
		if (r.moved)
			fetch_wake(e->fetch);
	}
	if (rc != 0)
		return rc;
	if (stop == end) {
		rc = serve(e, b, &ps, rr->fds, answer_pieces, a);
		pieces_release(&ps);
		return counted(e, rc, waited, ps.in_memory, end - off);
	}
	/* Too many blocks for one set of pieces: copied, then one reply. */
	rc = serve(e, b, &ps, false, pieces_copy, NULL);
	pieces_release(&ps);
	if (rc == 0)
		rc = engine__copy_held(e, b, stop, (size_t)(end - stop),
				       buf + (stop - off));
	if (rc != 0)
		return rc;
	whole = (struct cache_piece){
		.len = (size_t)(end - off), .buf = buf, .mem = buf, .fd = -1};
	return counted(e, answer_pieces(a, &whole, 1), waited, ps.in_memory,
		       end - off);
}

/* Blob b's size now: a blob of unknown length has its ceiling until its
 * stream ends (openend.c). */
static uint64_t read_size(struct engine *e, uint32_t b)
{
	uint64_t size;

	pthread_mutex_lock(&e->mu);
	size = e->blobs[b].size;
	pthread_mutex_unlock(&e->mu);
	return size;
}

long engine_read(struct engine *e, uint32_t b, uint32_t reader, uint64_t off,
		 size_t len, char *buf, const struct engine_read_reply *rr)
{
	const struct engine_blob *blob = &e->blobs[b];
	struct cache_piece none = {.buf = buf, .mem = buf, .fd = -1};
	uint64_t end, tries, most, until = fs__now_ns() + e->read_timeout_ns;
	struct answer a = {.rr = rr};
	uint64_t size = read_size(e, b);
	int rc = -EAGAIN;

	if (off >= size || len == 0)
		return answer_pieces(&a, &none, 1);
	end = size - off < len ? size : off + len;
	/* A block the cache lost after it was held is no longer held once
	 * found missing, and fetched again. A try finds one such block, and
	 * another process sharing the cache may have evicted every block of
	 * the read, some of them again while it was fetched: a try per block
	 * and two more at least, and more until the read's deadline. A blob
	 * of unknown length may end short of the read while it waits: the
	 * next try reads within the size then known, or answers its end. */
	most = (end - 1) / CACHE_BLOCK_SIZE - off / CACHE_BLOCK_SIZE + 3;
	for (tries = 0; rc == -EAGAIN && (tries < most || fs__now_ns() < until);
	     tries++) {
		size = read_size(e, b);
		if (off >= size)
			return answer_pieces(&a, &none, 1);
		end = size - off < len ? size : off + len;
		rc = read_once(e, b, reader, off, end, buf, tries == 0, &a);
	}
	if (rc == -EAGAIN) {
		engine__log(e, FS_LOG_ERR,
			    "%s: bytes %" PRIu64 "-%" PRIu64
			    " left the cache %" PRIu64 " times while read: EIO",
			    blob->name, off, end - 1, tries);
		rc = -EIO;
	}
	if (rc != 0 && !a.replied)
		rr->reply(rr->ctx, NULL, 0, rc);
	/* A synchronous commit: after the reply. */
	if (a.save_regions)
		engine__regions_save(e, b);
	return rc != 0 ? rc : (long)(end - off);
}

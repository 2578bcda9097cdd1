/* ask: a read's one question to the scheduler, what to do now (copy what
 * is held, wait on a range, fail), and the memory of reads that failed
 * lately, so that a read of their bytes is refused without a new wait. */
#include "pacing/pace.h"
#include "pacing/pace_int.h"

#include <assert.h>
#include <errno.h>

/* Remembers that a read of [start, end) of blob failed at now_ns. */
static void remember(struct pace *p, uint32_t blob, uint64_t start,
		     uint64_t end, uint64_t now_ns)
{
	struct failed *f = &p->failed[p->failed_next++ % PACE_FAILED_MAX];

	*f = (struct failed){
		.used = true,
		.blob = blob,
		.start = start,
		.end = end,
		.at_ns = now_ns,
	};
}

/* True when a read overlapping [start, end) of blob failed less than
 * PACE_FAILED_NS before now_ns. */
static bool failed_lately(const struct pace *p, uint32_t blob, uint64_t start,
			  uint64_t end, uint64_t now_ns)
{
	for (uint32_t i = 0; i < PACE_FAILED_MAX; i++) {
		const struct failed *f = &p->failed[i];

		if (f->used && f->blob == blob && start < f->end &&
		    f->start < end && now_ns - f->at_ns < PACE_FAILED_NS)
			return true;
	}
	return false;
}

/* Ends wait w, which failed with rc: its range is remembered. */
static void wait_failed(struct pace *p, uint32_t w, int rc, uint64_t now_ns,
			struct pace_step *out)
{
	const struct wait *wt = &p->waits[w];

	remember(p, wt->blob, wt->off, wt->end, now_ns);
	pace_wait_end(p, w);
	*out = (struct pace_step){
		.what = PACE_DO_FAIL, .wait = PACE_NONE, .error = rc};
}

int pace_read_step(struct pace *p, uint32_t reader, uint64_t off, uint64_t len,
		   uint32_t wait, uint64_t now_ns, struct pace_step *out)
{
	const struct reader *r = p ? pace__reader_get(p, reader) : NULL;
	uint64_t size, start, end;
	uint32_t w;
	int rc;

	if (!r)
		return -ENOENT;
	if (!out || len > UINT64_MAX - off)
		return -EINVAL;
	assert(now_ns >= p->now);
	if (wait != PACE_NONE) {
		rc = pace_wait_state(p, wait, now_ns);
		if (rc == -ENOENT)
			return rc;
		if (rc == -EINPROGRESS) {
			*out = (struct pace_step){.what = PACE_DO_WAIT,
						  .wait = wait};
			return 0;
		}
		if (rc != 0) {
			wait_failed(p, wait, rc, now_ns, out);
			return 0;
		}
		pace_wait_end(p, wait); /* served: the range is asked anew */
	}
	size = p->blobs[r->blob].size;
	start = pace__min64(off, size);
	end = pace__min64(off + len, size);
	if (pace__ranges_covers(&p->blobs[r->blob].held, start, end)) {
		*out = (struct pace_step){.what = PACE_DO_COPY,
					  .wait = PACE_NONE};
		return 0;
	}
	if (failed_lately(p, r->blob, start, end, now_ns)) {
		*out = (struct pace_step){.what = PACE_DO_FAIL,
					  .wait = PACE_NONE,
					  .error = -EIO,
					  .again = true};
		return 0;
	}
	rc = pace_wait_begin(p, reader, off, len, now_ns, &w);
	if (rc)
		return rc;
	/* A wait no source can serve (every one excluded or down) fails
	 * now, not at its first wake-up. */
	rc = pace_wait_state(p, w, now_ns);
	if (rc != -EINPROGRESS && rc != 0) {
		wait_failed(p, w, rc, now_ns, out);
		return 0;
	}
	*out = (struct pace_step){
		.what = PACE_DO_WAIT, .wait = w, .begun = true};
	return 0;
}

int pace_read_failed(struct pace *p, uint32_t reader, uint64_t off,
		     uint64_t len, uint64_t now_ns)
{
	const struct reader *r = p ? pace__reader_get(p, reader) : NULL;
	uint64_t size;

	if (!r)
		return -ENOENT;
	if (len > UINT64_MAX - off)
		return -EINVAL;
	assert(now_ns >= p->now);
	size = p->blobs[r->blob].size;
	remember(p, r->blob, pace__min64(off, size),
		 pace__min64(off + len, size), now_ns);
	return 0;
}

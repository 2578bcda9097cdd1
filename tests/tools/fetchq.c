/* fetchq: drives fetch/ against a live origin to show what a request sent
 * ahead (fetch_lane_queue) does: promoted by the START of its range, its
 * bytes follow the open request's in order and it is not asked twice;
 * not promoted, or with its lane cancelled, none of its bytes arrive. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fetch/fetch.h"

#define PART (256u * 1024u)

enum scenario { PROMOTE, ABANDON, CANCEL };

struct run {
	enum scenario sc;
	struct fetch *f;
	struct fetch_target t;
	int fd; /* the origin's copy of the blob */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int step;	   /* event thread only, but for `finished` */
	uint64_t next;	   /* the offset the next byte must have */
	uint64_t received; /* bytes passed to on_data */
	uint64_t bad_off;  /* first wrong byte, or UINT64_MAX */
	int done_ok, done_cancelled, done_other;
	bool finished; /* guarded by mu */
	char why[256];
};

static void finish(struct run *r, const char *why)
{
	pthread_mutex_lock(&r->mu);
	if (!r->finished && why != NULL)
		snprintf(r->why, sizeof(r->why), "%s", why);
	r->finished = true;
	pthread_cond_signal(&r->cv);
	pthread_mutex_unlock(&r->mu);
}

static void on_data(void *ctx, uint32_t lane, uint64_t off, const void *buf,
		    size_t len)
{
	struct run *r = ctx;
	unsigned char want[64 * 1024];

	(void)lane;
	if (off != r->next && r->bad_off == UINT64_MAX)
		r->bad_off = off;
	for (size_t done = 0; done < len;) {
		size_t n =
			len - done < sizeof(want) ? len - done : sizeof(want);

		if (pread(r->fd, want, n, (off_t)(off + done)) != (ssize_t)n ||
		    memcmp(want, (const unsigned char *)buf + done, n) != 0) {
			if (r->bad_off == UINT64_MAX)
				r->bad_off = off + done;
			break;
		}
		done += n;
	}
	r->next = off + len;
	r->received += len;
}

static void on_done(void *ctx, uint32_t lane, const struct fetch_result *res)
{
	struct run *r = ctx;

	(void)lane;
	if (res->outcome == FETCH_OK)
		r->done_ok++;
	else if (res->outcome == FETCH_CANCELLED)
		r->done_cancelled++;
	else {
		r->done_other++;
		finish(r, res->reason);
	}
}

/* Each scenario, one step per loop turn that has something to do. */
static long on_tick(void *ctx)
{
	struct run *r = ctx;
	struct fetch *f = r->f;

	switch (r->step) {
	case 0:
		r->next = 0;
		if (fetch_lane_start(f, 0, &r->t, 0, PART) != 0 ||
		    fetch_lane_queue(f, 0, &r->t, PART, 2 * PART) != 0) {
			finish(r, "cannot start or queue");
			break;
		}
		r->step = 1;
		if (r->sc == CANCEL) {
			fetch_lane_cancel(f, 0);
			r->step = 3;
		}
		break;
	case 1: /* the open request ends, then its successor's START */
		if (r->done_ok < 1)
			break;
		if (r->sc == PROMOTE) {
			if (fetch_lane_start(f, 0, &r->t, PART, 2 * PART) != 0)
				finish(r, "cannot start the queued range");
		} else {
			r->next = 3 * PART;
		}
		r->step = 2;
		break;
	case 2: /* the successor: promoted, or another range after the turn
		   that dropped the one sent ahead */
		if (r->sc == ABANDON && r->done_ok == 1) {
			if (fetch_lane_start(f, 0, &r->t, 3 * PART, 4 * PART) !=
			    0)
				finish(r, "cannot start another range");
			r->step = 4;
			break;
		}
		if (r->done_ok >= 2)
			finish(r, NULL);
		break;
	case 3: /* cancelled: wait a little for stray bytes */
		r->step = 5;
		return 300;
	case 4:
		if (r->done_ok >= 2)
			finish(r, NULL);
		break;
	case 5:
		finish(r, NULL);
		break;
	}
	return 50;
}

int main(int argc, char **argv)
{
	struct fetch_config cfg = {.max_lanes = 1, .connect_timeout_ms = 5000};
	struct fetch_hooks hooks = {
		.on_data = on_data, .on_done = on_done, .on_tick = on_tick};
	struct run r = {.fd = -1, .bad_off = UINT64_MAX};
	struct timespec until;
	struct stat st;
	int rc = 1;

	if (argc != 4 || (strcmp(argv[1], "promote") != 0 &&
			  strcmp(argv[1], "abandon") != 0 &&
			  strcmp(argv[1], "cancel") != 0)) {
		fprintf(stderr,
			"usage: fetchq promote|abandon|cancel URL FILE\n");
		return 2;
	}
	r.sc = strcmp(argv[1], "promote") == 0	 ? PROMOTE
	       : strcmp(argv[1], "abandon") == 0 ? ABANDON
						 : CANCEL;
	r.fd = open(argv[3], O_RDONLY);
	if (r.fd < 0 || fstat(r.fd, &st) != 0 ||
	    (uint64_t)st.st_size < 4 * PART) {
		fprintf(stderr, "fetchq: %s: missing or under 1 MiB\n",
			argv[3]);
		return 2;
	}
	r.t.url = argv[2];
	r.t.size = (uint64_t)st.st_size;
	pthread_mutex_init(&r.mu, NULL);
	pthread_cond_init(&r.cv, NULL);
	hooks.ctx = &r;
	if (fetch_global_init() != 0 || fetch_new(&cfg, &hooks, &r.f) != 0 ||
	    fetch_start(r.f) != 0) {
		fprintf(stderr, "fetchq: cannot start fetch\n");
		return 1;
	}
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 20;
	pthread_mutex_lock(&r.mu);
	while (!r.finished &&
	       pthread_cond_timedwait(&r.cv, &r.mu, &until) != ETIMEDOUT)
		;
	pthread_mutex_unlock(&r.mu);
	fetch_free(r.f); /* joins the event thread: its fields settle */
	if (!r.finished)
		printf("failed: no end after 20 s (step %d)\n", r.step);
	else if (r.why[0])
		printf("failed: %s\n", r.why);
	else if (r.bad_off != UINT64_MAX)
		printf("failed: a byte out of order or wrong at %" PRIu64 "\n",
		       r.bad_off);
	else if (r.sc == PROMOTE && (r.received != 2 * PART || r.done_ok != 2))
		printf("failed: %" PRIu64 " bytes, %d transfers ok\n",
		       r.received, r.done_ok);
	else if (r.sc == ABANDON && (r.received != 2 * PART || r.done_ok != 2))
		printf("failed: %" PRIu64 " bytes, %d transfers ok\n",
		       r.received, r.done_ok);
	else if (r.sc == CANCEL &&
		 (r.received > PART || r.done_cancelled != 1 || r.done_ok))
		printf("failed: %" PRIu64 " bytes, %d cancelled, %d ok\n",
		       r.received, r.done_cancelled, r.done_ok);
	else {
		printf("ok %s: %" PRIu64 " bytes in order\n", argv[1],
		       r.received);
		rc = 0;
	}
	close(r.fd);
	return rc;
}

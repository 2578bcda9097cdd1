/* exitguard: the daemon's exit, bounded: once the session ends, waiting
 * reads are woken, and a shutdown that a stuck thread still holds after a
 * grace period ends the process rather than outlive its mount. */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

#include <fuse_lowlevel.h>

#include "fs/driver/driver_int.h"
#include "fs/obs/obs.h"
#include "fs/engine/engine.h"

/* How long libfuse's join of its workers may take once the session ended
 * (an unmount or a signal): waiting reads end within a second of it, so
 * only a thread stuck in a blocking call can hold it longer. */
#define DRIVER_EXIT_GRACE_S 10

/* How long the teardown after the session loop returned may take: the
 * engine's threads and the cache's last commit, which a slow disk may
 * draw out, and which must not be cut short for a stuck worker's sake. */
#define DRIVER_EXIT_TEARDOWN_S 60

/* Waits on g->cv for at most ms; returns false when the time passed.
 * Caller holds g->mu. */
static bool guard_wait(struct driver_exit_guard *g, uint64_t ms)
{
	uint64_t until = fs__now_ns() + ms * 1000000u;
	struct timespec ts = {.tv_sec = (time_t)(until / 1000000000u),
			      .tv_nsec = (long)(until % 1000000000u)};

	return pthread_cond_timedwait(&g->cv, &g->mu, &ts) != ETIMEDOUT;
}

static void *exit_guard_main(void *arg)
{
	struct driver_exit_guard *g = arg;
	uint64_t end;

	pthread_mutex_lock(&g->mu);
	/* libfuse ends the session from its signal handler or the thread
	 * that saw the unmount, and says so only by fuse_session_exited. */
	while (!g->done && !g->ended && !fuse_session_exited(g->se))
		guard_wait(g, 250);
	if (!g->done && g->engine != NULL)
		engine_wake_readers(g->engine);
	end = fs__now_ns() + (uint64_t)DRIVER_EXIT_GRACE_S * 1000000000u;
	for (bool teardown = false; !g->done;) {
		uint64_t now = fs__now_ns();

		if (g->ended && !teardown) {
			teardown = true;
			end = now +
			      (uint64_t)DRIVER_EXIT_TEARDOWN_S * 1000000000u;
		}
		if (now >= end)
			break;
		guard_wait(g, (end - now) / 1000000u + 1);
	}
	if (!g->done) {
		obs_log(FS_LOG_ERR,
			"exit: shutdown not done %d s after the session "
			"ended (%s); exiting without waiting for it",
			g->ended ? DRIVER_EXIT_TEARDOWN_S : DRIVER_EXIT_GRACE_S,
			g->ended ? "the teardown is stuck"
				 : "a thread is stuck in a blocking call");
		if (!g->unmounted)
			fuse_session_unmount(g->se);
		_exit(1);
	}
	pthread_mutex_unlock(&g->mu);
	return NULL;
}

int driver__exit_guard_start(struct driver_exit_guard *g,
			     struct fuse_session *se, struct engine *engine)
{
	pthread_condattr_t ca;
	int rc;

	g->se = se;
	g->engine = engine;
	pthread_mutex_init(&g->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&g->cv, &ca);
	pthread_condattr_destroy(&ca);
	rc = -pthread_create(&g->thread, NULL, exit_guard_main, g);
	g->started = rc == 0;
	return rc;
}

/* The session loop returned: from here on se may be freed. */
void driver__exit_guard_ended(struct driver_exit_guard *g)
{
	if (!g->started)
		return;
	pthread_mutex_lock(&g->mu);
	g->ended = true;
	pthread_cond_signal(&g->cv);
	pthread_mutex_unlock(&g->mu);
}

/* The mount is taken down once, by the main thread or by the guard. */
void driver__exit_guard_unmount(struct driver_exit_guard *g,
				struct fuse_session *se)
{
	if (g->started)
		pthread_mutex_lock(&g->mu);
	if (!g->unmounted)
		fuse_session_unmount(se);
	g->unmounted = true;
	if (g->started)
		pthread_mutex_unlock(&g->mu);
}

/* Before the engine is freed: the guard no longer wakes its readers. */
void driver__exit_guard_forget_engine(struct driver_exit_guard *g)
{
	if (!g->started)
		return;
	pthread_mutex_lock(&g->mu);
	g->engine = NULL;
	pthread_mutex_unlock(&g->mu);
}

void driver__exit_guard_stop(struct driver_exit_guard *g)
{
	if (!g->started)
		return;
	pthread_mutex_lock(&g->mu);
	g->done = true;
	pthread_cond_signal(&g->cv);
	pthread_mutex_unlock(&g->mu);
	pthread_join(g->thread, NULL);
	pthread_cond_destroy(&g->cv);
	pthread_mutex_destroy(&g->mu);
	g->started = false;
}

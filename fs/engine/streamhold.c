/* streamhold: a stream (a source that ignores Range) is held, its
 * connection not read, while it runs far enough ahead of its blob's
 * readers and no read waits (pace_lane_hold_wanted); the server's window
 * keeps the rest. Without it a reader slower than the stream has the
 * whole object pulled ahead of it. */
#include "fs/engine/engine_int.h"

void engine__stream_holds(struct engine *e)
{
	uint32_t change[ENGINE_HOLD_MAX];
	bool hold[ENGINE_HOLD_MAX];
	uint32_t n = 0;
	uint64_t now;

	pthread_mutex_lock(&e->mu);
	now = fs__now_ns();
	for (uint32_t i = 0; i < e->nlanes && n < ENGINE_HOLD_MAX; i++) {
		bool want = pace_lane_hold_wanted(e->pace, i);

		if (pace_lane_hold(e->pace, i, want, now) == 1) {
			change[n] = i;
			hold[n++] = want;
		}
	}
	pthread_mutex_unlock(&e->mu);
	/* Going on may pass bytes to on_data at once: without the lock. */
	for (uint32_t k = 0; k < n; k++) {
		fetch_lane_pause(e->fetch, change[k], hold[k]);
		engine__log(e, FS_LOG_DEBUG, "lane %u: stream %s", change[k],
			    hold[k] ? "held ahead of its readers" : "goes on");
	}
}

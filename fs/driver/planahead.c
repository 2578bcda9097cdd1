/* planahead: fetching along the read plans, and what status shows of
 * them. A few threads take the next entries within each plan's window,
 * make each file ready (its probe, which brings a small file whole in one
 * request) and open a plan reader on the rest of what it will read
 * (engine_plan_open): read-ahead after every paced reader's, yielded to
 * every waiting read. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fs/driver/driver_int.h"
#include "fs/driver/plan_int.h"
#include "fs/engine/engine.h"
#include "fs/obs/obs.h"
#include "fs/tree/tree.h"

#define SEC 1000000000ull

static bool entry_done(const struct driver_plan *p, uint64_t i)
{
	return (p->done[i / 8] >> (i % 8)) & 1;
}

/* The bytes plan p fetches of entry i ahead: its range's, else a large
 * file's first ones. */
static uint64_t entry_want(const struct driver_plan *p, uint64_t i)
{
	if (p->listing)
		return DRIVER_LIST_FIRST;
	if (p->ranges != NULL && p->ranges[i].len != 0)
		return p->ranges[i].len;
	return DRIVER_PLAN_FIRST;
}

/* The next entry to fetch ahead, over the plans in turn, with a hint
 * slot taken for it; NULL when there is none. Caller holds s->mu. */
static struct driver_plan_hint *take_next(struct driver_plans *s,
					  struct driver_plan_range *range)
{
	struct driver_plan_hint *h = NULL;
	uint64_t now = fs__now_ns();

	if (s->nhints >= DRIVER_PLAN_HINTS)
		return NULL;
	for (uint32_t k = 0; k < DRIVER_PLAN_SLOTS; k++) {
		uint32_t pi = (s->rr + k) % DRIVER_PLAN_SLOTS;
		struct driver_plan *p = s->plans[pi];
		uint64_t end;

		/* A paused loader's window is what was fetched when it
		 * paused: nothing more is asked until it opens again. */
		if (p == NULL || p->abandoned || driver__plan_paused(p, now))
			continue;
		end = p->cursor + driver__plan_ahead(s, p);
		while (p->next < p->n && p->next < end &&
		       entry_done(p, p->next))
			p->next++;
		if (p->next >= p->n || p->next >= end)
			continue;
		for (uint32_t j = 0; j < DRIVER_PLAN_HINTS; j++)
			if (s->hints[j].state == DRIVER_HINT_FREE) {
				h = &s->hints[j];
				break;
			}
		h->state = DRIVER_HINT_PENDING;
		h->plan = p;
		h->node = p->nodes[p->next];
		*range = p->ranges != NULL ? p->ranges[p->next]
					   : (struct driver_plan_range){0, 0};
		if (p->listing)
			*range = (struct driver_plan_range){0,
							    DRIVER_LIST_FIRST};
		p->next++;
		s->nhints++;
		s->rr = (pi + 1) % DRIVER_PLAN_SLOTS;
		return h;
	}
	return NULL;
}

/* Plan readers whose bytes are all held close: what they asked came, and
 * their slot serves the next file. Caller holds s->mu; their readers go
 * to closing. */
static uint32_t retire_held(struct driver_plans *s,
			    struct driver_plan_hint *closing)
{
	uint32_t n = 0;

	for (uint32_t k = 0; k < DRIVER_PLAN_HINTS; k++) {
		struct driver_plan_hint *h = &s->hints[k];

		if (h->state != DRIVER_HINT_OPEN ||
		    engine_held(s->m->engine, h->blob) < h->want)
			continue;
		closing[n++] = *h;
		h->state = DRIVER_HINT_FREE;
		s->nhints--;
	}
	return n;
}

/* Makes hint h's file ready and opens its plan reader; NULL-plan (its
 * plan went meanwhile) or failure frees the slot. Called without s->mu. */
static void hint_start(struct driver_plans *s, struct driver_plan_hint *h,
		       struct driver_plan_range range)
{
	struct driver_mount *m = s->m;
	uint32_t blob = TREE_NO_BLOB, reader = 0;
	uint64_t size = 0, len;
	bool opened = false;
	int rc;

	rc = driver__file_ready(m, h->node, fs__now_ns() + m->read_timeout_ns);
	if (rc == 0) {
		struct tree_node *n;

		pthread_mutex_lock(&m->ns->mu);
		n = tree_ns_get(m->ns, h->node);
		if (n != NULL) {
			blob = n->blob;
			size = n->size;
		}
		pthread_mutex_unlock(&m->ns->mu);
	}
	if (range.off > size)
		range.off = size;
	len = range.len ? range.len : DRIVER_PLAN_FIRST;
	if (len > size - range.off)
		len = size - range.off;
	if (blob != TREE_NO_BLOB && len > 0 &&
	    engine_held(m->engine, blob) < len)
		opened = engine_plan_open(m->engine, blob, range.off, len,
					  &reader) == 0;
	pthread_mutex_lock(&s->mu);
	if (opened && h->plan != NULL && !s->stop) {
		h->state = DRIVER_HINT_OPEN;
		h->blob = blob;
		h->reader = reader;
		h->want = len;
		opened = false;
	} else {
		h->state = DRIVER_HINT_FREE;
		s->nhints--;
	}
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	if (opened)
		engine_close(m->engine, blob, reader);
}

void *driver__plan_worker(void *arg)
{
	struct driver_plans *s = arg;
	struct driver_plan_hint closing[DRIVER_PLAN_HINTS];

	/* One file after another, the probes share this thread's
	 * connections (fetch_thread_keep), dropped when it has nothing
	 * to do, or has started nothing for a second (a paused loader's
	 * plan only watches what it fetched). */
	bool keeping = false;
	uint64_t started = 0;

	pthread_mutex_lock(&s->mu);
	while (!s->stop) {
		struct driver_plan_range range;
		struct driver_plan_hint *h;
		uint32_t n = retire_held(s, closing);

		if (n > 0) {
			pthread_mutex_unlock(&s->mu);
			for (uint32_t k = 0; k < n; k++)
				engine_close(s->m->engine, closing[k].blob,
					     closing[k].reader);
			pthread_mutex_lock(&s->mu);
			continue;
		}
		h = take_next(s, &range);
		if (h == NULL && s->nhints == 0) {
			/* Nothing to watch: an install, an open or the end
			 * wakes it. */
			if (keeping) {
				pthread_mutex_unlock(&s->mu);
				fetch_thread_release();
				keeping = false;
				pthread_mutex_lock(&s->mu);
				continue;
			}
			pthread_cond_wait(&s->cv, &s->mu);
			continue;
		}
		if (h == NULL && keeping &&
		    fs__now_ns() - started > DRIVER_PLAN_KEEP_NS) {
			pthread_mutex_unlock(&s->mu);
			fetch_thread_release();
			keeping = false;
			pthread_mutex_lock(&s->mu);
			continue;
		}
		if (h == NULL) {
			/* Held bytes are noticed within a poll's time. */
			struct timespec ts;

			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_nsec += 50 * 1000000L;
			if (ts.tv_nsec >= 1000000000L) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000L;
			}
			pthread_cond_timedwait(&s->cv, &s->mu, &ts);
			continue;
		}
		pthread_mutex_unlock(&s->mu);
		fetch_thread_keep();
		keeping = true;
		started = fs__now_ns();
		hint_start(s, h, range);
		pthread_mutex_lock(&s->mu);
	}
	pthread_mutex_unlock(&s->mu);
	fetch_thread_release();
	return NULL;
}

/* What a plan fetched ahead of its cursor and holds: files and bytes.
 * Caller holds s->mu. */
static void plan_held_ahead(struct driver_plans *s, const struct driver_plan *p,
			    uint64_t *files, uint64_t *bytes)
{
	struct driver_mount *m = s->m;

	*files = *bytes = 0;
	for (uint64_t i = p->cursor; i < p->next && i < p->n; i++) {
		struct tree_node *n;
		uint32_t blob = TREE_NO_BLOB;
		uint64_t size = 0, held, want;

		if (entry_done(p, i))
			continue;
		pthread_mutex_lock(&m->ns->mu);
		n = tree_ns_get(m->ns, p->nodes[i]);
		if (n != NULL) {
			blob = n->blob;
			size = n->size;
		}
		pthread_mutex_unlock(&m->ns->mu);
		if (blob == TREE_NO_BLOB)
			continue;
		held = engine_held(m->engine, blob);
		*bytes += held;
		/* Ready: its size held, or what the plan fetches of it. */
		want = entry_want(p, i);
		if (size > 0 && held >= (want < size ? want : size))
			(*files)++;
	}
}

/* The path of node (TREE_NO_NODE: none), as the inside of a JSON
 * string. Caller holds s->mu. */
static void node_path(struct driver_plans *s, uint32_t node, char *out,
		      size_t cap)
{
	char path[PATH_MAX];

	path[0] = '\0';
	if (node != TREE_NO_NODE) {
		pthread_mutex_lock(&s->m->ns->mu);
		tree_ns_path(s->m->ns, node, path, sizeof(path));
		pthread_mutex_unlock(&s->m->ns->mu);
	}
	fs__json_escape(path, out, cap);
}

static const char *plan_state(const struct driver_plan *p, uint64_t now)
{
	if (p->abandoned)
		return "abandoned";
	if (p->cursor >= p->n)
		return "done";
	if (p->opened == 0 && !p->listing)
		return "waiting";
	if (driver__plan_paused(p, now))
		return "paused";
	return "following";
}

int driver__plan_status_json(void *arg, char *buf, size_t cap)
{
	struct driver_plans *s = arg;
	uint64_t now = fs__now_ns();
	size_t used = 0;
	bool first = true;

	if (cap < 3)
		return -ERANGE;
	buf[used++] = '[';
	pthread_mutex_lock(&s->mu);
	for (uint32_t k = 0; k < DRIVER_PLAN_SLOTS; k++) {
		const struct driver_plan *p = s->plans[k];
		uint64_t files, bytes, ms, unread_files, unread_bytes;
		char at[PATH_MAX * 2], dir[PATH_MAX * 2];
		int w;

		if (p == NULL)
			continue;
		plan_held_ahead(s, p, &files, &bytes);
		node_path(s,
			  p->cursor < p->n ? p->nodes[p->cursor] : TREE_NO_NODE,
			  at, sizeof(at));
		node_path(s, p->listing ? p->dir : TREE_NO_NODE, dir,
			  sizeof(dir));
		ms = p->rate > 0 ? (uint64_t)((double)files * 1000.0 / p->rate)
				 : 0;
		/* An abandoned plan's files held ahead will not be opened
		 * by its loader: unread now, not once it is cleared. */
		unread_files = p->unread_files + (p->abandoned ? files : 0);
		unread_bytes = p->unread_bytes + (p->abandoned ? bytes : 0);
		/* Names are [A-Za-z0-9._-]: nothing to escape. A listing
		 * plan's kind, process and directory come last. */
		w = snprintf(
			buf + used, cap - used,
			"%s{\"name\":\"%s\",\"uid\":%u,\"length\":%" PRIu64
			",\"cursor\":%" PRIu64 ",\"cursor_path\":\"%s\""
			",\"opened\":%" PRIu64 ",\"skipped\":%" PRIu64
			",\"unread_files\":%" PRIu64
			",\"unread_bytes\":%" PRIu64 ",\"state\":\"%s\","
			"\"rate_milli\":%" PRIu64 ",\"window\":%" PRIu64
			",\"ahead_files\":%" PRIu64 ",\"ahead_bytes\":%" PRIu64
			",\"ahead_ms\":%" PRIu64 ",\"kind\":\"%s\""
			",\"pid\":%ld,\"dir\":\"/%s\"}",
			first ? "" : ",", p->name, (unsigned)p->uid, p->n,
			p->cursor, at, p->opened, p->skipped, unread_files,
			unread_bytes, plan_state(p, now),
			(uint64_t)(p->rate * 1000.0), driver__plan_ahead(s, p),
			files, bytes, ms, p->listing ? "listing" : "set",
			p->listing ? (long)p->pid : 0L, dir);
		if (w < 0 || (size_t)w >= cap - used) {
			pthread_mutex_unlock(&s->mu);
			return -ERANGE;
		}
		used += (size_t)w;
		first = false;
	}
	pthread_mutex_unlock(&s->mu);
	if (used + 2 > cap)
		return -ERANGE;
	buf[used++] = ']';
	buf[used] = '\0';
	return (int)used;
}

/* plan: read plans, the files an application said it will open next, in
 * order; their cursor follows the application's opens, and the files
 * within a window past it are fetched ahead as read-ahead of the third
 * kind (pace_reader_plan), by a few threads that make each file ready
 * (its probe) and open a plan reader on it. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fs/driver/driver_int.h"
#include "fs/driver/plan_int.h"
#include "fs/engine/engine.h"
#include "fs/obs/obs.h"
#include "fs/tree/tree.h"

#define SEC 1000000000ull

int driver__plan_set_new(struct driver_mount *m, uint64_t lead_ms,
			 uint32_t threads, bool listahead,
			 struct driver_plans **out)
{
	struct driver_plans *s = calloc(1, sizeof(*s));

	*out = NULL;
	if (s == NULL)
		return -ENOMEM;
	s->m = m;
	s->lead_ns = lead_ms * 1000000ull;
	s->listahead = listahead;
	s->listen_fd = -1;
	s->want_threads =
		threads < DRIVER_PLAN_THREADS ? threads : DRIVER_PLAN_THREADS;
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->cv, NULL);
	*out = s;
	return 0;
}

/* The workers start with the first plan (or listing plan): a mount that
 * is never given one runs none. Caller holds s->mu; none start once the
 * set is stopping. */
static void start_workers(struct driver_plans *s)
{
	while (!s->stop && s->nthreads < s->want_threads &&
	       pthread_create(&s->threads[s->nthreads], NULL,
			      driver__plan_worker, s) == 0)
		s->nthreads++;
}

void driver__plan_free(struct driver_plan *p)
{
	if (p == NULL)
		return;
	free(p->nodes);
	free(p->ranges);
	free(p->done);
	free(p);
}

/* Takes hint h out of its plan; its reader, if any, is written to *close
 * for the caller to close after the lock. Caller holds s->mu. */
static void hint_drop(struct driver_plans *s, struct driver_plan_hint *h,
		      struct driver_plan_hint *closing, uint32_t *nclosing)
{
	if (h->state == DRIVER_HINT_OPEN && closing != NULL)
		closing[(*nclosing)++] = *h;
	if (h->state == DRIVER_HINT_PENDING) {
		h->plan = NULL; /* its thread closes what it opens */
		return;
	}
	h->state = DRIVER_HINT_FREE;
	s->nhints--;
}

static void close_hints(struct driver_plans *s,
			const struct driver_plan_hint *closing, uint32_t n)
{
	for (uint32_t k = 0; k < n; k++)
		engine_close(s->m->engine, closing[k].blob, closing[k].reader);
}

/* Drops every hint of plan p (cleared, replaced or abandoned). Caller
 * holds s->mu; closing has room for DRIVER_PLAN_HINTS. */
static void plan_unhint(struct driver_plans *s, struct driver_plan *p,
			struct driver_plan_hint *closing, uint32_t *nclosing)
{
	for (uint32_t k = 0; k < DRIVER_PLAN_HINTS; k++) {
		struct driver_plan_hint *h = &s->hints[k];

		if (h->state != DRIVER_HINT_FREE && h->plan == p)
			hint_drop(s, h, closing, nclosing);
	}
}

bool driver__plan_owner(struct driver_plans *s, const char *name, uid_t *uid)
{
	bool found = false;

	pthread_mutex_lock(&s->mu);
	for (uint32_t k = 0; k < DRIVER_PLANS_MAX && !found; k++)
		if (s->plans[k] != NULL &&
		    strcmp(s->plans[k]->name, name) == 0) {
			*uid = s->plans[k]->uid;
			found = true;
		}
	pthread_mutex_unlock(&s->mu);
	return found;
}

static bool is_done(const struct driver_plan *p, uint64_t i)
{
	return (p->done[i / 8] >> (i % 8)) & 1;
}

uint64_t driver__plan_entry_held(struct driver_plans *s,
				 const struct driver_plan *p, uint64_t i)
{
	struct driver_mount *m = s->m;
	struct tree_node *n;
	uint32_t blob = TREE_NO_BLOB;

	pthread_mutex_lock(&m->ns->mu);
	n = tree_ns_get(m->ns, p->nodes[i]);
	if (n != NULL)
		blob = n->blob;
	pthread_mutex_unlock(&m->ns->mu);
	return blob == TREE_NO_BLOB ? 0 : engine_held(m->engine, blob);
}

/* Entry i is left behind unopened: what was fetched of it ahead counts
 * as pulled and not read (by this plan's loader). Caller holds s->mu. */
static void plan_unread(struct driver_plans *s, struct driver_plan *p,
			uint64_t i)
{
	uint64_t held = i < p->next ? driver__plan_entry_held(s, p, i) : 0;

	if (held > 0) {
		p->unread_files++;
		p->unread_bytes += held;
	}
}

/* Plan p is replaced or cleared: what it fetched ahead of its cursor
 * and its loader never opened is counted and logged. Caller holds
 * s->mu. */
static void plan_gone(struct driver_plans *s, struct driver_plan *p)
{
	for (uint64_t i = p->cursor; i < p->next && i < p->n; i++)
		if (!is_done(p, i))
			plan_unread(s, p, i);
	if (p->unread_files > 0)
		obs_log(p->listing ? FS_LOG_DEBUG : FS_LOG_INFO,
			"plan '%s' goes at entry %" PRIu64 " of %" PRIu64
			": %" PRIu64 " files fetched ahead (%" PRIu64
			" bytes) were never opened by it",
			p->name, p->cursor, p->n, p->unread_files,
			p->unread_bytes);
}

int driver__plan_install(struct driver_plans *s, struct driver_plan *p,
			 char *err, size_t errcap)
{
	struct driver_plan_hint *closing = NULL;
	struct driver_plan *old = NULL;
	uint32_t nclosing = 0, slot = DRIVER_PLANS_MAX;
	int rc = 0;

	closing = calloc(DRIVER_PLAN_HINTS, sizeof(*closing));
	if (closing == NULL)
		return -ENOMEM;
	pthread_mutex_lock(&s->mu);
	for (uint32_t k = 0; k < DRIVER_PLANS_MAX; k++) {
		struct driver_plan *q = s->plans[k];

		if (q != NULL && strcmp(q->name, p->name) == 0) {
			slot = k;
			break;
		}
		if (q == NULL && slot == DRIVER_PLANS_MAX)
			slot = k;
	}
	if (slot == DRIVER_PLANS_MAX) {
		snprintf(err, errcap, "%u plans already on this mount",
			 DRIVER_PLANS_MAX);
		rc = -ENOSPC;
	} else if (s->plans[slot] == NULL && p->n == 0) {
		snprintf(err, errcap, "no plan '%s' on this mount", p->name);
		rc = -ENOENT;
	} else if (s->plans[slot] != NULL && s->plans[slot]->uid != p->uid) {
		snprintf(err, errcap,
			 "plan '%s' was set by uid %u: only that user may "
			 "replace or clear it",
			 p->name, (unsigned)s->plans[slot]->uid);
		rc = -EPERM;
	} else {
		old = s->plans[slot];
		if (old != NULL) {
			plan_unhint(s, old, closing, &nclosing);
			plan_gone(s, old);
		}
		/* An install of no entries is a clear. */
		s->plans[slot] = p->n ? p : NULL;
		if (p->n)
			start_workers(s);
		pthread_cond_broadcast(&s->cv);
	}
	pthread_mutex_unlock(&s->mu);
	close_hints(s, closing, nclosing);
	free(closing);
	if (rc == 0) {
		driver__plan_free(old);
		if (p->n == 0)
			driver__plan_free(p);
	}
	return rc;
}

uint64_t driver__plan_ahead(const struct driver_plans *s,
			    const struct driver_plan *p)
{
	double want = p->rate * (double)s->lead_ns / (double)SEC;

	if (want < DRIVER_PLAN_AHEAD_MIN)
		return DRIVER_PLAN_AHEAD_MIN;
	if (p->listing && want > DRIVER_LIST_AHEAD_MAX)
		return DRIVER_LIST_AHEAD_MAX;
	if (want > DRIVER_PLAN_AHEAD_MAX)
		return DRIVER_PLAN_AHEAD_MAX;
	return (uint64_t)want;
}

bool driver__plan_paused(const struct driver_plan *p, uint64_t now)
{
	uint64_t gap = DRIVER_PLAN_PAUSE_NS;

	if (p->rate > 0 && (double)SEC * 4 / p->rate > (double)gap)
		gap = (uint64_t)((double)SEC * 4 / p->rate);
	/* A listing plan starts at an open (last_ns): its process pauses as
	 * a loader does. */
	return (p->opened > 0 || p->listing) && now - p->last_ns > gap;
}

/* An open matched entry i of p at now: counted, the cursor moved past
 * the entries opened, and past those left more than a window behind
 * (a worker that skipped a file must not hold the window back). */
static void plan_consume(struct driver_plans *s, struct driver_plan *p,
			 uint64_t i, uint64_t now)
{
	uint64_t ahead = driver__plan_ahead(s, p);

	p->done[i / 8] |= (uint8_t)(1u << (i % 8));
	p->opened++;
	p->misses = 0;
	if (p->abandoned)
		obs_log(p->listing ? FS_LOG_DEBUG : FS_LOG_INFO,
			"plan '%s': followed again", p->name);
	p->abandoned = false;
	p->last_ns = now;
	while (p->cursor < p->n &&
	       (is_done(p, p->cursor) || p->cursor + ahead < i)) {
		if (!is_done(p, p->cursor)) {
			p->skipped++;
			plan_unread(s, p, p->cursor);
		}
		p->cursor++;
	}
	if (p->next < p->cursor)
		p->next = p->cursor;
	/* Consumption over a second, pauses included. */
	p->rate_n++;
	if (p->rate_t0 == 0) {
		p->rate_t0 = now;
	} else if (now - p->rate_t0 >= SEC ||
		   (p->rate == 0 && now - p->rate_t0 >= SEC / 4)) {
		/* The first sample is shorter: until it closes the window
		 * is DRIVER_PLAN_AHEAD_MIN files, which a fast loader
		 * outruns. */
		double r = (double)p->rate_n * (double)SEC /
			   (double)(now - p->rate_t0);

		p->rate = p->rate > 0 ? (p->rate + r) / 2 : r;
		p->rate_t0 = now;
		p->rate_n = 0;
	}
}

/* Whether p's window [cursor, next + slack) holds node, not yet opened;
 * its index in *at. */
static bool plan_find(const struct driver_plans *s, const struct driver_plan *p,
		      uint32_t node, uint64_t *at)
{
	uint64_t end =
		p->next + driver__plan_ahead(s, p) / 2 + DRIVER_PLAN_AHEAD_MIN;

	if (end > p->n)
		end = p->n;
	for (uint64_t i = p->cursor; i < end; i++)
		if (p->nodes[i] == node && !is_done(p, i)) {
			*at = i;
			return true;
		}
	return false;
}

/* An open by p's process (any process for a set plan) that p's window
 * does not hold: a set plan is abandoned once such opens outnumber its
 * window twice over with no open that matched, a listing plan after
 * DRIVER_LIST_MISSES (its process left the directory, or the order); a
 * plan whose cursor reached its end is done, not abandoned. Caller holds
 * s->mu. */
static void plan_missed(struct driver_plans *s, struct driver_plan *p,
			struct driver_plan_hint **many, uint32_t *nmany)
{
	uint64_t limit = p->listing ? DRIVER_LIST_MISSES
				    : 2 * driver__plan_ahead(s, p) +
					      DRIVER_PLAN_AHEAD_MIN;

	p->misses++;
	if (p->abandoned || p->cursor >= p->n || p->misses <= limit)
		return;
	p->abandoned = true;
	obs_log(p->listing ? FS_LOG_DEBUG : FS_LOG_WARN,
		"plan '%s': abandoned at entry %" PRIu64 " of %" PRIu64
		" (%" PRIu64 " opens matched none of it): read-ahead "
		"along it stops",
		p->name, p->cursor, p->n, p->misses);
	if (*many == NULL)
		*many = calloc(DRIVER_PLAN_HINTS, sizeof(**many));
	if (*many != NULL)
		plan_unhint(s, p, *many, nmany);
}

void driver__plan_list_put(struct driver_plans *s, struct driver_plan *p,
			   struct driver_plan_hint *closing, uint32_t *nclosing)
{
	uint32_t slot = DRIVER_PLANS_MAX, best = 4;
	uint64_t oldest = UINT64_MAX;
	struct driver_plan *old;

	for (uint32_t k = DRIVER_PLANS_MAX; k < DRIVER_PLAN_SLOTS; k++) {
		const struct driver_plan *q = s->plans[k];
		uint32_t rank = 3;

		if (q == NULL)
			rank = 1;
		else if (q->pid == p->pid && q->dir == p->dir)
			rank = 0;
		else if (q->abandoned || q->cursor >= q->n)
			rank = 2;
		if (rank < best ||
		    (rank == 3 && best == 3 && q->last_ns < oldest)) {
			best = rank;
			slot = k;
			oldest = q != NULL ? q->last_ns : 0;
		}
	}
	old = s->plans[slot];
	if (old != NULL) {
		plan_unhint(s, old, closing, nclosing);
		plan_gone(s, old);
		driver__plan_free(old);
	}
	s->plans[slot] = p;
	start_workers(s);
	pthread_cond_broadcast(&s->cv);
}

void driver__plan_opened(struct driver_plans *s, uint32_t node, pid_t pid,
			 uid_t uid)
{
	struct driver_plan_hint closing[DRIVER_PLAN_SLOTS + 1];
	struct driver_plan_hint *many = NULL;
	uint32_t nclosing = 0, nmany = 0;
	uint64_t now = fs__now_ns();
	bool matched = false;

	if (s == NULL)
		return;
	pthread_mutex_lock(&s->mu);
	for (uint32_t k = 0; k < DRIVER_PLAN_SLOTS; k++) {
		struct driver_plan *p = s->plans[k];
		uint64_t at;

		/* A listing plan is its process's: another's opens neither
		 * move it nor miss it. */
		if (p == NULL || (p->listing && p->pid != pid))
			continue;
		if (plan_find(s, p, node, &at)) {
			plan_consume(s, p, at, now);
			matched = true;
			continue;
		}
		/* Another plan's file, or another program's. */
		plan_missed(s, p, &many, &nmany);
	}
	/* An open no plan expected may be one of a directory read in its
	 * listing's order. */
	if (!matched && s->listahead)
		driver__list_opened(s, node, pid, uid, now, &many, &nmany);
	/* The application's reader takes over the file: the plan's reader
	 * goes (what it asked is on the wire or held). */
	for (uint32_t k = 0; k < DRIVER_PLAN_HINTS; k++) {
		struct driver_plan_hint *h = &s->hints[k];

		if (h->state == DRIVER_HINT_OPEN && h->node == node &&
		    nclosing < DRIVER_PLAN_SLOTS + 1)
			hint_drop(s, h, closing, &nclosing);
	}
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	close_hints(s, closing, nclosing);
	close_hints(s, many, nmany);
	free(many);
}

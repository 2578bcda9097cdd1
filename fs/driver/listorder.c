/* listorder: read-ahead without a plan, for a process that opens the files
 * of one directory in the order its listing gives them (tar, cp -r, a
 * loader reading shards by name, or each of its n workers every n-th
 * file). Each process's opens in a directory are a run; once
 * DRIVER_LIST_RUN in a row follow the listing a stride apart, the rest of
 * the directory's files at that stride become a listing plan of that
 * process: fetched ahead as a set plan's are (paced by its opens, paused
 * when it pauses), and abandoned when its opens leave the order. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "fs/driver/driver_int.h"
#include "fs/driver/plan_int.h"
#include "fs/obs/obs.h"
#include "fs/tree/tree.h"

/* Node's index among d's children, or UINT32_MAX. Children are kept in
 * the order they were added and nodes are numbered as they are made, so
 * a directory's children are in increasing order of their numbers: a
 * binary search, not a scan, whatever the directory's size (a reader at
 * random pays this alone). Caller holds ns->mu. */
static uint32_t child_pos(const struct tree_node *d, uint32_t node)
{
	uint32_t lo = 0, hi = d->dir->nchildren;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (d->dir->children[mid] == node)
			return mid;
		if (d->dir->children[mid] < node)
			lo = mid + 1;
		else
			hi = mid;
	}
	return UINT32_MAX;
}

/* Files among d's children in (a, b], or 0 when b is not after a or
 * more than DRIVER_LIST_SCAN entries on. Caller holds ns->mu. */
static uint32_t files_between(struct tree_ns *ns, const struct tree_node *d,
			      uint32_t a, uint32_t b)
{
	uint32_t n = 0;

	if (b <= a || b - a > DRIVER_LIST_SCAN)
		return 0;
	for (uint32_t i = a + 1; i <= b; i++) {
		const struct tree_node *c =
			tree_ns_get(ns, d->dir->children[i]);

		n += !c->is_dir && !c->gone;
	}
	return n;
}

/* Moves run r to the open at files `step` past its last (0: not after
 * it): the second open sets the stride (1, or a worker's n of up to
 * DRIVER_LIST_STRIDE), the next ones continue the run at that stride (a
 * stride of 1 skipping up to DRIVER_LIST_GAP files), any other starts
 * it again. */
static void run_step(struct driver_list_run *r, uint32_t step)
{
	if (step != 0 && r->run == 1 && step <= DRIVER_LIST_STRIDE) {
		r->stride = step;
		r->run = 2;
	} else if (step != 0 && r->run >= 2 &&
		   (step == r->stride ||
		    (r->stride == 1 && step <= DRIVER_LIST_GAP))) {
		r->run++;
	} else {
		r->run = 1;
		r->stride = 0;
	}
}

/* The run of process pid in directory dir, or the slot to start it in: a
 * free one, else the one opened least lately. Caller holds s->mu. */
static struct driver_list_run *run_of(struct driver_plans *s, pid_t pid,
				      uint32_t dir, bool *found)
{
	struct driver_list_run *pick = &s->runs[0];

	*found = false;
	for (uint32_t k = 0; k < DRIVER_LIST_RUNS; k++) {
		struct driver_list_run *r = &s->runs[k];

		if (r->pid == pid && r->dir == dir) {
			*found = true;
			return r;
		}
		if (pick->pid != 0 &&
		    (r->pid == 0 || r->last_ns < pick->last_ns))
			pick = r;
	}
	return pick;
}

/* A listing plan of every stride-th of d's files past index pos, for
 * pid; NULL when there are none (or no memory). Caller holds s->mu and
 * ns->mu. */
static struct driver_plan *list_plan(struct tree_ns *ns,
				     const struct tree_node *d, uint32_t dir,
				     uint32_t pos, uint32_t stride, pid_t pid,
				     uid_t uid, uint64_t now)
{
	struct driver_plan *p = calloc(1, sizeof(*p));
	uint32_t end = d->dir->nchildren;
	uint64_t k = 0, most;

	if (p == NULL)
		return NULL;
	/* At most DRIVER_LIST_ENTRIES_MAX files, and as many children looked
	 * at as they take: the locks are held, and a directory of millions
	 * must not be walked at each plan's start. Past the plan's end the
	 * process's opens start another. */
	most = (uint64_t)pos + 1 + (uint64_t)DRIVER_LIST_ENTRIES_MAX * stride +
	       DRIVER_LIST_SCAN;
	if (most < end)
		end = (uint32_t)most;
	p->nodes = malloc(DRIVER_LIST_ENTRIES_MAX * sizeof(*p->nodes));
	p->done = calloc(DRIVER_LIST_ENTRIES_MAX / 8 + 1, 1);
	if (p->nodes == NULL || p->done == NULL) {
		driver__plan_free(p);
		return NULL;
	}
	for (uint32_t i = pos + 1; i < end && p->n < DRIVER_LIST_ENTRIES_MAX;
	     i++) {
		const struct tree_node *c =
			tree_ns_get(ns, d->dir->children[i]);

		if (!c->is_dir && !c->gone && ++k % stride == 0)
			p->nodes[p->n++] = d->dir->children[i];
	}
	if (p->n == 0) {
		driver__plan_free(p);
		return NULL;
	}
	p->cap = p->n;
	snprintf(p->name, sizeof(p->name), "listing-%ld", (long)pid);
	p->uid = uid;
	p->listing = true;
	p->pid = pid;
	p->dir = dir;
	p->set_ns = p->last_ns = now;
	return p;
}

void driver__list_opened(struct driver_plans *s, uint32_t node, pid_t pid,
			 uid_t uid, uint64_t now,
			 struct driver_plan_hint **closing, uint32_t *nclosing)
{
	struct tree_ns *ns = s->m->ns;
	struct driver_list_run *r;
	struct driver_plan *p = NULL;
	const struct tree_node *n, *d;
	uint32_t dir, pos;
	bool found;

	pthread_mutex_lock(&ns->mu);
	n = tree_ns_get(ns, node);
	d = n != NULL ? tree_ns_get(ns, n->parent) : NULL;
	dir = n != NULL ? n->parent : TREE_NO_NODE;
	pos = d != NULL && d->is_dir ? child_pos(d, node) : UINT32_MAX;
	if (pos == UINT32_MAX || pid <= 0) {
		pthread_mutex_unlock(&ns->mu);
		return;
	}
	r = run_of(s, pid, dir, &found);
	/* The same file again changes nothing. */
	if (found && pos == r->pos) {
		r->last_ns = now;
		pthread_mutex_unlock(&ns->mu);
		return;
	}
	if (!found) {
		r->pid = pid;
		r->dir = dir;
		r->run = 0;
	}
	run_step(r, found ? files_between(ns, d, r->pos, pos) : 0);
	r->pos = pos;
	r->last_ns = now;
	if (r->run >= DRIVER_LIST_RUN) {
		/* Its next opens are the plan's: a run starts again only
		 * once they leave it. */
		r->run = 0;
		if (*closing == NULL)
			*closing = calloc(DRIVER_PLAN_HINTS, sizeof(**closing));
		if (*closing != NULL)
			p = list_plan(ns, d, dir, pos, r->stride, pid, uid,
				      now);
	}
	pthread_mutex_unlock(&ns->mu);
	if (p == NULL)
		return;
	obs_log(FS_LOG_DEBUG,
		"plan '%s': process %ld opens directory node %" PRIu32
		" in its listing's order, a file in %" PRIu32
		": its next %" PRIu64 " files are fetched ahead",
		p->name, (long)pid, dir, r->stride, p->n);
	driver__plan_list_put(s, p, *closing, nclosing);
}

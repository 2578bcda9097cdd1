/* sizes: the sizes a directory index did not give (Apache's "1.2M", a
 * bare listing), learned by probing the directory's files in parallel as
 * soon as it is listed. `ls -l` stats the files one after the other; each
 * stat of a file whose probe is under way waits for that probe
 * (driver__file_ready), so N such files cost about N round trips over the
 * probers rather than N in a row. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "fs/driver/driver_int.h"
#include "fs/obs/obs.h"
#include "fs/tree/tree.h"

struct driver_sizes {
	struct driver_mount *m;
	pthread_mutex_t mu;
	pthread_cond_t cv; /* ids queued, or stop */
	uint32_t *q;	   /* a FIFO of node ids: q[head .. head + n) */
	size_t head, n, cap;
	pthread_t *threads; /* started when the first ids are queued */
	uint32_t nthreads, max_threads;
	bool stop;
};

int driver__sizes_new(struct driver_mount *m, uint32_t probers,
		      struct driver_sizes **out)
{
	struct driver_sizes *s = calloc(1, sizeof(*s));

	*out = NULL;
	if (s == NULL)
		return -ENOMEM;
	s->threads = calloc(probers ? probers : 1, sizeof(*s->threads));
	if (s->threads == NULL) {
		free(s);
		return -ENOMEM;
	}
	s->m = m;
	s->max_threads = probers ? probers : 1;
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->cv, NULL);
	*out = s;
	return 0;
}

/* The next queued id, waiting for one; false once the prober is to stop.
 * Its probes, one after another, share the thread's connections
 * (fetch_thread_keep), which are closed while it waits. */
static bool next_id(struct driver_sizes *s, uint32_t *id)
{
	bool got = false;

	pthread_mutex_lock(&s->mu);
	if (!s->stop && s->n == 0) {
		pthread_mutex_unlock(&s->mu);
		fetch_thread_release();
		pthread_mutex_lock(&s->mu);
	}
	while (!s->stop && s->n == 0)
		pthread_cond_wait(&s->cv, &s->mu);
	if (!s->stop) {
		*id = s->q[s->head];
		s->head++;
		s->n--;
		got = true;
	}
	pthread_mutex_unlock(&s->mu);
	if (got)
		fetch_thread_keep();
	else
		fetch_thread_release();
	return got;
}

static void *prober(void *arg)
{
	struct driver_sizes *s = arg;
	struct driver_mount *m = s->m;
	uint32_t id;

	while (next_id(s, &id)) {
		struct tree_node *n;
		bool need;
		int rc = 0;

		pthread_mutex_lock(&m->ns->mu);
		n = tree_ns_get(m->ns, id);
		need = !n->has_size && !n->probing;
		pthread_mutex_unlock(&m->ns->mu);
		/* A failure is logged by the probe, and is the stat's to
		 * report when it asks. */
		if (need)
			rc = driver__file_ready(
				m, id, fs__now_ns() + m->read_timeout_ns);
		/* Queued until its probe ended: a listing meanwhile does not
		 * queue it again. A file whose probe failed is left to the
		 * stats: an index that lists it again must not have it
		 * probed again for every listing. */
		pthread_mutex_lock(&m->ns->mu);
		n->size_queued = false;
		if (rc != 0 && !atomic_load(&m->ended))
			n->size_failed = true;
		pthread_mutex_unlock(&m->ns->mu);
	}
	return NULL;
}

/* Room for k more ids at the end of the FIFO (compacting it first). */
static int reserve(struct driver_sizes *s, size_t k)
{
	uint32_t *q;
	size_t cap;

	if (s->head > 0) {
		memmove(s->q, s->q + s->head, s->n * sizeof(*s->q));
		s->head = 0;
	}
	if (s->n + k <= s->cap)
		return 0;
	cap = s->cap ? s->cap : 256;
	while (cap < s->n + k)
		cap *= 2;
	q = realloc(s->q, cap * sizeof(*q));
	if (q == NULL)
		return -ENOMEM;
	s->q = q;
	s->cap = cap;
	return 0;
}

/* The files of directory d that have no size, no probe under way or
 * queued, and no failed one: marked as queued. */
static int unsized(struct tree_ns *ns, uint32_t d, uint32_t **ids, size_t *n)
{
	const struct tree_node *dn;
	const struct tree_dir *dir;
	uint32_t *v;

	*ids = NULL;
	*n = 0;
	pthread_mutex_lock(&ns->mu);
	dn = tree_ns_get(ns, d);
	dir = dn != NULL && dn->is_dir ? dn->dir : NULL;
	v = dir != NULL && dir->nchildren > 0
		    ? malloc(dir->nchildren * sizeof(*v))
		    : NULL;
	for (uint32_t i = 0; v != NULL && i < dir->nchildren; i++) {
		const struct tree_node *c = tree_ns_get(ns, dir->children[i]);

		if (c->is_dir || c->gone || c->has_size || c->probing ||
		    c->size_queued || c->size_failed)
			continue;
		tree_ns_get(ns, dir->children[i])->size_queued = true;
		v[(*n)++] = dir->children[i];
	}
	pthread_mutex_unlock(&ns->mu);
	if (dir != NULL && dir->nchildren > 0 && v == NULL)
		return -ENOMEM;
	*ids = v;
	return 0;
}

/* The n ids unsized() marked that were not queued after all. */
static void unmark(struct tree_ns *ns, const uint32_t *ids, size_t n)
{
	pthread_mutex_lock(&ns->mu);
	for (size_t i = 0; i < n; i++)
		tree_ns_get(ns, ids[i])->size_queued = false;
	pthread_mutex_unlock(&ns->mu);
}

int driver__sizes_queue(struct driver_sizes *s, uint32_t d)
{
	uint32_t *ids;
	size_t n;
	bool served = false;
	int rc = unsized(s->m->ns, d, &ids, &n);

	if (rc != 0 || n == 0) {
		free(ids);
		return rc;
	}
	pthread_mutex_lock(&s->mu);
	rc = s->stop ? -ECANCELED : reserve(s, n);
	if (rc == 0) {
		memcpy(s->q + s->n, ids, n * sizeof(*ids));
		s->n += n;
		/* A prober a queued id, up to the bound. */
		while (s->nthreads < s->max_threads && s->nthreads < s->n) {
			rc = -pthread_create(&s->threads[s->nthreads], NULL,
					     prober, s);
			if (rc != 0)
				break;
			s->nthreads++;
		}
		/* With one prober at least, the queue is served. */
		served = s->nthreads > 0;
		if (served)
			rc = 0;
		pthread_cond_broadcast(&s->cv);
	}
	pthread_mutex_unlock(&s->mu);
	/* Not to be probed after all: the stats will, or the next listing
	 * queues them again. */
	if (!served)
		unmark(s->m->ns, ids, n);
	free(ids);
	return rc;
}

void driver__sizes_free(struct driver_sizes *s)
{
	if (s == NULL)
		return;
	pthread_mutex_lock(&s->mu);
	s->stop = true;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	/* A prober inside a probe stops within about a second of the
	 * session's end (driver__mount_bound), by read_timeout at worst. */
	for (uint32_t i = 0; i < s->nthreads; i++)
		pthread_join(s->threads[i], NULL);
	pthread_cond_destroy(&s->cv);
	pthread_mutex_destroy(&s->mu);
	free(s->threads);
	free(s->q);
	free(s);
}

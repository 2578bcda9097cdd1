/* share: how lanes are shared between readers: the lanes each reader
 * holds, its share of its origin's, and which lane a waiting read takes
 * when none is idle (read-ahead that yields, or a lane handed over from
 * a reader holding more than its share, of any file of the origin). */
#include "pacing/pace.h"
#include "pacing/pace_int.h"

/* Counts the lanes serving each reader (nl_tmp, nd_tmp for its waiting
 * reads; lanes being handed over serve it no more), the readers reading
 * ahead (nactive) and those with work: a lane or a waiting read (nwork). */
void pace__count_lanes(struct pace *p)
{
	uint32_t nactive = 0, nwork = 0;

	for (uint32_t i = 0; i < p->n_readers; i++)
		p->readers[i].nl_tmp = p->readers[i].nd_tmp = 0;
	for (uint32_t i = 0; i < p->cfg.max_lanes; i++) {
		const struct lane *l = &p->lanes[i];

		if (!pace__lane_open(l) || l->handover ||
		    l->reader == PACE_NONE || l->reader >= p->n_readers)
			continue;
		p->readers[l->reader].nl_tmp++;
		if (pace__lane_demand(l))
			p->readers[l->reader].nd_tmp++;
	}
	for (uint32_t i = 0; i < p->n_waits; i++) {
		const struct wait *w = &p->waits[i];

		/* A waiting read counts its reader as one with work. */
		if (w->used && w->reader != PACE_NONE &&
		    p->readers[w->reader].nl_tmp == 0)
			p->readers[w->reader].nl_tmp = UINT32_MAX;
	}
	for (uint32_t i = 0; i < p->n_readers; i++) {
		struct reader *r = &p->readers[i];

		if (r->used && r->seen && r->w > 0)
			nactive++;
		if (r->nl_tmp != 0)
			nwork++;
		if (r->nl_tmp == UINT32_MAX)
			r->nl_tmp = 0;
	}
	p->nactive = nactive;
	p->nwork = nwork;
}

/* The lanes one origin may have: the mount's and an origin's budget,
 * whichever is smaller; readers' shares are counted against it. */
static uint32_t lane_budget(const struct pace *p)
{
	return p->cfg.max_lanes < p->cfg.lanes_per_source
		       ? p->cfg.max_lanes
		       : p->cfg.lanes_per_source;
}

/* Lanes each reader with work may have: the budget (of the mount, and of
 * an origin) shared among them. */
static uint32_t lane_share(const struct pace *p)
{
	uint32_t n = p->nwork ? p->nwork : 1;

	return (lane_budget(p) + n - 1) / n;
}

/* Lane l's end lets a request for blob start when no source of the blob
 * takes one now: l runs on a source of the same group as one of the
 * blob's (the files of one origin share its lanes), and that source is
 * held back by nothing but the lanes. */
static bool frees_for(struct pace *p, const struct lane *l, uint32_t blob)
{
	struct source *s = &p->sources[l->source];
	struct group *g = pace__group(p, s);
	uint32_t src;

	s->lanes--;
	g->lanes--;
	src = pace__pick_source(p, blob, true);
	s->lanes++;
	g->lanes++;
	return src != PACE_NONE;
}

/* The lane to give a waiting read w when none is idle, among read-ahead
 * lanes not serving bytes of w and not being handed over already. For a
 * read at a cold position (`urgent`), which must overtake read-ahead, the
 * lane whose range lies furthest ahead of its reader's cursor, to be
 * cancelled. A sequential reader's read loses less by waiting a round
 * trip than other readers lose by bytes pulled twice: while its reader
 * has a lane, whose bytes keep coming, it takes none and waits for the
 * next lane to end; a reader with none takes one of a reader holding
 * more than its share of the lanes (or of no reader), else the lane of
 * another reader that ends soonest, handed over (pace__hand_over), not
 * cancelled. With the blob's sources at their lane caps (`capped`), only
 * a lane of the same origin frees one. */
static struct lane *yield_victim(struct pace *p, const struct wait *w,
				 bool capped, bool urgent)
{
	const struct reader *wr = pace__reader_get(p, w->reader);
	bool has_lane = wr && wr->nl_tmp > 0;
	struct lane *best = NULL;
	double best_key = 0;
	uint32_t share = lane_share(p);
	int best_rank = 0;

	for (uint32_t i = 0; i < p->cfg.max_lanes; i++) {
		struct lane *l = &p->lanes[i];
		bool own = l->reader != PACE_NONE && l->reader == w->reader;
		double key;
		int rank;

		if (!pace__lane_open(l) || pace__lane_demand(l) ||
		    l->handover || (capped && !frees_for(p, l, w->blob)))
			continue;
		if (l->blob == w->blob && l->frontier < w->end &&
		    l->end > w->off)
			continue;
		if (pace__caps_stream(p->sources[l->source].caps))
			continue; /* a whole-object stream cannot restart */
		if (l->reader == PACE_NONE)
			key = 1e30;
		else if (l->frontier > p->readers[l->reader].cursor)
			key = (double)(l->frontier -
				       p->readers[l->reader].cursor);
		else
			key = 0;
		if (urgent) {
			rank = 0;
		} else if (own || has_lane) {
			continue;
		} else if (l->reader == PACE_NONE ||
			   p->readers[l->reader].nl_tmp > share) {
			rank = 2;
		} else {
			/* Soonest to end first. */
			rank = 1;
			key = -(double)(l->end - l->frontier) /
			      (double)pace__max64(l->rate, 1);
		}
		if (!best || rank > best_rank ||
		    (rank == best_rank && key > best_key)) {
			best = l;
			best_key = key;
			best_rank = rank;
		}
	}
	return best;
}

/* Reads are shared between readers as lanes: when no read-ahead lane
 * can be given to waiting read w, a lane of the reader holding the most
 * lanes (another reader's waiting reads included), if that is more than
 * its share of the origin's lanes and at least two more than w's reader
 * holds with the `taken` already promised to it, so that lanes never go
 * back and forth; never a reader's last lane, so that each keeps reading.
 * Of that reader's lanes, the one whose bytes it needs last (the highest
 * start). Returns NULL when no reader holds that many. */
static struct lane *fair_victim(struct pace *p, const struct wait *w,
				bool capped, uint32_t taken)
{
	const struct reader *wr = pace__reader_get(p, w->reader);
	uint32_t mine = (wr ? wr->nl_tmp : 0) + taken, most = 0;
	uint64_t budget = lane_budget(p), nwork = p->nwork ? p->nwork : 1;
	struct lane *best = NULL;

	for (uint32_t i = 0; i < p->cfg.max_lanes; i++) {
		struct lane *l = &p->lanes[i];
		const struct reader *r;

		if (!pace__lane_open(l) || l->handover ||
		    l->reader == w->reader ||
		    (capped && !frees_for(p, l, w->blob)))
			continue;
		r = pace__reader_get(p, l->reader);
		if (!r || r->nl_tmp < 2 || r->nl_tmp < mine + 2 ||
		    (uint64_t)r->nl_tmp * nwork <= budget)
			continue;
		if (l->blob == w->blob && l->frontier < w->end &&
		    l->end > w->off)
			continue;
		if (pace__caps_stream(p->sources[l->source].caps))
			continue; /* a whole-object stream cannot restart */
		if (!best || r->nl_tmp > most ||
		    (r->nl_tmp == most && l->reader == best->reader &&
		     l->start > best->start)) {
			best = l;
			most = r->nl_tmp;
		}
	}
	return best;
}

/* Another reader of the same origin has a read that waits on bytes no
 * lane owns, and w's reader holds its share of the origin's lanes for its
 * own waiting reads already (with `taken` more promised to it): w takes no
 * more lanes in this poll, idle or yielded (its first is never refused),
 * so that one reader's large read split over
 * every lane does not leave the others to take them back one by one. */
bool pace__split_capped(struct pace *p, const struct wait *w, uint32_t taken)
{
	const struct reader *r = pace__reader_get(p, w->reader);
	const struct group *g = pace__blob_group(p, w->blob);
	uint64_t held = (r ? r->nd_tmp : 0) + (uint64_t)taken;
	uint32_t others;

	if (!r || !g || held == 0)
		return false;
	others = g->need_tmp - (r->need_tmp && g->need_tmp ? 1 : 0);
	return others > 0 && held * (others + 1) >= lane_budget(p);
}

/* Waiting read w has bytes no lane owns. */
static bool wait_unowned(struct pace *p, const struct wait *w)
{
	uint64_t ge, reach = pace__wait_reach(p, w);

	return pace__first_free(p, w->blob,
				pace__align_down(w->off, p->cfg.align), reach,
				&ge) < reach;
}

bool pace__reader_unowned(struct pace *p, uint32_t reader)
{
	for (uint32_t i = 0; i < p->n_waits; i++)
		if (p->waits[i].used && p->waits[i].reader == reader &&
		    wait_unowned(p, &p->waits[i]))
			return true;
	return false;
}

/* Marks the readers with a waiting read on bytes no lane owns and counts
 * them per group (pace__split_capped), and keys each wait by its reader's
 * lanes (poll.c serves the waits of readers holding fewer first). */
void pace__count_needs(struct pace *p)
{
	for (uint32_t i = 0; i < p->n_readers; i++)
		p->readers[i].need_tmp = false;
	for (uint32_t i = 0; i < p->n_waits; i++) {
		struct wait *w = &p->waits[i];
		struct reader *r;
		struct group *g;

		if (!w->used)
			continue;
		r = pace__reader_get(p, w->reader);
		w->key_tmp = r ? r->nl_tmp : 0;
		g = pace__blob_group(p, w->blob);
		if (g)
			g->need_tmp = 0;
		if (!r || r->need_tmp)
			continue;
		r->need_tmp = wait_unowned(p, w);
	}
	for (uint32_t i = 0; i < p->n_readers; i++) {
		struct reader *r = &p->readers[i];
		struct group *g;

		if (!r->used || !r->need_tmp)
			continue;
		g = pace__blob_group(p, r->blob);
		if (g)
			g->need_tmp++;
	}
}

/* No lane is idle for waiting read w (x its first unowned byte), or its
 * sources are at their lane caps (`capped`: then only a lane of the same
 * origin frees one for the read). A read at a cold position takes as
 * many as its split needs, at once; a sequential reader's read has one
 * handed over. Read-ahead yields first; then a reader holding more than
 * its share hands one over (fair_victim). Returns false when the action
 * array is full. */
bool pace__take_lanes(struct pace *p, struct poll *o, struct wait *w,
		      uint64_t x, bool capped, bool fair)
{
	for (uint32_t k = 0, need = pace__yields_wanted(p, w, x); k < need;
	     k++) {
		const struct reader *wr = pace__reader_get(p, w->reader);
		bool urgent = !pace__wait_sequential(p, w, wr);
		bool shared = false;
		struct lane *l;

		if (fair && pace__split_capped(p, w, k)) {
			w->capped_tmp = true;
			break;
		}
		l = yield_victim(p, w, capped, urgent);
		if (!l) {
			l = fair_victim(p, w, capped, k);
			shared = true;
		}
		if (!l)
			break;
		if (o->n == o->cap)
			return false;
		if (l->reader != PACE_NONE) {
			p->readers[l->reader].nl_tmp--;
			if (pace__lane_demand(l))
				p->readers[l->reader].nd_tmp--;
		}
		if (urgent && !shared)
			pace__lane_cancel(p, l, false, &o->acts[o->n++]);
		else
			o->n += (size_t)pace__hand_over(p, l, &o->acts[o->n]);
	}
	return true;
}

/* ranges: a fixed-capacity set of byte ranges (sorted disjoint intervals),
 * the scheduler's record of held bytes. */
#include "pacing/pace_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int pace__ranges_init(struct pace__ranges *r, uint32_t cap)
{
	memset(r, 0, sizeof(*r));
	if (cap == 0)
		cap = 1;
	r->v = calloc(cap, sizeof(*r->v));
	if (!r->v)
		return -ENOMEM;
	r->cap = cap;
	return 0;
}

void pace__ranges_fini(struct pace__ranges *r)
{
	free(r->v);
	memset(r, 0, sizeof(*r));
}

/* Index of the first interval whose end is > off (or >= off when touch),
 * i.e. the first one that may contain or follow off. */
static uint32_t first_ending_after(const struct pace__ranges *r, uint64_t off,
				   bool touch)
{
	uint32_t lo = 0, hi = r->n;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		bool after = touch ? r->v[mid].e >= off : r->v[mid].e > off;

		if (after)
			hi = mid;
		else
			lo = mid + 1;
	}
	return lo;
}

int pace__ranges_add(struct pace__ranges *r, uint64_t s, uint64_t e,
		     uint64_t *added)
{
	uint32_t i, j;
	uint64_t inside = 0, ns, ne;

	if (added)
		*added = 0;
	if (s >= e)
		return 0;
	i = first_ending_after(r, s, true);
	j = i;
	while (j < r->n && r->v[j].s <= e) {
		inside += r->v[j].e - r->v[j].s;
		j++;
	}
	if (i == j) {
		if (r->n == r->cap)
			return -ENOSPC;
		memmove(&r->v[i + 1], &r->v[i], (r->n - i) * sizeof(*r->v));
		r->v[i].s = s;
		r->v[i].e = e;
		r->n++;
		r->total += e - s;
		if (added)
			*added = e - s;
		return 0;
	}
	ns = r->v[i].s < s ? r->v[i].s : s;
	ne = r->v[j - 1].e > e ? r->v[j - 1].e : e;
	r->v[i].s = ns;
	r->v[i].e = ne;
	if (j - i > 1) {
		memmove(&r->v[i + 1], &r->v[j], (r->n - j) * sizeof(*r->v));
		r->n -= j - i - 1;
	}
	r->total += (ne - ns) - inside;
	if (added)
		*added = (ne - ns) - inside;
	return 0;
}

int pace__ranges_remove(struct pace__ranges *r, uint64_t s, uint64_t e,
			uint64_t *removed)
{
	uint32_t i, j, keep_i, keep_j;
	uint64_t gone = 0;

	if (removed)
		*removed = 0;
	if (s >= e)
		return 0;
	i = first_ending_after(r, s, false);
	j = i;
	while (j < r->n && r->v[j].s < e)
		j++;
	if (i == j)
		return 0;
	if (j - i == 1 && r->v[i].s < s && r->v[i].e > e) {
		if (r->n == r->cap)
			return -ENOSPC;
		memmove(&r->v[i + 1], &r->v[i], (r->n - i) * sizeof(*r->v));
		r->n++;
		r->v[i].e = s;
		r->v[i + 1].s = e;
		gone = e - s;
		goto out;
	}
	for (uint32_t k = i; k < j; k++) {
		uint64_t a = r->v[k].s > s ? r->v[k].s : s;
		uint64_t b = r->v[k].e < e ? r->v[k].e : e;

		gone += b - a;
	}
	/* Trim the partial intervals at both ends; drop the ones between. */
	keep_i = i;
	if (r->v[i].s < s) {
		r->v[i].e = s;
		keep_i = i + 1;
	}
	keep_j = j;
	if (r->v[j - 1].e > e) {
		r->v[j - 1].s = e;
		keep_j = j - 1;
	}
	if (keep_j > keep_i) {
		memmove(&r->v[keep_i], &r->v[keep_j],
			(r->n - keep_j) * sizeof(*r->v));
		r->n -= keep_j - keep_i;
	}
out:
	r->total -= gone;
	if (removed)
		*removed = gone;
	return 0;
}

bool pace__ranges_covers(const struct pace__ranges *r, uint64_t s, uint64_t e)
{
	uint32_t i;

	if (s >= e)
		return true;
	i = first_ending_after(r, s, false);
	return i < r->n && r->v[i].s <= s && r->v[i].e >= e;
}

uint64_t pace__ranges_next_missing(const struct pace__ranges *r, uint64_t off)
{
	uint32_t i = first_ending_after(r, off, false);

	if (i < r->n && r->v[i].s <= off)
		return r->v[i].e;
	return off;
}

uint64_t pace__ranges_next_present(const struct pace__ranges *r, uint64_t off)
{
	uint32_t i = first_ending_after(r, off, false);

	if (i == r->n)
		return UINT64_MAX;
	return r->v[i].s > off ? r->v[i].s : off;
}

uint64_t pace__ranges_count(const struct pace__ranges *r, uint64_t s,
			    uint64_t e)
{
	uint64_t n = 0;

	for (uint32_t i = first_ending_after(r, s, false);
	     i < r->n && r->v[i].s < e; i++) {
		uint64_t a = r->v[i].s > s ? r->v[i].s : s;
		uint64_t b = r->v[i].e < e ? r->v[i].e : e;

		n += b - a;
	}
	return n;
}

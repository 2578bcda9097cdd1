/* pace_int: internals shared inside pacing/ (the range set); no other
 * folder includes this header. */
#ifndef PACE_INT_H
#define PACE_INT_H

#include <stdbool.h>
#include <stdint.h>

/* A set of bytes as sorted, disjoint, non-touching [s, e) intervals, in an
 * array whose capacity is fixed when the set is created. */
struct pace__span {
	uint64_t s;
	uint64_t e;
};

struct pace__ranges {
	struct pace__span *v;
	uint32_t n;
	uint32_t cap;
	uint64_t total; /* bytes in the set */
};

/* Allocates room for cap intervals. Returns 0 or -ENOMEM. */
int pace__ranges_init(struct pace__ranges *r, uint32_t cap);
void pace__ranges_fini(struct pace__ranges *r);

/* Adds [s, e); writes the number of bytes that were not in the set before
 * to *added (may be NULL). Returns 0, or -ENOSPC when the set would need
 * more intervals than its capacity (the set is then unchanged). */
int pace__ranges_add(struct pace__ranges *r, uint64_t s, uint64_t e,
		     uint64_t *added);

/* Removes [s, e); writes the bytes removed to *removed (may be NULL).
 * Returns 0 or -ENOSPC (a split needing one more interval; unchanged). */
int pace__ranges_remove(struct pace__ranges *r, uint64_t s, uint64_t e,
			uint64_t *removed);

/* True when every byte of [s, e) is in the set (true for s >= e). */
bool pace__ranges_covers(const struct pace__ranges *r, uint64_t s,
			 uint64_t e);

/* The first byte >= off that is not in the set. */
uint64_t pace__ranges_next_missing(const struct pace__ranges *r,
				   uint64_t off);

/* The first byte >= off that is in the set, or UINT64_MAX. */
uint64_t pace__ranges_next_present(const struct pace__ranges *r,
				   uint64_t off);

/* Bytes of [s, e) in the set. */
uint64_t pace__ranges_count(const struct pace__ranges *r, uint64_t s,
			    uint64_t e);

#endif

/* slotstate: a slot's life as a table: its states' names, the arrows the
 * diagram in fetch_int.h draws, and fetch__slot_set, the one function
 * through which every change goes, so that a change the diagram does not
 * draw is caught where it is made. */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "fetch/fetch.h"
#include "fetch/fetch_int.h"

static const char *const slot_state_names[SLOT_NSTATES] = {
	[SLOT_IDLE] = "idle",
	[SLOT_AHEAD] = "ahead",
	[SLOT_HELD] = "held",
	[SLOT_SENT] = "sent",
	[SLOT_RECEIVING] = "receiving",
	[SLOT_AUTH_WAIT] = "waiting for credentials",
	[SLOT_REFUSED] = "refused",
	[SLOT_DRAINING] = "draining",
};

/* The diagram in fetch_int.h, one bit per arrow: slot_drawn[from] has bit
 * `to` set when it draws from -> to. */
#define SLOT_BIT(st) (1u << (st))
static const unsigned slot_drawn[SLOT_NSTATES] = {
	[SLOT_IDLE] = SLOT_BIT(SLOT_SENT) | SLOT_BIT(SLOT_REFUSED) |
		      SLOT_BIT(SLOT_AHEAD),
	[SLOT_AHEAD] =
		SLOT_BIT(SLOT_HELD) | SLOT_BIT(SLOT_SENT) | SLOT_BIT(SLOT_IDLE),
	[SLOT_HELD] = SLOT_BIT(SLOT_SENT) | SLOT_BIT(SLOT_AHEAD) |
		      SLOT_BIT(SLOT_IDLE),
	[SLOT_SENT] = SLOT_BIT(SLOT_RECEIVING) | SLOT_BIT(SLOT_AUTH_WAIT) |
		      SLOT_BIT(SLOT_DRAINING) | SLOT_BIT(SLOT_IDLE),
	[SLOT_RECEIVING] = SLOT_BIT(SLOT_SENT) | SLOT_BIT(SLOT_DRAINING) |
			   SLOT_BIT(SLOT_IDLE),
	[SLOT_AUTH_WAIT] = SLOT_BIT(SLOT_SENT) | SLOT_BIT(SLOT_IDLE),
	[SLOT_REFUSED] = SLOT_BIT(SLOT_IDLE),
	[SLOT_DRAINING] = SLOT_BIT(SLOT_IDLE),
};

bool fetch__slot_drawn(enum slot_state from, enum slot_state to)
{
	if (from >= SLOT_NSTATES || to >= SLOT_NSTATES)
		return false;
	return (slot_drawn[from] & SLOT_BIT(to)) != 0;
}

int fetch__slot_set(struct fetch_slot *s, enum slot_state to)
{
	assert(to < SLOT_NSTATES);
	if (s->state == to)
		return 0;
	if (!fetch__slot_drawn(s->state, to)) {
		/* A bug in fetch/: the slot stays where it is, which the
		 * diagram says it may. */
		fetch__log(s->f, FETCH_LOG_ERR,
			   "bug: lane %u: transfer %s -> %s is not in the "
			   "slot's diagram; refused",
			   s->id, slot_state_names[s->state],
			   slot_state_names[to]);
#ifdef PACEFS_STRICT
		fprintf(stderr,
			"pacefs: bug: lane %u: transfer %s -> %s is not in "
			"the slot's diagram\n",
			s->id, slot_state_names[s->state],
			slot_state_names[to]);
		abort();
#endif
		return -EINVAL;
	}
	fetch__log(s->f, FETCH_LOG_DEBUG, "lane %u: transfer %s -> %s", s->id,
		   slot_state_names[s->state], slot_state_names[to]);
	s->state = to;
	return 0;
}

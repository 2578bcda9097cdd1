/* plan_int.h: the read plans' state, shared by driver/plan.c (the plans
 * and their cursors), driver/planahead.c (fetching along them, their
 * status) and driver/plansock.c (the control socket that sets them). */
#ifndef FS_DRIVER_PLAN_INT_H
#define FS_DRIVER_PLAN_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct driver_mount;

#define DRIVER_PLANS_MAX 16	/* plans on one mount */
#define DRIVER_PLAN_NAME_MAX 63 /* [A-Za-z0-9._-], "default" when none */
#define DRIVER_PLAN_HINTS 128	/* plan readers open at once */
#define DRIVER_PLAN_THREADS 64	/* threads making planned files ready */
/* A plan worker that started nothing for this long closes its kept
 * connections (fetch_thread_release). */
#define DRIVER_PLAN_KEEP_NS 1000000000ull
#define DRIVER_PLAN_AHEAD_MIN 16       /* files ahead before a rate is known */
#define DRIVER_PLAN_AHEAD_MAX 4096     /* files ahead at most */
#define DRIVER_PLAN_FIRST (8ull << 20) /* a large file's first bytes */
#define DRIVER_PLAN_CONNS 8	       /* control connections at once */
#define DRIVER_PLAN_ENTRIES_MAX (1ull << 26)	   /* 256 MiB of node numbers */
#define DRIVER_PLAN_PAUSE_NS (500ull * 1000000ull) /* no open: paused */

/* Listing plans (listorder.c): a process that opens a directory's files in
 * its listing order has the next ones planned for it. */
#define DRIVER_LIST_PLANS 16 /* listing plans at once, beside the others */
#define DRIVER_PLAN_SLOTS (DRIVER_PLANS_MAX + DRIVER_LIST_PLANS)
#define DRIVER_LIST_RUNS 32   /* processes' runs of opens watched */
#define DRIVER_LIST_RUN 3     /* opens in listing order that start one */
#define DRIVER_LIST_GAP 4     /* files an open may skip and stay in order */
#define DRIVER_LIST_STRIDE 16 /* a worker of so many reading every n-th */
#define DRIVER_LIST_SCAN 256  /* entries between two opens looked at */
#define DRIVER_LIST_MISSES 4  /* its process's other opens that end it */
#define DRIVER_LIST_ENTRIES_MAX 4096u /* files one plans, at most */
/* A listing plan guesses that its process reads each file, not how
 * much of it (`file *` reads a few KiB of each): it fetches ahead at most
 * DRIVER_LIST_AHEAD_MAX files and DRIVER_LIST_FIRST bytes of each, 32 MiB
 * at worst, and the file's reader's own window takes over once opened. */
#define DRIVER_LIST_AHEAD_MAX 128
#define DRIVER_LIST_FIRST (256ull << 10)

/* A byte range of a plan's entry; len 0: the whole file. */
struct driver_plan_range {
	uint64_t off, len;
};

/* One plan: its entries as node numbers (4 bytes each, a bit for
 * "opened"; ranges only when some entry has one), its cursor and its
 * consumption. Guarded by driver_plans.mu once installed. */
struct driver_plan {
	char name[DRIVER_PLAN_NAME_MAX + 1];
	uid_t uid;
	uint32_t *nodes;
	struct driver_plan_range *ranges; /* NULL: every entry whole */
	uint8_t *done;			  /* a bit per entry: opened */
	uint64_t n, cap;
	uint64_t cursor; /* the earliest entry not yet opened (or skipped) */
	uint64_t next;	 /* the next entry to fetch ahead, >= cursor */
	uint64_t opened, skipped, misses;
	/* Entries the cursor left behind unopened, with bytes fetched ahead
	 * (a file another program then reads was still pulled for none of
	 * this plan's opens). */
	uint64_t unread_files, unread_bytes;
	bool abandoned; /* opens stopped matching it */
	/* A listing plan (listorder.c): the rest of directory dir's files,
	 * in its listing order, for process pid's opens alone. */
	bool listing;
	pid_t pid;
	uint32_t dir;
	double rate; /* files opened a second, smoothed; 0: unknown */
	uint64_t rate_t0, rate_n, last_ns, set_ns;
};

enum driver_hint_state {
	DRIVER_HINT_FREE,
	DRIVER_HINT_PENDING, /* a thread makes its file ready */
	DRIVER_HINT_OPEN,    /* its plan reader is open */
};

/* A planned file being fetched ahead: a plan reader of the engine. */
struct driver_plan_hint {
	enum driver_hint_state state;
	struct driver_plan *plan; /* NULL: its plan went while PENDING */
	uint32_t node, blob, reader;
	uint64_t want; /* bytes of its blob held at which it is fetched (its
			  range's length: a range past 0 is not told
			  from other held bytes) */
};

/* A process's opens in one directory (listorder.c): the listing
 * position of the last, and how many in a row followed the listing. */
struct driver_list_run {
	pid_t pid; /* 0: a free slot */
	uint32_t dir;
	uint32_t pos;	 /* its index among dir's children */
	uint32_t run;	 /* opens in a row a stride apart */
	uint32_t stride; /* files from one to the next (a loader's worker
			    reading every n-th file: n) */
	uint64_t last_ns;
};

struct driver_plans {
	struct driver_mount *m;
	uint64_t lead_ns; /* -o readahead= */
	bool listahead;	  /* -o listahead=on: listing plans */
	pthread_mutex_t mu;
	pthread_cond_t cv; /* a plan changed, an open moved a cursor, stop */
	/* Set plans in [0, DRIVER_PLANS_MAX), listing plans past them. */
	struct driver_plan *plans[DRIVER_PLAN_SLOTS];	  /* guarded by mu */
	struct driver_list_run runs[DRIVER_LIST_RUNS];	  /* guarded by mu */
	struct driver_plan_hint hints[DRIVER_PLAN_HINTS]; /* guarded by mu */
	uint32_t nhints;				  /* guarded by mu */
	uint32_t rr;					  /* guarded by mu */
	bool stop;					  /* guarded by mu */
	pthread_t threads[DRIVER_PLAN_THREADS]; /* started by the first plan */
	uint32_t nthreads;			/* guarded by mu */
	uint32_t want_threads;
	/* The control socket (plansock.c). */
	int listen_fd;
	char sock_name[108]; /* "@pacefs/...": an abstract socket */
	pthread_t acceptor;
	bool accepting;
	int conn_fds[DRIVER_PLAN_CONNS]; /* guarded by mu; -1: none */
	uint32_t nconns;		 /* guarded by mu */
	bool allow_other;
};

/* Frees a plan not installed (or just taken out). NULL-safe. */
void driver__plan_free(struct driver_plan *p);

/* Bytes held of plan p's entry i's file. Caller holds s->mu. */
uint64_t driver__plan_entry_held(struct driver_plans *s,
				 const struct driver_plan *p, uint64_t i);

/* Whether a plan of that name is on the mount, and its owner's uid. */
bool driver__plan_owner(struct driver_plans *s, const char *name, uid_t *uid);

/* Installs p under its name, replacing a plan of that name set by the
 * same uid; an empty p clears it. Takes p on success (an empty one is
 * freed); on error p stays the caller's and err says why (-EPERM:
 * another uid's, -ENOSPC: too many plans, -ENOENT: nothing to clear). */
int driver__plan_install(struct driver_plans *s, struct driver_plan *p,
			 char *err, size_t errcap);

/* Files p fetches ahead of its cursor: its consumption (files opened a
 * second) over the mount's readahead seconds, as a reader's window is
 * sized, within DRIVER_PLAN_AHEAD_MIN and _MAX. Caller holds s->mu. */
uint64_t driver__plan_ahead(const struct driver_plans *s,
			    const struct driver_plan *p);

/* Whether p's loader has paused: no open for DRIVER_PLAN_PAUSE_NS, or for
 * four files' time at its rate if longer. Nothing more is fetched ahead
 * until it opens again. Caller holds s->mu. */
bool driver__plan_paused(const struct driver_plan *p, uint64_t now);

/* Puts listing plan p in a listing slot, in place of the same process's
 * plan of the same directory, else of a free, done or abandoned one, else
 * of the one whose process opened least lately; the plan it replaces
 * goes, its readers into closing (room for DRIVER_PLAN_HINTS, or NULL
 * when there is none to replace). Takes p. Caller holds s->mu. */
void driver__plan_list_put(struct driver_plans *s, struct driver_plan *p,
			   struct driver_plan_hint *closing,
			   uint32_t *nclosing);

/* An open of node by process pid (uid) that no plan expected: its run in
 * the node's directory goes on or starts again, and a run of
 * DRIVER_LIST_RUN opens in listing order starts a listing plan of the
 * directory's next files (listorder.c). Costs a lookup among the
 * directory's children, and at a plan's start a walk of at most the
 * children its DRIVER_LIST_ENTRIES_MAX files take. A plan it replaces puts its
 * readers into *closing, allocated (DRIVER_PLAN_HINTS) when NULL, for the
 * caller to close and free. Caller holds s->mu. */
void driver__list_opened(struct driver_plans *s, uint32_t node, pid_t pid,
			 uid_t uid, uint64_t now,
			 struct driver_plan_hint **closing, uint32_t *nclosing);

/* The threads that fetch along the plans (planahead.c). */
void *driver__plan_worker(void *arg);

#endif

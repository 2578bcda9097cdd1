/* envcheck: a structural walk of an LMDB data file, read with pread, that
 * refuses a damaged file before LMDB's own code, which trusts every page it
 * follows through the map, faults or corrupts memory on it. */
#include "cache/cache_int.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/*
 * LMDB 0.9's on-disk layout (mdb.c, MDB_DATA_VERSION 1), in host byte
 * order, with pgno_t and txnid_t of the size of size_t:
 *
 *   page header: pgno (P), pad (2), flags (2), lower (2), upper (2); an
 *                overflow page has a u32 page count where lower/upper are
 *   node:        lo (2), hi (2), flags (2), key size (2), key, data; a leaf
 *                node's data size is lo | hi << 16, a branch node's child
 *                page lo | hi << 16 | flags << 32 (64-bit hosts)
 *   MDB_db:      pad (4), flags (2), depth (2), branch pages, leaf pages,
 *                overflow pages, entries, root (P each)
 *   meta page:   header, magic (4), version (4), address (P), map size (P),
 *                free db, main db, last page (P), txnid (P)
 */
#if MDB_VERSION_MAJOR != 0 || MDB_VERSION_MINOR != 9
#error "envcheck.c reads LMDB 0.9's on-disk layout: check it against this LMDB"
#endif
#define EC_P sizeof(size_t)
#define EC_PAGEHDR (EC_P + 8)
#define EC_NODEHDR 8u
#define EC_P_BRANCH 0x01u
#define EC_P_LEAF 0x02u
#define EC_P_OVERFLOW 0x04u
#define EC_P_DIRTY 0x10u /* cleared before a page is written; tolerated */
#define EC_P_KEEP 0x8000u
#define EC_F_BIGDATA 0x01u
#define EC_F_SUBDATA 0x02u
#define EC_MAGIC 0xBEEFC0DEu
#define EC_DATA_VERSION 1u
#define EC_DEPTH_MAX 32u /* LMDB's cursor stack */
#define EC_KEY_MAX 511u	 /* LMDB's default MDB_MAXKEYSIZE */
#define EC_DB_LEN (8 + 5 * EC_P)
#define EC_META_DBS (EC_PAGEHDR + 8 + 2 * EC_P)
#define EC_META_LAST (EC_META_DBS + 2 * EC_DB_LEN)
#define EC_META_TXNID (EC_META_LAST + EC_P)
#define EC_META_LEN (EC_META_TXNID + EC_P)
#define EC_INVALID ((uint64_t)(size_t)-1)
#define EC_NUM_METAS 2u
#define EC_SUBDBS_MAX 16

/* An MDB_db record. */
struct ec_db {
	uint32_t pad;
	uint16_t flags, depth;
	uint64_t branch, leaf, overflow, entries, root;
};

struct ec {
	int fd;
	bool deep; /* read every overflow value's header too */
	size_t psize;
	uint64_t npages;     /* pages the snapshot uses: last page + 1 */
	uint64_t fsize;	     /* the file's bytes */
	uint64_t fpages;     /* whole pages the file holds */
	unsigned char *seen; /* a bit per page of the file: met once already */
	/* Free pages past the file's end, checked for repeats at the end. */
	uint64_t *tail;
	size_t ntail, tailcap;
	unsigned char *bufs; /* a page per tree level */
	uint32_t *spans;     /* a page's nodes: offset << 16 | size */
	char *msg;
	size_t msglen;
	/* The database being walked. */
	const char *db;
	bool intkey; /* the free list's keys are native size_t */
	bool main;   /* the main database: named databases' records */
	uint64_t branch, leaf, overflow, entries;
	unsigned char last[EC_KEY_MAX];
	size_t last_len;
	bool have_last;
	/* Named databases found in the main one, walked after it. */
	char sub_name[EC_SUBDBS_MAX][EC_KEY_MAX + 1];
	struct ec_db sub[EC_SUBDBS_MAX];
	int nsub;
};

static int ec_fail(struct ec *ec, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static int ec_fail(struct ec *ec, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(ec->msg, ec->msglen, fmt, ap);
	va_end(ap);
	return -EPROTO;
}

static uint64_t ec_u16(const unsigned char *p)
{
	uint16_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

static uint64_t ec_pgno(const unsigned char *p)
{
	size_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

static void ec_db_get(const unsigned char *p, struct ec_db *db)
{
	memcpy(&db->pad, p, 4);
	db->flags = (uint16_t)ec_u16(p + 4);
	db->depth = (uint16_t)ec_u16(p + 6);
	db->branch = ec_pgno(p + 8);
	db->leaf = ec_pgno(p + 8 + EC_P);
	db->overflow = ec_pgno(p + 8 + 2 * EC_P);
	db->entries = ec_pgno(p + 8 + 3 * EC_P);
	db->root = ec_pgno(p + 8 + 4 * EC_P);
}

/* Whether hdr is the header of the first of `pages` overflow pages that
 * start at page pgno. */
static bool ec_ov_hdr_ok(const unsigned char *hdr, uint64_t pgno,
			 uint64_t pages)
{
	uint32_t npg;

	memcpy(&npg, hdr + EC_P + 4, sizeof(npg));
	return ec_pgno(hdr) == pgno &&
	       (ec_u16(hdr + EC_P + 2) & ~(uint64_t)(EC_P_DIRTY | EC_P_KEEP)) ==
		       EC_P_OVERFLOW &&
	       npg == pages;
}

int cache__ov_ok(int fd, const unsigned char *map, size_t map_len, size_t psize,
		 const void *value, size_t vsize)
{
	const unsigned char *v = value;
	unsigned char hdr[EC_PAGEHDR];
	uint64_t at, pgno;

	/* A value on overflow pages starts right after the first one's
	 * header; an inline one, inside a leaf, never there. */
	if (!map || v < map || v >= map + map_len ||
	    (size_t)(v - map) % psize != EC_PAGEHDR)
		return 0; /* inline, or a page of the current transaction */
	at = (uint64_t)(v - map) - EC_PAGEHDR;
	pgno = at / psize;
	if (fd >= 0) {
		if (pread(fd, hdr, sizeof(hdr), (off_t)at) !=
		    (ssize_t)sizeof(hdr))
			return -EPROTO;
	} else {
		memcpy(hdr, map + at, sizeof(hdr));
	}
	return ec_ov_hdr_ok(hdr, pgno, (EC_PAGEHDR - 1 + vsize) / psize + 1)
		       ? 0
		       : -EPROTO;
}

/* Reads n bytes at byte `off` of the file; a short read is damage (the
 * file ends before a page the snapshot uses). */
static int ec_read(struct ec *ec, uint64_t off, void *buf, size_t n)
{
	size_t done = 0;

	while (done < n) {
		ssize_t got = pread(ec->fd, (char *)buf + done, n - done,
				    (off_t)(off + done));
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0) {
			int err = errno;

			snprintf(ec->msg, ec->msglen,
				 "read at byte %" PRIu64 ": %s", off + done,
				 strerror(err));
			return -err;
		}
		if (got == 0)
			return ec_fail(ec,
				       "%s: the file ends at byte %" PRIu64
				       " before a page it uses",
				       ec->db, off + done);
		done += (size_t)got;
	}
	return 0;
}

/* Marks pages [pgno, pgno + count) as used, once. Pages a tree reaches
 * must lie inside the file: LMDB reads them through the map, and a page
 * past the file's end is SIGBUS. */
static int ec_mark(struct ec *ec, uint64_t pgno, uint64_t count,
		   const char *what)
{
	if (pgno < EC_NUM_METAS || pgno >= ec->npages ||
	    count > ec->npages - pgno)
		return ec_fail(ec,
			       "%s: %s page %" PRIu64 " (+%" PRIu64
			       ") lies outside pages 2-%" PRIu64,
			       ec->db, what, pgno, count, ec->npages - 1);
	if (count > ec->fpages || pgno > ec->fpages - count)
		return ec_fail(ec,
			       "%s: the file is %" PRIu64 " bytes, its %s "
			       "page %" PRIu64 " (+%" PRIu64 ") ends at byte "
			       "%" PRIu64 ": truncated",
			       ec->db, ec->fsize, what, pgno, count,
			       (pgno + count) * ec->psize);
	for (uint64_t p = pgno; p < pgno + count; p++) {
		if (ec->seen[p / 8] & (1u << (p % 8)))
			return ec_fail(ec, "%s: page %" PRIu64 " is used twice",
				       ec->db, p);
		ec->seen[p / 8] |= (unsigned char)(1u << (p % 8));
	}
	return 0;
}

/* Marks a free page as used, once. A free page may lie past the file's
 * end: LMDB does not write a page that was allocated and freed in the
 * same transaction (a loose page, or overflow pages freed before the
 * commit), yet the snapshot's last page counts it, and nothing reads a
 * free page before a later commit writes it. */
static int ec_mark_free(struct ec *ec, uint64_t pgno)
{
	if (pgno < ec->fpages || pgno >= ec->npages)
		return ec_mark(ec, pgno, 1, "free");
	if (ec->ntail == ec->tailcap) {
		size_t cap = ec->tailcap ? 2 * ec->tailcap : 64;
		uint64_t *t = realloc(ec->tail, cap * sizeof(*t));

		if (!t)
			return -ENOMEM;
		ec->tail = t;
		ec->tailcap = cap;
	}
	ec->tail[ec->ntail++] = pgno;
	return 0;
}

static int ec_u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* The free pages past the file's end, each listed once. */
static int ec_tail_check(struct ec *ec)
{
	if (ec->ntail < 2)
		return 0; /* and qsort must not see the NULL of no list */
	qsort(ec->tail, ec->ntail, sizeof(*ec->tail), ec_u64_cmp);
	for (size_t i = 1; i < ec->ntail; i++)
		if (ec->tail[i] == ec->tail[i - 1])
			return ec_fail(
				ec, "free list: page %" PRIu64 " is used twice",
				ec->tail[i]);
	return 0;
}

/* Keys must ascend strictly in the order LMDB compares them. */
static int ec_key(struct ec *ec, const unsigned char *key, size_t len)
{
	int cmp = 0;

	if (ec->intkey) {
		if (len != EC_P)
			return ec_fail(ec, "%s: a key of %zu bytes", ec->db,
				       len);
		if (ec->have_last)
			cmp = ec_pgno(ec->last) < ec_pgno(key) ? -1 : 1;
	} else if (ec->have_last) {
		size_t n = ec->last_len < len ? ec->last_len : len;

		cmp = memcmp(ec->last, key, n);
		if (cmp == 0)
			cmp = ec->last_len < len ? -1 : 1;
	}
	if (ec->have_last && cmp >= 0)
		return ec_fail(ec, "%s: keys out of order", ec->db);
	memcpy(ec->last, key, len);
	ec->last_len = len;
	ec->have_last = true;
	return 0;
}

/* A free-list entry: a count, then that many page numbers, all free. */
static int ec_idl(struct ec *ec, const unsigned char *v, size_t len)
{
	uint64_t n;

	if (len < EC_P || len % EC_P)
		return ec_fail(ec, "%s: a free list of %zu bytes", ec->db, len);
	n = ec_pgno(v);
	if (n != len / EC_P - 1)
		return ec_fail(ec,
			       "%s: a free list of %zu bytes says %" PRIu64
			       " pages",
			       ec->db, len, n);
	for (uint64_t i = 1; i <= n; i++) {
		int rc = ec_mark_free(ec, ec_pgno(v + i * EC_P));

		if (rc)
			return rc;
	}
	return 0;
}

/* The value of a leaf node: inline (v, len) or, with F_BIGDATA, on
 * overflow pages from opg. The free list's values are read and checked;
 * the main database's named records are kept for later. */
static int ec_value(struct ec *ec, const unsigned char *key, size_t klen,
		    unsigned flags, const unsigned char *v, uint64_t len,
		    uint64_t opg)
{
	unsigned char *big = NULL;
	int rc = 0;

	if (ec->intkey || (ec->main && (flags & EC_F_SUBDATA))) {
		if (flags & EC_F_BIGDATA) {
			if (len > ((uint64_t)1 << 30))
				return ec_fail(
					ec, "%s: a value of %" PRIu64 " bytes",
					ec->db, len);
			big = malloc((size_t)len);
			if (!big)
				return -ENOMEM;
			rc = ec_read(ec, opg * ec->psize + EC_PAGEHDR, big,
				     (size_t)len);
			v = big;
		}
		if (rc == 0 && ec->intkey) {
			rc = ec_idl(ec, v, (size_t)len);
		} else if (rc == 0) {
			if (len != EC_DB_LEN || (flags & EC_F_BIGDATA) ||
			    ec->nsub == EC_SUBDBS_MAX)
				rc = ec_fail(ec, "%s: a bad database record",
					     ec->db);
			else {
				/* Printable, for the one-line message. */
				for (size_t j = 0; j < klen; j++)
					ec->sub_name[ec->nsub][j] =
						key[j] >= 0x20 && key[j] < 0x7f
							? (char)key[j]
							: '?';
				ec->sub_name[ec->nsub][klen] = '\0';
				ec_db_get(v, &ec->sub[ec->nsub++]);
			}
		}
	}
	free(big);
	return rc;
}

/* Reads page pgno into pg and checks its header: the number it says it
 * has, its kind (a leaf at `depth` == `maxdepth`, a branch above) and
 * its bounds. Its key count goes to *nkeys, where its nodes may start
 * to *upper. */
static int ec_page(struct ec *ec, uint64_t pgno, unsigned depth,
		   unsigned maxdepth, unsigned char *pg, uint64_t *nkeys,
		   uint64_t *upper)
{
	bool leaf = depth == maxdepth;
	uint64_t lower, flags;
	int rc;

	rc = ec_mark(ec, pgno, 1, leaf ? "leaf" : "branch");
	if (rc == 0)
		rc = ec_read(ec, pgno * ec->psize, pg, ec->psize);
	if (rc)
		return rc;
	flags = ec_u16(pg + EC_P + 2) & ~(uint64_t)(EC_P_DIRTY | EC_P_KEEP);
	lower = ec_u16(pg + EC_P + 4);
	*upper = ec_u16(pg + EC_P + 6);
	if (ec_pgno(pg) != pgno)
		return ec_fail(ec,
			       "%s: page %" PRIu64 " says it is page %" PRIu64,
			       ec->db, pgno, ec_pgno(pg));
	if (flags != (leaf ? EC_P_LEAF : EC_P_BRANCH))
		return ec_fail(ec,
			       "%s: page %" PRIu64 " has flags 0x%" PRIx64
			       " at depth %u of %u",
			       ec->db, pgno, flags, depth, maxdepth);
	if (lower < EC_PAGEHDR || lower > *upper || *upper > ec->psize ||
	    (lower - EC_PAGEHDR) % 2)
		return ec_fail(ec,
			       "%s: page %" PRIu64 " has bounds %" PRIu64
			       "-%" PRIu64,
			       ec->db, pgno, lower, *upper);
	*nkeys = (lower - EC_PAGEHDR) / 2;
	if (!leaf && *nkeys == 0)
		return ec_fail(ec, "%s: branch page %" PRIu64 " is empty",
			       ec->db, pgno);
	return 0;
}

/* A cold file: asks for a branch's children all at once, so that the
 * disk reads them in parallel rather than one by one below. Nodes that
 * are out of bounds are left to ec_tree to refuse. */
static void ec_prefetch(const struct ec *ec, const unsigned char *pg,
			uint64_t nkeys, uint64_t upper)
{
	for (uint64_t i = 0; i < nkeys; i++) {
		uint64_t at = ec_u16(pg + EC_PAGEHDR + 2 * i);

		if (at >= upper && at % 2 == 0 &&
		    at + EC_NODEHDR <= ec->psize) {
			const unsigned char *node = pg + at;
			uint64_t child = ec_u16(node) | ec_u16(node + 2) << 16;

			if (EC_P == 8)
				child |= ec_u16(node + 4) << 32;
			if (child < ec->npages)
				(void)posix_fadvise(
					ec->fd, (off_t)(child * ec->psize),
					(off_t)ec->psize, POSIX_FADV_WILLNEED);
		}
	}
}

/* Checks leaf node i of page pgno: its key of ksize bytes, its flags and
 * its value, inline in the `room` bytes past the key or on overflow
 * pages, which it marks. */
static int ec_leaf_node(struct ec *ec, uint64_t pgno, uint64_t i,
			const unsigned char *node, uint64_t ksize,
			uint64_t room)
{
	uint64_t dsize = ec_u16(node) | ec_u16(node + 2) << 16;
	uint64_t nflags = ec_u16(node + 4);
	const unsigned char *data = node + EC_NODEHDR + ksize;
	uint64_t opg = 0;
	int rc;

	rc = ec_key(ec, node + EC_NODEHDR, (size_t)ksize);
	if (rc)
		return rc;
	ec->entries++;
	if (nflags & ~(uint64_t)(EC_F_BIGDATA | EC_F_SUBDATA) ||
	    ((nflags & EC_F_SUBDATA) && !ec->main))
		return ec_fail(ec,
			       "%s: page %" PRIu64 " node %" PRIu64
			       " has flags 0x%" PRIx64,
			       ec->db, pgno, i, nflags);
	if (nflags & EC_F_BIGDATA) {
		unsigned char hdr[EC_PAGEHDR];
		uint64_t pages = (EC_PAGEHDR - 1 + dsize) / ec->psize + 1;

		if (room < EC_P)
			return ec_fail(ec,
				       "%s: page %" PRIu64 " node %" PRIu64
				       " overruns it",
				       ec->db, pgno, i);
		opg = ec_pgno(data);
		rc = ec_mark(ec, opg, pages, "overflow");
		/* One read per value, scattered over the file: only the deep
		 * check pays it; reads do not use the header, and frees
		 * check it first (cache__ov_ok). */
		if (rc == 0 && ec->deep)
			rc = ec_read(ec, opg * ec->psize, hdr, sizeof(hdr));
		if (rc)
			return rc;
		if (ec->deep && !ec_ov_hdr_ok(hdr, opg, pages))
			return ec_fail(ec,
				       "%s: overflow page %" PRIu64
				       " of a %" PRIu64 "-byte value "
				       "has a bad header",
				       ec->db, opg, dsize);
		ec->overflow += pages;
	} else if (dsize > room) {
		return ec_fail(
			ec, "%s: page %" PRIu64 " node %" PRIu64 " overruns it",
			ec->db, pgno, i);
	}
	return ec_value(ec, node + EC_NODEHDR, (size_t)ksize, (unsigned)nflags,
			data, dsize, opg);
}

static int ec_u32_cmp(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return (x > y) - (x < y);
}

/* Checks that the nodes of a page tile its bytes from upper to its end,
 * as LMDB lays them out: each where the one below it ends. LMDB deletes
 * or resizes a node by moving the nodes below it by the size its header
 * gives, so a size grown into a neighbour (a flipped bit in a data
 * size) would have it move bytes outside the page. */
static int ec_nodes_tile(struct ec *ec, uint64_t pgno, const unsigned char *pg,
			 uint64_t nkeys, uint64_t upper, bool leaf)
{
	uint64_t end = upper;

	for (uint64_t i = 0; i < nkeys; i++) {
		uint64_t at = ec_u16(pg + EC_PAGEHDR + 2 * i);
		const unsigned char *node = pg + at;
		uint64_t size;

		if (at < upper || at % 2 || at + EC_NODEHDR > ec->psize)
			return ec_fail(ec,
				       "%s: page %" PRIu64 " node %" PRIu64
				       " at offset %" PRIu64,
				       ec->db, pgno, i, at);
		size = EC_NODEHDR + ec_u16(node + 6);
		if (leaf && (ec_u16(node + 4) & EC_F_BIGDATA))
			size += EC_P;
		else if (leaf)
			size += ec_u16(node) | ec_u16(node + 2) << 16;
		size += size % 2;
		if (size > ec->psize - at)
			return ec_fail(ec,
				       "%s: page %" PRIu64 " node %" PRIu64
				       " overruns it",
				       ec->db, pgno, i);
		ec->spans[i] = (uint32_t)(at << 16 | size);
	}
	qsort(ec->spans, (size_t)nkeys, sizeof(*ec->spans), ec_u32_cmp);
	for (uint64_t i = 0; i < nkeys; i++) {
		if (ec->spans[i] >> 16 != end)
			break;
		end += ec->spans[i] & 0xffffu;
	}
	if (end != ec->psize)
		return ec_fail(ec,
			       "%s: page %" PRIu64
			       ": its nodes overlap or leave a gap",
			       ec->db, pgno);
	return 0;
}

/* Walks the subtree at pgno, at `depth` (the root is 1) of a tree of
 * `maxdepth` levels: leaves at the bottom level, branches above. */
static int ec_tree(struct ec *ec, uint64_t pgno, unsigned depth,
		   unsigned maxdepth)
{
	unsigned char *pg = ec->bufs + (size_t)(depth - 1) * ec->psize;
	bool leaf = depth == maxdepth;
	uint64_t upper = 0, nkeys = 0;
	int rc;

	rc = ec_page(ec, pgno, depth, maxdepth, pg, &nkeys, &upper);
	if (rc)
		return rc;
	rc = ec_nodes_tile(ec, pgno, pg, nkeys, upper, leaf);
	if (rc)
		return rc;
	if (leaf)
		ec->leaf++;
	else
		ec->branch++;
	if (!leaf)
		ec_prefetch(ec, pg, nkeys, upper);
	for (uint64_t i = 0; i < nkeys; i++) {
		uint64_t at = ec_u16(pg + EC_PAGEHDR + 2 * i);
		const unsigned char *node = pg + at;
		uint64_t ksize, room, child;

		ksize = ec_u16(node + 6);
		room = ec->psize - at - EC_NODEHDR;
		if (ksize > EC_KEY_MAX || ksize > room)
			return ec_fail(ec,
				       "%s: page %" PRIu64 " node %" PRIu64
				       " has a key of %" PRIu64 " bytes",
				       ec->db, pgno, i, ksize);
		if (leaf) {
			rc = ec_leaf_node(ec, pgno, i, node, ksize,
					  room - ksize);
		} else {
			child = ec_u16(node) | ec_u16(node + 2) << 16;
			if (EC_P == 8)
				child |= ec_u16(node + 4) << 32;
			rc = ec_tree(ec, child, depth + 1, maxdepth);
		}
		if (rc)
			return rc;
	}
	return 0;
}

/* Walks one database from its record and checks the record's counts. */
static int ec_db_walk(struct ec *ec, const char *name, const struct ec_db *db,
		      bool intkey, bool main)
{
	int rc = 0;

	ec->db = name;
	ec->intkey = intkey;
	ec->main = main;
	ec->branch = ec->leaf = ec->overflow = ec->entries = 0;
	ec->have_last = false;
	if (db->root == EC_INVALID) {
		if (db->depth || db->entries || db->branch || db->leaf ||
		    db->overflow)
			return ec_fail(ec, "%s: an empty database with counts",
				       name);
		return 0;
	}
	if (db->depth == 0 || db->depth > EC_DEPTH_MAX)
		return ec_fail(ec, "%s: depth %u", name, db->depth);
	rc = ec_tree(ec, db->root, 1, db->depth);
	if (rc)
		return rc;
	if (ec->branch != db->branch || ec->leaf != db->leaf ||
	    ec->overflow != db->overflow || ec->entries != db->entries)
		return ec_fail(ec,
			       "%s: %" PRIu64 "/%" PRIu64 "/%" PRIu64
			       " branch/leaf/overflow pages and %" PRIu64
			       " entries found, its record says %" PRIu64
			       "/%" PRIu64 "/%" PRIu64 " and %" PRIu64,
			       name, ec->branch, ec->leaf, ec->overflow,
			       ec->entries, db->branch, db->leaf, db->overflow,
			       db->entries);
	return 0;
}

int cache__env_check(int fd, MDB_env *env, MDB_txn *txn, bool deep, char *msg,
		     size_t msglen)
{
	MDB_stat st;
	int rc = mdb_env_stat(env, &st);

	if (rc) {
		snprintf(msg, msglen, "stat: %s", mdb_strerror(rc));
		return -EIO;
	}
	return cache__file_walk(fd, st.ms_psize, mdb_txn_id(txn), deep, msg,
				msglen);
}

int cache__file_walk(int fd, size_t psize, uint64_t txnid, bool deep, char *msg,
		     size_t msglen)
{
	struct ec *ec = calloc(1, sizeof(*ec));
	unsigned char meta[EC_META_LEN];
	struct ec_db free_db, main_db;
	struct stat st;
	bool found = false;
	int rc;

	if (!ec)
		return -ENOMEM;
	msg[0] = '\0';
	if (psize < 512 || psize > 65536 || psize % 512) {
		snprintf(msg, msglen, "page size %zu", psize);
		free(ec);
		return -EINVAL;
	}
	ec->fd = fd;
	ec->deep = deep;
	ec->msg = msg;
	ec->msglen = msglen;
	ec->db = "meta";
	ec->psize = psize;
	/* The meta page of this snapshot: the one with its txnid. */
	for (unsigned m = 0; m < EC_NUM_METAS && !found; m++) {
		uint32_t magic, version;

		rc = ec_read(ec, (uint64_t)m * ec->psize, meta, sizeof(meta));
		if (rc)
			goto out;
		memcpy(&magic, meta + EC_PAGEHDR, 4);
		memcpy(&version, meta + EC_PAGEHDR + 4, 4);
		found = magic == EC_MAGIC && version == EC_DATA_VERSION &&
			ec_pgno(meta + EC_META_TXNID) == txnid;
	}
	if (!found) {
		/* Two commits since txn began overwrote its meta page. */
		rc = -EAGAIN;
		goto out;
	}
	ec_db_get(meta + EC_META_DBS, &free_db);
	ec_db_get(meta + EC_META_DBS + EC_DB_LEN, &main_db);
	ec->npages = ec_pgno(meta + EC_META_LAST) + 1;
	if (free_db.pad != ec->psize) {
		rc = ec_fail(ec, "meta: page size %" PRIu32 ", expected %zu",
			     free_db.pad, ec->psize);
		goto out;
	}
	if (ec->npages < EC_NUM_METAS ||
	    ec->npages > (uint64_t)SIZE_MAX / 8 / ec->psize) {
		rc = ec_fail(ec, "meta: last page %" PRIu64, ec->npages - 1);
		goto out;
	}
	if (fstat(fd, &st) != 0) {
		rc = -errno;
		snprintf(msg, msglen, "stat: %s", strerror(errno));
		goto out;
	}
	ec->fsize = (uint64_t)st.st_size;
	ec->fpages = ec->fsize / ec->psize;
	if (ec->fpages > ec->npages)
		ec->fpages = ec->npages; /* pages of later commits */
	ec->seen = calloc((size_t)(ec->fpages + 7) / 8 + 1, 1);
	ec->bufs = malloc(ec->psize * EC_DEPTH_MAX);
	ec->spans = malloc(ec->psize / 2 * sizeof(*ec->spans));
	if (!ec->seen || !ec->bufs || !ec->spans) {
		rc = -ENOMEM;
		goto out;
	}
	/* The kernel's readahead would pull whole blocks around each page. */
	(void)posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM);
	rc = ec_db_walk(ec, "free list", &free_db, true, false);
	if (rc == 0)
		rc = ec_db_walk(ec, "main database", &main_db, false, true);
	for (int i = 0; rc == 0 && i < ec->nsub; i++) {
		if (ec->sub[i].flags != 0)
			rc = ec_fail(ec, "database %s: flags 0x%x",
				     ec->sub_name[i], ec->sub[i].flags);
		else
			rc = ec_db_walk(ec, ec->sub_name[i], &ec->sub[i], false,
					false);
	}
	if (rc == 0)
		rc = ec_tail_check(ec);
	(void)posix_fadvise(fd, 0, 0, POSIX_FADV_NORMAL);
out:
	if (ec) {
		free(ec->seen);
		free(ec->bufs);
		free(ec->spans);
		free(ec->tail);
	}
	free(ec);
	return rc;
}

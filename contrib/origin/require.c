/* require: --require-header, the header lines every request must carry
 * one of, read again from their file whenever it changes. */
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "contrib/origin/origin_int.h"

/* --require-header: reads FILE again when it changed (its inode, size or
 * mtime), so that a test rotates a token under a running mount; a file
 * that is gone accepts nothing. Caller holds srv->require_mu. */
static void require_reload(struct server *srv)
{
	char line[1200];
	struct stat st;
	FILE *fp;

	if (stat(srv->require_path, &st) != 0) {
		srv->nrequire = 0;
		memset(&srv->require_st, 0, sizeof(srv->require_st));
		return;
	}
	if (st.st_ino == srv->require_st.st_ino &&
	    st.st_size == srv->require_st.st_size &&
	    st.st_mtim.tv_sec == srv->require_st.st_mtim.tv_sec &&
	    st.st_mtim.tv_nsec == srv->require_st.st_mtim.tv_nsec)
		return;
	fp = fopen(srv->require_path, "r");
	if (fp == NULL)
		return;
	srv->require_st = st;
	srv->nrequire = 0;
	while (fgets(line, sizeof(line), fp) != NULL &&
	       srv->nrequire < ORIGIN_REQUIRE_MAX) {
		char *colon = strchr(line, ':'), *v, *e;

		if (line[0] == '#' || colon == NULL || colon == line)
			continue;
		*colon = '\0';
		v = colon + 1 + strspn(colon + 1, " \t");
		e = v + strcspn(v, "\r\n");
		while (e > v && (e[-1] == ' ' || e[-1] == '\t'))
			e--;
		*e = '\0';
		/* A line too long to hold is left out, never cut. */
		if (strlen(line) >= sizeof(srv->require[0].name) ||
		    strlen(v) >= sizeof(srv->require[0].value))
			continue;
		memcpy(srv->require[srv->nrequire].name, line,
		       strlen(line) + 1);
		memcpy(srv->require[srv->nrequire].value, v, strlen(v) + 1);
		srv->nrequire++;
	}
	fclose(fp);
}

/* True when rq carries one of the --require-header lines (name in any
 * case, value exactly), or no --require-header was given. */
bool origin__require_ok(struct server *srv, const struct request *rq)
{
	bool ok = false;

	if (srv->require_path == NULL)
		return true;
	pthread_mutex_lock(&srv->require_mu);
	require_reload(srv);
	for (size_t i = 0; i < srv->nrequire && !ok; i++)
		for (size_t j = 0; j < rq->nhdr && !ok; j++)
			ok = strcasecmp(rq->hdr[j].name,
					srv->require[i].name) == 0 &&
			     strcmp(rq->hdr[j].value, srv->require[i].value) ==
				     0;
	pthread_mutex_unlock(&srv->require_mu);
	return ok;
}

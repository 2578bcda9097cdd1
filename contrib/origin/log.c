/* log: the request log (one line per request) and the diagnostics on
 * stderr. */
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>

#include "contrib/origin/origin_int.h"

void origin__log_request(struct server *srv, const struct request *rq,
			 int status, uint64_t sent, const char *fault)
{
	char range[128];
	size_t n = 0;
	const char *r;

	/* Fields are space-separated, so the range loses its blanks. */
	if (rq->range) {
		for (r = rq->range; *r && n + 1 < sizeof(range); r++) {
			if (*r != ' ' && *r != '\t')
				range[n++] = *r;
		}
	}
	if (n == 0)
		range[n++] = '-';
	range[n] = '\0';
	pthread_mutex_lock(&srv->log_mu);
	if (srv->log) {
		fprintf(srv->log, "%s %s %s %d %" PRIu64 " %s",
			rq->method ? rq->method : "-",
			rq->target ? rq->target : "-", range, status, sent,
			fault ? fault : "-");
		/* --log-header values, blanks and '%' percent-encoded so
		 * that each stays one field. */
		for (size_t i = 0; i < srv->nlog_headers; i++) {
			const char *v = rq->logged[i];

			fputc(' ', srv->log);
			if (!v || !*v)
				fputc('-', srv->log);
			for (; v && *v; v++) {
				if (*v == ' ' || *v == '\t' || *v == '%')
					fprintf(srv->log, "%%%02X",
						(unsigned char)*v);
				else
					fputc(*v, srv->log);
			}
		}
		fputc('\n', srv->log);
		fflush(srv->log);
	}
	pthread_mutex_unlock(&srv->log_mu);
}

void origin__warn_conn(struct conn *c, const char *fmt, ...)
{
	va_list ap;

	if (c->srv->quiet)
		return;
	va_start(ap, fmt);
	fputs("pacefs-origin: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

/* metrics_opt: the checks of -o metrics=ADDR:PORT and -o
 * metrics_label=K=V, apart from the server and the series so that the
 * option table (and its fuzzer) links without them. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fs/base.h"
#include "fs/obs/obs.h"
#include "fs/obs/obs_int.h"

/* ---- -o metrics= ---- */

bool obs__metrics_addr_split(const char *spec, char *host, size_t cap,
			     char *port, size_t pcap, const char **why)
{
	const char *colon = strrchr(spec, ':');
	const char *h = spec, *hend = colon;
	unsigned long p;
	char *end;

	*why = "is not ADDR:PORT (e.g. 127.0.0.1:9101, [::1]:9101, "
	       "localhost:9101)";
	if (colon == NULL || colon == spec)
		return false;
	if (spec[0] == '[') {
		if (colon[-1] != ']' || colon - spec < 3)
			return false;
		h = spec + 1;
		hend = colon - 1;
	} else if (memchr(spec, ':', (size_t)(colon - spec)) != NULL) {
		*why = "names an IPv6 address without brackets ([::1]:9101)";
		return false;
	}
	errno = 0;
	p = strtoul(colon + 1, &end, 10);
	if (colon[1] < '0' || colon[1] > '9' || *end != '\0' || errno != 0 ||
	    p < 1 || p > 65535) {
		*why = "has no port from 1 to 65535";
		return false;
	}
	if ((size_t)(hend - h) >= cap) {
		*why = "has an address too long";
		return false;
	}
	memcpy(host, h, (size_t)(hend - h));
	host[hend - h] = '\0';
	snprintf(port, pcap, "%lu", p);
	return true;
}

int obs_metrics_addr_check(const char *spec, char *err, size_t errlen)
{
	char host[256], port[8];
	const char *why;

	if (obs__metrics_addr_split(spec, host, sizeof(host), port,
				    sizeof(port), &why))
		return 0;
	return fs__errf(err, errlen, -EINVAL, "option metrics: '%s' %s", spec,
			why);
}

/* ---- -o metrics_label= ---- */

static bool is_utf8(const char *s)
{
	uint32_t cp;

	for (size_t n; *s != '\0'; s += n) {
		n = (unsigned char)*s < 0x80 ? 1 : fs__utf8_seq(s, &cp);
		if (n == 0)
			return false;
	}
	return true;
}

int obs_metrics_label_check(const char *kv, char *const *prev, unsigned nprev,
			    char *err, size_t errlen)
{
	/* The labels pacefs's own series carry, and Prometheus's. */
	static const char *const ours[] = {
		"mount", "from",     "source", "proxy",	  "status",
		"class", "scope",    "le",     "version", "quantile",
		"job",	 "instance", NULL};
	const char *eq = strchr(kv, '=');
	size_t klen = eq != NULL ? (size_t)(eq - kv) : 0;

	for (size_t i = 0; i < klen; i++) {
		char c = kv[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      c == '_' || (i > 0 && c >= '0' && c <= '9')))
			klen = 0;
	}
	if (klen == 0 || (klen >= 2 && kv[0] == '_' && kv[1] == '_')) {
		return fs__errf(
			err, errlen, -EINVAL,
			"option metrics_label: '%s' is not NAME=VALUE with a "
			"name of letters, digits and '_' (not first a digit, "
			"not '__' first), e.g. site=lyon",
			kv);
	}
	for (int i = 0; ours[i] != NULL; i++)
		if (strlen(ours[i]) == klen && memcmp(ours[i], kv, klen) == 0) {
			return fs__errf(
				err, errlen, -EINVAL,
				"option metrics_label: pacefs sets the label "
				"'%s' itself",
				ours[i]);
		}
	for (unsigned i = 0; i < nprev; i++)
		if (strncmp(prev[i], kv, klen + 1) == 0) {
			return fs__errf(
				err, errlen, -EINVAL,
				"option metrics_label: '%.*s' is given twice",
				(int)klen, kv);
		}
	if (strlen(eq + 1) > 256 || !is_utf8(eq + 1)) {
		return fs__errf(
			err, errlen, -EINVAL,
			"option metrics_label: the value of '%.*s' is not "
			"UTF-8 of at most 256 bytes",
			(int)klen, kv);
	}
	return 0;
}

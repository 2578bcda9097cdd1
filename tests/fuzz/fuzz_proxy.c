/* fuzz_proxy: the -o proxy= parser (fetch_proxies_new): an accepted list
 * has 1 to FETCH_PROXIES_MAX entries whose names show no credentials, and
 * every choice lands on one of them; a refused one says so in one line
 * that names the option and shows no credentials either. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fetch/fetch.h"
#include "fetch/fetch_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fetch_proxies *list = NULL;
	struct fetch_proxy_info pi;
	char *s = malloc(size + 1), err[256];
	int rc;

	if (s == NULL)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';
	rc = fetch_proxies_new(s, 1000, &list, err, sizeof(err));
	if (rc != 0) {
		if (strncmp(err, "option proxy: ", 14) != 0 &&
		    strcmp(err, "out of memory") != 0)
			abort();
		if (strchr(err, '\n') != NULL)
			abort();
		free(s);
		return 0;
	}
	if (fetch_proxies_count(list) == 0 ||
	    fetch_proxies_count(list) > FETCH_PROXIES_MAX)
		abort();
	for (uint32_t i = 0; i < fetch_proxies_count(list); i++) {
		const char *name, *a;

		if (fetch_proxies_info(list, i, 0, &pi) != 0)
			abort();
		name = pi.name;
		a = strstr(name, "://");
		/* No userinfo left in what status shows. */
		if (strchr(a != NULL ? a + 3 : name, '@') != NULL)
			abort();
	}
	for (uint64_t c = 0; c < 4; c++) {
		int i = fetch__proxy_choose(list, s, c, 0, 0);

		if (i < 0 || (uint32_t)i >= fetch_proxies_count(list))
			abort();
		fetch__proxy_failed(list, i, 0);
	}
	fetch_proxies_free(list);
	free(s);
	return 0;
}

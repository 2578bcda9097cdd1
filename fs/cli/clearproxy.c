/* clearproxy: credentials a proxy would read. A request to an http://
 * origin goes to a proxy of -o proxy= whole, in clear: its Authorization
 * (a URL's userinfo, sent as Basic auth), its headers and its URL (a
 * presigned query) are the proxy's to read and log, where an https://
 * origin's travel inside a tunnel the proxy cannot open. So such a mount
 * is refused unless -o creds_via_proxy says the proxy is trusted. */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "fetch/fetch.h"
#include "fs/base.h"
#include "fs/cli/cli.h"
#include "fs/fs.h"
#include "fs/tree/tree.h"

/* True when the list has a proxy (an entry but DIRECT). */
static bool has_proxy(struct fetch_proxies *list)
{
	struct fetch_proxy_info info;

	for (uint32_t i = 0; i < fetch_proxies_count(list); i++)
		if (fetch_proxies_info(list, i, 0, &info) == 0 &&
		    strcmp(info.name, "DIRECT") != 0)
			return true;
	return false;
}

/* What of url's credentials a proxy would read in clear, or NULL: none,
 * or an https:// URL. headers: request headers go to its origin. */
static const char *clear_creds(const char *url, bool headers)
{
	if (strncmp(url, "http://", 7) != 0)
		return NULL;
	if (fetch_url_has_userinfo(url))
		return "its userinfo (sent as Basic auth)";
	if (fetch_url_signed(url))
		return "its signed query";
	if (headers)
		return "the request headers (-o header=, header_file= or "
		       "auth_command=)";
	return NULL;
}

int cli_proxy_clear_check(const struct fs_opts *o,
			  const struct tree_manifest *man,
			  struct fetch_proxies *proxies, char *err,
			  size_t errlen)
{
	bool headers = o->nheaders > 0 || o->nheader_files > 0 ||
		       o->auth_command != NULL;
	const char *url = NULL, *what = NULL;

	if (o->creds_via_proxy || proxies == NULL || !has_proxy(proxies))
		return 0;
	if (man == NULL) {
		what = clear_creds(o->url, headers);
		url = o->url;
		for (unsigned i = 0; what == NULL && i < o->nmirrors; i++) {
			what = clear_creds(o->mirrors[i], headers);
			url = o->mirrors[i];
		}
	}
	for (uint32_t i = 0; man != NULL && what == NULL && i < man->nfiles;
	     i++)
		for (uint32_t u = 0; what == NULL && u < man->files[i].nurls;
		     u++) {
			what = clear_creds(man->files[i].urls[u], headers);
			url = man->files[i].urls[u];
		}
	if (what == NULL)
		return 0;
	return fs__errf(err, errlen, -EPERM,
			"option proxy: %s: %s would reach the proxy in clear "
			"(an http:// origin), where it can be read and "
			"logged; use https://, or -o creds_via_proxy to send "
			"it through the proxy anyway",
			url, what);
}

/* keep: the blocking requests of a thread that asked for it keep one easy
 * handle, and with it their connections, from one request to the next. A
 * plan's worker probes one small file after another: each probe on a
 * handle of its own opened a new connection (and, over https, a new TLS
 * session) and left it closing, one per file. curl_easy_reset() clears a
 * handle's options but keeps its connections and caches. */
#include <curl/curl.h>

#include "fetch/fetch.h"
#include "fetch/fetch_int.h"

static _Thread_local bool keeping;
static _Thread_local CURL *kept;

void fetch_thread_keep(void)
{
	keeping = true;
}

void fetch_thread_release(void)
{
	keeping = false;
	if (kept != NULL)
		curl_easy_cleanup(kept);
	kept = NULL;
}

CURL *fetch__easy_take(void)
{
	if (!keeping)
		return curl_easy_init();
	if (kept == NULL)
		kept = curl_easy_init();
	else
		curl_easy_reset(kept);
	return kept;
}

void fetch__easy_give(CURL *easy)
{
	if (easy != NULL && easy != kept)
		curl_easy_cleanup(easy);
}

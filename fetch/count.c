/* count: every request that ends is told to the caller's on_request hook
 * (the metrics count requests, bytes and first bytes by source and
 * proxy), whether it ran on a lane's slot or synchronously. */
#include "fetch/fetch_int.h"

void fetch__request_ended(const struct fetch_config *cfg, CURL *easy,
			  const char *url, int proxy, bool lane)
{
	struct fetch_request_info r = {
		.url = url, .proxy = proxy, .lane = lane};
	curl_off_t bytes = 0, first = 0;

	if (cfg->on_request == NULL)
		return;
	curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &r.status);
	curl_easy_getinfo(easy, CURLINFO_SIZE_DOWNLOAD_T, &bytes);
	if (r.status != 0)
		curl_easy_getinfo(easy, CURLINFO_STARTTRANSFER_TIME_T, &first);
	r.bytes = bytes > 0 ? (uint64_t)bytes : 0;
	r.first_byte_us = first > 0 ? (uint64_t)first : 0;
	cfg->on_request(cfg->request_ctx, &r);
}

CURLMcode fetch__slot_attach(struct fetch_slot *s)
{
	CURLMcode mc = curl_multi_add_handle(s->f->multi, s->easy);

	s->attached = mc == CURLM_OK;
	return mc;
}

void fetch__slot_detach(struct fetch_slot *s)
{
	if (!s->attached)
		return;
	/* Before the handle leaves: a request cut mid-body reached the
	 * server, which logs it, and counts as one. */
	fetch__request_ended(&s->f->cfg, s->easy,
			     s->hop != NULL ? s->hop : s->url, s->proxy, true);
	curl_multi_remove_handle(s->f->multi, s->easy);
	s->attached = false;
}

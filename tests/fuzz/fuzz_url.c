/* fuzz_url: the userinfo parsers that decide what of a URL may be shown:
 * fetch_url_redacted, fetch__url_shown (the first input byte picks the
 * capacity) and fetch_text_redact leave no '@' in a URL's authority, a
 * redacted URL has no signed value left unmasked, and the redaction of a
 * URL is its text redaction's first URL. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fetch/fetch.h"
#include "fetch/fetch_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* True when the URL at the first "://" of s has an '@' in its authority
 * (up to '/', '?', '#', or white space when text). */
static bool authority_has_at(const char *s, bool text)
{
	const char *a = strstr(s, "://");

	if (a == NULL)
		return false;
	a += 3;
	return memchr(a, '@', strcspn(a, text ? "/?# \t\r\n" : "/?#")) != NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s, *r, *t, *shown;
	size_t cap, st, en;

	if (size < 1)
		return 0;
	cap = (size_t)data[0] + 1;
	s = malloc(size);
	shown = malloc(cap);
	if (s == NULL || shown == NULL)
		goto out;
	memcpy(s, data + 1, size - 1);
	s[size - 1] = '\0';
	r = fetch_url_redacted(s);
	if (r == NULL || authority_has_at(r, false))
		abort();
	/* Every signed value is masked: masking again changes nothing. */
	if (fetch_url_signed(r))
		abort();
	if (fetch_url_has_userinfo(s) != fetch_url_userinfo(s, &st, &en))
		abort();
	if (fetch_url_has_userinfo(s) && (en <= st || s[en - 1] != '@'))
		abort();
	fetch__url_shown(s, shown, cap);
	if (strlen(shown) >= cap || strncmp(shown, r, strlen(shown)) != 0)
		abort();
	t = strdup(s);
	if (t == NULL)
		abort();
	fetch_text_redact(t);
	/* No URL left in the text has userinfo. */
	for (const char *p = t; (p = strstr(p, "://")) != NULL; p += 3)
		if (authority_has_at(p, true))
			abort();
	free(t);
	free(r);
out:
	free(s);
	free(shown);
	return 0;
}

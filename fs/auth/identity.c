/* identity: the cache identity of a URL or of a URL and its mirrors: the
 * string a blob's cache id is made from and its record shows, which never
 * holds a URL's userinfo or signed values yet keeps two credentials for
 * one URL apart, and
 * keeps the bytes of one set of sources from serving another. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "fetch/fetch.h"
#include "fs/auth/auth.h"
#include "fs/base.h"

char *auth_url_identity(const char *url)
{
	bool userinfo = fetch_url_has_userinfo(url);
	const char *mark = userinfo ? "\n" AUTH_IDENTITY_USERINFO
				    : "\n" AUTH_IDENTITY_SIGNED;
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	char *bare, *out;
	size_t len;

	/* Without credentials the identity is what it always was, so that
	 * existing caches keep their bytes. */
	if (!userinfo && !fetch_url_signed(url)) {
		len = strlen(url) + 5;
		out = malloc(len);
		if (out != NULL)
			snprintf(out, len, "url:%s", url);
		return out;
	}
	/* Credentials may see other bytes: the whole URL's digest keeps
	 * them apart, and neither userinfo nor a signature is stored. A
	 * weak password can be guessed from a digest, as from the cache id
	 * itself. */
	if (EVP_Digest(url, strlen(url), md, &mdlen, EVP_sha256(), NULL) != 1)
		return NULL;
	bare = fetch_url_masked(url);
	if (bare == NULL)
		return NULL;
	len = 4 + strlen(bare) + strlen(mark) + 1 + 2 * mdlen;
	out = malloc(len);
	if (out != NULL) {
		size_t used =
			(size_t)snprintf(out, len, "url:%s%s", bare, mark);

		fs__hex(md, mdlen, out + used);
	}
	free(bare);
	return out;
}

static int url_cmp(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

char *auth_sources_identity(const char *const *urls, uint32_t n)
{
	static const char mark[] = "\n" AUTH_IDENTITY_MIRRORS;
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	const char **others = NULL;
	char *first, *out = NULL;
	EVP_MD_CTX *ctx = NULL;
	size_t len;

	first = auth_url_identity(urls[0]);
	if (first == NULL || n <= 1)
		return first;
	/* A mirror's bytes are stored under the blob's identity: a mount of
	 * the first URL with other mirrors, or alone, must not find them.
	 * The set counts, not its order. */
	others = malloc((n - 1) * sizeof(*others));
	ctx = EVP_MD_CTX_new();
	if (others == NULL || ctx == NULL ||
	    EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1)
		goto out;
	for (uint32_t i = 1; i < n; i++)
		others[i - 1] = urls[i];
	qsort(others, n - 1, sizeof(*others), url_cmp);
	for (uint32_t i = 0; i + 1 < n; i++)
		if (EVP_DigestUpdate(ctx, others[i], strlen(others[i]) + 1) !=
		    1)
			goto out;
	if (EVP_DigestFinal_ex(ctx, md, &mdlen) != 1)
		goto out;
	len = strlen(first) + sizeof(mark) + 2 * mdlen;
	out = malloc(len);
	if (out != NULL) {
		size_t used = (size_t)snprintf(out, len, "%s%s", first, mark);

		for (unsigned int i = 0; i < mdlen; i++)
			used += (size_t)snprintf(out + used, len - used, "%02x",
						 md[i]);
	}
out:
	EVP_MD_CTX_free(ctx);
	free(others);
	free(first);
	return out;
}

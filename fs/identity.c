/* identity: the cache identity of a URL: the string a blob's cache id is
 * made from and its record shows, which never holds the URL's userinfo
 * yet keeps two credentials for one URL apart. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "fs/fs_int.h"

char *fs__url_identity(const char *url)
{
	static const char mark[] = "\n" FS_IDENTITY_USERINFO;
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	char *bare, *out;
	size_t len;

	/* Without userinfo the identity is what it always was, so that
	 * existing caches keep their bytes. */
	if (!fetch_url_has_userinfo(url)) {
		len = strlen(url) + 5;
		out = malloc(len);
		if (out != NULL)
			snprintf(out, len, "url:%s", url);
		return out;
	}
	/* Credentials may see other bytes: the whole URL's digest keeps
	 * them apart, and no userinfo is stored. A weak password can be
	 * guessed from a digest, as from the cache id itself. */
	if (EVP_Digest(url, strlen(url), md, &mdlen, EVP_sha256(), NULL) != 1)
		return NULL;
	bare = fetch_url_redacted(url);
	if (bare == NULL)
		return NULL;
	len = 4 + strlen(bare) + sizeof(mark) + 2 * mdlen;
	out = malloc(len);
	if (out != NULL) {
		size_t used =
			(size_t)snprintf(out, len, "url:%s%s", bare, mark);

		fs__hex(md, mdlen, out + used);
	}
	free(bare);
	return out;
}

/* scrub: what /proc/PID/cmdline must not show once the options are read:
 * header values, and the credentials of URLs, mirrors and proxies (a
 * presigned URL's signature among them), overwritten in argv's own memory
 * before the daemon forks. */
#include <string.h>

#include "fetch/fetch.h"
#include "fs/fs.h"

/* Masks the userinfo of the URL at u with '*', its '@' kept, and the
 * values of its signed query parameters. */
static void mask_userinfo(char *u)
{
	size_t start, end;

	if (fetch_url_userinfo(u, &start, &end))
		memset(u + start, '*', end - start - 1);
	fetch_url_mask_signed(u);
}

/* Masks the credentials ("user:password@") of each proxy in the proxy
 * list [list, end): "A|B;C", entries with or without a scheme. */
static void mask_proxies(char *list, const char *end)
{
	char *entry = list;

	while (entry < end) {
		char *stop = entry, *at = NULL, *from = entry;

		while (stop < end && *stop != '|' && *stop != ';') {
			if (*stop == '@')
				at = stop;
			stop++;
		}
		for (char *q = entry; at != NULL && q + 2 < at; q++)
			if (q[0] == ':' && q[1] == '/' && q[2] == '/') {
				from = q + 3;
				break;
			}
		if (at != NULL)
			memset(from, '*', (size_t)(at - from));
		entry = stop + 1;
	}
}

/* Masks the secrets of one -o list: header values, mirrors' userinfo,
 * proxies' credentials.
 * Items end at a ',' that no backslash escapes, as libfuse reads them. */
static void scrub_optlist(char *list)
{
	char *item = list;

	while (*item != '\0') {
		char *end = item;

		while (*end != '\0' && *end != ',') {
			if (*end == '\\' && end[1] != '\0')
				end++;
			end++;
		}
		if (strncmp(item, "header=", 7) == 0) {
			char *v =
				memchr(item + 7, ':', (size_t)(end - item - 7));

			v = v != NULL ? v + 1 : item + 7;
			memset(v, '*', (size_t)(end - v));
		} else if (strncmp(item, "proxy=", 6) == 0) {
			mask_proxies(item + 6, end);
		} else if (strncmp(item, "mirror=", 7) == 0) {
			char saved = *end;

			*end = '\0';
			mask_userinfo(item + 7);
			*end = saved;
		}
		item = *end == ',' ? end + 1 : end;
	}
}

void fs_opts_scrub_argv(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "-o") == 0 && i + 1 < argc)
			scrub_optlist(argv[++i]);
		else if (strncmp(argv[i], "-o", 2) == 0)
			scrub_optlist(argv[i] + 2);
		else if (strncmp(argv[i], "http://", 7) == 0 ||
			 strncmp(argv[i], "https://", 8) == 0)
			mask_userinfo(argv[i]);
	}
}

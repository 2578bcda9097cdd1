/* cli_int: what the files of fs/cli/ share beneath cli.h; no file outside
 * fs/cli/ includes it. */
#ifndef FS_CLI_INT_H
#define FS_CLI_INT_H

#include <stddef.h>
#include <stdint.h>

struct fs_opts;
struct cache;
struct cache_id;

/* cli/urlfile.c. When the URL argument is "-", reads the URL from
 * -o url_file= (checked as a file of secrets: auth_file_check) or else
 * from standard input: its first line that is neither blank nor a '#'
 * comment becomes o->url, the others o's mirrors. A URL argument other
 * than "-" with url_file is refused. Returns 0 or a negative errno with
 * one line in err. */
int cli__url_read(struct fs_opts *o, char *err, size_t errlen);

/* cli/values.c. Writes n bytes as "512 B", "1.5 KiB", "12.0 MiB", ...;
 * returns buf. */
const char *cli__human_size(uint64_t n, char *buf, size_t cap);

/* cli/cachecmd.c. Resolves BLOB (a URL, an identity string, or an id
 * prefix of at least 4 hex digits) to one of ids[0..n). Returns 0, or 1
 * with a message on stderr. */
int cli__cache_resolve(const struct cache_id *ids, size_t n, const char *arg,
		       struct cache_id *out);

/* cli/regionscmd.c. `pacefs cache regions [clear BLOB...|--all]`: lists
 * the regions c remembers, or forgets them. Returns the exit status. */
int cli__cache_regions(struct cache *c, char **args, int nargs);

#endif

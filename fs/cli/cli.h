/* cli: the pacefs command line: the options (their table, parser and
 * usage; struct fs_opts and fs_opts_parse are fs.h's, the module's public
 * face), argv scrubbed once parsed, a URL read from url_file, the proxy
 * refusal, and the commands that need no mount of their own: `pacefs
 * status`, `pacefs cache` and `pacefs prefetch`. The driver uses it (it
 * dispatches the commands and checks what the options name); it uses obs/
 * (the metrics' option checks, the status document's size), auth/, the
 * tree's manifest type, cache/ and fetch/, never the driver, the engine,
 * nor FUSE's session. Only fs/ includes this. */
#ifndef FS_CLI_H
#define FS_CLI_H

#include <stddef.h>

struct fs_opts;
struct tree_manifest;
struct fetch_proxies;

/* `pacefs status [-w] [--json] MOUNTPOINT` (argv[1] is "status"): prints
 * the mount's files, lanes and cache; returns the exit status. */
int cli_status_command(int argc, char **argv);

/* `pacefs cache ls|stat|verify|evict|gc [--cache-dir DIR] [ARGS]`: argv is
 * the whole command line (argv[1] is "cache"). Prints to stdout, errors to
 * stderr; returns the exit status: 0, 1 (an error, or a mismatch found by
 * verify), 2 (usage). */
int cli_cache_command(int argc, char **argv);

/* `pacefs prefetch PATH...` (argv[1] is "prefetch"): reads each file
 * through the mount from start to end in 1 MiB reads, so that every byte
 * lands in the cache, with a progress bar on stderr when it is a terminal
 * and one summary line per file on stdout. Returns 0, or 1 when a file
 * could not be read to its end. */
int cli_prefetch_command(int argc, char **argv);

/* `pacefs plan [--name NAME] [-0] MOUNTPOINT [LIST|-]` and `pacefs plan
 * --clear [--name NAME] MOUNTPOINT` (argv[1] is "plan"): sets or clears a
 * read plan through the mount's control socket. Returns the exit
 * status. */
int cli_plan_command(int argc, char **argv);

/* The default cache directory (-o cache_dir=), a new string:
 * /var/cache/pacefs for root, else $XDG_CACHE_HOME/pacefs, else
 * $HOME/.cache/pacefs, else the account's home (getpwuid) +
 * /.cache/pacefs; never a shared, guessable path. NULL with the reason in
 * err when there is none. */
char *cli_default_cache_dir(char *err, size_t errlen);

/* cli/clearproxy.c. Refuses, unless o->creds_via_proxy, a mount
 * whose proxies (an entry but DIRECT) would carry credentials in clear:
 * an http:// URL (o's URL and mirrors, or man's URLs when man is not
 * NULL) with userinfo or a signed query (fetch_url_signed), or with
 * request headers to send (-o header=, header_file=, auth_command=).
 * Returns 0, or -EPERM with one line in err naming the URL, what would
 * be read, and the option that allows it. */
int cli_proxy_clear_check(const struct fs_opts *o,
			  const struct tree_manifest *man,
			  struct fetch_proxies *proxies, char *err,
			  size_t errlen);

#endif

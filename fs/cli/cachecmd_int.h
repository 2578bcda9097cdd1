/* cachecmd_int: the `pacefs cache` and `pacefs prefetch` subcommands; only
 * fs/driver/ includes this. */
#ifndef FS_CACHECMD_INT_H
#define FS_CACHECMD_INT_H

/* `pacefs cache ls|stat|verify|evict|gc [--cache-dir DIR] [ARGS]`: argv is
 * the whole command line (argv[1] is "cache"). Prints to stdout, errors to
 * stderr; returns the exit status: 0, 1 (an error, or a mismatch found by
 * verify), 2 (usage). */
int fs_cache_command(int argc, char **argv);

/* `pacefs prefetch PATH...` (argv[1] is "prefetch"): reads each file
 * through the mount from start to end in 1 MiB reads, so that every byte
 * lands in the cache, with a progress bar on stderr when it is a terminal
 * and one summary line per file on stdout. Returns 0, or 1 when a file
 * could not be read to its end. */
int fs_prefetch_command(int argc, char **argv);

#endif

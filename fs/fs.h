/* fs: the FUSE driver that joins pacing, fetch and cache into a mounted
 * read-only filesystem, and the pacefs command line. */
#ifndef FS_H
#define FS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <fuse_opt.h>

/* Runs the pacefs command (mount and serve); returns the exit status. */
int fs_main(int argc, char **argv);

/* What the command line asked for. Strings are owned by the struct and
 * freed by fs_opts_free(). */
/* Connections of the whole mount (-o lanes=), and to one origin
 * (-o host_lanes=): an origin's lanes grow to the second while each adds
 * rate; the first bounds many origins together. */
#define FS_LANES 32
#define FS_HOST_LANES 16

/* A sequential reader's lead (-o readahead=): what players buffer. */
#define FS_READAHEAD_MS 3000

/* -o chunk=: from a cache block (the default: a random read pulls one
 * block) to the largest request. */
#define FS_CHUNK_MIN (64u * 1024u)
#define FS_CHUNK_MAX (8u * 1024u * 1024u)

/* -o inflight_max=: at least the largest request pacing makes. The
 * default keeps 64 files read at once far below 256 MiB of RSS (docs/
 * pacing.md, "Memory") and still covers what 16 connections of 8 MB/s
 * bring in their round trips and a request's time. */
#define FS_INFLIGHT_MIN (8u * 1024u * 1024u)
#define FS_INFLIGHT_DEFAULT (32u * 1024u * 1024u)

/* -o speculate=: a scattered reader's file up to this size may be
 * fetched whole on idle lanes (docs/pacing.md, "Speculative fill"). */
#define FS_SPECULATE_DEFAULT (64u * 1024u * 1024u)

struct fs_opts {
	char *url;	/* the URL, a URL ending in '/', or a manifest's path;
			   "-" until cli__url_read reads it */
	char *url_file; /* -o url_file=FILE: the URL, not an argument */
	bool show_signatures; /* -o show_signatures: signed values shown */
	char *mountpoint;
	char *cache_dir;
	char *name;
	char **mirrors; /* -o mirror=URL, repeatable */
	unsigned nmirrors;
	char **headers; /* -o header="Name: value", repeatable */
	unsigned nheaders;
	char **header_files; /* -o header_file=FILE, read again on change */
	unsigned nheader_files;
	char *auth_command;  /* -o auth_command=CMD */
	char *endpoint;	     /* -o endpoint=URL (S3) */
	char *region;	     /* -o region= (S3) */
	char *s3_addressing; /* -o s3_addressing=path|virtual */
	bool creds_readable; /* -o creds_readable: no mode check */
	char *cafile;
	char *proxy;		/* -o proxy="A|B;C;DIRECT" */
	bool creds_via_proxy;	/* -o creds_via_proxy: http:// credentials
				   may go through it */
	unsigned proxy_reset_s; /* a failed proxy is asked again after */
	bool has_sha256;	/* -o sha256=HEX */
	uint8_t sha256[32];
	bool insecure;
	bool cache_shared;   /* -o cache_shared: no ownership check */
	unsigned lanes;	     /* connections of the whole mount */
	unsigned host_lanes; /* connections to one origin */
	unsigned connect_timeout_s;
	unsigned read_timeout_s;
	unsigned stall_timeout_s;
	unsigned retry_after_max_s; /* the longest a 429/503 holds a source */
	unsigned readahead_ms; /* a sequential reader's lead, in time of its
				  consumption */
	uint64_t chunk;	       /* every request covers whole chunks of this
				  many bytes, aligned (a power of two) */
	uint64_t inflight_max; /* bytes requested and not yet received, over
				  the mount */
	uint64_t speculate;    /* speculative fill: files up to this size
				  whole; 0: off */
	int listahead; /* -o listahead=: 0 on, 1 off (a directory opened in
			  its listing's order is read ahead) */
	unsigned listing_ttl_s;
	unsigned attr_timeout_s;
	unsigned entry_timeout_s;
	int log_level;	       /* 0 error, 1 warning, 2 info, 3 debug */
	int log_format;	       /* 0 text, 1 json (-o log_format=) */
	char *metrics;	       /* -o metrics=ADDR:PORT; NULL: no endpoint */
	char **metrics_labels; /* -o metrics_label=K=V, repeatable */
	unsigned nmetrics_labels;
	int64_t revalidate_s; /* -1: always; INT64_MAX: never */
	uint64_t cache_size;  /* 0: unlimited */
	int cache_sync;	      /* enum cache_sync */
	bool foreground;
	bool debug;
	bool show_help;
	bool show_version;
	struct fuse_args fuse_args; /* options left for libfuse */
};

/* Parses argv. On error writes one line naming the bad option or argument
 * into err and returns -EINVAL; *out is then freed. */
int fs_opts_parse(int argc, char **argv, struct fs_opts *out, char *err,
		  size_t errlen);

void fs_opts_free(struct fs_opts *o);

/* Overwrites, in argv's own memory, what /proc/PID/cmdline must not show
 * once the options are parsed: the values of -o header= (the name stays)
 * and the userinfo and signed query values (fetch_url_signed) of URL
 * arguments and -o mirror= ('*' each). Items separate as libfuse
 * separates them. */
void fs_opts_scrub_argv(int argc, char **argv);

/* Prints the usage and every option, with its default, on stdout (-h). */
void fs_opts_usage(void);

/* The i-th -o option of the parser's table as --help and the man page
 * write it ("lanes=N"; a flag's name alone: "insecure") in buf (cap
 * bytes); NULL past the last. What tests hold docs/pacefs.1 and
 * README.md to. */
const char *fs_opts_form(size_t i, char *buf, size_t cap);

/* Derives the file name from a URL: its last path segment, query and
 * fragment removed, percent-decoded. Returns -EINVAL (with the reason in
 * err) when the segment is empty, ".", "..", or decodes to a '/' or NUL. */
int fs_name_from_url(const char *url, char *out, size_t cap, char *err,
		     size_t errlen);

/* Parses a size: digits with an optional K, M, G or T (powers of 1024,
 * optionally followed by "iB" or "B"). -EINVAL when it is not one. */
int fs_parse_size(const char *v, uint64_t *out);

/* Checks a file name given by -o name=. */
int fs_name_check(const char *name, char *err, size_t errlen);

#endif

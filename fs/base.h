/* base: what every room of fs/ shares, from the C library alone: the
 * log's levels (each room logs through the driver's log, the engine and
 * the credentials through a hook), the monotonic clock, hex digits, the
 * escaping of text a server chose (fs/escape.c), the decoding of
 * percent-escapes and hex digests (fs/decode.c) and the error line a function
 * hands its caller (fs/errline.c). */
#ifndef FS_BASE_H
#define FS_BASE_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

enum fs_log_level { FS_LOG_ERR, FS_LOG_WARN, FS_LOG_INFO, FS_LOG_DEBUG };

/* What a log line is about, for a log a collector parses (-o
 * log_format=json): each member NULL or 0 where the line has none. The
 * text log says the same in its sentence. Strings are borrowed for the
 * call. */
struct fs_log_fields {
	const char *blob;    /* the file's name */
	const char *source;  /* a URL (shown without its userinfo) */
	uint64_t start, end; /* the bytes [start, end); end 0: none */
	long status;	     /* an HTTP status; 0: none */
	const char *error;   /* the error's class: "transient", "throttled",
				"gone", "fatal", "local", "stalled",
				"timeout", "unavailable", "changed",
				"digest", "credentials" */
};

/* A log line through a room's log hook (a configuration's `log` and
 * `log_ctx`, the driver's obs_log_hook); nothing when log is NULL. One
 * wrapper for every room that logs beneath the driver. */
__attribute__((format(printf, 4, 5))) static inline void
fs__log_via(void (*log)(void *ctx, enum fs_log_level level, const char *fmt,
			va_list ap),
	    void *ctx, enum fs_log_level level, const char *fmt, ...)
{
	va_list ap;

	if (log == NULL)
		return;
	va_start(ap, fmt);
	log(ctx, level, fmt, ap);
	va_end(ap);
}

/* The monotonic clock, in nanoseconds: what the scheduler, the log's rate
 * limit and the listings' ages count in. */
static inline uint64_t fs__now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Writes the n bytes at d as 2n lowercase hex digits and a NUL into out
 * (2n + 1 bytes); returns out. */
static inline char *fs__hex(const uint8_t *d, size_t n, char *out)
{
	static const char digits[] = "0123456789abcdef";

	for (size_t i = 0; i < n; i++) {
		out[2 * i] = digits[d[i] >> 4];
		out[2 * i + 1] = digits[d[i] & 15];
	}
	out[2 * n] = '\0';
	return out;
}

/* The value of a hex digit, or -1. */
static inline int fs__hexval(char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	if (ch >= 'A' && ch <= 'F')
		return ch - 'A' + 10;
	return -1;
}

/* fs/escape.c. Copies s into out (cap > 0 bytes, always NUL-terminated,
 * cut when full) with every byte a terminal or a log reader could take for
 * something else written as \xNN: control bytes (< 0x20, 0x7f), UTF-8 C1
 * controls (U+0080..U+009F) and bytes that are not well-formed UTF-8.
 * Returns out. */
char *fs__escape(const char *s, char *out, size_t cap);

/* fs/escape.c. Writes s as the inside of a JSON string (no quotes) into
 * out (cap bytes, NUL-terminated when cap > 0, cut at a whole escape or
 * sequence when full): '"' and '\\' escaped, control characters (C0,
 * DEL, C1) as \u escapes, a byte that is not well-formed UTF-8 as
 * \ufffd, so that the document always parses and holds no raw control
 * byte. Returns the length the whole of it needs, as snprintf does. */
size_t fs__json_escape(const char *s, char *out, size_t cap);

/* The length of the well-formed UTF-8 sequence of two to four bytes at s
 * (its code point in *cp), or 0: ASCII, a stray or overlong byte, a
 * surrogate, a cut sequence. Reads up to s's NUL. */
size_t fs__utf8_seq(const char *s, uint32_t *cp);

/* fs__pct_decode's flags: where the rules of a URL's path, an HTML
 * index's href and S3's encoding-type=url differ. FS_PCT_PLUS: '+' is a
 * space, as S3's encoding-type=url and forms write one; without it '+'
 * is itself (RFC 3986). */
#define FS_PCT_PLUS 1u

/* fs/decode.c. Decodes the percent-escapes of [s, s + len) into out: %XX
 * with two hex digits inside the range is the byte XX; a '%' without them
 * stays as it is. Writes at most cap - 1 bytes and a NUL, its length in
 * *outlen; out may be s, for the result is never longer. Returns 0;
 * -EINVAL when the result would hold a NUL byte, escaped or not (no file
 * name or S3 key can); -ENAMETOOLONG when it does not fit in cap,
 * whichever comes first; out then holds no string. */
int fs__pct_decode(const char *s, size_t len, unsigned flags, char *out,
		   size_t cap, size_t *outlen);

/* fs/decode.c. Decodes the 2n hex digits (either case) of [s, s + len)
 * into out (n bytes), written only on success. Returns 0; -EINVAL when
 * len is not 2n; -EILSEQ when a byte is no hex digit, the first one's
 * index in *at. */
int fs__unhex(const char *s, size_t len, uint8_t *out, size_t n, size_t *at);

/* fs/errline.c. Formats one error line into err (errlen > 0 bytes) and
 * returns rc (a negative errno), so that a failing function says what
 * went wrong and returns in one statement. A line longer than the buffer
 * loses its middle (fetch_text_vformat), never the reason at its end. */
int fs__errf(char *err, size_t errlen, int rc, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

#endif

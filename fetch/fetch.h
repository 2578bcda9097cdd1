/* fetch: HTTP(S) range transfers on lanes, over libcurl's multi interface,
 * driven from one event thread. */
#ifndef FETCH_H
#define FETCH_H

struct fetch;
struct fetch_auth;

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Contract.
 *
 * A fetch instance owns one event thread running curl_multi_poll(). Each
 * turn of its loop it calls hooks->on_tick(), where the caller decides what
 * to start, shorten or cancel (fetch_lane_*), then it moves bytes: every
 * body byte of a range response is passed to hooks->on_data() with its
 * absolute offset in the blob, and every transfer ends with exactly one
 * hooks->on_done(). All hooks run on the event thread; fetch_lane_* may only
 * be called from inside a hook.
 *
 * A response is accepted only if it is a 206 whose Content-Range start, end
 * and total equal what was asked, whose body length matches, and (when the
 * target has a validator) whose ETag or Last-Modified equals it (a stream
 * target's: a 200 whose Content-Length, when sent, is the size). Anything
 * else ends the transfer with a classified outcome and a reason for the log;
 * bytes past a failed check are never passed on.
 *
 * Functions return 0 or a negative errno; CURLcode and HTTP status map to
 * enum fetch_outcome at this edge.
 */

enum fetch_outcome {
	FETCH_OK,	 /* every byte of [start, end) was delivered */
	FETCH_CANCELLED, /* fetch_lane_cancel() */
	FETCH_TRANSIENT, /* 5xx, reset, timeout, short body, a response
			    curl cannot take (a header over its limit):
			    retry later */
	FETCH_THROTTLED, /* 429 or 503: wait retry_after_ms */
	FETCH_GONE,	 /* 401, 403, 404, 410: this source will not serve */
	FETCH_FATAL,	 /* validator, size or Content-Range mismatch, a 200
			    to a range request: never mix these bytes */
	FETCH_LOCAL,	 /* a local failure (curl setup), never what a
			    response did */
};

struct fetch_result {
	enum fetch_outcome outcome;
	long status;		 /* HTTP status, 0 if none was received */
	uint64_t retry_after_ms; /* from Retry-After; 0 if none */
	uint64_t received;	 /* body bytes passed to on_data */
	uint64_t length;	 /* FETCH_OK of a no_length target: the
				    stream's whole length (where its body
				    ended); else 0 */
	bool blob_changed;	 /* FETCH_FATAL because the source now serves
				    another version (validator or size) */
	bool auth_refused;	 /* FETCH_GONE for the credentials: a 401 or
				    403 (or S3's error of an expired token)
				    to a request that carried the headers
				    or the key (with cfg.auth, after a
				    newer set was asked for) */
	char reason[256];	 /* for the log: step and cause */
};

/* The most body bytes one on_data() call passes. */
#define FETCH_BUFFER_BYTES (512u * 1024u)

enum fetch_log_level {
	FETCH_LOG_ERR,
	FETCH_LOG_WARN,
	FETCH_LOG_INFO,
	FETCH_LOG_DEBUG
};

/* One HTTP request that ended, as on_request (fetch_config) hears of
 * it: each hop of a redirect, each proxy a request went through, a
 * request sent ahead and dropped, a probe's and a document's. */
struct fetch_request_info {
	const char *url; /* where it went (userinfo included: never show it
			    as it is); valid for the call */
	int proxy;	 /* the entry of cfg->proxies it went through; -1:
			    no list */
	long status;	 /* the response's status; 0: none came */
	uint64_t bytes;	 /* body bytes received */
	uint64_t first_byte_us; /* from its start to the response's first
				   byte; 0: none came */
	bool lane;		/* a lane's range transfer (else synchronous) */
};

struct fetch_config {
	uint32_t max_lanes;
	long connect_timeout_ms;
	const char *cafile; /* NULL: the system CA bundle */
	bool insecure;	    /* skip TLS verification */
	/* The proxy list (-o proxy=, fetch_proxies_new), shared by every
	 * request of the mount: probe, GET and lanes; borrowed for the
	 * instance's life. NULL: curl's environment variables
	 * (http_proxy, https_proxy, no_proxy) decide. */
	struct fetch_proxies *proxies;
	/* Requests cover whole chunks of this many bytes (a power of two;
	 * 0: 64 KiB): a request's stripe (this, 1 MiB at least) picks its
	 * proxy, and a request retried on another proxy starts at its
	 * chunk's start. */
	uint64_t chunk;
	const char *const *headers; /* "Name: value" (never logged), sent
				       on every request and redirect hop
				       whose URL has one of header_origins;
				       borrowed for the instance's life */
	size_t nheaders;
	/* The origins ("scheme://host:port", as fetch_url_origin writes
	 * them) the headers were given for; borrowed. None: the headers go
	 * nowhere. */
	const char *const *header_origins;
	size_t nheader_origins;
	/* Credentials that change (fetch_auth_*): when set, its current
	 * set's headers and SigV4 key are what goes to header_origins
	 * (headers above are then unused); borrowed. */
	struct fetch_auth *auth;
	/* Synchronous requests only (fetch_probe, fetch_get, fetch_get_any;
	 * the lanes ignore these): the request, its redirects, retries and
	 * wait for credentials end by deadline_ms (CLOCK_MONOTONIC, in ms;
	 * 0: none) with -ETIMEDOUT, and within about a second of stop(
	 * stop_arg) becoming true with -ECANCELED, so that no caller waits
	 * past its own deadline or past the end of the mount. */
	uint64_t deadline_ms;
	bool (*stop)(void *arg);
	void *stop_arg;
	/* Send every URL's path as given, dot segments too
	 * (CURLOPT_PATH_AS_IS): an object store's key "a/../x" names that
	 * object, not "x". */
	bool path_as_is;
	/* Called once for every request that ends (each attempt that was
	 * sent), on the thread that ran it (the event thread for lanes): it
	 * must not block nor call fetch. NULL: nobody is told. */
	void (*on_request)(void *ctx, const struct fetch_request_info *r);
	void *request_ctx;
};

struct fetch_hooks {
	void *ctx;
	void (*on_data)(void *ctx, uint32_t lane, uint64_t off, const void *buf,
			size_t len);
	void (*on_done)(void *ctx, uint32_t lane,
			const struct fetch_result *res);
	/* Called every loop turn; returns how long the loop may sleep, in
	 * milliseconds, if nothing happens. */
	long (*on_tick)(void *ctx);
	void (*log)(void *ctx, enum fetch_log_level level, const char *msg);
};

/* What a lane requests from. Strings are borrowed: they must stay valid
 * until the transfer's on_done. A redirect is followed on every request
 * (see fetch_probe for the rules). */
struct fetch_target {
	const char *url;       /* where each request starts */
	const char *validator; /* strong ETag or Last-Modified; NULL: none */
	uint64_t size;	       /* total size the source must report */
	bool if_match;	/* pin the validator with If-Match (a changed blob
			   answers 412) rather than If-Range: object
			   stores */
	bool no_cache;	/* send Cache-Control: no-cache: a cache on
			   the way must ask the origin (bytes that
			   failed their digest are fetched again) */
	bool stream;	/* the source ignores Range (its probe had a 200):
			   the lane sends a plain GET, takes a 200 whose
			   Content-Length is size, and passes on_data the
			   body's bytes from `start` on (those before it are
			   received and dropped: a stream restarted after a
			   lost connection comes again from byte 0) */
	bool no_length; /* with stream: the source sends no length, size
			   is unknown (0): the body's clean end, before
			   the lane's end, is FETCH_OK with its length */
};

/*
 * Proxies (fetch/proxy.c): -o proxy="A|B;C;DIRECT", as CernVM-FS takes it.
 * ';' separates groups tried in order, '|' the members of a group, which
 * share its load: a blob is cut in stripes (cfg->chunk, 1 MiB at least),
 * each owned by one member (an even share each, the same owner on every
 * machine; a member down gives its stripes to the others, and no other
 * stripe moves), and a lane's request goes through a proxy as pieces of
 * one stripe, each to its owner, so that every machine asks a stripe of
 * the same proxy whatever its request boundaries and each proxy caches
 * its share. A piece cut mid-way (a cancel, a lowered end) is received
 * to its end and dropped, so that the proxy keeps the slice it was
 * fetching; on_done comes at the cut all the same. No If-Range goes
 * through a proxy (the response's validator is compared instead).
 * DIRECT (alone in its group) means no proxy. A proxy
 * fails when it cannot be reached, its connection breaks, it refuses a
 * tunnel or it answers 502, 504 or a 503 without Retry-After (its own
 * errors: anything else is the origin's answer, passed through); the
 * request is then sent at once to the next member, or to the next group,
 * and is no fault of its source unless every proxy failed it. An answer
 * through a proxy that fails the checks (a 200 to a range, another
 * Content-Range, an encoding) is a bad answer of that proxy: it fails as
 * above, is counted in `bad`, and the next route is asked; another size
 * or validator after a no-cache retry sends the request to the next
 * route too, and is a bad answer once a route serves the pinned version.
 * FETCH_FATAL and blob_changed come only from DIRECT (or no list) or from
 * the last route. A failed
 * proxy is left out for the reset interval, unless it answers before
 * (when every proxy failed, the one that failed longest ago is asked).
 * A proxy that served bytes failing their digest is excluded for the
 * mount's life (fetch_proxies_exclude). The list is thread-safe.
 */
struct fetch_proxies;

#define FETCH_PROXIES_MAX 16	  /* entries, DIRECT included */
#define FETCH_PROXY_SPEC_MAX 4096 /* bytes of the -o proxy= value */
#define FETCH_PROXY_RESET_MS 300000u

/* Parses spec into a list whose failed proxies are retried after
 * reset_ms. Returns 0, or -EINVAL with one line in err ("option proxy:
 * ...") naming the part that is wrong (a proxy's credentials left out), or
 * -ENOMEM. Writes *out only on success. */
int fetch_proxies_new(const char *spec, uint64_t reset_ms,
		      struct fetch_proxies **out, char *err, size_t errlen);

/* NULL-safe. No request may be using the list. */
void fetch_proxies_free(struct fetch_proxies *list);

/* Entries in the list; 0 for NULL. */
uint32_t fetch_proxies_count(const struct fetch_proxies *list);

enum fetch_proxy_state {
	FETCH_PROXY_OK,
	FETCH_PROXY_FAILED,   /* left out until retry_in_ms passes */
	FETCH_PROXY_EXCLUDED, /* served wrong bytes: never used again */
};

struct fetch_proxy_info {
	const char *name; /* without credentials, or "DIRECT"; valid while
			     the list is */
	uint32_t group;	  /* from 1 */
	enum fetch_proxy_state state;
	uint64_t retry_in_ms;
	uint64_t requests; /* sent through it, retries included */
	uint64_t failures;
	uint64_t bytes;	 /* body bytes of range responses */
	uint64_t hits;	 /* responses its X-Cache (or Age) said came from */
	uint64_t misses; /* its cache, or not */
	uint64_t bad;	 /* answers refused (counted in failures too): a
			    200 to a range, another Content-Range, size
			    or validator than the origin's, an encoded or
			    longer body, bytes failing their digest */
};

/* Entry i's state and counters at now_ms (CLOCK_MONOTONIC). Returns 0 or
 * -ENOENT past the end. */
int fetch_proxies_info(struct fetch_proxies *list, uint32_t i, uint64_t now_ms,
		       struct fetch_proxy_info *out);

/* Marks entry i (not DIRECT) failed now, as a request it failed would:
 * for a lane through it that stalled or slowed to a fraction of its rate,
 * which only the caller sees. Any thread. */
void fetch_proxies_fail(struct fetch_proxies *list, int i);

/* Excludes entry i (not DIRECT) for good. Returns 1 if it was not
 * excluded before, else 0. Any thread. */
int fetch_proxies_exclude(struct fetch_proxies *list, int i);

/* The proxy the lane's open request went through: its index, or -1 (no
 * list, none yet, or DIRECT). Event thread only (a hook). */
int fetch_lane_proxy(struct fetch *f, uint32_t lane);

/* What a cache on the way said of a response: 1 a hit, -1 a miss, 0 not
 * said. x_cache is an X-Cache value (HIT, MISS, "HIT from squid",
 * hit-fresh, TCP_MISS, STALE, ...: the first word), age an Age value (over
 * 0: a hit; 0: a miss); either may be NULL. */
int fetch_parse_x_cache(const char *x_cache, const char *age);

/* libcurl's version string, for pacefs -V. */
const char *fetch_version(void);

/* Initialises libcurl globally; call once before any thread starts. */
int fetch_global_init(void);

/* Creates an instance with max_lanes lane slots; does not start the
 * thread. Writes *out only on success. */
int fetch_new(const struct fetch_config *cfg, const struct fetch_hooks *hooks,
	      struct fetch **out);

/* Starts the event thread. */
int fetch_start(struct fetch *f);

/* Wakes the event thread so that it calls on_tick soon. Any thread. */
void fetch_wake(struct fetch *f);

/* Stops the thread (cancelling open transfers without on_done) and frees
 * everything. fetch_free(NULL) is a no-op. */
void fetch_free(struct fetch *f);

/* Starts GET Range: bytes=start-(end-1) on an idle lane. Event thread only.
 * -EBUSY if the lane is busy, -EINVAL for a bad range, -ENOMEM. */
int fetch_lane_start(struct fetch *f, uint32_t lane,
		     const struct fetch_target *t, uint64_t start,
		     uint64_t end);

/* Sends GET Range: bytes=start-(end-1) ahead, on a connection of its own,
 * as the lane's next request behind its open one (PACE_ACT_QUEUE): its
 * body is held until fetch_lane_start() names exactly this lane and range,
 * which then promotes it instead of asking again. A request sent ahead
 * that the turn after the open request's end does not promote, a cancel of
 * the lane, or a failure before its promotion drops it without on_done.
 * Event thread only. -EINVAL if the lane is idle or the range bad. */
int fetch_lane_queue(struct fetch *f, uint32_t lane,
		     const struct fetch_target *t, uint64_t start,
		     uint64_t end);

/* Lowers the end of the lane's open request: bytes at or past `end` are
 * not delivered and the transfer ends with FETCH_OK once `end` is reached.
 * Event thread only. */
void fetch_lane_set_end(struct fetch *f, uint32_t lane, uint64_t end);

/* Aborts the lane's transfer; its on_done (FETCH_CANCELLED) is called
 * before this returns. Event thread only. */
void fetch_lane_cancel(struct fetch *f, uint32_t lane);

/* Stops reading the lane's open transfer (pause) or reads it again: a
 * stream held ahead of its readers, whose server's window then holds
 * what it has not sent. Going on may pass bytes to on_data before this
 * returns. Event thread only, not under a lock on_data takes. -EINVAL
 * for a lane with no transfer under way. */
int fetch_lane_pause(struct fetch *f, uint32_t lane, bool pause);

/* What a probe learned about a URL. */
struct fetch_probe {
	uint64_t size;
	bool ranges;		 /* answered a range request with 206; false:
				    with a 200 (the whole blob: Range
				    ignored) */
	bool no_length;		 /* that 200 had no length (chunked, or
				    ended by the connection's close):
				    size is 0 and unknown */
	char etag[256];		 /* "" if none */
	bool etag_weak;		 /* W/ prefix */
	char last_modified[128]; /* "" if none */
	char *final_url;	 /* after redirects, whole (owned: see
				    fetch_probe_free) */
	int64_t mtime;		 /* Last-Modified, seconds since the epoch;
				    -1 if unknown */
	long status;
	char proxy_note[384]; /* "" or, for the log: the last proxy
				 whose answer was refused (a 200 to the
				 range, another Content-Range) before
				 the next route was asked */
	uint8_t *body;	      /* the first nbody bytes of the blob, when
				 more than one was asked (owned: see
				 fetch_probe_free); NULL: none */
	size_t nbody;
};

/* How a probe failed, so the caller can tell an origin that is down
 * (serve from the cache) from one that refuses (an error). */
enum fetch_probe_error {
	FETCH_PROBE_OK,
	FETCH_PROBE_UNREACHABLE, /* resolve, connect, timeout, TLS handshake */
	FETCH_PROBE_REFUSED,	 /* an HTTP error status */
	FETCH_PROBE_UNSUITABLE,	 /* no Range support, bad Content-Range */
};

/*
 * Redirects. Every request (probe, GET, range transfer) follows them itself,
 * at most 8 hops: a hop from https to http is refused (FETCH_GONE, a
 * reason naming both URLs); the configured headers go only to a hop whose
 * origin is one of cfg->header_origins; the userinfo of the first URL
 * (which curl sends as Basic auth) goes only to hops of that URL's own
 * origin. Reasons and err lines show URLs without userinfo.
 */

/* Synchronously probes url with a range GET of its first byte: size, Range
 * support, validators, final URL. With first > 1 it asks the first `first`
 * bytes instead and keeps them in out->body (all of them, or all the blob
 * has when it is shorter): a small file's probe brings its bytes in the
 * same round trip. no_cache (a revalidation: has the file changed?)
 * sends Cache-Control: no-cache, so that a cache on the way asks the
 * origin rather than answer with its copy. A 5xx or 429 answer is tried again a
 * few times (honouring a short Retry-After) before it counts. On failure writes
 * a one-line reason naming the URL and the cause into err and returns a
 * negative errno; *kind says which class of failure it was; *out then owns
 * nothing. On success free out's strings with fetch_probe_free. Not for the
 * event thread. */
int fetch_probe(const struct fetch_config *cfg, const char *url, bool no_cache,
		size_t first, struct fetch_probe *out,
		enum fetch_probe_error *kind, char *err, size_t errlen);

/* Frees what a successful probe allocated; NULL-safe, idempotent. */
void fetch_probe_free(struct fetch_probe *p);

/* From fetch_thread_keep() to fetch_thread_release(), the calling thread's
 * blocking requests (fetch_probe, fetch_get, fetch_get_any) share one curl
 * handle and keep its connections open for the next: a thread that probes
 * file after file pays a connection's handshakes once per origin, not once
 * per file. A thread that keeps calls fetch_thread_release() before it
 * waits for long (its connections would stay open, idle) and before it
 * exits. */
void fetch_thread_keep(void);
void fetch_thread_release(void);

/* Synchronously GETs url (a small document such as a directory index) into
 * *body (NUL-terminated, at most max bytes; free() it), and, when final is
 * not NULL, the URL it came from after redirects into *final (free() it).
 * Anything but a 200 is an error, with one line naming the URL and the
 * cause in err. Not for the event thread. */
int fetch_get(const struct fetch_config *cfg, const char *url, size_t max,
	      char **body, size_t *len, char **final, char *err, size_t errlen);

/* Parses "bytes S-E/T" (T may be "*"; total_out then UINT64_MAX) or
 * "bytes * /T" (unsatisfied: start and end UINT64_MAX). Returns 0 or
 * -EINVAL. */
int fetch_parse_content_range(const char *v, uint64_t *start_out,
			      uint64_t *end_incl_out, uint64_t *total_out);

/* The largest blob size pacefs takes: a file's size is an off_t. */
#define FETCH_SIZE_MAX ((uint64_t)INT64_MAX)

/* Parses a Content-Length value (decimal digits, surrounding white space
 * allowed). Returns 0, -EINVAL (empty, not digits, or past 64 bits) or
 * -EFBIG (over FETCH_SIZE_MAX, written to *out all the same). */
int fetch_parse_content_length(const char *v, uint64_t *out);

/* True when a Content-Encoding (transfer false) or Transfer-Encoding
 * (transfer true) value leaves the bytes as stored: an empty list or only
 * "identity" (and "chunked", which curl undoes, for Transfer-Encoding),
 * case-insensitive, comma-separated. Any other coding would make the body
 * something else than the blob's bytes. */
bool fetch_coding_is_identity(const char *v, bool transfer);

/* Parses a Retry-After value (delta-seconds or an HTTP date relative to
 * now_s, seconds since the epoch) into milliseconds; -EINVAL if neither. */
int fetch_parse_retry_after(const char *v, int64_t now_s, uint64_t *ms_out);

/* URLs (fetch/url.c). Secrets travel only to the origin they were given
 * for, and a URL's userinfo ("user:password@") is never shown; nor, unless
 * fetch_url_show_signatures says otherwise, the values of its query's
 * signed parameters: those whose name's last word (after '-', '_' or
 * '.'), without case, is signature, sig, token, credential(s), secret,
 * key, apikey, password or passwd (X-Amz-Signature, X-Amz-Security-Token,
 * X-Goog-Signature, sig, access_token, api_key, ...), which a presigned
 * URL carries as a bearer credential. Such a value is shown as "***". */

/* Whether fetch_url_redacted, fetch_text_redact and the transfers' lines
 * show signed values as given (show true) or masked (the default). Call
 * it before any thread that shows a URL starts. */
void fetch_url_show_signatures(bool show);

/* True when url's query holds a signed parameter with a value. */
bool fetch_url_signed(const char *url);

/* Overwrites, in place, each signed value of url's query with '*', its
 * length kept: what a process's arguments keep of a URL. */
void fetch_url_mask_signed(char *url);

/* Where url's userinfo ("user:password@", the '@' included) is: true with
 * [*start, *end) when it has one. Its authority runs from "://" to the
 * first '/', '?' or '#'; the userinfo to its last '@'. */
bool fetch_url_userinfo(const char *url, size_t *start, size_t *end);

/* True when url carries userinfo. */
bool fetch_url_has_userinfo(const char *url);

/* url without its userinfo and with its signed values masked (unless
 * fetch_url_show_signatures), as a new string (free() it): what logs,
 * status and listings show. NULL when memory ran out. A string that is no
 * URL comes back without the signed values of what follows its first
 * '?'. */
char *fetch_url_redacted(const char *url);

/* The same, its signed values masked whatever fetch_url_show_signatures
 * says: what is stored (a cache identity). */
char *fetch_url_masked(const char *url);

/* url's origin as a new string "scheme://host:port" (lowercase host,
 * default port filled in; free() it). Returns 0, -EINVAL (not a URL
 * curl can parse), -ENOMEM. */
int fetch_url_origin(const char *url, char **out);

/* True when a and b parse and have the same scheme, host and port. */
bool fetch_url_same_origin(const char *a, const char *b);

/* Removes, in place, the userinfo of every URL in a line of text (after
 * each "://", up to the last '@' before a '/', '?', '#' or white space)
 * and masks its signed values (unless fetch_url_show_signatures; the URL
 * ends at white space or a quote): the last guard before a line reaches
 * a log or a terminal. */
void fetch_text_redact(char *text);

/* Fits whole into buf (cap bytes); a line longer than cap - 1 bytes by
 * leaving out its middle, marked with how many bytes were: the start
 * names the step and the source, the end says what went wrong (a long URL
 * sits in between), and both survive, cut at UTF-8 sequence boundaries. */
void fetch_text_fit(char *buf, size_t cap, const char *whole);

/* vsnprintf into buf (cap > 0 bytes); a line that does not fit loses its
 * middle (fetch_text_fit), not its end, so that an error's reason
 * survives a long URL. */
void fetch_text_vformat(char *buf, size_t cap, const char *fmt, va_list ap);

/* fetch_text_vformat with fetch_text_redact applied to the whole line
 * before it is cut (so that a cut never leaves part of a userinfo or of a
 * signed value behind); a line too long for buf whose whole could not be
 * formatted (memory ran out) becomes "(a line too long to show)". What
 * every log and terminal line of fs/ goes through. */
void fetch_text_vformat_redacted(char *buf, size_t cap, const char *fmt,
				 va_list ap);

/* The one way a function of fetch/ (and, through fs__errf, of fs/) writes
 * the error line its caller shows: formats it into err (errlen > 0
 * bytes) as fetch_text_vformat does, cut in its middle when too long,
 * and returns rc (a negative errno), so that a failing function says
 * what went wrong and returns in one statement. fetch_text_verrf takes
 * a va_list. */
int fetch_text_errf(char *err, size_t errlen, int rc, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
int fetch_text_verrf(char *err, size_t errlen, int rc, const char *fmt,
		     va_list ap) __attribute__((format(printf, 4, 0)));

/* Credentials that change (fetch/auth.c). A fetch_auth holds the current
 * set; each request takes the set current when it starts (by reference:
 * a new set never changes a request under way). A request that the
 * origin refuses for its credentials (401, 403, or a 400 whose S3 error
 * is ExpiredToken, InvalidToken, TokenRefreshRequired or RequestExpired)
 * asks for new ones through the on_expired callback and is tried once
 * more with the set that comes (or, after FETCH_AUTH_WAIT_MS, with the
 * one there is); only then is it refused. Thread-safe. */
#define FETCH_AUTH_WAIT_MS 10000

/* One set of credentials, as fetch_auth_set copies it. */
struct fetch_cred {
	const char *s3_id; /* SigV4 access key id and secret; NULL: none */
	const char *s3_secret;
	const char *s3_token;	    /* a session token; NULL: none */
	const char *const *headers; /* "Name: value" */
	size_t nheaders;
};

/* A holder of credentials that signs with SigV4 for region (curl's
 * "aws:amz:REGION:s3"; NULL: it never signs). Has no set until the first
 * fetch_auth_set. -ENOMEM, -EINVAL (a region too long). */
int fetch_auth_new(const char *region, struct fetch_auth **out);

/* After every fetch instance and request that use it. NULL: no-op. */
void fetch_auth_free(struct fetch_auth *a);

/* Makes a copy of c the current set; requests under way keep theirs.
 * Returns its generation (from 1 up), or 0 when memory ran out (the old
 * set stays). Wakes requests waiting for newer credentials. */
uint64_t fetch_auth_set(struct fetch_auth *a, const struct fetch_cred *c);

/* The generation of the newest set, or of the last fetch_auth_again. */
uint64_t fetch_auth_gen(struct fetch_auth *a);

/* Says that no newer set will come for now: requests waiting for one are
 * sent once more with the set there is (and refused for good if it is
 * refused again). */
void fetch_auth_again(struct fetch_auth *a);

/* cb(ctx, gen) is called when a request with the set of generation gen
 * was refused: it should bring a newer set (fetch_auth_set) soon, the same
 * one again when there is no other. It runs on the refused request's
 * thread (the event thread too) and must not block. */
void fetch_auth_on_expired(struct fetch_auth *a,
			   void (*cb)(void *ctx, uint64_t gen), void *ctx);

/* Synchronously GETs url into *body (NUL-terminated, at most max bytes;
 * free() it) whatever the status, which goes to *status: for documents
 * whose error answers are documents too (an S3 listing). A refusal for
 * credentials is tried again as fetch_auth says. Returns 0, or -EIO with
 * one line in err when no answer came (-ETIMEDOUT past cfg->deadline_ms,
 * -ECANCELED once cfg->stop says so). Not for the event thread. */
int fetch_get_any(const struct fetch_config *cfg, const char *url, size_t max,
		  char **body, size_t *len, long *status, char *err,
		  size_t errlen);

/* Maps an HTTP status of a failed range request to an outcome. */
enum fetch_outcome fetch_classify_status(long status);

#endif

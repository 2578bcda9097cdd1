/* s3: pacefs-origin's S3 mode: each directory under the root is a bucket and
 * each file under it a key; answers ListObjectsV2 (and v1) from the files,
 * S3's XML errors, and checks SigV4 with botocore (s3verify.py, a process
 * of its own), with keys that a file names and that change while it runs. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "contrib/origin/s3.h"

#define S3_KEYS_MAX 16
#define S3_MEMO 1024
/* The longest line the verifier is given: every field hex-encoded. */
#define S3_LINE_MAX (4 * 16384)
#define S3_SKEW_SECS (15 * 60)

struct s3_key {
	char id[128];
	char secret[128];
	char token[2048]; /* "": a long-term key */
};

struct s3_memo {
	uint64_t hash;
	char *line;
	char sig[65];
};

struct s3_origin {
	struct s3_config cfg;
	char root[PATH_MAX];
	char region[64];
	pthread_mutex_t mu; /* guards what follows */
	struct s3_key keys[S3_KEYS_MAX];
	size_t nkeys;
	struct stat keys_st; /* of the keys file when it was read */
	FILE *to, *from;     /* the verifier's stdin and stdout */
	pid_t pid;
	struct s3_memo memo[S3_MEMO];
};

/* --- a growing text ------------------------------------------------------ */

struct text {
	char *buf;
	size_t len, cap;
	bool oom;
};

static void put(struct text *t, const char *s, size_t n)
{
	if (t->oom)
		return;
	if (t->len + n + 1 > t->cap) {
		size_t cap = t->cap ? t->cap : 4096;
		char *nb;

		while (cap < t->len + n + 1)
			cap *= 2;
		nb = realloc(t->buf, cap);
		if (nb == NULL) {
			t->oom = true;
			return;
		}
		t->buf = nb;
		t->cap = cap;
	}
	memcpy(t->buf + t->len, s, n);
	t->len += n;
	t->buf[t->len] = '\0';
}

static void putf(struct text *t, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void putf(struct text *t, const char *fmt, ...)
{
	char buf[1024];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (n > 0)
		put(t, buf,
		    (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1);
}

/* s with XML's special characters escaped; bytes XML 1.0 cannot carry
 * (control bytes) as a character reference, as S3 writes them. */
static void put_xml(struct text *t, const char *s)
{
	for (; *s != '\0'; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '&')
			put(t, "&amp;", 5);
		else if (c == '<')
			put(t, "&lt;", 4);
		else if (c == '>')
			put(t, "&gt;", 4);
		else if (c == '"')
			put(t, "&quot;", 6);
		else if (c == '\'')
			put(t, "&apos;", 6);
		else if (c < 0x20)
			putf(t, "&#x%X;", c);
		else
			put(t, s, 1);
	}
}

/* s as S3 writes it under encoding-type=url: form encoding, a space as '+',
 * every byte but unreserved ones and '/' as %XX. */
static void put_url(struct text *t, const char *s)
{
	for (; *s != '\0'; s++) {
		unsigned char c = (unsigned char)*s;

		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		    (c >= '0' && c <= '9') || strchr("-._~/", c) != NULL)
			put(t, s, 1);
		else if (c == ' ')
			put(t, "+", 1);
		else
			putf(t, "%%%02X", c);
	}
}

static void put_field(struct text *t, bool url, const char *s)
{
	if (url)
		put_url(t, s);
	else
		put_xml(t, s);
}

/* --- errors ----------------------------------------------------------------
 */

static int s3_error(struct s3_answer *a, int status, const char *code,
		    const char *extra, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));

/* --s3-hostile entity: error documents carry the entity too. Set once,
 * before any request (s3_origin_new); the process has one S3 origin. */
static bool hostile_error_entity;

/* The hostile entity: 100 KB declared once in the DTD, used this many
 * times in a Key (about 300 MB once expanded). */
#define S3_ENTITY_BYTES 102400
#define S3_ENTITY_USES 3000

/* The prolog and a DTD declaring entity "e" of S3_ENTITY_BYTES, for a
 * document whose root is root. */
static void put_entity_dtd(struct text *t, const char *root)
{
	putf(t,
	     "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
	     "<!DOCTYPE %s [<!ENTITY e \"",
	     root);
	for (int i = 0; i < S3_ENTITY_BYTES / 64; i++)
		put(t,
		    "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
		    "xxxxxx",
		    64);
	put(t, "\">]>\n", 5);
}

static void put_entity_uses(struct text *t)
{
	for (int i = 0; i < S3_ENTITY_USES; i++)
		put(t, "&e;", 3);
}

/* An S3 error document: Code, Message, extra elements (already XML). */
static int s3_error(struct s3_answer *a, int status, const char *code,
		    const char *extra, const char *fmt, ...)
{
	struct text t = {0};
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (hostile_error_entity) {
		put_entity_dtd(&t, "Error");
		putf(&t, "<Error><Code>%s</Code><Message>", code);
		put_entity_uses(&t);
	} else {
		putf(&t,
		     "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
		     "<Error><Code>%s</Code><Message>",
		     code);
	}
	put_xml(&t, msg);
	putf(&t, "</Message>%s<RequestId>pacefs-origin</RequestId></Error>",
	     extra != NULL ? extra : "");
	if (t.oom) {
		free(t.buf);
		return -ENOMEM;
	}
	a->status = status;
	a->body = t.buf;
	a->len = t.len;
	snprintf(a->code, sizeof(a->code), "%s", code);
	return 0;
}

/* What check_auth returns once it built an error answer: 1, or what
 * building it failed with. */
static int answered(int rc)
{
	return rc != 0 ? rc : 1;
}

/* --- keys ------------------------------------------------------------------
 */

/* Reads the keys file again when it changed (its inode, size or mtime), so
 * that a test rotates keys and tokens under a running mount. Caller holds
 * s->mu. */
static void keys_reload(struct s3_origin *s)
{
	char line[4096];
	struct stat st;
	FILE *fp;

	if (s->cfg.keys_path == NULL || stat(s->cfg.keys_path, &st) != 0)
		return;
	if (st.st_ino == s->keys_st.st_ino &&
	    st.st_size == s->keys_st.st_size &&
	    st.st_mtim.tv_sec == s->keys_st.st_mtim.tv_sec &&
	    st.st_mtim.tv_nsec == s->keys_st.st_mtim.tv_nsec)
		return;
	fp = fopen(s->cfg.keys_path, "r");
	if (fp == NULL)
		return;
	s->keys_st = st;
	s->nkeys = 0;
	while (fgets(line, sizeof(line), fp) != NULL &&
	       s->nkeys < S3_KEYS_MAX) {
		struct s3_key *k = &s->keys[s->nkeys];
		int n;

		if (line[0] == '#')
			continue;
		k->token[0] = '\0';
		n = sscanf(line, "%127s %127s %2047s", k->id, k->secret,
			   k->token);
		if (n >= 2)
			s->nkeys++;
	}
	fclose(fp);
}

/* --- the verifier ------------------------------------------------------- */

static int verifier_start(struct s3_origin *s, char *err, size_t errlen)
{
	int in[2], out[2];
	pid_t pid;

	if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0) {
		snprintf(err, errlen, "pipe: %s", strerror(errno));
		return -errno;
	}
	pid = fork();
	if (pid < 0) {
		snprintf(err, errlen, "fork: %s", strerror(errno));
		return -errno;
	}
	if (pid == 0) {
		sigset_t none;

		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		dup2(in[0], 0);
		dup2(out[1], 1);
		/* Debian's python, where python3-botocore lives. */
		execl("/usr/bin/python3", "python3", s->cfg.verifier,
		      (char *)NULL);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	s->pid = pid;
	s->to = fdopen(in[1], "w");
	s->from = fdopen(out[0], "r");
	if (s->to == NULL || s->from == NULL) {
		snprintf(err, errlen, "fdopen: %s", strerror(errno));
		return -ENOMEM;
	}
	return 0;
}

static uint64_t fnv(const char *s)
{
	uint64_t h = 1469598103934665603ull;

	for (; *s != '\0'; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

/* Asks the verifier for the signature of line; an answer for the same
 * line (requests of one object in one second sign the same text) is
 * remembered. Returns 0 with sig, or -EIO with the verifier's reason. */
static int verifier_ask(struct s3_origin *s, const char *line, char sig[65],
			char *why, size_t whylen)
{
	uint64_t h = fnv(line);
	struct s3_memo *m = &s->memo[h % S3_MEMO];
	char answer[512];
	size_t n;
	int rc = 0;

	pthread_mutex_lock(&s->mu);
	if (m->line != NULL && m->hash == h && strcmp(m->line, line) == 0) {
		memcpy(sig, m->sig, 65);
		goto out;
	}
	if (fputs(line, s->to) < 0 || fputc('\n', s->to) < 0 ||
	    fflush(s->to) != 0 ||
	    fgets(answer, sizeof(answer), s->from) == NULL) {
		snprintf(why, whylen, "the verifier is gone");
		rc = -EIO;
		goto out;
	}
	n = strcspn(answer, "\n");
	answer[n] = '\0';
	if (n != 64) {
		snprintf(why, whylen, "%.200s", answer);
		rc = -EIO;
		goto out;
	}
	memcpy(sig, answer, 65);
	free(m->line);
	m->line = strdup(line);
	m->hash = h;
	memcpy(m->sig, sig, 65);
out:
	pthread_mutex_unlock(&s->mu);
	return rc;
}

static void put_hex(struct text *t, const char *s, size_t n)
{
	static const char hex[] = "0123456789abcdef";

	for (size_t i = 0; i < n; i++) {
		char pair[2] = {hex[(unsigned char)s[i] >> 4],
				hex[(unsigned char)s[i] & 15]};

		put(t, pair, 2);
	}
}

int s3_hostile_parse(const char *spec, struct s3_config *cfg, char *err,
		     size_t errlen)
{
	static const struct {
		const char *name;
		unsigned bit;
	} modes[] = {
		{"same-token", S3_HOSTILE_SAME_TOKEN},
		{"new-token", S3_HOSTILE_NEW_TOKEN},
		{"cycle-token", S3_HOSTILE_CYCLE_TOKEN},
		{"entity", S3_HOSTILE_ENTITY},
		{"entity-error", S3_HOSTILE_ENTITY_ERROR},
		{"nul-key", S3_HOSTILE_NUL_KEY},
		{"dotdot-keys", S3_HOSTILE_DOTDOT_KEYS},
	};

	while (*spec != '\0') {
		size_t n = strcspn(spec, ",");
		bool known = false;

		for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++)
			if (strlen(modes[i].name) == n &&
			    strncmp(spec, modes[i].name, n) == 0) {
				cfg->hostile |= modes[i].bit;
				known = true;
			}
		if (!known && n > 10 && strncmp(spec, "slow-list:", 10) == 0) {
			char *end;
			unsigned long ms = strtoul(spec + 10, &end, 10);

			if (end == spec + n && ms <= 600000) {
				cfg->slow_list_ms = (unsigned)ms;
				known = true;
			}
		}
		if (!known) {
			snprintf(err, errlen,
				 "unknown mode '%.*s' (same-token, new-token, "
				 "cycle-token, entity, entity-error, nul-key, "
				 "dotdot-keys, slow-list:MS)",
				 (int)n, spec);
			return -EINVAL;
		}
		spec += n;
		if (*spec == ',')
			spec++;
	}
	return 0;
}

int s3_origin_new(const struct s3_config *cfg, struct s3_origin **out,
		  char *err, size_t errlen)
{
	struct s3_origin *s = calloc(1, sizeof(*s));
	char sig[65], why[256];
	int rc;

	if (s == NULL) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	s->cfg = *cfg;
	snprintf(s->root, sizeof(s->root), "%s", cfg->root);
	snprintf(s->region, sizeof(s->region), "%s", cfg->region);
	s->cfg.root = s->root;
	s->cfg.region = s->region;
	pthread_mutex_init(&s->mu, NULL);
	rc = verifier_start(s, err, errlen);
	if (rc != 0)
		return rc;
	/* One request signed by hand, so that a missing python3-botocore
	 * is one line at start rather than a 500 per request. */
	rc = verifier_ask(s,
			  "474554 2f  686f73743a610a 41 42 75732d656173742d31 "
			  "3230323630313031543030303030305a",
			  sig, why, sizeof(why));
	if (rc != 0) {
		snprintf(err, errlen,
			 "--s3: the verifier (/usr/bin/python3 %s) does not "
			 "work: %s (is python3-botocore installed?)",
			 cfg->verifier, why);
		return rc;
	}
	pthread_mutex_lock(&s->mu);
	keys_reload(s);
	pthread_mutex_unlock(&s->mu);
	hostile_error_entity = (cfg->hostile & S3_HOSTILE_ENTITY) != 0;
	*out = s;
	return 0;
}

/* --- requests ------------------------------------------------------------ */

static const char *header(const struct s3_request *rq, const char *name)
{
	for (size_t i = 0; i < rq->nh; i++)
		if (strcasecmp(rq->h[i].name, name) == 0)
			return rq->h[i].value;
	return NULL;
}

/* Percent-decodes [s, s + n) into out (cap bytes); '+' is a space when
 * form is true (a query). -EINVAL for a bad escape or a NUL. */
static int decode(const char *s, size_t n, bool form, char *out, size_t cap)
{
	size_t o = 0;

	for (size_t i = 0; i < n; i++) {
		char c = s[i];

		if (c == '%') {
			unsigned v;

			if (i + 2 >= n || sscanf(s + i + 1, "%2x", &v) != 1 ||
			    v == 0)
				return -EINVAL;
			c = (char)v;
			i += 2;
		} else if (c == '+' && form) {
			c = ' ';
		}
		if (o + 1 >= cap)
			return -ENAMETOOLONG;
		out[o++] = c;
	}
	out[o] = '\0';
	return 0;
}

/* The value of query parameter name in the query q, decoded into out;
 * false when absent. */
static bool query_get(const char *q, const char *name, char *out, size_t cap)
{
	size_t nl = strlen(name);

	while (q != NULL && *q != '\0') {
		const char *amp = strchr(q, '&');
		size_t len = amp != NULL ? (size_t)(amp - q) : strlen(q);

		if (len >= nl && strncmp(q, name, nl) == 0 &&
		    (len == nl || q[nl] == '=')) {
			if (len == nl) {
				out[0] = '\0';
				return true;
			}
			return decode(q + nl + 1, len - nl - 1, true, out,
				      cap) == 0;
		}
		q = amp != NULL ? amp + 1 : NULL;
	}
	return false;
}

/* Checks rq's SigV4 Authorization against botocore's computation with the
 * key it names, and the session token that key needs. 0 when it passes;
 * else the error is in *a. */
static int check_auth(struct s3_origin *s, const struct s3_request *rq,
		      struct s3_answer *a)
{
	const char *auth = header(rq, "authorization"), *p;
	const char *date = header(rq, "x-amz-date");
	const char *sha = header(rq, "x-amz-content-sha256");
	const char *token = header(rq, "x-amz-security-token");
	char id[128], day[16], region[64], service[16], signed_h[512],
		given[80], sig[65], why[256], extra[160];
	struct s3_key key;
	struct text line = {0}, hdrs = {0};
	const char *query = strchr(rq->target, '?');
	bool found = false, token_signed = false;
	struct tm tm;
	int rc;

	if (auth == NULL) {
		if (s->cfg.anonymous)
			return 0;
		return answered(s3_error(a, 403, "AccessDenied", NULL,
					 "Access Denied"));
	}
	if (sscanf(auth,
		   "AWS4-HMAC-SHA256 Credential=%127[^/]/%15[^/]/%63[^/]/"
		   "%15[^/]/aws4_request, SignedHeaders=%511[^,], "
		   "Signature=%79s",
		   id, day, region, service, signed_h, given) != 6)
		return answered(
			s3_error(a, 400, "AuthorizationHeaderMalformed", NULL,
				 "The authorization header is malformed"));
	pthread_mutex_lock(&s->mu);
	keys_reload(s);
	for (size_t i = 0; i < s->nkeys && !found; i++)
		if (strcmp(s->keys[i].id, id) == 0) {
			key = s->keys[i];
			found = true;
		}
	pthread_mutex_unlock(&s->mu);
	if (!found)
		return answered(
			s3_error(a, 403, "InvalidAccessKeyId", NULL,
				 "The AWS Access Key Id you provided does not "
				 "exist in our records."));
	if (strcmp(region, s->region) != 0) {
		snprintf(extra, sizeof(extra), "<Region>%s</Region>",
			 s->region);
		return answered(s3_error(a, 400, "AuthorizationHeaderMalformed",
					 extra,
					 "The authorization header is "
					 "malformed; the region '%s' is "
					 "wrong; expecting '%s'",
					 region, s->region));
	}
	if (sha == NULL)
		return answered(
			s3_error(a, 400, "InvalidRequest", NULL,
				 "Missing required header for this request: "
				 "x-amz-content-sha256"));
	memset(&tm, 0, sizeof(tm));
	if (date == NULL || strptime(date, "%Y%m%dT%H%M%SZ", &tm) == NULL ||
	    strncmp(date, day, 8) != 0 || strcmp(service, "s3") != 0)
		return answered(s3_error(a, 403, "AccessDenied", NULL,
					 "AWS authentication requires a valid "
					 "X-Amz-Date and credential scope"));
	if (llabs((long long)(timegm(&tm) - time(NULL))) > S3_SKEW_SECS)
		return answered(
			s3_error(a, 403, "RequestTimeTooSkewed", NULL,
				 "The difference between the request time and "
				 "the current time is too large."));
	/* The fields botocore signs: the signed headers' values as they
	 * came, several of one name joined by ','. */
	for (p = signed_h; *p != '\0';) {
		size_t n = strcspn(p, ";");
		char name[128];
		bool any = false;

		snprintf(name, sizeof(name), "%.*s", (int)n, p);
		token_signed |= strcmp(name, "x-amz-security-token") == 0;
		put(&hdrs, name, strlen(name));
		put(&hdrs, ":", 1);
		for (size_t i = 0; i < rq->nh; i++)
			if (strcasecmp(rq->h[i].name, name) == 0) {
				if (any)
					put(&hdrs, ",", 1);
				put(&hdrs, rq->h[i].value,
				    strlen(rq->h[i].value));
				any = true;
			}
		put(&hdrs, "\n", 1);
		p += n;
		if (*p == ';')
			p++;
	}
	put_hex(&line, rq->method, strlen(rq->method));
	put(&line, " ", 1);
	put_hex(&line, rq->target,
		query != NULL ? (size_t)(query - rq->target)
			      : strlen(rq->target));
	put(&line, " ", 1);
	put_hex(&line, query != NULL ? query + 1 : "",
		query != NULL ? strlen(query + 1) : 0);
	put(&line, " ", 1);
	put_hex(&line, hdrs.buf != NULL ? hdrs.buf : "", hdrs.len);
	put(&line, " ", 1);
	put_hex(&line, id, strlen(id));
	put(&line, " ", 1);
	put_hex(&line, key.secret, strlen(key.secret));
	put(&line, " ", 1);
	put_hex(&line, region, strlen(region));
	put(&line, " ", 1);
	put_hex(&line, date, strlen(date));
	if (line.oom || hdrs.oom || line.len > S3_LINE_MAX) {
		rc = answered(
			s3_error(a, 400, "RequestHeaderSectionTooLarge", NULL,
				 "Your request header section exceeds the "
				 "maximum allowed size."));
		goto out;
	}
	rc = verifier_ask(s, line.buf, sig, why, sizeof(why));
	if (rc != 0) {
		rc = answered(s3_error(a, 400, "InvalidRequest", NULL,
				       "The signature could not be checked: %s",
				       why));
		goto out;
	}
	if (strcmp(sig, given) != 0) {
		rc = answered(
			s3_error(a, 403, "SignatureDoesNotMatch", NULL,
				 "The request signature we calculated does not "
				 "match the signature you provided. Check your "
				 "key and signing method."));
		goto out;
	}
	/* A session's key needs its current token, signed. */
	if (key.token[0] != '\0' && (token == NULL || !token_signed))
		rc = answered(
			s3_error(a, 403, "InvalidToken", NULL,
				 "The provided token is malformed or otherwise "
				 "invalid."));
	else if (key.token[0] != '\0' && strcmp(token, key.token) != 0)
		rc = answered(s3_error(a, 400, "ExpiredToken", NULL,
				       "The provided token has expired."));
	else if (key.token[0] == '\0' && token != NULL)
		rc = answered(
			s3_error(a, 403, "InvalidToken", NULL,
				 "The provided token is malformed or otherwise "
				 "invalid."));
	else
		rc = 0;
out:
	free(line.buf);
	free(hdrs.buf);
	return rc;
}

/* --- listings ---------------------------------------------------------- */

struct keys {
	char **k;
	size_t n, cap;
	bool oom;
};

static int key_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Adds every regular file under dir (root/bucket/rel) as a key "rel/name"
 * to ks, depth first. */
static void walk(const char *bucket_dir, const char *rel, struct keys *ks,
		 int depth)
{
	char full[PATH_MAX];
	struct dirent *d;
	DIR *dp;

	if (depth > 64)
		return;
	snprintf(full, sizeof(full), "%s/%s", bucket_dir, rel);
	dp = opendir(full);
	if (dp == NULL)
		return;
	while ((d = readdir(dp)) != NULL && !ks->oom) {
		char child[PATH_MAX], path[PATH_MAX * 2];
		struct stat st;

		if (strcmp(d->d_name, ".") == 0 || strcmp(d->d_name, "..") == 0)
			continue;
		snprintf(child, sizeof(child), "%s%s%s", rel,
			 rel[0] != '\0' ? "/" : "", d->d_name);
		snprintf(path, sizeof(path), "%s/%s", bucket_dir, child);
		if (lstat(path, &st) != 0)
			continue;
		if (S_ISDIR(st.st_mode)) {
			walk(bucket_dir, child, ks, depth + 1);
		} else if (S_ISREG(st.st_mode)) {
			if (ks->n == ks->cap) {
				size_t cap = ks->cap ? ks->cap * 2 : 256;
				char **nk = realloc(ks->k, cap * sizeof(*nk));

				if (nk == NULL) {
					ks->oom = true;
					break;
				}
				ks->k = nk;
				ks->cap = cap;
			}
			ks->k[ks->n] = strdup(child);
			if (ks->k[ks->n] == NULL)
				ks->oom = true;
			else
				ks->n++;
		}
	}
	closedir(dp);
}

static void hex_encode(const char *s, char *out, size_t cap)
{
	size_t o = 0;

	for (; *s != '\0' && o + 3 < cap; s++)
		o += (size_t)snprintf(out + o, cap - o, "%02x",
				      (unsigned char)*s);
	out[o] = '\0';
}

static int hex_decode(const char *s, char *out, size_t cap)
{
	size_t o = 0;

	for (; s[0] != '\0'; s += 2) {
		unsigned v;

		if (s[1] == '\0' || sscanf(s, "%2x", &v) != 1 || v == 0 ||
		    o + 1 >= cap)
			return -EINVAL;
		out[o++] = (char)v;
	}
	out[o] = '\0';
	return 0;
}

/* --s3-hostile dotdot-keys: a path segment ".." of a key is "..dotdot" on
 * disk (to_disk), and back. */
static void dotdot_map(const char *in, char *out, size_t cap, bool to_disk)
{
	const char *from = to_disk ? ".." : "..dotdot";
	const char *to = to_disk ? "..dotdot" : "..";
	size_t o = 0;

	out[0] = '\0';
	while (*in != '\0' || o == 0) {
		size_t n = strcspn(in, "/");
		bool hit = n == strlen(from) && strncmp(in, from, n) == 0;

		o += (size_t)snprintf(out + o, o < cap ? cap - o : 0, "%.*s",
				      hit ? (int)strlen(to) : (int)n,
				      hit ? to : in);
		in += n;
		if (*in == '/') {
			o += (size_t)snprintf(out + o, o < cap ? cap - o : 0,
					      "/");
			in++;
			if (*in == '\0')
				break;
		} else {
			break;
		}
	}
}

/* A listed key or prefix: as on disk, or with "..dotdot" as "..". */
static void put_key(const struct s3_origin *s, struct text *t, bool url,
		    const char *k)
{
	char shown[PATH_MAX];

	if (s->cfg.hostile & S3_HOSTILE_DOTDOT_KEYS) {
		dotdot_map(k, shown, sizeof(shown), false);
		k = shown;
	}
	put_field(t, url, k);
}

/* ListObjectsV2 (v2) or ListObjects (v1) of bucket from the files under
 * its directory; keys and prefixes in byte order, common prefixes rolled
 * up at the delimiter, at most max-keys entries a page. */
static int list_bucket(struct s3_origin *s, const char *bucket,
		       const char *bucket_dir, const char *query, bool v2,
		       struct s3_answer *a)
{
	char prefix[PATH_MAX] = "", delim[64] = "", token[PATH_MAX * 2] = "",
	     after[PATH_MAX] = "", num[32], enc[16] = "", last[PATH_MAX] = "";
	char dir[PATH_MAX], *slash;
	unsigned max = s->cfg.max_keys;
	struct keys ks = {0};
	struct text t = {0}, body = {0};
	size_t count = 0, i;
	bool url, truncated = false, has_token, empty = false;
	unsigned hostile = s->cfg.hostile;
	static atomic_uint fresh; /* new-token's counter */
	char hostile_next[64] = "", shown_prefix[PATH_MAX];
	int rc = 0;

	if (s->cfg.slow_list_ms > 0) {
		struct timespec ts = {
			.tv_sec = s->cfg.slow_list_ms / 1000,
			.tv_nsec =
				(long)(s->cfg.slow_list_ms % 1000) * 1000000L};

		nanosleep(&ts, NULL);
	}
	if (hostile & S3_HOSTILE_ENTITY_ERROR) {
		bool was = hostile_error_entity;
		int r;

		/* One answer with the entity, whatever the mode says of the
		 * others. */
		hostile_error_entity = true;
		r = s3_error(a, 403, "AccessDenied", NULL, "Access Denied");
		hostile_error_entity = was;
		return r;
	}
	query_get(query, "prefix", prefix, sizeof(prefix));
	snprintf(shown_prefix, sizeof(shown_prefix), "%s", prefix);
	if (hostile & S3_HOSTILE_DOTDOT_KEYS) {
		char disk[PATH_MAX];

		dotdot_map(prefix, disk, sizeof(disk), true);
		snprintf(prefix, sizeof(prefix), "%s", disk);
	}
	query_get(query, "delimiter", delim, sizeof(delim));
	query_get(query, "encoding-type", enc, sizeof(enc));
	url = strcmp(enc, "url") == 0;
	if (query_get(query, "max-keys", num, sizeof(num))) {
		char *end;
		unsigned long v = strtoul(num, &end, 10);

		if (*end != '\0' || num[0] == '\0')
			return s3_error(a, 400, "InvalidArgument", NULL,
					"Provided max-keys not an integer or "
					"within integer range");
		if (v < max)
			max = (unsigned)v;
	}
	has_token = v2 && query_get(query, "continuation-token", token,
				    sizeof(token));
	if (has_token && strncmp(token, "pacefs-", 7) == 0) {
		/* A hostile mode's token: same-token starts again from the
		 * first page; the others' pages after the first are
		 * empty. */
		after[0] = '\0';
		empty = (hostile & S3_HOSTILE_SAME_TOKEN) == 0;
	} else if (has_token) {
		if (hex_decode(token, after, sizeof(after)) != 0)
			return s3_error(a, 400, "InvalidArgument", NULL,
					"The continuation token provided is "
					"incorrect");
	} else if (!query_get(query, v2 ? "start-after" : "marker", after,
			      sizeof(after))) {
		after[0] = '\0';
	}
	/* Only the directory the prefix ends in can hold its keys. */
	snprintf(dir, sizeof(dir), "%s", prefix);
	slash = strrchr(dir, '/');
	if (slash != NULL)
		*slash = '\0';
	else
		dir[0] = '\0';
	walk(bucket_dir, dir, &ks, 0);
	if (ks.oom) {
		rc = -ENOMEM;
		goto out;
	}
	qsort(ks.k, ks.n, sizeof(*ks.k), key_cmp);
	if (hostile & S3_HOSTILE_NEW_TOKEN)
		empty = true;
	if ((hostile & S3_HOSTILE_NUL_KEY) && url && !empty) {
		/* One key that decodes to a NUL, among the good ones. */
		put(&body, "<Contents><Key>", 15);
		put_field(&body, url, shown_prefix);
		static const char rest[] =
			"bad%00key</Key><LastModified>2026-01-01T00:00:00.000Z"
			"</LastModified><ETag>&quot;0&quot;</ETag><Size>1"
			"</Size><StorageClass>STANDARD</StorageClass>"
			"</Contents>";

		put(&body, rest, sizeof(rest) - 1);
	}
	if ((hostile & S3_HOSTILE_ENTITY) && !empty) {
		put(&body, "<Contents><Key>", 15);
		put_field(&body, url, shown_prefix);
		put_entity_uses(&body);
		put(&body, "</Key><Size>1</Size></Contents>", 31);
	}
	for (i = 0; i < ks.n && !empty; i++) {
		const char *k = ks.k[i];
		size_t pl = strlen(prefix);
		const char *rest, *d;
		char full[PATH_MAX], etag[96], when[40];
		struct stat st;
		struct tm tm;

		if (strncmp(k, prefix, pl) != 0)
			continue;
		rest = k + pl;
		d = delim[0] != '\0' ? strstr(rest, delim) : NULL;
		if (d != NULL) {
			char cp[PATH_MAX];

			snprintf(cp, sizeof(cp), "%.*s",
				 (int)(d - k + (ptrdiff_t)strlen(delim)), k);
			/* A page ends after a common prefix: every key
			 * under it was its. */
			if (after[0] != '\0' &&
			    (strcmp(cp, after) <= 0 ||
			     strncmp(k, after, strlen(after)) == 0))
				continue;
			if (strcmp(cp, last) == 0)
				continue;
			if (count == max) {
				truncated = true;
				break;
			}
			put(&body, "<CommonPrefixes><Prefix>", 24);
			put_key(s, &body, url, cp);
			put(&body, "</Prefix></CommonPrefixes>", 26);
			snprintf(last, sizeof(last), "%s", cp);
			count++;
			continue;
		}
		if (after[0] != '\0' && strcmp(k, after) <= 0)
			continue;
		if (snprintf(full, sizeof(full), "%s/%s", bucket_dir, k) >=
			    (int)sizeof(full) ||
		    stat(full, &st) != 0)
			continue;
		if (count == max) {
			truncated = true;
			break;
		}
		snprintf(etag, sizeof(etag), ORIGIN_ETAG_FMT "\"",
			 ORIGIN_ETAG_ARGS(&st));
		gmtime_r(&st.st_mtim.tv_sec, &tm);
		strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S.000Z", &tm);
		put(&body, "<Contents><Key>", 15);
		put_key(s, &body, url, k);
		putf(&body, "</Key><LastModified>%s</LastModified><ETag>",
		     when);
		put_xml(&body, etag);
		putf(&body,
		     "</ETag><Size>%" PRIu64 "</Size><StorageClass>STANDARD"
		     "</StorageClass></Contents>",
		     (uint64_t)st.st_size);
		snprintf(last, sizeof(last), "%s", k);
		count++;
	}
	if (v2 && (hostile & S3_HOSTILE_SAME_TOKEN)) {
		snprintf(hostile_next, sizeof(hostile_next), "pacefs-same");
	} else if (v2 && (hostile & S3_HOSTILE_NEW_TOKEN)) {
		snprintf(hostile_next, sizeof(hostile_next), "pacefs-new-%u",
			 atomic_fetch_add(&fresh, 1));
	} else if (v2 && (hostile & S3_HOSTILE_CYCLE_TOKEN)) {
		snprintf(hostile_next, sizeof(hostile_next), "%s",
			 strcmp(token, "pacefs-cycle-A") == 0
				 ? "pacefs-cycle-B"
				 : "pacefs-cycle-A");
	}
	if (hostile_next[0] != '\0')
		truncated = true;
	if (hostile & S3_HOSTILE_ENTITY)
		put_entity_dtd(&t, "ListBucketResult");
	else
		putf(&t, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
	putf(&t, "<ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/"
		 "2006-03-01/\"><Name>");
	put_xml(&t, bucket);
	put(&t, "</Name><Prefix>", 15);
	put_field(&t, url, shown_prefix);
	put(&t, "</Prefix>", 9);
	if (delim[0] != '\0') {
		put(&t, "<Delimiter>", 11);
		put_field(&t, url, delim);
		put(&t, "</Delimiter>", 12);
	}
	if (url)
		put(&t, "<EncodingType>url</EncodingType>", 32);
	putf(&t, "<MaxKeys>%u</MaxKeys><IsTruncated>%s</IsTruncated>", max,
	     truncated ? "true" : "false");
	if (v2) {
		char next[PATH_MAX * 2];

		putf(&t, "<KeyCount>%zu</KeyCount>", count);
		if (has_token)
			putf(&t, "<ContinuationToken>%s</ContinuationToken>",
			     token);
		if (hostile_next[0] != '\0') {
			putf(&t,
			     "<NextContinuationToken>%s</"
			     "NextContinuationToken>",
			     hostile_next);
		} else if (truncated) {
			hex_encode(last, next, sizeof(next));
			putf(&t,
			     "<NextContinuationToken>%s</"
			     "NextContinuationToken>",
			     next);
		}
	} else if (truncated) {
		put(&t, "<NextMarker>", 12);
		put_field(&t, url, last);
		put(&t, "</NextMarker>", 13);
	}
	if (body.buf != NULL)
		put(&t, body.buf, body.len);
	put(&t, "</ListBucketResult>", 19);
	if (t.oom || body.oom) {
		rc = -ENOMEM;
		goto out;
	}
	a->status = 200;
	a->body = t.buf;
	a->len = t.len;
	t.buf = NULL;
	snprintf(a->code, sizeof(a->code), "%s",
		 v2 ? "ListObjectsV2" : "ListObjects");
out:
	for (i = 0; i < ks.n; i++)
		free(ks.k[i]);
	free(ks.k);
	free(t.buf);
	free(body.buf);
	return rc;
}

/* --- routing ------------------------------------------------------------ */

static bool is_bucket(const struct s3_origin *s, const char *name, char *dir,
		      size_t cap)
{
	struct stat st;

	if (name[0] == '\0' || name[0] == '.' || strchr(name, '/') != NULL)
		return false;
	if (snprintf(dir, cap, "%s/%s", s->root, name) >= (int)cap)
		return false;
	return stat(dir, &st) == 0 && S_ISDIR(st.st_mode);
}

int s3_origin_answer(struct s3_origin *s, const struct s3_request *rq,
		     struct s3_answer *a)
{
	const char *host = header(rq, "host"), *query;
	char path[PATH_MAX], bucket[256] = "", key[PATH_MAX] = "",
			     bdir[PATH_MAX], full[PATH_MAX * 2];
	const char *k;
	struct stat st;
	size_t plen;
	int rc;

	memset(a, 0, sizeof(*a));
	rc = check_auth(s, rq, a);
	if (rc != 0)
		return rc < 0 ? rc : 0;
	query = strchr(rq->target, '?');
	plen = query != NULL ? (size_t)(query - rq->target)
			     : strlen(rq->target);
	if (rq->target[0] != '/' ||
	    decode(rq->target, plen, false, path, sizeof(path)) != 0)
		return s3_error(a, 400, "InvalidURI", NULL,
				"Couldn't parse the specified URI.");
	query = query != NULL ? query + 1 : "";
	/* Virtual-hosted style: the bucket is the host's first label. */
	if (host != NULL) {
		size_t n = strcspn(host, ".:");

		if (host[n] == '.' && n < sizeof(bucket) &&
		    strspn(host, "0123456789.:") != strlen(host)) {
			snprintf(bucket, sizeof(bucket), "%.*s", (int)n, host);
			if (!is_bucket(s, bucket, bdir, sizeof(bdir)))
				bucket[0] = '\0';
		}
	}
	if (bucket[0] != '\0') {
		k = path + 1;
	} else {
		size_t n = strcspn(path + 1, "/");

		if (n == 0 || n >= sizeof(bucket))
			return s3_error(a, 400, "InvalidBucketName", NULL,
					"The specified bucket is not valid.");
		snprintf(bucket, sizeof(bucket), "%.*s", (int)n, path + 1);
		k = path + 1 + n;
		if (*k == '/')
			k++;
		if (!is_bucket(s, bucket, bdir, sizeof(bdir))) {
			char extra[300];

			snprintf(extra, sizeof(extra),
				 "<BucketName>%s</BucketName>", bucket);
			return s3_error(a, 404, "NoSuchBucket", extra,
					"The specified bucket does not "
					"exist");
		}
	}
	if (s->cfg.hostile & S3_HOSTILE_DOTDOT_KEYS)
		dotdot_map(k, key, sizeof(key), true);
	else
		snprintf(key, sizeof(key), "%s", k);
	if (strcmp(rq->method, "GET") != 0 && strcmp(rq->method, "HEAD") != 0)
		return s3_error(a, 405, "MethodNotAllowed", NULL,
				"The specified method is not allowed against "
				"this resource.");
	if (key[0] == '\0') {
		if (strncmp(query, "location", 8) == 0) {
			struct text t = {0};

			putf(&t,
			     "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
			     "<LocationConstraint xmlns=\"http://s3."
			     "amazonaws.com/doc/2006-03-01/\">%s"
			     "</LocationConstraint>",
			     strcmp(s->region, "us-east-1") == 0 ? ""
								 : s->region);
			if (t.oom)
				return -ENOMEM;
			a->status = 200;
			a->body = t.buf;
			a->len = t.len;
			snprintf(a->code, sizeof(a->code), "GetBucketLocation");
			return 0;
		}
		if (strcmp(rq->method, "HEAD") == 0) {
			a->status = 200;
			snprintf(a->code, sizeof(a->code), "HeadBucket");
			return 0;
		}
		return list_bucket(s, bucket, bdir, query,
				   strstr(query, "list-type=2") != NULL, a);
	}
	/* A key is a file under the bucket, never a way out of it. */
	snprintf(full, sizeof(full), "%s/%s", bdir, key);
	if (strstr(key, "/../") != NULL || strncmp(key, "../", 3) == 0 ||
	    strcmp(key, "..") == 0 || key[strlen(key) - 1] == '/' ||
	    lstat(full, &st) != 0 || !S_ISREG(st.st_mode)) {
		char extra[PATH_MAX + 32];
		struct text t = {0};

		put(&t, "<Key>", 5);
		put_xml(&t, key);
		put(&t, "</Key>", 6);
		snprintf(extra, sizeof(extra), "%s", t.oom ? "" : t.buf);
		free(t.buf);
		return s3_error(a, 404, "NoSuchKey", extra,
				"The specified key does not exist.");
	}
	snprintf(a->path, sizeof(a->path), "/%s/%s", bucket, key);
	snprintf(a->code, sizeof(a->code), "GetObject");
	return 0;
}

/* creds: where a mount's credentials come from and how they stay current:
 * request headers (-o header=, -o header_file=, -o auth_command=) and an
 * AWS key found in the standard places, in the standard order; files read
 * again when they change, commands run again (with a deadline, and never
 * past the mount) when what they gave expires or an origin refuses it,
 * each new set handed to fetch_auth. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "fetch/fetch.h"
#include "fs/auth/auth.h"
#include "fs/auth/auth_int.h"

/* The most a credentials file may hold. */
#define CREDS_TEXT_MAX (256 * 1024)
#define CREDS_FILES_MAX 10
/* An Expiration closer than this is refused: credentials so short-lived
 * would be asked for again at once. */
#define CREDS_EXPIRY_MARGIN_S 60
/* After a failed load, reruns wait 2, 4, ... up to this many seconds
 * (a file that changes is read at once). */
#define CREDS_BACKOFF_MAX_S 300

/* What one load found. */
struct creds_set {
	char *id, *secret, *token;
	char **headers; /* from files and the command */
	unsigned nheaders;
	int64_t expires;  /* the command's Expiration; 0: none */
	char source[160]; /* where the key came from; "" none */
};

struct auth_creds {
	struct auth_creds_config cfg;
	struct fetch_auth *auth;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool stop;	      /* guarded by mu */
	atomic_bool stopping; /* stop, as a running command polls it */
	uint64_t forced;      /* guarded by mu: a refused generation */
	pthread_t thread;
	bool running;
	char source[160]; /* guarded by mu, with has_key and expires: a reload
			     writes them while FUSE threads name the key */
	bool has_key;
	int64_t expires, obtained;
	/* What the files were when last read: inode, size, mtime. */
	char paths[CREDS_FILES_MAX][4096];
	struct stat st[CREDS_FILES_MAX];
	unsigned npaths;
	/* The watcher's backoff after a failed load (mono_ms's clock). */
	unsigned fails;
	int64_t retry_at;
};

static void set_free(struct creds_set *s)
{
	char **f[] = {&s->id, &s->secret, &s->token};

	for (size_t i = 0; i < 3; i++) {
		if (*f[i] != NULL)
			explicit_bzero(*f[i], strlen(*f[i]));
		free(*f[i]);
		*f[i] = NULL;
	}
	auth_headers_free(s->headers, s->nheaders);
	s->headers = NULL;
	s->nheaders = 0;
}

static int add_headers(struct creds_set *s, char **list, unsigned n)
{
	char **grown;

	if (n == 0) {
		free(list);
		return 0;
	}
	grown = realloc(s->headers, (s->nheaders + n) * sizeof(*grown));
	if (grown == NULL) {
		auth_headers_free(list, n);
		return -ENOMEM;
	}
	memcpy(grown + s->nheaders, list, n * sizeof(*list));
	s->headers = grown;
	s->nheaders += n;
	free(list);
	return 0;
}

static const char *home(void)
{
	const char *h = getenv("HOME");
	struct passwd *pw;

	if (h != NULL && h[0] != '\0')
		return h;
	pw = getpwuid(getuid());
	return pw != NULL ? pw->pw_dir : "/";
}

/* The AWS CLI's file: $VAR, else ~/.aws/NAME. */
static void aws_path(const char *var, const char *name, char *out, size_t cap)
{
	const char *v = getenv(var);

	if (v != NULL && v[0] != '\0')
		snprintf(out, cap, "%s", v);
	else
		snprintf(out, cap, "%s/.aws/%s", home(), name);
}

static const char *profile_name(void)
{
	const char *p = getenv("AWS_PROFILE");

	return p != NULL && p[0] != '\0' ? p : "default";
}

/* Reads a whole small regular file; NULL (errno set: EINVAL for one
 * that is not a regular file, EFBIG) when it cannot. */
static char *slurp(const char *path, struct stat *st, size_t *len)
{
	/* Non-blocking: a FIFO put there would hold the open for ever. */
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	char *text = NULL;
	ssize_t got;

	if (fd < 0)
		return NULL;
	if (fstat(fd, st) != 0)
		goto out;
	if (!S_ISREG(st->st_mode)) {
		errno = EINVAL;
		goto out;
	}
	if (st->st_size > CREDS_TEXT_MAX) {
		errno = EFBIG;
		goto out;
	}
	text = malloc((size_t)st->st_size + 1);
	if (text == NULL)
		goto out;
	got = read(fd, text, (size_t)st->st_size);
	if (got < 0) {
		free(text);
		text = NULL;
		goto out;
	}
	text[got] = '\0';
	*len = (size_t)got;
out:
	close(fd);
	return text;
}

/* Notes path as one the watcher reads again when it changes. */
static void watch(struct auth_creds *c, const char *path)
{
	struct stat st;

	if (c->npaths == CREDS_FILES_MAX)
		return;
	for (unsigned i = 0; i < c->npaths; i++)
		if (strcmp(c->paths[i], path) == 0)
			return;
	snprintf(c->paths[c->npaths], sizeof(c->paths[0]), "%s", path);
	if (stat(path, &st) != 0)
		memset(&st, 0, sizeof(st));
	c->st[c->npaths++] = st;
}

/* "2026-11-30T13:17:25Z" (fractions and offsets as AWS tools write
 * them) into seconds since the epoch; 0 when it is not one. */
static int64_t iso_time(const char *s)
{
	struct tm tm;
	const char *rest;

	memset(&tm, 0, sizeof(tm));
	rest = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
	if (rest == NULL)
		return 0;
	return (int64_t)timegm(&tm);
}

/* The monotonic clock in ms: the watcher's backoff. */
static int64_t mono_ms(void)
{
	return (int64_t)(fs__now_ns() / 1000000u);
}

/* One line for a key, secret or token holding a control byte; the value
 * is never quoted (it is a secret). */
static int bad_value(const char *what, const char *v, char *err, size_t errlen)
{
	int c = auth_token_check(v);

	if (c == 0)
		return 0;
	return fs__errf(
		err, errlen, -EINVAL,
		"%s holds a control character (0x%02x); refused: a line "
		"break there would add a header to every request",
		what, (unsigned)c);
}

/* Reads a credential_process answer (JSON, Version 1) into s. */
static int parse_json(const char *text, size_t len, struct creds_set *s,
		      char *err, size_t errlen)
{
	json_error_t je;
	json_t *j = json_loadb(text, len, 0, &je);
	const char *id = NULL, *secret = NULL, *token = NULL, *exp = NULL;
	int64_t now = (int64_t)time(NULL);
	int rc = -EINVAL;

	if (j == NULL ||
	    json_unpack(j, "{s:s, s:s, s?s, s?s}", "AccessKeyId", &id,
			"SecretAccessKey", &secret, "SessionToken", &token,
			"Expiration", &exp) != 0) {
		fs__errf(err, errlen, rc,
			 "its JSON is not a credential_process answer (with "
			 "AccessKeyId and SecretAccessKey strings)");
		goto out;
	}
	if (bad_value("its AccessKeyId", id, err, errlen) != 0 ||
	    bad_value("its SecretAccessKey", secret, err, errlen) != 0 ||
	    bad_value("its SessionToken", token, err, errlen) != 0)
		goto out;
	s->expires = exp != NULL ? iso_time(exp) : 0;
	if (exp != NULL && s->expires == 0) {
		fs__errf(err, errlen, rc,
			 "its Expiration '%.40s' is not a time as "
			 "2026-11-30T13:17:25Z",
			 exp);
		goto out;
	}
	/* Credentials that expired, or expire before they could be used,
	 * would have the command run again at once, and again. */
	if (exp != NULL && s->expires <= now + CREDS_EXPIRY_MARGIN_S) {
		fs__errf(err, errlen, rc,
			 "its Expiration %.40s is %s; refused (credentials "
			 "must last more than %d s)",
			 exp,
			 s->expires <= now ? "in the past" : "within a minute",
			 CREDS_EXPIRY_MARGIN_S);
		goto out;
	}
	s->id = strdup(id);
	s->secret = strdup(secret);
	s->token = token != NULL ? strdup(token) : NULL;
	rc = s->id == NULL || s->secret == NULL ||
			     (token != NULL && s->token == NULL)
		     ? -ENOMEM
		     : 0;
out:
	json_decref(j);
	return rc;
}

/* The program a command line starts, for error lines: its first word
 * (the rest may carry secrets). */
static void program_of(const char *cmd, char *out, size_t cap)
{
	size_t skip = strspn(cmd, " \t"), n = strcspn(cmd + skip, " \t;|&<>");

	snprintf(out, cap, "%.*s", (int)(n < 80 ? n : 80), cmd + skip);
}

/* Runs a command that prints header lines or a credential_process JSON;
 * err starts with the program it ran. */
static int from_command(struct auth_creds *c, const char *cmd, bool headers_too,
			struct creds_set *s, char *err, size_t errlen)
{
	char *text = NULL, why[256], prog[96];
	char **list = NULL;
	unsigned n = 0;
	size_t len = 0, skip;
	int rc = auth__command_run(cmd, c->cfg.timeout_s, &c->stopping, &text,
				   &len, why, sizeof(why));

	program_of(cmd, prog, sizeof(prog));
	if (rc != 0) {
		return fs__errf(err, errlen, rc, "command '%s': %s", prog, why);
	}
	skip = strspn(text, " \t\r\n");
	if (text[skip] == '{') {
		rc = parse_json(text, len, s, why, sizeof(why));
	} else if (!headers_too) {
		snprintf(why, sizeof(why), "it printed no JSON");
		rc = -EINVAL;
	} else {
		rc = auth_headers_parse(text, len, &list, &n, why, sizeof(why));
		if (rc == 0)
			rc = add_headers(s, list, n);
	}
	if (rc != 0)
		fs__errf(err, errlen, rc, "command '%s': %s", prog, why);
	explicit_bzero(text, len);
	free(text);
	return rc;
}

/* The key of AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (with
 * AWS_SESSION_TOKEN), into s when both are set (*found). */
static int key_from_env(struct creds_set *s, bool *found, char *err,
			size_t errlen)
{
	const char *id = getenv("AWS_ACCESS_KEY_ID");
	const char *secret = getenv("AWS_SECRET_ACCESS_KEY");
	const char *token = getenv("AWS_SESSION_TOKEN");
	int rc;

	*found = id != NULL && id[0] != '\0' && secret != NULL &&
		 secret[0] != '\0';
	if (!*found)
		return 0;
	rc = bad_value("AWS_ACCESS_KEY_ID", id, err, errlen);
	if (rc == 0)
		rc = bad_value("AWS_SECRET_ACCESS_KEY", secret, err, errlen);
	if (rc == 0)
		rc = bad_value("AWS_SESSION_TOKEN", token, err, errlen);
	if (rc != 0)
		return rc;
	s->id = strdup(id);
	s->secret = strdup(secret);
	s->token = token != NULL && token[0] != '\0' ? strdup(token) : NULL;
	snprintf(s->source, sizeof(s->source),
		 "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY");
	return s->id == NULL || s->secret == NULL ? -ENOMEM : 0;
}

/* Adds what the AWS file at path (f: 0 the credentials file, 1 the
 * config file) says of profile `name` to prof. A file that gives a
 * secret or a command must pass auth_file_check, and every key it gives
 * the token check; the file that gives the key id is s's source, the one
 * that gives the credential_process *cp_file. A missing file is no
 * error. */
static int read_aws_file(struct auth_creds *c, struct creds_set *s,
			 const char *path, int f, const char *name,
			 struct auth_aws_profile *prof, int *cp_file, char *err,
			 size_t errlen)
{
	bool had_secret = prof->secret_access_key != NULL;
	bool had_token = prof->session_token != NULL;
	bool had_command = prof->credential_process != NULL;
	char what[4200];
	struct stat st;
	size_t len = 0;
	char *text;
	int found, rc = 0;

	watch(c, path);
	text = slurp(path, &st, &len);
	if (text == NULL && errno == EINVAL) {
		return fs__errf(err, errlen, -EINVAL,
				"%s: not a regular file; refused", path);
	}
	if (text == NULL && errno == EFBIG) {
		return fs__errf(err, errlen, -EFBIG,
				"%s: larger than any credentials file (%u "
				"bytes at most); refused",
				path, (unsigned)CREDS_TEXT_MAX);
	}
	if (text == NULL)
		return 0;
	found = auth__aws_profile_parse(text, len, name, f == 1, prof);
	explicit_bzero(text, len);
	free(text);
	if (found <= 0)
		return found;
	if ((!had_secret && prof->secret_access_key != NULL) ||
	    (!had_token && prof->session_token != NULL))
		rc = auth_file_check(path, &st, c->cfg.uid, AUTH_FILE_SECRETS,
				     c->cfg.readable_ok, err, errlen);
	if (!had_command && prof->credential_process != NULL)
		*cp_file = f;
	if (rc == 0 && !had_command && prof->credential_process != NULL)
		rc = auth_file_check(path, &st, c->cfg.uid, AUTH_FILE_COMMAND,
				     c->cfg.readable_ok, err, errlen);
	if (rc == 0) {
		snprintf(what, sizeof(what),
			 "aws_access_key_id of profile '%.64s' in %.4000s",
			 name, path);
		rc = bad_value(what, prof->access_key_id, err, errlen);
	}
	if (rc == 0) {
		snprintf(what, sizeof(what),
			 "aws_secret_access_key of profile '%.64s' in %.4000s",
			 name, path);
		rc = bad_value(what, prof->secret_access_key, err, errlen);
	}
	if (rc == 0) {
		snprintf(what, sizeof(what),
			 "aws_session_token of profile '%.64s' in %.4000s",
			 name, path);
		rc = bad_value(what, prof->session_token, err, errlen);
	}
	if (rc == 0 && s->source[0] == '\0' && prof->access_key_id != NULL)
		snprintf(s->source, sizeof(s->source),
			 "profile '%.40s' in %.100s", name, path);
	return rc;
}

/* The AWS key, in the AWS tools' order: the environment, then the
 * profile in the credentials file, then in the config file (keys or a
 * credential_process). None is no error: a public bucket needs none. A
 * file that gives a secret or a command must be the user's and written
 * by no one else (auth_file_check). */
static int find_key(struct auth_creds *c, struct creds_set *s, char *err,
		    size_t errlen)
{
	const char *name = profile_name();
	struct auth_aws_profile prof = {0};
	char path[2][4096], why[256];
	int rc, cp_file = 1;
	bool from_env;

	rc = key_from_env(s, &from_env, err, errlen);
	if (from_env)
		return rc;
	aws_path("AWS_SHARED_CREDENTIALS_FILE", "credentials", path[0],
		 sizeof(path[0]));
	aws_path("AWS_CONFIG_FILE", "config", path[1], sizeof(path[1]));
	for (int f = 0; f < 2 && rc == 0; f++)
		rc = read_aws_file(c, s, path[f], f, name, &prof, &cp_file, err,
				   errlen);
	if (rc == 0 && prof.access_key_id != NULL &&
	    prof.secret_access_key != NULL) {
		s->id = prof.access_key_id;
		s->secret = prof.secret_access_key;
		s->token = prof.session_token;
		prof.access_key_id = prof.secret_access_key =
			prof.session_token = NULL;
	} else if (rc == 0 && prof.credential_process != NULL) {
		snprintf(s->source, sizeof(s->source),
			 "the credential_process of profile '%s'", name);
		rc = from_command(c, prof.credential_process, false, s, why,
				  sizeof(why));
		if (rc != 0)
			fs__errf(err, errlen, rc, "%s in %s: %s", s->source,
				 path[cp_file], why);
	} else {
		s->source[0] = '\0';
	}
	auth__aws_profile_free(&prof);
	return rc;
}

/* Loads every source once: the header files, the command, the AWS key. */
static int load(struct auth_creds *c, struct creds_set *s, char *err,
		size_t errlen)
{
	char why[512];
	int rc = 0;

	memset(s, 0, sizeof(*s));
	for (unsigned i = 0; i < c->cfg.nheader_files && rc == 0; i++) {
		char **list = NULL;
		unsigned n = 0;

		watch(c, c->cfg.header_files[i]);
		rc = auth_headers_load(c->cfg.header_files[i], c->cfg.uid,
				       &list, &n, why, sizeof(why));
		if (rc == 0)
			rc = add_headers(s, list, n);
		else
			fs__errf(err, errlen, rc, "option header_file: %s",
				 why);
	}
	if (rc == 0 && c->cfg.auth_command != NULL) {
		rc = from_command(c, c->cfg.auth_command, true, s, why,
				  sizeof(why));
		if (rc != 0)
			fs__errf(err, errlen, rc, "option auth_command: %s",
				 why);
		else if (s->id != NULL)
			snprintf(s->source, sizeof(s->source),
				 "-o auth_command");
	}
	if (rc == 0 && c->cfg.s3 && s->id == NULL)
		rc = find_key(c, s, err, errlen);
	if (rc != 0)
		set_free(s);
	return rc;
}

/* Hands s to fetch_auth with the -o header= headers first. */
static int install(struct auth_creds *c, struct creds_set *s)
{
	unsigned n = c->cfg.nheaders + s->nheaders;
	const char **all = calloc(n ? n : 1, sizeof(*all));
	struct fetch_cred fc = {
		.s3_id = s->id, .s3_secret = s->secret, .s3_token = s->token};
	uint64_t gen;

	if (all == NULL)
		return -ENOMEM;
	for (unsigned i = 0; i < c->cfg.nheaders; i++)
		all[i] = c->cfg.headers[i];
	for (unsigned i = 0; i < s->nheaders; i++)
		all[c->cfg.nheaders + i] = s->headers[i];
	fc.headers = all;
	fc.nheaders = n;
	gen = fetch_auth_set(c->auth, &fc);
	free(all);
	if (gen == 0)
		return -ENOMEM;
	pthread_mutex_lock(&c->mu);
	c->has_key = s->id != NULL;
	c->expires = s->expires;
	c->obtained = (int64_t)time(NULL);
	snprintf(c->source, sizeof(c->source), "%s", s->source);
	pthread_mutex_unlock(&c->mu);
	return 0;
}

static void on_expired(void *ctx, uint64_t gen)
{
	struct auth_creds *c = ctx;

	pthread_mutex_lock(&c->mu);
	if (gen > c->forced)
		c->forced = gen;
	pthread_cond_signal(&c->cv);
	pthread_mutex_unlock(&c->mu);
}

int auth_creds_new(const struct auth_creds_config *cfg, struct fetch_auth *auth,
		   struct auth_creds **out, char *err, size_t errlen)
{
	struct auth_creds *c = calloc(1, sizeof(*c));
	struct creds_set s;
	pthread_condattr_t ca;
	int rc;

	if (c == NULL) {
		return fs__errf(err, errlen, -ENOMEM, "out of memory");
	}
	c->cfg = *cfg;
	c->auth = auth;
	pthread_mutex_init(&c->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&c->cv, &ca);
	pthread_condattr_destroy(&ca);
	rc = load(c, &s, err, errlen);
	if (rc == 0) {
		rc = install(c, &s);
		set_free(&s);
		if (rc != 0)
			fs__errf(err, errlen, rc, "out of memory");
	}
	if (rc != 0) {
		auth_creds_free(c);
		return rc;
	}
	fetch_auth_on_expired(auth, on_expired, c);
	*out = c;
	return 0;
}

/* True when a watched file is not what it was when last read. */
static bool files_changed(struct auth_creds *c)
{
	bool changed = false;

	for (unsigned i = 0; i < c->npaths; i++) {
		struct stat st;

		if (stat(c->paths[i], &st) != 0)
			memset(&st, 0, sizeof(st));
		if (st.st_ino != c->st[i].st_ino ||
		    st.st_size != c->st[i].st_size ||
		    st.st_mtim.tv_sec != c->st[i].st_mtim.tv_sec ||
		    st.st_mtim.tv_nsec != c->st[i].st_mtim.tv_nsec)
			changed = true;
		c->st[i] = st;
	}
	return changed;
}

/* A command's credentials are asked for again before they expire: a
 * minute before, or a quarter of their life for short ones. */
static bool expiring(const struct auth_creds *c, int64_t now)
{
	int64_t margin = 60, life = c->expires - c->obtained;

	if (c->expires == 0)
		return false;
	if (life < 4 * margin)
		margin = life / 4;
	return now >= c->expires - margin;
}

/* A line of the thread's, through the configuration's log hook. */
#define creds_log(c, ...)                                                      \
	fs__log_via((c)->cfg.log, (c)->cfg.log_ctx, __VA_ARGS__)

static void *watcher(void *arg)
{
	struct auth_creds *c = arg;

	pthread_mutex_lock(&c->mu);
	while (!c->stop) {
		struct timespec ts;
		struct creds_set s;
		char err[1024];
		uint64_t forced;
		bool changed, refused, due;
		int64_t now;
		int rc;

		clock_gettime(CLOCK_MONOTONIC, &ts);
		ts.tv_sec += 1;
		if (c->forced == 0 || c->forced < fetch_auth_gen(c->auth))
			pthread_cond_timedwait(&c->cv, &c->mu, &ts);
		if (c->stop)
			break;
		forced = c->forced;
		pthread_mutex_unlock(&c->mu);
		changed = files_changed(c);
		refused = forced != 0 && forced >= fetch_auth_gen(c->auth);
		now = (int64_t)time(NULL);
		/* After a failed load only a changed file is read at once:
		 * a command that keeps failing runs 2, 4, ... s apart. */
		due = changed || mono_ms() >= c->retry_at;
		if (!due && refused)
			fetch_auth_again(c->auth);
		if (due && (refused || changed || expiring(c, now))) {
			rc = load(c, &s, err, sizeof(err));
			if (rc != 0) {
				unsigned wait = c->fails < 8
							? 2u << c->fails
							: CREDS_BACKOFF_MAX_S;

				if (wait > CREDS_BACKOFF_MAX_S)
					wait = CREDS_BACKOFF_MAX_S;
				c->fails++;
				c->retry_at = mono_ms() + (int64_t)wait * 1000;
			} else {
				c->fails = 0;
				c->retry_at = 0;
			}
			if (rc == 0) {
				rc = install(c, &s);
				set_free(&s);
				if (rc == 0)
					creds_log(c, FS_LOG_INFO,
						  "credentials read again (%s)",
						  changed ? "a file changed"
						  : refused
							  ? "an origin refused "
							    "them"
							  : "they expire");
				else
					creds_log(c, FS_LOG_ERR,
						  "cannot use the credentials "
						  "read again: out of memory");
			} else {
				creds_log(c, FS_LOG_ERR,
					  "cannot read the credentials again: "
					  "%s; next try in %" PRId64 " s",
					  err,
					  (c->retry_at - mono_ms()) / 1000);
			}
			if (rc != 0 && refused) {
				/* The refused request then fails now, not
				 * after its whole wait. */
				fetch_auth_again(c->auth);
			}
		}
		pthread_mutex_lock(&c->mu);
		if (c->forced == forced)
			c->forced = 0;
	}
	pthread_mutex_unlock(&c->mu);
	return NULL;
}

int auth_creds_start(struct auth_creds *c)
{
	int rc = pthread_create(&c->thread, NULL, watcher, c);

	if (rc != 0)
		return -rc;
	c->running = true;
	return 0;
}

void auth_creds_free(struct auth_creds *c)
{
	if (c == NULL)
		return;
	if (c->running) {
		pthread_mutex_lock(&c->mu);
		c->stop = true;
		atomic_store(&c->stopping, true);
		pthread_cond_signal(&c->cv);
		pthread_mutex_unlock(&c->mu);
		pthread_join(c->thread, NULL);
	}
	if (c->auth != NULL)
		fetch_auth_on_expired(c->auth, NULL, NULL);
	pthread_cond_destroy(&c->cv);
	pthread_mutex_destroy(&c->mu);
	free(c);
}

bool auth_creds_changeable(const struct auth_creds *c)
{
	return c != NULL && (c->npaths > 0 || c->cfg.auth_command != NULL);
}

const char *auth_creds_source(const struct auth_creds *c, char *buf, size_t cap)
{
	/* The object does not change but for what a reload writes, which its
	 * lock guards. */
	struct auth_creds *m = (struct auth_creds *)c;
	const char *out = NULL;

	if (c == NULL)
		return NULL;
	pthread_mutex_lock(&m->mu);
	if (c->has_key) {
		snprintf(buf, cap, "%s", c->source);
		out = buf;
	}
	pthread_mutex_unlock(&m->mu);
	return out;
}

void auth_creds_region(const char *opt, char *out, size_t cap)
{
	const char *v = opt;
	struct auth_aws_profile prof = {0};
	char path[4096];
	struct stat st;
	size_t len = 0;
	char *text;

	if (v == NULL || v[0] == '\0')
		v = getenv("AWS_REGION");
	if (v == NULL || v[0] == '\0')
		v = getenv("AWS_DEFAULT_REGION");
	if (v != NULL && v[0] != '\0') {
		snprintf(out, cap, "%s", v);
		return;
	}
	aws_path("AWS_CONFIG_FILE", "config", path, sizeof(path));
	text = slurp(path, &st, &len);
	if (text != NULL &&
	    auth__aws_profile_parse(text, len, profile_name(), true, &prof) >
		    0 &&
	    prof.region != NULL)
		snprintf(out, cap, "%s", prof.region);
	else
		snprintf(out, cap, "us-east-1");
	if (text != NULL)
		explicit_bzero(text, len);
	free(text);
	auth__aws_profile_free(&prof);
}

/* auth_int: what the credentials' files (creds.c, awsconf.c, command.c)
 * share; no file outside fs/auth/ includes it (but the parser's tests). */
#ifndef FS_AUTH_INT_H
#define FS_AUTH_INT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

/* An AWS profile as ~/.aws/credentials and ~/.aws/config give it
 * (fs/auth/awsconf.c). Strings are owned; NULL when absent. */
struct auth_aws_profile {
	char *access_key_id;
	char *secret_access_key;
	char *session_token;
	char *region;
	char *credential_process;
};

/* Reads profile `name` from the INI text of len bytes: in a credentials
 * file its section is [NAME]; in a config file (config true) [profile
 * NAME], or [default] for "default". Keys are case-insensitive, values
 * trimmed; '#' and ';' start comments. Fills what the section holds (a
 * later key wins) into *out, whose fields the caller frees with
 * auth__aws_profile_free (they may be set already: a field the text gives
 * replaces it). Returns 1 when the section is there, 0 when not, -ENOMEM.
 * Thread-safe. */
int auth__aws_profile_parse(const char *text, size_t len, const char *name,
			    bool config, struct auth_aws_profile *out);
void auth__aws_profile_free(struct auth_aws_profile *p);

/* fs/auth/command.c. The most a command may print. */
#define AUTH_COMMAND_OUT_MAX (256 * 1024)

/* Runs cmd with /bin/sh, its output read whole into *out (NUL-terminated,
 * *len bytes; free() it, after wiping it), for at most timeout_s seconds
 * (0: 60) and no longer than *stopping stays false (polled every 100 ms).
 * Standard input is /dev/null, standard error pacefs's; every other
 * descriptor is closed in the child, which runs in a process group of its
 * own, killed when the run ends and when the calling thread dies. Returns
 * 0, or -EIO with one line in err (it could not start, ran out of time,
 * printed too much, exited non-zero, or the mount ends). */
int auth__command_run(const char *cmd, unsigned timeout_s,
		      const atomic_bool *stopping, char **out, size_t *len,
		      char *err, size_t errlen);

#endif

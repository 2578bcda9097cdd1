/* auth_int: what the credentials' files (creds.c, awsconf.c) share; no
 * file outside fs/auth/ includes it (but the parser's tests). */
#ifndef FS_AUTH_INT_H
#define FS_AUTH_INT_H

#include <stdbool.h>
#include <stddef.h>

/* An AWS profile as ~/.aws/credentials and ~/.aws/config give it
 * (fs/auth/awsconf.c). Strings are owned; NULL when absent. */
struct fs_aws_profile {
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
 * fs__aws_profile_free (they may be set already: a field the text gives
 * replaces it). Returns 1 when the section is there, 0 when not, -ENOMEM.
 * Thread-safe. */
int fs__aws_profile_parse(const char *text, size_t len, const char *name,
			  bool config, struct fs_aws_profile *out);
void fs__aws_profile_free(struct fs_aws_profile *p);

#endif

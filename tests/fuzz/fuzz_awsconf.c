/* fuzz_awsconf: the AWS credentials and config file reader: any text is
 * read without a crash or a leak, its first byte choosing the file's kind
 * and the profile asked for; no value spans a line, and the token check
 * creds.c runs on each finds every control byte. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fs/auth/auth.h"
#include "fs/auth/auth_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct auth_aws_profile p = {0};
	bool config;
	int rc;

	if (size == 0)
		return 0;
	config = (data[0] & 1) != 0;
	rc = auth__aws_profile_parse((const char *)data + 1, size - 1,
				     (data[0] & 2) ? "default" : "dev", config,
				     &p);
	if (rc < 0 || rc > 1)
		abort();
	/* A second read over the first replaces, never leaks. */
	if (auth__aws_profile_parse((const char *)data + 1, size - 1, "dev",
				    !config, &p) < 0)
		abort();
	if (rc == 0 && !config && (data[0] & 2) && p.region != NULL &&
	    memchr(data + 1, '[', size - 1) == NULL)
		abort(); /* no section, yet a key was taken */
	{
		const char *v[] = {p.access_key_id, p.secret_access_key,
				   p.session_token, p.region,
				   p.credential_process};

		for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
			int c = auth_token_check(v[i]);

			if (v[i] != NULL && strchr(v[i], '\n') != NULL)
				abort();
			if (v[i] != NULL &&
			    (c != 0) !=
				    (strpbrk(v[i],
					     "\x01\x02\x03\x04\x05\x06\x07\x08"
					     "\t\x0b\x0c\r\x0e\x0f\x10\x11\x12"
					     "\x13\x14\x15\x16\x17\x18\x19\x1a"
					     "\x1b\x1c\x1d\x1e\x1f\x7f") !=
				     NULL))
				abort();
		}
	}
	auth__aws_profile_free(&p);
	return 0;
}

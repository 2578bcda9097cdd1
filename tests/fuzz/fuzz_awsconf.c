/* fuzz_awsconf: the AWS credentials and config file reader: any text is
 * read without a crash or a leak, its first byte choosing the file's kind
 * and the profile asked for. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fs/auth/auth_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fs_aws_profile p = {0};
	bool config;
	int rc;

	if (size == 0)
		return 0;
	config = (data[0] & 1) != 0;
	rc = fs__aws_profile_parse((const char *)data + 1, size - 1,
				   (data[0] & 2) ? "default" : "dev", config,
				   &p);
	if (rc < 0 || rc > 1)
		abort();
	/* A second read over the first replaces, never leaks. */
	if (fs__aws_profile_parse((const char *)data + 1, size - 1, "dev",
				  !config, &p) < 0)
		abort();
	if (rc == 0 && !config && (data[0] & 2) && p.region != NULL &&
	    memchr(data + 1, '[', size - 1) == NULL)
		abort(); /* no section, yet a key was taken */
	fs__aws_profile_free(&p);
	return 0;
}

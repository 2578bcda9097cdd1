/* awsconf: reads a profile out of the AWS CLI's INI files
 * (~/.aws/credentials, ~/.aws/config) as the AWS tools do. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "fs/auth/auth_int.h"

static bool blank(char c)
{
	return c == ' ' || c == '\t' || c == '\r';
}

/* [s, e) without surrounding blanks. */
static void trim(const char **s, const char **e)
{
	while (*s < *e && blank(**s))
		(*s)++;
	while (*e > *s && blank((*e)[-1]))
		(*e)--;
}

static bool is(const char *s, size_t n, const char *lit)
{
	return strlen(lit) == n && strncasecmp(s, lit, n) == 0;
}

/* Whether the section header [s, e) (brackets removed, trimmed) names
 * profile `name`. */
static bool section_is(const char *s, const char *e, const char *name,
		       bool config)
{
	size_t n = (size_t)(e - s), nl = strlen(name);

	if (!config || strcmp(name, "default") == 0)
		if (n == nl && memcmp(s, name, n) == 0)
			return true;
	if (!config || n < 8 || strncmp(s, "profile", 7) != 0 || !blank(s[7]))
		return false;
	s += 8;
	while (s < e && blank(*s))
		s++;
	return (size_t)(e - s) == nl && memcmp(s, name, nl) == 0;
}

static int set(char **field, const char *s, const char *e)
{
	char *v = strndup(s, (size_t)(e - s));

	if (v == NULL)
		return -ENOMEM;
	if (*field != NULL) {
		explicit_bzero(*field, strlen(*field));
		free(*field);
	}
	*field = v;
	return 0;
}

int auth__aws_profile_parse(const char *text, size_t len, const char *name,
			    bool config, struct auth_aws_profile *out)
{
	const char *p = text, *end = text + len;
	bool in = false, found = false;

	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *ls = p, *le = nl != NULL ? nl : end, *eq;
		char **field = NULL;

		p = nl != NULL ? nl + 1 : end;
		trim(&ls, &le);
		if (ls == le || *ls == '#' || *ls == ';')
			continue;
		if (*ls == '[') {
			const char *close = memchr(ls, ']', (size_t)(le - ls));
			const char *ss = ls + 1, *se = close;

			if (close == NULL) {
				in = false;
				continue;
			}
			trim(&ss, &se);
			in = section_is(ss, se, name, config);
			found |= in;
			continue;
		}
		if (!in)
			continue;
		eq = memchr(ls, '=', (size_t)(le - ls));
		if (eq == NULL)
			continue; /* a nested sub-section's line, or junk */
		{
			const char *ks = ls, *ke = eq, *vs = eq + 1, *ve = le;

			trim(&ks, &ke);
			trim(&vs, &ve);
			if (is(ks, (size_t)(ke - ks), "aws_access_key_id"))
				field = &out->access_key_id;
			else if (is(ks, (size_t)(ke - ks),
				    "aws_secret_access_key"))
				field = &out->secret_access_key;
			else if (is(ks, (size_t)(ke - ks), "aws_session_token"))
				field = &out->session_token;
			else if (is(ks, (size_t)(ke - ks), "region"))
				field = &out->region;
			else if (is(ks, (size_t)(ke - ks),
				    "credential_process"))
				field = &out->credential_process;
			if (field != NULL && set(field, vs, ve) != 0)
				return -ENOMEM;
		}
	}
	return found ? 1 : 0;
}

void auth__aws_profile_free(struct auth_aws_profile *p)
{
	char **f[] = {&p->access_key_id, &p->secret_access_key,
		      &p->session_token, &p->region, &p->credential_process};

	for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++) {
		if (*f[i] != NULL) {
			explicit_bzero(*f[i], strlen(*f[i]));
			free(*f[i]);
		}
		*f[i] = NULL;
	}
}

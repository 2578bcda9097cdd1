/* plancmd: `pacefs plan [--name NAME] [-0] MOUNTPOINT [LIST|-]` and
 * `pacefs plan --clear [--name NAME] MOUNTPOINT`: streams a read plan to
 * the mount's control socket (named by the root's user.pacefs.control
 * attribute) a buffer at a time, never whole in memory, and prints the
 * daemon's answer. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "fs/cli/cli.h"

static const char usage[] =
	"usage: pacefs plan [--name NAME] [-0] MOUNTPOINT [LIST|-]\n"
	"       pacefs plan --clear [--name NAME] MOUNTPOINT\n";

static int connect_mount(const char *mnt)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	char name[sizeof(a.sun_path)];
	ssize_t n =
		getxattr(mnt, "user.pacefs.control", name, sizeof(name) - 1);
	int fd;

	if (n <= 1 || name[0] != '@') {
		fprintf(stderr, "pacefs: plan: %s: %s\n", mnt,
			n < 0 && errno != ENODATA && errno != ENOTSUP
				? strerror(errno)
				: "not a pacefs mount with read plans");
		return -1;
	}
	memcpy(a.sun_path + 1, name + 1, (size_t)n - 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 ||
	    connect(fd, (struct sockaddr *)&a,
		    (socklen_t)(offsetof(struct sockaddr_un, sun_path) +
				(size_t)n)) != 0) {
		fprintf(stderr, "pacefs: plan: %s: control socket: %s\n", mnt,
			strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

static int send_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* The daemon's answer to stdout (stderr for an error); 0 when "ok". */
static int answer(int fd)
{
	char buf[4096];
	size_t have = 0;
	ssize_t got;

	while (have < sizeof(buf) - 1 &&
	       (got = recv(fd, buf + have, sizeof(buf) - 1 - have, 0)) > 0)
		have += (size_t)got;
	buf[have] = '\0';
	if (strncmp(buf, "ok", 2) == 0) {
		printf("pacefs: plan: %s", buf);
		return 0;
	}
	fprintf(stderr, "pacefs: plan: %s",
		have ? buf : "no answer from the mount\n");
	return 1;
}

int cli_plan_command(int argc, char **argv)
{
	const char *name = "default", *mnt = NULL, *list = NULL;
	bool clear = false, nul = false;
	char header[160];
	FILE *in = NULL;
	char *buf = NULL;
	int fd, rc = 1;

	for (int i = 2; i < argc; i++) {
		if (strcmp(argv[i], "--clear") == 0)
			clear = true;
		else if (strcmp(argv[i], "-0") == 0 ||
			 strcmp(argv[i], "--null") == 0)
			nul = true;
		else if (strcmp(argv[i], "--name") == 0 && i + 1 < argc)
			name = argv[++i];
		else if (strcmp(argv[i], "-h") == 0 ||
			 strcmp(argv[i], "--help") == 0) {
			fputs(usage, stdout);
			return 0;
		} else if (mnt == NULL && (argv[i][0] != '-'))
			mnt = argv[i];
		else if (list == NULL && mnt != NULL && !clear)
			list = argv[i];
		else {
			fprintf(stderr, "pacefs: plan: unexpected '%s'\n%s",
				argv[i], usage);
			return 1;
		}
	}
	if (mnt == NULL) {
		fprintf(stderr, "pacefs: plan: %s", usage);
		return 1;
	}
	if (!clear) {
		in = list == NULL || strcmp(list, "-") == 0 ? stdin
							    : fopen(list, "r");
		if (in == NULL) {
			fprintf(stderr, "pacefs: plan: %s: %s\n", list,
				strerror(errno));
			return 1;
		}
	}
	fd = connect_mount(mnt);
	if (fd < 0)
		goto out;
	snprintf(header, sizeof(header), "pacefs-plan 1 %s %s %s\n",
		 clear ? "clear" : "set", nul ? "nul" : "nl", name);
	if (send_all(fd, header, strlen(header)) != 0)
		goto answer;
	buf = malloc(65536);
	while (!clear && buf != NULL) {
		size_t n = fread(buf, 1, 65536, in);

		if (n == 0 || send_all(fd, buf, n) != 0)
			break;
	}
answer:
	shutdown(fd, SHUT_WR);
	rc = answer(fd);
	close(fd);
out:
	free(buf);
	if (in != NULL && in != stdin)
		fclose(in);
	return rc;
}

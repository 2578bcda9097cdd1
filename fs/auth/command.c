/* command: runs a command that gives credentials (-o auth_command=, a
 * credential_process) as nothing else of pacefs's runs: bounded in time
 * and output, with no descriptor of the daemon's but its output pipe and
 * standard error, in a process group of its own that dies with its run,
 * its thread and the mount. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fs/auth/auth_int.h"
#include "fs/base.h"

static int64_t mono_ms(void)
{
	return (int64_t)(fs__now_ns() / 1000000u);
}

/* The child's side of auth__command_run: standard input /dev/null, standard
 * output the pipe, standard error pacefs's, nothing else (a descriptor pacefs
 * or a library left open, data.mdb or a socket, is none of its business), a
 * process group of its own that pacefs kills, killed too when the thread
 * that started it ends. Only async-signal-safe calls: another thread may
 * have held a lock at the fork. */
static void child(const char *cmd, int out_fd, pid_t parent)
{
	sigset_t none;
	int nul;

	setpgid(0, 0);
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(127);
	nul = open("/dev/null", O_RDONLY);
	if (nul < 0 || dup2(nul, 0) < 0 || dup2(out_fd, 1) < 0)
		_exit(127);
	if (close_range(3, ~0u, 0) != 0)
		for (int fd = 3; fd < 65536; fd++)
			close(fd);
	signal(SIGPIPE, SIG_DFL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
	_exit(127);
}

/* Reaps pid, and kills what is left of its process group (a command that
 * left a child behind, or that ran out of time): nothing it started
 * outlives its run. */
static int reap(pid_t pid, bool kill_first)
{
	int status = -1;

	if (kill_first)
		kill(-pid, SIGKILL);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	kill(-pid, SIGKILL);
	return status;
}

/* Reads the running command's output from fd into buf (*got bytes so
 * far) until it closes it, polling stopping and the deadline. 0, or -EIO
 * with one line in err: the caller then kills the command. */
static int read_output(int fd, char *buf, size_t *got, int64_t deadline,
		       unsigned timeout_s, const atomic_bool *stopping,
		       char *err, size_t errlen)
{
	for (;;) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		int64_t left = deadline - mono_ms();
		ssize_t n;

		if (atomic_load(stopping))
			return fs__errf(err, errlen, -EIO,
					"the mount ends; it was killed");
		if (left <= 0)
			return fs__errf(err, errlen, -EIO,
					"it did not finish within %u s (-o "
					"read_timeout=); it was killed",
					timeout_s);
		/* A tenth of a second at most, so that an unmount is seen. */
		if (poll(&p, 1, left < 100 ? (int)left : 100) <= 0)
			continue;
		n = read(fd, buf + *got, AUTH_COMMAND_OUT_MAX - *got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return fs__errf(err, errlen, -EIO,
					"cannot read its output: %s",
					strerror(errno));
		if (n == 0)
			return 0;
		*got += (size_t)n;
		if (*got == AUTH_COMMAND_OUT_MAX)
			return fs__errf(err, errlen, -EIO,
					"it printed more than %d bytes",
					AUTH_COMMAND_OUT_MAX);
	}
}

/* Waits for the command, whose output has ended, to exit, into *status.
 * 0, or -EIO with one line in err (the mount ends, or the deadline
 * passed): the caller then kills it. */
static int await_exit(pid_t pid, int64_t deadline, unsigned timeout_s,
		      const atomic_bool *stopping, int *status, char *err,
		      size_t errlen)
{
	*status = -1;
	while (waitpid(pid, status, WNOHANG) == 0) {
		if (atomic_load(stopping))
			return fs__errf(err, errlen, -EIO,
					"the mount ends; it was killed");
		if (mono_ms() >= deadline)
			return fs__errf(err, errlen, -EIO,
					"it closed its output but did not exit "
					"within %u s (-o read_timeout=); it "
					"was killed",
					timeout_s);
		poll(NULL, 0, 20);
	}
	return 0;
}

int auth__command_run(const char *cmd, unsigned timeout_s,
		      const atomic_bool *stopping, char **out, size_t *len,
		      char *err, size_t errlen)
{
	int64_t deadline;
	char *buf = malloc(AUTH_COMMAND_OUT_MAX + 1);
	size_t got = 0;
	int pfd[2] = {-1, -1}, status = -1, rc = -EIO;
	pid_t pid = -1, me = getpid();

	if (timeout_s == 0)
		timeout_s = 60;
	deadline = mono_ms() + (int64_t)timeout_s * 1000;
	if (buf == NULL || pipe2(pfd, O_CLOEXEC) != 0) {
		rc = fs__errf(err, errlen, -EIO, "cannot run it: %s",
			      strerror(errno));
		goto out;
	}
	pid = fork();
	if (pid == 0)
		child(cmd, pfd[1], me);
	if (pid < 0) {
		rc = fs__errf(err, errlen, -EIO, "cannot run it: %s",
			      strerror(errno));
		goto out;
	}
	setpgid(pid, pid); /* no race with the child's own setpgid */
	close(pfd[1]);
	pfd[1] = -1;
	/* On a failure, out: kills the command and its group. */
	rc = read_output(pfd[0], buf, &got, deadline, timeout_s, stopping, err,
			 errlen);
	if (rc == 0)
		rc = await_exit(pid, deadline, timeout_s, stopping, &status,
				err, errlen);
	if (rc != 0)
		goto out;
	/* Its output ended and it exited: what is left of its group goes. */
	kill(-pid, SIGKILL);
	pid = -1;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		rc = fs__errf(err, errlen, -EIO, "it exited with status %d",
			      WIFEXITED(status) ? WEXITSTATUS(status) : -1);
		goto out;
	}
	buf[got] = '\0';
	*out = buf;
	*len = got;
	buf = NULL;
	rc = 0;
out:
	if (pid > 0)
		reap(pid, true);
	if (buf != NULL) {
		explicit_bzero(buf, got);
		free(buf);
	}
	if (pfd[0] >= 0)
		close(pfd[0]);
	if (pfd[1] >= 0)
		close(pfd[1]);
	return rc;
}

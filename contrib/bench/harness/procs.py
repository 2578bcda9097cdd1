"""Processes the bench starts and must stop: servers, mount daemons and timed
steps, each in a session of its own so that a Ctrl-C reaches the bench
alone, which then stops them in order (steps, mounts, daemons, servers).
"""
import os
import signal
import subprocess
import time


def mount_line(mnt):
    """/proc/self/mountinfo's line for MNT, or None."""
    found = None
    with open("/proc/self/mountinfo") as f:
        for line in f:
            p = line.split()
            if len(p) > 4 and p[4] == mnt:
                found = line
    return found


def mounts_under(path):
    out = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            p = line.split()
            if len(p) > 4 and (p[4] == path or p[4].startswith(path + "/")):
                out.append(p[4])
    return out


def alive(proc):
    return proc.poll() is None


def wait_gone(proc, secs):
    try:
        proc.wait(timeout=secs)
        return True
    except subprocess.TimeoutExpired:
        return False


def signal_group(proc, sig):
    """SIG to PROC's session (it leads one: its workers go with it)."""
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def stop(proc, secs=5):
    """TERM to PROC and its group, then KILL after SECS; reaps it."""
    if proc.poll() is not None:
        return
    signal_group(proc, signal.SIGTERM)
    if not wait_gone(proc, secs):
        kill(proc)


def kill(proc):
    """PROC and its group killed at once, as a machine that dies: its
    connections reset mid-transfer. Stopped first, so that an nginx
    master cannot start another worker before its own KILL."""
    signal_group(proc, signal.SIGSTOP)
    signal_group(proc, signal.SIGKILL)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


def fuse_abort(mnt):
    """Aborts MNT's FUSE connection so that a hung daemon cannot block the
    unmount."""
    line = mount_line(mnt)
    if not line:
        return
    minor = line.split()[2].partition(":")[2]
    path = f"/sys/fs/fuse/connections/{minor}/abort"
    try:
        with open(path, "w") as f:
            f.write("1")
    except OSError:
        pass


def unmount(mnt):
    """Unmounts MNT (lazily, aborting its connection, when busy or hung);
    True once it is gone."""
    if not mount_line(mnt):
        return True
    r = subprocess.run(["fusermount3", "-u", mnt], stderr=subprocess.DEVNULL)
    if r.returncode != 0:
        r = subprocess.run(["umount", "-l", mnt], stderr=subprocess.DEVNULL)
        if r.returncode != 0:
            fuse_abort(mnt)
            subprocess.run(["umount", "-l", mnt], stderr=subprocess.DEVNULL)
    for _ in range(100):
        if not mount_line(mnt):
            return True
        time.sleep(0.05)
    return False


def mount_wait(mnt, proc, secs):
    """0 once MNT is mounted, 1 when PROC exited first, 2 when SECS ran out."""
    for _ in range(int(secs * 20)):
        if mount_line(mnt):
            return 0
        if proc.poll() is not None:
            return 1
        time.sleep(0.05)
    return 2


def proc_kib(pid, field):
    """A /proc/PID/status figure (VmHWM, VmRSS) in KiB, or "-" when the
    process is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                p = line.split()
                if p and p[0] == field + ":":
                    return p[1]
    except OSError:
        pass
    return "-"


class Tracker:
    """Everything started, to be stopped on the way out whatever happens."""

    def __init__(self):
        self.steps = []     # timed commands running now
        self.mounts = []    # mountpoints, in the order they were made
        self.daemons = []   # mount daemons
        self.servers = []   # origins and proxies
        self.threads = []   # (thread, stop event): the connection sampler

    def start(self, kind, cmd, **kw):
        """Popen CMD in a session of its own, tracked as KIND."""
        kw.setdefault("stdin", subprocess.DEVNULL)
        p = subprocess.Popen(cmd, start_new_session=True, **kw)
        getattr(self, kind).append(p)
        return p

    def forget(self, kind, proc):
        lst = getattr(self, kind)
        if proc in lst:
            lst.remove(proc)

    def stop_all(self, log=print):
        """Steps killed, mounts unmounted (last first), daemons and servers
        stopped; returns the mountpoints still mounted."""
        for p in self.steps:
            stop(p, 2)
        for t, ev in self.threads:
            ev.set()
            t.join(5)
        left = []
        for m in reversed(self.mounts):
            if not unmount(m):
                left.append(m)
                log(f"bench: {m} is still mounted")
        for p in self.daemons + self.servers:
            stop(p)
        return left

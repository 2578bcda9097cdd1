"""pacefs_plan: hand a pacefs mount the order in which files will be read.

Standard library only. A read plan is an ordered list of paths inside a
mount; the mount fetches the files ahead of the reader, paced by how fast
they are opened. Paths are relative to the mount point (a path inside it
is made relative); each may carry a byte range, (path, offset, length).

    import pacefs_plan
    pacefs_plan.plan("/mnt/data", ["a/1.jpg", "a/2.jpg"], name="job1")
    pacefs_plan.clear("/mnt/data", name="job1")

PlannedSampler wraps any iterable of indices (a PyTorch Sampler) and a
function from index to path: each epoch's order goes to the mount before
the first index is yielded.
"""
import os
import socket

__all__ = ["plan", "clear", "PlannedSampler", "PlanError"]

_CHUNK = 1 << 16


class PlanError(Exception):
    """The mount refused the request, or is no pacefs mount with read
    plans (the message says why)."""


def _connect(mountpoint):
    try:
        name = os.getxattr(mountpoint, "user.pacefs.control")
    except OSError as e:
        raise PlanError("%s: not a pacefs mount with read plans (%s)"
                        % (mountpoint, e.strerror)) from e
    if not name.startswith(b"@"):
        raise PlanError("%s: unexpected control name" % mountpoint)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(b"\0" + name[1:])
    return s


def _entry(mountpoint, item):
    off = length = None
    if isinstance(item, tuple):
        item, off, length = item
    path = os.fspath(item)
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    if os.path.isabs(path):
        path = os.path.relpath(path, mountpoint)
    if "\0" in path:
        raise ValueError("a path with a NUL byte: %r" % path)
    if off is not None:
        path = "%s\t%d+%d" % (path, off, length)
    return os.fsencode(path) + b"\0"


def _request(mountpoint, op, name, entries=()):
    s = _connect(mountpoint)
    try:
        s.sendall(("pacefs-plan 1 %s nul %s\n" % (op, name or "default"))
                  .encode())
        buf = []
        size = 0
        for item in entries:
            e = _entry(mountpoint, item)
            buf.append(e)
            size += len(e)
            if size >= _CHUNK:
                s.sendall(b"".join(buf))
                buf, size = [], 0
        if buf:
            s.sendall(b"".join(buf))
        s.shutdown(socket.SHUT_WR)
        out = b""
        while True:
            got = s.recv(4096)
            if not got:
                break
            out += got
    finally:
        s.close()
    text = out.decode("utf-8", "replace")
    if not text.startswith("ok"):
        raise PlanError(text.strip() or "no answer from the mount")
    return text.strip()


def plan(mountpoint, paths, name=None):
    """Sets the plan `name` (default "default") of mountpoint to paths,
    an iterable streamed to the mount (never held whole here). Returns the
    mount's answer ("ok N entries, M missing" and the first missing
    paths); raises PlanError when refused."""
    return _request(mountpoint, "set", name, paths)


def clear(mountpoint, name=None):
    """Clears the plan `name` of mountpoint (only its owner may)."""
    return _request(mountpoint, "clear", name)


class PlannedSampler:
    """Wraps an iterable of indices (e.g. a torch Sampler): at each
    epoch's start its order is listed, handed to the mount as a plan
    through path_of(index), then yielded.

        sampler = PlannedSampler(RandomSampler(ds), "/mnt/data",
                                 lambda i: ds.files[i], name="rank0")
        DataLoader(ds, sampler=sampler, num_workers=8)
    """

    def __init__(self, sampler, mountpoint, path_of, name=None):
        self.sampler = sampler
        self.mountpoint = mountpoint
        self.path_of = path_of
        self.name = name

    def __iter__(self):
        order = list(self.sampler)
        plan(self.mountpoint, (self.path_of(i) for i in order), self.name)
        return iter(order)

    def __len__(self):
        return len(self.sampler)

    def set_epoch(self, epoch):
        if hasattr(self.sampler, "set_epoch"):
            self.sampler.set_epoch(epoch)

"""Workloads over a folder of many files, every system mounting the same
listing: the folder's origin on loopback or WAN, one cold run of a
command through a fresh mount with the daemon's peak RSS and the
connections it kept (the loader's and fio's way; a scale workload's too).
"""
import os
import shutil

from . import procs
from .limits import ConnWatch
from .runner import Origin


def origin_of(b, o, folder):
    """The origin whose listing is the folder FOLDER of www: on loopback
    nginx's URL/FOLDER; on the WAN a pacefs-origin of its own with the WAN
    caps rooted at the folder (httpdirfs asks for a folder's listing without
    the trailing slash, which nginx redirects and pacefs-origin answers with
    a 404), started at the first call; the near origin likewise, with the
    near caps."""
    if o == "lo":
        ng = b.nginx
        return Origin(f"{ng.url}/{folder}", ng.log, ng.proc)
    if o not in ("wan", "near"):
        raise ValueError(f"unknown origin {o} (wan, near or lo)")
    key = f"{o}_{folder}"
    if key not in b.folder_origins:
        start = b.start_wan if o == "wan" else b.start_near
        b.folder_origins[key] = start(key, os.path.join(b.www, folder))
    return b.folder_origins[key]


def names(b, folder):
    """The files of FOLDER as the set's generator listed them."""
    with open(b.path("sets", folder + ".names")) as f:
        return f.read().split()


def tree_step(b, wl, sys_, r, o, folder, cold, cmd, timeout, opts=(), mount_sys=None):
    """One cold run of CMD through a fresh mount of SYS on the listing of
    FOLDER of origin O (pacefs mounts its directory index); MOUNT_SYS,
    when given, is the system mounted (with OPTS) for the record SYS,
    such as pacefs for "pacefs_plan". COLD: the files
    cold_caches reads (the first must show in the mount). b.path("tree.list")
    holds the folder's files as paths in the mount, and @MNT@ in CMD becomes
    the mountpoint. Records CMD's line with the origin's requests and bytes
    from mount to unmount, the daemon's peak RSS (VmHWM, before the unmount)
    and the connections during CMD. The cache is removed after the unmount:
    these workloads leave up to gigabytes in each."""
    try:
        og = origin_of(b, o, folder)
    except RuntimeError as e:
        b.record(wl, sys_, r, f"failed: the origin of {folder} did not start: {e}")
        return
    mnt, cache = b.fresh(r, sys_)
    mark = og.mark()
    try:
        m = b.mount(mount_sys or sys_, og.url, cold[0], mnt, cache, opts=opts, tree=True)
    except b.MountError as e:
        b.record(wl, sys_, r, f"failed: mount: {e}")
        shutil.rmtree(cache, ignore_errors=True)
        return
    b.cold_caches(*(f"{folder}/{n}" for n in cold))
    with open(b.path("tree.list"), "w") as f:
        for n in names(b, folder):
            f.write(f"{mnt}/{n}\n")
    with ConnWatch(b, og.port) as cw:
        line = b.step([a.replace("@MNT@", mnt) for a in cmd], timeout=timeout)
    hwm = procs.proc_kib(m.pid, "VmHWM")
    b.umount(m)
    shutil.rmtree(cache, ignore_errors=True)
    # "-" when the daemon is gone (httpdirfs has crashed): no figure
    hwm = "daemon_gone=1" if hwm == "-" else f"hwm_kib={hwm}"
    b.record(wl, sys_, r, line, f"{og.pulled(mark)} {hwm} {cw.figures()}")
    b.show(wl, sys_, r)

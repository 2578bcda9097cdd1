"""A manifest of many files (scale_100k, scale_1m, scale_10m): generated
manifests of SCALE_SIZES entries shaped like ImageNet's training set
(genmanifest.py: 1,000 files a directory, one URL each under the loopback
nginx's prefix, and a size), each mounted by pacefs alone (rclone and
httpdirfs mount no manifest): the time from pacefs's start until the
last file stats, the daemon's RSS then and its peak (VmHWM: the parse),
a stat of 20,000 random paths (each one's first, which the kernel asks
the daemon: p50, p99), and a `find` of every entry. Nothing is fetched:
the manifest gives the sizes.

And an nginx autoindex tree (scale_index): SCALE_INDEX_FILES sparse files
of varied sizes, 1,000 a directory, in www (nginx's `autoindex on`, exact
sizes, as it serves the rest), mounted fresh by each system (pacefs's
directory-index mount of the tree's URL, rclone's http remote,
httpdirfs), and an `ls -lR` of the whole tree through the mount: its wall
time, the daemon's peak RSS (VmHWM) and the origin's requests; every file
must be listed with its size.
"""
import os
import random
import subprocess
import sys
import time

from harness import procs
from harness.runner import SYSTEMS
from harness.stats import f, qx, verdict_q, yesno

GEN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "genmanifest.py")
PER_DIR = 1000
STATS = 20000
TO_SCALE = 900  # a 10 M manifest's mount and find, on a loaded machine
TO_LSR = 900    # httpdirfs's ls -lR of 200,000 files took 117 s on a quiet machine
INDEX = "scaleidx"
LABELS = {100000: "100k", 1000000: "1m", 10000000: "10m"}


def _label(n):
    return LABELS.get(n) or f"{n}"


def _sizes(b):
    return [int(x) for x in str(b.s["SCALE_SIZES"]).split()]


def _last(n):
    k = n - 1
    return "train/n%05d/img_%08d.JPEG" % (k // PER_DIR, k)


def _stat_lat(mnt, n):
    """p50 and p99 in µs of a stat of STATS random paths of the N."""
    rng = random.Random(7)
    lat = []
    for k in rng.sample(range(n), min(STATS, n)):
        p = os.path.join(mnt, "train/n%05d/img_%08d.JPEG" % (k // PER_DIR, k))
        t = time.perf_counter_ns()
        os.stat(p)
        lat.append(time.perf_counter_ns() - t)
    lat.sort()
    return lat[len(lat) // 2] / 1e3, lat[len(lat) * 99 // 100] / 1e3


def _one(b, wl, r, n, manifest):
    """One mount of MANIFEST (N files): its record's line."""
    mnt, cache = b.fresh(r, "pacefs")
    b.track.mounts.append(mnt)
    log = b.path("logs", "pacefs.log")
    with open(log, "a") as fl:
        fl.write(f"=== {time.strftime('%H:%M:%S')} mount pacefs {manifest} at {mnt}\n")
        t0 = time.monotonic()
        p = b.track.start("daemons", [b.pacefs, "-f", "-o", f"cache_dir={cache}", manifest, mnt],
                          stdout=fl, stderr=subprocess.STDOUT)
    last = os.path.join(mnt, _last(n))
    try:
        while not os.path.exists(last):
            if p.poll() is not None:
                return f"failed: pacefs exited {p.returncode} while mounting"
            if time.monotonic() - t0 > TO_SCALE:
                return f"failed: {_last(n)} did not stat within {TO_SCALE}s"
            time.sleep(0.02)
        mount_s = time.monotonic() - t0
        rss, hwm = procs.proc_kib(p.pid, "VmRSS"), procs.proc_kib(p.pid, "VmHWM")
        p50, p99 = _stat_lat(mnt, n)
        t = time.monotonic()
        found = subprocess.run(["find", mnt], stdout=subprocess.PIPE, timeout=TO_SCALE,
                               check=True).stdout.count(b"\n")
        find_s = time.monotonic() - t
        return (f"ok mount_s={mount_s:.3f} rss_kib={rss} hwm_kib={hwm} stat_p50_us={p50:.1f} "
                f"stat_p99_us={p99:.1f} find_s={find_s:.3f} entries={found}")
    finally:
        procs.unmount(mnt)
        if not procs.wait_gone(p, 10):
            procs.kill(p)
        b.track.forget("daemons", p)
        b.rmtree(cache)


def scale(b):
    for n in _sizes(b):
        wl = f"scale_{_label(n)}"
        manifest = b.path("scale.json")
        b.say(f"  {wl}: writing a manifest of {n} files")
        subprocess.run([sys.executable, GEN, "--dirs", str(max(1, n // PER_DIR)), "--per-dir",
                        str(min(n, PER_DIR)), b.nginx.url + "/", manifest],
                       stdout=subprocess.DEVNULL, check=True)
        for r in b.run_range():
            with open(manifest, "rb") as fm:  # its read is not what is timed
                while fm.read(1 << 24):
                    pass
            b.record(wl, "pacefs", r, _one(b, wl, r, n, manifest))
            b.show(wl, "pacefs", r)
        os.unlink(manifest)


def _index_size(k):
    """The K-th file's size: varied, up to a MiB, never 0 (sparse on disk)."""
    return 1 + (k * 7919) % (1 << 20)


def _index_tree(b, n):
    """www/INDEX: N sparse files, PER_DIR a directory (dNNN/fNNNNNNN.bin);
    the bytes of them all."""
    root = os.path.join(b.www, INDEX)
    total = 0
    for k in range(n):
        d = os.path.join(root, "d%03d" % (k // PER_DIR))
        if k % PER_DIR == 0:
            os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "f%07d.bin" % k), "wb") as fo:
            fo.truncate(_index_size(k))
        total += _index_size(k)
    return total


# ls -lR of ARGV[1] into ARGV[2], timed from the inside: "ok secs= files=
# dirs= bytes=" (the files' sizes as ls shows them, summed)
LSR = r"""
import subprocess, sys, time
t = time.monotonic()
with open(sys.argv[2], "wb") as out:
    rc = subprocess.run(["ls", "-lR", sys.argv[1]], stdout=out).returncode
secs = time.monotonic() - t
files = dirs = size = 0
with open(sys.argv[2], errors="replace") as fi:
    for ln in fi:
        if ln.startswith("-"):
            files += 1
            size += int(ln.split()[4])
        elif ln.startswith("d"):
            dirs += 1
if rc != 0:
    print(f"failed: ls -lR exited {rc} after {secs:.1f}s, {files} files listed")
else:
    print(f"ok secs={secs:.3f} files={files} dirs={dirs} bytes={size}")
"""


def scale_index(b):
    n = int(b.s["SCALE_INDEX_FILES"])
    b.say(f"  scale_index: {n} sparse files in {max(1, n // PER_DIR)} directories")
    total = _index_tree(b, n)
    # Written back before anything is timed: the writeback of 200,000 new
    # inodes otherwise runs beside the first system's listing (it tripled
    # pacefs's time, the first measured, in a trial).
    os.sync()
    # the origin's side warm, as a busy server's would be
    subprocess.run(["ls", "-lR", os.path.join(b.www, INDEX)], stdout=subprocess.DEVNULL, check=True)
    base = f"{b.nginx.url}/{INDEX}"
    for r in b.run_range():
        # the floor: ls -lR of the tree itself, from the page cache
        b.record("scale_index", "local", r,
                 b.step([sys.executable, "-c", LSR, os.path.join(b.www, INDEX), b.path("lsr.out")]))
        for sys_ in SYSTEMS:
            mnt, cache = b.fresh(r, sys_)
            mark = b.nginx.mark()
            try:
                m = b.mount(sys_, base, "d000", mnt, cache, tree=True)
            except b.MountError as e:
                b.record("scale_index", sys_, r, f"failed: mount: {e}")
                b.rmtree(cache)
                continue
            line = b.step([sys.executable, "-c", LSR, mnt, b.path("lsr.out")], timeout=TO_LSR)
            hwm = procs.proc_kib(m.pid, "VmHWM")
            b.umount(m)
            b.rmtree(cache)
            if line.startswith("ok") and f" files={n} " not in line:
                line = f"failed: {line.split(' files=')[1].split()[0]} of {n} files listed"
            elif line.startswith("ok") and not line.endswith(f" bytes={total}"):
                line = f"failed: sizes differ: {line.split(' bytes=')[1]} bytes listed of {total}"
            b.record("scale_index", sys_, r, line, f"{b.nginx.pulled(mark)} hwm_kib={hwm}")
            b.show("scale_index", sys_, r)
    b.rmtree(os.path.join(b.www, INDEX))


WORKLOADS = {"scale": scale, "scale_index": scale_index}
NOISE = {"scale_[0-9]*": "mount_s", "scale_index": "secs"}


# --- report -----------------------------------------------------------------

def _wls(rep):
    return [(n, f"scale_{_label(n)}") for n in (int(x) for x in str(rep.s("SCALE_SIZES", "")).split())
            if rep.fig.rows(f"scale_{_label(n)}", "pacefs")]


def _both(a, b):
    """Two verdicts as one: the first that is not met, else met."""
    return a if a != "**met**" else b


def targets(rep):
    m = rep.fig.med
    out = []
    for n, wl in _wls(rep):
        rss, mount = m(wl, "pacefs", "rss_kib"), m(wl, "pacefs", "mount_s")
        if n == 1000000:
            p50, p99 = m(wl, "pacefs", "stat_p50_us"), m(wl, "pacefs", "stat_p99_us")
            out += [f"| scale: 1 M-entry manifest, RSS after the mount <= 200 MiB | {f(rss, 1024, '%.0f')} MiB | {yesno('le', rss, 200 * 1024)} |",
                    f"| scale: 1 M-entry manifest, mount <= 3 s | {f(mount, 1, '%.2f')} s | {yesno('le', mount, 3)} |",
                    f"| scale: 1 M-entry manifest, stat p50 <= 40 µs, p99 <= 1 ms | {f(p50, 1, '%.0f')} / {f(p99, 1, '%.0f')} µs | {_both(yesno('le', p50, 40), yesno('le', p99, 1000))} |"]
        elif n == 10000000:
            out += [f"| scale: 10 M-entry manifest, RSS <= 2 GiB | {f(rss, 1024, '%.0f')} MiB | {yesno('le', rss, 2048 * 1024)} |",
                    f"| scale: 10 M-entry manifest, mount <= 30 s | {f(mount, 1, '%.1f')} s | {yesno('le', mount, 30)} |"]
    return out + _index_targets(rep)


def _index_files(rep):
    return int(rep.s("SCALE_INDEX_FILES", 0) or 0)


def _index_targets(rep):
    fig, wl = rep.fig, "scale_index"
    if not fig.rows(wl, "pacefs"):
        return []
    what = f"{_index_files(rep):,}-file index tree, `ls -lR`"
    out = []
    for key, bound, name, scale_, unit, fmt in (("secs", 0.3, "time", 1, "s", "%.1f"),
                                                 ("hwm_kib", 0.5, "peak RSS", 1024, "MiB", "%.0f")):
        q = fig.ratio_sys(wl, "pacefs", "rclone", key)
        out.append(f"| scale: {what}, {name} <= {bound}x rclone's | {qx(q)} "
                   f"({f(fig.med(wl, 'pacefs', key), scale_, fmt)} {unit} against "
                   f"{f(fig.med(wl, 'rclone', key), scale_, fmt)}) | "
                   f"{verdict_q(fig, 'le', q, bound, wl, key)} |")
    return out


def sections(rep):
    return _manifest_section(rep) + _index_section(rep)


def _manifest_section(rep):
    fig = rep.fig
    m = fig.med
    rows = _wls(rep)
    if not rows:
        return []
    out = ["## A manifest of many files (pacefs alone)", "",
           "Generated manifests shaped like ImageNet's training set (1,000 files a directory, one URL each and a size; nothing fetched): the time from pacefs's start until the last file stats, the daemon's RSS then and its peak (the parse), a stat of 20,000 random paths (each one's first, a FUSE lookup), and a `find` of every entry.", "",
           "| entries | mount s | runs | RSS after, MiB | peak, MiB | stat p50 µs | stat p99 µs | find s |",
           "| ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: |"]
    for n, wl in rows:
        out.append(f"| {n:,} | {f(m(wl, 'pacefs', 'mount_s'), 1, '%.2f')} | {fig.vals(wl, 'pacefs', 'mount_s', 1, '%.2f')} | "
                   f"{f(m(wl, 'pacefs', 'rss_kib'), 1024, '%.0f')} | {f(m(wl, 'pacefs', 'hwm_kib'), 1024, '%.0f')} | "
                   f"{f(m(wl, 'pacefs', 'stat_p50_us'), 1, '%.0f')} | {f(m(wl, 'pacefs', 'stat_p99_us'), 1, '%.0f')} | "
                   f"{f(m(wl, 'pacefs', 'find_s'), 1, '%.2f')} |")
    out.append("")
    return out


def _index_section(rep):
    fig, wl = rep.fig, "scale_index"
    if not any(fig.rows(wl, s) for s in SYSTEMS):
        return []
    m = fig.med
    out = ["## An index tree of many files: `ls -lR`", "",
           f"An nginx autoindex tree of {_index_files(rep):,} files, 1,000 a directory (sparse files of varied sizes; `autoindex on`, exact sizes), mounted fresh by each system (pacefs mounts the tree's URL as a directory index, rclone its http remote, httpdirfs the URL), then `ls -lR` of the whole tree through the mount: every file listed with its size. The daemon's peak RSS (VmHWM) and the origin's requests, mount to unmount; local is `ls -lR` of the tree on disk (from the page cache: the floor).", "",
           "| system | ls -lR s | runs | peak RSS, MiB | runs | requests | time / pacefs's |",
           "| --- | ---: | --- | ---: | --- | ---: | ---: |"]
    for s in (*SYSTEMS, "local"):
        if not fig.rows(wl, s):
            continue
        rel = "-" if s == "pacefs" else qx(fig.ratio_sys(wl, s, "pacefs", "secs"))
        out.append(f"| {s} | {f(m(wl, s, 'secs'), 1, '%.1f')} | {fig.vals(wl, s, 'secs', 1, '%.1f')} | "
                   f"{f(m(wl, s, 'hwm_kib'), 1024, '%.0f')} | {fig.vals(wl, s, 'hwm_kib', 1024, '%.0f')} | "
                   f"{f(m(wl, s, 'reqs'), 1, '%.0f')} | {rel} |")
    out.append("")
    return out

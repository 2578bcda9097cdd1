"""A manifest of many files (scale_100k, scale_1m, scale_10m): generated
manifests of SCALE_SIZES entries shaped like ImageNet's training set
(genmanifest.py: 1,000 files a directory, one URL each under the loopback
nginx's prefix, and a size), each mounted by pacefs alone (rclone and
httpdirfs mount no manifest): the time from pacefs's start until the
last file stats, the daemon's RSS then and its peak (VmHWM: the parse),
a stat of 20,000 random paths (each one's first, which the kernel asks
the daemon: p50, p99), and a `find` of every entry. Nothing is fetched:
the manifest gives the sizes.
"""
import os
import random
import subprocess
import sys
import time

from harness import procs
from harness.stats import f, yesno

GEN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "genmanifest.py")
PER_DIR = 1000
STATS = 20000
TO_SCALE = 900  # a 10 M manifest's mount and find, on a loaded machine
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


WORKLOADS = {"scale": scale}
NOISE = {"scale_*": "mount_s"}


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
    return out


def sections(rep):
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

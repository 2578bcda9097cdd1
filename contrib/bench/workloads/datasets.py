"""Data clients on the WAN origin, each on a fresh mount, on the local copy
(the floor) and through the client's own remote reader where it has one:
GDAL reading three windows (gdal) and the overview (gdal_ovr) of a
Cloud-Optimized GeoTIFF against /vsicurl/; h5py reading bands and
scattered chunks of an HDF5 file against its ros3 driver (h5py); a
squashfs image of a library tree mounted by squashfuse on top of the
file inside each mount, scattered files read whole (sqfs).
dataclients.py makes the files and reads them, checking every result
against the local copy's.
"""
import hashlib
import os
import subprocess
import time

from harness import procs
from harness.runner import SYSTEMS, Mount
from harness.settings import TO_MOUNT
from harness.stats import MiB, f, g, label, mul, ratio, sub, yesno

# the client's own remote reader of each workload
NATIVE = {"gdal": "vsicurl", "gdal_ovr": "vsicurl", "h5py": "ros3"}
FILES = {"gdal": "cog.tif", "h5py": "data.h5", "sqfs": "lib.sqfs"}


def _stamp(b, wl):
    with open(b.dcl[1], "rb") as fp:
        code = hashlib.md5(fp.read()).hexdigest()
    s = b.s
    size = {"gdal": s["COG_SIZE"], "h5py": s["H5_SIZE"], "sqfs": f"{s['SQFS_FILES']} {s['SQFS_READ']}"}[wl]
    return f"{wl} {size} {code}"


def _fresh(b, wl, make):
    """Runs MAKE(data dir) unless DATA/WL.stamp says the files are of these
    settings and this dataclients.py (BENCH_DATA keeps them across runs)."""
    data = b.data_dir
    os.makedirs(data, exist_ok=True)
    sp = os.path.join(data, wl + ".stamp")
    stamp = _stamp(b, wl)
    try:
        with open(sp) as fp:
            if fp.read() == stamp:
                return
    except OSError:
        pass
    if os.path.exists(sp):
        os.unlink(sp)
    b.say(f"generating {wl}'s files in {data}")
    make(data)
    with open(sp, "w") as fp:
        fp.write(stamp)


def _run(b, *args):
    subprocess.run(b.dcl + [str(a) for a in args], check=True, stdout=subprocess.DEVNULL)


def gen(b):
    """The COG, the HDF5 file and the image (with the local copy's reads as
    references, and the image's tree to compare its files with) in DATA,
    then linked into www."""
    s = b.s
    if b.wanted("gdal"):
        _fresh(b, "gdal", lambda d: (_run(b, "gen-cog", f"{d}/cog.tif", s["COG_SIZE"]),
                                     _run(b, "cog-refs", f"{d}/cog.tif", f"{d}/cog.refs")))
    if b.wanted("h5py"):
        _fresh(b, "h5py", lambda d: (_run(b, "gen-h5", f"{d}/data.h5", s["H5_SIZE"]),
                                     _run(b, "h5-refs", f"{d}/data.h5", f"{d}/h5.refs")))
    if b.wanted("sqfs"):
        _fresh(b, "sqfs", lambda d: _run(b, "gen-sqfs", f"{d}/tree", f"{d}/lib.sqfs", s["SQFS_FILES"],
                                         f"{d}/sqfs.list", s["SQFS_READ"]))
    made = {"gdal": "COG_BYTES", "h5py": "H5_BYTES", "sqfs": "SQFS_IMAGE"}
    for wl, name in FILES.items():
        if b.wanted(wl):
            b.link(os.path.join(b.data_dir, name), os.path.join(b.www, name))
            # the files' sizes and GDAL's version, for the report
            b.res.meta["settings"][made[wl]] = os.path.getsize(os.path.join(b.www, name))
    if b.wanted("gdal"):
        v = subprocess.run(["gdalinfo", "--version"], capture_output=True, text=True).stdout.strip()
        b.res.meta["settings"]["GDAL_VERSION"] = v.split(",")[0] or "GDAL"


def _warm(b):
    """GDAL's, h5py's and numpy's modules and libraries back in the page
    cache after cold_caches (dataclients.py imports them before its clock
    starts; their lazily loaded parts would otherwise come from disk)."""
    subprocess.run(["/usr/bin/python3", "-c", "import h5py, numpy; from osgeo import gdal, gdal_array"],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _client(b, wl, r, args_of):
    """ARGS_OF(path) through a fresh mount of each system on the WAN origin,
    on the local copy (in the page cache) and, as ARGS_OF(None), through the
    client's own reader of the origin's URL; bytes pulled from mount to
    unmount."""
    name = FILES["gdal" if wl.startswith("gdal") else wl]
    for sys_ in ("local", *SYSTEMS, NATIVE[wl]):
        m = None
        mark = b.wan.mark()
        if sys_ == "local":
            b.cold_caches(name)
            path = os.path.join(b.www, name)
        elif sys_ == NATIVE[wl]:
            b.cold_caches(name)
            path = None
        else:
            m = b.cold_mount(wl, sys_, r, b.wan.url, name)
            if not m:
                continue
            path = m.path(name)
        _warm(b)
        line = b.step(args_of(path))
        if m:
            b.umount(m)
        b.record(wl, sys_, r, line, "" if sys_ == "local" else b.wan.pulled(mark))
        b.show(wl, sys_, r)


def gdal(b):
    d = b.data_dir
    url = f"/vsicurl/{b.wan.url}/{FILES['gdal']}"
    for r in b.run_range():
        for wl, what in (("gdal", "windows"), ("gdal_ovr", "overview")):
            _client(b, wl, r, lambda p: b.dcl + ["gdal", p or url, what, f"{d}/cog.refs"])


def h5py(b):
    d = b.data_dir
    url = f"{b.wan.url}/{FILES['h5py']}"
    for r in b.run_range():
        _client(b, "h5py", r, lambda p: b.dcl + ["h5", p or url, "file" if p else "ros3", f"{d}/h5.refs"])


def _sqfs_read(b, wl, r, sys_, image):
    """squashfuse mounts IMAGE (a file of a mount, or the local copy); the
    listed files are read whole through it; returns the step's line and
    the seconds from squashfuse's start to its mount."""
    inner = b.path("mnt", f"sq-{r}-{sys_}-{os.urandom(3).hex()}")
    os.makedirs(inner)
    b.track.mounts.append(inner)
    t0 = time.monotonic()
    with open(b.path("logs", "squashfuse.log"), "a") as lf:
        lf.write(f"=== {time.strftime('%H:%M:%S')} squashfuse {image} at {inner}\n")
        lf.flush()
        p = b.track.start("daemons", ["squashfuse", "-f", image, inner], stdout=lf, stderr=subprocess.STDOUT)
    rc = procs.mount_wait(inner, p, TO_MOUNT)
    secs = time.monotonic() - t0
    if rc != 0:
        b.umount(Mount(inner, p, None))
        return f"failed: squashfuse did not mount {image} ({'it exited' if rc == 1 else 'time-out'})", secs
    d = b.data_dir
    line = b.step(b.dcl + ["sqfs", inner, f"{d}/tree", f"{d}/sqfs.list"])
    b.umount(Mount(inner, p, None))
    return line, secs


def sqfs(b):
    name = FILES["sqfs"]
    for r in b.run_range():
        for sys_ in ("local", *SYSTEMS):
            m = None
            mark = b.wan.mark()
            if sys_ == "local":
                b.cold_caches(name)
                image = os.path.join(b.www, name)
            else:
                m = b.cold_mount("sqfs", sys_, r, b.wan.url, name)
                if not m:
                    continue
                image = m.path(name)
            line, msecs = _sqfs_read(b, "sqfs", r, sys_, image)
            if m:
                b.umount(m)
            extra = f"mount_secs={msecs:.6f}"
            if line.startswith("ok "):
                rsecs = float(line.split("secs=")[1].split()[0])
                extra += f" total_secs={msecs + rsecs:.6f}"
            b.record("sqfs", sys_, r, line, extra + ("" if sys_ == "local" else " " + b.wan.pulled(mark)))
            b.show("sqfs", sys_, r)


NEEDS = ("squashfuse", "mksquashfs", "gdalinfo")
WORKLOADS = {"gdal": gdal, "h5py": h5py, "sqfs": sqfs}
NOISE = {"gdal": "secs", "gdal_ovr": "secs", "h5py": "secs", "sqfs": "total_secs"}


# --- report -----------------------------------------------------------------

ROWS = (("gdal", "secs", "GDAL, three 1024 x 1024 windows"), ("gdal_ovr", "secs", "GDAL, the overview"),
        ("h5py", "secs", "h5py, two bands and 16 chunks"), ("sqfs", "total_secs", "squashfs image, files read whole"))


def _best_peer(m, wl, key):
    xs = [m(wl, s, key) for s in ("rclone", "httpdirfs")]
    xs = [x for x in xs if isinstance(x, (int, float))]
    return min(xs) if xs else "failed: no peer"


def targets(rep):
    fig = rep.fig
    m = fig.med
    rows = []
    if fig.has("gdal"):
        for wl, what in (("gdal", "windows"), ("gdal_ovr", "overview")):
            p, v = m(wl, "pacefs", "secs"), m(wl, "vsicurl", "secs")
            pp, vp = m(wl, "pacefs", "pulled"), m(wl, "vsicurl", "pulled")
            rows.append(f"| GDAL {what}: time <= GDAL's own /vsicurl/ | pacefs {f(p, 1, '%.2f')} s vs {f(v, 1, '%.2f')} s: {ratio(p, v)} | {yesno('le', p, v)} |")
            rows.append(f"| GDAL {what}: pulled <= 2x /vsicurl/'s | pacefs {f(pp, MiB, '%.1f')} MiB vs {f(vp, MiB, '%.1f')} MiB: {ratio(pp, vp)} | {yesno('le', pp, mul(vp, 2))} |")
    if fig.has("h5py"):
        p, v = m("h5py", "pacefs", "secs"), m("h5py", "ros3", "secs")
        pp, vp = m("h5py", "pacefs", "pulled"), m("h5py", "ros3", "pulled")
        rows.append(f"| h5py slices: time <= 0.8x the ros3 driver's | pacefs {f(p, 1, '%.2f')} s vs {f(v, 1, '%.2f')} s: {ratio(p, v)} | {yesno('le', p, mul(v, 0.8))} |")
        rows.append(f"| h5py slices: pulled <= 2x ros3's | pacefs {f(pp, MiB, '%.1f')} MiB vs {f(vp, MiB, '%.1f')} MiB: {ratio(pp, vp)} | {yesno('le', pp, mul(vp, 2))} |")
    if fig.has("sqfs"):
        p, best = m("sqfs", "pacefs", "total_secs"), _best_peer(m, "sqfs", "total_secs")
        pp, size = m("sqfs", "pacefs", "pulled"), rep.s("SQFS_IMAGE", None)
        rows.append(f"| squashfs image read in place, scattered files: time <= 0.5x the best peer's | pacefs {f(p, 1, '%.2f')} s vs {f(best, 1, '%.2f')} s: {ratio(p, best)} | {yesno('le', p, mul(best, 0.5))} |")
        if size:
            rows.append(f"| squashfs image: pulled <= the image's size | pacefs {f(pp, MiB, '%.1f')} MiB, the image {f(size, MiB, '%.1f')} MiB | {yesno('le', pp, size)} |")
    return rows


def headline(rep):
    fig = rep.fig
    m = fig.med
    out = []
    for wl, key, what in ROWS:
        if not fig.has(wl):
            continue
        cells = [f"{g(m(wl, s, key), 1, '%.2f')} s / {g(m(wl, s, 'pulled'), MiB, '%.1f')} MiB"
                 for s in (*SYSTEMS, *([NATIVE[wl]] if wl in NATIVE else []))]
        names = "pacefs / rclone / httpdirfs" + (f" / {NATIVE[wl]}" if wl in NATIVE else "")
        out.append(f"- {what}, WAN ({names}): {'; '.join(cells)}.")
    return out


def sections(rep):
    fig, S = rep.fig, rep.s
    m = fig.med
    if not any(fig.has(wl) for wl, _, _ in ROWS):
        return []
    cog, h5 = S("COG_SIZE", 0), S("H5_SIZE", 0)
    out = ["## Data clients (WAN origin)", "",
           "Each client runs on a fresh mount with an empty cache after the page cache is dropped (the clients' modules are then read back in), on the local copy, which is in the page cache (the floor without a network), and through its own remote reader of the same origin. Every result is compared with the local copy's read (md5 of each window, band and chunk; each file of the image byte for byte with the tree it was made from). Seconds from the open to the last result; pulled: the origin's log, mount to unmount.", "",
           f"- **GDAL** ({S('GDAL_VERSION', 'Debian python3-gdal')}): a Cloud-Optimized GeoTIFF of {cog} x {cog} UInt16 (10-bit noise), DEFLATE, 512-pixel tiles, overviews down to one tile (`gdal_translate -of COG`), {g(S('COG_BYTES', None), MiB, '%.0f')} MiB. **windows**: three 1024 x 1024 windows on tile boundaries, far apart (`ReadRaster`); **overview**: the overview 1024 pixels wide read whole (1/{cog // 1024 if cog else '-'} of the image), each in a process of its own. `GDAL_DISABLE_READDIR_ON_OPEN=EMPTY_DIR` for every system (no listing of the folder at open). The limit: GDAL's `/vsicurl/` on the origin's URL, its defaults otherwise.",
           f"- **h5py**: an HDF5 file of one {h5} x {h5} float32 dataset (whole numbers below 1024) in 256 x 256 chunks, gzip level 1, {g(S('H5_BYTES', None), MiB, '%.0f')} MiB; a row band and a column band one chunk thick and 16 scattered chunks, in one process. The limit: h5py's `ros3` driver (HDF5's read-only S3 driver, anonymous, on the origin's http:// URL), which Debian's h5py 3.7 / HDF5 1.10.8 has.",
           f"- **squashfs**: a library tree of {S('SQFS_FILES', 0)} files (packages of modules, sizes log-normal around 3 KiB, seven in ten source-like text, the rest random bytes) made into an image with `mksquashfs` (gzip, 128 KiB blocks), {g(S('SQFS_IMAGE', None), MiB, '%.1f')} MiB; `squashfuse` mounts the image file inside each mount, then {S('SQFS_READ', 0)} scattered files are read whole. Seconds: squashfuse's start to its mount, plus the reads; no client of its own reads HTTP.", "",
           "| workload | system | seconds | runs | above the floor, s | pulled MiB | pulled runs | requests | pacefs is |",
           "| --- | --- | ---: | --- | ---: | ---: | --- | ---: | ---: |"]
    for wl, key, what in ROWS:
        if not fig.has(wl):
            continue
        fl, fp = m(wl, "local", key), m(wl, "pacefs", key)
        for s in ("local", *SYSTEMS, *([NATIVE[wl]] if wl in NATIVE else [])):
            x = m(wl, s, key)
            lb = {"vsicurl": "GDAL /vsicurl/", "ros3": "h5py ros3"}.get(s, label(s))
            out.append(f"| {what} | {lb} | {f(x, 1, '%.3f')} | {fig.vals(wl, s, key, 1, '%.3f')} | {g(sub(x, fl), 1, '%.3f')} | {g(m(wl, s, 'pulled'), MiB, '%.2f')} | {fig.vals(wl, s, 'pulled', MiB, '%.2f')} | {g(m(wl, s, 'reqs'), 1, '%.0f')} | {ratio(fp, x)} |")
    if fig.has("sqfs"):
        out += ["", "squashfs, the mount alone (squashfuse's start to its mount: superblock, tables): " +
                ", ".join(f"{label(s)} {g(m('sqfs', s, 'mount_secs'), 1, '%.3f')} s" for s in ("local", *SYSTEMS)) + "."]
    out.append("")
    return out

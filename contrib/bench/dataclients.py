#!/usr/bin/python3
"""dataclients.py: the bench's data clients (make bench): makes a
Cloud-Optimized GeoTIFF, an HDF5 file and a squashfs image of a library
tree, and reads them as their users do (GDAL windows and an overview,
h5py bands and chunks, files of the image read whole), checking every
result against the local copy's; like clients.py it prints one line, "ok
key=value ..." or "failed: REASON" with exit status 1.

Usage: dataclients.py COMMAND ARGS... (see COMMANDS below). Times are
seconds of the monotonic clock from the open to the last byte checked.
GDAL and h5py come from Debian (python3-gdal, python3-h5py); the squashfs
commands need only the standard library and mksquashfs.
"""
import hashlib
import json
import os
import random
import subprocess
import sys
import time

# GDAL's tiles and the overview read: the one this many pixels wide (the
# whole image at 1/16 at the full size of 16384)
COG_BLOCK = 512
COG_WINDOW = 1024
COG_OVERVIEW = 1024
# h5py's chunks, and the scattered ones read
H5_CHUNK = 256
H5_SCATTERED = 16


class Failed(Exception):
    """A run that did not do what it should: the line's reason."""


def ok(**kv):
    print("ok " + " ".join(f"{k}={v}" for k, v in kv.items()), flush=True)


def md5(buf):
    return hashlib.md5(buf).hexdigest()


def check(got, refs, what):
    """GOT ({name: md5}) against the local copy's in REFS (a JSON object
    of such, by WHAT)."""
    with open(refs) as f:
        want = json.load(f)[what]
    if not want or set(got) != set(want):
        raise Failed(f"{what}: read {sorted(got)}, the local copy {sorted(want)}")
    for k, v in want.items():
        if got.get(k) != v:
            raise Failed(f"{what}: {k} differs from the local copy's read")


# --- GDAL and a Cloud-Optimized GeoTIFF --------------------------------------

def _gdal():
    from osgeo import gdal
    gdal.UseExceptions()
    # the setting every COG guide gives: no listing of the file's folder at
    # open (through a mount it is a readdir; on /vsicurl/ an HTTP listing)
    gdal.SetConfigOption("GDAL_DISABLE_READDIR_ON_OPEN", "EMPTY_DIR")
    return gdal


def gen_cog(out, size):
    """SIZE x SIZE UInt16 of 10-bit noise (DEFLATE keeps about 3/4 of it
    with the overviews), seeded, as a COG: DEFLATE, 512-pixel tiles, overviews
    down to one tile (GDAL's default)."""
    import numpy as np
    from osgeo import gdal_array
    gdal = _gdal()
    rng = np.random.default_rng(31)
    arr = rng.integers(0, 1024, size=(size, size), dtype=np.uint16)
    src = gdal_array.OpenArray(arr)
    tmp = out + ".tmp"
    gdal.Translate(tmp, src, format="COG",
                   creationOptions=["COMPRESS=DEFLATE", f"BLOCKSIZE={COG_BLOCK}", "NUM_THREADS=ALL_CPUS",
                                    "OVERVIEW_RESAMPLING=AVERAGE"])
    os.rename(tmp, out)
    ok(bytes=os.path.getsize(out))


def cog_windows(size):
    """Three 1024 x 1024 windows on tile boundaries (four tiles each), far
    apart: (x, y) offsets in pixels."""
    nb = size // COG_BLOCK
    out = []
    for fx, fy in ((1, 3), (5, 4), (6, 7)):
        bx, by = min(nb * fx // 8, nb - 2), min(nb * fy // 8, nb - 2)
        out.append((bx * COG_BLOCK, by * COG_BLOCK))
    return out


def _overview(band):
    """The band's overview COG_OVERVIEW pixels wide (the smallest wider
    one when there is none that size)."""
    best = None
    for i in range(band.GetOverviewCount()):
        o = band.GetOverview(i)
        if o.XSize >= COG_OVERVIEW and (best is None or o.XSize < best.XSize):
            best = o
    if best is None:
        raise Failed("no overview")
    return best


def gdal_read(path, what):
    """{name: md5} of WHAT (windows or overview) read from PATH, and the
    seconds from the open."""
    gdal = _gdal()
    t0 = time.monotonic()
    ds = gdal.Open(path)
    band = ds.GetRasterBand(1)
    got = {}
    if what == "windows":
        for x, y in cog_windows(ds.RasterXSize):
            got[f"w{x}_{y}"] = md5(band.ReadRaster(x, y, COG_WINDOW, COG_WINDOW))
    else:
        o = _overview(band)
        got[f"ovr{o.XSize}"] = md5(o.ReadRaster(0, 0, o.XSize, o.YSize))
    return got, time.monotonic() - t0


def cog_refs(path, refs):
    got = {what: gdal_read(path, what)[0] for what in ("windows", "overview")}
    with open(refs, "w") as f:
        json.dump(got, f)
    ok(reads=sum(len(v) for v in got.values()))


def gdal_cmd(path, what, refs):
    """PATH: a file or /vsicurl/URL."""
    try:
        got, secs = gdal_read(path, what)
    except RuntimeError as e:   # GDAL's errors
        raise Failed(f"gdal: {str(e).splitlines()[0] if str(e) else e}")
    check(got, refs, what)
    ok(secs=f"{secs:.6f}", reads=len(got))


# --- h5py and an HDF5 file ---------------------------------------------------

def gen_h5(out, size):
    """SIZE x SIZE float32 of whole numbers below 1024 (their low mantissa
    bytes are zero: gzip at level 1 keeps a little over half), seeded, in
    256 x 256 chunks with gzip level 1."""
    import h5py
    import numpy as np
    rng = np.random.default_rng(31)
    tmp = out + ".tmp"
    with h5py.File(tmp, "w") as f:
        d = f.create_dataset("data", (size, size), dtype="f4", chunks=(H5_CHUNK, H5_CHUNK),
                             compression="gzip", compression_opts=1)
        for r0 in range(0, size, H5_CHUNK):
            d[r0:r0 + H5_CHUNK, :] = rng.integers(0, 1 << 10, size=(H5_CHUNK, size)).astype("f4")
    os.rename(tmp, out)
    ok(bytes=os.path.getsize(out))


def h5_reads(size):
    """(name, rows slice, cols slice): a row band and a column band one chunk
    thick, then 16 scattered chunks (seeded, distinct, off both bands)."""
    nb = size // H5_CHUNK
    rb, cb = nb // 2, nb // 3
    out = [("rows", slice(rb * H5_CHUNK, (rb + 1) * H5_CHUNK), slice(0, size)),
           ("cols", slice(0, size), slice(cb * H5_CHUNK, (cb + 1) * H5_CHUNK))]
    cells = [(i, j) for i in range(nb) for j in range(nb) if i != rb and j != cb]
    for i, j in random.Random(31).sample(cells, min(H5_SCATTERED, len(cells))):
        out.append((f"c{i}_{j}", slice(i * H5_CHUNK, (i + 1) * H5_CHUNK),
                    slice(j * H5_CHUNK, (j + 1) * H5_CHUNK)))
    return out


def h5_read(path, driver):
    import h5py
    t0 = time.monotonic()
    kw = {"driver": "ros3"} if driver == "ros3" else {}
    got = {}
    with h5py.File(path, "r", **kw) as f:
        d = f["data"]
        for name, rs, cs in h5_reads(d.shape[0]):
            got[name] = md5(d[rs, cs].tobytes())
    return got, time.monotonic() - t0


def h5_refs(path, refs):
    got = h5_read(path, "file")[0]
    with open(refs, "w") as f:
        json.dump({"h5": got}, f)
    ok(reads=len(got))


def h5_cmd(path, driver, refs):
    """DRIVER: file (PATH a file) or ros3 (PATH an http:// URL)."""
    try:
        got, secs = h5_read(path, driver)
    except OSError as e:   # h5py's errors
        raise Failed(f"h5py: {e}")
    check(got, refs, "h5")
    ok(secs=f"{secs:.6f}", reads=len(got))


# --- a squashfs image of a library tree --------------------------------------

def _text(rng, words, n):
    """N bytes of source-like text: lines of words from a small vocabulary."""
    out = []
    left = n
    while left > 0:
        line = " " * (4 * rng.randrange(4)) + " ".join(rng.choices(words, k=rng.randrange(2, 12))) + "\n"
        out.append(line)
        left -= len(line)
    return "".join(out).encode()[:n]


def gen_tree(root, nfiles):
    """NFILES files in a tree shaped like a language's library folder
    (packages of modules, a few compiled objects): sizes log-normal around
    3 KiB up to 2 MiB, seven in ten source-like text, the rest random bytes
    (compiled code compresses little), seeded."""
    rng = random.Random(31)
    words = ["".join(rng.choices("abcdefghijklmnopqrstuvwxyz_", k=rng.randrange(2, 10)))
             for _ in range(2000)] + ["def", "self", "return", "import", "(", ")", ":", "=", "if", "None"]
    made = total = 0
    pkg = 0
    while made < nfiles:
        d = os.path.join(root, f"pkg{pkg:03d}", *[f"sub{k}" for k in range(rng.randrange(3))])
        os.makedirs(d, exist_ok=True)
        for k in range(min(rng.randrange(5, 60), nfiles - made)):
            size = min(int(rng.lognormvariate(8.0, 1.3)), 2 << 20)
            binary = rng.random() < 0.3
            name = f"mod{k:03d}" + (".so" if binary else ".py")
            data = rng.randbytes(size) if binary else _text(rng, words, size)
            with open(os.path.join(d, name), "wb") as f:
                f.write(data)
            made += 1
            total += size
        pkg += 1
    ok(files=made, bytes=total)


def gen_sqfs(tree, img, nfiles, list_out, nread):
    """The tree, its image (mksquashfs, its defaults: gzip, 128 KiB blocks)
    and the NREAD files read (seeded, scattered over the tree) in LIST_OUT."""
    if os.path.exists(tree):
        subprocess.run(["rm", "-rf", tree], check=True)
    os.makedirs(tree)
    with open(os.devnull, "w") as dn:
        saved = os.dup(1)
        os.dup2(dn.fileno(), 1)
        try:
            gen_tree(tree, nfiles)
        finally:
            os.dup2(saved, 1)
            os.close(saved)
    if os.path.exists(img):
        os.unlink(img)
    subprocess.run(["mksquashfs", tree, img, "-noappend", "-quiet", "-no-progress", "-all-root"],
                   check=True, stdout=subprocess.DEVNULL)
    files = sorted(os.path.relpath(os.path.join(d, n), tree)
                   for d, _, ns in os.walk(tree) for n in ns)
    pick = random.Random(31).sample(files, min(nread, len(files)))
    with open(list_out, "w") as f:
        f.write("".join(p + "\n" for p in pick))
    ok(files=len(files), image_bytes=os.path.getsize(img))


def sqfs_cmd(mnt, tree, lst):
    """Reads the files of LST whole from MNT (the image mounted by its
    driver) in their order, each compared with TREE's copy."""
    with open(lst) as f:
        names = f.read().split()
    t0 = time.monotonic()
    n = 0
    for name in names:
        with open(os.path.join(mnt, name), "rb") as f:
            got = f.read()
        n += len(got)
        with open(os.path.join(tree, name), "rb") as f:
            if f.read() != got:
                raise Failed(f"{name} differs from the tree's copy")
    ok(secs=f"{time.monotonic() - t0:.6f}", files=len(names), bytes=n)


COMMANDS = {
    "gen-cog": (gen_cog, (str, int)),
    "cog-refs": (cog_refs, (str, str)),
    "gdal": (gdal_cmd, (str, str, str)),
    "gen-h5": (gen_h5, (str, int)),
    "h5-refs": (h5_refs, (str, str)),
    "h5": (h5_cmd, (str, str, str)),
    "gen-sqfs": (gen_sqfs, (str, str, int, str, int)),
    "sqfs": (sqfs_cmd, (str, str, str)),
}


def main():
    if len(sys.argv) < 2 or sys.argv[1] not in COMMANDS:
        print("usage: dataclients.py " + " | ".join(COMMANDS), file=sys.stderr)
        return 2
    fn, types = COMMANDS[sys.argv[1]]
    args = sys.argv[2:]
    if len(args) != len(types):
        print(f"dataclients.py {sys.argv[1]}: wants {len(types)} arguments", file=sys.stderr)
        return 2
    try:
        fn(*(t(a) for t, a in zip(types, args)))
    except Failed as e:
        print(f"failed: {e}", flush=True)
        return 1
    except OSError as e:
        print(f"failed: {e}", flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

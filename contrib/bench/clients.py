#!/usr/bin/python3
"""clients.py: the benchmark's real clients (make bench): makes the MP4 (its
index at the end), the stored zip, the SQLite database and the tar archive,
and runs ffprobe, ffmpeg, Python's zipfile, sqlite3 and GNU tar on a path, checking what each read
against the local copy; like benchread it prints one line, "ok key=value
..." or "failed: REASON" with exit status 1.

Usage: clients.py COMMAND ARGS... (see usage() below). Times are seconds
of the monotonic clock; "read" is the bytes the client itself read, from
ffmpeg's own input statistics.
"""
import errno
import hashlib
import json
import os
import random
import re
import sqlite3
import struct
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import urllib.parse
import zipfile

FFMPEG = "ffmpeg"
FFPROBE = "ffprobe"
# ffmpeg -ss copies this many seconds of media from its position.
SS_SECS = 2
STATS_RE = re.compile(r"Statistics: (\d+) bytes read")


class Failed(Exception):
    """A run that did not do what it should: the line's reason."""


def ok(**kv):
    print("ok " + " ".join(f"{k}={v}" for k, v in kv.items()), flush=True)


def f6(x):
    return f"{x:.6f}"


def bytes_read(stderr_text):
    """The input bytes ffmpeg or ffprobe read, summed over the input
    contexts it opened (from its -v verbose "Statistics" lines)."""
    return sum(int(m.group(1)) for m in STATS_RE.finditer(stderr_text))


def check_ref(got, ref_path, what):
    with open(ref_path, "rb") as f:
        want = f.read()
    if got != want:
        raise Failed(f"{what} differs from the local copy's "
                     f"({len(got)} vs {len(want)} bytes of output)")


def top_boxes(path):
    """The MP4's top-level boxes as (type, offset, size)."""
    out = []
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        off = 0
        while off + 8 <= size:
            f.seek(off)
            head = f.read(16)
            n, kind = struct.unpack(">I4s", head[:8])
            if n == 1:
                n = struct.unpack(">Q", head[8:16])[0]
            elif n == 0:
                n = size - off
            if n < 8:
                raise Failed(f"{path}: bad box size {n} at {off}")
            out.append((kind.decode("latin-1"), off, n))
            off += n
    return out


# --- generators ---------------------------------------------------------------

def cmd_gen_media(out, secs, kbps):
    """A SECS-second 640x360 25 fps H.264 + AAC MP4 at a constant KBPS
    kbit/s of video (CBR with filler, so the size is known), written
    without +faststart: the moov index is at the end of the file."""
    tmp = out + ".tmp.mp4"
    cmd = [FFMPEG, "-nostdin", "-v", "error", "-y",
           "-f", "lavfi", "-i", "testsrc2=size=640x360:rate=25",
           "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000",
           "-t", str(secs),
           "-c:v", "libx264", "-preset", "ultrafast", "-g", "50",
           "-b:v", f"{kbps}k", "-minrate", f"{kbps}k", "-maxrate", f"{kbps}k",
           "-bufsize", f"{kbps}k", "-x264-params", "nal-hrd=cbr",
           "-c:a", "aac", "-b:a", "128k", tmp]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise Failed(f"ffmpeg: {r.stderr.strip().splitlines()[-1:]}")
    boxes = top_boxes(tmp)
    kinds = [b[0] for b in boxes]
    if "moov" not in kinds or "mdat" not in kinds or \
            kinds.index("moov") < kinds.index("mdat"):
        raise Failed(f"{out}: moov is not after mdat ({kinds})")
    os.replace(tmp, out)
    moov = boxes[kinds.index("moov")]
    ok(bytes=os.path.getsize(out), moov_offset=moov[1], moov_bytes=moov[2])


def cmd_gen_zip(out, members, member_bytes):
    """MEMBERS stored (uncompressed) members of MEMBER_BYTES seeded random
    bytes each, named m000.bin, m001.bin, ..."""
    tmp = out + ".tmp"
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_STORED) as z:
        for i in range(members):
            info = zipfile.ZipInfo(f"m{i:03d}.bin", (2024, 1, 1, 0, 0, 0))
            z.writestr(info, random.Random(i).randbytes(member_bytes))
    os.replace(tmp, out)
    ok(bytes=os.path.getsize(out), members=members)


def cmd_gen_tar(out, members, member_bytes):
    """A tar archive of MEMBERS members of MEMBER_BYTES seeded random bytes
    each, named t000.bin, t001.bin, ...: one 512-byte header before each
    member, as GNU tar writes them."""
    tmp = out + ".tmp"
    with tarfile.open(tmp, "w", format=tarfile.GNU_FORMAT) as t:
        for i in range(members):
            info = tarfile.TarInfo(f"t{i:03d}.bin")
            info.size, info.mtime = member_bytes, 1704067200
            with tempfile.TemporaryFile() as fp:
                fp.write(random.Random(1000 + i).randbytes(member_bytes))
                fp.seek(0)
                t.addfile(info, fp)
    os.replace(tmp, out)
    ok(bytes=os.path.getsize(out), members=members)


def cmd_gen_db(out, rows, payload_bytes):
    """A table t(id INTEGER PRIMARY KEY, payload BLOB) of ROWS rows with
    PAYLOAD_BYTES seeded random bytes each, 4 KiB pages, keys 1..ROWS."""
    tmp = out + ".tmp"
    if os.path.exists(tmp):
        os.unlink(tmp)
    rng = random.Random(12)
    con = sqlite3.connect(tmp)
    con.execute("PRAGMA page_size=4096")
    con.execute("PRAGMA journal_mode=OFF")
    con.execute("PRAGMA synchronous=OFF")
    con.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, payload BLOB)")
    con.executemany("INSERT INTO t VALUES (?, ?)",
                    ((k, rng.randbytes(payload_bytes))
                     for k in range(1, rows + 1)))
    con.commit()
    con.close()
    os.replace(tmp, out)
    ok(bytes=os.path.getsize(out), rows=rows)


# --- ffprobe and ffmpeg -------------------------------------------------------

def probe_cmd(path):
    return [FFPROBE, "-hide_banner", "-v", "verbose",
            "-show_format", "-show_streams", path]


def ss_cmd(path, pos, out):
    """The jump: stream copy, so that the time is the reading (decoding is
    the same CPU work on every system, and on a shared machine its noise
    hid the reading's cost); the packets' checksums check every byte of
    the media read."""
    return [FFMPEG, "-nostdin", "-hide_banner", "-v", "verbose", "-y",
            "-ss", str(pos), "-i", path, "-t", str(SS_SECS),
            "-c", "copy", "-f", "framemd5", out]


def play_cmd(path, secs, out, realtime):
    cmd = [FFMPEG, "-nostdin", "-hide_banner", "-v", "verbose", "-y",
           "-nostats"]
    if realtime:
        cmd += ["-re"]
    cmd += ["-i", path, "-t", str(secs), "-f", "framemd5", out]
    if realtime:
        cmd += ["-progress", "pipe:1", "-stats_period", "0.1"]
    return cmd


def probe_output(stdout):
    """ffprobe's output without the line that names the file."""
    return b"".join(l for l in stdout.splitlines(keepends=True)
                    if not l.startswith(b"filename="))


def run_timed(cmd, what):
    t0 = time.monotonic()
    r = subprocess.run(cmd, capture_output=True)
    dt = time.monotonic() - t0
    err = r.stderr.decode("utf-8", "replace")
    if r.returncode != 0:
        last = err.strip().splitlines()[-1:] or ["no message"]
        raise Failed(f"{what} exit {r.returncode} after {dt:.3f}s: {last[0]}")
    return dt, r.stdout, err


def ss_ref(refdir, pos):
    return os.path.join(refdir, f"ss_{pos}.ref")


def cmd_media_refs(path, secs, refdir, *positions):
    """The reference outputs from the local copy: ffprobe's report, the
    frame checksums of the first SECS seconds and the packet checksums of
    the -ss segment at each of POSITIONS."""
    _, out, _ = run_timed(probe_cmd(path), "ffprobe")
    with open(os.path.join(refdir, "probe.ref"), "wb") as f:
        f.write(probe_output(out))
    run_timed(play_cmd(path, secs, os.path.join(refdir, "play.ref"), False),
              "ffmpeg")
    for pos in positions:
        run_timed(ss_cmd(path, int(pos), ss_ref(refdir, pos)), "ffmpeg")
    ok(refs=2 + len(positions))


def cmd_ffprobe(path, ref):
    dt, out, err = run_timed(probe_cmd(path), "ffprobe")
    check_ref(probe_output(out), ref, "ffprobe's report")
    ok(secs=f6(dt), read=bytes_read(err))


def ffss(path, pos, refdir):
    """ffmpeg -ss POS -t SS_SECS, checked: (secs, bytes read)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "ss.md5")
        dt, _, err = run_timed(ss_cmd(path, pos, out), f"ffmpeg -ss {pos}")
        with open(out, "rb") as f:
            check_ref(f.read(), ss_ref(refdir, pos),
                      f"ffmpeg -ss {pos}'s packet checksums")
    return dt, bytes_read(err)


def cmd_ffss(path, pos, refdir):
    dt, n = ffss(path, pos, refdir)
    ok(secs=f6(dt), read=n)


def cmd_play(path, secs, refdir, *jumps):
    """ffmpeg -re playback of the first SECS seconds (decoded, frame
    checksums checked); and for each jump AT:POS, AT seconds in, ffmpeg -ss
    POS on the same file (jumps during playback, one after another; the
    median of their times is the figure, the machine being shared).
    Startup: wall time minus media time at the first progress report;
    stall: the most that lag grew later (ffmpeg -re catches up after a
    stall, so the wall time alone hides it; 0.1 s resolution)."""
    res = {"ss": []}

    def jump():
        try:
            for j in jumps:
                at, pos = (int(x) for x in j.split(":"))
                time.sleep(max(0.0, t0 + at - time.monotonic()))
                res["ss"].append(ffss(path, pos, refdir))
        except Exception as e:  # reported by the main thread
            res["ss_err"] = str(e)

    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "play.md5")
        errf = open(os.path.join(tmp, "stderr"), "w+")
        t0 = time.monotonic()
        p = subprocess.Popen(play_cmd(path, secs, out, True),
                             stdout=subprocess.PIPE, stderr=errf, text=True)
        th = threading.Thread(target=jump)
        th.start()
        media_us = None
        lags = []
        for line in p.stdout:
            if line.startswith("out_time_us="):
                v = line.split("=", 1)[1].strip()
                media_us = int(v) if v.lstrip("-").isdigit() else None
            elif line.startswith("progress=") and media_us:
                lags.append(time.monotonic() - t0 - media_us / 1e6)
        rc = p.wait()
        wall = time.monotonic() - t0
        th.join()
        errf.seek(0)
        err = errf.read()
        errf.close()
        if rc != 0:
            last = err.strip().splitlines()[-1:] or ["no message"]
            raise Failed(f"ffmpeg -re exit {rc}: {last[0]}")
        with open(out, "rb") as f:
            check_ref(f.read(), os.path.join(refdir, "play.ref"),
                      "playback's frame checksums")
    if "ss_err" in res:
        raise Failed(res["ss_err"])
    if len(res["ss"]) != len(jumps):
        raise Failed(f"{len(res['ss'])} of {len(jumps)} jumps made")
    if not lags:
        raise Failed("ffmpeg -re gave no progress report")
    startup = lags[0]
    ss = sorted(t for t, _ in res["ss"])
    ss_read = sum(n for _, n in res["ss"])
    ok(secs=f6(wall), startup=f6(startup),
       stall=f6(max(0.0, max(lags) - startup)),
       consumed=bytes_read(err) + ss_read, play_read=bytes_read(err),
       ss_secs=f6(ss[(len(ss) - 1) // 2]), ss_max=f6(ss[-1]), ss_n=len(ss),
       ss_read=ss_read)


# --- zipfile ------------------------------------------------------------------

def cmd_zip(path, local, member):
    """Opens the zip and reads one member (zipfile checks its CRC-32), then
    compares it with the local copy's member (untimed)."""
    t0 = time.monotonic()
    with zipfile.ZipFile(path) as z:
        data = z.read(member)
    dt = time.monotonic() - t0
    with zipfile.ZipFile(local) as z:
        want = z.read(member)
    if data != want:
        raise Failed(f"{member} differs from the local copy's "
                     f"({len(data)} vs {len(want)} bytes)")
    ok(secs=f6(dt), bytes=len(data))


# --- tar ----------------------------------------------------------------------

def run_tar(args, what):
    t0 = time.monotonic()
    p = subprocess.run(["tar", *args], capture_output=True)
    dt = time.monotonic() - t0
    if p.returncode != 0:
        raise Failed(f"{what}: tar exited {p.returncode}: "
                     f"{p.stderr.decode(errors='replace').strip()[:200]}")
    return p.stdout, dt


def cmd_tar(path, local, member, log):
    """`tar tvf` of the archive, then `tar xOf` of MEMBER (GNU tar seeks
    past the members it does not read; the second finds the headers the
    first read), each output compared with the local copy's; with an
    origin LOG, the requests it logged during the listing."""
    mark = os.path.getsize(log) if log != "-" else 0
    listing, list_dt = run_tar(["tvf", path], "tar tvf")
    extra = {}
    if log != "-":
        extra["list_reqs"], extra["list_pulled"] = log_since(log, mark)
    data, member_dt = run_tar(["xOf", path, member], f"tar xOf {member}")
    if listing != run_tar(["tvf", local], "tar tvf of the local copy")[0]:
        raise Failed("tar tvf: the listing differs from the local copy's")
    want, _ = run_tar(["xOf", local, member], "the local copy's member")
    if data != want:
        raise Failed(f"tar xOf {member}: differs from the local copy's "
                     f"({len(data)} vs {len(want)} bytes)")
    ok(list_secs=f6(list_dt), member_secs=f6(member_dt), bytes=len(data),
       **extra)


# --- sqlite3 ------------------------------------------------------------------

def log_since(log, mark):
    """(requests, body bytes) in an origin log after byte offset MARK."""
    n = pulled = 0
    with open(log, "rb") as f:
        f.seek(mark)
        for line in f:
            fields = line.split()
            n += 1
            if len(fields) >= 5 and fields[4].isdigit():
                pulled += int(fields[4])
    return n, pulled


def db_open(path):
    uri = "file:" + urllib.parse.quote(path) + "?mode=ro&immutable=1"
    con = sqlite3.connect(uri, uri=True)
    # The schema (page 1), outside the timed lookups.
    con.execute("SELECT count(*) FROM sqlite_master").fetchone()
    return con


def cmd_sqlite(path, local, n, seed, rows, log):
    """N point lookups by seeded random key on a read-only, immutable
    open; per-lookup times, and (with an origin LOG) the requests the
    origin logged during the lookups; results compared with the local
    copy's."""
    rng = random.Random(seed)
    keys = [rng.randint(1, rows) for _ in range(n)]
    con = db_open(path)
    mark = os.path.getsize(log) if log != "-" else 0
    lat = []
    got = hashlib.sha256()
    t0 = time.monotonic()
    for k in keys:
        t = time.monotonic()
        row = con.execute("SELECT payload FROM t WHERE id = ?", (k,)).fetchone()
        lat.append(time.monotonic() - t)
        if row is None:
            raise Failed(f"key {k}: no row")
        got.update(row[0])
    dt = time.monotonic() - t0
    con.close()
    extra = {}
    if log != "-":
        # Transfers still running when the last lookup returned are logged
        # when they end.
        time.sleep(0.5)
        reqs, pulled = log_since(log, mark)
        extra = {"lookup_reqs": reqs, "lookup_pulled": pulled}
    con = db_open(local)
    want = hashlib.sha256()
    for k in keys:
        want.update(con.execute("SELECT payload FROM t WHERE id = ?",
                                (k,)).fetchone()[0])
    con.close()
    if got.digest() != want.digest():
        raise Failed("lookup results differ from the local copy's")
    lat.sort()
    ok(lookups=n, secs=f6(dt), per=f6(dt / n), p50=f6(lat[(n - 1) // 2]),
       max=f6(lat[-1]), **extra)


# --- fio ----------------------------------------------------------------------

def cmd_fio(*args):
    """Runs fio ARGS... with JSON output: a read job with --verify, so fio
    checks every block it reads and exits non-zero on a mismatch. Prints
    the group's read figures (group_reporting sums its threads): MiB/s
    (fio's, 2^20 bytes), bytes, seconds, IOPS and the completion latency's
    p50 and p99."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "fio.json")
        t0 = time.monotonic()
        r = subprocess.run(["fio", *args, "--output-format=json",
                            f"--output={out}"], capture_output=True, text=True)
        dt = time.monotonic() - t0
        if r.returncode != 0:
            lines = (r.stderr + r.stdout).strip().splitlines()
            # fio's verify error names the file and offset on its first line
            raise Failed(f"fio exit {r.returncode} after {dt:.1f}s: "
                         f"{lines[0] if lines else 'no message'}")
        with open(out) as f:
            text = f.read()
    try:
        # warnings may precede the JSON document
        job = json.loads(text[text.index("{"):])["jobs"][0]
        rd = job["read"]
    except (ValueError, KeyError, IndexError) as e:
        raise Failed(f"fio's JSON output: {e!r}")
    if job.get("error"):
        raise Failed(f"fio job error {job['error']}")
    if rd["io_bytes"] <= 0 or rd["runtime"] <= 0:
        raise Failed("fio read nothing")
    pct = rd["clat_ns"].get("percentile", {})
    ok(mibps=f"{rd['bw_bytes'] / 1048576:.2f}", bytes=rd["io_bytes"],
       secs=f6(rd["runtime"] / 1000), iops=f"{rd['iops']:.2f}",
       p50=f6(pct.get("50.000000", 0) / 1e9),
       p99=f6(pct.get("99.000000", 0) / 1e9))


# --- a read that must fail ----------------------------------------------------

def cmd_eio(path, limit):
    """Reads up to LIMIT bytes from the start; the read must fail with EIO.
    Prints the seconds from open() to the error."""
    t0 = time.monotonic()
    got = 0
    try:
        fd = os.open(path, os.O_RDONLY)
        try:
            while got < limit:
                b = os.read(fd, min(1 << 20, limit - got))
                if not b:
                    break
                got += len(b)
        finally:
            os.close(fd)
    except OSError as e:
        dt = time.monotonic() - t0
        if e.errno != errno.EIO:
            raise Failed(f"{errno.errorcode.get(e.errno, e.errno)} after "
                         f"{dt:.3f}s, not EIO")
        ok(secs=f6(dt), got=got)
        return
    raise Failed(f"no error: read {got} bytes in "
                 f"{time.monotonic() - t0:.3f}s")


def usage():
    sys.stderr.write(
        "usage: clients.py gen-media OUT SECS KBPS\n"
        "       clients.py gen-zip OUT MEMBERS MEMBER_BYTES\n"
        "       clients.py gen-db OUT ROWS PAYLOAD_BYTES\n"
        "       clients.py gen-tar OUT MEMBERS MEMBER_BYTES\n"
        "       clients.py media-refs FILE SECS REFDIR POS...\n"
        "       clients.py ffprobe FILE REF\n"
        "       clients.py ffss FILE POS REFDIR\n"
        "       clients.py play FILE SECS REFDIR AT:POS...\n"
        "       clients.py zip FILE LOCAL MEMBER\n"
        "       clients.py sqlite FILE LOCAL N SEED ROWS LOG|-\n"
        "       clients.py tar FILE LOCAL MEMBER LOG|-\n"
        "       clients.py eio FILE LIMIT\n"
        "       clients.py fio FIO_ARGUMENT...\n")
    sys.exit(2)


COMMANDS = {
    "gen-media": (cmd_gen_media, (str, int, int)),
    "gen-zip": (cmd_gen_zip, (str, int, int)),
    "gen-db": (cmd_gen_db, (str, int, int)),
    "gen-tar": (cmd_gen_tar, (str, int, int)),
    "media-refs": (cmd_media_refs, (str, int, str, "*")),
    "ffprobe": (cmd_ffprobe, (str, str)),
    "ffss": (cmd_ffss, (str, int, str)),
    "play": (cmd_play, (str, int, str, "*")),  # at least one jump
    "zip": (cmd_zip, (str, str, str)),
    "sqlite": (cmd_sqlite, (str, str, int, int, int, str)),
    "tar": (cmd_tar, (str, str, str, str)),
    "eio": (cmd_eio, (str, int)),
    "fio": (cmd_fio, ("*",)),  # fio's arguments
}


def main():
    if len(sys.argv) < 2 or sys.argv[1] not in COMMANDS:
        usage()
    fn, types = COMMANDS[sys.argv[1]]
    args = sys.argv[2:]
    # "*": one or more further string arguments
    rest = types[-1] == "*"
    if rest:
        types = types[:-1]
    if len(args) < len(types) + rest or (not rest and len(args) != len(types)):
        usage()
    try:
        fn(*(t(a) for t, a in zip(types, args)), *args[len(types):])
    except (Failed, OSError, zipfile.BadZipFile, sqlite3.Error) as e:
        print(f"failed: {e}", flush=True)
        sys.exit(1)


if __name__ == "__main__":
    main()

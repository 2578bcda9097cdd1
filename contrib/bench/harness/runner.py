"""The bench's one runner: a work directory, the origins, a fresh mount of
each system, timed steps with limits, bytes as the origins count them,
the records, and a cleanup that unmounts every mount and stops every
process it started, on success, failure, Ctrl-C and SIGTERM alike.

Workloads (workloads/*.py) use a Bench through these calls only: wanted,
say, gen, fresh, mount/cold_mount/umount, cold_caches, step, record,
start_origin/start_tier and the limits (harness/limits.py).
"""
import os
import shutil
import subprocess
import sys
import tempfile
import time

from . import procs
from .procs import Tracker
from .results import Results
from .settings import TO_MOUNT, TO_STEP

SYSTEMS = ("pacefs", "rclone", "httpdirfs")


class MountError(Exception):
    """A mount that did not come up: the record's reason."""


class Origin:
    """A server the systems read from: its URL, its port and its request
    log, whose fifth field is the body bytes of each response (nginx's
    format here and pacefs-origin's alike)."""

    def __init__(self, url, log, proc):
        self.url = url
        self.log = log
        self.proc = proc
        self.port = int(url.rsplit(":", 1)[1].split("/")[0])

    def mark(self):
        try:
            return os.path.getsize(self.log)
        except OSError:
            return 0

    def lines(self, mark):
        try:
            with open(self.log, "rb") as f:
                f.seek(mark)
                data = f.read()
        except OSError:
            return []
        return [ln.split() for ln in data.decode("utf-8", "replace").splitlines()]

    def sent(self, mark):
        """(body bytes, requests) logged since MARK."""
        from .stats import num
        s = n = 0
        for p in self.lines(mark):
            s += num(p[4]) if len(p) > 4 else 0
            n += 1
        return int(s), n

    def pulled(self, mark):
        """"pulled=BYTES reqs=N" since MARK, for a record."""
        s, n = self.sent(mark)
        return f"pulled={s} reqs={n}"


class Mount:
    def __init__(self, mnt, proc, cache):
        self.mnt = mnt
        self.proc = proc
        self.cache = cache

    @property
    def pid(self):
        return self.proc.pid

    def path(self, name):
        return os.path.join(self.mnt, name)


class Bench:
    MountError = MountError

    def __init__(self, repo, build, settings, runs, only, quick, changed):
        self.repo = repo
        self.s = settings
        self.runs = runs
        self.only = set(only)
        self.quick = quick
        self.t0 = time.monotonic()
        self.track = Tracker()
        self.failed = False   # a harness error: the work directory is kept
        self.drop_ok = True
        base = os.environ.get("TMPDIR", "/tmp")
        self.w = tempfile.mkdtemp(prefix="pacefs-bench.", dir=base)
        self.www = os.path.join(self.w, "www")
        for d in ("www", "logs", "mnt", "cache", "bin", "sets"):
            os.makedirs(os.path.join(self.w, d))
        # Private copies: others rebuild build/ while this runs, and a
        # binary relinked mid-run would mix two versions in one report.
        here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        for src in (os.path.join(build, "pacefs"), os.path.join(build, "pacefs-origin"),
                    os.path.join(build, "bench", "benchread"), os.path.join(here, "clients.py"),
                    os.path.join(here, "dataclients.py")):
            shutil.copy2(src, os.path.join(self.w, "bin"))
        self.pacefs = self.bin("pacefs")
        self.origin_bin = self.bin("pacefs-origin")
        self.br = self.bin("benchread")
        self.cl = ["/usr/bin/python3", self.bin("clients.py")]
        self.dcl = ["/usr/bin/python3", self.bin("dataclients.py")]
        open(os.path.join(self.w, "rclone.conf"), "w").close()
        self.res = Results({"settings": dict(settings), "runs": runs, "quick": quick,
                            "only": sorted(self.only), "overrides": changed,
                            "harness": "bench.py"})
        self._curl_files = self._libs([shutil.which("curl")])
        self._client_files = None
        self.nginx = self.wan = self.wan2 = None
        self.folder_origins = {}   # harness/tree.py's WAN origins of folders
        self.made = {}             # files of www made by need(): name -> size
        self.data_dir = os.environ.get("BENCH_DATA") or self.path("data")

    # --- small things -------------------------------------------------------

    def bin(self, name):
        return os.path.join(self.w, "bin", name)

    def path(self, *p):
        return os.path.join(self.w, *p)

    def wanted(self, name):
        return not self.only or name in self.only

    def say(self, msg):
        print("[%4ds] %s" % (time.monotonic() - self.t0, msg), flush=True)

    def gen(self, path, size):
        """A file of benchread's formula (every byte checkable)."""
        subprocess.run([self.br, "gen", path, str(size)], check=True,
                       stdout=subprocess.DEVNULL)

    def need(self, name, size):
        """www/NAME of SIZE bytes (benchread's formula), made once however
        many workloads read it."""
        if self.made.get(name) == size:
            return
        if name in self.made:
            raise ValueError(f"{name} wanted with two sizes: {self.made[name]} and {size}")
        self.gen(os.path.join(self.www, name), size)
        self.made[name] = size

    @staticmethod
    def link(src, dst):
        """DST as a hard link to SRC, or a copy across filesystems."""
        if os.path.exists(dst):
            os.unlink(dst)
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)

    @staticmethod
    def rmtree(path):
        shutil.rmtree(path, ignore_errors=True)

    def run_range(self):
        return range(1, self.runs + 1)

    # --- recording ----------------------------------------------------------

    def record(self, wl, sys_, run, line, extra=""):
        """One result: LINE is a tool's answer ("ok k=v ...", "failed: why",
        "skipped: why"), EXTRA more k=v for an ok one (bytes pulled)."""
        rec = self.res.add(wl, sys_, run, line, extra)
        if rec["status"] == "skipped":
            self.say(f"  {wl} {sys_} run {run} skipped: {rec['reason']}")
        elif rec["status"] == "failed":
            self.say(f"  {wl} {sys_} run {run} FAILED: {rec['reason']}")
        return rec

    def show(self, wl, sys_, run, rec=None):
        """Says a recorded result."""
        rec = rec or self.res.records[-1]
        if rec["status"] == "ok":
            vals = " ".join(f"{k}={v}" for k, v in rec["values"].items())
            self.say(f"  {wl} {sys_} run {run}: ok {vals}")

    def show_all(self, run, systems, wls):
        """Says the records of RUN for SYSTEMS (one or several) in WLS."""
        systems = (systems,) if isinstance(systems, str) else systems
        for rec in self.res.records:
            if rec["run"] == run and rec["sys"] in systems and rec["wl"] in wls:
                self.show(rec["wl"], rec["sys"], run, rec)

    def value(self, wl, sys_, run, key):
        """KEY of the ok record of WL, SYS and RUN, or None."""
        for rec in self.res.records:
            if (rec["wl"], rec["sys"], rec["run"], rec["status"]) == (wl, sys_, run, "ok"):
                return rec["values"].get(key)
        return None

    # --- steps --------------------------------------------------------------

    def step(self, cmd, timeout=TO_STEP, env=None, out=None):
        """Runs CMD with a time limit; its last line of output, or "failed:
        why" (a time-out, an exit without a line of its own)."""
        out = out or self.path("step.out")
        err = self.path("step.err")
        with open(out, "w") as fo, open(err, "w") as fe:
            p = self.track.start("steps", cmd, stdout=fo, stderr=fe, env=env)
            try:
                rc = p.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                procs.stop(p)
                rc = None
            finally:
                self.track.forget("steps", p)
        last = _last_line(out)
        if rc is None:
            return f"failed: timed out after {timeout}s"
        if rc != 0 and not last.startswith("failed:"):
            return f"failed: exit {rc}: {_last_line(err)}"
        return last

    def par(self, n, cmd_of, ok, timeout=TO_STEP):
        """N commands at once (CMD_OF(k) the k-th, its output in par.K), each
        within TIMEOUT; a copy succeeds when it exits 0 and OK(its last
        line). Returns ("ok" or "failed: copy K: why", S), S the wall time
        from the first start to the last exit."""
        t0 = time.monotonic()
        ps = []
        for k in range(n):
            fo = open(self.path(f"par.{k}"), "w")
            ps.append(self.track.start("steps", cmd_of(k), stdout=fo, stderr=subprocess.STDOUT))
            fo.close()
        bad = None
        for k, p in enumerate(ps):
            left = max(0.1, t0 + timeout - time.monotonic())
            try:
                rc = p.wait(timeout=left)
            except subprocess.TimeoutExpired:
                procs.stop(p)
                rc = None
            self.track.forget("steps", p)
            last = _last_line(self.path(f"par.{k}"))
            if bad:
                continue
            if rc is None:
                bad = f"copy {k}: timed out after {timeout}s"
            elif rc != 0 or not ok(last):
                bad = f"copy {k}: exit {rc}: {last.removeprefix('failed: ')}"
        secs = time.monotonic() - t0
        if bad:
            return "failed: " + bad, secs
        return "ok", secs

    # --- origins ------------------------------------------------------------

    def start_nginx(self):
        """nginx on a free loopback port over www with autoindex, one worker
        per CPU; its log: "method uri "range" status bytes" a request."""
        from .servers import nginx_start
        self.nginx = nginx_start(self, "nginx", f"root {self.www}; autoindex on;",
                                 log_format='$request_method $uri "$http_range" $status $body_bytes_sent',
                                 http="tcp_nodelay on; keepalive_timeout 120s;",
                                 workers=os.cpu_count(), conns=1024, level="warn")
        return self.nginx

    def start_origin(self, name, *args):
        """pacefs-origin on a free loopback port with ARGS."""
        from .servers import origin_start
        return origin_start(self, name, list(args))

    def start_wan(self, name, root=None):
        """pacefs-origin over ROOT (www) with the WAN caps and a listing."""
        return self.start_origin(name, "--root", root or self.www, "--quiet",
                                 "--rate", str(self.s["WAN_RATE"]),
                                 "--latency", str(self.s["WAN_LATENCY"]), "--autoindex")

    def start_near(self, name, root=None):
        """pacefs-origin over ROOT (www) a round trip of NEAR_LATENCY ms
        away with a loose per-connection cap (NEAR_RATE: an object store
        in the reader's own region) and a listing."""
        return self.start_origin(name, "--root", root or self.www, "--quiet",
                                 "--rate", str(self.s["NEAR_RATE"]),
                                 "--latency", str(self.s["NEAR_LATENCY"]), "--autoindex")

    def start_tier(self, name):
        from .servers import tier_start
        return tier_start(self, name, self.s["TIER_CHUNK"])

    def stop_server(self, origin, kill=False):
        if kill:
            procs.kill(origin.proc)
        else:
            procs.stop(origin.proc)
        self.track.forget("servers", origin.proc)

    # --- mounts -------------------------------------------------------------

    def fresh(self, run, sys_):
        """A new, empty cache directory and mountpoint: (mnt, cache)."""
        tag = f"{run}-{sys_}-{os.urandom(3).hex()}"
        mnt, cache = self.path("mnt", tag), self.path("cache", tag)
        os.makedirs(mnt)
        os.makedirs(cache)
        return mnt, cache

    def mount(self, sys_, base, name, mnt, cache, opts=(), tree=False, env=None):
        """Mounts SYS so that MNT/NAME is BASE/NAME: pacefs mounts the one
        file (with TREE the directory index BASE/, as the others always
        do), rclone and httpdirfs the listing of BASE/. Raises MountError."""
        os.makedirs(mnt, exist_ok=True)
        os.makedirs(cache, exist_ok=True)
        self.track.mounts.append(mnt)
        log = self.path("logs", sys_ + ".log")
        with open(log, "a") as f:
            f.write(f"=== {time.strftime('%H:%M:%S')} mount {sys_} {base}/{name} at {mnt}\n")
        if sys_ == "pacefs":
            url = base + "/" if tree else f"{base}/{name}"
            cmd = [self.pacefs, "-f", "-o", f"cache_dir={cache}", *opts, url, mnt]
        elif sys_ == "rclone":
            cmd = ["rclone", "mount", ":http:", mnt, "--http-url", base + "/",
                   "--vfs-cache-mode", "full", "--cache-dir", cache,
                   "--config", self.path("rclone.conf")]
        else:
            # --no-range-check: httpdirfs 1.2.5 exits ("This web server
            # does not support HTTP range requests") on a 206 without
            # Accept-Ranges, which nginx omits (httpdirfs issue #188).
            cmd = ["httpdirfs", "-f", "--cache", "--cache-location", cache,
                   "--no-range-check", base + "/", mnt]
        with open(log, "a") as f:
            p = self.track.start("daemons", cmd, stdout=f, stderr=subprocess.STDOUT, env=env)
        m = Mount(mnt, p, cache)
        rc = procs.mount_wait(mnt, p, TO_MOUNT)
        if rc == 0 and os.path.exists(m.path(name)):
            return m
        if rc == 1:
            last = [ln for ln in _lines(log) if not ln.startswith("===")][-1:] or [""]
            raise MountError(f"{sys_} exited while mounting: {last[0]}")
        self.umount(m)
        raise MountError(f"{sys_}: {mnt}/{name} did not appear within {TO_MOUNT}s")

    def umount(self, m):
        """Unmounts and waits (bounded) for the daemon to exit."""
        procs.unmount(m.mnt)
        if not procs.wait_gone(m.proc, 5):
            with open(self.path("logs", "unmount.log"), "a") as f:
                f.write(f"=== {time.strftime('%H:%M:%S')} pid {m.pid} still alive 5 s after unmount: killed\n")
            procs.kill(m.proc)
        self.track.forget("daemons", m.proc)

    def cold_mount(self, wl, sys_, run, base, name, **kw):
        """A fresh mount of SYS on which NAME is cold (cold_caches), or None
        with WL's failure recorded."""
        mnt, cache = self.fresh(run, sys_)
        try:
            m = self.mount(sys_, base, name, mnt, cache, **kw)
        except MountError as e:
            self.record(wl, sys_, run, f"failed: mount: {e}")
            return None
        self.cold_caches(name)
        return m

    # --- caches -------------------------------------------------------------

    def cold_caches(self, *names):
        """Drops the page cache (every mount's cache files and the kernel's
        copy of FUSE files), then reads the origin's source NAMES (under
        www) so that the origin side is always served from memory, as a
        busy server would be; and curl's program and libraries, so that a
        limit timed from curl's start does not load them from disk."""
        os.sync()
        try:
            with open("/proc/sys/vm/drop_caches", "w") as f:
                f.write("3")
        except OSError:
            self.drop_ok = False
        self.read_files([os.path.join(self.www, n) for n in names] + self._curl_files)

    def warm_clients(self):
        """The real clients' programs and libraries back in the page cache
        after cold_caches (ffmpeg loads about 200 libraries: from disk that
        would add most of a second to every figure, the floor's too), and
        Python's modules, by importing them."""
        if self._client_files is None:
            mods = subprocess.run(["/usr/bin/python3", "-c",
                                   "import _sqlite3, _hashlib; print(_sqlite3.__file__, _hashlib.__file__)"],
                                  capture_output=True, text=True).stdout.split()
            self._client_files = self._libs([shutil.which("ffmpeg"), shutil.which("ffprobe"),
                                             "/usr/bin/python3", *mods])
        self.read_files(self._client_files)
        subprocess.run(self.cl, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    @staticmethod
    def read_files(paths):
        buf = bytearray(1 << 20)
        for p in paths:
            try:
                with open(p, "rb", buffering=0) as f:
                    while f.readinto(buf):
                        pass
            except OSError:
                pass

    @staticmethod
    def _libs(bins):
        """BINS and the shared libraries they load (ldd)."""
        out = []
        for b in bins:
            if not b:
                continue
            out.append(b)
            r = subprocess.run(["ldd", b], capture_output=True, text=True)
            for line in r.stdout.splitlines():
                p = line.split()
                if len(p) >= 3 and p[2].startswith("/"):
                    out.append(p[2])
        return out

    # --- the way out --------------------------------------------------------

    def stop_all(self):
        """Every step killed, every mount unmounted, every daemon and server
        stopped."""
        self.track.stop_all(log=lambda m: print(m, file=sys.stderr))

    def remove_workdir(self, keep):
        """The work directory removed, unless KEEP, a harness error or a
        mount that would not go says to keep it (never recursing into a
        mount)."""
        left = procs.mounts_under(self.w)
        if keep or self.failed or left:
            print(f"bench: work directory kept: {self.w}", file=sys.stderr)
            return
        shutil.rmtree(self.w, ignore_errors=True)


def _lines(path):
    try:
        with open(path, errors="replace") as f:
            return f.read().splitlines()
    except OSError:
        return []


def _last_line(path):
    lines = _lines(path)
    return lines[-1] if lines else ""

"""The limits the systems are held to, measured in the same run: curl (one
connection, parallel ranges, range requests), dd of pacefs's cache file,
and the connections any client keeps to an origin (ss).

Each returns a tool's line: "ok k=v ..." or "failed: why".
"""
import os
import random
import re
import subprocess
import threading
import time

from .settings import TO_STEP


def _curl(args, timeout=TO_STEP):
    r = subprocess.run(["curl", "-s", "--max-time", str(timeout), *args],
                       capture_output=True, text=True)
    return r.returncode, r.stdout


def curl_one(b, url, size, out="/dev/null"):
    """One connection, the whole body to /dev/null or into OUT (written, not
    synced, removed at once so that its dirty pages are dropped rather
    than written back under the next measurement)."""
    rc, w = _curl(["-o", out, "-w", "%{http_code} %{size_download} %{time_total}", url])
    if out != "/dev/null" and os.path.exists(out):
        os.unlink(out)
    if rc != 0:
        return f"failed: curl exit {rc}"
    code, got, t = w.split()
    if code != "200" or int(got) != size:
        return f"failed: status {code}, {got} of {size} bytes"
    t = float(t)
    return "ok bytes=%d secs=%.6f mbps=%.2f" % (size, t, size / t / 1e6)


def curl_ranges(b, url, size, n):
    """N parallel range requests in one curl (--parallel); wall time from
    start to the last byte."""
    part = (size + n - 1) // n
    cfg = b.path("curl-par.cfg")
    with open(cfg, "w") as f:
        f.write("parallel\nparallel-max = %d\n" % n)
        # otherwise curl waits for the first connection to learn whether
        # it can multiplex before opening the others
        f.write("parallel-immediate\n")
        for i in range(n):
            a = i * part
            e = min(a + part - 1, size - 1)
            f.write(f'url = "{url}"\nrange = {a}-{e}\noutput = "/dev/null"\n')
            f.write('write-out = "%{http_code} %{size_download}\\n"\n')
            if i < n - 1:
                f.write("next\n")
    t0 = time.monotonic()
    rc, out = _curl(["-K", cfg])
    t = time.monotonic() - t0
    if rc != 0:
        return f"failed: curl exit {rc}"
    got, bad = 0, ""
    for line in out.splitlines():
        p = line.split()
        if p[0] != "206":
            bad += " status " + p[0]
        got += int(p[1])
    if bad or got != size:
        return "failed:%s %d of %d bytes" % (bad, got, size)
    return "ok bytes=%d secs=%.6f mbps=%.2f" % (got, t, got / t / 1e6)


def curl_first(b, url):
    """One range request of the first 4 KiB: a fresh process and connection."""
    rc, w = _curl(["-o", "/dev/null", "-r", "0-4095", "-w",
                   "%{http_code} %{size_download} %{time_total}", url])
    if rc != 0:
        return f"failed: curl exit {rc}"
    code, got, t = w.split()
    if code != "206" or got != "4096":
        return f"failed: status {code}, {got} bytes"
    return f"ok secs={t}"


def curl_random(b, url, size, n, seed):
    """N 4 KiB range requests at seeded aligned offsets, one after another
    over one keep-alive connection; percentiles of their latency."""
    rnd = random.Random(seed)
    blocks = size // 4096
    cfg = b.path("curl-rnd.cfg")
    with open(cfg, "w") as f:
        for i in range(n):
            a = rnd.randrange(blocks) * 4096
            f.write(f'url = "{url}"\nrange = {a}-{a + 4095}\noutput = "/dev/null"\n')
            f.write('write-out = "%{http_code} %{size_download} %{time_total}\\n"\n')
            if i < n - 1:
                f.write("next\n")
    rc, out = _curl(["-K", cfg])
    if rc != 0:
        return f"failed: curl exit {rc}"
    rows = [line.split() for line in out.splitlines()]
    bad = sum(1 for p in rows if p[0] != "206" or p[1] != "4096")
    if bad or len(rows) != n:
        return f"failed: {bad} bad responses of {len(rows)}"
    t = sorted(float(p[2]) for p in rows)
    k50 = int(0.5 * n + 0.999999)
    k95 = int(0.95 * n + 0.999999)
    return "ok reads=%d p50=%.6f p95=%.6f max=%.6f bytes=%d" % (
        n, t[k50 - 1], t[k95 - 1], t[-1], n * 4096)


def dd_mdb(b, cache):
    """dd of CACHE/data.mdb (1 MiB blocks) to /dev/null after the page cache
    is dropped; MB/s over the bytes dd read: the whole file, LMDB's free
    pages and metadata as well as the blob."""
    f = os.path.join(cache, "data.mdb")
    if not os.path.isfile(f):
        return f"failed: no {f}"
    b.cold_caches()
    try:
        r = subprocess.run(["timeout", "-k", "5", str(TO_STEP), "dd", f"if={f}", "of=/dev/null", "bs=1M"],
                           capture_output=True, text=True, env=dict(os.environ, LC_ALL="C"))
    except OSError as e:
        return f"failed: dd: {e}"
    last = (r.stderr.strip().splitlines() or [""])[-1]
    if r.returncode != 0:
        return f"failed: dd: {last}"
    # "268435456 bytes (268 MB, 256 MiB) copied, 0.254 s, 1.1 GB/s"
    m = re.search(r"^(\d+) bytes .* copied, ([0-9.e+-]+) s, ", r.stderr, re.M)
    if not m:
        return f"failed: dd said: {last}"
    got, t = int(m.group(1)), float(m.group(2))
    t = t if t > 0 else 1e-6
    st = os.stat(f)
    return "ok bytes=%d secs=%.6f mbps=%.2f file_bytes=%d disk_bytes=%d" % (
        got, t, got / t / 1e6, st.st_size, st.st_blocks * 512)


class ConnWatch:
    """Samples, every 0.1 s, the established TCP connections to
    127.0.0.1:PORT: how many, how many were busy (a request sent after the
    last byte received, or a byte received in the last 0.1 s: ss's
    lastsnd and lastrcv; an HTTP client keeps idle ones open), and which.
    Counted with ss, the same way for every system and for curl. Also
    every connection to PORT closed meanwhile: a closed one stays in
    TIME_WAIT for a minute on the side that closed it first, so sampling
    those every 0.1 s misses none (the origin's log does not say which
    connection served a request)."""

    def __init__(self, b, port):
        self.port = port
        self.samples = []
        self.closed = set()
        self.open_at_end = 0
        self.ev = threading.Event()
        self.th = threading.Thread(target=self._loop, daemon=True)
        self.b = b
        self.before = self._time_wait()

    def __enter__(self):
        self.b.track.threads.append((self.th, self.ev))
        self.th.start()
        return self

    def _time_wait(self):
        """The connections to PORT in TIME_WAIT, on either side, by their
        socket cookie (ss's sk:): a client port may be used again while
        its last connection is still in TIME_WAIT (tcp_tw_reuse), so the
        addresses alone would count two connections as one."""
        r = subprocess.run(["ss", "-Htne", "state", "time-wait",
                            f"( dport = :{self.port} or sport = :{self.port} )"],
                           capture_output=True, text=True)
        return set(re.findall(r"\bsk:([0-9a-f]+)", r.stdout))

    def __exit__(self, *exc):
        self.ev.set()
        self.th.join(5)
        r = subprocess.run(["ss", "-Htn", "state", "established", f"( dport = :{self.port} )"],
                           capture_output=True, text=True)
        self.open_at_end = len(r.stdout.splitlines())
        self.closed |= self._time_wait()
        self.b.track.threads[:] = [t for t in self.b.track.threads if t[0] is not self.th]

    def _loop(self):
        while not self.ev.is_set():
            r = subprocess.run(["ss", "-Htni", "state", "established", f"( dport = :{self.port} )"],
                               capture_output=True, text=True)
            n = busy = 0
            addrs = []
            for line in r.stdout.splitlines():
                if line[:1] in (" ", "\t"):
                    rcv = re.search(r"lastrcv:(\d+)", line)
                    snd = re.search(r"lastsnd:(\d+)", line)
                    rv = int(rcv.group(1)) if rcv else 1e9
                    sv = int(snd.group(1)) if snd else 1e9
                    if sv < rv or rv < 100:
                        busy += 1
                    continue
                p = line.split()
                if len(p) >= 3:
                    n += 1
                    addrs.append(p[2])
            self.samples.append((n, busy, addrs))
            self.closed |= self._time_wait()
            self.ev.wait(0.1)

    def figures(self):
        """"conns=OPEN conns_seen=SEEN conns_active=BUSY conns_used=USED":
        the most open in one sample; the connections seen in any; the busy
        ones' 90th percentile over the samples with any (a connection that
        just ended and its replacement are both busy in a sample: the peak
        would count churn); the connections closed during the watch (each
        leaves one in TIME_WAIT, on the side that closed first) and those
        open at its end."""
        peak = max((s[0] for s in self.samples), default=0)
        seen = {a for s in self.samples for a in s[2]}
        busy = sorted(s[1] for s in self.samples if s[1] > 0)
        active = busy[int(0.9 * len(busy) + 0.999999) - 1] if busy else 0
        used = len(self.closed - self.before) + self.open_at_end
        return f"conns={peak} conns_seen={len(seen)} conns_active={active} conns_used={used}"

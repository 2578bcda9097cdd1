#!/usr/bin/python3
"""planclient.py: the clients of the read-plan workloads (workloads/plan.py).
Each prints one line, "ok key=value ..." or "failed: why", as benchread
and clients.py do. LIST holds the set's files as paths in the mount, one
a line; SEED picks the shuffled order (`benchread order LIST SEED`, the
loader's); WWW is the origin's folder of the same files, which every
byte read is compared with.

  planclient.py loader MNT LIST WORKERS SEED BENCHREAD [--plan NAME]
      benchread loader's worker processes over the order, with the order
      handed to the mount first (pacefs_plan.plan) when --plan is given;
      the seconds run from before the plan to the last worker's exit
  planclient.py pause MNT WWW LIST SEED AFTER SECS ORIGIN_LOG PACEFS
      one worker along a plan of the order, pausing SECS after AFTER
      files: the origin's body bytes from one second into the pause to
      its end (paused_bytes) and the plan's status a second in
  planclient.py abandon MNT WWW LIST SEED KEEP ORIGIN_LOG PACEFS
      a plan of the order's first half; KEEP files read along it, then
      the second half (no plan's) by 8 threads: the plan's files the
      origin sent beyond the KEEP read (extra_files, extra_bytes) against
      its window when the opens left it
  planclient.py tar MNT WWW
      `tar cf - -C MNT .`, its stream's bytes counted (as `| wc -c`) and
      every member compared with WWW's file of that name
  planclient.py torch MNT WWW LIST WORKERS SEED BATCH [--plan NAME]
      a PyTorch DataLoader over a Dataset of LIST's files (a sample: the
      file's bytes) with a RandomSampler seeded by SEED, WORKERS workers,
      batches of BATCH; each sample's SHA-256 against WWW's file's;
      timed from the first batch's arrival to the last one's; --plan
      wraps the sampler in pacefs_plan.PlannedSampler
"""
import hashlib
import json
import os
import subprocess
import sys
import tarfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
import pacefs_plan  # noqa: E402


class Failed(Exception):
    pass


def order_of(br, lst, seed):
    return subprocess.run([br, "order", lst, str(seed)], capture_output=True,
                          text=True, check=True).stdout.split()


def local(mnt, www, path):
    return os.path.join(www, os.path.relpath(path, mnt))


def read_check(mnt, www, path):
    """PATH's bytes through the mount, compared with WWW's copy."""
    with open(path, "rb") as f:
        got = f.read()
    with open(local(mnt, www, path), "rb") as f:
        want = f.read()
    if got != want:
        raise Failed("content mismatch: %s (%d bytes, want %d)" % (path, len(got), len(want)))
    return len(got)


def log_sent(log, per_path=False):
    """The origin's body bytes logged so far (field 5 of every line); with
    PER_PATH also {target: bytes}."""
    total, paths = 0, {}
    with open(log, "rb") as f:
        for ln in f.read().decode("utf-8", "replace").splitlines():
            p = ln.split()
            if len(p) > 4 and p[4].isdigit():
                total += int(p[4])
                if per_path:
                    paths[p[1]] = paths.get(p[1], 0) + int(p[4])
    return (total, paths) if per_path else total


def plan_status(pacefs, mnt, name):
    r = subprocess.run([pacefs, "status", "--json", mnt], capture_output=True, text=True)
    try:
        for p in json.loads(r.stdout).get("plans", []):
            if p.get("name") == name:
                return p
    except ValueError:
        pass
    return {}


def cmd_loader(a):
    mnt, lst, workers, seed, br = a[0], a[1], a[2], a[3], a[4]
    name = a[a.index("--plan") + 1] if "--plan" in a else None
    order = order_of(br, lst, seed)
    t0 = time.monotonic()
    if name:
        pacefs_plan.plan(mnt, order, name=name)
    tp = time.monotonic() - t0
    r = subprocess.run([br, "loader", lst, workers, seed], capture_output=True, text=True)
    secs = time.monotonic() - t0
    last = (r.stdout.strip().splitlines() or [""])[-1]
    if r.returncode != 0 or not last.startswith("ok"):
        err = (r.stderr.strip().splitlines() or [""])[-1]
        raise Failed("benchread loader: %s" % (last or err))
    kv = dict(w.split("=", 1) for w in last[2:].split())
    files, nbytes = int(kv["files"]), int(kv["bytes"])
    return ("ok files=%d bytes=%d secs=%.6f files_per_s=%.2f mbps=%.2f p50=%s max=%s "
            "plan_secs=%.6f workers=%s" % (files, nbytes, secs, files / secs, nbytes / secs / 1e6,
                                            kv["p50"], kv["max"], tp, workers))


def cmd_pause(a):
    mnt, www, lst, seed, after, secs, log, pacefs = a[:8]
    after, secs = int(after), float(secs)
    br = os.path.join(os.path.dirname(pacefs), "benchread")
    order = order_of(br, lst, seed)
    name = "bench"
    t0 = time.monotonic()
    pacefs_plan.plan(mnt, order, name=name)
    nbytes = 0
    st, b_in, b_end = {}, 0, 0
    for i, p in enumerate(order):
        if i == after:
            tp = time.monotonic()
            time.sleep(1)
            st = plan_status(pacefs, mnt, name)
            b_in = log_sent(log)
            time.sleep(max(0.0, tp + secs - time.monotonic()))
            b_end = log_sent(log)
        nbytes += read_check(mnt, www, p)
    dt = time.monotonic() - t0
    return ("ok files=%d bytes=%d secs=%.6f files_per_s=%.2f paused_bytes=%d pause_secs=%g "
            "state=%s ahead_files=%s ahead_bytes=%s window=%s" % (
                len(order), nbytes, dt, len(order) / (dt - secs), b_end - b_in, secs,
                st.get("state", "none"), st.get("ahead_files", "-"), st.get("ahead_bytes", "-"),
                st.get("window", "-")))


def cmd_abandon(a):
    mnt, www, lst, seed, keep, log, pacefs = a[:7]
    keep = int(keep)
    br = os.path.join(os.path.dirname(pacefs), "benchread")
    order = order_of(br, lst, seed)
    half = len(order) // 2
    planned, other = order[:half], order[half:]
    name = "bench"
    mark = os.path.getsize(log)
    t0 = time.monotonic()
    pacefs_plan.plan(mnt, planned, name=name)
    nbytes = 0
    for p in planned[:keep]:
        nbytes += read_check(mnt, www, p)
    st0 = plan_status(pacefs, mnt, name)
    errs = []
    nxt = [0]
    lock = threading.Lock()
    got = [0]

    def work():
        while True:
            with lock:
                k = nxt[0]
                nxt[0] += 1
            if k >= len(other) or errs:
                return
            try:
                n = read_check(mnt, www, other[k])
            except (Failed, OSError) as e:
                errs.append(str(e))
                return
            with lock:
                got[0] += n

    ths = [threading.Thread(target=work) for _ in range(8)]
    for t in ths:
        t.start()
    for t in ths:
        t.join()
    if errs:
        raise Failed(errs[0])
    nbytes += got[0]
    dt = time.monotonic() - t0
    time.sleep(1.5)
    st1 = plan_status(pacefs, mnt, name)
    with open(log, "rb") as f:
        f.seek(mark)
        lines = f.read().decode("utf-8", "replace").splitlines()
    read_names = {"/" + os.path.relpath(p, mnt) for p in planned[:keep]}
    plan_names = {"/" + os.path.relpath(p, mnt) for p in planned}
    extra_files, extra_bytes = set(), 0
    for ln in lines:
        p = ln.split()
        if len(p) > 4 and p[1] in plan_names and p[1] not in read_names and p[4].isdigit():
            extra_files.add(p[1])
            extra_bytes += int(p[4])
    return ("ok files=%d bytes=%d secs=%.6f extra_files=%d extra_bytes=%d window=%s "
            "ahead_files=%s ahead_bytes=%s state=%s unread_files=%s unread_bytes=%s" % (
                keep + len(other), nbytes, dt, len(extra_files), extra_bytes,
                st0.get("window", "-"), st0.get("ahead_files", "-"), st0.get("ahead_bytes", "-"),
                st1.get("state", "none"), st1.get("unread_files", "-"), st1.get("unread_bytes", "-")))


class Counting:
    """A pipe's reader that counts what passes (wc -c)."""

    def __init__(self, f):
        self.f = f
        self.n = 0

    def read(self, n=-1):
        d = self.f.read(n)
        self.n += len(d)
        return d


def cmd_tar(a):
    mnt, www = a[0], a[1]
    t0 = time.monotonic()
    p = subprocess.Popen(["tar", "cf", "-", "-C", mnt, "."], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    c = Counting(p.stdout)
    files = nbytes = 0
    try:
        with tarfile.open(fileobj=c, mode="r|") as tf:
            for m in tf:
                if not m.isfile():
                    continue
                got = tf.extractfile(m).read()
                with open(os.path.join(www, m.name), "rb") as f:
                    if f.read() != got:
                        raise Failed("content mismatch: %s" % m.name)
                files += 1
                nbytes += len(got)
        while c.read(1 << 16):
            pass
    finally:
        rc = p.wait()
    secs = time.monotonic() - t0
    if rc != 0:
        raise Failed("tar exit %d: %s" % (rc, p.stderr.read().decode(errors="replace").strip()[:200]))
    return "ok files=%d bytes=%d tar_bytes=%d secs=%.6f files_per_s=%.2f mbps=%.2f" % (
        files, nbytes, c.n, secs, files / secs, nbytes / secs / 1e6)


def cmd_torch(a):
    import torch
    from torch.utils.data import DataLoader, Dataset, RandomSampler

    mnt, www, lst, workers, seed, batch = a[0], a[1], a[2], int(a[3]), int(a[4]), int(a[5])
    name = a[a.index("--plan") + 1] if "--plan" in a else None
    with open(lst) as f:
        paths = f.read().split()
    want = []
    for p in paths:
        with open(local(mnt, www, p), "rb") as f:
            want.append(hashlib.sha256(f.read()).digest())

    class Files(Dataset):
        def __len__(self):
            return len(paths)

        def __getitem__(self, i):
            with open(paths[i], "rb") as f:
                return i, f.read()

    ds = Files()
    sampler = RandomSampler(ds, generator=torch.Generator().manual_seed(seed))
    if name:
        sampler = pacefs_plan.PlannedSampler(sampler, mnt, lambda i: paths[i], name=name)
    dl = DataLoader(ds, sampler=sampler, batch_size=batch, num_workers=workers,
                    collate_fn=lambda b: b)
    t0 = time.monotonic()
    first = last = None
    seen = set()
    nbytes = 0
    for b in dl:
        if first is None:
            first = time.monotonic()
        for i, data in b:
            if hashlib.sha256(data).digest() != want[i]:
                raise Failed("sample %d (%s): content mismatch" % (i, paths[i]))
            seen.add(i)
            nbytes += len(data)
    last = time.monotonic()
    if len(seen) != len(paths):
        raise Failed("%d of %d samples" % (len(seen), len(paths)))
    secs = last - first
    return ("ok files=%d bytes=%d secs=%.6f files_per_s=%.2f mbps=%.2f first_secs=%.6f total_secs=%.6f "
            "workers=%d batch=%d torch=%s" % (len(paths), nbytes, secs, len(paths) / secs,
                                              nbytes / secs / 1e6, first - t0, last - t0, workers,
                                              batch, torch.__version__))


CMDS = {"loader": cmd_loader, "pause": cmd_pause, "abandon": cmd_abandon, "tar": cmd_tar,
        "torch": cmd_torch}


def main():
    if len(sys.argv) < 2 or sys.argv[1] not in CMDS:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        print(CMDS[sys.argv[1]](sys.argv[2:]), flush=True)
    except (Failed, OSError, pacefs_plan.PlanError, subprocess.CalledProcessError) as e:
        print("failed: %s" % e, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

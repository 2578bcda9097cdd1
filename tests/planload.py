#!/usr/bin/env python3
"""planload.py: a data loader's workers, in plain processes: reads the
files of LIST (paths relative to MNT, one a line) in that order, worker k
taking entries k, k + W, ... as a DataLoader hands batches round-robin,
compares every file's bytes with the same path under WWW, and prints
"ok N files in S s, R files/s" (exit 0) or what differed (exit 1).

usage: planload.py MNT WWW LIST WORKERS [--plan NAME] [--pause AFTER:SECS]
--plan hands the list to the mount first (pacefs_plan.plan); --pause has
worker 0 (use one worker) stop for SECS after AFTER files, creating the
file $PLANLOAD_PAUSE_MARK (if set) as it stops."""
import multiprocessing
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "contrib", "python"))
import pacefs_plan  # noqa: E402


def worker(k, nw, mnt, www, paths, pause, out):
    bad = 0
    for i in range(k, len(paths), nw):
        if pause and k == 0 and i == pause[0] * nw:
            if os.environ.get("PLANLOAD_PAUSE_MARK"):
                open(os.environ["PLANLOAD_PAUSE_MARK"], "w").close()
            time.sleep(pause[1])
        with open(os.path.join(mnt, paths[i]), "rb") as f:
            got = f.read()
        with open(os.path.join(www, paths[i]), "rb") as f:
            want = f.read()
        if got != want:
            bad += 1
            print("differs: %s (%d bytes, want %d)" % (paths[i], len(got),
                                                      len(want)),
                  file=sys.stderr)
    out.put(bad)


def main():
    a = sys.argv[1:]
    mnt, www, lst, nw = a[0], a[1], a[2], int(a[3])
    name = pause = None
    if "--plan" in a:
        name = a[a.index("--plan") + 1]
    if "--pause" in a:
        n, s = a[a.index("--pause") + 1].split(":")
        pause = (int(n), float(s))
    with open(lst) as f:
        paths = [line.rstrip("\n") for line in f if line.strip()]
    t0 = time.monotonic()
    if name:
        pacefs_plan.plan(mnt, paths, name=name)
    out = multiprocessing.Queue()
    ps = [multiprocessing.Process(target=worker,
                                  args=(k, nw, mnt, www, paths, pause, out))
          for k in range(nw)]
    for p in ps:
        p.start()
    bad = sum(out.get() for _ in ps)
    for p in ps:
        p.join()
    dt = time.monotonic() - t0
    if bad or any(p.exitcode for p in ps):
        print("FAILED: %d files differ" % bad)
        return 1
    print("ok %d files in %.2f s, %.1f files/s" % (len(paths), dt,
                                                  len(paths) / dt))
    return 0


if __name__ == "__main__":
    sys.exit(main())

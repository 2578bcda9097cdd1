#!/usr/bin/python3
"""The side-by-side benchmark (make bench, make bench-quick): pacefs, rclone
mount and httpdirfs on the same files from the same origins, curl as the
limit; records every result in OUT/results.json and writes OUT/README.md.

  bench.py [--quick] [--only "seq_lo zip ..."] [--out DIR] BUILD/pacefs
  bench.py report [DIR] [--readme]   the report again from DIR's results

The runner is harness/, the workloads workloads/ (README.md says how to add
one). Standard library only: it runs under Debian's /usr/bin/python3.
"""
import argparse
import os
import signal
import subprocess
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

from harness import report, results, settings  # noqa: E402
from harness.runner import Bench  # noqa: E402
import workloads  # noqa: E402

# What every run needs; a workload module's NEEDS adds its own (ffmpeg, fio).
NEEDS = ("/usr/sbin/nginx", "rclone", "httpdirfs", "curl", "fusermount3", "timeout", "dd",
         "/usr/bin/python3", "ss", "ldd")


class Interrupted(BaseException):
    """SIGTERM or SIGHUP: leave as Ctrl-C does, through the cleanup."""


def _on_signal(signum, frame):
    raise Interrupted(signum)


def _sh(cmd):
    """The first line CMD prints, on stdout or stderr (in the order it
    wrote them: httpdirfs says its version on stderr, then fusermount's)."""
    try:
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    except OSError:
        return ""
    lines = r.stdout.strip().splitlines()
    return lines[0] if lines else ""


def _machine():
    model = "unknown"
    mem = 0
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal"):
                mem = int(line.split()[1])
    return f"{os.cpu_count()} CPUs ({model}), {mem / 1048576:.1f} GiB memory, Linux {os.uname().release}"


def _commit():
    c = _sh(["git", "-C", REPO, "rev-parse", "--short", "HEAD"]) or "unknown"
    # others edit the tree: say when the binary may hold more than the commit
    r = subprocess.run(["git", "-C", REPO, "status", "--porcelain", "--", "fs", "fetch", "cache", "pacing"],
                       capture_output=True, text=True)
    dirty = [ln[3:] for ln in r.stdout.splitlines()] if r.returncode == 0 else []
    return c + (f" plus uncommitted changes in {', '.join(dirty)}" if dirty else "")


def _loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def run(args):
    quick = args.quick
    only = (args.only if args.only is not None else os.environ.get("BENCH_ONLY", "")).split()
    unknown = [n for n in only if n not in workloads.names()]
    if unknown:
        sys.exit(f"bench: unknown workload(s) {' '.join(unknown)}; there are: {' '.join(workloads.names())}")
    needs = list(NEEDS)
    for m in workloads.MODULES:
        if not only or any(n in only for n in m.WORKLOADS):
            needs += getattr(m, "NEEDS", ())
    missing = [n for n in needs if not (os.path.exists(n) if n.startswith("/") else _which(n))]
    if missing:
        sys.exit(f"bench: {' '.join(missing)} missing; run contrib/install-deps.sh --bench")
    if not _which("gnuplot"):
        print("bench: no gnuplot: the report will have no plots", file=sys.stderr)
    pacefs = os.path.abspath(args.pacefs)
    build = os.path.dirname(pacefs)
    if not os.access(pacefs, os.X_OK) or not os.access(os.path.join(build, "pacefs-origin"), os.X_OK):
        sys.exit(f"bench: {pacefs} or its pacefs-origin is not built; run make")
    if not os.path.exists("/dev/fuse") or os.getuid() != 0:
        sys.exit("bench: needs root and /dev/fuse (it mounts and drops the page cache)")
    rel = os.path.relpath(build, REPO)
    subprocess.run(["make", "-C", REPO, "--no-print-directory", f"BUILD={rel}", f"{rel}/bench/benchread"],
                   check=True, stdout=subprocess.DEVNULL)
    s, changed = settings.make(quick)
    # docs/bench holds the last full run, which the README's table is made
    # from: a part run goes beside the build unless told otherwise
    if quick:
        default = os.path.join(build, "bench-quick")
    elif only or changed:
        default = os.path.join(build, "bench")
    else:
        default = os.path.join(REPO, "docs", "bench")
    out = args.out or os.environ.get("BENCH_OUT") or default
    # Ctrl-C raises KeyboardInterrupt even when a shell started us with
    # SIGINT ignored (a background job); the cleanup then runs
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGHUP, _on_signal)
    b = Bench(REPO, build, s, settings.runs(quick), only, quick, changed)
    rc = 0
    try:
        rc = _measure(b)
    except (KeyboardInterrupt, Interrupted):
        print("bench: interrupted", file=sys.stderr)
        b.failed = True
        rc = 130
    except Exception:
        traceback.print_exc()
        b.failed = True
        rc = 1
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)
        b.stop_all()
        try:
            if rc != 130 and b.res.records:
                _write(b, out)
        finally:
            b.remove_workdir(keep=os.environ.get("BENCH_KEEP") == "1")
    return rc


def _which(n):
    from shutil import which
    return which(n)


def _measure(b):
    b.say(f"work directory {b.w}, {b.runs} run(s) per figure{' (quick)' if b.quick else ''}")
    load0 = _loadavg()
    meta = b.res.meta
    meta.update(date=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), machine=_machine(),
                versions="; ".join([_sh([b.pacefs, "-V"]), _sh(["rclone", "version"]),
                                    _sh(["httpdirfs", "--version"]), _sh(["/usr/sbin/nginx", "-v"]),
                                    _sh(["curl", "-V"])]),
                commit=_commit())
    b.say("generating files")
    broken = set()
    for m in workloads.MODULES:
        if hasattr(m, "gen") and any(b.wanted(n) for n in m.WORKLOADS):
            try:
                m.gen(b)
            except (KeyboardInterrupt, Interrupted):
                raise
            except Exception as e:
                # files that could not be made cost their workloads only
                traceback.print_exc()
                b.failed = True
                for n in m.WORKLOADS:
                    if b.wanted(n):
                        broken.add(n)
                        b.record(n, "pacefs", 0, f"failed: harness error making its files: {e}")
    b.start_nginx()
    b.wan = b.start_wan("wan")
    b.wan2 = b.start_wan("wan2")
    b.say(f"nginx {b.nginx.url}; WAN origins {b.wan.url} and {b.wan2.url} "
          f"({b.s['WAN_LATENCY']} ms, {b.s['WAN_RATE']} B/s per connection)")
    for m in workloads.MODULES:
        for name, fn in m.WORKLOADS.items():
            if not b.wanted(name) or name in broken:
                continue
            b.say(f"workload {name}")
            try:
                fn(b)
            except (KeyboardInterrupt, Interrupted):
                raise
            except Exception:
                # one workload's harness error costs that workload, not the run
                traceback.print_exc()
                b.failed = True
                b.record(name, "pacefs", 0, f"failed: harness error in {name}: {sys.exc_info()[1]}")
    secs = int(time.monotonic() - b.t0)
    meta.update(secs=secs, drop_ok=int(b.drop_ok), load=f"{load0} at the start, {_loadavg()} at the end")
    b.say(f"measurements done in {secs} s; writing the report")
    return 1 if b.failed else 0


def _write(b, out):
    os.makedirs(os.path.join(out, "logs"), exist_ok=True)
    b.res.save(out)
    # the mounts' own logs, so that the report can be made again from OUT
    import shutil
    for s in ("pacefs", "rclone", "httpdirfs"):
        src = b.path("logs", s + ".log")
        if os.path.exists(src):
            shutil.copy(src, os.path.join(out, "logs"))
    _report(out, update=_full(b.res))
    b.say(f"report: {out}/README.md")


def _full(res):
    """A full run: every workload, the full sizes, no knob changed."""
    m = res.meta
    return not m.get("quick") and not m.get("only") and not m.get("overrides")


def _report(out, update):
    res = results.load(out)
    rep, targets = report.write(res, out)
    if update:
        rel = os.path.relpath(os.path.abspath(out), REPO)
        if not report.update_readme(os.path.join(REPO, "README.md"), report.readme_block(rep, targets, rel)):
            print("bench: README.md has no headline block to rewrite", file=sys.stderr)


def _check(folder):
    """Makes FOLDER's report again in a temporary folder and lists the table
    rows of FOLDER/README.md it lacks (a report change that moved a figure);
    rows of sections the old report did not have may be added."""
    import shutil
    import tempfile
    tmp = tempfile.mkdtemp(prefix="bench-check.")
    try:
        report.write(results.load(folder), tmp)
        with open(os.path.join(tmp, "README.md")) as f:
            made = {ln for ln in f.read().splitlines() if ln.startswith("| ")}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    with open(os.path.join(folder, "README.md")) as f:
        old = [ln for ln in f.read().splitlines() if ln.startswith("| ")]
    lost = [ln for ln in old if ln not in made]
    for ln in lost:
        print(f"{folder}: not made again: {ln}")
    print(f"{folder}: {len(old) - len(lost)} of {len(old)} table rows made again")
    return 1 if lost else 0


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "report":
        p = argparse.ArgumentParser(prog="bench.py report",
                                    description="the report again from a folder's results.json (or a shell run's raw.tsv and settings.sh)")
        p.add_argument("dir", nargs="?", default=os.path.join(REPO, "docs", "bench"))
        p.add_argument("--readme", action="store_true",
                       help="also rewrite README.md's headline block from these results (a full run's)")
        p.add_argument("--check", action="store_true",
                       help="write nothing: say which table rows of DIR's README.md the report would not make again")
        a = p.parse_args(sys.argv[2:])
        if a.check:
            return _check(a.dir)
        _report(a.dir, a.readme)
        return 0
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="small data, one run: every workload in minutes")
    p.add_argument("--only", help='a subset of the workloads, e.g. "seq_lo zip" (BENCH_ONLY)')
    p.add_argument("--out", help="where results and the report go (BENCH_OUT; docs/bench for a full run, BUILD/bench-quick with --quick, BUILD/bench for a part)")
    p.add_argument("--list", action="store_true", help="the workloads' names, then exit")
    p.add_argument("pacefs", nargs="?", default=os.path.join(REPO, "build", "pacefs"))
    a = p.parse_args()
    if a.list:
        print(" ".join(workloads.names()))
        return 0
    return run(a)


if __name__ == "__main__":
    sys.exit(main())

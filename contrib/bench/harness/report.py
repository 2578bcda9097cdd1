"""The bench's one report: docs/bench/README.md (setup, headline, plots, the
targets table with verdicts, each workload's section with every run's
values, noise, caveats, logs) from recorded results, and the README's
headline table from the last full run.

Each workload module writes its own targets, headline lines, sections and
plots (workloads/__init__.py); this module frames them.
"""
import fnmatch
import os
import re
import shutil
import subprocess
import tempfile

from workloads import MODULES

from . import stats
from .stats import Figures

# The README's headline table: which workload rows, in this order (a row a
# module offers that is not listed comes after them).
README_ROWS = ["seq_wan", "seq_lo", "ttfb", "random_wan", "seek1m", "player", "zip", "sqlite",
               "warm", "remount", "multi_lo", "memory", "loader_shards", "loader_small"]
README_BEGIN = "<!-- bench-headline: written by contrib/bench/bench.py from the last full run; edit the bench, not this table -->"
README_END = "<!-- /bench-headline -->"
PLOTS_EVER = ("cold_seq", "latency", "pulled", "clients", "loader", "fio")


class Report:
    """What a workload's report functions get: the figures (fig), the
    run's settings (s), the number of runs and a few shared helpers."""

    LOG_BARS = """set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set logscale y
set grid ytics"""

    def __init__(self, res, tmp):
        self.res = res
        self.fig = Figures(res)
        self.runs = res.meta.get("runs", 3)
        self.tmp = tmp
        self._n = 0

    def s(self, name, default=None):
        return self.res.setting(name, default)

    isnum = staticmethod(stats.isnum)

    def rtt(self):
        """The WAN origin's round trip, seconds."""
        return stats.awk(self.s("WAN_LATENCY") / 1000)

    div = staticmethod(stats.div)

    def data(self, text):
        """A data file for a plot, removed with the report's temp folder."""
        self._n += 1
        p = os.path.join(self.tmp, f"plot{self._n}.dat")
        with open(p, "w") as f:
            f.write(text)
        return p


def _each(rep, hook):
    for m in MODULES:
        fn = getattr(m, hook, None)
        if fn:
            yield m, fn(rep)


def _plots(rep, out):
    for name in PLOTS_EVER:
        p = os.path.join(out, name + ".png")
        if os.path.exists(p):
            os.unlink(p)
    if not shutil.which("gnuplot"):
        return []
    made = []
    for _, plots in _each(rep, "plots"):
        for name, size, script in plots:
            png = os.path.join(out, name + ".png")
            head = f'set terminal pngcairo size {size} font "sans,10" noenhanced\nset output "{png}"\n'
            r = subprocess.run(["gnuplot"], input=head + script, capture_output=True, text=True)
            if r.returncode == 0:
                made.append(name + ".png")
            else:
                # gnuplot leaves the empty file it opened
                if os.path.exists(png):
                    os.unlink(png)
                last = [ln for ln in r.stderr.splitlines() if ln.strip()][-1:]
                print(f"report: the {name} plot failed: {''.join(last)}")
    return made


def _noise(rep):
    keys = {}
    for m in MODULES:
        keys.update(getattr(m, "NOISE", {}))
    lo, hi, lists = {}, {}, {}
    for r in rep.res.records:
        key = next((k for pat, k in keys.items() if fnmatch.fnmatchcase(r["wl"], pat)), None)
        if r["status"] != "ok" or key is None or key not in r["values"]:
            continue
        v = stats.num(r["values"][key])
        if v <= 0:
            continue
        i = (r["wl"], r["sys"], key)
        lo[i] = min(lo.get(i, v), v)
        hi[i] = max(hi.get(i, v), v)
        lists.setdefault(i, []).append("%.3g" % v)
    rows = []
    for i in lo:
        q = hi[i] / lo[i]
        rows.append((float("%.3f" % q), f"| {i[0]} | {i[1]} | {i[2]} | {', '.join(lists[i])} | {q:.2f} |"))
    rows.sort(reverse=True)
    return [r for _, r in rows[:6]]


def _logs(out):
    lines = []
    if os.path.isdir(os.path.join(out, "logs")):
        lines.append("Lines other than routine ones in each system's log over the whole run ([logs/](logs/)):")
    else:
        lines.append("Lines other than routine ones in each system's log over the whole run (the logs themselves are not kept with this report):")
    lines.append("")
    pats = {"pacefs": r"^===|: info: ", "rclone": r"^===|NOTICE: Config file",
            "httpdirfs": r"^===|^LinkTable_print|^fs_open|^fs_release"}
    for s, pat in pats.items():
        lf = os.path.join(out, "logs", s + ".log")
        if not os.path.isfile(lf):
            lines.append(f"- {s}: no log")
            continue
        with open(lf, errors="replace") as f:
            text = f.read().splitlines()
        n = sum(1 for ln in text if not re.search(pat, ln))
        lines.append(f"- {s}: {n} line(s)" + ("; the first distinct ones:" if n else ""))
        # each with the mount it came from (the "=== mount" line)
        shown, seen, hdr, done = [], set(), "", False
        for ln in text:
            if ln.startswith("==="):
                hdr, done = ln, False
                continue
            if re.search(pat, ln) or ln == "" or ln in seen:
                continue
            seen.add(ln)
            if not done:
                shown.append("    " + hdr[4:])
                done = True
            shown.append("        " + ln[:200])
        lines += shown[:12]
    lines.append("")
    return lines


def _setup(rep):
    S, fig, m = rep.s, rep.fig, rep.res.meta
    MiB = stats.MiB
    mln = str(S("MULTI_LO_N", "") or "")
    files = (f"Files: {S('SEQ_LO_SIZE') // MiB} MiB for loopback sequential/warm/remount, {S('SEQ_WAN_SIZE') // MiB} MiB for WAN sequential, first byte and mirrors, {S('LONG_SIZE') // MiB} MiB for random reads and seeks (the player reads the {S('SEQ_LO_SIZE') // MiB} MiB file), {S('MULTI_FILES')} x {S('MULTI_SIZE') // MiB} MiB for many readers on WAN")
    if mln:
        files += f", {S('MULTI_LO_FILES', 0)} x {S('MULTI_SIZE') // MiB} MiB for many readers on loopback ({mln.replace(' ', ' and ')} readers)"
    if fig.has("loader_"):
        files += f", {S('SHARD_N', 0)} x {S('SHARD_SIZE', 0) // MiB} MiB shards and {S('SMALL_N', 0)} x {S('SMALL_SIZE', 0) // 1024} KiB files for the loader"
    if fig.has("fio_"):
        files += f", one {S('FIO_SIZE', 0) // MiB} MiB file written by fio for its jobs, linked under each name they read"
    drop = "" if str(m.get("drop_ok", 1)) == "1" else " (**failed on this machine: page cache NOT dropped**)"
    lat, rate = S("WAN_LATENCY"), S("WAN_RATE")
    return ["## Setup", "",
            "- **Loopback origin:** nginx on 127.0.0.1, a free port, `autoindex on`, sendfile, one worker per CPU. Raw speed.",
            f"- **WAN-like origin:** the project's `pacefs-origin` with `--latency {lat} --rate {rate} --autoindex`: every response (listings, HEADs and ranges alike) waits {lat} ms before its head, and every connection is capped at {rate} bytes/s. Its `--autoindex` page mimics nginx's, so all three systems list, probe and read through the same latency and cap. (nginx's `limit_rate` would have given the cap but not the latency.)",
            *([f"- **Near origin:** the same with `--latency {S('NEAR_LATENCY')} --rate {S('NEAR_RATE')}`: a round trip of {S('NEAR_LATENCY')} ms and a loose cap on each connection, as an object store in the reader's own region."]
              if fig.has("seq_near") or fig.has("loader_near") or fig.has("fio_near") else []),
            "- **Systems:** `pacefs -f -o cache_dir=DIR URL MNT` (one blob per mount, except the loopback many-readers workload, which mounts nginx's directory index URL/ for all its files; defaults: 32 lanes for the mount, 16 to one origin); `rclone mount :http: MNT --http-url URL/ --vfs-cache-mode full --cache-dir DIR` (defaults otherwise); `httpdirfs -f --cache --cache-location DIR URL/ MNT` (defaults otherwise). Limit rows: `curl` to /dev/null, one connection, and one `curl --parallel` with 8 range requests; on loopback also `curl` into a file (one process, and N at once for N readers) and, for the read back after a remount, `dd` of pacefs's data.mdb.",
            f"- **Cold:** every run starts with a new empty cache directory and a new mount; then `sync; echo 3 > /proc/sys/vm/drop_caches`{drop}, then the origin's source file is read once so that the origin serves from memory.",
            "- **Verification:** the files are generated by `benchread gen` (word i of a file is x ^ (x >> 29) with x = (FNV-1a(name) + i) times an odd constant: no two words of a file are equal); the reader `benchread` checks every byte it reads against that formula (about 5 GB/s on this machine, so it does not cap warm reads), so a wrong byte at any offset fails the run (\"failed: content mismatch ... at offset N\"). curl rows check status codes and byte counts.",
            "- **Bytes pulled** are the body bytes the origin logged (nginx `$body_bytes_sent`, pacefs-origin's per-request log), from before the mount to after the unmount unless said otherwise.",
            f"- {files}.", ""]


def _intro(rep):
    m = rep.res.meta
    secs = int(m.get("secs", 0))
    if m.get("harness") == "run.sh":
        how = "Generated by `make bench` (`contrib/bench/run.sh`)"
        raw = "Raw results: [raw.tsv](raw.tsv) (workload, system, run, ok/failed, values)."
    elif m.get("quick"):
        how = "Generated by `make bench-quick` (`contrib/bench/bench.py --quick`: small data, one run; its figures are not comparable with a full run's)"
        raw = "Raw results: [results.json](results.json), the report's source, and [raw.tsv](raw.tsv) (workload, system, run, ok/failed, values)."
    else:
        how = "Generated by `make bench` (`contrib/bench/bench.py`)"
        raw = "Raw results: [results.json](results.json), the report's source, and [raw.tsv](raw.tsv) (workload, system, run, ok/failed, values)."
    if m.get("only"):
        how += f", workloads {' '.join(m['only'])} only"
    return ["# pacefs benchmark: side by side with rclone and httpdirfs", "",
            f"{how} on {m.get('date', 'unknown')}, pacefs commit {m.get('commit', 'unknown')}; the measurements took {secs // 60} min {secs % 60} s.",
            f"Every figure is the median of {rep.runs} runs; the per-run values are listed next to it. Ratios compare figures of the same run.",
            raw, "",
            f"**Machine:** {m.get('machine', 'unknown')}. Shared with other engineers' builds and tests while it ran, so expect noise: load average {m.get('load') or 'unknown'}.", "",
            f"**Versions:** {m.get('versions', 'unknown')}.", ""]


def verdict_counts(rows):
    met = sum(1 for r in rows if r.endswith("| **met** |"))
    nmet = sum(1 for r in rows if "| **NOT met**" in r)
    na = sum(1 for r in rows if r.endswith("| n/a (the reference failed) |"))
    skip = sum(1 for r in rows if "| not run (" in r)
    return met, nmet, na, skip


def caveats(rep):
    out = ["- The WAN many-readers workload gives pacefs one mount per file, each with its own 16 lanes to the origin, as it did before pacefs mounted trees, so that its figures stay comparable with earlier runs; rclone and httpdirfs serve all files from one mount. The loopback many-readers workload uses one mount for every system.",
           "- httpdirfs runs with `--no-range-check`: without it httpdirfs 1.2.5 exits on nginx's 206 responses, which carry Content-Range but no Accept-Ranges (httpdirfs issue #188). It also crashed at unmount in some runs (see Logs); only reads before the unmount count.",
           "- Warm re-reads do not drop the page cache: they measure what a user sees on a second read, kernel page cache included where the filesystem keeps it.",
           "- Timings include benchread's check of every byte (about 0.05 s per 256 MiB on this machine), the same for every system; curl rows do no check.",
           "- The player's pulled - consumed is counted from mount to unmount, so it includes the mount's probe and whatever the read-ahead fetched past the last read before the unmount.",
           "- The real clients' 'read' is what the client asked for; the kernel's own read-ahead on a FUSE file makes the filesystem see more than that, for every system alike.",
           "- The WAN origin caps each connection, not the origin as a whole, so the two-mirror workload cannot show aggregation: either mirror alone fills 16 lanes."]
    for _, lines in _each(rep, "caveats"):
        out += lines
    # the daemons that were gone before their unmount
    gone = {}
    for r in rep.res.records:
        if r["status"] == "ok" and r["values"].get("daemon_gone") == "1":
            gone.setdefault(r["sys"], []).append(f"{r['wl']} run {r['run']}")
    if gone:
        out.append("- A mount daemon had exited before its unmount, after the workload's reads had succeeded (so no peak RSS for that run): "
                   + "; ".join(f"{s} {len(w)} time(s) ({', '.join(w)})" for s, w in gone.items()) + ".")
    return out


def write(res, out):
    """docs/bench/README.md (in OUT) and its plots from RES; returns the
    Report's (targets met, NOT met)."""
    tmp = tempfile.mkdtemp(prefix="bench-report.")
    try:
        rep = Report(res, tmp)
        plots = _plots(rep, out)
        targets = [row for _, rows in _each(rep, "targets") for row in rows]
        met, nmet, na, skip = verdict_counts(targets)
        head = f"- Targets: **{met} met, {nmet} NOT met**"
        if na:
            head += f", {na} not judged (a reference failed)"
        if skip:
            head += f", {skip} not run"
        lines = _intro(rep) + _setup(rep) + ["## Headline", "", head + " (table below)."]
        for _, hl in _each(rep, "headline"):
            lines += hl
        lines += [""] + [f"![{p}]({p})" for p in plots] + [""]
        lines += ["## Targets", "", "| target | measured (same run) | verdict |", "| --- | --- | --- |"]
        lines += targets + [""]
        for _, sec in _each(rep, "sections"):
            lines += sec
        lines += ["## Noise", "",
                  f"The machine was shared. Largest spreads between runs of one figure (max / min over the {rep.runs} runs):", "",
                  "| workload | system | figure | runs | max / min |", "| --- | --- | --- | --- | ---: |"]
        lines += _noise(rep) + ["", "## Caveats", ""] + caveats(rep) + ["", "## Logs", ""] + _logs(out)
        text = "\n".join(lines) + "\n"
        notes = os.path.join(out, "notes.md")
        if os.path.isfile(notes) and os.path.getsize(notes):
            with open(notes) as f:
                text += f.read()
        with open(os.path.join(out, "README.md"), "w") as f:
            f.write(text)
        return rep, targets
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def readme_block(rep, targets, rel):
    """The README's headline block from REP (a full run's), its report at
    the repository-relative folder REL."""
    rows = {}
    for _, r in _each(rep, "readme_rows"):
        rows.update(r)
    order = [k for k in README_ROWS if k in rows] + [k for k in rows if k not in README_ROWS]
    m = rep.res.meta
    met, nmet, na, skip = verdict_counts(targets)
    not_met = [t.split(" | ")[0].lstrip("| ") for t in targets if "| **NOT met**" in t]
    lines = [README_BEGIN,
             f"Headline of the last full run ({m.get('date', 'unknown')}, commit {m.get('commit', 'unknown')}; {m.get('machine', '').split(' (')[0]}, shared; medians of {rep.runs}; ratios from the same run; [the report]({rel}/README.md) lists every run and the noise):",
             "", "| workload | pacefs | rclone | httpdirfs | curl |", "| --- | ---: | ---: | ---: | ---: |"]
    lines += [rows[k] for k in order]
    lines += ["", f"{met} of the {met + nmet + na} targets were met in that run"
              + (f" ({skip} not run)" if skip else "") + "."
              + (f" Not met: {'; '.join(not_met)}." if not_met else ""), README_END]
    return "\n".join(lines)


def update_readme(path, block):
    """Rewrites the marked block of the README at PATH; False when the
    markers are missing."""
    with open(path) as f:
        text = f.read()
    a, b = text.find(README_BEGIN), text.find(README_END)
    if a < 0 or b < a:
        return False
    text = text[:a] + block + text[b + len(README_END):]
    with open(path, "w") as f:
        f.write(text)
    return True

"""Read plans on the WAN origin: the loader's small files and shards with
the order handed to the mount (pacefs_plan.plan) against the same loader
without it, rclone and curl; tar of the small files' folder (no plan); a
loader paused along its plan, a plan abandoned; a PyTorch DataLoader with
and without PlannedSampler. The clients are planclient.py's.
"""
import os

from harness import tree
from harness.settings import TO_LOADER
from harness.stats import MiB, conns_cell, f, g, gf, isnum, qx, tonum, yesno

from . import loader as ld

CLIENT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "planclient.py")
NEEDS = ("tar",)
PY = "/usr/bin/python3"


def gen(b):
    """The loader's small files and shards (its sets, made once)."""
    if b.wanted("plan_small") or b.wanted("plan_tar") or b.wanted("plan_pause") or \
            b.wanted("plan_torch"):
        ld.make_set(b, "small")
    if b.wanted("plan_shards"):
        ld.make_set(b, "shards")


def _client(*args):
    return [PY, CLIENT, *[str(a) for a in args]]


def _lanes(b):
    return ("-o", b.s["PLAN_LANES"])


def _step(b, wl, sys_, r, st, cmd, opts=()):
    """One cold run of CMD through a fresh mount of the set ST's folder:
    rclone's for the rclone rows, pacefs's (with OPTS) for the others."""
    tree.tree_step(b, wl, sys_, r, "wan", st, tree.names(b, st), cmd, TO_LOADER, opts=opts,
                   mount_sys="rclone" if sys_ == "rclone" else "pacefs")


def _loader(b, wl, sys_, r, st, n, plan, opts=()):
    cmd = _client("loader", "@MNT@", b.path("tree.list"), n, r, b.br)
    if plan:
        cmd += ["--plan", "bench"]
    _step(b, wl, sys_, r, st, cmd, opts)


def plan_small(b):
    """The small files, shuffled, for each worker count: pacefs with and
    without the plan, with the plan and the wide lanes, rclone, and curl
    with PLAN_CURL_SMALL connections over the same order."""
    s = b.s
    for r in b.run_range():
        for n in str(s["PLAN_SMALL_N"]).split():
            wl = f"plan_small_{n}"
            _loader(b, wl, "pacefs_plan", r, "small", n, True)
            _loader(b, wl, "pacefs", r, "small", n, False)
            _loader(b, wl, "pacefs_plan_lanes", r, "small", n, True, _lanes(b))
            _loader(b, wl, "rclone", r, "small", n, False)
            ld.curl_loader(b, wl, "curl", r, "wan", "small", s["SMALL_SIZE"], s["PLAN_CURL_SMALL"])


def plan_shards(b):
    """The shards in the plan's order, PLAN_SHARD_WORKERS workers: pacefs
    with and without the plan, rclone, curl with PLAN_CURL_SHARDS."""
    s = b.s
    n = s["PLAN_SHARD_WORKERS"]
    for r in b.run_range():
        wl = "plan_shards"
        _loader(b, wl, "pacefs_plan", r, "shards", n, True)
        _loader(b, wl, "pacefs", r, "shards", n, False)
        _loader(b, wl, "rclone", r, "shards", n, False)
        ld.curl_loader(b, wl, "curl", r, "wan", "shards", s["SHARD_SIZE"], s["PLAN_CURL_SHARDS"])


def plan_tar(b):
    """tar of the small files' folder, no plan: pacefs and rclone."""
    www = os.path.join(b.www, "small")
    for r in b.run_range():
        for sys_ in ("pacefs", "rclone"):
            _step(b, "plan_tar", sys_, r, "small", _client("tar", "@MNT@", www))


def plan_pause(b):
    """One worker along its plan, paused PLAN_PAUSE_SECS after
    PLAN_PAUSE_AFTER files; then a plan of the order's first half left
    after PLAN_ABANDON_KEEP files for the other half."""
    s = b.s
    www = os.path.join(b.www, "small")
    og = tree.origin_of(b, "wan", "small")
    for r in b.run_range():
        _step(b, "plan_pause", "pacefs_plan", r, "small",
              _client("pause", "@MNT@", www, b.path("tree.list"), r, s["PLAN_PAUSE_AFTER"],
                      s["PLAN_PAUSE_SECS"], og.log, b.pacefs))
        _step(b, "plan_abandon", "pacefs_plan", r, "small",
              _client("abandon", "@MNT@", www, b.path("tree.list"), r, s["PLAN_ABANDON_KEEP"],
                      og.log, b.pacefs))


def plan_torch(b):
    """PyTorch's DataLoader over the small files, RandomSampler seeded by
    the run, TORCH_WORKERS workers, batches of TORCH_BATCH: without and
    with PlannedSampler."""
    s = b.s
    www = os.path.join(b.www, "small")
    for r in b.run_range():
        for sys_, extra in (("pacefs", []), ("pacefs_plan", ["--plan", "bench"])):
            _step(b, "plan_torch", sys_, r, "small",
                  _client("torch", "@MNT@", www, b.path("tree.list"), s["TORCH_WORKERS"], r,
                          s["TORCH_BATCH"], *extra))


WORKLOADS = {"plan_small": plan_small, "plan_shards": plan_shards, "plan_tar": plan_tar,
             "plan_pause": plan_pause, "plan_torch": plan_torch}
NOISE = {"plan_small_*": "files_per_s", "plan_shards": "mbps", "plan_tar": "files_per_s",
         "plan_torch": "files_per_s"}

LABELS = {"pacefs_plan": "pacefs, with the plan",
          "pacefs": "pacefs, no plan",
          "pacefs_plan_lanes": "pacefs, with the plan, `-o host_lanes=48,lanes=64`",
          "rclone": "rclone mount, --vfs-cache-mode full"}


# --- report -----------------------------------------------------------------

def targets(rep):
    if not rep.fig.has("plan_"):
        return []
    fig, S = rep.fig, rep.s
    m = fig.med
    rows = []
    sm = f"{S('SMALL_N', 0)} x {S('SMALL_SIZE', 0) // 1024} KiB shuffled, WAN"
    for n, bound in (("8", 600), ("1", 550)):
        wl = f"plan_small_{n}"
        if not fig.rows(wl, "pacefs_plan"):
            continue
        p = m(wl, "pacefs_plan", "files_per_s")
        rows.append(f"| plan, {sm}, {n} worker(s), default options: >= {bound} files/s | {f(p, 1, '%.1f')} files/s ({qx(fig.ratio_sys(wl, 'pacefs_plan', 'pacefs', 'files_per_s'))} no plan {gf(m(wl, 'pacefs', 'files_per_s'), 1, '%.1f')}, {qx(fig.ratio_sys(wl, 'pacefs_plan', 'rclone', 'files_per_s'))} rclone, {qx(fig.ratio_sys(wl, 'pacefs_plan', 'curl', 'files_per_s'))} curl with {S('PLAN_CURL_SMALL', 8)} connections) | {yesno('ge', p, bound)} |")
    wl = "plan_small_8"
    if fig.rows(wl, "pacefs_plan_lanes"):
        p = m(wl, "pacefs_plan_lanes", "files_per_s")
        rows.append(f"| plan, {sm}, 8 workers, `-o {S('PLAN_LANES', '')}`: >= 1,500 files/s | {f(p, 1, '%.1f')} files/s, {g(m(wl, 'pacefs_plan_lanes', 'conns_active'), 1, '%.0f')} connections active, {g(m(wl, 'pacefs_plan_lanes', 'conns_used'), 1, '%.0f')} used | {yesno('ge', p, 1500)} |")
    pulled = []
    for wl, sys_ in (("plan_small_8", "pacefs_plan"), ("plan_small_1", "pacefs_plan"),
                     ("plan_small_8", "pacefs_plan_lanes"), ("plan_shards", "pacefs_plan")):
        if fig.rows(wl, sys_):
            q = fig.q(wl, sys_, "pulled", "bytes")
            pulled.append((f"{wl.replace('plan_', '')} {sys_.replace('pacefs_', '')}", q if isnum(m(wl, sys_, "bytes")) else m(wl, sys_, "bytes")))
    if pulled:
        worst = max((q for _, q in pulled if isnum(q)), key=tonum, default="-")
        if any(not isnum(q) for _, q in pulled):
            worst = next(q for _, q in pulled if not isnum(q))
        cells = ", ".join("%s %s" % (k, f(q, 1, "%.3fx")) for k, q in pulled)
        rows.append(f"| plan rows: pulled <= 1.02x read | {cells} | {yesno('le', worst, 1.02)} |")
    wl = "plan_shards"
    if fig.rows(wl, "pacefs_plan"):
        p = m(wl, "pacefs_plan", "mbps")
        q = fig.ratio_sys(wl, "pacefs_plan", "curl", "mbps")
        rows.append(f"| plan, {S('SHARD_N', 0)} shards of {S('SHARD_SIZE', 0) // MiB} MiB in plan order, {S('PLAN_SHARD_WORKERS', 2)} workers, WAN: >= 0.9x curl with {S('PLAN_CURL_SHARDS', 16)} connections | {f(p, 1, '%.1f')} MB/s vs curl {gf(m(wl, 'curl', 'mbps'), 1, '%.1f')} MB/s: {qx(q)} (no plan {gf(m(wl, 'pacefs', 'mbps'), 1, '%.1f')}, rclone {gf(m(wl, 'rclone', 'mbps'), 1, '%.1f')}) | {yesno('ge', q if isnum(p) else p, 0.9)} |")
    wl = "plan_tar"
    if fig.rows(wl, "pacefs"):
        p = m(wl, "pacefs", "files_per_s")
        rows.append(f"| `tar cf - DIR \\| wc -c` of {S('SMALL_N', 0)} x {S('SMALL_SIZE', 0) // 1024} KiB, WAN, no plan: >= 500 files/s | {f(p, 1, '%.1f')} files/s (rclone {gf(m(wl, 'rclone', 'files_per_s'), 1, '%.1f')}) | {yesno('ge', p, 500)} |")
    wl = "plan_torch"
    if fig.rows(wl, "pacefs_plan"):
        p = m(wl, "pacefs_plan", "files_per_s")
        q = fig.ratio_sys(wl, "pacefs_plan", "pacefs", "files_per_s")
        rows.append(f"| PyTorch DataLoader, {S('TORCH_WORKERS', 8)} workers, RandomSampler, first sample to last: with the plan >= 2x without | {f(p, 1, '%.1f')} vs {gf(m(wl, 'pacefs', 'files_per_s'), 1, '%.1f')} samples/s: {qx(q)} | {yesno('ge', q if isnum(p) else p, 2)} |")
    wl = "plan_pause"
    if fig.rows(wl, "pacefs_plan"):
        p = m(wl, "pacefs_plan", "paused_bytes")
        rows.append(f"| plan, 1 worker paused {S('PLAN_PAUSE_SECS', 10)} s after {S('PLAN_PAUSE_AFTER', 200)} files: <= 8 MiB fetched from 1 s into the pause to its end | {f(p, MiB, '%.2f')} MiB | {yesno('le', p, 8 * MiB)} |")
    wl = "plan_abandon"
    if fig.rows(wl, "pacefs_plan"):
        p = m(wl, "pacefs_plan", "extra_files")
        w = m(wl, "pacefs_plan", "window")
        rows.append(f"| plan abandoned after {S('PLAN_ABANDON_KEEP', 20)} files: its files pulled beyond those read <= one window (the plan's window when the opens left it) | {f(p, 1, '%.0f')} files ({g(m(wl, 'pacefs_plan', 'extra_bytes'), MiB, '%.2f')} MiB), window {g(w, 1, '%.0f')} files | {yesno('le', p, w) if isnum(p) else yesno('le', p, 0)} |")
    return rows


def headline(rep):
    fig = rep.fig
    if not fig.rows("plan_small_8", "pacefs_plan"):
        return []
    wl = "plan_small_8"
    return [f"- Read plan, {rep.s('SMALL_N', 0)} small files shuffled, WAN, 8 workers: {f(fig.med(wl, 'pacefs_plan', 'files_per_s'), 1, '%.1f')} files/s with the plan = {qx(fig.ratio_sys(wl, 'pacefs_plan', 'pacefs', 'files_per_s'))} without, {qx(fig.ratio_sys(wl, 'pacefs_plan', 'rclone', 'files_per_s'))} rclone, {qx(fig.ratio_sys(wl, 'pacefs_plan', 'curl', 'files_per_s'))} curl with {rep.s('PLAN_CURL_SMALL', 8)} connections."]


def _table(rep, wl, systems, key, unit, k2, u2, curl_label):
    fig = rep.fig
    m = fig.med
    out = [f"| system | {unit} | runs | {u2} | requests per file | pulled / read | peak RSS MiB | connections: open, active (seen), used | with the plan is |",
           "| --- | ---: | --- | ---: | ---: | ---: | ---: | --- | ---: |"]
    for s in systems:
        if not fig.rows(wl, s):
            continue
        lb = curl_label if s == "curl" else LABELS.get(s, s)
        q = "-" if s == "pacefs_plan" else qx(fig.ratio_sys(wl, "pacefs_plan", s, key))
        out.append(f"| {lb} | {f(m(wl, s, key), 1, '%.1f')} | {fig.vals(wl, s, key, 1, '%.1f')} | {g(m(wl, s, k2), 1, '%.2f')} | {g(fig.q(wl, s, 'reqs', 'files'), 1, '%.2f')} | {g(fig.q(wl, s, 'pulled', 'bytes'), 1, '%.3f')} | {g(m(wl, s, 'hwm_kib'), 1024, '%.0f')} | {_conns(fig, wl, s)} | {q} |")
    return out + [""]


def sections(rep):
    if not rep.fig.has("plan_"):
        return []
    fig, S = rep.fig, rep.s
    m = fig.med
    out = ["## Read plans (WAN origin)", "",
           "A loader that hands its order to the mount first (`pacefs_plan.plan`, through the socket `pacefs plan` uses) against the same loader without it, rclone and curl, on the WAN origin (20 ms before every response, 8 MB/s a connection), each system a fresh mount of the set's folder with an empty cache (pacefs its directory index, default options unless said). The loader is `benchread loader` (the loader workload's: N worker processes take the files in one shuffled order seeded by the run, every byte checked), started by `planclient.py`, which sets the plan first when there is one: the seconds run from before the plan to the last worker's exit. curl: N processes over the same order, one connection each, as in the loader workload (with 8 for one worker too: the reference is the same curl). Requests per file and pulled / read: the origin's log from mount to unmount. Connections: `ss`, as in the loader workload: open, active (seen), and **used**, every connection to the origin open or closed while the client ran (a closed one stays a minute in TIME_WAIT, which ss is asked for every 0.1 s too; the origin's log does not say which connection served a request).", ""]
    for n in str(S("PLAN_SMALL_N", "8 1")).split():
        wl = f"plan_small_{n}"
        if not fig.rows(wl, "pacefs_plan"):
            continue
        out += [f"### {S('SMALL_N', 0)} files of {S('SMALL_SIZE', 0) // 1024} KiB, shuffled, {n} worker(s)", ""]
        out += _table(rep, wl, ("pacefs_plan", "pacefs", "pacefs_plan_lanes", "rclone", "curl"),
                      "files_per_s", "files/s", "mbps", "MB/s",
                      f"curl, {S('PLAN_CURL_SMALL', 8)} connections (limit)")
    wl = "plan_shards"
    if fig.rows(wl, "pacefs_plan"):
        out += [f"### {S('SHARD_N', 0)} shards of {S('SHARD_SIZE', 0) // MiB} MiB in plan order, {S('PLAN_SHARD_WORKERS', 2)} workers", ""]
        out += _table(rep, wl, ("pacefs_plan", "pacefs", "rclone", "curl"), "mbps", "MB/s", "files_per_s", "files/s",
                      f"curl, {S('PLAN_CURL_SHARDS', 16)} connections (limit)")
    wl = "plan_tar"
    if fig.rows(wl, "pacefs"):
        out += [f"### `tar cf - DIR | wc -c` of the {S('SMALL_N', 0)} small files, no plan", "",
                "`planclient.py tar`: `tar cf - -C MNT .` (the folder's files one at a time, in listing order), its stream counted as `wc -c` would, and every member compared with the origin's copy. files/s over tar's wall time.", "",
                "| system | files/s | runs | tar stream bytes | requests per file | pulled / read | connections: open, active (seen), used |",
                "| --- | ---: | --- | ---: | ---: | ---: | --- |"]
        for s in ("pacefs", "rclone"):
            out.append(f"| {s} | {f(m(wl, s, 'files_per_s'), 1, '%.1f')} | {fig.vals(wl, s, 'files_per_s', 1, '%.1f')} | {g(m(wl, s, 'tar_bytes'), 1, '%.0f')} | {g(fig.q(wl, s, 'reqs', 'files'), 1, '%.2f')} | {g(fig.q(wl, s, 'pulled', 'bytes'), 1, '%.3f')} | {_conns(fig, wl, s)} |")
        out.append("")
    wl = "plan_torch"
    if fig.rows(wl, "pacefs_plan"):
        out += [f"### PyTorch DataLoader, {S('TORCH_WORKERS', 8)} workers, the {S('SMALL_N', 0)} small files", "",
                f"`planclient.py torch`: Debian's python3-torch; a `Dataset` whose sample is a file's bytes (`open(path).read()` in the worker), `RandomSampler` seeded by the run, `DataLoader(num_workers={S('TORCH_WORKERS', 8)}, batch_size={S('TORCH_BATCH', 64)})`; every sample's SHA-256 compared with the origin's copy's. With the plan, the sampler is wrapped in `pacefs_plan.PlannedSampler`, which hands the epoch's order to the mount before the first index goes out. samples/s: the samples over the seconds from the first batch's arrival to the last one's; also the seconds from the loader's start to its first batch and to its end.", "",
                "| system | samples/s | runs | s to the first batch | s in all | pulled / read | connections: open, active (seen), used | with the plan is |",
                "| --- | ---: | --- | ---: | ---: | ---: | --- | ---: |"]
        for s in ("pacefs_plan", "pacefs"):
            q = "-" if s == "pacefs_plan" else qx(fig.ratio_sys(wl, "pacefs_plan", s, "files_per_s"))
            out.append(f"| {LABELS[s]} | {f(m(wl, s, 'files_per_s'), 1, '%.1f')} | {fig.vals(wl, s, 'files_per_s', 1, '%.1f')} | {g(m(wl, s, 'first_secs'), 1, '%.2f')} | {g(m(wl, s, 'total_secs'), 1, '%.2f')} | {g(fig.q(wl, s, 'pulled', 'bytes'), 1, '%.3f')} | {_conns(fig, wl, s)} | {q} |")
        out.append("")
    if fig.rows("plan_pause", "pacefs_plan") or fig.rows("plan_abandon", "pacefs_plan"):
        out += ["### A paused loader, an abandoned plan", "",
                f"Paused: one worker (`planclient.py pause`) reads the files along its plan of the whole order and stops {S('PLAN_PAUSE_SECS', 10)} s after {S('PLAN_PAUSE_AFTER', 200)} files; the origin's body bytes logged from one second into the pause to its end, and the plan's status a second in. Abandoned: a plan of the order's first half; {S('PLAN_ABANDON_KEEP', 20)} files read along it, then the other half (none of the plan's) by 8 threads; the plan's files the origin sent beyond those read, against the plan's window (files) when the opens left it, and the plan's state 1.5 s after.", "",
                "| case | figure | runs | plan status |", "| --- | ---: | --- | --- |"]
        wl = "plan_pause"
        if fig.rows(wl, "pacefs_plan"):
            out.append(f"| paused: bytes from 1 s into the pause to its end | {f(m(wl, 'pacefs_plan', 'paused_bytes'), 1, '%.0f')} | {fig.vals(wl, 'pacefs_plan', 'paused_bytes', 1, '%.0f')} | {_states(fig, wl)}, {g(m(wl, 'pacefs_plan', 'ahead_files'), 1, '%.0f')} files ({g(m(wl, 'pacefs_plan', 'ahead_bytes'), MiB, '%.1f')} MiB) ahead, window {g(m(wl, 'pacefs_plan', 'window'), 1, '%.0f')} files; whole read {g(m(wl, 'pacefs_plan', 'files_per_s'), 1, '%.0f')} files/s outside the pause, pulled / read {g(fig.q(wl, 'pacefs_plan', 'pulled', 'bytes'), 1, '%.3f')} |")
        wl = "plan_abandon"
        if fig.rows(wl, "pacefs_plan"):
            out.append(f"| abandoned: the plan's files pulled beyond those read | {f(m(wl, 'pacefs_plan', 'extra_files'), 1, '%.0f')} files, {g(m(wl, 'pacefs_plan', 'extra_bytes'), MiB, '%.2f')} MiB | {fig.vals(wl, 'pacefs_plan', 'extra_files', 1, '%.0f')} | window {g(m(wl, 'pacefs_plan', 'window'), 1, '%.0f')} files, {g(m(wl, 'pacefs_plan', 'ahead_files'), 1, '%.0f')} ahead when the opens left it; then {_states(fig, wl)}, unread {g(m(wl, 'pacefs_plan', 'unread_files'), 1, '%.0f')} files; pulled / read {g(fig.q(wl, 'pacefs_plan', 'pulled', 'bytes'), 1, '%.3f')} |")
        out.append("")
    return out


def _conns(fig, wl, s):
    """The loader's connections cell, and every connection used."""
    return f"{conns_cell(fig, wl, s)}, {g(fig.med(wl, s, 'conns_used'), 1, '%.0f')}"


def _states(fig, wl):
    return ", ".join(r["values"].get("state", "?") for r in fig.rows(wl, "pacefs_plan") if r["status"] == "ok") or "-"

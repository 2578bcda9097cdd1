"""The mount daemon's memory: one cold sequential read of MEM_SIZE from
loopback nginx, the daemon's peak resident set (VmHWM: anonymous memory
and mapped cache pages alike) and its RSS at the end of the read.
"""
import shutil

from harness import procs
from harness.runner import SYSTEMS
from harness.stats import MiB, f, label, yesno

WINDOW = 64 * MiB  # pacing's window_max, the largest read-ahead window


def gen(b):
    if b.wanted("memory"):
        b.need("mem.bin", b.s["MEM_SIZE"])


def memory(b):
    name = "mem.bin"
    for r in b.run_range():
        for sys_ in SYSTEMS:
            m = b.cold_mount("memory", sys_, r, b.nginx.url, name)
            if not m:
                continue
            line = b.step([b.br, "seq", m.path(name)])
            hwm, rss = procs.proc_kib(m.pid, "VmHWM"), procs.proc_kib(m.pid, "VmRSS")
            b.umount(m)
            # MEM_SIZE of cache a run: the disk back at once
            shutil.rmtree(m.cache, ignore_errors=True)
            b.record("memory", sys_, r, line, f"hwm_kib={hwm} rss_kib={rss}")
            b.show("memory", sys_, r)


WORKLOADS = {"memory": memory}
NOISE = {"memory": "hwm_kib"}


# --- report -----------------------------------------------------------------

def targets(rep):
    MH = {s: rep.fig.med("memory", s, "hwm_kib") for s in SYSTEMS}
    lim = (64 * MiB + WINDOW) // 1024
    return [f"| memory: daemon's peak RSS streaming {rep.s('MEM_SIZE', 0) // MiB} MiB <= 64 MiB + one window ({WINDOW // MiB} MiB) | pacefs {f(MH['pacefs'], 1024, '%.0f')} MiB (rclone {f(MH['rclone'], 1024, '%.0f')}, httpdirfs {f(MH['httpdirfs'], 1024, '%.0f')}) | {yesno('le', MH['pacefs'], lim)} |"]


def sections(rep):
    fig = rep.fig
    m = fig.med
    out = [f"## Memory while streaming (loopback, {rep.s('MEM_SIZE', 0) // MiB} MiB)", "",
           "One cold sequential read of the whole file; the mount daemon's peak resident set (VmHWM: heap, buffers and the pages of its cache files it has mapped) and its RSS at the end of the read, before the unmount.", "",
           "| system | MB/s | peak RSS MiB | runs | RSS at the end, MiB |",
           "| --- | ---: | ---: | --- | ---: |"]
    for s in SYSTEMS:
        out.append(f"| {label(s)} | {f(m('memory', s, 'mbps'), 1, '%.0f')} | {f(m('memory', s, 'hwm_kib'), 1024, '%.0f')} | {fig.vals('memory', s, 'hwm_kib', 1024, '%.0f')} | {f(m('memory', s, 'rss_kib'), 1024, '%.0f')} |")
    out.append("")
    return out


def readme_rows(rep):
    MH = {s: rep.fig.med("memory", s, "hwm_kib") for s in SYSTEMS}
    size = rep.s("MEM_SIZE", 0)
    what = f"{size // 1024 // MiB} GiB" if size % (1024 * MiB) == 0 else f"{size // MiB} MiB"
    return {"memory": f"| peak RSS streaming {what} | {f(MH['pacefs'], 1024, '%.0f')} MiB | {f(MH['rclone'], 1024, '%.0f')} | {f(MH['httpdirfs'], 1024, '%.0f')} | |"}

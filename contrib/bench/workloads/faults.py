"""Origins that misbehave, pacefs only: one allowing a single transfer and
answering 503 + Retry-After beyond it (transfer1, curl as the limit), and
one that sends one byte of every response and then nothing, against
-o read_timeout= (stall).
"""
import os

from harness import limits
from harness.settings import TO_SHORT
from harness.stats import MiB, f, g, label, yesno

T1_FILE = "multi0.bin"  # MULTI_SIZE bytes


def gen(b):
    if b.wanted("transfer1"):
        b.need(T1_FILE, b.s["MULTI_SIZE"])


def transfer1(b):
    """The whole file must come, correct, on loopback."""
    s = b.s
    try:
        o = b.start_origin("transfer1", "--root", b.www, "--quiet", "--max-transfers", "1",
                           "--retry-after", str(s["T1_RETRY_AFTER"]))
    except RuntimeError:
        for r in b.run_range():
            b.record("transfer1", "pacefs", r, "failed: the one-transfer origin did not start")
        return
    try:
        for r in b.run_range():
            mark = o.mark()
            m = b.cold_mount("transfer1", "pacefs", r, o.url, T1_FILE)
            if not m:
                continue
            line = b.step([b.br, "seq", m.path(T1_FILE)], timeout=TO_SHORT)
            b.umount(m)
            n503 = sum(1 for p in o.lines(mark) if len(p) > 3 and p[3] == "503")
            b.record("transfer1", "pacefs", r, line, f"{o.pulled(mark)} n503={n503}")
            b.show("transfer1", "pacefs", r)
            b.record("transfer1", "curl1", r, limits.curl_one(b, f"{o.url}/{T1_FILE}", s["MULTI_SIZE"]))
    finally:
        b.stop_server(o)


def stall(b):
    """The application's read must fail with EIO soon after READ_TIMEOUT."""
    s = b.s
    root = b.path("www-stall")
    os.makedirs(root, exist_ok=True)
    b.gen(os.path.join(root, "stall.bin"), s["STALL_SIZE"])
    try:
        o = b.start_origin("stall", "--root", root, "--quiet", "--fault", "/stall.bin:stall:1")
    except RuntimeError:
        for r in b.run_range():
            b.record("stall", "pacefs", r, "failed: the stalling origin did not start")
        return
    try:
        for r in b.run_range():
            mnt, cache = b.fresh(r, "pacefs")
            try:
                m = b.mount("pacefs", o.url, "stall.bin", mnt, cache,
                            opts=("-o", f"read_timeout={s['READ_TIMEOUT']}"))
            except b.MountError as e:
                b.record("stall", "pacefs", r, f"failed: mount: {e}")
                continue
            line = b.step(b.cl + ["eio", m.path("stall.bin"), str(s["STALL_SIZE"])], timeout=TO_SHORT)
            b.umount(m)
            b.record("stall", "pacefs", r, line)
            b.show("stall", "pacefs", r)
    finally:
        b.stop_server(o)


WORKLOADS = {"transfer1": transfer1, "stall": stall}
NOISE = {"transfer1": "secs", "stall": "secs"}


# --- report -----------------------------------------------------------------

def targets(rep):
    m = rep.fig.med
    S = rep.s
    t1 = m("transfer1", "pacefs", "secs")
    m1 = f"pacefs {f(t1, 1, '%.2f')} s, {g(m('transfer1', 'pacefs', 'n503'), 1, '%.0f')} 503s (curl, one connection: {f(m('transfer1', 'curl1', 'secs'), 1, '%.2f')} s)"
    if isinstance(t1, str) and t1.startswith("skipped:"):
        m1 = "-"
    rt = S("READ_TIMEOUT", 5)
    st = m("stall", "pacefs", "secs")
    return [
        f"| one-transfer origin answering 503 + Retry-After {S('T1_RETRY_AFTER', 1)} s beyond it: {S('MULTI_SIZE') // MiB} MiB whole and correct in <= 2 s on loopback | {m1} | {yesno('le', t1, 2)} |",
        f"| read_timeout={rt} against a one-byte-per-response origin: EIO in the application by {rt + 1} s | pacefs {f(st, 1, '%.2f')} s to EIO | {yesno('le', st, rt + 1)} |",
    ]


def sections(rep):
    fig, S = rep.fig, rep.s
    m = fig.med
    out = ["## One transfer at a time (loopback origin answering 503 + Retry-After)", "",
           f"`pacefs-origin --max-transfers 1 --retry-after {S('T1_RETRY_AFTER', 1)}` (no latency, no rate cap): one transfer at a time, 503 with Retry-After beyond it. pacefs reads the {S('MULTI_SIZE') // MiB} MiB file in full, every byte checked; curl, one connection, is the limit.", "",
           "| system | seconds | runs | MB/s | 503 answers | requests | pulled MiB |",
           "| --- | ---: | --- | ---: | ---: | ---: | ---: |"]
    for s in ("pacefs", "curl1"):
        out.append(f"| {label(s)} | {f(m('transfer1', s, 'secs'), 1, '%.2f')} | {fig.vals('transfer1', s, 'secs', 1, '%.2f')} | {g(m('transfer1', s, 'mbps'), 1, '%.0f')} | {g(m('transfer1', s, 'n503'), 1, '%.0f')} | {g(m('transfer1', s, 'reqs'), 1, '%.0f')} | {g(m('transfer1', s, 'pulled'), MiB, '%.1f')} |")
    out += ["", "## read_timeout against a stalled origin (pacefs only)", "",
            f"pacefs-origin with `--fault '/stall.bin:stall:1'`: every response to a range of more than one byte sends one byte, then nothing, and keeps the connection open (the mount's one-byte probe passes). pacefs is mounted with `-o read_timeout={S('READ_TIMEOUT', 5)}`; the application opens the file and reads; seconds from open() to the EIO.", "",
            "| system | seconds to EIO | runs |", "| --- | ---: | --- |",
            f"| pacefs | {f(m('stall', 'pacefs', 'secs'), 1, '%.2f')} | {fig.vals('stall', 'pacefs', 'secs', 1, '%.2f')} |", ""]
    return out

"""Mounts behind a shared cache tier (nginx proxy_cache + slice) in front of
the WAN origin, pacefs only, chunk = slice = TIER_CHUNK. Each run, with a
new tier: a first mount, then a second (fresh cache) reads the whole file;
the same read straight from loopback nginx (the second's reference); two
mounts together through another empty tier; a two-proxy group one of
whose proxies is killed a quarter into the read; and random 4 KiB reads
from the WAN origin with the default chunk and with TIER_CHUNK.
"""
import os
import subprocess
import time

from harness.settings import TO_STEP
from harness.stats import MiB, awk, f, g9, isnum, mul, num, ratio, yesno


def gen(b):
    if b.wanted("tier"):
        b.need("seq.bin", b.s["SEQ_LO_SIZE"])
        b.need("long.bin", b.s["LONG_SIZE"])


def _seq_through(b, wl, r, base, opts, warm_tier=None):
    """A fresh mount of seq.bin from BASE with OPTS, read cold; the line."""
    name = "seq.bin"
    mnt, cache = b.fresh(r, wl)
    try:
        m = b.mount("pacefs", base, name, mnt, cache, opts=("-o", opts))
    except b.MountError as e:
        return f"failed: mount: {e}"
    b.cold_caches(name)
    if warm_tier:
        # The tier is the origin side, which the harness keeps warm: its
        # cache files, as a busy tier holds them in memory.
        b.read_files(_files(warm_tier))
    line = b.step([b.br, "seq", m.path(name)])
    b.umount(m)
    return line


def _files(top):
    return [os.path.join(d, n) for d, _, ns in os.walk(top) for n in ns]


def _together(b, r, copts, tier):
    """Two mounts read the file at once through one empty tier: the slower
    one's seconds."""
    name = "seq.bin"
    mounts = []
    try:
        for wl in ("tier_c", "tier_d"):
            mnt, cache = b.fresh(r, wl)
            mounts.append(b.mount("pacefs", b.wan.url, name, mnt, cache, opts=("-o", f"{copts},proxy={tier.url}")))
    except b.MountError as e:
        for m in mounts:
            b.umount(m)
        return f"failed: mount: {e}"
    b.cold_caches(name)
    line, _ = b.par(2, lambda k: [b.br, "seq", mounts[k].path(name)], lambda last: last.startswith("ok"))
    if line == "ok":
        secs = 0.0
        for k in range(2):
            with open(b.path(f"par.{k}")) as fp:
                vals = dict(w.split("=", 1) for w in fp.read().split()[1:] if "=" in w)
            secs = max(secs, float(vals.get("secs", 0)))
        line = "ok secs=%.6f" % secs
    for m in reversed(mounts):
        b.umount(m)
    return line


def _kill(b, r, copts):
    """A two-proxy group, one killed a quarter into the read: the reader's
    longest wait (benchread player at an unreachable rate: every read as
    soon as the last one returned)."""
    s = b.s
    name = "seq.bin"
    q1 = b.start_tier("tier_q1")
    q2 = b.start_tier("tier_q2")
    try:
        mnt, cache = b.fresh(r, "tier_kill")
        mark = b.wan.mark()
        try:
            m = b.mount("pacefs", b.wan.url, name, mnt, cache,
                        opts=("-o", f"{copts},stall_timeout={s['TIER_STALL']},proxy={q1.url}|{q2.url}"))
        except b.MountError as e:
            b.record("tier_kill", "pacefs", r, f"failed: mount: {e}")
            return
        b.cold_caches(name)
        mark2 = b.wan.mark()
        out = open(b.path("kill.out"), "w")
        p = b.track.start("steps", [b.br, "player", m.path(name), "100000000000", str(s["SEQ_LO_SIZE"]), str(MiB)],
                          stdout=out, stderr=subprocess.STDOUT)
        out.close()
        sent = 0
        for _ in range(1200):
            sent = b.wan.sent(mark2)[0]
            if sent >= s["SEQ_LO_SIZE"] // 4 or p.poll() is not None:
                break
            time.sleep(0.05)
        b.stop_server(q1, kill=True)
        try:
            p.wait(timeout=TO_STEP)
            with open(b.path("kill.out")) as fp:
                lines = fp.read().splitlines()
            line = lines[-1] if lines else "failed: no output"
        except subprocess.TimeoutExpired:
            from harness import procs
            procs.stop(p)
            line = "failed: timed out"
        b.track.forget("steps", p)
        b.umount(m)
        b.record("tier_kill", "pacefs", r, line, f"killed_at={sent} {b.wan.pulled(mark)}")
        b.show("tier_kill", "pacefs", r)
    finally:
        b.stop_server(q2)
        if q1.proc.poll() is None:
            b.stop_server(q1)


def tier(b):
    s = b.s
    copts = f"chunk={s['TIER_CHUNK'] // 1024}K"
    for r in b.run_range():
        t = b.start_tier("tier")
        for wl in ("tier_first", "tier_second"):
            mark = b.wan.mark()
            line = _seq_through(b, wl, r, b.wan.url, f"{copts},proxy={t.url}", warm_tier=b.path("tier", "cache"))
            b.record(wl, "pacefs", r, line, b.wan.pulled(mark))
            b.show(wl, "pacefs", r)
        b.stop_server(t)
        line = _seq_through(b, "tier_direct", r, b.nginx.url, copts)
        b.record("tier_direct", "pacefs", r, line)
        b.show("tier_direct", "pacefs", r)

        t = b.start_tier("tier")
        mark = b.wan.mark()
        line = _together(b, r, copts, t)
        b.record("tier_together", "pacefs", r, line, b.wan.pulled(mark))
        b.show("tier_together", "pacefs", r)
        b.stop_server(t)

        _kill(b, r, copts)

        # Random 4 KiB reads straight from the WAN origin: the default chunk
        # (one cache block) and TIER_CHUNK.
        for wl, opts in (("tier_rand_64k", ()), (f"tier_rand_{s['TIER_CHUNK'] // 1024}k", ("-o", copts))):
            mnt, cache = b.fresh(r, wl)
            mark = b.wan.mark()
            try:
                m = b.mount("pacefs", b.wan.url, "long.bin", mnt, cache, opts=opts)
            except b.MountError as e:
                b.record(wl, "pacefs", r, f"failed: mount: {e}")
                continue
            b.cold_caches("long.bin")
            line = b.step([b.br, "random", m.path("long.bin"), str(s["RANDOM_N_WAN"]), str(r)])
            b.umount(m)
            b.record(wl, "pacefs", r, line, b.wan.pulled(mark))
            b.show(wl, "pacefs", r)


WORKLOADS = {"tier": tier}


# --- report -----------------------------------------------------------------

def _chunk_label(c):
    k = int(c.rstrip("k"))
    return f"{k // 1024} MiB" if k % 1024 == 0 else f"{k} KiB"


def targets(rep):
    fig, S = rep.fig, rep.s
    m = fig.med
    if m("tier_first", "pacefs", "mbps") == "-":
        return []
    tc = S("TIER_CHUNK", MiB)
    lim = awk(1.05 * S("SEQ_LO_SIZE"))
    p1, p2 = m("tier_first", "pacefs", "pulled"), m("tier_second", "pacefs", "pulled")
    t12 = awk(num(p1) + num(p2)) if isnum(p2) else p2
    tr = fig.ratio_wl("tier_second", "tier_direct", "pacefs", "mbps")
    a = fig.vals("tier_second", "pacefs", "mbps", 1, "%.9g").replace(" ", "").split(",")
    d = fig.vals("tier_direct", "pacefs", "mbps", 1, "%.9g").replace(" ", "").split(",")
    runs = ", ".join("%.2fx" % (float(x) / float(y)) for x, y in zip(a, d)
                     if isnum(x) and isnum(y) and float(y) > 0)
    rows = [
        f"| cache tier: two mounts one after the other pull each byte from the origin at most once (<= 1.05 x {S('SEQ_LO_SIZE') // MiB} MiB) | {f(p1, MiB, '%.1f')} + {f(p2, MiB, '%.1f')} MiB | {yesno('le', t12, lim)} |",
        f"| cache tier: two mounts together through an empty tier, the same | {f(m('tier_together', 'pacefs', 'pulled'), MiB, '%.1f')} MiB | {yesno('le', m('tier_together', 'pacefs', 'pulled'), lim)} |",
        f"| cache tier: the second mount's cold read >= 0.8x its read straight from loopback nginx (median of the runs' ratios) | {f(m('tier_second', 'pacefs', 'mbps'), 1, '%.0f')} MB/s vs {f(m('tier_direct', 'pacefs', 'mbps'), 1, '%.0f')} MB/s (medians); ratios {runs}: median {f(tr, 1, '%.2f')}x | {yesno('ge', tr, 0.8)} |",
    ]
    for c in ("64k", f"{tc // 1024}k"):
        p = m(f"tier_rand_{c}", "pacefs", "pulled")
        n = m(f"tier_rand_{c}", "pacefs", "reads")
        per = (g9(float(p) / float(n)) if isnum(n) and float(n) > 0 else "n/a") if isnum(p) else p
        rows.append(f"| random 4 KiB, WAN, chunk={_chunk_label(c)}: bytes pulled per read <= one chunk | {f(per, 1024, '%.1f')} KiB per read | {yesno('le', per, int(c.rstrip('k')) * 1024)} |")
    # The default chunk against the random workload's pacefs row of the same
    # run (the same mount as before chunks existed): a chunk-aligned
    # scheduler must not cost random reads.
    p95, r95 = m("tier_rand_64k", "pacefs", "p95"), m("random_wan", "pacefs", "p95")
    verdict = yesno("le", p95, mul(r95, 1.2)) if r95 != "-" else "not judged (the random workload was not run)"
    rows.append(f"| random 4 KiB, WAN, chunk mode (the default chunk, 64 KiB): p95 <= 1.2x the random workload's | {f(p95, 0.001, '%.1f')} ms vs {f(r95, 0.001, '%.1f')} ms: {ratio(p95, r95)} | {verdict} |")
    rows.append(f"| cache tier: one proxy of a two-proxy group killed a quarter into the read: right bytes, no wait >= stall_timeout ({S('TIER_STALL', 10)} s) | longest read {f(m('tier_kill', 'pacefs', 'worst'), 0.001, '%.0f')} ms, {f(m('tier_kill', 'pacefs', 'pulled'), MiB, '%.1f')} MiB from the origin | {yesno('le', m('tier_kill', 'pacefs', 'worst'), S('TIER_STALL', 10))} |")
    return rows


def sections(rep):
    fig, S = rep.fig, rep.s
    m = fig.med
    if m("tier_first", "pacefs", "mbps") == "-":
        return []
    tc = S("TIER_CHUNK", MiB)
    v = lambda wl, k, sc, fmt: fig.vals(wl, "pacefs", k, sc, fmt)
    out = ["## A shared cache tier (WAN origin behind nginx proxy_cache + slice)", "",
           f"pacefs only, -o chunk={tc // MiB}M,proxy=TIER: nginx on loopback as a forward caching proxy (slice {tc // MiB}m, proxy_cache_lock on: the configuration of docs/deploy.md) in front of the WAN origin, a new tier with an empty cache for each part. Mounts have caches of their own, like machines of a fleet. MB/s from open to the last verified byte of the {S('SEQ_LO_SIZE') // MiB} MiB file; pulled = bytes the WAN origin sent.", "",
           "| step | MB/s | runs | pulled from the origin, MiB |", "| --- | ---: | --- | ---: |",
           f"| first mount (the tier fills) | {f(m('tier_first', 'pacefs', 'mbps'), 1, '%.1f')} | {v('tier_first', 'mbps', 1, '%.1f')} | {f(m('tier_first', 'pacefs', 'pulled'), MiB, '%.1f')} |",
           f"| second mount (the tier's copy) | {f(m('tier_second', 'pacefs', 'mbps'), 1, '%.1f')} | {v('tier_second', 'mbps', 1, '%.1f')} | {f(m('tier_second', 'pacefs', 'pulled'), MiB, '%.1f')} |",
           f"| the same straight from loopback nginx (reference) | {f(m('tier_direct', 'pacefs', 'mbps'), 1, '%.1f')} | {v('tier_direct', 'mbps', 1, '%.1f')} | |",
           f"| two mounts together, empty tier: seconds of the slower | {f(m('tier_together', 'pacefs', 'secs'), 1, '%.2f')} s | {v('tier_together', 'secs', 1, '%.2f')} | {f(m('tier_together', 'pacefs', 'pulled'), MiB, '%.1f')} |",
           f"| two-proxy group, one killed a quarter in: seconds, longest read | {f(m('tier_kill', 'pacefs', 'secs'), 1, '%.2f')} s, {f(m('tier_kill', 'pacefs', 'worst'), 0.001, '%.0f')} ms | {v('tier_kill', 'worst', 0.001, '%.0f')} ms | {f(m('tier_kill', 'pacefs', 'pulled'), MiB, '%.1f')} |",
           "", f"Random 4 KiB reads ({S('RANDOM_N_WAN')}, WAN origin, no tier) with the default chunk and with {tc // MiB} MiB: a random read pulls one chunk, so a large chunk costs each random read its transfer; the default stays one cache block.", "",
           "| chunk | p50 ms | p95 ms | runs (p95) | pulled MiB | per read KiB |", "| --- | ---: | ---: | --- | ---: | ---: |"]
    for c in ("64k", f"{tc // 1024}k"):
        wl = f"tier_rand_{c}"
        p = m(wl, "pacefs", "pulled")
        per = awk(num(p) / S("RANDOM_N_WAN"))
        out.append(f"| {_chunk_label(c)} | {f(m(wl, 'pacefs', 'p50'), 0.001, '%.1f')} | {f(m(wl, 'pacefs', 'p95'), 0.001, '%.1f')} | {v(wl, 'p95', 0.001, '%.1f')} | {f(p, MiB, '%.1f')} | {f(per, 1024, '%.1f')} |")
    out.append("")
    return out

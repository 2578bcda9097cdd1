"""Latency of a cold file: the first 4 KiB (ttfb) and random 4 KiB
reads (random), on both origins; curl's range requests as the limit.
"""
from harness import limits
from harness.runner import SYSTEMS
from harness.stats import MiB, f, label, minnum, mul, ratio, yesno


def gen(b):
    if b.wanted("ttfb"):
        b.need("seq.bin", b.s["SEQ_LO_SIZE"])
        b.need("wan.bin", b.s["SEQ_WAN_SIZE"])
    if b.wanted("random"):
        b.need("long.bin", b.s["LONG_SIZE"])


def ttfb(b):
    """Open + the first 4 KiB of a cold file, on both origins."""
    for r in b.run_range():
        for wl, o, name in (("ttfb_lo", b.nginx, "seq.bin"), ("ttfb_wan", b.wan, "wan.bin")):
            for sys_ in SYSTEMS:
                m = b.cold_mount(wl, sys_, r, o.url, name)
                if not m:
                    continue
                line = b.step([b.br, "first", m.path(name)])
                b.umount(m)
                b.record(wl, sys_, r, line)
            b.record(wl, "curl1", r, limits.curl_first(b, f"{o.url}/{name}"))
            b.show_all(r, SYSTEMS + ("curl1",), (wl,))


def random_(b):
    """Random 4 KiB reads: loopback (RANDOM_N_LO reads) and WAN (RANDOM_N_WAN)."""
    name = "long.bin"
    for r in b.run_range():
        for wl, o, n in (("random_lo", b.nginx, b.s["RANDOM_N_LO"]),
                         ("random_wan", b.wan, b.s["RANDOM_N_WAN"])):
            for sys_ in SYSTEMS:
                mark = o.mark()
                m = b.cold_mount(wl, sys_, r, o.url, name)
                if not m:
                    continue
                line = b.step([b.br, "random", m.path(name), str(n), str(r)])
                b.umount(m)
                b.record(wl, sys_, r, line, o.pulled(mark))
                b.show(wl, sys_, r)
            b.record(wl, "curl1", r, limits.curl_random(b, f"{o.url}/{name}", b.s["LONG_SIZE"], n, r),
                     f"pulled={n * 4096}")


WORKLOADS = {"ttfb": ttfb, "random": random_}
NOISE = {"ttfb_lo": "secs", "ttfb_wan": "secs", "random_lo": "p95", "random_wan": "p95"}


# --- report -----------------------------------------------------------------

def _figs(rep):
    m = rep.fig.med
    sy = ("pacefs", "rclone", "httpdirfs", "curl1")
    T = {o: {s: m(f"ttfb_{o}", s, "secs") for s in sy} for o in ("lo", "wan")}
    R = {o: {k: {s: m(f"random_{o}", s, k) for s in sy} for k in ("p50", "p95", "pulled")}
         for o in ("lo", "wan")}
    return T, R


def plots(rep):
    T, R = _figs(rep)
    rows = []
    for s in ("pacefs", "rclone", "httpdirfs", "curl1"):
        row = f'"{s}"'
        for x in (R["lo"]["p50"][s], R["lo"]["p95"][s], R["wan"]["p50"][s], R["wan"]["p95"][s],
                  T["lo"][s], T["wan"][s]):
            row += " %.4f" % (float(x) * 1000) if rep.isnum(x) else " NaN"
        rows.append(row)
    dat = rep.data("\n".join(rows) + "\n")
    return [("latency", "1000,420", f"""set multiplot layout 1,2 title "Latency, ms, log scale (median of {rep.runs} runs; missing bar = failed)"
{rep.LOG_BARS}
set key top left
set title "random 4 KiB reads (p50, p95) and first byte, loopback"
plot "{dat}" using 2:xtic(1) title "p50", '' using 3 title "p95", '' using 6 title "first 4 KiB"
set title "the same on the WAN origin"
plot "{dat}" using 4:xtic(1) title "p50", '' using 5 title "p95", '' using 7 title "first 4 KiB"
unset multiplot
""")]


def targets(rep):
    T, R = _figs(rep)
    TL, TW = T["lo"], T["wan"]
    rows = [
        f"| first byte, loopback: <= 1.3x one curl range request | pacefs {f(TL['pacefs'], 0.001, '%.2f')} ms vs curl {f(TL['curl1'], 0.001, '%.2f')} ms: {ratio(TL['pacefs'], TL['curl1'])} | {yesno('le', TL['pacefs'], mul(TL['curl1'], 1.3))} |",
        f"| first byte, WAN: <= 1.3x one curl range request | pacefs {f(TW['pacefs'], 0.001, '%.1f')} ms vs curl {f(TW['curl1'], 0.001, '%.1f')} ms: {ratio(TW['pacefs'], TW['curl1'])} | {yesno('le', TW['pacefs'], mul(TW['curl1'], 1.3))} |",
    ]
    for o in ("lo", "wan"):
        p95, c95, pp = R[o]["p95"]["pacefs"], R[o]["p95"]["curl1"], R[o]["pulled"]["pacefs"]
        bc = minnum(R[o]["pulled"]["rclone"], R[o]["pulled"]["httpdirfs"])
        on = "loopback" if o == "lo" else "WAN"
        rows.append(f"| random 4 KiB, {on}: p95 <= 2x one curl range request | pacefs {f(p95, 0.001, '%.2f')} ms vs curl {f(c95, 0.001, '%.2f')} ms: {ratio(p95, c95)} | {yesno('le', p95, mul(c95, 2))} |")
        rows.append(f"| random 4 KiB, {on}: bytes pulled <= 1/4 of the best competitor's | pacefs {f(pp, MiB, '%.2f')} MiB vs {f(bc, MiB, '%.2f')} MiB: {ratio(pp, bc)} | {yesno('le', pp, mul(bc, 0.25))} |")
    return rows


def headline(rep):
    T, R = _figs(rep)
    TL, TW = T["lo"], T["wan"]
    R95, RP = R["wan"]["p95"], R["wan"]["pulled"]
    return [
        f"- First byte of a cold file: pacefs {f(TL['pacefs'], 0.001, '%.2f')} ms on loopback ({ratio(TL['pacefs'], TL['curl1'])} one curl range request), {f(TW['pacefs'], 0.001, '%.1f')} ms on WAN ({ratio(TW['pacefs'], TW['curl1'])}).",
        f"- Random 4 KiB on WAN: pacefs p95 {f(R95['pacefs'], 0.001, '%.1f')} ms vs rclone {f(R95['rclone'], 0.001, '%.1f')} ms and httpdirfs {f(R95['httpdirfs'], 0.001, '%.1f')} ms, pulling {f(RP['pacefs'], MiB, '%.1f')} MiB vs {f(RP['rclone'], MiB, '%.1f')} and {f(RP['httpdirfs'], MiB, '%.1f')} MiB.",
    ]


def sections(rep):
    T, R = _figs(rep)
    fig, S = rep.fig, rep.s
    first = lambda s: label(s).replace("one connection (limit)", "one range request (limit)")
    out = ["## Time to first byte of a cold file", "",
           "Milliseconds from open() to the end of the first 4 KiB read on a fresh mount with an empty cache; curl: one range request of 4 KiB, a fresh process and connection.", "",
           "| system | loopback ms | runs | pacefs is | WAN ms | runs | pacefs is |",
           "| --- | ---: | --- | ---: | ---: | --- | ---: |"]
    for s in ("pacefs", "rclone", "httpdirfs", "curl1"):
        out.append(f"| {first(s)} | {f(T['lo'][s], 0.001, '%.2f')} | {fig.vals('ttfb_lo', s, 'secs', 0.001, '%.2f')} | {ratio(T['lo']['pacefs'], T['lo'][s])} | {f(T['wan'][s], 0.001, '%.1f')} | {fig.vals('ttfb_wan', s, 'secs', 0.001, '%.1f')} | {ratio(T['wan']['pacefs'], T['wan'][s])} |")
    out += ["", "## Random 4 KiB reads", "",
            f"{S('RANDOM_N_LO')} (loopback) and {S('RANDOM_N_WAN')} (WAN) reads at seeded 4 KiB-aligned offsets of the {S('LONG_SIZE') // MiB} MiB file, the file opened first (untimed); latency per read. curl: the same number of 4 KiB range requests over one keep-alive connection.", "",
            "| system | origin | p50 ms | p95 ms | p95 runs | pulled MiB | requests | pacefs p95 is | pacefs pulled is |",
            "| --- | --- | ---: | ---: | --- | ---: | ---: | ---: | ---: |"]
    rnd = lambda s: label(s).replace("one connection (limit)", "4 KiB range requests (limit)")
    for o in ("lo", "wan"):
        x = R[o]
        for s in ("pacefs", "rclone", "httpdirfs", "curl1"):
            out.append(f"| {rnd(s)} | {'loopback' if o == 'lo' else 'WAN'} | {f(x['p50'][s], 0.001, '%.2f')} | {f(x['p95'][s], 0.001, '%.2f')} | {fig.vals('random_' + o, s, 'p95', 0.001, '%.2f')} | {f(x['pulled'][s], MiB, '%.2f')} | {f(fig.med('random_' + o, s, 'reqs'), 1, '%.0f')} | {ratio(x['p95']['pacefs'], x['p95'][s])} | {ratio(x['pulled']['pacefs'], x['pulled'][s])} |")
    out.append("")
    return out


def readme_rows(rep):
    T, R = _figs(rep)
    TL, TW = T["lo"], T["wan"]
    R95, RP = R["wan"]["p95"], R["wan"]["pulled"]
    return {
        "ttfb": f"| first byte of a cold file, loopback / WAN | {f(TL['pacefs'], 0.001, '%.2f')} / {f(TW['pacefs'], 0.001, '%.1f')} ms | {f(TL['rclone'], 0.001, '%.1f')} / {f(TW['rclone'], 0.001, '%.1f')} | {f(TL['httpdirfs'], 0.001, '%.0f')} / {f(TW['httpdirfs'], 0.001, '%.0f')} | {f(TL['curl1'], 0.001, '%.2f')} / {f(TW['curl1'], 0.001, '%.1f')} |",
        "random_wan": f"| random 4 KiB reads, WAN: p95 / pulled | {f(R95['pacefs'], 0.001, '%.1f')} ms / {f(RP['pacefs'], MiB, '%.1f')} MiB | {f(R95['rclone'], 0.001, '%.0f')} ms / {f(RP['rclone'], MiB, '%.0f')} MiB | {f(R95['httpdirfs'], 0.001, '%.0f')} ms / {f(RP['httpdirfs'], MiB, '%.0f')} MiB | {f(R95['curl1'], 0.001, '%.1f')} ms |",
    }

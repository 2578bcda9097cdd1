"""Readers that move through a file at their own pace on the WAN origin: a
player consuming at a fixed rate (player, player2), a playback that seeks
(seek, within player; seek1m with a 1 MiB first read at each new
position), and a new reader's 1 MiB preads at three cold positions
(positions).
"""
from harness.runner import SYSTEMS
from harness.stats import MiB, awk, f, g, label, minnum, mul, ratio, sub, yesno


def gen(b):
    if b.wanted("player") or b.wanted("player2"):
        b.need("seq.bin", b.s["SEQ_LO_SIZE"])
    if b.wanted("player") or b.wanted("seek1m") or b.wanted("positions"):
        b.need("long.bin", b.s["LONG_SIZE"])


def _one(b, wl, sys_, r, name, args):
    """A fresh cold mount of NAME on the WAN origin, benchread ARGS on it
    (@@ its path); pulled is counted from mount to unmount."""
    mark = b.wan.mark()
    m = b.cold_mount(wl, sys_, r, b.wan.url, name)
    if not m:
        return
    line = b.step([b.br] + [m.path(name) if a == "@@" else str(a) for a in args])
    b.umount(m)
    b.record(wl, sys_, r, line, b.wan.pulled(mark))
    b.show(wl, sys_, r)


def _player(b, wl, sys_, r, rate, nbytes):
    # at most a quarter of the largest file, so that read-ahead beyond what
    # it needs shows in the bytes pulled
    _one(b, wl, sys_, r, "seq.bin", ["player", "@@", rate, nbytes, b.s["PLAYER_BS"]])


def _seek(b, wl, sys_, r, jump):
    s = b.s
    _one(b, wl, sys_, r, "long.bin", ["seek", "@@", s["PLAYER_RATE"], s["SEEK_N"], s["SEEK_PLAY"],
                                      s["PLAYER_BS"], r, jump])


def player(b):
    """The player at PLAYER_RATE, then a playback that seeks (PLAYER_BS reads)."""
    for r in b.run_range():
        for sys_ in SYSTEMS:
            _player(b, "player", sys_, r, b.s["PLAYER_RATE"], b.s["PLAYER_BYTES"])
            _seek(b, "seek", sys_, r, b.s["PLAYER_BS"])


def player2(b):
    for r in b.run_range():
        for sys_ in SYSTEMS:
            _player(b, "player2", sys_, r, b.s["PLAYER2_RATE"], b.s["PLAYER2_BYTES"])


def seek1m(b):
    """Seeks whose first read at each new position is SEEK_JUMP (1 MiB)."""
    for r in b.run_range():
        for sys_ in SYSTEMS:
            _seek(b, "seek1m", sys_, r, b.s["SEEK_JUMP"])


def positions(b):
    """A new reader opens the file of a fresh mount and reads 1 MiB at 70 %,
    20 % and 90 % of it, one pread each; the slowest read is the figure."""
    for r in b.run_range():
        for sys_ in SYSTEMS:
            _one(b, "positions", sys_, r, "long.bin", ["positions", "@@"])


WORKLOADS = {"positions": positions, "player": player, "player2": player2, "seek1m": seek1m}
NOISE = {"player": "worst", "seek": "p50", "player2": "worst", "seek1m": "p50",
         "positions": "worst"}


# --- report -----------------------------------------------------------------

def lanes_bound(rep, nbytes):
    """Seconds a read of NBYTES at a cold position on the WAN origin may
    take: 2 x (RTT + NBYTES over the lanes' combined rate)."""
    return awk(2 * (rep.rtt() + nbytes / (rep.s("LANES", 8) * rep.s("WAN_RATE"))))


def plots(rep):
    m = rep.fig.med
    rows = []
    for s in SYSTEMS:
        row = f'"{s}"'
        for wl in ("random_lo", "random_wan", "player", "player2", "seek"):
            x = m(wl, s, "pulled")
            row += " %.3f" % (float(x) / MiB) if rep.isnum(x) else " NaN"
        rows.append(row)
    dat = rep.data("\n".join(rows) + "\n")
    S = rep.s
    nl, nw = S("RANDOM_N_LO"), S("RANDOM_N_WAN")
    return [("pulled", "1000,420", f"""set title "MiB pulled from the origin, mount to unmount (median of {rep.runs} runs; missing bar = failed)"
{rep.LOG_BARS}
set key top left
plot "{dat}" using 2:xtic(1) title "random 4 KiB, loopback ({nl} reads = {nl * 4 / 1024:.2f} MiB)", \\
	'' using 3 title "random 4 KiB, WAN ({nw} reads = {nw * 4 / 1024:.2f} MiB)", \\
	'' using 4 title "player at {S('PLAYER_RATE')} B/s ({S('PLAYER_BYTES') // MiB} MiB consumed)", \\
	'' using 5 title "player at {S('PLAYER2_RATE', 0)} B/s ({S('PLAYER2_BYTES', 0) // MiB} MiB consumed)", \\
	'' using 6 title "seeks ({(S('SEEK_N') + 1) * S('SEEK_PLAY') // MiB} MiB consumed)"
""")]


def targets(rep):
    m = rep.fig.med
    S = rep.s
    own = S("PLAYER_BS") / S("WAN_RATE")
    lim_wait = awk(rep.rtt() + awk(own))
    rows = []
    for wl, rate in (("player", S("PLAYER_RATE", 0)), ("player2", S("PLAYER2_RATE", 0))):
        pp, pc, pw = m(wl, "pacefs", "pulled"), m(wl, "pacefs", "consumed"), m(wl, "pacefs", "worst")
        lead = S("PLAYER_LEAD", 3)
        lim = awk(max(lead * rate, 4 * MiB))
        mbs = awk(rate / 1e6)
        rows.append(f"| player at {mbs} MB/s: pulled - consumed <= max(4 MiB, lead x rate) = {f(lim, MiB, '%.1f')} MiB (lead {lead} s), mount to unmount | pulled {f(pp, MiB, '%.1f')} MiB for {f(pc, MiB, '%.1f')} MiB consumed: {f(sub(pp, pc), MiB, '%.1f')} MiB ahead | {yesno('le', sub(pp, pc), lim)} |")
        rows.append(f"| player at {mbs} MB/s: worst wait after the first read <= one round trip + the read's own transfer ({f(lim_wait, 0.001, '%.1f')} ms: {S('WAN_LATENCY')} ms + {S('PLAYER_BS') // 1024} KiB at {S('WAN_RATE')} B/s) | {f(pw, 0.001, '%.1f')} ms | {yesno('le', pw, lim_wait)} |")
    SK = {s: m("seek", s, "p50") for s in SYSTEMS}
    S1 = {s: m("seek1m", s, "p50") for s in SYSTEMS}
    bs = minnum(SK["rclone"], SK["httpdirfs"])
    rows.append(f"| seek: first read at the new position <= 1/3 of the best competitor's | pacefs {f(SK['pacefs'], 0.001, '%.1f')} ms vs {f(bs, 0.001, '%.1f')} ms: {ratio(SK['pacefs'], bs)} | {yesno('le', SK['pacefs'], mul(bs, awk(1 / 3)))} |")
    jump = S("SEEK_JUMP", 0)
    lim = lanes_bound(rep, jump)
    lanes = S("LANES", 8)
    rows.append(f"| {jump // 1024} KiB read at a new position during playback (p50) <= 2 x (RTT + {jump // 1024} KiB / ({lanes} lanes x {S('WAN_RATE')} B/s)) = {f(lim, 0.001, '%.1f')} ms | pacefs {f(S1['pacefs'], 0.001, '%.1f')} ms (max {f(m('seek1m', 'pacefs', 'max'), 0.001, '%.1f')} ms; rclone {f(S1['rclone'], 0.001, '%.1f')}, httpdirfs {f(S1['httpdirfs'], 0.001, '%.1f')}) | {yesno('le', S1['pacefs'], lim)} |")
    PO = {s: m("positions", s, "worst") for s in SYSTEMS}
    bs = minnum(PO["rclone"], PO["httpdirfs"])
    lim = lanes_bound(rep, MiB)
    rows += [
        f"| a new reader's 1 MiB pread at three cold positions (the slowest): <= 1/3 of the best competitor's | pacefs {f(PO['pacefs'], 0.001, '%.1f')} ms vs {f(bs, 0.001, '%.1f')} ms: {ratio(PO['pacefs'], bs)} | {yesno('le', PO['pacefs'], mul(bs, awk(1 / 3)))} |",
        f"| a new reader's 1 MiB pread at three cold positions (the slowest): <= 2 x (RTT + 1024 KiB / ({lanes} lanes x {S('WAN_RATE')} B/s)) = {f(lim, 0.001, '%.1f')} ms | pacefs {f(PO['pacefs'], 0.001, '%.1f')} ms | {yesno('le', PO['pacefs'], lim)} |",
    ]
    return rows


def sections(rep):
    fig, S = rep.fig, rep.s
    m = fig.med
    out = ["## Player at a fixed rate (WAN origin)", "",
           f"Reads the start of the {S('SEQ_LO_SIZE') // MiB} MiB file in {S('PLAYER_BS') // 1024} KiB reads at a fixed rate (a late read is not made up for): {S('PLAYER_BYTES') // MiB} MiB at {S('PLAYER_RATE')} bytes/s and {S('PLAYER2_BYTES', 0) // MiB} MiB at {S('PLAYER2_RATE', 0)} bytes/s; then closes, and the mount is unmounted right after. Pulled: mount to unmount.", "",
           "| rate B/s | system | consumed MiB | pulled MiB | pulled runs | pulled - consumed MiB | first read ms | worst wait after the first, ms | worst-wait runs | time stalled s |",
           "| ---: | --- | ---: | ---: | --- | ---: | ---: | ---: | --- | ---: |"]
    for wl, rate in (("player", S("PLAYER_RATE")), ("player2", S("PLAYER2_RATE", 0))):
        for s in SYSTEMS:
            pc, pp = m(wl, s, "consumed"), m(wl, s, "pulled")
            out.append(f"| {rate} | {label(s)} | {f(pc, MiB, '%.0f')} | {g(pp, MiB, '%.1f')} | {fig.vals(wl, s, 'pulled', MiB, '%.1f')} | {g(sub(pp, pc), MiB, '%.1f')} | {g(m(wl, s, 'first'), 0.001, '%.1f')} | {g(m(wl, s, 'worst'), 0.001, '%.1f')} | {fig.vals(wl, s, 'worst', 0.001, '%.1f')} | {g(m(wl, s, 'stalled'), 1, '%.2f')} |")
    out += ["", "## Seeks during playback (WAN origin)", "",
            f"Plays {S('SEEK_PLAY') // MiB} MiB at {S('PLAYER_RATE')} bytes/s, then {S('SEEK_N')} times jumps to a seeded position and plays {S('SEEK_PLAY') // MiB} MiB there; latency of the first read at each new position (p50 and max within a run; medians over runs): {S('PLAYER_BS') // 1024} KiB in one run (seek), {S('SEEK_JUMP', 0) // 1024} KiB in another (seek1m), the player's reads being {S('PLAYER_BS') // 1024} KiB otherwise.", "",
            "| first read | system | seek p50 ms | p50 runs | seek max ms | worst wait while playing after a seek, ms | pulled MiB | pacefs p50 is |",
            "| ---: | --- | ---: | --- | ---: | ---: | ---: | ---: |"]
    for wl, jb in (("seek", S("PLAYER_BS")), ("seek1m", S("SEEK_JUMP", 0))):
        for s in SYSTEMS:
            out.append(f"| {jb // 1024} KiB | {label(s)} | {f(m(wl, s, 'p50'), 0.001, '%.1f')} | {fig.vals(wl, s, 'p50', 0.001, '%.1f')} | {g(m(wl, s, 'max'), 0.001, '%.1f')} | {g(m(wl, s, 'worst_after'), 0.001, '%.1f')} | {g(m(wl, s, 'pulled'), MiB, '%.1f')} | {ratio(m(wl, 'pacefs', 'p50'), m(wl, s, 'p50'))} |")
    out += ["", "## A new reader at three cold positions (WAN origin)", "",
            "A process opens the 128 MiB file of a fresh mount (untimed) and reads 1 MiB at 70 %, 20 % and 90 % of it, one `pread` each, every byte checked; the kernel hands each read to the filesystem in readahead-sized pieces. Seconds of each read (medians over runs) and the slowest, which is the figure.", "",
            "| system | at 70 %, ms | at 20 %, ms | at 90 %, ms | slowest, ms | slowest runs | pulled MiB | pacefs is |",
            "| --- | ---: | ---: | ---: | ---: | --- | ---: | ---: |"]
    for s in SYSTEMS:
        out.append(f"| {label(s)} | {g(m('positions', s, 'at70'), 0.001, '%.1f')} | {g(m('positions', s, 'at20'), 0.001, '%.1f')} | {g(m('positions', s, 'at90'), 0.001, '%.1f')} | {f(m('positions', s, 'worst'), 0.001, '%.1f')} | {fig.vals('positions', s, 'worst', 0.001, '%.1f')} | {g(m('positions', s, 'pulled'), MiB, '%.1f')} | {ratio(m('positions', 'pacefs', 'worst'), m('positions', s, 'worst'))} |")
    out.append("")
    return out


def readme_rows(rep):
    m = rep.fig.med
    S1 = {s: m("seek1m", s, "p50") for s in SYSTEMS}
    pp, pc = m("player", "pacefs", "pulled"), m("player", "pacefs", "consumed")
    return {
        "seek1m": f"| {rep.s('SEEK_JUMP', 0) // MiB} MiB read at a new position during playback, WAN | {f(S1['pacefs'], 0.001, '%.1f')} ms | {f(S1['rclone'], 0.001, '%.0f')} | {f(S1['httpdirfs'], 0.001, '%.0f')} | |",
        "player": f"| player at {awk(rep.s('PLAYER_RATE') / 1e6)} MB/s: pulled past what it consumed | {f(sub(pp, pc), MiB, '%.1f')} MiB | | | |",
    }

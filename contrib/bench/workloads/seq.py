"""Sequential reads: cold on loopback nginx, then in the same mount the warm
re-read, then a remount over the same cache read in full (seq_lo); cold
from the WAN-like origin (seq_wan), from a WAN origin with small send
buffers (seq_wan_smallbuf) and from a near origin (seq_near: a round trip
of 2 ms, a loose cap); curl and dd as the limits.
"""
from harness import limits
from harness.runner import SYSTEMS
from harness.stats import MiB, f, g, label, maxnum, mul, ratio, yesno


def gen(b):
    if b.wanted("seq_lo"):
        b.need("seq.bin", b.s["SEQ_LO_SIZE"])
    if b.wanted("seq_wan"):
        b.need("wan.bin", b.s["SEQ_WAN_SIZE"])
    if b.wanted("seq_wan_smallbuf"):
        b.need("smallbuf.bin", b.s["SMALLBUF_SIZE"])
    if b.wanted("seq_near"):
        b.need("near.bin", b.s["SEQ_NEAR_SIZE"])


def seq_lo(b):
    """Cold sequential on loopback nginx, the warm re-read in the same mount,
    then a remount over the same cache (page cache dropped) read in full."""
    name, ng, size = "seq.bin", b.nginx, b.s["SEQ_LO_SIZE"]
    for r in b.run_range():
        for sys_ in SYSTEMS:
            mnt, cache = b.fresh(r, sys_)
            mark = ng.mark()
            try:
                m = b.mount(sys_, ng.url, name, mnt, cache)
            except b.MountError as e:
                for wl in ("seq_lo", "warm", "remount"):
                    b.record(wl, sys_, r, f"failed: mount: {e}")
                continue
            b.cold_caches(name)
            mark2 = ng.mark()
            line = b.step([b.br, "seq", m.path(name)])
            b.record("seq_lo", sys_, r, line, ng.pulled(mark2))
            mark2 = ng.mark()
            line = b.step([b.br, "seq", m.path(name)])
            b.record("warm", sys_, r, line, ng.pulled(mark2))
            b.umount(m)
            b.cold_caches(name)
            mark = ng.mark()
            try:
                m = b.mount(sys_, ng.url, name, mnt, cache)
            except b.MountError as e:
                b.record("remount", sys_, r, f"failed: remount: {e}")
                continue
            mark2 = ng.mark()
            line = b.step([b.br, "seq", m.path(name)])
            during, reqs = ng.sent(mark2)
            b.umount(m)
            # pulled: mount to unmount; read_pulled: during the read only
            b.record("remount", sys_, r, line,
                     f"{ng.pulled(mark)} read_pulled={during} read_reqs={reqs}")
            if sys_ == "pacefs":
                # what the read back is held to: the cache file itself, read
                # by dd from a dropped page cache
                b.record("remount", "dd", r, limits.dd_mdb(b, cache))
            b.show_all(r, sys_, ("seq_lo", "warm", "remount"))
        b.cold_caches(name)
        b.record("seq_lo", "curl1", r, limits.curl_one(b, f"{ng.url}/{name}", size))
        # curl into a file on the work directory's filesystem, the caches'
        b.cold_caches(name)
        b.record("seq_lo", "curlfile", r, limits.curl_one(b, f"{ng.url}/{name}", size, b.path("curl-seq.bin")))
        b.cold_caches(name)
        b.record("seq_lo", "curl8", r, limits.curl_ranges(b, f"{ng.url}/{name}", size, 8))
        b.show_all(r, ("curl1", "curlfile", "curl8", "dd"), ("seq_lo", "remount"))


def _cold_seq(b, wl, origin, name, size, curl1=True):
    for r in b.run_range():
        for sys_ in SYSTEMS:
            m = b.cold_mount(wl, sys_, r, origin.url, name)
            if not m:
                continue
            mark = origin.mark()
            line = b.step([b.br, "seq", m.path(name)])
            b.umount(m)
            b.record(wl, sys_, r, line, origin.pulled(mark))
            b.show(wl, sys_, r)
        b.cold_caches(name)
        if curl1:
            b.record(wl, "curl1", r, limits.curl_one(b, f"{origin.url}/{name}", size))
        b.record(wl, "curl8", r, limits.curl_ranges(b, f"{origin.url}/{name}", size, 8))
        b.show_all(r, ("curl1", "curl8"), (wl,))


def seq_wan(b):
    """Cold sequential through the WAN-like origin."""
    _cold_seq(b, "seq_wan", b.wan, "wan.bin", b.s["SEQ_WAN_SIZE"])


def seq_wan_smallbuf(b):
    """Cold sequential of a larger file through a WAN origin of its own with
    the same latency and rate whose connections have small send buffers and
    pace small writes (lanes crawled on such an asyncio origin where 8 curl
    ranges did not); 8 curl ranges are the limit."""
    s = b.s
    o = b.start_origin("smallbuf", "--root", b.www, "--quiet", "--rate", str(s["WAN_RATE"]),
                       "--latency", str(s["WAN_LATENCY"]), "--sndbuf", str(s["SMALLBUF_SNDBUF"]),
                       "--write-chunk", str(s["SMALLBUF_CHUNK"]), "--autoindex")
    try:
        _cold_seq(b, "seq_wan_smallbuf", o, "smallbuf.bin", s["SMALLBUF_SIZE"], curl1=False)
    finally:
        b.stop_server(o)


def seq_near(b):
    """Cold sequential from an origin NEAR_LATENCY ms away with a loose
    per-connection cap (NEAR_RATE), between loopback and the far WAN:
    where a reader's window must open within a few round trips."""
    o = b.start_near("near")
    try:
        _cold_seq(b, "seq_near", o, "near.bin", b.s["SEQ_NEAR_SIZE"])
    finally:
        b.stop_server(o)


WORKLOADS = {"seq_lo": seq_lo, "seq_wan": seq_wan, "seq_wan_smallbuf": seq_wan_smallbuf,
             "seq_near": seq_near}
NOISE = {"seq_lo": "mbps", "seq_wan": "mbps", "warm": "mbps", "remount": "mbps",
         "seq_wan_smallbuf": "mbps", "seq_near": "mbps"}


# --- report -----------------------------------------------------------------

def _figs(rep):
    m = rep.fig.med
    SL = {s: m("seq_lo", s, "mbps") for s in ("pacefs", "rclone", "httpdirfs", "curl1", "curl8", "curlfile")}
    SW = {s: m("seq_wan", s, "mbps") for s in ("pacefs", "rclone", "httpdirfs", "curl1", "curl8", "curlfile")}
    WM = {s: m("warm", s, "mbps") for s in SYSTEMS}
    RM = {s: m("remount", s, "mbps") for s in SYSTEMS}
    RM["dd"] = m("remount", "dd", "mbps")
    return SL, SW, WM, RM


def plots(rep):
    SL, SW, _, _ = _figs(rep)
    rows = []
    for s in ("pacefs", "rclone", "httpdirfs", "curl1", "curl8"):
        a = SL[s] if rep.isnum(SL[s]) else 0
        c = SW[s] if rep.isnum(SW[s]) else 0
        rows.append(f'"{s}" {a} {c}')
    dat = rep.data("\n".join(rows) + "\n")
    S = rep.s
    return [("cold_seq", "1000,420", f"""set multiplot layout 1,2 title "Cold sequential read, MB/s (median of {rep.runs} runs; 0 = failed)"
set style data histograms
set style fill solid 0.8 border -1
set boxwidth 0.7
set grid ytics
set yrange [0:*]
set key off
set title "loopback nginx, {S('SEQ_LO_SIZE') // MiB} MiB"
plot "{dat}" using 2:xtic(1) lc rgb "#3b75af", '' using 0:2:(sprintf("%.0f",$2)) with labels offset 0,0.7 notitle
set title "WAN origin ({S('WAN_LATENCY')} ms, {S('WAN_RATE')} B/s per conn), {S('SEQ_WAN_SIZE') // MiB} MiB"
plot "{dat}" using 3:xtic(1) lc rgb "#e1812c", '' using 0:3:(sprintf("%.1f",$3)) with labels offset 0,0.7 notitle
unset multiplot
""")]


def targets(rep):
    SL, SW, WM, RM = _figs(rep)
    med = rep.fig.med
    rows = [
        f"| cold sequential, loopback: >= 2x rclone | pacefs {f(SL['pacefs'], 1, '%.0f')} MB/s vs rclone {f(SL['rclone'], 1, '%.0f')} MB/s: {ratio(SL['pacefs'], SL['rclone'])} | {yesno('ge', SL['pacefs'], mul(SL['rclone'], 2))} |",
        f"| cold sequential, loopback: >= 0.5x curl alone | vs curl one connection {f(SL['curl1'], 1, '%.0f')} MB/s: {ratio(SL['pacefs'], SL['curl1'])} | {yesno('ge', SL['pacefs'], mul(SL['curl1'], 0.5))} |",
        f"| cold sequential, loopback: >= 0.6x curl into a file | vs curl one connection into a file {f(SL['curlfile'], 1, '%.0f')} MB/s: {ratio(SL['pacefs'], SL['curlfile'], 3)} (curl into /dev/null: {f(SL['curl1'], 1, '%.0f')} MB/s) | {yesno('ge', SL['pacefs'], mul(SL['curlfile'], 0.6))} |",
        f"| cold sequential, WAN: >= 0.8x curl 8 ranges | pacefs {f(SW['pacefs'], 1, '%.1f')} MB/s vs {f(SW['curl8'], 1, '%.1f')} MB/s: {ratio(SW['pacefs'], SW['curl8'])} | {yesno('ge', SW['pacefs'], mul(SW['curl8'], 0.8))} |",
        f"| cold sequential, WAN: >= 5x rclone | vs {f(SW['rclone'], 1, '%.1f')} MB/s: {ratio(SW['pacefs'], SW['rclone'])} | {yesno('ge', SW['pacefs'], mul(SW['rclone'], 5))} |",
        f"| cold sequential, WAN: >= 5x httpdirfs | vs {f(SW['httpdirfs'], 1, '%.1f')} MB/s: {ratio(SW['pacefs'], SW['httpdirfs'])} | {yesno('ge', SW['pacefs'], mul(SW['httpdirfs'], 5))} |",
    ]
    rows += [
        f"| second read in the same mount (warm re-read): >= 2x httpdirfs | pacefs {f(WM['pacefs'], 1, '%.0f')} MB/s vs {f(WM['httpdirfs'], 1, '%.0f')} MB/s: {ratio(WM['pacefs'], WM['httpdirfs'])} | {yesno('ge', WM['pacefs'], mul(WM['httpdirfs'], 2))} |",
        f"| warm re-read: >= 1.5x rclone | vs {f(WM['rclone'], 1, '%.0f')} MB/s: {ratio(WM['pacefs'], WM['rclone'])} | {yesno('ge', WM['pacefs'], mul(WM['rclone'], 1.5))} |",
    ]
    rp, rq = med("remount", "pacefs", "read_pulled"), med("remount", "pacefs", "pulled")
    rows += [
        f"| read back from the cache after a remount (page cache dropped): >= 2x httpdirfs's | pacefs {f(RM['pacefs'], 1, '%.0f')} MB/s vs {f(RM['httpdirfs'], 1, '%.0f')} MB/s: {ratio(RM['pacefs'], RM['httpdirfs'], 3)} | {yesno('ge', RM['pacefs'], mul(RM['httpdirfs'], 2))} |",
        f"| read back after a remount: >= 0.8x dd of data.mdb from a dropped page cache (dd's MB/s over the bytes it read: the whole file, {g(med('remount', 'dd', 'file_bytes'), MiB, '%.0f')} MiB for the {rep.s('SEQ_LO_SIZE') // MiB} MiB blob) | vs dd {f(RM['dd'], 1, '%.0f')} MB/s: {ratio(RM['pacefs'], RM['dd'], 3)} | {yesno('ge', RM['pacefs'], mul(RM['dd'], 0.8))} |",
        f"| remount: zero bytes pulled by the full read | {f(rp, 1, '%.0f')} bytes during the read; {f(rq, 1, '%.0f')} bytes mount to unmount (requests: {rep.fig.vals('remount', 'pacefs', 'reqs', 1, '%d')}) | {yesno('le', rp, 0)} |",
    ]
    return rows


def headline(rep):
    SL, SW, WM, RM = _figs(rep)
    return [
        f"- Cold sequential: loopback pacefs {f(SL['pacefs'], 1, '%.0f')} MB/s = {ratio(SL['pacefs'], SL['rclone'])} rclone, {ratio(SL['pacefs'], SL['httpdirfs'])} httpdirfs, {ratio(SL['pacefs'], SL['curl1'])} curl alone, {ratio(SL['pacefs'], SL['curlfile'])} curl into a file; WAN {f(SW['pacefs'], 1, '%.1f')} MB/s = {ratio(SW['pacefs'], SW['rclone'])} rclone, {ratio(SW['pacefs'], SW['httpdirfs'])} httpdirfs, {ratio(SW['pacefs'], SW['curl8'])} curl with 8 ranges.",
        f"- Warm re-read: {ratio(WM['pacefs'], WM['rclone'])} rclone, {ratio(WM['pacefs'], WM['httpdirfs'])} httpdirfs; after a remount pacefs read the whole file at {f(RM['pacefs'], 1, '%.0f')} MB/s ({ratio(RM['pacefs'], RM['httpdirfs'])} httpdirfs, {ratio(RM['pacefs'], RM['dd'])} dd of data.mdb) pulling {f(rep.fig.med('remount', 'pacefs', 'read_pulled'), 1, '%.0f')} bytes.",
    ]


def sections(rep):
    SL, SW, WM, RM = _figs(rep)
    fig, S = rep.fig, rep.s
    out = ["## Cold sequential read", "",
           "MB/s (10^6 bytes/s) from open to the last verified byte, 1 MiB reads.", "",
           f"| system | loopback nginx, {S('SEQ_LO_SIZE') // MiB} MiB | runs | pacefs is | WAN origin, {S('SEQ_WAN_SIZE') // MiB} MiB | runs | pacefs is | WAN pulled MiB |",
           "| --- | ---: | --- | ---: | ---: | --- | ---: | ---: |"]
    for s in ("pacefs", "rclone", "httpdirfs", "curl1", "curlfile", "curl8"):
        out.append(f"| {label(s)} | {f(SL[s], 1, '%.0f')} | {fig.vals('seq_lo', s, 'mbps', 1, '%.0f')} | {ratio(SL['pacefs'], SL[s])} | {f(SW[s], 1, '%.1f')} | {fig.vals('seq_wan', s, 'mbps', 1, '%.1f')} | {ratio(SW['pacefs'], SW[s])} | {f(fig.med('seq_wan', s, 'pulled'), MiB, '%.1f')} |")
    out += ["", "curl into a file: `curl -s -o FILE` on the loopback URL, FILE on the filesystem of the work directory (where the caches are), written and not synced, removed after each run; loopback only.", "",
            f"Best competitor: loopback {ratio(SL['pacefs'], maxnum(SL['rclone'], SL['httpdirfs']))} of its rate, WAN {ratio(SW['pacefs'], maxnum(SW['rclone'], SW['httpdirfs']))}; vs curl alone: loopback {ratio(SL['pacefs'], SL['curl1'])} (into /dev/null) and {ratio(SL['pacefs'], SL['curlfile'])} (into a file), WAN {ratio(SW['pacefs'], SW['curl1'])} (one connection) and {ratio(SW['pacefs'], SW['curl8'])} (8 ranges).", ""]
    if fig.has("seq_wan_smallbuf"):
        out += ["## Cold sequential read, small-buffer origin", "",
                f"The WAN origin's latency and rate, with `--sndbuf {S('SMALLBUF_SNDBUF', '')} --write-chunk {S('SMALLBUF_CHUNK', '')}` (connections whose small send buffers wait on the client's ACKs, paced in small writes, as on the asyncio origin where lanes once crawled), {S('SMALLBUF_SIZE', 0) // MiB} MiB; MB/s, and pacefs against each.", "",
                "| system | MB/s | runs | pacefs is | pulled MiB |", "| --- | ---: | --- | ---: | ---: |"]
        pm = fig.med("seq_wan_smallbuf", "pacefs", "mbps")
        for s in ("pacefs", "rclone", "httpdirfs", "curl8"):
            x = fig.med("seq_wan_smallbuf", s, "mbps")
            out.append(f"| {label(s)} | {f(x, 1, '%.1f')} | {fig.vals('seq_wan_smallbuf', s, 'mbps', 1, '%.1f')} | {ratio(pm, x)} | {f(fig.med('seq_wan_smallbuf', s, 'pulled'), MiB, '%.1f')} |")
        out.append("")
    if fig.has("seq_near"):
        out += ["## Cold sequential read, near origin", "",
                f"pacefs-origin `--latency {S('NEAR_LATENCY', '')} --rate {S('NEAR_RATE', '')}`: a round trip of {S('NEAR_LATENCY', '')} ms and {g(S('NEAR_RATE', 0), 1e6, '%.0f')} MB/s a connection (an object store in the reader's own region), between loopback and the far WAN origin; {S('SEQ_NEAR_SIZE', 0) // MiB} MiB, MB/s, and pacefs against each.", "",
                "| system | MB/s | runs | pacefs is | pulled MiB | requests |", "| --- | ---: | --- | ---: | ---: | ---: |"]
        pm = fig.med("seq_near", "pacefs", "mbps")
        for s in ("pacefs", "rclone", "httpdirfs", "curl1", "curl8"):
            x = fig.med("seq_near", s, "mbps")
            out.append(f"| {label(s)} | {f(x, 1, '%.1f')} | {fig.vals('seq_near', s, 'mbps', 1, '%.1f')} | {ratio(pm, x)} | {f(fig.med('seq_near', s, 'pulled'), MiB, '%.1f')} | {g(fig.med('seq_near', s, 'reqs'), 1, '%.0f')} |")
        out.append("")
    out += [f"## Warm re-read and full read after remount (loopback, {S('SEQ_LO_SIZE') // MiB} MiB)", "",
           "Warm: the same mount reads the file again right after the cold read (page cache not dropped). Remount: unmount, drop the page cache, mount over the same cache directory, read in full.", "",
           "| system | warm MB/s | warm runs | pacefs is | warm pulled MiB | remount MB/s | remount runs | pulled during the read, bytes | pulled mount to unmount, bytes (requests) |",
           "| --- | ---: | --- | ---: | ---: | ---: | --- | ---: | ---: |"]
    for s in SYSTEMS:
        out.append(f"| {label(s)} | {f(WM[s], 1, '%.0f')} | {fig.vals('warm', s, 'mbps', 1, '%.0f')} | {ratio(WM['pacefs'], WM[s])} | {f(fig.med('warm', s, 'pulled'), MiB, '%.1f')} | {f(fig.med('remount', s, 'mbps'), 1, '%.0f')} | {fig.vals('remount', s, 'mbps', 1, '%.0f')} | {f(fig.med('remount', s, 'read_pulled'), 1, '%.0f')} | {f(fig.med('remount', s, 'pulled'), 1, '%.0f')} ({fig.vals('remount', s, 'reqs', 1, '%d')}) |")
    out.append(f"| {label('dd')} | | | | | {f(RM['dd'], 1, '%.0f')} | {fig.vals('remount', 'dd', 'mbps', 1, '%.0f')} | | |")
    out += ["", f"dd: `dd if=CACHE/data.mdb of=/dev/null bs=1M` on pacefs's cache directory right after its remount read and unmount, the page cache dropped first as for the remount; MB/s over the bytes dd read, which is the whole file: {g(fig.med('remount', 'dd', 'file_bytes'), MiB, '%.1f')} MiB ({g(fig.med('remount', 'dd', 'disk_bytes'), MiB, '%.1f')} MiB allocated on disk) for the {S('SEQ_LO_SIZE') // MiB} MiB blob, since data.mdb also holds LMDB's metadata and free pages. pacefs's remount figure is over the blob's bytes only.", ""]
    return out


def readme_rows(rep):
    SL, SW, WM, RM = _figs(rep)
    m = rep.fig.med
    return {
        "seq_wan": f"| cold sequential, WAN-like origin | {f(SW['pacefs'], 1, '%.1f')} MB/s | {f(SW['rclone'], 1, '%.1f')} (pacefs {ratio(SW['pacefs'], SW['rclone'], 1)}) | {f(SW['httpdirfs'], 1, '%.1f')} ({ratio(SW['pacefs'], SW['httpdirfs'], 1)}) | {f(SW['curl8'], 1, '%.1f')} with 8 ranges (pacefs {ratio(SW['pacefs'], SW['curl8'])}) |",
        "seq_lo": f"| cold sequential, loopback nginx | {f(SL['pacefs'], 1, '%.0f')} MB/s | {f(SL['rclone'], 1, '%.0f')} ({ratio(SL['pacefs'], SL['rclone'])}) | {f(SL['httpdirfs'], 1, '%.0f')} ({ratio(SL['pacefs'], SL['httpdirfs'], 1)}) | {f(SL['curlfile'], 1, '%.0f')} into a file ({ratio(SL['pacefs'], SL['curlfile'])}) |",
        "warm": f"| warm re-read | {f(WM['pacefs'], 1, '%.0f')} MB/s | {f(WM['rclone'], 1, '%.0f')} ({ratio(WM['pacefs'], WM['rclone'], 1)}) | {f(WM['httpdirfs'], 1, '%.0f')} ({ratio(WM['pacefs'], WM['httpdirfs'], 1)}) | |",
        "remount": f"| read back after a remount (page cache dropped) | {f(RM['pacefs'], 1, '%.0f')} MB/s, {f(m('remount', 'pacefs', 'read_pulled'), 1, '%.0f')} bytes pulled | | {f(RM['httpdirfs'], 1, '%.0f')} ({ratio(RM['pacefs'], RM['httpdirfs'])}) | dd of data.mdb {f(RM['dd'], 1, '%.0f')} |",
    }

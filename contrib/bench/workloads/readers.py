"""Many readers and many origins: two mirrors (mirrors, pacefs only), 8
readers over 4 files of the WAN origin (multi), and N readers each on its
own file of one mount on loopback (multi_lo), N curl processes into files
as that limit.
"""
import os

from harness.runner import SYSTEMS
from harness.stats import MiB, f, g, label, mul, ratio, yesno


def gen(b):
    s = b.s
    if b.wanted("mirrors"):
        b.need("wan.bin", s["SEQ_WAN_SIZE"])
    n = s["MULTI_FILES"] if b.wanted("multi") else 0
    if b.wanted("multi_lo"):
        n = max(n, s["MULTI_LO_FILES"])
    for k in range(n):
        b.need(f"multi{k}.bin", s["MULTI_SIZE"])


def mirrors(b):
    """Each WAN origin alone, then both (-o mirror=)."""
    name = "wan.bin"
    for r in b.run_range():
        for cfg in ("mirror_a", "mirror_b", "both"):
            mnt, cache = b.fresh(r, "pacefs")
            ma, mb = b.wan.mark(), b.wan2.mark()
            base = b.wan2.url if cfg == "mirror_b" else b.wan.url
            opts = ("-o", f"mirror={b.wan2.url}/{name}") if cfg == "both" else ()
            try:
                m = b.mount("pacefs", base, name, mnt, cache, opts=opts)
            except b.MountError as e:
                b.record("mirrors", cfg, r, f"failed: mount: {e}")
                continue
            b.cold_caches(name)
            line = b.step([b.br, "seq", m.path(name)])
            b.umount(m)
            b.record("mirrors", cfg, r, line,
                     f"a_pulled={b.wan.sent(ma)[0]} b_pulled={b.wan2.sent(mb)[0]}")
            b.show("mirrors", cfg, r)


def multi(b):
    """MULTI_READERS readers, two a file, over MULTI_FILES files on the WAN
    origin; aggregate rate over the wall time. pacefs has one mount per
    file, as before it mounted trees."""
    s = b.s
    files = [f"multi{k}.bin" for k in range(s["MULTI_FILES"])]
    for r in b.run_range():
        for sys_ in SYSTEMS:
            mnt, cache = b.fresh(r, sys_)
            mark = b.wan.mark()
            mounts, paths, err = [], [], None
            try:
                if sys_ == "pacefs":
                    for k, name in enumerate(files):
                        m = b.mount("pacefs", b.wan.url, name, f"{mnt}/{k}", f"{cache}/{k}")
                        mounts.append(m)
                        paths.append(m.path(name))
                else:
                    m = b.mount(sys_, b.wan.url, files[0], mnt, cache)
                    mounts.append(m)
                    paths = [m.path(n) for n in files]
            except b.MountError as e:
                err = f"failed: mount: {e}"
            if not err:
                b.cold_caches(*files)
                n = s["MULTI_READERS"]
                line, secs = b.par(n, lambda k: [b.br, "seq", paths[k % len(files)]],
                                   lambda last: last.startswith("ok"))
                if line.startswith("failed"):
                    err = line.replace("copy", "reader", 1)
            for m in mounts:
                b.umount(m)
            if err:
                b.record("multi", sys_, r, err)
            else:
                total = s["MULTI_READERS"] * s["MULTI_SIZE"]
                b.record("multi", sys_, r, "ok bytes=%d secs=%.6f mbps=%.2f" % (total, secs, total / secs / 1e6),
                         b.wan.pulled(mark))
            b.show("multi", sys_, r)


def multi_lo(b):
    """For each N of MULTI_LO_N, N readers at once, each on its own file,
    through one fresh mount of each system on loopback nginx (pacefs mounts
    its directory index); the limit: N curl processes each into a file."""
    s = b.s
    ng = b.nginx
    for r in b.run_range():
        for n in (int(x) for x in str(s["MULTI_LO_N"]).split()):
            wl = f"multi_lo_{n}"
            files = [f"multi{k}.bin" for k in range(n)]
            total = n * s["MULTI_SIZE"]
            for sys_ in SYSTEMS:
                mnt, cache = b.fresh(r, sys_)
                mark = ng.mark()
                try:
                    m = b.mount(sys_, ng.url, files[0], mnt, cache, tree=True)
                except b.MountError as e:
                    b.record(wl, sys_, r, f"failed: mount: {e}")
                    continue
                b.cold_caches(*files)
                line, secs = b.par(n, lambda k: [b.br, "seq", m.path(f"multi{k}.bin")],
                                   lambda last: last.startswith("ok"))
                b.umount(m)
                if line == "ok":
                    line = "ok bytes=%d secs=%.6f mbps=%.2f" % (total, secs, total / secs / 1e6)
                b.record(wl, sys_, r, line, ng.pulled(mark))
                b.show(wl, sys_, r)
            out = b.path("curl-multi")
            os.makedirs(out, exist_ok=True)
            b.cold_caches(*files)
            want = f"200 {s['MULTI_SIZE']}"
            line, secs = b.par(n, lambda k: ["curl", "-s", "--max-time", "240", "-o", f"{out}/{k}.bin",
                                             "-w", "%{http_code} %{size_download}\n", f"{ng.url}/multi{k}.bin"],
                               lambda last: last == want)
            # dropped unwritten rather than written back under the next step
            b.rmtree(out)
            if line == "ok":
                line = "ok bytes=%d secs=%.6f mbps=%.2f" % (total, secs, total / secs / 1e6)
            b.record(wl, "curlfile", r, line)
            b.show(wl, "curlfile", r)


WORKLOADS = {"mirrors": mirrors, "multi": multi, "multi_lo": multi_lo}
NOISE = {"mirrors": "mbps", "multi": "mbps", "multi_lo_*": "mbps"}


# --- report -----------------------------------------------------------------

def _ns(rep):
    return str(rep.s("MULTI_LO_N", "") or "").split()


def targets(rep):
    m = rep.fig.med
    rows = []
    for n in _ns(rep):
        wl = f"multi_lo_{n}"
        mp, mc = m(wl, "pacefs", "mbps"), m(wl, "curlfile", "mbps")
        rows.append(f"| {n} readers on {n} files of one mount, loopback: aggregate >= 0.6x {n} curl processes into files | pacefs {f(mp, 1, '%.0f')} MB/s vs curl {f(mc, 1, '%.0f')} MB/s: {ratio(mp, mc, 3)} (rclone {f(m(wl, 'rclone', 'mbps'), 1, '%.0f')}, httpdirfs {f(m(wl, 'httpdirfs', 'mbps'), 1, '%.0f')}) | {yesno('ge', mp, mul(mc, 0.6))} |")
    return rows


def headline(rep):
    m = rep.fig.med
    out = []
    for n in _ns(rep):
        wl = f"multi_lo_{n}"
        mp = m(wl, "pacefs", "mbps")
        out.append(f"- {n} readers on {n} files of one mount, loopback: pacefs {f(mp, 1, '%.0f')} MB/s = {ratio(mp, m(wl, 'curlfile', 'mbps'))} {n} curls into files, {ratio(mp, m(wl, 'rclone', 'mbps'))} rclone, {ratio(mp, m(wl, 'httpdirfs', 'mbps'))} httpdirfs.")
    return out


def sections(rep):
    fig, S = rep.fig, rep.s
    m = fig.med
    out = ["## Two mirrors (pacefs only, WAN origins)", "",
           f"Two pacefs-origin instances with the same caps serving the same {S('SEQ_WAN_SIZE') // MiB} MiB file; cold sequential read with each alone and with both (`-o mirror=URL`). The cap is per connection, so one mirror alone already offers 16 lanes x {S('WAN_RATE')} B/s; a second mirror can only add bandwidth where a single origin limits its total, which this origin does not model.", "",
           "| configuration | MB/s | runs | from A MiB | from B MiB | both is |",
           "| --- | ---: | --- | ---: | ---: | ---: |"]
    mb = m("mirrors", "both", "mbps")
    for c in ("mirror_a", "mirror_b", "both"):
        out.append(f"| {c} | {f(m('mirrors', c, 'mbps'), 1, '%.1f')} | {fig.vals('mirrors', c, 'mbps', 1, '%.1f')} | {f(m('mirrors', c, 'a_pulled'), MiB, '%.1f')} | {f(m('mirrors', c, 'b_pulled'), MiB, '%.1f')} | {ratio(mb, m('mirrors', c, 'mbps'))} |")
    out += ["", "## Many readers over many files (WAN origin)", "",
            f"{S('MULTI_READERS')} readers at once, two per file, over {S('MULTI_FILES')} files of {S('MULTI_SIZE') // MiB} MiB; aggregate MB/s = bytes read by all readers / wall time. pacefs mounts one blob per mount, so it runs {S('MULTI_FILES')} mounts (each with its own 16 lanes to the origin).", "",
            "| system | aggregate MB/s | runs | pulled MiB | pacefs is |",
            "| --- | ---: | --- | ---: | ---: |"]
    mp = m("multi", "pacefs", "mbps")
    for s in SYSTEMS:
        out.append(f"| {label(s)} | {f(m('multi', s, 'mbps'), 1, '%.1f')} | {fig.vals('multi', s, 'mbps', 1, '%.1f')} | {f(m('multi', s, 'pulled'), MiB, '%.1f')} | {ratio(mp, m('multi', s, 'mbps'))} |")
    out.append("")
    if _ns(rep):
        out += ["## Many readers on many files of one mount (loopback nginx)", "",
                f"N readers at once, each reading its own cold {S('MULTI_SIZE') // MiB} MiB file in full through one fresh mount of each system with an empty cache (pacefs mounts nginx's directory index of the loopback root, rclone and httpdirfs its listing, as always); the limit: N curl processes at once, each into its own file on the work directory's filesystem (not synced). Aggregate MB/s = N x {S('MULTI_SIZE') // MiB} MiB / the wall time from the first start to the last exit (process start included for every system).", "",
                "| readers | system | aggregate MB/s | runs | pulled MiB | pacefs is |",
                "| ---: | --- | ---: | --- | ---: | ---: |"]
        for n in _ns(rep):
            wl = f"multi_lo_{n}"
            mp = m(wl, "pacefs", "mbps")
            for s in SYSTEMS + ("curlfile",):
                lb = label(s) if s != "curlfile" else f"{n} curl processes, each into a file (limit)"
                out.append(f"| {n} | {lb} | {f(m(wl, s, 'mbps'), 1, '%.0f')} | {fig.vals(wl, s, 'mbps', 1, '%.0f')} | {g(m(wl, s, 'pulled'), MiB, '%.1f')} | {ratio(mp, m(wl, s, 'mbps'))} |")
        out.append("")
    return out


def readme_rows(rep):
    m = rep.fig.med
    ns = _ns(rep)
    if not ns:
        return {}
    n = ns[-1]
    wl = f"multi_lo_{n}"
    return {"multi_lo": f"| {n} readers on {n} files of one mount, loopback | {f(m(wl, 'pacefs', 'mbps'), 1, '%.0f')} MB/s | {f(m(wl, 'rclone', 'mbps'), 1, '%.0f')} | {f(m(wl, 'httpdirfs', 'mbps'), 1, '%.0f')} | {f(m(wl, 'curlfile', 'mbps'), 1, '%.0f')}, {n} processes into files |"}

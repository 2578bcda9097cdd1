"""mountpoint-s3's fio read jobs (awslabs/mountpoint-s3,
mountpoint-s3/scripts/fio/read/), each for FIO_SECS on FIO_SIZE files through
a fresh mount of each system on the directory index of www/fio, on each
origin, fio verifying every block it reads.
"""
import os
import subprocess

from harness import tree
from harness.runner import SYSTEMS
from harness.stats import MiB, conns_cell, f, g, gf, label, mul, oname, qx, ratio, verdict_q, yesno

# name: (their job section's name, by which fio names the files it reads
# NAME.K.0, K = 0..numjobs-1; bs; rw; numjobs). Every one of theirs also has
# ioengine=sync, fallocate=none, time_based and group_reporting, size=100G
# (here FIO_SIZE) and runtime=30s (here FIO_SECS); fs_bench.sh runs them
# with fio --thread.
JOBS = {
    "seq_read": ("sequential_read", "256k", "read", 1),
    "seq_read_4t": ("sequential_read_four_threads", "256k", "read", 4),
    "rand_read": ("random_read", "256k", "randread", 1),
    "rand_read_4t": ("random_read_four_threads", "256k", "randread", 4),
    # 256 MiB reads, each 17 MiB past the end of the last
    "seq_read_skip_17m": ("seq_read_skip_17m", "256m", "read:17m", 1),
}
# Every FIO_VERIFY bytes of the file carry one of fio's verify headers (the
# block's crc32c, its offset): written by fio, read with --verify at that
# interval, so a wrong byte or a block at the wrong offset fails. It divides
# every job's bs and every offset they read at.
FIO_VERIFY = "256k"


def gen(b):
    """One FIO_SIZE file written by fio with verify headers, linked into
    www/fio under every name the jobs read (one inode: reading one warms the
    origin's side for all)."""
    if not b.wanted("fio"):
        return
    os.makedirs(os.path.join(b.www, "fio"), exist_ok=True)
    src = b.path("fio.gen")
    subprocess.run(["fio", "--name=gen", f"--filename={src}", "--rw=write", f"--bs={FIO_VERIFY}",
                    f"--size={b.s['FIO_SIZE']}", "--ioengine=sync", "--verify=crc32c", "--do_verify=0",
                    "--verify_state_save=0", "--output=/dev/null"], check=True, cwd=b.w)
    names = []
    for job in b.s["FIO_JOBS"].split():
        if job not in JOBS:
            raise ValueError(f"unknown fio job {job}")
        for k in range(JOBS[job][3]):
            n = f"{JOBS[job][0]}.{k}.0"
            dst = os.path.join(b.www, "fio", n)
            if not os.path.exists(dst):
                os.link(src, dst)
            names.append(n)
    with open(b.path("sets", "fio.names"), "w") as fp:
        fp.write("".join(n + "\n" for n in names))


def fio(b):
    """Each job on each origin through a fresh mount of each system, as
    fs_bench.sh runs them (fio --thread --directory=MNT, the job's
    parameters), plus --readonly and --verify. A time-based sequential job
    that reaches the end of its file starts over: on loopback it may read
    its file more than once."""
    s = b.s
    for r in b.run_range():
        for o in s["FIO_ORIGINS"].split():
            for job in s["FIO_JOBS"].split():
                name, bs, rw, threads = JOBS[job]
                wl = f"fio_{o}_{job}"
                if job == "seq_read_skip_17m" and s["FIO_SIZE"] < 256 * MiB:
                    for sys_ in SYSTEMS:
                        b.record(wl, sys_, r, f"skipped: its 256 MiB reads need a file of 256 MiB or more (BENCH_FIO_SIZE is {s['FIO_SIZE']})")
                    continue
                cold = [f"{name}.0.0"]
                for sys_ in SYSTEMS:
                    tree.tree_step(b, wl, sys_, r, o, "fio", cold, [
                        *b.cl, "fio", "--thread", "--eta=never", "--readonly", "--directory=@MNT@",
                        f"--name={name}", f"--bs={bs}", f"--rw={rw}", f"--numjobs={threads}",
                        "--ioengine=sync", "--fallocate=none", f"--size={s['FIO_SIZE']}",
                        f"--runtime={s['FIO_SECS']}s", "--time_based", "--group_reporting",
                        "--verify=crc32c", f"--verify_interval={FIO_VERIFY}", "--verify_fatal=1"],
                        timeout=240)


NEEDS = ("fio",)
WORKLOADS = {"fio": fio}
NOISE = {"fio_*": "mibps"}


# --- report -----------------------------------------------------------------

def _cfg(rep):
    return str(rep.s("FIO_JOBS", "") or "").split(), str(rep.s("FIO_ORIGINS", "") or "").split()


def plots(rep):
    if not rep.fig.has("fio_"):
        return []
    jobs, origins = _cfg(rep)
    m = rep.fig.med
    cmds = ""
    for o in origins:
        rows = []
        for job in jobs:
            row = f'"{job}"'
            for s in SYSTEMS:
                x = m(f"fio_{o}_{job}", s, "mibps")
                # 0, not NaN: gnuplot's histograms fail on a column without a number
                row += f" {x}" if rep.isnum(x) else " 0"
            rows.append(row)
        dat = rep.data("\n".join(rows) + "\n")
        cmds += f"""
set title "{oname(o)}"
plot "{dat}" using 2:xtic(1) title "pacefs", '' using 3 title "rclone", '' using 4 title "httpdirfs\""""
    S = rep.s
    return [("fio", "1100,420", f"""set multiplot layout 1,{len(origins)} title "mountpoint-s3's fio read jobs, MiB/s, {S('FIO_SECS', 10)} s on {S('FIO_SIZE', 0) // MiB} MiB files (median of {rep.runs} runs; 0 = failed)"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set grid ytics
set yrange [0:*]
set key top right
set xtics rotate by 20 right
{cmds}
unset multiplot
""")]


def targets(rep):
    if not rep.fig.has("fio_"):
        return []
    fig, S = rep.fig, rep.s
    m = fig.med
    jobs, origins = _cfg(rep)
    rows = []
    for o in origins:
        for job in jobs:
            wl = f"fio_{o}_{job}"
            q = fig.ratio_best(wl, "mibps")
            rows.append(f"| fio {job} (mountpoint-s3), {oname(o)}: pacefs >= the best peer (median of the runs' ratios) | pacefs {gf(m(wl, 'pacefs', 'mibps'), 1, '%.1f')} MiB/s (rclone {gf(m(wl, 'rclone', 'mibps'), 1, '%.1f')}, httpdirfs {gf(m(wl, 'httpdirfs', 'mibps'), 1, '%.1f')}): {qx(q)} | {verdict_q(fig, 'ge', q, 1, wl, 'mibps')} |")
    wl = "fio_wan_seq_read_4t"
    from harness.stats import awk
    lim = awk(S("HOST_LANES", 16) * S("WAN_RATE") / MiB)
    mp = m(wl, "pacefs", "mibps")
    rows.append(f"| fio seq_read_4t, WAN: >= 0.9x what the lanes can carry ({S('HOST_LANES', 16)} lanes, pacefs's -o host_lanes= default, x {S('WAN_RATE')} B/s = {f(lim, 1, '%.1f')} MiB/s) | pacefs {f(mp, 1, '%.1f')} MiB/s with {g(m(wl, 'pacefs', 'conns_active'), 1, '%.0f')} active connections ({g(m(wl, 'pacefs', 'conns'), 1, '%.0f')} open): {ratio(mp, lim)} | {yesno('ge', mp, mul(lim, 0.9))} |")
    return rows


def headline(rep):
    if not rep.fig.has("fio_"):
        return []
    jobs, origins = _cfg(rep)
    line = "- mountpoint-s3's fio read jobs, pacefs / the best of rclone and httpdirfs (same run):"
    for o in origins:
        line += f" {oname(o)}"
        for job in jobs:
            line += f" {job} {qx(rep.fig.ratio_best(f'fio_{o}_{job}', 'mibps'))},"
        line = line.rstrip(",") + ";"
    return [line.rstrip(";") + "."]


def sections(rep):
    if not rep.fig.has("fio_"):
        return []
    fig, S = rep.fig, rep.s
    m = fig.med
    jobs, origins = _cfg(rep)
    secs = S("FIO_SECS", 10)
    out = ["## mountpoint-s3's fio read jobs", "",
           f"The read jobs of mountpoint-s3's benchmark (awslabs/mountpoint-s3, mountpoint-s3/scripts/fio/read/), their parameters on the bench's fio command lines: seq_read (bs=256k, rw=read, one thread), seq_read_4t (the same, numjobs=4, a file each), rand_read (bs=256k, rw=randread), rand_read_4t (numjobs=4), seq_read_skip_17m (bs=256m, rw=read:17m: 256 MiB reads, each 17 MiB past the last); all ioengine=sync, time_based, group_reporting, run with `fio --thread --directory=MNT` as their fs_bench.sh does. Cut here to {S('FIO_SIZE', 0) // MiB} MiB files (theirs: 100G) and {secs} s (theirs: 30 s). Added: `--readonly` and `--verify=crc32c --verify_interval=256k`: the files are written by fio with a verify header every 256 KiB (the block's checksum and offset), so every byte fio reads is checked and a block at the wrong offset fails. Each job on a fresh mount of each system with an empty cache, pacefs mounting the folder's directory index, on each origin as the loader's folders are. A sequential job that reaches the end of its file starts over (time_based), so on loopback a file may be read more than once (read / file size > 1); and fio ends a job at the first read that completes after the {secs} s, so where one of seq_read_skip_17m's 256 MiB reads takes longer (from the WAN origin: 32 s at one connection's {S('WAN_RATE')} B/s) its figure is one or two reads over a longer time.", "",
           "MiB/s is fio's (2^20 bytes/s over its runtime, threads summed); p50 and p99: fio's completion latency of one read. Requests, pulled, peak RSS and connections as in the loader's tables; pulled / read counts mount to unmount, so read-ahead past the last read shows.", "",
           "| job | origin | system | MiB/s | runs | p50 ms | p99 ms | read / file size | pulled / read | requests | peak RSS MiB | connections: open, active (seen) | pacefs is |",
           "| --- | --- | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: |"]
    for job in jobs:
        fsz = (4 if job.endswith("_4t") else 1) * S("FIO_SIZE", 1)
        for o in origins:
            wl = f"fio_{o}_{job}"
            for s in SYSTEMS:
                q = "-" if s == "pacefs" else qx(fig.ratio_sys(wl, "pacefs", s, "mibps"))
                out.append(f"| {job} | {oname(o)} | {label(s)} | {f(m(wl, s, 'mibps'), 1, '%.1f')} | {fig.vals(wl, s, 'mibps', 1, '%.1f')} | {g(m(wl, s, 'p50'), 0.001, '%.1f')} | {g(m(wl, s, 'p99'), 0.001, '%.1f')} | {g(m(wl, s, 'bytes'), fsz, '%.2f')} | {g(fig.q(wl, s, 'pulled', 'bytes'), 1, '%.2f')} | {g(m(wl, s, 'reqs'), 1, '%.0f')} | {g(m(wl, s, 'hwm_kib'), 1024, '%.0f')} | {conns_cell(fig, wl, s)} | {q} |")
    out.append("")
    return out

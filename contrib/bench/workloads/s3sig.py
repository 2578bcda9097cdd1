"""What SigV4 costs, pacefs only: the same bytes from the same server read
unsigned (an http:// URL) and signed (s3://BUCKET/KEY with -o endpoint=).
From loopback nginx, which ignores the signature: the client's cost; from
pacefs-origin --s3, which checks every signature (unsigned through
--s3-anonymous): the origin's too. Cold sequential: one mount after the
other, the first alternating from run to run. Random: both mounts at once,
each offset read from both in turn (benchread random2), so that both see
the same moments of a shared machine's load.
"""
import os

from harness.stats import f

S3_ID = "AKIDBENCH"
S3_SECRET = "benchsecretbenchsecret"


def gen(b):
    if b.wanted("s3sig"):
        b.need("seq.bin", b.s["SEQ_LO_SIZE"])
        b.need("long.bin", b.s["LONG_SIZE"])


def _mount(b, r, mode, base, name):
    """A fresh pacefs mount of NAME in BASE's bucket, unsigned or signed."""
    bucket = b.s["S3SIG_BUCKET"]
    mnt, cache = b.fresh(r, "s3sig_" + mode)
    if mode == "signed":
        env = dict(os.environ, AWS_ACCESS_KEY_ID=S3_ID, AWS_SECRET_ACCESS_KEY=S3_SECRET)
        return b.mount("pacefs", f"s3://{bucket}", name, mnt, cache,
                       opts=("-o", f"endpoint={base},region=us-east-1"), env=env)
    return b.mount("pacefs", f"{base}/{bucket}", name, mnt, cache)


def _split(line, keep, drop):
    """One side of random2's line: its KEEP_ keys without the prefix."""
    words = line.split()
    out = [w[len(keep):] if w.startswith(keep) else w for w in words[1:] if not w.startswith(drop)]
    return "ok " + " ".join(out)


def s3sig(b):
    s = b.s
    bucket = os.path.join(b.www, s["S3SIG_BUCKET"])
    os.makedirs(bucket, exist_ok=True)
    for n in ("seq.bin", "long.bin"):
        b.link(os.path.join(b.www, n), os.path.join(bucket, n))
    keys = b.path("s3sig.keys")
    with open(keys, "w") as fp:
        fp.write(f"{S3_ID} {S3_SECRET}\n")
    try:
        s3 = b.start_origin("s3sig", "--root", b.www, "--quiet", "--s3", "--s3-keys", keys, "--s3-anonymous")
    except RuntimeError:
        s3 = None
    try:
        for r in b.run_range():
            modes = ("unsigned", "signed") if r % 2 == 1 else ("signed", "unsigned")
            for mode in modes:
                try:
                    m = _mount(b, r, mode, b.nginx.url, "seq.bin")
                except b.MountError as e:
                    b.record("s3sig_seq", f"nginx_{mode}", r, f"failed: mount: {e}")
                    continue
                b.cold_caches("seq.bin")
                line = b.step([b.br, "seq", m.path("seq.bin")])
                b.umount(m)
                b.record("s3sig_seq", f"nginx_{mode}", r, line)
                b.show("s3sig_seq", f"nginx_{mode}", r)
            for srv, base in (("nginx", b.nginx.url), ("origin", s3.url if s3 else None)):
                line = _random2(b, r, base)
                # one line of random2 makes a record per side
                if line.startswith("ok"):
                    b.record("s3sig_random", f"{srv}_unsigned", r, _split(line, "a_", "b_"))
                    b.record("s3sig_random", f"{srv}_signed", r, _split(line, "b_", "a_"))
                else:
                    b.record("s3sig_random", f"{srv}_unsigned", r, line)
                    b.record("s3sig_random", f"{srv}_signed", r, line)
                b.say(f"  s3sig {srv} random run {r}: {line}")
    finally:
        if s3:
            b.stop_server(s3)


def _random2(b, r, base):
    if not base:
        return "failed: pacefs-origin --s3 did not start"
    try:
        um = _mount(b, r, "unsigned", base, "long.bin")
    except b.MountError as e:
        return f"failed: mount: {e}"
    try:
        sm = _mount(b, r, "signed", base, "long.bin")
    except b.MountError as e:
        b.umount(um)
        return f"failed: mount: {e}"
    b.cold_caches("long.bin")
    line = b.step([b.br, "random2", um.path("long.bin"), sm.path("long.bin"), str(b.s["S3SIG_N"]), str(r)])
    b.umount(sm)
    b.umount(um)
    return line


WORKLOADS = {"s3sig": s3sig}


# --- report -----------------------------------------------------------------

def _present(rep):
    return rep.fig.med("s3sig_seq", "nginx_unsigned", "mbps") != "-"


def targets(rep):
    if not _present(rep):
        return []
    fig = rep.fig
    m = fig.med
    from harness.stats import yesno, isnum
    q = fig.ratio_sys("s3sig_seq", "nginx_signed", "nginx_unsigned", "mbps")
    if not isnum(q):
        q = m("s3sig_seq", "nginx_signed", "mbps")
    rows = [f"| SigV4, loopback nginx: signed cold sequential >= 0.95x unsigned (median of the runs' ratios) | signed {f(m('s3sig_seq', 'nginx_signed', 'mbps'), 1, '%.0f')} MB/s, unsigned {f(m('s3sig_seq', 'nginx_unsigned', 'mbps'), 1, '%.0f')} MB/s: {f(q, 1, '%.2f')}x | {yesno('ge', q, 0.95)} |"]
    q = fig.ratio_sys("s3sig_random", "nginx_signed", "nginx_unsigned", "p50")
    if not isnum(q):
        q = m("s3sig_random", "nginx_signed", "p50")
    rows.append(f"| SigV4, loopback nginx: signed random 4 KiB p50 <= 1.05x unsigned (median of the runs' ratios) | signed {f(m('s3sig_random', 'nginx_signed', 'p50'), 0.001, '%.3f')} ms, unsigned {f(m('s3sig_random', 'nginx_unsigned', 'p50'), 0.001, '%.3f')} ms: {f(q, 1, '%.2f')}x | {yesno('le', q, 1.05)} |")
    return rows


def sections(rep):
    if not _present(rep):
        return []
    fig, S = rep.fig, rep.s
    from harness.stats import MiB
    out = ["## SigV4 signing (pacefs only, loopback)", "",
           f"The same bytes from the same server read unsigned (an http:// URL) and signed (s3://{S('S3SIG_BUCKET', 's3sig')}/KEY with -o endpoint=). nginx ignores the signature: what signing costs the client. pacefs-origin --s3 checks every signature (botocore's computation, remembered for a second per object; unsigned through --s3-anonymous): the client's cost and the origin's. Cold sequential: {S('SEQ_LO_SIZE') // MiB} MiB, one mount after the other (the first alternating from run to run). Random: {S('S3SIG_N', 2000)} reads of 4 KiB of the {S('LONG_SIZE') // MiB} MiB file through both mounts at once, each offset read from both in turn, so that both see the same moments of the machine's load; \"sum\" adds up one side's read latencies. The ratio is the median over the runs of signed / unsigned in the same run. docs/s3.md says where the time goes.", "",
           "| server, figure | unsigned | signed | signed / unsigned | runs (unsigned; signed) |",
           "| --- | ---: | ---: | ---: | --- |"]
    for srv, wl, key, sc, fmt, unit in (
            ("nginx", "seq", "mbps", 1, "%.0f", "MB/s"), ("nginx", "random", "p50", 0.001, "%.3f", "ms"),
            ("nginx", "random", "p95", 0.001, "%.3f", "ms"), ("nginx", "random", "secs", 1, "%.3f", "s (sum)"),
            ("origin", "random", "p50", 0.001, "%.3f", "ms"), ("origin", "random", "p95", 0.001, "%.3f", "ms"),
            ("origin", "random", "secs", 1, "%.3f", "s (sum)")):
        w = "s3sig_" + wl
        a, bb = fig.med(w, f"{srv}_unsigned", key), fig.med(w, f"{srv}_signed", key)
        q = fig.ratio_sys(w, f"{srv}_signed", f"{srv}_unsigned", key)
        out.append(f"| {srv}, {wl} {key}, {unit} | {f(a, sc, fmt)} | {f(bb, sc, fmt)} | {f(q, 1, '%.3f')} | {fig.vals(w, f'{srv}_unsigned', key, sc, fmt)}; {fig.vals(w, f'{srv}_signed', key, sc, fmt)} |")
    out.append("")
    return out

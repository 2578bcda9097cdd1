"""A tar archive on the WAN origin, read by GNU tar on a fresh mount of each
system and on the local copy (the floor): `tar tvf`, which reads every
member's 512-byte header and seeks past its bytes, a chain of small reads
each depending on the last; then, on the same mount, `tar xOf` of the
member in the middle, whose headers the listing read. clients.py runs tar
and compares its output with the local copy's.
"""
import os
import subprocess

from harness.stats import MiB, awk, f, g, label, ratio, yesno

from .realclients import CSYS as SYSTEMS, client_step

NAME = "big.tar"


def gen(b):
    """The archive in DATA (remade when its settings change), linked into
    www."""
    s = b.s
    data = b.data_dir
    os.makedirs(data, exist_ok=True)
    path, sp = os.path.join(data, NAME), os.path.join(data, "tar.stamp")
    stamp = f"tar {s['TAR_MEMBERS']} {s['TAR_MEMBER_BYTES']}"
    try:
        with open(sp) as fp:
            fresh = fp.read() == stamp
    except OSError:
        fresh = False
    if not fresh:
        b.say(f"generating the tar archive in {data}")
        subprocess.run(b.cl + ["gen-tar", path, str(s["TAR_MEMBERS"]), str(s["TAR_MEMBER_BYTES"])],
                       check=True, stdout=subprocess.DEVNULL)
        with open(sp, "w") as fp:
            fp.write(stamp)
    b.link(path, os.path.join(b.www, NAME))


def tar(b):
    """Each run, each system: a fresh mount (the local copy, cold, for
    "local"), the listing and the member; pulled from mount to unmount."""
    local = os.path.join(b.www, NAME)
    for r in b.run_range():
        for sys_ in SYSTEMS:
            client_step(b, "tar", sys_, r, NAME, ["tar", "@PATH@", local, b.s["TAR_READ"], "@LOG@"])


WORKLOADS = {"tar": tar}
NEEDS = ("tar",)
NOISE = {"tar": "list_secs"}


def _rtts_a_header(rep, sys_):
    """The listing's time in the WAN origin's round trips, a header."""
    x = rep.fig.med("tar", sys_, "list_secs")
    return rep.div(x, awk(rep.rtt() * rep.s("TAR_MEMBERS", 1)))


def targets(rep):
    m = rep.fig.med
    rh = _rtts_a_header(rep, "pacefs")
    xs = m("tar", "pacefs", "member_secs")
    return [f"| tar tvf of {rep.s('TAR_MEMBERS', 0)} members: <= 1.2 round trips a header (its time / members / RTT) | pacefs {f(rh, 1, '%.2f')} round trips a header, {f(m('tar', 'pacefs', 'list_secs'), 1, '%.2f')} s (rclone {f(m('tar', 'rclone', 'list_secs'), 1, '%.2f')} s, httpdirfs {f(m('tar', 'httpdirfs', 'list_secs'), 1, '%.2f')} s) | {yesno('le', rh, 1.2)} |",
            f"| tar xOf of one {rep.s('TAR_MEMBER_BYTES', 0) // MiB} MiB member after the listing: <= 0.15 s | pacefs {f(xs, 1, '%.3f')} s (rclone {f(m('tar', 'rclone', 'member_secs'), 1, '%.3f')}, httpdirfs {f(m('tar', 'httpdirfs', 'member_secs'), 1, '%.3f')}, local {f(m('tar', 'local', 'member_secs'), 1, '%.3f')}) | {yesno('le', xs, 0.15)} |"]


def sections(rep):
    fig, S = rep.fig, rep.s
    m = fig.med
    lp, mp = m("tar", "pacefs", "list_secs"), m("tar", "pacefs", "member_secs")
    out = ["## A tar archive (WAN origin)", "",
           f"GNU tar on a fresh mount of each system, and on the local copy after the page cache is dropped: `tar tvf` of an archive of {S('TAR_MEMBERS', 0)} members of {S('TAR_MEMBER_BYTES', 0) // MiB} MiB of random bytes (tar reads each 512-byte header and seeks past the member: a chain of small reads, each depending on the last), then on the same mount `tar xOf {S('TAR_READ', '')}`, whose headers the listing read. Each output is compared with the local copy's. Requests: lines of the origin's log during the listing.", "",
           "| system | tvf s | runs | round trips a header | requests | xOf s | runs | pulled MiB | pacefs is (tvf, xOf) |",
           "| --- | ---: | --- | ---: | ---: | ---: | --- | ---: | --- |"]
    for s in SYSTEMS:
        out.append(f"| {label(s)} | {f(m('tar', s, 'list_secs'), 1, '%.3f')} | {fig.vals('tar', s, 'list_secs', 1, '%.3f')} | {g(_rtts_a_header(rep, s), 1, '%.2f')} | {g(m('tar', s, 'list_reqs'), 1, '%.0f')} | {f(m('tar', s, 'member_secs'), 1, '%.3f')} | {fig.vals('tar', s, 'member_secs', 1, '%.3f')} | {g(m('tar', s, 'pulled'), MiB, '%.1f')} | {ratio(lp, m('tar', s, 'list_secs'))}, {ratio(mp, m('tar', s, 'member_secs'))} |")
    out.append("")
    return out

"""Figures from the records (medians over runs, same-run ratios, per-run
lists) and the report's cell formats and verdicts.

A figure is a number, or a text saying why there is none: "-" (no such
record), "skipped: why", "failed (k of n runs): why". Medians keep six
significant digits and whole numbers stay whole, as awk printed them in
the shell report, so that a report made again from old results matches
it figure for figure.
"""
import re

MiB = 1048576
_NUM = re.compile(r"^-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$")
_LEAD = re.compile(r"^\s*[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?")


def num(text):
    """TEXT as a number the way awk reads one: its leading number, else 0."""
    if isinstance(text, (int, float)):
        return text
    m = _LEAD.match(text or "")
    return float(m.group(0)) if m else 0.0


def awk(v):
    """V as awk's print left it: whole numbers whole, others to %.6g."""
    if float(v).is_integer() and abs(v) < 1e16:
        return int(v)
    return float("%.6g" % v)


def g9(v):
    """V through awk's "%.9g" (the shell report's products and
    differences)."""
    return float("%.9g" % v)


def median(vals):
    v = sorted(vals)
    m = len(v)
    if m == 0:
        return "-"
    return awk(v[m // 2] if m % 2 else (v[m // 2 - 1] + v[m // 2]) / 2)


def isnum(x):
    if isinstance(x, bool):
        return False
    if isinstance(x, (int, float)):
        return True
    return bool(_NUM.match(x or ""))


def tonum(x):
    return x if isinstance(x, (int, float)) else float(x)


class Figures:
    """Queries over one Results' records."""

    def __init__(self, results):
        self.res = results
        self.records = results.records
        self._by = {}
        for r in self.records:
            self._by.setdefault((r["wl"], r["sys"]), []).append(r)

    def rows(self, wl, sys):
        return self._by.get((wl, sys), [])

    def has(self, wl_prefix):
        return self.res.has_prefix(wl_prefix)

    def med(self, wl, sys, key):
        """The median of KEY over the runs, or the text saying why not."""
        rows = self.rows(wl, sys)
        if not rows:
            return "-"
        skipped = [r for r in rows if r["status"] == "skipped"]
        failed = [r for r in rows if r["status"] not in ("ok", "skipped")]
        if len(skipped) == len(rows):
            return "skipped: " + skipped[-1]["reason"]
        if failed:
            return "failed (%d of %d runs): %s" % (
                len(failed), len(rows) - len(skipped), failed[0]["reason"])
        vals = [num(r["values"][key]) for r in rows
                if r["status"] == "ok" and key in r["values"]]
        return median(vals)

    def _per_run(self, wl, sys, key):
        out = {}
        for r in self.rows(wl, sys):
            if r["status"] == "ok" and key in r["values"]:
                out[r["run"]] = num(r["values"][key])
        return out

    def ratio_of(self, wa, sa, wb, sb, key):
        """The median over the runs of SA's KEY in WA over SB's in WB in the
        same run, or "-"."""
        a = self._per_run(wa, sa, key)
        b = self._per_run(wb, sb, key)
        if (wa, sa) == (wb, sb):
            b = {}
        return median([a[r] / b[r] for r in a if r in b and b[r] > 0])

    def ratio_sys(self, wl, sa, sb, key):
        return self.ratio_of(wl, sa, wl, sb, key)

    def ratio_wl(self, wa, wb, sys, key):
        return self.ratio_of(wa, sys, wb, sys, key)

    def q(self, wl, sys, a, b):
        """The median over SYS's ok runs of WL of A / B, two keys of one
        run's record (requests per file: reqs / files), or "-"."""
        vals = []
        for r in self.rows(wl, sys):
            if r["status"] != "ok":
                continue
            x = r["values"]
            if a in x and b in x and num(x[b]) > 0:
                vals.append(num(x[a]) / num(x[b]))
        return median(vals)

    def ratio_best(self, wl, key):
        """pacefs's KEY over the best peer's (rclone, httpdirfs) in the same
        run, the median over the runs (a peer that failed a run did not beat
        pacefs there)."""
        a = self._per_run(wl, "pacefs", key)
        b = {}
        for peer in ("rclone", "httpdirfs"):
            for run, v in self._per_run(wl, peer, key).items():
                if run not in b or v > b[run]:
                    b[run] = v
        return median([a[r] / b[r] for r in a if r in b and b[r] > 0])

    def lowest(self, wl, sys, key):
        """The smallest KEY over the ok runs (a floor's estimate), or "-"."""
        v = self._per_run(wl, sys, key)
        return awk(min(v.values())) if v else "-"

    def vals(self, wl, sys, key, scale, fmt):
        """Every run's KEY / SCALE in FMT, comma-separated; "failed" and
        "skipped" where a run has no figure."""
        out = []
        for r in self.rows(wl, sys):
            if r["status"] == "skipped":
                out.append("skipped")
            elif r["status"] != "ok":
                out.append("failed")
            elif key in r["values"]:
                out.append(fmt % (num(r["values"][key]) / scale))
            else:
                out.append("")
        # joined as the shell report did: no separator while nothing is shown
        text = ""
        for v in out:
            text += ("" if text == "" else ", ") + v
        return text


# --- cells ------------------------------------------------------------------

def f(v, scale, fmt):
    """V / SCALE in FMT, or V itself when it is not a number (a failure)."""
    if isnum(v):
        return fmt % (tonum(v) / scale)
    return str(v)


def g(v, scale, fmt):
    """As f, but a failure is "-" (the row's first figure already says it)."""
    return f(v, scale, fmt) if isnum(v) else "-"


def gf(v, scale, fmt):
    """As g, but a failure is "failed", for a reference inside a sentence."""
    if isinstance(v, str) and v.startswith("failed"):
        return "failed"
    return g(v, scale, fmt)


def ratio(a, b, digits=2):
    """A / B as "1.23x", or "n/a"."""
    if isnum(a) and isnum(b) and tonum(b) > 0:
        return "%.*fx" % (digits, tonum(a) / tonum(b))
    return "n/a"


def qx(q):
    """A ratio already taken as "1.23x", or "n/a"."""
    return f(q, 1, "%.2f") + "x" if isnum(q) else "n/a"


def mul(a, b):
    return g9(tonum(a) * b) if isnum(a) else a


def sub(a, b):
    """A - B; A itself when A is not a number, "n/a" when B is not."""
    if not isnum(a):
        return a
    if not isnum(b):
        return "n/a"
    return g9(tonum(a) - tonum(b))


def div(a, b):
    """A / B through "%.9g", A itself when A is not a number."""
    if not isnum(a):
        return a
    return g9(tonum(a) / b)


def minnum(*vals):
    best = None
    for v in vals:
        if isnum(v) and (best is None or tonum(v) <= tonum(best)):
            best = v
    return "n/a" if best is None else best


def maxnum(*vals):
    best = None
    for v in vals:
        if isnum(v) and (best is None or tonum(v) >= tonum(best)):
            best = v
    return "n/a" if best is None else best


def yesno(cmp, a, b):
    """The verdict on pacefs's figure A against the bound B (cmp "ge" or
    "le"): a failed pacefs is NOT met, a failed reference cannot be judged,
    a skipped workload or one without records is not run."""
    if isinstance(a, str) and a.startswith("skipped:"):
        return "not run (%s)" % a[len("skipped: "):]
    if a == "-":
        return "not run (no figures in this run)"
    if not isnum(a):
        return "**NOT met** (pacefs failed)"
    if not isnum(b):
        return "n/a (the reference failed)"
    x, y = tonum(a), tonum(b)
    return "**met**" if (x >= y if cmp == "ge" else x <= y) else "**NOT met**"


def verdict_q(fig, cmp, q, bound, wl, key):
    """The verdict on a same-run ratio Q of pacefs's KEY in WL: pacefs's
    own median first (a failed pacefs is NOT met, no records not run),
    then a missing ratio is the reference's failure."""
    p = fig.med(wl, "pacefs", key)
    if not isnum(p):
        return yesno(cmp, p, bound)
    if isnum(q):
        return yesno(cmp, q, bound)
    return "n/a (the reference failed)"


LABELS = {
    "pacefs": "pacefs",
    "rclone": "rclone mount, --vfs-cache-mode full",
    "httpdirfs": "httpdirfs --cache",
    "curl1": "curl alone, one connection (limit)",
    "curl8": "curl, 8 parallel ranges (limit)",
    "curlfile": "curl alone, one connection, into a file (limit)",
    "dd": "dd of pacefs's data.mdb, 1 MiB blocks (limit)",
    "local": "local copy, in the page cache (floor)",
}


def label(sys):
    return LABELS.get(sys, sys)


def oname(o):
    return {"wan": "WAN origin", "near": "near origin"}.get(o, "loopback nginx")


def conns_cell(fig, wl, sys):
    """The connections of SYS in WL: "open, active (seen)", medians."""
    return "%s, %s (%s)" % (g(fig.med(wl, sys, "conns"), 1, "%.0f"),
                            g(fig.med(wl, sys, "conns_active"), 1, "%.0f"),
                            g(fig.med(wl, sys, "conns_seen"), 1, "%.0f"))

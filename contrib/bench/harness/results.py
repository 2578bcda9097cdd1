"""The bench's recorded results: one record per workload, system and run,
kept as JSON beside the report (results.json) so that the report can be
made again from them, and read back from the shell harness's raw.tsv and
settings.sh for runs made before.

A record is {"wl", "sys", "run", "status": ok|failed|skipped, "values":
{key: text}, "reason"}. Values stay text as the tools printed them; the
statistics convert them as awk did (a leading number, else 0), so that a
report made from an old raw.tsv shows the same figures as the shell
report did.
"""
import json
import os
import re
import shlex

FORMAT = 1  # results.json's version


def parse_line(line):
    """A tool's one-line answer ("ok k=v ...", "failed: why", "skipped:
    why") as (status, values, reason)."""
    line = (line or "").strip()
    if line.startswith("ok"):
        return "ok", parse_kv(line[2:]), ""
    if line.startswith("skipped:"):
        return "skipped", {}, line[len("skipped:"):].strip()
    if line.startswith("failed:"):
        line = line[len("failed:"):].strip()
    return "failed", {}, line.replace("\t", " ") or "no output"


def parse_kv(text):
    """"k=v k2=v2" as a dict, in order; a word without "=" is dropped."""
    out = {}
    for word in text.split():
        k, sep, v = word.partition("=")
        if sep:
            # "a=b=c" reads as b, as awk's split on "=" did
            out[k] = v.split("=")[0]
    return out


class Results:
    """The records of one bench invocation and what it ran with (meta:
    date, machine, versions, commit, the settings, quick or full)."""

    def __init__(self, meta=None, records=None):
        self.meta = meta or {}
        self.records = records or []

    def add(self, wl, sys, run, line, extra=""):
        status, values, reason = parse_line(line)
        if status == "ok" and extra:
            values.update(parse_kv(extra))
        rec = {"wl": wl, "sys": sys, "run": int(run), "status": status,
               "values": values, "reason": reason}
        self.records.append(rec)
        return rec

    def setting(self, name, default=None):
        """A setting of the run as a number where it is one."""
        v = self.meta.get("settings", {}).get(name, default)
        if isinstance(v, str) and re.fullmatch(r"-?\d+", v):
            return int(v)
        return v

    def has_prefix(self, prefix):
        return any(r["wl"].startswith(prefix) for r in self.records)

    def save(self, out):
        """results.json (the source for the report) and raw.tsv (one line
        a record, for grep) in the folder OUT."""
        os.makedirs(out, exist_ok=True)
        tmp = os.path.join(out, "results.json.tmp")
        with open(tmp, "w") as f:
            json.dump({"format": FORMAT, "meta": self.meta,
                       "records": self.records}, f, indent=1)
            f.write("\n")
        os.replace(tmp, os.path.join(out, "results.json"))
        with open(os.path.join(out, "raw.tsv"), "w") as f:
            for r in self.records:
                if r["status"] == "ok":
                    rest = " ".join(f"{k}={v}" for k, v in r["values"].items())
                else:
                    rest = r["reason"]
                f.write(f"{r['wl']}\t{r['sys']}\t{r['run']}\t{r['status']}\t{rest}\n")


def load(folder):
    """The results kept in FOLDER: results.json, or a shell run's raw.tsv
    and settings.sh."""
    path = os.path.join(folder, "results.json")
    if os.path.exists(path):
        with open(path) as f:
            d = json.load(f)
        return Results(d["meta"], d["records"])
    return load_legacy(folder)


# settings.sh's BENCH_* lines, and the meta keys they become
LEGACY_META = {"BENCH_DATE": "date", "BENCH_MACHINE": "machine",
               "BENCH_VERSIONS": "versions", "BENCH_COMMIT": "commit",
               "BENCH_DROP_OK": "drop_ok", "BENCH_SECS": "secs",
               "BENCH_RUNS": "runs", "BENCH_LOAD": "load"}


def load_legacy(folder):
    meta = {"settings": {}, "harness": "run.sh"}
    with open(os.path.join(folder, "settings.sh")) as f:
        for line in f:
            words = shlex.split(line)
            if len(words) != 2 or words[0] != "export" or "=" not in words[1]:
                continue
            k, _, v = words[1].partition("=")
            if k in LEGACY_META:
                meta[LEGACY_META[k]] = int(v) if k in ("BENCH_SECS", "BENCH_RUNS", "BENCH_DROP_OK") else v
            else:
                meta["settings"][k] = v
    res = Results(meta)
    with open(os.path.join(folder, "raw.tsv")) as f:
        for line in f:
            p = line.rstrip("\n").split("\t")
            if len(p) < 4:
                continue
            rest = p[4] if len(p) > 4 else ""
            status = p[3]
            rec = {"wl": p[0], "sys": p[1], "run": int(p[2]), "status": status,
                   "values": parse_kv(rest) if status == "ok" else {},
                   "reason": "" if status == "ok" else rest}
            res.records.append(rec)
    return res

"""The bench's workloads, registered in one place: MODULES, in the order they
run and appear in the report.

A workload module holds one idea and answers to the runner and the report
through module-level names, every one optional but WORKLOADS:

  WORKLOADS   {name: run(b)}: the names BENCH_ONLY and --only select; run
              makes every run of every system (b.run_range(), SYSTEMS) and
              records each result with b.record(wl, system, run, line)
  gen(b)      makes the files its wanted workloads read (b.need, b.gen),
              before the origins start
  targets(rep)    rows of the targets table: "| target | measured | verdict |"
  headline(rep)   bullet lines of the report's headline
  sections(rep)   the report's lines for its own section(s)
  plots(rep)      [(name, "width,height", gnuplot script)]
  caveats(rep)    bullet lines of the caveats
  NEEDS       programs it runs beyond the runner's (checked before a run)
  NOISE       {record's workload name (fnmatch pattern): its figure} for the
              noise table
  readme_rows(rep)  {key: row} for the README's headline table (README_ROWS
              in harness/report.py orders them)

contrib/bench/README.md walks through adding one.
"""
from . import (archive, datasets, faults, fio, latency, loader, memory, plan, player, readers,
               realclients, s3sig, scale, seq, tier)

MODULES = [seq, latency, player, realclients, archive, datasets, faults, readers, loader, plan, fio,
           tier, s3sig, memory, scale]


def names():
    """Every workload name, in order."""
    return [n for m in MODULES for n in m.WORKLOADS]

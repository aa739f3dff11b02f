#!/usr/bin/env python3
"""Reads ringtrain traces (trace-rank<R>.json) and says, per rank, how the gradient reductions overlapped
backward: for each traced step, each bucket's reduction span against that step's backward span.

Usage: perf/trace_overlap.py RUN_DIR
Prints per rank: steps traced, buckets per step, mean backward and exposed-wait time, mean reduction time per
bucket, the share of all reduction time that fell inside backward, and how many buckets started before
backward ended (in flight while backward computed) and how many also finished before it ended.
"""
import json
import pathlib
import statistics
import sys
from collections import defaultdict


def main(run_dir):
    files = sorted(pathlib.Path(run_dir).glob("trace-rank*.json"))
    if not files:
        sys.exit(f"no trace-rank*.json in {run_dir}: run with --set run.trace=true")
    for f in files:
        spans = defaultdict(lambda: defaultdict(list))
        for e in json.loads(f.read_text())["traceEvents"]:
            if e.get("ph") == "X":
                spans[e["args"]["step"]][e["name"]].append((e["ts"], e["ts"] + e["dur"], e["tid"]))
        steps = [s for s in spans if s >= 0 and spans[s]["backward"] and spans[s]["allreduce"]]
        if not steps:
            print(f"{f.name}: no step holds both a backward and a reduction span (a 1-rank run reduces nothing); "
                  "nothing to measure")
            continue
        inside = total = started = finished = count = 0.0
        per_bucket = defaultdict(list)
        for s in steps:
            b0, b1, _ = spans[s]["backward"][-1]
            for r0, r1, tid in spans[s]["allreduce"]:
                total += r1 - r0
                inside += max(0.0, min(r1, b1) - max(r0, b0))
                started += r0 < b1
                finished += r1 <= b1
                count += 1
                per_bucket[tid].append(r1 - r0)
        mean = lambda name: statistics.mean(x[1] - x[0] for s in steps for x in spans[s][name]) / 1e3
        print(f"{f.name}: {len(steps)} steps, {len(per_bucket)} buckets per step; backward {mean('backward'):.1f} ms, "
              f"exposed wait {mean('allreduce_wait'):.1f} ms per step")
        for tid in sorted(per_bucket):
            print(f"  bucket {tid - 100}: reduction {statistics.mean(per_bucket[tid]) / 1e3:.1f} ms (mean)")
        print(f"  {100 * inside / max(total, 1e-9):.0f} % of reduction time inside backward; "
              f"{int(started)}/{int(count)} reductions started before backward ended, {int(finished)} also finished")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        sys.exit(0)
    main(sys.argv[1] if len(sys.argv) > 1 else ".")

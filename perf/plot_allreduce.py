#!/usr/bin/python3
"""Plots bus bandwidth against message size from ringtrain-bench's all-reduce JSON (--benchmark_out of
`mpirun -np 2 build/bin/ringtrain-bench --benchmark_filter=Allreduce --benchmark_repetitions=3`): the median of
the repetitions of BM_MpiAllreduce and of each BM_OurAllreduce variant.

Usage: perf/plot_allreduce.py BENCH.json OUT.png   (Debian python3 with python3-matplotlib)
"""
import json
import statistics
import sys
from collections import defaultdict

if __name__ == "__main__" and len(sys.argv) != 3:
    sys.exit(__doc__)

import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

LABELS = {"0": "ours, 1 MiB buckets, MPI_Iallreduce", "1": "ours, 1 MiB buckets, comm thread"}


def series_of(name):
    parts = name.split("/")
    if parts[0] == "BM_MpiAllreduce":
        return "MPI_Allreduce", int(parts[1])
    bytes_, bucket_kib, reducer = parts[1:4]
    label = LABELS[reducer] if bucket_kib == "1024" else f"ours, {int(bucket_kib) // 1024} MiB buckets, MPI_Iallreduce"
    return label, int(bytes_)


def main(path, out):
    runs = json.load(open(path))["benchmarks"]
    points = defaultdict(lambda: defaultdict(list))
    for b in runs:
        if b.get("run_type") != "iteration" or "busbw_GBps" not in b:
            continue
        label, size = series_of(b["run_name"])
        points[label][size].append(b["busbw_GBps"])
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for label, by_size in sorted(points.items()):
        sizes = sorted(by_size)
        ax.plot([s / 2**20 for s in sizes], [statistics.median(by_size[s]) for s in sizes], marker="o", label=label)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("message size (MiB)")
    ax.set_ylabel("bus bandwidth (GB/s), median of repetitions")
    ax.set_title("All-reduce, 2 ranks on the 2-core VM (shared memory)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])

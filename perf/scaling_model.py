#!/usr/bin/env python3
"""Alpha-beta model of data-parallel training with ring all-reduce: predicts step time and weak-scaling
efficiency at N ranks from one run's compute time per step, its gradient bytes and a link description.

  ring all-reduce of S bytes on N ranks over links of bandwidth B (bytes/s) and latency alpha (s):
      T_ar(N) = 2 (N-1)/N * S/B + 2 (N-1) * alpha * buckets
  the backward pass can hide part of it (overlap = fraction of backward time usable for communication):
      T_step(N) = T_compute + max(0, T_ar(N) - overlap * T_backward)
      efficiency(N) = T_compute / T_step(N)          (weak scaling: per-rank batch fixed)

  perf/scaling_model.py --metrics RUN/metrics.jsonl --link ib400
  perf/scaling_model.py --compute-ms 171 --backward-ms 114 --params 25557032 --link ib400 --overlap 1
"""
import argparse
import json
import sys
from dataclasses import dataclass

# Per-rank bottleneck link of a flat ring: one NIC (or NVLink port group) per GPU. Bandwidths are the
# nominal line rates in bytes/s; latencies are typical end-to-end small-message figures, not measured here.
LINKS = {
    "ib100": (100e9 / 8, 2e-6),   # HDR100 / EDR InfiniBand
    "ib200": (200e9 / 8, 2e-6),   # HDR InfiniBand
    "ib400": (400e9 / 8, 2e-6),   # NDR InfiniBand
    "nvlink": (450e9, 1e-6),      # H100 NVLink 4, one direction (900 GB/s both ways)
}

DEFAULT_RANKS = [8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096]


@dataclass
class Workload:
    compute_s: float       # time per step without communication (data wait + forward + backward + optimizer)
    backward_s: float      # the part of compute_s that all-reduce can overlap with
    gradient_bytes: float  # bytes all-reduced per step


@dataclass
class Link:
    bandwidth: float       # bytes/s
    latency: float         # s per message hop
    name: str = "custom"


def ring_allreduce_s(ranks, nbytes, link, buckets=1):
    if ranks <= 1:
        return 0.0
    return 2.0 * (ranks - 1) / ranks * nbytes / link.bandwidth + 2.0 * (ranks - 1) * link.latency * buckets


def predict(ranks, work, link, overlap=0.0, buckets=1):
    """One point: all-reduce time, the part of it left exposed, step time and efficiency."""
    allreduce = ring_allreduce_s(ranks, work.gradient_bytes, link, buckets)
    exposed = max(0.0, allreduce - overlap * work.backward_s)
    step = work.compute_s + exposed
    return {"ranks": ranks, "allreduce_s": allreduce, "exposed_s": exposed, "step_s": step,
            "efficiency": work.compute_s / step}


def first_below(points, threshold=0.9):
    """The smallest rank count whose efficiency is below threshold, or None."""
    for p in points:
        if p["efficiency"] < threshold:
            return p["ranks"]
    return None


def workload_from_metrics(path):
    """Compute time per step and gradient bytes from a run's metrics.jsonl (its last epoch record)."""
    records = [json.loads(line) for line in open(path) if line.strip()]
    jobs = [r for r in records if r.get("kind") == "job"]
    epochs = [r for r in records if r.get("kind") == "epoch"]
    if not jobs or not epochs:
        raise SystemExit(f"{path}: needs a job record and at least one epoch record")
    e = epochs[-1]
    steps = e["steps"]
    compute = (e["data_wait_s"] + e["forward_s"] + e["backward_s"] + e["optimizer_s"]) / steps
    return Workload(compute_s=compute, backward_s=e["backward_s"] / steps, gradient_bytes=4.0 * jobs[-1]["params"])


def parse_link(args):
    if args.bandwidth_gbps is not None:
        return Link(args.bandwidth_gbps * 1e9 / 8, (args.latency_us or 0.0) * 1e-6, f"{args.bandwidth_gbps:g} Gb/s")
    bandwidth, latency = LINKS[args.link]
    if args.latency_us is not None:
        latency = args.latency_us * 1e-6
    return Link(bandwidth, latency, args.link)


def table(points):
    lines = ["| GPUs | all-reduce ms | exposed ms | step ms | efficiency |", "|---:|---:|---:|---:|---:|"]
    for p in points:
        lines.append(f"| {p['ranks']} | {p['allreduce_s'] * 1e3:.2f} | {p['exposed_s'] * 1e3:.2f} | "
                     f"{p['step_s'] * 1e3:.2f} | {p['efficiency'] * 100:.1f} % |")
    return "\n".join(lines)


def plot(curves, references, png):
    """curves: [(label, points)]; references: [(ranks, efficiency, label)] published measurements."""
    try:
        import matplotlib
    except ImportError:
        raise SystemExit(f"scaling_model: {sys.executable} has no matplotlib; install python3-matplotlib and use "
                         "Debian's /usr/bin/python3")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.8))
    for label, points in curves:
        ax.plot([p["ranks"] for p in points], [p["efficiency"] * 100 for p in points], marker="o", label=label)
    for ranks, eff, label in references:
        ax.scatter([ranks], [eff * 100], marker="*", s=160, zorder=5, label=label)
    ax.axhline(90, color="grey", linestyle=":", linewidth=1)
    ax.set_xscale("log", base=2)
    ax.set(xlabel="GPUs", ylabel="weak-scaling efficiency, %", title="ring all-reduce model")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(png, dpi=110)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    src = ap.add_argument_group("workload (from a run, or given)")
    src.add_argument("--metrics", help="a run's metrics.jsonl")
    src.add_argument("--compute-ms", type=float, help="compute time per step, ms")
    src.add_argument("--backward-ms", type=float, help="backward time per step, ms (default 2/3 of compute)")
    src.add_argument("--params", type=float, help="gradient floats (fp32: 4 bytes each)")
    ln = ap.add_argument_group("link")
    ln.add_argument("--link", choices=sorted(LINKS), default="ib400")
    ln.add_argument("--bandwidth-gbps", type=float, help="custom link bandwidth, Gb/s (overrides --link)")
    ln.add_argument("--latency-us", type=float, help="link latency, microseconds")
    ap.add_argument("--overlap", type=float, default=1.0,
                    help="fraction of backward time all-reduce can hide behind (0: none, 1: all of it)")
    ap.add_argument("--buckets", type=int, default=1, help="all-reduce calls per step (latency paid per call)")
    ap.add_argument("--ranks", default=",".join(map(str, DEFAULT_RANKS)), help="comma-separated rank counts")
    ap.add_argument("--json", action="store_true", help="print JSON instead of a table")
    ap.add_argument("--plot", help="also write this PNG: efficiency against GPUs, overlap 0 and the given one")
    ap.add_argument("--reference", action="append", default=[],
                    help="RANKS:EFFICIENCY:LABEL, a published point to draw next to the curves (with --plot)")
    args = ap.parse_args(argv)

    if args.metrics:
        work = workload_from_metrics(args.metrics)
    elif args.compute_ms is not None and args.params is not None:
        backward = args.backward_ms if args.backward_ms is not None else args.compute_ms * 2 / 3
        work = Workload(args.compute_ms / 1e3, backward / 1e3, 4.0 * args.params)
    else:
        ap.error("give --metrics RUN/metrics.jsonl, or --compute-ms and --params")
    if not 0.0 <= args.overlap <= 1.0:
        ap.error("--overlap is a fraction in [0, 1]")
    link = parse_link(args)
    points = [predict(int(n), work, link, args.overlap, args.buckets) for n in args.ranks.split(",")]
    below = first_below(points)
    if args.plot:
        curves = [(f"overlap {args.overlap:g}, {args.buckets} bucket(s)", points)]
        if args.overlap != 0:
            curves.append(("overlap 0", [predict(p["ranks"], work, link, 0.0, args.buckets) for p in points]))
        refs = []
        for item in args.reference:
            ranks, eff, label = item.split(":", 2)
            refs.append((int(ranks), float(eff), label))
        plot(curves, refs, args.plot)
    if args.json:
        json.dump({"link": vars(link), "workload": vars(work), "overlap": args.overlap, "points": points,
                   "below_90_at": below}, sys.stdout, indent=1)
        print()
        return 0
    print(f"workload: compute {work.compute_s * 1e3:.2f} ms/step (backward {work.backward_s * 1e3:.2f} ms), "
          f"gradients {work.gradient_bytes / 1e6:.1f} MB; link {link.name}: {link.bandwidth * 8 / 1e9:g} Gb/s, "
          f"latency {link.latency * 1e6:g} us; overlap {args.overlap:g}, {args.buckets} bucket(s)")
    print(table(points))
    print(f"efficiency drops below 90 % at {below} GPUs" if below else
          f"efficiency stays at or above 90 % up to {points[-1]['ranks']} GPUs")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Scaling report from ringtrain run directories: a Markdown table and a PNG of samples/s, speedup and
efficiency against ranks, with the time per step split into compute, exposed all-reduce and data wait.

  perf/scaling_report.py [--out perf/results/NAME] [--label DIR=TEXT ...] RUN_DIR...

Speedup and efficiency are against --baseline (default: the first run with the fewest ranks):
speedup = samples/s / baseline samples/s, efficiency = speedup / (ranks / baseline ranks).
Reads each run's last epoch record of metrics.jsonl; fields other helpers add later are ignored.
"""
import argparse
import json
import os
import sys


def load_point(run_dir, label=None):
    path = os.path.join(run_dir, "metrics.jsonl")
    try:
        records = [json.loads(line) for line in open(path) if line.strip()]
    except OSError as e:
        raise SystemExit(f"scaling_report: cannot read {path}: {e.strerror}")
    epochs = [r for r in records if r.get("kind") == "epoch"]
    if not epochs:
        raise SystemExit(f"scaling_report: {path} has no epoch record (did the run finish an epoch?)")
    e = epochs[-1]
    steps = e["steps"]
    return {
        "label": label or os.path.basename(os.path.normpath(run_dir)),
        "ranks": e["ranks"],
        "global_batch": e["global_batch"],
        "samples_per_s": e["samples_per_s"],
        "step_ms": e["epoch_train_s"] / steps * 1e3 if "epoch_train_s" in e else None,
        "compute_ms": (e["forward_s"] + e["backward_s"] + e["optimizer_s"]) / steps * 1e3,
        "allreduce_ms": e["allreduce_s"] / steps * 1e3,
        "data_wait_ms": e["data_wait_s"] / steps * 1e3,
    }


def add_speedup(points, base=None):
    base = base or min(points, key=lambda p: p["ranks"])
    for p in points:
        p["speedup"] = p["samples_per_s"] / base["samples_per_s"]
        p["efficiency"] = p["speedup"] / (p["ranks"] / base["ranks"])
    return base


def markdown(points, base):
    rows = [f"Baseline: {base['label']} ({base['ranks']} rank{'s' if base['ranks'] > 1 else ''}). "
            "Times are per step and per rank (mean over ranks).", "",
            "| run | ranks | global batch | samples/s | speedup | efficiency | step ms | compute ms | "
            "exposed all-reduce ms | data wait ms |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for p in points:
        step = f"{p['step_ms']:.1f}" if p["step_ms"] is not None else "-"
        rows.append(f"| {p['label']} | {p['ranks']} | {p['global_batch']} | {p['samples_per_s']:.0f} | "
                    f"{p['speedup']:.2f} | {p['efficiency'] * 100:.0f} % | {step} | {p['compute_ms']:.1f} | "
                    f"{p['allreduce_ms']:.1f} | {p['data_wait_ms']:.1f} |")
    return "\n".join(rows) + "\n"


def plot(points, png):
    try:
        import matplotlib
    except ImportError:
        raise SystemExit(f"scaling_report: {sys.executable} has no matplotlib for the plot; install python3-matplotlib "
                         "and run this with Debian's /usr/bin/python3 (the table above is complete)")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_rate, ax_eff, ax_split) = plt.subplots(1, 3, figsize=(16, 4.8))
    for p in points:
        ax_rate.scatter(p["ranks"], p["samples_per_s"], s=40)
        ax_rate.annotate(p["label"], (p["ranks"], p["samples_per_s"]), fontsize=7, xytext=(4, 2),
                         textcoords="offset points")
        ax_eff.scatter(p["ranks"], p["speedup"], marker="o", color="tab:blue")
        ax_eff.scatter(p["ranks"], p["efficiency"], marker="s", color="tab:orange")
        ax_eff.annotate(p["label"], (p["ranks"], p["efficiency"]), fontsize=7, xytext=(4, -8),
                        textcoords="offset points")
    ranks = sorted({p["ranks"] for p in points})
    ax_eff.plot(ranks, [r / ranks[0] for r in ranks], "k:", linewidth=1, label="ideal speedup")
    ax_eff.scatter([], [], marker="o", color="tab:blue", label="speedup")
    ax_eff.scatter([], [], marker="s", color="tab:orange", label="efficiency")
    ax_eff.legend(fontsize=8)
    ax_rate.set(xlabel="ranks", ylabel="samples/s", title="throughput")
    ax_eff.set(xlabel="ranks", ylabel="x / fraction", title="speedup and efficiency")
    labels = [f"{p['label']}\n({p['ranks']} r)" for p in points]
    bottom = [0.0] * len(points)
    for key, name in (("compute_ms", "compute"), ("allreduce_ms", "exposed all-reduce"), ("data_wait_ms", "data wait")):
        values = [p[key] for p in points]
        ax_split.bar(labels, values, bottom=bottom, label=name)
        bottom = [b + v for b, v in zip(bottom, values)]
    ax_split.set(ylabel="ms per step", title="time per step")
    ax_split.tick_params(axis="x", labelsize=7, rotation=20)
    ax_split.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(png, dpi=110)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", help="run directories (each with metrics.jsonl)")
    ap.add_argument("--out", help="write OUT.md and OUT.png (default: table on stdout only)")
    ap.add_argument("--label", action="append", default=[], help="DIR=TEXT: a run's name in the table")
    ap.add_argument("--baseline", help="the run directory speedup is measured against")
    args = ap.parse_args(argv)
    labels = dict(item.split("=", 1) for item in args.label)
    points = [load_point(d, labels.get(d)) for d in args.runs]
    if args.baseline and args.baseline not in args.runs:
        ap.error("--baseline must be one of the run directories")
    base = add_speedup(points, points[args.runs.index(args.baseline)] if args.baseline else None)
    text = markdown(points, base)
    print(text, end="")
    if args.out:
        with open(args.out + ".md", "w") as f:
            f.write(text)
        plot(points, args.out + ".png")
        print(f"wrote {args.out}.md and {args.out}.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())

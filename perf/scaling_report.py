#!/usr/bin/env python3
"""Scaling report from ringtrain run directories: a Markdown table and a PNG of samples/s, speedup and
efficiency, the time per step split into compute, exposed all-reduce and data wait, and the accuracy half of a
scaling study: final test accuracy against the global batch, one line per optimizer, with the spread over seeds.

  perf/scaling_report.py [--out perf/results/NAME] [--label DIR=TEXT ...] [--x ranks|global_batch]
                         [--target-acc A] RUN_DIR...

Each run's samples/s is its last timed epoch's rate after run.timing_warmup_steps (steady_samples_per_s), so every
point excludes the same warm-up; where that epoch had no step past it, the epoch's own rate, and for records of an
older ringtrain the job's average (the `rate` column says which). Times per step divide the epoch's seconds by the
steps it ran in its launch (a resumed or requeued epoch's record times only those).
Speedup and efficiency are against --baseline (default: the first run with the fewest ranks):
speedup = samples/s / baseline samples/s, efficiency = speedup / (ranks / baseline ranks). --x global_batch puts
the global batch on the throughput and efficiency panels' axis (a study that grows the batch by accumulation on a
fixed number of ranks). --target-acc: the epoch in which each run first reached that test accuracy.
Reads each run's epoch records and job record of metrics.jsonl; fields other helpers add later are ignored.
"""
import argparse
import json
import os
import sys


def load_point(run_dir, label=None):
    path = os.path.join(run_dir, "metrics.jsonl")
    try:
        lines = open(path).read().splitlines()
    except OSError as e:
        raise SystemExit(f"scaling_report: cannot read {path}: {e.strerror}")
    records = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:  # a line a killed job left half written; --resume trims it, a report skips it
            print(f"scaling_report: {path}:{number} is not a whole JSON record; skipped", file=sys.stderr)
    epochs = [r for r in records if r.get("kind") == "epoch"]
    if not epochs:
        raise SystemExit(f"scaling_report: {path} has no epoch record (did the run finish an epoch?)")
    e = epochs[-1]
    # The last epoch that ran steps in its own launch: a run resumed at an epoch's end records that one untimed.
    timed = next((r for r in reversed(epochs) if r.get("steps_run", r["steps"]) > 0 and r.get("epoch_samples_per_s")),
                 e)
    steps = max(timed.get("steps_run", timed["steps"]), 1)
    rate, rate_kind = next(((timed[k], name) for k, name in (("steady_samples_per_s", "steady"),
                                                           ("epoch_samples_per_s", "epoch"))
                            if timed.get(k) is not None), (e["samples_per_s"], "job average"))
    job = next((r for r in records if r.get("kind") == "job"), {})
    return {
        "label": label or os.path.basename(os.path.normpath(run_dir)),
        "optimizer": job.get("optimizer", "sgd"),
        "test_acc": e.get("test_acc"),
        "best_test_acc": max((r["test_acc"] for r in epochs if r.get("test_acc") is not None), default=None),
        "epochs_run": e.get("epoch"),
        "acc_by_epoch": [(r.get("epoch"), r.get("test_acc")) for r in epochs],
        "ranks": e["ranks"],
        "global_batch": e["global_batch"],
        "samples_per_s": rate,
        "rate": rate_kind,
        "step_ms": timed["epoch_train_s"] / steps * 1e3 if "epoch_train_s" in timed else None,
        "compute_ms": (timed["forward_s"] + timed["backward_s"] + timed["optimizer_s"]) / steps * 1e3,
        "allreduce_ms": timed["allreduce_s"] / steps * 1e3,
        "data_wait_ms": timed["data_wait_s"] / steps * 1e3,
    }


def epochs_to(point, target):
    """The first epoch whose test accuracy reached `target`, or None."""
    return next((epoch for epoch, acc in point["acc_by_epoch"] if acc is not None and acc >= target), None)


def accuracy_groups(points, target=None):
    """Runs of one optimizer and global batch (the seeds of a study), with the mean and range of their final test
    accuracy, and how many reached `target` and in how many epochs (mean over those that did)."""
    groups = {}
    for p in points:
        if p["test_acc"] is not None:
            groups.setdefault((p["optimizer"], p["global_batch"]), []).append(p)
    out = []
    for (optimizer, batch), runs in sorted(groups.items()):
        accs = [r["test_acc"] for r in runs]
        reached = [epochs_to(r, target) for r in runs] if target is not None else []
        reached = [e for e in reached if e is not None]
        out.append({"optimizer": optimizer, "global_batch": batch, "runs": len(runs),
                    "mean_acc": sum(accs) / len(accs), "min_acc": min(accs), "max_acc": max(accs),
                    "reached": len(reached), "mean_epochs": sum(reached) / len(reached) if reached else None,
                    "samples_per_s": sum(r["samples_per_s"] for r in runs) / len(runs)})
    return out


def add_speedup(points, base=None):
    base = base or min(points, key=lambda p: p["ranks"])
    for p in points:
        p["speedup"] = p["samples_per_s"] / base["samples_per_s"]
        p["efficiency"] = p["speedup"] / (p["ranks"] / base["ranks"])
    return base


def mixed_rates_note(points, base):
    """A warning where a point's rate is another kind than the baseline's: a weak-scaling study's largest points run
    the fewest steps an epoch, and one whose epoch ends inside run.timing_warmup_steps has only the epoch's own rate,
    warm-up included, so its speedup and efficiency compare unlike figures. "" when every rate is alike."""
    unlike = [p["label"] for p in points if p["rate"] != base["rate"]]
    if not unlike:
        return ""
    return (f"**Warning: unlike rates.** The baseline's samples/s is `{base['rate']}`, but {', '.join(unlike)} "
            f"{'has' if len(unlike) == 1 else 'have'} another kind (the `rate` column): their speedup and efficiency "
            "mix a rate with the warm-up and one without. Give every point epochs of more steps than "
            "run.timing_warmup_steps (more samples, or train.max_steps_per_epoch with several epochs).")


def fmt_acc(value):
    return f"{value:.4f}" if value is not None else "-"


def markdown(points, base, target=None):
    note = mixed_rates_note(points, base)
    rows = ([note, ""] if note else []) + [
            f"Baseline: {base['label']} ({base['ranks']} rank{'s' if base['ranks'] > 1 else ''}). "
            "Times are per step and per rank (mean over ranks), from each run's last timed epoch.", "",
            "| run | ranks | global batch | optimizer | samples/s | rate | speedup | efficiency | step ms | compute ms | "
            "exposed all-reduce ms | data wait ms | test acc | epochs |",
            "|---|---:|---:|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for p in points:
        step = f"{p['step_ms']:.1f}" if p["step_ms"] is not None else "-"
        rows.append(f"| {p['label']} | {p['ranks']} | {p['global_batch']} | {p['optimizer']} | "
                    f"{p['samples_per_s']:.0f} | {p['rate']} | {p['speedup']:.2f} | {p['efficiency'] * 100:.0f} % | {step} | "
                    f"{p['compute_ms']:.1f} | {p['allreduce_ms']:.1f} | {p['data_wait_ms']:.1f} | "
                    f"{fmt_acc(p['test_acc'])} | {p['epochs_run']} |")
    groups = accuracy_groups(points, target)
    if groups:
        reach = f" | reached {target} | epochs to {target} (mean of those that reached it)" if target is not None else ""
        rows += ["", "Final test accuracy per optimizer and global batch, over the runs (seeds) of each:", "",
                 "| optimizer | global batch | runs | mean | min | max | samples/s" + reach + " |",
                 "|---|---:|---:|---:|---:|---:|---:" + ("|---:|---:" if target is not None else "") + "|"]
        for g in groups:
            row = (f"| {g['optimizer']} | {g['global_batch']} | {g['runs']} | {g['mean_acc']:.4f} | "
                   f"{g['min_acc']:.4f} | {g['max_acc']:.4f} | {g['samples_per_s']:.0f}")
            if target is not None:
                epochs = f"{g['mean_epochs']:.1f}" if g["mean_epochs"] is not None else "-"
                row += f" | {g['reached']} of {g['runs']} | {epochs}"
            rows.append(row + " |")
    return "\n".join(rows) + "\n"


def plot_accuracy(ax, groups):
    for optimizer in sorted({g["optimizer"] for g in groups}):
        mine = [g for g in groups if g["optimizer"] == optimizer]
        batches = [g["global_batch"] for g in mine]
        mean = [g["mean_acc"] for g in mine]
        spread = [[g["mean_acc"] - g["min_acc"] for g in mine], [g["max_acc"] - g["mean_acc"] for g in mine]]
        ax.errorbar(batches, mean, yerr=spread, marker="o", capsize=3, label=optimizer)
    ax.set_xscale("log", base=2)
    ax.set(xlabel="global batch", ylabel="final test accuracy", title="accuracy (bars: min to max over seeds)")
    if groups:
        ax.legend(fontsize=8)


def plot(points, png, x="ranks", target=None):
    try:
        import matplotlib
    except ImportError:
        raise SystemExit(f"scaling_report: {sys.executable} has no matplotlib for the plot; install python3-matplotlib "
                         "and run this with Debian's /usr/bin/python3 (the table above is complete)")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_rate, ax_eff, ax_split, ax_acc) = plt.subplots(1, 4, figsize=(21, 4.8))
    label_points = len(points) <= 12  # a study's dozens of runs would bury the markers under their names
    for p in points:
        ax_rate.scatter(p[x], p["samples_per_s"], s=40)
        ax_eff.scatter(p[x], p["speedup"], marker="o", color="tab:blue")
        ax_eff.scatter(p[x], p["efficiency"], marker="s", color="tab:orange")
        if label_points:
            ax_rate.annotate(p["label"], (p[x], p["samples_per_s"]), fontsize=7, xytext=(4, 2),
                             textcoords="offset points")
            ax_eff.annotate(p["label"], (p[x], p["efficiency"]), fontsize=7, xytext=(4, -8),
                            textcoords="offset points")
    if x == "ranks":
        ranks = sorted({p["ranks"] for p in points})
        ax_eff.plot(ranks, [r / ranks[0] for r in ranks], "k:", linewidth=1, label="ideal speedup")
    else:
        ax_rate.set_xscale("log", base=2)
        ax_eff.set_xscale("log", base=2)
    ax_eff.scatter([], [], marker="o", color="tab:blue", label="speedup")
    ax_eff.scatter([], [], marker="s", color="tab:orange", label="efficiency")
    ax_eff.legend(fontsize=8)
    axis = "ranks" if x == "ranks" else "global batch"
    ax_rate.set(xlabel=axis, ylabel="samples/s", title="throughput")
    ax_eff.set(xlabel=axis, ylabel="x / fraction", title="speedup and efficiency")
    plot_accuracy(ax_acc, accuracy_groups(points, target))
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
    ap.add_argument("--x", choices=("ranks", "global_batch"), default="ranks",
                    help="the throughput and efficiency panels' axis")
    ap.add_argument("--target-acc", type=float, help="report the epoch each run first reached this test accuracy")
    args = ap.parse_args(argv)
    labels = dict(item.split("=", 1) for item in args.label)
    points = [load_point(d, labels.get(d)) for d in args.runs]
    if args.baseline and args.baseline not in args.runs:
        ap.error("--baseline must be one of the run directories")
    base = add_speedup(points, points[args.runs.index(args.baseline)] if args.baseline else None)
    text = markdown(points, base, args.target_acc)
    print(text, end="")
    if args.out:
        with open(args.out + ".md", "w") as f:
            f.write(text)
        plot(points, args.out + ".png", args.x, args.target_acc)
        print(f"wrote {args.out}.md and {args.out}.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())

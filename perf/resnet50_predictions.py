#!/usr/bin/env python3
"""The scaling model's predictions for ResNet-50 (fp32 gradients) at 8..4096 GPUs, from the measured H100 run
(perf/results/2026-11-23-gpu-h100/ringtrain-resnet50-tf32-metrics.jsonl: compute time per step, backward
time, parameter count), under several link and overlap assumptions; a Markdown table and a PNG with the
published reference points.

  perf/resnet50_predictions.py [--metrics FILE] --out perf/results/NAME
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import scaling_model as sm  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_METRICS = os.path.join(HERE, "results", "2026-11-23-gpu-h100", "ringtrain-resnet50-tf32-metrics.jsonl")

# (label, link preset, latency override in s or None, overlap, buckets)
SCENARIOS = [
    ("ib400, no overlap, 1 fused all-reduce", "ib400", None, 0.0, 1),
    ("ib400, full overlap, 1 fused all-reduce", "ib400", None, 1.0, 1),
    ("ib400, no overlap, alpha 10 us", "ib400", 10e-6, 0.0, 1),
    ("ib400, full overlap, 66 buckets (as the H100 run reduced them), each a ring", "ib400", None, 1.0, 66),
    ("ib100, no overlap", "ib100", None, 0.0, 1),
    ("nvlink, no overlap", "nvlink", None, 0.0, 1),
]

# Published measurements, as the issue states them (different models, GPUs and networks: context, not a fit).
REFERENCES = [
    (512, 0.90, "Horovod: 90 % at 512 GPUs (ResNet-101)"),
    (256, 0.90, "Goyal et al.: ~90 % from 8 to 256 GPUs (ResNet-50)"),
]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--metrics", default=DEFAULT_METRICS)
    ap.add_argument("--out", required=True, help="write OUT.md and OUT.png")
    args = ap.parse_args(argv)
    work = sm.workload_from_metrics(args.metrics)
    curves, lines = [], []
    lines.append(f"Workload from `{os.path.relpath(args.metrics)}`: compute {work.compute_s * 1e3:.1f} ms/step "
                 f"(data wait + forward + backward + optimizer, per-step mean of the epoch record; backward "
                 f"{work.backward_s * 1e3:.1f} ms), gradients {work.gradient_bytes / 1e6:.1f} MB (fp32).\n")
    header = "| scenario | " + " | ".join(str(n) for n in sm.DEFAULT_RANKS) + " | below 90 % at |"
    lines += [header, "|---|" + "---:|" * (len(sm.DEFAULT_RANKS) + 1)]
    for label, preset, latency, overlap, buckets in SCENARIOS:
        bandwidth, alpha = sm.LINKS[preset]
        link = sm.Link(bandwidth, latency if latency is not None else alpha, preset)
        points = [sm.predict(n, work, link, overlap, buckets) for n in sm.DEFAULT_RANKS]
        curves.append((label, points))
        below = sm.first_below(points)
        lines.append(f"| {label} | " + " | ".join(f"{p['efficiency'] * 100:.1f}" for p in points) +
                     f" | {below if below else 'never (to 4096)'} |")
    text = "\n".join(lines) + "\n"
    with open(args.out + ".md", "w") as f:
        f.write(text)
    sm.plot(curves, REFERENCES, args.out + ".png")
    print(text, end="")
    print(f"wrote {args.out}.md and {args.out}.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())

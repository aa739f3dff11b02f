#!/usr/bin/env python3
"""Owns the CPU model comparison: MobileNetV2 (jobs/mobilenet_v2.toml) or ViT-S/16 (jobs/vit_s16.toml) trained at a
small resolution on synthetic 1000-class images by ringtrain's CPU twin, PyTorch (torchvision's models; eager, NCHW
and channels-last: perf/frameworks/torch_models_cpu.py) and Keras on TensorFlow (fit's graph, and with XLA:
perf/frameworks/keras_models_cpu.py), one process of --threads threads each, all in this one call. Repeats are
interleaved as perf/interleaved_runs.py runs them; each peer's best variant (marked) is the figure compared with.
Each run times only the steps after its warm-up:
  ringtrain  steady_samples_per_s of metrics.jsonl (steps after run.timing_warmup_steps)
  PyTorch    wall time of the timed steps
  Keras      wall time from the end of the last warm-up batch to the end of the last timed one
All train with SGD (momentum 0.9), at each precision of --precisions (fp32; bf16: ringtrain's train.precision =
"bf16", PyTorch's CPU autocast, Keras's mixed_bfloat16; a peer's best is its best over variants and precisions): ringtrain's job runs with optimizer.name = "sgd" so that no optimizer's
cost differs. Peers train on in-memory batches; ringtrain reads its prepared shards through its loader.

Needs: build/bin/ringtrain, python3-torch and python3-torchvision, TensorFlow + Keras in .venv-compare
(scripts/install_deps.sh --comparison; --no-keras leaves Keras out).

  perf/compare_models_cpu.py --model mobilenet_v2 [--size 64] [--batch 32] [--threads 2] [--repeats 3]
                             [--steps 20] [--warmup 5] [--out results.jsonl]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

from interleaved_runs import RunFailed, run_interleaved, run_json_line, table

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FRAMEWORKS_DIR = os.path.join(ROOT, "perf", "frameworks")
PEER_VARIANTS = {"pytorch": ("default", "channels_last"), "keras": ("default", "xla")}


def prepare(args, data):
    samples = args.batch * (args.warmup + args.steps)
    subprocess.run([os.path.join(args.build, "bin", "ringtrain"), "prepare", "synthetic", "--shape",
                    f"3,{args.size},{args.size}", "--classes", "1000", "--samples", str(samples), "--test-samples",
                    str(args.batch), "--out", data], check=True, capture_output=True)


def ringtrain(args, data, variant, precision):
    with tempfile.TemporaryDirectory() as run_dir:
        command = [os.path.join(args.build, "bin", "ringtrain"), "train", os.path.join(ROOT, "jobs", f"{args.model}.toml"),
                   "--set", f"data.train={data}/train", "--set", f"data.test={data}/test", "--set", "train.epochs=1",
                   "--set", f"train.max_steps_per_epoch={args.warmup + args.steps}",
                   "--set", f"train.batch_per_rank={args.batch}", "--set", f"run.threads={args.threads}",
                   "--set", f"run.timing_warmup_steps={args.warmup}", "--set", f"run.dir={run_dir}",
                   "--set", f'train.precision="{precision}"', "--set", 'run.device="cpu"', "--set", 'optimizer.name="sgd"',
                   "--set", "optimizer.momentum=0.9", "--set", "run.progress_every_s=1000"]
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
        if done.returncode != 0:
            sys.exit(f"ringtrain failed ({done.returncode}):\n{done.stderr[-3000:]}")
        with open(os.path.join(run_dir, "metrics.jsonl")) as f:
            epoch = [json.loads(line) for line in f if line.strip()][-1]
    return {"framework": "ringtrain", "model": args.model, "size": args.size, "batch": args.batch,
            "threads": args.threads, "timed_steps": args.steps, "warmup_steps": args.warmup, "variant": variant,
            "precision": precision, "samples_per_s": epoch["steady_samples_per_s"], "train_loss": epoch.get("train_loss")}


def peer(framework, script, python):
    """A peer's run; one that fails (PyTorch 1.13 cannot train MobileNetV2 under bf16 autocast) is recorded as failed,
    with its error's last line, and the comparison goes on without it."""
    def run(args, _data, variant, precision):
        try:
            return run_json_line([python, script, "--model", args.model, "--size", str(args.size), "--batch",
                                  str(args.batch), "--threads", str(args.threads), "--steps", str(args.steps),
                                  "--warmup", str(args.warmup), "--variant", variant, "--precision", precision],
                                 FRAMEWORKS_DIR)
        except RunFailed as failure:
            return {"framework": framework, "model": args.model, "variant": variant, "precision": precision,
                    "failed": failure.reason}
    return run


def runs(args):
    """(framework, variant, runner) of each run of a repeat."""
    listed = [("ringtrain", "default", ringtrain)]
    listed += [("pytorch", v, peer("pytorch", "torch_models_cpu.py", "/usr/bin/python3")) for v in PEER_VARIANTS["pytorch"]]
    if not args.no_keras:
        python = os.path.join(ROOT, ".venv-compare", "bin", "python3")
        listed += [("keras", v, peer("keras", "keras_models_cpu.py", python)) for v in PEER_VARIANTS["keras"]]
    return listed


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", choices=("mobilenet_v2", "vit_s16"), required=True)
    p.add_argument("--size", type=int, default=64)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--precisions", default="fp32",
                   help="comma-separated, of fp32 and bf16: every framework and variant runs at each; ringtrain's "
                        "row compared is its last precision's")
    p.add_argument("--no-keras", action="store_true", help="leave Keras out (no .venv-compare)")
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--out", help="JSON lines, one per run")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as data:
        prepare(args, data)
        precisions = args.precisions.split(",")
        entries = [lambda run=run, variant=variant, precision=precision: run(args, data, variant, precision)
                   for precision in precisions for _, variant, run in runs(args)]
        records = run_interleaved(entries, args.repeats, args.out)
    print(table(records, lambda r: f'{r["framework"]} {r["variant"]} {r["precision"]}',
                f"ringtrain default {precisions[-1]}"))

if __name__ == "__main__":
    main()

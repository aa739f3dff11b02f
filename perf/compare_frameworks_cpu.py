#!/usr/bin/env python3
"""Owns the CPU framework comparison: Fashion-MNIST, the jobs/fashion_mnist.toml CNN, data-parallel on --ranks
ranks of one thread each, batch 64 per rank, trained by ringtrain (mpirun), Keras 3 on TensorFlow with
MirroredStrategy (perf/frameworks/keras_mirrored_fmnist.py) and PyTorch DDP over gloo
(perf/frameworks/torch_ddp_fmnist.py), all in this one call, repeats interleaved so load changes hit every
framework alike: each repeat runs the three once, in an order rotated from repeat to repeat (no framework always
first), and ringtrain's ratio to another is also given per repeat (paired), which a machine whose speed drifts
between repeats moves less than the ratio of medians. Each run times only the steps after its warm-up:
  ringtrain  steady_samples_per_s of metrics.jsonl (steps after run.timing_warmup_steps, device clock)
  Keras      wall time from the end of the last warm-up batch to the end of the last timed one
  PyTorch    wall time between barriers after the warm-up and after the last timed step
--precision bf16 trains ringtrain with train.precision = "bf16", Keras under its mixed_bfloat16 policy and PyTorch
under CPU autocast to bfloat16: every framework at the precision asked, so the ratios are like for like. Prints a
Markdown table (median and range per framework, ringtrain's ratio to each) and writes every run's record to --out as
JSON lines.

Needs: build/bin/ringtrain, prepared shards (ringtrain prepare fashion-mnist --out data/fmnist --shards 8), and
scripts/install_deps.sh --comparison (python3-torch; TensorFlow + Keras in .venv-compare).

  perf/compare_frameworks_cpu.py [--repeats 3] [--steps 150] [--warmup 20] [--precision fp32] [--out results.jsonl]
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
# As tests/CMakeLists.txt's RT_MPI_ENV: loopback only, shared memory between the ranks, root allowed.
MPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1", "OMPI_MCA_btl_tcp_if_include": "lo",
           "OMPI_MCA_oob_tcp_if_include": "lo", "OMPI_MCA_btl": "self,vader,tcp",
           "OMPI_MCA_rmaps_base_oversubscribe": "1"}


def ringtrain(args):
    with tempfile.TemporaryDirectory() as run_dir:
        command = ["mpirun", "-np", str(args.ranks), os.path.join(args.build, "bin", "ringtrain"), "train",
                   os.path.join(ROOT, "jobs", "fashion_mnist.toml"),
                   "--set", f"data.train={args.data}/train", "--set", f"data.test={args.data}/test",
                   "--set", "train.epochs=1", "--set", f"train.max_steps_per_epoch={args.warmup + args.steps}",
                   "--set", f"train.batch_per_rank={args.batch_per_rank}", "--set", "run.threads=1",
                   "--set", f"run.timing_warmup_steps={args.warmup}", "--set", f"run.dir={run_dir}",
                   "--set", f'train.precision="{args.precision}"']
        done = subprocess.run(command, cwd=ROOT, env={**os.environ, **MPI_ENV}, capture_output=True, text=True)
        if done.returncode != 0:
            sys.exit(f"ringtrain failed ({done.returncode}):\n{done.stderr[-3000:]}")
        with open(os.path.join(run_dir, "metrics.jsonl")) as f:
            epoch = [json.loads(line) for line in f if line.strip()][-1]
    return {"framework": "ringtrain", "ranks": args.ranks, "batch_per_rank": args.batch_per_rank,
            "threads_per_rank": 1, "timed_steps": args.steps, "warmup_steps": args.warmup, "precision": args.precision,
            "samples_per_s": epoch["steady_samples_per_s"], "train_loss": epoch.get("train_loss")}


def framework_args(args):
    return ["--ranks", str(args.ranks), "--batch-per-rank", str(args.batch_per_rank), "--threads-per-rank", "1",
            "--steps", str(args.steps), "--warmup", str(args.warmup)]


def keras(args):
    python = os.path.join(ROOT, ".venv-compare", "bin", "python3")
    return run_json_line([python, "keras_mirrored_fmnist.py", *framework_args(args), "--precision", args.precision],
                         FRAMEWORKS_DIR)


def pytorch(args):
    return run_json_line(["/usr/bin/python3", "torch_ddp_fmnist.py", *framework_args(args), "--precision",
                          args.precision], FRAMEWORKS_DIR)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--steps", type=int, default=150)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--batch-per-rank", type=int, default=64)
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--data", default=os.path.join(ROOT, "data", "fmnist"))
    p.add_argument("--precision", choices=("fp32", "bf16"), default="fp32",
                   help="ringtrain's train.precision and Keras's policy (mixed_bfloat16); PyTorch runs fp32")
    p.add_argument("--out", help="JSON lines, one per run")
    args = p.parse_args()
    try:
        records = run_interleaved([lambda run=run: run(args) for run in (ringtrain, keras, pytorch)], args.repeats,
                                  args.out)
    except RunFailed as failure:
        sys.exit(str(failure))
    print(table(records, lambda r: f'{r["framework"]} ({r["precision"]})', f"ringtrain ({args.precision})"))


if __name__ == "__main__":
    main()

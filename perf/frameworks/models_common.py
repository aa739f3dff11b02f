"""Owns what the PyTorch and Keras runs of the model comparison (perf/compare_models_cpu.py) share: the command
line (--precision bf16: each framework's own mixed precision, bf16 products with fp32 weights), the synthetic
batches (uniform pixels, normalised; labels uniform over the classes, as `ringtrain prepare
synthetic` makes them), the optimiser the job files train with, and the one JSON line each run prints.

Imports neither framework, so each runner imports only its own.
"""
import argparse
import json
import sys

import numpy as np

MODELS = ("mobilenet_v2", "vit_s16")
CLASSES = 1000
# A few distinct batches cycled, so no framework trains on one cached batch alone.
DISTINCT_BATCHES = 4


def arguments(description):
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--model", choices=MODELS, required=True)
    p.add_argument("--size", type=int, default=64, help="square input side in pixels")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--variant", default="default", help="the framework's own setting to time (its script lists them)")
    p.add_argument("--precision", choices=("fp32", "bf16"), default="fp32",
                   help="bf16: PyTorch's CPU autocast to bfloat16, Keras's mixed_bfloat16 policy")
    return p.parse_args()


def batches(args, channels_last):
    """DISTINCT_BATCHES (images float32, labels int64) pairs: N x C x H x W, or N x H x W x C with channels_last."""
    rng = np.random.default_rng(0)
    shape = (args.batch, args.size, args.size, 3) if channels_last else (args.batch, 3, args.size, args.size)
    return [(rng.standard_normal(shape, dtype=np.float32), rng.integers(0, CLASSES, args.batch).astype(np.int64))
            for _ in range(DISTINCT_BATCHES)]


def report(framework, args, seconds, extra):
    record = {"framework": framework, "model": args.model, "size": args.size, "batch": args.batch,
              "threads": args.threads, "timed_steps": args.steps, "warmup_steps": args.warmup, "variant": args.variant,
              "precision": args.precision, "samples_per_s": args.steps * args.batch / seconds, **extra}
    print(json.dumps(record))
    sys.stdout.flush()

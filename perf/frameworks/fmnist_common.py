"""Owns what the Keras/TF and PyTorch runs of the framework comparison share: reading Fashion-MNIST from the
Debian package's IDX files, normalising it as ringtrain's loader does (mean/std of the training images), the
run's settings (the jobs/fashion_mnist.toml network and optimiser), and the one JSON line each run prints.

Imports neither framework, so each runner imports only its own.
"""
import argparse
import gzip
import json
import struct
import sys

import numpy as np

IDX_DIR = "/usr/share/datasets/fashion-mnist"
# jobs/fashion_mnist.toml: global batch 128 on 2 ranks, SGD momentum 0.9, weight decay 5e-4, base lr 0.05.
LR, MOMENTUM, WEIGHT_DECAY, CLASSES = 0.05, 0.9, 5e-4, 10


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    _, _, dtype, dims = struct.unpack(">BBBB", data[:4])
    shape = struct.unpack(">" + "I" * dims, data[4:4 + 4 * dims])
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def training_set():
    """Images as float32 N x 1 x 28 x 28, normalised; labels as int64."""
    images = read_idx(f"{IDX_DIR}/train-images-idx3-ubyte.gz").astype(np.float32)
    labels = read_idx(f"{IDX_DIR}/train-labels-idx1-ubyte.gz").astype(np.int64)
    images = (images - images.mean()) / images.std()
    return images[:, None, :, :], labels


def arguments(description, precisions=("fp32",)):
    """precisions: what this framework's script can train in (--precision)."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--ranks", type=int, default=2, help="replicas (Keras) or processes (PyTorch)")
    p.add_argument("--batch-per-rank", type=int, default=64)
    p.add_argument("--threads-per-rank", type=int, default=1)
    p.add_argument("--steps", type=int, default=150, help="timed steps, after the warm-up")
    p.add_argument("--warmup", type=int, default=20, help="steps run before timing starts")
    p.add_argument("--precision", choices=precisions, default="fp32")
    return p.parse_args()


def report(framework, args, seconds, extra):
    """One JSON line on stdout: samples/s over the timed steps only."""
    samples = args.steps * args.batch_per_rank * args.ranks
    record = {"framework": framework, "ranks": args.ranks, "batch_per_rank": args.batch_per_rank,
              "threads_per_rank": args.threads_per_rank, "timed_steps": args.steps, "warmup_steps": args.warmup,
              "precision": args.precision, "seconds": seconds, "samples_per_s": samples / seconds}
    record.update(extra)
    print(json.dumps(record), flush=True)
    sys.stdout.flush()

"""Owns the PyTorch side of the framework comparison: the Fashion-MNIST CNN of jobs/fashion_mnist.toml trained
with DistributedDataParallel (gloo) on --ranks processes of --threads-per-rank threads each, as ringtrain runs
its ranks. Prints one JSON line (fmnist_common.report) from rank 0: samples/s over the steps after the warm-up,
timed with a barrier at both ends so the slowest rank counts. --precision bf16 runs the forward pass and the loss
under torch.autocast("cpu", torch.bfloat16), weights and optimizer in fp32, as the other frameworks' bf16 does.

Run by perf/compare_frameworks_cpu.py with Debian's python3 (python3-torch).
"""
import contextlib
import os
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn

import fmnist_common as common


def network():
    return nn.Sequential(
        nn.Conv2d(1, 32, 5, padding=2, bias=False), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 5, padding=2, bias=False), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(64 * 7 * 7, 1024), nn.ReLU(), nn.Linear(1024, common.CLASSES))


def worker(rank, args, init_file):
    torch.set_num_threads(args.threads_per_rank)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=args.ranks)
    torch.manual_seed(42)
    images, labels = common.training_set()
    images, labels = torch.from_numpy(images[rank::args.ranks].copy()), torch.from_numpy(labels[rank::args.ranks].copy())
    model = nn.parallel.DistributedDataParallel(network())
    optimizer = torch.optim.SGD(model.parameters(), lr=common.LR, momentum=common.MOMENTUM,
                                weight_decay=common.WEIGHT_DECAY)
    loss_fn = nn.CrossEntropyLoss()
    b = args.batch_per_rank
    batches = len(labels) // b

    def autocast():
        return (torch.autocast("cpu", dtype=torch.bfloat16) if args.precision == "bf16"
                else contextlib.nullcontext())

    def step(i):
        j = i % batches
        x, y = images[j * b:(j + 1) * b], labels[j * b:(j + 1) * b]
        optimizer.zero_grad(set_to_none=True)
        with autocast():
            loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        return loss

    for i in range(args.warmup):
        step(i)
    dist.barrier()
    start = time.perf_counter()
    for i in range(args.warmup, args.warmup + args.steps):
        loss = step(i)
    dist.barrier()
    seconds = time.perf_counter() - start
    if rank == 0:
        common.report("pytorch_ddp", args, seconds,
                      {"version": torch.__version__, "backend": "gloo", "last_loss": float(loss)})
    dist.destroy_process_group()


def main():
    args = common.arguments(__doc__, precisions=("fp32", "bf16"))
    with tempfile.TemporaryDirectory() as scratch:
        mp.spawn(worker, args=(args, os.path.join(scratch, "rendezvous")), nprocs=args.ranks, join=True)


if __name__ == "__main__":
    main()

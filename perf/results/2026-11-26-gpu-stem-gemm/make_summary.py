#!/usr/bin/env python3
"""Builds gpu-summary.jsonl (issue 13's record format) from what this record's two H200 calls brought back:
ringtrain's metrics.jsonl per ResNet-50 run (callN/v-<run>-metrics.jsonl; "old" runs are main at e2defff, "new" the
call's build), the Fashion-MNIST job's (callN/fmnist-metrics.jsonl), PyTorch's compare_pytorch.py lines
(callN/pytorch.jsonl) and the test logs. Run from this folder: python3 make_summary.py"""
import glob
import json
import os
import re

DATE = "2026-11-26"
MEM_OURS = ("the most ringtrain's own cudaMalloc allocations held at once (device_memory_allocated_peak_mb): parameters, "
            "gradients, momentum, the activation arena, batches, cuDNN workspace and 16-bit scratch; not the CUDA context")
MEM_TORCH = "torch.cuda.max_memory_allocated: tensors PyTorch's allocator held at once; not the context or its cache"
BUILD = {"call1": {"old": "e2defff", "new": "gpu-work d984030 (main 7697b13 after the rebase)"},
         "call2": {"old": "e2defff", "new": "gpu-work 8586486 (main efe90df after the rebase)"}}


def device(call):
    with open(f"{call}/summary.txt") as f:
        return f.readline().strip()


def last_epoch(path):
    with open(path) as f:
        return [r for r in map(json.loads, filter(str.strip, f)) if r.get("kind") == "epoch"][-1]


def ours(call, path):
    run = os.path.basename(path)[2:-len("-metrics.jsonl")]
    e = last_epoch(path)
    return {"date": DATE, "device": device(call), "impl": "ringtrain", "model": "resnet50", "precision": "bf16",
            "layout": "nchw" if "nchw" in run else "nhwc", "run": run, "build": BUILD[call][run.split("-")[0]],
            "profiled": run.endswith("prof"), "batch": 256, "ranks": 1,
            "samples_per_s": e["steady_samples_per_s"], "warmup_steps": e["timing_warmup_steps"],
            "timed_steps": e["steps"] - e["timing_warmup_steps"],
            "peak_mem_mib": e.get("device_memory_allocated_peak_mb"), "mem_includes": MEM_OURS, "call": call}


def fashion_mnist(call):
    e = last_epoch(f"{call}/fmnist-metrics.jsonl")
    return {"date": DATE, "device": device(call), "impl": "ringtrain", "model": "fashion_mnist", "precision": "bf16",
            "layout": "nhwc", "build": BUILD[call]["new"], "batch": e["global_batch"], "ranks": e["ranks"],
            "samples_per_s": e["steady_samples_per_s"], "warmup_steps": e["timing_warmup_steps"],
            "timed_steps": e["steps"] - e["timing_warmup_steps"], "epoch": e["epoch"], "test_acc": e["test_acc"],
            "peak_mem_mib": e.get("device_memory_allocated_peak_mb"), "mem_includes": MEM_OURS, "call": call}


def pytorch(call):
    with open(f"{call}/pytorch.jsonl") as f:
        for r in map(json.loads, f):
            if r.get("kind") == "matmul":
                yield {"date": DATE, "device": device(call), "impl": "pytorch", "check": "dense matmul rate",
                       "precision": r["precision"], "flops_per_s": r["flops_per_s"], "call": call}
                continue
            yield {"date": DATE, "device": device(call), "impl": "pytorch", "model": r["model"],
                   "precision": r["precision"], "layout": "nhwc" if r["channels_last"] else "nchw",
                   "batch": r["batch"], "ranks": 1, "samples_per_s": r["samples_per_s"],
                   "warmup_steps": r["warmup_steps"], "timed_steps": r["timed_steps"],
                   "peak_mem_mib": r["peak_memory_mib"], "mem_includes": MEM_TORCH, "torch": r["torch"],
                   "cudnn": r["cudnn"], "call": call}


def checks(call):
    logs = [("test_gpu.log", "test_gpu"), ("test_layers_cuda.log", "test_layers */cuda*")]
    logs += [(os.path.basename(p), "test_equivalence " + p[-7:-4]) for p in sorted(glob.glob(f"{call}/equiv*.log"))]
    for log, name in logs:
        with open(f"{call}/{log}") as f:
            text = re.sub(r"\x1b\[[0-9;]*m", "", f.read())
        ok = len(re.findall(r"^\[       OK \]", text, re.M))
        failed = len(re.findall(r"^\[  FAILED  \] [A-Z]", text, re.M))
        passed = re.search(r"^\[  PASSED  \] (\d+) tests", text, re.M)
        yield {"date": DATE, "device": device(call), "impl": "ringtrain", "check": f"{name}: {ok} ok, {failed} failed"
               + (f", {passed.group(1)} passed" if passed else ""),
               "passed": failed == 0 and (ok > 0 or passed is not None), "call": call}


rows = []
for call in ("call1", "call2"):
    rows.extend(ours(call, p) for p in sorted(glob.glob(f"{call}/v-*-metrics.jsonl")))
    rows.append(fashion_mnist(call))
    rows.extend(pytorch(call))
    rows.extend(checks(call))
with open("gpu-summary.jsonl", "w") as f:
    for r in rows:
        f.write(json.dumps(r) + "\n")
print(f"{len(rows)} lines")

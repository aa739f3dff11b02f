#!/usr/bin/env python3
"""Builds gpu-summary.jsonl (issue 13's record format) from what this record's four H200 calls brought back:
ringtrain's metrics.jsonl per ResNet-50 setting (callN/v-<setting>-metrics.jsonl), PyTorch's compare_pytorch.py
lines (callN/pytorch.jsonl) and the test logs. Run from this folder: python3 make_summary.py"""
import json
import re

DATE = "2026-11-26"
MEM_OURS = ("the most ringtrain's own cudaMalloc allocations held at once (device_memory_allocated_peak_mb): parameters, "
            "gradients, momentum, the activation arena, batches, cuDNN workspace and 16-bit scratch; not the CUDA context")
MEM_TORCH = "torch.cuda.max_memory_allocated: tensors PyTorch's allocator held at once; not the context or its cache"
# What each call's ringtrain settings ran: (setting, layout, convolution API).
SETTINGS = {"bf16": ("nchw", "legacy"), "nhwc": ("nhwc", None), "nhwclegacy": ("nhwc", "legacy"),
            "nhwcprof": ("nhwc", None)}
GRAPHS_FROM = {"call1": "legacy", "call2": "legacy", "call3": "graph", "call4": "graph"}  # the NHWC default per call


def device(call):
    with open(f"{call}/summary.txt") as f:
        return f.readline().strip()


def epoch(path):
    with open(path) as f:
        return [r for r in map(json.loads, filter(str.strip, f)) if r.get("kind") == "epoch"][-1]


def ours(call, setting):
    layout, api = SETTINGS[setting]
    e = epoch(f"{call}/v-{setting}-metrics.jsonl")
    return {"date": DATE, "device": device(call), "impl": "ringtrain", "model": "resnet50", "precision": "bf16",
            "layout": layout, "conv_api": api or GRAPHS_FROM[call], "setting": setting,
            "profiled": setting.endswith("prof"), "batch": 256, "ranks": 1,
            "samples_per_s": e["steady_samples_per_s"], "warmup_steps": e["timing_warmup_steps"],
            "timed_steps": e["steps"] - e["timing_warmup_steps"],
            "peak_mem_mib": e.get("device_memory_allocated_peak_mb"), "mem_includes": MEM_OURS, "call": call}


def pytorch(call):
    with open(f"{call}/pytorch.jsonl") as f:
        for r in map(json.loads, f):
            yield {"date": DATE, "device": device(call), "impl": "pytorch", "model": r["model"],
                   "precision": r["precision"], "layout": "nhwc" if r["channels_last"] else "nchw",
                   "batch": r["batch"], "ranks": 1, "samples_per_s": r["samples_per_s"],
                   "warmup_steps": r["warmup_steps"], "timed_steps": r["timed_steps"],
                   "peak_mem_mib": r["peak_memory_mib"], "mem_includes": MEM_TORCH, "torch": r["torch"],
                   "cudnn": r["cudnn"], "call": call}


def checks(call):
    for log, name in (("test_gpu.log", "test_gpu"), ("test_layers_cuda.log", "test_layers */cuda*")):
        with open(f"{call}/{log}") as f:
            text = f.read()
        ok = len(re.findall(r"^\[       OK \]", text, re.M))
        failed = len(re.findall(r"^\[  FAILED  \] [A-Z]", text, re.M))
        yield {"date": DATE, "device": device(call), "impl": "ringtrain", "check": f"{name}: {ok} ok, {failed} failed",
               "passed": failed == 0 and ok > 0, "call": call}


rows = []
for call in ("call1", "call2", "call3", "call4"):
    for setting in SETTINGS:
        try:
            rows.append(ours(call, setting))
        except FileNotFoundError:
            pass
    rows.extend(pytorch(call))
    rows.extend(checks(call))
with open("gpu-summary.jsonl", "w") as f:
    for r in rows:
        f.write(json.dumps(r) + "\n")
print(f"{len(rows)} lines")

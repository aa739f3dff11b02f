#!/usr/bin/env python3
"""Builds gpu-summary.jsonl (the record format of issue 13) from the files the record calls brought back: call4/ (the
record call) and call5/ (after the pooling change), ringtrain's metrics.jsonl per ResNet-50 setting and Fashion-MNIST
job, PyTorch's compare_pytorch.py lines, and the checks those calls ran. Run from this folder: python3 make_summary.py"""
import json
import re

DATE = "2026-11-26"
MEM_OURS = ("the most ringtrain's own cudaMalloc allocations held at once (device_memory_allocated_peak_mb): parameters, "
            "gradients, momentum, the activation arena, batches, cuDNN workspace and 16-bit scratch; not the CUDA context")
MEM_TORCH = "torch.cuda.max_memory_allocated: tensors PyTorch's allocator held at once; not the context or its cache"


def device(call):
    with open(f"{call}/summary.txt") as f:
        return f.readline().strip()


def epoch_line(path):
    with open(path) as f:
        lines = [json.loads(l) for l in f if l.strip()]
    return [l for l in lines if l.get("kind") == "epoch"][-1]


def ours(call, name, precision, model="resnet50", batch=256, path=None):
    e = epoch_line(path or f"{call}/v-{name}-metrics.jsonl")
    return {"date": DATE, "device": device(call), "impl": "ringtrain", "model": model, "precision": precision,
            "layout": "nchw", "setting": name, "batch": batch, "ranks": 1,
            "samples_per_s": e["steady_samples_per_s"], "warmup_steps": e["timing_warmup_steps"],
            "timed_steps": e["steps"] - e["timing_warmup_steps"],
            "peak_mem_mib": e.get("device_memory_allocated_peak_mb"), "mem_includes": MEM_OURS,
            "test_acc": e.get("test_acc"), "call": call}


def pytorch(call):
    rows = []
    with open(f"{call}/pytorch.jsonl") as f:
        for line in f:
            r = json.loads(line)
            if r["kind"] != "train":
                continue
            rows.append({"date": DATE, "device": device(call), "impl": "pytorch", "model":
                         "fashion_mnist" if r["model"] == "fmnist" else r["model"], "precision": r["precision"],
                         "layout": "nhwc" if r["channels_last"] else "nchw", "batch": r["batch"], "ranks": 1,
                         "samples_per_s": r["samples_per_s"], "warmup_steps": r["warmup_steps"],
                         "timed_steps": r["timed_steps"], "peak_mem_mib": r["peak_memory_mib"],
                         "mem_includes": MEM_TORCH, "torch": r["torch"], "call": call})
    return rows


def check(call, name, log, pattern):
    with open(f"{call}/{log}", errors="replace") as f:
        text = re.sub(r"\x1b\[[0-9;]*m", "", f.read())
    return {"date": DATE, "device": device(call), "impl": "ringtrain", "check": name,
            "passed": re.search(pattern, text) is not None, "log": f"{call}/{log}"}


rows = [ours("call4", v, p) for v, p in
         [("bf16", "bf16"), ("bf16nd", "bf16"), ("fp16", "fp16"), ("tf32", "tf32")]]
rows.append(ours("call4", "fmnist-bf16", "bf16", model="fashion_mnist", batch=64, path="call4/fmnist-metrics.jsonl"))
rows += pytorch("call4")
rows.append(ours("call5", "bf16", "bf16"))
rows += pytorch("call5")
rows += [
    check("call4", "test_gpu (CUDA kernels, backend, NCCL, bf16 small ResNet vs the CPU twin)", "test_gpu.log",
          r"\[  PASSED  \] 27 tests"),
    check("call4", "test_layers */cuda* (fp32, tf32, measured, bf16 and fp16 stored)", "test_layers_cuda.log",
          r"\[  PASSED  \] 145 tests"),
    check("call4", "fashion_mnist bf16 12 epochs, test accuracy >= 0.92", "fmnist.log", r"test loss [0-9.]+ acc 0\.9[2-9]"),
    check("call6", "equivalence on cuda, 2 ranks (fp32, accumulation, bf16 wire, bf16, fp16, optimizers)",
          "equivalence-np2.log", r"\[  PASSED  \] 6 tests"),
    check("call6", "equivalence on cuda, 4 ranks (fp32, accumulation, bf16 wire, bf16, fp16, optimizers)",
          "equivalence-np4.log", r"\[  PASSED  \] 6 tests"),
]
with open("gpu-summary.jsonl", "w") as f:
    for r in rows:
        f.write(json.dumps(r) + "\n")
for r in rows:
    print({k: r[k] for k in ("impl", "model", "precision", "layout", "samples_per_s", "peak_mem_mib", "check", "passed")
           if k in r})

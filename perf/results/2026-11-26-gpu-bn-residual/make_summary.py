#!/usr/bin/env python3
"""Writes gpu-summary.jsonl (issue 13's record format) from what this record's two H200 calls brought back: each
ResNet-50 run's metrics.jsonl (callN/resnet50-<run>-metrics.jsonl: "new" runs are the call's build, "old" its
baseline), the Fashion-MNIST job's (call1/fmnist-metrics.jsonl), PyTorch's compare_pytorch.py lines
(callN/pytorch.jsonl) and the test logs. Run from this folder: python3 make_summary.py"""
import glob
import json
import re

DATE = "2026-11-26"
BUILDS = {"call1": {"new": "main 0f4ac3a + gpu-next 78773f1 (merge c302667)", "old": "main 0f4ac3a"},
          "call2": {"new": "main 9b9982b + the join fusion (adf2657)", "old": "main 9b9982b"}}
MEM_OURS = ("the most ringtrain's own cudaMalloc allocations held at once (device_memory_allocated_peak_mb): "
            "parameters, gradients, momentum, the activation arena, batches, cuDNN workspace and 16-bit scratch; not "
            "the CUDA context")
MEM_TORCH = "torch.cuda.max_memory_allocated: tensors PyTorch's allocator held at once; not the context or its cache"


def lines(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def measured(call, model, run, e, **extra):
    device = open(f"{call}/summary.txt").readline().strip()
    return {"date": DATE, "device": device, "impl": "ringtrain", "model": model, "precision": "bf16", "layout": "nhwc",
            "run": run, "build": BUILDS[call][run.split("-")[0]], "batch": e["global_batch"], "ranks": e["ranks"],
            "samples_per_s": e["steady_samples_per_s"], "warmup_steps": e["timing_warmup_steps"],
            "timed_steps": e["steps"] - e["timing_warmup_steps"],
            "peak_mem_mib": e.get("device_memory_allocated_peak_mb"), "mem_includes": MEM_OURS, "call": call, **extra}


def rows(call):
    device = open(f"{call}/summary.txt").readline().strip()
    for path in sorted(glob.glob(f"{call}/resnet50-*-metrics.jsonl")):
        run = path[len(f"{call}/resnet50-"):-len("-metrics.jsonl")]
        epoch = [r for r in lines(path) if r.get("kind") == "epoch"][-1]
        yield measured(call, "resnet50", run, epoch, profiled=run.endswith("prof"), train_loss=epoch["train_loss"])
    for path in glob.glob(f"{call}/fmnist-metrics.jsonl"):
        epoch = [r for r in lines(path) if r.get("kind") == "epoch"][-1]
        yield measured(call, "fashion_mnist", "new", epoch, epoch=epoch["epoch"], test_acc=epoch["test_acc"])
    for r in lines(f"{call}/pytorch.jsonl"):
        common = {"date": DATE, "device": device, "impl": "pytorch", "precision": r["precision"], "call": call}
        if r.get("kind") == "matmul":
            yield {**common, "check": "dense matmul rate", "flops_per_s": r["flops_per_s"]}
        else:
            yield {**common, "model": r["model"], "layout": "nhwc" if r["channels_last"] else "nchw",
                   "batch": r["batch"], "ranks": 1, "samples_per_s": r["samples_per_s"],
                   "warmup_steps": r["warmup_steps"], "timed_steps": r["timed_steps"],
                   "peak_mem_mib": r["peak_memory_mib"], "mem_includes": MEM_TORCH, "torch": r["torch"]}
    for log, name in (("test_gpu.log", "test_gpu"), ("test_layers_cuda.log", "test_layers */cuda*")):
        text = open(f"{call}/{log}").read()
        ok = len(re.findall(r"^\[       OK \]", text, re.M))
        failed = len(re.findall(r"^\[  FAILED  \] [A-Z]", text, re.M))
        yield {"date": DATE, "device": device, "impl": "ringtrain", "check": f"{name}: {ok} ok, {failed} failed",
               "passed": failed == 0 and ok > 0, "call": call}


# ResNet-50 training FLOPs per sample as ringtrain counts them (the run's header: 24310.22 MFLOP/sample).
TRAIN_FLOPS = 24310.22e6


def targets(call, measured_rows):
    """Issue 13's targets, from the call's own rows: each unprofiled "new" ResNet-50 run against PyTorch's
    channels_last bf16 run and the bf16 matmul rate of the same call; Fashion-MNIST against PyTorch's eager run;
    the reproducible pair's losses."""
    def one(**match):
        return [r for r in measured_rows if r["call"] == call and all(r.get(k) == v for k, v in match.items())]
    torch = one(impl="pytorch", model="resnet50")[0]
    matmul = one(impl="pytorch", check="dense matmul rate", precision="bf16")
    for r in one(impl="ringtrain", model="resnet50", profiled=False):
        if not r["run"].startswith("new"):
            continue
        ratio = r["samples_per_s"] / torch["samples_per_s"]
        yield {"date": DATE, "device": r["device"], "impl": "ringtrain", "run": r["run"], "call": call,
               "check": "resnet50 bf16 >= 1.2x pytorch channels_last bf16, same call", "ratio": ratio,
               "passed": ratio >= 1.2}
        yield {"date": DATE, "device": r["device"], "impl": "ringtrain", "run": r["run"], "call": call,
               "check": "resnet50 bf16 memory <= pytorch's", "passed": r["peak_mem_mib"] <= torch["peak_mem_mib"]}
        if matmul:
            share = r["samples_per_s"] * TRAIN_FLOPS / matmul[0]["flops_per_s"]
            yield {"date": DATE, "device": r["device"], "impl": "ringtrain", "run": r["run"], "call": call,
                   "check": ">= 20 % of the bf16 matmul rate, same call", "share": share, "passed": share >= 0.20}
    for ours, theirs in zip(one(impl="ringtrain", model="fashion_mnist"), one(impl="pytorch", model="fmnist")):
        ratio = ours["samples_per_s"] / theirs["samples_per_s"]
        yield {"date": DATE, "device": ours["device"], "impl": "ringtrain", "call": call,
               "check": "fashion_mnist bf16 >= 2x pytorch eager bf16, same call; test accuracy >= 0.92 in 12 epochs",
               "ratio": ratio, "test_acc": ours["test_acc"], "passed": ratio >= 2 and ours["test_acc"] >= 0.92}
    repro = one(impl="ringtrain", model="resnet50", run="new-repro") + one(impl="ringtrain", run="new-repro-2")
    yield {"date": DATE, "device": repro[0]["device"], "impl": "ringtrain", "call": call,
           "check": "two runs under the reproducible defaults end on the same loss",
           "losses": [r["train_loss"] for r in repro], "passed": repro[0]["train_loss"] == repro[1]["train_loss"]}


out = [r for call in ("call1", "call2") for r in rows(call)]
out += [t for call in ("call1", "call2") for t in targets(call, out)]
with open("gpu-summary.jsonl", "w") as f:
    f.writelines(json.dumps(r) + "\n" for r in out)
print(f"{len(out)} lines")

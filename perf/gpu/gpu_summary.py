#!/usr/bin/env python3
"""Summary of one GPU benchmark call (perf/gpu/run_gpu_bench.sh): reads ringtrain's run directories, PyTorch's
measurements (pytorch.jsonl from compare_pytorch.py), the nvidia-smi memory samples and the test logs in OUT,
prints a readable summary, and writes OUT/gpu-summary.jsonl, one JSON object per line, ours and PyTorch's alike:

  measurements: date, device, impl (ringtrain | pytorch), model, precision, layout (nchw | nhwc), batch (per
                rank), ranks, samples_per_s (steady state: the warm-up steps excluded), warmup_steps,
                timed_steps, peak_mem_mib and mem_includes (what the peak counts: for both, the allocator's
                high-water mark), and beside it ringtrain's device_peak_mib and PyTorch's peak_reserved_mib;
  checks:       date, device, check (what is compared), passed (true | false | null when a side is missing or
                a test log ran nothing), and the numbers compared.

Usage: gpu_summary.py OUT [--date YYYY-MM-DD]
"""
import argparse
import datetime
import json
import pathlib
import re

# The record to beat for ResNet-50 tf32 (perf/results/2026-11-23-gpu-h100.md).
RESNET50_TF32_BEFORE = 1497.0

RINGTRAIN_MEMORY = ("the most ringtrain's own cudaMalloc allocations held at once: parameters, gradients, momentum, "
                    "the activation arena, batches, the cuDNN workspace; not the CUDA context, not the libraries' "
                    "loaded kernels (device_peak_mib, from cudaMemGetInfo, has those but the context)")
# Where the run predates device_memory_allocated_peak_mb, the device-level figure stands in, and says so.
RINGTRAIN_DEVICE_MEMORY = ("ringtrain's device memory at its peak less what was in use when its backend had opened "
                           "(cudaMemGetInfo): its allocations, cuBLAS's own workspace and the libraries' lazily "
                           "loaded kernels; not the CUDA context")
PYTORCH_MEMORY = ("torch.cuda.max_memory_allocated: tensors, cuDNN workspaces through the caching allocator; "
                  "not the CUDA context, not the allocator's cache (peak_reserved_mib has that)")


def read_lines(path):
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.startswith("{")]


def nvidia_smi_peak(out, name):
    path = out / f"{name}-memory.csv"
    values = [int(v) for v in path.read_text().split()] if path.exists() else []
    return max(values) if values else None


def ringtrain_rows(out, date, device):
    """One row per ringtrain run directory: name -> (model, precision, algorithms)."""
    runs = {"fmnist": ("fashion_mnist", "fp32", "heuristic, deterministic"),
            "resnet50": ("resnet50", "fp32", "heuristic, deterministic"),
            "resnet50-fp32-measured": ("resnet50", "fp32", "measured"),
            "resnet50-tf32": ("resnet50", "tf32", "measured")}
    rows = []
    for name, (model, precision, algorithms) in runs.items():
        records = read_lines(out / f"ringtrain-{name}" / "metrics.jsonl")
        job = next((r for r in records if r.get("kind") == "job"), None)
        epoch = next((r for r in reversed(records) if r.get("kind") == "epoch"), None)
        if not job or not epoch:
            continue
        peak, start = epoch.get("device_memory_peak_mb"), epoch.get("device_memory_at_start_mb")
        device_peak = peak - start if peak is not None and start is not None else None
        allocated = epoch.get("device_memory_allocated_peak_mb")
        warmup = epoch.get("timing_warmup_steps", 0)
        rows.append({"date": date, "device": device, "impl": "ringtrain", "model": model, "precision": precision,
                     "layout": "nchw", "algorithms": algorithms, "batch": job["batch_per_rank"], "ranks": job["ranks"],
                     "samples_per_s": epoch.get("steady_samples_per_s"), "warmup_steps": warmup,
                     "timed_steps": epoch["steps"] - warmup,
                     "peak_mem_mib": allocated if allocated is not None else device_peak,
                     "mem_includes": RINGTRAIN_MEMORY if allocated is not None else RINGTRAIN_DEVICE_MEMORY,
                     "device_peak_mib": device_peak, "nvidia_smi_peak_mib": nvidia_smi_peak(out, name),
                     "backend": job.get("backend")})
    return rows


def pytorch_rows(out, date, device):
    names = {"fmnist": "fashion_mnist", "resnet50": "resnet50"}
    rows = []
    for r in read_lines(out / "pytorch.jsonl"):
        if r.get("kind") != "train":
            continue
        rows.append({"date": date, "device": r.get("device", device), "impl": "pytorch",
                     "model": names.get(r["model"], r["model"]), "precision": r["precision"],
                     "layout": "nhwc" if r.get("channels_last") else "nchw", "batch": r["batch"], "ranks": 1,
                     "samples_per_s": r["samples_per_s"], "warmup_steps": r.get("warmup_steps"),
                     "timed_steps": r.get("timed_steps", r.get("steps")), "peak_mem_mib": r["peak_memory_mib"],
                     "mem_includes": PYTORCH_MEMORY, "peak_reserved_mib": r.get("peak_reserved_mib")})
    return rows


def find(rows, impl, model, precision, layout="nchw", algorithms=None):
    return next((r for r in rows if r["impl"] == impl and r["model"] == model and r["precision"] == precision
                 and r["layout"] == layout and algorithms in (None, r.get("algorithms"))), None)


def compare(check, ours, theirs, key, passes):
    a = ours.get(key) if ours else None
    b = theirs.get(key) if isinstance(theirs, dict) else theirs
    return {"check": check, "passed": passes(a, b) if a is not None and b is not None else None,
            "ringtrain": a, "reference": b}


def test_log_check(out, name, check):
    """passed when the GoogleTest log lists no FAILED test and at least one PASSED; null when the log is missing or
    every test in it skipped (nothing was proved either way: "[  PASSED  ] 0 tests" is not a pass)."""
    path = out / name
    if not path.exists():
        return {"check": check, "passed": None}
    text = path.read_text()
    passed = sum(int(n) for n in re.findall(r"^\[  PASSED  \] (\d+) tests?\.", text, re.M))
    skipped = sum(int(n) for n in re.findall(r"^\[  SKIPPED \] (\d+) tests?,", text, re.M))
    verdict = False if "[  FAILED  ]" in text else True if passed > 0 else None
    return {"check": check, "passed": verdict, "tests_passed": passed, "tests_skipped": skipped}


def observability_checks(out):
    """The Fashion-MNIST run on the GPU keeps NVML samples and a trace whose bucket spans come from CUDA events."""
    run = out / "ringtrain-fmnist"
    samples = read_lines(run / "gpu.jsonl")
    trace = run / "trace-rank0.json"
    spans = [e for e in json.loads(trace.read_text())["traceEvents"] if e.get("name") == "allreduce"] \
        if trace.exists() else None
    phases = {e.get("name") for e in json.loads(trace.read_text())["traceEvents"]} if trace.exists() else set()
    return [{"check": "NVML samples in gpu.jsonl (fashion_mnist, every 1 s)",
             "passed": len(samples) > 0 if run.exists() else None, "samples": len(samples)},
            {"check": "trace: allreduce bucket spans and device-timed forward/backward/optimizer phases",
             "passed": bool(spans) and {"forward", "backward", "optimizer"} <= phases if spans is not None else None,
             "allreduce_spans": len(spans) if spans is not None else None}]


def checks(out, rows):
    fm_ours, fm_torch = find(rows, "ringtrain", "fashion_mnist", "fp32"), find(rows, "pytorch", "fashion_mnist", "fp32")
    # Memory: the fp32 run a user after speed makes (measured algorithms); the strict run where that is missing.
    rn_ours = find(rows, "ringtrain", "resnet50", "fp32", algorithms="measured") or find(rows, "ringtrain", "resnet50", "fp32")
    rn_torch = find(rows, "pytorch", "resnet50", "fp32")
    tf32, tf32_torch = find(rows, "ringtrain", "resnet50", "tf32"), find(rows, "pytorch", "resnet50", "tf32")
    return observability_checks(out) + [
        test_log_check(out, "test_gpu.log", "test_gpu passes"),
        test_log_check(out, "test_layers_cuda.log", "test_layers (CUDA cases) passes"),
        compare("resnet50 fp32 batch 256: ringtrain's peak memory <= PyTorch's (allocations: theirs "
                "max_memory_allocated)", rn_ours, rn_torch, "peak_mem_mib", lambda a, b: a <= b),
        # Device level: PyTorch's reserved memory is a lower bound of its footprint (its libraries' kernels and
        # cuBLAS's workspace come on top), so ours at or under it is at or under theirs.
        compare("resnet50 fp32 batch 256: ringtrain's device memory, all but the context <= PyTorch's "
                "max_memory_reserved", rn_ours, rn_torch and {"device_peak_mib": rn_torch.get("peak_reserved_mib")},
                "device_peak_mib",
                lambda a, b: a <= b),
        compare("resnet50 tf32 batch 256: ringtrain's peak memory <= PyTorch's (allocations: theirs "
                "max_memory_allocated)", tf32, tf32_torch, "peak_mem_mib", lambda a, b: a <= b),
        compare("fashion_mnist fp32: ringtrain's steady samples/s >= 1.5 x PyTorch eager", fm_ours,
                fm_torch and {"samples_per_s": 1.5 * fm_torch["samples_per_s"]}, "samples_per_s",
                lambda a, b: a >= b),
        compare(f"resnet50 tf32: ringtrain's steady samples/s >= {RESNET50_TF32_BEFORE:.0f} (2026-11-23)", tf32,
                RESNET50_TF32_BEFORE, "samples_per_s", lambda a, b: a >= b),
    ]


def summary_lines(rows, results):
    lines = []
    for r in rows:
        rate = f"{r['samples_per_s']:.0f}" if r["samples_per_s"] is not None else "?"
        mem = f"{r['peak_mem_mib']:.0f} MiB" if r["peak_mem_mib"] is not None else "? MiB"
        algorithms = f" ({r['algorithms']} algorithms)" if r.get("algorithms") else ""
        lines.append(f"{r['impl']:9} {r['model']:13} {r['precision']:4} {r['layout']}{algorithms} batch {r['batch']}: "
                     f"{rate} samples/s ({r['timed_steps']} steps after {r['warmup_steps']} warm-up), peak {mem}")
    for c in results:
        verdict = {True: "PASS", False: "FAIL", None: "SKIPPED" if c.get("tests_skipped") else "MISSING"}[c["passed"]]
        detail = f" (ringtrain {c['ringtrain']}, reference {c['reference']})" if "ringtrain" in c else ""
        if "tests_passed" in c:
            detail = f" ({c['tests_passed']} passed, {c['tests_skipped']} skipped)"
        lines.append(f"{verdict:7} {c['check']}{detail}")
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--date", default=datetime.date.today().isoformat())
    args = ap.parse_args()
    out = pathlib.Path(args.out)
    smi = out / "nvidia-smi-L.txt"
    device = smi.read_text().splitlines()[0] if smi.exists() and smi.read_text().strip() else "unknown GPU"
    rows = ringtrain_rows(out, args.date, device) + pytorch_rows(out, args.date, device)
    results = [{"date": args.date, "device": device, **c} for c in checks(out, rows)]
    with open(out / "gpu-summary.jsonl", "w") as f:
        for record in rows + results:
            f.write(json.dumps(record) + "\n")
    print("\n".join(summary_lines(rows, results)))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Summary of one GPU benchmark run (perf/gpu/run_gpu_bench.sh, or a run of compare_pytorch.py alone):
reads ringtrain's run directories, PyTorch's measurements (pytorch.jsonl from compare_pytorch.py), the nvidia-smi
memory samples and the test logs in OUT, prints a readable summary, and writes OUT/gpu-summary.jsonl, one JSON
object per line, ours and PyTorch's alike:

  measurements: date, device, impl (ringtrain | pytorch), model, precision, layout (nchw | nhwc), batch (per
                rank), ranks, samples_per_s (steady state: the warm-up steps excluded), warmup_steps,
                timed_steps, peak_mem_mib and mem_includes (what the peak counts: for both, the allocator's
                high-water mark), and beside it ringtrain's device_peak_mib and PyTorch's peak_reserved_mib;
                matmul_share (bf16 rows: training FLOP/s over the run's dense bf16 matmul rate). PyTorch's rows
                also carry mode (eager | eager_benchmark | compile | compile_max_autotune |
                compile_reduce_overhead), status (ok | skipped | failed, with reason; only ok rows have numbers),
                compile_s, sgd and torch (its version);
  matmul:       date, device, impl pytorch, measure "dense matmul rate", precision, flops_per_s;
  comparisons:  date, device, comparison, model, precision, PyTorch's best (the fastest mode that ran, any layout),
                its mode and the ratio ringtrain / best;
  checks:       date, device, check (what is compared), passed (true | false | null when a side is missing or
                a test log ran nothing; false, with a reason, for a test log without a result line: a crash or a
                timeout), and the numbers compared; a check against PyTorch's best names its mode and layout
                (reference_mode, reference_layout).

Every PyTorch number compared comes from OUT's pytorch.jsonl, which run_gpu_bench.sh empties at its start: the peer
is the one measured in the same run.

Usage: gpu_summary.py OUT [--date YYYY-MM-DD]
"""
import argparse
import datetime
import json
import pathlib
import re

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
                     "train_flops_per_sample": job.get("train_flops_per_sample"),
                     # Absent from jobs run before ringtrain captures its step in CUDA graphs.
                     "cuda_graphs": job.get("cuda_graphs"),
                     "layout": "nchw", "algorithms": algorithms, "batch": job["batch_per_rank"], "ranks": job["ranks"],
                     "samples_per_s": epoch.get("steady_samples_per_s"), "warmup_steps": warmup,
                     "timed_steps": epoch["steps"] - warmup,
                     "peak_mem_mib": allocated if allocated is not None else device_peak,
                     "mem_includes": RINGTRAIN_MEMORY if allocated is not None else RINGTRAIN_DEVICE_MEMORY,
                     "device_peak_mib": device_peak, "nvidia_smi_peak_mib": nvidia_smi_peak(out, name),
                     "backend": job.get("backend")})
    return rows


def pytorch_rows(out, date, device):
    """PyTorch's train rows, one per model x precision x mode (lines written before issue 38 have no mode: they
    were eager with cudnn.benchmark off), and its matmul rates."""
    names = {"fmnist": "fashion_mnist", "resnet50": "resnet50"}
    rows, matmul = [], []
    for r in read_lines(out / "pytorch.jsonl"):
        if r.get("kind") == "matmul":
            if r.get("status", "ok") == "ok":
                matmul.append({"date": date, "device": r.get("device", device), "impl": "pytorch",
                               "measure": "dense matmul rate", "precision": r["precision"], "n": r.get("n"),
                               "flops_per_s": r["flops_per_s"], "torch": r.get("torch")})
            continue
        if r.get("kind") != "train":
            continue
        ok = r.get("status", "ok") == "ok"
        rows.append({"date": date, "device": r.get("device", device), "impl": "pytorch",
                     "model": names.get(r["model"], r["model"]), "precision": r["precision"],
                     "layout": "nhwc" if r.get("channels_last") else "nchw", "mode": r.get("mode", "eager"),
                     "status": r.get("status", "ok"), "reason": r.get("reason"), "batch": r.get("batch"), "ranks": 1,
                     "samples_per_s": r.get("samples_per_s") if ok else None, "warmup_steps": r.get("warmup_steps"),
                     "timed_steps": r.get("timed_steps", r.get("steps")), "peak_mem_mib": r.get("peak_memory_mib"),
                     "steady_peak_mem_mib": r.get("steady_peak_memory_mib"),
                     "mem_includes": PYTORCH_MEMORY, "peak_reserved_mib": r.get("peak_reserved_mib"),
                     "compile_s": r.get("compile_s"), "sgd": r.get("sgd", "default"),
                     "train_flops_per_sample": r.get("train_flops_per_sample"), "torch": r.get("torch"),
                     # reduce-overhead: graphs Inductor ran without CUDA graphs, and why (note).
                     "cudagraph_skips": r.get("cudagraph_skips"), "note": r.get("note"),
                     "tiny": r.get("tiny", False)})
    return rows, matmul


def add_matmul_share(rows, matmul):
    """The model-FLOP share of each bf16 row: its training FLOP/s (each side's own FLOP count) over the dense bf16
    matmul rate measured in the same run."""
    rate = next((m["flops_per_s"] for m in matmul if m["precision"] == "bf16"), None)
    for r in rows:
        if rate and r["precision"] == "bf16" and r["samples_per_s"] and r.get("train_flops_per_sample"):
            r["matmul_share"] = r["samples_per_s"] * r["train_flops_per_sample"] / rate


def find(rows, impl, model, precision, layout="nchw", algorithms=None, mode="eager"):
    """The first measured row of the given implementation, model, precision, layout and (PyTorch's) mode."""
    return next((r for r in rows if r["impl"] == impl and r["model"] == model and r["precision"] == precision
                 and r["layout"] == layout and algorithms in (None, r.get("algorithms"))
                 and r.get("mode", mode) == mode and r["samples_per_s"] is not None), None)


def pytorch_best(rows, model, precision):
    """PyTorch's best: the fastest of its modes and layouts that ran for this model and precision."""
    ran = [r for r in rows if r["impl"] == "pytorch" and r["model"] == model and r["precision"] == precision
           and r["samples_per_s"] is not None]
    return max(ran, key=lambda r: r["samples_per_s"], default=None)


COMPILED_MODES = {"compile", "compile_reduce_overhead", "compile_max_autotune"}


def peer_incomplete(rows, model, precision):
    """Why the PyTorch that ran for this model and precision is not PyTorch at its best, or None. Eager PyTorch is
    not its best (2026-11-28: ResNet-50 bf16 eager 4,714 samples/s, compiled with CUDA graphs 6,721), so a verdict
    against it would flatter ringtrain: without a torch.compile mode there is none."""
    ran = {r["mode"] for r in rows if r["impl"] == "pytorch" and r["model"] == model and r["precision"] == precision
           and r["samples_per_s"] is not None}
    if not ran:
        return "none measured"
    return None if ran & COMPILED_MODES else "no torch.compile mode ran"


def comparisons(rows):
    """ringtrain / PyTorch's best, one line per ringtrain row (and one per PyTorch model x precision without one)."""
    result = []
    keys = {(r["model"], r["precision"]) for r in rows if r["impl"] == "pytorch"}
    ours = [r for r in rows if r["impl"] == "ringtrain" and r["samples_per_s"] is not None]
    for r in ours + [{"model": m, "precision": p, "samples_per_s": None} for m, p in sorted(keys)
                     if not any(o["model"] == m and o["precision"] == p for o in ours)]:
        best = pytorch_best(rows, r["model"], r["precision"])
        modes = sorted({t["mode"] for t in rows if t["impl"] == "pytorch" and t["model"] == r["model"]
                        and t["precision"] == r["precision"] and t["samples_per_s"] is not None})
        label = f"{r['model']} {r['precision']}" + (f" {r['layout']}" if r.get("layout") else "") + \
            (f" ({r['algorithms']} algorithms)" if r.get("algorithms") else "")
        result.append({"comparison": f"{label}: ringtrain / PyTorch's best", "model": r["model"],
                       "precision": r["precision"], "ringtrain": r["samples_per_s"],
                       "pytorch_incomplete": peer_incomplete(rows, r["model"], r["precision"]),
                       "pytorch_best": best and best["samples_per_s"], "pytorch_best_mode": best and best["mode"],
                       "pytorch_best_layout": best and best["layout"], "pytorch_modes_measured": modes,
                       "ratio": r["samples_per_s"] / best["samples_per_s"] if best and r["samples_per_s"] else None})
    return result


def compare(check, ours, theirs, key, passes):
    a = ours.get(key) if ours else None
    b = theirs.get(key) if isinstance(theirs, dict) else theirs
    return {"check": check, "passed": passes(a, b) if a is not None and b is not None else None,
            "ringtrain": a, "reference": b}


def test_log_check(out, name, check):
    """passed when the GoogleTest log lists no FAILED test and at least one PASSED; false when it lists a FAILED
    one, or ends without GoogleTest's result line (the binary crashed or its timeout killed it); null when the log
    is missing (the tests were not run) or every test in it skipped (nothing was proved either way:
    "[  PASSED  ] 0 tests" is not a pass)."""
    path = out / name
    if not path.exists():
        return {"check": check, "passed": None}
    text = path.read_text(errors="replace")
    counts = [int(n) for n in re.findall(r"^\[  PASSED  \] (\d+) tests?\.", text, re.M)]
    passed = sum(counts)
    skipped = sum(int(n) for n in re.findall(r"^\[  SKIPPED \] (\d+) tests?,", text, re.M))
    result = {"check": check, "tests_passed": passed, "tests_skipped": skipped}
    if "[  FAILED  ]" in text:
        return {**result, "passed": False}
    if not counts:
        return {**result, "passed": False, "reason": "no result line: crashed or timed out"}
    return {**result, "passed": True if passed > 0 else None}


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


def against_best(check, ours, rows, model, precision, factor=1.0):
    """ringtrain's steady samples/s against factor x PyTorch's best for the model and precision in this run (the
    fastest mode and layout measured); the label says which mode and layout that was. No verdict (passed None)
    where no torch.compile mode ran: the peer measured is then not PyTorch at its best."""
    best = pytorch_best(rows, model, precision)
    incomplete = peer_incomplete(rows, model, precision)
    which = f"{best['mode']}, {best['layout']}" if best else "none measured"
    if best and incomplete:
        which += f"; incomplete peer: {incomplete}"
    times = f"{factor:g} x " if factor != 1 else ""
    result = compare(f"{check}: ringtrain's steady samples/s >= {times}PyTorch's best ({which})", ours,
                     best and {"samples_per_s": factor * best["samples_per_s"]}, "samples_per_s", lambda a, b: a >= b)
    if incomplete:
        result["passed"] = None
    return {**result, "reference_mode": best and best["mode"], "reference_layout": best and best["layout"],
            "pytorch_incomplete": incomplete}


def checks(out, rows):
    fm_ours = find(rows, "ringtrain", "fashion_mnist", "fp32")
    # Memory: the fp32 run a user after speed makes (measured algorithms); the strict run where that is missing.
    rn_ours = find(rows, "ringtrain", "resnet50", "fp32", algorithms="measured") or find(rows, "ringtrain", "resnet50", "fp32")
    # Memory against PyTorch's best configuration's (the fastest that ran; issue 38), not its eager one's.
    rn_torch = pytorch_best(rows, "resnet50", "fp32")
    tf32, tf32_torch = find(rows, "ringtrain", "resnet50", "tf32"), pytorch_best(rows, "resnet50", "tf32")
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
        against_best("fashion_mnist fp32", fm_ours, rows, "fashion_mnist", "fp32", factor=1.5),
        against_best("resnet50 tf32", tf32, rows, "resnet50", "tf32"),
    ] + graphs_checks(rows)


def graphs_checks(rows):
    """Issue 38's launch-bound target: ringtrain with CUDA graphs >= 3x PyTorch compiled with reduce-overhead (its
    CUDA graphs), per precision both sides ran; ringtrain_cuda_graphs says whether our run had them."""
    def measured(impl, precision, mode=None):  # any layout: ringtrain's 16-bit runs are NHWC, PyTorch's as asked
        return next((r for r in rows if r["impl"] == impl and r["model"] == "fashion_mnist"
                     and r["precision"] == precision and r.get("mode") == mode and r["samples_per_s"] is not None),
                    None)

    result = []
    for precision in sorted({r["precision"] for r in rows if r["model"] == "fashion_mnist"}):
        ours, theirs = measured("ringtrain", precision), measured("pytorch", precision, "compile_reduce_overhead")
        if not ours and not theirs:
            continue
        check = compare(f"fashion_mnist {precision}: ringtrain (CUDA graphs) >= 3 x PyTorch compile_reduce_overhead",
                        ours, theirs and {"samples_per_s": 3 * theirs["samples_per_s"]}, "samples_per_s",
                        lambda a, b: a >= b)
        result.append({**check, "ringtrain_cuda_graphs": ours and ours.get("cuda_graphs"),
                       "pytorch_cudagraph_skips": theirs and theirs.get("cudagraph_skips")})
    return result


def summary_lines(rows, matmul, versus, results):
    lines = []
    for r in rows:
        mode = f" {r['mode']}" if r.get("mode") else ""
        algorithms = f" ({r['algorithms']} algorithms)" if r.get("algorithms") else ""
        batch = f" batch {r['batch']}" if r.get("batch") is not None else ""
        tiny = " (--tiny: a logic check, not a measurement)" if r.get("tiny") else ""
        head = f"{r['impl']:9} {r['model']:13} {r['precision']:4} {r['layout']}{mode}{algorithms}{batch}{tiny}"
        if r["samples_per_s"] is None:
            lines.append(f"{head}: {r.get('status', 'missing')} ({r.get('reason') or 'no rate'})")
            continue
        mem = f"{r['peak_mem_mib']:.0f} MiB" if r["peak_mem_mib"] is not None else "? MiB"
        extra = f", compile {r['compile_s']:.0f} s" if r.get("compile_s") is not None else ""
        extra += f", {100 * r['matmul_share']:.1f} % of bf16 matmul" if r.get("matmul_share") else ""
        lines.append(f"{head}: {r['samples_per_s']:.0f} samples/s ({r['timed_steps']} steps after "
                     f"{r['warmup_steps']} warm-up), peak {mem}{extra}")
    for m in matmul:
        size = f" n={m['n']}" if m.get("n") else ""
        lines.append(f"pytorch   dense matmul {m['precision']}{size}: {m['flops_per_s'] / 1e12:.3g} TFLOP/s")
    for c in versus:
        best = (f"{c['pytorch_best']:.0f} ({c['pytorch_best_mode']}, {c['pytorch_best_layout']}; of the modes "
                f"measured: {', '.join(c['pytorch_modes_measured'])})" if c["pytorch_best"] else "none measured")
        ours = f"{c['ringtrain']:.0f}" if c["ringtrain"] else "not run"
        ratio = f" = {c['ratio']:.2f}x" if c["ratio"] else ""
        incomplete = (f" (incomplete peer: {c['pytorch_incomplete']}; not PyTorch's best)"
                      if c.get("pytorch_incomplete") and c["pytorch_best"] else "")
        lines.append(f"versus  {c['comparison']}: {ours} / {best}{ratio}{incomplete}")
    for c in results:
        unset = ("SKIPPED" if c.get("tests_skipped") else
                 "NO VERDICT" if c.get("pytorch_incomplete") and c.get("reference") is not None
                 and c.get("ringtrain") is not None else "MISSING")
        verdict = {True: "PASS", False: "FAIL", None: unset}[c["passed"]]
        detail = f" (ringtrain {c['ringtrain']}, reference {c['reference']})" if "ringtrain" in c else ""
        if "tests_passed" in c:
            reason = f"; {c['reason']}" if c.get("reason") else ""
            detail = f" ({c['tests_passed']} passed, {c['tests_skipped']} skipped{reason})"
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
    torch_rows, matmul = pytorch_rows(out, args.date, device)
    rows = ringtrain_rows(out, args.date, device) + torch_rows
    add_matmul_share(rows, matmul)
    if device == "unknown GPU" and torch_rows:  # a run of the PyTorch peer alone
        device = torch_rows[0]["device"]
    versus = [{"date": args.date, "device": device, **c} for c in comparisons(rows)]
    results = [{"date": args.date, "device": device, **c} for c in checks(out, rows)]
    with open(out / "gpu-summary.jsonl", "w") as f:
        for record in rows + matmul + versus + results:
            f.write(json.dumps(record) + "\n")
    print("\n".join(summary_lines(rows, matmul, versus, results)))


if __name__ == "__main__":
    main()

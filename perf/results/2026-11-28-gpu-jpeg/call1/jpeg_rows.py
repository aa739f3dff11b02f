#!/usr/bin/env python3
"""Owns call 1's record: gpu-summary.jsonl in OUT from what the call wrote there (runs.jsonl: ringtrain's ResNet-50
runs; input.jsonl: ringtrain input-bench; gpu-decode.jsonl: torchvision's nvJPEG; pytorch.jsonl: PyTorch per mode
and the matmul rates), one JSON object a line, and the targets of issues 37 and 38 checked against the numbers of
this call alone. Rows: impl ringtrain (data synthetic | jpeg, store, decode, loader_threads), ringtrain input
pipeline, torchvision_nvjpeg, pytorch (mode), matmul; then comparisons and checks (passed true | false | null when
a side is missing). Prints a short table.
Usage: jpeg_rows.py OUT"""
import datetime
import json
import os
import sys


def lines(path):
    if not os.path.exists(path):
        return []
    rows = []
    for text in open(path):
        text = text.strip()
        if text.startswith("{"):
            try:
                rows.append(json.loads(text))
            except json.JSONDecodeError:
                pass
    return rows


def main(out):
    date = datetime.date.today().isoformat()
    torch_rows = lines(os.path.join(out, "pytorch.jsonl"))
    device = next((r.get("device") for r in torch_rows if r.get("device")), None)
    rows = []
    for run in lines(os.path.join(out, "runs.jsonl")):
        e = run.get("epoch") or {}
        name = run["run"]
        jpeg = name.startswith("jpeg")
        rows.append({"date": date, "device": device, "impl": "ringtrain", "model": "resnet50", "precision": "bf16",
                     "batch": 256, "run": name, "exit": run["exit"], "data": "jpeg" if jpeg else "synthetic",
                     "store": name.split("-")[1] if jpeg else None, "decode": "cpu" if jpeg else None,
                     "loader_threads": 8, "cores": 8, "samples_per_s": e.get("steady_samples_per_s"),
                     "data_wait_fraction": e.get("data_wait_fraction"),
                     "peak_mem_mib": e.get("device_memory_allocated_peak_mb"),
                     "flops_per_s": e.get("flops_per_s_per_rank")})
    for r in lines(os.path.join(out, "input.jsonl")):
        rows.append({"date": date, "device": device, "impl": "ringtrain", "measure": "input pipeline", **r})
    for r in lines(os.path.join(out, "gpu-decode.jsonl")):
        rows.append({"date": date, "measure": "input pipeline", **r})
    for r in torch_rows:
        rows.append({"date": date, "impl": "pytorch", **r})

    def ok(r):
        return r.get("samples_per_s") is not None and r.get("exit", 0) == 0 and r.get("status", "ok") == "ok"

    ours = [r for r in rows if r["impl"] == "ringtrain" and r.get("model") == "resnet50" and ok(r)]
    synthetic = [r["samples_per_s"] for r in ours if r["data"] == "synthetic"]
    theirs = [r for r in torch_rows if r.get("kind") == "train" and r.get("model") == "resnet50" and ok(r)]
    best = max(theirs, key=lambda r: r["samples_per_s"], default=None)
    matmul = next((r.get("flops_per_s") for r in torch_rows if r.get("kind") == "matmul" and r.get("precision") == "bf16"
                   and r.get("status") == "ok"), None)
    fastest = max((r for r in ours if r["data"] == "synthetic"), key=lambda r: r["samples_per_s"], default=None)

    def check(name, ours_value, reference, passed):
        return {"date": date, "device": device, "check": name, "ours": ours_value, "reference": reference,
                "passed": None if ours_value is None or reference is None else passed}

    results = []
    reference = sum(synthetic) / len(synthetic) if synthetic else None
    for store in ("original", "side256"):
        jpeg = [r["samples_per_s"] for r in ours if r["data"] == "jpeg" and r["store"] == store]
        mean = sum(jpeg) / len(jpeg) if jpeg else None
        results.append(check(f"resnet50 bf16 from JPEG shards ({store}), 8 cores decoding >= 95 % of synthetic", mean,
                             reference, mean is not None and reference is not None and mean >= 0.95 * reference))
    if best:
        results.append({"date": date, "device": device, "comparison": "resnet50 bf16 ringtrain / PyTorch's best",
                        "pytorch_best_mode": best.get("mode"), "pytorch_best": best["samples_per_s"],
                        "ringtrain": fastest and fastest["samples_per_s"],
                        "ratio": fastest and fastest["samples_per_s"] / best["samples_per_s"]})
    results.append(check("resnet50 bf16: ringtrain >= 1.15 x PyTorch's best", fastest and fastest["samples_per_s"],
                         best and 1.15 * best["samples_per_s"],
                         bool(fastest and best and fastest["samples_per_s"] >= 1.15 * best["samples_per_s"])))
    share = fastest and matmul and fastest.get("flops_per_s") and fastest["flops_per_s"] / matmul
    results.append(check("resnet50 bf16: training FLOP/s >= 22 % of the dense bf16 matmul rate", share, 0.22,
                         bool(share and share >= 0.22)))
    results.append(check("resnet50 bf16: peak device memory <= PyTorch's best configuration's",
                         fastest and fastest.get("peak_mem_mib"), best and best.get("peak_memory_mib"),
                         bool(fastest and best and fastest.get("peak_mem_mib") is not None
                              and best.get("peak_memory_mib") is not None
                              and fastest["peak_mem_mib"] <= best["peak_memory_mib"])))
    with open(os.path.join(out, "gpu-summary.jsonl"), "w") as f:
        for r in rows + results:
            f.write(json.dumps(r) + "\n")
    for r in rows:
        if r.get("model") == "resnet50" and r["impl"] == "ringtrain":
            print(f"ringtrain resnet50 {r['run']:<16} {r['samples_per_s'] or 0:8.0f} samples/s  wait "
                  f"{r['data_wait_fraction']}  peak {r['peak_mem_mib']} MiB")
    for r in results:
        if "check" in r:
            verdict = {True: "PASS", False: "FAIL", None: "MISSING"}[r["passed"]]
            print(f"{verdict:<7} {r['check']} (ours {r['ours']}, reference {r['reference']})")
        else:
            print(f"{r['comparison']}: {r['ratio']} (PyTorch {r['pytorch_best_mode']} {r['pytorch_best']:.0f})")


if __name__ == "__main__":
    main(sys.argv[1])

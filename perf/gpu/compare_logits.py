#!/usr/bin/env python3
"""Owns the `import` stage's check (perf/gpu/measure_pending.sh): `ringtrain predict --logits` of an imported
checkpoint on the GPU against onnxruntime's logits of the original ONNX file (computed on the CPU machine by
perf/gpu/pack_import_models.sh), as tests/e2e/check_import.py measures it: the largest difference relative to the
largest |logit| (at least 1), within --tolerance. Prints one JSON line; exits 1 past the tolerance. Needs numpy alone.

usage: compare_logits.py REFERENCE.npy PREDICTIONS.jsonl --tolerance T [--label TEXT]
"""
import argparse
import json
import sys

import numpy as np


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("reference")
    ap.add_argument("predictions")
    ap.add_argument("--tolerance", type=float, required=True)
    ap.add_argument("--label", default="")
    a = ap.parse_args()
    reference = np.load(a.reference)
    lines = [json.loads(line) for line in open(a.predictions) if line.startswith("{")]
    predicted = np.array([line["logits"] for line in lines], np.float32)
    row = {"stage": "import", "check": a.label, "tolerance": a.tolerance, "images": len(lines)}
    if predicted.shape != reference.shape:
        row.update(passed=False, reason=f"predict gave {predicted.shape}, the reference is {reference.shape}")
    else:
        scale = max(1.0, float(np.max(np.abs(reference))))
        worst = float(np.max(np.abs(predicted - reference))) / scale
        same_top = float(np.mean(np.argmax(predicted, 1) == np.argmax(reference, 1)))
        finite = bool(np.isfinite(predicted).all())
        row.update(passed=finite and worst <= a.tolerance, largest_logit=scale, same_top1=same_top,
                   worst_relative=worst if finite else None, finite=finite)  # JSON has no NaN
    print(json.dumps(row))
    sys.exit(0 if row["passed"] else 1)


if __name__ == "__main__":
    main()

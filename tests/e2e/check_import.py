"""Checks an imported ONNX model: onnxruntime's logits of the original file on the normalised images against
`ringtrain predict --logits` of the imported checkpoint, and against onnxruntime's logits of the file
`ringtrain export` wrote from it (which takes raw 0..255 pixels and normalises them itself). Each must agree
within --tolerance, relative to the largest logit (at least 1).

usage: check_import.py ORIGINAL.onnx IMAGES.npy PREDICTIONS.jsonl EXPORTED.onnx [--tolerance 1e-4]
"""
import argparse
import json
import sys

import numpy as np
import onnxruntime

# torchvision's ImageNet normalisation on 0..1 pixels: what `ringtrain import` writes by default.
MEAN = np.array([0.485, 0.456, 0.406], np.float32).reshape(1, 3, 1, 1)
STD = np.array([0.229, 0.224, 0.225], np.float32).reshape(1, 3, 1, 1)


def run(model, feeds):
    """The model's outputs for the batch; one image at a time where its batch is fixed at 1 (exported without a
    dynamic batch)."""
    session = onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    if session.get_inputs()[0].shape[0] == 1:
        return np.concatenate([session.run(None, {name: feeds[i:i + 1]})[0] for i in range(len(feeds))])
    return session.run(None, {name: feeds})[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("original")
    ap.add_argument("images")
    ap.add_argument("predictions")
    ap.add_argument("exported")
    ap.add_argument("--tolerance", type=float, default=1e-4)
    a = ap.parse_args()
    pixels = np.load(a.images).astype(np.float32)
    reference = run(a.original, (pixels / 255 - MEAN) / STD)
    predicted = np.array([json.loads(line)["logits"] for line in open(a.predictions)], np.float32)
    exported = run(a.exported, pixels)
    scale = max(1.0, float(np.max(np.abs(reference))))
    assert predicted.shape == reference.shape, (predicted.shape, reference.shape)
    worst_predict = float(np.max(np.abs(predicted - reference))) / scale
    worst_export = float(np.max(np.abs(exported - reference))) / scale
    print(f"check_import: {a.original}: {len(pixels)} images, largest |logit| {scale:.3g}; largest difference / "
          f"that: predict {worst_predict:.3g}, export(import) {worst_export:.3g} (tolerance {a.tolerance})")
    # predict writes a non-finite logit as JSON null, read here as NaN; a NaN difference compares false with
    # anything, so only "within the tolerance" passes, and every logit must be finite besides.
    logits = {"onnxruntime on the original": reference, "predict": predicted, "onnxruntime on the export": exported}
    nonfinite = {name: int(np.count_nonzero(~np.isfinite(v))) for name, v in logits.items()}
    nonfinite = {name: n for name, n in nonfinite.items() if n}
    if nonfinite:
        print(f"check_import: non-finite logits (NaN, inf, or null in predict's JSON): {nonfinite}")
    if nonfinite or not (worst_predict <= a.tolerance) or not (worst_export <= a.tolerance):
        sys.exit(1)


if __name__ == "__main__":
    main()

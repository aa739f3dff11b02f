"""Checks an ONNX file ringtrain exported against `ringtrain predict --logits` on the same samples.

The ONNX checker must pass; the graph must take "pixels" (N x C x H x W) and give "logits" and "probabilities"
(N x classes) with the class names in its metadata; onnxruntime's logits on the split's raw pixels must match
ringtrain's within --tolerance (largest absolute difference). --samples N compares the first N samples and
fails when the predictions hold fewer; without it, every prediction is compared. onnxruntime runs --batch
samples at a time, so a whole split never sits in its memory at once.

usage: check_onnx.py MODEL.onnx SPLIT_DIR PREDICTIONS.jsonl [--tolerance 1e-4] [--samples N] [--batch 1000]
"""
import argparse
import glob
import json
import sys

import h5py
import numpy as np
import onnx
import onnxruntime


def split_pixels(split_dir, count):
    """The first `count` samples of a split, in shard order, as float32 0..255."""
    images, labels = [], []
    for shard in sorted(glob.glob(f"{split_dir}/shard-*.h5")):
        with h5py.File(shard, "r") as f:
            images.append(f["images"][:].astype(np.float32))
            labels.append(f["labels"][:])
        if sum(len(i) for i in images) >= count:
            break
    return np.concatenate(images)[:count], np.concatenate(labels)[:count]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("split")
    ap.add_argument("predictions")
    ap.add_argument("--tolerance", type=float, default=1e-4)
    ap.add_argument("--samples", type=int, default=0, help="0: every prediction")
    ap.add_argument("--batch", type=int, default=1000)
    a = ap.parse_args()

    model = onnx.load(a.model)
    onnx.checker.check_model(model, full_check=True)
    inputs = [i.name for i in model.graph.input]
    outputs = [o.name for o in model.graph.output]
    meta = {p.key: p.value for p in model.metadata_props}
    assert inputs == ["pixels"], inputs
    assert outputs == ["logits", "probabilities"], outputs
    names = json.loads(meta["class_names"])
    dims = [d.dim_value for d in model.graph.output[0].type.tensor_type.shape.dim]
    assert dims[1] == len(names), (dims, len(names))
    assert not any(n.op_type == "Dropout" for n in model.graph.node), "dropout must be left out"

    predicted = [json.loads(line) for line in open(a.predictions)]
    if a.samples:
        assert len(predicted) >= a.samples, f"{a.predictions} holds {len(predicted)} predictions, fewer than {a.samples}"
        predicted = predicted[: a.samples]
    pixels, labels = split_pixels(a.split, len(predicted))
    assert len(labels) == len(predicted), f"{a.split} holds {len(labels)} samples, {len(predicted)} were predicted"
    assert [p["label"] for p in predicted] == labels.tolist(), "predict and the split disagree on the samples"
    session = onnxruntime.InferenceSession(a.model, providers=["CPUExecutionProvider"])
    runs = [session.run(["logits", "probabilities"], {"pixels": pixels[i : i + a.batch]})
            for i in range(0, len(pixels), a.batch)]
    logits = np.concatenate([r[0] for r in runs])
    probabilities = np.concatenate([r[1] for r in runs])
    ours = np.array([p["logits"] for p in predicted], dtype=np.float32)
    worst = float(np.max(np.abs(logits - ours)))
    same_top = float(np.mean(np.argmax(logits, 1) == np.argmax(ours, 1)))
    sums = float(np.max(np.abs(probabilities.sum(1) - 1)))
    print(f"check_onnx: {a.model}: {len(predicted)} samples, {len(model.graph.node)} nodes, opset "
          f"{model.opset_import[0].version}; largest |logit difference| {worst:.3g} (tolerance {a.tolerance}); "
          f"same top class {same_top:.4f}; probabilities sum to 1 within {sums:.2g}")
    # predict writes a non-finite logit as JSON null, read here as NaN; a NaN difference compares false with
    # anything, so only "within the bound" passes, and every number must be finite besides.
    values = {"onnxruntime logits": logits, "onnxruntime probabilities": probabilities, "predict logits": ours}
    nonfinite = {name: int(np.count_nonzero(~np.isfinite(v))) for name, v in values.items()}
    nonfinite = {name: n for name, n in nonfinite.items() if n}
    if nonfinite:
        print(f"check_onnx: non-finite values (NaN, inf, or null in predict's JSON): {nonfinite}")
    if nonfinite or not (worst <= a.tolerance) or not (sums <= 1e-5):
        sys.exit(1)


if __name__ == "__main__":
    main()

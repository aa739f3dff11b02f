#!/usr/bin/env bash
# multi_head_attention is torch.nn.MultiheadAttention: tests/e2e/attention_probe.toml runs one step at learning rate
# 0 on a synthetic 8x5x1 split (so its checkpoint holds the initial parameters), whose in-projection must lie within
# torch's xavier-uniform bound sqrt(6 / (D + 3D)) and its out-projection within nn.Linear's 1 / sqrt(D), both
# filling most of it, biases zero; and the checkpoint loaded into the same model built from torch's
# MultiheadAttention (torchvision_logits.py's attention_probe) gives the logits of ringtrain's ONNX export within
# 1e-4 of the largest (check_onnx.py holds the export to `predict` in e2e_use_trained_model).
# Skips (77) where /usr/bin/python3 has no torch or .venv-onnx is missing.
# Usage: attention_torch.sh RINGTRAIN SOURCE_DIR
set -euo pipefail
bin=$1 src=$2
onnx_python=$src/.venv-onnx/bin/python3
[ -x "$onnx_python" ] || { echo "SKIP: $onnx_python is missing (scripts/install_deps.sh)"; exit 77; }
/usr/bin/python3 -c 'import torch' 2>/dev/null || { echo "SKIP: /usr/bin/python3 cannot import torch"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
"$bin" prepare synthetic --shape 8,5,1 --classes 3 --samples 4 --test-samples 4 --out data >/dev/null
"$bin" train "$src/tests/e2e/attention_probe.toml" --set data.train=data/train --set data.test=data/test \
  --set run.device=cpu --set train.precision=fp32 --set run.dir=run >train.log 2>&1 || {
  echo "FAIL: training: $(tail -5 train.log)"; exit 1; }
checkpoint=$(ls run/checkpoints/ckpt-s*.h5 | tail -1)
/usr/bin/python3 - "$checkpoint" <<'PY'
import sys
import h5py
import numpy as np
with h5py.File(sys.argv[1], "r") as f:
    params, sizes = f["params"][:], f["tensor_sizes"][:]
d = 8
in_w, in_b, out_w, out_b = np.split(params[:sizes[:4].sum()], np.cumsum(sizes[:3]))
assert [in_w.size, in_b.size, out_w.size, out_b.size] == [3 * d * d, 3 * d, d * d, d], sizes
for name, w, bound in (("in_proj_weight", in_w, np.sqrt(6 / (4 * d))), ("out_proj.weight", out_w, 1 / np.sqrt(d))):
    peak = float(np.abs(w).max())
    assert 0.8 * bound < peak <= bound, f"{name}: largest |value| {peak:.4g}, torch's bound {bound:.4g}"
    print(f"ok   {name}: largest |value| {peak:.4g} within torch's bound {bound:.4g}")
assert not in_b.any() and not out_b.any(), "the projections' biases start at zero"
PY
"$bin" export --checkpoint "$checkpoint" --onnx probe.onnx >/dev/null
"$onnx_python" "$src/tests/e2e/torchvision_logits.py" onnx probe.onnx probe.npz
/usr/bin/python3 "$src/tests/e2e/torchvision_logits.py" torch "$checkpoint" attention_probe probe.npz

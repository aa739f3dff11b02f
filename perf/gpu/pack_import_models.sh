#!/usr/bin/env bash
# Owns the bundle for measure_pending.sh's `import` stage (issue 41: an imported checkpoint predicts on the GPU what
# onnxruntime computes of the ONNX file, within 1e-4 in fp32 and bf16's bound in bf16): on this CPU machine, which has
# torch 1.13 for the export and onnxruntime (.venv-onnx) for the reference, it exports torchvision classifiers with
# random weights (tests/e2e/torch_onnx_models.py), imports each with RINGTRAIN, checks the import on the CPU twin
# (check_import.py, as the import_onnx e2e test does), and packs the checkpoints, the PNG images and onnxruntime's
# logits into .gpurt/import.tar.xz (about 24 MB; perf/gpu/carry_size.sh then says whether it fits the carry beside the
# runtime and the tree): the GPU machine then needs no
# torch, ONNX or onnxruntime, only numpy.
#   perf/gpu/pack_import_models.sh RINGTRAIN [MODEL:FORM ...]   (default: mobilenet_v2:fused efficientnet_b0:preserve vit:fused)
# The models are small enough at 10 classes to fit the call's 64 MiB carry beside the runtime (the size is printed).
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=$(realpath "${1:?usage: pack_import_models.sh RINGTRAIN [MODEL:FORM ...]}")
shift
models=("$@")
[ ${#models[@]} -gt 0 ] || models=(mobilenet_v2:fused efficientnet_b0:preserve vit:fused)
onnx_python=.venv-onnx/bin/python3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/import" .gpurt
/usr/bin/python3 tests/e2e/torch_onnx_models.py "$work" --size 64 --count 8 "${models[@]}"
cp "$work"/image*.png "$work/import/"
for model in "${models[@]}"; do
  name=${model/:/-}
  "$bin" import --onnx "$work/$name.onnx" --out "$work/$name.toml" --checkpoint "$work/import/$name.h5" >/dev/null
  cp -r "$work/$name-data" "$work/import/"  # the split describing its input (shape, normalisation), for --data
  "$bin" predict --checkpoint "$work/import/$name.h5" --device cpu --logits --top 1 "$work"/image*.png >"$work/$name.jsonl"
  "$bin" export --checkpoint "$work/import/$name.h5" --onnx "$work/$name-exported.onnx" >/dev/null
  "$onnx_python" tests/e2e/check_import.py "$work/$name.onnx" "$work/images.npy" "$work/$name.jsonl" \
    "$work/$name-exported.onnx"
  # onnxruntime's logits of the original file on the normalised images, as check_import.py computes them.
  "$onnx_python" - "$work/$name.onnx" "$work/images.npy" "$work/import/$name-onnxruntime.npy" <<'PY'
import sys
import numpy as np
sys.path.insert(0, "tests/e2e")
import check_import
model, images, out = sys.argv[1:]
pixels = np.load(images).astype(np.float32)
np.save(out, check_import.run(model, (pixels / 255 - check_import.MEAN) / check_import.STD).astype(np.float32))
PY
done
tar cf - -C "$work" import | xz -T2 -9 >.gpurt/import.tar.xz
echo "$(git rev-parse --short HEAD) ${models[*]}" >.gpurt/import-BUILT.txt
du -h .gpurt/import.tar.xz
bash perf/gpu/carry_size.sh

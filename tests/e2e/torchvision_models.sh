#!/usr/bin/env bash
# jobs/mobilenet_v2.toml, jobs/efficientnet_b0.toml, jobs/resnext50_32x4d.toml, jobs/convnext_tiny.toml and
# jobs/vit_s16.toml are torchvision 0.14's mobilenet_v2(), efficientnet_b0(), resnext50_32x4d(), convnext_tiny() and
# VisionTransformer at ViT-S/16's width (torchvision_logits.py's torchvision_model):
# the parameter count each run's header states equals the count of torchvision's model, computed here, and the
# run's checkpoint loaded into torchvision's model gives the logits of ringtrain's ONNX export
# (torchvision_logits.py). Neither depends on the image side, so each job runs one step of 2 samples on a 3x32x32
# synthetic split (the CNNs' 32x downsampling leaves 1x1; the ViT's 16x16 patches leave 4 tokens and the class
# token, and torchvision's model is built for 32x32 images alike) on the CPU twin, at learning rate 0: the step still
# moves the batch norms' running statistics, and the logits stay of a size whose comparison means something (2
# samples through 1x1 batch norms give gradients that blow them up after one real step, in torchvision alike).
# ConvNeXt's layer scales start at 1e-6, which would leave its blocks' bodies out of the logits: its job runs with
# them at 1, so that every body's numbers count.
# Skips (77) where /usr/bin/python3 has no torchvision or .venv-onnx is missing.
# Usage: torchvision_models.sh RINGTRAIN SOURCE_DIR
set -euo pipefail
bin=$1 src=$2
onnx_python=$src/.venv-onnx/bin/python3
[ -x "$onnx_python" ] || { echo "SKIP: $onnx_python is missing (scripts/install_deps.sh)"; exit 77; }
/usr/bin/python3 -c "import torch, torchvision" 2>/dev/null ||
  { echo "SKIP: /usr/bin/python3 cannot import torch and torchvision (scripts/install_deps.sh)"; exit 77; }
# With torchvision there, any failure of the reference itself is this test's failure, not a skip.
counts=$(/usr/bin/python3 "$src/tests/e2e/torchvision_logits.py" count 32 mobilenet_v2 efficientnet_b0 \
  resnext50_32x4d convnext_tiny vit_s16)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
"$bin" prepare synthetic --shape 3,32,32 --classes 1000 --samples 2 --test-samples 2 --out data >/dev/null
while read -r name want; do
  sed 's/type = "layer_scale", init = 1e-6/type = "layer_scale", init = 1/' "$src/jobs/$name.toml" >"$name.toml"
  "$bin" train "$name.toml" --set data.train=data/train --set data.test=data/test \
    --set train.batch_per_rank=2 --set train.max_steps_per_epoch=1 --set train.precision=fp32 --set run.device=cpu \
    --set optimizer.base_lr=0 --set run.dir="$name" --set run.progress_every_s=1000 >"$name.log" 2>&1 || {
    echo "FAIL: $name: $(tail -5 "$name.log")"; exit 1; }
  got=$(sed -n "s/^model '$name': \([0-9]*\) parameters.*/\1/p" "$name.log")
  [ "$got" = "$want" ] || { echo "FAIL: jobs/$name.toml has ${got:-no stated} parameters, torchvision's $want"; exit 1; }
  echo "ok   jobs/$name.toml: $got parameters at 32x32, as torchvision's $name"
  checkpoint=$(ls "$name"/checkpoints/ckpt-s*.h5 | tail -1)
  "$bin" export --checkpoint "$checkpoint" --onnx "$name.onnx" >/dev/null
  "$onnx_python" "$src/tests/e2e/torchvision_logits.py" onnx "$name.onnx" "$name.npz"
  /usr/bin/python3 "$src/tests/e2e/torchvision_logits.py" torch "$checkpoint" "$name" "$name.npz"
done <<<"$counts"

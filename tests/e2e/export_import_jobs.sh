#!/usr/bin/env bash
# ringtrain's export of each 1,000-class model file in jobs/ (the CNNs and ViT-S/16) imports back as the model it
# was: the checkpoint after one training step (fp32, on the CPU), exported to ONNX and imported, predicts as that
# checkpoint does, byte for byte, on a split of 1,000-class 3x64x64 samples.
# Usage: export_import_jobs.sh RINGTRAIN SOURCE_DIR
set -euo pipefail
bin=$1 src=$2
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$bin" prepare synthetic --shape 3,64,64 --classes 1000 --samples 1100 --out "$work/data" >/dev/null
first_step() {  # JOB NAME: a checkpoint after one step
  "$bin" train "$src/jobs/$1.toml" --set data.train="$work/data/train" --set data.test="$work/data/test" \
    --set train.epochs=1 --set train.max_steps_per_epoch=1 --set train.batch_per_rank=4 --set run.threads=2 \
    --set 'run.device="cpu"' --set 'train.precision="fp32"' --set run.dir="\"$work/run-$1\"" >"$work/$1.log" 2>&1 ||
    { cat "$work/$1.log"; fail "$1: training one step"; }
  "$bin" export --checkpoint "$work/run-$1/checkpoints/ckpt-s000000001.h5" --onnx "$work/$1.onnx" >/dev/null
}

for job in resnet50_synthetic mobilenet_v2 efficientnet_b0 resnext50_32x4d convnext_tiny vit_s16; do
  first_step "$job"
  "$bin" import --onnx "$work/$job.onnx" --out "$work/import-$job/model.toml" \
    --checkpoint "$work/import-$job/model.h5" >/dev/null
  "$bin" predict --checkpoint "$work/run-$job/checkpoints/ckpt-s000000001.h5" --logits "$work/data/test" \
    >"$work/$job-trained.jsonl"
  "$bin" predict --checkpoint "$work/import-$job/model.h5" --logits "$work/data/test" >"$work/$job-imported.jsonl"
  cmp -s "$work/$job-trained.jsonl" "$work/$job-imported.jsonl" ||
    fail "$job: the imported export predicts otherwise than the checkpoint exported"
  echo "ok   $job: exported, imported, the same logits on $(wc -l <"$work/$job-imported.jsonl") samples"
done

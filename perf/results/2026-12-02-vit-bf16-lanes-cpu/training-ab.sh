#!/bin/bash
# ViT-S/16 bf16 training on the CPU twin at 64x64 (17 tokens, batch 32, 18 steps of which 2 warm-up, 2 threads),
# the binary of the session's start (e20135a) and this session's, alternated, from the repository root. One JSON line
# a run: steady samples/s, seconds in layers (run.profile_layers), GELU's and attention's forward and backward
# seconds, the 1x1 convolutions' backward seconds, the final training loss, the VM's steal time.
#   OLD=/tmp/ringtrain-old (built at e20135a), NEW=build-gpu/bin/ringtrain, ROUNDS=4
set -euo pipefail
old=${OLD:-/tmp/ringtrain-old} new=${NEW:-build-gpu/bin/ringtrain} rounds=${ROUNDS:-4}
data=$(mktemp -d)
$new prepare synthetic --shape 3,64,64 --classes 100 --samples 1024 --out "$data/64" > /dev/null
run() {  # tag binary
  local out="$data/$1.txt" steal0 steal1
  steal0=$(awk '/^cpu /{print $9}' /proc/stat)
  "$2" train jobs/vit_s16.toml --set data.train="$data/64/train" --set data.test="$data/64/test" --set train.epochs=1 \
    --set train.max_steps_per_epoch=18 --set train.batch_per_rank=32 --set run.threads=2 \
    --set run.timing_warmup_steps=2 --set 'train.precision="bf16"' --set 'run.device="cpu"' \
    --set 'optimizer.name="sgd"' --set optimizer.momentum=0.9 --set run.profile_layers=true \
    --set model.replace_head=100 --set data.eval_resize=0 --set run.dir="$data/run-$1" \
    --set run.checkpoint_every=0 --set run.progress_every_s=1000 > "$out" 2>&1
  steal1=$(awk '/^cpu /{print $9}' /proc/stat)
  printf '{"tag":"%s","steady":%s,"layers_s":%s,"gelu_fwd_s":%s,"gelu_bwd_s":%s,"attention_fwd_s":%s,"attention_bwd_s":%s,"mlp_bwd_s":%s,"loss":%s,"steal_jiffies":%s,"utc":"%s"}\n' \
    "$1" "$(grep -o 'steady [0-9.]*' "$out" | head -1 | cut -d' ' -f2)" \
    "$(grep -o '[0-9.]* s in layers' "$out" | head -1 | cut -d' ' -f1)" \
    "$(grep -E '^gelu' "$out" | head -1 | awk '{print $5}')" "$(grep -E '^gelu' "$out" | head -1 | awk '{print $6}')" \
    "$(grep -E '^multi_head_attention' "$out" | head -1 | awk '{print $7}')" \
    "$(grep -E '^multi_head_attention' "$out" | head -1 | awk '{print $8}')" \
    "$(grep -E '^conv2d 1x1' "$out" | awk '{s += $9} END {print s}')" \
    "$(grep -o 'train loss [0-9.]*' "$out" | head -1 | cut -d' ' -f3)" "$((steal1 - steal0))" "$(date -u +%H:%M:%S)"
}
for round in $(seq 1 "$rounds"); do
  run "old-$round" "$old"
  run "new-$round" "$new"
done
cp "$data/new-$rounds.txt" "$(dirname "$0")/profile-new.txt"
cp "$data/old-$rounds.txt" "$(dirname "$0")/profile-old.txt"
rm -rf "$data"

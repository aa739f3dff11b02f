#!/bin/bash
# ViT-S/16 bf16 training on the CPU twin, the binary before this session's changes (7bed01b, built as below) and after,
# alternated, three rounds at 224x224 (197 tokens, batch 32, 8 steps of which 2 warm-up) and at 64x64 (17 tokens,
# batch 32, 18 steps), from the repository root. One JSON line a run: steady samples/s, the attention layers' forward
# and backward seconds, GELU's backward and the position embedding's forward seconds, the seconds in layers
# (run.profile_layers), the final training loss, the VM's steal time.
#   git worktree add /tmp/head 7bed01b && ln -s $PWD/.venv-onednn /tmp/head/ && ln -s $PWD/.venv-nvjpeg /tmp/head/
#   cmake -S /tmp/head -B /tmp/head/build -DCMAKE_BUILD_TYPE=Release -DRINGTRAIN_WERROR=ON
#   cmake --build /tmp/head/build -j2 --target ringtrain
set -euo pipefail
old=${OLD:-/tmp/head/build/bin/ringtrain} new=${NEW:-build-gpu/bin/ringtrain}
data=$(mktemp -d)
$new prepare synthetic --shape 3,224,224 --classes 100 --samples 256 --out "$data/224" > /dev/null
$new prepare synthetic --shape 3,64,64 --classes 100 --samples 512 --out "$data/64" > /dev/null
run() {  # tag binary data batch steps
  local out="$data/$1.txt"
  local steal0 steal1
  steal0=$(awk '/^cpu /{print $9}' /proc/stat)
  "$2" train jobs/vit_s16.toml --set data.train="$3/train" --set data.test="$3/test" --set train.epochs=1 \
    --set train.max_steps_per_epoch="$5" --set train.batch_per_rank="$4" --set run.threads=2 \
    --set run.timing_warmup_steps=2 --set 'train.precision="bf16"' --set 'run.device="cpu"' \
    --set 'optimizer.name="sgd"' --set optimizer.momentum=0.9 --set run.profile_layers=true \
    --set model.replace_head=100 --set data.eval_resize=0 --set run.dir="$data/run-$1" \
    --set run.progress_every_s=1000 > "$out" 2>&1
  steal1=$(awk '/^cpu /{print $9}' /proc/stat)
  printf '{"tag":"%s","steady":%s,"attention_fwd_s":%s,"attention_bwd_s":%s,"gelu_bwd_s":%s,"position_embedding_fwd_s":%s,"layers_s":%s,"loss":%s,"steal_jiffies":%s,"utc":"%s"}\n' \
    "$1" "$(grep -o 'steady [0-9.]*' "$out" | head -1 | cut -d' ' -f2)" \
    "$(grep -E '^multi_head_attention' "$out" | head -1 | awk '{print $7}')" \
    "$(grep -E '^multi_head_attention' "$out" | head -1 | awk '{print $8}')" \
    "$(grep -E '^gelu' "$out" | head -1 | awk '{print $6}')" \
    "$(grep -E '^position_embedding' "$out" | head -1 | awk '{print $5}')" \
    "$(grep -o '[0-9.]* s in layers' "$out" | head -1 | cut -d' ' -f1)" \
    "$(grep -o 'train loss [0-9.]*' "$out" | head -1 | cut -d' ' -f3)" "$((steal1 - steal0))" "$(date -u +%H:%M:%S)"
}
for round in 1 2 3; do
  run "old-224-$round" "$old" "$data/224" 32 8
  run "new-224-$round" "$new" "$data/224" 32 8
done
for round in 1 2 3; do
  run "old-64-$round" "$old" "$data/64" 32 18
  run "new-64-$round" "$new" "$data/64" 32 18
done
cp "$data/new-224-3.txt" "$(dirname "$0")/profile-224-new.txt"
cp "$data/old-224-3.txt" "$(dirname "$0")/profile-224-old.txt"
cp "$data/new-64-3.txt" "$(dirname "$0")/profile-64-new.txt"
cp "$data/old-64-3.txt" "$(dirname "$0")/profile-64-old.txt"
rm -rf "$data"

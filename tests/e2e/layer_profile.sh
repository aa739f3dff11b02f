#!/usr/bin/env bash
# run.profile_layers end to end: the table times the steps after run.timing_warmup_steps (so a first call that builds
# a kernel is not read as a cost of every step), says how many, and counts each layer's calls over those steps only;
# an epoch with no steps after the warm-up is timed whole, and the table says so.
# Usage: layer_profile.sh RINGTRAIN SOURCE_DIR
set -euo pipefail
bin=$1 src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
"$bin" prepare synthetic --shape 3,8,8 --classes 5 --samples 96 --test-samples 8 --out data >/dev/null
profile() {  # profile RUN STEPS: the run's log
  "$bin" train "$src/jobs/fashion_mnist.toml" --set data.train=data/train --set data.test=data/test \
    --set train.batch_per_rank=8 --set train.epochs=1 --set train.max_steps_per_epoch="$2" \
    --set run.timing_warmup_steps=2 --set run.profile_layers=true --set run.device=cpu --set run.dir="$1" \
    --set run.progress_every_s=1000 \
    --set 'model.layers=[{type="flatten"},{type="dense",units=7},{type="relu"},{type="dense",units=5}]' \
    >"$1.log" 2>&1 || { echo "FAIL: run $1: $(tail -5 "$1.log")"; exit 1; }
}
profile long 6
grep -q "layer profile, rank 0, epoch 1 (4 steps after 2 warm-up steps;" long.log ||
  { echo "FAIL: the header does not name 4 steps after 2 warm-up steps:"; grep "layer profile" long.log; exit 1; }
echo "ok   the profile times the 4 steps after the 2 warm-up steps, and says so"
rows=$(grep -E "^dense (7 on 192|5 on 7) " long.log || true)
[[ $(wc -l <<<"$rows") -eq 2 ]] || { echo "FAIL: expected both dense rows:"; sed -n '/layer profile/,$p' long.log; exit 1; }
awk '{ if ($5 != 4) bad = 1 } END { exit bad }' <<<"$rows" ||
  { echo "FAIL: a dense layer's calls are not the 4 profiled steps':"; echo "$rows"; exit 1; }
echo "ok   each dense layer counts 4 calls: the warm-up steps are left out"
profile short 2
grep -q "(2 steps, warm-up included: the epoch has no steps after run.timing_warmup_steps;" short.log ||
  { echo "FAIL: a 2-step epoch's profile does not say it includes the warm-up:"; grep "layer profile" short.log; exit 1; }
echo "ok   an epoch no longer than the warm-up is profiled whole, and the header says so"

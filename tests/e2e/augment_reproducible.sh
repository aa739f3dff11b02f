#!/usr/bin/env bash
# data.augment end to end: two 2-rank runs with pad_crop_flip and the same seed, each with 2 loader threads,
# record identical losses (augmentation keyed by seed, epoch, rank and sample, not by thread timing), and
# they differ from the same run without augmentation (the loader did transform the training samples).
# Usage: augment_reproducible.sh RINGTRAIN SOURCE_DIR MPIEXEC
set -euo pipefail
bin=$1 src=$2 mpiexec=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
"$bin" prepare synthetic --shape 3,8,8 --classes 5 --samples 240 --test-samples 30 --shards 2 --out data >/dev/null
losses() {  # losses RUN AUGMENT: prints "epoch train_loss test_loss" per epoch
  "$mpiexec" -np 2 --oversubscribe "$bin" train "$src/jobs/fashion_mnist.toml" --set data.train=data/train \
    --set data.test=data/test --set 'model.layers=[{type="flatten"},{type="dense",units=7},{type="relu"},{type="dense",units=5}]' \
    --set train.batch_per_rank=8 --set train.epochs=2 --set run.dir="$1" --set run.progress_every_s=1000 \
    --set data.augment="$2" --set data.loader_threads=2 >"$1.log" 2>&1 || { echo "FAIL: run $1: $(tail -5 "$1.log")"; exit 1; }
  /usr/bin/python3 -c "
import json, sys
for line in open(sys.argv[1] + '/metrics.jsonl'):
    d = json.loads(line)
    if d.get('kind') == 'epoch': print(d['epoch'], d['train_loss'], d['test_loss'])" "$1"
}
a=$(losses a pad_crop_flip); b=$(losses b pad_crop_flip); c=$(losses c none)
[[ -n $a && $a == "$b" ]] || { echo "FAIL: same seed, different losses:"; echo "$a"; echo "$b"; exit 1; }
echo "ok   two augmented runs with one seed record the same losses"
[[ $a != "$c" ]] || { echo "FAIL: augmentation changed nothing"; exit 1; }
echo "ok   augmented and plain runs differ"

#!/usr/bin/env bash
# data.augment end to end: two 2-rank runs with pad_crop_flip and the same seed, each with 2 loader threads,
# record identical losses (augmentation keyed by seed, epoch, rank and sample, not by thread timing), and
# they differ from the same run without augmentation (the loader did transform the training samples).
# Usage: augment_reproducible.sh RINGTRAIN SOURCE_DIR MPIEXEC
set -euo pipefail
bin=$1 src=$2 mpiexec=$3
source "$src/tests/support/synthetic_runs.sh"
losses() {  # losses RUN AUGMENT: prints "epoch train_loss test_loss" per epoch
  synthetic_records "$1" "epoch train_loss test_loss" \
    'model.layers=[{type="flatten"},{type="dense",units=7},{type="relu"},{type="dense",units=5}]' \
    data.augment="$2" data.loader_threads=2
}
a=$(losses a pad_crop_flip); b=$(losses b pad_crop_flip); c=$(losses c none)
[[ -n $a && $a == "$b" ]] || { echo "FAIL: same seed, different losses:"; echo "$a"; echo "$b"; exit 1; }
echo "ok   two augmented runs with one seed record the same losses"
[[ $a != "$c" ]] || { echo "FAIL: augmentation changed nothing"; exit 1; }
echo "ok   augmented and plain runs differ"

#!/usr/bin/env bash
# The node-shared sum a part at a time just before each part's update (after: /tmp/rt/ringtrain-after, the trial's
# working tree on top of 3cd686b, reverted since) against the whole slice summed first (before:
# /tmp/rt/ringtrain-before, built at 3cd686b), alternated in one call: 2 ranks x batch 64, one
# compute thread each, bound to cores, 20 warm-up + 150 timed steps, dist.reducer = "shared" (the default here).
# Usage: alternate_interleave.sh PRECISION ROUNDS
set -euo pipefail
cd "$(dirname "$0")/../../.."
precision=$1 rounds=$2
for round in $(seq "$rounds"); do
  for build in before after; do
    dir=/tmp/rt/il-$build-$precision-$round
    rm -rf "$dir"
    mpirun --allow-run-as-root -np 2 --bind-to core /tmp/rt/ringtrain-$build train jobs/fashion_mnist.toml \
      --set train.epochs=1 --set train.max_steps_per_epoch=170 --set run.threads=1 --set run.timing_warmup_steps=20 \
      --set "train.precision=\"$precision\"" --set run.dir="$dir" >"$dir.log" 2>&1
    steady=$(grep -o '"steady_samples_per_s":[0-9.]*' "$dir/metrics.jsonl" | tail -1 | cut -d: -f2)
    checksum=$(grep -o '"param_checksum":"[0-9a-f]*"' "$dir/metrics.jsonl" | tail -1)
    phases=$(grep -o 'per rank: .*optimizer [0-9.]*s' "$dir.log" | tail -1)
    echo "round $round $precision $build: steady $steady samples/s | $phases | $checksum"
  done
done

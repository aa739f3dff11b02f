#!/usr/bin/env bash
# dist.reducer = "shared" against "nonblocking", alternated three times in one call on the 2-core guest: the
# Fashion-MNIST job, 2 ranks x batch 64, one compute thread each, bound to cores, 20 warm-up + 150 timed steps.
# Prints each run's steady samples/s, its per-rank phase line and its parameter checksum.
set -euo pipefail
cd "$(dirname "$0")/../../.."
for round in 1 2 3; do
  for reducer in shared nonblocking; do
    dir=/tmp/rt/alt-$reducer-$round
    rm -rf "$dir"
    mpirun --allow-run-as-root -np 2 --bind-to core build/bin/ringtrain train jobs/fashion_mnist.toml \
      --set train.epochs=1 --set train.max_steps_per_epoch=170 --set run.threads=1 \
      --set run.timing_warmup_steps=20 --set "dist.reducer=\"$reducer\"" --set run.dir="$dir" >"$dir.log" 2>&1
    steady=$(grep -o '"steady_samples_per_s":[0-9.]*' "$dir/metrics.jsonl" | tail -1 | cut -d: -f2)
    checksum=$(grep -o '"param_checksum":"[0-9a-f]*"' "$dir/metrics.jsonl" | tail -1)
    phases=$(grep -o 'per rank: .*optimizer [0-9.]*s' "$dir.log" | tail -1)
    echo "round $round $reducer: steady $steady samples/s | $phases | $checksum"
  done
done

#!/bin/bash
# Alternates the HEAD build (/tmp/rt/head, git worktree of the commit before) and the working build on one core:
# the Fashion-MNIST step (median of 5) and its per-layer counters.
for r in 1 2 3 4; do
  for b in head new; do
    bin=/work/main/build/bin/ringtrain-bench; [ $b = head ] && bin=/tmp/rt/head/build/bin/ringtrain-bench
    echo "== round $r $b"
    (cd /work/main && taskset -c 1 $bin --benchmark_filter='NetworkStep/fashion_mnist/64$' --benchmark_repetitions=5 \
      --benchmark_report_aggregates_only=true 2>&1 | grep -E "_median" | tail -1)
  done
done

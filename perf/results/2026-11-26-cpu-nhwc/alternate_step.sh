#!/bin/bash
# Alternates the HEAD build and the working build on one core: the Fashion-MNIST step and conv2's NHWC ceiling.
for r in 1 2 3; do
  for b in head new; do
    bin=/work/main/build/bin/ringtrain-bench; [ $b = head ] && bin=/tmp/rt/head/build/bin/ringtrain-bench
    echo "== round $r $b"
    (cd /work/main && taskset -c 1 $bin --benchmark_filter='NetworkStep/fashion_mnist/64$' --benchmark_repetitions=3 \
      --benchmark_report_aggregates_only=true 2>&1 | grep -E "_median|conv2d 5x5x64|batchnorm|dense 1024|conv2d 5x5x32" | tail -5)
  done
done

#!/bin/bash
# Alternates the HEAD build and the working build: one rank on core 1, 150 steps of the Fashion-MNIST job with the
# layer profile; prints conv1's row, the step's samples/s and the checksum line.
for r in 1 2 3; do
  for b in head new; do
    bin=/work/main/build/bin/ringtrain; [ $b = head ] && bin=/tmp/rt/head/build/bin/ringtrain
    echo "== round $r $b"
    rm -rf /tmp/rt/prof-$b
    (cd /work/main && taskset -c 1 $bin train jobs/fashion_mnist.toml --set train.epochs=1 \
      --set train.max_steps_per_epoch=150 --set run.threads=1 --set run.profile_layers=true --set run.dir=/tmp/rt/prof-$b 2>&1 |
      grep -E " in: |^conv2d|^dense|^batchnorm|samples/s \|")
  done
done

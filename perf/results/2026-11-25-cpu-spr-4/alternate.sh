#!/usr/bin/env bash
# Alternates before/after: 2 ranks x 200 steps of the Fashion-MNIST job, samples/s as the epoch line prints it.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
for round in 1 2 3; do
  for v in before after; do
    rm -rf /tmp/ab/run-$v
    mpirun -np 2 --oversubscribe /tmp/ab/$v/build/bin/ringtrain train /work/main/jobs/fashion_mnist.toml \
      --set data.train=/work/study/fmnist/train --set data.test=/work/study/fmnist/test --set train.epochs=1 \
      --set train.max_steps_per_epoch=200 --set run.dir=/tmp/ab/run-$v > /tmp/ab/$v-$round.log 2>&1
    echo "round $round $v $(grep -o '[0-9]* samples/s | per rank' /tmp/ab/$v-$round.log) $(grep -o 'forward [0-9.]*s backward [0-9.]*s' /tmp/ab/$v-$round.log)"
  done
done

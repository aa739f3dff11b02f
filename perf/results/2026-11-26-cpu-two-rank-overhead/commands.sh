#!/usr/bin/env bash
# The commands behind 2026-11-26-cpu-two-rank-overhead.md, run from the repository root with build/ at a89a188 on the
# 2-core guest (nothing else running). Each job: Fashion-MNIST CNN, one epoch of 150 steps, batch 64 per rank, one
# compute thread per rank.
job="build/bin/ringtrain train jobs/fashion_mnist.toml --set train.epochs=1 --set train.max_steps_per_epoch=150 \
  --set run.threads=1"
# 1 rank and 2 ranks, bound to cores
for np in 1 2; do mpirun --allow-run-as-root -np $np --bind-to core $job --set run.dir=/tmp/rt/j$np; done
# the reducer settings
for v in dist.bucket_mb=4 dist.bucket_mb=16 dist.reducer=thread dist.reducer=blocking dist.allreduce_dtype=bf16; do
  mpirun --allow-run-as-root -np 2 --bind-to core $job --set run.dir=/tmp/rt/jv --set $v; done
# bucket sizes alternated three times (bucket-sweep.txt)
for r in 1 2 3; do for b in 1 2 4 8; do
  mpirun --allow-run-as-root -np 2 --bind-to core $job --set run.dir=/tmp/rt/jv --set dist.bucket_mb=$b; done; done
# two independent one-rank jobs at once, one per core, then one alone (two-independent-jobs.txt)
taskset -c 0 $job --set run.dir=/tmp/rt/ja & taskset -c 1 $job --set run.dir=/tmp/rt/jb; wait
taskset -c 1 $job --set run.dir=/tmp/rt/jc
# the all-reduce alone, 12.5 MiB (the model's 3.3 M gradients)
for red in nonblocking blocking; do
  mpirun --allow-run-as-root -np 2 --bind-to core build/bin/ringtrain-allreduce-bench --mib 12.5 --iters 20 --reducer $red
done

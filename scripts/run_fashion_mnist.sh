#!/usr/bin/env bash
# The main job: installs dependencies, builds the ringtrain binary (only it: the tests and benchmarks are
# scripts/test.sh's), prepares Fashion-MNIST as 8 HDF5 shards per split, and trains jobs/fashion_mnist.toml on
# 2 MPI ranks. Extra arguments go to `ringtrain train`, e.g. --set train.epochs=1
# Ranks: RANKS=4 scripts/run_fashion_mnist.sh
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
TARGETS=ringtrain scripts/build.sh
[ -f data/fmnist/train/shard-00000-of-00008.h5 ] || build/bin/ringtrain prepare fashion-mnist \
  --source /usr/share/datasets/fashion-mnist --out data/fmnist --shards 8 --overwrite
build/bin/ringtrain inspect data/fmnist/train | tail -n 3
run_dir=runs/fashion_mnist-$(date +%Y%m%d-%H%M%S)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpirun -np "${RANKS:-2}" --oversubscribe --bind-to none build/bin/ringtrain train jobs/fashion_mnist.toml --set run.dir="$run_dir" "$@"
echo "results: $run_dir/metrics.jsonl"

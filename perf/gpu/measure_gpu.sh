#!/usr/bin/env bash
# Owns the GPU measurement in stages on one host: the GPU tests, the real Fashion-MNIST job on the GPU, ResNet-50
# under named settings, and the throughput benchmark against PyTorch (perf/gpu/run_gpu_bench.sh), with the portable
# Open MPI + HDF5 runtime unpacked first where the host lacks them (perf/gpu/carried.sh).
#   perf/gpu/measure_gpu.sh [OUT_DIR]      results into OUT_DIR (default: $OUT)
# The short logs land in OUT_DIR as they are, the rest in one tarball (details.tgz), so that a record copies a
# handful of files.
#
# Expects .gpurt/ (perf/gpu/pack_carried.sh makes it; carried.sh unpacks it): root.tar.xz (the runtime's root/),
# lib.tar.xz, env.sh, cuda-libs.sh, bin.tar.xz or bin/ with {ringtrain,test_gpu,test_layers,test_equivalence,
# ringtrain-bench,ringtrain-allreduce-bench}, fmnist/*.gz (Debian's dataset-fashion-mnist files). The bench stage's
# gpu-summary.jsonl and the nccl stage's nccl-summary.jsonl are the records for perf/results/<date>-gpu-<topic>/.
#   STAGES="tests fmnist bench"   which parts to run (also: variants, resnet20, nccl);  FMNIST_EPOCHS=12;
#   FMNIST_SETS="--set k=v ..." (more overrides for the fmnist stage, e.g. train.precision);
#   STEPS=40 (benchmark steps);  VARIANTS="name=--set k=v ...;name2=..." (ResNet-50 settings to compare);
#   LAYERS=0 leaves the single-layer benchmarks out of the bench stage;  BENCH_TIMEOUT_S=450 (the bench stage's
#   time limit; each other stage has its own, below).
# What each stage costs on an H100 and an H200: perf/gpu/PENDING.md.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${1:-${OUT:?usage: measure_gpu.sh OUT_DIR (or set OUT)}}
mkdir -p "$out"
stages=${STAGES:-tests fmnist bench}
work=$(mktemp -d)
bin=${BIN:-.gpurt/bin}  # the binaries: .gpurt/bin as packed, or e.g. build/bin on a host that built them
source perf/gpu/carried.sh
unpack_carried
export CUDA_LIBS_LOG=$work/cuda-libs.log
log() { echo "[measure_gpu $(date +%T)] $*" | tee -a "$out/summary.txt"; }

nvidia-smi -L | tee -a "$out/summary.txt"
rt ldd "$bin/ringtrain" | grep -E "not found|cudnn|nccl|cublas|mpi|hdf5" >>"$out/summary.txt"
rt "$bin/ringtrain" --version 2>&1 | tee -a "$out/summary.txt"

if [[ " $stages " == *" tests "* ]]; then
  rt timeout 150 mpirun -np 1 "$bin/test_gpu" --gtest_color=no >"$out/test_gpu.log" 2>&1
  log "test_gpu exit $?: $(grep -cE '^\[       OK' "$out/test_gpu.log") ok, $(grep -cE '^\[  FAILED  \] [A-Z]' "$out/test_gpu.log") failed lines"
  rt timeout 150 "$bin/test_layers" --gtest_color=no --gtest_filter='*/cuda*' >"$out/test_layers_cuda.log" 2>&1
  log "test_layers (cuda) exit $?: $(grep -cE '^\[       OK' "$out/test_layers_cuda.log") ok, $(grep -cE '^\[  FAILED  \] [A-Z]' "$out/test_layers_cuda.log") failed lines"
  mkdir -p "$work/bench" && cp "$out/test_gpu.log" "$out/test_layers_cuda.log" "$work/bench/"  # for gpu_summary.py
fi

if [[ " $stages " == *" fmnist "* ]]; then
  rt "$bin/ringtrain" prepare fashion-mnist --source .gpurt/fmnist --out "$work/fmnist" --shards 8 >"$work/prepare.log" 2>&1 ||
    log "prepare fashion-mnist failed: $(tail -3 "$work/prepare.log")"
  # shellcheck disable=SC2086 # $FMNIST_SETS is a list of --set options
  rt timeout 180 mpirun -np 1 "$bin/ringtrain" train jobs/fashion_mnist.toml --set run.device=cuda \
    --set data.train="$work/fmnist/train" --set data.test="$work/fmnist/test" --set run.dir="$work/fmnist-run" \
    --set train.epochs="${FMNIST_EPOCHS:-12}" --set run.progress_every_s=10 ${FMNIST_SETS:-} >"$out/fmnist.log" 2>&1
  log "fashion_mnist on cuda exit $?: $(grep -E '^epoch [0-9]+/' "$out/fmnist.log" | tail -1)"
  cp "$work/fmnist-run/metrics.jsonl" "$out/fmnist-metrics.jsonl" 2>/dev/null
fi

# ResNet-50 under several settings, one line each: VARIANTS="name=--set a=b --set c=d;name2=..."
if [[ " $stages " == *" variants "* ]]; then
  steps=${STEPS:-30}
  rt "$bin/ringtrain" prepare synthetic --shape 3,224,224 --classes 1000 --samples $((256 * (steps + 1))) \
    --test-samples 256 --shards 8 --out "$work/s224" >"$work/prepare-s224.log" 2>&1 || log "prepare s224 failed"
  IFS=';' read -ra variants <<<"${VARIANTS:-fp32=--set train.precision=fp32}"
  for v in "${variants[@]}"; do
    name=${v%%=*} sets=${v#*=}
    # shellcheck disable=SC2086 # $sets is a list of --set options
    rt timeout 120 mpirun -np 1 "$bin/ringtrain" train jobs/resnet50_synthetic.toml --set run.device=cuda \
      --set data.train="$work/s224/train" --set data.test="$work/s224/test" --set run.dir="$work/v-$name" \
      --set train.max_steps_per_epoch="$steps" $sets >"$work/v-$name.log" 2>&1
    log "resnet50 $name exit $?: $(grep -E '^epoch 1/1:' "$work/v-$name.log" | sed 's/.*acc [0-9.]* | //')"
    log "resnet50 $name memory: $(grep -oE '"(steady_samples_per_s|device_memory_[a-z_]*mb)":[0-9.]*' \
      "$work/v-$name/metrics.jsonl" 2>/dev/null | tr '\n' ' ')"
  done
  rm -rf "$work/s224"
fi

if [[ " $stages " == *" resnet20 "* ]]; then
  rt "$bin/ringtrain" prepare synthetic --shape 3,32,32 --classes 10 --samples 50000 --test-samples 10000 --shards 8 \
    --out "$work/s32" >"$work/prepare-s32.log" 2>&1 || log "prepare s32 failed"
  rt timeout 150 mpirun -np 1 "$bin/ringtrain" train jobs/resnet20_cifar_like.toml --set run.device=cuda \
    --set data.train="$work/s32/train" --set data.test="$work/s32/test" --set run.dir="$work/resnet20" \
    --set train.precision=tf32 >"$work/resnet20.log" 2>&1
  log "resnet20 tf32 exit $?: $(grep -E '^epoch [0-9]+/[0-9]+:' "$work/resnet20.log" | tail -1)"
  rm -rf "$work/s32"
fi

if [[ " $stages " == *" bench "* ]]; then
  OUT="$work/bench" STEPS=${STEPS:-40} RUN_TESTS=0 BIN="$bin" timeout ${BENCH_TIMEOUT_S:-450} perf/gpu/run_gpu_bench.sh >"$work/bench.log" 2>&1
  log "run_gpu_bench exit $?"
  cat "$work/bench/summary.txt" >>"$out/summary.txt" 2>/dev/null
  cp "$work/bench/gpu-summary.jsonl" "$out/" 2>/dev/null
  cp "$work/bench.log" "$work/bench/" 2>/dev/null
fi
# 2 and 4 ranks on this one GPU, each its own host to NCCL (perf/gpu/nccl_ranks.sh).
if [[ " $stages " == *" nccl "* ]]; then
  OUT="$work/nccl" BIN="$bin" timeout 420 perf/gpu/nccl_ranks.sh >"$work/nccl.log" 2>&1
  log "nccl_ranks exit $?"
  cat "$work/nccl/summary.txt" >>"$out/summary.txt" 2>/dev/null
  cp "$work/nccl/nccl-summary.jsonl" "$out/" 2>/dev/null
fi
cp "$work/cuda-libs.log" "$work/bench/" 2>/dev/null
tar czf "$out/details.tgz" -C "$work" --exclude='*.h5' --exclude=fmnist --exclude=s224 . 2>/dev/null
log "done"

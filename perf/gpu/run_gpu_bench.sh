#!/usr/bin/env bash
# Owns the GPU throughput benchmark on one host: (optionally) the GPU tests, single-layer benchmarks
# (ringtrain-bench BM_BackendLayer/cuda, when .gpurt/bin has it), ringtrain's Fashion-MNIST CNN
# (batch 64) and ResNet-50 (batch 256) on synthetic data, and the same models in PyTorch
# (perf/gpu/compare_pytorch.py); every log, metrics file and a summary land in $OUT, with the record
# perf/results/<date>-gpu-<topic>/gpu-summary.jsonl is made of (perf/gpu/gpu_summary.py).
#
# Both sides leave out the same WARMUP steps and time STEPS more: ringtrain through run.timing_warmup_steps
# (steady_samples_per_s, device-timed), PyTorch by synchronising after its warm-up.
#
# Expects binaries in $BIN (ringtrain, test_gpu) and, where the host lacks Open MPI or HDF5, the portable runtime
# of perf/gpu/pack_carried.sh in .gpurt (env.sh) and .gpurt/cuda-libs.sh. env.sh is sourced only around ringtrain commands,
# since it puts Debian's libssl/libcurl first, which PyTorch need not see.
#
# Usage (from the repository root):  perf/gpu/run_gpu_bench.sh [OUT_DIR]   (default: $OUT, else gpu-bench-out)
#   STEPS=60          timed training steps per ringtrain job and per PyTorch measurement
#   WARMUP=10         steps before them, left out of the rates on both sides
#   RUN_TESTS=1       run test_gpu first (0 to skip)
#   PRECISIONS=...    PyTorch precisions (default fp32,tf32,bf16)
#   PYTORCH_MODES=eager_benchmark,compile_reduce_overhead  PyTorch's modes (compare_pytorch.py --modes):
#                     cudnn.benchmark on and fused SGD, eager and compiled with CUDA graphs; the fastest that ran is
#                     PyTorch's best, and without a compiled mode gpu_summary.py gives no verdict
#   PYTORCH_BUDGET_S=200  each PyTorch call's bound (compare_pytorch.py --budget-s): compiles cost a minute each
#   BIN=.gpurt/bin    where ringtrain and test_gpu are
#   SKIP_PYTORCH=1    leave out the PyTorch reference (a debugging run)
#   LAYERS=0          leave out the single-layer benchmarks (a GPU run on 2026-11-25 spent 330 s on 15 cases drawing
#                     their inputs on the host; they now repeat a 2^20-value block, not yet timed on a GPU)
set -uo pipefail
cd "$(dirname "$0")/../.."
bin=${BIN:-.gpurt/bin}
out=${1:-${OUT:-gpu-bench-out}}
steps=${STEPS:-60}
warmup=${WARMUP:-10}
precisions=${PRECISIONS:-fp32,tf32,bf16}
# PyTorch at its best: eager is not (2026-11-28, ResNet-50 bf16: eager 4,714 samples/s, reduce-overhead 6,721), and
# gpu_summary.py gives no verdict against a peer without a torch.compile mode.
# torch.compile's default mode was slower than reduce-overhead in that call, so it runs only when PYTORCH_MODES names
# it. Each PyTorch call is bounded by PYTORCH_BUDGET_S: a mode that no longer fits is recorded skipped, never cut off.
pytorch_modes=${PYTORCH_MODES:-eager_benchmark,compile_reduce_overhead}
pytorch_budget_s=${PYTORCH_BUDGET_S:-200}
mkdir -p "$out"
# compare_pytorch.py appends (this script calls it twice into one file): rows of an earlier run in the same OUT
# would join "PyTorch's best" against this run's ringtrain, so the file starts empty.
: >"$out/pytorch.jsonl"
status=0
note() { echo "[run_gpu_bench] $*" | tee -a "$out/summary.txt"; }

source perf/gpu/carried.sh  # rt: a ringtrain command with the portable MPI/HDF5 runtime and the GPU libraries
unpack_carried              # .gpurt/root, lib and bin from the carried archives (the GPU host has no MPI or HDF5)
export CUDA_LIBS_LOG=$out/cuda-libs.log

nvidia-smi >"$out/nvidia-smi.txt" 2>&1
nvidia-smi -L >"$out/nvidia-smi-L.txt" 2>&1
rt ldd "$bin/ringtrain" >"$out/ldd.txt" 2>&1
rt "$bin/ringtrain" --version >"$out/versions.txt" 2>&1 || { note "ringtrain --version failed (see versions.txt)"; status=1; }

if [ "${RUN_TESTS:-1}" = 1 ] && [ -x "$bin/test_gpu" ]; then
  rt mpirun -np 1 "$bin/test_gpu" --gtest_output=json:"$out/test_gpu.json" >"$out/test_gpu.log" 2>&1
  rc=$?
  note "test_gpu: exit $rc; $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$out/test_gpu.log" | tr '\n' ' ')"
  [ $rc = 0 ] || status=1
fi
# The layer tests' CUDA cases: every layer kind against double-precision loops, fp32, TF32, measured algorithms.
if [ "${RUN_TESTS:-1}" = 1 ] && [ -x "$bin/test_layers" ]; then
  rt "$bin/test_layers" --gtest_filter='*/cuda*' >"$out/test_layers_cuda.log" 2>&1
  rc=$?
  note "test_layers (cuda): exit $rc; $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$out/test_layers_cuda.log" | tr '\n' ' ')"
  [ $rc = 0 ] || status=1
fi

# Single ResNet-50 layers through the CUDA backend (perf/bench_layers_backend.cpp), fp32 and tf32, batch 256.
if [ "${LAYERS:-1}" = 1 ] && [ -x "$bin/ringtrain-bench" ]; then
  rt mpirun -np 1 "$bin/ringtrain-bench" --benchmark_filter='BM_BackendLayer/cuda' --benchmark_repetitions=3 \
    --benchmark_report_aggregates_only=true --benchmark_out="$out/layers.json" --benchmark_out_format=json \
    >"$out/layers.log" 2>&1
  rc=$?
  note "ringtrain-bench BM_BackendLayer/cuda: exit $rc ($(grep -c '_median' "$out/layers.log") medians)"
  [ $rc = 0 ] || status=1
fi

# Synthetic data on this machine's disk: enough samples for the steps (partial batches are dropped).
data=$(mktemp -d)
trap 'rm -rf "$data"; [ -n "${smi_pid:-}" ] && kill "$smi_pid" 2>/dev/null' EXIT
rt "$bin/ringtrain" prepare synthetic --shape 1,28,28 --classes 10 --samples $((64 * (warmup + steps + 2))) --shards 2 \
  --out "$data/fmnist" >"$out/prepare-fmnist.log" 2>&1 || { note "prepare fmnist failed"; status=1; }
rt "$bin/ringtrain" prepare synthetic --shape 3,224,224 --classes 1000 --samples $((256 * (warmup + steps + 2))) \
  --test-samples 512 --shards 8 --out "$data/s224" >"$out/prepare-s224.log" 2>&1 || { note "prepare 224 failed"; status=1; }

# GPU memory in use, sampled every 100 ms while ringtrain runs (its own peak; includes the CUDA context).
gpu_peak() {  # gpu_peak NAME COMMAND...: runs the command, writes $out/NAME-memory.csv
  local name=$1
  shift
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 100 >"$out/$name-memory.csv" 2>/dev/null &
  smi_pid=$!
  "$@"
  local rc=$?
  kill "$smi_pid" 2>/dev/null
  wait "$smi_pid" 2>/dev/null
  smi_pid=
  return $rc
}

run_job() {  # run_job NAME JOB DATA EXTRA...
  local name=$1 job=$2 dir=$3
  shift 3
  gpu_peak "$name" rt mpirun -np 1 "$bin/ringtrain" train "$job" --set run.device=cuda \
    --set data.train="$dir/train" --set data.test="$dir/test" --set train.epochs=1 \
    --set train.max_steps_per_epoch=$((warmup + steps)) --set run.timing_warmup_steps="$warmup" \
    --set run.dir="$out/ringtrain-$name" --set run.overwrite=true \
    --set run.progress_every_s=5 "$@" >"$out/ringtrain-$name.log" 2>&1
  local rc=$?
  note "ringtrain $name: exit $rc"
  [ $rc = 0 ] || status=1
}
# With the trace (NCCL bucket spans from CUDA events, on their own tracks) and NVML sampling every second, so
# one run also checks the observability of the GPU path (summary below).
run_job fmnist jobs/fashion_mnist.toml "$data/fmnist" --set run.trace=true --set run.monitor_every_s=1
# The job file as written (TF32, measured non-deterministic algorithms, 4 GiB workspace), then strict fp32
# with deterministic algorithms, the CPU twin's arithmetic.
run_job resnet50-tf32 jobs/resnet50_synthetic.toml "$data/s224"
run_job resnet50 jobs/resnet50_synthetic.toml "$data/s224" --set train.precision=fp32 \
  --set gpu.conv_algorithms=heuristic --set gpu.deterministic=true --set gpu.workspace_mb=1024
# Strict fp32 as a user after speed runs it: measured algorithms, non-deterministic allowed, 512 MiB workspace
# (2026-11-25: as fast as 4096 MiB, and 1 GiB less memory). The memory check compares this run.
run_job resnet50-fp32-measured jobs/resnet50_synthetic.toml "$data/s224" --set train.precision=fp32 \
  --set gpu.conv_algorithms=measure --set gpu.deterministic=false --set gpu.workspace_mb=512

[ "${SKIP_PYTORCH:-0}" = 1 ] || python3 perf/gpu/compare_pytorch.py --precisions "$precisions" --steps "$steps" --warmup "$warmup" \
  --modes "$pytorch_modes" --budget-s "$pytorch_budget_s" --out "$out/pytorch.jsonl" >"$out/pytorch.log" 2>&1 || { note "compare_pytorch.py failed (see pytorch.log)"; status=1; }
# Both layouts for every model and precision: channels_last (NHWC) is PyTorch's faster one for 16-bit convolutions.
[ "${SKIP_PYTORCH:-0}" = 1 ] || python3 perf/gpu/compare_pytorch.py --precisions "$precisions" \
  --channels-last --modes "$pytorch_modes" --budget-s "$pytorch_budget_s" --skip-matmul --steps "$steps" --warmup "$warmup" --out "$out/pytorch.jsonl" >>"$out/pytorch.log" 2>&1 ||
  { note "compare_pytorch.py --channels-last failed (see pytorch.log)"; status=1; }

python3 perf/gpu/gpu_summary.py "$out" | tee -a "$out/summary.txt"
exit $status

#!/usr/bin/env bash
# GPU benchmark in one call on the lent GPU machine: (optionally) the GPU tests, single-layer benchmarks
# (ringtrain-bench BM_BackendLayer/cuda, when .gpurt/bin has it), ringtrain's Fashion-MNIST CNN
# (batch 64) and ResNet-50 (batch 256) on synthetic data, and the same models in PyTorch
# (perf/gpu/compare_pytorch.py); every log, metrics file and a summary land in $OUT.
#
# Expects the layout of ../shared/gpu/README.md: binaries in .gpurt/bin (ringtrain, test_gpu), the Open MPI +
# HDF5 runtime in .gpurt (env.sh) and .gpurt/cuda-libs.sh. env.sh is sourced only around ringtrain commands,
# since it puts Debian's libssl/libcurl first, which PyTorch need not see.
#
# Usage (from the repository root):  OUT=/some/dir perf/gpu/run_gpu_bench.sh
#   STEPS=60          training steps per ringtrain job and per PyTorch measurement
#   RUN_TESTS=1       run test_gpu first (0 to skip)
#   PRECISIONS=...    PyTorch precisions (default fp32,tf32,bf16)
#   BIN=.gpurt/bin    where ringtrain and test_gpu are
#   SKIP_PYTORCH=1    leave out the PyTorch reference (a debugging run)
set -uo pipefail
cd "$(dirname "$0")/../.."
bin=${BIN:-.gpurt/bin}
out=${OUT:-gpu-bench-out}
steps=${STEPS:-60}
precisions=${PRECISIONS:-fp32,tf32,bf16}
mkdir -p "$out"
status=0
note() { echo "[run_gpu_bench] $*" | tee -a "$out/summary.txt"; }

# Runs a ringtrain command with the carried MPI/HDF5 runtime and the GPU libraries on the library path.
rt() {
  (
    [ -f .gpurt/env.sh ] && source .gpurt/env.sh
    [ -d .gpurt/lib ] && export LD_LIBRARY_PATH=$PWD/.gpurt/lib:$LD_LIBRARY_PATH
    [ -f .gpurt/cuda-libs.sh ] && source .gpurt/cuda-libs.sh "$bin/ringtrain" 2>>"$out/cuda-libs.log"
    "$@"
  )
}

nvidia-smi >"$out/nvidia-smi.txt" 2>&1
rt ldd "$bin/ringtrain" >"$out/ldd.txt" 2>&1
rt "$bin/ringtrain" --version >"$out/versions.txt" 2>&1 || { note "ringtrain --version failed (see versions.txt)"; status=1; }

if [ "${RUN_TESTS:-1}" = 1 ] && [ -x "$bin/test_gpu" ]; then
  rt mpirun -np 1 "$bin/test_gpu" --gtest_output=json:"$out/test_gpu.json" >"$out/test_gpu.log" 2>&1
  rc=$?
  note "test_gpu: exit $rc; $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$out/test_gpu.log" | tr '\n' ' ')"
  [ $rc = 0 ] || status=1
fi

# Single ResNet-50 layers through the CUDA backend (perf/bench_layers_backend.cpp), fp32 and tf32, batch 256.
if [ -x "$bin/ringtrain-bench" ]; then
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
rt "$bin/ringtrain" prepare synthetic --shape 1,28,28 --classes 10 --samples $((64 * (steps + 2))) --shards 2 \
  --out "$data/fmnist" >"$out/prepare-fmnist.log" 2>&1 || { note "prepare fmnist failed"; status=1; }
rt "$bin/ringtrain" prepare synthetic --shape 3,224,224 --classes 1000 --samples $((256 * (steps + 2))) \
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
    --set train.max_steps_per_epoch="$steps" --set run.dir="$out/ringtrain-$name" --set run.overwrite=true \
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

[ "${SKIP_PYTORCH:-0}" = 1 ] || python3 perf/gpu/compare_pytorch.py --precisions "$precisions" --steps "$steps" --warmup 10 \
  --out "$out/pytorch.jsonl" >"$out/pytorch.log" 2>&1 || { note "compare_pytorch.py failed (see pytorch.log)"; status=1; }
# The layout question (NCHW vs NHWC) answered through cuDNN under PyTorch: channels_last is NHWC.
[ "${SKIP_PYTORCH:-0}" = 1 ] || python3 perf/gpu/compare_pytorch.py --models resnet50 --precisions tf32,bf16 \
  --channels-last --steps "$steps" --warmup 10 --out "$out/pytorch.jsonl" >>"$out/pytorch.log" 2>&1 ||
  { note "compare_pytorch.py --channels-last failed (see pytorch.log)"; status=1; }

python3 - "$out" <<'PY' | tee -a "$out/summary.txt"
import json, pathlib, sys
out = pathlib.Path(sys.argv[1])
def lines(p):
    return [json.loads(l) for l in p.read_text().splitlines() if l.startswith("{")] if p.exists() else []
torch = lines(out / "pytorch.jsonl")
bf16 = next((r["flops_per_s"] for r in torch if r["kind"] == "matmul" and r["precision"] == "bf16"), None)
if bf16:
    print(f"measured dense bf16 matmul (8192^3, PyTorch): {bf16 / 1e12:.1f} TFLOP/s")
def peak(name):
    p = out / f"{name}-memory.csv"
    vals = [int(v) for v in p.read_text().split()] if p.exists() else []
    return max(vals) if vals else None
fm = out / "ringtrain-fmnist"
gpu = lines(fm / "gpu.jsonl")
print(f"NVML monitor (fmnist, every 1 s): {len(gpu)} samples in gpu.jsonl"
      + (f"; last: {json.dumps(gpu[-1])}" if gpu else " (none: see ringtrain-fmnist.log for why)"))
trace = fm / "trace-rank0.json"
if trace.exists():
    events = json.loads(trace.read_text())["traceEvents"]
    spans = [e for e in events if e.get("name") == "allreduce"]
    print(f"trace (fmnist): {len(events)} events, {len(spans)} allreduce bucket spans"
          + (f", first {spans[0]['dur']:.0f} us" if spans else ""))
else:
    print("trace (fmnist): no trace-rank0.json")
for name in ["fmnist", "resnet50", "resnet50-tf32"]:
    recs = lines(out / f"ringtrain-{name}" / "metrics.jsonl")
    job = next((r for r in recs if r.get("kind") == "job"), {})
    epoch = next((r for r in reversed(recs) if r.get("kind") == "epoch"), None)
    if epoch:
        rate = epoch["flops_per_s_per_rank"]
        print(f"ringtrain {name}: {epoch['epoch_samples_per_s']:.0f} samples/s, {rate / 1e12:.2f} TFLOP/s"
              + (f" = {100 * rate / bf16:.1f} % of bf16 matmul" if bf16 else "")
              + f", GPU memory peak (nvidia-smi) {peak(name)} MiB; backend: {job.get('backend', '?')}")
    else:
        print(f"ringtrain {name}: no epoch record (see ringtrain-{name}.log)")
    for r in torch:
        if r["kind"] == "train" and r["model"] == name:
            layout = " channels_last" if r.get("channels_last") else ""
            print(f"  pytorch {name} {r['precision']}{layout}: {r['samples_per_s']:.0f} samples/s, "
                  f"{r['achieved_flops_per_s'] / 1e12:.2f} TFLOP/s"
                  + (f" = {100 * r['achieved_flops_per_s'] / bf16:.1f} % of bf16 matmul" if bf16 else "")
                  + f", max_memory_allocated {r['peak_memory_mib']:.0f} MiB")
PY
exit $status

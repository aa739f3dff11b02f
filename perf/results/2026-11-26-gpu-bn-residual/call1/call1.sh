#!/usr/bin/env bash
# Call 1 of the 2026-11-26 batch-norm/residual record (it ran as perf/gpu/next_call.sh): main 0f4ac3a with the
# gpu-next branch's three commits merged (.gpurt/bin.tar.xz) against main 0f4ac3a (.gpurt/old-bin.tar.xz), 332 s on
# an H200: the tests, Fashion-MNIST bf16 for 12 epochs, ResNet-50 bf16 NHWC twice with each build and twice more
# under the reproducible defaults, PyTorch channels_last, the batch-norm and stem layer benchmarks with each build,
# and ncu on the new batch-norm passes.
# Carry .gpurt/{root,lib,bin,old-bin}.tar.xz, env.sh, cuda-libs.sh and fmnist/ (../shared/gpu/README.md); logs land
# in $OUT (summary.txt, the test logs, pytorch.jsonl, extra.tgz with the rest: logs only, never a run's checkpoints).
#   bash perf/results/2026-11-26-gpu-bn-residual/call1/call1.sh
set -u
cd "$(dirname "$0")/../../../.."
out=${OUT:?run this through the device tool, which sets OUT}
x=$(mktemp -d)
source perf/gpu/carried.sh
unpack_carried
mkdir -p .gpurt/old && tar xJf .gpurt/old-bin.tar.xz -C .gpurt/old
STAGES="tests fmnist" FMNIST_SETS="--set train.precision=bf16" timeout 120 perf/gpu/lease_run.sh
echo "lease_run exit $?"
grep -E "FAILED|Failure" -A6 "$out/test_gpu.log" "$out/test_layers_cuda.log" | head -30
rt .gpurt/bin/ringtrain prepare synthetic --shape 3,224,224 --classes 1000 --samples $((256 * 41)) \
  --test-samples 256 --shards 8 --out "$x/s224" >"$x/prepare-s224.log" 2>&1 || echo "prepare s224 failed"
resnet() {  # name bindir [--set k=v ...]
  local name=$1 dir=$2; shift 2
  bin=$dir rt timeout 60 mpirun -np 1 "$dir/ringtrain" train jobs/resnet50_synthetic.toml --set run.device=cuda \
    --set data.train="$x/s224/train" --set data.test="$x/s224/test" --set run.dir="$x/v-$name" \
    --set train.max_steps_per_epoch=40 --set train.precision=bf16 --set run.timing_warmup_steps=10 "$@" \
    >"$x/v-$name.log" 2>&1
  local rc=$? epoch
  epoch=$(grep '"kind":"epoch"' "$x/v-$name/metrics.jsonl" 2>/dev/null | tail -1)
  echo "resnet50 $name exit $rc: $(grep -oE '"(steady_samples_per_s|device_memory_allocated_peak_mb|train_loss)":[0-9.]*' \
    <<<"$epoch" | tr '\n' ' ')"
  rm -rf "$x/v-$name/checkpoints"
}
resnet new .gpurt/bin
resnet old .gpurt/old/bin
resnet new-2 .gpurt/bin
resnet old-2 .gpurt/old/bin
# Reproducibility under the defaults (heuristic plans, deterministic algorithms): the two losses must be equal.
repro=(--set gpu.conv_algorithms=heuristic --set gpu.deterministic=true)
resnet new-repro .gpurt/bin "${repro[@]}"
resnet new-repro-2 .gpurt/bin "${repro[@]}"
rm -rf "$x/s224"
PYTHONUNBUFFERED=1 timeout 60 python3 perf/gpu/compare_pytorch.py --models fmnist,resnet50 --precisions bf16 \
  --channels-last --skip-matmul --steps 30 --warmup 10 --out "$out/pytorch.jsonl" >"$x/pytorch.log" 2>&1
echo "pytorch channels_last exit $?"
grep -oE '"(model|samples_per_s|peak_memory_mib)": ?[^,]*' "$out/pytorch.jsonl" | tr '\n' ' '; echo
for which in bin old/bin; do
  bin=.gpurt/$which rt timeout 40 .gpurt/$which/ringtrain-bench --benchmark_min_time=0.1 \
    --benchmark_filter='BM_BackendLayer/cuda_bf16_nhwc/(batchnorm|conv7x7)' >"$x/layers-${which%/bin}.txt" 2>&1
  echo "layer bench $which exit $?"
  grep -E "^BM_" "$x/layers-${which%/bin}.txt" | sed -E 's/ +/ /g' | cut -c1-75
done
ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
rt timeout 60 "$ncu" --clock-control none --section SpeedOfLight --section Occupancy --section LaunchStats \
  -k 'regex:rows_' -c 4 .gpurt/bin/ringtrain-bench \
  --benchmark_filter='BM_BackendLayer/cuda_bf16_nhwc/batchnorm_256_56' --benchmark_min_time=0.01 >"$x/ncu-bn.txt" 2>&1
echo "ncu exit $?"
grep -E "^  [a-z_]+kernel|Duration|DRAM Throughput|Achieved Occupancy|Registers Per" "$x/ncu-bn.txt" | head -24
tar czf "$out/extra.tgz" -C "$x" --exclude='*.h5' .

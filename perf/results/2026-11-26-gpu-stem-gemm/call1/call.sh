#!/usr/bin/env bash
# Session 2026-11-26 (fourth), call 1. New binaries (.gpurt/bin.tar.xz: branch gpu-work = main e2defff + gpu-next's
# NHWC pooling kernels and graph autotune + one-pass batch-norm moments + fused residual add+ReLU) against main's
# (.gpurt/old-bin.tar.xz, e2defff) in the same call: tests, ResNet-50 bf16, Fashion-MNIST bf16 12 epochs (NHWC
# default), 2/4-rank equivalence, layer benchmarks, PyTorch channels_last, ncu on the NHWC batch norm.
set -u
cd "$(dirname "$0")/.."
x=$(mktemp -d)
source perf/gpu/carried.sh
unpack_carried
mkdir -p .gpurt/old && tar xJf .gpurt/old-bin.tar.xz -C .gpurt/old
STAGES="tests fmnist" FMNIST_SETS="--set train.precision=bf16" timeout 150 perf/gpu/lease_run.sh
echo "lease_run exit $?"
rt .gpurt/bin/ringtrain prepare synthetic --shape 3,224,224 --classes 1000 --samples $((256 * 41)) \
  --test-samples 256 --shards 8 --out "$x/s224" >"$x/prepare-s224.log" 2>&1 || echo "prepare s224 failed"
b="--set train.precision=bf16 --set run.timing_warmup_steps=10"
resnet() {  # name bindir sets...
  local name=$1 dir=$2; shift 2
  bin=$dir rt timeout 90 mpirun -np 1 "$dir/ringtrain" train jobs/resnet50_synthetic.toml --set run.device=cuda \
    --set data.train="$x/s224/train" --set data.test="$x/s224/test" --set run.dir="$x/v-$name" \
    --set train.max_steps_per_epoch=40 $b "$@" >"$x/v-$name.log" 2>&1
  echo "resnet50 $name exit $?: $(grep -oE '"(steady_samples_per_s|device_memory_peak_mb|device_memory_allocated_peak_mb)":[0-9.]*' \
    "$x/v-$name/metrics.jsonl" 2>/dev/null | tr '\n' ' ') | $(grep -E '^epoch 1/1:' "$x/v-$name.log" | grep -oE 'loss [0-9.]+|per rank:.*optimizer [0-9.]+s')"
  rm -f "$x/v-$name"/*.h5
}
resnet new-nhwc .gpurt/bin
resnet old-nhwc .gpurt/old/bin
resnet new-nhwc-heuristic .gpurt/bin --set gpu.conv_algorithms=heuristic
resnet new-nchw .gpurt/bin --set gpu.nhwc=false
resnet old-nhwc-2 .gpurt/old/bin
resnet new-nhwc-2 .gpurt/bin
resnet new-nhwc-prof .gpurt/bin --set run.profile_layers=true
rm -rf "$x/s224"
for np in 2 4; do
  RINGTRAIN_TEST_DEVICE=cuda rt timeout 60 mpirun -np $np --oversubscribe .gpurt/bin/test_equivalence \
    >"$x/equivalence-np$np.log" 2>&1
  echo "equivalence ($np ranks) exit $?: $(grep -cE '^\[       OK' "$x/equivalence-np$np.log") ok lines"
done
for which in bin old/bin; do
  bin=.gpurt/$which rt timeout 60 .gpurt/$which/ringtrain-bench \
    --benchmark_filter='BM_BackendLayer/cuda_bf16(_nhwc)?/(batchnorm|maxpool|conv7x7)' --benchmark_min_time=0.1 \
    >"$x/layers-${which%/bin}.txt" 2>&1
  echo "layer bench $which exit $?"
  grep -E "^BM_" "$x/layers-${which%/bin}.txt" | sed -E 's/ +/ /g' | cut -c1-75
done
PYTHONUNBUFFERED=1 timeout 90 python3 perf/gpu/compare_pytorch.py --models fmnist,resnet50 --precisions bf16 \
  --channels-last --steps 30 --warmup 10 --out "$OUT/pytorch.jsonl" >"$x/pytorch.log" 2>&1
echo "pytorch channels_last exit $?"
grep -oE '"(model|precision|samples_per_s|peak_memory_mib|flops_per_s|memory_format)": ?[^,]*' "$OUT/pytorch.jsonl" | tr '\n' ' '; echo
ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
rt timeout 60 "$ncu" --clock-control none --section SpeedOfLight --section Occupancy --section WarpStateStats \
  --section LaunchStats -k 'regex:rows_' -c 4 .gpurt/bin/ringtrain-bench \
  --benchmark_filter='BM_BackendLayer/cuda_bf16_nhwc/batchnorm_256_56' --benchmark_min_time=0.01 >"$x/ncu-bn.txt" 2>&1
echo "ncu exit $?"
grep -E "^  [a-z_]+kernel|Duration|DRAM Throughput|Achieved Occupancy|Registers Per|Stall [A-Z][a-z ]+ *[a-z]* +[0-9]" "$x/ncu-bn.txt" | head -40
tar czf "$OUT/extra.tgz" -C "$x" --exclude='*.h5' .

#!/usr/bin/env bash
# Session 2026-11-26 (third), call 3: 16-bit NHWC convolutions through cuDNN's graph API (gpu.cudnn_graphs,
# src/backend/cuda/conv_graphs.cpp); the NHWC batch norm refactored (for_unpacked, three forward blocks per SM).
# The tests (with the graph-path test and the cuda_fp16_nhwc and cuda_bf16_nhwc_legacy layer cases), ResNet-50 bf16
# NCHW / NHWC on graphs / NHWC legacy / NHWC profiled, PyTorch channels_last in the same call, the NHWC layer
# benchmarks, ncu on the NHWC batch-norm kernels.
set -u
cd "$(dirname "$0")/.."
x=$(mktemp -d)
source perf/gpu/carried.sh
unpack_carried
w="--set run.timing_warmup_steps=10"
n="--set train.precision=bf16 --set gpu.nhwc=true"
STEPS=40 STAGES="tests variants" \
  VARIANTS="bf16=--set train.precision=bf16 $w;nhwc=$n $w;nhwclegacy=$n $w --set gpu.cudnn_graphs=false;nhwcprof=$n $w --set run.profile_layers=true" \
  timeout 240 perf/gpu/lease_run.sh
echo "lease_run exit $?"
grep -E "FAILED|CudnnGraphs" "$OUT/test_gpu.log" | head -8
PYTHONUNBUFFERED=1 timeout 60 python3 perf/gpu/compare_pytorch.py --models resnet50 --precisions bf16 --skip-matmul \
  --channels-last --steps 30 --warmup 10 --out "$OUT/pytorch.jsonl" >"$x/pytorch.log" 2>&1
echo "pytorch channels_last exit $?"
rt timeout 60 .gpurt/bin/ringtrain-bench --benchmark_filter='BM_BackendLayer/cuda_bf16_nhwc/(batchnorm|conv)' \
  --benchmark_min_time=0.1 >"$OUT/layers-nhwc.txt" 2>&1
echo "layer bench exit $?"
ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
rt timeout 90 "$ncu" --clock-control none --section SpeedOfLight --section Occupancy --section LaunchStats \
  -k 'regex:rows_|statistics_kernel|mean_kernel|gradient_coefficients' -c 14 .gpurt/bin/ringtrain-bench \
  --benchmark_filter='BM_BackendLayer/cuda_bf16_nhwc/batchnorm_256_56' --benchmark_min_time=0.01 >"$x/ncu-bn.txt" 2>&1
echo "ncu exit $?"
grep -E "^  [a-z_]+kernel|Duration|DRAM Throughput|Registers Per|Achieved Occupancy|Theoretical Occupancy" \
  "$x/ncu-bn.txt" | head -60
tar czf "$OUT/extra.tgz" -C "$x" .

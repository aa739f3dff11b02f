#!/usr/bin/env bash
# Session 2026-11-26 (third), call 4: the NHWC batch norm's slices folded by a block per channel before the finishing
# kernels (ncu in call 3: mean/statistics/gradient-coefficient kernels 140-280 us each with 1024 slices). The tests,
# ResNet-50 bf16 NCHW and NHWC, the batch-norm layer benchmarks in both layouts, PyTorch channels_last.
set -u
cd "$(dirname "$0")/.."
x=$(mktemp -d)
source perf/gpu/carried.sh
unpack_carried
w="--set run.timing_warmup_steps=10"
STEPS=40 STAGES="tests variants" \
  VARIANTS="bf16=--set train.precision=bf16 $w;nhwc=--set train.precision=bf16 --set gpu.nhwc=true $w" \
  timeout 150 perf/gpu/lease_run.sh
echo "lease_run exit $?"
rt timeout 40 .gpurt/bin/ringtrain-bench --benchmark_filter='BM_BackendLayer/cuda_bf16(_nhwc)?/batchnorm' \
  --benchmark_min_time=0.1 >"$OUT/layers-bn.txt" 2>&1
echo "layer bench exit $?"
grep -E "^BM_" "$OUT/layers-bn.txt" | sed -E 's/ +/ /g' | cut -c1-110
PYTHONUNBUFFERED=1 timeout 50 python3 perf/gpu/compare_pytorch.py --models resnet50 --precisions bf16 --skip-matmul \
  --channels-last --steps 30 --warmup 10 --out "$OUT/pytorch.jsonl" >"$x/pytorch.log" 2>&1
echo "pytorch channels_last exit $?"
tar czf "$OUT/extra.tgz" -C "$x" .

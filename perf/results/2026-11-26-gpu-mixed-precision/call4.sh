#!/usr/bin/env bash
# Session 2026-11-26, call 4 (the record call): 16-bit batch norm in packs of 16 bytes, element-wise kernels in packs;
# tests, ResNet-50 settings, Fashion-MNIST bf16 12 epochs, 2-rank bf16/fp16 equivalence, bf16 layer benchmarks,
# ncu on the batch-norm kernels, and PyTorch bf16 in the same call.
set -u
cd "$(dirname "$0")/.."
x=/tmp/extra && mkdir -p $x
rm -rf .gpurt/bin && tar xJf .gpurt/bin.tar.xz -C .gpurt
[ -d .gpurt/root ] || tar xJf .gpurt/root.tar.xz -C .gpurt
[ -d .gpurt/lib ] || tar xJf .gpurt/lib.tar.xz -C .gpurt
rt() { (source .gpurt/env.sh && export LD_LIBRARY_PATH=$PWD/.gpurt/lib:$LD_LIBRARY_PATH &&
        source .gpurt/cuda-libs.sh .gpurt/bin/ringtrain 2>/dev/null && "$@"); }
w="--set run.timing_warmup_steps=10"
export STEPS=40 STAGES="tests variants fmnist" FMNIST_SETS="--set train.precision=bf16"
export VARIANTS="bf16=--set train.precision=bf16 $w;bf16nd=--set train.precision=bf16 --set gpu.deterministic=false $w;bf16prof=--set train.precision=bf16 $w --set run.profile_layers=true;fp16=--set train.precision=fp16 $w;tf32=--set train.precision=tf32 $w"
timeout 260 perf/gpu/lease_run.sh
echo "lease_run exit $?"
PYTHONUNBUFFERED=1 timeout 100 python3 perf/gpu/compare_pytorch.py --models resnet50,fmnist --precisions bf16 \
  --channels-last --steps 30 --warmup 10 --out "$OUT/pytorch.jsonl" >$x/pytorch.log 2>&1
echo "pytorch nhwc exit $?"
PYTHONUNBUFFERED=1 timeout 60 python3 perf/gpu/compare_pytorch.py --models resnet50 --precisions bf16 --skip-matmul \
  --steps 30 --warmup 10 --out "$OUT/pytorch.jsonl" >>$x/pytorch.log 2>&1
echo "pytorch nchw exit $?"
RINGTRAIN_TEST_DEVICE=cuda rt timeout 60 mpirun -np 2 --oversubscribe .gpurt/bin/test_equivalence \
  --gtest_filter='*Bf16Precision*:*Fp16Precision*' >$x/equivalence.log 2>&1
echo "equivalence (2 ranks, cuda) exit $?"
rt timeout 80 .gpurt/bin/ringtrain-bench --benchmark_filter='BM_BackendLayer/cuda_bf16' --benchmark_min_time=0.2 \
  >$x/layers-bf16.txt 2>&1
echo "layer bench exit $?"
ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
rt timeout 80 "$ncu" --clock-control none --section SpeedOfLight \
  -k 'regex:sum_kernel|centred_squares|affine_kernel|gradient_sums|dx_kernel|statistics_kernel|mean_kernel|gradient_coefficients' \
  -c 16 .gpurt/bin/ringtrain-bench --benchmark_filter='BM_BackendLayer/cuda_bf16/batchnorm_256_56' \
  --benchmark_min_time=0.01 >$x/ncu-bn.txt 2>&1
echo "ncu exit $?"
tar czf "$OUT/extra.tgz" -C $x .

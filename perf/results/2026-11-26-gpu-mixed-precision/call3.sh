#!/usr/bin/env bash
# Session 2026-11-26, call 3: 16-bit path with the refusal lifted, batch norm + ReLU fused on 16 bits, strict fp32
# measuring direct algorithms only; bf16/fp16 equivalence on 2 NCCL ranks; the bf16 layer benchmarks; ncu on the
# batch-norm kernels.
set -u
cd "$(dirname "$0")/.."
rm -rf .gpurt/bin && tar xJf .gpurt/bin.tar.xz -C .gpurt
[ -d .gpurt/root ] || tar xJf .gpurt/root.tar.xz -C .gpurt
[ -d .gpurt/lib ] || tar xJf .gpurt/lib.tar.xz -C .gpurt
rt() { (source .gpurt/env.sh && export LD_LIBRARY_PATH=$PWD/.gpurt/lib:$LD_LIBRARY_PATH &&
        source .gpurt/cuda-libs.sh .gpurt/bin/ringtrain 2>/dev/null && "$@"); }
w="--set run.timing_warmup_steps=10"
export STEPS=40 STAGES="tests variants"
export VARIANTS="bf16=--set train.precision=bf16 $w;bf16prof=--set train.precision=bf16 $w --set run.profile_layers=true;fp16=--set train.precision=fp16 $w;fp32=--set train.precision=fp32 $w"
timeout 200 perf/gpu/lease_run.sh
echo "lease_run exit $?"
RINGTRAIN_TEST_DEVICE=cuda rt timeout 90 mpirun -np 2 --oversubscribe .gpurt/bin/test_equivalence \
  --gtest_filter='*Bf16Precision*:*Fp16Precision*' >"$OUT/equivalence.log" 2>&1
echo "equivalence (2 ranks, cuda) exit $?"
rt timeout 60 .gpurt/bin/test_layers --gtest_filter='*/cuda_measured' --gtest_repeat=3 >>"$OUT/equivalence.log" 2>&1
echo "test_layers cuda_measured x3 exit $?"
rt timeout 100 .gpurt/bin/ringtrain-bench --benchmark_filter='BM_BackendLayer/cuda_bf16' --benchmark_min_time=0.2 \
  >"$OUT/layers-bf16.txt" 2>&1
echo "layer bench exit $?"
ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
rt timeout 120 "$ncu" --clock-control none --section SpeedOfLight \
  -k 'regex:sum_kernel|centred_squares|affine_kernel|gradient_sums|dx_kernel|statistics_kernel|mean_kernel|gradient_coefficients' \
  -c 16 .gpurt/bin/ringtrain-bench --benchmark_filter='BM_BackendLayer/cuda_bf16/batchnorm_256_56' \
  --benchmark_min_time=0.01 >"$OUT/ncu-bn.txt" 2>&1
echo "ncu exit $?"

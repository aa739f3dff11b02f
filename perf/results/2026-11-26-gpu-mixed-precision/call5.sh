#!/usr/bin/env bash
# Session 2026-11-26, call 5: the 16-bit pooling kernels tiled by plane (no integer divisions); tests, ResNet-50
# bf16 with its layer profile, 4-rank bf16/fp16 equivalence, pooling and batch-norm layer benchmarks, PyTorch
# ResNet-50 bf16 channels_last in the same call.
set -u
cd "$(dirname "$0")/.."
x=/tmp/extra && mkdir -p $x
rm -rf .gpurt/bin && tar xJf .gpurt/bin.tar.xz -C .gpurt
[ -d .gpurt/root ] || tar xJf .gpurt/root.tar.xz -C .gpurt
[ -d .gpurt/lib ] || tar xJf .gpurt/lib.tar.xz -C .gpurt
rt() { (source .gpurt/env.sh && export LD_LIBRARY_PATH=$PWD/.gpurt/lib:$LD_LIBRARY_PATH &&
        source .gpurt/cuda-libs.sh .gpurt/bin/ringtrain 2>/dev/null && "$@"); }
w="--set run.timing_warmup_steps=10"
export STEPS=40 STAGES="tests variants"
export VARIANTS="bf16=--set train.precision=bf16 $w;bf16prof=--set train.precision=bf16 $w --set run.profile_layers=true"
timeout 150 perf/gpu/lease_run.sh
echo "lease_run exit $?"
PYTHONUNBUFFERED=1 timeout 60 python3 perf/gpu/compare_pytorch.py --models resnet50 --precisions bf16 --skip-matmul \
  --channels-last --steps 30 --warmup 10 --out "$OUT/pytorch.jsonl" >$x/pytorch.log 2>&1
echo "pytorch nhwc exit $?"
RINGTRAIN_TEST_DEVICE=cuda rt timeout 60 mpirun -np 4 --oversubscribe .gpurt/bin/test_equivalence \
  --gtest_filter='*Bf16Precision*:*Fp16Precision*' >$x/equivalence-np4.log 2>&1
echo "equivalence (4 ranks, cuda) exit $?"
rt timeout 40 .gpurt/bin/ringtrain-bench --benchmark_filter='BM_BackendLayer/cuda_bf16/(maxpool|batchnorm|relu)' \
  --benchmark_min_time=0.2 >$x/layers-bf16.txt 2>&1
echo "layer bench exit $?"
tar czf "$OUT/extra.tgz" -C $x .

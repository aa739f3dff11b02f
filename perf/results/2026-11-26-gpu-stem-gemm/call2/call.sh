#!/usr/bin/env bash
# Session 2026-11-26 (fourth), call 2. New binaries (.gpurt/bin.tar.xz: branch gpu-work 8586486 = call 1's + the
# few-channel NHWC convolutions as im2col + cuBLAS GEMM) against main's (.gpurt/old-bin.tar.xz, e2defff): tests,
# Fashion-MNIST bf16 12 epochs (its first convolution, 1 channel, now a GEMM), ResNet-50 bf16 with the stem on the
# GEMM and on cuDNN, profiled, PyTorch channels_last, the stem's layer benchmark, 2-rank equivalence.
set -u
cd "$(dirname "$0")/.."
x=$(mktemp -d)
source perf/gpu/carried.sh
unpack_carried
mkdir -p .gpurt/old && tar xJf .gpurt/old-bin.tar.xz -C .gpurt/old
STAGES="tests fmnist" FMNIST_SETS="--set train.precision=bf16" timeout 120 perf/gpu/lease_run.sh
echo "lease_run exit $?"
grep -E "FAILED|Failure" -A6 "$OUT/test_gpu.log" | head -30
rt .gpurt/bin/ringtrain prepare synthetic --shape 3,224,224 --classes 1000 --samples $((256 * 41)) \
  --test-samples 256 --shards 8 --out "$x/s224" >"$x/prepare-s224.log" 2>&1 || echo "prepare s224 failed"
b="--set train.precision=bf16 --set run.timing_warmup_steps=10"
resnet() {  # name bindir sets...
  local name=$1 dir=$2; shift 2
  bin=$dir rt timeout 60 mpirun -np 1 "$dir/ringtrain" train jobs/resnet50_synthetic.toml --set run.device=cuda \
    --set data.train="$x/s224/train" --set data.test="$x/s224/test" --set run.dir="$x/v-$name" \
    --set train.max_steps_per_epoch=40 $b "$@" >"$x/v-$name.log" 2>&1
  echo "resnet50 $name exit $?: $(grep -oE '"(steady_samples_per_s|device_memory_peak_mb|device_memory_allocated_peak_mb)":[0-9.]*' \
    "$x/v-$name/metrics.jsonl" 2>/dev/null | tr '\n' ' ') | $(grep -E '^epoch 1/1:' "$x/v-$name.log" | grep -oE 'loss [0-9.]+|per rank:.*optimizer [0-9.]+s' | tr '\n' ' ')"
  rm -f "$x/v-$name"/*.h5 "$x/v-$name"/checkpoints/*
}
resnet new-nhwc .gpurt/bin
resnet old-nhwc .gpurt/old/bin
resnet new-nhwc-cudnn-stem .gpurt/bin --set gpu.few_channel_gemm=false
resnet new-nhwc-2 .gpurt/bin
resnet new-nhwc-prof .gpurt/bin --set run.profile_layers=true
grep -E "^conv2d 7x7|^maxpool|^\(other|layer profile" "$x/v-new-nhwc-prof.log"; grep -E "^  conv2d 7x7" "$x/v-new-nhwc-prof.log" | cut -c1-160
grep -E "^memory:" "$x/v-new-nhwc.log" "$x/v-old-nhwc.log" | cut -c1-200
rm -rf "$x/s224"
PYTHONUNBUFFERED=1 timeout 60 python3 perf/gpu/compare_pytorch.py --models fmnist,resnet50 --precisions bf16 \
  --channels-last --skip-matmul --steps 30 --warmup 10 --out "$OUT/pytorch.jsonl" >"$x/pytorch.log" 2>&1
echo "pytorch channels_last exit $?"
grep -oE '"(model|samples_per_s|peak_memory_mib)": ?[^,]*' "$OUT/pytorch.jsonl" | tr '\n' ' '; echo
rt timeout 30 .gpurt/bin/ringtrain-bench --benchmark_filter='BM_BackendLayer/cuda_bf16_nhwc/conv7x7' \
  --benchmark_min_time=0.1 >"$x/layers-stem.txt" 2>&1
echo "layer bench exit $?"; grep -E "^BM_" "$x/layers-stem.txt" | sed -E 's/ +/ /g' | cut -c1-200
RINGTRAIN_TEST_DEVICE=cuda rt timeout 40 mpirun -np 2 --oversubscribe .gpurt/bin/test_equivalence \
  >"$x/equivalence-np2.log" 2>&1
echo "equivalence (2 ranks) exit $?: $(grep -E 'PASSED|FAILED' "$x/equivalence-np2.log" | tr '\n' ' ')"
tar czf "$OUT/extra.tgz" -C "$x" --exclude='*.h5' .

#!/usr/bin/env bash
# The next GPU call for issue 13 (perf/gpu/PENDING.md): test the CUDA backend's NHWC path (gpu.nhwc) and measure it
# against NCHW and PyTorch channels_last in one call, about 4 minutes on an H200. Carry .gpurt/{root,lib,bin}.tar.xz,
# env.sh and cuda-libs.sh (../shared/gpu/README.md); logs land in $OUT (summary.txt, the test logs, extra.tgz).
#   bash perf/gpu/nhwc_call.sh
set -u
cd "$(dirname "$0")/../.."
out=${OUT:?run this through the device tool, which sets OUT}
x=$(mktemp -d)
source perf/gpu/carried.sh
unpack_carried
w="--set run.timing_warmup_steps=10"
n="--set train.precision=bf16 --set gpu.nhwc=true"
# lease_run unpacks nothing more, runs the tests (now with the cuda_bf16_nhwc layer cases, the reorder kernel's test
# and the small ResNet in both layouts) and the ResNet-50 settings.
STEPS=40 STAGES="tests variants" \
  VARIANTS="bf16=--set train.precision=bf16 $w;nhwc=$n $w;nhwcprof=$n $w --set run.profile_layers=true" \
  timeout 200 perf/gpu/lease_run.sh
echo "lease_run exit $?"
PYTHONUNBUFFERED=1 timeout 60 python3 perf/gpu/compare_pytorch.py --models resnet50 --precisions bf16 --skip-matmul \
  --channels-last --steps 30 --warmup 10 --out "$out/pytorch.jsonl" >"$x/pytorch.log" 2>&1
echo "pytorch channels_last exit $?"
CUDA_LIBS_LOG=$x/cuda-libs.log RINGTRAIN_TEST_DEVICE=cuda rt timeout 60 mpirun -np 2 --oversubscribe \
  .gpurt/bin/test_equivalence >"$x/equivalence-np2.log" 2>&1
echo "equivalence (2 ranks) exit $?"
tar czf "$out/extra.tgz" -C "$x" .

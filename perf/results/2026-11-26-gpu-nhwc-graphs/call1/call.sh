#!/usr/bin/env bash
# The next GPU call for issue 13 (perf/gpu/PENDING.md): test the CUDA backend's NHWC path (gpu.nhwc) and measure it
# against NCHW and PyTorch channels_last in one call, then probe cuDNN's fused convolution graphs: about 4.5 minutes
# on an H200. Carry .gpurt/{root,lib,bin}.tar.xz, env.sh and cuda-libs.sh (../shared/gpu/README.md); logs land in
# $OUT (summary.txt, the test logs, extra.tgz with the fusion probe's fusion.jsonl).
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
# Which of cuDNN's fused convolution graphs exist and pay here (perf/gpu/cudnn_fusion_probe.cpp, built by
# perf/gpu/build_fusion_probe.sh and carried in bin.tar.xz): about 30 s.
if [ -x .gpurt/bin/cudnn_fusion_probe ]; then
  rt timeout 90 .gpurt/bin/cudnn_fusion_probe >"$x/fusion.jsonl" 2>"$x/fusion.log"
  echo "cudnn_fusion_probe exit $?"
  cat "$x/fusion.jsonl"  # into the reply's output as well as extra.tgz ($OUT holds 8 files at most)
fi
tar czf "$out/extra.tgz" -C "$x" .

#!/usr/bin/env bash
# The next GPU call for issue 13 (perf/gpu/PENDING.md): what the NHWC default (gpu.nhwc = true since 2026-11-26) has
# not yet run, and the measurements to set against PyTorch again; about 4 minutes on an H200. Carry
# .gpurt/{root,lib,bin}.tar.xz, env.sh, cuda-libs.sh and fmnist/ (../shared/gpu/README.md); logs land in $OUT
# (summary.txt, the test logs, pytorch.jsonl, extra.tgz with the rest: logs only, never a run's checkpoints).
#   bash perf/gpu/next_call.sh
set -u
cd "$(dirname "$0")/../.."
out=${OUT:?run this through the device tool, which sets OUT}
x=$(mktemp -d)
source perf/gpu/carried.sh
unpack_carried
b="--set train.precision=bf16 --set run.timing_warmup_steps=10"
# The tests, ResNet-50 bf16 in both layouts (NHWC the default) and profiled, Fashion-MNIST bf16 for 12 epochs.
STEPS=40 STAGES="tests variants fmnist" FMNIST_SETS="--set train.precision=bf16" \
  VARIANTS="nhwc=$b;nchw=$b --set gpu.nhwc=false;nhwcprof=$b --set run.profile_layers=true" \
  timeout 240 perf/gpu/lease_run.sh
echo "lease_run exit $?"
# PyTorch: ResNet-50 and the Fashion-MNIST CNN in bf16 channels_last (the fmnist stage's job is ours), with the bf16
# matmul rate that issue 13's 20 % target is set against.
PYTHONUNBUFFERED=1 timeout 90 python3 perf/gpu/compare_pytorch.py --models fmnist,resnet50 --precisions bf16 \
  --channels-last --steps 30 --warmup 10 --out "$out/pytorch.jsonl" >"$x/pytorch.log" 2>&1
echo "pytorch channels_last exit $?"
# N ranks x b against 1 rank x N*b with the NHWC default, 2 and 4 NCCL ranks on the one GPU.
for np in 2 4; do
  RINGTRAIN_TEST_DEVICE=cuda rt timeout 60 mpirun -np $np --oversubscribe .gpurt/bin/test_equivalence \
    >"$x/equivalence-np$np.log" 2>&1
  echo "equivalence ($np ranks) exit $?"
done
# The NHWC batch norm's backward passes (54-57 % of DRAM bandwidth at 25 % occupancy on 2026-11-26).
ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
rt timeout 60 "$ncu" --clock-control none --section SpeedOfLight --section Occupancy -k 'regex:rows_' -c 5 \
  .gpurt/bin/ringtrain-bench --benchmark_filter='BM_BackendLayer/cuda_bf16_nhwc/batchnorm_256_56' \
  --benchmark_min_time=0.01 >"$x/ncu-bn.txt" 2>&1
echo "ncu exit $?"
grep -E "^  [a-z_]+kernel|Duration|DRAM Throughput|Achieved Occupancy" "$x/ncu-bn.txt" | head -30
tar czf "$out/extra.tgz" -C "$x" .

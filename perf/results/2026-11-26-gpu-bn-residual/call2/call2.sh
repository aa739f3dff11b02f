#!/usr/bin/env bash
# Call 2 of the 2026-11-26 batch-norm/residual record, on a lent GPU: main with the block's last batch norm fused with
# the residual join (.gpurt/bin.tar.xz) against main before it (.gpurt/old-bin.tar.xz), about 5 minutes on an H200:
# the GPU and CUDA layer tests, ResNet-50 bf16 NHWC twice with each build, twice more under the reproducible
# defaults, once with the layer profile, PyTorch channels_last with the matmul rate, ncu on the fused join's kernels.
# Carry .gpurt/{root,lib,bin,old-bin}.tar.xz, env.sh and cuda-libs.sh; logs land in $OUT (summary.txt, the test logs,
# pytorch.jsonl, extra.tgz with the rest).
#   bash perf/results/2026-11-26-gpu-bn-residual/call2/call2.sh
set -u
cd "$(dirname "$0")/../../../.."
out=${OUT:?run this through the device tool, which sets OUT}
x=$(mktemp -d)
source perf/gpu/carried.sh
unpack_carried
mkdir -p .gpurt/old && tar xJf .gpurt/old-bin.tar.xz -C .gpurt/old
STAGES="tests" timeout 100 perf/gpu/lease_run.sh
echo "lease_run exit $?"
grep -E "FAILED|Failure" -A6 "$out/test_gpu.log" "$out/test_layers_cuda.log" | head -30
grep -E "Fusing|OptimizerSteps" "$out/test_gpu.log" | grep -E "OK|FAILED" | cut -c1-110
rt .gpurt/bin/ringtrain prepare synthetic --shape 3,224,224 --classes 1000 --samples $((256 * 41)) \
  --test-samples 256 --shards 8 --out "$x/s224" >"$x/prepare-s224.log" 2>&1 || echo "prepare s224 failed"
resnet() {  # name bindir [--set k=v ...]
  local name=$1 dir=$2; shift 2
  bin=$dir rt timeout 60 mpirun -np 1 "$dir/ringtrain" train jobs/resnet50_synthetic.toml --set run.device=cuda \
    --set data.train="$x/s224/train" --set data.test="$x/s224/test" --set run.dir="$x/v-$name" \
    --set train.max_steps_per_epoch=40 --set train.precision=bf16 --set run.timing_warmup_steps=10 "$@" \
    >"$x/v-$name.log" 2>&1
  local rc=$? epoch
  epoch=$(grep '"kind":"epoch"' "$x/v-$name/metrics.jsonl" 2>/dev/null | tail -1)
  local keys='"(steady_samples_per_s|device_memory_allocated_peak_mb|train_loss)":[0-9.]*'
  echo "resnet50 $name exit $rc: $(grep -oE "$keys" <<<"$epoch" | tr '\n' ' ')"
  rm -rf "$x/v-$name/checkpoints"
}
resnet new .gpurt/bin
resnet old .gpurt/old/bin
resnet new-2 .gpurt/bin
resnet old-2 .gpurt/old/bin
repro=(--set gpu.conv_algorithms=heuristic --set gpu.deterministic=true)
resnet new-repro .gpurt/bin "${repro[@]}"
resnet new-repro-2 .gpurt/bin "${repro[@]}"
resnet new-prof .gpurt/bin --set run.profile_layers=true
grep -E "^  *batchnorm|^  *\(other|layer profile|^  *conv2d 7x7" "$x/v-new-prof.log" | cut -c1-150 | head -12
PYTHONUNBUFFERED=1 timeout 80 python3 perf/gpu/compare_pytorch.py --models resnet50 --precisions bf16 \
  --channels-last --steps 30 --warmup 10 --out "$out/pytorch.jsonl" >"$x/pytorch.log" 2>&1
echo "pytorch channels_last exit $?"
grep -oE '"(kind|model|samples_per_s|peak_memory_mib|flops_per_s)": ?[^,]*' "$out/pytorch.jsonl" | tr '\n' ' '
echo
ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
profile() {  # name kernel-regex launches-to-skip: ncu on the first training step's matching kernels
  bin=.gpurt/bin rt timeout 50 mpirun -np 1 "$ncu" --clock-control none --section SpeedOfLight --section Occupancy \
    --kernel-name-base demangled -k "regex:$2" --launch-skip "$3" -c 3 \
    .gpurt/bin/ringtrain train jobs/resnet50_synthetic.toml --set run.device=cuda --set data.train="$x/s224/train" \
    --set data.test="$x/s224/test" --set run.dir="$x/ncu-$1" \
    --set train.max_steps_per_epoch=2 --set train.precision=bf16 >"$x/ncu-$1.txt" 2>&1
  echo "ncu $1 exit $?"
  grep -E "^  void|Duration|DRAM Throughput|Achieved Occupancy" "$x/ncu-$1.txt" | cut -c1-100 | head -12
  rm -rf "$x/ncu-$1/checkpoints"
}
# Stage 1's three joins (256 channels, 56 x 56): the first three fused forward passes, the last three of backward's 16.
profile join-forward 'rows_affine_kernel<4, true' 0
profile join-backward 'rows_join_gradient_sums_kernel' 13
rm -rf "$x/s224"
tar czf "$out/extra.tgz" -C "$x" --exclude='*.h5' .

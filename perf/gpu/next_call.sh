#!/usr/bin/env bash
# The next GPU call for issue 13 (perf/gpu/PENDING.md): the gpu-next branch's build (.gpurt/bin.tar.xz) against
# main's (.gpurt/old-bin.tar.xz; .gpurt/BUILT.txt names both) in one call, about 5 minutes on an H200: the tests,
# Fashion-MNIST bf16 for 12 epochs with each build (alternated), ResNet-50 bf16 NHWC twice with each build, PyTorch
# channels_last with the matmul rate, the batch-norm layer benchmarks with each build, and ncu on the moments pass.
# Carry .gpurt/{root,lib,bin,old-bin}.tar.xz, env.sh, cuda-libs.sh and fmnist/ (../shared/gpu/README.md); logs land in
# $OUT (summary.txt, the test logs, pytorch.jsonl, extra.tgz with the rest). Move it into the record once it has run.
#   bash perf/gpu/next_call.sh
set -u
cd "$(dirname "$0")/../.."
out=${OUT:?run this through the device tool, which sets OUT}
x=$(mktemp -d)
source perf/gpu/carried.sh
unpack_carried
mkdir -p .gpurt/old && tar xJf .gpurt/old-bin.tar.xz -C .gpurt/old
STAGES="tests" timeout 100 perf/gpu/lease_run.sh
echo "lease_run exit $?"
grep -E "FAILED|Failure" -A6 "$out/test_gpu.log" "$out/test_layers_cuda.log" | head -30
rt .gpurt/bin/ringtrain prepare fashion-mnist --source .gpurt/fmnist --out "$x/fmnist" --shards 8 \
  >"$x/prepare-fmnist.log" 2>&1 || echo "prepare fashion-mnist failed"
fmnist() {  # name bindir
  bin=$2 rt timeout 60 mpirun -np 1 "$2/ringtrain" train jobs/fashion_mnist.toml --set run.device=cuda \
    --set data.train="$x/fmnist/train" --set data.test="$x/fmnist/test" --set run.dir="$x/f-$1" \
    --set train.precision=bf16 >"$x/f-$1.log" 2>&1
  echo "fashion_mnist $1 exit $?: $(grep -oE '"(steady_samples_per_s|test_acc)":[0-9.]*' "$x/f-$1/metrics.jsonl" \
    2>/dev/null | tail -2 | tr '\n' ' ')"
  rm -rf "$x/f-$1/checkpoints"
}
fmnist new .gpurt/bin
fmnist old .gpurt/old/bin
fmnist new-2 .gpurt/bin
fmnist old-2 .gpurt/old/bin
rt .gpurt/bin/ringtrain prepare synthetic --shape 3,224,224 --classes 1000 --samples $((256 * 41)) \
  --test-samples 256 --shards 8 --out "$x/s224" >"$x/prepare-s224.log" 2>&1 || echo "prepare s224 failed"
resnet() {  # name bindir [--set k=v ...]
  local name=$1 dir=$2; shift 2
  bin=$dir rt timeout 60 mpirun -np 1 "$dir/ringtrain" train jobs/resnet50_synthetic.toml --set run.device=cuda \
    --set data.train="$x/s224/train" --set data.test="$x/s224/test" --set run.dir="$x/v-$name" \
    --set train.max_steps_per_epoch=40 --set train.precision=bf16 --set run.timing_warmup_steps=10 "$@" \
    >"$x/v-$name.log" 2>&1
  local rc=$? epoch keys='"(steady_samples_per_s|device_memory_allocated_peak_mb|train_loss)":[0-9.]*'
  epoch=$(grep '"kind":"epoch"' "$x/v-$name/metrics.jsonl" 2>/dev/null | tail -1)
  echo "resnet50 $name exit $rc: $(grep -oE "$keys" <<<"$epoch" | tr '\n' ' ')"
  rm -rf "$x/v-$name/checkpoints"
}
resnet new .gpurt/bin
resnet old .gpurt/old/bin
resnet new-2 .gpurt/bin
resnet old-2 .gpurt/old/bin
rm -rf "$x/s224" "$x/fmnist"
PYTHONUNBUFFERED=1 timeout 80 python3 perf/gpu/compare_pytorch.py --models fmnist,resnet50 --precisions bf16 \
  --channels-last --steps 30 --warmup 10 --out "$out/pytorch.jsonl" >"$x/pytorch.log" 2>&1
echo "pytorch channels_last exit $?"
grep -oE '"(kind|model|samples_per_s|peak_memory_mib|flops_per_s)": ?[^,]*' "$out/pytorch.jsonl" | tr '\n' ' '
echo
for which in bin old/bin; do
  bin=.gpurt/$which rt timeout 40 .gpurt/$which/ringtrain-bench --benchmark_min_time=0.1 \
    --benchmark_filter='BM_BackendLayer/cuda_bf16_nhwc/batchnorm' >"$x/layers-${which%/bin}.txt" 2>&1
  echo "layer bench $which exit $?"
  grep -E "^BM_" "$x/layers-${which%/bin}.txt" | sed -E 's/ +/ /g' | cut -c1-75
done
ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
rt timeout 60 "$ncu" --clock-control none --section SpeedOfLight --section Occupancy --section LaunchStats \
  -k 'regex:rows_' -c 4 .gpurt/bin/ringtrain-bench \
  --benchmark_filter='BM_BackendLayer/cuda_bf16_nhwc/batchnorm_256_56' --benchmark_min_time=0.01 >"$x/ncu-bn.txt" 2>&1
echo "ncu exit $?"
grep -E "^  void|Duration|DRAM Throughput|Waves Per SM" "$x/ncu-bn.txt" | cut -c1-100 | head -20
tar czf "$out/extra.tgz" -C "$x" --exclude='*.h5' .

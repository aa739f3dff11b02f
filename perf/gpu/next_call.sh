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
source perf/gpu/build_runs.sh
prepare_fashion_mnist "$x"
train_fashion_mnist "$x" new .gpurt/bin
train_fashion_mnist "$x" old .gpurt/old/bin
train_fashion_mnist "$x" new-2 .gpurt/bin
train_fashion_mnist "$x" old-2 .gpurt/old/bin
prepare_resnet50_data "$x"
train_resnet50 "$x" new .gpurt/bin
train_resnet50 "$x" old .gpurt/old/bin
train_resnet50 "$x" new-2 .gpurt/bin
train_resnet50 "$x" old-2 .gpurt/old/bin
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

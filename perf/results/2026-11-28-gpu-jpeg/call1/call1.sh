#!/usr/bin/env bash
# Call 1 of the 2026-11-28 record, on a lent GPU (issues 37 and 38; about 7-8 minutes): the GPU tests; ResNet-50
# bf16 batch 256 from synthetic tensors and from JPEG shards (the photos stored as they are, and shrunk to a
# shorter side of 256 as FFCV stores them), the rank held to 8 CPU cores and decoding on them; the JPEG loader
# alone (ringtrain input-bench) on 1, 8 and 16 threads; the GPU-decode peer (torchvision's nvJPEG); PyTorch at its
# best (eager with cudnn.benchmark, torch.compile default and reduce-overhead, channels_last, fused SGD) with the
# dense bf16 matmul rate. Carry .gpurt/{root,lib,bin}.tar.xz, env.sh and cuda-libs.sh (perf/gpu/pack_carried.sh
# build-gpu). Logs land in $OUT (8 files, the most a call returns): summary.txt, test_gpu.log, input.jsonl, runs.jsonl, gpu-decode.jsonl, pytorch.jsonl,
# gpu-summary.jsonl, details.tgz.
#   bash perf/results/2026-11-28-gpu-jpeg/call1/call1.sh
set -u
cd "$(dirname "$0")/../../../.."
out=${OUT:?run this through the device tool, which sets OUT}
x=$(mktemp -d)
source perf/gpu/carried.sh
unpack_carried
say() { echo "[call1 $(date +%T)] $*" | tee -a "$out/summary.txt"; }
bin=.gpurt/bin
nvidia-smi -L | tee -a "$out/summary.txt"
say "cores $(nproc), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
rt "$bin/ringtrain" --version >"$x/versions.txt" 2>&1
grep -E "ringtrain|CUDA|cuDNN|NCCL|libjpeg" "$x/versions.txt" | head -6 | tee -a "$out/summary.txt"

# 1. The GPU tests (issue 44 tightened the bf16 step's bound against its CPU twin: its first GPU run).
rt timeout 120 mpirun -np 1 "$bin/test_gpu" --gtest_color=no >"$out/test_gpu.log" 2>&1
say "test_gpu exit $?: $(grep -cE '^\[       OK' "$out/test_gpu.log") ok, $(grep -cE '^\[  SKIPPED' "$out/test_gpu.log") skipped, $(grep -cE '^\[  FAILED  \] [A-Z]' "$out/test_gpu.log") failed"
grep -E "^\[  FAILED  \] [A-Z]" "$out/test_gpu.log" | head -5 | tee -a "$out/summary.txt"

# 2. Data: synthetic tensors, and ImageNet-like photos (1000 classes, sides 300-700, ~85 KB) stored two ways.
rt "$bin/ringtrain" prepare synthetic --shape 3,224,224 --classes 1000 --samples $((256 * 41)) --test-samples 256 \
  --shards 8 --out "$x/s224" >"$x/prepare-s224.log" 2>&1 || say "prepare synthetic failed"
t0=$(date +%s.%N)
python3 scripts/make_jpeg_folder.py --out "$x/photos" --classes 1000 --per-class 11 --test-per-class 1 \
  --workers "$(nproc)" >"$x/make_jpeg_folder.log" 2>&1 || say "make_jpeg_folder failed: $(tail -2 "$x/make_jpeg_folder.log")"
say "photos: $(tail -1 "$x/make_jpeg_folder.log")"
for store in original:0 side256:256; do
  name=${store%%:*} side=${store#*:}
  rt "$bin/ringtrain" prepare images --source "$x/photos/train" --test-source "$x/photos/val" --size 224 \
    --store jpeg --max-side "$side" --shards 16 --out "$x/jpeg-$name" >"$x/prepare-$name.log" 2>"$x/prepare-$name.err"
  say "prepare $name exit $?: $(head -1 "$x/prepare-$name.log")"
done

# 3. The JPEG loader alone: decode + random-resized crop + flip to uint8 batches of 256, per thread count.
for name in original side256; do
  for threads in 1 8 16; do
    batches=$((threads == 1 ? 6 : 16))
    rt timeout 60 "$bin/ringtrain" input-bench jobs/resnet50_synthetic.toml --set data.train="$x/jpeg-$name/train" \
      --set data.test="$x/jpeg-$name/test" --set data.augment=resized_crop_flip --threads "$threads" \
      --batches "$batches" --warmup 2 2>>"$x/input-bench.err" | sed "s/^{/{\"store\":\"$name\",/" >>"$out/input.jsonl"
  done
done
say "input-bench: $(grep -oE '"store":"[a-z0-9]*"|"threads":[0-9]*|"images_per_s":[0-9]*' "$out/input.jsonl" | paste -sd' ' | sed 's/"store"/\n  "store"/g')"

# 4. ResNet-50 bf16, batch 256, 40 steps of which 10 warm-up, the rank on cores 0-7 (8 loader threads).
pin=""; command -v taskset >/dev/null && pin="taskset -c 0-7"
resnet() {  # name data [--set k=v ...]
  local name=$1 data=$2; shift 2
  rt timeout 90 $pin mpirun -np 1 --bind-to none "$bin/ringtrain" train jobs/resnet50_synthetic.toml \
    --set run.device=cuda --set train.precision=bf16 --set data.train="$data/train" --set data.test="$data/test" \
    --set run.dir="$x/r-$name" --set train.max_steps_per_epoch=40 --set run.timing_warmup_steps=10 \
    --set data.loader_threads=8 "$@" >"$x/r-$name.log" 2>&1
  local rc=$? epoch
  epoch=$(grep '"kind":"epoch"' "$x/r-$name/metrics.jsonl" 2>/dev/null | tail -1)
  echo "{\"run\":\"$name\",\"exit\":$rc,\"epoch\":${epoch:-null}}" >>"$out/runs.jsonl"
  say "resnet50 $name exit $rc: $(grep -oE '"(steady_samples_per_s|data_wait_fraction|device_memory_allocated_peak_mb)":[0-9.e-]*' <<<"$epoch" | paste -sd' ')"
  grep -m2 -E "warning|error" "$x/r-$name.log" | cut -c1-220 | tee -a "$out/summary.txt"
  rm -rf "$x/r-$name/checkpoints"
}
resnet synthetic "$x/s224"
resnet jpeg-original "$x/jpeg-original" --set data.augment=resized_crop_flip
resnet jpeg-side256 "$x/jpeg-side256" --set data.augment=resized_crop_flip
resnet synthetic-2 "$x/s224"
resnet jpeg-original-2 "$x/jpeg-original" --set data.augment=resized_crop_flip

# 5. The GPU-decode peer: torchvision's batched nvJPEG decode (+ random-resized crop and flip on the device).
if [ -f perf/gpu/compare_gpu_decode.py ]; then
  PYTHONUNBUFFERED=1 timeout 60 python3 perf/gpu/compare_gpu_decode.py "$x/photos" --batch 256 --images 2048 \
    --min-batches 6 --min-seconds 2 --out "$out/gpu-decode.jsonl" >"$x/gpu-decode.log" 2>&1
  say "gpu decode peer exit $?: $(grep -oE '"mode": ?"[a-z_]*"|"images_per_s": ?[0-9]*' "$out/gpu-decode.jsonl" | paste -sd' ')"
fi

# 6. PyTorch at its best, the modes back to back, with the dense bf16 matmul rate.
PYTHONUNBUFFERED=1 timeout 290 python3 perf/gpu/compare_pytorch.py --models resnet50,fmnist --precisions bf16 \
  --channels-last --modes eager,eager_benchmark,compile,compile_reduce_overhead --steps 30 --warmup 10 \
  --min-timed-s 1 --budget-s 260 --out "$out/pytorch.jsonl" >"$x/pytorch.log" 2>&1
say "pytorch exit $?"
tail -13 "$x/pytorch.log" | tee -a "$out/summary.txt"

python3 perf/results/2026-11-28-gpu-jpeg/call1/jpeg_rows.py "$out" >>"$out/summary.txt" 2>&1
tar czf "$out/details.tgz" -C "$x" --exclude='*.h5' --exclude=photos --exclude=s224 . 2>/dev/null
say "done"

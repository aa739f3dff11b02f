#!/usr/bin/env bash
# Owns one prepared call on a lent GPU that runs what perf/gpu/PENDING.md lists, the most needed first, inside a
# deadline (BUDGET_S, default 560 s of the call's 600): a stage that no longer fits is written as SKIPPED with the
# seconds it lacked, so a second call can take it up (STAGES names the stages to run, in this order):
#   tests    test_gpu whole, test_layers '*/cuda*', the 2-rank equivalence test on CUDA + NCCL (every layer, sync BN,
#            EMA, soft targets, fusion, the JPEG decoder: all the code written since the last GPU run)
#   jpeg     issue 37: 12,000 ImageNet-like photos (made in the background while the tests run), stored as they are
#            and at a shorter side of 256; the GPU decoder alone (ringtrain-jpeg-decode-bench: hardware engine,
#            CUDA backend, host share); the loader alone on 8 cores (input-bench, decode cpu | gpu); ResNet-50 bf16
#            batch 256 from synthetic tensors and from JPEG shards decoded on the GPU, the rank on 8 cores
#   models   issue 41: ringtrain's ViT-S/16, EfficientNet-B0 and ConvNeXt-T bf16 on synthetic 224x224 tensors, then
#            PyTorch's torchvision models eager with cudnn.benchmark (perf/gpu/compare_pytorch.py)
#   cpujpeg  ResNet-50 from side-256 JPEG shards decoded on the 8 cores
#   compiled PyTorch compile reduce-overhead for the three models, as --budget-s allows
# Needs .gpurt/ as perf/gpu/pack_carried.sh build-gpu ringtrain test_gpu test_layers test_equivalence
# ringtrain-jpeg-decode-bench makes it. OUT gets summary.txt, results.jsonl (one object per measurement or check),
# tests.log (the failures and result lines of the tests), pytorch.jsonl, details.tgz (every log).
#   bash perf/gpu/measure_pending.sh [OUT_DIR]      (default: $OUT)
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${1:-${OUT:?usage: measure_pending.sh OUT_DIR (or set OUT)}}
mkdir -p "$out"
budget=${BUDGET_S:-560}
stages=" ${STAGES:-tests jpeg models cpujpeg compiled} "
t0=$SECONDS
x=$(mktemp -d)
bin=${BIN:-.gpurt/bin}
source perf/gpu/carried.sh
unpack_carried
export CUDA_LIBS_LOG=$x/cuda-libs.log
left() { echo $((budget - (SECONDS - t0))); }
say() { echo "[pending +$((SECONDS - t0))s] $*" | tee -a "$out/summary.txt"; }
fits() {  # fits NAME SECONDS: whether NAME's estimated SECONDS still fit the budget; says SKIPPED when not
  [ "$(left)" -ge "$2" ] && return 0
  say "SKIPPED $1: $(left) s left, estimated $2 s"
  echo "{\"stage\":\"$1\",\"status\":\"skipped\",\"left_s\":$(left),\"estimated_s\":$2}" >>"$out/results.jsonl"
  return 1
}
want() { [[ $stages == *" $1 "* ]]; }
device=${DEVICE:-cuda}  # DEVICE=cpu: a dry run of the flow on a host without a GPU
classes=${CLASSES:-1000}  # photo classes, 12 photos each (CLASSES=20 for a dry run)
pin=""; command -v taskset >/dev/null && pin="taskset -c 0-7"

nvidia-smi -L | tee -a "$out/summary.txt"
rt "$bin/ringtrain" --version 2>&1 | head -12 >>"$out/summary.txt"
if want jpeg; then
  python3 scripts/make_jpeg_folder.py --out "$x/photos" --classes "$classes" --per-class 12 --test-per-class 1 \
    --progressive-every 25 --grayscale-every 60 --cmyk-every 700 --workers 12 >"$x/make_jpeg_folder.log" 2>&1 &
  photos_pid=$!
fi

gtest_line() {  # gtest_line NAME LOG EXIT: one result line, the failures into tests.log
  local ok failed skipped
  ok=$(grep -cE '^\[       OK \]' "$2"); failed=$(grep -cE '^\[  FAILED  \] [A-Za-z]' "$2")
  skipped=$(grep -cE '^\[  SKIPPED \] [A-Za-z]' "$2")
  say "$1 exit $3: $ok ok, $failed failed, $skipped skipped"
  echo "{\"stage\":\"tests\",\"suite\":\"$1\",\"exit\":$3,\"ok\":$ok,\"failed\":$failed,\"skipped\":$skipped}" >>"$out/results.jsonl"
  { echo "== $1 (exit $3)"; grep -E '^\[  (FAILED|SKIPPED) +\] [A-Za-z]|Failure$|^  Actual|^Expected|^Which is|error' "$2" | head -60; } >>"$out/tests.log"
}
if want tests; then
  rt timeout 150 mpirun -np 1 "$bin/test_gpu" --gtest_color=no >"$x/test_gpu.log" 2>&1
  gtest_line test_gpu "$x/test_gpu.log" $?
  rt timeout 150 "$bin/test_layers" --gtest_color=no --gtest_filter='*/cuda*' >"$x/test_layers_cuda.log" 2>&1
  gtest_line test_layers_cuda "$x/test_layers_cuda.log" $?
  NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1 RINGTRAIN_TEST_DEVICE=cuda rt timeout 120 mpirun -np 2 --oversubscribe \
    "$bin/test_equivalence" --gtest_color=no </dev/null >"$x/equivalence-np2.log" 2>&1
  gtest_line equivalence_cuda_np2 "$x/equivalence-np2.log" $?
fi

resnet() {  # resnet NAME DATA [--set k=v ...]: ResNet-50 bf16 batch 256, 40 steps (10 warm-up), the rank on 8 cores
  local name=$1 data=$2; shift 2
  train_job "resnet50-$name" jobs/resnet50_synthetic.toml "$data" 90 $pin --set data.loader_threads=8 \
    --set train.max_steps_per_epoch=40 "$@"
}
train_job() {  # train_job NAME JOB DATA TIMEOUT [taskset ...] [--set k=v ...]: one rank on the GPU, one results row
  local name=$1 job=$2 data=$3 limit=$4; shift 4
  local pre=()
  [ "${1:-}" = taskset ] && { pre=(taskset "$2" "$3"); shift 3; }
  local start=$SECONDS
  rt timeout "$limit" "${pre[@]}" mpirun -np 1 --bind-to none "$bin/ringtrain" train "$job" --set run.device=$device \
    --set train.precision=bf16 --set data.train="$data/train" --set data.test="$data/test" --set run.dir="$x/r-$name" \
    --set run.timing_warmup_steps=10 --set run.checkpoint_every=0 --set train.epochs=1 "$@" >"$x/r-$name.log" 2>&1
  local rc=$? epoch
  epoch=$(grep '"kind":"epoch"' "$x/r-$name/metrics.jsonl" 2>/dev/null | tail -1)
  echo "{\"stage\":\"run\",\"run\":\"$name\",\"exit\":$rc,\"wall_s\":$((SECONDS - start)),\"epoch\":${epoch:-null}}" >>"$out/results.jsonl"
  say "$name exit $rc in $((SECONDS - start)) s: $(grep -oE '"(steady_samples_per_s|data_wait_fraction|device_memory_peak_mb)":[0-9.e-]*' <<<"$epoch" | paste -sd' ')"
  [ "$rc" = 0 ] || tail -4 "$x/r-$name.log" | cut -c1-240 | tee -a "$out/summary.txt"
}

synthetic224() {  # the 3x224x224 synthetic split, once
  [ -d "$x/s224" ] || rt "$bin/ringtrain" prepare synthetic --shape 3,224,224 --classes 1000 --samples $((256 * 41)) \
    --test-samples 256 --shards 8 --out "$x/s224" >"$x/prepare-s224.log" 2>&1 || say "prepare synthetic failed"
}

if want jpeg && fits jpeg 200; then
  wait "$photos_pid"; say "photos: $(tail -1 "$x/make_jpeg_folder.log" | cut -c1-220)"
  for store in side256:256 original:0; do
    name=${store%%:*} side=${store#*:}
    rt "$bin/ringtrain" prepare images --source "$x/photos/train" --test-source "$x/photos/val" --size 224 \
      --store jpeg --max-side "$side" --shards 16 --out "$x/jpeg-$name" >"$x/prepare-$name.log" 2>&1
    say "prepare $name exit $?: $(du -sh "$x/jpeg-$name" | cut -f1)"
    for mode in hardware --no-hardware --read-only; do
      flag=$mode; [ "$mode" = hardware ] && flag=""
      rt timeout 30 "$bin/ringtrain-jpeg-decode-bench" "$x/jpeg-$name/train" --batch 256 --batches 30 --warmup 3 $flag \
        2>>"$x/decode-bench.err" | sed "s/^{/{\"stage\":\"decode_bench\",\"store\":\"$name\",\"mode\":\"${mode#--}\",/" >>"$out/results.jsonl"
      say "decode-bench $name $mode: $(tail -1 "$out/results.jsonl" | grep -oE '"(images_per_s|cpu_s_per_image|retried)":[0-9.e-]*' | paste -sd' ')"
    done
    for decode in cpu gpu; do
      rt timeout 40 $pin "$bin/ringtrain" input-bench jobs/resnet50_synthetic.toml --set data.train="$x/jpeg-$name/train" \
        --set data.test="$x/jpeg-$name/test" --set data.augment=resized_crop_flip --set data.decode=$decode \
        --set run.device=$device --threads 8 --batches 16 --warmup 2 2>>"$x/input-bench.err" |
        sed "s/^{/{\"stage\":\"input_bench\",\"store\":\"$name\",\"decode\":\"$decode\",\"cores\":8,/" >>"$out/results.jsonl"
      say "input-bench $name decode=$decode, 8 threads on 8 cores: $(tail -1 "$out/results.jsonl" | grep -oE '"images_per_s":[0-9.]*')"
    done
  done
  synthetic224
  fits resnet-synthetic 60 && resnet synthetic "$x/s224"
  fits resnet-side256-gpu 70 && resnet jpeg-side256-gpu "$x/jpeg-side256" --set data.augment=resized_crop_flip --set data.decode=gpu
  fits resnet-original-gpu 70 && resnet jpeg-original-gpu "$x/jpeg-original" --set data.augment=resized_crop_flip --set data.decode=gpu
fi

if want models && fits models 120; then
  synthetic224
  fits vit_s16 45 && train_job vit_s16 jobs/vit_s16.toml "$x/s224" 60 --set optimizer.name=sgd --set train.max_steps_per_epoch=30
  fits efficientnet_b0 45 && train_job efficientnet_b0 jobs/efficientnet_b0.toml "$x/s224" 60 --set train.max_steps_per_epoch=30
  fits convnext_tiny 45 && train_job convnext_tiny jobs/convnext_tiny.toml "$x/s224" 60 --set optimizer.name=sgd --set train.max_steps_per_epoch=30
  if fits pytorch-eager 50; then
    PYTHONUNBUFFERED=1 timeout $(($(left) - 5)) python3 perf/gpu/compare_pytorch.py --models vit_s16,efficientnet_b0,convnext_tiny \
      --precisions bf16 --channels-last --modes eager_benchmark --steps 30 --warmup 10 --skip-matmul \
      --budget-s $(($(left) - 15)) --out "$out/pytorch.jsonl" >"$x/pytorch-eager.log" 2>&1
    say "pytorch eager_benchmark exit $?"; grep -E "^(vit_s16|efficientnet_b0|convnext_tiny) .*eager_benchmark" "$x/pytorch-eager.log" | tee -a "$out/summary.txt"
  fi
fi

if want cpujpeg && [ -d "$x/jpeg-side256" ] && fits resnet-side256-cpu 70; then
  resnet jpeg-side256-cpu "$x/jpeg-side256" --set data.augment=resized_crop_flip --set data.decode=cpu
fi

if want compiled && fits pytorch-compiled 100; then
  PYTHONUNBUFFERED=1 timeout $(($(left) - 5)) python3 perf/gpu/compare_pytorch.py --models vit_s16,efficientnet_b0,convnext_tiny \
    --precisions bf16 --channels-last --modes compile_reduce_overhead --steps 30 --warmup 10 --skip-matmul \
    --budget-s $(($(left) - 15)) --out "$out/pytorch.jsonl" >"$x/pytorch-compiled.log" 2>&1
  say "pytorch compile_reduce_overhead exit $?"; grep -E "^(vit_s16|efficientnet_b0|convnext_tiny) .*compile_reduce" "$x/pytorch-compiled.log" | tee -a "$out/summary.txt"
fi

wait 2>/dev/null
tar czf "$out/details.tgz" -C "$x" --exclude=photos --exclude='jpeg-*' --exclude=s224 --exclude='*.h5' --exclude=checkpoints . 2>/dev/null
say "done in $((SECONDS - t0)) s"

#!/usr/bin/env bash
# Owns one prepared call on a lent GPU that runs what perf/gpu/PENDING.md lists, the most needed first, inside a
# deadline (BUDGET_S, default 560 s of the call's 600): a stage that no longer fits is written as SKIPPED with the
# seconds it lacked, so a second call can take it up. STAGES names the stages to run, in this order (default: all):
#   tests     test_gpu but its CUDA-graph tests, test_layers '*/cuda*' (with the gpu.candidate_kernels cases), the
#             equivalence and the synchronised batch-norm tests on CUDA + NCCL with 2 and 4 ranks (gpu.share_device),
#             the candidate NCCL sums apart; a test binary its timeout ends is named with the test it hung in
#   graphs    issue 38: the CUDA-graph tests (test_gpu's CudaGraphedTrainingTest and CudaStepGraphsTest), then the
#             Fashion-MNIST CNN bf16 on synthetic 1x28x28 tensors with gpu.cuda_graphs false and true (speed, and
#             whether the two runs end on the same param_checksum)
#   syncbn    a 2-rank ResNet-20 job with dist.sync_batchnorm_group = 2 and = 0: the losses must differ (the key
#             reached the GPU backend; on 2026-11-28 they were equal to 16 digits)
#   import    issue 41: checkpoints `ringtrain import` made of torchvision models (perf/gpu/pack_import_models.sh,
#             carried as .gpurt/import.tar.xz) predict on the GPU, fp32 and bf16, what onnxruntime computed of the
#             ONNX files: within 1e-4 and 5e-2 of the largest logit (perf/gpu/compare_logits.py)
#   models    ResNet-50 bf16 on synthetic tensors (the baseline), then the issue-41 models bf16 on synthetic
#             224x224 tensors with gpu.candidate_kernels false and true, then each with the candidates under the
#             layer profile as the budget allows (the speed runs are unprofiled: the profile synchronises each layer)
#   evalshape ResNet-50 evaluating a 1,000-sample test split (a last partial batch: 36-41 s on 2026-11-28, the
#             likely cause cuDNN's timed search for a batch size not seen before), then the same with
#             gpu.full_eval_batches = true (the last batch padded to 256)
#   jpeg      issue 37: 12,000 ImageNet-like photos (made as the stage starts, about 30 s) at a shorter side
#             of 256, in the region layout and as plain JPEGs (--keep-jpeg-bytes); the loader alone (input-bench,
#             decode cpu | gpu, both layouts, and gpu_regions: data.decode_regions on the region layout) and the GPU
#             decoder alone with its routes (ringtrain-jpeg-decode-bench, both layouts); ResNet-50 from the
#             region-layout shards decoded on the 8 cores, on the GPU, and on the GPU from regions
#   pytorch   PyTorch's torchvision models, eager with cudnn.benchmark, then compile reduce-overhead, as the
#             budget allows (perf/gpu/compare_pytorch.py)
# Needs .gpurt/ as `perf/gpu/pack_carried.sh build-gpu ringtrain test_gpu test_layers test_equivalence
# test_sync_batchnorm ringtrain-jpeg-decode-bench` makes it. OUT gets summary.txt, results.jsonl (one object per
# measurement or check), tests.log (the failures and result lines of the tests), pytorch.jsonl, details.tgz (every
# log, the layer profiles among them; written also when the call is cut off). Every timeout is cut to end within 30 s
# of the budget, so the call ends inside its 600 s.
#   bash perf/gpu/measure_pending.sh [OUT_DIR]      (default: $OUT)
#   DEVICE=cpu CLASSES=20 BIN=build/bin: a dry run of the flow on a host without a GPU
#   MODELS="vit_s16 efficientnet_b0 convnext_tiny mobilenet_v2" (the models stage's list)
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${1:-${OUT:?usage: measure_pending.sh OUT_DIR (or set OUT)}}
mkdir -p "$out"
budget=${BUDGET_S:-560}
stages=" ${STAGES:-tests graphs syncbn import models evalshape jpeg pytorch} "
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
# A timeout cut to end within 20 s of the budget (and its kill 10 s later), so the call ends inside its 600 s.
cap() { local l=$(($(left) + 20)); echo $(($1 < l ? $1 : (l > 10 ? l : 10))); }
# Every log comes back even when the call is cut off at its limit.
trap 'tar czf "$out/details.tgz" -C "$x" --exclude=photos --exclude="jpeg-*" --exclude=s224 --exclude="*.h5" --exclude=checkpoints . 2>/dev/null' EXIT
device=${DEVICE:-cuda}  # DEVICE=cpu: a dry run of the flow on a host without a GPU
classes=${CLASSES:-1000}  # photo classes, 12 photos each (CLASSES=20 for a dry run)
pin=""; command -v taskset >/dev/null && pin="taskset -c 0-7"

nvidia-smi -L | tee -a "$out/summary.txt"
# Without the carried runtime every stage would fail on its own: stop here, saying so.
if ! rt mpirun --version >/dev/null 2>&1 || ! rt "$bin/ringtrain" --version >"$x/version.txt" 2>&1; then
  say "STOP: the carried runtime does not start (mpirun, or $bin/ringtrain): $(tail -2 "$x/version.txt" 2>/dev/null)"
  exit 1
fi
head -12 "$x/version.txt" >>"$out/summary.txt"
gtest_line() {  # gtest_line NAME LOG EXIT: one result line, the failures into tests.log
  local ok failed skipped hung=""
  # gtest names a failed or skipped test twice, the second time in the closing list without its "(N ms)"
  ok=$(grep -cE '^\[       OK \]' "$2"); failed=$(grep -cE '^\[  FAILED  \] [A-Za-z].*\([0-9]+ ms\)$' "$2")
  skipped=$(grep -cE '^\[  SKIPPED \] [A-Za-z].*\([0-9]+ ms\)$' "$2")
  # Killed by its timeout: the test running then is the one that hung.
  [ "$3" = 124 ] || [ "$3" = 137 ] && hung=$(grep -E '^\[ RUN      \]' "$2" | tail -1 | cut -c14- | tr -d '"\\')
  say "$1 exit $3: $ok ok, $failed failed, $skipped skipped${hung:+, timed out in $hung}"
  echo "{\"stage\":\"tests\",\"suite\":\"$1\",\"exit\":$3,\"ok\":$ok,\"failed\":$failed,\"skipped\":$skipped,\"hung_in\":\"$hung\"}" >>"$out/results.jsonl"
  { echo "== $1 (exit $3)${hung:+ timed out in $hung}"; grep -E '^\[  (FAILED|SKIPPED) +\] [A-Za-z]|Failure$|^  Actual|^Expected|^Which is|error' "$2" | head -60; } >>"$out/tests.log"
}
mpi_test() {  # mpi_test NAME RANKS BINARY [GTEST_FILTER]: an MPI test on CUDA with RANKS ranks sharing the GPU; its exit
  # code. 150 s: longer than the 120 s the code gives NCCL's set-up, so a stalled set-up ends in the code's own message.
  [ -x "$bin/$3" ] || { say "$1: $bin/$3 not packed"; return 1; }
  NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1 RINGTRAIN_TEST_DEVICE=cuda rt timeout -k 10 "$(cap 150)" mpirun -np "$2" \
    --oversubscribe --bind-to none "$bin/$3" --gtest_color=no --gtest_filter="${4:-*}" </dev/null >"$x/$1.log" 2>&1
  local rc=$?
  gtest_line "$1" "$x/$1.log" $rc
  return $rc
}
resnet() {  # resnet NAME DATA [--set k=v ...]: ResNet-50 bf16 batch 256, 40 steps (10 warm-up), the rank on 8 cores;
  # RESNET_LIMIT=S for runs whose evaluation is slow (36-41 s on 2026-11-28): the epoch record comes after it
  local name=$1 data=$2; shift 2
  train_job "resnet50-$name" jobs/resnet50_synthetic.toml "$data" "${RESNET_LIMIT:-90}" $pin --set data.loader_threads=8 \
    --set train.max_steps_per_epoch=40 "$@"
}
train_job() {  # train_job NAME JOB DATA TIMEOUT [taskset ...] [--set k=v ...]: one rank on the GPU, one results row
  local name=$1 job=$2 data=$3 limit=$4; shift 4
  local pre=()
  [ "${1:-}" = taskset ] && { pre=(taskset "$2" "$3"); shift 3; }
  local start=$SECONDS
  rt timeout -k 10 "$(cap "$limit")" "${pre[@]}" mpirun -np 1 --bind-to none "$bin/ringtrain" train "$job" --set run.device=$device \
    --set train.precision=bf16 --set data.train="$data/train" --set data.test="$data/test" --set run.dir="$x/r-$name" \
    --set run.timing_warmup_steps=10 --set run.checkpoint_every=0 --set train.epochs=1 "$@" >"$x/r-$name.log" 2>&1
  local rc=$? epoch
  epoch=$(grep '"kind":"epoch"' "$x/r-$name/metrics.jsonl" 2>/dev/null | tail -1)
  echo "{\"stage\":\"run\",\"run\":\"$name\",\"exit\":$rc,\"wall_s\":$((SECONDS - start)),\"epoch\":${epoch:-null}}" >>"$out/results.jsonl"
  say "$name exit $rc in $((SECONDS - start)) s: $(grep -oE '"(steady_samples_per_s|data_wait_fraction|batch_load_s|eval_s|device_memory_peak_mb)":[0-9.e-]*' <<<"$epoch" | paste -sd' ')"
  [ "$rc" = 0 ] || tail -4 "$x/r-$name.log" | cut -c1-240 | tee -a "$out/summary.txt"
}

synthetic224() {  # the 3x224x224 synthetic split, once
  [ -d "$x/s224" ] || rt "$bin/ringtrain" prepare synthetic --shape 3,224,224 --classes 1000 --samples $((256 * 41)) \
    --test-samples 256 --shards 8 --out "$x/s224" >"$x/prepare-s224.log" 2>&1 || say "prepare synthetic failed"
}

model_sets() {  # the job keys that make a model's ringtrain run the step PyTorch's peer runs
  case $1 in vit_s16|convnext_tiny) echo "--set optimizer.name=sgd" ;; esac
}
# The CUDA-graph tests, never yet run on a GPU, belong to the graphs stage alone: a capture that hangs costs once.
graph_tests='*CudaGraphedTrainingTest*:CudaStepGraphsTest.*:CudaGraphsKey.*'
if want tests; then
  rt timeout -k 10 "$(cap 150)" mpirun -np 1 --bind-to none "$bin/test_gpu" --gtest_color=no --gtest_filter="-$graph_tests" \
    >"$x/test_gpu.log" 2>&1
  gtest_line test_gpu "$x/test_gpu.log" $?
  rt timeout -k 10 "$(cap 200)" "$bin/test_layers" --gtest_color=no --gtest_filter='*/cuda*' >"$x/test_layers_cuda.log" 2>&1
  gtest_line test_layers_cuda "$x/test_layers_cuda.log" $?
  # The candidate NCCL sums (two communicators at once: the first suspect of a hang) run apart, after the rest, and
  # a case that hung with 2 ranks is not tried with 4.
  candidate='*CandidateNccl*'
  np_pair() {  # np_pair NAME ESTIMATE BINARY [FILTER]: the test with 2 ranks, then 4 unless 2 hung (timed out)
    fits "$1 np2" "$2" || return
    mpi_test "$1_cuda_np2" 2 "$3" "${4:-*}"
    case $? in
      124|137) say "SKIPPED $1 np4: np2 timed out"
        echo "{\"stage\":\"tests\",\"suite\":\"$1_cuda_np4\",\"status\":\"skipped\",\"why\":\"np2 timed out\"}" >>"$out/results.jsonl"
        return ;;
    esac
    fits "$1 np4" "$2" && mpi_test "$1_cuda_np4" 4 "$3" "${4:-*}"
  }
  np_pair equivalence 40 test_equivalence
  np_pair sync_batchnorm 30 test_sync_batchnorm "-$candidate"
  np_pair sync_batchnorm_candidate 30 test_sync_batchnorm "$candidate"
fi

if want graphs && fits graphs 60; then
  rt timeout -k 10 "$(cap 60)" mpirun -np 1 --bind-to none "$bin/test_gpu" --gtest_color=no --gtest_filter="$graph_tests" \
    >"$x/test_gpu_graphs.log" 2>&1
  gtest_line test_gpu_graphs "$x/test_gpu_graphs.log" $?
  rt "$bin/ringtrain" prepare synthetic --shape 1,28,28 --classes 10 --samples 25600 --test-samples 1000 --shards 4 \
    --out "$x/s28" >"$x/prepare-s28.log" 2>&1
  for graphs in false true; do
    fits "fmnist graphs=$graphs" 20 && train_job "fmnist-graphs-$graphs" jobs/fashion_mnist.toml "$x/s28" 40 \
      --set gpu.cuda_graphs=$graphs --set train.shuffle=false --set data.augment=none
  done
  param_sum() { grep -oE '"param_checksum":[^,}]*' "$x/r-fmnist-graphs-$1/metrics.jsonl" 2>/dev/null | tail -1 | cut -d: -f2 | tr -d '"'; }
  # The same checksum proves the graphs only where steps were replayed: a run whose steps all ran eagerly has it too.
  graph_steps=$(grep -oE '"graph_steps":\{[^}]*\}' "$x/r-fmnist-graphs-true/metrics.jsonl" 2>/dev/null | tail -1 | cut -d: -f2-)
  replayed=$(grep -oE '"replayed":[0-9]+' <<<"$graph_steps" | cut -d: -f2)
  same=false; [ -n "$(param_sum false)" ] && [ "$(param_sum false)" = "$(param_sum true)" ] && [ "${replayed:-0}" -gt 0 ] && same=true
  echo "{\"stage\":\"graphs\",\"check\":\"gpu.cuda_graphs replays steps and ends on the eager param_checksum\",\"passed\":$same,\"eager\":\"$(param_sum false)\",\"graphed\":\"$(param_sum true)\",\"graph_steps\":${graph_steps:-null}}" >>"$out/results.jsonl"
  say "$([ $same = true ] && echo PASS || echo FAIL) graphed Fashion-MNIST replays steps (${graph_steps:-none recorded}) and ends on the eager param_checksum ($(param_sum false) and $(param_sum true))"
  grep -h "gpu.cuda_graphs" "$x/r-fmnist-graphs-true.log" | head -2 | cut -c1-240 | tee -a "$out/summary.txt"
fi

if want syncbn && fits syncbn 40; then
  rt "$bin/ringtrain" prepare synthetic --shape 3,32,32 --classes 10 --samples 2560 --test-samples 256 --shards 4 \
    --out "$x/s32" >"$x/prepare-s32.log" 2>&1
  for group in 0 2; do
    NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1 rt timeout -k 10 "$(cap 60)" mpirun -np 2 --oversubscribe --bind-to none "$bin/ringtrain" train \
      jobs/resnet20_cifar_like.toml --set run.device=$device --set gpu.share_device=true \
      --set dist.sync_batchnorm_group=$group --set train.batch_per_rank=32 --set train.max_steps_per_epoch=5 \
      --set train.epochs=1 --set train.shuffle=false --set data.augment=none --set data.train="$x/s32/train" \
      --set data.test="$x/s32/test" --set run.dir="$x/syncbn-g$group" --set run.checkpoint_every=0 \
      </dev/null >"$x/syncbn-g$group.log" 2>&1
    say "syncbn group $group exit $?: $(grep -oE '"train_loss":[0-9.e-]*' "$x/syncbn-g$group/metrics.jsonl" 2>/dev/null)"
  done
  loss() { grep -oE '"train_loss":[0-9.e-]*' "$x/syncbn-g$1/metrics.jsonl" 2>/dev/null | cut -d: -f2; }
  differ=false; [ -n "$(loss 0)" ] && [ -n "$(loss 2)" ] && [ "$(loss 0)" != "$(loss 2)" ] && differ=true
  echo "{\"stage\":\"syncbn\",\"check\":\"dist.sync_batchnorm_group changes a GPU job's loss\",\"passed\":$differ,\"loss_group0\":\"$(loss 0)\",\"loss_group2\":\"$(loss 2)\"}" >>"$out/results.jsonl"
  say "$([ $differ = true ] && echo PASS || echo FAIL) sync batch norm reaches the GPU job (losses $(loss 0) and $(loss 2))"
fi

if want import && fits import 60; then
  if [ -f .gpurt/import.tar.xz ]; then
    tar xJf .gpurt/import.tar.xz -C "$x"
    for h5 in "$x"/import/*.h5; do
      name=$(basename "$h5" .h5)
      for precision in fp32 bf16; do
        fits "import $name $precision" 15 || continue
        tolerance=1e-4; [ "$precision" = bf16 ] && tolerance=5e-2
        rt timeout -k 10 "$(cap 60)" mpirun -np 1 --bind-to none "$bin/ringtrain" predict --checkpoint "$h5" --data "$x/import/$name-data" --device "$device" \
          --precision "$precision" --logits --top 1 "$x"/import/image*.png >"$x/import-$name-$precision.jsonl" \
          2>"$x/import-$name-$precision.err"
        rc=$?
        row=$(python3 perf/gpu/compare_logits.py "$x/import/$name-onnxruntime.npy" "$x/import-$name-$precision.jsonl" \
          --tolerance "$tolerance" --label "$name $precision on $device" 2>&1)
        grep '^{' <<<"$row" >>"$out/results.jsonl"
        say "import $name $precision: predict exit $rc: $row"
      done
    done
  else
    say "SKIPPED import: .gpurt/import.tar.xz was not carried (perf/gpu/pack_import_models.sh makes it)"
  fi
fi

if want models && fits models 120; then
  synthetic224
  fits resnet-synthetic 60 && resnet synthetic "$x/s224"
  # Speed first, unprofiled (the layer profile synchronises around every layer), then where the candidates' time
  # goes, as the budget allows.
  models=${MODELS:-vit_s16 efficientnet_b0 convnext_tiny mobilenet_v2}
  for model in $models; do
    for candidate in false true; do
      # shellcheck disable=SC2046 # model_sets prints --set options
      fits "$model candidate=$candidate" 40 && train_job "$model-candidate-$candidate" "jobs/$model.toml" "$x/s224" 60 \
        $(model_sets "$model") --set gpu.candidate_kernels=$candidate --set train.max_steps_per_epoch=30
    done
  done
  for model in $models; do
    # shellcheck disable=SC2046 # model_sets prints --set options
    fits "$model profile" 40 && train_job "$model-candidate-true-profile" "jobs/$model.toml" "$x/s224" 60 \
      $(model_sets "$model") --set gpu.candidate_kernels=true --set run.profile_layers=true \
      --set train.max_steps_per_epoch=30
  done
fi

if want evalshape && fits evalshape 150; then
  rt "$bin/ringtrain" prepare synthetic --shape 3,224,224 --classes 1000 --samples $((256 * 21)) \
    --test-samples 1000 --shards 8 --out "$x/eval1000" >"$x/prepare-eval1000.log" 2>&1
  for padded in false true; do
    fits "evalshape padded=$padded" 120 && RESNET_LIMIT=150 resnet "eval-1000-padded-$padded" "$x/eval1000" \
      --set train.max_steps_per_epoch=20 --set gpu.full_eval_batches=$padded
  done
  rm -rf "$x/eval1000"
fi

if want jpeg && fits jpeg 250; then
  # Made here, not in the background from the start: the earlier stages seldom leave the jpeg stage its time.
  python3 scripts/make_jpeg_folder.py --out "$x/photos" --classes "$classes" --per-class 12 --test-per-class 1 \
    --progressive-every 25 --grayscale-every 60 --cmyk-every 700 --workers 14 >"$x/make_jpeg_folder.log" 2>&1
  say "photos: $(tail -1 "$x/make_jpeg_folder.log" | cut -c1-220)"
  # The region layout (restart markers, prepare's default since 2026-11-30) and plain JPEGs (--keep-jpeg-bytes): the
  # CPU decodes only a crop's segments from the first; nvJPEG decodes both whole, or, with data.decode_regions
  # (gpu_regions, off by default until measured here), a JPEG of each crop's segments; never yet run on a GPU.
  for layout in region plain; do
    keep=()
    [ "$layout" = plain ] && keep=(--keep-jpeg-bytes)
    rt "$bin/ringtrain" prepare images --source "$x/photos/train" --test-source "$x/photos/val" --size 224 \
      --store jpeg --max-side 256 --shards 16 "${keep[@]}" --out "$x/jpeg-side256-$layout" >"$x/prepare-side256-$layout.log" 2>&1
    say "prepare side256 $layout exit $?: $(du -sh "$x/jpeg-side256-$layout" | cut -f1)"
  done
  mv "$x/jpeg-side256-region" "$x/jpeg-side256"
  for run in region:cpu region:gpu region:gpu_regions plain:cpu plain:gpu; do
    layout=${run%%:*} decode=${run#*:} split=$x/jpeg-side256 regions=false label=${run#*:}
    [ "$layout" = plain ] && split=$x/jpeg-side256-plain
    [ "$decode" = gpu_regions ] && decode=gpu regions=true
    rt timeout -k 10 "$(cap 40)" $pin "$bin/ringtrain" input-bench jobs/resnet50_synthetic.toml --set data.train="$split/train" \
      --set data.test="$split/test" --set data.augment=resized_crop_flip --set data.decode=$decode \
      --set data.decode_regions=$regions --set run.device=$device --threads 8 --batches 16 --warmup 2 \
      2>>"$x/input-bench.err" >"$x/input-bench-$layout-$label.json"
    rc=$?
    sed "s/^{/{\"stage\":\"input_bench\",\"store\":\"side256\",\"layout\":\"$layout\",\"decode_regions\":$regions,\"cores\":8,/" \
      "$x/input-bench-$layout-$label.json" >>"$out/results.jsonl"
    say "input-bench side256 $layout decode=$label, 8 threads on 8 cores, exit $rc: $(grep -oE '"images_per_s":[0-9.]*' "$x/input-bench-$layout-$label.json")"
  done
  # Whether nvJPEG's hardware engine takes the restart markers: `routes` says how each batch's samples went.
  for layout in region plain; do
    split=$x/jpeg-side256
    [ "$layout" = plain ] && split=$x/jpeg-side256-plain
    [ "$device" = cuda ] && [ -x "$bin/ringtrain-jpeg-decode-bench" ] || break
    rt timeout -k 10 "$(cap 40)" "$bin/ringtrain-jpeg-decode-bench" "$split/train" --batches 10 2>>"$x/decode-bench.err" \
      >"$x/decode-bench-$layout.json"
    rc=$?
    sed "s/^{/{\"stage\":\"jpeg_decode_bench\",\"store\":\"side256\",\"layout\":\"$layout\",/" \
      "$x/decode-bench-$layout.json" >>"$out/results.jsonl"
    say "jpeg-decode-bench side256 $layout exit $rc: $(grep -oE '"images_per_s":[0-9.]*|"routes":[^}]*}' "$x/decode-bench-$layout.json" | tr '\n' ' ')"
  done
  # The photos' classes are ResNet-50's 1000 on a GPU; a dry run's fewer need a head of their size.
  photo_head=()
  [ "$classes" = 1000 ] || photo_head=(--set model.replace_head="$classes")
  for decode in cpu gpu gpu_regions; do
    regions=false
    [ "$decode" = gpu_regions ] && regions=true
    fits "resnet-side256-$decode" 120 && RESNET_LIMIT=150 resnet "jpeg-side256-$decode" "$x/jpeg-side256" \
      --set data.augment=resized_crop_flip --set data.decode=${decode%_regions} --set data.decode_regions=$regions \
      "${photo_head[@]}"
  done
fi

# The compiled mode first (PyTorch's best where it runs; without it gpu_summary.py gives no verdict), then eager as
# the budget allows, for the record.
if want pytorch && fits pytorch 60; then
  for mode in compile_reduce_overhead eager_benchmark; do
    fits "pytorch $mode" 40 || continue
    # Its budget counts from its own start, torch's import included; a mode cut off by the timeout is written failed.
    PYTHONUNBUFFERED=1 timeout -k 5 $(($(left) - 10)) python3 perf/gpu/compare_pytorch.py \
      --models vit_s16,efficientnet_b0,convnext_tiny,mobilenet_v2 --precisions bf16 --channels-last --modes $mode \
      --steps 30 --warmup 10 --skip-matmul --budget-s $(($(left) - 20)) --out "$out/pytorch.jsonl" >"$x/pytorch-$mode.log" 2>&1
    say "pytorch $mode exit $?"; grep -E " $mode +(ok|skipped|failed)" "$x/pytorch-$mode.log" | tee -a "$out/summary.txt"
  done
fi

wait 2>/dev/null
say "done in $((SECONDS - t0)) s"

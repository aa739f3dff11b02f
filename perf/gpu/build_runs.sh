# Owns the runs a measuring script makes to compare builds on a GPU host (a record's A/B scripts):
# one job with one build, its result on one line, so that each build runs the same command. Source it after
# perf/gpu/carried.sh (these run through `rt`), from the repository root; `dir` is the run's scratch folder.
#   prepare_resnet50_data dir    synthetic 3x224x224 batches for 41 steps of 256 in dir/s224
#   prepare_fashion_mnist dir    Debian's Fashion-MNIST files (.gpurt/fmnist) as shards in dir/fmnist
#   train_resnet50 dir name bindir [--set k=v ...]        ResNet-50 bf16 NHWC, 40 steps, 10 of them warm-up
#   train_fashion_mnist dir name bindir [--set k=v ...]   the Fashion-MNIST job in bf16 for its 12 epochs
# Each train_* prints "<model> <name> exit <rc>: " and the last epoch's steady samples/s, peak device memory and loss
# (and test accuracy), keeps the run's logs in dir (v-<name>, f-<name>) and drops its checkpoints.

prepare_resnet50_data() {
  rt .gpurt/bin/ringtrain prepare synthetic --shape 3,224,224 --classes 1000 --samples $((256 * 41)) \
    --test-samples 256 --shards 8 --out "$1/s224" >"$1/prepare-s224.log" 2>&1 || echo "prepare s224 failed"
}

prepare_fashion_mnist() {
  rt .gpurt/bin/ringtrain prepare fashion-mnist --source .gpurt/fmnist --out "$1/fmnist" --shards 8 \
    >"$1/prepare-fmnist.log" 2>&1 || echo "prepare fashion-mnist failed"
}

# job model data run-name: the job with build $bin, then its result line.
train_with_build() {
  local dir=$1 job=$2 model=$3 data=$4 run=$5
  shift 5
  rt timeout 60 mpirun -np 1 "$bin/ringtrain" train "$job" --set run.device=cuda --set data.train="$data/train" \
    --set data.test="$data/test" --set run.dir="$dir/$run" --set train.precision=bf16 "$@" >"$dir/$run.log" 2>&1
  local rc=$? keys='"(steady_samples_per_s|device_memory_allocated_peak_mb|train_loss|test_acc)":[0-9.]*'
  local epoch
  epoch=$(grep '"kind":"epoch"' "$dir/$run/metrics.jsonl" 2>/dev/null | tail -1)
  echo "$model ${run#*-} exit $rc: $(grep -oE "$keys" <<<"$epoch" | tr '\n' ' ')"
  rm -rf "${dir:?}/$run/checkpoints"
}

train_resnet50() {
  local dir=$1 name=$2
  bin=$3 train_with_build "$dir" jobs/resnet50_synthetic.toml resnet50 "$dir/s224" "v-$name" \
    --set train.max_steps_per_epoch=40 --set run.timing_warmup_steps=10 "${@:4}"
}

train_fashion_mnist() {
  local dir=$1 name=$2
  bin=$3 train_with_build "$dir" jobs/fashion_mnist.toml fashion_mnist "$dir/fmnist" "f-$name" "${@:4}"
}

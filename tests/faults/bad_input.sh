#!/usr/bin/env bash
# Bad input on 2 ranks, as a user meets it under mpirun. For every case: the documented exit code on both
# ranks, the same message on both ranks naming the file or key and saying what to do, an end within
# BOUND_S seconds, and run.dir (an earlier run's files: metrics.jsonl, job.resolved.toml, a checkpoint) left
# with every name, size, byte and timestamp as it was, although run.overwrite = true.
# The *_permission cases run as user nobody (root reads everything); where setpriv cannot switch to it they are
# skipped, saying why, and the script exits 77 (CTest's skip) unless a case failed. The cgroup case runs under a
# memory cgroup of its own (as Slurm's --mem makes one), skipped likewise where none can be made. A CASE may be a
# case's name, `permissions` (those six), `cgroup` or `others` (every other case).
# Usage: bad_input.sh RINGTRAIN MAKE_BAD_SPLIT SOURCE_DIR [CASE...]
set -uo pipefail
bin=$1 make_bad=$2 src=$3
shift 3
only=" ${*:-} "
bound=${BOUND_S:-30}
work=$(mktemp -d)
chmod 755 "$work"  # the cases run as another user read the shared data through it
cgroup=""  # the memory cgroup the cgroup case makes, removed at the end
trap 'rm -rf "$work"; [ -z "$cgroup" ] || rmdir "$cgroup" 2>/dev/null' EXIT
as_user=()  # a command prefix a case runs under: another user, or a memory cgroup
failures=0
passed=0
skipped=0
permission_cases="data_permission run_dir_permission shard_permission shard_folder_permission checkpoint_permission inspect_permission"
cgroup_cases="model_over_cgroup_limit"
# wanted NAME: the case was asked for, by name or by its group (or nothing was named).
wanted() {
  [ "$only" = "  " ] || [[ "$only" == *" $1 "* ]] && return 0
  if [[ " $permission_cases " == *" $1 "* ]]; then [[ "$only" == *" permissions "* ]]
  elif [[ " $cgroup_cases " == *" $1 "* ]]; then [[ "$only" == *" cgroup "* ]]
  else [[ "$only" == *" others "* ]]; fi
}
advice='re-run `ringtrain prepare`'

# A folder holding an earlier run. Any file written, replaced, removed or created under it changes manifest.
old_run() {
  mkdir -p "$1/checkpoints"
  echo '{"kind":"job","earlier":true}' >"$1/metrics.jsonl"
  echo '# earlier run' >"$1/job.resolved.toml"
  head -c 4096 /dev/urandom >"$1/checkpoints/ckpt-s000000005.h5"
}
manifest() { (cd "$1" && find . -printf '%p %y %s %T@\n' | sort && find . -type f -exec md5sum {} + | sort); }

# expect NAME EXIT_CODE WATCHED_DIR "what" "fix" -- args to `ringtrain train`
# "what" (naming the file or key) and "fix" must both be in the message, and both ranks must print it.
expect() {
  local name=$1 code=$2 watched=$3 what=$4 fix=$5
  shift 5
  wanted "$name" || return 0
  local before log=$work/$name.log
  before=$(manifest "$watched")
  local start; start=$(date +%s.%N)
  timeout $((bound + 60)) ${as_user[@]+"${as_user[@]}"} mpirun -np 2 --oversubscribe "$bin" train "$@" >"$log" 2>&1
  local rc=$?
  local took; took=$(python3 -c "print(round($(date +%s.%N) - $start, 1))")
  local why=()
  [ "$rc" -eq "$code" ] || why+=("exit $rc, want $code")
  local headers; headers=$(grep -cE "^ringtrain: .* \(exit $code\) \[rank [01]/2 " "$log")
  [ "$headers" -eq 2 ] || why+=("$headers ranks reported exit $code, want 2")
  # The line after each rank's header is the message's first line: one distinct line means the same message.
  local distinct; distinct=$(awk '/^ringtrain: .*\(exit [0-9]+\) \[rank/ {getline; print}' "$log" | sort -u | wc -l)
  [ "$distinct" -eq 1 ] || why+=("$distinct different messages across ranks")
  local n
  n=$(grep -cF -- "$what" "$log"); [ "$n" -ge 2 ] || why+=("'$what' seen $n times, want once per rank")
  n=$(grep -cF -- "$fix" "$log"); [ "$n" -ge 2 ] || why+=("fix '$fix' seen $n times, want once per rank")
  python3 -c "import sys; sys.exit(0 if $took < $bound else 1)" || why+=("took $took s, bound $bound s")
  [ "$before" = "$(manifest "$watched")" ] || why+=("$watched changed: $(diff <(echo "$before") <(manifest "$watched") | head -5 | tr '\n' ' ')")
  if [ ${#why[@]} -eq 0 ]; then
    echo "ok   $name: exit $rc on both ranks in $took s: $what"
    passed=$((passed + 1))
  else
    echo "FAIL $name: ${why[*]}"
    sed 's/^/  | /' "$log" | head -40
    failures=$((failures + 1))
  fi
}

# ---- the data: a valid tiny split, copies with bytes cut or clobbered, and crafted splits with one fault each
"$bin" prepare synthetic --shape 1,8,8 --classes 3 --samples 40 --test-samples 8 --shards 3 --out "$work/tiny" \
  >/dev/null || { echo "prepare failed"; exit 1; }
mkdir -p "$work/empty"
cp -a "$work/tiny/train" "$work/truncated"
victim=$(ls "$work/truncated"/shard-*.h5 | sed -n 2p)
truncate -s $(($(stat -c %s "$victim") / 2)) "$victim"
cp -a "$work/tiny/train" "$work/clobbered"
clobbered=$(ls "$work/clobbered"/shard-*.h5 | sed -n 2p)
printf '\0\0\0\0\0\0\0\0' | dd of="$clobbered" bs=1 seek=0 conv=notrunc status=none
# One byte flipped inside the root group's object header, whose address superblock v2 holds at offset 36:
# the checksummed file format must turn it into one clear error, not a misread (or a crash inside HDF5).
cp -a "$work/tiny/train" "$work/flipped"
flipped=$(ls "$work/flipped"/shard-*.h5 | sed -n 2p)
python3 - "$flipped" <<'PY' || { echo "byte flip failed"; exit 1; }
import struct, sys
data = bytearray(open(sys.argv[1], "rb").read())
assert data[8] == 2, f"superblock version {data[8]}, the flip assumes 2"
root = struct.unpack_from("<Q", data, 36)[0]
data[root + 12] ^= 0xFF
open(sys.argv[1], "wb").write(data)
PY
for fault in shape_between_shards dtype_between_shards nan_float_images label_out_of_range nan_mean inf_std zero_std \
             unwritten_labels; do
  "$make_bad" "$fault" "$work/$fault" || { echo "make_bad_split $fault failed"; exit 1; }
done
shard0=shard-00000-of-00002.h5 shard1=shard-00001-of-00002.h5

job=$src/jobs/fashion_mnist.toml
# A model that fits the 3-class 1x8x8 data, for the cases whose check comes after the model is built.
small_model=(--set 'model.layers=[{type="flatten"},{type="dense",units=3}]')
# Every case but the run.dir ones starts "fresh" (run.overwrite = true) in a folder holding an earlier run.
run() { old_run "$work/runs/$1"; echo "$work/runs/$1"; }
fresh() { echo --set run.dir="$1" --set run.overwrite=true --set train.batch_per_rank=4; }
data() { echo --set data.train="$1" --set data.test="${2:-$work/tiny/test}"; }

# -- job file (exit 3)
d=$(run typo)
expect typo 3 "$d" "unknown key 'train.epocs'" "valid keys in [train]: epochs" \
  "$job" $(data "$work/tiny/train") $(fresh "$d") --set train.epocs=2
d=$(run wrong_type)
expect wrong_type 3 "$d" "'train.epochs' must be an integer, got a string" "job file '$job' has 1 problem" \
  "$job" $(data "$work/tiny/train") $(fresh "$d") --set 'train.epochs="2"'
d=$(run negative_batch)
expect negative_batch 3 "$d" "'train.batch_per_rank' must be in [1, 1048576], got -4" "job file '$job' has 1 problem" \
  "$job" $(data "$work/tiny/train") $(fresh "$d") --set train.batch_per_rank=-4
d=$(run loss_scale_zero)
expect loss_scale_zero 3 "$d" "'train.loss_scale_init' must be in [1e-06, 1e+19], got 0" "job file '$job' has 1 problem" \
  "$job" $(data "$work/tiny/train") $(fresh "$d") --set train.precision=fp16 --set train.loss_scale_init=0
d=$(run milestones_not_increasing)
expect milestones_not_increasing 3 "$d" "'optimizer.milestones' must increase, but 20 follows 30" "job file '$job' has 1 problem" \
  "$job" $(data "$work/tiny/train") $(fresh "$d") --set optimizer.schedule=steps --set 'optimizer.milestones=[30, 20]'
d=$(run decay_factor_zero)
expect decay_factor_zero 3 "$d" "'optimizer.decay_factor' must be in (0, 1], got 0" "job file '$job' has 1 problem" \
  "$job" $(data "$work/tiny/train") $(fresh "$d") --set optimizer.decay_factor=0
d=$(run poly_power_negative)
expect poly_power_negative 3 "$d" "'optimizer.poly_power' must be in (0, 1000], got -1" "job file '$job' has 1 problem" \
  "$job" $(data "$work/tiny/train") $(fresh "$d") --set optimizer.poly_power=-1
d=$(run clip_negative)
expect clip_negative 3 "$d" "'optimizer.clip_global_norm' must be in [0, 1000000000], got -0.5" "job file '$job' has 1 problem" \
  "$job" $(data "$work/tiny/train") $(fresh "$d") --set optimizer.clip_global_norm=-0.5
d=$(run mixup_negative)
expect mixup_negative 3 "$d" "'data.mixup_alpha' must be in [0, 100], got -0.2" "job file '$job' has 1 problem" \
  "$job" $(data "$work/tiny/train") $(fresh "$d") --set data.mixup_alpha=-0.2
d=$(run mixup_odd_batch)
expect mixup_odd_batch 3 "$d" "data.mixup_alpha mix each micro-batch's samples in pairs, and 'train.batch_per_rank' = 5 is odd" \
  "job file '$job' has 1 problem" "$job" $(data "$work/tiny/train") $(fresh "$d") --set data.mixup_alpha=0.2 \
  --set train.batch_per_rank=5
d=$(run cutmix_too_large)
expect cutmix_too_large 3 "$d" "'data.cutmix_alpha' must be in [0, 100], got 1000" "job file '$job' has 1 problem" \
  "$job" $(data "$work/tiny/train") $(fresh "$d") --set data.cutmix_alpha=1000
d=$(run tf32_on_cpu)
expect tf32_on_cpu 3 "$d" 'train.precision = "tf32" needs the CUDA backend' 'which computes in fp32, bf16 or fp16' \
  "$job" $(data "$work/tiny/train") $(fresh "$d") --set train.precision=tf32 --set run.device=cpu
d=$(run shared_with_lars)
expect shared_with_lars 3 "$d" 'a slice per rank, which optimizer.name = "lars" cannot' \
  'use sgd or adamw, or dist.reducer = "nonblocking"' \
  "$job" $(data "$work/tiny/train") $(fresh "$d") --set 'dist.reducer="shared"' --set 'optimizer.name="lars"'
d=$(run shared_with_fp16)
expect shared_with_fp16 3 "$d" 'train.precision = "fp16" cannot (its loss scaling checks every gradient on every rank)' \
  'use bf16, or dist.reducer = "nonblocking"' \
  "$job" $(data "$work/tiny/train") $(fresh "$d") --set 'dist.reducer="shared"' --set 'train.precision="fp16"'
d=$(run model_mismatch)
expect model_mismatch 3 "$d" "the model ends in 10 values per sample (shape 1x10x1x1), but the dataset has 3 classes" "make the last layer \`dense\` with units = 3" \
  "$job" $(data "$work/tiny/train") $(fresh "$d")

# -- data (exit 4)
d=$(run missing_folder)
expect missing_folder 4 "$d" "split folder '$work/nope' does not exist" "create it with \`ringtrain prepare" \
  "$job" $(data "$work/nope") $(fresh "$d")
d=$(run zero_shards)
expect zero_shards 4 "$d" "split folder '$work/empty' holds no shard-*.h5 files" "$advice" \
  "$job" $(data "$work/empty") $(fresh "$d")
d=$(run truncated_shard)
expect truncated_shard 4 "$d" "shard '$victim' cannot be opened by HDF5, the file is truncated or corrupt" "$advice" \
  "$job" $(data "$work/truncated") $(fresh "$d")
d=$(run flipped_metadata_byte)
expect flipped_metadata_byte 4 "$d" "shard '$flipped' has unreadable metadata (its root group), the file is corrupt" \
  "$advice" "$job" $(data "$work/flipped") $(fresh "$d")
d=$(run corrupt_shard)
expect corrupt_shard 4 "$d" "shard '$clobbered' is not an HDF5 file" "$advice" \
  "$job" $(data "$work/clobbered") $(fresh "$d")
# crafted NAME "what": a case on the split make_bad_split wrote for NAME (shard 0 or 1 of 2 at fault)
crafted() {
  local d; d=$(run "$1")
  expect "$1" 4 "$d" "$2" "$advice" "$job" $(data "$work/$1/train" "$work/$1/test") $(fresh "$d")
}
crafted shape_between_shards "'$work/shape_between_shards/train/$shard1' holds 1x8x9 samples but '$work/shape_between_shards/train/$shard0' holds 1x8x8"
crafted dtype_between_shards "shard '$work/dtype_between_shards/train/$shard1' has dataset 'images' of float32 elements, expected uint8"
crafted nan_float_images "shard '$work/nan_float_images/train/$shard1' has dataset 'images' of float32 elements, expected uint8"
crafted label_out_of_range "shard '$work/label_out_of_range/train/$shard1' has label 7 at sample 5, outside [0, 3)"
crafted nan_mean "shard '$work/nan_mean/train/$shard0' has root attribute 'mean' = [nan]: channel 0 is nan"
crafted inf_std "shard '$work/inf_std/train/$shard0' has root attribute 'std' = [inf]: channel 0 is inf, expected a finite number > 0"
crafted unwritten_labels "shard '$work/unwritten_labels/train/$shard1' has dataset 'labels' of extent [20] (80 bytes) but only 0 bytes of it are stored: the file was not written completely"
crafted zero_std "shard '$work/zero_std/train/$shard0' has root attribute 'std' = [0]: channel 0 is 0"
d=$(run too_few_samples)
expect too_few_samples 4 "$d" "data.train '$work/tiny/train' has 40 samples: too few for 2 ranks x batch_per_rank 64" \
  "lower train.batch_per_rank, use fewer ranks, or prepare more data" \
  "$job" $(data "$work/tiny/train") $(fresh "$d") --set train.batch_per_rank=64

# -- checkpoint (exit 5): an earlier run whose checkpoints are gone; its metrics.jsonl must survive
mkdir -p "$work/runs/no_checkpoint"
echo '{"kind":"job","earlier":true}' >"$work/runs/no_checkpoint/metrics.jsonl"
expect resume_without_checkpoint 5 "$work/runs/no_checkpoint" \
  "--resume: no checkpoint in '$work/runs/no_checkpoint/checkpoints'" "start without --resume" \
  "$job" $(data "$work/tiny/train") --set run.dir="$work/runs/no_checkpoint" --set train.batch_per_rank=4 "${small_model[@]}" --resume

# -- run.dir holding an earlier run, without run.overwrite (exit 3)
d=$(run existing_run)
expect existing_run 3 "$d" "run.dir '$d' already holds a run (metrics.jsonl)" "--set run.overwrite=true to replace it" \
  "$job" $(data "$work/tiny/train") --set run.dir="$d" --set train.batch_per_rank=4 "${small_model[@]}"

# -- run.dir that cannot be made (exit 3): its parent is a regular file, which stops root too
mkdir -p "$work/blocked" && echo "a file, not a folder" >"$work/blocked/file"
expect unusable_run_dir 3 "$work/blocked" "run.dir '$work/blocked/file/run' cannot be reached: a part of the path before the last is not a folder" \
  "pick a writable folder with --set run.dir=" \
  "$job" $(data "$work/tiny/train") --set run.dir="$work/blocked/file/run" --set train.batch_per_rank=4 "${small_model[@]}"

# -- a run folder whose metrics.jsonl is a folder: refused before anything in it is claimed or rewritten (it was an
# internal error after job.resolved.toml had been replaced)
d=$(run metrics_folder)
rm "$d/metrics.jsonl" && mkdir "$d/metrics.jsonl"
expect metrics_folder 3 "$d" "run.dir '$d' holds a metrics.jsonl that is a folder" "move it out of the way" \
  "$job" $(data "$work/tiny/train") --set run.dir="$d" --set train.batch_per_rank=4 "${small_model[@]}" --resume

# -- job files that are not regular files of sane size (exit 3): refused before they are read, no hang
mkfifo "$work/job.fifo"
d=$(run fifo_job)
expect fifo_job 3 "$d" "job file '$work/job.fifo' is not a regular file or folder (a FIFO, device or socket)" \
  "a job file is a regular TOML file" "$work/job.fifo" $(data "$work/tiny/train") $(fresh "$d")
d=$(run endless_job)
expect endless_job 3 "$d" "job file '/dev/zero' is not a regular file or folder" "a job file is a regular TOML file" \
  /dev/zero $(data "$work/tiny/train") $(fresh "$d")

# -- paths the system cannot resolve: the path, the system's reason, the exit code of what the path is for
long_name=$work/$(printf 'n%.0s' $(seq 300))
d=$(run long_run_dir_name)
expect long_run_dir_name 3 "$d" "run.dir '$long_name' cannot be reached: File name too long" "--set run.dir=" \
  "$job" $(data "$work/tiny/train") --set run.dir="$long_name" --set train.batch_per_rank=4 "${small_model[@]}"
ln -s "$work/loop" "$work/loop"
d=$(run data_symlink_loop)
expect data_symlink_loop 4 "$d" "split folder '$work/loop' cannot be reached: Too many levels of symbolic links" \
  "check the path and its permissions" "$job" $(data "$work/loop") $(fresh "$d")
long_path=$work
while [ ${#long_path} -le 4200 ]; do long_path+=/$(printf 'p%.0s' $(seq 200)); done
# One rank: two ranks' messages over PIPE_BUF (4 KiB, the path alone is longer) interleave in a shared log.
if wanted data_path_too_long; then
  d=$(run data_path_too_long)
  before=$(manifest "$d")
  timeout 60 "$bin" train "$job" $(data "$long_path/train") $(fresh "$d") >"$work/data_path_too_long.log" 2>&1
  rc=$?
  if [ "$rc" = 4 ] && grep -qF "/train' cannot be reached: File name too long; check the path and its permissions" \
       "$work/data_path_too_long.log" && [ "$before" = "$(manifest "$d")" ]; then
    echo "ok   data_path_too_long: exit 4 naming the ${#long_path}-character path: File name too long"
    passed=$((passed + 1))
  else
    echo "FAIL data_path_too_long: exit $rc: $(head -c 300 "$work/data_path_too_long.log")"
    failures=$((failures + 1))
  fi
fi
# Permission denied on a parent: root reads everything, so these run as nobody.
mkdir -p "$work/private" && cp -a "$work/tiny" "$work/private/" && chmod 700 "$work/private"
if setpriv --reuid=65534 --regid=65534 --clear-groups true 2>/dev/null; then
  as_user=(setpriv --reuid=65534 --regid=65534 --clear-groups env HOME="$work")
  d=$(run data_permission)
  chmod 777 "$d" "$d/checkpoints" && chmod 666 "$d/metrics.jsonl" "$d/job.resolved.toml" "$d/checkpoints"/*
  expect data_permission 4 "$d" "split folder '$work/private/tiny/train' cannot be reached: Permission denied" \
    "check the path and its permissions" "$job" $(data "$work/private/tiny/train" "$work/tiny/test") $(fresh "$d")
  expect run_dir_permission 3 "$work/private" "run.dir '$work/private/run' cannot be reached: Permission denied" \
    "--set run.dir=" "$job" $(data "$work/tiny/train") --set run.dir="$work/private/run" --set train.batch_per_rank=4 \
    "${small_model[@]}"
  # A shard and a checkpoint the user may not read are not damaged: the reason and the permission to fix,
  # never the advice to rewrite the split or move the checkpoint out (which would drop the newest good one).
  cp -a "$work/tiny/train" "$work/unreadable_shard" && chmod 755 "$work/unreadable_shard"
  locked=$(ls "$work/unreadable_shard"/shard-*.h5 | sed -n 2p)
  chmod 600 "$locked"
  d=$(run shard_permission)
  chmod 777 "$d" "$d/checkpoints" && chmod 666 "$d/metrics.jsonl" "$d/job.resolved.toml" "$d/checkpoints"/*
  expect shard_permission 4 "$d" "shard '$locked' cannot be read: Permission denied" "read permission on it" \
    "$job" $(data "$work/unreadable_shard") $(fresh "$d")
  # A folder the user may list but not enter (no x): the folder and chmod a+x, not chmod a+r on a file.
  cp -a "$work/tiny/train" "$work/closed_folder" && chmod 744 "$work/closed_folder"
  d=$(run shard_folder_permission)
  chmod 777 "$d" "$d/checkpoints" && chmod 666 "$d/metrics.jsonl" "$d/job.resolved.toml" "$d/checkpoints"/*
  expect shard_folder_permission 4 "$d" "cannot be read: Permission denied" "access to its folder, e.g. chmod a+x '$work/closed_folder'" \
    "$job" $(data "$work/closed_folder") $(fresh "$d")
  d=$(run checkpoint_permission)
  chmod 777 "$d" "$d/checkpoints" && chmod 666 "$d/metrics.jsonl" "$d/job.resolved.toml"
  chmod 600 "$d/checkpoints/ckpt-s000000005.h5"
  expect checkpoint_permission 5 "$d" "checkpoint '$d/checkpoints/ckpt-s000000005.h5' cannot be read: Permission denied" \
    "read permission on it and its folders" "$job" $(data "$work/tiny/train") --set run.dir="$d" \
    --set train.batch_per_rank=4 "${small_model[@]}" --resume
  for name in shard_permission checkpoint_permission; do
    wanted "$name" || continue
    if grep -qF -e "$advice" -e "move it out" "$work/$name.log"; then
      echo "FAIL $name: advises a rewrite or a move for a file that is only unreadable"
      failures=$((failures + 1))
    fi
  done
  # `inspect` says the same of both.
  if wanted inspect_permission; then
    "${as_user[@]}" "$bin" inspect "$work/unreadable_shard" >"$work/inspect_shard.log" 2>&1
    rc_shard=$?
    "${as_user[@]}" "$bin" inspect "$d/checkpoints/ckpt-s000000005.h5" >"$work/inspect_ckpt.log" 2>&1
    rc_ckpt=$?
    if [ "$rc_shard" = 4 ] && grep -qF "shard '$locked' cannot be read: Permission denied" "$work/inspect_shard.log" &&
       ! grep -qF "$advice" "$work/inspect_shard.log" && [ "$rc_ckpt" = 5 ] &&
       grep -qF "cannot be read: Permission denied" "$work/inspect_ckpt.log" && ! grep -qF "move it out" "$work/inspect_ckpt.log"; then
      echo "ok   inspect_permission: an unreadable shard (exit 4) and checkpoint (exit 5): Permission denied, no rewrite or move"
      passed=$((passed + 1))
    else
      echo "FAIL inspect_permission: shard exit $rc_shard, checkpoint exit $rc_ckpt: $(cat "$work/inspect_shard.log" "$work/inspect_ckpt.log" | tail -6)"
      failures=$((failures + 1))
    fi
  fi
  as_user=()
else
  for name in $permission_cases; do
    wanted "$name" && skipped=$((skipped + 1)) && echo "skip $name: setpriv cannot switch to user nobody here"
  done
fi

# -- models too large for memory (exit 3): the numbers, before anything is allocated
d=$(run model_too_large)
expect model_too_large 3 "$d" "the model needs" "lower train.batch_per_rank (activations grow with it) or make the model smaller" \
  "$job" $(data "$work/tiny/train") $(fresh "$d") \
  --set 'model.layers=[{type="flatten"},{type="dense",units=1048576},{type="dense",units=1048576},{type="dense",units=3}]'
d=$(run layer_too_large)
expect layer_too_large 3 "$d" "model.layers[0] (conv2d 3x3x8 s1 p1000000) turns input 1x1x8x8 per sample into" \
  "more than any memory holds; check its size, padding, filters or units" "$job" $(data "$work/tiny/train") $(fresh "$d") \
  --set 'model.layers=[{type="conv2d",filters=8,kernel=3,padding=1000000},{type="flatten"},{type="dense",units=3}]'
# Loader queues no host holds (1025 batches of 32 samples of 3x512x512 ahead, for training and for evaluation): refused
# before the network is built, where they left it a negative budget, unchecked, and the run was killed for memory
# once the loaders filled them.
if wanted loader_queues_too_large; then
  "$bin" prepare synthetic --shape 3,512,512 --classes 3 --samples 64 --test-samples 8 --out "$work/large_samples" >/dev/null
  d=$(run loader_queues_too_large)
  expect loader_queues_too_large 3 "$d" "the data loaders' queues need" "lower data.prefetch_batches or train.batch_per_rank" \
    "$job" $(data "$work/large_samples/train" "$work/large_samples/test") $(fresh "$d") --set train.batch_per_rank=32 \
    --set data.prefetch_batches=1024 --set 'model.layers=[{type="flatten"},{type="dense",units=3}]'
fi

# A model that fits the host's memory but not the batch system's limit: a memory cgroup of 1 GiB made for the
# case (v1's memory controller or v2's memory.max, under this process's own group), as Slurm's --mem makes one.
# Without the cgroup's limit in the budget the ranks passed set-up and the kernel's OOM killer ended them, no message.
# memory_cgroup: makes the group and prints its folder; fails where this system does not let it.
memory_cgroup() {
  local v1 v2 dir
  v1=$(awk -F: '$2 ~ /(^|,)memory(,|$)/ {print $3; exit}' /proc/self/cgroup)
  v2=$(awk -F: '$1 == "0" && $2 == "" {print $3; exit}' /proc/self/cgroup)
  if [ -n "$v1" ] && [ -d /sys/fs/cgroup/memory ]; then dir=/sys/fs/cgroup/memory${v1%/}/ringtrain-test-$$
  elif [ -n "$v2" ] && [ -f /sys/fs/cgroup/cgroup.controllers ]; then dir=/sys/fs/cgroup${v2%/}/ringtrain-test-$$
  else return 1; fi
  mkdir "$dir" 2>/dev/null || return 1
  if [ -f "$dir/memory.limit_in_bytes" ]; then echo $((1 << 30)) >"$dir/memory.limit_in_bytes"
  else echo $((1 << 30)) >"$dir/memory.max"; fi 2>/dev/null || { rmdir "$dir"; return 1; }
  # A process must be able to join it (v2 refuses one whose parent holds processes itself).
  sh -c 'echo $$ >"$1/cgroup.procs"' sh "$dir" 2>/dev/null || { rmdir "$dir"; return 1; }
  echo "$dir"
}
if wanted model_over_cgroup_limit; then
  if cgroup=$(memory_cgroup); then
    d=$(run model_over_cgroup_limit)
    as_user=(sh -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' "$cgroup")
    expect model_over_cgroup_limit 3 "$d" "available under the memory limit of cgroup /" \
      "or make the model smaller; or ask the batch system for more memory (e.g. sbatch --mem or --mem-per-gpu)" \
      "$job" $(data "$work/tiny/train") $(fresh "$d") \
      --set 'model.layers=[{type="flatten"},{type="dense",units=65536},{type="dense",units=1024},{type="dense",units=3}]'
    as_user=()
  else
    cgroup=""
    skipped=$((skipped + 1)); echo "skip model_over_cgroup_limit: no memory cgroup can be made and joined here"
  fi
fi

# A budget check that fails on one rank only (each rank weighs the model against its own reading of the host's
# memory; here the fault-injection hook's budget): every rank ends with that rank's message within the bound,
# none left waiting in the shared copy's window collective for it.
for reducer in shared nonblocking; do
  d=$(run budget_on_one_rank_$reducer)
  RINGTRAIN_TEST_MEMORY_BUDGET=1:4096 expect budget_on_one_rank_$reducer 3 "$d" \
    "but the budget RINGTRAIN_TEST_MEMORY_BUDGET gives rank 1 is 4 KiB" "or make the model smaller" \
    "$job" $(data "$work/tiny/train") $(fresh "$d") "${small_model[@]}" --set "dist.reducer=\"$reducer\""
  # Each rank prints its own label beside rank 1's message, so both name the rank that met it.
  if wanted budget_on_one_rank_$reducer; then
    n=$(grep -cF "(found by rank 1/2 on " "$work/budget_on_one_rank_$reducer.log")
    n_failed=$(grep -cF "; 1 of 2 ranks failed: 1)" "$work/budget_on_one_rank_$reducer.log")
    if [ "$n" -eq 2 ] && [ "$n_failed" -eq 2 ]; then
      echo "ok   budget_on_one_rank_$reducer names rank 1 on both ranks"; passed=$((passed + 1))
    else
      echo "FAIL budget_on_one_rank_$reducer: 'found by rank 1/2' seen $n times, '1 of 2 ranks failed' $n_failed, want 2"
      failures=$((failures + 1))
    fi
  fi
done

echo "$passed passed, $failures failed, $skipped skipped"
[ "$failures" -eq 0 ] || exit 1
[ "$skipped" -eq 0 ] || exit 77
[ "$passed" -gt 0 ]

#!/usr/bin/env bash
# Outputs that cannot be written, as a hostile but fair user meets them: a full file system (a tmpfs of a few MiB,
# filled to a range of levels) under a checkpoint, a prepared split, an ONNX file and evaluate's JSON, and a stdout
# that takes nothing (/dev/full). Each case: the documented exit code with the message and its remedy, no crash
# (HDF5 1.10 leaves a file it failed to flush registered over freed memory: io/h5_write_file.h), and nothing
# half-written left behind.
#   checkpoint  --resume whose next checkpoint meets a full disk at each of several free-space levels, the last
#               flush included: exit 5 "needs about N and its file system has M free", never a segfault; no .tmp;
#               or exit 0 with the last epoch's checkpoint written and valid (the copied epoch-1 one still being
#               there proves nothing); at least one level must meet the full disk
#   prepare     prepare synthetic on a full disk at several levels: exit 4 naming the split and the space, and
#               that split holds no shard; or exit 0 and both splits inspect valid; never exit 0 with damage
#   outputs     export and evaluate --out on a full disk: exit 3, neither the file nor its .tmp left
#   unwritable  keys, --version, inspect, predict, evaluate and prepare with stdout on /dev/full: exit 3
#               "the results cannot be written to stdout", not exit 0 and not an internal error; --onnx naming a
#               folder: exit 3 naming the flag; errors with stderr on /dev/full too: their own exit codes
# checkpoint, prepare and outputs mount a tmpfs (root with CAP_SYS_ADMIN); where that fails they are skipped, saying
# why, and the script exits 77 (CTest's skip) unless a case failed. unwritable needs no mount.
# Usage: full_disk.sh RINGTRAIN SOURCE_DIR SCRATCH_DIR [CASE...]
set -uo pipefail
bin=$1 src=$2 scratch=$3
shift 3
cases=${*:-checkpoint prepare outputs unwritable}
mkdir -p "$scratch"
work=$(mktemp -d "$scratch/full_disk.XXXXXX")
full=$work/fs
mounted=""
cleanup() { [ -n "$mounted" ] && umount "$mounted" 2>/dev/null; [ -n "${KEEP_WORK:-}" ] || rm -rf "$work"; }
trap cleanup EXIT
failures=0 skipped=""
fail() { echo "FAIL $*"; failures=$((failures + 1)); }
ok() { echo "ok   $*"; }
crashed() { grep -qE 'Segmentation|Signal:|H5F__close_cb|core dumped|internal error|std::|HDF5-DIAG' "$1"; }
free_kib() { df -k --output=avail "$full" | tail -1; }
# fill_to KIB: leaves about KIB KiB free on the tmpfs
fill_to() { rm -f "$full/filler"; head -c "$(( $(free_kib) - $1 ))k" /dev/zero >"$full/filler" 2>/dev/null; }

job=$src/jobs/fashion_mnist.toml
"$bin" prepare synthetic --shape 1,8,8 --classes 3 --samples 64 --test-samples 16 --shards 2 --out "$work/tiny" \
  >/dev/null || { echo "prepare tiny failed"; exit 1; }
# A checkpoint of about 0.55 MiB: a disk a few hundred KiB short meets it at any stage of the write.
tiny=(--set data.train="$work/tiny/train" --set data.test="$work/tiny/test" --set train.batch_per_rank=4
      --set 'model.layers=[{type="flatten"},{type="dense",units=1024},{type="relu"},{type="dense",units=3}]'
      --set run.progress_every_s=1000 --set run.tensorboard=false)
"$bin" train "$job" "${tiny[@]}" --set run.dir="$work/run" --set train.epochs=1 >"$work/train.log" 2>&1 ||
  { echo "training failed: $(tail -3 "$work/train.log")"; exit 1; }
ckpts=("$work/run/checkpoints"/ckpt-s*.h5)
ckpt=${ckpts[-1]}

mkdir -p "$full"
on_tmpfs=$(for c in checkpoint prepare outputs; do [[ " $cases " == *" $c "* ]] && echo -n "$c "; done)
if [ -n "$on_tmpfs" ]; then
  if mount -t tmpfs -o size=4m tmpfs "$full" 2>"$work/mount.log"; then
    mounted=$full
  else
    skipped="$on_tmpfs"
    echo "skip ${on_tmpfs% }: cannot mount a tmpfs here ($(head -1 "$work/mount.log")); needs root with CAP_SYS_ADMIN"
    for c in $on_tmpfs; do cases=${cases//$c/}; done
  fi
fi

if [[ " $cases " == *" checkpoint "* ]]; then
  bad=0 levels="" full_levels=0
  epochs=3
  for kib in 40 250 480 540 560 580 600; do
    rm -rf "$full"/*
    cp -r "$work/run" "$full/r"
    fill_to "$kib"
    timeout 120 mpirun -np 2 --oversubscribe "$bin" train "$job" "${tiny[@]}" --set run.dir="$full/r" \
      --set train.epochs="$epochs" --resume </dev/null >"$work/ckpt-$kib.log" 2>&1
    rc=$?
    left=$(ls "$full/r/checkpoints" | grep -c '\.tmp$')
    # A run that lost its checkpoints and still exited 0 leaves the copied epoch-1 one, which inspects valid but
    # names epoch 2 as the next: only a valid checkpoint naming the epoch after the last is the run's own.
    last_epoch="" nexts=""
    for c in "$full/r/checkpoints"/ckpt-s*.h5; do
      [ -e "$c" ] || continue
      info=$("$bin" inspect "$c" 2>&1) || { nexts+="$(basename "$c") invalid; "; continue; }
      nexts+="$(basename "$c") $(grep -m1 -o 'next: epoch [0-9]* step [0-9]*' <<<"$info"); "
      grep -q "next: epoch $((epochs + 1)) step 1" <<<"$info" && last_epoch=$c
    done
    if [ "$rc" = 5 ] && grep -q "needs about .* and its file system has .* free" "$work/ckpt-$kib.log" &&
       ! crashed "$work/ckpt-$kib.log" && [ "$left" = 0 ]; then
      levels+="$kib "
      full_levels=$((full_levels + 1))
    elif [ "$rc" = 0 ] && ! crashed "$work/ckpt-$kib.log" && [ -n "$last_epoch" ]; then
      levels+="$kib(fits) "
    else
      bad=$((bad + 1))
      echo "    $kib KiB free: exit $rc, $left .tmp left, checkpoints [${nexts%; }]:" \
        "$(grep -hE 'exit|Segm|H5F' "$work/ckpt-$kib.log" | head -3 | cut -c1-200)"
    fi
  done
  if [ "$bad" != 0 ]; then fail "checkpoint: $bad free-space level(s) misbehaved"
  elif [ "$full_levels" = 0 ]; then fail "checkpoint: every free-space level fit (KiB free: $levels): none met the full disk"
  else ok "checkpoint: a full disk at every stage of the write is exit 5 with the space it needs, no crash, no .tmp; a run that fit wrote epoch $epochs's checkpoint (KiB free: $levels)"; fi
fi

if [[ " $cases " == *" prepare "* ]]; then
  bad=0 levels=""
  for kib in 100 700 1000 1120 1140 1145 1160 1300; do
    rm -rf "$full"/*
    fill_to "$kib"
    timeout 60 "$bin" prepare synthetic --shape 1,32,32 --classes 3 --samples 1000 --test-samples 100 --shards 2 \
      --out "$full/d" </dev/null >"$work/prep-$kib.log" 2>&1
    rc=$?
    tmps=$(find "$full/d" -name '*.tmp' 2>/dev/null | wc -l)
    # Refused up front (the split's size against the free space) or when a shard's reservation fails.
    if [ "$rc" = 4 ] && grep -qE "cannot write split '$full/d/t[a-z]*'.*(needs about|take).*free" "$work/prep-$kib.log" &&
       ! crashed "$work/prep-$kib.log" && [ "$tmps" = 0 ]; then
      failed_split=$(grep -o "cannot write split '[^']*'" "$work/prep-$kib.log" | head -1 | cut -d"'" -f2)
      if ls "$failed_split"/shard-* >/dev/null 2>&1; then
        bad=$((bad + 1)); echo "    $kib KiB free: exit 4 but '$failed_split' still holds shards"
      else levels+="$kib "; fi
    elif [ "$rc" = 0 ] && "$bin" inspect "$full/d/train" >/dev/null 2>&1 && "$bin" inspect "$full/d/test" >/dev/null 2>&1; then
      levels+="$kib(fits) "
    else
      bad=$((bad + 1))
      echo "    $kib KiB free: exit $rc, $tmps .tmp left: $(grep -hE 'exit|wrote|Segm|split' "$work/prep-$kib.log" | head -3 | cut -c1-200)"
    fi
  done
  if [ "$bad" = 0 ]; then ok "prepare: a full disk is exit 4 naming the split, which holds no shard; exit 0 only with valid splits (KiB free: $levels)"
  else fail "prepare: $bad free-space level(s) misbehaved"; fi
fi

if [[ " $cases " == *" outputs "* ]]; then
  rm -rf "$full"/*
  fill_to 4
  "$bin" export --checkpoint "$ckpt" --onnx "$full/m.onnx" --data "$work/tiny/train" >"$work/export.log" 2>&1
  rc=$?
  if [ "$rc" = 3 ] && grep -q -- "--onnx '$full/m.onnx' cannot be written: No space left on device" "$work/export.log" &&
     [ -z "$(ls "$full" | grep m.onnx)" ]; then ok "outputs: export on a full disk: exit 3, no m.onnx or m.onnx.tmp left"
  else fail "outputs: export on a full disk: exit $rc, left [$(ls "$full" | grep m.onnx | tr '\n' ' ')]: $(tail -2 "$work/export.log")"; fi
  fill_to 0
  "$bin" evaluate "$job" "${tiny[@]}" --set run.dir="$work/run" --out "$full/r.json" >"$work/evaluate.log" 2>&1
  rc=$?
  if [ "$rc" = 3 ] && grep -q -- "--out '$full/r.json' cannot be written: No space left on device" "$work/evaluate.log" &&
     [ -z "$(ls "$full" | grep r.json)" ]; then ok "outputs: evaluate --out on a full disk: exit 3, no r.json or r.json.tmp left"
  else fail "outputs: evaluate --out on a full disk: exit $rc, left [$(ls "$full" | grep r.json | tr '\n' ' ')]: $(tail -2 "$work/evaluate.log")"; fi
fi

if [[ " $cases " == *" unwritable "* ]]; then
  mkdir -p "$work/adir"
  "$bin" export --checkpoint "$ckpt" --onnx "$work/adir" --data "$work/tiny/train" >"$work/onnxdir.log" 2>&1
  rc=$?
  if [ "$rc" = 3 ] && grep -q -- "--onnx '$work/adir' cannot be written: it is a folder; pick a writable path with --onnx" "$work/onnxdir.log"; then
    ok "unwritable: --onnx naming a folder: exit 3 naming the flag"
  else fail "unwritable: --onnx naming a folder: exit $rc: $(tail -2 "$work/onnxdir.log")"; fi

  bad=""
  stdout_case() {  # NAME COMMAND...: exit 3 and the stdout message
    local name=$1
    shift
    "$@" >/dev/full 2>"$work/stdout-$name.log" </dev/null
    local rc=$?
    if [ "$rc" != 3 ] || ! grep -q "the results cannot be written to stdout: No space left on device" "$work/stdout-$name.log" ||
       crashed "$work/stdout-$name.log"; then
      bad+="$name(exit $rc) "
      sed 's/^/  | /' "$work/stdout-$name.log" | head -4
    fi
  }
  stdout_case keys "$bin" keys
  stdout_case version "$bin" --version
  stdout_case inspect_checkpoint "$bin" inspect "$ckpt"
  stdout_case inspect_split "$bin" inspect "$work/tiny/train"
  stdout_case predict "$bin" predict --checkpoint "$ckpt" "$work/tiny/test"
  stdout_case evaluate "$bin" evaluate "$job" "${tiny[@]}" --set run.dir="$work/run"
  stdout_case prepare "$bin" prepare synthetic --shape 1,8,8 --classes 3 --samples 16 --shards 1 --out "$work/p"
  if [ -z "$bad" ]; then ok "unwritable: keys, --version, inspect, predict, evaluate, prepare on /dev/full: exit 3 naming stdout"
  else fail "unwritable: stdout on /dev/full: $bad"; fi

  # stderr on /dev/full too (a job's one output file on a full disk): the report of the error cannot be written
  # either, and the exit code must still be the error's, not a crash over the report.
  bad=""
  both_full() {  # NAME EXIT_CODE COMMAND...
    local name=$1 want=$2
    shift 2
    "$@" >/dev/full 2>&1 </dev/null
    local rc=$?
    [ "$rc" = "$want" ] || bad+="$name(exit $rc, want $want) "
  }
  both_full predict 3 "$bin" predict --checkpoint "$ckpt" "$work/tiny/test"
  both_full train_missing_job 3 "$bin" train "$work/no-such-job.toml"
  both_full export_missing_checkpoint 5 "$bin" export --checkpoint "$work/no-such.h5" --onnx "$work/none.onnx"
  if [ -z "$bad" ]; then ok "unwritable: stdout and stderr on /dev/full: predict 3, a missing job 3, a missing checkpoint 5"
  else fail "unwritable: stdout and stderr on /dev/full: $bad"; fi
fi

echo "$failures failed${skipped:+, skipped: ${skipped% }}"
[ "$failures" -eq 0 ] || exit 1
[ -z "$skipped" ] || exit 77

#!/usr/bin/env bash
# Faults a user meets when using a trained model (evaluate, export) and the job-file wording around it, on one
# rank. Each case: the documented exit code, the message naming the file or key with the system's reason and the
# fix, and nothing half-written left behind:
#   export_other_classes  export --data of another class count: exit 3, as evaluate says it; no ONNX file
#   export_other_shape    export --data of another sample shape: exit 5 "belongs to another model"; no ONNX file
#   *_other_shape_pooled  evaluate and export of a model ending in global pooling on another sample shape: taken,
#                         with a note naming both shapes
#   out_under_file        evaluate --out and export --onnx under a regular file: exit 3 with "Not a directory"
#   evaluate_no_ckpt      evaluate on a run.dir without checkpoints: worded for evaluate, not for --resume
#   layer_range           units/filters/pool size beyond 2^20: the allowed range, not ">= 1"
#   checkpoint_every_0    run.checkpoint_every = 0 still writes the final checkpoint, as `ringtrain keys` says
# Usage: using_a_model.sh RINGTRAIN SOURCE_DIR
set -uo pipefail
bin=$1 src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0 passed=0
job=$src/jobs/fashion_mnist.toml

. "$(dirname "$0")/command_checks.sh"

"$bin" prepare synthetic --shape 1,8,8 --classes 3 --samples 64 --test-samples 16 --shards 2 --out "$work/tiny" >/dev/null &&
  "$bin" prepare synthetic --shape 1,8,8 --classes 10 --samples 64 --test-samples 16 --shards 1 --out "$work/ten" >/dev/null &&
  "$bin" prepare synthetic --shape 1,9,9 --classes 3 --samples 64 --test-samples 16 --shards 1 --out "$work/nine" >/dev/null ||
  { echo "prepare failed"; exit 1; }
tiny=(--set data.train="$work/tiny/train" --set data.test="$work/tiny/test" --set train.batch_per_rank=4
      --set 'model.layers=[{type="flatten"},{type="dense",units=8},{type="relu"},{type="dense",units=3}]'
      --set run.progress_every_s=1000 --set train.epochs=2)
"$bin" train "$job" "${tiny[@]}" --set run.dir="$work/run" --set run.checkpoint_every=0 >"$work/train.log" 2>&1 ||
  { echo "training failed: $(tail -3 "$work/train.log")"; exit 1; }
ckpts=("$work/run/checkpoints"/ckpt-s*.h5)
ckpt=${ckpts[-1]}

check export_other_classes 3 "the model ends in 3 values per sample" "but the dataset has 10 classes" -- \
  "$bin" export --checkpoint "$ckpt" --onnx "$work/ten.onnx" --data "$work/ten/train"
absent export_other_classes "$work/ten.onnx"
check export_other_shape 5 "checkpoint '$ckpt' belongs to another model" "the data (sample shape, classes) it was trained with" -- \
  "$bin" export --checkpoint "$ckpt" --onnx "$work/nine.onnx" --data "$work/nine/train"
absent export_other_shape "$work/nine.onnx"
# A model ending in global pooling runs at any sample size: another shape is taken, and said.
pooled=(--set data.train="$work/tiny/train" --set data.test="$work/tiny/test" --set train.batch_per_rank=4
        --set 'model.layers=[{type="conv2d",filters=4,kernel=3,padding=1},{type="relu"},{type="global_avgpool"},{type="flatten"},{type="dense",units=3}]'
        --set run.progress_every_s=1000 --set train.epochs=1 --set run.dir="$work/pooled")
"$bin" train "$job" "${pooled[@]}" >"$work/pooled.log" 2>&1 || { echo "FAIL pooled training: $(tail -3 "$work/pooled.log")"; failures=$((failures + 1)); }
pooled_ckpts=("$work/pooled/checkpoints"/ckpt-s*.h5)
said="holds a model made for 1x8x8 samples; this data's are 1x9x9, and the model runs at that size"
check evaluate_other_shape_pooled 0 "$said" -- "$bin" evaluate "$job" "${pooled[@]}" --data "$work/nine/test"
check export_other_shape_pooled 0 "$said" -- \
  "$bin" export --checkpoint "${pooled_ckpts[-1]}" --onnx "$work/pooled9.onnx" --data "$work/nine/train"

echo "a file, not a folder" >"$work/afile"
check out_under_file 3 "--out '$work/afile/x.json' cannot be written: Not a directory" "pick a writable path" -- \
  "$bin" evaluate "$job" "${tiny[@]}" --set run.dir="$work/run" --out "$work/afile/x.json"
check onnx_under_file 3 "--onnx '$work/afile/m.onnx' cannot be written: Not a directory" "pick a writable path" -- \
  "$bin" export --checkpoint "$ckpt" --onnx "$work/afile/m.onnx"

mkdir -p "$work/empty"
check evaluate_no_ckpt 5 "no checkpoint to evaluate in '$work/empty/checkpoints'" "or name a checkpoint file with --checkpoint" -- \
  "$bin" evaluate "$job" "${tiny[@]}" --set run.dir="$work/empty"
grep -qF -- "--resume" "$work/evaluate_no_ckpt.log" && { echo "FAIL evaluate_no_ckpt: speaks of --resume"; failures=$((failures + 1)); }

for layer in 'type="dense",units=4000000000|units|4000000000' 'type="conv2d",filters=2000000000,kernel=3|filters|2000000000' \
             'type="maxpool",size=1000000000|size|1000000000'; do
  spec=${layer%%|*} rest=${layer#*|}
  key=${rest%%|*} value=${rest#*|}
  check "layer_range_$key" 3 "'model.layers[1].$key' must be in [1, 1048576], got $value" -- \
    "$bin" train "$job" "${tiny[@]}" --set run.dir="$work/range" --set "model.layers=[{type=\"flatten\"},{$spec},{type=\"dense\",units=3}]"
done

n=$(ls "$work/run/checkpoints" | grep -c '^ckpt-s[0-9]*\.h5$')
if [ "$n" = 1 ] && "$bin" keys | grep -F "run.checkpoint_every" | grep -qF "the run still writes one when it ends"; then
  echo "ok   checkpoint_every_0: one checkpoint (the final one) after 2 epochs, and \`ringtrain keys\` says so"
  passed=$((passed + 1))
else
  echo "FAIL checkpoint_every_0: $n checkpoints; keys says: $("$bin" keys | grep -F run.checkpoint_every)"
  failures=$((failures + 1))
fi

echo "$passed passed, $failures failed"
[ "$failures" -eq 0 ] && [ "$passed" -gt 0 ]

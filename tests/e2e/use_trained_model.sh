#!/usr/bin/env bash
# Train -> evaluate -> predict -> export, as a user runs them. `evaluate` on the ranks that trained must give the
# run's last test_loss and test_acc exactly (and with --weights ema its ema_test_loss and ema_test_acc), and on another rank count within rounding,
# also with its last batch padded to the full batch (gpu.full_eval_batches); the exported ONNX file
# must pass ONNX's checker and give `predict`'s logits in onnxruntime within 1e-4 on the whole Fashion-MNIST test
# split (10,000 samples), for the Fashion-MNIST model and a residual model of every layer kind, and both exports,
# imported back, predict as their checkpoints do; another model's checkpoint, a damaged one and data of the wrong shape are clear errors;
# a model trained with synchronised batch norm in groups of 2 evaluates and predicts on one rank; a checkpoint from
# inside an epoch (each rank's own batch-norm statistics) evaluates alike on 2 ranks and 1.
# Usage: use_trained_model.sh RINGTRAIN SOURCE_DIR DATA_DIR
set -euo pipefail
bin=$1 src=$2 data=$3
source "$src/tests/support/fashion_mnist_data.sh"
prepare_fashion_mnist "$bin" "$data"
onnx_python=$src/.venv-onnx/bin/python3
[ -x "$onnx_python" ] || { echo "FAIL: $onnx_python is missing: run scripts/install_deps.sh"; exit 1; }
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
fm=(--set data.train="$data/fmnist/train" --set data.test="$data/fmnist/test")
fail() { echo "FAIL: $*"; exit 1; }

# ---- train the Fashion-MNIST model briefly on 2 ranks, then evaluate its last checkpoint
mpirun -np 2 --oversubscribe "$bin" train "$src/jobs/fashion_mnist.toml" "${fm[@]}" --set run.dir="$work/fm" \
  --set train.epochs=2 --set train.max_steps_per_epoch=20 --set run.progress_every_s=60 \
  --set train.ema_decay=0.9 --set run.checkpoint_every_steps=7 --set run.keep_checkpoints=3 >"$work/train.log"
mpirun -np 2 --oversubscribe "$bin" evaluate "$src/jobs/fashion_mnist.toml" "${fm[@]}" --set run.dir="$work/fm" \
  --out "$work/eval2.json" | tee "$work/eval2.log"
"$bin" evaluate "$src/jobs/fashion_mnist.toml" "${fm[@]}" --set run.dir="$work/fm" --out "$work/eval1.json" >/dev/null
"$bin" evaluate "$src/jobs/fashion_mnist.toml" "${fm[@]}" --set run.dir="$work/fm" --set gpu.full_eval_batches=true \
  --out "$work/eval1_padded.json" >/dev/null
mpirun -np 2 --oversubscribe "$bin" evaluate "$src/jobs/fashion_mnist.toml" "${fm[@]}" --set run.dir="$work/fm" \
  --weights ema --out "$work/eval_ema.json" >/dev/null
python3 - "$work" <<'PY'
import json, sys
work = sys.argv[1]
last = [json.loads(l) for l in open(f"{work}/fm/metrics.jsonl") if '"kind":"epoch"' in l][-1]
two, one = json.load(open(f"{work}/eval2.json")), json.load(open(f"{work}/eval1.json"))
ema = json.load(open(f"{work}/eval_ema.json"))
assert ema["loss"] == last["ema_test_loss"] and ema["accuracy"] == last["ema_test_acc"], (ema["loss"], last)
assert ema["loss"] != two["loss"], "the weights' average evaluated as the parameters"
print(f"ok   evaluate --weights ema: loss {ema['loss']!r} = the run's last ema_test_loss")
assert two["loss"] == last["test_loss"] and two["accuracy"] == last["test_acc"], (two["loss"], two["accuracy"], last)
assert abs(one["loss"] - last["test_loss"]) < 1e-9 and abs(one["accuracy"] - last["test_acc"]) <= 1e-3, (one, last)
padded = json.load(open(f"{work}/eval1_padded.json"))
assert padded["samples"] == 10000 and padded["confusion_matrix"] == one["confusion_matrix"], padded["samples"]
assert abs(padded["loss"] - one["loss"]) <= 1e-6 * abs(one["loss"]), (padded["loss"], one["loss"])
print(f"ok   evaluate with its last batch padded to the full batch (gpu.full_eval_batches): loss {padded['loss']!r}, "
      f"the same confusion matrix")
assert two["samples"] == 10000 and len(two["confusion_matrix"]) == 10 and len(two["per_class"]) == 10, two.keys()
assert sum(map(sum, two["confusion_matrix"])) == 10000
assert two["accuracy"] <= two["top5_accuracy"] <= 1
print(f"ok   evaluate: loss {two['loss']!r} accuracy {two['accuracy']} on 2 ranks = the run's last epoch; "
      f"1 rank: loss {one['loss']!r}")
PY
grep -q "^confusion matrix" "$work/eval2.log" || fail "evaluate printed no confusion matrix"

# ---- a checkpoint from inside an epoch holds each training rank's own batch-norm statistics: evaluate takes their
# mean on any number of ranks, the ranks that trained included
mid=$work/fm/checkpoints/ckpt-s000000035.h5
[ -f "$mid" ] || fail "no mid-epoch checkpoint $mid: $(ls "$work/fm/checkpoints")"
mpirun -np 2 --oversubscribe "$bin" evaluate "$src/jobs/fashion_mnist.toml" "${fm[@]}" --set run.dir="$work/fm" \
  --checkpoint "$mid" --out "$work/mid2.json" >/dev/null
"$bin" evaluate "$src/jobs/fashion_mnist.toml" "${fm[@]}" --set run.dir="$work/fm" --checkpoint "$mid" \
  --out "$work/mid1.json" >/dev/null
python3 - "$work" <<'PY'
import json, sys
two, one = (json.load(open(f"{sys.argv[1]}/mid{n}.json")) for n in (2, 1))
assert abs(two["loss"] - one["loss"]) <= 1e-6 * abs(one["loss"]), (two["loss"], one["loss"])
assert two["confusion_matrix"] == one["confusion_matrix"], "the ranks evaluated another model than one rank did"
print(f"ok   a mid-epoch checkpoint evaluates alike on 2 ranks and 1: loss {two['loss']!r} and {one['loss']!r}")
PY
/usr/bin/python3 "$src/scripts/plot_confusion.py" "$work/eval2.json" "$work/confusion.png"
[ -s "$work/confusion.png" ] || fail "plot_confusion.py drew no PNG"

# ---- predict and export; onnxruntime must agree with predict
check_export() {  # CHECKPOINT NAME
  "$bin" predict --checkpoint "$1" --logits --top 3 "$data/fmnist/test" >"$work/$2.jsonl"
  "$bin" export --checkpoint "$1" --onnx "$work/$2.onnx"
  "$onnx_python" "$src/tests/e2e/check_onnx.py" "$work/$2.onnx" "$data/fmnist/test" "$work/$2.jsonl" --samples 10000
}
fm_ckpt=$(ls "$work"/fm/checkpoints/ckpt-s*.h5 | tail -1)
check_export "$fm_ckpt" fm
"$bin" train "$src/tests/e2e/residual_model.toml" "${fm[@]}" --set run.dir="$work/res" >"$work/res.log"
res_ckpt=$(ls "$work"/res/checkpoints/ckpt-s*.h5 | tail -1)
check_export "$res_ckpt" residual

# ---- clear errors: another model's checkpoint, a damaged checkpoint, data of another shape
expect() {  # EXIT_CODE TEXT COMMAND...
  local code=$1 text=$2; shift 2
  set +e; "$@" >"$work/out" 2>&1; local rc=$?; set -e
  [ "$rc" = "$code" ] && grep -qF -- "$text" "$work/out" || { cat "$work/out"; fail "wanted exit $code and '$text' from: $*"; }
  echo "ok   exit $rc: $(grep -F -- "$text" "$work/out" | head -1 | cut -c1-150)"
}
expect 5 "belongs to another model" "$bin" evaluate "$src/jobs/fashion_mnist.toml" "${fm[@]}" \
  --set run.dir="$work/fm" --checkpoint "$res_ckpt"
head -c 4096 "$fm_ckpt" >"$work/damaged.h5"
expect 5 "cannot be used" "$bin" export --checkpoint "$work/damaged.h5" --onnx "$work/x.onnx"
"$bin" prepare synthetic --shape 3,8,8 --classes 10 --samples 64 --shards 1 --out "$work/rgb" >/dev/null
expect 5 "belongs to another model" "$bin" predict --checkpoint "$fm_ckpt" "$work/rgb/test"
[ ! -e "$work/x.onnx" ] || fail "a failed export left $work/x.onnx"

# ---- ringtrain's own export imports back: the same predictions, byte for byte (the normalisation from its graph, the
# class names from its metadata); --mean beside a graph that normalises its input itself is refused
"$bin" import --onnx "$work/fm.onnx" --out "$work/reimport/fm.toml" --checkpoint "$work/reimport/fm.h5" >/dev/null
"$bin" predict --checkpoint "$work/reimport/fm.h5" --logits --top 3 "$data/fmnist/test" >"$work/reimport.jsonl"
cmp -s "$work/fm.jsonl" "$work/reimport.jsonl" || fail "the re-imported export predicts otherwise than its checkpoint"
echo "ok   export, then import: the same predictions on the $(wc -l <"$work/reimport.jsonl") test samples"
"$bin" import --onnx "$work/residual.onnx" --out "$work/reimport/res.toml" --checkpoint "$work/reimport/res.h5" >/dev/null
"$bin" predict --checkpoint "$work/reimport/res.h5" --logits --top 3 "$data/fmnist/test" >"$work/reimport-res.jsonl"
cmp -s "$work/residual.jsonl" "$work/reimport-res.jsonl" ||
  fail "the residual model's export, imported, predicts otherwise than its checkpoint"
echo "ok   export, then import, of the residual model (every layer kind export writes): the same predictions"
expect 2 "normalises its input itself" "$bin" import --onnx "$work/fm.onnx" --out "$work/reimport2/fm.toml" \
  --checkpoint "$work/reimport2/fm.h5" --mean 0.5
"$onnx_python" - "$work/fm.onnx" "$work/fm-names.onnx" "$work/fm-line-break.onnx" <<'PY'
import onnx, sys
m = onnx.load(sys.argv[1])
for entry in m.metadata_props:
    if entry.key == "class_names":
        entry.value = '["a\\nb", "c"]'
onnx.save(m, sys.argv[2])
for entry in m.metadata_props:
    if entry.key == "class_names":
        entry.value = '["a\\nb"' + ''.join(f', "c{i}"' for i in range(1, 10)) + ']'
onnx.save(m, sys.argv[3])
PY
"$bin" import --onnx "$work/fm-names.onnx" --out "$work/reimport3/fm.toml" --checkpoint "$work/reimport3/fm.h5" \
  >/dev/null 2>"$work/names.log"
grep -qF "are not used (it names 2 classes, the model has 10)" "$work/names.log" ||
  { cat "$work/names.log"; fail "metadata class names of another count were not set aside with a note"; }
"$bin" import --onnx "$work/fm-line-break.onnx" --out "$work/reimport4/fm.toml" \
  --checkpoint "$work/reimport4/fm.h5" >/dev/null 2>"$work/names2.log"
grep -qF 'are not used ("a\nb" holds a line break)' "$work/names2.log" ||
  { cat "$work/names2.log"; fail "metadata class names with a line break were not set aside with a note"; }
echo "ok   metadata class names that cannot name the classes (another count, a line break): set aside with a note"

# ---- a model trained with synchronised batch norm in groups of 2 evaluates (with its job's keys) and predicts on
# one rank: the training-only keys do not hold a rank count or precision against the commands that run a model
sync=(--set dist.sync_batchnorm_group=2 --set run.dir="$work/sync")
mpirun -np 2 --oversubscribe "$bin" train "$src/jobs/fashion_mnist.toml" "${fm[@]}" "${sync[@]}" --set train.epochs=1 \
  --set train.max_steps_per_epoch=3 --set run.progress_every_s=60 >"$work/sync.log"
"$bin" evaluate "$src/jobs/fashion_mnist.toml" "${fm[@]}" "${sync[@]}" >"$work/sync-eval.log" 2>&1 ||
  { cat "$work/sync-eval.log"; fail "evaluate on one rank of a model trained with dist.sync_batchnorm_group = 2"; }
sync_ckpt=$(ls "$work"/sync/checkpoints/ckpt-s*.h5 | tail -1)
"$bin" predict --checkpoint "$sync_ckpt" --top 1 --precision bf16 "$data/fmnist/test" >"$work/sync.jsonl" 2>"$work/sync-predict.log" ||
  { cat "$work/sync-predict.log"; fail "predict of a model trained with dist.sync_batchnorm_group = 2"; }
[ "$(wc -l <"$work/sync.jsonl")" = 10000 ] || fail "predict of the synchronised model gave $(wc -l <"$work/sync.jsonl") lines"
echo "ok   a model trained with synchronised batch norm in groups of 2 evaluates and predicts on one rank"
echo "PASS"

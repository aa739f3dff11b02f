#!/usr/bin/env bash
# `ringtrain import` of torchvision classifiers with random weights, exported by torch.onnx: predict on PNG images
# gives onnxruntime's logits of the original model within 1e-4 (and the class names given to import), and so does the
# ONNX file `ringtrain export` writes of the imported checkpoint; evaluate takes the first model on a split of the
# images, and refuses (exit 4) the job's own split, which holds no samples. Then a model with an operator import does
# not map is refused with exit 3 naming the node, and a truncated ONNX file with exit 4 naming the file, each leaving
# no job file, checkpoint or data behind. The first model also predicts with --precision bf16 within 5e-2 of the
# largest logit, and --precision bf17 is refused with exit 2; with import --eval-resize predict crops images as
# torchvision's evaluation transform does.
# Usage: import_onnx.sh RINGTRAIN SOURCE_DIR MODEL:FORM... (FORM: fused | preserve | static, see
# torch_onnx_models.py)
set -euo pipefail
bin=$1 src=$2
shift 2
onnx_python=$src/.venv-onnx/bin/python3
[ -x "$onnx_python" ] || { echo "FAIL: $onnx_python is missing: run scripts/install_deps.sh"; exit 1; }
/usr/bin/python3 -c "import torch, torchvision" 2>/dev/null || { echo "SKIP: /usr/bin/python3 has no torch"; exit 77; }
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

/usr/bin/python3 "$src/tests/e2e/torch_onnx_models.py" "$work" "$@" refused:fused
printf 'kind %s\n' 0 1 2 3 4 5 6 7 8 9 >"$work/names.txt"
for model in "$@"; do
  name=${model/:/-}
  "$bin" import --onnx "$work/$name.onnx" --out "$work/$name.toml" --checkpoint "$work/$name.h5" \
    --class-names "$work/names.txt"
  "$bin" predict --checkpoint "$work/$name.h5" --logits --top 1 "$work"/image*.png >"$work/$name.jsonl"
  named=$(grep -c '"top":\[{"class":\([0-9]\),"name":"kind \1"' "$work/$name.jsonl" || true)
  [ "$named" = 4 ] || fail "predict named the class of $named of 4 images as --class-names gave them"
  "$bin" export --checkpoint "$work/$name.h5" --onnx "$work/$name-exported.onnx" >/dev/null
  "$onnx_python" "$src/tests/e2e/check_import.py" "$work/$name.onnx" "$work/images.npy" "$work/$name.jsonl" \
    "$work/$name-exported.onnx"
done

first=${1/:/-}
# The forward pass in bf16 (predict --precision, on the CPU twin's bf16 products here): onnxruntime's logits within
# bf16's bound; a precision that does not exist is refused naming the key.
"$bin" predict --checkpoint "$work/$first.h5" --precision bf16 --logits --top 1 "$work"/image*.png >"$work/$first-bf16.jsonl"
"$onnx_python" "$src/tests/e2e/check_import.py" "$work/$first.onnx" "$work/images.npy" "$work/$first-bf16.jsonl" \
  "$work/$first-exported.onnx" --tolerance 5e-2
set +e
"$bin" predict --checkpoint "$work/$first.h5" --precision bf17 "$work/image0.png" >"$work/bf17.log" 2>&1
rc=$?
set -e
[ "$rc" = 2 ] && grep -q -- "--precision: bf17 not in" "$work/bf17.log" || { cat "$work/bf17.log"; fail "predict --precision bf17: exit $rc"; }
# import --eval-resize: predict then crops each image's centre after resizing its shorter side (torchvision's
# evaluation transform). At the sample's own side that is each image as it is, the logits those without it; at twice
# the side it is the centre of an enlarged image, other logits.
side=$("$onnx_python" -c 'import numpy, sys; print(numpy.load(sys.argv[1]).shape[-1])' "$work/images.npy")
logits() { python3 -c 'import json, sys; print([json.loads(l)["logits"] for l in open(sys.argv[1])])' "$1"; }
for resize in "$side" $((2 * side)); do
  "$bin" import --onnx "$work/$first.onnx" --out "$work/resize$resize.toml" --checkpoint "$work/resize$resize.h5" \
    --eval-resize "$resize" >/dev/null
  grep -q "^eval_resize = $resize$" "$work/resize$resize.toml" || fail "import --eval-resize $resize: not in the job"
  "$bin" predict --checkpoint "$work/resize$resize.h5" --logits "$work"/image*.png >"$work/resize$resize.jsonl"
done
[ "$(logits "$work/resize$side.jsonl")" = "$(logits "$work/$first.jsonl")" ] ||
  fail "import --eval-resize $side: predict's logits are not those of the images as they are"
[ "$(logits "$work/resize$((2 * side)).jsonl")" != "$(logits "$work/$first.jsonl")" ] ||
  fail "import --eval-resize $((2 * side)): predict's logits are those of the uncropped images"

set +e
"$bin" evaluate "$work/$first.toml" --checkpoint "$work/$first.h5" >"$work/evaluate.log" 2>&1
rc=$?
set -e
[ "$rc" = 4 ] && grep -q "holds no samples" "$work/evaluate.log" || { cat "$work/evaluate.log"; fail "evaluate on the description split"; }
"$bin" prepare arrays --images "$work/images.npy" --labels "$work/labels.npy" --test-images "$work/images.npy" \
  --test-labels "$work/labels.npy" --classes 10 --shards 1 --out "$work/arrays" >/dev/null
"$bin" evaluate "$work/$first.toml" --checkpoint "$work/$first.h5" --data "$work/arrays/test" \
  --out "$work/evaluate.json" >/dev/null
python3 -c 'import json, sys; r = json.load(open(sys.argv[1])); assert r["samples"] == 4, r["samples"]' \
  "$work/evaluate.json" || fail "evaluate --data did not evaluate the 4 images"

set +e
"$bin" import --onnx "$work/refused-fused.onnx" --out "$work/refused.toml" --checkpoint "$work/refused.h5" \
  >"$work/refused.log" 2>&1
rc=$?
set -e
cat "$work/refused.log"
[ "$rc" = 3 ] || fail "import of a Softplus model exited $rc, not 3"
grep -q "ONNX node '/1/Softplus' (Softplus): no ringtrain layer maps the Softplus operator" "$work/refused.log" ||
  fail "the refusal does not name the Softplus node"
head -c 2000 "$work/$first.onnx" >"$work/broken.onnx"
set +e
"$bin" import --onnx "$work/broken.onnx" --out "$work/broken.toml" --checkpoint "$work/broken.h5" >"$work/broken.log" 2>&1
rc=$?
set -e
[ "$rc" = 4 ] && grep -q "broken.onnx' is not a readable ONNX model" "$work/broken.log" ||
  { cat "$work/broken.log"; fail "import of a truncated ONNX file: exit $rc"; }
for left in refused.toml refused.h5 refused-data broken.toml broken.h5 broken-data; do
  [ ! -e "$work/$left" ] || fail "a refused import left $left behind"
done
[ -z "$(ls "$work" | grep '\.tmp$')" ] || fail "a refused import left $(ls "$work" | grep '\.tmp$' | tr '\n' ' ')behind"
echo "PASS"

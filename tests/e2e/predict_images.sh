#!/usr/bin/env bash
# `predict` on image files against `predict` on shards: a small Fashion-MNIST model is trained briefly, test samples
# are written out as PNGs (a folder with a subfolder, single files, an RGB copy and a 2x upscaled copy, which the
# decode's channel conversion and the resize must bring back to the very same sample) and every image must get
# its shard sample's top-1 class and probabilities within 1e-5. A model whose job sets data.eval_resize, exported and
# imported back, crops image files as it did (the resize from the ONNX file's metadata). Then the faults: an undecodable image, a file that
# is no image, a folder with neither shards nor images, a missing path, a model whose 2-channel samples no image
# converts to, and training data that has moved (with --data as the way out).
# Uses Debian's python3-pil, python3-numpy and python3-h5py. Usage: predict_images.sh RINGTRAIN SOURCE_DIR DATA_DIR
set -euo pipefail
bin=$1 src=$2 data=$3
source "$src/tests/support/fashion_mnist_data.sh"
prepare_fashion_mnist "$bin" "$data"
py=/usr/bin/python3
"$py" -c "import h5py, numpy, PIL" 2>/dev/null || { echo "FAIL: $py cannot import h5py/numpy/PIL (scripts/install_deps.sh)"; exit 1; }
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# ---- a small CNN with batch norm, 40 steps: a model whose probabilities are not all alike
"$bin" train "$src/jobs/fashion_mnist.toml" --set data.train="$data/fmnist/train" --set data.test="$data/fmnist/test" \
  --set run.dir="$work/fm" --set train.epochs=1 --set train.max_steps_per_epoch=40 --set run.progress_every_s=60 \
  --set 'model.layers=[{type="conv2d",filters=8,kernel=5,padding=2,bias=false},{type="batchnorm"},{type="relu"},{type="maxpool",size=2},{type="flatten"},{type="dense",units=10}]' \
  >"$work/train.log"
ckpt=$(ls "$work"/fm/checkpoints/ckpt-s*.h5 | tail -1)

# ---- the first 40 test samples as images: png/ (30, ten of them in png/more/), single files, RGB, upscaled, JPEG
"$py" - "$data/fmnist/test" "$work" <<'PY'
import glob, os, sys
import h5py, numpy as np
from PIL import Image
split, work = sys.argv[1], sys.argv[2]
with h5py.File(sorted(glob.glob(f"{split}/shard-*.h5"))[0], "r") as f:
    images = f["images"][:40, 0]
os.makedirs(f"{work}/png/more")
for i in range(30):
    Image.fromarray(images[i], "L").save(f"{work}/png/{'more/' if i >= 20 else ''}{i:05d}.png")
for i in (30, 31):
    Image.fromarray(images[i], "L").save(f"{work}/{i:05d}.png")
Image.fromarray(np.stack([images[32]] * 3, axis=-1), "RGB").save(f"{work}/00032-rgb.png")
Image.fromarray(images[33].repeat(2, 0).repeat(2, 1), "L").save(f"{work}/00033-big.png")
Image.fromarray(images[34], "L").save(f"{work}/00034.jpg", quality=95)
PY

"$bin" predict --checkpoint "$ckpt" --top 10 "$data/fmnist/test" >"$work/shards.jsonl"
"$bin" predict --checkpoint "$ckpt" --top 10 "$work/png" "$work/00030.png" "$work/00031.png" "$work/00032-rgb.png" \
  "$work/00033-big.png" "$work/00034.jpg" >"$work/images.jsonl"
"$py" - "$work" <<'PY'
import json, os, sys
work = sys.argv[1]
shards = [json.loads(line) for _, line in zip(range(40), open(f"{work}/shards.jsonl"))]
images = [json.loads(line) for line in open(f"{work}/images.jsonl")]
assert len(images) == 35, f"{len(images)} lines for 35 images"
names = [os.path.relpath(line["input"], work) for line in images]
assert names[:30] == [f"png/{i:05d}.png" for i in range(20)] + [f"png/more/{i:05d}.png" for i in range(20, 30)], names[:30]
worst, same_top = 0.0, 0
for line, name in zip(images, names):
    i = int(os.path.basename(name)[:5])
    p = {t["class"]: t["p"] for t in line["top"]}
    q = {t["class"]: t["p"] for t in shards[i]["top"]}
    assert len(p) == 10 and set(p) == set(q), (name, p, q)
    if name.endswith(".jpg"):  # lossy: a prediction, not the sample's exact one
        continue
    assert line["top"][0] == {**shards[i]["top"][0], "p": line["top"][0]["p"]}, (name, line["top"][0], shards[i]["top"][0])
    worst = max(worst, max(abs(p[c] - q[c]) for c in p))
    same_top += 1
assert worst <= 1e-5, f"largest probability difference {worst:.3g} > 1e-5"
print(f"ok   {same_top} PNGs (a folder with a subfolder, single files, RGB, 2x upscaled) = their shard samples: same "
      f"top-1 class, largest probability difference {worst:.3g}; the JPEG predicted")
PY

# ---- a model whose job sets data.eval_resize crops image files (shorter side to 32, then the centre 28x28); its
# export, imported back, takes that resize from the file's metadata and crops them alike
"$bin" train "$src/jobs/fashion_mnist.toml" --set data.train="$data/fmnist/train" --set data.test="$data/fmnist/test" \
  --set run.dir="$work/crop" --set train.epochs=1 --set train.max_steps_per_epoch=10 --set run.progress_every_s=60 \
  --set data.eval_resize=32 \
  --set 'model.layers=[{type="conv2d",filters=8,kernel=5,padding=2},{type="relu"},{type="maxpool",size=2},{type="flatten"},{type="dense",units=10}]' \
  >"$work/crop-train.log"
crop_ckpt=$(ls "$work"/crop/checkpoints/ckpt-s*.h5 | tail -1)
"$bin" predict --checkpoint "$crop_ckpt" --logits "$work/png" >"$work/crop-trained.jsonl"
"$bin" export --checkpoint "$crop_ckpt" --onnx "$work/crop.onnx" >/dev/null
"$bin" import --onnx "$work/crop.onnx" --out "$work/crop-import/m.toml" --checkpoint "$work/crop-import/m.h5" >/dev/null
grep -qx "eval_resize = 32" "$work/crop-import/m.toml" || fail "import did not take the export's eval_resize 32"
"$bin" predict --checkpoint "$work/crop-import/m.h5" --logits "$work/png" >"$work/crop-imported.jsonl"
cmp -s "$work/crop-trained.jsonl" "$work/crop-imported.jsonl" ||
  fail "the imported export crops image files otherwise than the model exported"
"$bin" import --onnx "$work/crop.onnx" --out "$work/crop-import0/m.toml" --checkpoint "$work/crop-import0/m.h5" \
  --eval-resize 0 >/dev/null
"$bin" predict --checkpoint "$work/crop-import0/m.h5" --logits "$work/png" >"$work/crop-imported0.jsonl"
! cmp -s "$work/crop-trained.jsonl" "$work/crop-imported0.jsonl" || fail "--eval-resize 0 cropped as eval_resize 32 does"
echo "ok   data.eval_resize 32: the imported export predicts the 30 PNGs as the model exported (--eval-resize 0: otherwise)"

# ---- faults: each a clear error naming what is wrong, exit 4, nothing on stdout
expect() {  # EXIT_CODE TEXT COMMAND...
  local code=$1 text=$2; shift 2
  set +e; "$@" >"$work/out" 2>"$work/err"; local rc=$?; set -e
  [ "$rc" = "$code" ] && grep -qF -- "$text" "$work/err" || { cat "$work/out" "$work/err"; fail "wanted exit $code and '$text' from: $*"; }
  [ ! -s "$work/out" ] || { cat "$work/out"; fail "$* printed predictions before failing"; }
  echo "ok   exit $rc: $(grep -F -- "$text" "$work/err" | head -1 | cut -c1-160)"
}
head -c 200 "$work/00030.png" >"$work/cut.png"
expect 4 "cannot decode PNG '$work/cut.png'" "$bin" predict --checkpoint "$ckpt" "$work/cut.png"
echo "not an image" >"$work/notes.png"
expect 4 "'$work/notes.png' is neither a JPEG nor a PNG" "$bin" predict --checkpoint "$ckpt" "$work/notes.png"
mkdir "$work/empty"; touch "$work/empty/readme.txt"
expect 4 "folder '$work/empty' holds no shard-*.h5 files and no .jpg/.jpeg/.png images" \
  "$bin" predict --checkpoint "$ckpt" "$work/empty"
expect 4 "predict input '$work/nowhere' does not exist" "$bin" predict --checkpoint "$ckpt" "$work/nowhere"
"$bin" prepare synthetic --shape 2,28,28 --classes 3 --samples 64 --test-samples 16 --shards 1 --out "$work/two" >/dev/null
"$bin" train "$src/jobs/fashion_mnist.toml" --set data.train="$work/two/train" --set data.test="$work/two/test" \
  --set run.dir="$work/two-run" --set train.epochs=1 --set train.batch_per_rank=16 --set run.progress_every_s=60 \
  --set 'model.layers=[{type="flatten"},{type="dense",units=3}]' >/dev/null
expect 4 "the model takes 2-channel samples (its training data '$work/two/train'), but images convert only to 1 (gray), 3 (RGB) or 4 (RGBA)" \
  "$bin" predict --checkpoint "$(ls "$work"/two-run/checkpoints/ckpt-s*.h5 | tail -1)" "$work/00030.png"
# The data the model was trained on has moved: the error says so, and --data finds it.
"$bin" prepare synthetic --shape 1,28,28 --classes 10 --samples 64 --test-samples 16 --shards 1 --out "$work/moved" >/dev/null
"$bin" train "$src/jobs/fashion_mnist.toml" --set data.train="$work/moved/train" --set data.test="$work/moved/test" \
  --set run.dir="$work/moved-run" --set train.epochs=1 --set train.batch_per_rank=16 --set run.progress_every_s=60 \
  --set 'model.layers=[{type="flatten"},{type="dense",units=10}]' >/dev/null
moved_ckpt=$(ls "$work"/moved-run/checkpoints/ckpt-s*.h5 | tail -1)
mv "$work/moved" "$work/elsewhere"
expect 4 "point --data at a split of it" "$bin" predict --checkpoint "$moved_ckpt" "$work/00030.png"
[ "$("$bin" predict --checkpoint "$moved_ckpt" --data "$work/elsewhere/train" "$work/00030.png" | wc -l)" = 1 ] \
  || fail "predict --data did not find the moved training data"
echo "ok   --data names the training data when it has moved"
echo "PASS"

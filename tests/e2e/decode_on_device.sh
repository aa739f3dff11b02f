#!/usr/bin/env bash
# data.decode = gpu on the CPU twin (the backend decodes each photo whole and crops it; the loader threads only read
# bytes and choose crops) trains exactly as data.decode = cpu (the loader threads decode only each crop) where every
# crop needs the full DCT scale: two 2-rank runs on a JPEG split of photos under twice the sample's side, with
# random-resized crops, record identical losses, accuracies and parameter checksums in every epoch, and each run's
# header says where it decoded. pad_crop_flip, which augments a decoded sample, is refused with data.decode = gpu
# on every rank (exit 3) before any step.
# Usage: decode_on_device.sh RINGTRAIN SOURCE_DIR MPIEXEC
set -euo pipefail
bin=$1 src=$2 mpiexec=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
/usr/bin/python3 - <<'PY'
import math, os
from PIL import Image
for c in range(3):
    os.makedirs(f"photos/class{c}", exist_ok=True)
    for i in range(40):
        h, w = 30 + (i * 7) % 17, 32 + (i * 11) % 16  # under 48 = twice the sample side: full DCT scale
        img = Image.new("RGB", (w, h))
        img.putdata([(int(128 + 100 * math.sin((x + 9 * c) / (5.0 + c))), int(128 + 90 * math.cos(y / 6.0 + c)),
                      int(60 * c + (x * y) % 50)) for y in range(h) for x in range(w)])
        img.save(f"photos/class{c}/{i:03d}.jpg", quality=90)
PY
"$bin" prepare images --source photos --size 24 --store jpeg --shards 2 --test-fraction 0.25 --out data >prepare.log 2>&1 ||
  { echo "FAIL: prepare: $(tail -3 prepare.log)"; exit 1; }
records() {  # records RUN DECODE [SET...]
  local run=$1 decode=$2
  shift 2
  local sets=()
  for s in "$@"; do sets+=(--set "$s"); done
  "$mpiexec" -np 2 --oversubscribe "$bin" train "$src/jobs/fashion_mnist.toml" --set data.train=data/train \
    --set data.test=data/test --set train.batch_per_rank=6 --set train.epochs=2 --set run.dir="$run" \
    --set run.progress_every_s=1000 --set data.augment=resized_crop_flip --set data.loader_threads=2 \
    --set data.decode="$decode" --set data.eval_resize=26 \
    --set 'model.layers=[{type="conv2d",filters=4,kernel=3,padding=1},{type="batchnorm"},{type="relu"},{type="flatten"},{type="dense",units=3}]' \
    "${sets[@]}" >"$run.log" 2>&1 || { echo "FAIL: run $run: $(tail -5 "$run.log")"; exit 1; }
  /usr/bin/python3 -c "
import json, sys
for line in open(sys.argv[1] + '/metrics.jsonl'):
    d = json.loads(line)
    if d.get('kind') == 'epoch': print(d['epoch'], d['train_loss'], d['train_acc'], d['test_loss'], d['test_acc'], d['param_checksum'])" "$run"
}
a=$(records loader cpu); b=$(records device gpu)
grep -q "JPEGs decoded, cropped and normalised by the backend (data.decode = gpu)" device.log ||
  { echo "FAIL: the device run does not say where it decoded"; exit 1; }
if grep -q "data.decode = gpu" loader.log; then echo "FAIL: the loader run says it decoded on the device"; exit 1; fi
[[ $(wc -l <<<"$a") == 2 && $a == "$b" ]] || { echo "FAIL: the records differ:"; echo "$a"; echo "$b"; exit 1; }
echo "ok   decoding on the device records the same losses, accuracies and checksums as decoding in the loader:"
echo "$a"
set +e
"$mpiexec" -np 2 --oversubscribe "$bin" train "$src/jobs/fashion_mnist.toml" --set data.train=data/train \
  --set data.test=data/test --set train.epochs=1 --set run.dir=refused --set data.decode=gpu \
  --set data.augment=pad_crop_flip >refused.log 2>&1
code=$?
set -e
[[ $code == 3 ]] || { echo "FAIL: pad_crop_flip with data.decode = gpu exited $code, not 3: $(tail -3 refused.log)"; exit 1; }
[[ $(grep -c "data.augment = resized_crop_flip, or data.decode = cpu" refused.log) -ge 2 ]] ||
  { echo "FAIL: not every rank named the fix: $(cat refused.log)"; exit 1; }
echo "ok   pad_crop_flip with data.decode = gpu: exit 3 on every rank, naming the fix"

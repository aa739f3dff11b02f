#!/usr/bin/env bash
# data.mixup_alpha and data.cutmix_alpha end to end, 2 ranks on small synthetic splits:
#   - mixup and CutMix both on (with pad_crop_flip and label smoothing) train to the end with finite losses, and the
#     header says how training accuracy is counted;
#   - the records are the same with 1 or 3 loader threads (the mixes are keyed by sample, not by thread), and the same
#     whether the loader or the device normalises (the loader mixes uint8 pixels before either);
#   - they differ from the same run unmixed (the batches were mixed);
#   - a JPEG split decoded on the loader threads mixes too; decoded on the device (data.decode = gpu) it is refused
#     on every rank with exit 3, naming both keys and the fix, before any step (by input-bench too);
#   - input-bench on a split smaller than one batch exits 4 naming train.batch_per_rank, as training does.
# Usage: mixup_cutmix.sh RINGTRAIN SOURCE_DIR MPIEXEC
set -euo pipefail
bin=$1 src=$2 mpiexec=$3
source "$src/tests/support/synthetic_runs.sh"
fields="epoch train_loss train_acc test_loss test_acc param_checksum"
model='model.layers=[{type="flatten"},{type="dense",units=7},{type="relu"},{type="dense",units=5}]'
mixed() {  # mixed RUN [SET...]
  local run=$1
  shift
  synthetic_records "$run" "$fields" "$model" data.augment=pad_crop_flip train.label_smoothing=0.1 \
    data.mixup_alpha=0.4 data.cutmix_alpha=1.0 "$@"
}
a=$(mixed three data.loader_threads=3)
/usr/bin/python3 - "$a" <<'PY' || exit 1
import math, sys
rows = [line.split() for line in sys.argv[1].splitlines()]
assert len(rows) == 2, f"want 2 epoch records, got {rows}"
for r in rows:
    losses = [float(r[1]), float(r[3])]
    if not all(math.isfinite(x) and x > 0 for x in losses):
        sys.exit(f"FAIL: epoch {r[0]} losses {losses}")
print(f"ok   mixup + CutMix trained 2 epochs, finite losses (epoch 2: train {rows[1][1]}, test {rows[1][3]})")
PY
grep -q "^mixing: each training sample with its batch partner by mixup (alpha 0.4) or CutMix (alpha 1)" three.log ||
  { echo "FAIL: the header does not say how the batches are mixed: $(grep -m3 -E '^(data|mixing)' three.log)"; exit 1; }
grep -q "training accuracy counts a sample right when it predicts the label it holds most of" three.log ||
  { echo "FAIL: the header does not say how training accuracy is counted"; exit 1; }
echo "ok   the header says how the batches are mixed and how training accuracy is counted"
b=$(mixed one data.loader_threads=1)
[[ $a == "$b" ]] || { echo "FAIL: 3 and 1 loader threads differ:"; echo "$a"; echo "$b"; exit 1; }
echo "ok   3 and 1 loader threads record the same losses, accuracies and checksums"
c=$(mixed device data.loader_threads=2 data.normalize=device)
[[ $a == "$c" ]] || { echo "FAIL: normalising on the device differs:"; echo "$a"; echo "$c"; exit 1; }
echo "ok   mixed batches normalised on the device record the same as normalised by the loader"
d=$(mixed plain data.mixup_alpha=0 data.cutmix_alpha=0)
[[ $a != "$d" ]] || { echo "FAIL: mixing changed nothing"; exit 1; }
grep -q "^mixing:" plain.log && { echo "FAIL: the unmixed run says it mixes"; exit 1; }
echo "ok   the unmixed run records otherwise"

/usr/bin/python3 - <<'PY'
import os
from PIL import Image
for c in range(3):
    os.makedirs(f"photos/class{c}", exist_ok=True)
    for i in range(16):
        img = Image.new("RGB", (20 + i % 5, 18 + i % 7))
        img.putdata([((x * 9 + 80 * c) % 256, (y * 7 + i) % 256, (x * y + c) % 256)
                     for y in range(img.height) for x in range(img.width)])
        img.save(f"photos/class{c}/{i:03d}.jpg", quality=90)
PY
"$bin" prepare images --source photos --size 16 --store jpeg --shards 2 --test-fraction 0.25 --out jpegs >prepare.log 2>&1 ||
  { echo "FAIL: prepare: $(tail -3 prepare.log)"; exit 1; }
jpeg_run() {  # jpeg_run RUN DECODE: exit code
  local code=0
  "$mpiexec" -np 2 --oversubscribe "$bin" train "$src/jobs/fashion_mnist.toml" --set data.train=jpegs/train \
    --set data.test=jpegs/test --set train.batch_per_rank=6 --set train.epochs=1 --set run.dir="$1" \
    --set run.progress_every_s=1000 --set data.augment=resized_crop_flip --set data.decode="$2" \
    --set data.cutmix_alpha=1.0 --set 'model.layers=[{type="flatten"},{type="dense",units=3}]' >"$1.log" 2>&1 || code=$?
  echo "$code"
}
code=$(jpeg_run jpeg_cpu cpu)
[[ $code == 0 ]] && grep -q '"kind":"epoch"' jpeg_cpu/metrics.jsonl ||
  { echo "FAIL: CutMix on a JPEG split decoded by the loader: exit $code: $(tail -3 jpeg_cpu.log)"; exit 1; }
echo "ok   CutMix on a JPEG split decoded by the loader threads trains"
code=$(jpeg_run jpeg_gpu gpu)
[[ $code == 3 ]] || { echo "FAIL: mixing with data.decode = gpu exited $code, not 3: $(tail -3 jpeg_gpu.log)"; exit 1; }
fix="set data.decode = cpu (or auto), or data.mixup_alpha = 0 and data.cutmix_alpha = 0"
[[ $(grep -c "data.decode = gpu decodes the photos on the device, and data.mixup_alpha / data.cutmix_alpha" jpeg_gpu.log) -ge 2 &&
   $(grep -cF "$fix" jpeg_gpu.log) -ge 2 ]] || { echo "FAIL: not every rank named the keys and the fix: $(cat jpeg_gpu.log)"; exit 1; }
grep -q '"kind":"step"\|"kind":"epoch"' jpeg_gpu/metrics.jsonl 2>/dev/null && { echo "FAIL: the refused run stepped"; exit 1; }
echo "ok   mixing with data.decode = gpu: exit 3 on every rank, naming both keys and the fix"
code=0
"$bin" input-bench "$src/jobs/fashion_mnist.toml" --set data.train=jpegs/train --set data.test=jpegs/test \
  --set data.augment=resized_crop_flip --set data.decode=gpu --set data.mixup_alpha=0.2 --batches 2 --warmup 0 \
  >bench_gpu.log 2>&1 || code=$?
[[ $code == 3 ]] && grep -qF "$fix" bench_gpu.log ||
  { echo "FAIL: input-bench mixing with data.decode = gpu: exit $code, not 3 with the fix: $(tail -3 bench_gpu.log)"; exit 1; }
echo "ok   input-bench refuses mixing with data.decode = gpu alike"
code=0
"$bin" input-bench "$src/jobs/fashion_mnist.toml" --set data.train=jpegs/train --set data.test=jpegs/test \
  --set train.batch_per_rank=1000000 --batches 2 --warmup 0 >bench_small.log 2>&1 || code=$?
[[ $code == 4 ]] && grep -qF "lower train.batch_per_rank" bench_small.log ||
  { echo "FAIL: input-bench on a split smaller than one batch: exit $code, not 4 naming the key: $(tail -3 bench_small.log)"; exit 1; }
echo "ok   input-bench on a split smaller than one batch: exit 4, naming train.batch_per_rank"

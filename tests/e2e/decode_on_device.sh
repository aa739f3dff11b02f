#!/usr/bin/env bash
# data.decode = gpu on the CPU twin (the backend decodes each photo whole and crops it; the loader threads only read
# bytes and choose crops) trains exactly as data.decode = cpu (the loader threads decode only each crop) where every
# crop needs the full DCT scale: two 2-rank runs on a JPEG split of photos under twice the sample's side, with
# random-resized crops, record identical losses, accuracies and parameter checksums in every epoch, and each run's
# header says where it decoded; the device run's memory_needed_mb is the loader run's plus the decoded samples' four
# slots (two ahead for training, two for evaluation) of a batch of uint8 samples each. pad_crop_flip, which augments a decoded sample, is refused with data.decode = gpu
# on every rank (exit 3) before any step. A JPEG whose bytes pass their checksum but do not decode ends the run
# (exit 4) on both ranks, each naming its shard and sample, though training decodes it ahead on a thread of its own.
# Usage: decode_on_device.sh RINGTRAIN SOURCE_DIR MPIEXEC
set -euo pipefail
bin=$1 src=$2 mpiexec=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
tools=$src/tests/support/small_jpeg_split.py
/usr/bin/python3 "$tools" split "$bin"  # ./photos, and ./data: their JPEG split
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
/usr/bin/python3 - loader device <<'PY' || exit 1
import json, sys
def needed(run):
    records = [json.loads(line) for line in open(run + "/metrics.jsonl")]
    return [r["memory_needed_mb"] for r in records if r.get("kind") == "epoch"]
loader, device = needed(sys.argv[1]), needed(sys.argv[2])
slots = 4 * 6 * 3 * 24 * 24 / 2**20  # batch_per_rank 6 of 3 x 24 x 24 uint8 samples
for a, b in zip(loader, device):
    if abs(b - a - slots) > 1e-9:
        sys.exit(f"FAIL: memory_needed_mb {b} with the device decoding, {a} without: not {slots} MiB more")
print(f"ok   memory_needed_mb counts the device decode's slots: {device[0]:.6f} = {loader[0]:.6f} + {slots:.6f} MiB")
PY
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

# Bytes that are no JPEG behind a matching checksum: only the decode finds them. Training decodes ahead on a thread
# of its own; the error still names the shard and sample and ends both ranks with exit 4.
cp -r data undecodable
/usr/bin/python3 "$tools" damage undecodable/train/shard-00001-of-00002.h5 10 undecodable
set +e
"$mpiexec" -np 2 --oversubscribe "$bin" train "$src/jobs/fashion_mnist.toml" --set data.train=undecodable/train \
  --set data.test=undecodable/test --set train.batch_per_rank=6 --set train.epochs=1 --set run.dir=undecodable-run \
  --set data.augment=resized_crop_flip --set data.decode=gpu --set data.eval_resize=26 \
  --set 'model.layers=[{type="flatten"},{type="dense",units=3}]' >undecodable.log 2>&1
code=$?
set -e
[[ $code == 4 ]] || { echo "FAIL: an undecodable JPEG decoded ahead exited $code, not 4: $(tail -5 undecodable.log)"; exit 1; }
[[ $(grep -c "shard-00001-of-00002.h5', sample 10 does not decode on the device" undecodable.log) == 2 &&
   $(grep -c "(found by rank 1/2" undecodable.log) == 2 ]] ||
  { echo "FAIL: the undecodable sample was not named by both ranks: $(tail -12 undecodable.log)"; exit 1; }
echo "ok   a JPEG that does not decode, decoded ahead on its own thread: exit 4, both ranks naming the shard and the sample"

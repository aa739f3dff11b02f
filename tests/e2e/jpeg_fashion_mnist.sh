#!/usr/bin/env bash
# Fashion-MNIST as a user's photo folder: every item a 64x64 JPEG (upscaled, so the photos are larger than the
# 28x28 the model trains on), prepared with --store jpeg on 2 ranks and trained with the random-resized crop taken
# from each photo. Checks that the 2-rank prepare writes the very bytes, labels and statistics of a 1-rank one; that
# the job reaches >= 0.90 test accuracy (the evaluation crop: shorter side 30, centre 28); that a strict 2-rank
# prepare meeting a bad photo ends both ranks with exit 4, the same message, and nothing written; that a flipped
# byte in a shard stops training naming the shard and sample. Uses Debian's python3-pil, python3-numpy, python3-h5py.
# Usage: jpeg_fashion_mnist.sh RINGTRAIN SOURCE_DIR MPIEXEC
set -euo pipefail
bin=$1 source_dir=$2 mpiexec=$3
py=/usr/bin/python3
src=/usr/share/datasets/fashion-mnist
"$py" -c "import h5py, numpy, PIL" 2>/dev/null || { echo "FAIL: $py cannot import h5py/numpy/PIL (scripts/install_deps.sh)"; exit 1; }
[[ -f $src/train-images-idx3-ubyte.gz ]] || { echo "FAIL: Fashion-MNIST not under $src (apt-get install dataset-fashion-mnist)"; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"

"$py" "$source_dir/tests/support/write_fashion_mnist_folder.py" "$src" photos jpeg 64

prepare() {  # prepare RANKS OUT [more options]
  local ranks=$1 out=$2; shift 2
  "$mpiexec" -np "$ranks" --oversubscribe "$bin" prepare images --source photos/train --test-source photos/test \
    --size 28 --channels 1 --store jpeg --shards 4 --out "$out" "$@"
}
prepare 2 two >prepare-2.log 2>&1 || { echo "FAIL: 2-rank prepare: $(tail -5 prepare-2.log)"; exit 1; }
prepare 1 one >prepare-1.log 2>&1 || { echo "FAIL: 1-rank prepare: $(tail -5 prepare-1.log)"; exit 1; }
grep -q "70000 images of 10 classes, stored as JPEG" prepare-2.log || { echo "FAIL: summary: $(cat prepare-2.log)"; exit 1; }
"$py" - <<'PY'
import glob, sys, h5py
def read(split):
    files = sorted(glob.glob(split + "/shard-*.h5"))
    out = []
    for f in files:
        with h5py.File(f, "r") as h:
            out.append({k: h[k][:].tobytes() for k in ("encoded", "encoded_offsets", "image_sizes", "sample_crc32c", "labels")}
                       | {"mean": tuple(h.attrs["mean"]), "std": tuple(h.attrs["std"]), "storage": h.attrs["storage"]})
    return out
for split in ("train", "test"):
    one, two = read(f"one/{split}"), read(f"two/{split}")
    if len(one) != 4 or one != two:
        sys.exit(f"FAIL: {split}: the 2-rank prepare's shards differ from the 1-rank prepare's")
print("ok   2 ranks prepare the very shards 1 rank does (bytes, offsets, sizes, checksums, labels, statistics)")
PY

# Training: jobs/fashion_mnist.toml (12 epochs) on 2 ranks, random-resized crop (area 50-100 %, aspect 3/4-4/3) and
# flip from each 64x64 photo; evaluation resizes a photo to 30 and takes the centre 28. Fashion-MNIST's items fill
# their frame, so torchvision's 8 % crops lose what tells a shirt from a T-shirt: with area 25-100 % the job reached
# 0.871 after 5 epochs, with 50-100 % 0.895 after 8 and 0.9053 after 12 (this run's setting, on the 2-core VM).
"$mpiexec" -np 2 --oversubscribe "$bin" train "$source_dir/jobs/fashion_mnist.toml" --set data.train=two/train \
  --set data.test=two/test --set data.augment=resized_crop_flip --set data.augment_min_area=0.5 \
  --set data.eval_resize=30 --set run.dir=run \
  --set run.progress_every_s=1000 >train.log 2>&1 || { echo "FAIL: training: $(tail -5 train.log)"; exit 1; }
acc=$("$py" -c "import json, sys; print([r for r in map(json.loads, open(sys.argv[1])) if r['kind'] == 'epoch'][-1]['test_acc'])" run/metrics.jsonl)
"$py" -c "import sys; sys.exit(float(sys.argv[1]) < 0.90)" "$acc" || { echo "FAIL: test accuracy $acc < 0.90"; exit 1; }
echo "ok   trained from JPEG shards with the random-resized crop: test accuracy $acc (>= 0.90)"

# A flipped byte in a shard's JPEG bytes: the sample's checksum stops training on every rank, naming shard and sample.
cp -r two flipped
"$py" - <<'PY'
import h5py
f = "flipped/train/shard-00001-of-00004.h5"
with h5py.File(f, "r") as h:  # sample 10's bytes lie in the first chunk of `encoded` (1 MiB; ~1.5 KB a photo)
    offset = h["encoded"].id.get_chunk_info(0).byte_offset + int(h["encoded_offsets"][10]) + 20
with open(f, "r+b") as out:
    out.seek(offset); b = out.read(1); out.seek(offset); out.write(bytes([b[0] ^ 0x20]))
PY
if "$mpiexec" -np 2 --oversubscribe "$bin" train "$source_dir/jobs/fashion_mnist.toml" --set data.train=flipped/train \
  --set data.test=flipped/test --set train.epochs=1 --set run.dir=run-flipped >flipped.log 2>&1; then
  echo "FAIL: training on a flipped byte succeeded"; exit 1
fi
grep -q "shard-00001-of-00004.h5', sample 10 is damaged" flipped.log || { echo "FAIL: the flipped byte was not named: $(tail -8 flipped.log)"; exit 1; }
grep -q "exit 4" flipped.log || { echo "FAIL: not a data error (exit 4): $(tail -8 flipped.log)"; exit 1; }
echo "ok   a flipped byte stops training with exit 4, naming the shard and the sample"

# A strict 2-rank prepare meeting a file that is no image: both ranks exit 4 with the same message; nothing written.
printf 'not a photo' >photos/train/3-Dress/broken.jpg
if prepare 2 strict --strict >strict.log 2>&1; then echo "FAIL: a strict prepare accepted a broken photo"; exit 1; fi
[[ $(grep -c "broken.jpg" strict.log) -ge 2 ]] || { echo "FAIL: not every rank named the broken photo: $(cat strict.log)"; exit 1; }
[[ ! -e strict ]] || { echo "FAIL: the failed prepare left $(find strict | head -5)"; exit 1; }
echo "ok   a strict 2-rank prepare meeting a broken photo: every rank exits 4 naming it, nothing written"

#!/usr/bin/env bash
# Interoperability: what ringtrain writes (a prepared split's shards, a checkpoint) opens in h5py, the tool our
# users inspect HDF5 with, with the layout docs/architecture.md documents. Uses Debian's python3 and python3-h5py (which
# link the same libhdf5 as ringtrain). Usage: read_with_h5py.sh RINGTRAIN SOURCE_DIR
set -euo pipefail
bin=$1 src=$2
py=/usr/bin/python3
"$py" -c "import h5py" 2>/dev/null || { echo "FAIL: $py cannot import h5py (apt-get install python3-h5py)"; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
"$bin" prepare synthetic --shape 3,8,8 --classes 5 --samples 120 --test-samples 30 --shards 3 --out "$work/data" >/dev/null
"$bin" train "$src/jobs/fashion_mnist.toml" --set data.train="$work/data/train" --set data.test="$work/data/test" \
  --set 'model.layers=[{type="flatten"},{type="dense",units=7},{type="relu"},{type="dense",units=5}]' \
  --set train.batch_per_rank=8 --set train.epochs=1 --set run.dir="$work/run" --set run.progress_every_s=1000 \
  >"$work/train.log" 2>&1 || { echo "FAIL: training: $(tail -5 "$work/train.log")"; exit 1; }
"$py" - "$work" <<'PY'
import glob, json, sys
import h5py
import numpy as np

work = sys.argv[1]
failures = 0
def check(ok, what):
    global failures
    print(("ok   " if ok else "FAIL ") + what)
    failures += not ok

for split, want in (("train", 120), ("test", 30)):
    files = sorted(glob.glob(f"{work}/data/{split}/shard-*.h5"))
    check(len(files) == 3, f"{split}: 3 shard files ({len(files)})")
    total = 0
    for i, path in enumerate(files):
        with h5py.File(path, "r") as f:
            images, labels = f["images"], f["labels"]
            good = (images.dtype == np.uint8 and labels.dtype == np.int32 and images.shape[1:] == (3, 8, 8)
                    and images.shape[0] == labels.shape[0] and images.chunks is not None
                    and images.compression is None)
            lab = labels[...]
            good = good and lab.min() >= 0 and lab.max() < 5
            attrs = f.attrs
            good = good and int(attrs["num_classes"]) == 5 and list(attrs["sample_shape"]) == [3, 8, 8]
            good = good and int(attrs["shard_index"]) == i and int(attrs["shard_count"]) == 3
            good = good and len(attrs["mean"]) == 3 and len(attrs["std"]) == 3
            pixels = images[: min(4, images.shape[0])]
            good = good and pixels.shape[0] > 0 and int(pixels.max()) <= 255
            total += images.shape[0]
        check(good, f"{split} shard {i}: images {images.shape} uint8 chunked unfiltered, labels int32 in [0, 5), "
                    f"attributes num_classes, sample_shape, shard_index/count, mean, std")
    check(total == want, f"{split}: {total} samples in all (want {want})")

job = next(json.loads(l) for l in open(f"{work}/run/metrics.jsonl") if '"kind": "job"' in l or '"kind":"job"' in l)
ckpts = sorted(glob.glob(f"{work}/run/checkpoints/*.h5"))
check(len(ckpts) >= 1, f"a checkpoint was written ({len(ckpts)})")
with h5py.File(ckpts[-1], "r") as f:
    params = f["params"][...]
    sizes = f["tensor_sizes"][...]
    good = (params.dtype == np.float32 and params.size == job["params"] and int(sizes.sum()) == job["params"]
            and f["velocity"].shape == params.shape and np.isfinite(params).all())
    check(good, f"checkpoint {ckpts[-1].rsplit('/', 1)[-1]}: params float32 x {params.size} "
                f"(the job record says {job['params']}), tensor_sizes sum to it, velocity alike, all finite")
sys.exit(1 if failures else 0)
PY

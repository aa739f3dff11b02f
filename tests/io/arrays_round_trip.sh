#!/usr/bin/env bash
# `prepare arrays` from the user's side: .npy (NHWC) and HDF5 (NCHW, uint8 labels, given test datasets) inputs
# written by numpy/h5py round-trip into shards that h5py reads back sample for sample, with class names; bad
# inputs (float images, a missing dataset, a non-HDF5 file, both input kinds, a channels-last array without
# --layout) exit with a clear error and leave no output folder. Uses Debian's python3-numpy/python3-h5py. Usage: arrays_round_trip.sh RINGTRAIN
set -euo pipefail
bin=$1
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
py=/usr/bin/python3
"$py" -c "import h5py, numpy" 2>/dev/null || { echo "FAIL: $py cannot import h5py/numpy (apt-get install python3-h5py)"; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
"$py" - <<'PY'
import numpy as np, h5py
rng = np.random.default_rng(7)
x = rng.integers(0, 256, (60, 6, 5, 3), dtype=np.uint8)
y = (np.arange(60) % 4).astype(np.int64)
np.save("x.npy", x); np.save("y.npy", y); np.save("xf.npy", x.astype(np.float32))
with h5py.File("d.h5", "w") as f:
    f["train/images"] = x[:48].transpose(0, 3, 1, 2); f["train/labels"] = y[:48].astype(np.uint8)
    f["test/images"] = x[48:].transpose(0, 3, 1, 2); f["test/labels"] = y[48:].astype(np.uint8)
PY
"$bin" prepare arrays --images x.npy --labels y.npy --layout nhwc --class-names n0,n1,n2,n3 --shards 3 --out npy >/dev/null
"$bin" prepare arrays --from-hdf5 d.h5 --images-dataset train/images --labels-dataset train/labels \
  --test-images-dataset test/images --test-labels-dataset test/labels --out h5 >/dev/null
"$bin" inspect npy/train | grep -q "names       0 n0, 1 n1, 2 n2, 3 n3" || { echo "FAIL: inspect does not list the class names"; exit 1; }

"$py" - <<'PY'
import glob, sys
import numpy as np, h5py
x = np.load("x.npy").transpose(0, 3, 1, 2); y = np.load("y.npy")
def read(folder):
    images, labels, names = [], [], None
    for f in sorted(glob.glob(folder + "/shard-*.h5")):
        with h5py.File(f, "r") as h:
            images.append(h["images"][:]); labels.append(h["labels"][:]); names = h.attrs.get("class_names")
    return np.concatenate(images), np.concatenate(labels), names
failures = 0
def check(ok, what):
    global failures
    print(("ok   " if ok else "FAIL ") + what); failures += not ok
index = {x[i].tobytes(): i for i in range(len(x))}
tr, trl, names = read("npy/train"); te, tel, _ = read("npy/test")
found = [index.get(s.tobytes(), -1) for s in np.concatenate([tr, te])]
check(sorted(found) == list(range(60)), "npy: every sample appears exactly once across train and test, in NCHW")
check(all(y[i] == l for i, l in zip(found, np.concatenate([trl, tel]))), "npy: every label travels with its sample")
check(names is not None and names.decode().split("\n") == ["n0", "n1", "n2", "n3"], "npy: class names stored in the shards")
tr, trl, _ = read("h5/train"); te, tel, _ = read("h5/test")
check(np.array_equal(tr, x[:48]) and np.array_equal(trl, y[:48]), "hdf5: train split equals the train datasets in order")
check(np.array_equal(te, x[48:]) and np.array_equal(tel, y[48:]), "hdf5: test split equals the test datasets in order")
sys.exit(1 if failures else 0)
PY

source "$here/prepare_refusal.sh"
refuse arrays "need uint8" --images xf.npy --labels y.npy
refuse arrays "has no dataset 'nope'" --from-hdf5 d.h5 --images-dataset nope --labels-dataset train/labels
refuse arrays "is not an HDF5 file" --from-hdf5 x.npy
refuse arrays "not both" --images x.npy --labels y.npy --from-hdf5 d.h5
refuse arrays "--layout 'hwc'" --images x.npy --labels y.npy --layout hwc
refuse arrays "pass --layout nhwc for channels-last" --images x.npy --labels y.npy

#!/usr/bin/env bash
# Inputs to `prepare` and `predict` that a hostile but fair user hands over, each refused by name with exit 4 and
# bounded memory and time, or taken (a CMYK JPEG):
#   images   --channels 4 of images without alpha: the constant alpha stored with std 1 and said; headers claiming 65500x65500 (JPEG) and
#            100000x100000 (PNG): refused by their header under a
#            2 GiB address-space limit (they took 12.8 and 4.3 GB); a CMYK JPEG decodes to the right RGB; a FIFO, a
#            folder and a looping link named like images are skipped and listed (--strict: exit 4), never a hang or
#            "filesystem error"; a class folder that loops is exit 4 naming it
#   arrays   all-zero images (a channel of std 0): stored with std 1 and said, no split that fails inspect; --images a FIFO, /dev/zero, a folder; .npy headers with a negative dimension, no closing '}', a shape
#            of (2^32)^3; --test-fraction nan; --from-hdf5 a 10^12-value never-written dataset, a group, a folder,
#            a FIFO: exit 4 naming the file and what is wrong, each within 20 s; a label of 10^9 and --classes
#            2*10^9 refused before any per-class table is sized (they took 23.5 GB, or exit 1)
#   idx      Fashion-MNIST IDX files: a 1 KB gzip whose header claims 20 M images (it took 15.5 GB) and a FIFO
#            named like one (it hung): exit 4 naming the file, under the same limits
#   pairs    train and test are written together: a test folder that cannot be made, or a test split that does not
#            fit, or a test shard that cannot be written, leaves no new train split (and with --overwrite the
#            earlier pair byte for byte); so does a prepare
#            images --overwrite stopped by --strict at a broken JPEG, or by a class none of whose images decode (found
#            after every shard is written); nothing passes `inspect` that was not there before; started as 2
#            processes (mpirun), prepare is refused (exit 2)
# Usage: hostile_inputs.sh RINGTRAIN [CASE...]
set -uo pipefail
bin=$1
shift
cases=${*:-images arrays idx pairs}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
py=/usr/bin/python3
$py -c "import numpy, h5py, PIL" 2>/dev/null || py=python3

# check NAME EXIT TEXT -- COMMAND...: exit EXIT with TEXT in the output, within 20 s and 2 GiB of address space.
check() {
  local name=$1 code=$2 text=$3
  shift 4
  (ulimit -v 2097152; timeout 20 "$@" </dev/null >"$work/$name.log" 2>&1)
  local rc=$?
  if [ "$rc" = "$code" ] && grep -qF -- "$text" "$work/$name.log" &&
     ! grep -qE 'internal error|filesystem error|std::|bad_alloc' "$work/$name.log"; then
    echo "ok   $name: exit $rc: $(grep -F -- "$text" "$work/$name.log" | head -1 | sed 's/^ *//' | cut -c1-150)"
  else
    echo "FAIL $name: exit $rc (want $code and '$text')"
    sed 's/^/  | /' "$work/$name.log" | head -8
    failures=$((failures + 1))
  fi
}

if [[ " $cases " == *" images "* ]]; then
  $py - "$work" <<'EOF'
import os, struct, sys, zlib
import numpy as np
from PIL import Image
w = sys.argv[1]
noise = np.random.default_rng(1)
for c in ("a", "b"):
    os.makedirs(f"{w}/src/{c}", exist_ok=True)
    for i in range(3):
        Image.fromarray(noise.integers(0, 256, (8, 8, 3), dtype=np.uint8)).save(f"{w}/src/{c}/ok{i}.png")
os.makedirs(f"{w}/huge/a", exist_ok=True)
# A JPEG whose SOF0 says 65500x65500: the decoder's header pass is all that may run.
Image.new("RGB", (8, 8), (1, 2, 3)).save(f"{w}/huge/x.jpg", quality=90)
d = bytearray(open(f"{w}/huge/x.jpg", "rb").read())
sof = d.index(b"\xff\xc0")
d[sof + 5:sof + 9] = struct.pack(">HH", 65500, 65500)
open(f"{w}/huge/a/big.jpg", "wb").write(d)
os.remove(f"{w}/huge/x.jpg")
# A PNG whose IHDR says 100000x100000, with a valid CRC.
Image.new("RGB", (8, 8)).save(f"{w}/huge/big.png")
d = bytearray(open(f"{w}/huge/big.png", "rb").read())
d[16:24] = struct.pack(">II", 100000, 100000)
d[29:33] = struct.pack(">I", zlib.crc32(bytes(d[12:29])) & 0xFFFFFFFF)
open(f"{w}/huge/big.png", "wb").write(d)
# Pure cyan ink as Pillow writes CMYK (Adobe marker, inverted): RGB (0, 255, 255); pure magenta: (255, 0, 255).
os.makedirs(f"{w}/cmyk/a", exist_ok=True); os.makedirs(f"{w}/cmyk/b", exist_ok=True)
Image.new("CMYK", (8, 8), (255, 0, 0, 0)).save(f"{w}/cmyk/a/cyan.jpg", quality=100)
Image.new("CMYK", (8, 8), (0, 255, 0, 0)).save(f"{w}/cmyk/b/magenta.jpg", quality=100)
EOF
  check huge_jpeg 4 "is 65500x65500 pixels (12.0 GiB decoded), over the 268435456 pixels" -- "$bin" prepare images \
    --source "$work/huge" --test-source "$work/huge" --size 8 --out "$work/o_huge" --strict
  # RGBA asked of photos without alpha: the alpha set opaque is one value everywhere, std 0, which no run can
  # normalise by: stored with std 1 and said, so the split passes inspect (it was written with std 0, then refused by
  # inspect and train).
  check rgba_without_alpha 0 "note: channel 3 held one value in every training pixel: stored with std 1" -- \
    "$bin" prepare images --source "$work/src" --size 8 --channels 4 --out "$work/o_rgba" --test-fraction 0.34
  "$bin" inspect "$work/o_rgba/train" >/dev/null 2>&1 ||
    { echo "FAIL rgba_without_alpha: the split does not pass inspect"; failures=$((failures + 1)); }
  check huge_png_skipped 0 "is 100000x100000 pixels" -- bash -c "cp '$work/huge/big.png' '$work/src/a/' &&
    '$bin' prepare images --source '$work/src' --size 8 --out '$work/o_png' --test-fraction 0.34"
  rm -f "$work/src/a/big.png"
  check cmyk 0 "wrote $work/o_cmyk/train" -- "$bin" prepare images --source "$work/cmyk" --size 8 --test-source "$work/cmyk" \
    --out "$work/o_cmyk"
  # Training samples are written in a seeded random order: find each class's sample by its label (a 0, b 1).
  rgb=$($py -c "
import h5py, glob
f = h5py.File(sorted(glob.glob('$work/o_cmyk/train/shard-*.h5'))[0])
labels = list(f['labels'][:])
print(*f['images'][labels.index(0), :, 4, 4], *f['images'][labels.index(1), :, 4, 4])" 2>&1)
  # JPEG's lossy coding may move a value by a step or two.
  if $py -c "import sys; v=[int(x) for x in sys.argv[1:]]; sys.exit(not all(abs(a-b) <= 3 for a, b in zip(v, [0,255,255,255,0,255])))" $rgb 2>/dev/null; then
    echo "ok   cmyk_colour: pure cyan and magenta ink read RGB ($rgb)"
  else echo "FAIL cmyk_colour: pure cyan and magenta ink read RGB ($rgb), want 0 255 255 255 0 255"; failures=$((failures + 1)); fi

  mkfifo "$work/src/a/pipe.png"
  mkdir "$work/src/b/folder.jpg"
  ln -s loop.jpg "$work/src/b/loop.jpg"
  # folder.jpg is a subfolder of its class (as torchvision's ImageFolder walks it), empty here: nothing to list.
  check odd_entries_listed 0 "skipped 2 unreadable images" -- "$bin" prepare images --source "$work/src" --size 8 \
    --out "$work/o_odd" --test-fraction 0.34
  for what in "pipe.png' is not a regular file" "loop.jpg' cannot be reached: Too many levels of symbolic links"; do
    grep -qF -- "$what" "$work/odd_entries_listed.log" || { echo "FAIL odd_entries_listed: no '$what'"; failures=$((failures + 1)); }
  done
  check odd_entries_strict 4 "--strict: stopped, nothing written" -- "$bin" prepare images --source "$work/src" \
    --size 8 --out "$work/o_strict" --test-fraction 0.34 --strict
  rm -f "$work/src/a/pipe.png"
  ln -s c "$work/src/c"
  check class_folder_loop 4 "class folder '$work/src/c' cannot be reached: Too many levels of symbolic links" -- \
    "$bin" prepare images --source "$work/src" --size 8 --out "$work/o_loop"
fi

if [[ " $cases " == *" arrays "* ]]; then
  $py - "$work" <<'EOF'
import sys, numpy as np, h5py
w = sys.argv[1]
np.save(f"{w}/labels.npy", np.arange(4) % 2)
np.save(f"{w}/images.npy", np.zeros((4, 1, 2, 2), np.uint8))
np.save(f"{w}/zeros20.npy", np.zeros((20, 1, 2, 2), np.uint8))
np.save(f"{w}/labels20.npy", np.arange(20) % 2)
def npy(name, header, payload=b""):
    header = header + " " * (118 - len(header)) + "\n"
    open(f"{w}/{name}", "wb").write(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode() + payload)
npy("negative.npy", "{'descr': '|u1', 'fortran_order': False, 'shape': (-4, 1, 2, 2), }", bytes(16))
npy("unclosed.npy", "{'descr': '|u1', 'fortran_order': False, 'shape': (4, 1, 2, 2), ", bytes(16))
npy("overflow.npy", "{'descr': '|u1', 'fortran_order': False, 'shape': (4294967296, 4294967296, 4294967296), }")
with h5py.File(f"{w}/arrays.h5", "w") as f:
    f.create_dataset("images", shape=(10**6, 1, 1000, 1000), dtype="u1", chunks=(1, 1, 1000, 1000))
    f.create_dataset("labels", data=np.zeros(10**6, np.int64))
    f.create_group("group")
EOF
  mkfifo "$work/fifo.npy"
  mkdir "$work/folder.npy" "$work/folder.h5"
  mkfifo "$work/fifo.h5"
  arrays() { echo "$bin" prepare arrays --out "$work/o_$1" "${@:2}"; }
  check arrays_constant_channel 0 "note: channel 0 held one value in every training pixel: stored with std 1" -- \
    $(arrays zeros --images "$work/zeros20.npy" --labels "$work/labels20.npy")
  "$bin" inspect "$work/o_zeros/train" >/dev/null 2>&1 ||
    { echo "FAIL arrays_constant_channel: the split does not pass inspect"; failures=$((failures + 1)); }
  check npy_fifo 4 "'$work/fifo.npy' is not a regular file or folder (a FIFO, device or socket)" -- \
    $(arrays fifo --images "$work/fifo.npy" --labels "$work/labels.npy")
  check npy_dev_zero 4 "'/dev/zero' is not a regular file or folder" -- $(arrays zero --images /dev/zero --labels "$work/labels.npy")
  check npy_folder 4 "'$work/folder.npy' is a folder" -- $(arrays folder --images "$work/folder.npy" --labels "$work/labels.npy")
  check npy_negative 4 "is not a tuple of non-negative integers" -- $(arrays neg --images "$work/negative.npy" --labels "$work/labels.npy")
  check npy_unclosed 4 "its header is not a {...} dictionary" -- $(arrays unclosed --images "$work/unclosed.npy" --labels "$work/labels.npy")
  check npy_overflow 4 "holds more bytes than any file can" -- $(arrays overflow --images "$work/overflow.npy" --labels "$work/labels.npy")
  check test_fraction_nan 2 "--test-fraction nan must lie strictly between 0 and 1" -- \
    $(arrays nan --images "$work/images.npy" --labels "$work/labels.npy" --test-fraction nan)
  check hdf5_unwritten_huge 4 "holds 931.3 GiB in memory, with" -- $(arrays huge --from-hdf5 "$work/arrays.h5")
  check hdf5_group 4 "'group' in '$work/arrays.h5' is a group, not a dataset" -- \
    $(arrays group --from-hdf5 "$work/arrays.h5" --images-dataset group)
  check hdf5_missing_parent 4 "has no dataset 'no/such'" -- $(arrays parent --from-hdf5 "$work/arrays.h5" --images-dataset no/such)
  check hdf5_folder 4 "--from-hdf5 '$work/folder.h5' is a folder" -- $(arrays hfolder --from-hdf5 "$work/folder.h5")
  check hdf5_fifo 4 "--from-hdf5 '$work/fifo.h5' is not a regular file" -- $(arrays hfifo --from-hdf5 "$work/fifo.h5")
  $py -c "import numpy as np, sys; y = np.arange(200) % 4; y[7] = 10**9; np.save(sys.argv[1], y); \
np.save(sys.argv[2], np.zeros((200, 1, 2, 2), np.uint8))" "$work/huge_label.npy" "$work/images200.npy"
  check label_huge 4 "label 1000000000 at position 7 of" -- \
    $(arrays hlabel --images "$work/images200.npy" --labels "$work/huge_label.npy")
  check classes_huge 2 "--classes: Value 2000000000 not in range" -- \
    $(arrays hclasses --images "$work/images.npy" --labels "$work/labels.npy" --classes 2000000000)
  check class_name_line_break 4 "class name 0 ('a" -- \
    "$bin" prepare arrays --out "$work/o_names" --images "$work/images.npy" --labels "$work/labels.npy" \
    --class-names "$(printf 'a\nb,c')" --test-fraction 0.5
  [ ! -e "$work/o_names/train" ] || { echo "FAIL class_name_line_break: a train folder was made"; failures=$((failures + 1)); }
fi

if [[ " $cases " == *" idx "* ]]; then
  mkdir -p "$work/idx" "$work/idxfifo"
  $py - "$work/idx" <<'EOF'
import gzip, struct, sys
w = sys.argv[1]
def idx(name, magic, dims, payload):
    with gzip.open(f"{w}/{name}", "wb") as f:
        f.write(struct.pack(">I", magic) + b"".join(struct.pack(">I", d) for d in dims) + payload)
idx("train-labels-idx1-ubyte.gz", 0x801, (1,), bytes(1))
idx("t10k-images-idx3-ubyte.gz", 0x803, (1, 28, 28), bytes(784))
idx("t10k-labels-idx1-ubyte.gz", 0x801, (1,), bytes(1))
# A whole set in idxfifo (its test labels become a FIFO below); in idx, the images file claims 500,000 images of
# 28x28 (373 MiB: less than the 2 GiB address space allows, so the reader grows its buffer as bytes arrive) and
# holds one.
idx("train-images-idx3-ubyte.gz", 0x803, (1, 28, 28), bytes(784))
import shutil
for name in ("train-images-idx3", "train-labels-idx1", "t10k-images-idx3", "t10k-labels-idx1"):
    shutil.copy(f"{w}/{name}-ubyte.gz", f"{w}/../idxfifo/")
idx("train-images-idx3-ubyte.gz", 0x803, (500000, 28, 28), bytes(784))
EOF
  rm "$work/idxfifo/t10k-labels-idx1-ubyte.gz"
  mkfifo "$work/idxfifo/t10k-labels-idx1-ubyte.gz"
  check idx_claims_huge 4 "train-images-idx3-ubyte.gz' is truncated: it ends inside its pixels" -- \
    "$bin" prepare fashion-mnist --source "$work/idx" --out "$work/o_idx"
  check idx_fifo 4 "t10k-labels-idx1-ubyte.gz' is not a regular file (a folder, FIFO, device or socket)" -- \
    "$bin" prepare fashion-mnist --source "$work/idxfifo" --out "$work/o_idxfifo"
fi

# none_inspected NAME FOLDER: neither FOLDER/train nor FOLDER/test holds a split that passes inspect.
none_inspected() {
  local name=$1 dir
  for dir in "$2"/train "$2"/test; do
    if "$bin" inspect "$dir" >/dev/null 2>&1; then echo "FAIL $name: '$dir' passes inspect"; failures=$((failures + 1)); fi
  done
}
if [[ " $cases " == *" pairs "* ]]; then
  mkdir -p "$work/blocked"
  echo "a file where the test folder goes" >"$work/blocked/test"
  check pair_test_blocked 4 "cannot create split folder '$work/blocked/test'" -- \
    "$bin" prepare synthetic --shape 1,4,4 --classes 2 --samples 40 --out "$work/blocked"
  none_inspected pair_test_blocked "$work/blocked"
  # snapshot DIR: every file's name and bytes. kept NAME DIR: DIR is as its snapshot, byte for byte.
  snapshot() { (cd "$1" && find . -type f | sort | xargs sha256sum); }
  kept() {
    if [ "$(snapshot "$2")" = "$(cat "$2.before")" ] && "$bin" inspect "$2/train" >/dev/null; then
      echo "ok   $1: the earlier train and test splits are byte for byte as they were, and pass inspect"
    else
      echo "FAIL $1: the earlier pair changed: $(diff "$2.before" <(snapshot "$2") | head -4)"
      failures=$((failures + 1))
    fi
  }
  "$bin" prepare synthetic --shape 1,4,4 --classes 2 --samples 40 --shards 2 --out "$work/pair" >/dev/null
  snapshot "$work/pair" >"$work/pair.before"
  check pair_overwrite_refused 4 "needs" -- \
    "$bin" prepare synthetic --shape 3,16,16 --classes 5 --samples 40 --test-samples 1000000000000 --overwrite \
    --out "$work/pair"
  kept pair_overwrite_refused "$work/pair"
  # prepare images --overwrite: the earlier pair stays until the new one is whole, whatever stops it before.
  $py - "$work/photos" <<'EOF'
import os, sys
import numpy as np
from PIL import Image
w = sys.argv[1]
noise = np.random.default_rng(2)
for c in ("a", "b", "c"):
    os.makedirs(f"{w}/{c}", exist_ok=True)
    for i in range(4):
        Image.fromarray(noise.integers(0, 256, (12, 12, 3), dtype=np.uint8)).save(f"{w}/{c}/p{i}.jpg", quality=90)
EOF
  "$bin" prepare images --source "$work/photos" --size 8 --shards 2 --test-fraction 0.25 --out "$work/ipair" >/dev/null
  snapshot "$work/ipair" >"$work/ipair.before"
  head -c 300 "$work/photos/b/p1.jpg" >"$work/photos/b/p9.jpg"  # cut short: decodes to an error
  check images_overwrite_strict 4 "--strict: stopped" -- "$bin" prepare images --source "$work/photos" --size 8 \
    --shards 3 --test-fraction 0.25 --out "$work/ipair" --overwrite --strict
  rm "$work/photos/b/p9.jpg"
  mkdir -p "$work/photos/d"
  printf 'not an image' >"$work/photos/d/bad.jpg"
  check images_overwrite_class_lost 4 "no training image of class folder '$work/photos/d' decodes" -- \
    "$bin" prepare images --source "$work/photos" --size 8 --shards 3 --test-fraction 0.25 --out "$work/ipair" --overwrite
  kept images_overwrite "$work/ipair"
  # The test split's write fails once the train split is written (a folder where its temporary goes): the earlier
  # train shards of the same names are not this prepare's to remove.
  mkdir "$work/pair/test/shard-00000-of-00002.h5.tmp"
  check pair_overwrite_write_fails 4 "shard-00000-of-00002.h5.tmp" -- \
    "$bin" prepare synthetic --shape 1,4,4 --classes 2 --samples 40 --shards 2 --overwrite --out "$work/pair"
  rmdir "$work/pair/test/shard-00000-of-00002.h5.tmp" 2>/dev/null
  kept pair_overwrite_write_fails "$work/pair"
  $py -c "import numpy as np, sys; np.save(sys.argv[1], np.zeros((20, 1, 2, 2), np.uint8)); \
np.save(sys.argv[2], np.arange(20) % 2)" "$work/x20.npy" "$work/y20.npy"
  mkdir -p "$work/ablocked" && echo "in the way" >"$work/ablocked/test"
  check pair_arrays_test_blocked 4 "cannot create split folder '$work/ablocked/test'" -- \
    "$bin" prepare arrays --images "$work/x20.npy" --labels "$work/y20.npy" --out "$work/ablocked"
  none_inspected pair_arrays_test_blocked "$work/ablocked"
  # A test shard copied over a train shard (same name, same prepare): each split carries its own id.
  cp -a "$work/pair" "$work/leak"
  cp "$work/leak/test/shard-00001-of-00002.h5" "$work/leak/train/"
  check pair_test_shard_in_train 4 "belongs to split 'test-" -- "$bin" inspect "$work/leak/train"
  # A prepare's --out: each of its splits inspected (not "no shards: prepare again", which would rewrite good data).
  check inspect_prepare_out 0 "split $work/pair/test" -- "$bin" inspect "$work/pair"
  grep -qF "split $work/pair/train" "$work/inspect_prepare_out.log" ||
    { echo "FAIL inspect_prepare_out: the train split was not inspected"; failures=$((failures + 1)); }
  check inspect_prepare_out_damaged 4 "belongs to split 'test-" -- "$bin" inspect "$work/leak"
  # A run directory (or its checkpoints folder), or a file that is no checkpoint: named as such, exit 2.
  mkdir -p "$work/run/checkpoints" && touch "$work/run/checkpoints/ckpt-s000000003.h5" && echo '{}' >"$work/run/metrics.jsonl"
  check inspect_run_dir 2 "holds checkpoints, not a split; inspect a checkpoint file, e.g. the newest: ringtrain inspect \
'$work/run/checkpoints/ckpt-s000000003.h5'" -- "$bin" inspect "$work/run"
  check inspect_metrics_file 2 "inspect takes a split folder or a checkpoint file (.h5); '$work/run/metrics.jsonl' is neither" \
    -- "$bin" inspect "$work/run/metrics.jsonl"
  # Started as two processes (mpirun), the one-process commands would both write the pair: refused, nothing written.
  check pair_two_processes 2 "prepare synthetic runs as one process, but it was started as 2" -- \
    env OMPI_COMM_WORLD_SIZE=2 "$bin" prepare synthetic --shape 1,4,4 --classes 2 --samples 40 --out "$work/two"
  [ ! -e "$work/two" ] || { echo "FAIL pair_two_processes: '$work/two' was made"; failures=$((failures + 1)); }
fi

echo "$failures failed"
[ "$failures" -eq 0 ]

#!/usr/bin/env bash
# `prepare images` on the files users bring, each against what PIL (the tool most image datasets are made and read
# with) makes of it: a 16-bit RGB PNG and an 8-bit PNG whose gAMA chunk says linear light are stored with PIL's
# values (no colour management: libpng's simplified API had turned both into brighter sRGB); a JPEG with stray
# bytes before its end marker is kept with PIL's pixels (libjpeg warns and skips them); images in a subfolder of a
# class folder count, as torchvision's ImageFolder counts them; a class folder with a line break in its name and a
# --max-side below --size are refused (exit 4 and 2) with nothing left behind; files that are no images by name are counted
# in the summary; --store auto's choice does not move with --shards.
# Uses Debian's python3-pil, python3-numpy and python3-h5py. Usage: image_sources.sh RINGTRAIN
set -euo pipefail
bin=$1
py=/usr/bin/python3
"$py" -c "import h5py, numpy, PIL" 2>/dev/null || { echo "skip: $py cannot import h5py/numpy/PIL (scripts/install_deps.sh)"; exit 77; }
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
cd "$work"
fail() { echo "FAIL: $*"; exit 1; }

# A 6x4 picture of each kind in its own class folder, written byte for byte where PIL cannot (16-bit RGB, gAMA).
"$py" - <<'PY'
import io, os, struct, zlib
import numpy as np
from PIL import Image
rng = np.random.default_rng(3)
def chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xffffffff)
def png(path, pixels, depth, extra=b""):
    h, w, _ = pixels.shape
    rows = b"".join(b"\0" + pixels[y].astype(">u2" if depth == 16 else "u1").tobytes() for y in range(h))
    header = struct.pack(">IIBBBBB", w, h, depth, 2, 0, 0, 0)
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + extra + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))
eight = rng.integers(0, 256, (4, 6, 3)).astype(np.uint16)
os.makedirs("src/png16"); os.makedirs("src/gamma"); os.makedirs("src/junk"); os.makedirs("src/nested/deeper")
png("src/png16/a.png", eight * 256 + rng.integers(0, 256, (4, 6, 3)), 16)  # high bytes = eight
png("src/gamma/a.png", eight, 8, chunk(b"gAMA", struct.pack(">I", 100000)))  # gamma 1.0: linear light
photo = Image.fromarray(rng.integers(0, 256, (4, 6, 3), dtype=np.uint8))
buffer = io.BytesIO(); photo.save(buffer, "JPEG", quality=95); jpeg = buffer.getvalue()
assert jpeg.endswith(b"\xff\xd9")
open("src/junk/a.jpg", "wb").write(jpeg[:-2] + bytes(range(1, 241)) + b"\xff\xd9")  # stray bytes before EOI
photo.save("src/nested/deeper/a.png")
np.save("expected.npy", np.stack([eight.astype(np.uint8)] * 2))  # png16 and gamma: PIL's values
for path in ["src/png16/a.png", "src/gamma/a.png"]:
    assert np.array_equal(np.asarray(Image.open(path).convert("RGB")), eight), path  # the premise: PIL reads these
PY

"$bin" prepare images --source src --test-source src --size 4,6 --store raw --out data >prepare.log 2>&1 ||
  { cat prepare.log; fail "prepare images of the four kinds"; }
grep -q "skipped" prepare.log && { cat prepare.log; fail "an image was skipped"; }
"$py" - <<'PY'
import glob
import h5py, numpy as np
from PIL import Image
samples = {}
for shard in sorted(glob.glob("data/train/*.h5")):
    with h5py.File(shard) as f:
        names = f.attrs["class_names"]
        names = (names.decode() if isinstance(names, bytes) else names).split("\n")
        for image, label in zip(f["images"][:], f["labels"][:]):
            samples[names[label]] = image.transpose(1, 2, 0)
assert sorted(samples) == ["gamma", "junk", "nested", "png16"], sorted(samples)
expected = np.load("expected.npy")
for name, want in [("png16", expected[0]), ("gamma", expected[1])]:
    assert np.array_equal(samples[name], want), (name, samples[name][0, 0], want[0, 0])
print("ok   a 16-bit PNG and a PNG with gAMA 1.0 are stored with PIL's values")
assert np.array_equal(samples["junk"], np.asarray(Image.open("src/junk/a.jpg").convert("RGB"))), "junk"
print("ok   a JPEG with stray bytes before its end marker is kept, with PIL's pixels")
assert np.array_equal(samples["nested"], np.asarray(Image.open("src/nested/deeper/a.png").convert("RGB")))
print("ok   an image in a subfolder of its class folder counts for the class")
PY

refused() {  # refused NAME EXPECTED [EXIT] -- ARGS...: exit EXIT (4, data) saying EXPECTED, no output folder left
  local name=$1 want=$2 code=4
  [ "$3" != -- ] && { code=$3; shift; }
  shift 3
  local rc=0
  "$bin" prepare images "$@" --out "out-$name" >"$name.log" 2>&1 || rc=$?
  [ "$rc" = "$code" ] && grep -qF -- "$want" "$name.log" && [ ! -e "out-$name" ] ||
    { cat "$name.log"; fail "$name: exit $rc, want $code with '$want' and no out-$name"; }
  echo "ok   $name: exit $code, '$want'"
}
mkdir -p "lines/a"$'\n'"b" && cp src/gamma/a.png "lines/a"$'\n'"b/"
refused class_name_with_a_line_break "has a line break in its name" -- --source lines --test-source lines --size 4,6
refused max_side_below_size "--max-side 100 is below --size 224x224" 2 -- --source src --test-source src --size 224 \
  --store jpeg --max-side 100

# Files no image by name (.webp, a README) and a file beside the class folders are not taken, and the summary says
# how many and names one, where they were dropped without a word.
cp -r src named && printf 'webp bytes' >named/gamma/b.webp && printf 'notes' >named/README.txt
"$bin" prepare images --source named --test-source named --size 4,6 --store raw --out out-named >named.log 2>&1 ||
  { cat named.log; fail "prepare images beside files that are no images"; }
grep -qF "ignored 2 files not named .jpg, .jpeg or .png, or lying beside the class folders" named.log ||
  { cat named.log; fail "the ignored files are not counted in the summary"; }
echo "ok   2 files that are no images by name are counted and named in the summary"

# --store auto looks at photos spread over the whole training list: the shard count does not move its choice.
"$py" -c "
import os; from PIL import Image
for c in 'ab':
    os.makedirs(f'photos/{c}', exist_ok=True)
    for i in range(8): Image.new('RGB', (96, 80), (i * 20, 40, 90)).save(f'photos/{c}/{i}.jpg', quality=90)
Image.new('RGB', (96, 80)).save('photos/a/0.png')"
stores=""
for shards in 1 14; do
  "$bin" prepare images --source photos --size 32 --test-fraction 0.2 --shards $shards --out "auto-$shards" \
    >"auto-$shards.log" 2>&1 || { cat "auto-$shards.log"; fail "prepare with --shards $shards"; }
  stores+="$(grep -o 'stored as JPEG\|stored decoded' "auto-$shards.log") / "
done
[ "$stores" = "stored as JPEG / stored as JPEG / " ] || fail "--store auto with --shards 1 and 14: $stores"
echo "ok   --store auto chooses JPEG with --shards 1 and 14 alike"

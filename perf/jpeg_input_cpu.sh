#!/usr/bin/env bash
# The CPU side of issue 37's targets, on this host, into OUT_DIR (JSON lines + logs):
#  1. decode + random-resized crop + flip to 224x224 per core: ringtrain's loader alone (`input-bench`, 1 thread)
#     against tf.data's decode_and_crop_jpeg pipeline and torchvision's (perf/compare_input_pipeline.py, one pinned
#     core), on the same photos: as made (ImageNet-like, ~85 KB) and as `prepare images --max-side 256` stores them.
#     ringtrain reads each store twice: in the region layout prepare writes by default (restart markers: it decodes
#     only a crop's blocks) and as plain JPEGs (--keep-jpeg-bytes). The peers decode the plain JPEGs, their best
#     (restart markers slow libjpeg's Huffman decoding for them, and they cannot use them): each plain store's
#     training bytes exported to a folder, the same images, after the same 192 warm-up images; repeats interleaved,
#     their order turned each repeat;
#  2. prepare's peak RSS and CPU seconds as the folder grows: 10k, 100k and 300k files (symbolic links to a small
#     photo set: memory is what is measured, not decoding; in the region layout since 2026-11-30, so their CPU
#     seconds include its rewrite, about 2.8 ms an image, and compare with earlier records' only for memory), and
#     one ImageNet-like folder stored both ways.
# Every rate is also given per CPU-second of the process, which holds on a shared machine.
#   perf/jpeg_input_cpu.sh OUT_DIR [PHOTOS_DIR] [TF_PYTHON]      (PIPELINE_ONLY=1: part 1 alone, a few minutes)
# PHOTOS_DIR: a tree from scripts/make_jpeg_folder.py (made here, 2,000 photos, when absent); TF_PYTHON: a python with
# TensorFlow (default .venv-compare/bin/python3, from scripts/install_deps.sh --comparison); BUILD_DIR the build
# folder whose bin/ringtrain runs (default build).
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(mkdir -p "$1" && cd "$1" && pwd)
photos=${2:-$out/photos}
tf_python=${3:-.venv-compare/bin/python3}
bin=${BUILD_DIR:-build}/bin/ringtrain
py=/usr/bin/python3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
[ -d "$photos/train" ] || "$py" scripts/make_jpeg_folder.py --out "$photos" --classes 20 --per-class 100 >"$out/make_jpeg_folder.log"
"$bin" --version >"$out/versions.txt" 2>&1
lscpu | grep -E "Model name|^CPU\(s\)" >>"$out/versions.txt"

for store in original:0 side256:256; do
  name=${store%%:*} side=${store#*:}
  for layout in region plain; do
    keep=()
    [ "$layout" = plain ] && keep=(--keep-jpeg-bytes)
    /usr/bin/time -v "$bin" prepare images --source "$photos/train" --size 224 --store jpeg --max-side "$side" --shards 4 \
      --threads 1 "${keep[@]}" --out "$work/$name-$layout" \
      >"$out/prepare-$name-$layout.log" 2>"$out/prepare-$name-$layout.time"
  done
done
# Each plain store's training JPEG bytes as files, for the peers: both sides decode the same images (the train
# split, not the whole folder).
for name in original side256; do
"$py" - "$work/$name-plain/train" "$work/$name-files" <<'PY'
import glob, os, sys
import h5py
n = 0
for shard in sorted(glob.glob(sys.argv[1] + "/shard-*.h5")):
    with h5py.File(shard, "r") as h:
        ends, data, labels = h["encoded_offsets"][:], h["encoded"][:], h["labels"][:]
    for i, label in enumerate(labels):
        os.makedirs(f"{sys.argv[2]}/train/{label:04d}", exist_ok=True)
        open(f"{sys.argv[2]}/train/{label:04d}/{n:06d}.jpg", "wb").write(data[ends[i]:ends[i + 1]].tobytes())
        n += 1
PY
done
bench() {  # name: each layout of the store
  for layout in region plain; do
    "$bin" input-bench jobs/resnet50_synthetic.toml --set data.train="$work/$1-$layout/train" --set train.batch_per_rank=64 \
      --set data.augment=resized_crop_flip --threads 1 --batches 40 --warmup 3 |
      sed "s/^{/{\"store\":\"$1\",\"layout\":\"$layout\",/" >>"$out/ringtrain.jsonl"
  done
}
peers() {  # name folder: one repeat of the peers, its rows appended (compare_input_pipeline.py's --out rewrites)
  # --warmup 192: the images ringtrain's 3 warm-up batches of 64 take, so both sides leave out the same start.
  "$py" perf/compare_input_pipeline.py "$2" --tf-python "$tf_python" --threads 1 --no-decode-only --warmup 192 \
    --min-seconds 8 --out "$work/peers.jsonl" >>"$out/peers.log" 2>&1
  cat "$work/peers.jsonl" >>"$out/peers-$1.jsonl"
}
# The order turns from repeat to repeat (ringtrain first, then the peers first), so a drift within a repeat does not
# always land on the same side.
for repeat in 1 2 3; do
  for name in original side256; do
    if [ $((repeat % 2)) = 1 ]; then
      bench "$name"; peers "$name" "$work/$name-files"
    else
      peers "$name" "$work/$name-files"; bench "$name"
    fi
  done
done

# Memory as the folder grows: links to the first 2,000 photos, at 10k, 100k and 300k files (PIPELINE_ONLY=1: not).
[ -n "${PIPELINE_ONLY:-}" ] || "$py" - "$photos/train" "$work/links" <<'PY'
import glob, os, sys
photos = sorted(glob.glob(sys.argv[1] + "/*/*.jpg"))[:2000]
for count in (10000, 100000, 300000):
    for i in range(count):
        folder = f"{sys.argv[2]}-{count}/c{i % 10}"
        os.makedirs(folder, exist_ok=True)
        os.symlink(photos[i % len(photos)], f"{folder}/{i:06d}.jpg")
PY
for count in ${PIPELINE_ONLY:+none} 10000 100000 300000; do
  [ "$count" = none ] && break
  /usr/bin/time -v "$bin" prepare images --source "$work/links-$count" --size 28 --store jpeg --shards 8 --threads 2 \
    --out "$work/m$count" >"$out/memory-$count.log" 2>"$out/memory-$count.time"
  rm -rf "$work/m$count" "$work/links-$count"
done
"$py" - "$out" <<'PY'
import json, re, statistics, sys
out = sys.argv[1]
def rows(name):
    try:
        return [json.loads(l) for l in open(f"{out}/{name}") if l.startswith("{")]
    except FileNotFoundError:
        return []
def median(values):
    return statistics.median(values) if values else float("nan")
print("| store | ringtrain, region layout | ringtrain, plain JPEGs | tf.data | torchvision (PIL) | torchvision (io) "
      "| ringtrain / tf.data | plain / tf.data |")
print("|---|---|---|---|---|---|---|---|")
for store in ("original", "side256"):
    ours = lambda layout: median([r["images_per_cpu_s"] for r in rows("ringtrain.jsonl")
                                  if r["store"] == store and r.get("layout", "plain") == layout])
    peers = rows(f"peers-{store}.jsonl")
    of = lambda impl: median([r["images_per_cpu_s"] for r in peers if r.get("impl") == impl and r.get("images_per_cpu_s")])
    print(f"| {store} | {ours('region'):.0f} | {ours('plain'):.0f} | {of('tf_data'):.0f} | {of('torchvision_pil'):.0f} "
          f"| {of('torchvision_io'):.0f} | {ours('region') / of('tf_data'):.2f} | {ours('plain') / of('tf_data'):.2f} |")
print("\n| prepare | peak RSS MB | user + sys s |")
print("|---|---|---|")
for name in ("prepare-original-region", "prepare-original-plain", "prepare-side256-region", "prepare-side256-plain",
             "memory-10000", "memory-100000", "memory-300000"):
    try:
        text = open(f"{out}/{name}.time").read()
    except FileNotFoundError:
        continue
    rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", text).group(1)) / 1024
    cpu = sum(float(v) for v in re.findall(r"(?:User|System) time \(seconds\): ([\d.]+)", text))
    print(f"| {name} | {rss:.0f} | {cpu:.1f} |")
PY

#!/usr/bin/env bash
# Owns the measurement of issue 37's GPU JPEG decoder (about 3 minutes on an H200-class host, start-up included; an
# estimate): its GPU tests (the crop kernel bit for bit against the CPU twin; nvJPEG's samples against libjpeg + the
# CPU crop, on the hardware engine and the CUDA backend; a corrupt JPEG named by its index), then
# ringtrain-jpeg-decode-bench on an ImageNet-like JPEG split (scripts/make_jpeg_folder.py, a few progressive, gray and
# CMYK images among them) stored as photos are and with the shorter side 256: the hardware engine, the CUDA backend,
# and the host's share alone (--read-only); torchvision's batched nvJPEG on the same photos as the peer
# (perf/gpu/compare_gpu_decode.py). Build first, and pack the portable runtime where the GPU host lacks Open MPI or
# HDF5:
#   cmake --build build-gpu --target ringtrain test_gpu ringtrain-jpeg-decode-bench
#   perf/gpu/pack_carried.sh build-gpu ringtrain test_gpu ringtrain-jpeg-decode-bench
# then copy the five .gpurt/ files (root.tar.xz lib.tar.xz bin.tar.xz env.sh cuda-libs.sh, 28 MB) to the host.
# OUT_DIR gets summary.txt, tests.log, bench.jsonl, torchvision.jsonl, details.tgz.
#   bash perf/gpu/measure_jpeg_decode.sh [OUT_DIR]      (default: $OUT)
set -u
cd "$(dirname "$0")/../.."
out=${1:-${OUT:?usage: measure_jpeg_decode.sh OUT_DIR (or set OUT)}}
mkdir -p "$out"
x=$(mktemp -d)
source perf/gpu/carried.sh
unpack_carried
bin=${BIN:-.gpurt/bin}  # the binaries: .gpurt/bin as packed, or e.g. build/bin on a host that built them
say() { echo "[jpeg $(date +%T)] $*" | tee -a "$out/summary.txt"; }
nvidia-smi -L | tee -a "$out/summary.txt"

rt timeout 150 "$bin/test_gpu" --gtest_filter='CudaCropResample.*:CudaJpegDecoder.*:CudaVersions.*:NvjpegErrors.*' \
  >"$out/tests.log" 2>&1
say "GPU tests exit $?: $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$out/tests.log" | paste -sd' ')"
grep -E "nvJPEG .*channels|Failure|error" "$out/tests.log" | head -12 | tee -a "$out/summary.txt"

python3 scripts/make_jpeg_folder.py --out "$x/photos" --classes 64 --per-class 32 --progressive-every 25 \
  --grayscale-every 60 --cmyk-every 700 --workers "$(nproc)" >"$x/make_jpeg_folder.log" 2>&1 ||
  say "make_jpeg_folder failed: $(tail -1 "$x/make_jpeg_folder.log")"
say "photos: $(tail -1 "$x/make_jpeg_folder.log" | cut -c1-200)"
for store in original:0 side256:256; do
  name=${store%%:*} side=${store#*:}
  rt "$bin/ringtrain" prepare images --source "$x/photos/train" --size 224 --store jpeg --max-side "$side" \
    --shards 4 --out "$x/jpeg-$name" >"$x/prepare-$name.log" 2>&1
  say "prepare $name exit $?"
  for mode in hardware --no-hardware --read-only; do
    flag=$mode; [ "$mode" = hardware ] && flag=""
    rt timeout 60 "$bin/ringtrain-jpeg-decode-bench" "$x/jpeg-$name/train" --batch 256 --batches 30 --warmup 3 $flag \
      2>>"$x/bench.err" | sed "s/^{/{\"store\":\"$name\",\"mode\":\"${mode#--}\",/" >>"$out/bench.jsonl"
    say "bench $name $mode: $(tail -1 "$out/bench.jsonl" | grep -oE '"(images_per_s|cpu_s_per_image|backend)":("[^"]*"|[0-9.e-]*)' | paste -sd' ')"
  done
done
tail -3 "$x/bench.err" | tee -a "$out/summary.txt"

timeout 150 python3 perf/gpu/compare_gpu_decode.py "$x/photos" --images 2048 --batch 256 \
  --modes gpu_decode gpu_decode_rrc --out "$out/torchvision.jsonl" >"$x/torchvision.log" 2>&1
say "torchvision exit $?: $(grep -oE '"(mode|images_per_s|host_cpu_s_per_image)":("[^"]*"|[0-9.e-]*)' "$out/torchvision.jsonl" | paste -sd' ')"
tar czf "$out/details.tgz" -C "$x" --exclude=photos --exclude='jpeg-*' . 2>/dev/null
say "done"

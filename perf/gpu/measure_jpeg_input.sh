#!/usr/bin/env bash
# Owns the measurement of JPEG input on a GPU host (about 6-7 minutes on an H200, an estimate; not yet run): the
# loader after perf/results/2026-11-28-gpu-jpeg.md's profile (each decoding thread reads and decodes the samples it
# claims), alone on 8 cores (ringtrain input-bench), with data.decode = cpu and = gpu (nvJPEG through the backend,
# the loader threads only reading), for photos as they are and stored with a shorter side of 256; then ResNet-50 bf16
# batch 256 from those shards with the rank held to 8 cores, decoded on the GPU (both stores) and on the CPU
# (side256), against synthetic tensors (issue 37's target: >= 95 % of the synthetic rate). Needs ringtrain (built
# with nvJPEG) in .gpurt/bin and, where the host lacks Open MPI or HDF5, the portable runtime of
# perf/gpu/pack_carried.sh in .gpurt/.
# OUT_DIR gets summary.txt, input.jsonl, runs.jsonl, details.tgz.
#   bash perf/gpu/measure_jpeg_input.sh [OUT_DIR]      (default: $OUT)
set -u
cd "$(dirname "$0")/../.."
out=${1:-${OUT:?usage: measure_jpeg_input.sh OUT_DIR (or set OUT)}}
mkdir -p "$out"
x=$(mktemp -d)
source perf/gpu/carried.sh
unpack_carried
say() { echo "[jpeg_input $(date +%T)] $*" | tee -a "$out/summary.txt"; }
bin=${BIN:-.gpurt/bin}  # the binaries: .gpurt/bin as packed, or e.g. build/bin on a host that built them
nvidia-smi -L | tee -a "$out/summary.txt"
pin=""; command -v taskset >/dev/null && pin="taskset -c 0-7"
python3 scripts/make_jpeg_folder.py --out "$x/photos" --classes 1000 --per-class 11 --test-per-class 1 \
  --workers "$(nproc)" >"$x/make_jpeg_folder.log" 2>&1 || say "make_jpeg_folder failed"
for store in side256:256 original:0; do
  name=${store%%:*} side=${store#*:}
  rt "$bin/ringtrain" prepare images --source "$x/photos/train" --test-source "$x/photos/val" --size 224 \
    --store jpeg --max-side "$side" --shards 16 --out "$x/jpeg-$name" >"$x/prepare-$name.log" 2>"$x/prepare-$name.err"
  say "prepare $name exit $?"
  for decode in cpu gpu; do
    rt timeout 40 $pin "$bin/ringtrain" input-bench jobs/resnet50_synthetic.toml --set data.train="$x/jpeg-$name/train" \
      --set data.test="$x/jpeg-$name/test" --set data.augment=resized_crop_flip --set data.decode=$decode \
      --threads 8 --batches 16 --warmup 2 2>>"$x/input-bench.err" |
      sed "s/^{/{\"store\":\"$name\",\"cores\":8,/" >>"$out/input.jsonl"
    say "input-bench $name decode=$decode, 8 threads on 8 cores: $(tail -1 "$out/input.jsonl" | grep -oE '"images_per_s":[0-9]*')"
  done
done
rt "$bin/ringtrain" prepare synthetic --shape 3,224,224 --classes 1000 --samples $((256 * 41)) --test-samples 256 \
  --shards 8 --out "$x/s224" >"$x/prepare-s224.log" 2>&1 || say "prepare synthetic failed"
resnet() {  # name data [--set k=v ...]
  local name=$1 data=$2; shift 2
  rt timeout 100 $pin mpirun -np 1 --bind-to none "$bin/ringtrain" train jobs/resnet50_synthetic.toml \
    --set run.device=cuda --set train.precision=bf16 --set data.train="$data/train" --set data.test="$data/test" \
    --set run.dir="$x/r-$name" --set train.max_steps_per_epoch=40 --set run.timing_warmup_steps=10 \
    --set data.loader_threads=8 --set run.checkpoint_every=0 "$@" >"$x/r-$name.log" 2>&1
  local rc=$? epoch
  epoch=$(grep '"kind":"epoch"' "$x/r-$name/metrics.jsonl" 2>/dev/null | tail -1)
  echo "{\"run\":\"$name\",\"exit\":$rc,\"epoch\":${epoch:-null}}" >>"$out/runs.jsonl"
  say "resnet50 $name exit $rc: $(grep -oE '"(steady_samples_per_s|data_wait_fraction)":[0-9.e-]*' <<<"$epoch" | paste -sd' ')"
  grep -m1 "warning" "$x/r-$name.log" | cut -c1-200 | tee -a "$out/summary.txt"
}
resnet jpeg-side256-gpu "$x/jpeg-side256" --set data.augment=resized_crop_flip --set data.decode=gpu
resnet jpeg-original-gpu "$x/jpeg-original" --set data.augment=resized_crop_flip --set data.decode=gpu
resnet synthetic "$x/s224"
resnet jpeg-side256-cpu "$x/jpeg-side256" --set data.augment=resized_crop_flip --set data.decode=cpu
tar czf "$out/details.tgz" -C "$x" --exclude='*.h5' --exclude=photos --exclude=s224 . 2>/dev/null
say "done"

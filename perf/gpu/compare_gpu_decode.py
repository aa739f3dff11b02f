#!/usr/bin/env python3
"""Owns the GPU-side JPEG input peer: images/s, and host CPU seconds per image, of torchvision's nvJPEG path
(decode on the GPU, then a random-resized crop to 224 + flip there), which ringtrain's CPU JPEG pipeline is held
against on a GPU host. NVIDIA DALI would be the stronger peer, but its 199 MB wheel is not on every GPU host;
torchvision's is in the usual PyTorch image.

  perf/gpu/compare_gpu_decode.py DIR [--images 4096] [--batch 256] [--modes gpu_decode gpu_decode_rrc
      cpu_decode_rrc] [--device cuda|cpu] [--cpu-threads 1] [--warmup 3] [--min-batches 10] [--min-seconds 5]
      [--seed 0] [--out F.jsonl]

DIR: a folder from scripts/make_jpeg_folder.py (DIR/train/<class>/<i>.jpg) or any ImageFolder tree. Up to --images
files (a seeded shuffle) are read into memory once, as uint8 tensors, and cycled through in batches of --batch:

  gpu_decode      decode_jpeg(list of the batch's bytes, mode=RGB, device) only: one batched nvJPEG call
                  (torchvision >= 0.19; its hardware decoder where the GPU has one, A100/H100)
  gpu_decode_rrc  the same decode, then per image RandomResizedCrop(224, scale (0.08, 1), ratio (3/4, 4/3)),
                  bilinear without antialias, and a random horizontal flip, all on the device; stacked into one
                  uint8 N x 3 x 224 x 224 batch left on the device
  cpu_decode_rrc  the same pipeline with decode_jpeg on the CPU (libjpeg-turbo, full decode) and the crop on the
                  CPU, with torch.set_num_threads(--cpu-threads): the reference

--warmup batches are not timed; then whole batches until both --min-batches and --min-seconds are reached, with
torch.cuda.synchronize() before each clock reading. host_cpu_s_per_image is this process's CPU time (all its
threads: nvJPEG's host-side Huffman stage, the driver, the Python loop) per image: what GPU decode leaves of the
host cores' work. --device cpu runs the gpu_* modes' code on the CPU (a logic check here; its rows say
"device": "cpu"). One JSON line per mode on stdout, appended to --out; a mode that cannot run is a row with
"status": "skipped" or "failed" and the reason, never a number.
"""
import argparse
import itertools
import json
import math
import os
import random
import sys
import time

import torch
import torchvision
from torchvision.io import ImageReadMode, decode_jpeg, read_file

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from compare_input_pipeline import image_files  # noqa: E402  (the same file list and shuffle as the CPU peers)

try:  # torchvision >= 0.15 (0.26 on the GPU machine)
    from torchvision.transforms.v2.functional import resized_crop
except ImportError:  # Debian's 0.14, where this script is checked
    from torchvision.transforms.functional import resized_crop

SIZE = 224
SCALE, RATIO = (0.08, 1.0), (3 / 4, 4 / 3)
MODES = ("gpu_decode", "gpu_decode_rrc", "cpu_decode_rrc")
# A list of images in one decode_jpeg call (one nvJPEG batch) came with torchvision 0.19; before, one call each.
BATCHED = tuple(int(part) for part in torchvision.__version__.split("+")[0].split(".")[:2]) >= (0, 19)


def rrc_params(height, width, rng):
    """torchvision's RandomResizedCrop.get_params (10 tries, then the centre crop clamped to RATIO), drawn from
    Python's random: the same crops on every torchvision version, no torch RNG call per draw."""
    area = height * width
    log_ratio = (math.log(RATIO[0]), math.log(RATIO[1]))
    for _ in range(10):
        target = area * rng.uniform(*SCALE)
        aspect = math.exp(rng.uniform(*log_ratio))
        w, h = int(round(math.sqrt(target * aspect))), int(round(math.sqrt(target / aspect)))
        if 0 < w <= width and 0 < h <= height:
            return rng.randint(0, height - h), rng.randint(0, width - w), h, w
    ratio = width / height
    if ratio < RATIO[0]:
        w, h = width, int(round(width / RATIO[0]))
    elif ratio > RATIO[1]:
        w, h = int(round(height * RATIO[1])), height
    else:
        w, h = width, height
    return (height - h) // 2, (width - w) // 2, h, w


def decode(batch, device):
    if BATCHED:
        return decode_jpeg(batch, mode=ImageReadMode.RGB, device=device)
    return [decode_jpeg(data, mode=ImageReadMode.RGB, device=device) for data in batch]


def crop_flip(images, rng):
    """Per image (sizes differ): crop + resize to 224 (on the image's device; for uint8 on CUDA torchvision
    resizes in float and rounds back), flip half of them (what horizontal_flip does: flip(-1)); one uint8 batch."""
    out = []
    for image in images:
        top, left, h, w = rrc_params(image.shape[-2], image.shape[-1], rng)
        crop = resized_crop(image, top, left, h, w, [SIZE, SIZE], antialias=False)
        out.append(crop.flip(-1) if rng.random() < 0.5 else crop)
    return torch.stack(out)


def unavailable(mode, device, sample):
    """Why a mode cannot run here (a skip), or None."""
    if mode == "cpu_decode_rrc" or device == "cpu":
        return None
    if not torch.cuda.is_available():
        return "torch.cuda.is_available() is False"
    try:
        decode_jpeg(sample, mode=ImageReadMode.RGB, device=device)
    except Exception as error:  # torchvision without nvJPEG says so here
        return f"decode_jpeg(device={device!r}): {type(error).__name__}: {error}".splitlines()[0][:300]
    return None


def measure(mode, device, data, args):
    """Times whole batches of `mode`; returns (images, wall seconds, process CPU seconds)."""
    rng = random.Random(args.seed)
    pool = data * math.ceil(args.batch / len(data))  # fewer files than a batch: repeat them
    batches = itertools.cycle([pool[i:i + args.batch] for i in range(0, len(pool) - args.batch + 1, args.batch)])
    sync = torch.cuda.synchronize if device != "cpu" else (lambda: None)

    def step():
        images = decode(next(batches), device)
        return images if mode == "gpu_decode" else crop_flip(images, rng)

    for _ in range(args.warmup):
        step()
    sync()
    count, start, cpu_start = 0, time.perf_counter(), time.process_time()
    while count < args.min_batches or time.perf_counter() - start < args.min_seconds:
        out = step()  # noqa: F841  (held until the next batch replaces it, as a training loop would)
        count += 1
    sync()
    return count * args.batch, time.perf_counter() - start, time.process_time() - cpu_start


def run_mode(mode, data, args):
    device = "cpu" if mode == "cpu_decode_rrc" else args.device
    row = {"impl": "torchvision_nvjpeg", "mode": mode, "batch": args.batch, "torch": torch.__version__,
           "torchvision": torchvision.__version__}
    reason = unavailable(mode, device, data[0])
    if reason:
        return {**row, "status": "skipped", "reason": reason, "device": device}
    try:
        if device != "cpu":
            torch.cuda.reset_peak_memory_stats()
        images, seconds, cpu_seconds = measure(mode, device, data, args)
    except Exception as error:  # an out-of-memory or nvJPEG error mid-run: recorded, never a number
        return {**row, "status": "failed", "reason": f"{type(error).__name__}: {error}".splitlines()[0][:300],
                "device": device}
    row.update(images_per_s=round(images / seconds, 1), host_cpu_s_per_image=round(cpu_seconds / images, 7),
               images=images, seconds=round(seconds, 3),
               device=torch.cuda.get_device_name() if device != "cpu" else "cpu",
               decode_call="one list per batch" if BATCHED else "one call per image (torchvision < 0.19)",
               resize="bilinear, antialias off" if mode != "gpu_decode" else None,
               cpu_threads=torch.get_num_threads(), distinct_images=len(data), warmup_batches=args.warmup)
    if device != "cpu":
        row["peak_device_mib"] = round(torch.cuda.max_memory_allocated() / 2**20)
    if mode != "cpu_decode_rrc" and device == "cpu":
        row["note"] = "--device cpu: the GPU mode's code run on the CPU, a logic check, not a GPU number"
    return row


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("folder")
    p.add_argument("--images", type=int, default=4096, help="files read into memory (at most)")
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES))
    p.add_argument("--device", default="cuda", help="where the gpu_* modes run: cuda (cuda:N) or cpu")
    p.add_argument("--cpu-threads", type=int, default=1, help="torch.set_num_threads for the CPU work")
    p.add_argument("--warmup", type=int, default=3, help="untimed batches per mode")
    p.add_argument("--min-batches", type=int, default=10)
    p.add_argument("--min-seconds", type=float, default=5.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", help="JSON lines file the rows are appended to")
    return p.parse_args()


def main():
    args = parse_args()
    files = image_files(args.folder, args.seed)[:args.images]
    if not files:
        sys.exit(f"no .jpg under {args.folder}/train/*/ or {args.folder}/*/ (make one: scripts/make_jpeg_folder.py)")
    data = [read_file(path) for path in files]  # bytes in memory once: no mode is timed reading files
    torch.set_num_threads(args.cpu_threads)
    for mode in args.modes:
        row = run_mode(mode, data, args)
        print(json.dumps(row), flush=True)
        if args.out:
            with open(args.out, "a") as out:
                out.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()

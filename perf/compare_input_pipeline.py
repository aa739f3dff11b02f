#!/usr/bin/env python3
"""Owns the CPU input-pipeline peers: images/s per core of the random-resized-crop input pipelines that
tf.data and torchvision users run on ImageNet-sized JPEGs, the rates ringtrain's JPEG pipeline is held against
(target: ringtrain >= 2x tf.data's decode_and_crop per core).

  perf/compare_input_pipeline.py DIR [--threads 1 [2 ...]] [--impls tf_data torchvision_pil torchvision_io]
      [--no-decode-only] [--warmup 50] [--min-images 1000] [--min-seconds 10] [--batch 64] [--out F.jsonl]
      [--tf-python .venv-compare/bin/python3] [--torch-python /usr/bin/python3]

DIR is a folder made by scripts/make_jpeg_folder.py (its train/*/*.jpg are cycled through in a fixed shuffled
order) or any ImageFolder tree. Per impl and thread count, a child process of the impl's interpreter pins itself
with os.sched_setaffinity to `threads` of the allowed cores before importing its framework, so its thread pools
see only those, then runs:

  tf_data          read_file -> extract_jpeg_shape -> sample_distorted_bounding_box (area 0.08-1, aspect 3/4-4/3,
                   10 attempts, whole image as the box, min_object_covered 0.1 as TF's official ImageNet
                   preprocessing) -> decode_and_crop_jpeg(channels=3) -> resize 224x224 bilinear -> random flip ->
                   cast uint8; map(num_parallel_calls=threads) -> batch -> prefetch; intra/inter-op threads and the
                   tf.data private pool = threads
  torchvision_pil  what ImageFolder does: PIL Image.open + convert("RGB") (full decode, no draft) ->
                   RandomResizedCrop(224) (PIL bilinear, antialiased) -> RandomHorizontalFlip -> PILToTensor (uint8)
  torchvision_io   torchvision.io.read_file + decode_jpeg(mode=RGB) (full decode to a uint8 tensor) ->
                   RandomResizedCrop(224) (tensor bilinear, antialias as the installed version defaults) ->
                   RandomHorizontalFlip
  torchvision rows: torch.set_num_threads(1), a DataLoader of batch --batch (default collate: the stack into a
                   batch), num_workers 0 at 1 thread (all in the one pinned process), else `threads` workers

and, unless --no-decode-only, each impl's full decode alone (no crop, no resize) for reference. All files are
read once beforehand, so every peer reads from the page cache. The first --warmup images are not timed; then
whole batches are timed until both --min-images and --min-seconds are reached (the pipeline is the bottleneck,
so its prefetch buffer is as full at the end as at the start). One JSON line per row on stdout (and --out); a
peer that cannot run is a row with "status": "not run" and the reason, never a number.
"""
import argparse
import glob
import json
import math
import os
import random
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
IMPLS = ("tf_data", "torchvision_pil", "torchvision_io")
CROP = "decode_and_crop+resize+flip"
DECODE = "decode_only"
SIZE = 224
# What each row's pipeline really does, in its record: decoders and resizers differ in work done.
NOTES = {
    "tf_data": {CROP: "libjpeg-turbo partial decode of the crop window (TensorFlow's bundled); resize bilinear "
                      "without antialias; float32 -> uint8",
                DECODE: "tf.io.decode_jpeg(channels=3), whole image"},
    "torchvision_pil": {CROP: "PIL full decode (no draft), crop, PIL bilinear resize (antialiased); uint8 CHW",
                        DECODE: "PIL Image.open + convert('RGB'), whole image"},
    "torchvision_io": {CROP: "torchvision.io.decode_jpeg full decode, tensor crop + bilinear resize (the installed "
                             "version's default antialias); uint8 CHW",
                       DECODE: "torchvision.io.decode_jpeg(mode=RGB), whole image"},
}


def image_files(folder, seed):
    files = sorted(glob.glob(os.path.join(folder, "train", "*", "*.jpg")) or
                   glob.glob(os.path.join(folder, "*", "*.jpg")))
    random.Random(seed).shuffle(files)
    return files


def pin(threads):
    """Pins this process (and the threads and processes it starts later) to the first `threads` allowed cores."""
    allowed = sorted(os.sched_getaffinity(0))
    if threads > len(allowed):
        raise SystemExit(f"--threads {threads} but only {len(allowed)} cores are allowed")
    os.sched_setaffinity(0, allowed[:threads])
    return allowed[:threads]


def timed(batches, batch, warmup, min_images, min_seconds):
    """Consumes the iterator of batches: warm-up batches untimed, then until both minimums are reached."""
    for _ in range(math.ceil(warmup / batch)):
        next(batches)
    images, start, cpu_start = 0, time.perf_counter(), time.process_time()
    while images < min_images or time.perf_counter() - start < min_seconds:
        images += len(next(batches))
    return images, time.perf_counter() - start, time.process_time() - cpu_start


def run_tf(args, files):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf
    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    tf.config.threading.set_inter_op_parallelism_threads(args.threads)

    def crop(path):
        data = tf.io.read_file(path)
        begin, size, _ = tf.image.sample_distorted_bounding_box(
            tf.image.extract_jpeg_shape(data), bounding_boxes=tf.zeros([1, 0, 4]), min_object_covered=0.1,
            aspect_ratio_range=(3 / 4, 4 / 3), area_range=(0.08, 1.0), max_attempts=10,
            use_image_if_no_bounding_boxes=True)
        offset_y, offset_x, _ = tf.unstack(begin)
        height, width, _ = tf.unstack(size)
        image = tf.image.decode_and_crop_jpeg(data, tf.stack([offset_y, offset_x, height, width]), channels=3)
        image = tf.image.resize(image, [SIZE, SIZE], method="bilinear")
        return tf.cast(tf.image.random_flip_left_right(image), tf.uint8)

    def decode(path):
        # Its shape, not the pixels, leaves the map: whole images of different sizes cannot be batched, and one
        # element at a time would time Python's iteration. The shape needs the decode, so the decode runs.
        return tf.shape(tf.io.decode_jpeg(tf.io.read_file(path), channels=3))

    options = tf.data.Options()
    options.threading.private_threadpool_size = args.threads
    options.threading.max_intra_op_parallelism = 1
    dataset = (tf.data.Dataset.from_tensor_slices(files).repeat()
               .map(crop if args.pipeline == CROP else decode, num_parallel_calls=args.threads)
               .batch(args.batch).prefetch(1).with_options(options))
    batches = (b for b in dataset)
    return timed(batches, args.batch, args.warmup, args.min_images, args.min_seconds), f"tensorflow {tf.__version__}"


class TorchvisionImages:
    """files[k % len(files)]: a DataLoader-ready dataset as long as any timing needs."""

    def __init__(self, files, impl, pipeline):
        import torchvision.transforms as T
        self.files, self.impl, self.pipeline = files, impl, pipeline
        if impl == "torchvision_pil":
            self.transform = T.Compose([T.RandomResizedCrop(SIZE), T.RandomHorizontalFlip(), T.PILToTensor()])
        else:
            self.transform = T.Compose([T.RandomResizedCrop(SIZE), T.RandomHorizontalFlip()])

    def __len__(self):
        return 1 << 40

    def __getitem__(self, k):
        import torch
        path = self.files[k % len(self.files)]
        if self.impl == "torchvision_pil":
            from PIL import Image
            with open(path, "rb") as f:
                image = Image.open(f).convert("RGB")
        else:
            from torchvision.io import ImageReadMode, decode_jpeg, read_file
            image = decode_jpeg(read_file(path), mode=ImageReadMode.RGB)
        if self.pipeline == DECODE:
            # As in tf_data's decode-only row: the decode's shape, so the batch is small.
            return torch.tensor(image.size if self.impl == "torchvision_pil" else tuple(image.shape))
        return self.transform(image)


def run_torchvision(args, files):
    import PIL
    import torch
    import torchvision
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    loader = torch.utils.data.DataLoader(TorchvisionImages(files, args.impl, args.pipeline), batch_size=args.batch,
                                         num_workers=0 if args.threads == 1 else args.threads)
    version = f"torch {torch.__version__}, torchvision {torchvision.__version__}"
    if args.impl == "torchvision_pil":
        version += f", Pillow {PIL.__version__}"
    version += f", {libjpeg_package()}"  # the system libjpeg-turbo both decode with (TensorFlow bundles its own)
    return timed(iter(loader), args.batch, args.warmup, args.min_images, args.min_seconds), version


def child(args):
    """One row, measured in this (pinned) process; prints its JSON line."""
    cores = pin(args.threads)
    files = image_files(args.folder, args.seed)
    if not files:
        raise SystemExit(f"no .jpg under {args.folder}/train/*/ or {args.folder}/*/")
    run = run_tf if args.impl == "tf_data" else run_torchvision
    (images, seconds, cpu_seconds), version = run(args, files)
    # This process's CPU time covers all the work only where no DataLoader worker processes do it. On a shared
    # machine it is the rate a quiet core would give; images_per_s is what the pinned cores gave.
    in_process = args.impl == "tf_data" or args.threads == 1
    print(json.dumps({"impl": args.impl, "threads": args.threads, "images_per_s": round(images / seconds, 2),
                      "images": images, "seconds": round(seconds, 3), "version": version,
                      "pipeline": args.pipeline, "notes": NOTES[args.impl][args.pipeline],
                      "images_per_cpu_s": round(images / cpu_seconds, 2) if in_process and cpu_seconds > 0 else None,
                      "cpu_seconds": round(cpu_seconds, 3) if in_process else None, "cores": cores,
                      "batch": args.batch, "warmup_images": args.warmup, "files": len(files)}), flush=True)


def not_run(impl, threads, pipeline, reason):
    return {"impl": impl, "threads": threads, "pipeline": pipeline, "status": "not run", "reason": reason}


def measure(args, impl, threads, pipeline):
    python = args.tf_python if impl == "tf_data" else args.torch_python
    if not os.path.exists(python):
        return not_run(impl, threads, pipeline, f"{python} does not exist (scripts/install_deps.sh --comparison)")
    command = [python, os.path.abspath(__file__), args.folder, "--child", impl, "--threads", str(threads),
               "--pipeline", pipeline, "--warmup", str(args.warmup), "--min-images", str(args.min_images),
               "--min-seconds", str(args.min_seconds), "--batch", str(args.batch), "--seed", str(args.seed)]
    done = subprocess.run(command, capture_output=True, text=True)
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not rows:
        reason = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return not_run(impl, threads, pipeline, f"exit {done.returncode}: {reason}")
    return rows[-1]


def libjpeg_package():
    done = subprocess.run(["dpkg-query", "-W", "-f", "${Package} ${Version}", "libjpeg62-turbo"],
                          capture_output=True, text=True)
    return done.stdout if done.returncode == 0 else "libjpeg62-turbo: not a Debian package here"


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("folder")
    p.add_argument("--threads", type=int, nargs="+", default=[1])
    p.add_argument("--impls", nargs="+", choices=IMPLS, default=list(IMPLS))
    p.add_argument("--no-decode-only", action="store_true", help="skip the decode-only reference rows")
    p.add_argument("--warmup", type=int, default=50)
    p.add_argument("--min-images", type=int, default=1000)
    p.add_argument("--min-seconds", type=float, default=10.0)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--repeats", type=int, default=1, help="rows per config, interleaved across configs")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out")
    p.add_argument("--tf-python", default=os.path.join(ROOT, ".venv-compare", "bin", "python3"))
    p.add_argument("--torch-python", default="/usr/bin/python3")
    p.add_argument("--child", choices=IMPLS, dest="impl", help=argparse.SUPPRESS)
    p.add_argument("--pipeline", choices=(CROP, DECODE), default=CROP, help=argparse.SUPPRESS)
    return p.parse_args()


def main():
    args = parse_args()
    if args.impl:
        args.threads = args.threads[0]
        return child(args)
    files = image_files(args.folder, args.seed)
    if not files:
        sys.exit(f"no .jpg under {args.folder}/train/*/ or {args.folder}/*/ (make one: scripts/make_jpeg_folder.py)")
    for path in files:  # into the page cache, so no peer is timed reading the disk
        with open(path, "rb") as f:
            f.read()
    pipelines = [CROP] if args.no_decode_only else [CROP, DECODE]
    out = open(args.out, "w") if args.out else None
    configs = [(threads, impl, pipeline) for threads in args.threads for impl in args.impls for pipeline in pipelines]
    rows = []
    # Repeats interleaved, so a load that comes and goes on this shared machine hits every config alike.
    for repeat in range(args.repeats):
        for threads, impl, pipeline in configs:
            row = {**measure(args, impl, threads, pipeline), "repeat": repeat,
                   "load_1min_at_start": round(os.getloadavg()[0], 2), "folder": os.path.abspath(args.folder)}
            rows.append(row)
            print(json.dumps(row), flush=True)
            if out:
                out.write(json.dumps(row) + "\n")
                out.flush()
    if out:
        out.close()
    summary(rows, configs)


def summary(rows, configs):
    """Median (and range) per config over its repeats, to stderr: the JSON lines stay the record."""
    print("| impl | pipeline | threads | images/s (median, range) | per core | images per CPU-s |", file=sys.stderr)
    print("|---|---|---|---|---|---|", file=sys.stderr)
    for threads, impl, pipeline in configs:
        mine = [r for r in rows if (r["threads"], r["impl"], r["pipeline"]) == (threads, impl, pipeline)]
        rates = sorted(r["images_per_s"] for r in mine if "images_per_s" in r)
        if not rates:
            print(f"| {impl} | {pipeline} | {threads} | not run: {mine[-1]['reason']} | | |", file=sys.stderr)
            continue
        cpu = [r["images_per_cpu_s"] for r in mine if r.get("images_per_cpu_s")]
        print(f"| {impl} | {pipeline} | {threads} | {statistics.median(rates):.1f} ({rates[0]:.1f}-{rates[-1]:.1f}) "
              f"| {statistics.median(rates) / threads:.1f} | {statistics.median(cpu):.1f} |" if cpu else
              f"| {impl} | {pipeline} | {threads} | {statistics.median(rates):.1f} ({rates[0]:.1f}-{rates[-1]:.1f}) "
              f"| {statistics.median(rates) / threads:.1f} | n/a (worker processes) |", file=sys.stderr)


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""Owns the synthetic ImageNet-like JPEG source: an ImageFolder tree DIR/train/<class>/<i>.jpg (and DIR/val/...
with --test-per-class) of photo-like images, for the JPEG input pipeline's benchmarks and tests where no ImageNet
is available.

  scripts/make_jpeg_folder.py --out DIR --classes C --per-class N [--test-per-class M] [--min-side 300]
      [--max-side 700] [--quality 90] [--seed 0] [--workers all cores] [--grayscale-every K] [--cmyk-every K]
      [--progressive-every K] [--png-every K] [--png-name png|jpg]

Each image: a smooth colour field, an oriented grating under a smooth envelope, a few filled shapes with hard
edges, band-limited texture and mild per-pixel noise; width and height each uniform in [min-side, max-side]. At
the defaults that encodes to about 60-150 KB, near ImageNet's ~110 KB, so sizes and decode costs are realistic.
A class is its dominant hue, its grating orientation and its shape kind (jittered per image): all three survive a
random-resized crop of 8-100 % of the area and a horizontal flip (orientations are drawn from [0, 90] degrees,
and a flip maps theta to 180 - theta, which no other class uses), so a small CNN can learn them.

Variants for decoder tests, each off by default, by the image's running number n over train then val (every K-th:
n % K == K - 1): grayscale (mode L), CMYK (Adobe, inverted, as Pillow writes it), progressive, PNG (named .png,
or .jpg with --png-name jpg, as ImageNet's one PNG is). PNG takes precedence over CMYK, CMYK over grayscale;
progressive applies to any JPEG.

The same arguments write the same files byte for byte (every image's random stream depends only on --seed, its
split, class and index; not on --workers). Debian's python3-pil and python3-numpy only; run with /usr/bin/python3
where another python3 comes first on PATH.
"""
import argparse
import json
import math
import multiprocessing
import os
import statistics
import sys
import time

try:
    import numpy as np
    from PIL import Image, ImageDraw
except ImportError as error:
    sys.exit(f"make_jpeg_folder.py needs Debian's python3-numpy and python3-pil ({error}); run it with "
             "/usr/bin/python3, or apt-get install python3-numpy python3-pil")

SPLITS = ("train", "val")
SHAPE_KINDS = ("ellipse", "rectangle", "triangle", "star")
GOLDEN = 0.6180339887498949   # class c's hue and angle step by irrational fractions: neighbours end up far apart
PLASTIC = 0.7548776662466927
# Detail, in 0-255 levels: most of a photo's JPEG bytes are here. Tuned so the defaults encode to ~90 KB/image
# (~0.35 B/pixel at quality 90); more per-pixel noise would buy bytes with a look no camera gives.
COARSE_TEXTURE = 0.2    # blob-sized texture, a random grid at 1/6 resolution (gain on a byte - 128)
FINE_TEXTURE = 0.35     # grain-sized texture at 1/2 resolution, strong in some regions and faint in others
NOISE_SIGMA = 4.0       # per-pixel sensor noise, independent per channel
# Standard normal quantiles at the midpoints of 256 equal-probability bins, times the noise: one random byte, one
# noise sample, a fifth of the cost of standard_normal.
NOISE_BY_BYTE = np.array([statistics.NormalDist().inv_cdf((b + 0.5) / 256) * NOISE_SIGMA for b in range(256)],
                         dtype=np.float32)


def class_signature(seed, c):
    """The class's hue (0-1), grating angle (degrees in [0, 90]) and shape kind: what a model can learn."""
    offset = np.random.default_rng([seed, 1 << 20]).random()
    hue = (offset + c * GOLDEN) % 1.0
    angle = ((c * PLASTIC) % 1.0) * 90.0
    return hue, angle, SHAPE_KINDS[c % len(SHAPE_KINDS)]


def hsv_to_rgb(h, s, v):
    """Vectorised HSV (all 0-1) to RGB (0-255, float32), for arrays of equal shape."""
    i = np.floor(h * 6.0).astype(np.int64) % 6
    f = h * 6.0 - np.floor(h * 6.0)
    p, q, t = v * (1 - s), v * (1 - f * s), v * (1 - (1 - f) * s)
    r = np.choose(i, [v, q, p, p, t, v])
    g = np.choose(i, [t, v, v, q, p, p])
    b = np.choose(i, [p, p, t, v, v, q])
    return (np.stack([r, g, b], axis=-1) * 255.0).astype(np.float32)


def upsampled(grid, w, h):
    """A uint8 grid resized bicubically to h x w, as float32: smooth structure at the grid's scale."""
    return np.asarray(Image.fromarray(grid).resize((w, h), Image.BICUBIC), dtype=np.float32)


def random_grid(rng, rows, cols):
    return rng.integers(0, 256, size=(max(2, rows), max(2, cols)), dtype=np.uint8)


def colour_field(rng, w, h, hue):
    """Low-frequency colour: most cells near the class hue, the rest of any hue and paler, so the class hue
    dominates any large crop without the image being flat."""
    cells = int(rng.integers(3, 6))
    own = rng.random((cells, cells)) < 0.8
    hues = np.where(own, hue + rng.normal(0, 0.03, (cells, cells)), rng.random((cells, cells))) % 1.0
    sat = np.where(own, rng.uniform(0.4, 0.85, (cells, cells)), rng.uniform(0.1, 0.4, (cells, cells)))
    val = rng.uniform(0.35, 0.95, (cells, cells))
    return upsampled(hsv_to_rgb(hues, sat, val).clip(0, 255).astype(np.uint8), w, h)


def grating(rng, w, h, angle_deg):
    """An oriented sinusoid under a smooth envelope (added to all channels). sin(ax + by + phi) is expanded into
    outer products of 1-D arrays: a fraction of the cost of sin over every pixel."""
    theta = math.radians(angle_deg + rng.normal(0, 3.0))
    k = 2 * math.pi / rng.uniform(9.0, 30.0)
    phase = rng.uniform(0, 2 * math.pi)
    ax = k * math.cos(theta) * np.arange(w, dtype=np.float32)
    by = k * math.sin(theta) * np.arange(h, dtype=np.float32) + phase
    wave = np.sin(by)[:, None] * np.cos(ax)[None, :] + np.cos(by)[:, None] * np.sin(ax)[None, :]
    cells = int(rng.integers(2, 5))
    envelope = 0.35 + upsampled(random_grid(rng, cells, cells), w, h) * (0.65 / 255.0)
    return wave * envelope * rng.uniform(22.0, 40.0)


def shape_points(rng, kind, w, h):
    side = min(w, h)
    cx, cy = rng.uniform(0, w), rng.uniform(0, h)
    r = rng.uniform(0.08, 0.22) * side
    if kind in ("ellipse", "rectangle"):
        rx, ry = r * rng.uniform(0.6, 1.4), r * rng.uniform(0.6, 1.4)
        return [cx - rx, cy - ry, cx + rx, cy + ry]
    spin = rng.uniform(0, 2 * math.pi)
    if kind == "triangle":
        return [(cx + r * math.cos(spin + j * 2 * math.pi / 3), cy + r * math.sin(spin + j * 2 * math.pi / 3))
                for j in range(3)]
    return [(cx + (r if j % 2 == 0 else 0.45 * r) * math.cos(spin + j * math.pi / 5),
             cy + (r if j % 2 == 0 else 0.45 * r) * math.sin(spin + j * math.pi / 5)) for j in range(10)]


def draw_shapes(rng, image, kind, hue):
    """The class's own shapes in a colour near its complementary hue, and distractors of any kind and colour."""
    w, h = image.size
    shapes = [(kind, (hue + 0.5 + rng.normal(0, 0.04)) % 1.0) for _ in range(int(rng.integers(2, 5)))]
    shapes += [(SHAPE_KINDS[int(rng.integers(len(SHAPE_KINDS)))], rng.random()) for _ in range(int(rng.integers(1, 4)))]
    draw = ImageDraw.Draw(image)
    for j in rng.permutation(len(shapes)):
        shape_kind, shape_hue = shapes[j]
        fill = hsv_to_rgb(np.array(shape_hue), np.array(rng.uniform(0.4, 0.9)), np.array(rng.uniform(0.3, 1.0)))
        points = shape_points(rng, shape_kind, w, h)
        if shape_kind == "ellipse":
            draw.ellipse(points, fill=tuple(int(v) for v in fill))
        elif shape_kind == "rectangle":
            draw.rectangle(points, fill=tuple(int(v) for v in fill))
        else:
            draw.polygon(points, fill=tuple(int(v) for v in fill))


def synthesize(seed, split, c, i, min_side, max_side):
    """One photo-like RGB image of class c (a PIL image)."""
    rng = np.random.default_rng([seed, split, c, i])
    w, h = (int(v) for v in rng.integers(min_side, max_side + 1, size=2))
    hue, angle, kind = class_signature(seed, c)
    pixels = colour_field(rng, w, h, hue)
    pixels += grating(rng, w, h, angle)[:, :, None]
    image = Image.fromarray(pixels.clip(0, 255).astype(np.uint8))
    draw_shapes(rng, image, kind, hue)
    pixels = np.asarray(image, dtype=np.float32)
    cells = int(rng.integers(2, 5))
    fine_envelope = upsampled(random_grid(rng, cells, cells), w, h) * (FINE_TEXTURE / 255.0)
    detail = (upsampled(random_grid(rng, h // 6, w // 6), w, h) - 128.0) * COARSE_TEXTURE
    detail += (upsampled(random_grid(rng, h // 2, w // 2), w, h) - 128.0) * fine_envelope
    pixels += detail[:, :, None]
    pixels += NOISE_BY_BYTE[np.frombuffer(rng.bytes(h * w * 3), dtype=np.uint8)].reshape(h, w, 3)
    return Image.fromarray(pixels.clip(0, 255).astype(np.uint8))


def every(k, n):
    return k > 0 and n % k == k - 1


def write_one(task):
    """Writes one image; returns its path's byte size and its variant tag."""
    args, split, c, i, n = task
    image = synthesize(args.seed, split, c, i, args.min_side, args.max_side)
    folder = os.path.join(args.out, SPLITS[split], f"c{c:04d}")
    os.makedirs(folder, exist_ok=True)
    if every(args.png_every, n):
        path = os.path.join(folder, f"{i}.{args.png_name}")
        image.save(path, format="PNG", compress_level=6)
        return os.path.getsize(path), "png"
    tag = "rgb"
    if every(args.cmyk_every, n):
        image, tag = image.convert("CMYK"), "cmyk"
    elif every(args.grayscale_every, n):
        image, tag = image.convert("L"), "gray"
    progressive = every(args.progressive_every, n)
    path = os.path.join(folder, f"{i}.jpg")
    image.save(path, format="JPEG", quality=args.quality, progressive=progressive)
    return os.path.getsize(path), tag + ("+progressive" if progressive else "")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True)
    p.add_argument("--classes", type=int, required=True)
    p.add_argument("--per-class", type=int, required=True, help="train images per class")
    p.add_argument("--test-per-class", type=int, default=0, help="val images per class (DIR/val); 0: no val")
    p.add_argument("--min-side", type=int, default=300)
    p.add_argument("--max-side", type=int, default=700)
    p.add_argument("--quality", type=int, default=90)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--workers", type=int, default=len(os.sched_getaffinity(0)))
    for variant in ("grayscale", "cmyk", "progressive", "png"):
        p.add_argument(f"--{variant}-every", type=int, default=0, metavar="K", help=f"every K-th image {variant}")
    p.add_argument("--png-name", choices=("png", "jpg"), default="png",
                   help="the PNG variant's file suffix (jpg: a PNG misnamed, as ImageNet has one)")
    args = p.parse_args()
    if args.classes < 1 or args.per_class < 0 or args.test_per_class < 0 or args.workers < 1:
        p.error("--classes and --workers must be >= 1, --per-class and --test-per-class >= 0")
    if not 8 <= args.min_side <= args.max_side:
        p.error("need 8 <= --min-side <= --max-side")
    if not 1 <= args.quality <= 100:
        p.error("--quality is 1-100")
    return args


def main():
    args = parse_args()
    counts = (args.per_class, args.test_per_class)
    tasks = [(args, split, c, i) for split in (0, 1) for c in range(args.classes) for i in range(counts[split])]
    tasks = [(*t, n) for n, t in enumerate(tasks)]
    os.makedirs(args.out, exist_ok=True)
    # How the folder was made, so a benchmark's record can name its input; no times in it: it stays byte-identical.
    with open(os.path.join(args.out, "make_jpeg_folder.json"), "w") as f:
        json.dump({k: v for k, v in vars(args).items() if k not in ("out", "workers")}, f, sort_keys=True)
        f.write("\n")
    start = time.monotonic()
    total_bytes, tags, done, next_report = 0, {}, 0, time.monotonic() + 5.0
    with multiprocessing.Pool(args.workers) as pool:
        for size, tag in pool.imap_unordered(write_one, tasks, chunksize=8):
            total_bytes += size
            tags[tag] = tags.get(tag, 0) + 1
            done += 1
            if time.monotonic() >= next_report or done == len(tasks):
                elapsed = time.monotonic() - start
                print(f"make_jpeg_folder: {done}/{len(tasks)} images, {total_bytes / 1e6:.1f} MB, "
                      f"{done / elapsed:.1f} images/s", flush=True)
                next_report = time.monotonic() + 5.0
    seconds = time.monotonic() - start
    summary = {"images": done, "bytes": total_bytes, "mean_kb": round(total_bytes / max(done, 1) / 1000, 1),
               "seconds": round(seconds, 2), "images_per_s": round(done / seconds, 1) if seconds > 0 else None,
               "workers": args.workers, "kinds": dict(sorted(tags.items())), "out": args.out}
    print("make_jpeg_folder: done " + json.dumps(summary), flush=True)


if __name__ == "__main__":
    main()

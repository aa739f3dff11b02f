#!/usr/bin/python3
"""Owns writing Debian's Fashion-MNIST IDX files out as a class-per-subfolder image tree, as a user's export would be:
OUT/{train,test}/<label>-<name>/<index>.<png|jpg>, each item as it is (PNG, lossless) or upscaled to SIDE x SIDE
(JPEG, quality 90: photos larger than the training size). Uses Debian's python3-numpy and python3-pil.
Usage: write_fashion_mnist_folder.py SOURCE_DIR OUT png|jpeg [SIDE]"""
import gzip
import os
import sys

import numpy as np
from PIL import Image

NAMES = ["T-shirt", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle-boot"]


def main(src, out, kind, side):
    for split, prefix in (("train", "train"), ("test", "t10k")):
        with gzip.open(f"{src}/{prefix}-images-idx3-ubyte.gz") as f:
            images = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 28, 28)
        with gzip.open(f"{src}/{prefix}-labels-idx1-ubyte.gz") as f:
            labels = np.frombuffer(f.read(), np.uint8, offset=8)
        for c, name in enumerate(NAMES):
            os.makedirs(f"{out}/{split}/{c}-{name}")
        for i, (image, label) in enumerate(zip(images, labels)):
            picture = Image.fromarray(image, "L")
            folder = f"{out}/{split}/{label}-{NAMES[label]}"
            if kind == "png":
                picture.save(f"{folder}/{i:05d}.png", compress_level=1)
            else:
                picture.resize((side, side), Image.BILINEAR).save(f"{folder}/{i:05d}.jpg", quality=90)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]) if len(sys.argv) > 4 else 28)

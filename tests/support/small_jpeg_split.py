#!/usr/bin/env python3
"""Small JPEG photos for the tests of encoded splits, and damage to one of their shards.

  small_jpeg_split.py photos DIR            3 classes x 40 photos, 30-46 x 32-47 px (under twice a 24 px sample's
                                            side: every crop needs the full DCT scale), in DIR/class<c>/
  small_jpeg_split.py split RINGTRAIN       those photos in ./photos, prepared by RINGTRAIN as a JPEG split of
                                            24 x 24 samples, 2 shards, a quarter held out, in ./data (log:
                                            ./prepare.log)
  small_jpeg_split.py damage SHARD ROWS HOW  ROWS ("all" or a sample number) of an encoded SHARD made bytes that
                                            fail their CRC-32C (HOW = crc) or that pass it and are no JPEG
                                            (HOW = undecodable)
"""
import math
import os
import subprocess
import sys


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
    return crc ^ 0xFFFFFFFF


def photos(folder):
    from PIL import Image
    for c in range(3):
        os.makedirs(f"{folder}/class{c}", exist_ok=True)
        for i in range(40):
            h, w = 30 + (i * 7) % 17, 32 + (i * 11) % 16
            img = Image.new("RGB", (w, h))
            img.putdata([(int(128 + 100 * math.sin((x + 9 * c) / (5.0 + c))), int(128 + 90 * math.cos(y / 6.0 + c)),
                          int(60 * c + (x * y) % 50)) for y in range(h) for x in range(w)])
            img.save(f"{folder}/class{c}/{i:03d}.jpg", quality=90)


def split(ringtrain):
    photos("photos")
    with open("prepare.log", "w") as log:
        done = subprocess.run([ringtrain, "prepare", "images", "--source", "photos", "--size", "24", "--store", "jpeg",
                               "--shards", "2", "--test-fraction", "0.25", "--out", "data"], stdout=log, stderr=log)
    if done.returncode != 0:
        sys.exit("FAIL: prepare: " + "".join(open("prepare.log").readlines()[-3:]))


def damage(shard, which, how):
    import h5py
    import numpy as np
    with h5py.File(shard, "r+") as h:
        offsets = h["encoded_offsets"][:]
        rows = range(len(offsets) - 1) if which == "all" else [int(which)]
        for row in rows:
            first, end = int(offsets[row]), int(offsets[row + 1])
            assert crc32c(h["encoded"][first:end].tobytes()) == int(h["sample_crc32c"][row]), "not the shard's CRC-32C"
            if how == "crc":
                h["encoded"][first + 20] = h["encoded"][first + 20] ^ 0x10
            elif how == "undecodable":
                bad = np.full(end - first, 0x33, np.uint8)
                h["encoded"][first:end] = bad
                h["sample_crc32c"][row] = crc32c(bad.tobytes())
            else:
                sys.exit(f"unknown damage {how!r}")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "photos":
        photos(sys.argv[2])
    elif len(sys.argv) == 3 and sys.argv[1] == "split":
        split(sys.argv[2])
    elif len(sys.argv) == 5 and sys.argv[1] == "damage":
        damage(*sys.argv[2:])
    else:
        sys.exit(__doc__)

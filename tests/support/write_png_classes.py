"""Writes a tiny image folder for prepare images without PIL: DIR/a and DIR/b, three 8x8 gray PNGs each, distinct.
Usage: write_png_classes.py DIR"""
import os
import struct
import sys
import zlib


def chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xffffffff)


def png(i):
    rows = b"".join(b"\0" + bytes((16 * y + x + 40 * i) % 256 for x in range(8)) for y in range(8))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 8, 8, 8, 0, 0, 0, 0)) +
            chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


for c in "ab":
    os.makedirs(os.path.join(sys.argv[1], c), exist_ok=True)
    for i in range(3):
        with open(os.path.join(sys.argv[1], c, f"{i}.png"), "wb") as f:
            f.write(png(i))

#!/usr/bin/env python3
"""Flips bits in the chunk index of an HDF5 file ringtrain wrote, as the hostile probe of issue 15 did, and holds
`ringtrain inspect` to the rule: a flip that changes any value a reader gets (h5py, over the same HDF5) is refused
with the data's exit code, naming a dataset whose values changed; a flip HDF5 itself cannot read past is refused
too. The 1.8 file format checksums object headers but not the v1 B-tree nodes ("TREE") that index a chunked
dataset's chunks: one flipped bit there and HDF5 reads a chunk as unallocated (the fill value, no error) or from
other bytes, and no filter checksum runs.

Usage: flip_chunk_index.py RINGTRAIN checkpoint FILE WORK
       flip_chunk_index.py RINGTRAIN split DIR WORK      (flips in every shard-*.h5 of DIR, one at a time)
Every TREE node of every file: the probe's flip (0x10 at +6, the entry count) and bits at seeded random offsets
in the node's header, first key (chunk size, filter mask, chunk offsets) and first child address. Prints one line
per refused or failed flip class and exits 1 if any flip broke the rule."""
import os
import random
import shutil
import subprocess
import sys

import h5py

SEED = 20261125
FLIPS_PER_NODE = 10


def values(path):
    """Every dataset's bytes by name, or None when HDF5 cannot read the file."""
    try:
        with h5py.File(path, "r") as f:
            return {name: f[name][()].tobytes() for name in f}
    except Exception:  # h5py raises OSError, KeyError, RuntimeError, ... for a file HDF5 refuses
        return None


def tree_nodes(data):
    """Offsets of the v1 B-tree nodes indexing raw-data chunks (node type 1)."""
    found, at = [], data.find(b"TREE")
    while at >= 0:
        if at + 5 < len(data) and data[at + 4] == 1:
            found.append(at)
        at = data.find(b"TREE", at + 1)
    return found


def flips(nodes, rng):
    for node in nodes:
        yield node, node + 6, 0x10
        for _ in range(FLIPS_PER_NODE):
            yield node, node + rng.randrange(6, 64), 1 << rng.randrange(8)


def main():
    binary, mode, target, work = sys.argv[1:5]
    exit_code = 5 if mode == "checkpoint" else 4
    files = [target] if mode == "checkpoint" else sorted(
        os.path.join(target, n) for n in os.listdir(target) if n.startswith("shard-") and n.endswith(".h5"))
    rng = random.Random(SEED)
    counts = {"changed": 0, "unreadable": 0, "unchanged": 0}
    failures = []
    for file in files:
        original = open(file, "rb").read()
        reference = values(file)
        nodes = tree_nodes(original)
        if not nodes or reference is None:
            failures.append(f"{file}: {len(nodes)} chunk-index nodes, readable: {reference is not None}")
            continue
        copy_dir = os.path.join(work, "flipped")
        shutil.rmtree(copy_dir, ignore_errors=True)
        if mode == "checkpoint":
            os.makedirs(copy_dir)
            flipped_file = os.path.join(copy_dir, os.path.basename(file))
            inspected = flipped_file
        else:
            shutil.copytree(target, copy_dir)
            flipped_file = os.path.join(copy_dir, os.path.basename(file))
            inspected = copy_dir
        for node, offset, bit in flips(nodes, rng):
            data = bytearray(original)
            data[offset] ^= bit
            with open(flipped_file, "wb") as out:
                out.write(data)
            got = values(flipped_file)
            run = subprocess.run([binary, "inspect", inspected], capture_output=True, text=True, timeout=60)
            said = run.stdout + run.stderr
            where = f"{os.path.basename(file)} TREE@{node}+{offset - node} ^0x{bit:02x}"
            if got is None:
                counts["unreadable"] += 1
                if run.returncode != exit_code:
                    failures.append(f"{where}: HDF5 cannot read it, inspect exit {run.returncode}: {said[-300:]}")
            elif got != reference:
                counts["changed"] += 1
                changed = [name for name in reference if got.get(name) != reference[name]]
                named = any(f"'{name}'" in said for name in changed)
                if run.returncode != exit_code or not named:
                    failures.append(f"{where}: changes {changed}, inspect exit {run.returncode}"
                                    f"{'' if named else ' not naming them'}: {said[-300:]}")
            else:
                counts["unchanged"] += 1
                if run.returncode not in (0, exit_code):
                    failures.append(f"{where}: unchanged values, inspect exit {run.returncode}: {said[-300:]}")
        with open(flipped_file, "wb") as out:
            out.write(original)
    print(f"{sum(counts.values())} flips in the chunk index of {len(files)} file(s): {counts['changed']} changed "
          f"what h5py reads, {counts['unreadable']} made the file unreadable to HDF5, {counts['unchanged']} changed "
          f"nothing; {len(failures)} not refused with exit {exit_code} (naming a changed dataset)")
    for failure in failures:
        print("  " + failure)
    return 1 if failures or counts["changed"] == 0 else 0


if __name__ == "__main__":
    sys.exit(main())

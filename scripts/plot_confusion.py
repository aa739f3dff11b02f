#!/usr/bin/env python3
"""Draws the confusion matrix of `ringtrain evaluate --out EVAL.json` as a PNG (matplotlib).

usage: plot_confusion.py EVAL.json [OUT.png]     (default: EVAL.png beside the JSON)
Rows are labels, columns predictions; each row is shaded by its share of the label's samples, and each cell
shows its count. Class names are the evaluation's (the shards' names, or "class i").
"""
import json
import pathlib
import sys

try:
    import matplotlib
except ImportError:
    sys.exit("plot_confusion.py needs matplotlib: install python3-matplotlib and run it with Debian's /usr/bin/python3")

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    source = pathlib.Path(sys.argv[1])
    out = pathlib.Path(sys.argv[2]) if len(sys.argv) == 3 else source.with_suffix(".png")
    e = json.loads(source.read_text())
    counts = e["confusion_matrix"]
    if counts is None:
        sys.exit(f"{source} holds no confusion matrix (evaluate keeps one up to 1000 classes); per_class has each "
                 "class's accuracy")
    names = [c["name"] for c in e["per_class"]]
    shares = [[v / max(sum(row), 1) for v in row] for row in counts]
    size = max(4.0, 0.55 * len(names) + 2)
    fig, ax = plt.subplots(figsize=(size + 1, size))
    image = ax.imshow(shares, cmap="Blues", vmin=0, vmax=1)
    ax.set_xticks(range(len(names)), names, rotation=60, ha="right")
    ax.set_yticks(range(len(names)), names)
    ax.set_xlabel("prediction")
    ax.set_ylabel("label")
    if len(names) <= 30:
        for t, row in enumerate(counts):
            for p, v in enumerate(row):
                ax.text(p, t, str(v), ha="center", va="center", fontsize=7,
                        color="white" if shares[t][p] > 0.5 else "black")
    ax.set_title(f"{pathlib.Path(e['checkpoint']).name}: accuracy {e['accuracy']:.4f} on {e['samples']} samples")
    fig.colorbar(image, ax=ax, label="share of the label's samples")
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    print(f"plot_confusion: {out}")


if __name__ == "__main__":
    main()

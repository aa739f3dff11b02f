#!/usr/bin/env bash
# Why synchronised batch norm exists (issue 40): jobs/fashion_mnist.toml's CNN (two batch norms) trained three ways on
# the same global batch of 32 — 8 ranks x 4 with each rank's own batch statistics, 8 ranks x 4 with
# dist.sync_batchnorm_group = 8, and 1 rank x 32 — with the same seed, learning rate (linear scaling from the job's
# 0.05 at 128) and steps; per epoch the test accuracy and loss of each, as epochs.jsonl (one line per run and epoch),
# a Markdown table and a plot. Epochs are cut to STEPS steps (default 300) so the study fits a few minutes on a
# small host; EPOCHS (default 4); BUILD_DIR the build folder whose bin/ringtrain runs (default build).
#   perf/sync_batchnorm_study.sh OUT_DIR
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(mkdir -p "$1" && cd "$1" && pwd)
bin=$(realpath "${BUILD_DIR:-build}")/bin/ringtrain
steps=${STEPS:-300} epochs=${EPOCHS:-4}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
"$bin" prepare fashion-mnist --source /usr/share/datasets/fashion-mnist --out "$work/fm" --shards 8 >"$out/prepare.log"
"$bin" --version >"$out/versions.txt" 2>&1
run() {  # name ranks batch group
  local name=$1 ranks=$2 batch=$3 group=$4
  mpirun -np "$ranks" --oversubscribe "$bin" train jobs/fashion_mnist.toml --set data.train="$work/fm/train" \
    --set data.test="$work/fm/test" --set train.batch_per_rank="$batch" --set train.epochs="$epochs" \
    --set train.max_steps_per_epoch="$steps" --set dist.sync_batchnorm_group="$group" --set run.threads=1 \
    --set data.loader_threads=1 --set run.checkpoint_every=0 --set run.dir="$work/$name" >"$out/$name.log" 2>&1
  /usr/bin/python3 - "$work/$name/metrics.jsonl" "$name" >>"$out/epochs.jsonl" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    d = json.loads(line)
    if d.get("kind") == "epoch":
        print(json.dumps({"run": sys.argv[2], "epoch": d["epoch"], "test_acc": d["test_acc"], "test_loss": d["test_loss"],
                          "train_loss": d["train_loss"]}))
PY
}
rm -f "$out/epochs.jsonl"
run per_rank_8x4 8 4 0
run synced_8x4 8 4 8
run one_rank_1x32 1 32 0
/usr/bin/python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
rows = [json.loads(l) for l in open(f"{out}/epochs.jsonl")]
runs = list(dict.fromkeys(r["run"] for r in rows))
epochs = sorted({r["epoch"] for r in rows})
acc = {(r["run"], r["epoch"]): r for r in rows}
with open(f"{out}/table.md", "w") as f:
    f.write("| epoch | " + " | ".join(f"{r} test acc (loss)" for r in runs) + " |\n")
    f.write("|---" * (len(runs) + 1) + "|\n")
    for e in epochs:
        cells = [f"{acc[(r, e)]['test_acc']:.4f} ({acc[(r, e)]['test_loss']:.3f})" if (r, e) in acc else "-" for r in runs]
        f.write(f"| {e} | " + " | ".join(cells) + " |\n")
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
for r in runs:
    plt.plot([e for e in epochs if (r, e) in acc], [acc[(r, e)]["test_acc"] for e in epochs if (r, e) in acc], marker="o", label=r)
plt.xlabel("epoch (cut steps)"); plt.ylabel("test accuracy"); plt.legend(); plt.grid(True)
plt.title("Fashion-MNIST CNN, global batch 32")
plt.savefig(f"{out}/test_acc.png", dpi=100)
print(open(f"{out}/table.md").read())
PY

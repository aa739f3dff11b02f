#!/usr/bin/env bash
# One epoch of jobs/fashion_mnist.toml on 2 ranks must reach >= 0.85 test accuracy, and the run directory must
# hold complete records, the worst classes of the test split among them (and named on rank 0's epoch line). Usage: fashion_mnist_one_epoch.sh RINGTRAIN SOURCE_DIR DATA_DIR
set -euo pipefail
bin=$1 src=$2 data=$3
source "$src/tests/support/fashion_mnist_data.sh"
prepare_fashion_mnist "$bin" "$data"
run=$(mktemp -d); trap 'rm -rf "$run"' EXIT
mpirun -np 2 --oversubscribe "$bin" train "$src/jobs/fashion_mnist.toml" --set train.epochs=1 \
  --set data.train="$data/fmnist/train" --set data.test="$data/fmnist/test" --set run.dir="$run/run" \
  --set run.progress_every_s=15 | tee "$run/log"
python3 - "$run/run" <<'PY'
import json, re, sys, pathlib
run = pathlib.Path(sys.argv[1])
records = [json.loads(l) for l in (run / "metrics.jsonl").read_text().splitlines()]
epochs = [r for r in records if r["kind"] == "epoch"]
assert len(epochs) == 1, records
e = epochs[0]
required = ["epoch", "ranks", "global_batch", "lr", "train_loss", "test_loss", "test_acc", "samples_per_s",
            "data_wait_s", "forward_s", "backward_s", "allreduce_s", "optimizer_s", "param_checksum"]
missing = [k for k in required if k not in e]
assert not missing, f"missing fields {missing}"
assert e["ranks"] == 2 and e["global_batch"] == 128, e
assert len(e["param_checksum"]) == 16, e
assert e["samples_per_s"] > 0 and e["forward_s"] > 0 and e["backward_s"] > 0, e
assert e["test_acc"] >= 0.85, f"test accuracy {e['test_acc']:.4f} < 0.85 after one epoch"
worst = e["worst_classes"]  # the test split's three least accurate classes, worst first
assert len(worst) == 3 and all(0 <= w["index"] < 10 and 0 <= w["accuracy"] <= 1 and w["samples"] > 0 for w in worst), worst
assert [w["accuracy"] for w in worst] == sorted(w["accuracy"] for w in worst), worst
assert worst[0]["accuracy"] <= e["test_acc"], (worst, e["test_acc"])
versions = json.loads((run / "versions.json").read_text())
for lib in ("MPI", "HDF5", "BLAS"):
    assert lib in versions, versions
assert re.search(r"^epochs = 1$", (run / "job.resolved.toml").read_text(), re.M), "--set train.epochs=1 not in job.resolved.toml"
print(f"worst classes: {worst}")
print(f"PASS: test_acc {e['test_acc']:.4f}, {e['samples_per_s']:.0f} samples/s, checksum {e['param_checksum']}")
PY
grep -q "^epoch 1/1: .* | worst: " "$run/log" || { echo "FAIL: the epoch line names no worst classes"; exit 1; }

#!/usr/bin/env bash
# The shipped ImageNet recipes run as written: jobs/resnet50_imagenet_goyal.toml (SGD, steps, zero-init) and
# jobs/resnet50_imagenet_lars.toml (LARS, poly decay, label smoothing), each for a few steps on 2 ranks on a small
# synthetic split (3x32x32, 1000 classes: the recipes' own layers and 1000-way head) with `--set`s for the data and
# the steps. Each epoch's recorded rate is the schedule's formula at the epoch's last step, written out here; the
# Goyal run also clips (a norm in every record), evaluates every 2nd epoch (the 1st epoch's test numbers null,
# the last epoch's there) and records top-5.
# Usage: recipe_jobs.sh RINGTRAIN SOURCE_DIR MPIEXEC
set -euo pipefail
bin=$1 src=$2 mpiexec=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
"$bin" prepare synthetic --shape 3,32,32 --classes 1000 --samples 64 --test-samples 16 --shards 2 --out data >/dev/null

run() {  # run NAME JOB SET...: 2 ranks, 2 steps per epoch of 2 x 4 samples
  local name=$1 job=$2
  shift 2
  local sets=()
  for s in "$@"; do sets+=(--set "$s"); done
  "$mpiexec" -np 2 --oversubscribe "$bin" train "$src/jobs/$job" --set data.train=data/train --set data.test=data/test \
    --set train.batch_per_rank=4 --set train.max_steps_per_epoch=2 --set run.dir="$name" --set run.device=cpu \
    --set run.progress_every_s=1000 "${sets[@]}" >"$name.log" 2>&1 || { echo "FAIL: $job: $(tail -5 "$name.log")"; exit 1; }
}

# Goyal: global batch 8, peak 0.1 x 8/256; 1 warm-up epoch (2 steps) from 0.1, which is above the peak, so none;
# milestones at epochs 1 and 2 (steps 2 and 4) x 0.1 each. Epoch e ends at step 2e - 1.
run goyal resnet50_imagenet_goyal.toml train.epochs=3 optimizer.warmup_epochs=1 'optimizer.milestones=[1, 2]' \
  optimizer.clip_global_norm=1.0 train.eval_every_epochs=2
# LARS: peak 0.625 x 8/256, 1 warm-up epoch (2 steps) from 0 (the recipe's warmup_start): step 1 at half the peak;
# then 2 steps of poly decay (power 2) to 1e-4: step 3 is halfway.
run lars resnet50_imagenet_lars.toml train.epochs=2 optimizer.warmup_epochs=1

/usr/bin/python3 - "$work" <<'PY'
import json, math, sys
def epochs(run):
    return [d for d in map(json.loads, open(f"{sys.argv[1]}/{run}/metrics.jsonl")) if d.get("kind") == "epoch"]
failures = []
def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok: failures.append(what)

goyal = epochs("goyal")
peak = 0.1 * 8 / 256
want = [peak, peak * 0.1, peak * 0.01]  # MultiStepLR: x 0.1 at each milestone passed
check(len(goyal) == 3 and [round(e["lr"] / w, 9) for e, w in zip(goyal, want)] == [1.0] * 3, f"goyal: lr per epoch {[e['lr'] for e in goyal]} = {want}")
check(all(e["grad_norm_mean"] is not None and e["grad_norm_max"] >= e["grad_norm_mean"] > 0 for e in goyal),
      "goyal: every epoch records the clipped gradients' norm (mean <= max)")
check(goyal[0]["test_loss"] is None and goyal[0]["test_top5"] is None, "goyal: epoch 1 not evaluated (eval_every_epochs = 2)")
check(all(goyal[i]["test_loss"] is not None and 0 <= goyal[i]["test_top5"] <= 1 and goyal[i]["test_top5"] >= goyal[i]["test_acc"]
          for i in (1, 2)), "goyal: epochs 2 and 3 (the last) evaluated, with top-5 >= top-1")

lars = epochs("lars")
peak, end = 0.625 * 8 / 256, 1e-4
want = [peak / 2, end + (peak - end) * (1 - 0.5) ** 2]  # warm-up from 0; poly, power 2: step 3 is 1 of 2 decay steps in
check(len(lars) == 2 and all(math.isclose(e["lr"], w, rel_tol=1e-9) for e, w in zip(lars, want)), f"lars: lr per epoch {[e['lr'] for e in lars]} = {want}")
check(lars[0]["test_loss"] is None and lars[1]["test_loss"] is not None, "lars: only the last epoch evaluated (eval_every_epochs = 4)")
check(lars[0]["grad_norm_mean"] is None, "lars: no clipping, no norm")
sys.exit(1 if failures else 0)
PY
grep -q "optimizer: sgd (momentum 0.9, L2 weight decay 0.0001 on weights)" goyal.log || { echo "FAIL: the goyal run's header"; exit 1; }
grep -q "optimizer: lars (momentum 0.9, trust coefficient 0.001" lars.log || { echo "FAIL: the lars run's header"; exit 1; }
grep -q "gradient clipping: the reduced gradient scaled to a global L2 norm of at most 1" goyal.log || {
  echo "FAIL: the goyal run does not say it clips"; exit 1; }
echo "ok   both recipes ran as written"

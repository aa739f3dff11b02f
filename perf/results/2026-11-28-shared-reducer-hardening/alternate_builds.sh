#!/usr/bin/env bash
# The build before issue 43's changes against the build after, alternated in one call on the 2-core guest:
# dist.reducer = "shared", the Fashion-MNIST job, 2 ranks x batch 64, one compute thread each, bound to cores,
# 20 warm-up + 150 timed steps, the order of the pair swapped every round (before first in odd rounds). Prints each
# run's steady samples/s, phase line and checksum, then each build's median and the after/before ratio of every
# round (the pair ran back to back, so drift between rounds cancels).
# Usage: alternate_builds.sh BEFORE_BIN AFTER_BIN DATA_DIR ROUNDS [--set ...]
set -euo pipefail
before=$1 after=$2 data=$3 rounds=$4
shift 4
cd "$(dirname "$0")/../../.."
out=/tmp/rt43
mkdir -p "$out"
for round in $(seq "$rounds"); do
  order="before after"
  [ $((round % 2)) = 0 ] && order="after before"
  for build in $order; do
    bin=$before
    [ "$build" = after ] && bin=$after
    dir=$out/alt-$build-$round
    rm -rf "$dir"
    mpirun --allow-run-as-root -np 2 --bind-to core "$bin" train jobs/fashion_mnist.toml \
      --set data.train="$data/train" --set data.test="$data/test" \
      --set train.epochs=1 --set train.max_steps_per_epoch=170 --set run.threads=1 \
      --set run.timing_warmup_steps=20 --set 'dist.reducer="shared"' --set run.dir="$dir" "$@" >"$dir.log" 2>&1
  done
done
python3 - "$out" "$rounds" <<'PY'
import json, re, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
def run(build, r):
    records = [json.loads(line) for line in open(f"{out}/alt-{build}-{r}/metrics.jsonl")]
    last = [x for x in records if "steady_samples_per_s" in x][-1]
    phases = re.findall(r"per rank: .*optimizer [0-9.]*s", open(f"{out}/alt-{build}-{r}.log").read())
    print(f"round {r} {build}: steady {last['steady_samples_per_s']:.1f} samples/s | {phases[-1]} | "
          f"{last['param_checksum']}")
    return last["steady_samples_per_s"]
speed = {(b, r): run(b, r) for r in range(1, rounds + 1) for b in ("before", "after")}
for b in ("before", "after"):
    print(f"{b}: median {statistics.median(speed[b, r] for r in range(1, rounds + 1)):.1f} samples/s")
ratios = [speed["after", r] / speed["before", r] for r in range(1, rounds + 1)]
print("after/before per round:", " ".join(f"{x:.3f}" for x in ratios), f"| median {statistics.median(ratios):.3f}")
PY

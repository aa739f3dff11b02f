# Sourced by the e2e tests that compare short training runs on a small synthetic split (3x8x8, 5 classes,
# 240 + 30 samples, 2 shards). Needs $bin, $src and $mpiexec set. Sourcing it moves into a fresh folder (removed
# at exit) holding the split as data/train and data/test. Then:
#   synthetic_records RUN FIELDS SET...     trains jobs/fashion_mnist.toml's settings on it for 2 epochs on 2
#                                           ranks in run folder RUN (log: RUN.log) with more `--set`s, then
#                                           prints per epoch the metrics.jsonl fields named in FIELDS
#                                           (space-separated), or ends the test naming the failed run
synthetic_work=$(mktemp -d)
trap 'rm -rf "$synthetic_work"' EXIT
cd "$synthetic_work"
"$bin" prepare synthetic --shape 3,8,8 --classes 5 --samples 240 --test-samples 30 --shards 2 --out data >/dev/null

synthetic_records() {
  local run=$1 fields=$2
  shift 2
  local sets=()
  for s in "$@"; do sets+=(--set "$s"); done
  "$mpiexec" -np 2 --oversubscribe "$bin" train "$src/jobs/fashion_mnist.toml" --set data.train=data/train \
    --set data.test=data/test --set train.batch_per_rank=8 --set train.epochs=2 --set run.dir="$run" \
    --set run.progress_every_s=1000 "${sets[@]}" >"$run.log" 2>&1 || { echo "FAIL: run $run: $(tail -5 "$run.log")"; exit 1; }
  /usr/bin/python3 -c "
import json, sys
for line in open(sys.argv[1] + '/metrics.jsonl'):
    d = json.loads(line)
    if d.get('kind') == 'epoch': print(*(d[f] for f in sys.argv[2].split()))" "$run" "$fields"
}

#!/usr/bin/env bash
# Whole-run sweep behind the default of dist.bucket_mb and dist.reducer: jobs/fashion_mnist.toml on 2 ranks for
# each bucket size x CPU reducer, one epoch of STEPS steps each, and a table of the exposed all-reduce, the
# reductions' total, data wait and throughput from each run's epoch record. REPEATS runs per cell (the median
# is kept: the machine may be shared).
# Usage: perf/bucket_sweep.sh [BUILD_DIR] [STEPS] [REPEATS] [BUCKETS...]   (data: data/fmnist, made if missing)
# REDUCERS="nonblocking thread nonblocking_tree" picks the arms (any dist.reducer value, e.g. shared, the one
# dist.reducer = "auto" takes on one node); nonblocking_tree is the nonblocking reducer
# with Open MPI's own choice of MPI_Iallreduce algorithm for in-place buffers (its binomial tree) in place of
# the ring ringtrain sets (dist/open_mpi_defaults.cpp).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build} steps=${2:-100} repeats=${3:-1}
shift $(( $# < 3 ? $# : 3 ))
if [ $# -gt 0 ]; then buckets=("$@"); else buckets=(1 4 25); fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
data=${RINGTRAIN_FMNIST:-data/fmnist}
[ -f "$data/train/shard-00000-of-00008.h5" ] || "$build/bin/ringtrain" prepare fashion-mnist --out "$data" --shards 8 --overwrite
out=$(mktemp -d); trap 'rm -rf "$out"' EXIT
for r in $(seq "$repeats"); do  # repeats outermost: a busy spell of a shared machine hits every cell alike
  for reducer in ${REDUCERS:-nonblocking thread}; do
    algorithm=()
    [ "$reducer" = nonblocking_tree ] && algorithm=(-x OMPI_MCA_coll_libnbc_iallreduce_algorithm=2)
    for mb in "${buckets[@]}"; do
      dir="$out/$reducer-$mb-$r"
      mpirun -np 2 --oversubscribe "${algorithm[@]}" "$build/bin/ringtrain" train jobs/fashion_mnist.toml --set train.epochs=1 \
        --set train.max_steps_per_epoch="$steps" --set data.train="$data/train" --set data.test="$data/test" \
        --set run.dir="$dir" --set run.progress_every_s=1000 --set dist.bucket_mb="$mb" \
        --set dist.reducer="${reducer%_tree}" >"$dir.log" 2>&1 || { echo "run failed: $dir.log"; cat "$dir.log"; exit 1; }
    done
  done
done
python3 - "$out" <<'PY'
import json, sys, pathlib, re, statistics
out = pathlib.Path(sys.argv[1])
cells = {}
for d in sorted(out.glob("*-*-*")):
    if not d.is_dir():
        continue
    reducer, mb, _ = d.name.split("-")
    epoch = [json.loads(l) for l in (d / "metrics.jsonl").read_text().splitlines() if '"epoch"' in l][-1]
    buckets = re.search(r"in (\d+) bucket", (out / f"{d.name}.log").read_text()).group(1)
    cells.setdefault((reducer, float(mb)), []).append((epoch, buckets))
print("| reducer | bucket_mb | buckets | step s | exposed all-reduce s | share of step | reductions' total s | data wait share | samples/s |")
print("|---|---|---|---|---|---|---|---|---|")
for (reducer, mb), runs in sorted(cells.items()):
    med = lambda k: statistics.median(e[k] for e, _ in runs)
    steps = runs[0][0]["steps"]
    print(f"| {reducer} | {mb:g} | {runs[0][1]} | {med('epoch_train_s') / steps:.4f} | {med('allreduce_s'):.2f} | "
          f"{100 * med('allreduce_exposed_fraction'):.1f} % | {med('allreduce_total_s'):.2f} | "
          f"{100 * med('data_wait_fraction'):.2f} % | {med('epoch_samples_per_s'):.0f} |")
PY

#!/usr/bin/env bash
# Whole-run CPU benchmark: per-rank training FLOP/s of jobs/fashion_mnist.toml on 2 ranks (1 core each) against
# the machine's single-core SGEMM rate, both measured in this run. Target: >= 40 %.
# Usage: perf/cpu_training_efficiency.sh [BUILD_DIR] [STEPS]   (data: data/fmnist, made if missing)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build} steps=${2:-300}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
[ -f data/fmnist/train/shard-00000-of-00008.h5 ] || "$build/bin/ringtrain" prepare fashion-mnist --out data/fmnist --shards 8 --overwrite
out=$(mktemp -d); trap 'rm -rf "$out"' EXIT
# Single-core SGEMM: the best of 3 repetitions of a 1024^3 product, 1 BLAS thread.
"$build/bin/ringtrain-bench" --benchmark_filter='BM_Sgemm/1024/1024/1024$' --benchmark_repetitions=3 \
  --benchmark_format=json --benchmark_out="$out/sgemm.json" >/dev/null
mpirun -np 2 --oversubscribe "$build/bin/ringtrain" train jobs/fashion_mnist.toml --set train.epochs=1 \
  --set train.max_steps_per_epoch="$steps" --set run.dir="$out/run" --set run.progress_every_s=1000 >"$out/log"
python3 - "$out" "$steps" <<'PY'
import json, sys, pathlib, platform, subprocess, datetime
out = pathlib.Path(sys.argv[1])
bench = json.loads((out / "sgemm.json").read_text())
rates = [b["FLOP/s"] for b in bench["benchmarks"] if b.get("run_type") == "iteration"]
sgemm = max(rates)
epoch = [json.loads(l) for l in (out / "run/metrics.jsonl").read_text().splitlines() if '"epoch"' in l][-1]
train = epoch["flops_per_s_per_rank"]
cpu = subprocess.run(["sh", "-c", "lscpu | sed -n 's/^Model name: *//p'"], capture_output=True, text=True).stdout.strip()
print(f"date: {datetime.date.today()}  machine: {cpu}, {subprocess.run(['nproc'],capture_output=True,text=True).stdout.strip()} cores")
print(f"single-core SGEMM 1024^3: {sgemm/1e9:.1f} GFLOP/s (best of {len(rates)})")
print(f"training, per rank (2 ranks, 1 core each, {sys.argv[2]} steps of batch 64): {train/1e9:.1f} GFLOP/s")
print(f"  time split per rank: data wait {epoch['data_wait_s']:.2f}s forward {epoch['forward_s']:.2f}s "
      f"backward {epoch['backward_s']:.2f}s all-reduce {epoch['allreduce_s']:.2f}s optimizer {epoch['optimizer_s']:.2f}s "
      f"of {epoch['epoch_train_s']:.2f}s")
print(f"ratio: {100*train/sgemm:.1f} % of single-core SGEMM (target >= 40 %)")
PY

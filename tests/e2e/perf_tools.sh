#!/usr/bin/env bash
# perf/'s tools still run as perf/README.md says, at the smallest size each takes (seconds): they are how the
# records in perf/results/ are made, and nothing else runs them. Checks that each finishes and prints its table or
# verdict, not what it measures. Usage: perf_tools.sh BUILD_DIR SOURCE_DIR DATA_DIR
set -euo pipefail
build=$1 src=$2 data=$3
source "$src/tests/support/fashion_mnist_data.sh"
prepare_fashion_mnist "$build/bin/ringtrain" "$data"
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
cd "$src"

echo "== alternate_bench.sh"
perf/alternate_bench.sh 1 'BM_SgdUpdate$' "$build/bin/ringtrain-bench" | tee "$work/alternate.txt"
grep -q "min .* median " "$work/alternate.txt"

echo "== bucket_sweep.sh"
RINGTRAIN_FMNIST="$data/fmnist" REDUCERS="nonblocking shared" perf/bucket_sweep.sh "$build" 5 1 4 | tee "$work/sweep.txt"
[ "$(grep -cE '^\| (nonblocking|shared) ' "$work/sweep.txt")" = 2 ]

echo "== plot_allreduce.py without arguments: its usage, not a traceback"
if /usr/bin/python3 perf/plot_allreduce.py >"$work/plot.txt" 2>&1; then exit 1; fi
grep -q "^Usage: perf/plot_allreduce.py" "$work/plot.txt"

echo "perf tools ran"

#!/usr/bin/env bash
# The scaling runs this machine can make (root, 2 cores): Fashion-MNIST, one epoch of STEPS steps, 1 thread per
# rank, on 1 rank and 2 ranks (loopback, one node), then 1 and 2 emulated nodes (network namespaces over a veth
# pair, tests/multihost/two_netns_nodes.sh) without and with a tc tbf rate limit; the scaling reports of both
# groups, and the multihost test's model checks, land in OUT.
# Usage: perf/scaling_runs_here.sh OUT [BUILD_DIR] [STEPS]   (data: BUILD_DIR/test-data/fmnist, made if missing)
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(realpath -m "$1") build=${2:-build} steps=${3:-40}
python=/usr/bin/python3; [ -x "$python" ] || python=python3   # Debian's interpreter has python3-matplotlib
data=$build/test-data
mkdir -p "$out" "$data"
[ -f "$data/fmnist/.complete" ] || { "$build/bin/ringtrain" prepare fashion-mnist --out "$data/fmnist" --shards 8 --overwrite >/dev/null && touch "$data/fmnist/.complete"; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
train=(train jobs/fashion_mnist.toml --set data.train="$data/fmnist/train" --set data.test="$data/fmnist/test"
       --set train.epochs=1 --set train.max_steps_per_epoch="$steps" --set run.threads=1 --set run.progress_every_s=1000)
load() { echo "$(date -u +%T) $1: load average $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out/loadavg.txt"; }
load start
for np in 1 2; do
  OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo mpirun -np "$np" --oversubscribe \
    "$build/bin/ringtrain" "${train[@]}" --set run.dir="$out/loopback-np$np" >"$out/loopback-np$np.log" 2>&1
  load "after loopback np$np"
done
RT_MULTIHOST_KEEP=$out/netns RT_MULTIHOST_STEPS=$steps bash tests/multihost/two_netns_nodes.sh \
  "$build/bin/ringtrain" "$build/bin/ringtrain-allreduce-bench" "$PWD" "$data" | tee "$out/netns-model-check.txt"
load "after netns runs"
"$python" perf/scaling_report.py --out "$out/report-loopback" --label "$out/loopback-np1=1 rank" \
  --label "$out/loopback-np2=2 ranks, 1 node" "$out/loopback-np1" "$out/loopback-np2"
"$python" perf/scaling_report.py --out "$out/report-netns" --label "$out/netns/one_node=1 emulated node" \
  --label "$out/netns/bare=2 emulated nodes" --label "$out/netns/limited=2 emulated nodes, tbf" \
  "$out/netns/one_node" "$out/netns/bare" "$out/netns/limited"

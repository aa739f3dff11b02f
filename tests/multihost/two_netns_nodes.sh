#!/usr/bin/env bash
# Two network namespaces joined by a veth pair play two hosts with their own addresses; Open MPI runs one rank
# in each, started through an `ip netns exec` launcher in place of ssh (plm_rsh_agent), TCP only, interfaces
# chosen by subnet. Runs the all-reduce benchmark (ringtrain's own CPU reducer, as training uses it) and a short
# Fashion-MNIST training, first on the bare
# veth, then with both ends rate-limited by `tc tbf` (this kernel has no netem). Checks:
#   placement: one rank in each namespace; the benchmarks and both trainings run to their end
#   shared:    dist.reducer = "shared" across the hosts (one rank a node) ends on the bare run's parameters
#   limit:     the limited 8 MiB all-reduce takes at least half what the nominal rate allows (the limit is in
#              force; a loaded machine can only make it slower)
# and prints the measurements against perf/scaling_model.py: the emulated link is described by measurement, as
# one describes a real fabric by its all-reduce bus bandwidth: alpha and beta are fitted to the limited link's
# all-reduce times at 2 and 8 MiB; then
#   benchmark: the fitted line predicts the 4 MiB all-reduce within TOL_BENCH
#   training:  the model's step time under the limit (compute per step of the unlimited run + the predicted
#              all-reduce of the model's gradient bytes, overlap 0: Open MPI's CPU all-reduce does not progress
#              while the rank computes) is within TOL_TRAIN of the measured step time
# These two are timing against a model: verdicts only with RT_MULTIHOST_CHECK_MODEL=1 (perf/multihost_model.sh,
# on an idle machine), printed otherwise.
# The error of the nominal line rate (tbf's rate as B) is printed too, and one blocking MPI_Allreduce for
# comparison: Open MPI's tuned blocking all-reduce reaches about half the line rate on 2 ranks here, while
# ringtrain's reducer (libnbc's ring, dist/open_mpi_defaults.cpp) reaches about 95 % of it.
# Usage: two_netns_nodes.sh RINGTRAIN ALLREDUCE_BENCH SOURCE_DIR DATA_DIR
# RT_MULTIHOST_KEEP=DIR keeps the run directories and benchmark JSON there (perf/results use it).
set -uo pipefail
bin=$1 bench=$2 src=$3 data=$4
rate_mbit=${RT_MULTIHOST_RATE_MBIT:-400}
TOL_BENCH=0.25 TOL_TRAIN=0.30
if [ "$(id -u)" != 0 ]; then echo "SKIP: needs root for network namespaces"; exit 77; fi
if [ ! -d /usr/share/datasets/fashion-mnist ]; then
  echo "SKIP: /usr/share/datasets/fashion-mnist is missing (apt-get install dataset-fashion-mnist)"; exit 77
fi
command -v ip >/dev/null && command -v tc >/dev/null || { echo "FAIL: ip/tc missing (apt-get install iproute2)"; exit 1; }

# Names unique to this run: several agents or CI jobs may share the kernel.
tag=$$
ns_a=rt$tag-a ns_b=rt$tag-b veth_a=rta$tag veth_b=rtb$tag
net=10.$((200 + RANDOM % 50)).$((RANDOM % 250)).0
addr_a=${net%.0}.1 addr_b=${net%.0}.2 subnet=$net/24
scratch=$(mktemp -d /tmp/rt-multihost.XXXXXX)
source "$(dirname "$0")/netns_hosts.sh"
netns_hosts_begin "$scratch" "$ns_a" "$ns_b"
netns_pair_up "$ns_a" "$ns_b" "$veth_a" "$veth_b" "$addr_a" "$addr_b" || exit 1
echo "nodes: $ns_a $addr_a <-> $ns_b $addr_b (veth $veth_a/$veth_b)"

netns_write_launcher "$scratch/launcher" "$addr_a=$ns_a" "$addr_b=$ns_b"
printf '%s slots=1\n%s slots=1\n' "$addr_a" "$addr_b" >"$scratch/hostfile"

mkdir -p "$data"
( flock 9
  [ -f "$data/fmnist/.complete" ] || { "$bin" prepare fashion-mnist --out "$data/fmnist" --shards 8 --overwrite >/dev/null && touch "$data/fmnist/.complete"; }
) 9>"$data/.fmnist.lock"

# CTest's loopback settings must not reach this job: here everything goes over the veth subnet.
unset OMPI_MCA_btl OMPI_MCA_btl_tcp_if_include OMPI_MCA_oob_tcp_if_include
mpi() {
  timeout 300 ip netns exec "$ns_a" mpirun --allow-run-as-root -np 2 --hostfile "$scratch/hostfile" --map-by node \
    --mca plm_rsh_agent "$scratch/launcher" --mca btl tcp,self \
    --mca btl_tcp_if_include "$subnet" --mca oob_tcp_if_include "$subnet" ${RT_MULTIHOST_MCA:-} "$@"
}
failures=0
fail() { echo "FAIL $*"; failures=$((failures + 1)); }
ok() { echo "ok   $*"; }

hosts=$(mpi sh -c 'ip -4 -br addr show | grep -o "^[^ ]*" | grep -v lo | tr "\n" " "; echo' 2>&1 | sort | tr '\n' ' ')
echo "ranks see interfaces: $hosts"
[[ "$hosts" == *"$veth_a"* && "$hosts" == *"$veth_b"* ]] && ok "one rank in each namespace" || fail "placement: $hosts"

bench_mib="2 4 8" steps=${RT_MULTIHOST_STEPS:-20}
train_args=(train "$src/jobs/fashion_mnist.toml" --set data.train="$data/fmnist/train" --set data.test="$data/fmnist/test"
            --set train.epochs=1 --set train.max_steps_per_epoch=$steps --set run.threads=1 --set run.progress_every_s=1000)
run_case() {  # run_case NAME: benchmark + training over the namespaces as they are now
  local mib
  for mib in $bench_mib; do
    mpi "$bench" --mib "$mib" --iters 5 >"$scratch/$1.bench-$mib.json" 2>"$scratch/$1.bench.err" \
      || fail "$1 benchmark: $(tail -3 "$scratch/$1.bench.err")"
    echo "$1: all-reduce $(cat "$scratch/$1.bench-$mib.json")"
  done
  mpi "$bench" --mib 8 --iters 3 --reducer blocking >"$scratch/$1.blocking-8.json" 2>"$scratch/$1.bench.err" \
    || fail "$1 blocking benchmark: $(tail -3 "$scratch/$1.bench.err")"
  echo "$1: for comparison, blocking MPI_Allreduce $(cat "$scratch/$1.blocking-8.json")"
  mpi "$bin" "${train_args[@]}" --set run.dir="$scratch/$1" >"$scratch/$1.log" 2>&1 \
    || fail "$1 training: $(tail -5 "$scratch/$1.log")"
  grep "^epoch 1/1:" "$scratch/$1.log" | sed "s/^/$1: /"
}
t0=$SECONDS
if [ -n "${RT_MULTIHOST_KEEP:-}" ]; then   # for reports: the same training on one emulated node, 1 rank
  timeout 300 ip netns exec "$ns_a" mpirun --allow-run-as-root -np 1 --mca btl self,tcp \
    --mca btl_tcp_if_include "$subnet" --mca oob_tcp_if_include "$subnet" \
    "$bin" "${train_args[@]}" --set run.dir="$scratch/one_node" >"$scratch/one_node.log" 2>&1 \
    || fail "one-node training: $(tail -5 "$scratch/one_node.log")"
fi
run_case bare
# One copy of the parameters per node (dist.reducer = "shared") across the two hosts: each node's slice is all of
# it, all-reduced between the nodes, so the job is the bare run's a + b and ends on its parameters, bit for bit.
mpi "$bin" "${train_args[@]}" --set 'dist.reducer="shared"' --set run.dir="$scratch/shared" \
  >"$scratch/shared.log" 2>&1 || fail "shared training: $(tail -5 "$scratch/shared.log")"
checksum() { grep -o '"param_checksum":"[0-9a-f]*"' "$1/metrics.jsonl" | tail -1; }
if [ -n "$(checksum "$scratch/bare")" ] && [ "$(checksum "$scratch/shared")" = "$(checksum "$scratch/bare")" ]; then
  ok "node-shared reducer across two hosts: the bare run's parameters ($(checksum "$scratch/shared"))"
else
  fail "node-shared reducer across two hosts: $(checksum "$scratch/shared") against $(checksum "$scratch/bare")"
fi
grep -q "reduced with node-shared memory" "$scratch/shared.log" \
  || fail "shared run: $(grep -m1 'reduced with' "$scratch/shared.log")"
for end in "$ns_a $veth_a" "$ns_b $veth_b"; do
  set -- $end
  ip netns exec "$1" tc qdisc add dev "$2" root tbf rate "${rate_mbit}mbit" burst 256kb latency 100ms \
    || fail "tc tbf on $2"
done
echo "rate limit: $(ip netns exec "$ns_a" tc qdisc show dev "$veth_a")"
run_case limited

# The model's verdicts (perf/scaling_model.py's arithmetic, imported, not re-typed).
python3 - "$src/perf" "$scratch" "$rate_mbit" "$TOL_BENCH" "$TOL_TRAIN" <<'PY'
import json, os, sys
sys.path.insert(0, sys.argv[1])
import scaling_model as sm
scratch, rate, tol_bench, tol_train = sys.argv[2], float(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
verdicts = os.environ.get("RT_MULTIHOST_CHECK_MODEL") == "1"
bad = 0
def check(what, measured, predicted, tol):
    global bad
    err = (measured - predicted) / predicted
    good = abs(err) <= tol
    bad += verdicts and not good
    label = ("ok  " if good else "FAIL") if verdicts else "    "
    print(f"{label} {what}: measured {measured * 1e3:.1f} ms, model {predicted * 1e3:.1f} ms, "
          f"error {err * 100:+.1f} % (tolerance {tol * 100:.0f} %{'' if verdicts else ', not checked here'})")
bench = {m: json.load(open(f"{scratch}/limited.bench-{m}.json")) for m in (2, 4, 8)}
(s2, t2), (s8, t8) = [(bench[m]["bytes"], bench[m]["median_s"]) for m in (2, 8)]
b_eff = (s8 - s2) / (t8 - t2)                      # at N=2, T = S/B + 2 alpha
alpha = max(0.0, (t8 - s8 / b_eff) / 2)
fitted = sm.Link(b_eff, alpha, "fitted")
print(f"     fitted link: {b_eff * 8 / 1e6:.0f} Mb/s, alpha {alpha * 1e6:.0f} us (tbf rate {rate:g} Mb/s)")
nominal = sm.Link(rate * 1e6 / 8, 0.0, "nominal")
print(f"     nominal rate as B: model {sm.ring_allreduce_s(2, s8, nominal) * 1e3:.1f} ms for 8 MiB, measured "
      f"{t8 * 1e3:.1f} ms, error {(t8 / sm.ring_allreduce_s(2, s8, nominal) - 1) * 100:+.0f} %")
in_force = t8 >= 0.5 * sm.ring_allreduce_s(2, s8, nominal)
bad += not in_force
print(f"{'ok  ' if in_force else 'FAIL'} the rate limit is in force: 8 MiB took {t8 * 1e3:.1f} ms, at least half the "
      f"{sm.ring_allreduce_s(2, s8, nominal) * 1e3:.1f} ms the nominal rate allows")
check("all-reduce of 4 MiB on 2 nodes (line fitted at 2 and 8 MiB)", bench[4]["median_s"],
      sm.ring_allreduce_s(2, bench[4]["bytes"], fitted), tol_bench)
link = fitted
bare = sm.workload_from_metrics(f"{scratch}/bare/metrics.jsonl")
lim = [json.loads(l) for l in open(f"{scratch}/limited/metrics.jsonl")]
epoch = [r for r in lim if r["kind"] == "epoch"][-1]
predicted = sm.predict(2, bare, link, overlap=0.0)
check("training step time under the limit", epoch["epoch_train_s"] / epoch["steps"], predicted["step_s"], tol_train)
print(f"     (exposed all-reduce per step: measured {epoch['allreduce_s'] / epoch['steps'] * 1e3:.1f} ms, "
      f"model {predicted['exposed_s'] * 1e3:.1f} ms; compute per step from the bare run {bare.compute_s * 1e3:.1f} ms)")
sys.exit(1 if bad else 0)
PY
[ $? = 0 ] || failures=$((failures + 1))
if [ -n "${RT_MULTIHOST_KEEP:-}" ]; then
  mkdir -p "$RT_MULTIHOST_KEEP" && cp -a "$scratch"/one_node "$scratch"/bare "$scratch"/limited "$scratch"/*.json "$scratch"/*.log "$RT_MULTIHOST_KEEP/"
fi
echo "multihost test: $((SECONDS - t0)) s of runs"
[ "$failures" = 0 ]

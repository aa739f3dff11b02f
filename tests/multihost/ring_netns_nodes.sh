#!/usr/bin/env bash
# N network namespaces (default 4) as N hosts on one switch: a bridge in a namespace of its own, one veth per
# host, each host's sending side rate-limited by `tc tbf`. Open MPI runs one rank per host (an `ip netns exec`
# launcher in place of ssh, TCP only), and ringtrain-allreduce-bench times ringtrain's own reducer. Checks that
# one rank runs in each namespace, that the benchmarks run to their end, and that the limit is in force (the ring
# all-reduce takes at least half what the nominal rate allows; a loaded machine can only make it slower). Prints:
#   ring:  with ringtrain's Open MPI defaults (libnbc's ring), the all-reduce of 8 MiB takes what
#          perf/scaling_model.py's ring formula predicts from the *nominal* tbf rate, 2(N-1)/N * S/B, within
#          TOL (the two-host test can only fit the rate; here N > 2 tests the formula's rank dependence); a
#          verdict only with RT_MULTIHOST_CHECK_MODEL=1 (perf/multihost_model.sh, on an idle machine)
#   tree:  Open MPI's own choice (OMPI_MCA_coll_libnbc_iallreduce_algorithm=0: its binomial tree, which it
#          picks for any in-place buffer) is printed beside it, not checked
# With RT_RING_TRAIN_STEPS=S (and RINGTRAIN=binary) it also trains jobs/fashion_mnist.toml for S steps on the
# N hosts, before and after the rate limit, and prints the scaling model's step-time prediction for the
# limited run from the unlimited one (nominal rate, overlap 0) next to the measurement. Printed, not checked.
# Usage: ring_netns_nodes.sh ALLREDUCE_BENCH SOURCE_DIR [NODES]
set -uo pipefail
bench=$1 src=$2 nodes=${3:-4}
train_steps=${RT_RING_TRAIN_STEPS:-0}
rate_mbit=${RT_MULTIHOST_RATE_MBIT:-400}
TOL=0.30
if [ "$(id -u)" != 0 ]; then echo "SKIP: needs root for network namespaces"; exit 77; fi
command -v ip >/dev/null && command -v tc >/dev/null || { echo "FAIL: ip/tc missing (apt-get install iproute2)"; exit 1; }

tag=$$
switch=rt$tag-sw bridge=rtbr$tag
net=10.$((200 + RANDOM % 50)).$((RANDOM % 250)).0
subnet=$net/24
scratch=$(mktemp -d /tmp/rt-ring.XXXXXX)
hosts=() addrs=()
for i in $(seq 1 "$nodes"); do hosts+=("rt$tag-n$i"); addrs+=("${net%.0}.$i"); done
source "$(dirname "$0")/netns_hosts.sh"
netns_hosts_begin "$scratch" "$switch" "${hosts[@]}"
if ! ip -n "$switch" link add "$bridge" type bridge 2>"$scratch/err"; then
  echo "SKIP: cannot create a bridge here (kernel without bridge support?): $(cat "$scratch/err")"; exit 77
fi
set -e
ip -n "$switch" link set "$bridge" up
for i in "${!hosts[@]}"; do
  h=${hosts[$i]} host_end=rth$tag-$i switch_end=rts$tag-$i
  ip netns add "$h"
  ip link add "$host_end" type veth peer name "$switch_end"
  ip link set "$host_end" netns "$h"
  ip link set "$switch_end" netns "$switch"
  ip -n "$switch" link set "$switch_end" master "$bridge"
  ip -n "$switch" link set "$switch_end" up
  ip -n "$h" addr add "${addrs[$i]}/24" dev "$host_end"
  ip -n "$h" link set lo up
  ip -n "$h" link set "$host_end" up
done
set +e
echo "hosts: ${hosts[*]} (${addrs[*]}) on bridge $bridge in $switch"

pairs=()
for i in "${!hosts[@]}"; do pairs+=("${addrs[$i]}=${hosts[$i]}"); done
netns_write_launcher "$scratch/launcher" "${pairs[@]}"
for a in "${addrs[@]}"; do echo "$a slots=1"; done >"$scratch/hostfile"

# routed=direct: every remote daemon reports to mpirun itself; ORTE's default tree of daemons sometimes failed
# to wire up across the rate-limited links ("unable to reliably start one or more daemons").
# mpi_yield_when_idle: the "hosts" share this machine's cores, which Open MPI cannot know; ranks that spin
# while polling took the core from the rank whose turn it was in the ring (8 hosts on 2 cores: +95 % against
# the model spinning, +14 % yielding).
unset OMPI_MCA_btl OMPI_MCA_btl_tcp_if_include OMPI_MCA_oob_tcp_if_include OMPI_MCA_coll_libnbc_iallreduce_algorithm
mpi() {
  timeout 300 ip netns exec "${hosts[0]}" mpirun --allow-run-as-root -np "$nodes" --hostfile "$scratch/hostfile" \
    --map-by node --mca plm_rsh_agent "$scratch/launcher" --mca routed direct --mca mpi_yield_when_idle 1 \
    --mca btl tcp,self \
    --mca btl_tcp_if_include "$subnet" --mca oob_tcp_if_include "$subnet" "$@"
}
failures=0
fail() { echo "FAIL $*"; failures=$((failures + 1)); }
ok() { echo "ok   $*"; }

seen=$(mpi sh -c 'ip -4 -br addr show | grep -o "^rth[^ @]*"' 2>"$scratch/placement.err" | sort -u | tee "$scratch/placement" | wc -l)
[ "$seen" = "$nodes" ] && ok "one rank in each of $nodes namespaces" || fail "placement: $seen distinct host interfaces: $(tr "\n" " " <"$scratch/placement") $(tail -3 "$scratch/placement.err")"

train() {  # train NAME [--set ...]: the Fashion-MNIST job on the N hosts, one epoch of $train_steps steps
  local name=$1; shift
  mpi "$RINGTRAIN" train "$src/jobs/fashion_mnist.toml" --set data.train="$scratch/data/train" \
    --set data.test="$scratch/data/test" --set train.epochs=1 --set train.max_steps_per_epoch="$train_steps" \
    --set run.threads=1 --set run.progress_every_s=1000 --set run.dir="$scratch/$name" "$@" >"$scratch/$name.log" 2>&1 \
    || fail "$name training: $(tail -5 "$scratch/$name.log")"
  grep "^epoch 1/1:" "$scratch/$name.log" | sed "s/^/$name: /"
}
if [ "$train_steps" -gt 0 ]; then
  "${RINGTRAIN:?set RINGTRAIN to the ringtrain binary}" prepare synthetic --shape 1,28,28 --classes 10 \
    --samples $((64 * nodes * (train_steps + 1))) --test-samples $((64 * nodes)) --shards "$nodes" \
    --out "$scratch/data" >/dev/null || fail "prepare"
  train bare
fi

for i in "${!hosts[@]}"; do
  ip netns exec "${hosts[$i]}" tc qdisc add dev "rth$tag-$i" root tbf rate "${rate_mbit}mbit" burst 256kb \
    latency 100ms || fail "tc tbf on ${hosts[$i]}"
done
echo "rate limit on every host's sending side: $(ip netns exec "${hosts[0]}" tc qdisc show dev "rth$tag-0")"

mpi "$bench" --mib 8 --iters 3 >"$scratch/ring.json" 2>"$scratch/ring.err" || fail "ring benchmark: $(tail -3 "$scratch/ring.err")"
mpi -x OMPI_MCA_coll_libnbc_iallreduce_algorithm=0 "$bench" --mib 8 --iters 3 >"$scratch/tree.json" \
  2>"$scratch/tree.err" || fail "Open MPI's choice benchmark: $(tail -3 "$scratch/tree.err")"
mpi "$bench" --mib 8 --iters 3 --wire bf16 >"$scratch/ring-bf16.json" 2>"$scratch/ring-bf16.err" \
  || fail "ring benchmark, bf16 wire: $(tail -3 "$scratch/ring-bf16.err")"
[ "$train_steps" -gt 0 ] && train limited && train limited-bf16 --set dist.allreduce_dtype=bf16
echo "ring, bf16 on the wire (dist.allreduce_dtype = \"bf16\"): $(cat "$scratch/ring-bf16.json")"
echo "ring (ringtrain's default): $(cat "$scratch/ring.json")"
echo "Open MPI's own choice:      $(cat "$scratch/tree.json")"

python3 - "$src/perf" "$scratch" "$rate_mbit" "$nodes" "$TOL" <<'PY' || failures=$((failures + 1))
import json, os, sys
sys.path.insert(0, sys.argv[1])
import scaling_model as sm
scratch, rate, nodes, tol = sys.argv[2], float(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
verdicts = os.environ.get("RT_MULTIHOST_CHECK_MODEL") == "1"
ring = json.load(open(f"{scratch}/ring.json"))
tree = json.load(open(f"{scratch}/tree.json"))
nominal = sm.Link(rate * 1e6 / 8, 0.0, "nominal")
model = sm.ring_allreduce_s(nodes, ring["bytes"], nominal)
err = ring["median_s"] / model - 1
within = abs(err) <= tol
in_force = ring["median_s"] >= 0.5 * model
print(f"{('ok  ' if within else 'FAIL') if verdicts else '    '} ring all-reduce of {ring['bytes'] / 2**20:.0f} MiB on "
      f"{nodes} hosts at {rate:g} Mb/s: measured {ring['median_s'] * 1e3:.1f} ms, model 2(N-1)/N*S/B "
      f"{model * 1e3:.1f} ms, error {err * 100:+.1f} % (tolerance {tol * 100:.0f} %{'' if verdicts else ', not checked here'})")
print(f"{'ok  ' if in_force else 'FAIL'} the rate limit is in force: at least half the model's time")
print(f"     Open MPI's own choice: {tree['median_s'] * 1e3:.1f} ms ({tree['median_s'] / ring['median_s']:.2f}x the ring)")
bf16 = json.load(open(f"{scratch}/ring-bf16.json"))
print(f"     bf16 on the wire: {bf16['median_s'] * 1e3:.1f} ms ({ring['median_s'] / bf16['median_s']:.2f}x faster than fp32)")
import os
if os.path.exists(f"{scratch}/limited/metrics.jsonl"):
    bare = sm.workload_from_metrics(f"{scratch}/bare/metrics.jsonl")
    epoch = [json.loads(l) for l in open(f"{scratch}/limited/metrics.jsonl") if '"epoch"' in l][-1]
    p = sm.predict(nodes, bare, nominal, overlap=0.0)
    measured = epoch["epoch_train_s"] / epoch["steps"]
    print(f"     training step under the limit: measured {measured * 1e3:.1f} ms, model {p['step_s'] * 1e3:.1f} ms "
          f"(compute {bare.compute_s * 1e3:.1f} ms from the unlimited run + all-reduce of "
          f"{bare.gradient_bytes / 1e6:.1f} MB at the nominal rate, overlap 0), error "
          f"{(measured / p['step_s'] - 1) * 100:+.1f} %; exposed all-reduce measured "
          f"{epoch['allreduce_s'] / epoch['steps'] * 1e3:.1f} ms, model {p['exposed_s'] * 1e3:.1f} ms")
    half = [json.loads(l) for l in open(f"{scratch}/limited-bf16/metrics.jsonl") if '"epoch"' in l][-1]
    print(f"     training under the limit, bf16 on the wire: {half['epoch_train_s'] / half['steps'] * 1e3:.1f} ms per step "
          f"({measured / (half['epoch_train_s'] / half['steps']):.2f}x faster than fp32), exposed all-reduce "
          f"{half['allreduce_s'] / half['steps'] * 1e3:.1f} ms, test accuracy {half['test_acc']:.4f} (fp32: {epoch['test_acc']:.4f})")
sys.exit(0 if in_force and (within or not verdicts) else 1)
PY
echo "$failures failure(s)"
[ "$failures" = 0 ]

#!/usr/bin/env bash
# scripts/elastic_mpirun.sh on two network-namespace hosts (one rank each, Open MPI over a veth pair, started
# through an `ip netns exec` launcher in place of ssh), synthetic data, a few dozen steps:
#   shrink  dist.on_shrink = keep_global_batch; once the step checkpoint of step 8 exists the rank on host B is
#           SIGKILLed: the run goes on on host A alone (1 rank, 2 accumulation steps) within 60 s, from the newest
#           step checkpoint, ends 0 with one membership record (2 -> 1 ranks, B), and on the parameters of a
#           1-rank run started from that checkpoint
#   bad     a bad job key ends the run at once with 3: no restart
#   nan     a diverging learning rate (non-finite loss, exit 6): no restart, no host dropped
#   spent   ELASTIC_MAX_RESTARTS=0: B's rank killed; the run ends non-zero with the history of its launch
#   min     ELASTIC_MIN_NODES=2: the same, as one host would be too few
# Usage: elastic_netns.sh RINGTRAIN SOURCE_DIR
set -uo pipefail
bin=$(realpath "$1") src=$(realpath "$2")
if [ "$(id -u)" != 0 ]; then echo "SKIP: needs root for network namespaces"; exit 77; fi
command -v ip >/dev/null || { echo "SKIP: ip missing (apt-get install iproute2)"; exit 77; }
command -v mpirun >/dev/null || { echo "SKIP: mpirun missing (apt-get install openmpi-bin)"; exit 77; }

tag=$$   # names unique to this run: several agents or CI jobs may share the kernel
ns_a=rte$tag-a ns_b=rte$tag-b veth_a=rtea$tag veth_b=rteb$tag
net=10.$((200 + RANDOM % 50)).$((RANDOM % 250)).0
addr_a=${net%.0}.1 addr_b=${net%.0}.2 subnet=$net/24
scratch=$(mktemp -d /tmp/rt-elastic-netns.XXXXXX)
source "$(dirname "$0")/netns_hosts.sh"
source "$(dirname "$0")/../support/elastic_checks.sh"
netns_hosts_begin "$scratch" "$ns_a" "$ns_b"
netns_pair_up "$ns_a" "$ns_b" "$veth_a" "$veth_b" "$addr_a" "$addr_b" || exit 1
netns_write_launcher "$scratch/launcher" "$addr_a=$ns_a" "$addr_b=$ns_b"
printf '%s\n%s\n' "$addr_a" "$addr_b" >"$scratch/hostfile"
"$bin" prepare synthetic --shape 1,28,28 --classes 10 --samples 4096 --test-samples 256 --shards 4 \
  --out "$scratch/data" >/dev/null || { echo "FAIL: prepare synthetic"; exit 1; }

failures=0
fail() { echo "FAIL $*"; failures=$((failures + 1)); }
ok() { echo "ok   $*"; }
unset OMPI_MCA_btl OMPI_MCA_btl_tcp_if_include OMPI_MCA_oob_tcp_if_include   # the veth subnet, not loopback
mca=(--mca btl "tcp,self" --mca btl_tcp_if_include "$subnet" --mca oob_tcp_if_include "$subnet")
export ELASTIC_MPIRUN="timeout 300 ip netns exec $ns_a mpirun --allow-run-as-root --mca plm_rsh_agent $scratch/launcher ${mca[*]}"
export ELASTIC_PROBE=$scratch/launcher
read -r -a common <<<"$(elastic_job_args "$scratch/data")"
job_file=$src/jobs/fashion_mnist.toml
elastic() {  # elastic NAME ARGS...: the elastic launcher in the background; its log is $scratch/NAME.log
  # shellcheck disable=SC2086 # $with: VAR=VALUE settings for this launch, none by default
  env ${with:-} "$src/scripts/elastic_mpirun.sh" "$scratch/hostfile" 1 "$bin" train "$job_file" "${common[@]}" \
    --set run.dir="$scratch/$1" "${@:2}" >"$scratch/$1.log" 2>&1 &
}
kill_on_b() {  # SIGKILL the ringtrain rank in host B's namespace
  local p
  for p in $(ip netns pids "$ns_b"); do [ "$(readlink "/proc/$p/exe" 2>/dev/null)" = "$bin" ] && kill -KILL "$p"; done
}
wait_for() {
  local end=$((SECONDS + $1))
  shift
  until "$@"; do [ "$SECONDS" -ge "$end" ] && return 1; sleep 0.1; done
}
t0=$SECONDS

# ---- shrink
elastic shrink
pid=$!
run=$scratch/shrink
if wait_for 120 test -e "$run/checkpoints/ckpt-s000000008.h5"; then
  kill_on_b; kill_at=$SECONDS
  wait_for 60 grep -q '"kind":"membership"' "$run/metrics.jsonl" \
    && ok "the run went on on host A $((SECONDS - kill_at)) s after the kill: $(grep -m1 'elastic restart' "$scratch/shrink.log")" \
    || fail "no membership record 60 s after the kill: $(tail -5 "$scratch/shrink.log")"
  wait "$pid"; rc=$?
  [ "$rc" = 0 ] && ok "the elastic run ended 0" || fail "the elastic run ended $rc: $(tail -5 "$scratch/shrink.log")"
  if step=$(elastic_check_membership "$run" 2 1 "$addr_b"); then
    ok "membership record: 2 -> 1 ranks, $addr_b, resumed from step $step"
    elastic_reference "$run" "$scratch/reference" "$step" \
      ip netns exec "$ns_a" mpirun --allow-run-as-root -np 1 "${mca[@]}" "$bin" train "$job_file" "${common[@]}" \
      && ok "keep_global_batch: the continued run equals a 1-rank run from checkpoint $step" \
      || fail "keep_global_batch: the continued run differs from a 1-rank run from checkpoint $step"
  else
    fail "membership record in $run/metrics.jsonl"
  fi
else
  fail "no checkpoint of step 8 in 120 s: $(tail -5 "$scratch/shrink.log")"
  kill "$pid" 2>/dev/null
  wait "$pid"
fi

# ---- bad: not retried
start=$SECONDS
elastic bad --set train.epochs=-1
wait $!; rc=$?
[ "$rc" = 3 ] && ! grep -q "elastic restart" "$scratch/bad.log" && ok "bad key: exit 3 at once ($((SECONDS - start)) s), no restart" \
  || fail "bad key: exit $rc (want 3, no restart): $(tail -3 "$scratch/bad.log")"

# ---- nan: a diverged run is not retried
elastic nan --set optimizer.base_lr=1000 --set optimizer.warmup_epochs=0
wait $!; rc=$?
[ "$rc" = 6 ] && grep -q "not restarting: the training diverged" "$scratch/nan.log" &&
  ! grep -q "elastic restart" "$scratch/nan.log" && ok "diverged: exit 6, no restart" \
  || fail "diverged: exit $rc (want 6, no restart): $(grep elastic_mpirun "$scratch/nan.log" | tail -3)"

# ---- spent / min: no restart allowed, or too few hosts would be left
for case in "spent ELASTIC_MAX_RESTARTS=0 ELASTIC_MAX_RESTARTS=0 restart(s) spent" \
            "min ELASTIC_MIN_NODES=2 1 host(s) left, ELASTIC_MIN_NODES=2"; do
  name=${case%% *} rest=${case#* }
  setting=${rest%% *} why=${rest#* }
  with=$setting elastic "$name" --set train.epochs=20
  pid=$!
  if wait_for 120 test -e "$scratch/$name/checkpoints/ckpt-s000000008.h5"; then
    kill_on_b
    wait "$pid"; rc=$?
    if [ "$rc" != 0 ] && grep -qF "not restarting ($why)" "$scratch/$name.log" \
       && grep -q "elastic_mpirun:   launch on \[$addr_a $addr_b\] ended with exit $rc" "$scratch/$name.log"; then
      ok "$setting: exit $rc with the history ($why)"
    else
      fail "$name: exit $rc; $(grep elastic_mpirun "$scratch/$name.log" | tail -4)"
    fi
  else
    fail "$name: no checkpoint of step 8 in 120 s"
    kill "$pid" 2>/dev/null
    wait "$pid"
  fi
done

echo "elastic multihost test: $((SECONDS - t0)) s"
if [ "$failures" != 0 ]; then
  for f in "$scratch"/*.log; do echo "== $f"; tail -25 "$f"; done
fi
[ "$failures" = 0 ]

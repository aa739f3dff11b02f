#!/usr/bin/env bash
# Elastic restarts of slurm/train.sbatch on a real two-node Slurm cluster (cluster.sh), synthetic data, a few dozen
# steps a case:
#   shrink    2 nodes x 2 ranks, dist.on_shrink = keep_global_batch; once the step checkpoint of step 8 exists,
#             n2's two ranks are SIGKILLed: the job goes on on n1 (2 ranks, 2 accumulation steps) within 60 s of
#             the kill, from the newest step checkpoint, ends COMPLETED 0 with one membership record (4 -> 2 ranks,
#             n2, the step resumed from); and it ends on the parameters of a run started on 2 ranks from that
#             checkpoint (mpirun, same settings)
#   bad       a bad job key and a damaged shard end the job at once with 3 and 4, a diverging learning rate (a
#             non-finite loss) with 6: no restart
#   spent     ELASTIC_MAX_RESTARTS=1: n2's ranks killed, then n1's after the restart: the job ends non-zero and
#             its log holds the history of both launches
# Usage: elastic_on_slurm.sh RINGTRAIN SOURCE_DIR
set -uo pipefail
bin=$(realpath "$1") src=$(realpath "$2")
here=$(cd "$(dirname "$0")" && pwd)
if [ "$(id -u)" != 0 ]; then echo "SKIP: needs root to run munged and slurmd"; exit 77; fi
# shellcheck source=cluster.sh
source "$here/cluster.sh"
# shellcheck source=../support/elastic_checks.sh
source "$here/../support/elastic_checks.sh"
cluster_install || { echo "FAIL: could not install slurm-wlm/munge"; exit 1; }
command -v mpirun >/dev/null || { echo "SKIP: mpirun missing (the reference run uses it)"; exit 77; }

scratch=$(mktemp -d /tmp/rt-elastic.XXXXXX)   # short: the munge socket path must fit in a sockaddr_un
chmod 755 "$scratch"
cleanup() { cluster_down; rm -rf "$scratch"; }
trap cleanup EXIT
trap 'exit 1' INT TERM
t0=$SECONDS
"$bin" prepare synthetic --shape 1,28,28 --classes 10 --samples 4096 --test-samples 256 --shards 4 \
  --out "$scratch/data" >/dev/null || { echo "FAIL: prepare synthetic"; exit 1; }
cluster_up "$scratch/cluster" n1 n2 || { echo "FAIL: cluster did not come up"; exit 1; }

failures=0
fail() { echo "FAIL $*"; failures=$((failures + 1)); }
ok() { echo "ok   $*"; }
export OMPI_MCA_btl=self,tcp OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo
export RT_BIN=$bin RT_RUN_ROOT=$scratch/runs
read -r -a common <<<"$(elastic_job_args "$scratch/data")"
job_file=$src/jobs/fashion_mnist.toml
cd "$scratch" || exit 1

wait_job() {  # wait_job JOBID SECONDS: until it has left the queue
  local st
  for _ in $(seq $(($2 * 5))); do
    st=$(job_state "$1")
    case "$st" in PENDING|CONFIGURING|RUNNING|COMPLETING|"") sleep 0.2 ;; *) return 0 ;; esac
  done
  echo "job $1 still $st after $2 s"
  return 1
}
submit() {  # submit NAME EXPORTS ARGS...: the job id
  local name=$1 exports=$2
  shift 2
  sbatch --parsable --job-name="$name" --nodes=2 --ntasks-per-node=2 --output="$scratch/%x-%j.out" \
    --export="ALL$exports" "$src/slurm/train.sbatch" "$job_file" "${common[@]}" "$@"
}
# kill_node_ranks JOB NODE: SIGKILL the job's ringtrain ranks that run on NODE (every "node" is this host:
# told apart by SLURMD_NODENAME in their environment). Prints how many.
kill_node_ranks() {
  local p n=0
  for p in $(pgrep -f -- "run.dir=$scratch/runs/$1"); do
    [ "$(readlink "/proc/$p/exe" 2>/dev/null)" = "$bin" ] || continue
    tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "SLURMD_NODENAME=$2" || continue
    kill -KILL "$p" && n=$((n + 1))
  done
  echo "$n"
}
wait_for() {  # wait_for SECONDS CMD...: until CMD succeeds
  local end=$((SECONDS + $1))
  shift
  until "$@"; do [ "$SECONDS" -ge "$end" ] && return 1; sleep 0.1; done
}

# ---- shrink
job=$(submit shrink "") || { echo "FAIL: sbatch refused the job"; exit 1; }
run=$scratch/runs/shrink-$job out=$scratch/shrink-$job.out
if wait_for 120 test -e "$run/checkpoints/ckpt-s000000008.h5"; then
  killed=$(kill_node_ranks "shrink-$job" n2); kill_at=$SECONDS
  echo "killed $killed rank(s) of job $job on n2 after the checkpoint of step 8"
  if wait_for 60 grep -q '"kind":"membership"' "$run/metrics.jsonl"; then
    ok "the job went on on n1 $((SECONDS - kill_at)) s after the kill: $(grep -m1 'elastic restart' "$out")"
  else
    fail "no membership record 60 s after the kill: $(tail -5 "$out")"
  fi
  wait_job "$job" 180
  state=$(job_state "$job") exit_code=$(job_field "$job" ExitCode)
  [ "$state" = COMPLETED ] && [ "$exit_code" = 0:0 ] && ok "job completed with exit 0 after the restart" \
    || fail "job $job: $state $exit_code (want COMPLETED 0:0)"
  if step=$(elastic_check_membership "$run" 4 2 n2); then
    ok "membership record: 4 -> 2 ranks, n2, resumed from step $step ($(grep '"membership"' "$run/metrics.jsonl"))"
    elastic_reference "$run" "$scratch/reference" "$step" \
      mpirun --allow-run-as-root -np 2 --oversubscribe "$bin" train "$job_file" "${common[@]}" \
      && ok "keep_global_batch: the continued run equals a 2-rank run from checkpoint $step" \
      || fail "keep_global_batch: the continued run differs from a 2-rank run from checkpoint $step"
  else
    fail "membership record in $run/metrics.jsonl"
  fi
else
  fail "no checkpoint of step 8 in 120 s: $(tail -5 "$out")"
fi

# ---- bad: the input errors and a diverged run are not retried
mkdir -p "$scratch/damaged" && cp -a "$scratch/data/train" "$scratch/data/test" "$scratch/damaged/"
first=$(ls "$scratch/damaged/train"/shard-*.h5 | head -1)
truncate -s 2000 "$first"
for case in "badkey 3 --set train.epochs=-1" "damaged 4 --set data.train=$scratch/damaged/train" \
            "diverged 6 --set optimizer.base_lr=1000 --set optimizer.warmup_epochs=0"; do
  set -- $case
  name=$1 want=$2
  shift 2
  start=$SECONDS
  job=$(submit "$name" "" "$@") || { fail "sbatch refused $name"; continue; }
  wait_job "$job" 120
  state=$(job_state "$job") exit_code=$(job_field "$job" ExitCode)
  if [ "$exit_code" = "$want:0" ] && ! grep -q "elastic restart" "$scratch/$name-$job.out"; then
    ok "$name: exit $want at once ($((SECONDS - start)) s), no restart"
  else
    fail "$name: job $job $state $exit_code (want $want:0, no restart): $(grep train.sbatch "$scratch/$name-$job.out" | tail -3)"
  fi
done

# ---- spent: a second failure past ELASTIC_MAX_RESTARTS=1
job=$(submit spent ",ELASTIC_MAX_RESTARTS=1" --set train.epochs=20) || { echo "FAIL: sbatch refused the job"; exit 1; }
run=$scratch/runs/spent-$job out=$scratch/spent-$job.out
if wait_for 120 test -e "$run/checkpoints/ckpt-s000000008.h5"; then
  kill_node_ranks "spent-$job" n2 >/dev/null
  if wait_for 60 grep -q '"kind":"membership"' "$run/metrics.jsonl"; then
    sleep 2
    kill_node_ranks "spent-$job" n1 >/dev/null
  fi
  wait_job "$job" 120
  exit_code=$(job_field "$job" ExitCode)
  if [ "${exit_code%%:*}" != 0 ] && grep -q "not restarting (ELASTIC_MAX_RESTARTS=1 restart(s) spent)" "$out" \
     && grep -q "train.sbatch:   restart 1: on \[n1\]" "$out" && [ "$(grep -c "train.sbatch:   launch on" "$out")" = 2 ]; then
    ok "past ELASTIC_MAX_RESTARTS: exit $exit_code with the history: $(grep -c 'train.sbatch:   ' "$out") lines"
  else
    fail "spent: job $job exit $exit_code; $(grep train.sbatch "$out" | tail -6)"
  fi
else
  fail "spent: no checkpoint of step 8 in 120 s: $(tail -5 "$out")"
fi

echo "elastic slurm test: $((SECONDS - t0)) s"
if [ "$failures" != 0 ]; then
  for f in "$scratch"/*.out; do echo "== $f"; tail -25 "$f"; done
  tail -n 5 "$scratch"/cluster/log/*.log
fi
[ "$failures" = 0 ]

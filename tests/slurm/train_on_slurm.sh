#!/usr/bin/env bash
# A real Slurm cluster (munged, slurmctld, two slurmd nodes on loopback) runs slurm/train.sbatch: Fashion-MNIST
# on 2 nodes x 1 task through `srun --mpi=pmix`. Mid-way through the second epoch the job gets SIGUSR1 (as
# --signal=USR1@120 would send it before the time limit); the ranks checkpoint and exit 75, the script
# requeues the job, the requeued job resumes from the checkpoint and completes. Checked: the job ends
# COMPLETED with exit 0 after exactly one restart, the log shows the stop and the resume, metrics.jsonl has
# both epochs on 2 ranks. A second job stages the shards to node-local disk (RT_STAGE_DATA); then
# a job with a bad key must fail with ringtrain's exit code; a rank killed with SIGKILL ends the job by itself;
# slurm/scaling_study.sh runs a 1- and 2-node
# strong-scaling study and writes its report.
# Usage: train_on_slurm.sh RINGTRAIN SOURCE_DIR DATA_DIR
set -uo pipefail
bin=$(realpath "$1") src=$(realpath "$2") data=$(realpath -m "$3")
here=$(cd "$(dirname "$0")" && pwd)
if [ "$(id -u)" != 0 ]; then echo "SKIP: needs root to run munged and slurmd"; exit 77; fi
if [ ! -d /usr/share/datasets/fashion-mnist ]; then
  echo "SKIP: /usr/share/datasets/fashion-mnist is missing (apt-get install dataset-fashion-mnist)"; exit 77
fi
# shellcheck source=cluster.sh
source "$here/cluster.sh"
cluster_install || { echo "FAIL: could not install slurm-wlm/munge"; exit 1; }

mkdir -p "$data"
( flock 9
  [ -f "$data/fmnist/.complete" ] || { "$bin" prepare fashion-mnist --out "$data/fmnist" --shards 8 --overwrite >/dev/null && touch "$data/fmnist/.complete"; }
) 9>"$data/.fmnist.lock"

# Short paths: the munge socket path must fit in a sockaddr_un.
scratch=$(mktemp -d /tmp/rt-slurm.XXXXXX)
chmod 755 "$scratch"
cleanup() { cluster_down; rm -rf "$scratch"; }
trap cleanup EXIT
trap 'exit 1' INT TERM
t0=$(date +%s)
cluster_up "$scratch/cluster" n1 n2 || { echo "FAIL: cluster did not come up"; exit 1; }
echo "srun --mpi=list: $(srun --mpi=list 2>&1 | tr '\n' ' ')"

failures=0
fail() { echo "FAIL $*"; failures=$((failures + 1)); }
ok() { echo "ok   $*"; }

# Both "nodes" are this host: keep MPI on loopback, and no shared-memory transport between "nodes" (their
# segment names would collide).
export OMPI_MCA_btl=self,tcp OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo
export RT_BIN=$bin RT_RUN_ROOT=$scratch/runs
# The report's plot needs matplotlib, which apt installs for Debian's interpreter (a pyenv python3 first on
# PATH would not see it).
[ -x /usr/bin/python3 ] && export RT_PYTHON=/usr/bin/python3
common=(--set data.train="$data/fmnist/train" --set data.test="$data/fmnist/test" --set run.progress_every_s=1000
        --set run.threads=1)

# wait_job JOBID SECONDS: until the job has left the queue for good (a requeued job passes through
# REQUEUED/PENDING again).
wait_job() {
  local st last="" start=$SECONDS
  for _ in $(seq $(($2 * 5))); do
    st=$(job_state "$1")
    [ "$st" != "$last" ] && echo "  job $1 at +$((SECONDS - start)) s: $st $(job_field "$1" Reason)" && last=$st
    case "$st" in PENDING|CONFIGURING|RUNNING|COMPLETING|REQUEUED|REQUEUE_HOLD|REQUEUE_FED|"") sleep 0.2 ;; *) return 0 ;; esac
  done
  echo "job $1 still $st after $2 s"
  return 1
}

# ---- 1. train on 2 nodes, preempt with SIGUSR1, requeue, resume
cd "$scratch"
# The ranks wait for the signal before epoch 2's third step at the latest (fault_injection.h; sbatch and srun pass
# the environment on), so it lands inside epoch 2 however fast the machine runs its steps.
job=$(RINGTRAIN_TEST_AWAIT_STOP=2:3 sbatch --parsable --job-name=fmnist --nodes=2 --ntasks-per-node=1 --output="$scratch/%x-%j.out" \
      "$src/slurm/train.sbatch" "$src/jobs/fashion_mnist.toml" "${common[@]}" \
      --set train.epochs=2 --set train.max_steps_per_epoch=30) || { echo "FAIL: sbatch refused the job"; exit 1; }
run=$scratch/runs/fmnist-$job
out=$scratch/fmnist-$job.out
echo "submitted job $job (run dir $run)"
for _ in $(seq 1200); do   # the first epoch's checkpoint: the signal then lands in epoch 2
  compgen -G "$run/checkpoints/ckpt-*.h5" >/dev/null && break
  case "$(job_state "$job")" in PENDING|CONFIGURING|RUNNING) ;; *) break ;; esac
  sleep 0.1
done
if compgen -G "$run/checkpoints/ckpt-*.h5" >/dev/null; then
  scancel --signal=USR1 "$job" && echo "sent SIGUSR1 to the job's tasks"
else
  fail "no checkpoint after epoch 1 (job state $(job_state "$job"))"
fi
wait_job "$job" 240
state=$(job_state "$job") exit_code=$(job_field "$job" ExitCode) restarts=$(job_field "$job" Restarts)
echo "job $job: $state, exit $exit_code, restarts $restarts"
if [ "$state" = COMPLETED ] && [ "$exit_code" = 0:0 ] && [ "$restarts" = 1 ]; then
  ok "job completed with exit 0 after one requeue"
else
  fail "job $job: state $state exit $exit_code restarts $restarts (want COMPLETED 0:0 1)"
fi
grep -q "stopped for preemption" "$out" && grep -q "requeueing job $job" "$out" &&
  grep -q "checkpointing after epoch 2 step" "$out" && ok "ranks stopped with exit 75 inside epoch 2, job requeued" \
  || fail "no preemption stop inside epoch 2 and requeue in $out"
grep -q "resumed from" "$out" && grep -q "continuing with --resume" "$out" && ok "requeued job resumed from the checkpoint" \
  || fail "no resume in $out"
python3 - "$run/metrics.jsonl" <<'PY' && ok "metrics: 2 epochs on 2 ranks" || fail "metrics.jsonl"
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
epochs = [r for r in recs if r["kind"] == "epoch"]
assert [e["epoch"] for e in epochs] == [1, 2], epochs
assert all(e["ranks"] == 2 and e["global_batch"] == 128 and e["samples_per_s"] > 0 for e in epochs), epochs
assert epochs[-1]["test_acc"] > 0.5, f"test accuracy {epochs[-1]['test_acc']} after 60 steps"
starts = [r for r in recs if r["kind"] == "job"]
assert len(starts) == 2 and starts[1]["resumed_from"], starts   # the requeued run appended its own start
print(f"test_acc {epochs[-1]['test_acc']:.4f}, {epochs[-1]['samples_per_s']:.0f} samples/s")
PY

# ---- 2. node-local staging: every node reads its own copy
job=$(sbatch --parsable --job-name=staged --nodes=2 --ntasks-per-node=1 --output="$scratch/%x-%j.out" \
      --export=ALL,RT_STAGE_DATA="$data/fmnist",RT_STAGE_ROOT="$scratch/cluster/tmp" \
      "$src/slurm/train.sbatch" "$src/jobs/fashion_mnist.toml" "${common[@]}" \
      --set train.epochs=1 --set train.max_steps_per_epoch=10) || { echo "FAIL: sbatch refused the job"; exit 1; }
wait_job "$job" 180
state=$(job_state "$job") exit_code=$(job_field "$job" ExitCode)
out=$scratch/staged-$job.out
if [ "$state" = COMPLETED ] && [ "$exit_code" = 0:0 ] && grep -q "staged .* to $scratch/cluster/tmp/ringtrain-stage-$job" "$out" \
   && grep -q "ringtrain-stage-$job/n1/train" "$scratch/runs/staged-$job/job.resolved.toml" \
   && [ ! -e "$scratch/cluster/tmp/ringtrain-stage-$job" ]; then
  ok "staged job read node-local shards and removed them: $(grep -o 'staged .* ms$' "$out")"
else
  fail "staged job $job: $state $exit_code; $(grep train.sbatch "$out" | tail -3)"
fi

# ---- 3. a job file error is the job's exit code (no requeue): ringtrain's exit 3 on both ranks
job=$(sbatch --parsable --job-name=badkey --nodes=2 --ntasks-per-node=1 --output="$scratch/%x-%j.out" \
      "$src/slurm/train.sbatch" "$src/jobs/fashion_mnist.toml" "${common[@]}" --set train.epochs=-1) \
  || { echo "FAIL: sbatch refused the job"; exit 1; }
wait_job "$job" 120
state=$(job_state "$job") exit_code=$(job_field "$job" ExitCode) restarts=$(job_field "$job" Restarts)
if [ "$state" = FAILED ] && [ "$exit_code" = 3:0 ] && [ "$restarts" = 0 ]; then
  ok "a bad job key fails the job with ringtrain's exit 3, not requeued"
else
  fail "bad-key job $job: $state exit $exit_code restarts $restarts (want FAILED 3:0 0)"
fi

# ---- 4. a rank killed with SIGKILL under srun: the job must end non-zero by itself, not hang; 60 s is the ceiling of
# "by itself" (about 5 s here), as in the other fault tests, not a speed target (perf/fault_end_times.sh measures
# that). Elastic restarts off: they have their own test, elastic_on_slurm.sh
job=$(sbatch --parsable --job-name=killed --nodes=2 --ntasks-per-node=1 --output="$scratch/%x-%j.out" \
      --export=ALL,ELASTIC_MAX_RESTARTS=0 \
      "$src/slurm/train.sbatch" "$src/jobs/fashion_mnist.toml" "${common[@]}" --set train.epochs=5) \
  || { echo "FAIL: sbatch refused the job"; exit 1; }
victim=""
for _ in $(seq 1200); do   # wait until both ranks are in the step loop (the first progress/epoch line is not needed)
  grep -q "^gradients:" "$scratch/killed-$job.out" 2>/dev/null && \
    victim=$(pgrep -f -- "run.dir=$scratch/runs/killed-$job" | while read -r p; do
               [ "$(readlink "/proc/$p/exe")" = "$(readlink -f "$bin")" ] && echo "$p"; done | tail -1)
  [ -n "$victim" ] && break
  sleep 0.1
done
if [ -z "$victim" ]; then
  fail "killed job $job: no training rank found to kill (state $(job_state "$job"))"
else
  sleep 1; kill -KILL "$victim"; killed_at=$SECONDS
  wait_job "$job" 90
  took=$((SECONDS - killed_at)) state=$(job_state "$job") exit_code=$(job_field "$job" ExitCode)
  if [ "$state" != COMPLETED ] && [ "${exit_code%%:*}" != 0 ] && [ "$took" -le 60 ]; then
    ok "rank PID $victim killed with SIGKILL: job $state (exit $exit_code) $took s later"
  else
    fail "killed job $job: $state exit $exit_code $took s after SIGKILL (want non-zero within 60 s)"
  fi
fi

# ---- 5. a strong-scaling study at 1 and 2 nodes (fixed global batch 64): two jobs, one report
if "$src/slurm/scaling_study.sh" --mode strong --global-batch 64 --nodes "1 2" --out "$scratch/study" \
     "$src/jobs/fashion_mnist.toml" "${common[@]}" --set train.epochs=1 --set train.max_steps_per_epoch=5 \
     >"$scratch/study.log" 2>&1 \
   && grep -q "^| n2-r2 | 2 | 64 |" "$scratch/study/report.md" && grep -q "^| n1-r1 | 1 | 64 |" "$scratch/study/report.md" \
   && [ -s "$scratch/study/report.png" ]; then
  ok "strong-scaling study: 1 and 2 node jobs, report with $(grep -c '^| n' "$scratch/study/report.md") rows and a plot"
else
  fail "scaling study: $(tail -5 "$scratch/study.log")"
fi

echo "slurm test: $(($(date +%s) - t0)) s"
if [ "$failures" != 0 ]; then
  for f in "$scratch"/*.out; do echo "== $f"; tail -20 "$f"; done
  tail -n 5 "$scratch"/cluster/log/*.log
fi
[ "$failures" = 0 ]

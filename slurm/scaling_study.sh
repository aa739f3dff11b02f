#!/usr/bin/env bash
# scaling_study.sh — the same training job at 1, 2, 4, ... nodes, each a separate Slurm job through
# slurm/train.sbatch; waits for them, then writes a scaling report (perf/scaling_report.py) over their
# metrics.jsonl (refusing an --out that already holds a study; a size sbatch refuses is skipped and said, a held job
# said and left out). Each point runs without elastic restarts (ELASTIC_MAX_RESTARTS=0: a point measures its own world
# size) and counts only when its last epoch record is its job's last epoch at the job's ranks.
#
#   slurm/scaling_study.sh [options] JOB_FILE [--set key=value ...]
#     --mode weak|strong   weak: the job's per-rank batch at every size (global batch grows with the ranks);
#                          strong: --global-batch fixed, per-rank batch = global / ranks (must divide)
#     --nodes "1 2 4 8"    node counts (default "1 2 4")
#     --tasks-per-node G   ranks per node, one per GPU (default 1)
#     --gpus-per-task N    add --gpus-per-task=N to every job (GPU clusters; default: none, CPU)
#     --cpus-per-task C    add --cpus-per-task=C to every job: a GPU rank's loader and compute threads need cores of
#                          their own (without it Slurm gives each task one, and the study measures a starved loader)
#     --global-batch B     strong scaling's global batch
#     --out DIR            study folder: one run directory per size, the jobs' logs, report.md/.png
#                          (default runs/scaling-<mode>-<date>)
#     --sbatch "ARGS"      more sbatch options for every job (partition, account, time, ...)
#     --no-wait            submit and print the job ids only
#     --target-acc A       the report also gives the epoch each size first reached test accuracy A (weak scaling
#                          grows the global batch: does accuracy hold?)
# RT_PYTHON: the interpreter for the report (it needs matplotlib: Debian's python3-matplotlib).
# The job file's learning rate is scaled to each global batch by ringtrain itself (optimizer.base_batch and
# optimizer.lr_scaling).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/.." && pwd)
mode=weak nodes="1 2 4" tasks=1 gpus="" cpus="" global_batch="" out="" extra="" wait=1 target=""
while [ $# -gt 0 ]; do
  case "$1" in
    --mode) mode=$2; shift 2 ;;
    --nodes) nodes=$2; shift 2 ;;
    --tasks-per-node) tasks=$2; shift 2 ;;
    --gpus-per-task) gpus=$2; shift 2 ;;
    --cpus-per-task) cpus=$2; shift 2 ;;
    --global-batch) global_batch=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --sbatch) extra=$2; shift 2 ;;
    --no-wait) wait=0; shift ;;
    --target-acc) target=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/{/^set -euo/!p}' "$0"; exit 0 ;;
    -*) echo "scaling_study.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) break ;;
  esac
done
[ $# -ge 1 ] || { echo "usage: slurm/scaling_study.sh [options] JOB_FILE [--set key=value ...]" >&2; exit 2; }
job_file=$1
shift
case "$mode" in
  weak) ;;
  strong) [ -n "$global_batch" ] || { echo "scaling_study.sh: --mode strong needs --global-batch" >&2; exit 2; } ;;
  *) echo "scaling_study.sh: --mode is weak or strong, not '$mode'" >&2; exit 2 ;;
esac
out=$(realpath -m "${out:-runs/scaling-$mode-$(date +%Y%m%d-%H%M%S)}")
# A study folder that holds another study's runs would put them in this report (and their sizes' jobs would be
# refused by train.sbatch, their run directories taken).
if [ -d "$out" ] && [ -n "$(ls -A "$out")" ]; then
  echo "scaling_study.sh: --out '$out' already holds a study; give a new folder" >&2
  exit 2
fi
mkdir -p "$out"

declare -A job_of
runs=()
refused=0
for n in $nodes; do
  ranks=$((n * tasks))
  batch_args=()
  if [ "$mode" = strong ]; then
    if [ $((global_batch % ranks)) != 0 ]; then
      echo "scaling_study.sh: global batch $global_batch does not divide over $ranks ranks; skipping $n nodes" >&2
      continue
    fi
    batch_args=(--set train.batch_per_rank=$((global_batch / ranks)) --set train.accumulate_steps=1)
  fi
  run=$out/n$n-r$ranks
  # shellcheck disable=SC2086  # $extra is a list of sbatch options
  # ELASTIC_MAX_RESTARTS=0: a point measures its own world size; a restart on fewer nodes would mix two in one run
  # (and one that happened anyway, under an sbatch --export that drops it, does not count as finished below). The
  # run directory goes as an argument, which no --export drops.
  # A size sbatch refuses (a partition limit) is skipped and said, as one that does not divide: the sizes already
  # submitted are still waited for and reported.
  if ! id=$(ELASTIC_MAX_RESTARTS=0 sbatch --parsable --job-name="scale-$mode-n$n" --nodes="$n" --ntasks-per-node="$tasks" \
         ${gpus:+--gpus-per-task=$gpus} ${cpus:+--cpus-per-task=$cpus} --output="$out/%x-%j.out" $extra \
         "$src/slurm/train.sbatch" "$job_file" "$@" "${batch_args[@]}" --set run.dir="$run"); then
    echo "scaling_study.sh: sbatch refused $n node(s) (its error is above); skipping that size" >&2
    refused=$((refused + 1))
    continue
  fi
  job_of[$run]=${id%%;*}   # --parsable on a federation or with -M prints "id;cluster"
  runs+=("$run")
  echo "submitted $n node(s) x $tasks = $ranks ranks: job $id -> $run"
done
[ ${#runs[@]} -gt 0 ] || { echo "scaling_study.sh: nothing submitted" >&2; exit 1; }
[ "$wait" = 1 ] || exit 0

# finished RUN: its last epoch record is the job's last epoch (the job record's "epochs"), at the job record's ranks.
finished() {
  "${RT_PYTHON:-python3}" - "$1/metrics.jsonl" <<'PY' 2>/dev/null
import json, sys
def parsed(line):  # a line a killed job left half written is no record
    try:
        return json.loads(line)
    except ValueError:
        return None
records = [r for r in map(parsed, open(sys.argv[1])) if isinstance(r, dict)]
jobs = [r for r in records if r.get("kind") == "job"]
epochs = [r for r in records if r.get("kind") == "epoch"]
sys.exit(0 if jobs and epochs and epochs[-1]["epoch"] == jobs[-1]["epochs"] and
         all(e["ranks"] == jobs[0]["ranks"] for e in epochs) else 1)
PY
}
# Poll (no accounting needed): a requeued job passes through PENDING again. scontrol may not answer (a busy
# controller) or may have forgotten the job (MinJobAge): the run directory then says whether it finished, and only a
# run whose last epoch record is its job's last epoch counts.
# While a job waits, its state and Slurm's reason are said every STUDY_REPORT_S seconds (default 300), so a held or
# never-scheduled job shows instead of a silent wait; a held one (REQUEUE_HOLD, or PENDING held by a user or an
# admin) needs a human: the study says so and goes on to the next size.
failed=$refused
for run in "${runs[@]}"; do
  id=${job_of[$run]}
  waited=0
  while :; do
    line=$(scontrol show job -o "$id" 2>/dev/null || true)
    state=$(grep -o 'JobState=[A-Z_]*' <<<"$line" | cut -d= -f2 || true)
    reason=$(grep -o 'Reason=[^ ]*' <<<"$line" | cut -d= -f2 || true)
    if [ "$state" = REQUEUE_HOLD ] || { [ "$state" = PENDING ] && [[ "$reason" == *Held* ]]; }; then
      echo "scaling_study.sh: job $id is held ($state, $reason): release it (scontrol release $id) and run the" \
           "report by hand, or cancel it; going on without it" >&2
      break
    fi
    case "$state" in
      PENDING|CONFIGURING|RUNNING|COMPLETING|REQUEUED|REQUEUE_FED|SUSPENDED|SIGNALING|STAGE_OUT|RESIZING)
        sleep 2; waited=$((waited + 2))
        every=${STUDY_REPORT_S:-300}; [ "$every" -gt 0 ] 2>/dev/null || every=300
        if [ $((waited % every)) = 0 ]; then echo "job $id: $state ($reason) after ${waited} s"; fi ;;
      "") finished "$run" && break; sleep 5; state=$(scontrol show job -o "$id" 2>/dev/null | grep -o 'JobState=[A-Z_]*' | cut -d= -f2 || true)
          [ -z "$state" ] && break ;;
      *) break ;;
    esac
  done
  if [ -s "$run/metrics.jsonl" ] && finished "$run" && [ "${state:-COMPLETED}" = COMPLETED ]; then
    echo "job $id: ${state:-finished} ($run)"
  else
    echo "job $id: ${state:-gone} without its last epoch's record in $run; see $out/*-$id.out" >&2
    failed=$((failed + 1))
  fi
done
good=()
for run in "${runs[@]}"; do [ -s "$run/metrics.jsonl" ] && finished "$run" && good+=("$run"); done
[ ${#good[@]} -gt 0 ] && "${RT_PYTHON:-python3}" "$src/perf/scaling_report.py" ${target:+--target-acc "$target"} \
  --out "$out/report" "${good[@]}"
[ "$failed" = 0 ]

#!/usr/bin/env bash
# batch_size_study.sh — the accuracy half of a scaling study on one machine: the same job at growing global
# batches, the batch grown by gradient accumulation (train.accumulate_steps) on a fixed number of ranks, so one
# machine emulates the global batch of a large job (same arithmetic: N ranks x b x k samples per optimizer step).
# For each global batch, optimizer and seed it trains to the epoch budget, then perf/scaling_report.py writes the
# table (final test accuracy, epochs to --target-acc, samples/s; the mean and range over seeds) and the PNG
# (accuracy against global batch, one line per optimizer, next to throughput).
#
#   perf/batch_size_study.sh [options] JOB_FILE [--set key=value ...]
#     --batches "128 512 2048 8192"   global batches (each a multiple of ranks x batch-per-rank, or smaller than it
#                                      and a multiple of ranks)
#     --optimizers "sgd lars adamw"    optimizer.name for each series
#     --opt NAME:key=value,key=value   job keys for one optimizer's runs (repeatable), e.g.
#                                      --opt lars:optimizer.base_lr=8,optimizer.lr_scaling=none
#     --seeds "1 2"                    train.seed of each repeat
#     --ranks N                        MPI ranks (default 2); --batch-per-rank B (default 64)
#     --epochs E                       the budget in epochs (default: the job file's)
#     --target-acc A                   report the epoch each run first reached test accuracy A
#     --out DIR                        one run directory per run, their logs, report.md/.png
#                                      (default runs/batch-study-<date>); runs already finished there are kept
# RT_BIN: the ringtrain binary (default build/bin/ringtrain); RT_PYTHON: Python with matplotlib for the report
# (default Debian's /usr/bin/python3, which python3-matplotlib serves).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/.." && pwd)
batches="128 512 2048 8192" optimizers="sgd lars adamw" seeds="1 2" ranks=2 per_rank=64 epochs="" target="" out=""
declare -A opt_keys
while [ $# -gt 0 ]; do
  case "$1" in
    --batches) batches=$2; shift 2 ;;
    --optimizers) optimizers=$2; shift 2 ;;
    --opt) opt_keys[${2%%:*}]="${opt_keys[${2%%:*}]:-}${opt_keys[${2%%:*}]:+,}${2#*:}"; shift 2 ;;
    --seeds) seeds=$2; shift 2 ;;
    --ranks) ranks=$2; shift 2 ;;
    --batch-per-rank) per_rank=$2; shift 2 ;;
    --epochs) epochs=$2; shift 2 ;;
    --target-acc) target=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
    -*) echo "batch_size_study.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) break ;;
  esac
done
[ $# -ge 1 ] || { echo "usage: perf/batch_size_study.sh [options] JOB_FILE [--set key=value ...]" >&2; exit 2; }
job_file=$1
shift
bin=${RT_BIN:-$src/build/bin/ringtrain}
out=$(realpath -m "${out:-runs/batch-study-$(date +%Y%m%d-%H%M%S)}")
mkdir -p "$out"

# micro_batch GLOBAL: "BATCH_PER_RANK ACCUMULATE" giving GLOBAL on $ranks ranks, or nothing if none does.
micro_batch() {
  local global=$1
  if [ "$global" -ge $((ranks * per_rank)) ] && [ $((global % (ranks * per_rank))) = 0 ]; then
    echo "$per_rank $((global / (ranks * per_rank)))"
  elif [ "$global" -lt $((ranks * per_rank)) ] && [ $((global % ranks)) = 0 ]; then
    echo "$((global / ranks)) 1"
  fi
}


runs=()
for seed in $seeds; do
  for global in $batches; do
    read -r b k <<<"$(micro_batch "$global")" || true
    if [ -z "${b:-}" ]; then
      echo "batch_size_study.sh: global batch $global is not reachable on $ranks ranks x $per_rank; skipped" >&2
      continue
    fi
    for optimizer in $optimizers; do
      run=$out/$optimizer-b$global-s$seed
      runs+=("$run")
      sets=(--set optimizer.name="$optimizer" --set train.seed="$seed" --set train.batch_per_rank="$b"
            --set train.accumulate_steps="$k" --set run.dir="$run" --set run.overwrite=true
            --set run.progress_every_s=1000 --set run.tensorboard=false)
      [ -n "$epochs" ] && sets+=(--set train.epochs="$epochs")
      IFS=, read -r -a keys <<<"${opt_keys[$optimizer]:-}"
      for kv in "${keys[@]}"; do [ -n "$kv" ] && sets+=(--set "$kv"); done
      if [ -s "$run/metrics.jsonl" ] && [ -f "$run/study-done" ]; then
        echo "kept   $run"
        continue
      fi
      start=$(date +%s)
      rc=0
      mpirun -np "$ranks" --oversubscribe "$bin" train "$job_file" "$@" "${sets[@]}" </dev/null >"$run.log" 2>&1 || rc=$?
      acc=$(grep -o '"test_acc":[0-9.]*' "$run/metrics.jsonl" 2>/dev/null | tail -1 | cut -d: -f2 || true)
      if [ "$rc" = 0 ]; then
        touch "$run/study-done"
        echo "done   $run: ${b}x${k}x$ranks, test accuracy $acc, $(( $(date +%s) - start )) s"
      elif [ "$rc" = 6 ] && grep -qE 'non-finite training (loss|parameters|state)' "$run.log" && [ -n "$acc" ]; then
        # Diverged: an outcome of the study, not a failure of it. The report shows its last epoch record (and
        # fewer epochs than the budget).
        touch "$run/study-done" "$run/study-diverged"
        echo "diverged $run: ${b}x${k}x$ranks, non-finite loss; last test accuracy $acc"
      else
        echo "failed $run: exit $rc, see $run.log ($(grep -m1 -i 'error' "$run.log" || tail -1 "$run.log"))" >&2
      fi
    done
  done
done

good=()
for run in "${runs[@]}"; do [ -f "$run/study-done" ] && good+=("$run"); done
[ ${#good[@]} -gt 0 ] || { echo "batch_size_study.sh: no run finished" >&2; exit 1; }
"${RT_PYTHON:-/usr/bin/python3}" "$src/perf/scaling_report.py" --x global_batch ${target:+--target-acc "$target"} \
  --out "$out/report" "${good[@]}"

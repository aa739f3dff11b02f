#!/usr/bin/env bash
# Owns the A/B comparison of ringtrain-bench builds on a noisy host: alternating the binaries round by round puts
# them under the same drift of load, which a before-run and an after-run apart would not share.
#   perf/alternate_bench.sh ROUNDS FILTER BINARY...
# Each binary in turn per round (pinned to the last CPU this process may use, three repetitions), its median per
# round in the benchmark's own time unit (give FILTER one benchmark: each median found joins the list), then each
# binary's min and median over the rounds, on stdout (records keep that output as a .txt beside their .md).
set -euo pipefail
rounds=$1 filter=$2
shift 2
cpu=$(python3 -c 'import os; print(max(os.sched_getaffinity(0)))')
declare -A all
for r in $(seq "$rounds"); do
  for b in "$@"; do
    # The output first, then its medians: a binary that aborts after printing them (teardown, MPI_Finalize) must
    # not pass for one that ran.
    rc=0
    log=$(taskset -c "$cpu" "$b" --benchmark_filter="$filter" --benchmark_repetitions=3 2>&1) || rc=$?
    if [ "$rc" != 0 ]; then
      echo "alternate_bench: $b exited $rc in round $r:" >&2
      tail -5 <<<"$log" >&2
      exit 1
    fi
    v=$(awk '/_median/ {print $2}' <<<"$log")
    [ -n "$v" ] || { echo "alternate_bench: $b printed no median for '$filter' in round $r" >&2; exit 1; }
    all[$b]="${all[$b]:-} $v"
  done
done
for b in "$@"; do
  echo "$b: ${all[$b]}" | python3 -c "
import sys, statistics
n, v = sys.stdin.read().split(':')
v = [float(x) for x in v.split()]
print(n, 'min %.2f median %.2f' % (min(v), statistics.median(v)), v)"
done

#!/bin/bash
# alternate_bench.sh ROUNDS FILTER BINARY...: each ringtrain-bench binary in turn per round (taskset -c 1, three
# repetitions), its median ms per round, then each binary's min and median over the rounds.
rounds=$1; filter=$2; shift 2
declare -A all
for r in $(seq $rounds); do
  for b in "$@"; do
    v=$(taskset -c 1 $b --benchmark_filter="$filter" --benchmark_repetitions=3 2>&1 | grep "_median" | awk '{print $2}')
    all[$b]="${all[$b]} $v"
  done
done
for b in "$@"; do echo "$b: ${all[$b]}" | python3 -c "
import sys,statistics; n,v=sys.stdin.read().split(':'); v=[float(x) for x in v.split()]; print(n, 'min %.2f median %.2f'%(min(v),statistics.median(v)), v)"; done

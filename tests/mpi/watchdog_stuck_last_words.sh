#!/usr/bin/env bash
# Usage: watchdog_stuck_last_words.sh BINARY. Passes if the process ends with exit 6 (timeout 1 s, last words given
# at most 2 s) and says both why it stalled and that the trace was not written. Left alone the binary sleeps 60 s
# and exits 0; the ceiling of 50 s is that of "the watchdog ended it", not a speed target (about 5 s here:
# perf/fault_end_times.sh measures it).
set -uo pipefail
ceiling_s=50
start=$(date +%s.%N)
out=$(timeout "$ceiling_s" mpirun -np 1 "$1" 2>&1)
rc=$? took=$(awk -v from="$start" -v to="$(date +%s.%N)" 'BEGIN { printf "%.1f", to - from }')
echo "$out" | grep -v '^ *$' | tail -8
if [ "$rc" = 6 ] && grep -q "has not completed after" <<<"$out" && grep -q "was not written within 2 s" <<<"$out"; then
  echo "ok   stalled collective with hanging last words ended in ${took} s with exit 6"
else
  echo "FAIL exit $rc after ${took} s (want 6 within $ceiling_s s, with both messages)"
  exit 1
fi

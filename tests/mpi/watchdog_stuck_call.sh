#!/usr/bin/env bash
# Usage: watchdog_stuck_call.sh BINARY. Passes if a main-thread MPI call that never returns ends the rank with
# exit 6, saying which call and at which step: after SIGTERM's grace ("sigterm": the message says "terminated"),
# and at a 1 s collective timeout without SIGTERM ("stall"). Left alone the binary sleeps 60 s and exits 0; the
# ceiling of 50 s is that of "the watchdog ended it", not a speed target (about 7 s and 3 s here, mpirun included:
# perf/fault_end_times.sh measures it).
set -uo pipefail
ceiling_s=50
failures=0
check() {  # MODE WORD
  local start out rc took
  start=$(date +%s.%N)
  out=$(timeout "$ceiling_s" mpirun -np 1 "$bin" "$1" 2>&1)
  rc=$? took=$(awk -v from="$start" -v to="$(date +%s.%N)" 'BEGIN { printf "%.1f", to - from }')
  echo "$out" | grep -v '^ *$' | tail -4
  if [ "$rc" = 6 ] && grep -q "^ringtrain: $2 (exit 6)" <<<"$out" &&
     grep -q "'a progress poll that never returns' at step 42, a call that returns at once" <<<"$out"; then
    echo "ok   $1: stuck call ended in ${took} s with exit 6"
  else
    echo "FAIL $1: exit $rc after ${took} s (want 6 within $ceiling_s s, '$2' naming the call and step 42)"
    failures=$((failures + 1))
  fi
}
bin=$1
check sigterm terminated
check stall stall
exit $((failures > 0))

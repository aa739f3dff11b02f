#!/usr/bin/env bash
# Usage: watchdog_stuck_call.sh BINARY. Passes if a main-thread MPI call that never returns ends the rank with
# exit 6, saying which call and at which step: within 9 s of SIGTERM (grace 5 s), and within 5 s of start at a
# 1 s collective timeout without one.
set -uo pipefail
failures=0
check() {  # MODE WORD MAX_SECONDS
  local start=$SECONDS out rc took
  out=$(timeout 60 mpirun -np 1 "$bin" "$1" 2>&1)
  rc=$? took=$((SECONDS - start))
  echo "$out" | grep -v '^ *$' | tail -4
  if [ "$rc" = 6 ] && [ "$took" -le "$3" ] && grep -q "^ringtrain: $2 (exit 6)" <<<"$out" &&
     grep -q "'a progress poll that never returns' at step 42, a call that returns at once" <<<"$out"; then
    echo "ok   $1: stuck call ended in ${took} s with exit 6"
  else
    echo "FAIL $1: exit $rc after ${took} s (want 6 within $3 s, '$2' naming the call and step 42)"
    failures=$((failures + 1))
  fi
}
bin=$1
check sigterm terminated 9
check stall stall 5
exit $((failures > 0))

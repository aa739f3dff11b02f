#!/usr/bin/env bash
# Usage: watchdog_stuck_last_words.sh BINARY. Passes if the process ends with exit 6 within 10 s (timeout 1 s,
# last words given at most 2 s) and says both why it stalled and that the trace was not written.
set -uo pipefail
start=$SECONDS
out=$(timeout 60 mpirun -np 1 "$1" 2>&1)
rc=$? took=$((SECONDS - start))
echo "$out" | grep -v '^ *$' | tail -8
if [ "$rc" = 6 ] && [ "$took" -lt 10 ] && grep -q "has not completed after" <<<"$out" &&
   grep -q "was not written within 2 s" <<<"$out"; then
  echo "ok   stalled collective with hanging last words ended in ${took} s with exit 6"
else
  echo "FAIL exit $rc after ${took} s (want 6 within 10 s, with both messages)"
  exit 1
fi

#!/usr/bin/env bash
# Bad input on 2 ranks: every rank exits non-zero with the same message, quickly, and nothing is written.
# Usage: bad_input.sh RINGTRAIN SOURCE_DIR DATA_DIR
set -uo pipefail
bin=$1 src=$2 data=$3
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
failures=0
# expect NAME EXIT_CODE "text both ranks must print" -- args to ringtrain train
expect() {
  local name=$1 code=$2 text=$3; shift 3
  local start=$SECONDS
  timeout 60 mpirun -np 2 --oversubscribe "$bin" train "$@" >"$work/$name.out" 2>&1
  local rc=$?
  local seen; seen=$(grep -cF -- "$text" "$work/$name.out")
  if [ "$rc" -ne "$code" ] || [ "$seen" -lt 2 ]; then
    echo "FAIL $name: exit $rc (want $code), message seen $seen times (want one per rank): $text"; sed 's/^/  | /' "$work/$name.out"
    failures=$((failures + 1))
  else
    echo "ok   $name: exit $rc in $((SECONDS - start)) s, both ranks: $text"
  fi
}
"$bin" prepare synthetic --shape 1,8,8 --classes 3 --samples 40 --test-samples 8 --shards 3 --out "$work/tiny" >/dev/null
job=$src/jobs/fashion_mnist.toml
common=(--set data.train="$work/tiny/train" --set data.test="$work/tiny/test")
expect typo 3 "unknown key 'train.epocs'" "$job" "${common[@]}" --set run.dir="$work/r1" --set train.epocs=2
expect wrong_type 3 "'train.epochs' must be an integer, got a string" "$job" "${common[@]}" --set run.dir="$work/r2" --set 'train.epochs="2"'
expect negative_batch 3 "'train.batch_per_rank' must be in [1, 1048576], got -4" "$job" "${common[@]}" --set run.dir="$work/r3" --set train.batch_per_rank=-4
expect missing_data 4 "$work/nope" "$job" --set data.train="$work/nope" --set data.test="$work/tiny/test" --set run.dir="$work/r4"
expect too_few_samples 4 "too few for 2 ranks x batch_per_rank 64" "$job" "${common[@]}" --set run.dir="$work/r5"
expect model_mismatch 3 "make the last layer \`dense\` with units = 3" "$job" "${common[@]}" --set run.dir="$work/r6" --set train.batch_per_rank=4
for r in r1 r2 r3 r4 r5 r6; do
  if [ -e "$work/$r/metrics.jsonl" ]; then echo "FAIL: $r/metrics.jsonl was written by a failed run"; failures=$((failures + 1)); fi
done
echo "$failures failures"
[ "$failures" -eq 0 ]

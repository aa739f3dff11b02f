#!/usr/bin/env bash
# run.consistency_every under mpirun: a bit flipped in one rank's parameters (the RINGTRAIN_TEST_CORRUPT_PARAM
# test hook, src/train/fault_injection.h) ends the job at the next comparison with exit 6 on every rank and
# the same message naming the odd rank out, and no checkpoint of the diverged state is written (parameters
# are also compared before every mid-epoch checkpoint); without the flip the same run passes every comparison.
# The failed run still leaves every rank's trace (run.trace) of its last steps. Each rank keeps its own copy of
# the parameters (dist.reducer = "nonblocking"): ranks sharing one copy on a node cannot diverge from each other.
# And the ranks read one job: a rank whose job differs is refused at start-up.
# Usage: consistency.sh RINGTRAIN SOURCE_DIR
set -uo pipefail
bin=$1 src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL $*"; failures=$((failures + 1)); }

"$bin" prepare synthetic --shape 1,8,8 --classes 3 --samples 480 --test-samples 24 --shards 2 --out "$work/data" \
  >/dev/null || { echo "prepare failed"; exit 1; }
args=("$src/jobs/fashion_mnist.toml" --set data.train="$work/data/train" --set data.test="$work/data/test"
      --set 'model.layers=[{type="flatten"},{type="dense",units=16},{type="relu"},{type="dense",units=3}]'
      --set train.batch_per_rank=4 --set train.epochs=1 --set train.max_steps_per_epoch=20
      --set run.consistency_every=5 --set run.checkpoint_every_steps=5 --set run.progress_every_s=1000
      --set run.trace=true --set 'dist.reducer="nonblocking"')

# corrupt NAME RANKS SPEC WHEN "groups" "odd" LAST_GOOD: SPEC=RANK:STEP flips on RANK after STEP; the job must
# stop "WHEN" with "groups" (the larger group) and "odd" (the flipped rank) in every rank's message, name
# LAST_GOOD (a checkpoint file, or none) as the last good checkpoint, and have written no checkpoint after it.
corrupt() {
  local name=$1 np=$2 spec=$3 when=$4 groups=$5 odd=$6 last_good=$7
  local log=$work/$name.log
  RINGTRAIN_TEST_CORRUPT_PARAM=$spec timeout 120 mpirun -np "$np" --oversubscribe -x RINGTRAIN_TEST_CORRUPT_PARAM \
    "$bin" train "${args[@]}" --set run.dir="$work/$name" >"$log" 2>&1
  local rc=$?
  local text="parameters differ between ranks $when: $groups"
  local seen; seen=$(grep -cF -- "$text" "$log")
  local odd_seen; odd_seen=$(grep -cF -- "$odd" "$log")
  local distinct; distinct=$(awk '/^ringtrain: .*\(exit [0-9]+\) \[rank/ {getline; print}' "$log" | sort -u | wc -l)
  local want_files; want_files=$([ "$last_good" = none ] || echo "$last_good")
  local files; files=$(ls "$work/$name/checkpoints" 2>/dev/null)
  local traces=0 r
  for r in $(seq 0 $((np - 1))); do grep -q '"name":"backward"' "$work/$name/trace-rank$r.json" 2>/dev/null && traces=$((traces + 1)); done
  if [ "$rc" = 6 ] && [ "$seen" = "$np" ] && [ "$odd_seen" = "$np" ] && [ "$distinct" = 1 ] &&
     grep -qE "last good checkpoint: (.*/)?$last_good\$" "$log" && [ "$files" = "$want_files" ] &&
     [ "$traces" = "$np" ]; then
    echo "ok   $name: exit 6 on all $np ranks, a trace from each, last good checkpoint $last_good: $(grep -oF -- "$text" "$log" | head -1)"
  else
    fail "$name: exit $rc (want 6), '$text' seen $seen times (want $np), '$odd' $odd_seen times, $distinct distinct" \
      "messages, checkpoints [$files] (want [$want_files]), traces with steps from $traces of $np ranks"
    sed 's/^/  | /' "$log" | grep -v '^  | *[|#]' | tail -25
  fi
}

timeout 120 mpirun -np 2 --oversubscribe "$bin" train "${args[@]}" --set run.dir="$work/clean" >"$work/clean.log" 2>&1
rc=$?
if [ "$rc" = 0 ] && ! grep -q "parameters differ" "$work/clean.log"; then
  echo "ok   clean: 20 steps, 4 comparisons (every 5 steps) and the epoch's, all agreed"
else
  fail "clean: exit $rc: $(grep -A1 '^ringtrain:' "$work/clean.log" | head -4)"
fi
# With 2 ranks neither is a majority: the message lists both checksums (ties: lowest rank first).
corrupt two_ranks 2 1:8 "at optimizer step 10" "rank 0 holds " "; rank 1 holds " ckpt-s000000005.h5
corrupt odd_rank_out 3 0:7 "at optimizer step 10" "ranks 1, 2 hold " "; rank 0 holds " ckpt-s000000005.h5
# Comparisons off between epochs: the checkpoint after step 5 still refuses to save rank 0's diverged state.
args+=(--set run.consistency_every=0)
corrupt before_checkpoint 3 0:3 "before the checkpoint after optimizer step 5" "ranks 1, 2 hold " "; rank 0 holds " none

# Every rank reads the job itself: a rank whose job differs (a stale node-local copy; here a --set given to one rank
# through mpirun's MPMD form) is refused at start-up with exit 3 on every rank, naming the file, before run.dir is
# claimed; the same job at another path on another node is the same job.
timeout 120 mpirun -np 1 --oversubscribe "$bin" train "${args[@]}" --set run.dir="$work/two_jobs" : \
  -np 1 "$bin" train "${args[@]}" --set run.dir="$work/two_jobs" --set train.epochs=2 >"$work/two_jobs.log" 2>&1
rc=$?
said=$(grep -cF "the job differs between ranks: rank 1 read '$src/jobs/fashion_mnist.toml' with train.epochs = 2 (rank 0: 1)" \
       "$work/two_jobs.log")
if [ "$rc" = 3 ] && [ "$said" = 2 ] && [ ! -e "$work/two_jobs" ]; then
  echo "ok   two_jobs: a rank with another job is refused on both ranks (exit 3) before run.dir is claimed"
else
  fail "two_jobs: exit $rc (want 3), said by $said of 2 ranks: $(grep -A1 '^ringtrain:' "$work/two_jobs.log" | head -2)"
fi
# As slurm/train.sbatch stages them: the job file at another path, and each node's own copy of the data.
cp "$src/jobs/fashion_mnist.toml" "$work/copy.toml"
mkdir -p "$work/node1" && cp -r "$work/data/train" "$work/data/test" "$work/node1/"
staged=("${args[@]}")
staged[0]=$work/copy.toml
timeout 120 mpirun -np 1 --oversubscribe "$bin" train "${args[@]}" --set run.dir="$work/staged" : \
  -np 1 "$bin" train "${staged[@]}" --set run.dir="$work/staged" --set data.train="$work/node1/train" \
  --set data.test="$work/node1/test" >"$work/staged.log" 2>&1
rc=$?
if [ "$rc" = 0 ]; then
  echo "ok   staged: the same job from another path, with a node-local copy of the data, trains on rank 1"
else
  fail "staged: exit $rc: $(grep -A1 '^ringtrain:' "$work/staged.log" | head -2)"
fi

echo "$failures failure(s)"
[ "$failures" = 0 ]

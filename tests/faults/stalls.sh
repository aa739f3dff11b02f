#!/usr/bin/env bash
# A rank that stalls outside the training loop's own watched waits (SIGSTOP through the RINGTRAIN_TEST_STALL test
# hook, src/train/fault_injection.h): during start-up, before its first step while its peer waits in synchronised
# batch norm's all-reduce inside the forward pass, after the last epoch, in the evaluate command, and in prepare images
# (--collective-timeout 3). In each the watchdog (run.collective_timeout_s = 3) ends the job with exit 6 and says what was waiting, where it can, naming
# rank 1, instead of holding rank 0 until the allocation ends. Without a timeout (0), SIGTERM still ends a wait on a
# stopped peer after its grace. A malformed hook value is refused with exit 2, as is a malformed or mismatched
# RINGTRAIN_TEST_AWAIT_STOP, before the run folder is made.
# Usage: stalls.sh RINGTRAIN SOURCE_DIR
set -uo pipefail
bin=$1 src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
passed=0
ceiling_s=60  # the behaviour is that the job ends by itself (about 4 s here), not how fast
fail() { echo "FAIL $*"; failures=$((failures + 1)); }

"$bin" prepare synthetic --shape 1,8,8 --classes 3 --samples 96 --test-samples 24 --shards 2 --out "$work/data" \
  >/dev/null || { echo "prepare failed"; exit 1; }
args=("$src/jobs/fashion_mnist.toml" --set data.train="$work/data/train" --set data.test="$work/data/test"
      --set 'model.layers=[{type="flatten"},{type="dense",units=16},{type="relu"},{type="dense",units=3}]'
      --set train.batch_per_rank=4 --set train.epochs=1 --set run.progress_every_s=1000
      --set run.collective_timeout_s=3)

# stalled NAME COMMAND PHASE WANT...: runs COMMAND (train, evaluate or prepare, with its arguments) on 2 ranks with rank 1
# stopped at PHASE; the job must end with exit 6 within the ceiling and its output hold every WANT.
stalled() {
  local name=$1 command=$2 phase=$3
  shift 3
  local wants=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do wants+=("$1"); shift; done
  shift
  local log=$work/$name.log start rc took
  start=$(date +%s.%N)
  RINGTRAIN_TEST_STALL=1:$phase timeout $((ceiling_s + 30)) mpirun -np 2 --oversubscribe -x RINGTRAIN_TEST_STALL \
    "$bin" "$command" "$@" >"$log" 2>&1
  rc=$?
  took=$(python3 -c "print(round($(date +%s.%N) - $start, 1))")
  local why=() want
  [ "$rc" = 6 ] || why+=("exit $rc, want 6")
  python3 -c "import sys; sys.exit(0 if $took < $ceiling_s else 1)" || why+=("took $took s, ceiling $ceiling_s s")
  for want in "${wants[@]}"; do grep -qF -- "$want" "$log" || why+=("'$want' not printed"); done
  if [ ${#why[@]} -eq 0 ]; then
    echo "ok   $name: rank 1 stopped at $phase, the job ended with exit 6 after $took s: $(grep -m1 -A1 '^ringtrain: stall' "$log" | tail -1 | sed 's/^ *//' | cut -c1-110)"
    passed=$((passed + 1))
  else
    fail "$name: ${why[*]}"
    sed 's/^/  | /' "$log" | grep -v '^  | *[|#]' | tail -20
  fi
}

stalled startup train startup \
  "'agreement that a set-up step succeeded on every rank' before any training step has not completed" \
  "rank 1 has not arrived" -- "${args[@]}" --set run.dir="$work/startup"
[ -e "$work/startup/metrics.jsonl" ] && fail "startup: run.dir was claimed although start-up never finished"

# Rank 0's first step waits in the forward pass for rank 1's batch-norm statistics (dist.sync_batchnorm_group).
stalled syncbn train step "'synchronised batch-norm statistics' at step 1" "rank 1 has not arrived" -- "${args[@]}" \
  --set run.dir="$work/syncbn" --set dist.sync_batchnorm_group=2 \
  --set 'model.layers=[{type="conv2d",filters=4,kernel=3,padding=1},{type="batchnorm"},{type="relu"},{type="flatten"},{type="dense",units=3}]'

# After the last epoch, ranks sharing a node's parameter copy meet last when they free it; ranks with their own
# copies, in the watchdog's closing meeting.
stalled end_shared train end "'freeing the node's shared parameter memory' after step 12 has not completed" \
  "rank 1 has not arrived" -- "${args[@]}" --set run.dir="$work/end_shared" --set 'dist.reducer="shared"'
stalled end_nonblocking train end "the end of the run has not been met by every rank" -- "${args[@]}" \
  --set run.dir="$work/end_nonblocking" --set 'dist.reducer="nonblocking"'
for d in end_shared end_nonblocking; do
  if ls "$work/$d/checkpoints"/ckpt-s*.h5 >/dev/null 2>&1 && grep -q '"epoch"' "$work/$d/metrics.jsonl"; then
    echo "ok   $d: the finished run's checkpoint and epoch record stay"; passed=$((passed + 1))
  else
    fail "$d: the finished run's checkpoint or epoch record is missing: $(ls -R "$work/$d" | head -20 | tr '\n' ' ')"
  fi
done

timeout 120 "$bin" train "${args[@]}" --set run.dir="$work/trained" >"$work/trained.log" 2>&1 ||
  { fail "the run to evaluate failed: $(tail -3 "$work/trained.log")"; }
stalled evaluate evaluate evaluate "'sum over the ranks' has not completed" "nothing was written" \
  "rank 1 has not arrived" -- "${args[@]}" --set run.dir="$work/trained"

# prepare images on 2 ranks, rank 1 stopped before its first agreement: --collective-timeout ends the job naming it.
python3 "$src/tests/support/write_png_classes.py" "$work/photos"
stalled prepare prepare prepare \
  "'agreement that a set-up step succeeded on every rank' has not completed after" "(--collective-timeout = 3)" \
  "rank 1 has not arrived" "raise --collective-timeout if shard rounds legitimately take this long" -- \
  images --source "$work/photos" --size 8 --test-fraction 0.34 --out "$work/prepared" --collective-timeout 3

# run.collective_timeout_s = 0 sets no limit on a wait, but SIGTERM (what srun sends the survivors of a dead rank)
# still ends a wait on a stopped peer after its 5 s grace: rank 1 stops before its first step, rank 0 waits in the
# gradient all-reduce, and rank 0 alone is sent SIGTERM.
RINGTRAIN_TEST_STALL=1:step timeout $((ceiling_s + 30)) mpirun -np 2 --oversubscribe -x RINGTRAIN_TEST_STALL \
  "$bin" train "${args[@]}" --set run.collective_timeout_s=0 --set run.dir="$work/untimed" >"$work/untimed.log" 2>&1 &
launcher=$!
survivor=
for _ in $(seq 300); do  # the live rank of this run, once the other has stopped itself
  read -r survivor stopped < <(ps -o pid=,stat=,args= -C ringtrain | grep -F -- "$work/untimed" |
    awk '$2 ~ /T/ {t = $1} $2 !~ /T/ {r = $1} END {print r, t}')
  [ -n "$stopped" ] && [ -n "$survivor" ] && break
  sleep 0.1
done
sleep 1
start=$(date +%s.%N)
[ -n "$survivor" ] && kill -TERM "$survivor"
wait "$launcher"
rc=$?
took=$(python3 -c "print(round($(date +%s.%N) - $start, 1))")
if [ -n "$survivor" ] && [ "$rc" = 6 ] && python3 -c "import sys; sys.exit(0 if $took < $ceiling_s else 1)" &&
   grep -qF "SIGTERM arrived while 'gradient all-reduce'" "$work/untimed.log"; then
  echo "ok   untimed: run.collective_timeout_s = 0, SIGTERM to the survivor of a stopped rank ended the job after $took s"
  passed=$((passed + 1))
else
  fail "untimed: survivor '$survivor', exit $rc (want 6) after $took s: $(grep -A1 '^ringtrain:' "$work/untimed.log" | head -3)"
fi
pkill -9 -f "ringtrain train .*$work/untimed" 2>/dev/null

RINGTRAIN_TEST_STALL=1:lunch timeout 60 "$bin" train "${args[@]}" --set run.dir="$work/malformed" >"$work/malformed.log" 2>&1
rc=$?
if [ "$rc" = 2 ] && grep -qF "RINGTRAIN_TEST_STALL='1:lunch': expected RANK:PHASE" "$work/malformed.log"; then
  echo "ok   malformed: RINGTRAIN_TEST_STALL=1:lunch refused with exit 2"; passed=$((passed + 1))
else
  fail "malformed: exit $rc (want 2): $(grep -A1 '^ringtrain:' "$work/malformed.log" | head -3)"
fi

# The other test hook that shapes a run, RINGTRAIN_TEST_AWAIT_STOP, is refused before run.dir is claimed when it is
# malformed, or when the ranks were given different values or one rank none (an MPMD launch, one environment an app
# context: Open MPI 4's -x applies per context).
await_refused() {  # NAME WANT COMMAND...
  local name=$1 want=$2
  shift 2
  timeout 60 "$@" >"$work/$name.log" 2>&1
  local rc=$?
  if [ "$rc" = 2 ] && grep -qF "$want" "$work/$name.log" && [ ! -e "$work/$name" ]; then
    echo "ok   $name: refused with exit 2, no run folder"; passed=$((passed + 1))
  else
    fail "$name: exit $rc (want 2), run folder $([ -e "$work/$name" ] && echo left || echo absent): $(grep -A1 '^ringtrain:' "$work/$name.log" | head -3)"
  fi
}
await_refused await-malformed "RINGTRAIN_TEST_AWAIT_STOP='0:3': expected EPOCH:STEP" \
  env RINGTRAIN_TEST_AWAIT_STOP=0:3 "$bin" train "${args[@]}" --set run.dir="$work/await-malformed"
await_refused await-mismatch "RINGTRAIN_TEST_AWAIT_STOP is not the same on every rank" \
  mpirun --oversubscribe -np 1 -x RINGTRAIN_TEST_AWAIT_STOP=1:2 "$bin" train "${args[@]}" --set run.dir="$work/await-mismatch" \
  : -np 1 -x RINGTRAIN_TEST_AWAIT_STOP=1:3 "$bin" train "${args[@]}" --set run.dir="$work/await-mismatch"
await_refused await-one-rank "RINGTRAIN_TEST_AWAIT_STOP is not the same on every rank" \
  env -u RINGTRAIN_TEST_AWAIT_STOP mpirun --oversubscribe -np 1 -x RINGTRAIN_TEST_AWAIT_STOP=1:2 "$bin" train "${args[@]}" \
  --set run.dir="$work/await-one-rank" : -np 1 "$bin" train "${args[@]}" --set run.dir="$work/await-one-rank"

echo "$passed passed, $failures failed"
[ "$failures" -eq 0 ] && [ "$passed" -gt 0 ]

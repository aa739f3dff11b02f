#!/usr/bin/env bash
# Checkpoints, resume and runtime faults, as a user meets them under mpirun (2 ranks):
#   preempt   SIGUSR1 in epoch 2's first steps -> checkpoint, exit 75; --resume ends bit-identical to an uninterrupted run
#   optimizers the same with adamw, lars and lamb (label smoothing with lamb): each one's state resumes bit-exactly
#   shared    the same with dist.reducer = "shared" and gradient accumulation, and in bf16; a run stopped under
#             shared resumed under nonblocking and the other way round, bit-identical to the uninterrupted run
#   window    the node's shared window cannot be placed (no such folder, a file system without room): exit 3 on
#             every rank with the same message, within seconds, run.dir never claimed
#   recipes   the same with the step schedule (a milestone after the stop), Nesterov and clipping (sgd), and poly
#             decay with Nesterov (lars): the schedule's position resumes with the step count
# Every run that trains must name, in its run header, the reducer the case expects.
#   precisions a bf16 or fp16 checkpoint resumes in fp32 and an fp32 one in bf16 or fp16; fp16's loss scale resumes
#             bit-exactly
#   ema       train.ema_decay: both ranks' averages agree every epoch (ema_checksum), the average resumes
#             bit-exactly, evaluate --weights ema takes it (also from 4 ranks in 2 shared copies), and a checkpoint
#             without one is refused with exit 3
#   mixup     data.mixup_alpha and data.cutmix_alpha (with pad_crop_flip and label smoothing): the mixes are keyed
#             by epoch and sample, so the resumed run mixes as the uninterrupted one did, bit for bit
#   reshard   resume a 2-rank checkpoint on 1 rank: re-partitioned, learning rate re-scaled to half, says so
#   shrinkagain dist.on_shrink = keep_global_batch: a 2-rank run resumed on 1 rank (2 accumulation steps), stopped
#             again and resumed again on 1 rank, ends on the uninterrupted 1-rank continuation's checksum (the
#             second resume kept the global batch too, where it fell back to the job file's accumulation)
#   syncshrink dist.sync_batchnorm_group = 2: a 2-rank checkpoint resumed on 1 rank (which 2 does not divide) goes
#             on with groups of 1 and says so, where a fresh 1-rank run with the same group is refused with exit 3
#   adamreshard fp16 AdamW with skipped steps, a mid-epoch 2-rank checkpoint resumed on 1 rank (the epoch re-planned):
#             Adam's update count goes on from the checkpoint's (inspect's "updates applied"), where it restarted
#             below it and the bias corrections ended the run in NaN (exit 6)
#   evalterm  SIGTERM to every rank while they evaluate a long test split: the job checkpoints and exits 75 (the
#             evaluation is the ranks' own work, not a stuck collective for the grace after SIGTERM to end)
#   grow      resume a 1-rank run on 2 ranks (fewer steps an epoch) keeping one checkpoint: the one kept is the
#             one just written, so the step count's restart below the old names loses nothing
#   model     resume with another model: exit 5 naming the first mismatch, checkpoint untouched
#   nockpt    --resume with no checkpoint: exit 5 on every rank, naming run.dir
#   nonfinite a diverging learning rate: exit 6 on every rank naming the step and the last good checkpoint, whichever
#             went non-finite first (the loss, the parameters, or the state a checkpoint would hold: then none is
#             written), and the last good checkpoint named is one a resume can read
#   kill      SIGKILL of one rank: the job ends non-zero by itself
#   stall     SIGSTOP of one rank: the watchdog ends the job, naming the rank, and rank 0 has written its trace
#             (run.trace) of the steps before the hang
# kill and stall give the job a ceiling of 60 s to end by itself: the behaviour is that it ends (without it a dead or
# stalled rank would hold the job for ever), not how fast (about 2 s and 4 s here); perf/fault_end_times.sh
# measures that against its targets.
# window's "file system without room" mounts a tmpfs (root with CAP_SYS_ADMIN); where that fails it is skipped, saying
# why, the other cases still run, and the script exits 77 (CTest's skip) unless a case failed.
# Usage: recovery.sh RINGTRAIN SOURCE_DIR SCRATCH_DIR [CASE...]
set -uo pipefail
bin=$1 src=$2 scratch=$3
shift 3
cases=${*:-preempt reshard shrinkagain syncshrink adamreshard grow evalterm model nockpt nonfinite kill stall optimizers shared window recipes precisions ema mixup}
mkdir -p "$scratch"
work=$(mktemp -d "$scratch/recovery.XXXXXX")
trap 'rm -rf "$work"' EXIT
failures=0 skipped=0
fail() { echo "FAIL $*"; failures=$((failures + 1)); }
ok() { echo "ok   $*"; }
skip() { echo "skip $*"; skipped=$((skipped + 1)); }

# Small synthetic data so each run takes seconds: 1x28x28, 10 classes.
"$bin" prepare synthetic --shape 1,28,28 --classes 10 --samples 6000 --test-samples 256 --shards 4 \
  --out "$work/data" >/dev/null || { echo "prepare failed"; exit 1; }
job=$src/jobs/fashion_mnist.toml
common=(--set data.train="$work/data/train" --set data.test="$work/data/test" --set train.epochs=2
        --set train.max_steps_per_epoch=25 --set run.progress_every_s=1000)
train() { mpirun -np "${NP:-2}" --oversubscribe "$bin" train "$@"; }
checksum() { tail -1 "$1/metrics.jsonl" | python3 -c 'import json,sys; print(json.loads(sys.stdin.read())["param_checksum"])'; }
ema_checksum() { tail -1 "$1/metrics.jsonl" | python3 -c 'import json,sys; print(json.loads(sys.stdin.read())["ema_checksum"])'; }
is_checksum() { [[ "$1" =~ ^[0-9a-f]{16}$ ]]; }  # util/checksum.h: 16 hex digits; two missing ones are not "equal"
# times MSG seen in LOG: the message printed by every rank
seen() { grep -cF -- "$2" "$1"; }

# named_reducer LOG: the reducer the run header's gradients line names (shared, nonblocking, thread), or none.
named_reducer() {
  case "$(grep -m1 '^gradients: ' "$1")" in
    *"reduced with node-shared memory"*) echo shared ;;
    *"reduced with MPI_Iallreduce"*) echo nonblocking ;;
    *"reduced with MPI_Allreduce on a communication thread"*) echo thread ;;
    *) echo none ;;
  esac
}

# preempt_and_resume NAME REDUCERS [--set ...]: an uninterrupted run into $work/NAME-whole, and the same run stopped
# by SIGUSR1 mid-way through epoch 2 (exit 75) into $work/NAME, then resumed: the resumed run must end on the
# uninterrupted run's checksum, bit for bit, and its last epoch record on the uninterrupted run's train loss and
# accuracy. REDUCERS is the reducer every run's header must name (shared, nonblocking), or FIRST:THEN: the runs set
# dist.reducer = FIRST and the resume THEN (on one node of 2 ranks both sum a + b, so the bits still agree).
preempt_and_resume() {
  local name=$1 first=${2%%:*} then=${2##*:}
  shift 2
  local run_sets=() resume_sets=()
  if [ "$first" != "$then" ]; then
    run_sets=(--set "dist.reducer=\"$first\"")
    resume_sets=(--set "dist.reducer=\"$then\"")
  fi
  train "$job" "${common[@]}" "$@" "${run_sets[@]}" --set run.dir="$work/$name-whole" >"$work/$name-whole.log" 2>&1 ||
    fail "$name: uninterrupted run: $(tail -3 "$work/$name-whole.log")"
  local want got rc
  want=$(checksum "$work/$name-whole" 2>/dev/null)
  if ! is_checksum "$want"; then
    fail "$name: the uninterrupted run left no param_checksum ('$want'): $(tail -3 "$work/$name-whole.log")"
    return
  fi
  # Signal once the first epoch's checkpoint exists; the ranks wait for it before epoch 2's third step at the latest
  # (fault_injection.h), so the stop lands inside epoch 2 however fast the machine runs its steps.
  RINGTRAIN_TEST_AWAIT_STOP=2:3 train "$job" "${common[@]}" "$@" "${run_sets[@]}" --set run.dir="$work/$name" \
    >"$work/$name.log" 2>&1 &
  local launcher=$!
  for _ in $(seq 600); do [ -n "$(ls "$work/$name/checkpoints" 2>/dev/null)" ] && break; sleep 0.1; done
  pkill -USR1 -P "$launcher" -x mpirun 2>/dev/null || kill -USR1 "$launcher"
  wait "$launcher"
  rc=$?
  if [ "$rc" != 75 ]; then
    fail "$name: exit $rc, want 75: $(grep -E 'stop|error|exit' "$work/$name.log" | head -3)"
    return
  fi
  if ! grep -q "checkpointing after epoch 2 step" "$work/$name.log"; then
    fail "$name: stopped outside epoch 2: $(grep -o 'checkpointing after epoch [0-9]* step [0-9]*' "$work/$name.log")"
    return
  fi
  cp -a "$work/$name" "$work/$name-copy"
  train "$job" "${common[@]}" "$@" "${resume_sets[@]}" --set run.dir="$work/$name" --resume >"$work/$name-resume.log" 2>&1
  rc=$?
  got=$(checksum "$work/$name" 2>/dev/null)
  local named
  named="$(named_reducer "$work/$name-whole.log") $(named_reducer "$work/$name.log") $(named_reducer "$work/$name-resume.log")"
  # The interrupted epoch's record covers the whole epoch: the checkpoint carries its training totals, its clipped
  # gradients' norms and fp16's skipped steps so far.
  local losses
  losses=$(python3 - "$work/$name-whole" "$work/$name" <<'PY'
import json, sys
last = [[json.loads(l) for l in open(f"{d}/metrics.jsonl") if '"kind":"epoch"' in l][-1] for d in sys.argv[1:]]
keys = ("train_loss", "train_acc", "grad_norm_mean", "grad_norm_max", "skipped_steps")
def same(a, b):
    return a == b or (a is not None and b is not None and abs(a - b) <= 1e-9 * abs(a))
print(" ".join(f"{k} {last[0].get(k)!r} {last[1].get(k)!r}" for k in keys))
sys.exit(0 if all(same(last[0].get(k), last[1].get(k)) for k in keys) else 1)
PY
) || fail "$name: the resumed epoch's record is not the uninterrupted run's (key, whole, resumed: $losses)"
  if [ "$named" != "$first $first $then" ]; then
    fail "$name: the run headers name the reducers '$named', want '$first $first $then'"
  elif [ "$rc" = 0 ] && is_checksum "$got" && [ "$got" = "$want" ] && grep -q "resumed from" "$work/$name-resume.log"; then
    ok "$name ($first$([ "$first" = "$then" ] || echo " -> $then")): exit 75 at '$(grep -o 'checkpointing after epoch [0-9]* step [0-9]*' "$work/$name.log")', resumed, checksum $got = uninterrupted"
  else
    fail "$name: resume exit $rc, checksum $got vs uninterrupted $want"
  fi
}

if [[ " $cases " == *" preempt "* || " $cases " == *" reshard "* || " $cases " == *" model "* ]]; then
  preempt_and_resume preempt shared
  mv "$work/preempt-whole" "$work/whole" 2>/dev/null
  mv "$work/preempt-copy" "$work/cut-copy" 2>/dev/null
fi

# Every optimizer's state (momentum, Adam's moments) is saved and restored: resume is bit-exact with each.
if [[ " $cases " == *" optimizers "* ]]; then
  preempt_and_resume adamw shared --set optimizer.name=adamw --set optimizer.base_lr=0.001 \
    --set optimizer.weight_decay=0.05
  preempt_and_resume lars nonblocking --set optimizer.name=lars --set optimizer.base_lr=2 \
    --set optimizer.trust_coefficient=0.01
  preempt_and_resume lamb nonblocking --set optimizer.name=lamb --set optimizer.base_lr=0.002 \
    --set train.label_smoothing=0.1
fi

if [[ " $cases " == *" mixup "* ]]; then
  preempt_and_resume mixup shared --set data.mixup_alpha=0.2 --set data.cutmix_alpha=1.0 \
    --set data.augment=pad_crop_flip --set train.label_smoothing=0.1 --set data.loader_threads=2
fi

# dist.reducer = "shared" (what auto takes on one node) with what else a job may ask of it, and a checkpoint changing
# hands between the node's one shared copy and a copy per rank.
if [[ " $cases " == *" shared "* ]]; then
  preempt_and_resume shared-accumulate shared --set 'dist.reducer="shared"' --set train.accumulate_steps=2
  preempt_and_resume shared-bf16 shared --set 'dist.reducer="shared"' --set train.precision=bf16
  preempt_and_resume shared-to-nonblocking shared:nonblocking
  preempt_and_resume nonblocking-to-shared nonblocking:shared
fi

# The node's shared window placed where it cannot be: MPI_Win_allocate_shared would fail on node rank 0 alone and
# leave the other rank inside it for good, so the place is checked before, and every rank ends with the same error.
window_fails() {
  local name=$1 where=$2 what=$3
  local start rc took n
  start=$(date +%s.%N)
  OMPI_MCA_osc_sm_backing_directory=$where timeout 60 mpirun -np 2 --oversubscribe "$bin" train "$job" "${common[@]}" \
    --set 'dist.reducer="shared"' --set run.dir="$work/$name" >"$work/$name.log" 2>&1
  rc=$?
  took=$(python3 -c "print(round($(date +%s.%N) - $start, 1))")
  n=$(seen "$work/$name.log" "the node's shared copy cannot be placed: MPI keeps it in '$where' (Open MPI's osc_sm_backing_directory), which $what")
  if [ "$rc" = 3 ] && [ "$n" = 2 ] && python3 -c "import sys; sys.exit(0 if $took < 15 else 1)" &&
     [ ! -e "$work/$name/metrics.jsonl" ]; then
    ok "$name: exit 3 on both ranks after $took s: ... which $what"
  else
    fail "$name: exit $rc after $took s, message seen $n times: $(grep -A1 '^ringtrain:' "$work/$name.log" | head -4)"
  fi
}

if [[ " $cases " == *" window "* ]]; then
  window_fails window-nowhere "$work/no-such-folder" "does not exist"
  mkdir -p "$work/tiny-tmpfs"
  if mount -t tmpfs -o size=256k tmpfs "$work/tiny-tmpfs" 2>/dev/null; then
    window_fails window-no-room "$work/tiny-tmpfs" "has 256 KiB free for the"
    umount "$work/tiny-tmpfs"
  else
    skip "window-no-room: a tmpfs cannot be mounted here (needs root with CAP_SYS_ADMIN); window-nowhere ran"
  fi
fi

# The schedules' position is the optimizer step a checkpoint holds: a milestone at epoch 1.8 (step 45 of 50) lies after
# the stop in epoch 2, and the poly decay runs through it; clipping and Nesterov keep no state of their own.
if [[ " $cases " == *" recipes "* ]]; then
  preempt_and_resume steps shared --set optimizer.schedule=steps --set 'optimizer.milestones=[0.5, 1.8]' \
    --set optimizer.decay_factor=0.2 --set optimizer.nesterov=true --set optimizer.clip_global_norm=0.5
  preempt_and_resume poly nonblocking --set optimizer.name=lars --set optimizer.base_lr=2 --set optimizer.trust_coefficient=0.01 \
    --set optimizer.schedule=poly --set optimizer.poly_power=2 --set optimizer.min_lr=0.01 --set optimizer.nesterov=true
fi

# train.ema_decay: the average is saved and restored (its checksum after the resume is the uninterrupted run's, bit
# for bit), every epoch's record carries it agreed by both ranks, and evaluate, predict and export take it.
if [[ " $cases " == *" ema "* ]]; then
  preempt_and_resume ema shared --set train.ema_decay=0.99
  want=$(ema_checksum "$work/ema-whole" 2>/dev/null) got=$(ema_checksum "$work/ema" 2>/dev/null)
  params=$(checksum "$work/ema" 2>/dev/null)
  if is_checksum "$want" && [ "$got" = "$want" ] && [ "$got" != "$params" ]; then
    ok "ema: both ranks' averages agree; resumed average $got = uninterrupted (parameters $params)"
  else
    fail "ema: average after resume '$got' vs uninterrupted '$want' (parameters '$params')"
  fi
  ckpt=$(ls "$work/ema/checkpoints/"*.h5 | tail -1)
  evaluate_on_two() { mpirun -np 2 --oversubscribe "$bin" evaluate "$job" "${common[@]}" --set run.dir="$work/ema" "$@"; }
  if evaluate_on_two --checkpoint "$ckpt" --weights ema >"$work/ema-eval.log" 2>&1 &&
     "$bin" export --checkpoint "$ckpt" --data "$work/data/train" --onnx "$work/ema.onnx" --weights ema >/dev/null 2>&1 &&
     "$bin" predict --checkpoint "$ckpt" --weights ema "$work/data/test" >"$work/ema-predict.jsonl" 2>&1; then
    ok "ema: evaluate, export and predict --weights ema: $(grep -m1 '^loss' "$work/ema-eval.log")"
  else
    fail "ema: --weights ema on its checkpoint: $(grep -m2 error "$work/ema-eval.log")"
  fi
  # Several shared copies on one host (dist.node_ranks = 2 of 4 ranks): the first rank of each copy puts the average
  # in place for the epoch's evaluation, so the record's ema_test_loss is what evaluate --weights ema gives.
  NP=4 train "$job" "${common[@]}" --set train.epochs=1 --set train.ema_decay=0.9 --set 'dist.reducer="shared"' \
    --set dist.node_ranks=2 --set run.threads=1 --set run.dir="$work/ema-groups" >"$work/ema-groups.log" 2>&1 ||
    fail "ema: 4 ranks in 2 shared copies: $(tail -3 "$work/ema-groups.log")"
  "$bin" evaluate "$job" "${common[@]}" --set run.dir="$work/ema-groups" --weights ema --out "$work/ema-groups.json" \
    >"$work/ema-groups-eval.log" 2>&1 || fail "ema: evaluate --weights ema of the 4-rank run: $(tail -2 "$work/ema-groups-eval.log")"
  if python3 - "$work" <<'PY'
import json, sys
work = sys.argv[1]
record = [json.loads(l) for l in open(f"{work}/ema-groups/metrics.jsonl") if '"kind":"epoch"' in l][-1]
evaluated = json.load(open(f"{work}/ema-groups.json"))
sys.exit(0 if abs(record["ema_test_loss"] - evaluated["loss"]) <= 1e-6 * abs(evaluated["loss"]) else 1)
PY
  then
    ok "ema: 4 ranks in 2 shared copies record the ema_test_loss that evaluate --weights ema gives"
  else
    fail "ema: 4 ranks in 2 shared copies: the record's ema_test_loss is not the average's: $(grep -m1 ema_test "$work/ema-groups.log")"
  fi
  NP=1 train "$job" "${common[@]}" --set train.epochs=1 --set train.max_steps_per_epoch=2 --set run.dir="$work/no-ema" \
    >"$work/no-ema.log" 2>&1
  plain=$(ls "$work/no-ema/checkpoints/"*.h5 | tail -1)
  "$bin" export --checkpoint "$plain" --data "$work/data/train" --onnx "$work/no-ema.onnx" --weights ema \
    >"$work/no-ema-export.log" 2>&1
  rc=$?
  if [ "$rc" = 3 ] && grep -q "holds no moving average" "$work/no-ema-export.log"; then
    ok "ema: --weights ema on a checkpoint without an average: exit 3"
  else
    fail "ema: --weights ema without an average: exit $rc: $(tail -2 "$work/no-ema-export.log")"
  fi
  train "$job" "${common[@]}" --set train.ema_decay=1 --set run.dir="$work/ema-one" >"$work/ema-one.log" 2>&1
  rc=$?
  if [ "$rc" = 3 ] && grep -q "'train.ema_decay' must be in \[0, 1), got 1" "$work/ema-one.log"; then
    ok "ema: train.ema_decay = 1 refused with exit 3 naming the key"
  else
    fail "ema: train.ema_decay = 1: exit $rc: $(grep -m2 ema_decay "$work/ema-one.log")"
  fi
fi

if [[ " $cases " == *" reshard "* ]] && [ -d "$work/cut-copy" ]; then
  NP=1 train "$job" "${common[@]}" --set run.dir="$work/cut-copy" --resume >"$work/reshard.log" 2>&1
  rc=$?
  # optimizer.lr_scaling = linear over the global batch: half the batch, half the rate.
  rates=$(grep -o 'learning rate re-scaled to [0-9.e-]* (was [0-9.e-]*;' "$work/reshard.log" | head -1 |
          sed -E 's/.* to ([0-9.e-]+) \(was ([0-9.e-]+);/\1 \2/')
  if [ "$rc" = 0 ] && grep -q "data re-partitioned, global batch 64 (was 128)" "$work/reshard.log" &&
     python3 -c "import sys; now, was = map(float, sys.argv[1:3]); sys.exit(0 if abs(now - was / 2) <= 1e-6 * was else 1)" \
       $rates 2>/dev/null; then
    ok "reshard: 2-rank checkpoint resumed on 1 rank: learning rate re-scaled to half (now, was: $rates)"
  else
    fail "reshard: exit $rc, rates (now, was) '$rates': $(grep -E 'resume|error' "$work/reshard.log" | head -3)"
  fi
fi

# cut_back RUN COPY STEP: COPY is RUN as a kill right after checkpoint STEP leaves it (the later checkpoints gone).
cut_back() {
  local f
  rm -rf "$2" && cp -a "$1" "$2"
  for f in "$2"/checkpoints/ckpt-s*.h5; do
    [ "$((10#$(basename "$f" .h5 | sed 's/ckpt-s//')))" -gt "$3" ] && rm -f "$f"
  done
}

if [[ " $cases " == *" syncshrink "* ]]; then
  group=(--set dist.sync_batchnorm_group=2 --set run.checkpoint_every_steps=5)
  train "$job" "${common[@]}" "${group[@]}" --set train.epochs=1 --set run.dir="$work/sbn2" >"$work/sbn2.log" 2>&1
  rc0=$?
  NP=1 train "$job" "${common[@]}" "${group[@]}" --set run.dir="$work/sbn2" --resume >"$work/sbn1.log" 2>&1
  rc1=$?
  NP=1 train "$job" "${common[@]}" "${group[@]}" --set run.dir="$work/sbn-fresh" >"$work/sbn-fresh.log" 2>&1
  rc2=$?
  note="dist.sync_batchnorm_group = 2 does not divide the 1 rank relaunched on: batch norm statistics over groups of 1"
  if [ "$rc0" = 0 ] && [ "$rc1" = 0 ] && [ "$(seen "$work/sbn1.log" "$note")" = 1 ] && [ "$rc2" = 3 ] &&
     grep -q "must divide the world size" "$work/sbn-fresh.log"; then
    ok "syncshrink: a 2-rank group resumed on 1 rank goes on in groups of 1, saying so; a fresh 1-rank run is refused (exit 3)"
  else
    fail "syncshrink: exits $rc0, $rc1 (resume), $rc2 (fresh, want 3); note seen $(seen "$work/sbn1.log" "$note") times: $(grep -E 'error|sync' "$work/sbn1.log" | head -2)"
  fi
fi

if [[ " $cases " == *" shrinkagain "* ]]; then
  keep=(--set 'dist.on_shrink="keep_global_batch"' --set run.checkpoint_every_steps=5 --set run.keep_checkpoints=100)
  train "$job" "${common[@]}" "${keep[@]}" --set run.dir="$work/kg2" >"$work/kg2.log" 2>&1
  cut_back "$work/kg2" "$work/kg1" 15
  NP=1 train "$job" "${common[@]}" "${keep[@]}" --set run.dir="$work/kg1" --resume >"$work/kg1.log" 2>&1
  rc1=$?
  cut_back "$work/kg1" "$work/kg1again" 35
  NP=1 train "$job" "${common[@]}" "${keep[@]}" --set run.dir="$work/kg1again" --resume >"$work/kg1again.log" 2>&1
  rc2=$?
  want=$(checksum "$work/kg1" 2>/dev/null) got=$(checksum "$work/kg1again" 2>/dev/null)
  kept=$(grep -c "keep its global batch 128 with train.accumulate_steps = 2" "$work/kg1.log" "$work/kg1again.log" |
         grep -c ':1$')
  if [ "$rc1" = 0 ] && [ "$rc2" = 0 ] && is_checksum "$want" && [ "$got" = "$want" ] && [ "$kept" = 2 ]; then
    ok "shrinkagain: keep_global_batch kept on both resumes on 1 rank; checksum $got = the uninterrupted continuation"
  else
    fail "shrinkagain: exits $rc1, $rc2; the note on $kept of 2 resumes; checksum $got, uninterrupted continuation $want: $(grep -E '^batch:|error' "$work/kg1again.log" | head -2)"
  fi
fi

# updates CHECKPOINT: the optimizer's updates the checkpoint says it applied.
updates() { "$bin" inspect "$1" | sed -nE 's/.*; ([0-9]+) updates applied\).*/\1/p'; }

if [[ " $cases " == *" adamreshard "* ]]; then
  # A loss scale fp16 cannot hold at first: the first steps overflow and are skipped, so updates < steps.
  adam=(--set 'train.precision="fp16"' --set train.loss_scale_init=16777216 --set 'optimizer.name="adamw"'
        --set optimizer.base_lr=0.001 --set run.checkpoint_every_steps=5 --set run.keep_checkpoints=100)
  train "$job" "${common[@]}" "${adam[@]}" --set train.epochs=1 --set run.dir="$work/adam2" >"$work/adam2.log" 2>&1
  # What a kill right after the step-15 checkpoint leaves: the newer checkpoints gone.
  cp -a "$work/adam2" "$work/adam1"
  find "$work/adam1/checkpoints" -name 'ckpt-s*.h5' ! -name 'ckpt-s0000000[01][05].h5' -delete
  before=$(updates "$work/adam1/checkpoints/ckpt-s000000015.h5")
  NP=1 train "$job" "${common[@]}" "${adam[@]}" --set train.epochs=1 --set run.dir="$work/adam1" --resume \
    >"$work/adam1.log" 2>&1
  rc=$?
  last=$(ls "$work/adam1/checkpoints"/ckpt-s*.h5 | tail -1)
  after=$(updates "$last")
  # The resumed launch's own steps and skips, from its epoch record (the interrupted epoch restarts on 1 rank).
  read -r steps skips < <(grep '"kind":"epoch"' "$work/adam1/metrics.jsonl" | tail -1 |
    python3 -c 'import json,sys; r=json.loads(sys.stdin.read()); print(r["steps_run"], r["skipped_steps"])')
  if [ "$rc" = 0 ] && [ -n "$before" ] && [ "$before" -lt 15 ] && [ "$after" = "$((before + steps - skips))" ]; then
    ok "adamreshard: fp16 AdamW resumed on 1 rank from $before updates in 15 steps: $after after $steps steps ($skips skipped)"
  else
    fail "adamreshard: exit $rc, updates $before at the checkpoint, $after at '$last' after $steps steps ($skips skipped): $(grep -E 'non-finite|error' "$work/adam1.log" | head -2)"
  fi
fi

if [[ " $cases " == *" grow "* ]]; then
  NP=1 train "$job" "${common[@]}" --set train.max_steps_per_epoch=0 --set run.dir="$work/grow" >"$work/grow-1.log" 2>&1
  train "$job" "${common[@]}" --set train.max_steps_per_epoch=0 --set train.epochs=3 --set run.keep_checkpoints=1 \
    --set run.dir="$work/grow" --resume >"$work/grow-2.log" 2>&1
  rc=$?
  kept=$(ls "$work/grow/checkpoints/"*.h5 2>/dev/null)
  written=$(grep -o '[^ ]*ckpt-s[0-9]*\.h5' "$work/grow-2.log" | tail -1)
  if [ "$rc" = 0 ] && [ "$kept" = "$written" ] && "$bin" inspect "$kept" | grep -q "next: epoch 4 step 1"; then
    ok "grow: 1-rank run resumed on 2 ranks keeps the checkpoint it wrote last ($(basename "$kept"))"
  else
    fail "grow: exit $rc, kept '$kept', written '$written': $(grep -E 'checkpoint|error' "$work/grow-2.log" | head -3)"
  fi
fi

if [[ " $cases " == *" evalterm "* ]]; then
  "$bin" prepare synthetic --shape 1,28,28 --classes 10 --samples 2000 --test-samples 100000 --shards 4 \
    --out "$work/bigtest" >/dev/null
  train "$job" --set data.train="$work/bigtest/train" --set data.test="$work/bigtest/test" --set train.epochs=2 \
    --set train.max_steps_per_epoch=3 --set run.progress_every_s=0 --set run.threads=1 --set run.dir="$work/evalterm" \
    >"$work/evalterm.log" 2>&1 &
  launcher=$!
  # Epoch 1's last step line: the evaluation of 100,000 samples (about 15 s here, one thread a rank on any host)
  # starts, and the signal lands in it.
  for _ in $(seq 2400); do grep -q "^epoch 1/2 step 3/3" "$work/evalterm.log" 2>/dev/null && break; sleep 0.05; done
  # The ranks, as srun or scancel signal them (not mpirun); the binary's path taken literally in the pattern.
  pkill -TERM -f "^$(printf '%s' "$bin" | sed 's/[][\.*^$+?(){}|]/\\&/g') train .*$work/evalterm"
  signalled_at=$(date +%s.%N)
  wait "$launcher"
  rc=$?
  # The evaluation went on past SIGTERM's grace (5 s), which ends a wait on other ranks but not the ranks' own work.
  lived=$(awk -v from="$signalled_at" -v to="$(date +%s.%N)" 'BEGIN { printf "%.1f", to - from }')
  # Stopped at the first step after epoch 1's evaluation: the signal landed inside it, not in the steps before.
  if [ "$rc" = 75 ] && ls "$work/evalterm/checkpoints/"*.h5 >/dev/null 2>&1 &&
    grep -q "checkpointing after epoch 2 step 1" "$work/evalterm.log" && awk -v s="$lived" 'BEGIN { exit !(s > 6) }'; then
    ok "evalterm: SIGTERM during a long evaluation: the job went on $lived s, checkpoint written, exit 75"
  else
    fail "evalterm: exit $rc $lived s after SIGTERM (an evaluation longer than the 5 s grace wanted): $(grep -E 'terminated|stopped|checkpoint' "$work/evalterm.log" | head -3)"
  fi
fi

if [[ " $cases " == *" model "* ]]; then
  sed 's/units = 1024/units = 512/' "$job" >"$work/other_model.toml"
  before=$(ls -l "$work/whole/checkpoints" | md5sum)
  train "$work/other_model.toml" "${common[@]}" --set run.dir="$work/whole" --resume >"$work/model.log" 2>&1
  rc=$?
  n=$(seen "$work/model.log" "belongs to another model: parameter tensor")
  if [ "$rc" = 5 ] && [ "$n" = 2 ] && [ "$(ls -l "$work/whole/checkpoints" | md5sum)" = "$before" ]; then
    ok "model: exit 5 on both ranks: $(grep -o 'parameter tensor [0-9]* is .*model' "$work/model.log" | head -1)"
  else
    fail "model: exit $rc, message seen $n times: $(grep -A1 'error' "$work/model.log" | head -3)"
  fi
  # The same parameter shapes, another activation: told apart by the job file the checkpoint carries.
  awk '/type = "relu"/ && !done {sub(/relu/, "sigmoid"); done = 1} {print}' "$job" >"$work/sigmoid_model.toml"
  train "$work/sigmoid_model.toml" "${common[@]}" --set run.dir="$work/whole" --resume >"$work/model-act.log" 2>&1
  rc=$?
  n=$(seen "$work/model-act.log" "belongs to another model: its job file has model.layers[2].type = 'relu', this one 'sigmoid'")
  if [ "$rc" = 5 ] && [ "$n" = 2 ] && [ "$(ls -l "$work/whole/checkpoints" | md5sum)" = "$before" ]; then
    ok "model: another activation, the same shapes: exit 5 on both ranks naming model.layers[2].type"
  else
    fail "model: another activation: exit $rc, message seen $n times: $(grep -A1 'error' "$work/model-act.log" | head -3)"
  fi
fi

if [[ " $cases " == *" nockpt "* ]]; then
  train "$job" "${common[@]}" --set run.dir="$work/fresh" --resume >"$work/nockpt.log" 2>&1
  rc=$?
  n=$(seen "$work/nockpt.log" "--resume: no checkpoint in '$work/fresh/checkpoints'")
  if [ "$rc" = 5 ] && [ "$n" = 2 ]; then ok "nockpt: exit 5 on both ranks"; else fail "nockpt: exit $rc, seen $n: $(head -c 600 "$work/nockpt.log")"; fi
fi

if [[ " $cases " == *" nonfinite "* ]]; then
  train "$job" "${common[@]}" --set run.dir="$work/nan" --set optimizer.base_lr=1000 --set optimizer.warmup_epochs=0 \
    --set run.checkpoint_every_steps=1 >"$work/nan.log" 2>&1
  rc=$?
  n=$(grep -cE "non-finite training (loss at epoch|parameters|state)" "$work/nan.log")
  good=$(grep -oE "last good checkpoint: $work/nan/checkpoints/ckpt-s[0-9]+\.h5" "$work/nan.log" | head -1 | cut -d' ' -f4)
  if [ "$rc" = 6 ] && [ "$n" = 2 ] && [ -n "$good" ] && "$bin" inspect "$good" >/dev/null 2>&1; then
    ok "nonfinite: exit 6 on both ranks: $(grep -oE 'non-finite training (loss at epoch [0-9]* step [0-9]*|parameters [^:]*|state [^:]*)' "$work/nan.log" | head -1); $good reads"
  else
    fail "nonfinite: exit $rc, seen $n: $(grep -A1 'error' "$work/nan.log" | head -4)"
  fi
fi

# Starts a long run, waits until it trains, signals one rank with $1, and reports its exit code, the seconds it took
# to end, and 1 if it did not end by itself within the ceiling (it is then killed), else 0.
ceiling_s=60
fault_run() {
  local sig=$1 name=$2
  local start pid rc signalled=0
  train "$job" "${common[@]}" --set train.max_steps_per_epoch=100000 --set train.epochs=50 \
    --set run.dir="$work/$name" --set run.collective_timeout_s=3 --set run.checkpoint_every=0 --set run.trace=true \
    >"$work/$name.log" 2>&1 &
  local launcher=$!
  for _ in $(seq 300); do grep -q "^gradients:" "$work/$name.log" 2>/dev/null && break; sleep 0.1; done
  sleep 1
  # A rank, not mpirun (whose command line holds the same words): the ranks' own command lines start with the binary.
  pid=$(pgrep -f "^$bin train .*$work/$name" | tail -1)
  start=$(date +%s.%N)
  if grep -q "^gradients:" "$work/$name.log" && [ -n "$pid" ] && kill "-$sig" "$pid"; then signalled=1; fi
  local tenths=0 capped=0
  while kill -0 "$launcher" 2>/dev/null && [ "$tenths" -lt $((ceiling_s * 10)) ]; do sleep 0.1; tenths=$((tenths + 1)); done
  if kill -0 "$launcher" 2>/dev/null; then
    capped=1
    kill -9 "$launcher" 2>/dev/null
  fi
  wait "$launcher"
  rc=$?
  local took; took=$(python3 -c "print(round($(date +%s.%N) - $start, 1))")
  pkill -9 -f "ringtrain train .*$work/$name" 2>/dev/null
  echo "$rc $took $capped $signalled"
}

if [[ " $cases " == *" kill "* ]]; then
  read -r rc took capped signalled < <(fault_run KILL kill)
  # The job must have trained, a rank must have been killed, and the launcher must say so: any other non-zero exit
  # (a start-up failure) is not this case's behaviour.
  if [ "$signalled" = 1 ] && [ "$rc" != 0 ] && [ "$capped" = 0 ] && grep -q "exited on signal 9" "$work/kill.log"; then
    ok "kill: SIGKILL of one rank ended the job (exit $rc) after $took s"
  else
    fail "kill: signalled $signalled, exit $rc after $took s (want a rank killed, exit non-zero by itself within $ceiling_s s): $(grep -E 'signal|error' "$work/kill.log" | head -2)"
  fi
fi

if [[ " $cases " == *" stall "* ]]; then
  read -r rc took capped signalled < <(fault_run STOP stall)
  if [ "$signalled" = 1 ] && [ "$rc" != 0 ] && [ "$capped" = 0 ] &&
     grep -q "has not completed after .* s (run.collective_timeout_s = 3); rank 1 has not arrived" "$work/stall.log" &&
     grep -q '"name":"backward"' "$work/stall/trace-rank0.json"; then
    ok "stall: SIGSTOP of rank 1 ended the job (exit $rc) after $took s, rank 0's trace written: $(grep -o "'[a-z -]*' at step [0-9]*" "$work/stall.log" | head -1)"
  else
    fail "stall: exit $rc after $took s (ceiling $ceiling_s s): $(grep -A2 'stall' "$work/stall.log" | head -4)"
  fi
fi

# A checkpoint keeps fp32 master weights whatever the precision: one written in bf16 or fp16 resumes in fp32, and
# one written in fp32 resumes in bf16 or fp16 (bf16 on oneDNN's kernels where the CPU has AVX512_BF16, emulated
# elsewhere). And fp16's loss scale is part of the checkpoint: a run whose scale starts too high (skipping steps)
# and grows every 5 steps, stopped and resumed, ends bit-identical to the uninterrupted one.
if [[ " $cases " == *" precisions "* ]]; then
  preempt_and_resume fp16 nonblocking --set train.precision=fp16 --set train.loss_scale_init=16777216 \
    --set train.loss_scale_growth_interval=5
  skips=$(grep -o '[0-9]* steps\? skipped' "$work/fp16-whole.log" | tr '\n' ' ')
  if grep -q "fp16 loss scale" "$work/fp16-whole.log"; then
    ok "precisions: the fp16 run's epochs: $skips"
  else
    fail "precisions: the fp16 run says nothing of its loss scale: $(grep -m2 epoch "$work/fp16-whole.log")"
  fi
  for pair in "bf16 fp32" "fp32 bf16" "fp16 fp32" "fp32 fp16"; do
    read -r first then <<<"$pair"
    dir=$work/precision-$first-$then
    train "$job" "${common[@]}" --set train.epochs=1 --set train.precision="$first" --set run.dir="$dir" \
      >"$dir.log" 2>&1
    rc1=$?
    train "$job" "${common[@]}" --set train.epochs=2 --set train.precision="$then" --set run.dir="$dir" --resume \
      >"$dir-resume.log" 2>&1
    rc2=$?
    epochs=$(grep -c '"kind":"epoch"' "$dir/metrics.jsonl" 2>/dev/null)
    loss=$(tail -1 "$dir/metrics.jsonl" | python3 -c 'import json,sys; print(json.loads(sys.stdin.read())["train_loss"])' 2>/dev/null)
    if [ "$rc1" = 0 ] && [ "$rc2" = 0 ] && [ "$epochs" = 2 ] && python3 -c "import sys; sys.exit(0 if $loss < 2.0 else 1)"; then
      ok "precisions: a $first checkpoint resumed in $then, epoch 2 train loss $loss"
    else
      fail "precisions: $first -> $then: exits $rc1 / $rc2, $epochs epoch records, loss $loss: $(grep -m2 error "$dir-resume.log")"
    fi
  done
fi

echo "$failures failure(s), $skipped skipped"
[ "$failures" -eq 0 ] || exit 1
[ "$skipped" -eq 0 ] || exit 77

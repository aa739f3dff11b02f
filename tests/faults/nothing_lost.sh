#!/usr/bin/env bash
# "Nothing lost", as a hostile but fair user tries it under mpirun (2 ranks). Each case is a class of fault:
#   overwrite   run.overwrite moves the earlier run aside; --resume continues the new run, not the earlier one
#   concurrent  a second fresh start, and a --resume, on a run.dir a run is using: refused naming the holder;
#               the first run's metrics.jsonl stays whole
#   stray       a file in checkpoints/ whose name only starts like a checkpoint is not taken for one; a --resume
#               with another batch size says so
#   bitflip     a byte flipped in a checkpoint's parameter or momentum data (random offsets, fixed seed): --resume
#               and `inspect` refuse it naming the array, with the fallback; an empty or garbage newest
#               checkpoint gets the same fallback
#   treeflip    bits flipped in the chunk index (v1 B-tree nodes, which the 1.8 format does not checksum) of a
#               checkpoint and of shards (tests/faults/flip_chunk_index.py, fixed seed): every flip that changes a
#               value h5py reads is refused by `inspect` naming the array (exit 5) or dataset (exit 4); a chunk
#               moved out of the index is refused by --resume (exit 5) and by training on the split (exit 4)
#   otherrun    a checkpoint of another run in checkpoints/: --resume refuses it naming both runs
#   trim        after a checkpoint is lost, --resume re-runs the epoch: metrics.jsonl holds each epoch once and
#               no torn line
#   diskfull    a full file system (tmpfs) under run.dir while metrics.jsonl is appended: the records are held and
#               written once space returns; a disk that stays full ends the run with the records on stderr
#   signals     SIGUSR1 as soon as a rank can take it: a clean stop (exit 75), not death by the signal; a killed
#               mpirun: its ranks end by themselves within a ceiling of 30 s (how fast: perf/fault_end_times.sh)
#               and the last checkpoint is intact
#   prepare     `prepare synthetic` of a shape or a sample count no memory or disk holds: exit 4 with the numbers,
#               nothing written
# diskfull mounts a tmpfs (root with CAP_SYS_ADMIN); where that fails it is skipped, saying why, and the script exits
# 77 (CTest's skip) unless a case failed.
# Usage: nothing_lost.sh RINGTRAIN SOURCE_DIR SCRATCH_DIR [CASE...]
set -uo pipefail
bin=$1 src=$2 scratch=$3
shift 3
cases=${*:-overwrite concurrent stray bitflip treeflip otherrun trim diskfull signals prepare}
mkdir -p "$scratch"
work=$(mktemp -d "$scratch/nothing_lost.XXXXXX")
mounted=""
cleanup() { [ -n "$mounted" ] && umount "$mounted" 2>/dev/null; [ -n "${KEEP_WORK:-}" ] || rm -rf "$work"; }
trap cleanup EXIT
failures=0 skipped=0
fail() { echo "FAIL $*"; failures=$((failures + 1)); }
ok() { echo "ok   $*"; }
skip() { echo "skip $*"; skipped=$((skipped + 1)); }

"$bin" prepare synthetic --shape 1,8,8 --classes 3 --samples 64 --test-samples 16 --shards 2 --out "$work/tiny" \
  >/dev/null || { echo "prepare tiny failed"; exit 1; }
# Long enough per epoch for a second launch or a signal to land mid-run (the disk-full case pauses the ranks itself:
# on a fast core an epoch of its model takes a tenth of a second).
"$bin" prepare synthetic --shape 1,28,28 --classes 10 --samples 6000 --test-samples 256 --shards 4 \
  --out "$work/slow" >/dev/null || { echo "prepare slow failed"; exit 1; }
job=$src/jobs/fashion_mnist.toml
tiny=(--set data.train="$work/tiny/train" --set data.test="$work/tiny/test" --set train.batch_per_rank=4
      --set 'model.layers=[{type="flatten"},{type="dense",units=8},{type="relu"},{type="dense",units=3}]'
      --set run.progress_every_s=1000)
slow=(--set data.train="$work/slow/train" --set data.test="$work/slow/test" --set train.max_steps_per_epoch=40
      --set run.progress_every_s=1000)
# A model whose checkpoints are small (a few hundred KiB), for a file system of a few MiB.
small_conv=(--set 'model.layers=[{type="conv2d",filters=16,kernel=5,padding=2},{type="relu"},{type="maxpool",size=2},{type="flatten"},{type="dense",units=10}]')
# h5py comes from Debian's python3-h5py (scripts/install_deps.sh), which another python3 first on PATH lacks.
h5python=/usr/bin/python3
/usr/bin/python3 -c "import h5py" 2>/dev/null || h5python=python3
# ranks RUN_DIR: the pids of the ringtrain ranks training into RUN_DIR
ranks() { pgrep -f -- "^$bin train .*run.dir=$1( |\$)"; }
train() { timeout 300 mpirun -np 2 --oversubscribe "$bin" train "$@" </dev/null; }  # mpirun would read the loop's stdin
run_id() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["run_id"])' "$1/run.json" 2>/dev/null; }
ckpt_run() { "$bin" inspect "$1" 2>/dev/null | sed -n 's/^  run //p'; }
# epochs RUN_DIR: the epoch numbers of metrics.jsonl's epoch records, in order; "bad" for a line that is not JSON
epochs() {
  python3 - "$1/metrics.jsonl" <<'PY'
import json, sys
out = []
for line in open(sys.argv[1]):
    try:
        r = json.loads(line)
    except ValueError:
        out.append("bad")
        continue
    if r.get("kind") == "epoch":
        out.append(str(r["epoch"]))
print(" ".join(out))
PY
}
both_ranks() { [ "$(grep -cF -- "$2" "$1")" -ge 2 ]; }  # the message on both ranks

if [[ " $cases " == *" overwrite "* ]]; then
  d=$work/ow
  train "$job" "${tiny[@]}" --set run.dir="$d" --set train.epochs=1 >"$work/ow-a.log" 2>&1 || fail "overwrite: run A: $(tail -3 "$work/ow-a.log")"
  a=$(run_id "$d") a_ckpt=$(ls "$d/checkpoints")
  train "$job" "${tiny[@]}" --set run.dir="$d" --set train.epochs=2 --set run.overwrite=true >"$work/ow-b.log" 2>&1 ||
    fail "overwrite: run B: $(tail -3 "$work/ow-b.log")"
  b=$(run_id "$d")
  kept=$(ls "$d/checkpoints" | while read -r f; do ckpt_run "$d/checkpoints/$f"; done | sort -u)
  train "$job" "${tiny[@]}" --set run.dir="$d" --set train.epochs=3 --resume >"$work/ow-c.log" 2>&1
  rc=$?
  if [ -n "$a" ] && [ "$a" != "$b" ] && [ -f "$d/replaced-$a/checkpoints/$a_ckpt" ] && [ -f "$d/replaced-$a/metrics.jsonl" ] &&
     [ "$kept" = "$b" ] && [ "$rc" = 0 ] && grep -q "resumed from $d/checkpoints/ckpt-s" "$work/ow-c.log" &&
     [ "$(epochs "$d")" = "1 2 3" ] && grep -q "moved to $d/replaced-$a" "$work/ow-b.log"; then
    ok "overwrite: run $a moved to replaced-$a/, checkpoints/ holds run $b's only, --resume continued $b (epochs $(epochs "$d"))"
  else
    fail "overwrite: A=$a B=$b kept=[$kept] resume exit $rc epochs [$(epochs "$d")]; $(ls "$d" | tr '\n' ' ')"
  fi
fi

if [[ " $cases " == *" concurrent "* ]]; then
  d=$work/busy
  # A's rank 0, which holds the run folder's lock, stops itself after the last epoch (fault_injection.h) until it is
  # continued below: the later launches meet a running A however fast the machine trains.
  RINGTRAIN_TEST_STALL=0:end train "$job" "${slow[@]}" --set run.dir="$d" --set train.epochs=4 >"$work/busy-a.log" 2>&1 &
  first=$!
  # As soon as it has written its first record: a plain fresh start is refused as "in use", not "already holds a run
  # ... use run.overwrite" (advice that points at a running job's files).
  for _ in $(seq 600); do [ -s "$d/metrics.jsonl" ] && break; sleep 0.1; done
  train "$job" "${slow[@]}" --set run.dir="$d" --set train.epochs=1 >"$work/busy-b0.log" 2>&1
  rc_b0=$?
  for _ in $(seq 600); do [ -n "$(ls "$d/checkpoints" 2>/dev/null | grep -v tmp)" ] && break; sleep 0.1; done
  train "$job" "${slow[@]}" --set run.dir="$d" --set train.epochs=1 --set run.overwrite=true >"$work/busy-b.log" 2>&1
  rc_b=$?
  train "$job" "${slow[@]}" --set run.dir="$d" --set train.epochs=4 --resume >"$work/busy-c.log" 2>&1
  rc_c=$?
  for _ in $(seq 1200); do
    kill -0 "$first" 2>/dev/null || break  # A ended early: the checks below say how
    ps -o stat= -p "$(ranks "$d" | tr '\n' ',' | sed 's/,$//')" 2>/dev/null | grep -q '^T' && break
    sleep 0.1
  done
  kill -CONT $(ranks "$d") 2>/dev/null
  wait "$first"
  rc_a=$?
  pid=$(grep -o 'pid [0-9]*' "$work/busy-b.log" | head -1)
  if [ "$rc_b0" = 3 ] && both_ranks "$work/busy-b0.log" "is in use by another run (host " &&
     [ "$rc_b" = 3 ] && [ "$rc_c" = 3 ] && both_ranks "$work/busy-b.log" "is in use by another run (host " &&
     both_ranks "$work/busy-c.log" "is in use by another run (host " && [ "$rc_a" = 0 ] &&
     [ "$(epochs "$d")" = "1 2 3 4" ] && [ ! -e "$d/replaced-"* ]; then
    ok "concurrent: fresh starts (plain and run.overwrite) and a --resume refused (exit 3, '$pid'), the first run ended 0 with epochs $(epochs "$d")"
  else
    fail "concurrent: exits B0 $rc_b0 B $rc_b C $rc_c A $rc_a, epochs [$(epochs "$d")]: $(grep -h -A1 'exit' "$work/busy-b0.log" "$work/busy-b.log" | head -4)"
  fi
fi

if [[ " $cases " == *" stray "* ]]; then
  d=$work/stray
  train "$job" "${tiny[@]}" --set run.dir="$d" --set train.epochs=1 >"$work/stray-a.log" 2>&1 || fail "stray: first run failed"
  real=$(ls "$d/checkpoints" | tail -1)
  for name in ckpt-s999999999-old.h5 ckpt-s999999999.h5.bak ckpt-s99999999x.h5 ckpt-s.h5; do
    head -c 1000 /dev/urandom >"$d/checkpoints/$name"
  done
  train "$job" "${tiny[@]}" --set run.dir="$d" --set train.epochs=2 --resume >"$work/stray-b.log" 2>&1
  rc=$?
  if [ "$rc" = 0 ] && grep -q "resumed from $d/checkpoints/$real" "$work/stray-b.log"; then
    ok "stray: four look-alike names ignored, resumed from $real"
  else
    fail "stray: exit $rc: $(grep -h -A1 'resumed\|exit' "$work/stray-b.log" | head -3)"
  fi
  train "$job" "${tiny[@]}" --set run.dir="$d" --set train.epochs=3 --set train.batch_per_rank=8 --resume \
    >"$work/stray-c.log" 2>&1
  rc=$?
  if [ "$rc" = 0 ] && grep -q "global batch 16 (was 8)" "$work/stray-c.log"; then
    ok "stray: a --resume with batch_per_rank 8 instead of 4 says 'global batch 16 (was 8)'"
  else
    fail "stray: resume with another batch: exit $rc: $(grep -h 'resume' "$work/stray-c.log" | head -2)"
  fi
fi

# resume_refused NAME RUN_DIR WANT...: --resume must end with exit 5 on both ranks, every WANT in the message.
resume_refused() {
  local name=$1 d=$2
  shift 2
  train "$job" "${tiny[@]}" --set run.dir="$d" --set train.epochs=3 --resume >"$work/$name.log" 2>&1
  local rc=$? missing=""
  for want in "$@"; do both_ranks "$work/$name.log" "$want" || missing+=" '$want'"; done
  [ "$rc" = 5 ] && [ -z "$missing" ] && return 0
  echo "    $name: exit $rc, missing$missing: $(grep -h -A2 '(exit' "$work/$name.log" | head -3 | tr '\n' ' ')"
  return 1
}

if [[ " $cases " == *" bitflip "* ]]; then
  base=$work/flip-base
  train "$job" "${tiny[@]}" --set run.dir="$base" --set train.epochs=1 >"$work/flip-a.log" 2>&1 || fail "bitflip: first run failed"
  newest=$(ls "$base/checkpoints" | tail -1)
  # Offsets inside each array's stored chunks, from HDF5 itself (h5py), with a fixed seed.
  offsets=$("$h5python" - "$base/checkpoints/$newest" <<'PY'
import random, sys
import h5py
random.seed(20261124)
with h5py.File(sys.argv[1], "r") as f:
    for name in ("params", "velocity", "params", "velocity", "params", "velocity"):
        d = f[name]
        chunk = d.id.get_chunk_info(random.randrange(d.id.get_num_chunks()))
        print(name, chunk.byte_offset + random.randrange(chunk.size))
PY
  )
  [ -n "$offsets" ] || fail "bitflip: h5py could not locate the arrays' chunks"
  refused=0 tried=0
  while read -r array offset; do
    [ -n "$array" ] || continue
    tried=$((tried + 1))
    d=$work/flip-$tried
    cp -a "$base" "$d"
    python3 -c "import sys; f=open(sys.argv[1],'r+b'); f.seek(int(sys.argv[2])); b=f.read(1); f.seek(int(sys.argv[2])); f.write(bytes([b[0]^0x10]))" \
      "$d/checkpoints/$newest" "$offset"
    inspect_ok=1
    "$bin" inspect "$d/checkpoints/$newest" >"$work/flip-inspect-$tried.log" 2>&1 && inspect_ok=0
    grep -qF "array '$array' fails its checksum" "$work/flip-inspect-$tried.log" || inspect_ok=0
    if resume_refused "flip-resume-$tried" "$d" "array '$array' fails its checksum" "move it out of '$d/checkpoints'" &&
       [ "$inspect_ok" = 1 ]; then
      refused=$((refused + 1))
    fi
  done <<<"$offsets"
  # An empty, then a garbage, newest checkpoint: the same way back.
  for kind in empty garbage; do
    d=$work/flip-$kind
    cp -a "$base" "$d"
    if [ "$kind" = empty ]; then : >"$d/checkpoints/ckpt-s000009999.h5"; else head -c 5000 /dev/urandom >"$d/checkpoints/ckpt-s000009999.h5"; fi
    tried=$((tried + 1))
    resume_refused "flip-$kind" "$d" "checkpoint '$d/checkpoints/ckpt-s000009999.h5' cannot be used" \
      "move it out of '$d/checkpoints'" && refused=$((refused + 1))
  done
  if [ "$tried" = 8 ] && [ "$refused" = 8 ]; then
    ok "bitflip: 6 bytes flipped in params/velocity chunks and an empty and a garbage checkpoint: all 8 refused (exit 5) naming the array and the fallback"
  else
    fail "bitflip: $refused of $tried refused"
  fi
fi

# flip_first_tree FILE OFFSET: flips bit 0x10 at OFFSET into FILE's first chunk-index node (+39: the top byte of the
# first chunk's recorded position, so HDF5 no longer finds that chunk and would read it as zeros).
flip_first_tree() {
  python3 -c "import sys; p=sys.argv[1]; d=bytearray(open(p,'rb').read()); t=d.find(b'TREE'); d[t+int(sys.argv[2])]^=0x10; open(p,'wb').write(d)" "$1" "$2"
}

if [[ " $cases " == *" treeflip "* ]]; then
  base=$work/tree-base
  train "$job" "${tiny[@]}" --set run.dir="$base" --set train.epochs=1 >"$work/tree-a.log" 2>&1 || fail "treeflip: first run failed"
  newest=$(ls "$base/checkpoints" | tail -1)
  if "$h5python" "$src/tests/faults/flip_chunk_index.py" "$bin" checkpoint "$base/checkpoints/$newest" "$work/tree-ckpt" \
       >"$work/tree-ckpt.log" 2>&1; then
    ok "treeflip: checkpoint: $(head -1 "$work/tree-ckpt.log")"
  else
    fail "treeflip: checkpoint: $(head -6 "$work/tree-ckpt.log")"
  fi
  d=$work/tree-resume
  cp -a "$base" "$d"
  flip_first_tree "$d/checkpoints/$newest" 39
  if resume_refused tree-resume "$d" "array 'params' has chunk 1 of 1 (from element [0]) missing from its chunk index" \
       "move it out of '$d/checkpoints'"; then
    ok "treeflip: --resume from a checkpoint whose 'params' chunk left the index: refused (exit 5) naming it"
  else
    fail "treeflip: --resume"
  fi
  # Shards of 4 chunks each (256 samples, 64 a chunk), so an index node holds several entries.
  "$bin" prepare synthetic --shape 1,8,8 --classes 3 --samples 512 --test-samples 16 --shards 2 --out "$work/chunky" \
    >/dev/null || fail "treeflip: prepare failed"
  if "$h5python" "$src/tests/faults/flip_chunk_index.py" "$bin" split "$work/chunky/train" "$work/tree-split" \
       >"$work/tree-split.log" 2>&1; then
    ok "treeflip: shards: $(head -1 "$work/tree-split.log")"
  else
    fail "treeflip: shards: $(head -6 "$work/tree-split.log")"
  fi
  cp -a "$work/chunky" "$work/chunky-flipped"
  victim=$work/chunky-flipped/train/shard-00000-of-00002.h5
  flip_first_tree "$victim" 39
  train "$job" "${tiny[@]}" --set data.train="$work/chunky-flipped/train" --set run.dir="$work/tree-train" \
    --set train.epochs=1 >"$work/tree-train.log" 2>&1
  rc=$?
  if [ "$rc" = 4 ] && both_ranks "$work/tree-train.log" "shard '$victim' is damaged: its dataset 'images' has chunk 1 of 4"; then
    ok "treeflip: training on a shard whose first 'images' chunk left the index: refused at open (exit 4) naming it"
  else
    fail "treeflip: training on the flipped shard: exit $rc: $(grep -h -A1 '(exit' "$work/tree-train.log" | head -2)"
  fi
fi

if [[ " $cases " == *" otherrun "* ]]; then
  one=$work/other-1 two=$work/other-2
  train "$job" "${tiny[@]}" --set run.dir="$one" --set train.epochs=1 >"$work/other-1.log" 2>&1 || fail "otherrun: run 1 failed"
  train "$job" "${tiny[@]}" --set run.dir="$two" --set train.epochs=1 >"$work/other-2.log" 2>&1 || fail "otherrun: run 2 failed"
  cp "$one/checkpoints/$(ls "$one/checkpoints" | tail -1)" "$two/checkpoints/ckpt-s000009999.h5"
  if resume_refused otherrun-resume "$two" "was written by run $(run_id "$one"), but run.dir '$two' holds run $(run_id "$two")"; then
    ok "otherrun: a checkpoint of run $(run_id "$one") refused in run $(run_id "$two")'s run.dir (exit 5)"
  else
    fail "otherrun"
  fi
fi

if [[ " $cases " == *" trim "* ]]; then
  d=$work/trim
  train "$job" "${tiny[@]}" --set run.dir="$d" --set train.epochs=2 --set run.keep_checkpoints=2 >"$work/trim-a.log" 2>&1 ||
    fail "trim: first run failed"
  # The epoch-2 checkpoint is lost (as when its write fails), and the last line is torn.
  rm -f "$d/checkpoints/$(ls "$d/checkpoints" | tail -1)"
  printf '{"kind":"epoch","epoch":3,"tor' >>"$d/metrics.jsonl"
  train "$job" "${tiny[@]}" --set run.dir="$d" --set train.epochs=2 --resume >"$work/trim-b.log" 2>&1
  rc=$?
  jobs_seen=$(grep -c '"kind":"job"' "$d/metrics.jsonl")
  if [ "$rc" = 0 ] && [ "$(epochs "$d")" = "1 2" ] && [ "$jobs_seen" = 2 ] &&
     grep -q "2 record(s) written after the checkpoint this run resumes from were dropped" "$work/trim-b.log"; then
    ok "trim: the epoch past the checkpoint and a torn line dropped on --resume; metrics.jsonl holds epochs $(epochs "$d") once"
  else
    fail "trim: exit $rc, epochs [$(epochs "$d")], $jobs_seen job records: $(grep -h 'dropped\|exit' "$work/trim-b.log" | head -2)"
  fi
fi

if [[ " $cases " == *" diskfull "* ]]; then
  full=$work/full
  mkdir -p "$full"
  if ! mount -t tmpfs -o size=8m tmpfs "$full" 2>"$work/mount.log"; then
    skip "diskfull: cannot mount a tmpfs here ($(head -1 "$work/mount.log")); needs root with CAP_SYS_ADMIN"
  else
    mounted=$full
    quiet=(--set run.tensorboard=false --set run.checkpoint_every=0 "${small_conv[@]}")
    # fill_after_first_epoch RUN_DIR: once the first epoch record is written, the ranks are paused (an epoch of this
    # model can take a tenth of a second: polling alone would miss it), the disk filled, the ranks let go.
    fill_after_first_epoch() {
      for _ in $(seq 6000); do
        grep -q '"kind":"epoch"' "$1/metrics.jsonl" 2>/dev/null && break  # the first record, or any later one
        sleep 0.01
      done
      local pids
      pids=$(ranks "$1")
      kill -STOP $pids 2>/dev/null
      dd if=/dev/zero of="$full/filler" bs=64k 2>/dev/null
      [ "$(epochs "$1")" = "1" ] || echo "note: epochs [$(epochs "$1")] were written before the disk filled"
      kill -CONT $pids 2>/dev/null
    }
    # Space returns: the disk is filled once the first epoch record is written, and freed once a rank has said
    # it holds a record. Twelve epochs: the disk must be freed before the last one, and a fast machine runs an epoch
    # in less than a tenth of a second, so the script's polling needs epochs to spare.
    d=$full/back
    train "$job" "${slow[@]}" "${quiet[@]}" --set run.dir="$d" --set train.epochs=12 >"$work/full-a.log" 2>&1 &
    launcher=$!
    fill_after_first_epoch "$d"
    for _ in $(seq 1200); do grep -q "cannot append to" "$work/full-a.log" && break; sleep 0.05; done
    rm -f "$full/filler"
    wait "$launcher"
    rc=$?
    if [ "$rc" = 0 ] && [ "$(epochs "$d")" = "$(seq -s ' ' 12)" ] && grep -q "is writable again" "$work/full-a.log"; then
      ok "diskfull: a record held while the disk was full, written once space returned; epochs $(epochs "$d"), exit 0"
    else
      fail "diskfull: exit $rc, epochs [$(epochs "$d")]: $(grep -h 'append\|writable\|exit' "$work/full-a.log" | head -3)"
    fi
    # The disk stays full: the run ends non-zero and the records it could not write are on stderr. Eight epochs, so
    # that the disk fills before the last one on a fast machine too.
    d=$full/stays
    rm -rf "$full/back"
    train "$job" "${slow[@]}" "${quiet[@]}" --set run.dir="$d" --set train.epochs=8 >"$work/full-b.log" 2>&1 &
    launcher=$!
    fill_after_first_epoch "$d"
    wait "$launcher"
    rc=$?
    # Every epoch's record is somewhere: in metrics.jsonl, or printed for the user to append.
    on_stderr=$(grep -o '^{"kind":"epoch","epoch":[0-9]*' "$work/full-b.log" | grep -o '[0-9]*$' | tr '\n' ' ')
    all=$(echo $(epochs "$d") $on_stderr | tr ' ' '\n' | sort -n | tr '\n' ' ')
    if [ "$rc" != 0 ] && [ -n "$on_stderr" ] && [ "$all" = "$(seq -s ' ' 8) " ] && grep -q "append these lines to it" "$work/full-b.log"; then
      ok "diskfull: a disk that stays full ends the run (exit $rc); epochs [$(epochs "$d")] in metrics.jsonl, [${on_stderr% }] printed to append"
    else
      fail "diskfull (stays full): exit $rc, epochs [$(epochs "$d")] on disk, [$on_stderr] on stderr"
    fi
    rm -f "$full/filler"
  fi
fi

if [[ " $cases " == *" signals "* ]]; then
  # SIGUSR1 the moment the ranks catch it (SigCgt, bit 10): a clean stop, not death by the signal.
  d=$work/early
  train "$job" "${slow[@]}" --set run.dir="$d" --set train.epochs=2 >"$work/early.log" 2>&1 &
  launcher=$!
  signalled=0
  for _ in $(seq 2000); do
    for pid in $(ranks "$d"); do
      caught=$(sed -n 's/^SigCgt:\t//p' "/proc/$pid/status" 2>/dev/null)
      if [ -n "$caught" ] && (( (16#$caught >> 9) & 1 )); then kill -USR1 "$pid" && signalled=$((signalled + 1)); fi
    done
    [ "$signalled" -gt 0 ] && break
    sleep 0.005
  done
  wait "$launcher"
  rc=$?
  if [ "$signalled" -gt 0 ] && [ "$rc" = 75 ] && grep -q "stop requested (" "$work/early.log"; then
    ok "signals: SIGUSR1 as early as a rank catches it: checkpoint and exit 75"
  else
    fail "signals: SIGUSR1 sent to $signalled rank(s) early: exit $rc: $(tail -3 "$work/early.log" | tr '\n' ' ')"
  fi

  # A killed mpirun: its ranks end by themselves (in well under a second; 30 s is the ceiling of "they end", not a
  # speed target); the checkpoint they wrote is intact.
  d=$work/orphans
  mpirun -np 2 --oversubscribe "$bin" train "$job" "${slow[@]}" --set run.dir="$d" --set train.epochs=20 \
    >"$work/orphans.log" 2>&1 &
  launcher=$!
  for _ in $(seq 600); do [ -n "$(ls "$d/checkpoints" 2>/dev/null | grep -v tmp)" ] && break; sleep 0.1; done
  before=$(ranks "$d" | wc -l)   # counted before the kill: a rank may see its launcher gone within a millisecond
  kill -KILL "$launcher"
  killed_at=$(date +%s.%N)
  for _ in $(seq 300); do [ -z "$(ranks "$d")" ] && break; sleep 0.1; done
  left=$(ranks "$d" | wc -l)
  took=$(awk -v from="$killed_at" -v to="$(date +%s.%N)" 'BEGIN { printf "%.1f", to - from }')
  for pid in $(ranks "$d"); do kill -KILL "$pid"; done
  newest=$(ls "$d/checkpoints" | grep -v tmp | tail -1)
  if [ "$before" = 2 ] && [ "$left" = 0 ] && "$bin" inspect "$d/checkpoints/$newest" >/dev/null 2>&1; then
    ok "signals: mpirun killed: its 2 ranks ended within $took s; $newest is intact"
  else
    fail "signals: mpirun killed: $before rank(s) running, $left left after $took s; newest checkpoint '$newest'"
  fi
fi

if [[ " $cases " == *" prepare "* ]]; then
  refused=0
  for spec in "3,100000,100000 1024|would hold 3e+10 values each" "3,1000,1000 100000000|the file system holding"; do
    shape=${spec%% *} rest=${spec#* } samples=${rest%%|*} want=${spec#*|}
    timeout 30 "$bin" prepare synthetic --shape "$shape" --samples "$samples" --out "$work/huge" >"$work/huge.log" 2>&1
    rc=$?
    if [ "$rc" = 4 ] && grep -qF -- "$want" "$work/huge.log" && [ ! -e "$work/huge" ]; then
      refused=$((refused + 1))
    else
      echo "    prepare $shape x $samples: exit $rc: $(tail -2 "$work/huge.log" | tr '\n' ' ')"
    fi
  done
  if [ "$refused" = 2 ]; then ok "prepare: an enormous shape and an enormous sample count refused (exit 4), nothing written"
  else fail "prepare: $refused of 2 refused"; fi
fi

echo "$failures failed, $skipped skipped"
[ "$failures" -eq 0 ] || exit 1
[ "$skipped" -eq 0 ] || exit 77

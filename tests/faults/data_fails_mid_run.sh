#!/usr/bin/env bash
# A sample that one rank alone cannot use, met after start-up (its bytes fail their CRC-32C, or pass it and do not
# decode), stops every rank with that rank's message and exit 4: in a training step (in the epoch's middle, and in
# its first batch, which the failing rank still runs, on zeros, so no rank waits for it), in the evaluation after an
# epoch, and in `ringtrain evaluate`. Each rank prints the message and the rank that found it; an evaluation longer
# than run.collective_timeout_s is no stall. A run resumed onto the damaged split leaves its checkpoint and its earlier
# records as they were.
# Usage: data_fails_mid_run.sh RINGTRAIN SOURCE_DIR MPIEXEC
set -euo pipefail
bin=$1 src=$2 mpiexec=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
tools=$src/tests/support/small_jpeg_split.py
/usr/bin/python3 "$tools" split "$bin"  # ./photos, and ./data: their JPEG split

# damage COPY SPLIT SAMPLES HOW [SHARD]: shard SHARD (default 1: rank 1's part on 2 ranks) of COPY/SPLIT, its SAMPLES
# ("all" or a number) made bytes that fail their CRC (HOW = crc) or bytes that pass it and are no JPEG (undecodable).
damage() {
  [[ -d $1 ]] || cp -r data "$1"
  /usr/bin/python3 "$tools" damage "$1/$2/shard-0000${5:-1}-of-00002.h5" "$3" "$4"
}

# expect NAME LOG CODE TEXT GOT [FINDER]: the run exited GOT = CODE, and both ranks printed TEXT and that rank FINDER
# (default 1) found it.
expect() {
  local name=$1 log=$2 code=$3 text=$4 got=$5 finder=${6:-1}
  [[ $got == "$code" ]] || { echo "FAIL: $name exited $got, not $code: $(tail -8 "$log")"; exit 1; }
  local printed found
  printed=$(grep -cF -- "$text" "$log" || true)
  found=$(grep -cF "(found by rank $finder/2" "$log" || true)
  [[ $printed == 2 && $found == 2 ]] ||
    { echo "FAIL: $name: '$text' printed $printed times and the finding rank named $found times, not by both ranks:"
      cat "$log"; exit 1; }
  for r in 0 1; do
    grep -qF "data error (exit 4) [rank $r/2" "$log" || { echo "FAIL: $name: rank $r did not report"; cat "$log"; exit 1; }
  done
  echo "ok   $name: exit $code on both ranks, each printing rank $finder's message"
}

model='model.layers=[{type="conv2d",filters=4,kernel=3,padding=1},{type="batchnorm"},{type="relu"},{type="flatten"},{type="dense",units=3}]'
train() {  # train LOG RUN_DIR DATA [SET...]; echoes the exit code
  local log=$1 run=$2 data=$3
  shift 3
  local sets=()
  for s in "$@"; do
    if [[ $s == --* ]]; then sets+=("$s"); else sets+=(--set "$s"); fi
  done
  set +e
  timeout 240 "$mpiexec" -np 2 --oversubscribe "$bin" train "$src/jobs/fashion_mnist.toml" --set data.train="$data/train" \
    --set data.test="$data/test" --set train.batch_per_rank=6 --set train.epochs=2 --set run.dir="$run" \
    --set run.progress_every_s=1000 --set data.augment=resized_crop_flip --set data.eval_resize=26 \
    --set data.loader_threads=2 --set run.collective_timeout_s=60 --set "$model" "${sets[@]}" >"$log" 2>&1
  echo $?
  set -e
}

damage crc_one train 10 crc
code=$(train crc_one.log crc_one-run crc_one)
expect "a sample failing its CRC in the epoch's middle" crc_one.log 4 \
  "shard 'crc_one/train/shard-00001-of-00002.h5', sample 10 is damaged: its bytes fail their checksum" "$code"

damage crc_all train all crc
code=$(train crc_all.log crc_all-run crc_all)
expect "every sample of rank 1 failing its CRC, from the first batch" crc_all.log 4 \
  "crc_all/train/shard-00001-of-00002.h5', sample" "$code"
grep -q "epoch 1/2" crc_all.log && { echo "FAIL: an epoch was recorded although rank 1's first batch failed"; exit 1; }

damage undecodable_test test 3 undecodable
code=$(train undecodable_test.log undecodable_test-run undecodable_test)
expect "a test sample that does not decode, in the evaluation after epoch 1" undecodable_test.log 4 \
  "shard 'undecodable_test/test/shard-00001-of-00002.h5', sample 3 does not decode" "$code"

# An evaluation that outlasts run.collective_timeout_s (54 test samples of 32x32 a rank through four 512-filter
# convolutions on one thread a rank, about 8 s here, against 2 s: room on either side for a faster machine and a
# busier one), rank 0's
# first test sample damaged: the rank keeps pace with forward passes on the
# batch it holds and meets the others at the agreement; waiting there the whole evaluation, it was ended by the
# watchdog as a stall (exit 6) with no rank printing the damaged sample (rank 0 names the missing ranks at the
# timeout itself; another rank would wait 5 s more).
"$bin" prepare images --source photos --size 32 --store jpeg --shards 2 --test-fraction 0.9 --out slow >slow.prepare.log 2>&1 ||
  { echo "FAIL: prepare slow: $(tail -3 slow.prepare.log)"; exit 1; }
damage slow test 0 crc 0
heavy='model.layers=[{type="conv2d",filters=512,kernel=3,padding=1},{type="relu"},{type="conv2d",filters=512,kernel=3,padding=1},{type="relu"},{type="conv2d",filters=512,kernel=3,padding=1},{type="relu"},{type="conv2d",filters=512,kernel=3,padding=1},{type="relu"},{type="flatten"},{type="dense",units=3}]'
code=$(train slow.log slow-run slow train.epochs=1 train.batch_per_rank=2 data.eval_resize=36 run.threads=1 run.collective_timeout_s=2 "$heavy")
expect "a test sample failing its CRC in the first batch of an evaluation longer than run.collective_timeout_s" \
  slow.log 4 "shard 'slow/test/shard-00000-of-00002.h5', sample 0 is damaged" "$code" 0

# A run with a checkpoint after epoch 1, resumed onto a copy of its split whose sample then fails: exit 4 on both
# ranks, and the checkpoint and the records written before stay byte for byte.
code=$(train good.log kept data train.epochs=1)
[[ $code == 0 ]] || { echo "FAIL: the good run exited $code: $(tail -5 good.log)"; exit 1; }
cp -r kept kept-before
damage resumed train 10 crc
code=$(train resumed.log kept resumed train.epochs=3 --resume)
expect "a resumed run meeting a damaged sample" resumed.log 4 \
  "shard 'resumed/train/shard-00001-of-00002.h5', sample 10 is damaged" "$code"
diff -r kept-before/checkpoints kept/checkpoints >/dev/null ||
  { echo "FAIL: the checkpoints changed: $(ls -l kept-before/checkpoints kept/checkpoints)"; exit 1; }
size=$(stat -c %s kept-before/metrics.jsonl)
cmp -s -n "$size" kept-before/metrics.jsonl kept/metrics.jsonl ||
  { echo "FAIL: the records written before the resume changed"; exit 1; }
echo "ok   the resumed run's checkpoints and earlier records are as they were: $(ls kept/checkpoints | tr '\n' ' ')"

# `ringtrain evaluate` on 2 ranks, a test sample of rank 1 failing its CRC.
damage evaluated test 3 crc
set +e
timeout 240 "$mpiexec" -np 2 --oversubscribe "$bin" evaluate "$src/jobs/fashion_mnist.toml" --set run.dir=kept \
  --set data.train=data/train --data evaluated/test --set "$model" --set data.eval_resize=26 \
  --set train.batch_per_rank=6 >evaluate.log 2>&1
code=$?
set -e
expect "ringtrain evaluate meeting a damaged test sample" evaluate.log 4 \
  "shard 'evaluated/test/shard-00001-of-00002.h5', sample 3 is damaged" "$code"

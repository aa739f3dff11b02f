#!/bin/bash
# alternate_one_rank.sh ROUNDS JOB BINARY...: one rank on core 1, 170 steps (20 warm-up), each binary in turn per round;
# prints steady_samples_per_s and param_checksum from metrics.jsonl. Shards in /tmp/rt/fmnist (ringtrain prepare).
rounds=$1; job=$2; shift 2
for r in $(seq $rounds); do
  line=""
  for b in "$@"; do
    d=/tmp/rt/ab-run-$RANDOM$RANDOM
    taskset -c 1 $b train $job --set train.epochs=1 --set train.max_steps_per_epoch=170 --set run.timing_warmup_steps=20 --set run.threads=1 --set data.train='"/tmp/rt/fmnist/train"' --set data.test='"/tmp/rt/fmnist/test"' --set run.dir="\"$d\"" >/dev/null 2>&1
    v=$(python3 -c "import json;r=[json.loads(l) for l in open('$d/metrics.jsonl')][-1];print(round(r['steady_samples_per_s']), r.get('param_checksum',''))")
    line="$line | $v"; rm -rf $d
  done
  echo "round $r $line"
done

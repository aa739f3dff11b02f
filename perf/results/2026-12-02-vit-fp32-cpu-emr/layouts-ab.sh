#!/bin/bash
# Interleaved ViT-S/16 fp32 runs: binary (old/new) x run.cpu_layout (nchw/nhwc), REPEATS rounds.
export OPENBLAS_CORETYPE=Cooperlake
cd /work/main
for r in $(seq 1 ${REPEATS:-4}); do
  for v in old:nchw new:nchw new:nhwc old:nhwc; do
    bin=/tmp/rt-${v%%:*}; layout=${v##*:}
    $bin train jobs/vit_s16.toml --set data.train=/tmp/vitdata/train --set data.test=/tmp/vitdata/test --set train.epochs=1 --set train.max_steps_per_epoch=25 --set train.batch_per_rank=32 --set run.threads=2 --set run.timing_warmup_steps=5 --set run.dir=/tmp/ab/run --set 'train.precision="fp32"' --set 'run.device="cpu"' --set 'optimizer.name="sgd"' --set optimizer.momentum=0.9 --set run.progress_every_s=1000 --set run.overwrite=true --set "run.cpu_layout=\"$layout\"" >/tmp/ab/last.txt 2>&1 || { echo FAILED; tail /tmp/ab/last.txt; }
    python3 -c "import json,sys; e=[json.loads(l) for l in open('/tmp/ab/run/metrics.jsonl') if l.strip()][-1]; print(json.dumps({'round':$r,'binary':'${v%%:*}','layout':'$layout','steady_samples_per_s':round(e['steady_samples_per_s'],2),'train_loss':e.get('train_loss'),'load':open('/proc/loadavg').read().split()[0]}))"
  done
done

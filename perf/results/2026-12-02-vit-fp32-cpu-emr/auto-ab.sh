#!/bin/bash
# Interleaved ViT-S/16 fp32 runs at run.cpu_layout's default (auto), 40 timed steps after 5 warm-up steps: the binary
# before (old) and after (new) this change. Records the VM's steal time (jiffies of /proc/stat) over each run.
export OPENBLAS_CORETYPE=Cooperlake
cd /work/main
steal() { awk '/^cpu /{print $9}' /proc/stat; }
for r in $(seq 1 ${REPEATS:-6}); do
  for b in old new; do
    s0=$(steal)
    /tmp/rt-$b train jobs/vit_s16.toml --set data.train=/tmp/vitdata/train --set data.test=/tmp/vitdata/test --set train.epochs=1 --set train.max_steps_per_epoch=45 --set train.batch_per_rank=32 --set run.threads=2 --set run.timing_warmup_steps=5 --set run.dir=/tmp/ab/run --set 'train.precision="fp32"' --set 'run.device="cpu"' --set 'optimizer.name="sgd"' --set optimizer.momentum=0.9 --set run.progress_every_s=1000 --set run.overwrite=true > /tmp/ab/auto2-$b-$r.txt 2>&1
    s1=$(steal)
    python3 -c "import json; e=[json.loads(l) for l in open('/tmp/ab/run/metrics.jsonl') if l.strip()][-1]; print(json.dumps({'round':$r,'binary':'$b','nhwc':'activations NHWC' in open('/tmp/ab/auto2-$b-$r.txt').read(),'steady_samples_per_s':round(e['steady_samples_per_s'],2),'train_loss':e.get('train_loss'),'steal_jiffies':$s1-$s0,'load':open('/proc/loadavg').read().split()[0]}))"
  done
done

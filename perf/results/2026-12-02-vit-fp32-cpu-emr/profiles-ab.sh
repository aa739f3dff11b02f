#!/bin/bash
# Alternated layer profiles of ViT-S/16 fp32 NHWC: old vs new binary.
export OPENBLAS_CORETYPE=Cooperlake
cd /work/main
for r in $(seq 1 ${REPEATS:-3}); do
  for b in old new; do
    /tmp/rt-$b train jobs/vit_s16.toml --set data.train=/tmp/vitdata/train --set data.test=/tmp/vitdata/test --set train.epochs=1 --set train.max_steps_per_epoch=25 --set train.batch_per_rank=32 --set run.threads=2 --set run.timing_warmup_steps=5 --set run.dir=/tmp/ab/run --set 'train.precision="fp32"' --set 'run.device="cpu"' --set 'optimizer.name="sgd"' --set optimizer.momentum=0.9 --set run.progress_every_s=1000 --set run.overwrite=true --set 'run.cpu_layout="nhwc"' --set run.profile_layers=true > /tmp/ab/profile-$b-$r.txt 2>&1
    echo "$r $b $(grep -E '^(conv2d 1x1x1536|multi_head|conv2d 1x1x384)' /tmp/ab/profile-$b-$r.txt | awk '{printf "%s fwd %s bwd %s | ", $1" "$2, $(NF-2), $(NF-1)}') $(grep -o 'steady [0-9]*' /tmp/ab/profile-$b-$r.txt)"
  done
done

#!/bin/bash
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo OMPI_MCA_btl=self,vader,tcp OMPI_MCA_rmaps_base_oversubscribe=1
for r in 1 2 3; do
  for b in head new nonhwc; do
    bin=/work/main/build/bin/ringtrain; [ $b = head ] && bin=/tmp/rt/head/build/bin/ringtrain
    extra=""; [ $b = nonhwc ] && extra="-x RT_TMP_NO_NHWC=1"
    d=/tmp/rt/abjob-$b-$r; rm -rf $d
    (cd /work/main && mpirun -np 2 $extra $bin train jobs/fashion_mnist.toml --set data.train=data/fmnist/train --set data.test=data/fmnist/test \
      --set train.epochs=1 --set train.max_steps_per_epoch=170 --set run.threads=1 --set run.timing_warmup_steps=20 \
      --set run.dir=$d > $d.log 2>&1)
    echo "$b round $r: $(python3 -c "import json;l=[json.loads(x) for x in open('$d/metrics.jsonl') if x.strip()][-1];print(round(l['steady_samples_per_s']))")"
  done
done

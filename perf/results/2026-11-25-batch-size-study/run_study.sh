#!/bin/bash
# The recorded batch-size study (issue 19): Fashion-MNIST CNN, 2 ranks, global batch 128..8192 by accumulation.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export RT_BIN=/work/study/bin/ringtrain RT_PYTHON=/usr/bin/python3
cd /work/main
perf/batch_size_study.sh --batches "128 1024 8192" --optimizers "sgd lars adamw" --seeds "1 2" --epochs 4 \
  --target-acc 0.85 \
  --opt lars:optimizer.base_lr=0.5,optimizer.lr_scaling=sqrt \
  --opt adamw:optimizer.base_lr=0.001,optimizer.lr_scaling=sqrt,optimizer.weight_decay=0.05 \
  --out /work/study/runs jobs/fashion_mnist.toml \
  --set data.train=/work/study/fmnist/train --set data.test=/work/study/fmnist/test

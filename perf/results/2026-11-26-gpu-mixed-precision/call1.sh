#!/usr/bin/env bash
# Session 2026-11-26, call 1: the CUDA backend's 16-bit path, tested and measured, with PyTorch in the same call.
set -u
cd "$(dirname "$0")/.."
tar xJf .gpurt/bin.tar.xz -C .gpurt
w="--set run.timing_warmup_steps=10"
u="--set gpu.unverified_16bit=true"
export STEPS=40 STAGES="tests variants fmnist"
export VARIANTS="tf32=--set train.precision=tf32 $w;bf16=--set train.precision=bf16 $u $w;fp16=--set train.precision=fp16 $u $w;bf16prof=--set train.precision=bf16 $u $w --set run.profile_layers=true"
export FMNIST_SETS="--set train.precision=bf16 $u"
timeout 360 perf/gpu/lease_run.sh
echo "lease_run exit $?"
PYTHONUNBUFFERED=1 timeout 150 python3 perf/gpu/compare_pytorch.py --models resnet50,fmnist --precisions bf16 \
  --channels-last --steps 30 --warmup 10 --out "$OUT/pytorch.jsonl" >"$OUT/pytorch.log" 2>&1
echo "pytorch exit $?"; cat "$OUT/pytorch.jsonl"

#!/usr/bin/env bash
# Session 2026-11-26, call 2: the 16-bit batch norm with fast channel indexing and unrolled loads; the bf16 NCCL test
# against the CPU twin that rounds as the GPU does.
set -u
cd "$(dirname "$0")/.."
rm -rf .gpurt/bin && tar xJf .gpurt/bin.tar.xz -C .gpurt
w="--set run.timing_warmup_steps=10"
u="--set gpu.unverified_16bit=true"
export STEPS=40 STAGES="tests variants"
export VARIANTS="bf16=--set train.precision=bf16 $u $w;bf16prof=--set train.precision=bf16 $u $w --set run.profile_layers=true"
timeout 300 perf/gpu/lease_run.sh
echo "lease_run exit $?"

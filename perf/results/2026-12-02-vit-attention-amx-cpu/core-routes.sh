#!/bin/bash
# Builds core_routes.cpp against build-gpu's kernel library (from the repository root) and runs both routes,
# alternated, at two threads and a batch of 32, over ViT-S/16's token counts from 64x64 (17) to 224x224 (197).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
g++ -O2 -std=c++20 -fopenmp -I. "$here/core_routes.cpp" build-gpu/kernels/librt_kernels_cpu.a \
  build-gpu/common/librt_common.a -L.venv-onednn/lib -Wl,-rpath,"$PWD/.venv-onednn/lib" -ldnnl -lopenblas -lfmt \
  -o "$work/core_routes"
date -u
for round in 1 2; do
  for tokens in 17 37 50 65 82 101 130 197; do
    "$work/core_routes" 2 32 "$tokens"
    "$work/core_routes" 2 32 "$tokens" tiles
  done
done
date -u
rm -rf "$work"

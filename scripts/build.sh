#!/usr/bin/env bash
# Configures and builds ringtrain into build/ (or $BUILD_DIR). Extra CMake arguments pass through, e.g.
#   scripts/build.sh -DRINGTRAIN_CUDA=OFF
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release "$@"
cmake --build "$build" -j "$(nproc)"

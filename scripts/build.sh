#!/usr/bin/env bash
# Configures and builds ringtrain into build/ (or $BUILD_DIR). Extra CMake arguments pass through, e.g.
#   scripts/build.sh -DRINGTRAIN_CUDA=OFF
# TARGETS="ringtrain" builds only the named targets (space-separated); unset, everything: the tests, fuzzers and
# benchmarks too, which is what scripts/test.sh needs and what the main job (scripts/run_fashion_mnist.sh), which
# runs only ringtrain, should not wait for before its first epoch.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release "$@"
read -ra targets <<<"${TARGETS:-}"
if [ ${#targets[@]} -gt 0 ]; then
  cmake --build "$build" -j "$(nproc)" --target "${targets[@]}"
else
  cmake --build "$build" -j "$(nproc)"
fi

#!/usr/bin/env bash
# The test command: installs dependencies, builds everything with warnings as errors, runs every CTest test
# (unit, mpi, e2e; gpu tests are built with the CUDA backend only, and skip with a message where no GPU is
# visible). Extra arguments go to ctest, e.g. scripts/test.sh -L unit
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
TARGETS= BUILD_DIR=${BUILD_DIR:-build} scripts/build.sh -DRINGTRAIN_WERROR=ON   # every target: the tests need them all
cd "${BUILD_DIR:-build}"
ctest --output-on-failure --timeout 1500 -j "$(nproc)" "$@"

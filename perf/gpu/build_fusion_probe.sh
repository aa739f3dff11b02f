#!/usr/bin/env bash
# Builds perf/gpu/cudnn_fusion_probe.cpp into build/bin/cudnn_fusion_probe: cudnn-frontend's C++ headers from PyPI
# (nvidia-cudnn-frontend, header-only) in the gitignored .venv-cudnn-frontend, cuDNN, NVRTC and the CUDA runtime
# from /usr/local/cuda (the legacy convolution API it compares against is in the same libcudnn). Then checks the
# graph definitions here (--validate-only needs no GPU; it leaves out the legacy entries). Pack the binary into
# .gpurt/bin.tar.xz for a GPU host without this toolchain (perf/gpu/PENDING.md).
#   bash perf/gpu/build_fusion_probe.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
venv=.venv-cudnn-frontend
version=1.32.0
if ! "$venv/bin/python3" -c "import importlib.metadata as m, sys; sys.exit(m.version('nvidia-cudnn-frontend') != '$version')" \
     2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet "nvidia-cudnn-frontend==$version"
fi
include=$("$venv/bin/python3" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")/include
cuda=${CUDA_HOME:-/usr/local/cuda}
mkdir -p build/bin
# -isystem: the frontend's own headers trip -Wall -Wextra (1.32.0: an unused function in cudnn_frontend_utils.h);
# the warnings are for the probe's code.
g++ -std=c++20 -O2 -Wall -Wextra -isystem "$include" -isystem "$cuda/include" perf/gpu/cudnn_fusion_probe.cpp \
  -L"$cuda/lib64" -Wl,-rpath,"$cuda/lib64" -lcudnn -lnvrtc -lcudart -o build/bin/cudnn_fusion_probe
build/bin/cudnn_fusion_probe --validate-only

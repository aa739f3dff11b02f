#!/usr/bin/env bash
# Installs what ringtrain needs to build, test and run on Debian 12 (root, apt-get). Safe to run again:
# packages already present are skipped. The CUDA toolkit, cuDNN and NCCL are not Debian packages; when they
# are under /usr/local/cuda the CUDA backend is built too (RINGTRAIN_CUDA=AUTO).
#   --comparison  also what perf/compare_frameworks_cpu.py runs the other framework with: TensorFlow + Keras from
#                 PyPI in a venv (.venv-compare). Not for CI: large.
set -euo pipefail
comparison=false
[ "${1:-}" = "--comparison" ] && comparison=true
packages=(
  build-essential cmake pkg-config git python3     # toolchain
  libopenmpi-dev openmpi-bin                       # MPI: ranks, CPU all-reduce, NCCL bootstrap
  libhdf5-dev zlib1g-dev                           # sharded datasets and checkpoints; gzip'd IDX import
  libjpeg62-turbo-dev libpng-dev                   # prepare images: JPEG (libjpeg-turbo) and PNG decoding
  libopenblas-dev                                  # CPU BLAS (im2col convolutions, dense weight gradient)
  libtomlplusplus-dev libcli11-dev nlohmann-json3-dev libfmt-dev   # job files, command line, JSON records, formatting
  libgtest-dev libgmock-dev libbenchmark-dev       # tests and benchmarks
  dataset-fashion-mnist                            # the Fashion-MNIST IDX files under /usr/share/datasets
  python3-venv                                     # a private venv for the TensorBoard read-back test (below)
  python3-matplotlib                               # plots of perf/results and perf/scaling_report.py
  python3-h5py                                     # tests/io: shards and checkpoints read back by h5py, as users do
  python3-pil                                      # tests/io: writes Fashion-MNIST as a PNG/JPEG folder for prepare images
  slurm-wlm munge                                  # tests/slurm: a real two-node Slurm cluster runs slurm/train.sbatch
  iproute2                                         # tests/multihost: ip netns/veth "nodes", tc rate limits; ss
  python3-torch python3-torchvision                # tests/e2e: torchvision's models (random weights) exported to
                                                   # ONNX for `ringtrain import` and checked against ringtrain's
                                                   # job files; also the CPU comparisons' PyTorch and its pipeline
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install_deps: all ${#packages[@]} packages present"
else
  echo "install_deps: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  echo "install_deps: apt packages done"
fi

# venv_install VENV PYTHON PACKAGE==VERSION [MORE==VERSION ...]: a fresh venv made with PYTHON, and the packages in
# it from PyPI (three tries).
venv_install() {
  local venv=$1 python=$2 spec=$3
  echo "install_deps: installing $spec into $venv"
  rm -rf "$venv"
  "$python" -m venv "$venv"
  for attempt in 1 2 3; do
    if "$venv/bin/pip" install --quiet --disable-pip-version-check --no-input --retries 5 --timeout 60 \
         "${@:3}" >"$venv/pip.log" 2>&1; then
      break
    fi
    if [ "$attempt" -eq 3 ]; then
      echo "install_deps: pip install $spec failed 3 times; last log:" >&2; tail -20 "$venv/pip.log" >&2; exit 1
    fi
    echo "install_deps: pip install $spec failed (attempt $attempt), retrying in 10 s"; sleep 10
  done
  echo "install_deps: $spec done"
}

# pip_venv VENV PYTHON PACKAGE VERSION [MORE==VERSION ...]: PACKAGE==VERSION (and MORE) from PyPI in its own venv,
# made with PYTHON; kept when it already imports PACKAGE at that version (the module is the package's name).
pip_venv() {
  local venv=$1 python=$2 package=$3 version=$4
  shift 4
  if "$venv/bin/python3" -c "import $package, sys; sys.exit($package.__version__ != '$version')" 2>/dev/null; then
    echo "install_deps: $package $version present in $venv"; return
  fi
  venv_install "$venv" "$python" "$package==$version" "$@"
}
checkout=$(cd "$(dirname "$0")/.." && pwd)

# oneDNN 3.2, the CPU backend's convolutions and products: PyPI's CPU-only build on GNU OpenMP (headers and
# libdnnl.so.3 land in the venv's include/ and lib/, where CMake looks), chosen over Debian's 2.6.3 by measurement
# (perf/results/2026-11-25-cpu-spr-8.md: its AMX bf16 filter gradient is 2.6x as fast). No Python in it.
onednn=$checkout/.venv-onednn
if grep -qs "define DNNL_VERSION_MINOR 2" "$onednn/include/oneapi/dnnl/dnnl_version.h" &&
   [ -e "$onednn/lib/libdnnl.so.3" ]; then
  echo "install_deps: oneDNN 3.2 present in $onednn"
else
  venv_install "$onednn" python3 onednn-devel-cpu-gomp==2023.2.0
fi

# cudnn-frontend's C++ headers (PyPI only, header-only), for the CUDA backend's graph-API convolutions
# (src/backend/cuda/conv_graphs.h), only where cuDNN is installed (then CMake builds the CUDA backend). --no-deps:
# the headers, not the Python package's CUTLASS DSL (650 MB). perf/gpu/build_fusion_probe.sh uses the same venv.
frontend=$checkout/.venv-cudnn-frontend
if [ -e "${CUDNN_ROOT:-/usr/local/cuda}/include/cudnn.h" ]; then
  if grep -qs "define CUDNN_FRONTEND_MINOR_VERSION 32" \
       "$frontend"/lib/python3*/site-packages/include/cudnn_frontend_version.h; then
    echo "install_deps: cudnn-frontend 1.32 present in $frontend"
  else
    venv_install "$frontend" python3 nvidia-cudnn-frontend==1.32.0 --no-deps
  fi
fi

# nvJPEG's header and library (PyPI only: CUDA 13.0's toolkit here has no nvJPEG), for the GPU JPEG decoder
# (kernels/cuda/jpeg_batch_decoder.h), only where cuDNN is installed. --no-deps: the wheel is the header and
# libnvjpeg.so.13 alone. 13.0.x, as the toolkit and the GPU machine's CUDA 13.0 driver; that machine has no nvJPEG
# either, so perf/gpu/pack_carried.sh carries the library there.
nvjpeg=$checkout/.venv-nvjpeg
if [ -e "${CUDNN_ROOT:-/usr/local/cuda}/include/cudnn.h" ]; then
  nvjpeg_h=$(ls "$nvjpeg"/lib/python3*/site-packages/nvidia/cu13/include/nvjpeg.h 2>/dev/null | head -1 || true)
  if [ -n "$nvjpeg_h" ] && grep -qs "define NVJPEG_VER_MINOR 0" "$nvjpeg_h" &&
     grep -qs "define NVJPEG_VER_PATCH 4" "$nvjpeg_h" && [ -e "${nvjpeg_h%/include/nvjpeg.h}/lib/libnvjpeg.so.13" ]; then
    echo "install_deps: nvJPEG 13.0.4 present in $nvjpeg"
  else
    venv_install "$nvjpeg" python3 nvidia-nvjpeg==13.0.4.44 --no-deps
  fi
fi

# TensorBoard (PyPI only; Debian 12 does not package it) in a venv inside the checkout (.venv, gitignored), so the
# test that reads our event files back uses TensorBoard's own reader.
pip_venv "${RINGTRAIN_VENV:-$checkout/.venv}" python3 tensorboard 2.21.0

# ONNX's checker and onnxruntime (PyPI; Debian 12 packages neither), with h5py, in a venv of their own: the test
# that runs ringtrain's exported models in onnxruntime against `ringtrain predict`.
pip_venv "$checkout/.venv-onnx" python3 onnxruntime 1.32.0 onnx==1.23.2 h5py==3.16.0

# The framework comparison's TensorFlow and Keras (PyPI only; Debian 12 packages neither), in a venv of their own
# made with Debian's python3, beside its python3-torch.
if $comparison; then
  pip_venv "$checkout/.venv-compare" /usr/bin/python3 tensorflow 2.21.0
fi

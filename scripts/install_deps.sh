#!/usr/bin/env bash
# Installs what ringtrain needs to build, test and run on Debian 12 (root, apt-get). Safe to run again:
# packages already present are skipped. The CUDA toolkit, cuDNN and NCCL are not Debian packages; when they
# are under /usr/local/cuda the CUDA backend is built too (RINGTRAIN_CUDA=AUTO).
set -euo pipefail
packages=(
  build-essential cmake pkg-config git python3     # toolchain
  libopenmpi-dev openmpi-bin                       # MPI: ranks, CPU all-reduce, NCCL bootstrap
  libhdf5-dev zlib1g-dev                           # sharded datasets and checkpoints; gzip'd IDX import
  libopenblas-dev libdnnl-dev                      # CPU GEMM (OpenBLAS); oneDNN, measured against it in perf/
  libtomlplusplus-dev libcli11-dev nlohmann-json3-dev libfmt-dev   # job files, command line, JSON records, formatting
  libgtest-dev libgmock-dev libbenchmark-dev       # tests and benchmarks
  dataset-fashion-mnist                            # the Fashion-MNIST IDX files under /usr/share/datasets
  python3-venv                                     # a private venv for the TensorBoard read-back test (below)
  python3-matplotlib                               # plots of perf/results and perf/scaling_report.py
  python3-h5py                                     # tests/io: shards and checkpoints read back by h5py, as users do
  slurm-wlm munge                                  # tests/slurm: a real two-node Slurm cluster runs slurm/train.sbatch
  iproute2                                         # tests/multihost: ip netns/veth "nodes", tc rate limits; ss
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

# TensorBoard (PyPI only; Debian 12 does not package it) in a venv inside the checkout (.venv, gitignored), so the
# test that reads our event files back uses TensorBoard's own reader. Kept when it already imports.
venv=${RINGTRAIN_VENV:-$(cd "$(dirname "$0")/.." && pwd)/.venv}
tensorboard_version=2.21.0
if "$venv/bin/python3" -c "import tensorboard, sys; sys.exit(tensorboard.__version__ != '$tensorboard_version')" 2>/dev/null; then
  echo "install_deps: tensorboard $tensorboard_version present in $venv"
else
  echo "install_deps: installing tensorboard $tensorboard_version into $venv"
  rm -rf "$venv"
  python3 -m venv "$venv"
  for attempt in 1 2 3; do
    if "$venv/bin/pip" install --quiet --disable-pip-version-check --no-input --retries 5 --timeout 60 \
         "tensorboard==$tensorboard_version" >"$venv/pip.log" 2>&1; then
      break
    fi
    if [ "$attempt" -eq 3 ]; then
      echo "install_deps: pip install tensorboard failed 3 times; last log:" >&2; tail -20 "$venv/pip.log" >&2; exit 1
    fi
    echo "install_deps: pip install tensorboard failed (attempt $attempt), retrying in 10 s"; sleep 10
  done
  echo "install_deps: tensorboard done"
fi

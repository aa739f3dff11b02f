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
  slurm-wlm munge                                  # tests/slurm: a real two-node Slurm cluster runs slurm/train.sbatch
  iproute2                                         # tests/multihost: ip netns/veth "nodes", tc rate limits; ss
  python3-matplotlib                               # perf/scaling_report.py: the scaling plot
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install_deps: all ${#packages[@]} packages present"
  exit 0
fi
echo "install_deps: installing ${missing[*]}"
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install_deps: done"

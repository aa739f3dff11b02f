#!/usr/bin/env bash
# Owns the portable Open MPI + HDF5 runtime for a GPU host that lacks them: packs what such a host needs to run a
# build of this checkout into .gpurt/, the folder to copy there beside the tree: root.tar.xz (Open MPI + HDF5 from
# Debian, made by make-mpi-hdf5-bundle.sh in $RUNTIME_DIR, default ../shared/gpu: the folder beside the checkout
# that also holds cuda-libs.sh, which puts the GPU libraries of the host's Python packages on the library path),
# lib.tar.xz (the other libraries the binaries load that such a machine lacks: fmt, toml++, OpenBLAS with its Fortran
# runtime, oneDNN, libjpeg, libpng, libgomp, Google Benchmark, and nvJPEG's libnvjpeg.so.13 for binaries built with
# the GPU JPEG decoder), bin.tar.xz (the named binaries, stripped), env.sh,
# cuda-libs.sh, and fmnist/ (Debian's Fashion-MNIST files). BUILT.txt says which commit the binaries are.
#   perf/gpu/pack_carried.sh BUILD_DIR [BINARY ...]     default binaries: ringtrain test_gpu
# Then copy .gpurt/root.tar.xz, .gpurt/lib.tar.xz, .gpurt/bin.tar.xz, .gpurt/env.sh, .gpurt/cuda-libs.sh (and
# .gpurt/fmnist for measure_gpu.sh's fmnist stage) to the host: the packed files, not the unpacked folders, which
# are larger; carried.sh unpacks them there.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:?usage: pack_carried.sh BUILD_DIR [BINARY ...]}
shift
binaries=(ringtrain test_gpu)
[ $# -gt 0 ] && binaries=("$@")
shared=${RUNTIME_DIR:-../shared/gpu}
mkdir -p .gpurt
if [ ! -f .gpurt/root.tar.xz ]; then
  [ -d .gpurt/root ] || bash "$shared/make-mpi-hdf5-bundle.sh" .gpurt >/dev/null
  tar cJf .gpurt/root.tar.xz -C .gpurt root
fi
cp "$shared/cuda-libs.sh" .gpurt/
rm -rf .gpurt/bin .gpurt/lib && mkdir -p .gpurt/bin .gpurt/lib
for b in "${binaries[@]}"; do strip -o ".gpurt/bin/$b" "$build/bin/$b"; done
# Every library the binaries load from Debian's folders or the oneDNN venv that is neither the C/C++ runtime nor in the
# bundle nor a GPU library (the GPU machine has those in its Python packages; cuda-libs.sh finds them).
for b in "${binaries[@]}"; do ldd "$build/bin/$b"; done | awk '$3 ~ /^\// {print $1, $3}' | sort -u |
  while read -r name path; do
    case $name in
      libc.so*|libm.so*|libstdc++*|libgcc_s*|libpthread*|libdl.so*|librt.so*|ld-linux*) continue ;;
      libcudnn*|libnccl*|libcublas*|libcudart*|libnvrtc*|libnvidia*|libcuda.so*) continue ;;
      libresolv*|libz.so*) continue ;;  # in every Linux's base system
    esac
    [ -e ".gpurt/root/usr/lib/x86_64-linux-gnu/$name" ] && continue
    cp -L "$path" ".gpurt/lib/$name"
  done
# nvJPEG is no GPU library such a host has (CUDA 13.0's toolkit has none, here or there): the loop above carries
# the venv's libnvjpeg.so.13 (.venv-nvjpeg, scripts/install_deps.sh) with any binary that links it. 6 MB, 3 MB in xz.
if [ -e .gpurt/lib/libnvjpeg.so.13 ]; then
  echo "libnvjpeg.so.13 carried: $(du -k .gpurt/lib/libnvjpeg.so.13 | cut -f1) KB, $(($(xz -c .gpurt/lib/libnvjpeg.so.13 | wc -c) / 1024)) KB in xz"
fi
# xz -9: its 64 MiB window spans the binaries, which share most of their bytes (the CUDA kernels' fatbins): six of
# them came to 5.6 MB where tar's default (-6, an 8 MiB window) made 14.8 MB.
tar cf - -C .gpurt lib | xz -T2 -9 >.gpurt/lib.tar.xz
tar cf - -C .gpurt bin | xz -T2 -9 >.gpurt/bin.tar.xz
if [ ! -d .gpurt/fmnist ]; then mkdir -p .gpurt/fmnist && cp /usr/share/datasets/fashion-mnist/*.gz .gpurt/fmnist/; fi
echo "$(git rev-parse --short HEAD)$(git diff --quiet || echo '+changes') ${binaries[*]} from $build" >.gpurt/BUILT.txt
du -ch .gpurt/{root,lib,bin}.tar.xz .gpurt/fmnist | tail -1
echo "lib.tar.xz: $(ls .gpurt/lib | tr '\n' ' ')"
bash perf/gpu/carry_size.sh

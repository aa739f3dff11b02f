# Owns the carried runtime on a lent GPU machine (../shared/gpu/README.md), for the scripts that run there
# (lease_run.sh, run_gpu_bench.sh, nccl_ranks.sh) and a session's own call scripts; source it from the repository
# root. .gpurt/ holds root.tar.xz (the Open MPI + HDF5 bundle), lib.tar.xz (the libraries the bundle lacks),
# bin.tar.xz (the stripped binaries; or bin/ itself), env.sh and cuda-libs.sh.
#   unpack_carried   unpacks root/ and lib/ once per machine, and bin/ from bin.tar.xz on every call (a machine kept
#                    warm between calls would otherwise run the last call's binaries)
#   rt CMD...        runs CMD with the bundle, the carried libraries and the GPU libraries on its paths; env.sh only
#                    around CMD, since it puts Debian's libssl/libcurl first, which PyTorch need not see.
#                    $bin (default .gpurt/bin) says where ringtrain is; cuda-libs.sh's notes go to $CUDA_LIBS_LOG.

unpack_carried() {
  local part
  for part in root lib; do
    [ -d ".gpurt/$part" ] || [ ! -f ".gpurt/$part.tar.xz" ] || tar xJf ".gpurt/$part.tar.xz" -C .gpurt
  done
  if [ -f .gpurt/bin.tar.xz ]; then rm -rf .gpurt/bin && tar xJf .gpurt/bin.tar.xz -C .gpurt; fi
}

rt() {
  (
    [ -f .gpurt/env.sh ] && source .gpurt/env.sh
    [ -d .gpurt/lib ] && export LD_LIBRARY_PATH=$PWD/.gpurt/lib:$LD_LIBRARY_PATH
    [ -f .gpurt/cuda-libs.sh ] && source .gpurt/cuda-libs.sh "${bin:-.gpurt/bin}/ringtrain" 2>>"${CUDA_LIBS_LOG:-/dev/null}"
    "$@"
  )
}

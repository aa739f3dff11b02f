# Owns the use of the portable Open MPI + HDF5 runtime on a GPU host that lacks them (pack_carried.sh makes it), for
# the measuring scripts here (measure_gpu.sh, run_gpu_bench.sh, nccl_ranks.sh, measure_jpeg_*.sh); source it from the
# repository root. On a host that has Open MPI and HDF5 with no .gpurt/, `rt` runs its command as it is.
# .gpurt/ holds root.tar.xz (the Open MPI + HDF5 runtime), lib.tar.xz (the libraries it lacks), bin.tar.xz (the
# stripped binaries; or bin/ itself), env.sh and cuda-libs.sh.
#   unpack_carried   unpacks root/ and lib/ once per host, and bin/ from bin.tar.xz on every run (a host measured
#                    twice would otherwise run the last run's binaries)
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
    [ -d .gpurt/lib ] && export LD_LIBRARY_PATH=$PWD/.gpurt/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    [ -f .gpurt/cuda-libs.sh ] && source .gpurt/cuda-libs.sh "${bin:-.gpurt/bin}/ringtrain" 2>>"${CUDA_LIBS_LOG:-/dev/null}"
    "$@"
  )
}

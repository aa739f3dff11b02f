# Host-side dependencies, from Debian 12 packages but oneDNN (PyPI); scripts/install_deps.sh installs them all.
find_package(MPI REQUIRED COMPONENTS C)                     # ranks, CPU all-reduce, NCCL bootstrap
# MPI's C API only: otherwise Open MPI's mpi.h pulls in C++ bindings that MPI::MPI_C does not link.
add_compile_definitions(OMPI_SKIP_MPICXX=1 MPICH_SKIP_MPICXX=1)
find_package(HDF5 REQUIRED COMPONENTS C)                    # sharded datasets and checkpoints
find_package(ZLIB REQUIRED)                                 # gzip'd IDX files from dataset-fashion-mnist
find_package(JPEG REQUIRED)                                 # prepare images: JPEG decoding (libjpeg-turbo)
find_package(PNG REQUIRED)                                  # prepare images: PNG decoding (libpng)
find_package(Threads REQUIRED)                              # loader thread
find_package(PkgConfig REQUIRED)
pkg_check_modules(OPENBLAS REQUIRED IMPORTED_TARGET openblas)  # GEMM for conv (im2col) and dense layers
# oneDNN 3.2: the CPU backend's convolutions and dense products (kernels/cpu/dnnl_*), PyPI's CPU-only build in the
# checkout's .venv-onednn, chosen by measurement (perf/results/2026-11-25-cpu-spr-8.md). Looked for there only, so a
# system oneDNN of another major version (Debian's 2.6) is never picked up; the binaries find libdnnl.so.3 through
# their build RPATH.
set(RINGTRAIN_ONEDNN_PREFIX "${CMAKE_SOURCE_DIR}/.venv-onednn" CACHE PATH "where oneDNN 3.2's include/ and lib/ are")
find_path(ONEDNN3_INCLUDE_DIR oneapi/dnnl/dnnl.hpp PATHS "${RINGTRAIN_ONEDNN_PREFIX}/include" NO_DEFAULT_PATH)
find_library(ONEDNN3_LIBRARY NAMES dnnl PATHS "${RINGTRAIN_ONEDNN_PREFIX}/lib" NO_DEFAULT_PATH)
if(NOT ONEDNN3_INCLUDE_DIR OR NOT ONEDNN3_LIBRARY)
  message(FATAL_ERROR "oneDNN 3.2 not found under ${RINGTRAIN_ONEDNN_PREFIX}: run scripts/install_deps.sh (it installs "
                      "PyPI's onednn-devel-cpu-gomp there), or set RINGTRAIN_ONEDNN_PREFIX to another install")
endif()
file(STRINGS "${ONEDNN3_INCLUDE_DIR}/oneapi/dnnl/dnnl_version.h" DNNL_MAJOR REGEX "define DNNL_VERSION_MAJOR")
if(NOT DNNL_MAJOR MATCHES "DNNL_VERSION_MAJOR 3")
  message(FATAL_ERROR "${ONEDNN3_INCLUDE_DIR} holds oneDNN ${DNNL_MAJOR}; ringtrain is written against oneDNN 3's API")
endif()
add_library(rt_dnnl INTERFACE)
target_include_directories(rt_dnnl SYSTEM INTERFACE ${ONEDNN3_INCLUDE_DIR})
target_link_libraries(rt_dnnl INTERFACE ${ONEDNN3_LIBRARY})
# oneDNN's threads are OpenMP's (this build is on libgomp); the backend sets their count from run.threads.
find_package(OpenMP REQUIRED COMPONENTS CXX)
find_package(tomlplusplus CONFIG REQUIRED)                  # job files
find_package(CLI11 CONFIG REQUIRED)                         # command line
find_package(nlohmann_json CONFIG REQUIRED)                 # metrics.jsonl, versions.json
find_package(fmt CONFIG REQUIRED)                           # message formatting
if(RINGTRAIN_TESTS)
  find_package(GTest CONFIG REQUIRED)
endif()
if(RINGTRAIN_BENCHMARKS)
  find_package(benchmark CONFIG REQUIRED)
endif()

# One imported target for HDF5 so io/ does not repeat FindHDF5's variables.
add_library(rt_hdf5 INTERFACE)
target_include_directories(rt_hdf5 SYSTEM INTERFACE ${HDF5_INCLUDE_DIRS})
target_link_libraries(rt_hdf5 INTERFACE ${HDF5_C_LIBRARIES})
target_compile_definitions(rt_hdf5 INTERFACE ${HDF5_DEFINITIONS} H5_USE_110_API)

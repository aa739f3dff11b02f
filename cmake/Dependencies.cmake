# Host-side dependencies, all from Debian 12 packages (scripts/install_deps.sh installs them).
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
# oneDNN: the CPU backend's convolutions and dense products (kernels/cpu/dnnl_*). Debian's 2.6.3, chosen by
# measurement (perf/results/2026-11-24-onednn-cpu.md). Found by hand: Debian's dnnl-config.cmake demands OpenCL.
find_path(DNNL_INCLUDE_DIR dnnl.hpp REQUIRED)
find_library(DNNL_LIBRARY dnnl REQUIRED)
add_library(rt_dnnl INTERFACE)
target_include_directories(rt_dnnl SYSTEM INTERFACE ${DNNL_INCLUDE_DIR})
target_link_libraries(rt_dnnl INTERFACE ${DNNL_LIBRARY})
# oneDNN's threads are OpenMP's (Debian builds it on libgomp); the backend sets their count from run.threads.
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

# Decides whether the CUDA backend is built: AUTO turns it on when nvcc, cuDNN and NCCL are all found.
set(RINGTRAIN_HAVE_CUDA OFF)
if(NOT RINGTRAIN_CUDA STREQUAL "OFF")
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  find_path(CUDNN_INCLUDE_DIR cudnn.h HINTS /usr/local/cuda/include ENV CUDNN_ROOT PATH_SUFFIXES include)
  find_library(CUDNN_LIBRARY cudnn HINTS /usr/local/cuda/lib64 ENV CUDNN_ROOT PATH_SUFFIXES lib lib64)
  find_path(NCCL_INCLUDE_DIR nccl.h HINTS /usr/local/cuda/include ENV NCCL_ROOT PATH_SUFFIXES include)
  find_library(NCCL_LIBRARY nccl HINTS /usr/local/cuda/lib64 ENV NCCL_ROOT PATH_SUFFIXES lib lib64)
  if(CMAKE_CUDA_COMPILER AND CUDNN_INCLUDE_DIR AND CUDNN_LIBRARY AND NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
    set(RINGTRAIN_HAVE_CUDA ON)
  elseif(RINGTRAIN_CUDA STREQUAL "ON")
    message(FATAL_ERROR "RINGTRAIN_CUDA=ON but nvcc (${CMAKE_CUDA_COMPILER}), cuDNN (${CUDNN_LIBRARY}) "
                        "or NCCL (${NCCL_LIBRARY}) was not found; set CUDNN_ROOT/NCCL_ROOT or use -DRINGTRAIN_CUDA=OFF")
  endif()
endif()
if(RINGTRAIN_HAVE_CUDA)
  if(NOT CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES 90-real 90-virtual)   # Hopper SASS plus PTX for newer GPUs
  endif()
  enable_language(CUDA)
  find_package(CUDAToolkit REQUIRED)
  # CMake 3.25 does not know nvcc's C++20 switch (CUDA_STANDARD 20 fails at generate time); teach it.
  if(NOT CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
    set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
    set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
  endif()
  set(CMAKE_CUDA_STANDARD 20)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
endif()
message(STATUS "ringtrain CUDA backend: ${RINGTRAIN_HAVE_CUDA} (RINGTRAIN_CUDA=${RINGTRAIN_CUDA})")

# cudnn-frontend's C++ headers (PyPI's nvidia-cudnn-frontend, header-only; scripts/install_deps.sh puts them in
# .venv-cudnn-frontend): 16-bit NHWC convolutions through cuDNN's graph API (src/backend/cuda/conv_graphs.h).
# Without them the backend builds on the legacy API alone. CUDNN_FRONTEND_INCLUDE_DIR names another copy.
if(RINGTRAIN_HAVE_CUDA)
  file(GLOB RT_FRONTEND_HINTS ${CMAKE_SOURCE_DIR}/.venv-cudnn-frontend/lib/python3*/site-packages/include)
  find_path(CUDNN_FRONTEND_INCLUDE_DIR cudnn_frontend.h HINTS ${RT_FRONTEND_HINTS} ENV CUDNN_FRONTEND_ROOT
            PATH_SUFFIXES include NO_DEFAULT_PATH)
  message(STATUS "ringtrain cudnn-frontend (cuDNN graph API convolutions): "
                 "${CUDNN_FRONTEND_INCLUDE_DIR}")
endif()

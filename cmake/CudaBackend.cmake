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

# nvJPEG (PyPI's nvidia-nvjpeg; scripts/install_deps.sh puts it in .venv-nvjpeg, since CUDA 13.0's toolkit has none):
# the GPU JPEG decoder (kernels/cuda/jpeg_batch_decoder.h). AUTO: on when the CUDA backend is built and nvjpeg.h and
# libnvjpeg are found; ON fails without them; OFF leaves the decoder out. NVJPEG_ROOT names another copy. The wheel
# ships libnvjpeg.so.13 alone (no libnvjpeg.so link), hence the versioned name.
set(RINGTRAIN_NVJPEG AUTO CACHE STRING "GPU JPEG decoder over nvJPEG: AUTO (on when found with the CUDA backend), ON, OFF")
set_property(CACHE RINGTRAIN_NVJPEG PROPERTY STRINGS AUTO ON OFF)
set(RINGTRAIN_HAVE_NVJPEG OFF)
if(RINGTRAIN_HAVE_CUDA AND NOT RINGTRAIN_NVJPEG STREQUAL "OFF")
  file(GLOB RT_NVJPEG_HINTS ${CMAKE_SOURCE_DIR}/.venv-nvjpeg/lib/python3*/site-packages/nvidia/cu13)
  find_path(NVJPEG_INCLUDE_DIR nvjpeg.h HINTS ${RT_NVJPEG_HINTS} ENV NVJPEG_ROOT /usr/local/cuda PATH_SUFFIXES include)
  find_library(NVJPEG_LIBRARY NAMES nvjpeg libnvjpeg.so.13 HINTS ${RT_NVJPEG_HINTS} ENV NVJPEG_ROOT /usr/local/cuda
               PATH_SUFFIXES lib lib64)
  if(NVJPEG_INCLUDE_DIR AND NVJPEG_LIBRARY)
    set(RINGTRAIN_HAVE_NVJPEG ON)
  endif()
endif()
if(RINGTRAIN_NVJPEG STREQUAL "ON" AND NOT RINGTRAIN_HAVE_NVJPEG)
  message(FATAL_ERROR "RINGTRAIN_NVJPEG=ON but the CUDA backend is off (${RINGTRAIN_HAVE_CUDA}) or nvjpeg.h "
                      "(${NVJPEG_INCLUDE_DIR}) / libnvjpeg (${NVJPEG_LIBRARY}) was not found; run "
                      "scripts/install_deps.sh, set NVJPEG_ROOT, or use -DRINGTRAIN_NVJPEG=OFF")
endif()
message(STATUS "ringtrain nvJPEG (GPU JPEG decoder): ${RINGTRAIN_HAVE_NVJPEG} ${NVJPEG_LIBRARY}")

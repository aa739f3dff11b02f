// Owns the one check macro per GPU library: CUDA_CHECK (runtime), CUDNN_CHECK, CUBLAS_CHECK, NCCL_CHECK and, where
// nvJPEG is built (RINGTRAIN_HAVE_NVJPEG), NVJPEG_CHECK. A failed call throws ringtrain::Error (ExitCode::library)
// naming the call as written, file:line, this process (process_label()) and the library's own words
// (cudaGetErrorString, cudnnGetErrorString, cublasGetStatusString, ncclGetErrorString + ncclGetLastError; nvJPEG has
// no such function, so its status's name and meaning are ours, from nvjpeg.h's enum).
//
// Statuses travel as int: every one of these libraries reports success as 0 (static_assert'ed in
// cuda_check.cpp), so this header needs no CUDA include path and host-only code can use the macros.
#pragma once
#include <string>

namespace ringtrain::kernels::cuda {

[[noreturn]] void cuda_failed(int status, const char* call, const char* file, int line);
[[noreturn]] void cudnn_failed(int status, const char* call, const char* file, int line);
[[noreturn]] void cublas_failed(int status, const char* call, const char* file, int line);
[[noreturn]] void nccl_failed(int status, const char* call, const char* file, int line);
[[noreturn]] void nvjpeg_failed(int status, const char* call, const char* file, int line);  // nvJPEG builds only

// "cudaErrorMemoryAllocation: out of memory"; never throws.
const char* cuda_error_name(int status) noexcept;
const char* cuda_error_text(int status) noexcept;
// "NVJPEG_STATUS_BAD_JPEG: the bitstream is corrupt or not a JPEG". nvJPEG builds only.
std::string nvjpeg_status_text(int status);

}  // namespace ringtrain::kernels::cuda

#define RT_GPU_CHECK_(failed, call)                                                   \
  do {                                                                                \
    const int rt_gpu_status_ = static_cast<int>(call);                                \
    if (rt_gpu_status_ != 0)                                                          \
      ::ringtrain::kernels::cuda::failed(rt_gpu_status_, #call, __FILE__, __LINE__);  \
  } while (0)

#define CUDA_CHECK(call) RT_GPU_CHECK_(cuda_failed, call)
#define CUDNN_CHECK(call) RT_GPU_CHECK_(cudnn_failed, call)
#define CUBLAS_CHECK(call) RT_GPU_CHECK_(cublas_failed, call)
#define NCCL_CHECK(call) RT_GPU_CHECK_(nccl_failed, call)
#define NVJPEG_CHECK(call) RT_GPU_CHECK_(nvjpeg_failed, call)

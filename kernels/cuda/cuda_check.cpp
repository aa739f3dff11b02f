// Owns turning a GPU library's status into ringtrain's library error, with the library's own message.
#include "kernels/cuda/cuda_check.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <nccl.h>
#ifdef RINGTRAIN_HAVE_NVJPEG
#include <nvjpeg.h>
#endif

#include <string>

#include "common/error.h"

namespace ringtrain::kernels::cuda {

static_assert(cudaSuccess == 0 && CUDNN_STATUS_SUCCESS == 0 && CUBLAS_STATUS_SUCCESS == 0 && ncclSuccess == 0,
              "the check macros compare statuses with 0");

const char* cuda_error_name(int status) noexcept { return cudaGetErrorName(static_cast<cudaError_t>(status)); }
const char* cuda_error_text(int status) noexcept { return cudaGetErrorString(static_cast<cudaError_t>(status)); }

void cuda_failed(int status, const char* call, const char* file, int line) {
  // Clears the runtime's record of a non-sticky error so the next check does not report this one again.
  (void)cudaGetLastError();
  throw_library_error("CUDA", call, file, line,
                      std::string(cuda_error_name(status)) + ": " + cuda_error_text(status));
}

void cudnn_failed(int status, const char* call, const char* file, int line) {
  std::string message = cudnnGetErrorString(static_cast<cudnnStatus_t>(status));
  char detail[1024] = {};
  cudnnGetLastErrorString(detail, sizeof detail);  // cuDNN 9: the reason behind the status, when it has one
  if (detail[0]) message += std::string("; ") + detail;
  throw_library_error("cuDNN", call, file, line, message);
}

void cublas_failed(int status, const char* call, const char* file, int line) {
  throw_library_error("cuBLAS", call, file, line, cublasGetStatusString(static_cast<cublasStatus_t>(status)));
}

void nccl_failed(int status, const char* call, const char* file, int line) {
  std::string message = ncclGetErrorString(static_cast<ncclResult_t>(status));
  // The comm argument is unused by NCCL; the last error is process-wide.
  if (const char* last = ncclGetLastError(nullptr); last && last[0]) message += std::string("; ") + last;
  throw_library_error("NCCL", call, file, line, message);
}

#ifdef RINGTRAIN_HAVE_NVJPEG
static_assert(NVJPEG_STATUS_SUCCESS == 0, "NVJPEG_CHECK compares statuses with 0");

std::string nvjpeg_status_text(int status) {
  switch (static_cast<nvjpegStatus_t>(status)) {
    case NVJPEG_STATUS_SUCCESS: return "NVJPEG_STATUS_SUCCESS";
    case NVJPEG_STATUS_NOT_INITIALIZED: return "NVJPEG_STATUS_NOT_INITIALIZED: the handle or state was not created";
    case NVJPEG_STATUS_INVALID_PARAMETER: return "NVJPEG_STATUS_INVALID_PARAMETER: a wrong argument";
    case NVJPEG_STATUS_BAD_JPEG: return "NVJPEG_STATUS_BAD_JPEG: the bitstream is corrupt or not a JPEG";
    case NVJPEG_STATUS_JPEG_NOT_SUPPORTED: return "NVJPEG_STATUS_JPEG_NOT_SUPPORTED: a JPEG nvJPEG does not decode";
    case NVJPEG_STATUS_ALLOCATOR_FAILURE: return "NVJPEG_STATUS_ALLOCATOR_FAILURE: a memory allocation failed";
    case NVJPEG_STATUS_EXECUTION_FAILED: return "NVJPEG_STATUS_EXECUTION_FAILED: the device work failed";
    case NVJPEG_STATUS_ARCH_MISMATCH: return "NVJPEG_STATUS_ARCH_MISMATCH: this GPU cannot run the backend asked for";
    case NVJPEG_STATUS_INTERNAL_ERROR: return "NVJPEG_STATUS_INTERNAL_ERROR: an error inside nvJPEG";
    case NVJPEG_STATUS_IMPLEMENTATION_NOT_SUPPORTED:
      return "NVJPEG_STATUS_IMPLEMENTATION_NOT_SUPPORTED: the backend does not implement this call";
    case NVJPEG_STATUS_INCOMPLETE_BITSTREAM: return "NVJPEG_STATUS_INCOMPLETE_BITSTREAM: the bitstream ends early";
  }
  return "nvJPEG status " + std::to_string(status) + " (not one this build knows)";
}

void nvjpeg_failed(int status, const char* call, const char* file, int line) {
  throw_library_error("nvJPEG", call, file, line, nvjpeg_status_text(status));
}
#endif

}  // namespace ringtrain::kernels::cuda

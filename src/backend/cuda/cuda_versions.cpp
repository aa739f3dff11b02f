// Owns the run-time version queries of the CUDA runtime, driver, cuDNN, cuBLAS, NCCL and nvJPEG, and the device probe.
#include "backend/cuda/cuda_versions.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <fmt/format.h>
#include <library_types.h>
#include <nccl.h>

#include "backend/cuda/conv_graphs.h"
#ifdef RINGTRAIN_HAVE_NVJPEG
#include "kernels/cuda/jpeg_batch_decoder.h"
#endif

namespace ringtrain::backend {
namespace {

// CUDA encodes 1000 * major + 10 * minor.
std::string cuda_number(int v) { return fmt::format("{}.{}", v / 1000, (v % 1000) / 10); }

}  // namespace

std::vector<std::pair<std::string, std::string>> cuda_versions() {
  std::vector<std::pair<std::string, std::string>> v;

  int runtime = 0;
  v.emplace_back("CUDA runtime", cudaRuntimeGetVersion(&runtime) == cudaSuccess ? cuda_number(runtime) : "unknown");

  // The driver query succeeds with 0 when no driver is installed.
  int driver = 0;
  const bool have_driver = cudaDriverGetVersion(&driver) == cudaSuccess && driver > 0;
  v.emplace_back("CUDA driver", have_driver ? cuda_number(driver) : std::string("no driver"));

  // cuDNN 9 encodes major * 10000 + minor * 100 + patch.
  const size_t cudnn = cudnnGetVersion();
  v.emplace_back("cuDNN", fmt::format("{}.{}.{}", cudnn / 10000, (cudnn % 10000) / 100, cudnn % 100));
  v.emplace_back("cudnn-frontend", ConvGraphs::frontend_version());  // compiled in (header-only)

  int major = 0, minor = 0, patch = 0;
  if (cublasGetProperty(MAJOR_VERSION, &major) == CUBLAS_STATUS_SUCCESS &&
      cublasGetProperty(MINOR_VERSION, &minor) == CUBLAS_STATUS_SUCCESS &&
      cublasGetProperty(PATCH_LEVEL, &patch) == CUBLAS_STATUS_SUCCESS)
    v.emplace_back("cuBLAS", fmt::format("{}.{}.{}", major, minor, patch));
  else
    v.emplace_back("cuBLAS", "unknown");

  // NCCL >= 2.9 encodes major * 10000 + minor * 100 + patch.
  int nccl = 0;
  if (ncclGetVersion(&nccl) == ncclSuccess)
    v.emplace_back("NCCL", fmt::format("{}.{}.{}", nccl / 10000, (nccl % 10000) / 100, nccl % 100));
  else
    v.emplace_back("NCCL", "unknown");

#ifdef RINGTRAIN_HAVE_NVJPEG
  v.emplace_back("nvJPEG", kernels::cuda::nvjpeg_version());  // the GPU JPEG decoder's
#else
  v.emplace_back("nvJPEG", "not built (RINGTRAIN_NVJPEG=OFF or nvjpeg.h not found)");
#endif

  int count = 0;
  const cudaError_t counted = cudaGetDeviceCount(&count);
  if (counted != cudaSuccess || count == 0) {
    (void)cudaGetLastError();
    v.emplace_back("GPUs", counted == cudaSuccess ? std::string("none visible")
                                                  : fmt::format("none visible ({})", cudaGetErrorString(counted)));
  } else {
    // Properties are a query, not a context: no device is made current here.
    cudaDeviceProp p{};
    const bool named = cudaGetDeviceProperties(&p, 0) == cudaSuccess;
    v.emplace_back("GPUs", fmt::format("{} visible{}{}", count, named ? ", first: " : "", named ? p.name : ""));
  }
  return v;
}

bool cuda_device_visible() noexcept {
  int count = 0;
  const cudaError_t rc = cudaGetDeviceCount(&count);
  if (rc != cudaSuccess) (void)cudaGetLastError();
  return rc == cudaSuccess && count > 0;
}

}  // namespace ringtrain::backend

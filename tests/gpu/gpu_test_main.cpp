// Owns main() for the GPU tests: GoogleTest, then MPI_Finalize if an NCCL test started MPI (they start it on
// first use, so runs without a GPU never touch MPI).
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <mpi.h>

#include <string>

#include "gpu_test_support.h"
#include "kernels/cuda/cuda_check.h"

namespace ringtrain::gpu_test {

std::string why_no_device() {
  int count = 0;
  const cudaError_t rc = cudaGetDeviceCount(&count);
  if (rc != cudaSuccess) {
    (void)cudaGetLastError();
    return std::string(kernels::cuda::cuda_error_name(rc)) + ": " + kernels::cuda::cuda_error_text(rc);
  }
  return count == 0 ? "cudaGetDeviceCount found 0 devices" : "a device is visible";
}

bool driver_too_old() {
  int count = 0, driver = 0, runtime = 0;
  const cudaError_t rc = cudaGetDeviceCount(&count);
  (void)cudaGetLastError();
  return rc == cudaErrorInsufficientDriver && cudaDriverGetVersion(&driver) == cudaSuccess && driver > 0 &&
         cudaRuntimeGetVersion(&runtime) == cudaSuccess && driver < runtime;
}

void ensure_mpi() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) return;
  int provided = 0;
  MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
}

}  // namespace ringtrain::gpu_test

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  const int result = RUN_ALL_TESTS();
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Finalize();
  return result;
}

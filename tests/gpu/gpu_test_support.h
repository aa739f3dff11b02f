// Owns what the GPU tests share: the skip when no device is visible, one CUDA and one CPU backend per suite,
// moving vectors to and from the device, random data, and an element-wise closeness check that reports the
// worst element.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_versions.h"

namespace ringtrain::gpu_test {

// Why no device is visible, in the runtime's words ("cudaErrorNoDevice: no CUDA-capable device is detected").
std::string why_no_device();
// A driver is installed but older than this build's CUDA runtime: a broken GPU machine, not a CPU-only one, so
// the GPU tests fail there instead of skipping.
bool driver_too_old();

// MPI for the NCCL tests, initialised on first use only (so a machine without a GPU never starts MPI) and
// finalised by the test main.
void ensure_mpi();

// One backend of each kind for a whole suite: creating cuDNN and cuBLAS handles per test would dominate the run.
class GpuSuite : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!backend::cuda_device_visible()) return;
    cuda_ = std::make_unique<backend::CudaBackend>(0, 1, "test-host");
    cpu_ = std::make_unique<backend::CpuBackend>(1);
  }
  static void TearDownTestSuite() {
    cuda_.reset();
    cpu_.reset();
  }
  void SetUp() override {
    if (cuda_) return;
    if (driver_too_old()) FAIL() << "a CUDA driver is installed but cannot run this build: " << why_no_device();
    GTEST_SKIP() << "no CUDA device visible: " << why_no_device();
  }
  static backend::CudaBackend& cuda() { return *cuda_; }
  static backend::CpuBackend& cpu() { return *cpu_; }

  // Device copy of `host` (its own buffer, freed with the returned object), in the stream order of `on` (the
  // suite's backend by default): a buffer is used on the stream it was uploaded with.
  static model::DeviceBuffer upload(const std::vector<float>& host, backend::CudaBackend* on = nullptr) {
    backend::CudaBackend& b = on ? *on : *cuda_;
    model::DeviceBuffer buffer = b.allocate(host.size() * sizeof(float));
    b.to_device(buffer.as<void>(), host.data(), host.size() * sizeof(float));
    return buffer;
  }
  static std::vector<float> download(const float* device, int64_t n, backend::CudaBackend* on = nullptr) {
    std::vector<float> host(static_cast<size_t>(n));
    (on ? *on : *cuda_).to_host(host.data(), device, host.size() * sizeof(float));
    return host;
  }

 private:
  static inline std::unique_ptr<backend::CudaBackend> cuda_;
  static inline std::unique_ptr<backend::CpuBackend> cpu_;
};

inline std::vector<float> random_vector(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(gen);
  return v;
}

// Every element within atol + rtol * |want|, where atol = atol_scale * max |want| (so the bound follows the
// data's magnitude). Reports the count of failures and the worst element.
inline ::testing::AssertionResult all_close(const std::vector<float>& got, const std::vector<float>& want, double rtol,
                                            double atol_scale) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << "sizes differ: " << got.size() << " vs " << want.size();
  double peak = 0;
  for (float w : want) peak = std::max(peak, std::abs(static_cast<double>(w)));
  const double atol = atol_scale * std::max(peak, 1e-30);
  size_t bad = 0, worst = 0;
  double worst_excess = -1;
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = got[i], w = want[i];
    const double err = std::abs(g - w), bound = atol + rtol * std::abs(w);
    if (!(err <= bound)) {  // NaN fails too
      ++bad;
      const double excess = std::isnan(err) ? 1e300 : err / bound;
      if (excess > worst_excess) worst_excess = excess, worst = i;
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << bad << " of " << got.size() << " elements differ beyond rtol " << rtol
                                       << " + atol " << atol << "; worst at [" << worst << "]: got " << got[worst]
                                       << ", want " << want[worst];
}

}  // namespace ringtrain::gpu_test

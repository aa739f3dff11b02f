// Owns the CPU backend's memory and element-wise work; layers live in cpu_layers.cpp.
#include "backend/cpu/cpu_backend.h"

#include <fmt/format.h>

#include <cstdlib>
#include <cstring>
#include <new>

#include "backend/cpu/cpu_layers.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/sgd.h"
#include "kernels/cpu/softmax_cross_entropy.h"

namespace ringtrain::backend {

namespace kc = kernels::cpu;

CpuBackend::CpuBackend(int threads) : threads_(threads) { kc::set_compute_threads(threads); }

std::string CpuBackend::description() const {
  return fmt::format("cpu, {} compute thread{}, {}", threads_, threads_ == 1 ? "" : "s", kc::blas_description());
}

model::DeviceBuffer CpuBackend::allocate(std::size_t bytes) {
  // 64-byte alignment: whole cache lines and AVX-512-safe loads for the BLAS and the vectorised loops.
  const std::size_t rounded = (std::max<std::size_t>(bytes, 1) + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, rounded);
  if (!p) throw std::bad_alloc();
  std::memset(p, 0, rounded);
  allocated_ += rounded;
  return model::DeviceBuffer(p, bytes, [](void* q) { std::free(q); });
}

void CpuBackend::to_device(void* device_dst, const void* host_src, std::size_t bytes) {
  if (bytes) std::memcpy(device_dst, host_src, bytes);
}

void CpuBackend::to_host(void* host_dst, const void* device_src, std::size_t bytes) {
  if (bytes) std::memcpy(host_dst, device_src, bytes);
}

std::unique_ptr<model::Layer> CpuBackend::make_leaf(const config::LayerSpec& spec) { return make_cpu_layer(spec, *this); }

void CpuBackend::add(int64_t n, const float* a, const float* b, float* y) { kc::add(n, a, b, y); }
void CpuBackend::accumulate(int64_t n, const float* x, float* y) { kc::accumulate(n, x, y); }
void CpuBackend::relu_forward(int64_t n, const float* x, float* y) { kc::relu_forward(n, x, y); }
void CpuBackend::relu_backward(int64_t n, const float* y, const float* dy, float* dx) { kc::relu_backward(n, y, dy, dx); }
void CpuBackend::fill(int64_t n, float value, float* y) { kc::fill(n, value, y); }

model::LossSums CpuBackend::softmax_cross_entropy(int batch, int classes, const float* logits, const int32_t* labels,
                                                  float grad_scale, float* dlogits) {
  const auto r = kc::softmax_cross_entropy(batch, classes, logits, labels, grad_scale, dlogits);
  return {r.loss_sum, r.correct};
}

void CpuBackend::sgd_update(int64_t n, float lr, float momentum, float weight_decay, const float* grad,
                            float* velocity, float* param) {
  kc::sgd_momentum_update(n, lr, momentum, weight_decay, grad, velocity, param);
}

}  // namespace ringtrain::backend

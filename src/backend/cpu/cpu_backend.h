// Owns the CPU twin of the device backend: host memory, leaf layers over kernels/cpu, loss and optimizer.
#pragma once
#include "model/backend.h"

namespace ringtrain::backend {

class CpuBackend final : public model::Backend {
 public:
  explicit CpuBackend(int threads);
  std::string name() const override { return "cpu"; }
  std::string description() const override;

  model::DeviceBuffer allocate(std::size_t bytes) override;
  std::size_t host_bytes_allocated() const override { return allocated_; }
  bool plans_memory() const override { return true; }
  void to_device(void* device_dst, const void* host_src, std::size_t bytes) override;
  void to_host(void* host_dst, const void* device_src, std::size_t bytes) override;
  void synchronize() override {}

  std::unique_ptr<model::Layer> make_leaf(const config::LayerSpec& spec) override;

  void add(int64_t n, const float* a, const float* b, float* y) override;
  void accumulate(int64_t n, const float* x, float* y) override;
  void relu_forward(int64_t n, const float* x, float* y) override;
  void relu_backward(int64_t n, const float* y, const float* dy, float* dx) override;
  void fill(int64_t n, float value, float* y) override;
  model::LossSums softmax_cross_entropy(int batch, int classes, const float* logits, const int32_t* labels,
                                        float grad_scale, float* dlogits) override;
  void sgd_update(int64_t n, float lr, float momentum, float weight_decay, const float* grad, float* velocity,
                  float* param) override;

 private:
  int threads_;
  std::size_t allocated_ = 0;  // cumulative: buffers are made at setup and live for the run
};

}  // namespace ringtrain::backend

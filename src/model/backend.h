// Owns the Backend contract: what a device must provide for the model, the loss, the optimizer and the
// gradient reduction to run on it. The CPU backend implements it now; the CUDA backend slots in beside it.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "config/layer_spec.h"
#include "model/device_buffer.h"
#include "model/layer.h"

namespace ringtrain::model {

struct LossSums {
  double loss_sum = 0;
  int64_t correct = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;  // "cpu" | "cuda"
  virtual std::string description() const = 0;

  virtual DeviceBuffer allocate(std::size_t bytes) = 0;  // zero-filled
  // Bytes allocate() has handed out so far where it is host memory (the CPU twin), for the memory line of the
  // epoch record; 0 where device memory is not part of the process's resident set.
  virtual std::size_t host_bytes_allocated() const { return 0; }
  // Whether the composites (residual blocks) take part in the memory plan (model/gradient_buffer_plan.h) on
  // this backend; off where the plan has not been run yet (the CUDA backend), so its buffers stay as they were.
  virtual bool plans_memory() const { return false; }
  virtual void to_device(void* device_dst, const void* host_src, std::size_t bytes) = 0;
  virtual void to_host(void* host_dst, const void* device_src, std::size_t bytes) = 0;
  virtual void synchronize() = 0;

  // Leaf layers only (conv2d, batchnorm, relu, pools, flatten, dense, dropout); residual is a composite.
  virtual std::unique_ptr<Layer> make_leaf(const config::LayerSpec& spec) = 0;

  // Element-wise work the composites need.
  virtual void add(int64_t n, const float* a, const float* b, float* y) = 0;
  virtual void accumulate(int64_t n, const float* x, float* y) = 0;  // y += x
  virtual void relu_forward(int64_t n, const float* x, float* y) = 0;
  virtual void relu_backward(int64_t n, const float* y, const float* dy, float* dx) = 0;
  virtual void fill(int64_t n, float value, float* y) = 0;

  // Softmax cross-entropy; dlogits may be null (evaluation). Sums come back to the host.
  virtual LossSums softmax_cross_entropy(int batch, int classes, const float* logits, const int32_t* labels,
                                         float grad_scale, float* dlogits) = 0;
  virtual void sgd_update(int64_t n, float lr, float momentum, float weight_decay, const float* grad,
                          float* velocity, float* param) = 0;
};

}  // namespace ringtrain::model

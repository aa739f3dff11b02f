// Owns the CUDA backend: this rank's GPU, its compute stream, device memory, the cuDNN and cuBLAS front ends,
// and the loss and optimizer kernels. The CPU twin is backend/cpu/cpu_backend.h; the layers are in
// cuda_layers.cpp, the gradient all-reduce in nccl_reducer.h.
//
// Ordering: every piece of work (copies included) goes on one compute stream, so the host never needs to wait
// except where a result must reach it (to_host, the loss sums, synchronize()).
#pragma once
#include <cstddef>
#include <memory>
#include <string>

#include "backend/cuda/dnn.h"
#include "backend/cuda/math_mode.h"
#include "kernels/cuda/stream.h"
#include "model/backend.h"

namespace ringtrain::backend {

class Blas;

// Which visible device a rank uses. `visible` is cudaGetDeviceCount(), which honours CUDA_VISIBLE_DEVICES:
//   visible == 1: device 0 (Slurm's GPU binding shows each task just its own GPU; or a single-GPU node);
//   visible >= local_size: device local_rank (each rank sees every GPU of the node);
//   otherwise: JobFileError naming the host and both counts (two ranks would share a GPU, which NCCL refuses).
// visible == 0 is a JobFileError too. Pure, so it is tested without a GPU.
int choose_device(int visible, int local_rank, int local_size, const std::string& host);

struct CudaOptions {
  std::size_t workspace_limit_bytes = std::size_t{256} << 20;  // per convolution algorithm; one shared workspace
  ConvSearch conv_search = ConvSearch::heuristic;               // see dnn.h
  MathMode math = MathMode::fp32;                               // see math_mode.h
  bool deterministic = true;                                    // see dnn.h
};

class CudaBackend final : public model::Backend {
 public:
  // Picks the GPU with choose_device and makes it current (cudaSetDevice is the first CUDA call after counting
  // devices; no other device is touched), then creates the stream and library handles on it.
  CudaBackend(int local_rank, int local_size, std::string host, CudaOptions options = {});
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  std::string name() const override { return "cuda"; }
  std::string description() const override;

  model::DeviceBuffer allocate(std::size_t bytes) override;  // cudaMalloc, zero-filled (in stream order)
  // Returns as soon as host_src may be reused: the bytes go through a pinned staging buffer, and the copy to
  // the device runs in stream order.
  void to_device(void* device_dst, const void* host_src, std::size_t bytes) override;
  void to_host(void* host_dst, const void* device_src, std::size_t bytes) override;  // waits for the stream
  void synchronize() override;

  std::unique_ptr<model::Layer> make_leaf(const config::LayerSpec& spec) override;

  void add(int64_t n, const float* a, const float* b, float* y) override;
  void accumulate(int64_t n, const float* x, float* y) override;
  void relu_forward(int64_t n, const float* x, float* y) override;
  void relu_backward(int64_t n, const float* y, const float* dy, float* dx) override;
  void fill(int64_t n, float value, float* y) override;
  // Waits for the stream: the sums come back to the host. Throws DataError when a label is out of range.
  model::LossSums softmax_cross_entropy(int batch, int classes, const float* logits, const int32_t* labels,
                                        float grad_scale, float* dlogits) override;
  void sgd_update(int64_t n, float lr, float momentum, float weight_decay, const float* grad, float* velocity,
                  float* param) override;

  // For the CUDA layers and the NCCL reducer.
  kernels::cuda::Stream stream() const;
  int device() const { return device_; }
  int visible_devices() const { return visible_; }
  const std::string& host() const { return host_; }
  std::string pci_bus_id() const;  // "0000:1B:00.0": identifies the physical GPU across processes
  Dnn& dnn();
  Blas& blas();

 private:
  struct State;
  std::string host_;
  int visible_ = 0, device_ = -1;
  std::unique_ptr<State> state_;
};

}  // namespace ringtrain::backend

// Owns the CUDA backend's device choice, stream, memory, copies and the small kernels it forwards to
// kernels/cuda; the layers live in cuda_layers.cpp.
#include "backend/cuda/cuda_backend.h"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <array>
#include <cstring>

#include "backend/cuda/blas.h"
#include "backend/cuda/cuda_handles.h"
#include "backend/cuda/cuda_layers.h"
#include "common/error.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/sgd.h"
#include "kernels/cuda/softmax_cross_entropy.h"

namespace ringtrain::backend {

namespace kc = kernels::cuda;

namespace {

// Uploads larger than this go straight from pageable memory and wait for the stream instead of growing the
// pinned staging buffers further (the initial parameters of a large model; never the per-step batches).
constexpr std::size_t kStagingLimit = std::size_t{512} << 20;

void free_device(void* p) { (void)cudaFree(p); }

}  // namespace

int choose_device(int visible, int local_rank, int local_size, const std::string& host) {
  if (visible <= 0)
    throw JobFileError(fmt::format("no CUDA device is visible on {}; check nvidia-smi, CUDA_VISIBLE_DEVICES and the "
                                   "job's GPU allocation (e.g. srun --gpus-per-task=1), or set run.device = \"cpu\"",
                                   host));
  if (visible == 1) return 0;  // one GPU per task (Slurm binding), or one rank on a single-GPU node
  if (local_rank < 0 || local_rank >= local_size)
    throw Error(ExitCode::internal, fmt::format("local rank {} outside the {} ranks on {}", local_rank, local_size, host));
  if (local_size > visible)
    throw JobFileError(fmt::format("{} ranks run on {} but only {} GPUs are visible there; NCCL needs one GPU per rank: "
                                   "start at most {} ranks per node (e.g. mpirun --map-by ppr:{}:node, or srun "
                                   "--ntasks-per-node={}), or set run.device = \"cpu\"",
                                   local_size, host, visible, visible, visible, visible));
  return local_rank;
}

struct CudaBackend::State {
  CudaOptions options;
  cudaDeviceProp properties{};
  CudaStream stream;  // declared before the handles that use it, so it is destroyed after them
  std::unique_ptr<Dnn> dnn;
  std::unique_ptr<Blas> blas;

  // Two staging buffers used in turn: filling one never waits for the copy out of the other.
  struct Staging {
    PinnedMemory memory;
    CudaEvent copied;
    bool in_use = false;
  };
  std::array<Staging, 2> staging;
  int next_staging = 0;

  DeviceMemory loss_workspace, loss_totals;
  PinnedMemory loss_totals_host;
};

CudaBackend::CudaBackend(int local_rank, int local_size, std::string host, CudaOptions options)
    : host_(std::move(host)) {
  const cudaError_t counted = cudaGetDeviceCount(&visible_);
  if (counted != cudaSuccess) {
    (void)cudaGetLastError();
    int driver = 0, runtime = 0;
    (void)cudaDriverGetVersion(&driver);
    (void)cudaRuntimeGetVersion(&runtime);
    const std::string versions =
        driver > 0 ? fmt::format("driver supports CUDA {}.{}, this build needs {}.{}", driver / 1000, driver % 1000 / 10,
                                 runtime / 1000, runtime % 1000 / 10)
                   : std::string("no CUDA driver is installed");
    throw JobFileError(fmt::format("no usable CUDA device on {}: cudaGetDeviceCount says {} ({}; {}); check nvidia-smi, "
                                   "CUDA_VISIBLE_DEVICES and the job's GPU allocation, or set run.device = \"cpu\"",
                                   host_, kc::cuda_error_name(counted), kc::cuda_error_text(counted), versions));
  }
  device_ = choose_device(visible_, local_rank, local_size, host_);
  // The first call that touches a device: everything after this (context, stream, handles, memory) lives on it.
  CUDA_CHECK(cudaSetDevice(device_));

  state_ = std::make_unique<State>();
  state_->options = options;
  CUDA_CHECK(cudaGetDeviceProperties(&state_->properties, device_));
  state_->stream = make_stream();
  state_->dnn = std::make_unique<Dnn>(state_->stream.get(), options.workspace_limit_bytes, options.conv_search,
                                      options.math, options.deterministic);
  state_->blas = std::make_unique<Blas>(state_->stream.get(), options.math);
  for (auto& s : state_->staging) s.copied = make_event(false);
  state_->loss_totals.ensure(sizeof(kc::LossTotals), state_->stream);
  state_->loss_totals_host.ensure(sizeof(kc::LossTotals));
}

CudaBackend::~CudaBackend() {
  // Let queued copies out of the pinned buffers finish before those buffers are freed; errors are moot here.
  if (state_ && state_->stream) (void)cudaStreamSynchronize(state_->stream);
}

std::string CudaBackend::description() const {
  const auto& p = state_->properties;
  return fmt::format("cuda, {} (GPU {} of {} visible on {}, PCI {}, compute {}.{}, {:.1f} GiB), {}, convolution "
                     "algorithms by {}{}",
                     p.name, device_, visible_, host_, pci_bus_id(), p.major, p.minor,
                     static_cast<double>(p.totalGlobalMem) / (1 << 30), math_mode_name(state_->options.math),
                     state_->options.conv_search == ConvSearch::measure ? "measurement" : "cuDNN heuristics",
                     state_->options.deterministic ? ", deterministic only" : "");
}

kc::Stream CudaBackend::stream() const { return state_->stream.get(); }
Dnn& CudaBackend::dnn() { return *state_->dnn; }
Blas& CudaBackend::blas() { return *state_->blas; }

std::string CudaBackend::pci_bus_id() const {
  char id[32] = {};
  CUDA_CHECK(cudaDeviceGetPCIBusId(id, sizeof id, device_));
  return id;
}

model::DeviceBuffer CudaBackend::allocate(std::size_t bytes) {
  model::DeviceBuffer buffer(device_malloc(bytes, "a model buffer"), bytes, free_device);
  // In stream order, like every later use of the buffer, so no host wait is needed.
  CUDA_CHECK(cudaMemsetAsync(buffer.as<void>(), 0, bytes, stream()));
  return buffer;
}

void CudaBackend::to_device(void* device_dst, const void* host_src, std::size_t bytes) {
  if (bytes == 0) return;
  if (bytes > kStagingLimit) {
    CUDA_CHECK(cudaMemcpyAsync(device_dst, host_src, bytes, cudaMemcpyHostToDevice, stream()));
    CUDA_CHECK(cudaStreamSynchronize(stream()));
    return;
  }
  auto& s = state_->staging[static_cast<std::size_t>(state_->next_staging)];
  state_->next_staging ^= 1;
  // Normally long finished: it is the copy before the previous one.
  if (s.in_use) CUDA_CHECK(cudaEventSynchronize(s.copied));
  s.memory.ensure(bytes);
  std::memcpy(s.memory.get(), host_src, bytes);
  CUDA_CHECK(cudaMemcpyAsync(device_dst, s.memory.get(), bytes, cudaMemcpyHostToDevice, stream()));
  CUDA_CHECK(cudaEventRecord(s.copied, stream()));
  s.in_use = true;
}

void CudaBackend::to_host(void* host_dst, const void* device_src, std::size_t bytes) {
  if (bytes == 0) return;
  CUDA_CHECK(cudaMemcpyAsync(host_dst, device_src, bytes, cudaMemcpyDeviceToHost, stream()));
  CUDA_CHECK(cudaStreamSynchronize(stream()));
}

void CudaBackend::synchronize() { CUDA_CHECK(cudaStreamSynchronize(stream())); }

std::unique_ptr<model::Layer> CudaBackend::make_leaf(const config::LayerSpec& spec) {
  return make_cuda_layer(spec, *this);
}

void CudaBackend::add(int64_t n, const float* a, const float* b, float* y) { kc::add(n, a, b, y, stream()); }
void CudaBackend::accumulate(int64_t n, const float* x, float* y) { kc::accumulate(n, x, y, stream()); }
void CudaBackend::relu_forward(int64_t n, const float* x, float* y) { kc::relu_forward(n, x, y, stream()); }
void CudaBackend::relu_backward(int64_t n, const float* y, const float* dy, float* dx) {
  kc::relu_backward(n, y, dy, dx, stream());
}
void CudaBackend::fill(int64_t n, float value, float* y) { kc::fill(n, value, y, stream()); }

model::LossSums CudaBackend::softmax_cross_entropy(int batch, int classes, const float* logits, const int32_t* labels,
                                                   float grad_scale, float* dlogits) {
  State& s = *state_;
  s.loss_workspace.ensure(kc::softmax_cross_entropy_workspace_bytes(batch), s.stream);
  auto* totals = static_cast<kc::LossTotals*>(s.loss_totals.get());
  kc::softmax_cross_entropy(batch, classes, logits, labels, grad_scale, dlogits, s.loss_workspace.get(), totals,
                            s.stream);
  CUDA_CHECK(cudaMemcpyAsync(s.loss_totals_host.get(), totals, sizeof(kc::LossTotals), cudaMemcpyDeviceToHost,
                             s.stream));
  CUDA_CHECK(cudaStreamSynchronize(s.stream));
  kc::LossTotals host;
  std::memcpy(&host, s.loss_totals_host.get(), sizeof host);
  if (host.bad_labels > 0)
    throw DataError(fmt::format("{} of {} labels in a batch lie outside [0, {}) on {}; the dataset's labels do not "
                                "match its class count (re-run `ringtrain prepare`)",
                                host.bad_labels, batch, classes, host_));
  return {host.loss_sum, host.correct};
}

void CudaBackend::sgd_update(int64_t n, float lr, float momentum, float weight_decay, const float* grad,
                             float* velocity, float* param) {
  kc::sgd_momentum_update(n, lr, momentum, weight_decay, grad, velocity, param, stream());
}

}  // namespace ringtrain::backend

// Owns the CUDA backend's device choice, stream, memory and copies; the operations are in cuda_ops.cpp.
#include "backend/cuda/cuda_backend.h"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <array>
#include <cstring>

#include "backend/cuda/cuda_backend_state.h"
#include "common/error.h"
#include "kernels/cuda/cuda_check.h"

namespace ringtrain::backend {

namespace kc = kernels::cuda;

namespace {

// Uploads larger than this go straight from pageable memory and wait for the stream instead of growing the
// pinned staging buffers further (the initial parameters of a large model; never the per-step batches).
constexpr std::size_t kStagingLimit = std::size_t{512} << 20;
// cuBLAS's scratch, given explicitly (a graph capture cannot let cuBLAS allocate its own) and alike with and without
// gpu.cuda_graphs, since cuBLAS may choose another algorithm for another workspace, and a graphed run must end on
// the eager run's bits: what NVIDIA's cuBLAS guide recommends for Hopper GPUs (32 MiB).
constexpr std::size_t kBlasWorkspaceBytes = std::size_t{32} << 20;
// Update calls a graphed step may make (one per rate-group piece of the slice): a job has a few.
constexpr int kStepScalarsCapacity = 64;

void free_device(void* p, std::size_t bytes) { (void)device_free(p, bytes); }

}  // namespace

int choose_device(int visible, int local_rank, int local_size, const std::string& host, bool share) {
  if (visible <= 0)
    throw JobFileError(fmt::format("no CUDA device is visible on {}; check nvidia-smi, CUDA_VISIBLE_DEVICES and the "
                                   "job's GPU allocation (e.g. srun --gpus-per-task=1), or set run.device = \"cpu\"",
                                   host));
  if (visible == 1) return 0;  // one GPU per task (Slurm binding), or one rank on a single-GPU node
  if (local_rank < 0 || local_rank >= local_size)
    throw Error(ExitCode::internal, fmt::format("local rank {} outside the {} ranks on {}", local_rank, local_size, host));
  if (local_size > visible && share) return local_rank % visible;
  if (local_size > visible)
    throw JobFileError(fmt::format("{} ranks run on {} but only {} GPUs are visible to each there; NCCL needs one GPU "
                                   "per rank: start at most {} ranks per node (e.g. mpirun --map-by ppr:{}:node, or srun "
                                   "--ntasks-per-node={}), or, where Slurm shows each task {} GPUs (--gpus-per-task={}), "
                                   "give each task one (--gpus-per-task=1) or none bound (--gpus-per-node); or set "
                                   "run.device = \"cpu\"",
                                   local_size, host, visible, visible, visible, visible, visible, visible));
  return local_rank;
}

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
  device_ = choose_device(visible_, local_rank, local_size, host_, options.share_device);
  local_size_ = local_size;
  // The first call that touches a device: everything after this (context, stream, handles, memory) lives on it.
  CUDA_CHECK(cudaSetDevice(device_));

  state_ = std::make_unique<State>();
  state_->options = options;
  CUDA_CHECK(cudaGetDeviceProperties(&state_->properties, device_));
  state_->stream = make_stream();
  state_->dnn = std::make_unique<Dnn>(state_->stream.get(), options.workspace_limit_bytes, options.conv_search,
                                      options.math, options.deterministic, options.nhwc, options.conv_graphs);
  state_->blas = std::make_unique<Blas>(state_->stream.get(), options.math);
  state_->blas_workspace.ensure(kBlasWorkspaceBytes, state_->stream);
  state_->blas->use_workspace(state_->blas_workspace.get(), state_->blas_workspace.bytes());
  if (options.cuda_graphs) {
    state_->step_graphs =
        std::make_unique<CudaStepGraphs>(state_->stream.get(), model::kStepCaptureSlots, kStepScalarsCapacity);
  }
  for (auto& s : state_->staging) s.copied = make_event(false);
}

CudaBackend::~CudaBackend() {
  if (state_) state_->batchnorm_nccl.reset();
  // Let queued copies out of the pinned buffers finish before those buffers are freed; errors are moot here.
  if (state_ && state_->stream) (void)cudaStreamSynchronize(state_->stream);
}

std::string CudaBackend::description() const {
  const auto& p = state_->properties;
  const kernels::ElementType activations = state_->options.activations;
  return fmt::format("cuda, {} (GPU {} of {} visible on {}, PCI {}, compute {}.{}, {:.1f} GiB), {}{}, convolution "
                     "algorithms by {}{}{}",
                     p.name, device_, visible_, host_, pci_bus_id(), p.major, p.minor,
                     static_cast<double>(p.totalGlobalMem) / (1 << 30),
                     activations == kernels::ElementType::f32 ? math_mode_name(state_->options.math) : "mixed precision",
                     activations == kernels::ElementType::f32
                         ? std::string()
                         : fmt::format(": {} activations ({}) on tensor cores, fp32 accumulation and weights",
                                       kernels::element_type_name(activations),
                                       state_->options.nhwc ? "NHWC, gpu.nhwc" : "NCHW"),
                     state_->options.conv_search == ConvSearch::measure ? "measurement" : "cuDNN heuristics",
                     state_->options.deterministic ? ", deterministic only" : "",
                     shares_device() ? fmt::format(", shared by the node's {} ranks as emulated hosts (gpu.share_device, "
                                                   "NCCL_HOSTID per rank): a test set-up, not faster",
                                                   local_size_)
                                     : std::string());
}

kc::Stream CudaBackend::stream() const { return state_->stream.get(); }
bool CudaBackend::shares_device() const { return state_->options.share_device && local_size_ > visible_; }
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
  state_->allocated += bytes;
  return buffer;
}

std::size_t CudaBackend::bytes_allocated() const { return state_->allocated; }

std::size_t CudaBackend::memory_available() const {
  std::size_t free = 0, total = 0;
  CUDA_CHECK(cudaMemGetInfo(&free, &total));
  return free;
}

std::size_t CudaBackend::device_bytes_allocated_peak() const { return device_allocated_peak_bytes(); }

std::size_t CudaBackend::device_bytes_in_use() const {
  std::size_t free = 0, total = 0;
  CUDA_CHECK(cudaMemGetInfo(&free, &total));
  return total - free;
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

std::unique_ptr<model::Readback> CudaBackend::make_readback(std::size_t bytes) {
  return make_cuda_readback(stream(), bytes, state_->options.cuda_graphs);
}

std::unique_ptr<model::DeviceClock> CudaBackend::make_clock(int capacity) {
  return make_cuda_clock(stream(), capacity, state_->options.cuda_graphs);
}

model::StepCapturer* CudaBackend::step_capturer() { return state_->step_graphs.get(); }
void CudaBackend::drop_step_graphs() noexcept {
  if (state_->step_graphs) state_->step_graphs->drop_all();
}

}  // namespace ringtrain::backend

// Owns the GPU seam (backend/gpu_device.h) of a CUDA build: the CUDA backend configured from the job, and NCCL
// for the gradient all-reduce.
#include "backend/gpu_device.h"

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_versions.h"
#include "backend/cuda/nccl_reducer.h"
#include "common/error.h"

namespace ringtrain::backend::gpu {

bool built() { return true; }
bool device_visible() noexcept { return cuda_device_visible(); }
std::vector<std::pair<std::string, std::string>> library_versions() { return cuda_versions(); }

std::unique_ptr<model::Backend> open_backend(const config::JobConfig& job, int local_rank, int local_size,
                                             const std::string& host) {
  CudaOptions options;
  options.conv_search = job.gpu.measure_algorithms ? ConvSearch::measure : ConvSearch::heuristic;
  options.deterministic = job.gpu.deterministic;
  options.workspace_limit_bytes = static_cast<std::size_t>(job.gpu.workspace_mb * (1 << 20));
  options.math = job.train.precision == config::Precision::tf32 ? MathMode::tf32 : MathMode::fp32;
  options.share_device = job.gpu.share_device;
  options.nhwc = job.gpu.nhwc;
  options.conv_graphs = job.gpu.cudnn_graphs;
  options.few_channel_gemm = job.gpu.few_channel_gemm;
  options.candidate_kernels = job.gpu.candidate_kernels;
  options.cuda_graphs = job.gpu.cuda_graphs;
  options.collective_timeout_s = job.run.collective_timeout_s;
  if (job.train.precision == config::Precision::bf16) options.activations = kernels::ElementType::bf16;
  if (job.train.precision == config::Precision::fp16) options.activations = kernels::ElementType::f16;
  return std::make_unique<CudaBackend>(local_rank, local_size, host, options);
}

std::unique_ptr<dist::GradientReducer> open_reducer(model::Backend& backend, MPI_Comm comm, double timeout_s,
                                                   config::WireFormat wire) {
  return std::make_unique<NcclGradientReducer>(comm, dynamic_cast<CudaBackend&>(backend), timeout_s, wire);
}

}  // namespace ringtrain::backend::gpu

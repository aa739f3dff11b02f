// Owns the CUDA backend's private state, shared by its two source files (cuda_backend.cpp: device, memory and
// copies; cuda_ops.cpp: the operations). Not for use outside the backend.
#pragma once
#include <cuda_runtime_api.h>

#include <array>
#include <cstddef>
#include <map>
#include <memory>

#include "backend/cuda/blas.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_handles.h"
#include "backend/cuda/dnn.h"
#include "backend/cuda/nccl_batchnorm_sums.h"
#include "backend/cuda/step_graphs.h"
#include "kernels/cuda/batchnorm.h"

namespace ringtrain::backend {

// decode_jpegs' decoder, streams and slots (jpeg_decode.cpp), made at the first JPEG batch.
struct CudaJpegDecode;
struct JpegDecodeDeleter {
  void operator()(CudaJpegDecode* decode) const;
};

// The scratch the memory plan gave where it holds `bytes`, else `own` grown to them: tests and benchmarks call the
// operations with no plan, and a plan made before a shape's scratch was known gives less.
inline std::byte* planned_or_own(model::Scratch scratch, std::size_t bytes, DeviceMemory& own, cudaStream_t stream) {
  if (scratch.data && scratch.bytes >= bytes) return static_cast<std::byte*>(scratch.data);
  own.ensure(bytes, stream);
  return static_cast<std::byte*>(own.get());
}

struct CudaBackend::State {
  CudaOptions options;
  cudaDeviceProp properties{};
  CudaStream stream;  // declared before the handles that use it, so it is destroyed after them
  std::unique_ptr<Dnn> dnn;
  std::unique_ptr<Blas> blas;
  DeviceMemory blas_workspace;  // cuBLAS's scratch, set once before any work (and any capture)
  std::unique_ptr<CudaStepGraphs> step_graphs;  // gpu.cuda_graphs: the step's graphs and scalar tables
  std::size_t allocated = 0;  // bytes allocate() has handed out

  // Two staging buffers used in turn: filling one never waits for the copy out of the other.
  struct Staging {
    PinnedMemory memory;
    CudaEvent copied;
    bool in_use = false;
  };
  std::array<Staging, 2> staging;
  int next_staging = 0;

  DeviceMemory loss_workspace;  // the loss kernel's per-sample results
  DeviceMemory norm_scratch;    // LARS and LAMB: per-tensor partial norms; gradient clipping's partial sums
  DeviceMemory batchnorm_scratch;  // 16-bit batch norm: per-channel partial sums and coefficients
  DeviceMemory channel_sums_scratch;  // candidate kernels: per-chunk, per-channel partial sums of a parameter gradient
  // Synchronised batch norm (empty function: off), and the host copy its sums pass through to the group; or, under
  // gpu.candidate_kernels, the group's NCCL communicator that adds them on the device instead (ended first of all,
  // by ~CudaBackend, so that no all-reduce of a stalled peer still holds the stream when the backend waits for it).
  kernels::cuda::BatchNormGroup batchnorm_group;
  std::vector<double> batchnorm_group_sums;
  std::unique_ptr<NcclBatchNormSums> batchnorm_nccl;
  DeviceMemory filter_staging;     // NHWC: a convolution's 16-bit filters before their reorder to KRSC
  DeviceMemory filter_padding;     // NHWC: KRSC filters before their channels are padded (kernels/resized_rows.h)
  DeviceMemory channel_padding;    // NHWC: a convolution's input, or its data gradient, with padded channels
  DeviceMemory gemm_conv_scratch;  // an im2col + GEMM convolution's scratch where the memory plan gave none
  DeviceMemory depthwise_scratch;  // a depthwise filter gradient's partial sums where the memory plan gave none
  DeviceMemory attention_scratch;  // attention's scores where the memory plan gave no scratch
  // Mixed precision: each layer's 16-bit copy of its fp32 weights, by the weights' address, made by its forward and
  // read by its backward (the weights do not change in between).
  std::map<const float*, DeviceMemory> weight_copies;
  std::unique_ptr<CudaJpegDecode, JpegDecodeDeleter> jpeg;  // last: its stream goes before the compute stream
};

// Readbacks and clocks over events on `stream` (cuda_async.cpp); `graphed` (gpu.cuda_graphs): their events are
// recorded as external ones, which a stream capture keeps as nodes that every replay records.
std::unique_ptr<model::Readback> make_cuda_readback(cudaStream_t stream, std::size_t bytes, bool graphed);
std::unique_ptr<model::DeviceClock> make_cuda_clock(cudaStream_t stream, int capacity, bool graphed);

}  // namespace ringtrain::backend

// Owns the GPU path's gradient reduction: one in-place ncclAllReduce (sum) per bucket on a communication stream
// of its own, ordered after the compute stream by events, and a host wait that can never hang: it polls the
// work and NCCL's error state against a deadline and aborts the communicator on error or timeout.
//
// Gradients are pre-scaled by 1/global batch in the loss, so the sum is the average (dist/gradient_reducer.h).
#pragma once
#include <mpi.h>

#include <cstdint>
#include <memory>
#include <string>

#include "config/job_config.h"
#include "dist/gradient_reducer.h"
#include "kernels/cuda/stream.h"

namespace ringtrain::backend {

class CudaBackend;

// "n1/rank3": the NCCL_HOSTID of a rank that shares its GPU, distinct per rank and readable in NCCL's logs.
std::string emulated_host_id(const std::string& host, int rank);

class NcclGradientReducer final : public dist::GradientReducer {
 public:
  // Collective over `comm` (every rank of it must construct one): checks that no two ranks share a GPU, then
  // rank 0's ncclGetUniqueId -> MPI_Bcast -> ncclCommInitRank on the backend's current device. Every call is
  // checked; the communicator is non-blocking so initialisation, too, is bounded by the timeout.
  // collective_timeout_s bounds every later wait on NCCL work (a dead or stalled peer ends in FaultError);
  // initialisation is bounded by the larger of it and 120 s.
  // With backend.shares_device() (gpu.share_device, tests only), ranks on one GPU are allowed: each sets
  // NCCL_HOSTID to emulated_host_id() before NCCL starts (unless the user set one), so NCCL treats it as a host of
  // its own and connects the ranks through its network transport.
  // `wire`: bf16 sends each bucket as its bf16 copy (cast on the communication stream) and sums in bf16.
  NcclGradientReducer(MPI_Comm comm, CudaBackend& backend, double collective_timeout_s = 300,
                      config::WireFormat wire = config::WireFormat::fp32);
  ~NcclGradientReducer() override;
  NcclGradientReducer(const NcclGradientReducer&) = delete;
  NcclGradientReducer& operator=(const NcclGradientReducer&) = delete;

  // Records an event on the compute stream, makes the communication stream wait for it, and queues the
  // all-reduce there; returns at once.
  void launch(float* grads, const dist::Bucket& bucket) override;
  // Surfaces an asynchronous NCCL error early (throws FaultError after aborting); never waits.
  void progress() override;
  // The compute stream waits (on the device) for every reduction launched this step; the host does not.
  void wait_all() override;
  // The host waits for the steps older than the newest `steps_in_flight`, polling against the deadline: on an
  // NCCL error or timeout the communicator is aborted and FaultError names the first unfinished bucket, its size
  // and the timeout. Returns each settled bucket from the moment its gradients were final on the compute stream
  // until its all-reduce ended on the communication stream, measured by device events, on the host clock.
  std::vector<dist::StepSpans> settle(int steps_in_flight) override;
  const char* name() const override { return "ncclAllReduce"; }
  std::vector<dist::BucketSpan> last_spans() const override;  // the last settled step's
  // gpu.cuda_graphs: each StepRunner slot's step keeps a round of its own, its events recorded into the slot's
  // graph. The fork and join events stay edges inside the graph (the streams' order); beside them, external
  // timing events that every replay records time each bucket's span as in an eager step, and settle() waits on them.
  void capture_step(int slot) override;
  void replayed_step(int slot) override;

  // In place from rank 0 to every rank, ordered after the compute stream; waits like wait_all().
  void broadcast_params(float* params, int64_t count);

  // Device time by which the last settled step's reductions outlasted the compute work queued before its
  // wait_all: the communication backward did not hide. 0 when fully overlapped or before the first settle.
  double last_exposed_s() const;
  kernels::cuda::Stream comm_stream() const;
  int ranks() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ringtrain::backend

// Owns synchronised batch norm's sums on NCCL (dist.sync_batchnorm_group under gpu.candidate_kernels): a communicator
// over the group's ranks, made from the group's MPI communicator, and the in-place sum of each batch norm's doubles
// on the compute stream, so the sums never leave the device and the host never waits for them.
//
// Its own communicator, not one split from the gradient reducer's: the reducer is made after the backend, from it,
// and keeps its communicator on its own stream; this one's calls are queued on the compute stream, in the order the
// layers run, the same on every rank of the group.
#pragma once
#include <mpi.h>

#include <cstddef>
#include <memory>

#include "kernels/cuda/stream.h"

struct ncclComm;  // nccl.h's ncclComm_t is a pointer to it

namespace ringtrain::backend {

class CudaBackend;
class CommunicatorAbort;

class NcclBatchNormSums {
 public:
  // Collective over `group` (every rank of it constructs one, on the backend's device, which the backend made
  // current): its first rank's ncclGetUniqueId -> MPI_Bcast -> ncclCommInitRankConfig, non-blocking, bounded by the
  // larger of `timeout_s` and 120 s. With backend.shares_device() (gpu.share_device, tests only) each rank is a host
  // of its own to NCCL, as to the gradient reducer's (NCCL_HOSTID, nccl_reducer.h).
  NcclBatchNormSums(MPI_Comm group, const CudaBackend& backend, double timeout_s);
  // Orderly end (bounded), or an abort while unwinding from an error, when peers may be gone: a stalled peer's
  // all-reduce then no longer holds the compute stream.
  ~NcclBatchNormSums();
  NcclBatchNormSums(const NcclBatchNormSums&) = delete;
  NcclBatchNormSums& operator=(const NcclBatchNormSums&) = delete;

  // Adds `count` doubles of device memory over the group in place, queued on `stream`; returns once queued. An
  // asynchronous NCCL error seen here, or a call NCCL did not accept within the timeout, aborts every communicator of
  // the process (this one's among them) and throws FaultError. A peer that stalls once the call is queued
  // holds the stream: the gradient reducer's bounded wait for the step (which comes after it on the stream) then
  // aborts them all, this one with them, and ends the job.
  void add(double* values, std::size_t count, kernels::cuda::Stream stream);

 private:
  void abort() noexcept;

  ncclComm* comm_ = nullptr;
  double timeout_s_ = 300;
  int ranks_ = 1;
  std::unique_ptr<CommunicatorAbort> abort_hook_;  // a fault elsewhere aborts comm_ too
};

}  // namespace ringtrain::backend

// Owns the NCCL communicator of a synchronised batch norm group and its all-reduce of the per-channel sums.
#include "backend/cuda/nccl_batchnorm_sums.h"

#include <fmt/format.h>
#include <nccl.h>

#include <algorithm>
#include <cstdlib>
#include <exception>
#include <string>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/nccl_communicator.h"
#include "backend/cuda/nccl_reducer.h"
#include "common/error.h"
#include "common/process_label.h"
#include "kernels/cuda/cuda_check.h"

namespace ringtrain::backend {

NcclBatchNormSums::NcclBatchNormSums(MPI_Comm group, const CudaBackend& backend, double timeout_s)
    : timeout_s_(timeout_s) {
  int rank = 0;
  RT_MPI_CALL(MPI_Comm_rank(group, &rank));
  RT_MPI_CALL(MPI_Comm_size(group, &ranks_));
  // The value the gradient reducer sets (by world rank), whichever of the two starts NCCL first.
  if (backend.shares_device() && std::getenv("NCCL_HOSTID") == nullptr) {
    int world_rank = 0;
    RT_MPI_CALL(MPI_Comm_rank(MPI_COMM_WORLD, &world_rank));
    ::setenv("NCCL_HOSTID", emulated_host_id(backend.host(), world_rank).c_str(), 1);
  }
  const ncclUniqueId id = shared_unique_id(group);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // so initialisation and every call can be waited on with a deadline
  ncclComm_t comm = nullptr;
  RT_NCCL_SETTLE_ON(comm, ncclCommInitRankConfig(&comm, ranks_, id, rank, &config),
                    fmt::format("NCCL initialisation of the synchronised batch norm group of {} ranks", ranks_),
                    std::max(timeout_s_, kNcclInitTimeoutS));
  comm_ = comm;
  abort_hook_ = std::make_unique<CommunicatorAbort>([this] { abort(); });
}

void NcclBatchNormSums::abort() noexcept {
  if (comm_) (void)ncclCommAbort(comm_);
  comm_ = nullptr;
}

NcclBatchNormSums::~NcclBatchNormSums() {
  if (!comm_) return;
  if (std::uncaught_exceptions() > 0) {
    abort();
    return;
  }
  ncclComm_t closing = comm_;
  comm_ = nullptr;  // the abort hook, registered until the members go, must not reach a communicator being freed
  close_communicator(closing);
}

void NcclBatchNormSums::add(double* values, std::size_t count, kernels::cuda::Stream stream) {
  if (!comm_) throw Error(ExitCode::internal, "synchronised batch norm after its NCCL communicator was aborted");
  ncclResult_t state = ncclSuccess;
  if (const ncclResult_t queried = ncclCommGetAsyncError(comm_, &state); queried != ncclSuccess) {
    abort_every_communicator();  // a communicator whose state cannot be read is trusted no more than a failed one
    throw_library_error("NCCL", "ncclCommGetAsyncError (synchronised batch norm)", __FILE__, __LINE__,
                        ncclGetErrorString(queried));
  }
  if (state != ncclSuccess && state != ncclInProgress) {
    const std::string words = nccl_words(state);
    abort_every_communicator();  // this one's among them
    throw FaultError(fmt::format("NCCL failed in the synchronised batch norm group of {} ranks on {}: {}; the "
                                 "communicator was aborted",
                                 ranks_, process_label(), words));
  }
  RT_NCCL_SETTLE_ON(comm_, ncclAllReduce(values, values, count, ncclDouble, ncclSum, comm_, stream),
                    fmt::format("queueing the synchronised batch norm's sums ({} doubles over {} ranks)", count, ranks_),
                    timeout_s_);
}

}  // namespace ringtrain::backend

// Owns what every NCCL communicator of ours does alike (the gradient reducer's, nccl_reducer.h, and synchronised
// batch norm's, nccl_batchnorm_sums.h): the bootstrap over an MPI communicator, the bounded wait on a non-blocking
// communicator's calls, and the orderly end. Private to backend/cuda.
#pragma once
#include <cuda_runtime_api.h>
#include <mpi.h>
#include <nccl.h>

#include <chrono>
#include <functional>
#include <initializer_list>
#include <string>

namespace ringtrain::backend {

// dist/mpi_check.h's MPI_CHECK needs rt_core, which links this library; this is the same check, local.
[[noreturn]] void nccl_bootstrap_mpi_failed(int rc, const char* call, const char* file, int line);
#define RT_MPI_CALL(call)                                                                               \
  do {                                                                                                  \
    const int rt_mpi_rc_ = (call);                                                                      \
    if (rt_mpi_rc_ != MPI_SUCCESS) nccl_bootstrap_mpi_failed(rt_mpi_rc_, #call, __FILE__, __LINE__);    \
  } while (0)

// The least time NCCL initialisation gets, whatever the collective timeout: connecting takes a while.
inline constexpr double kNcclInitTimeoutS = 120;

// NCCL's words for `result`, with its last error where it has one.
std::string nccl_words(ncclResult_t result);

// Polling cadence of the bounded waits: spin (yielding) for the first ~millisecond so short waits are timed
// accurately, then sleep briefly so a long wait does not take a core from the data loader.
void pause_polling(int polls);

// Collective over `comm`: its rank 0 makes the id and every rank learns it, and whether making it worked (a failure
// there throws on every rank alike, so it strands nobody in a collective).
ncclUniqueId shared_unique_id(MPI_Comm comm);

// When a bounded wait that starts now gives up: never where timeout_s <= 0 (run.collective_timeout_s = 0: off).
std::chrono::steady_clock::time_point wait_deadline(double timeout_s);

// While alive, `abort` (which aborts its owner's communicator, and is a no-op once it has) is one of the process's
// communicator aborts. A fault on any communicator runs them all: a kernel of another one (batch norm's sums queued
// on the compute stream, a step's all-reduce on the communication stream) waiting for the same dead peer would
// otherwise keep the device streams busy, and the unwinding that follows waits on those streams.
class CommunicatorAbort {
 public:
  explicit CommunicatorAbort(std::function<void()> abort);
  ~CommunicatorAbort();
  CommunicatorAbort(const CommunicatorAbort&) = delete;
  CommunicatorAbort& operator=(const CommunicatorAbort&) = delete;

 private:
  int id_;
};
void abort_every_communicator() noexcept;

// Waits for `events` (a null one is done), as cudaEventSynchronize would, but for at most timeout_s (never where it
// is <= 0): a stream that waits for a collective stalled on a dead peer never reaches its event. `between_polls`,
// if given, runs after each poll that found work left (a communicator's asynchronous error check), and may throw.
// Past the deadline every communicator is aborted and FaultError names what(); a fault on the device is CUDA's
// error, after the same aborts.
void wait_for_events_within(std::initializer_list<cudaEvent_t> events, double timeout_s,
                            const std::function<std::string()>& what,
                            const std::function<void()>& between_polls = {});

// A non-blocking communicator's call may answer ncclInProgress: the call is then complete (its work queued) only once
// ncclCommGetAsyncError stops saying so. Returns the call's final result, or ncclInProgress where it was still in
// progress after `timeout_s`.
ncclResult_t wait_while_in_progress(ncclComm_t comm, ncclResult_t result, double timeout_s);

// A call on non-blocking `comm` (its result `result`), waited for while NCCL says it is in progress, for at most
// `timeout_s`. Past that `comm` is aborted (and set to null), with every other communicator of the process, and
// FaultError says `what` did not complete, a peer being probably dead or stalled; on an error they are aborted too,
// and the library error names `call`, file:line and NCCL's words.
void settle_call(ncclComm_t& comm, ncclResult_t result, const char* call, const char* file, int line,
                 const std::string& what, double timeout_s);

#define RT_NCCL_SETTLE_ON(comm, call, what, timeout_s) \
  ::ringtrain::backend::settle_call((comm), (call), #call, __FILE__, __LINE__, (what), (timeout_s))

// Ends `comm`: flushes, waits (at most 10 s) until NCCL says it is quiet, then frees it; aborts it where that fails.
// Never waits on peers beyond that, so it is safe where they may be gone.
void close_communicator(ncclComm_t comm) noexcept;

}  // namespace ringtrain::backend

// Owns the steps our NCCL communicators share: bootstrap over MPI, bounded waits, orderly end.
#include "backend/cuda/nccl_communicator.h"

#include <fmt/format.h>

#include <chrono>
#include <map>
#include <mutex>
#include <thread>
#include <utility>

#include "common/error.h"
#include "common/process_label.h"
#include "kernels/cuda/cuda_check.h"

namespace ringtrain::backend {

void nccl_bootstrap_mpi_failed(int rc, const char* call, const char* file, int line) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  MPI_Error_string(rc, text, &length);
  throw_library_error("MPI", call, file, line, std::string(text, static_cast<size_t>(length)));
}

std::string nccl_words(ncclResult_t result) {
  std::string words = ncclGetErrorString(result);
  if (const char* last = ncclGetLastError(nullptr); last && last[0]) words += std::string(": ") + last;
  return words;
}

void pause_polling(int polls) {
  if (polls < 2000)
    std::this_thread::yield();
  else
    std::this_thread::sleep_for(std::chrono::microseconds(50));
}

ncclUniqueId shared_unique_id(MPI_Comm comm) {
  int rank = 0;
  RT_MPI_CALL(MPI_Comm_rank(comm, &rank));
  struct {
    int status;
    ncclUniqueId id;
  } boot{};
  if (rank == 0) boot.status = static_cast<int>(ncclGetUniqueId(&boot.id));
  RT_MPI_CALL(MPI_Bcast(&boot, sizeof boot, MPI_BYTE, 0, comm));
  if (boot.status != ncclSuccess)
    throw_library_error("NCCL", "ncclGetUniqueId (on rank 0)", __FILE__, __LINE__,
                        ncclGetErrorString(static_cast<ncclResult_t>(boot.status)));
  return boot.id;
}

namespace {

struct Aborts {
  std::mutex mutex;
  std::map<int, std::function<void()>> by_id;
  int next_id = 0;
};
Aborts& aborts() {
  static Aborts a;
  return a;
}

}  // namespace

CommunicatorAbort::CommunicatorAbort(std::function<void()> abort) {
  Aborts& a = aborts();
  const std::lock_guard lock(a.mutex);
  id_ = a.next_id++;
  a.by_id.emplace(id_, std::move(abort));
}

CommunicatorAbort::~CommunicatorAbort() {
  Aborts& a = aborts();
  const std::lock_guard lock(a.mutex);
  a.by_id.erase(id_);
}

void abort_every_communicator() noexcept {
  Aborts& a = aborts();
  const std::lock_guard lock(a.mutex);
  for (auto& [id, abort] : a.by_id) {
    try {
      abort();
    } catch (...) {  // an abort that throws has nothing left to abort; the fault being raised says what happened
    }
  }
}

void wait_for_events_within(std::initializer_list<cudaEvent_t> events, double timeout_s,
                            const std::function<std::string()>& what, const std::function<void()>& between_polls) {
  const auto deadline = wait_deadline(timeout_s);
  for (int polls = 0;; ++polls) {
    bool done = true;
    for (const cudaEvent_t event : events) {
      const cudaError_t state = event ? cudaEventQuery(event) : cudaSuccess;
      if (state == cudaSuccess) continue;
      done = false;
      if (state != cudaErrorNotReady) {
        abort_every_communicator();
        CUDA_CHECK(state);  // a fault on the device (illegal address, ...): a library error, not a stall
      }
    }
    if (done) return;
    if (between_polls) between_polls();
    if (std::chrono::steady_clock::now() > deadline) {
      abort_every_communicator();
      throw FaultError(fmt::format("{} did not complete within the {} s collective timeout on {}; a peer rank is "
                                   "probably dead or stalled, so the NCCL communicators were aborted",
                                   what(), timeout_s, process_label()));
    }
    pause_polling(polls);
  }
}

std::chrono::steady_clock::time_point wait_deadline(double timeout_s) {
  if (timeout_s <= 0) return std::chrono::steady_clock::time_point::max();
  return std::chrono::steady_clock::now() +
         std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(timeout_s));
}

ncclResult_t wait_while_in_progress(ncclComm_t comm, ncclResult_t result, double timeout_s) {
  const auto deadline = wait_deadline(timeout_s);
  for (int polls = 0; result == ncclInProgress; ++polls) {
    ncclResult_t state = ncclSuccess;
    const ncclResult_t asked = ncclCommGetAsyncError(comm, &state);
    result = asked != ncclSuccess ? asked : state;
    if (result != ncclInProgress || std::chrono::steady_clock::now() > deadline) break;
    pause_polling(polls);
  }
  return result;
}

void settle_call(ncclComm_t& comm, ncclResult_t result, const char* call, const char* file, int line,
                 const std::string& what, double timeout_s) {
  result = wait_while_in_progress(comm, result, timeout_s);
  if (result == ncclSuccess) return;
  const std::string words = nccl_words(result);  // before the abort, which may overwrite NCCL's last error
  // Every communicator's owner first: the gradient reducer frees its step graphs before its abort, which NCCL would
  // otherwise hold up until no graph holds the communicator's work. Then `comm`, if no owner aborted it (one being
  // made is nobody's yet).
  abort_every_communicator();
  if (comm) (void)ncclCommAbort(comm);
  comm = nullptr;
  if (result == ncclInProgress)
    throw FaultError(fmt::format("{} did not complete within the {} s collective timeout on {}; a peer rank is "
                                 "probably dead or stalled, so the NCCL communicator was aborted",
                                 what, timeout_s, process_label()));
  throw_library_error("NCCL", call, file, line, words);
}

void close_communicator(ncclComm_t comm) noexcept {
  ncclResult_t state = ncclCommFinalize(comm);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (int polls = 0; state == ncclInProgress && std::chrono::steady_clock::now() < deadline; ++polls) {
    if (ncclCommGetAsyncError(comm, &state) != ncclSuccess) break;
    pause_polling(polls);
  }
  if (state == ncclSuccess)
    (void)ncclCommDestroy(comm);
  else
    (void)ncclCommAbort(comm);
}

}  // namespace ringtrain::backend

// Owns ringtrain's error types and exit codes: every layer throws one of these, and main() turns it into
// the same message and exit code on every rank.
#pragma once
#include <stdexcept>
#include <string>
#include <utility>

namespace ringtrain {

// Distinct codes so a batch script (and Slurm requeue logic) can tell failures apart.
enum class ExitCode : int {
  ok = 0,
  internal = 1,    // a bug or an unexpected exception
  usage = 2,       // bad command line
  job_file = 3,    // job file: unknown key, wrong type, missing key, bad value
  data = 4,        // dataset: missing, corrupt, inconsistent, too small
  checkpoint = 5,  // checkpoint: missing, corrupt, incompatible
  fault = 6,       // runtime fault: non-finite loss, stalled collective, replica mismatch
  library = 7,     // a CUDA/cuDNN/cuBLAS/NCCL/MPI/HDF5 call failed
  preempted = 75,  // EX_TEMPFAIL: checkpoint written on SIGTERM/SIGUSR1, requeue to resume
};

class Error : public std::runtime_error {
 public:
  Error(ExitCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  ExitCode code() const noexcept { return code_; }

 private:
  ExitCode code_;
};

struct UsageError : Error { explicit UsageError(const std::string& m) : Error(ExitCode::usage, m) {} };
struct JobFileError : Error { explicit JobFileError(const std::string& m) : Error(ExitCode::job_file, m) {} };
struct DataError : Error { explicit DataError(const std::string& m) : Error(ExitCode::data, m) {} };
struct CheckpointError : Error { explicit CheckpointError(const std::string& m) : Error(ExitCode::checkpoint, m) {} };
struct FaultError : Error { explicit FaultError(const std::string& m) : Error(ExitCode::fault, m) {} };

// An error every rank holds (dist::World::all_succeed): each rank can exit on its own, no abort needed.
// `origin` says which ranks met it when not every rank did ("rank 1/4 on node07; 2 of 4 ranks failed: 1, 3"),
// since each rank prints its own label beside a message that may be another rank's.
class AgreedError : public Error {
 public:
  AgreedError(ExitCode code, const std::string& message, std::string origin = {})
      : Error(code, message), origin_(std::move(origin)) {}
  const std::string& origin() const noexcept { return origin_; }

 private:
  std::string origin_;
};

// Thrown by the per-library check macros (MPI_CHECK, H5_CHECK, CUDA_CHECK, ...): names the call, where it
// was made, which process made it, and what the library said.
[[noreturn]] void throw_library_error(const char* library, const char* call, const char* file, int line,
                                      const std::string& library_message);

const char* exit_code_name(ExitCode code) noexcept;

}  // namespace ringtrain

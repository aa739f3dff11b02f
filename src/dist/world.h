// Owns the process's place in the job: MPI start/stop, global and node-local rank, and the one way ranks
// agree that a setup phase succeeded everywhere (so a bad file seen by one rank fails every rank alike).
#pragma once
#include <mpi.h>

#include <cstdint>
#include <functional>
#include <string>

#include "common/error.h"
#include "dist/rank_cores.h"

namespace ringtrain::dist {

// Runs `step` on every rank of `comm`; if it throws on any rank, every rank throws the same AgreedError
// (message and exit code of the lowest failing rank). A rank that fails alone therefore never leaves the
// others waiting in a later collective. An AgreedError out of `step` (every rank of the job holds it: an
// agreement inside the step, with the ranks that failed before it) passes on as it is, without another one.
void agree_on_errors(MPI_Comm comm, const std::function<void()>& step);

class World {
 public:
  // Initialises MPI (threads: MPI_THREAD_MULTIPLE, for the watchdog and the thread reducer) after setting
  // ringtrain's Open MPI defaults (dist/open_mpi_defaults.h), and computes the
  // node-local rank from MPI_Comm_split_type(MPI_COMM_TYPE_SHARED), never from rank arithmetic.
  World(int* argc, char*** argv);
  ~World();
  World(const World&) = delete;
  World& operator=(const World&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  int local_rank() const { return local_rank_; }
  int local_size() const { return local_size_; }
  // The cores this rank's threads default to (dist/rank_cores.h: its binding, shared with the ranks bound alike).
  int cores() const { return cores_.cores; }
  const RankCores& rank_cores() const { return cores_; }
  const std::string& host() const { return host_; }
  bool is_root() const { return rank_ == 0; }
  MPI_Comm comm() const { return MPI_COMM_WORLD; }

  void all_succeed(const std::function<void()>& step) const { agree_on_errors(MPI_COMM_WORLD, step); }

  // Ends every rank of the job now. For failures inside the training loop, where other ranks may be blocked
  // in a collective and cannot take part in all_succeed.
  [[noreturn]] void abort(ExitCode code) const;

  void barrier() const;
  void broadcast(void* data, int bytes, int root = 0) const;
  void broadcast_floats(float* data, long long count, int root = 0) const;  // chunked past INT_MAX
  long long min_across(long long value) const;
  long long max_across(long long value) const;
  double sum_across(double value) const;
  void sum_across(double* values, int count) const;
  void sum_across(int64_t* values, int count) const;  // exact
  std::string broadcast_string(const std::string& value, int root = 0) const;

 private:
  int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1;
  RankCores cores_;
  std::string host_;
  MPI_Comm local_comm_ = MPI_COMM_NULL;
  bool owns_mpi_ = true;
};

}  // namespace ringtrain::dist

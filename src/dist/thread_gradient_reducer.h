// Owns the CPU path's alternative gradient reduction: a communication thread that runs a blocking
// MPI_Allreduce per bucket, in launch order, on a duplicate of the communicator (so it never shares a
// communicator with the main thread's collectives). Progress then does not depend on backward calling into
// MPI between layers, at the price of a thread competing with compute for cores. dist.reducer selects it.
#pragma once
#include <mpi.h>

#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "dist/gradient_reducer.h"
#include "dist/wire_format.h"

namespace ringtrain::dist {

class ThreadGradientReducer final : public GradientReducer {
 public:
  // Collective over comm (MPI_Comm_dup).
  explicit ThreadGradientReducer(MPI_Comm comm, WireFormat wire = WireFormat::fp32);
  ~ThreadGradientReducer() override;
  ThreadGradientReducer(const ThreadGradientReducer&) = delete;
  ThreadGradientReducer& operator=(const ThreadGradientReducer&) = delete;

  void launch(float* grads, const Bucket& bucket) override;
  void progress() override {}  // the thread makes its own progress
  void wait_all() override;    // rethrows the thread's MPI error, if any
  const char* name() const override { return "MPI_Allreduce on a communication thread"; }
  // wait_all() already waited: returns the spans it saw end since the last settle.
  std::vector<StepSpans> settle(int) override { return std::exchange(unsettled_, {}); }
  std::vector<BucketSpan> last_spans() const override { return finished_; }

 private:
  struct Work {
    float* data;
    BucketSpan span;
  };
  void run();

  MPI_Comm comm_ = MPI_COMM_NULL;
  MpiWire wire_;  // used by the communication thread only
  int ranks_ = 1;
  std::mutex mutex_;
  std::condition_variable work_cv_, done_cv_;
  std::deque<Work> queue_;
  std::vector<BucketSpan> done_, finished_;
  std::vector<StepSpans> unsettled_;  // wait_all's since the last settle
  int outstanding_ = 0;
  bool stop_ = false;
  std::exception_ptr error_;
  std::thread thread_;
};

}  // namespace ringtrain::dist

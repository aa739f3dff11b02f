// Owns the communication thread and its hand-over of buckets.
#include "dist/thread_gradient_reducer.h"

#include <climits>

#include "common/error.h"
#include "dist/mpi_check.h"
#include "util/clock.h"

namespace ringtrain::dist {

ThreadGradientReducer::ThreadGradientReducer(MPI_Comm comm, WireFormat wire) : wire_(wire) {
  MPI_CHECK(MPI_Comm_dup(comm, &comm_));
  MPI_CHECK(MPI_Comm_size(comm_, &ranks_));
  thread_ = std::thread([this] { run(); });
}

ThreadGradientReducer::~ThreadGradientReducer() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  work_cv_.notify_all();
  // With work outstanding we are unwinding from an error and a peer may never answer: leave the thread to
  // the job's abort rather than hang in join.
  if (outstanding_ > 0) {
    thread_.detach();
    return;
  }
  thread_.join();
  MPI_Comm_free(&comm_);
}

void ThreadGradientReducer::launch(float* grads, const Bucket& bucket) {
  if (ranks_ == 1) return;
  if (bucket.count > INT_MAX) throw Error(ExitCode::internal, "gradient bucket larger than 2^31 floats");
  {
    std::lock_guard lock(mutex_);
    queue_.push_back({grads + bucket.begin, {outstanding_, bucket.count, util::now_s(), 0}});
    ++outstanding_;
  }
  work_cv_.notify_one();
}

void ThreadGradientReducer::run() {
  std::unique_lock lock(mutex_);
  for (;;) {
    work_cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stop requested and nothing left
    Work work = queue_.front();
    queue_.pop_front();
    lock.unlock();
    try {
      const MpiWire::Message m = wire_.outgoing(work.data, work.span.floats, 0);  // one bucket at a time
      MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, m.data, m.count, m.type, m.op, comm_));
      wire_.arrived(work.data, work.span.floats, 0);
    } catch (...) {
      lock.lock();
      error_ = std::current_exception();
      done_cv_.notify_all();
      return;
    }
    work.span.end_s = util::now_s();
    lock.lock();
    done_.push_back(work.span);
    done_cv_.notify_all();
  }
}

void ThreadGradientReducer::wait_all() {
  std::unique_lock lock(mutex_);
  done_cv_.wait(lock, [this] { return error_ || static_cast<int>(done_.size()) == outstanding_; });
  if (error_) std::rethrow_exception(error_);
  finished_.swap(done_);
  done_.clear();
  outstanding_ = 0;
  unsettled_.push_back(finished_);
}

}  // namespace ringtrain::dist

// Owns bucketed non-blocking MPI all-reduce of gradients and its progress.
#include "dist/mpi_gradient_reducer.h"

#include <climits>

#include "common/error.h"
#include "dist/mpi_check.h"
#include "util/clock.h"

namespace ringtrain::dist {

MpiGradientReducer::MpiGradientReducer(MPI_Comm comm) : comm_(comm) { MPI_CHECK(MPI_Comm_size(comm_, &ranks_)); }

MpiGradientReducer::~MpiGradientReducer() {
  // Only reached with requests outstanding when unwinding from an error; the job is being aborted then.
  for (auto& r : requests_)
    if (r != MPI_REQUEST_NULL) MPI_Request_free(&r);
}

void MpiGradientReducer::launch(float* grads, const Bucket& bucket) {
  if (ranks_ == 1) return;
  if (bucket.count > INT_MAX) throw Error(ExitCode::internal, "gradient bucket larger than 2^31 floats");
  MPI_Request request = MPI_REQUEST_NULL;
  MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, grads + bucket.begin, static_cast<int>(bucket.count), MPI_FLOAT, MPI_SUM,
                           comm_, &request));
  const double now = util::now_s();
  spans_.push_back({static_cast<int>(spans_.size()), bucket.count, now, 0});
  requests_.push_back(request);
}

// A reduction's end is when MPI reports it done to us: progress() polls between layers of backward, so an
// overlapped bucket's end is accurate to one layer's compute.
void MpiGradientReducer::stamp(int done, double now) {
  for (int i = 0; i < done; ++i) spans_[static_cast<size_t>(done_indices_[static_cast<size_t>(i)])].end_s = now;
}

void MpiGradientReducer::progress() {
  if (requests_.empty()) return;
  done_indices_.resize(requests_.size());
  int done = 0;
  MPI_CHECK(MPI_Testsome(static_cast<int>(requests_.size()), requests_.data(), &done, done_indices_.data(),
                         MPI_STATUSES_IGNORE));
  if (done != MPI_UNDEFINED) stamp(done, util::now_s());
}

void MpiGradientReducer::wait_all() {
  finished_.clear();
  if (requests_.empty()) {
    unsettled_.emplace_back();
    return;
  }
  done_indices_.resize(requests_.size());
  for (;;) {  // Waitsome rather than Waitall, so each bucket's own end is seen
    int done = 0;
    MPI_CHECK(MPI_Waitsome(static_cast<int>(requests_.size()), requests_.data(), &done, done_indices_.data(),
                           MPI_STATUSES_IGNORE));
    if (done == MPI_UNDEFINED) break;  // every request already complete
    stamp(done, util::now_s());
  }
  requests_.clear();
  finished_.swap(spans_);
  spans_.clear();
  unsettled_.push_back(finished_);
}

}  // namespace ringtrain::dist

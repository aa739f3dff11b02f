// Owns bucketed non-blocking MPI all-reduce of gradients and its progress.
#include "dist/mpi_gradient_reducer.h"

#include <climits>

#include "common/error.h"
#include "dist/mpi_check.h"
#include "util/clock.h"

namespace ringtrain::dist {

MpiGradientReducer::MpiGradientReducer(MPI_Comm comm, WireFormat wire) : comm_(comm), wire_(wire) { MPI_CHECK(MPI_Comm_size(comm_, &ranks_)); }

MpiGradientReducer::~MpiGradientReducer() {
  // Only reached with requests outstanding when unwinding from an error; the job is being aborted then.
  for (auto& r : requests_)
    if (r != MPI_REQUEST_NULL) MPI_Request_free(&r);
}

void MpiGradientReducer::launch(float* grads, const Bucket& bucket) {
  if (ranks_ == 1) return;
  if (bucket.count > INT_MAX) throw Error(ExitCode::internal, "gradient bucket larger than 2^31 floats");
  MPI_Request request = MPI_REQUEST_NULL;
  const MpiWire::Message m = wire_.outgoing(grads + bucket.begin, bucket.count, requests_.size());
  MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, m.data, m.count, m.type, m.op, comm_, &request));
  const double now = util::now_s();
  targets_.push_back(grads + bucket.begin);
  spans_.push_back({static_cast<int>(spans_.size()), bucket.count, now, 0});
  requests_.push_back(request);
}

// A reduction's end is when MPI reports it done to us: progress() polls between layers of backward, so an
// overlapped bucket's end is accurate to one layer's compute.
void MpiGradientReducer::stamp(int done, double now) {
  for (int i = 0; i < done; ++i) {
    const auto index = static_cast<size_t>(done_indices_[static_cast<size_t>(i)]);
    spans_[index].end_s = now;
    wire_.arrived(targets_[index], spans_[index].floats, index);
  }
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
  targets_.clear();
  finished_.swap(spans_);
  spans_.clear();
  unsettled_.push_back(finished_);
}

}  // namespace ringtrain::dist

// Owns bucketed non-blocking MPI all-reduce of gradients and its progress.
#include "dist/mpi_gradient_reducer.h"

#include <climits>

#include "common/error.h"
#include "dist/mpi_check.h"

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
  requests_.push_back(request);
}

void MpiGradientReducer::progress() {
  if (requests_.empty()) return;
  int done = 0;
  MPI_CHECK(MPI_Testall(static_cast<int>(requests_.size()), requests_.data(), &done, MPI_STATUSES_IGNORE));
}

void MpiGradientReducer::wait_all() {
  if (requests_.empty()) return;
  MPI_CHECK(MPI_Waitall(static_cast<int>(requests_.size()), requests_.data(), MPI_STATUSES_IGNORE));
  requests_.clear();
}

}  // namespace ringtrain::dist

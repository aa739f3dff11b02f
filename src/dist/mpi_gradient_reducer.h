// Owns the CPU path's gradient reduction: one non-blocking MPI_Iallreduce per bucket, in fp32 or bf16.
#pragma once
#include <mpi.h>

#include <utility>
#include <vector>

#include "dist/gradient_reducer.h"
#include "dist/wire_format.h"

namespace ringtrain::dist {

class MpiGradientReducer final : public GradientReducer {
 public:
  explicit MpiGradientReducer(MPI_Comm comm, WireFormat wire = WireFormat::fp32);
  ~MpiGradientReducer() override;
  void launch(float* grads, const Bucket& bucket) override;
  void progress() override;
  void wait_all() override;
  const char* name() const override { return "MPI_Iallreduce"; }
  // wait_all() already waited: returns the spans it saw end since the last settle.
  std::vector<StepSpans> settle(int) override { return std::exchange(unsettled_, {}); }
  std::vector<BucketSpan> last_spans() const override { return finished_; }
  std::size_t held_steps() const { return unsettled_.size(); }  // wait_all's not yet settled (tests)

 private:
  MPI_Comm comm_;
  int ranks_ = 1;
  MpiWire wire_;
  std::vector<MPI_Request> requests_;
  std::vector<float*> targets_;       // parallel to requests_: where each sum goes
  std::vector<BucketSpan> spans_;     // parallel to requests_; end_s stamped when a test or wait sees it done
  std::vector<BucketSpan> finished_;  // the last wait_all's
  std::vector<StepSpans> unsettled_;  // wait_all's since the last settle
  std::vector<int> done_indices_;
  void stamp(int done, double now);
};

}  // namespace ringtrain::dist

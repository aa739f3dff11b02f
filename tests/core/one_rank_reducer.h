// Owns the core tests' gradient reducer for one rank: the sum over ranks is the gradient itself, and each step
// settles at once, with no buckets timed.
#pragma once
#include <utility>
#include <vector>

#include "dist/gradient_reducer.h"

namespace ringtrain::test_support {

class OneRank final : public dist::GradientReducer {
 public:
  void launch(float*, const dist::Bucket&) override {}
  void progress() override {}
  void wait_all() override { ++unsettled_; }
  std::vector<dist::StepSpans> settle(int) override { return std::vector<dist::StepSpans>(std::exchange(unsettled_, 0)); }
  const char* name() const override { return "none"; }

 private:
  size_t unsettled_ = 0;
};

}  // namespace ringtrain::test_support

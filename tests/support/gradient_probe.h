// Owns GradientProbe: an optimizer that only records the (reduced) gradients a training step hands it, for tests that
// compare a step's gradient with a reference.
#pragma once
#include <algorithm>
#include <string>
#include <vector>

#include "model/network.h"
#include "model/optimizer.h"

namespace ringtrain::test_support {

// The optimizer's place in the step, taken by a probe: it keeps the gradients it is handed (the reduced ones) and
// leaves them zero, as every optimizer does.
class GradientProbe final : public model::Optimizer {
 public:
  explicit GradientProbe(model::Network& net) : Optimizer(net, "probe", {}, {}) {}
  void update(float, int64_t, model::ParamSlice slice) override {
    require_whole(slice);
    seen.assign(net_.grads(), net_.grads() + net_.param_count());
    std::fill(net_.grads(), net_.grads() + net_.param_count(), 0.0f);
  }
  std::string describe() const override { return "gradient probe"; }
  std::vector<float> seen;
};

}  // namespace ringtrain::test_support

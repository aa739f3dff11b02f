// Owns GradientProbe: an optimizer that only records the (reduced) gradients a training step hands it, for tests that
// compare a step's gradient with a reference.
#pragma once
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
  // Through the backend, so the probe reads a GPU network's gradients as well as the CPU twin's.
  void update(float, int64_t, model::ParamSlice slice) override {
    require_whole(slice);
    const auto count = static_cast<size_t>(net_.param_count());
    seen.resize(count);
    net_.backend().to_host(seen.data(), net_.grads(), count * sizeof(float));
    const std::vector<float> zeros(count, 0.0f);
    net_.backend().to_device(net_.grads(), zeros.data(), count * sizeof(float));
  }
  std::string describe() const override { return "gradient probe"; }
  std::vector<float> seen;
};

}  // namespace ringtrain::test_support

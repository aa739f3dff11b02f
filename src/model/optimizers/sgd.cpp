// Owns SGD with momentum and L2 weight decay over the flat buffers (kernels/optimizer_step.h's SgdStep).
#include <fmt/format.h>

#include "model/optimizer.h"

namespace ringtrain::model {
namespace {

class Sgd final : public Optimizer {
 public:
  Sgd(const config::JobConfig::Optimizer& spec, Network& net)
      : Optimizer(net, "sgd", {"velocity"}),
        momentum_(static_cast<float>(spec.momentum)),
        weight_decay_(static_cast<float>(spec.weight_decay)) {}

  void update(float lr, int64_t, ParamSlice s) override {
    net_.backend().sgd_update(s.count, {lr, momentum_, weight_decay_}, net_.decay_mask() + s.begin / 32,
                              net_.grads() + s.begin, array(0) + s.begin, net_.params() + s.begin);
  }
  std::string describe() const override {
    return fmt::format("sgd (momentum {}, L2 weight decay {} on weights)", momentum_, weight_decay_);
  }

 private:
  float momentum_, weight_decay_;
};

}  // namespace

std::unique_ptr<Optimizer> make_sgd(const config::JobConfig::Optimizer& spec, Network& net) {
  return std::make_unique<Sgd>(spec, net);
}

}  // namespace ringtrain::model

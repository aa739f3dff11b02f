// Owns SGD with momentum and L2 weight decay over the flat buffers (kernels/optimizer_step.h's SgdStep).
#include <fmt/format.h>

#include "model/optimizer.h"

namespace ringtrain::model {
namespace {

class Sgd final : public Optimizer {
 public:
  Sgd(const config::JobConfig::Optimizer& spec, Network& net)
      : Optimizer(net, "sgd", {"velocity"}, model::rate_groups(spec, net)),
        step_{0, static_cast<float>(spec.momentum), static_cast<float>(spec.weight_decay), spec.nesterov} {}

  void update(float lr, int64_t, ParamSlice slice) override {
    for (const RatePiece& s : pieces(slice)) {
      kernels::SgdStep step = step_;
      step.lr = lr * s.lr_scale;
      net_.backend().sgd_update(s.count, step, s.decay_mask, net_.grads() + s.begin, array(0) + s.begin,
                                net_.params() + s.begin);
    }
  }
  std::string describe() const override {
    return fmt::format("sgd ({}momentum {}, L2 weight decay {} on weights)", step_.nesterov ? "Nesterov " : "",
                       step_.momentum, step_.weight_decay);
  }

 private:
  kernels::SgdStep step_;
};

}  // namespace

std::unique_ptr<Optimizer> make_sgd(const config::JobConfig::Optimizer& spec, Network& net) {
  return std::make_unique<Sgd>(spec, net);
}

}  // namespace ringtrain::model

// Owns AdamW over the flat buffers (kernels/optimizer_step.h's AdamStep): the bias corrections are worked out
// here in double for each update number, the rest is one pass on the backend.
#include <fmt/format.h>

#include <cmath>

#include "model/optimizer.h"

namespace ringtrain::model {

kernels::AdamStep adam_step(const config::JobConfig::Optimizer& spec, float lr, int64_t updates_done) {
  const double t = static_cast<double>(updates_done + 1);
  kernels::AdamStep s;
  s.lr = lr;
  s.beta1 = static_cast<float>(spec.beta1), s.beta2 = static_cast<float>(spec.beta2);
  s.epsilon = static_cast<float>(spec.epsilon), s.weight_decay = static_cast<float>(spec.weight_decay);
  s.gradient_weight1 = static_cast<float>(1.0 - spec.beta1), s.gradient_weight2 = static_cast<float>(1.0 - spec.beta2);
  s.bias_correction1 = static_cast<float>(1.0 - std::pow(spec.beta1, t));
  s.bias_correction2 = static_cast<float>(1.0 - std::pow(spec.beta2, t));
  return s;
}

namespace {

class AdamW final : public Optimizer {
 public:
  AdamW(const config::JobConfig::Optimizer& spec, Network& net)
      : Optimizer(net, "adamw", {"adam_m", "adam_v"}, model::rate_groups(spec, net)), spec_(spec) {}

  void update(float lr, int64_t updates_done, ParamSlice slice) override {
    for (const RatePiece& s : pieces(slice))
      net_.backend().adamw_update(s.count, adam_step(spec_, lr * s.lr_scale, updates_done), s.decay_mask,
                                  net_.grads() + s.begin, array(0) + s.begin, array(1) + s.begin,
                                  net_.params() + s.begin);
  }
  std::string describe() const override {
    return fmt::format("adamw (beta1 {}, beta2 {}, epsilon {}, decoupled weight decay {} on weights)", spec_.beta1,
                       spec_.beta2, spec_.epsilon, spec_.weight_decay);
  }

 private:
  config::JobConfig::Optimizer spec_;
};

}  // namespace

std::unique_ptr<Optimizer> make_adamw(const config::JobConfig::Optimizer& spec, Network& net) {
  return std::make_unique<AdamW>(spec, net);
}

}  // namespace ringtrain::model

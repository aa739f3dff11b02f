// Owns LARS over the flat buffers (kernels/optimizer_step.h's LarsStep): the parameter tensors' ranges go to the
// device once, and each update is a fixed number of passes over all of them.
#include <fmt/format.h>

#include "model/optimizer.h"

namespace ringtrain::model {
namespace {

class Lars final : public Optimizer {
 public:
  Lars(const config::JobConfig::Optimizer& spec, Network& net)
      : Optimizer(net, "lars", {"velocity"}, model::rate_groups(spec, net)),
        groups_(upload_tensor_ranges(net, rate_groups())) {
    step_.momentum = static_cast<float>(spec.momentum);
    step_.nesterov = spec.nesterov;
    step_.weight_decay = static_cast<float>(spec.weight_decay);
    step_.trust_coefficient = static_cast<float>(spec.trust_coefficient);
    step_.epsilon = static_cast<float>(spec.epsilon);
  }

  void update(float lr, int64_t, ParamSlice slice) override {
    require_whole(slice);
    for (const DeviceTensorRanges& group : groups_) {
      kernels::LarsStep step = step_;
      step.lr = lr * group.lr_scale;
      net_.backend().lars_update(group.count, group.data(), step, net_.grads(), array(0), net_.params());
    }
  }
  std::string describe() const override {
    return fmt::format("lars ({}momentum {}, trust coefficient {}, weight decay {}; biases and batch norm at the "
                       "plain rate without decay)",
                       step_.nesterov ? "Nesterov " : "", step_.momentum, step_.trust_coefficient, step_.weight_decay);
  }

 private:
  kernels::LarsStep step_;
  std::vector<DeviceTensorRanges> groups_;
};

}  // namespace

std::unique_ptr<Optimizer> make_lars(const config::JobConfig::Optimizer& spec, Network& net) {
  return std::make_unique<Lars>(spec, net);
}

}  // namespace ringtrain::model

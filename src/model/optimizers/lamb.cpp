// Owns LAMB over the flat buffers: Adam's moments and bias corrections (adamw.cpp's adam_step), each tensor's
// step scaled by its trust ratio on the backend.
#include <fmt/format.h>

#include "model/optimizer.h"

namespace ringtrain::model {

namespace {

class Lamb final : public Optimizer {
 public:
  Lamb(const config::JobConfig::Optimizer& spec, Network& net)
      : Optimizer(net, "lamb", {"adam_m", "adam_v"}, model::rate_groups(spec, net)),
        spec_(spec),
        groups_(upload_tensor_ranges(net, rate_groups())) {}

  void update(float lr, int64_t updates_done, ParamSlice slice) override {
    require_whole(slice);
    for (const DeviceTensorRanges& group : groups_)
      net_.backend().lamb_update(group.count, group.data(), adam_step(spec_, lr * group.lr_scale, updates_done),
                                 net_.grads(), array(0), array(1), net_.params());
  }
  std::string describe() const override {
    return fmt::format("lamb (beta1 {}, beta2 {}, epsilon {}, weight decay {}; biases and batch norm without trust "
                       "ratio or decay)",
                       spec_.beta1, spec_.beta2, spec_.epsilon, spec_.weight_decay);
  }

 private:
  config::JobConfig::Optimizer spec_;
  std::vector<DeviceTensorRanges> groups_;
};

}  // namespace

std::unique_ptr<Optimizer> make_lamb(const config::JobConfig::Optimizer& spec, Network& net) {
  return std::make_unique<Lamb>(spec, net);
}

}  // namespace ringtrain::model

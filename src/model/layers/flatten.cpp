// Owns flatten: a view change only. Dense layers already read N x (C*H*W), so no data moves.
#include <fmt/format.h>

#include <limits>

#include "model/layers/layers.h"
#include "model/layers/leaf_layer.h"

namespace ringtrain::model {
namespace {

class Flatten final : public LeafLayer {
 public:
  using LeafLayer::LeafLayer;
  std::string describe() const override { return "flatten"; }
  Shape setup(const Shape& in) override {
    in_ = in;
    if (in.per_sample() > std::numeric_limits<int>::max())
      shape_error(in, fmt::format("{} values per sample are more than a flat vector holds (2^31 - 1)", in.per_sample()));
    out_ = {in.n, static_cast<int>(in.per_sample()), 1, 1};
    return out_;
  }
  MemoryUse memory_use() const override { return {.output = OutputMemory::is_input}; }
  void forward(const ForwardPass&) override {}
  void backward(const BackwardPass&) override {}
};

}  // namespace

std::unique_ptr<Layer> make_flatten(const config::LayerSpec& spec, Backend& backend, ElementType data) {
  return std::make_unique<Flatten>(spec, backend, data);
}

}  // namespace ringtrain::model

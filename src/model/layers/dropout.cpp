// Owns inverted dropout: in training each element is kept with probability 1-rate and scaled by 1/(1-rate), so
// evaluation is the identity. At rate 0 it is a view of its input, like flatten.
#include <fmt/format.h>

#include "model/layer_registry.h"
#include "model/layers/leaf_layer.h"

namespace ringtrain::model {
namespace {

class Dropout final : public LeafLayer {
 public:
  Dropout(const config::LayerSpec& spec, Backend& backend, ElementType data)
      : LeafLayer(spec, backend, data), rate_(spec.number("rate")) {}
  std::string describe() const override { return fmt::format("dropout {}", rate_); }
  Shape setup(const Shape& in) override {
    in_ = out_ = in;
    return out_;
  }
  std::size_t kept_bytes() const override { return active() ? static_cast<size_t>(in_.elements()) : 0; }
  void bind(std::span<float* const>, std::span<float* const>, std::span<float* const>) override {
    if (active()) mask_ = keep(kept_bytes());
  }
  MemoryUse memory_use() const override {
    return {.output = active() ? OutputMemory::own : OutputMemory::is_input};
  }
  void forward(const ForwardPass& pass) override {
    if (!active()) return;
    if (pass.mode == Mode::train)
      backend_.dropout_forward(planes_of(pass.x.shape, pass.x.type), rate(), pass.seed, pass.x.data, pass.y,
                               mask_.as<uint8_t>());
    else
      backend_.copy(pass.x.elements(), pass.x.data, pass.y);
  }
  void backward(const BackwardPass& pass) override {
    if (active() && pass.dx)
      backend_.dropout_backward(pass.dy.elements(), rate(), mask_.as<uint8_t>(), pass.dy.data, pass.dx);
  }

 private:
  bool active() const { return rate_ > 0; }
  float rate() const { return static_cast<float>(rate_); }
  double rate_;  // read from the spec once: forward and backward ask for it every step
  DeviceBuffer mask_;
};

const LayerRegistration kDropout{{
    .keys = {.type = "dropout",
             .help = "zeroes each value with probability rate in training, scaling the rest by 1 / (1 - rate)",
             .keys = {config::required_number("rate", 0.0, 0.99, "probability of zeroing a value")}},
    .make = make_layer_of<Dropout>,
    .onnx = [](OnnxLayerWriter&, const config::LayerSpec&, const std::string& x) { return x; },  // inference form
}};

}  // namespace
}  // namespace ringtrain::model

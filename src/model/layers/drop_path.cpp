// Owns stochastic depth (drop path), for the body of a residual block: in training each sample's whole output is
// zeroed with probability rate and kept ones are scaled by 1 / (1 - rate), so that sample's block is its shortcut
// alone; evaluation is the identity. One draw per sample, over dropout's generator (Backend::dropout_forward on a
// vector of ones), so the per-sample factors are reproducible from the pass's seed; the scale is a per-sample
// plane_scale, which is the same in either layout (one channel of C*H*W values). At rate 0 it is a view.
#include <fmt/format.h>

#include <cstdint>

#include "model/layer_registry.h"
#include "model/layers/leaf_layer.h"

namespace ringtrain::model {
namespace {

class DropPath final : public LeafLayer {
 public:
  DropPath(const config::LayerSpec& spec, Backend& backend, ElementType data)
      : LeafLayer(spec, backend, data), rate_(spec.number("rate")) {}
  std::string describe() const override { return fmt::format("drop_path {}", rate_); }
  Shape setup(const Shape& in) override {
    in_ = out_ = in;
    return out_;
  }
  // A sample's factor (fp32) and its draw's mask byte, and the ones the draw scales.
  std::size_t kept_bytes() const override {
    return active() ? static_cast<std::size_t>(in_.n) * (2 * sizeof(float) + sizeof(uint8_t)) : 0;
  }
  void bind(std::span<float* const>, std::span<float* const>, std::span<float* const>) override {
    if (!active()) return;
    kept_ = keep(kept_bytes());
    ones_ = kept_.as<float>();
    factor_ = ones_ + in_.n;
    mask_ = reinterpret_cast<uint8_t*>(factor_ + in_.n);
    backend_.fill(in_.n, 1.0f, ones_);
  }
  MemoryUse memory_use() const override {
    return {.output = active() ? OutputMemory::own : OutputMemory::is_input};
  }
  void forward(const ForwardPass& pass) override {
    if (!active()) return;
    if (pass.mode == Mode::eval) return backend_.copy(pass.x.elements(), pass.x.data, pass.y);
    const int batch = pass.x.shape.n;
    backend_.dropout_forward({batch, 1, 1, ElementType::f32}, rate(), pass.seed, ones_, factor_, mask_);
    backend_.plane_scale(samples(pass.x.shape), pass.x.data, factor_, nullptr, pass.y);
  }
  // The mode is not known here: backward follows a training forward, whose factors are kept.
  void backward(const BackwardPass& pass) override {
    if (active() && pass.dx) backend_.plane_scale(samples(pass.dy.shape), pass.dy.data, factor_, nullptr, pass.dx);
  }

 private:
  bool active() const { return rate_ > 0; }
  float rate() const { return static_cast<float>(rate_); }
  // Each sample as one plane of one channel.
  kernels::Planes samples(const Shape& shape) const { return {shape.n, 1, shape.per_sample(), data_}; }
  double rate_;  // read from the spec once: forward asks for it every step
  DeviceBuffer kept_;
  float* ones_ = nullptr;
  float* factor_ = nullptr;
  uint8_t* mask_ = nullptr;
};

const LayerRegistration kDropPath{{
    .keys = {.type = "drop_path",
             .help = "stochastic depth for a residual body: zeroes each sample's output with probability rate in "
                     "training, scaling the rest by 1 / (1 - rate)",
             .keys = {config::required_number("rate", 0.0, 0.99, "probability of dropping a sample's body")}},
    .make = make_layer_of<DropPath>,
    .onnx = [](OnnxLayerWriter&, const config::LayerSpec&, const std::string& x) { return x; },  // inference form
}};

}  // namespace
}  // namespace ringtrain::model

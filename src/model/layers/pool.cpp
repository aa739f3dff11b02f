// Owns the pooling layers: max and average over a window (padding counts as zeros in the average), and global
// average pooling (the window is the whole, square, input).
#include <fmt/format.h>

#include "model/layers/layers.h"
#include "model/layers/leaf_layer.h"

namespace ringtrain::model {
namespace {

using config::LayerKind;

class Pool final : public LeafLayer {
 public:
  using LeafLayer::LeafLayer;
  std::string describe() const override {
    if (spec_.kind == LayerKind::global_avgpool) return "global_avgpool";
    return fmt::format("{} {} s{}", spec_.kind == LayerKind::maxpool ? "maxpool" : "avgpool", spec_.size, spec_.stride);
  }
  Shape setup(const Shape& in) override {
    in_ = in;
    if (spec_.kind == LayerKind::global_avgpool) {
      if (in.h != in.w) shape_error(in, "global average pooling needs a square input");
      shape_ = {in.n, in.c, in.h, in.w, in.h, in.h, 0};
    } else {
      if (in.h + 2 * spec_.padding < spec_.size || in.w + 2 * spec_.padding < spec_.size)
        shape_error(in, fmt::format("a {}x{} window does not fit", spec_.size, spec_.size));
      if (spec_.padding * 2 > spec_.size) shape_error(in, "padding must be at most half the window");
      shape_ = {in.n, in.c, in.h, in.w, spec_.size, spec_.stride, spec_.padding};
    }
    shape_.data = data_;
    out_ = {in.n, in.c, shape_.out_h(), shape_.out_w()};
    return out_;
  }
  std::size_t kept_bytes() const override { return backend_.pool_saved_bytes(shape_, mode()); }
  void bind(std::span<float* const>, std::span<float* const>, std::span<float* const>) override {
    if (kept_bytes() > 0) saved_ = keep(kept_bytes());
  }
  // Max pooling's backward finds each window's winner again from x and y (cuDNN) or keeps it (the CPU twin);
  // average pooling's needs neither.
  MemoryUse memory_use() const override {
    const bool max = mode() == PoolMode::max;
    return {.backward_reads_input = max, .backward_reads_output = max};
  }
  void forward(const ForwardPass& pass) override {
    backend_.pool_forward(at_batch(shape_, pass.x.shape.n), mode(), pass.x.data, pass.y, saved_.as<void>());
  }
  void backward(const BackwardPass& pass) override {
    if (pass.dx)
      backend_.pool_backward(at_batch(shape_, pass.dy.shape.n), mode(), pass.x.data, pass.y, pass.dy.data, pass.dx,
                             saved_.as<void>());
  }

 private:
  PoolMode mode() const { return spec_.kind == LayerKind::maxpool ? PoolMode::max : PoolMode::average; }
  PoolShape shape_;
  DeviceBuffer saved_;
};

}  // namespace

std::unique_ptr<Layer> make_pool(const config::LayerSpec& spec, Backend& backend, ElementType data) {
  return std::make_unique<Pool>(spec, backend, data);
}

}  // namespace ringtrain::model

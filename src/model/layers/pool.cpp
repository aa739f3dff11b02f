// Owns the pooling layers: max and average over a window (padding counts as zeros in the average), and global
// average pooling (the window is the whole, square, input).
#include <fmt/format.h>

#include "model/layer_registry.h"
#include "model/layers/leaf_layer.h"

namespace ringtrain::model {
namespace {

class Pool final : public LeafLayer {
 public:
  Pool(const config::LayerSpec& spec, Backend& backend, ElementType data)
      : LeafLayer(spec, backend, data),
        global_(spec.is("global_avgpool")),
        size_(global_ ? 0 : spec.integer("size")),
        stride_(global_ ? 0 : spec.integer("stride")),
        padding_(global_ ? 0 : spec.integer("padding")) {}
  std::string describe() const override {
    if (global_) return "global_avgpool";
    return fmt::format("{} {} s{}", spec_.type, size_, stride_);
  }
  Shape setup(const Shape& in) override {
    in_ = in;
    if (global_) {
      if (in.h != in.w) shape_error(in, "global average pooling needs a square input");
      shape_ = {in.n, in.c, in.h, in.w, in.h, in.h, 0};
    } else {
      if (in.h + 2 * padding_ < size_ || in.w + 2 * padding_ < size_)
        shape_error(in, fmt::format("a {}x{} window does not fit", size_, size_));
      if (padding_ * 2 > size_) shape_error(in, "padding must be at most half the window");
      shape_ = {in.n, in.c, in.h, in.w, size_, stride_, padding_};
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
  PoolMode mode() const { return spec_.is("maxpool") ? PoolMode::max : PoolMode::average; }
  bool global_;
  int size_, stride_, padding_;
  PoolShape shape_;
  DeviceBuffer saved_;
};

config::LayerKey stride_key() {
  config::LayerKey k = config::integer_key("stride", 0, 1, "step of the window");
  k.fallback_text = "the window";
  return k;
}

// A window's keys; the stride is the window unless given.
config::LayerType windowed(std::string type, std::string help) {
  return {.type = std::move(type),
          .help = std::move(help),
          .keys = {config::required_integer("size", 1, "window side"),
                   stride_key(),
                   config::integer_key("padding", 0, 0, "added on each side, at most half the window")},
          .finish = [](config::LayerSpec& s, std::vector<std::string>&) {
            if (s.integer("stride") == 0) s.values["stride"] = int64_t{s.integer("size")};
          }};
}

// ONNX MaxPool / AveragePool; ringtrain's average counts padding as zeros.
auto pool_onnx(const char* op) {
  return [op](OnnxLayerWriter& w, const config::LayerSpec& s, const std::string& x) {
    const int64_t size = s.integer("size"), stride = s.integer("stride"), pad = s.integer("padding");
    std::vector<io::OnnxAttribute> a{io::OnnxAttribute::list("kernel_shape", {size, size}),
                                     io::OnnxAttribute::list("strides", {stride, stride}),
                                     io::OnnxAttribute::list("pads", {pad, pad, pad, pad})};
    if (std::string_view(op) == "AveragePool") a.push_back(io::OnnxAttribute::integer("count_include_pad", 1));
    return w.graph().node(op, {x}, a);
  };
}

// ONNX MaxPool and AveragePool: a square window, like padding on every side, the output rounded down; an average
// over padding only where ONNX counts it as zeros, as ours does.
ImportedLayer pool_import(const OnnxNodeReader& r) {
  const bool max = r.node().op == "MaxPool";
  r.require_integer("ceil_mode", 0, 0, "ringtrain rounds a window's output size down");
  if (max && r.node().outputs.size() > 1) r.refuse("it outputs the maxima's indices, which import does not map");
  const OnnxWindow w = r.window({});
  if (!max && w.padding > 0)
    r.require_integer("count_include_pad", 0, 1, "ringtrain's average counts the padding as zeros");
  return ImportedLayer{r.spec(max ? "maxpool" : "avgpool", {{"size", static_cast<int>(w.kernel)},
                                                            {"stride", static_cast<int>(w.stride)},
                                                            {"padding", static_cast<int>(w.padding)}})};
}

const LayerRegistration kMaxPool{{
    .keys = windowed("maxpool", "the largest value of each window, per channel"),
    .make = make_layer_of<Pool>,
    .onnx = pool_onnx("MaxPool"),
    .onnx_import = {{"MaxPool"}, pool_import},
}};
const LayerRegistration kAvgPool{{
    .keys = windowed("avgpool", "the mean of each window, per channel, padding counted as zeros"),
    .make = make_layer_of<Pool>,
    .onnx = pool_onnx("AveragePool"),
    .onnx_import = {{"AveragePool"}, pool_import},
}};
const LayerRegistration kGlobalAvgPool{{
    .keys = {.type = "global_avgpool", .help = "the mean of each channel over a square input"},
    .make = make_layer_of<Pool>,
    .onnx = onnx_operator("GlobalAveragePool"),
    .onnx_import = {{"GlobalAveragePool"},
                    [](const OnnxNodeReader& r) { return ImportedLayer{r.spec("global_avgpool")}; }},
}};

}  // namespace
}  // namespace ringtrain::model

// Owns the pooling layers: max and average over a window (padding counts as zeros in the average), and global
// average pooling (the window is the whole, square, input).
#include <fmt/format.h>

#include "model/layer_registry.h"
#include "model/layers/leaf_layer.h"
#include "model/onnx_chain_reader.h"

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

// A Pad's amount on every side of H and W, where it pads N x C x H x W with zeros alike on each of those sides and
// nothing on N and C: its pads [N, C, H, W begins, N, C, H, W ends] as an input (opset 11 on) or an attribute.
int64_t zero_padding_of(const OnnxChainReader& c, const io::OnnxNode& pad) {
  const OnnxNodeReader r = c.reader(pad);
  const io::OnnxNodeAttribute* mode = pad.attribute("mode");
  c.require(!mode || mode->text == "constant", pad, "it pads by reflection or by the edge; import maps a Pad of zeros "
                                                    "before an AveragePool");
  c.require(!r.has_input(3), pad, "it names the axes it pads; import maps a Pad of H and W before an AveragePool");
  const float value = r.has_input(2) ? r.constant(2, "the padding value", 1).floats[0] : r.real("value", 0.0f);
  c.require(value == 0.0f, pad, fmt::format("it pads with {}; import maps a Pad of zeros before an AveragePool", value));
  const std::vector<int64_t> pads = r.has_input(1) ? r.integer_constant(1, "the pads") : r.integers("pads", {});
  c.require(pads.size() == 8 && pads[0] == 0 && pads[1] == 0 && pads[4] == 0 && pads[5] == 0 && pads[2] == pads[3] &&
                pads[2] == pads[6] && pads[2] == pads[7] && pads[2] >= 0,
            pad, "it pads other than H and W alike on every side; import maps that Pad before an AveragePool");
  return pads[2];
}

// torch's AvgPool2d with count_include_pad (its default), as it exports it below opset 19: a Pad of zeros, then an
// AveragePool without pads (whose zeros it counts: ringtrain's avgpool with that padding). Nothing where the value's
// only user is not a Pad whose only user is an AveragePool.
std::optional<ImportedChain> padded_average_chain(const OnnxChainReader& c) {
  const io::OnnxNode* pad = c.only_user(c.start(), "Pad");
  const io::OnnxNode* pool = pad ? c.only_user(pad->outputs.at(0), "AveragePool") : nullptr;
  if (!pool) return std::nullopt;
  const int64_t padding = zero_padding_of(c, *pad);
  const OnnxNodeReader r = c.reader(*pool);
  r.require_integer("ceil_mode", 0, 0, "ringtrain rounds a window's output size down");
  const OnnxWindow w = r.window({});
  c.require(w.padding == 0, *pool, "it pads what a Pad before it padded already; import maps one of the two");
  return ImportedChain{ImportedLayer{r.spec("avgpool", {{"size", static_cast<int>(w.kernel)},
                                                        {"stride", static_cast<int>(w.stride)},
                                                        {"padding", static_cast<int>(padding)}})},
                       pool->outputs.at(0)};
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
    .onnx_import = {.ops = {"AveragePool"}, .map = pool_import, .chain = padded_average_chain},
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

// Owns the 2-D convolution layer: NCHW, weights K x C/G x R x S (G groups as PyTorch's; depthwise is G = C),
// optional bias; its input and output channel-blocked where its backend chose so for the layers beside it
// (Layer::set_chain_layout).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "model/layer_registry.h"
#include "model/layers/leaf_layer.h"

namespace ringtrain::model {
namespace {

class Conv2d final : public LeafLayer {
 public:
  Conv2d(const config::LayerSpec& spec, Backend& backend, ElementType data)
      : LeafLayer(spec, backend, data),
        filters_(spec.integer("filters")),
        kernel_(spec.integer("kernel")),
        stride_(spec.integer("stride")),
        padding_(spec.integer("padding")),
        groups_(spec.integer("groups")),
        bias_(spec.flag("bias")) {}
  std::string describe() const override {
    return fmt::format("conv2d {}x{}x{} s{} p{}{}", kernel_, kernel_, filters_, stride_, padding_,
                       groups_ > 1 ? fmt::format(" g{}", groups_) : "");
  }
  Shape setup(const Shape& in) override {
    in_ = in;
    // Checked before out_h(): integer division truncates a negative numerator towards zero.
    if (in.h + 2 * padding_ < kernel_ || in.w + 2 * padding_ < kernel_)
      shape_error(in, fmt::format("a {}x{} kernel with padding {} does not fit", kernel_, kernel_,
                                  padding_));
    if (in.c % groups_ != 0 || filters_ % groups_ != 0)
      shape_error(in, fmt::format("groups = {} must divide both its {} input channels and its {} filters", groups_,
                                  in.c, filters_));
    shape_ = {in.n, in.c, in.h, in.w, filters_, kernel_, kernel_, stride_, padding_};
    shape_.data = data_;
    shape_.groups = groups_;
    out_ = {in.n, filters_, shape_.out_h(), shape_.out_w()};
    scratch_ = backend_.conv2d_prepare(shape_);
    return out_;
  }
  LayerOperation operation() const override { return shape_; }
  void set_chain_layout(const ChainLayout& layout) override {
    shape_.in_block = layout.in_block;
    shape_.out_block = layout.out_block;
    scratch_ = backend_.conv2d_prepare(shape_);
  }
  std::string fused() const override {
    using kernels::blocked_layout_name;
    std::string layouts = shape_.in_block > 1 ? blocked_layout_name(shape_.in_block, in_.c) + " in" : "";
    if (shape_.out_block > 1)
      layouts += fmt::format("{}-> {}", layouts.empty() ? "" : ", ", blocked_layout_name(shape_.out_block, out_.c));
    return layouts;
  }
  std::string method() const override {
    const std::string how = backend_.conv2d_method(shape_);
    return how.empty() ? "" : fmt::format("{}x{}x{} in: {}", in_.c, in_.h, in_.w, how);
  }
  // The filter gradient reads the input.
  MemoryUse memory_use() const override { return {.backward_reads_input = true, .scratch = scratch_}; }
  std::vector<ParamDecl> param_decls() const override {
    return params_.decls(filters_, int64_t{shape_.group_channels()} * kernel_ * kernel_, bias_);
  }
  void bind(std::span<float* const> p, std::span<float* const> g, std::span<float* const>) override {
    params_.bind(p, g);
  }
  void forward(const ForwardPass& pass) override {
    backend_.conv2d_forward(at_batch(shape_, pass.x.shape.n), pass.x.data, params_.weight(), params_.bias(), pass.y,
                            pass.scratch);
  }
  void backward(const BackwardPass& pass) override {
    const Conv2dShape s = at_batch(shape_, pass.dy.shape.n);
    backend_.conv2d_backward(s, pass.x.data, pass.dy.data, params_.weight(), pass.dx, params_.weight_grad(),
                             params_.bias_grad(), pass.scratch);
  }
  double forward_flops_per_sample() const override { return at_batch(shape_, 1).forward_flops(); }

 private:
  int filters_, kernel_, stride_, padding_, groups_;
  bool bias_;
  Conv2dShape shape_;
  ScratchBytes scratch_;
  WeightAndBias params_;
};

// ONNX Conv: the weight is K x C/G x k x k, C/G following from its size.
std::string conv2d_onnx(OnnxLayerWriter& w, const config::LayerSpec& s, const std::string& x) {
  const int64_t k = s.integer("kernel"), stride = s.integer("stride"), pad = s.integer("padding");
  std::vector<std::string> in{x, w.parameter(".weight", {s.integer("filters"), -1, k, k}).name};
  if (s.flag("bias")) in.push_back(w.parameter(".bias", {-1}).name);
  return w.graph().node("Conv", in, {io::OnnxAttribute::list("kernel_shape", {k, k}),
                                     io::OnnxAttribute::list("strides", {stride, stride}),
                                     io::OnnxAttribute::list("pads", {pad, pad, pad, pad}),
                                     io::OnnxAttribute::integer("group", s.integer("groups"))});
}

// ONNX Conv, 2-D with a square kernel and like padding on every side: its weight is K x C/G x k x k, as ours.
ImportedLayer conv2d_import(const OnnxNodeReader& r) {
  const io::OnnxTensor& w = r.constant(1, "weight");
  if (w.dims.size() != 4)
    r.refuse(fmt::format("its weight has {} dimensions; import maps 2-D convolutions (4-D weights)", w.dims.size()));
  const OnnxWindow window = r.window({w.dims[2], w.dims[3]});
  if (window.kernel != w.dims[2] || w.dims[2] != w.dims[3])
    r.refuse(fmt::format("its kernel_shape disagrees with its {}x{} weight", w.dims[2], w.dims[3]));
  const bool bias = r.has_input(2);
  ImportedLayer layer{r.spec("conv2d", {{"filters", static_cast<int>(w.dims[0])},
                                        {"kernel", static_cast<int>(window.kernel)},
                                        {"stride", static_cast<int>(window.stride)},
                                        {"padding", static_cast<int>(window.padding)},
                                        {"groups", static_cast<int>(r.integer("group", 1))},
                                        {"bias", bias}})};
  layer.params.push_back(w.floats);
  if (bias) layer.params.push_back(r.constant(2, "bias", w.dims[0]).floats);
  return layer;
}

// torch's Linear over the channels where they are permuted last (ConvNeXt's pointwise layers, a transformer's per-token
// maps): MatMul by a C x K constant, then Add of a K bias where one follows; ours is the 1x1 convolution of K x C
// weights. Nothing where the value's one user is not a MatMul, or its channels are not last.
std::optional<ImportedChain> pointwise_linear_import(const OnnxChainReader& c) {
  const io::OnnxNode* matmul = c.only_user(c.start(), "MatMul");
  if (!matmul || c.layout() != OnnxLayout::channels_last) return std::nullopt;
  const OnnxNodeReader r = c.reader(*matmul);
  if (matmul->inputs.at(0) != c.start()) r.refuse("it multiplies the value from the left; import maps x W, a Linear");
  const io::OnnxTensor& w = r.constant(1, "weight");
  if (w.dims.size() != 2) r.refuse(fmt::format("its weight is shaped {}; a Linear's is 2-D", w.dims));
  const int64_t in = w.dims[0], out = w.dims[1];
  const io::OnnxNode* add = c.only_user(matmul->outputs.at(0), "Add");
  const io::OnnxTensor* bias = add ? c.constant_operand(*add, matmul->outputs.at(0)) : nullptr;
  if (bias && bias->dims != std::vector<int64_t>{out})
    c.reader(*add).refuse(fmt::format("its constant is shaped {}; a Linear's bias holds {} values", bias->dims, out));
  ImportedLayer layer{r.spec("conv2d", {{"filters", static_cast<int>(out)}, {"kernel", 1}, {"bias", bias != nullptr}})};
  layer.params.push_back(transposed_matrix(w.floats, in, out));
  if (bias) layer.params.push_back(bias->floats);
  return ImportedChain{std::move(layer), (bias ? add : matmul)->outputs.at(0)};
}

const LayerRegistration kConv2d{{
    .keys = {.type = "conv2d",
             .help = "2-D convolution over NCHW, weights filters x channels/groups x kernel x kernel",
             .keys = {config::required_integer("filters", 1, "output channels"),
                      config::required_integer("kernel", 1, "window side"),
                      config::integer_key("stride", 1, 1, "step of the window"),
                      config::integer_key("padding", 0, 0, "zeros added on each side"),
                      config::integer_key("groups", 1, 1,
                                          "channel groups, dividing channels and filters (depthwise: channels)"),
                      config::flag_key("bias", true, "a learned bias per output channel")}},
    .make = make_layer_of<Conv2d>,
    .onnx = conv2d_onnx,
    .onnx_import = {.ops = {"Conv"}, .map = conv2d_import, .chain = pointwise_linear_import},
}};

}  // namespace
}  // namespace ringtrain::model

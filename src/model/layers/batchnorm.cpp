// Owns spatial batch normalisation: per channel over N x H x W, batch statistics in training (running ones
// updated), running statistics in evaluation; with the ReLU after it, and a 2x2 max pool after that, or with the
// residual join after it (a block's last layer), fused where the backend can.
#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "model/layer_registry.h"
#include "model/layers/leaf_layer.h"

namespace ringtrain::model {
namespace {

class BatchNorm final : public LeafLayer {
 public:
  // The numbers every forward and backward pass hands the backend, read from the spec once.
  BatchNorm(const config::LayerSpec& spec, Backend& backend, ElementType data)
      : LeafLayer(spec, backend, data), momentum_(spec.number("momentum")), epsilon_(spec.number("epsilon")) {}
  std::string describe() const override { return "batchnorm"; }
  Shape setup(const Shape& in) override {
    in_ = out_ = in;
    return out_;
  }
  std::size_t kept_bytes() const override {
    return 2 * sizeof(float) * static_cast<size_t>(in_.c) +
           (tail_.pool ? sizeof(int32_t) * static_cast<size_t>(out_.elements()) : 0);
  }
  // A fused ReLU's mask is the output's zeros (the join's sum with a fused join), so backward then reads the output.
  MemoryUse memory_use() const override {
    return {.backward_reads_input = true, .backward_reads_output = tail_.relu || tail_.join};
  }
  // A fused pool pools its output (the 2x2/2 window, which the fusion pass fuses only on inputs it fits).
  void fuse(const FusedTail& tail) override {
    tail_ = tail;
    if (tail_.pool) out_ = {in_.n, in_.c, in_.h / 2, in_.w / 2};
  }
  std::string fused() const override {
    const std::string tail = tail_.describe();
    return tail_.pool && out_block_ > 1 ? tail + " -> " + kernels::blocked_layout_name(out_block_, in_.c) : tail;
  }
  LayerOperation operation() const override { return BatchNormOperation{shape_at(in_.n), tail_}; }
  void set_chain_layout(const ChainLayout& layout) override {
    in_block_ = layout.in_block;
    out_block_ = layout.out_block;
  }
  std::vector<ParamDecl> param_decls() const override {
    // init_scale = 0 starts a residual block's last batch norm at zero, so the block begins as its shortcut.
    const auto scale = static_cast<float>(spec_.number("init_scale"));
    return {{"gamma", in_.c, scale == 1.0f ? ParamInit::ones : ParamInit::constant, 1, false, scale},
            {"beta", in_.c, ParamInit::zeros, 1, false}};
  }
  std::vector<StateDecl> state_decls() const override {
    return {{"running_mean", in_.c, ParamInit::zeros}, {"running_var", in_.c, ParamInit::ones}};
  }
  void bind(std::span<float* const> p, std::span<float* const> g, std::span<float* const> s) override {
    buffers_.gamma = p[0], buffers_.beta = p[1], dgamma_ = g[0], dbeta_ = g[1];
    buffers_.running_mean = s[0], buffers_.running_var = s[1];
    saved_mean_ = keep(sizeof(float) * static_cast<size_t>(in_.c));
    saved_inv_std_ = keep(sizeof(float) * static_cast<size_t>(in_.c));
    buffers_.saved_mean = saved_mean_.as<float>();
    buffers_.saved_inv_std = saved_inv_std_.as<float>();
    if (tail_.pool) {
      pool_argmax_ = keep(sizeof(int32_t) * static_cast<size_t>(out_.elements()));
      buffers_.pool_argmax = pool_argmax_.as<int32_t>();
    }
  }
  void forward(const ForwardPass& pass) override {
    const BatchNormShape shape = shape_at(pass.x.shape.n);
    if (tail_.join && pass.mode == Mode::train)
      return backend_.batchnorm_add_relu_forward_train(shape, settings(), pass.x.data, pass.shortcut, buffers_,
                                                       pass.y);
    if (tail_.join)
      return backend_.batchnorm_add_relu_forward_infer(shape, settings(), pass.x.data, pass.shortcut, buffers_,
                                                       pass.y);
    if (pass.mode == Mode::train)
      backend_.batchnorm_forward_train(shape, settings(), pass.x.data, buffers_, pass.y);
    else
      backend_.batchnorm_forward_infer(shape, settings(), pass.x.data, buffers_, pass.y);
  }
  void backward(const BackwardPass& pass) override {
    if (tail_.join)
      return backend_.batchnorm_add_relu_backward(shape_at(pass.dy.shape.n), settings(), pass.x.data, pass.y,
                                                  pass.dy.data, buffers_, pass.dx ? pass.dx : scratch_dx(),
                                                  pass.dshortcut, dgamma_, dbeta_);
    backend_.batchnorm_backward(shape_at(pass.dy.shape.n), settings(), pass.x.data, pass.y, pass.dy.data, buffers_,
                                pass.dx ? pass.dx : scratch_dx(), dgamma_, dbeta_);
  }

 private:
  BatchNormShape shape_at(int batch) const { return {batch, in_.c, in_.h * in_.w, in_block_, out_block_, data_}; }
  BatchNormSettings settings() const { return {momentum_, epsilon_, tail_.relu, tail_.pool, tail_.relu6}; }
  // The backends compute dx in the same pass as the parameter gradients, so a batch norm that is the network's
  // first layer (no dx wanted) writes it into a buffer of its own, made on first use.
  void* scratch_dx() {
    if (!unused_dx_) unused_dx_ = keep(element_bytes(data_) * static_cast<size_t>(in_.elements()));
    return unused_dx_.as<void>();
  }
  BatchNormBuffers buffers_;
  DeviceBuffer saved_mean_, saved_inv_std_, unused_dx_, pool_argmax_;
  float *dgamma_ = nullptr, *dbeta_ = nullptr;
  double momentum_, epsilon_;
  FusedTail tail_;      // with a join, relu(y + shortcut) is its output
  int in_block_ = 1;   // x and dx channel-blocked as its backend chose (Layer::set_chain_layout)
  int out_block_ = 1;  // y and dy likewise
};

// ONNX BatchNormalization in inference form: the running statistics averaged over the ranks.
std::string batchnorm_onnx(OnnxLayerWriter& w, const config::LayerSpec& s, const std::string& x) {
  const OnnxConstant gamma = w.parameter(".gamma", {-1}), beta = w.parameter(".beta", {-1});
  const int64_t channels = gamma.dims[0];
  const std::string mean = w.statistics(channels).name, var = w.statistics(channels).name;
  return w.graph().node("BatchNormalization", {x, gamma.name, beta.name, mean, var},
                        {io::OnnxAttribute::floating("epsilon", static_cast<float>(s.number("epsilon")))});
}

// ONNX BatchNormalization in inference form. ONNX's momentum weighs the running statistics, ours the batch.
ImportedLayer batchnorm_import(const OnnxNodeReader& r) {
  r.require_integer("training_mode", 0, 0, "import maps the inference form, normalising by the running statistics");
  if (r.node().outputs.size() > 1) r.refuse("it outputs batch statistics (the training form); export the model in eval mode");
  const auto channels = static_cast<int64_t>(r.constant(1, "scale").floats.size());
  const double momentum = 1.0 - decimal_of(r.real("momentum", 0.9f));
  ImportedLayer layer{r.spec("batchnorm", {{"epsilon", decimal_of(r.real("epsilon", 1e-5f))},
                                           {"momentum", std::stod(fmt::format("{:.6g}", momentum))}})};
  layer.params = {r.constant(1, "scale", channels).floats, r.constant(2, "bias", channels).floats};
  layer.states = {r.constant(3, "running mean", channels).floats, r.constant(4, "running variance", channels).floats};
  const std::vector<float>& variance = layer.states[1];
  if (const auto negative = std::find_if(variance.begin(), variance.end(), [](float v) { return v < 0; });
      negative != variance.end())
    r.refuse(fmt::format("its running variance holds {} at channel {}: a variance is never below 0, so the model's "
                         "statistics are damaged",
                         *negative, negative - variance.begin()));
  return layer;
}

// init_scale is gamma's initial value: 0 makes a residual block's last batch norm start the block as the identity
// (Goyal et al. 2017).
const LayerRegistration kBatchNorm{{
    .keys = {.type = "batchnorm",
             .help = "batch normalisation per channel over N x H x W",
             .keys = {config::number_key("momentum", 0.1, 0.0, 1.0, "weight of each batch in the running statistics"),
                      config::number_key("epsilon", 1e-5, 1e-12, 1.0, "added to the variance"),
                      config::number_key("init_scale", 1.0, 0.0, 10.0,
                                         "gamma's initial value (0 on a residual block's last batch norm starts the "
                                         "block as its shortcut, Goyal et al. 2017)")}},
    .make = make_layer_of<BatchNorm>,
    .onnx = batchnorm_onnx,
    .onnx_import = {{"BatchNormalization"}, batchnorm_import},
}};

}  // namespace
}  // namespace ringtrain::model

// Owns spatial batch normalisation: per channel over N x H x W, batch statistics in training (running ones
// updated), running statistics in evaluation; with the ReLU after it, and a 2x2 max pool after that, or with the
// residual join after it (a block's last layer), fused where the backend can.
#include <fmt/format.h>

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
           (pool_ ? sizeof(int32_t) * static_cast<size_t>(out_.elements()) : 0);
  }
  // A fused ReLU's mask is the output's zeros (the join's sum with a fused join), so backward then reads the output.
  MemoryUse memory_use() const override {
    return {.backward_reads_input = true, .backward_reads_output = relu_ || join_};
  }
  bool fuse_relu() override {
    relu_ = backend_.fuses_batchnorm_relu();
    return relu_;
  }
  // The models' 2x2/2 max pool after the ReLU, where the backend fuses it; the pool's own checks never apply, as
  // that window fits every input of at least 2 x 2.
  std::optional<Shape> fuse_pool(const config::LayerSpec& pool) override {
    const bool two_by_two = pool.is("maxpool") && pool.integer("size") == 2 && pool.integer("stride") == 2 &&
                            pool.integer("padding") == 0 && in_.h >= 2 && in_.w >= 2;
    if (!relu_ || !two_by_two || !backend_.fuses_batchnorm_relu_pool()) return std::nullopt;
    pool_ = FusedMaxPool{in_.h, in_.w};
    out_ = {in_.n, in_.c, in_.h / 2, in_.w / 2};
    return out_;
  }
  bool fuse_join() override {
    join_ = !relu_ && !pool_ && backend_.fuses_batchnorm_add_relu();
    return join_;
  }
  std::string fused() const override {
    if (join_) return "+ add shortcut + relu, fused";
    if (pool_)
      return out_block_ > 1 ? "+ relu + maxpool 2 s2, fused -> " + kernels::blocked_layout_name(out_block_, in_.c)
                            : "+ relu + maxpool 2 s2, fused";
    return relu_ ? "+ relu, fused" : "";
  }
  // Blocked layouts only with a fused pool (the one form whose blocked kernels run along the block both ways): an
  // input block where the backend's batch norm reads it faster at the setup batch, an output block where it can
  // write it.
  std::vector<int> input_blocks() const override {
    return blocks_where([&](int block) { return backend_.batchnorm_reads_block(shape_at(in_.n), block); });
  }
  std::vector<int> output_blocks() const override {
    return blocks_where([&](int block) { return backend_.batchnorm_writes_block(shape_at(in_.n), block); });
  }
  void read_input_block(int block) override { in_block_ = block; }
  void write_output_block(int block) override { out_block_ = block; }
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
    if (pool_) {
      pool_argmax_ = keep(sizeof(int32_t) * static_cast<size_t>(out_.elements()));
      buffers_.pool_argmax = pool_argmax_.as<int32_t>();
    }
  }
  void forward(const ForwardPass& pass) override {
    const BatchNormShape shape = shape_at(pass.x.shape.n);
    if (join_ && pass.mode == Mode::train)
      return backend_.batchnorm_add_relu_forward_train(shape, settings(), pass.x.data, pass.shortcut, buffers_,
                                                       pass.y);
    if (join_)
      return backend_.batchnorm_add_relu_forward_infer(shape, settings(), pass.x.data, pass.shortcut, buffers_,
                                                       pass.y);
    if (pass.mode == Mode::train)
      backend_.batchnorm_forward_train(shape, settings(), pass.x.data, buffers_, pass.y);
    else
      backend_.batchnorm_forward_infer(shape, settings(), pass.x.data, buffers_, pass.y);
  }
  void backward(const BackwardPass& pass) override {
    if (join_)
      return backend_.batchnorm_add_relu_backward(shape_at(pass.dy.shape.n), settings(), pass.x.data, pass.y,
                                                  pass.dy.data, buffers_, pass.dx ? pass.dx : scratch_dx(),
                                                  pass.dshortcut, dgamma_, dbeta_);
    backend_.batchnorm_backward(shape_at(pass.dy.shape.n), settings(), pass.x.data, pass.y, pass.dy.data, buffers_,
                                pass.dx ? pass.dx : scratch_dx(), dgamma_, dbeta_);
  }

 private:
  BatchNormShape shape_at(int batch) const { return {batch, in_.c, in_.h * in_.w, in_block_, out_block_, data_}; }
  template <class Takes>
  std::vector<int> blocks_where(Takes takes) const {
    std::vector<int> blocks;
    if (pool_)
      for (const int block : {in_.c, 16, 8})  // NHWC (a block of every channel), then oneDNN's blocks
        if (takes(block)) blocks.push_back(block);
    return blocks;
  }
  BatchNormSettings settings() const { return {momentum_, epsilon_, relu_, pool_}; }
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
  bool relu_ = false;
  bool join_ = false;  // the residual join after it (fuse_join): relu(y + shortcut) is its output
  std::optional<FusedMaxPool> pool_;
  int in_block_ = 1;   // x and dx channel-blocked as the convolution before it writes them
  int out_block_ = 1;  // y and dy channel-blocked as the convolution after it reads them
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

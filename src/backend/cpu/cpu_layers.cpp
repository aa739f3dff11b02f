// Owns the CPU leaf layers: each keeps its output buffer (sized at setup for the largest batch) and writes its
// input gradient where backward's memory plan says (model/gradient_buffer_plan.h), caches what backward needs,
// and calls kernels/cpu for the arithmetic.
#include "backend/cpu/cpu_layers.h"

#include <fmt/format.h>

#include "common/error.h"
#include "kernels/cpu/batchnorm.h"
#include "kernels/cpu/conv2d.h"
#include "kernels/cpu/dense.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/pooling.h"

namespace ringtrain::backend {
namespace {

namespace kc = kernels::cpu;
using config::LayerKind;
using config::LayerSpec;
using model::Mode;
using model::ParamDecl;
using model::ParamInit;
using model::Shape;
using model::StateDecl;
using model::StepContext;
using model::Tensor;

class CpuLeaf : public model::Layer {
 public:
  CpuLeaf(const LayerSpec& spec, model::Backend& backend) : spec_(spec), backend_(backend) {}

 protected:
  float* buffer(model::DeviceBuffer& b, const Shape& s) {
    b = backend_.allocate(sizeof(float) * static_cast<size_t>(s.elements()));
    return b.as<float>();
  }
  [[noreturn]] void shape_error(const Shape& in, const std::string& why) const {
    throw JobFileError(fmt::format("{} ({}) cannot take input {} per sample: {}", spec_.where, describe(),
                                   in.with_batch(1).str(), why));
  }
  // Where backward writes the input gradient: the buffer backward's memory plan shares along the chain
  // (model/gradient_buffer_plan.h), or, for a layer used on its own, one of its own made on first use.
  float* dx() {
    if (shared_dx_) return shared_dx_;
    if (!dx_) buffer(dx_, in_);
    return dx_.as<float>();
  }
  LayerSpec spec_;
  model::Backend& backend_;
  Shape in_, out_;
  Tensor x_;  // cached input of the last forward
  model::DeviceBuffer y_, dx_;
  float* shared_dx_ = nullptr;
};

// The leaves whose backward always writes a fresh input gradient: they take the plan's shared buffer. Their
// output is their own buffer, which their backward never reads (it reads the input), so a following ReLU
// may overwrite it; ReLU itself says otherwise.
class CpuComputeLeaf : public CpuLeaf {
 public:
  using CpuLeaf::CpuLeaf;
  bool accepts_shared_dx() const override { return true; }
  void use_shared_dx(float* buffer) override { shared_dx_ = buffer; }
  bool output_may_be_overwritten() const override { return true; }
};

class Conv2d final : public CpuComputeLeaf {
 public:
  using CpuComputeLeaf::CpuComputeLeaf;
  std::string describe() const override {
    return fmt::format("conv2d {}x{}x{} s{} p{}", spec_.kernel, spec_.kernel, spec_.filters, spec_.stride, spec_.padding);
  }
  Shape setup(const Shape& in) override {
    in_ = in;
    geometry_ = {in.n, in.c, in.h, in.w, spec_.filters, spec_.kernel, spec_.kernel, spec_.stride, spec_.padding};
    // Checked before out_h(): integer division truncates a negative numerator towards zero.
    if (in.h + 2 * spec_.padding < spec_.kernel || in.w + 2 * spec_.padding < spec_.kernel)
      shape_error(in, fmt::format("a {}x{} kernel with padding {} does not fit", spec_.kernel, spec_.kernel, spec_.padding));
    out_ = {in.n, spec_.filters, geometry_.out_h(), geometry_.out_w()};
    buffer(y_, out_);
    return out_;
  }
  std::vector<ParamDecl> param_decls() const override {
    const int64_t fan_in = int64_t{in_.c} * spec_.kernel * spec_.kernel;
    std::vector<ParamDecl> d{{"weight", spec_.filters * fan_in, ParamInit::he_normal, fan_in, true}};
    if (spec_.bias) d.push_back({"bias", spec_.filters, ParamInit::zeros, 1, false});
    return d;
  }
  void bind(std::span<float* const> p, std::span<float* const> g, std::span<float* const>) override {
    w_ = p[0], dw_ = g[0];
    if (spec_.bias) b_ = p[1], db_ = g[1];
  }
  Tensor forward(const Tensor& x, Mode, const StepContext&) override {
    x_ = x;
    auto s = geometry_;
    s.batch = x.shape.n;
    kc::conv2d_forward(s, x.data, w_, b_, y_.as<float>(), workspace_);
    return {y_.as<float>(), out_.with_batch(x.shape.n)};
  }
  Tensor backward(const Tensor& dy, bool need_dx, model::GradientObserver*) override {
    auto s = geometry_;
    s.batch = dy.shape.n;
    kc::conv2d_backward_filter(s, x_.data, dy.data, dw_, db_, workspace_);
    if (!need_dx) return {};
    kc::conv2d_backward_data(s, dy.data, w_, dx(), workspace_);
    return {dx(), x_.shape};
  }
  double forward_flops_per_sample() const override {
    auto s = geometry_;
    s.batch = 1;
    return s.forward_flops();
  }

 private:
  kc::Conv2dShape geometry_;
  kc::ConvWorkspace workspace_;
  float *w_ = nullptr, *dw_ = nullptr, *b_ = nullptr, *db_ = nullptr;
};

class Dense final : public CpuComputeLeaf {
 public:
  using CpuComputeLeaf::CpuComputeLeaf;
  std::string describe() const override { return fmt::format("dense {}", spec_.units); }
  Shape setup(const Shape& in) override {
    in_ = in;
    out_ = {in.n, spec_.units, 1, 1};
    buffer(y_, out_);
    return out_;
  }
  std::vector<ParamDecl> param_decls() const override {
    const int64_t fan_in = in_.per_sample();
    std::vector<ParamDecl> d{{"weight", spec_.units * fan_in, ParamInit::he_normal, fan_in, true}};
    if (spec_.bias) d.push_back({"bias", spec_.units, ParamInit::zeros, 1, false});
    return d;
  }
  void bind(std::span<float* const> p, std::span<float* const> g, std::span<float* const>) override {
    w_ = p[0], dw_ = g[0];
    if (spec_.bias) b_ = p[1], db_ = g[1];
  }
  Tensor forward(const Tensor& x, Mode, const StepContext&) override {
    x_ = x;
    kc::dense_forward(x.shape.n, static_cast<int>(in_.per_sample()), spec_.units, x.data, w_, b_, y_.as<float>());
    return {y_.as<float>(), out_.with_batch(x.shape.n)};
  }
  Tensor backward(const Tensor& dy, bool need_dx, model::GradientObserver*) override {
    kc::dense_backward(dy.shape.n, static_cast<int>(in_.per_sample()), spec_.units, x_.data, w_, dy.data,
                       need_dx ? dx() : nullptr, dw_, db_);
    return need_dx ? Tensor{dx(), x_.shape} : Tensor{};
  }
  double forward_flops_per_sample() const override { return 2.0 * static_cast<double>(in_.per_sample()) * spec_.units; }

 private:
  float *w_ = nullptr, *dw_ = nullptr, *b_ = nullptr, *db_ = nullptr;
};

class BatchNorm final : public CpuComputeLeaf {
 public:
  using CpuComputeLeaf::CpuComputeLeaf;
  std::string describe() const override { return "batchnorm"; }
  Shape setup(const Shape& in) override {
    in_ = out_ = in;
    buffer(y_, out_);
    saved_mean_ = backend_.allocate(sizeof(float) * static_cast<size_t>(in.c));
    saved_inv_std_ = backend_.allocate(sizeof(float) * static_cast<size_t>(in.c));
    return out_;
  }
  std::vector<ParamDecl> param_decls() const override {
    return {{"gamma", in_.c, ParamInit::ones, 1, false}, {"beta", in_.c, ParamInit::zeros, 1, false}};
  }
  std::vector<StateDecl> state_decls() const override {
    return {{"running_mean", in_.c, ParamInit::zeros}, {"running_var", in_.c, ParamInit::ones}};
  }
  void bind(std::span<float* const> p, std::span<float* const> g, std::span<float* const> s) override {
    gamma_ = p[0], beta_ = p[1], dgamma_ = g[0], dbeta_ = g[1], running_mean_ = s[0], running_var_ = s[1];
  }
  Tensor forward(const Tensor& x, Mode mode, const StepContext&) override {
    x_ = x;
    const kc::BatchNormShape s{x.shape.n, in_.c, in_.h * in_.w};
    if (mode == Mode::train)
      kc::batchnorm_forward_train(s, x.data, gamma_, beta_, static_cast<float>(spec_.momentum),
                                  static_cast<float>(spec_.epsilon), running_mean_, running_var_, y_.as<float>(),
                                  saved_mean_.as<float>(), saved_inv_std_.as<float>());
    else
      kc::batchnorm_forward_infer(s, x.data, gamma_, beta_, running_mean_, running_var_,
                                  static_cast<float>(spec_.epsilon), y_.as<float>());
    return {y_.as<float>(), x.shape};
  }
  Tensor backward(const Tensor& dy, bool, model::GradientObserver*) override {
    const kc::BatchNormShape s{dy.shape.n, in_.c, in_.h * in_.w};
    kc::batchnorm_backward(s, x_.data, dy.data, gamma_, saved_mean_.as<float>(), saved_inv_std_.as<float>(),
                           dx(), dgamma_, dbeta_);
    return {dx(), x_.shape};
  }

 private:
  model::DeviceBuffer saved_mean_, saved_inv_std_;
  float *gamma_ = nullptr, *beta_ = nullptr, *dgamma_ = nullptr, *dbeta_ = nullptr;
  float *running_mean_ = nullptr, *running_var_ = nullptr;
};

class Relu final : public CpuComputeLeaf {
 public:
  using CpuComputeLeaf::CpuComputeLeaf;
  std::string describe() const override { return "relu"; }
  Shape setup(const Shape& in) override {
    in_ = out_ = in;
    return out_;  // the output buffer is made on first use, unless the plan runs this layer in place
  }
  bool can_run_in_place() const override { return true; }
  void run_in_place() override { in_place_ = true; }
  bool output_may_be_overwritten() const override { return false; }  // backward reads it
  Tensor forward(const Tensor& x, Mode, const StepContext&) override {
    x_ = x;
    if (!in_place_ && !y_) buffer(y_, out_);
    y_data_ = in_place_ ? x.data : y_.as<float>();
    kc::relu_forward(x.shape.elements(), x.data, y_data_);
    return {y_data_, x.shape};
  }
  Tensor backward(const Tensor& dy, bool, model::GradientObserver*) override {
    kc::relu_backward(dy.shape.elements(), y_data_, dy.data, dx());
    return {dx(), dy.shape};
  }

 private:
  bool in_place_ = false;
  float* y_data_ = nullptr;  // where the last forward's output is: y_, or its input when in place
};

class Pool final : public CpuComputeLeaf {
 public:
  Pool(const LayerSpec& spec, model::Backend& backend) : CpuComputeLeaf(spec, backend) {}
  std::string describe() const override {
    if (spec_.kind == LayerKind::global_avgpool) return "global_avgpool";
    return fmt::format("{} {} s{}", spec_.kind == LayerKind::maxpool ? "maxpool" : "avgpool", spec_.size, spec_.stride);
  }
  Shape setup(const Shape& in) override {
    in_ = in;
    if (spec_.kind == LayerKind::global_avgpool) {
      if (in.h != in.w) shape_error(in, "global average pooling needs a square input");
      geometry_ = {in.n, in.c, in.h, in.w, in.h, in.h, 0};
    } else {
      geometry_ = {in.n, in.c, in.h, in.w, spec_.size, spec_.stride, spec_.padding};
      if (in.h + 2 * spec_.padding < spec_.size || in.w + 2 * spec_.padding < spec_.size)
        shape_error(in, fmt::format("a {}x{} window does not fit", spec_.size, spec_.size));
      if (spec_.padding * 2 > spec_.size) shape_error(in, "padding must be at most half the window");
    }
    out_ = {in.n, in.c, geometry_.out_h(), geometry_.out_w()};
    buffer(y_, out_);
    if (spec_.kind == LayerKind::maxpool)
      argmax_ = backend_.allocate(sizeof(int32_t) * static_cast<size_t>(out_.elements()));
    return out_;
  }
  Tensor forward(const Tensor& x, Mode, const StepContext&) override {
    x_ = x;
    auto s = geometry_;
    s.batch = x.shape.n;
    if (spec_.kind == LayerKind::maxpool)
      kc::maxpool_forward(s, x.data, y_.as<float>(), argmax_.as<int32_t>());
    else
      kc::avgpool_forward(s, x.data, y_.as<float>());
    return {y_.as<float>(), out_.with_batch(x.shape.n)};
  }
  Tensor backward(const Tensor& dy, bool, model::GradientObserver*) override {
    auto s = geometry_;
    s.batch = dy.shape.n;
    if (spec_.kind == LayerKind::maxpool)
      kc::maxpool_backward(s, dy.data, argmax_.as<int32_t>(), dx());
    else
      kc::avgpool_backward(s, dy.data, dx());
    return {dx(), x_.shape};
  }

 private:
  kc::PoolShape geometry_;
  model::DeviceBuffer argmax_;
};

// A view change only: dense layers already read N x (C*H*W), so no data moves.
class Flatten final : public CpuLeaf {
 public:
  using CpuLeaf::CpuLeaf;
  bool may_return_dy() const override { return true; }
  std::string describe() const override { return "flatten"; }
  Shape setup(const Shape& in) override {
    in_ = in;
    out_ = {in.n, static_cast<int>(in.per_sample()), 1, 1};
    return out_;
  }
  Tensor forward(const Tensor& x, Mode, const StepContext&) override {
    x_ = x;
    return {x.data, out_.with_batch(x.shape.n)};
  }
  Tensor backward(const Tensor& dy, bool, model::GradientObserver*) override { return {dy.data, x_.shape}; }
};

class Dropout final : public CpuLeaf {
 public:
  using CpuLeaf::CpuLeaf;
  bool may_return_dy() const override { return true; }  // at rate 0, and in evaluation
  std::string describe() const override { return fmt::format("dropout {}", spec_.rate); }
  Shape setup(const Shape& in) override {
    in_ = out_ = in;
    buffer(y_, out_);
    buffer(dx_, in_);
    mask_ = backend_.allocate(static_cast<size_t>(in.elements()));
    return out_;
  }
  Tensor forward(const Tensor& x, Mode mode, const StepContext& ctx) override {
    x_ = x;
    train_ = mode == Mode::train && spec_.rate > 0;
    if (!train_) return x;
    kc::dropout_forward(x.shape.elements(), static_cast<float>(spec_.rate), ctx.seed, x.data, y_.as<float>(),
                        mask_.as<uint8_t>());
    return {y_.as<float>(), x.shape};
  }
  Tensor backward(const Tensor& dy, bool, model::GradientObserver*) override {
    if (!train_) return dy;
    kc::dropout_backward(dy.shape.elements(), static_cast<float>(spec_.rate), mask_.as<uint8_t>(), dy.data,
                         dx_.as<float>());
    return {dx_.as<float>(), dy.shape};
  }

 private:
  model::DeviceBuffer mask_;
  bool train_ = false;
};

}  // namespace

std::unique_ptr<model::Layer> make_cpu_layer(const LayerSpec& spec, model::Backend& backend) {
  switch (spec.kind) {
    case LayerKind::conv2d: return std::make_unique<Conv2d>(spec, backend);
    case LayerKind::dense: return std::make_unique<Dense>(spec, backend);
    case LayerKind::batchnorm: return std::make_unique<BatchNorm>(spec, backend);
    case LayerKind::relu: return std::make_unique<Relu>(spec, backend);
    case LayerKind::maxpool:
    case LayerKind::avgpool:
    case LayerKind::global_avgpool: return std::make_unique<Pool>(spec, backend);
    case LayerKind::flatten: return std::make_unique<Flatten>(spec, backend);
    case LayerKind::dropout: return std::make_unique<Dropout>(spec, backend);
    case LayerKind::residual: break;
  }
  throw Error(ExitCode::internal, fmt::format("{}: a residual block is not a leaf layer", spec.where));
}

}  // namespace ringtrain::backend

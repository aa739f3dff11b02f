// Owns the CUDA leaf layers, twins of backend/cpu/cpu_layers.cpp with the same shapes, parameter declarations,
// error messages and gradient conventions: each keeps its output and input-gradient buffers (sized at setup for
// the largest batch), caches what backward needs, and calls cuDNN (dnn.h), cuBLAS (blas.h) or kernels/cuda.
// All work is queued on the backend's stream; nothing here waits for the GPU.
#include "backend/cuda/cuda_layers.h"

#include <fmt/format.h>

#include "backend/cuda/blas.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/dnn.h"
#include "common/error.h"
#include "kernels/cuda/dropout.h"
#include "kernels/cuda/elementwise.h"

namespace ringtrain::backend {
namespace {

namespace kc = kernels::cuda;
using config::LayerKind;
using config::LayerSpec;
using model::Mode;
using model::ParamDecl;
using model::ParamInit;
using model::Shape;
using model::StateDecl;
using model::StepContext;
using model::Tensor;

std::string per_sample(const Shape& s) { return fmt::format("{}x{}x{}x{}", 1, s.c, s.h, s.w); }

class CudaLeaf : public model::Layer {
 public:
  CudaLeaf(const LayerSpec& spec, CudaBackend& backend) : spec_(spec), backend_(backend) {}

 protected:
  float* buffer(model::DeviceBuffer& b, const Shape& s) {
    b = backend_.allocate(sizeof(float) * static_cast<size_t>(s.elements()));
    return b.as<float>();
  }
  [[noreturn]] void shape_error(const Shape& in, const std::string& why) const {
    throw JobFileError(fmt::format("{} ({}) cannot take input {} per sample: {}", spec_.where, describe(),
                                   per_sample(in), why));
  }
  kc::Stream stream() const { return backend_.stream(); }

  LayerSpec spec_;
  CudaBackend& backend_;
  Shape in_, out_;
  Tensor x_;  // cached input of the last forward
  model::DeviceBuffer y_, dx_;
};

class Conv2d final : public CudaLeaf {
 public:
  using CudaLeaf::CudaLeaf;
  std::string describe() const override {
    return fmt::format("conv2d {}x{}x{} s{} p{}", spec_.kernel, spec_.kernel, spec_.filters, spec_.stride, spec_.padding);
  }
  Shape setup(const Shape& in) override {
    in_ = in;
    geometry_ = {in.n, in.c, in.h, in.w, spec_.filters, spec_.kernel, spec_.stride, spec_.padding};
    // Checked before out_h(): integer division truncates a negative numerator towards zero.
    if (in.h + 2 * spec_.padding < spec_.kernel || in.w + 2 * spec_.padding < spec_.kernel)
      shape_error(in, fmt::format("a {}x{} kernel with padding {} does not fit", spec_.kernel, spec_.kernel, spec_.padding));
    out_ = {in.n, spec_.filters, geometry_.out_h(), geometry_.out_w()};
    buffer(y_, out_);
    buffer(dx_, in_);
    backend_.dnn().prepare_conv(geometry_);
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
    backend_.dnn().conv_forward(at_batch(x.shape.n), x.data, w_, b_, y_.as<float>());
    return {y_.as<float>(), out_.with_batch(x.shape.n)};
  }
  Tensor backward(const Tensor& dy, bool need_dx, model::GradientObserver*) override {
    const ConvGeometry g = at_batch(dy.shape.n);
    backend_.dnn().conv_backward_filter(g, x_.data, dy.data, dw_, db_);
    if (!need_dx) return {};
    backend_.dnn().conv_backward_data(g, dy.data, w_, dx_.as<float>());
    return {dx_.as<float>(), x_.shape};
  }
  double forward_flops_per_sample() const override {
    return 2.0 * spec_.filters * in_.c * spec_.kernel * spec_.kernel * static_cast<double>(out_.h) * out_.w;
  }

 private:
  ConvGeometry at_batch(int batch) const {
    ConvGeometry g = geometry_;
    g.batch = batch;
    return g;
  }
  ConvGeometry geometry_;
  float *w_ = nullptr, *dw_ = nullptr, *b_ = nullptr, *db_ = nullptr;
};

// y = x W^T + b with W stored out x in (PyTorch's layout), as kernels/cpu/dense.h.
class Dense final : public CudaLeaf {
 public:
  using CudaLeaf::CudaLeaf;
  std::string describe() const override { return fmt::format("dense {}", spec_.units); }
  Shape setup(const Shape& in) override {
    in_ = in;
    out_ = {in.n, spec_.units, 1, 1};
    buffer(y_, out_);
    buffer(dx_, in_);
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
    const int n = x.shape.n, in = inputs(), out = spec_.units;
    // y (n x out) = x (n x in) * W^T (in x out)
    backend_.blas().sgemm(Transpose::no, Transpose::yes, n, out, in, 1.0f, x.data, in, w_, in, 0.0f, y_.as<float>(), out);
    if (b_) kc::add_bias_rows(n, out, b_, y_.as<float>(), stream());
    return {y_.as<float>(), out_.with_batch(n)};
  }
  Tensor backward(const Tensor& dy, bool need_dx, model::GradientObserver*) override {
    const int n = dy.shape.n, in = inputs(), out = spec_.units;
    // dW (out x in) += dy^T (out x n) * x (n x in); beta 1 accumulates.
    backend_.blas().sgemm(Transpose::yes, Transpose::no, out, in, n, 1.0f, dy.data, out, x_.data, in, 1.0f, dw_, in);
    if (db_) kc::bias_grad_rows(n, out, dy.data, db_, stream());
    if (!need_dx) return {};
    // dx (n x in) = dy (n x out) * W (out x in)
    backend_.blas().sgemm(Transpose::no, Transpose::no, n, in, out, 1.0f, dy.data, out, w_, in, 0.0f, dx_.as<float>(), in);
    return {dx_.as<float>(), x_.shape};
  }
  double forward_flops_per_sample() const override { return 2.0 * static_cast<double>(in_.per_sample()) * spec_.units; }

 private:
  int inputs() const { return static_cast<int>(in_.per_sample()); }
  float *w_ = nullptr, *dw_ = nullptr, *b_ = nullptr, *db_ = nullptr;
};

class BatchNorm final : public CudaLeaf {
 public:
  using CudaLeaf::CudaLeaf;
  std::string describe() const override { return "batchnorm"; }
  Shape setup(const Shape& in) override {
    in_ = out_ = in;
    buffer(y_, out_);
    buffer(dx_, in_);
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
    const BatchNormGeometry g{x.shape.n, in_.c, in_.h * in_.w};
    if (mode == Mode::train)
      backend_.dnn().batchnorm_forward_train(g, x.data, gamma_, beta_, spec_.momentum, spec_.epsilon, running_mean_,
                                             running_var_, y_.as<float>(), saved_mean_.as<float>(),
                                             saved_inv_std_.as<float>());
    else
      backend_.dnn().batchnorm_forward_infer(g, x.data, gamma_, beta_, running_mean_, running_var_, spec_.epsilon,
                                             y_.as<float>());
    return {y_.as<float>(), x.shape};
  }
  Tensor backward(const Tensor& dy, bool, model::GradientObserver*) override {
    const BatchNormGeometry g{dy.shape.n, in_.c, in_.h * in_.w};
    backend_.dnn().batchnorm_backward(g, x_.data, dy.data, gamma_, saved_mean_.as<float>(), saved_inv_std_.as<float>(),
                                      spec_.epsilon, dx_.as<float>(), dgamma_, dbeta_);
    return {dx_.as<float>(), x_.shape};
  }

 private:
  model::DeviceBuffer saved_mean_, saved_inv_std_;
  float *gamma_ = nullptr, *beta_ = nullptr, *dgamma_ = nullptr, *dbeta_ = nullptr;
  float *running_mean_ = nullptr, *running_var_ = nullptr;
};

class Relu final : public CudaLeaf {
 public:
  using CudaLeaf::CudaLeaf;
  std::string describe() const override { return "relu"; }
  Shape setup(const Shape& in) override {
    in_ = out_ = in;
    buffer(y_, out_);
    buffer(dx_, in_);
    return out_;
  }
  Tensor forward(const Tensor& x, Mode, const StepContext&) override {
    x_ = x;
    kc::relu_forward(x.shape.elements(), x.data, y_.as<float>(), stream());
    return {y_.as<float>(), x.shape};
  }
  Tensor backward(const Tensor& dy, bool, model::GradientObserver*) override {
    kc::relu_backward(dy.shape.elements(), y_.as<float>(), dy.data, dx_.as<float>(), stream());
    return {dx_.as<float>(), dy.shape};
  }
};

class Pool final : public CudaLeaf {
 public:
  using CudaLeaf::CudaLeaf;
  std::string describe() const override {
    if (spec_.kind == LayerKind::global_avgpool) return "global_avgpool";
    return fmt::format("{} {} s{}", spec_.kind == LayerKind::maxpool ? "maxpool" : "avgpool", spec_.size, spec_.stride);
  }
  Shape setup(const Shape& in) override {
    in_ = in;
    const PoolMode mode = spec_.kind == LayerKind::maxpool ? PoolMode::max : PoolMode::average;
    if (spec_.kind == LayerKind::global_avgpool) {
      if (in.h != in.w) shape_error(in, "global average pooling needs a square input");
      geometry_ = {mode, in.n, in.c, in.h, in.w, in.h, in.h, 0};
    } else {
      geometry_ = {mode, in.n, in.c, in.h, in.w, spec_.size, spec_.stride, spec_.padding};
      if (in.h + 2 * spec_.padding < spec_.size || in.w + 2 * spec_.padding < spec_.size)
        shape_error(in, fmt::format("a {}x{} window does not fit", spec_.size, spec_.size));
      if (spec_.padding * 2 > spec_.size) shape_error(in, "padding must be at most half the window");
    }
    out_ = {in.n, in.c, geometry_.out_h(), geometry_.out_w()};
    buffer(y_, out_);
    buffer(dx_, in_);
    return out_;
  }
  Tensor forward(const Tensor& x, Mode, const StepContext&) override {
    x_ = x;
    backend_.dnn().pool_forward(at_batch(x.shape.n), x.data, y_.as<float>());
    return {y_.as<float>(), out_.with_batch(x.shape.n)};
  }
  Tensor backward(const Tensor& dy, bool, model::GradientObserver*) override {
    backend_.dnn().pool_backward(at_batch(dy.shape.n), x_.data, y_.as<float>(), dy.data, dx_.as<float>());
    return {dx_.as<float>(), x_.shape};
  }

 private:
  PoolGeometry at_batch(int batch) const {
    PoolGeometry g = geometry_;
    g.batch = batch;
    return g;
  }
  PoolGeometry geometry_;
};

// A view change only: dense layers already read N x (C*H*W), so no data moves.
class Flatten final : public CudaLeaf {
 public:
  using CudaLeaf::CudaLeaf;
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

class Dropout final : public CudaLeaf {
 public:
  using CudaLeaf::CudaLeaf;
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
                        mask_.as<uint8_t>(), stream());
    return {y_.as<float>(), x.shape};
  }
  Tensor backward(const Tensor& dy, bool, model::GradientObserver*) override {
    if (!train_) return dy;
    kc::dropout_backward(dy.shape.elements(), static_cast<float>(spec_.rate), mask_.as<uint8_t>(), dy.data,
                         dx_.as<float>(), stream());
    return {dx_.as<float>(), dy.shape};
  }

 private:
  model::DeviceBuffer mask_;
  bool train_ = false;
};

}  // namespace

std::unique_ptr<model::Layer> make_cuda_layer(const LayerSpec& spec, CudaBackend& backend) {
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

// Owns the residual block's forward and backward, including the gradient that flows through both branches.
#include "model/residual.h"

#include <fmt/format.h>

#include "common/error.h"

namespace ringtrain::model {

std::string Residual::describe() const {
  return fmt::format("residual[{}{}]{}", body_.describe(),
                     shortcut_.empty() ? std::string(" + identity") : " + (" + shortcut_.describe() + ")",
                     relu_ ? " -> relu" : "");
}

Shape Residual::setup(const Shape& in) {
  in_ = in;
  out_ = body_.setup(in);
  const Shape short_out = shortcut_.empty() ? in : shortcut_.setup(in);
  if (!(out_ == short_out))
    throw JobFileError(fmt::format("{} (residual): body gives {} per batch but the shortcut gives {}; add a "
                                   "shortcut (e.g. conv2d kernel=1 with the body's filters and stride) so they match",
                                   where_, out_.str(), short_out.str()));
  y_ = backend_.allocate(sizeof(float) * static_cast<size_t>(out_.elements()));
  if (!backend_.plans_memory()) {  // otherwise the plan shares them, or they are made on first use
    dsum_ = backend_.allocate(sizeof(float) * static_cast<size_t>(out_.elements()));
    dx_ = backend_.allocate(sizeof(float) * static_cast<size_t>(in_.elements()));
  }
  return out_;
}

float* Residual::dsum() {
  if (shared_dsum_) return shared_dsum_;
  if (!dsum_) dsum_ = backend_.allocate(sizeof(float) * static_cast<size_t>(out_.elements()));
  return dsum_.as<float>();
}

float* Residual::dx() {
  if (shared_dx_) return shared_dx_;
  if (!dx_) dx_ = backend_.allocate(sizeof(float) * static_cast<size_t>(in_.elements()));
  return dx_.as<float>();
}

std::vector<ParamDecl> Residual::param_decls() const {
  auto all = body_.param_decls();
  for (auto& d : shortcut_.param_decls()) all.push_back(std::move(d));
  return all;
}

std::vector<StateDecl> Residual::state_decls() const {
  auto all = body_.state_decls();
  for (auto& d : shortcut_.state_decls()) all.push_back(std::move(d));
  return all;
}

void Residual::bind(std::span<float* const> params, std::span<float* const> grads, std::span<float* const> states) {
  const size_t bp = body_.param_decls().size(), bs = body_.state_decls().size();
  body_.bind(params.first(bp), grads.first(bp), states.first(bs));
  shortcut_.bind(params.subspan(bp), grads.subspan(bp), states.subspan(bs));
}

Tensor Residual::forward(const Tensor& x, Mode mode, const StepContext& ctx) {
  x_ = x;
  const Tensor b = body_.forward(x, mode, ctx);
  const Tensor s = shortcut_.empty() ? x : shortcut_.forward(x, mode, StepContext{ctx.seed ^ 0x9e3779b97f4a7c15ull});
  Tensor y{y_.as<float>(), b.shape};
  backend_.add(y.shape.elements(), b.data, s.data, y.data);
  if (relu_) backend_.relu_forward(y.shape.elements(), y.data, y.data);
  return y;
}

Tensor Residual::backward(const Tensor& dy, bool need_dx, GradientObserver* observer) {
  (void)need_dx;  // both branches need the input gradient to sum them; a residual first layer is rare
  const int64_t n = dy.shape.elements();
  Tensor d = dy;
  if (relu_) {
    backend_.relu_backward(n, y_.as<float>(), dy.data, dsum());
    d = Tensor{dsum(), dy.shape};
  }
  const Tensor db = body_.backward(d, true, observer);
  const Tensor grad_in{dx(), x_.shape};
  if (shortcut_.empty()) {
    backend_.add(grad_in.shape.elements(), db.data, d.data, grad_in.data);
  } else {
    const Tensor ds = shortcut_.backward(d, true, observer);
    backend_.add(grad_in.shape.elements(), db.data, ds.data, grad_in.data);
  }
  return grad_in;
}

double Residual::forward_flops_per_sample() const {
  return body_.forward_flops_per_sample() + shortcut_.forward_flops_per_sample() +
         static_cast<double>(out_.per_sample());
}

double Residual::backward_flops_per_sample(bool need_dx) const {
  (void)need_dx;
  return body_.backward_flops_per_sample(true) + shortcut_.backward_flops_per_sample(true) +
         static_cast<double>(in_.per_sample());
}

void Residual::collect_leaves(std::vector<const Layer*>& out) const {
  body_.collect_leaves(out);
  shortcut_.collect_leaves(out);
}

}  // namespace ringtrain::model

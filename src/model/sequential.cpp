// Owns running a chain of layers forward and backward and telling the gradient observer, leaf by leaf,
// when parameter gradients are final.
#include "model/sequential.h"

#include "model/layer_profile.h"
#include "util/clock.h"

namespace ringtrain::model {

std::string Sequential::describe() const {
  std::string out;
  for (const auto& l : layers_) out += (out.empty() ? "" : " -> ") + l->describe();
  return out;
}

Shape Sequential::setup(const Shape& in) {
  Shape shape = in;
  inputs_.clear();
  for (auto& l : layers_) {
    inputs_.push_back(shape);
    shape = l->setup(shape);
  }
  return shape;
}

std::vector<ParamDecl> Sequential::param_decls() const {
  std::vector<ParamDecl> all;
  for (const auto& l : layers_)
    for (auto& d : l->param_decls()) all.push_back(std::move(d));
  return all;
}

std::vector<StateDecl> Sequential::state_decls() const {
  std::vector<StateDecl> all;
  for (const auto& l : layers_)
    for (auto& d : l->state_decls()) all.push_back(std::move(d));
  return all;
}

void Sequential::bind(std::span<float* const> params, std::span<float* const> grads, std::span<float* const> states) {
  size_t p = 0, s = 0;
  for (auto& l : layers_) {
    const size_t np = l->param_decls().size(), ns = l->state_decls().size();
    l->bind(params.subspan(p, np), grads.subspan(p, np), states.subspan(s, ns));
    p += np;
    s += ns;
  }
}

Tensor Sequential::forward(const Tensor& x, Mode mode, const StepContext& ctx) {
  Tensor t = x;
  StepContext layer_ctx = ctx;
  for (auto& l : layers_) {
    layer_ctx.seed = ctx.seed * 1000003u + static_cast<uint64_t>(&l - layers_.data());  // distinct per layer
    LayerProfile* profile = l->is_composite() ? nullptr : active_layer_profile();
    if (!profile) {
      t = l->forward(t, mode, layer_ctx);
      continue;
    }
    profile->synchronize();
    const double start = util::now_s();
    t = l->forward(t, mode, layer_ctx);
    profile->synchronize();
    profile->add(l->describe(), false, util::now_s() - start);
  }
  return t;
}

Tensor Sequential::backward(const Tensor& dy, bool need_dx, GradientObserver* observer) {
  Tensor g = dy;
  for (size_t i = layers_.size(); i-- > 0;) {
    Layer& l = *layers_[i];
    LayerProfile* profile = l.is_composite() ? nullptr : active_layer_profile();
    if (profile) profile->synchronize();
    const double start = profile ? util::now_s() : 0;
    g = l.backward(g, need_dx || i > 0, observer);
    if (profile) {
      profile->synchronize();
      profile->add(l.describe(), true, util::now_s() - start);
    }
    if (observer && !l.is_composite() && !l.param_decls().empty()) observer->gradients_ready(l);
  }
  return g;
}

double Sequential::forward_flops_per_sample() const {
  double f = 0;
  for (const auto& l : layers_) f += l->forward_flops_per_sample();
  return f;
}

double Sequential::backward_flops_per_sample(bool need_dx) const {
  double f = 0;
  for (size_t i = 0; i < layers_.size(); ++i) f += layers_[i]->backward_flops_per_sample(need_dx || i > 0);
  return f;
}

void Sequential::collect_leaves(std::vector<const Layer*>& out) const {
  for (const auto& l : layers_) l->collect_leaves(out);
}

}  // namespace ringtrain::model

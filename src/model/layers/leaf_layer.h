// Owns what every layer kind shares: its spec and backend, its input and output shapes, the one wording of a
// shape error (and of an input that is no tokens), and the weight-plus-bias parameters of conv2d and dense.
#pragma once
#include <span>
#include <string>
#include <vector>

#include "config/layer_spec.h"
#include "model/backend.h"
#include "model/layer.h"

namespace ringtrain::model {

class LeafLayer : public Layer {
 public:
  LeafLayer(const config::LayerSpec& spec, Backend& backend, ElementType data)
      : spec_(spec), backend_(backend), data_(data) {}

 protected:
  // JobFileError: "<where> (<describe>) cannot take input 1xCxHxW per sample: <why>".
  [[noreturn]] void shape_error(const Shape& in, const std::string& why) const;
  // Refuses (shape_error) an input that is no tokens: N x D x T x 1 (model/layers/tokens.cpp makes them).
  void require_tokens(const Shape& in) const;
  // Device memory this layer keeps from forward to backward (batch-norm statistics, a dropout mask), zeroed.
  DeviceBuffer keep(std::size_t bytes) { return backend_.allocate(bytes); }

  config::LayerSpec spec_;
  Backend& backend_;
  ElementType data_;  // of x, y, dx and dy
  Shape in_, out_;
};

// An operation's shape at another batch (the last evaluation batch may be smaller than the setup one).
template <class OpShape>
OpShape at_batch(OpShape shape, int batch) {
  shape.batch = batch;
  return shape;
}

// A weight of `outputs x fan_in` values (He-initialised, decayed) and, when the spec asks for one, a bias of
// `outputs` (zero, not decayed): conv2d's and dense's parameters.
class WeightAndBias {
 public:
  std::vector<ParamDecl> decls(int64_t outputs, int64_t fan_in, bool with_bias) const;
  void bind(std::span<float* const> params, std::span<float* const> grads);
  const float* weight() const { return w_; }
  float* weight_grad() const { return dw_; }
  const float* bias() const { return b_; }  // null without one
  float* bias_grad() const { return db_; }

 private:
  float *w_ = nullptr, *dw_ = nullptr, *b_ = nullptr, *db_ = nullptr;
};

}  // namespace ringtrain::model

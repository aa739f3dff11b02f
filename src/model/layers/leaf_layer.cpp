// Owns the shared shape-error wordings and the weight-plus-bias declarations.
#include "model/layers/leaf_layer.h"

#include <fmt/format.h>

#include "common/error.h"

namespace ringtrain::model {

void LeafLayer::shape_error(const Shape& in, const std::string& why) const {
  throw JobFileError(fmt::format("{} ({}) cannot take input {} per sample: {}", spec_.where, describe(),
                                 in.with_batch(1).str(), why));
}

void LeafLayer::require_tokens(const Shape& in) const {
  if (in.w != 1)
    shape_error(in, "it takes tokens, N x D x T x 1 (D features of T tokens); a `tokens` layer before it makes them "
                    "from an image");
}

std::vector<ParamDecl> WeightAndBias::decls(int64_t outputs, int64_t fan_in, bool with_bias) const {
  std::vector<ParamDecl> d{{"weight", outputs * fan_in, ParamInit::he_normal, fan_in, true}};
  if (with_bias) d.push_back({"bias", outputs, ParamInit::zeros, 1, false});
  return d;
}

void WeightAndBias::bind(std::span<float* const> params, std::span<float* const> grads) {
  w_ = params[0], dw_ = grads[0];
  if (params.size() > 1) b_ = params[1], db_ = grads[1];
}

}  // namespace ringtrain::model
